//! bookfarm's evaluation terms beyond Edax's 47 patterns (the `bookfarm-eval2` format).
//!
//! Each term reads one global count of the position and looks its weight up in a small per-ply
//! table, so it adds to the pattern sum exactly like a pattern feature (one index, one weight):
//!
//! | term | index | size |
//! |---|---|---|
//! | mobility pair | `min(m_own, 19) · 20 + min(m_other, 19)`, the legal-move counts of both sides | 400 |
//! | own potential mobility | empty squares next to the other side's discs, at most 31 | 32 |
//! | other's potential mobility | empty squares next to the own discs, at most 31 | 32 |
//! | quadrant parity | quadrants (4×4 corners of the board) with an odd number of empties | 5 |
//!
//! The counts are invariant under the board's symmetries, so the terms need no packing: a table
//! is stored as is. "Own" is the side the evaluation is for (the side to move at a leaf).

use crate::flip;

/// Largest mobility count the pair table distinguishes (higher counts share its row).
pub const MOBILITY_CAP: u32 = 19;
/// Largest potential-mobility count distinguished.
pub const POTENTIAL_CAP: u32 = 31;

/// Number of extra terms.
pub const N_EXTRA: usize = 4;
/// Sizes of the terms' tables.
pub const EXTRA_SIZES: [usize; N_EXTRA] = [
    ((MOBILITY_CAP + 1) * (MOBILITY_CAP + 1)) as usize,
    (POTENTIAL_CAP + 1) as usize,
    (POTENTIAL_CAP + 1) as usize,
    5,
];
/// Start of each term's table inside a ply's extra block.
pub const EXTRA_OFFSETS: [usize; N_EXTRA] = {
    let mut o = [0usize; N_EXTRA];
    let mut k = 1;
    while k < N_EXTRA {
        o[k] = o[k - 1] + EXTRA_SIZES[k - 1];
        k += 1;
    }
    o
};
/// Weights per ply in the extra block.
pub const EXTRA_LEN: usize = EXTRA_OFFSETS[N_EXTRA - 1] + EXTRA_SIZES[N_EXTRA - 1];

/// Names of the terms, for reports.
pub const EXTRA_NAMES: [&str; N_EXTRA] = [
    "mobility pair",
    "own potential mobility",
    "other potential mobility",
    "quadrant parity",
];

const NOT_A: u64 = 0xfefe_fefe_fefe_fefe;
const NOT_H: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Squares next to any disc of `d` (all 8 directions).
#[inline(always)]
fn neighbours(d: u64) -> u64 {
    ((d << 1) & NOT_A)
        | ((d >> 1) & NOT_H)
        | (d << 8)
        | (d >> 8)
        | ((d << 9) & NOT_A)
        | ((d >> 9) & NOT_H)
        | ((d << 7) & NOT_H)
        | ((d >> 7) & NOT_A)
}

/// Quadrant masks: a1-d4, e1-h4, a5-d8, e5-h8.
const QUADRANTS: [u64; 4] = [
    0x0000_0000_0f0f_0f0f,
    0x0000_0000_f0f0_f0f0,
    0x0f0f_0f0f_0000_0000,
    0xf0f0_f0f0_0000_0000,
];

/// Indices of the extra terms (each inside the ply's extra block, i.e. with
/// [`EXTRA_OFFSETS`] added) for the position of `own` against `other`, seen from `own`.
#[inline(always)]
pub fn extra_indices(own: u64, other: u64) -> [u16; N_EXTRA] {
    extra_indices_with(own, other, flip::moves)
}

/// [`extra_indices`] with a given legal-move generator (e.g. the search's kernels; every
/// backend returns the same moves, so the same indices).
#[inline(always)]
pub fn extra_indices_with(own: u64, other: u64, moves: impl Fn(u64, u64) -> u64) -> [u16; N_EXTRA] {
    let empty = !(own | other);
    let m_own = moves(own, other).count_ones().min(MOBILITY_CAP);
    let m_other = moves(other, own).count_ones().min(MOBILITY_CAP);
    let p_own = (neighbours(other) & empty).count_ones().min(POTENTIAL_CAP);
    let p_other = (neighbours(own) & empty).count_ones().min(POTENTIAL_CAP);
    let odd = QUADRANTS
        .iter()
        .map(|&q| (q & empty).count_ones() & 1)
        .sum::<u32>();
    [
        (EXTRA_OFFSETS[0] as u32 + m_own * (MOBILITY_CAP + 1) + m_other) as u16,
        (EXTRA_OFFSETS[1] as u32 + p_own) as u16,
        (EXTRA_OFFSETS[2] as u32 + p_other) as u16,
        (EXTRA_OFFSETS[3] as u32 + odd) as u16,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Board;
    use crate::symmetry::transform;

    #[test]
    fn start_position_terms() {
        let b = Board::start();
        let i = extra_indices(b.player, b.opponent);
        // 4 moves each, 10 empties next to either colour, 60 empties = 15 per quadrant (odd).
        assert_eq!(i[0] as usize, EXTRA_OFFSETS[0] + 4 * 20 + 4);
        assert_eq!(i[1] as usize, EXTRA_OFFSETS[1] + 10);
        assert_eq!(i[2] as usize, EXTRA_OFFSETS[2] + 10);
        assert_eq!(i[3] as usize, EXTRA_OFFSETS[3] + 4);
        assert_eq!(EXTRA_LEN, 469);
    }

    #[test]
    fn terms_are_symmetric_and_in_range() {
        let mut b = Board::start();
        let mut s = 12345u64;
        for _ in 0..50 {
            let m = b.moves();
            if m == 0 {
                b = b.pass();
                if b.moves() == 0 {
                    break;
                }
                continue;
            }
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = (s >> 33) as usize % m.count_ones() as usize;
            let x = crate::board::BitIter(m).nth(k).expect("k < count");
            b = b.play(x).expect("legal");
            let i = extra_indices(b.player, b.opponent);
            for (t, &idx) in i.iter().enumerate() {
                let lo = EXTRA_OFFSETS[t];
                assert!(
                    (lo..lo + EXTRA_SIZES[t]).contains(&usize::from(idx)),
                    "{b} term {t}"
                );
            }
            for sym in 1..8 {
                let t = transform(&b, sym);
                assert_eq!(extra_indices(t.player, t.opponent), i, "{b} symmetry {sym}");
            }
        }
    }
}
