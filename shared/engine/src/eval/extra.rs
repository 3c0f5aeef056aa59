//! bookfarm's evaluation terms beyond Edax's 47 patterns (the `bookfarm-eval2` format).
//!
//! Every term reads one index of the position and looks its weight up in a per-ply table, so it
//! adds to the pattern sum exactly like an Edax pattern feature (one index, one weight).
//!
//! Four global counts:
//!
//! | term | index | size |
//! |---|---|---|
//! | mobility pair | `min(m_own, 19) · 20 + min(m_other, 19)`, the legal-move counts of both sides | 400 |
//! | own potential mobility | empty squares next to the other side's discs, at most 31 | 32 |
//! | other's potential mobility | empty squares next to the own discs, at most 31 | 32 |
//! | quadrant parity | quadrants (4×4 corners of the board) with an odd number of empties | 5 |
//!
//! and three 10-square patterns that Edax's set does not have, each read under all eight board
//! symmetries (24 look-ups into three tables of 3¹⁰ weights):
//!
//! | pattern | squares (as written for the a1 corner) |
//! |---|---|
//! | triangle | a1 b1 c1 d1 a2 b2 c2 a3 b3 a4 |
//! | edge block | a1 c1 d1 e1 f1 h1 c2 d2 e2 f2 |
//! | diagonal band | a1 b1 a2 b2 c2 b3 c3 d3 c4 d4 |
//!
//! The counts are invariant under the board's symmetries, and each pattern sums its table over
//! all eight transforms of the board, so every term is symmetric without packing: the tables are
//! stored as they are. "Own" is the side the evaluation is for (the side to move at a leaf).

use crate::flip;
use crate::square::Square;
use crate::symmetry::transform_square;

/// Largest mobility count the pair table distinguishes (higher counts share its row).
pub const MOBILITY_CAP: u32 = 19;
/// Largest potential-mobility count distinguished.
pub const POTENTIAL_CAP: u32 = 31;

/// Number of global-count terms.
pub const N_COUNTS: usize = 4;
/// Squares of a pattern term.
pub const PATTERN_CELLS: usize = 10;
/// Number of extra patterns.
pub const N_PATTERNS: usize = 3;
/// The extra patterns' squares (0 = a1, 1 = b1, …, 63 = h8) in ascending order; the pattern's
/// digit `k` (weight `3^k` in its index) is its `k`-th square.
pub const PATTERNS: [[u8; PATTERN_CELLS]; N_PATTERNS] = [
    // triangle: a1 b1 c1 d1 a2 b2 c2 a3 b3 a4
    [0, 1, 2, 3, 8, 9, 10, 16, 17, 24],
    // edge block: a1 c1 d1 e1 f1 h1 c2 d2 e2 f2
    [0, 2, 3, 4, 5, 7, 10, 11, 12, 13],
    // diagonal band: a1 b1 a2 b2 c2 b3 c3 d3 c4 d4
    [0, 1, 8, 9, 10, 17, 18, 19, 26, 27],
];
/// Size of one pattern's table (3¹⁰).
pub const PATTERN_SIZE: usize = 59_049;
/// Number of pattern look-ups: every pattern under every symmetry.
pub const N_INSTANCES: usize = 8 * N_PATTERNS;
/// Number of extra terms (indices per position): the counts, then the pattern look-ups.
pub const N_EXTRA: usize = N_COUNTS + N_INSTANCES;
/// Number of extra tables: one per count, one per pattern.
pub const N_TABLES: usize = N_COUNTS + N_PATTERNS;
/// Sizes of the extra tables.
pub const EXTRA_SIZES: [usize; N_TABLES] = [
    ((MOBILITY_CAP + 1) * (MOBILITY_CAP + 1)) as usize,
    (POTENTIAL_CAP + 1) as usize,
    (POTENTIAL_CAP + 1) as usize,
    5,
    PATTERN_SIZE,
    PATTERN_SIZE,
    PATTERN_SIZE,
];
/// Start of each table inside a ply's extra block.
pub const EXTRA_OFFSETS: [usize; N_TABLES] = {
    let mut o = [0usize; N_TABLES];
    let mut k = 1;
    while k < N_TABLES {
        o[k] = o[k - 1] + EXTRA_SIZES[k - 1];
        k += 1;
    }
    o
};
/// Weights per ply in the extra block.
pub const EXTRA_LEN: usize = EXTRA_OFFSETS[N_TABLES - 1] + EXTRA_SIZES[N_TABLES - 1];

/// Names of the tables, for reports.
pub const EXTRA_NAMES: [&str; N_TABLES] = [
    "mobility pair",
    "own potential mobility",
    "other potential mobility",
    "quadrant parity",
    "triangle",
    "edge block",
    "diagonal band",
];

/// Square index `i` under symmetry `s` ([`crate::symmetry::transform_square`] on indices).
const fn transform_index(i: u8, s: usize) -> u8 {
    match Square::new(i) {
        Some(sq) => transform_square(sq, s as u8).index(),
        None => i,
    }
}

