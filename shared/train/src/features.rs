//! The fitter's view of Edax's 47-feature layout: packed weight offsets of a position.
//!
//! The feature squares, families, symmetric packing and rounding all come from
//! [`bookfarm_engine::eval`]; this module only adds what the engine does not expose (see the
//! trainer's report): where each family starts inside one *packed* ply block, and the packed
//! offset of every unpacked weight index. The fitter learns one weight per packed slot, so that
//! symmetric patterns share a weight exactly as in an `eval.dat` file.

use bookfarm_engine::Board;
use bookfarm_engine::eval::extra::{EXTRA_LEN, N_EXTRA, extra_indices};
use bookfarm_engine::eval::features::{FAMILIES, FEATURE_FAMILY, encode};
use bookfarm_engine::eval::{N_FEATURES, N_PACKED, N_PLY, N_WEIGHTS, pack_table};
use std::sync::OnceLock;

/// Number of weights in one packed ply block of an Edax `eval.dat` (114364).
pub const PACKED_PER_PLY: usize = N_PACKED;
/// Number of ply blocks (ply 0 … 60, `ply = 60 − empties`).
pub const N_PLIES: usize = N_PLY;
/// Number of weight terms summed for one position: 46 patterns and the constant.
pub const N_TERMS: usize = N_FEATURES;
/// Terms of a `bookfarm-eval2` position: the Edax terms and the engine's extra terms.
pub const N_TERMS2: usize = N_FEATURES + N_EXTRA;
/// Weights of one `bookfarm-eval2` ply block: the packed Edax block, then the extra tables.
pub const BLOCK2: usize = N_PACKED + EXTRA_LEN;

/// Packing tables of the engine's families, laid out for the fitter.
#[derive(Debug)]
pub struct Layout {
    /// Packing table of each family: index within the family → packed index within the family.
    pub pack: Vec<Vec<u32>>,
    /// Offset of each family inside a packed ply block (prefix sums of `Family::packed`).
    pub packed_offset: Vec<usize>,
    /// Packed offset (inside a ply block) of every unpacked weight index `0..N_WEIGHTS`.
    pub packed_of_unpacked: Vec<u32>,
}

impl Layout {
    fn build() -> Layout {
        let pack: Vec<Vec<u32>> = FAMILIES.iter().map(|f| pack_table(f.len, f.sym)).collect();
        let packed_offset: Vec<usize> = FAMILIES
            .iter()
            .scan(0usize, |acc, f| {
                let start = *acc;
                *acc += f.packed;
                Some(start)
            })
            .collect();
        let mut packed_of_unpacked = vec![0u32; N_WEIGHTS];
        for ((f, p), &start) in FAMILIES.iter().zip(&pack).zip(&packed_offset) {
            for (i, &k) in p.iter().enumerate() {
                packed_of_unpacked[f.offset + i] = (start + k as usize) as u32;
            }
        }
        Layout {
            pack,
            packed_offset,
            packed_of_unpacked,
        }
    }

    /// The shared layout (built once).
    pub fn get() -> &'static Layout {
        static LAYOUT: OnceLock<Layout> = OnceLock::new();
        LAYOUT.get_or_init(Layout::build)
    }

    /// The 47 offsets inside a packed ply block whose weights sum to the raw evaluation of
    /// `board` (feature indices from the engine's [`encode`], side to move's view).
    #[inline]
    pub fn packed_offsets(&self, board: &Board) -> [u32; N_TERMS] {
        let idx = encode(board.player, board.opponent);
        let mut out = [0u32; N_TERMS];
        for (k, slot) in out.iter_mut().enumerate() {
            let g = usize::from(FEATURE_FAMILY[k]);
            *slot = (self.packed_offset[g] + self.pack[g][usize::from(idx.0[k])] as usize) as u32;
        }
        out
    }

    /// The [`N_TERMS2`] offsets inside a `bookfarm-eval2` block ([`BLOCK2`]): the packed Edax
    /// offsets, then the extra terms after the packed block.
    #[inline]
    pub fn offsets2(&self, board: &Board) -> [u32; N_TERMS2] {
        let mut out = [0u32; N_TERMS2];
        out[..N_TERMS].copy_from_slice(&self.packed_offsets(board));
        for (slot, x) in out[N_TERMS..]
            .iter_mut()
            .zip(extra_indices(board.player, board.opponent))
        {
            *slot = (N_PACKED + x as usize) as u32;
        }
        out
    }
}

/// Edax's ply index of a board: `60 − empties`, clamped to 0..=60.
#[inline]
pub fn ply_of(board: &Board) -> usize {
    60usize.saturating_sub(board.empties() as usize).min(60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::eval::{Eval, EvalHeader};
    use bookfarm_engine::symmetry::transform;

    #[test]
    fn packed_layout_covers_the_block() {
        let l = Layout::get();
        assert_eq!(l.packed_offset[12], PACKED_PER_PLY - 1);
        // Every packed slot is the image of at least one unpacked index.
        let mut hit = vec![false; PACKED_PER_PLY];
        for &p in &l.packed_of_unpacked {
            hit[p as usize] = true;
        }
        assert!(hit.iter().all(|&h| h));
        // The constant term is the last packed slot.
        let start = l.packed_offsets(&Board::start());
        assert_eq!(start[N_TERMS - 1] as usize, PACKED_PER_PLY - 1);
    }

    #[test]
    fn packed_sum_equals_the_engine_evaluation() {
        // Arbitrary packed weights, expanded to the engine's unpacked table: the fitter's model
        // (sum at the packed offsets) must be exactly the engine's raw evaluation.
        let l = Layout::get();
        let packed: Vec<i16> = (0..PACKED_PER_PLY as i64)
            .map(|i| ((i * 7919) % 1009 - 504) as i16)
            .collect();
        let header = EvalHeader {
            version: 0,
            release: 0,
            build: 0,
            date: 0.0,
        };
        let eval = Eval::from_fn(header, |ply, i| {
            packed[l.packed_of_unpacked[i] as usize].wrapping_add(ply as i16)
        });
        for b in crate::fit::tests::positions(300, 12345) {
            let sum: i32 = l
                .packed_offsets(&b)
                .iter()
                .map(|&o| i32::from(packed[o as usize].wrapping_add(ply_of(&b) as i16)))
                .sum();
            assert_eq!(sum, eval.raw_board(&b), "{b}");
            for s in 1..8 {
                let t = transform(&b, s);
                let st: i32 = l
                    .packed_offsets(&t)
                    .iter()
                    .map(|&o| i32::from(packed[o as usize].wrapping_add(ply_of(&t) as i16)))
                    .sum();
                assert_eq!(st, sum, "symmetry {s} on {b}");
            }
        }
    }
}