/// The squares of look-up `j` = `pattern · 8 + symmetry`: mask, and for each square in ascending
/// order (the order in which a bit gather packs them) the pattern digit it stands for.
const fn instance(j: usize) -> (u64, [u8; PATTERN_CELLS]) {
    let (p, s) = (j / 8, j % 8);
    let mut mask = 0u64;
    let mut k = 0;
    while k < PATTERN_CELLS {
        mask |= 1u64 << transform_index(PATTERNS[p][k], s);
        k += 1;
    }
    // Rank of each transformed square among the mask's squares = its position in a gather.
    let mut digit_at = [0u8; PATTERN_CELLS];
    k = 0;
    while k < PATTERN_CELLS {
        let sq = transform_index(PATTERNS[p][k], s);
        let rank = (mask & ((1u64 << sq) - 1)).count_ones() as usize;
        digit_at[rank] = k as u8;
        k += 1;
    }
    (mask, digit_at)
}

/// Masks of the pattern look-ups.
const MASKS: [u64; N_INSTANCES] = {
    let mut m = [0u64; N_INSTANCES];
    let mut j = 0;
    while j < N_INSTANCES {
        m[j] = instance(j).0;
        j += 1;
    }
    m
};

/// `BASE3[j][g]`: the pattern index (base 3, own discs as digit 1) of the gathered bits `g` of
/// look-up `j`; the other side's discs count twice that.
static BASE3: [[u16; 1 << PATTERN_CELLS]; N_INSTANCES] = {
    let mut t = [[0u16; 1 << PATTERN_CELLS]; N_INSTANCES];
    let mut j = 0;
    while j < N_INSTANCES {
        let digit_at = instance(j).1;
        let mut g = 0;
        while g < 1 << PATTERN_CELLS {
            let mut v = 0u32;
            let mut r = 0;
            while r < PATTERN_CELLS {
                if g & (1 << r) != 0 {
                    v += 3u32.pow(digit_at[r] as u32);
                }
                r += 1;
            }
            t[j][g] = v as u16;
            g += 1;
        }
        j += 1;
    }
    t
};

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
pub fn extra_indices(own: u64, other: u64) -> [u32; N_EXTRA] {
    extra_indices_with(own, other, flip::moves)
}

/// [`extra_indices`] with a given legal-move generator (e.g. the search's kernels; every
/// backend returns the same moves, so the same indices).
#[inline(always)]
pub fn extra_indices_with(own: u64, other: u64, moves: impl Fn(u64, u64) -> u64) -> [u32; N_EXTRA] {
    let empty = !(own | other);
    let m_own = moves(own, other).count_ones().min(MOBILITY_CAP);
    let m_other = moves(other, own).count_ones().min(MOBILITY_CAP);
    let p_own = (neighbours(other) & empty).count_ones().min(POTENTIAL_CAP);
    let p_other = (neighbours(own) & empty).count_ones().min(POTENTIAL_CAP);
    let odd = QUADRANTS
        .iter()
        .map(|&q| (q & empty).count_ones() & 1)
        .sum::<u32>();
    let mut out = [0u32; N_EXTRA];
    out[0] = EXTRA_OFFSETS[0] as u32 + m_own * (MOBILITY_CAP + 1) + m_other;
    out[1] = EXTRA_OFFSETS[1] as u32 + p_own;
    out[2] = EXTRA_OFFSETS[2] as u32 + p_other;
    out[3] = EXTRA_OFFSETS[3] as u32 + odd;
    pattern_indices(own, other, &mut out[N_COUNTS..]);
    out
}

/// Whether the bit gathers use the CPU's `pext` (BMI2 on a CPU where it is fast: not AMD before
/// Zen 3, where it is microcoded). Results are the same either way.
#[cfg(target_arch = "x86_64")]
fn fast_pext() -> bool {
    use std::sync::OnceLock;
    static FAST: OnceLock<bool> = OnceLock::new();
    *FAST.get_or_init(|| {
        if !std::arch::is_x86_feature_detected!("bmi2") {
            return false;
        }
        let vendor = std::arch::x86_64::__cpuid(0);
        let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
        if !amd {
            return true;
        }
        let sig = std::arch::x86_64::__cpuid(1).eax;
        let family = ((sig >> 8) & 0xf) + ((sig >> 20) & 0xff);
        family >= 0x19
    })
}

/// The pattern look-ups' indices (with their tables' offsets) into `out` ([`N_INSTANCES`] long).
#[inline(always)]
fn pattern_indices(own: u64, other: u64, out: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    if fast_pext() {
        // SAFETY: `fast_pext` checked that the CPU has BMI2.
        unsafe { pattern_indices_bmi2(own, other, out) };
        return;
    }
    pattern_indices_with(own, other, out, gather_portable);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
fn pattern_indices_bmi2(own: u64, other: u64, out: &mut [u32]) {
    // The closure inherits this function's BMI2, so `pext` is safe to call and inlines.
    pattern_indices_with(own, other, out, |x, m| std::arch::x86_64::_pext_u64(x, m));
}

#[inline(always)]
fn pattern_indices_with(own: u64, other: u64, out: &mut [u32], gather: impl Fn(u64, u64) -> u64) {
    for (j, slot) in out.iter_mut().enumerate().take(N_INSTANCES) {
        let t = &BASE3[j];
        let m = MASKS[j];
        *slot = EXTRA_OFFSETS[N_COUNTS + j / 8] as u32
            + u32::from(t[gather(own, m) as usize])
            + 2 * u32::from(t[gather(other, m) as usize]);
    }
}

/// The bits of `x` under `mask`, packed towards bit 0 in ascending order (`pext`).
#[inline(always)]
fn gather_portable(x: u64, mut mask: u64) -> u64 {
    let mut out = 0u64;
    let mut bit = 1u64;
    while mask != 0 {
        if x & mask & mask.wrapping_neg() != 0 {
            out |= bit;
        }
        mask &= mask - 1;
        bit <<= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Board;
    use crate::symmetry::transform;

    /// Index of pattern `p` read square by square on `b` (player = own), the definition the
    /// gathers must reproduce.
    fn pattern_by_squares(own: u64, other: u64, p: usize) -> u32 {
        PATTERNS[p].iter().rev().fold(0, |idx, &c| {
            idx * 3 + ((own >> c) & 1) as u32 + 2 * ((other >> c) & 1) as u32
        })
    }

    fn random_positions(n: usize, seed: u64) -> Vec<Board> {
        let mut out = Vec::new();
        let mut b = Board::start();
        let mut s = seed;
        while out.len() < n {
            let m = b.moves();
            if m == 0 {
                b = b.pass();
                if b.moves() == 0 {
                    b = Board::start();
                }
                continue;
            }
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = (s >> 33) as usize % m.count_ones() as usize;
            let x = crate::board::BitIter(m).nth(k).expect("k < count");
            b = b.play(x).expect("legal");
            out.push(b);
        }
        out
    }

    #[test]
    fn start_position_terms() {
        let b = Board::start();
        let i = extra_indices(b.player, b.opponent);
        // 4 moves each, 10 empties next to either colour, 60 empties = 15 per quadrant (odd).
        assert_eq!(i[0] as usize, EXTRA_OFFSETS[0] + 4 * 20 + 4);
        assert_eq!(i[1] as usize, EXTRA_OFFSETS[1] + 10);
        assert_eq!(i[2] as usize, EXTRA_OFFSETS[2] + 10);
        assert_eq!(i[3] as usize, EXTRA_OFFSETS[3] + 4);
        // The diagonal band reaches d4 (and its images e4, d5, e5): the only occupied squares.
        for (j, &idx) in i[N_COUNTS..].iter().enumerate() {
            let base = EXTRA_OFFSETS[N_COUNTS + j / 8] as u32;
            if j / 8 == 2 {
                assert_ne!(idx, base, "look-up {j}");
            } else {
                assert_eq!(idx, base, "look-up {j}");
            }
        }
        assert_eq!(EXTRA_LEN, 469 + 3 * 59_049);
    }

    #[test]
    fn gathers_read_each_pattern_square_by_square() {
        for b in random_positions(400, 99) {
            let i = extra_indices(b.player, b.opponent);
            for p in 0..N_PATTERNS {
                for s in 0..8u8 {
                    // Look-up p·8 + s reads the pattern's squares moved by symmetry s, i.e. the
                    // pattern itself on the board moved by the inverse symmetry.
                    let t = transform(&b, crate::symmetry::inverse(s));
                    let want = pattern_by_squares(t.player, t.opponent, p);
                    let got =
                        i[N_COUNTS + p * 8 + usize::from(s)] - EXTRA_OFFSETS[N_COUNTS + p] as u32;
                    assert_eq!(got, want, "{b} pattern {p} symmetry {s}");
                    assert!((got as usize) < PATTERN_SIZE);
                }
            }
            let mut portable = [0u32; N_INSTANCES];
            pattern_indices_with(b.player, b.opponent, &mut portable, gather_portable);
            assert_eq!(
                &i[N_COUNTS..],
                &portable[..],
                "{b}: pext and portable gathers"
            );
        }
    }

    #[test]
    fn terms_are_symmetric_and_in_range() {
        for b in random_positions(60, 12345) {
            let mut i = extra_indices(b.player, b.opponent);
            for (t, &idx) in i.iter().enumerate() {
                let table = if t < N_COUNTS {
                    t
                } else {
                    N_COUNTS + (t - N_COUNTS) / 8
                };
                let lo = EXTRA_OFFSETS[table];
                assert!(
                    (lo..lo + EXTRA_SIZES[table]).contains(&(idx as usize)),
                    "{b} term {t}"
                );
            }
            // The same multiset of look-ups under every symmetry (so the same sum).
            i.sort_unstable();
            for sym in 1..8 {
                let t = transform(&b, sym);
                let mut j = extra_indices(t.player, t.opponent);
                j.sort_unstable();
                assert_eq!(j, i, "{b} symmetry {sym}");
            }
        }
    }
}
