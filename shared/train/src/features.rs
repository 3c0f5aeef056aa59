//! Edax's 47-feature pattern layout (edax-spec §9.2) and its symmetric weight packing (§9.3).
//!
//! A position is described, from the side to move's view, by 46 pattern indices plus a constant.
//! Each pattern index is mapped through its family's packing table to an offset inside one ply
//! block of [`PACKED_PER_PLY`] weights, so symmetric patterns share one weight. The raw Edax
//! evaluation is the sum of the 47 weights found at those offsets.

use bookfarm_engine::{Board, Square};
use std::sync::OnceLock;

/// Number of weights in one packed ply block of an Edax `eval.dat` (114364).
pub const PACKED_PER_PLY: usize = 114_364;
/// Number of ply blocks (ply 0 … 60, `ply = 60 − empties`).
pub const N_PLIES: usize = 61;
/// Number of pattern features (the constant term is extra).
pub const N_PATTERNS: usize = 46;
/// Number of weight terms summed for one position: 46 patterns and the constant.
pub const N_TERMS: usize = 47;

/// A weight family: its pattern length, how many features use it and its symmetry permutation.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Short name as in edax-spec §9.2.
    pub name: &'static str,
    /// Number of squares of each feature of the family.
    pub len: usize,
    /// Features `first..first + count` belong to the family.
    pub first: usize,
    /// Number of features in the family.
    pub count: usize,
    /// Digit permutation of the self-symmetry (digit 0 = last listed square), or `None` for reversal.
    pub sym: Option<&'static [usize]>,
}

/// The 13 families in file order (C9, C10, S10a, S10b, S8 ×4, S7, S6, S5, S4, const).
pub const FAMILIES: [Family; 13] = [
    Family {
        name: "C9",
        len: 9,
        first: 0,
        count: 4,
        sym: Some(&[0, 2, 1, 4, 3, 5, 7, 6, 8]),
    },
    Family {
        name: "C10",
        len: 10,
        first: 4,
        count: 4,
        sym: Some(&[9, 8, 7, 6, 4, 5, 3, 2, 1, 0]),
    },
    Family {
        name: "S10a",
        len: 10,
        first: 8,
        count: 4,
        sym: None,
    },
    Family {
        name: "S10b",
        len: 10,
        first: 12,
        count: 4,
        sym: None,
    },
    Family {
        name: "S8 line 2",
        len: 8,
        first: 16,
        count: 4,
        sym: None,
    },
    Family {
        name: "S8 line 3",
        len: 8,
        first: 20,
        count: 4,
        sym: None,
    },
    Family {
        name: "S8 line 4",
        len: 8,
        first: 24,
        count: 4,
        sym: None,
    },
    Family {
        name: "S8 diagonal",
        len: 8,
        first: 28,
        count: 2,
        sym: None,
    },
    Family {
        name: "S7",
        len: 7,
        first: 30,
        count: 4,
        sym: None,
    },
    Family {
        name: "S6",
        len: 6,
        first: 34,
        count: 4,
        sym: None,
    },
    Family {
        name: "S5",
        len: 5,
        first: 38,
        count: 4,
        sym: None,
    },
    Family {
        name: "S4",
        len: 4,
        first: 42,
        count: 4,
        sym: None,
    },
    Family {
        name: "const",
        len: 0,
        first: 46,
        count: 1,
        sym: None,
    },
];

/// The squares of the 46 pattern features, first listed = most significant base-3 digit.
const FEATURE_SQUARES: [&str; N_PATTERNS] = [
    "a1 b1 a2 b2 c1 a3 c2 b3 c3",
    "h1 g1 h2 g2 f1 h3 f2 g3 f3",
    "a8 a7 b8 b7 a6 c8 b6 c7 c6",
    "h8 h7 g8 g7 h6 f8 g6 f7 f6",
    "a5 a4 a3 a2 a1 b2 b1 c1 d1 e1",
    "h5 h4 h3 h2 h1 g2 g1 f1 e1 d1",
    "a4 a5 a6 a7 a8 b7 b8 c8 d8 e8",
    "h4 h5 h6 h7 h8 g7 g8 f8 e8 d8",
    "b2 a1 b1 c1 d1 e1 f1 g1 h1 g2",
    "b7 a8 b8 c8 d8 e8 f8 g8 h8 g7",
    "b2 a1 a2 a3 a4 a5 a6 a7 a8 b7",
    "g2 h1 h2 h3 h4 h5 h6 h7 h8 g7",
    "a1 c1 d1 c2 d2 e2 f2 e1 f1 h1",
    "a8 c8 d8 c7 d7 e7 f7 e8 f8 h8",
    "a1 a3 a4 b3 b4 b5 b6 a5 a6 a8",
    "h1 h3 h4 g3 g4 g5 g6 h5 h6 h8",
    "a2 b2 c2 d2 e2 f2 g2 h2",
    "a7 b7 c7 d7 e7 f7 g7 h7",
    "b1 b2 b3 b4 b5 b6 b7 b8",
    "g1 g2 g3 g4 g5 g6 g7 g8",
    "a3 b3 c3 d3 e3 f3 g3 h3",
    "a6 b6 c6 d6 e6 f6 g6 h6",
    "c1 c2 c3 c4 c5 c6 c7 c8",
    "f1 f2 f3 f4 f5 f6 f7 f8",
    "a4 b4 c4 d4 e4 f4 g4 h4",
    "a5 b5 c5 d5 e5 f5 g5 h5",
    "d1 d2 d3 d4 d5 d6 d7 d8",
    "e1 e2 e3 e4 e5 e6 e7 e8",
    "a1 b2 c3 d4 e5 f6 g7 h8",
    "a8 b7 c6 d5 e4 f3 g2 h1",
    "b1 c2 d3 e4 f5 g6 h7",
    "h2 g3 f4 e5 d6 c7 b8",
    "a2 b3 c4 d5 e6 f7 g8",
    "g1 f2 e3 d4 c5 b6 a7",
    "c1 d2 e3 f4 g5 h6",
    "a3 b4 c5 d6 e7 f8",
    "f1 e2 d3 c4 b5 a6",
    "h3 g4 f5 e6 d7 c8",
    "d1 e2 f3 g4 h5",
    "a4 b5 c6 d7 e8",
    "e1 d2 c3 b4 a5",
    "h4 g5 f6 e7 d8",
    "d1 c2 b3 a4",
    "a5 b6 c7 d8",
    "e1 f2 g3 h4",
    "h5 g6 f7 e8",
];

/// Precomputed tables: feature squares, family of each feature, packing tables and offsets.
#[derive(Debug)]
pub struct Layout {
    /// Squares of each feature (most significant digit first).
    pub squares: Vec<Vec<u8>>,
    /// Family index of each of the 47 terms.
    pub family_of: [usize; N_TERMS],
    /// Packing table of each family: unpacked index → packed index inside the family.
    pub pack: Vec<Vec<u32>>,
    /// Packed size of each family.
    pub packed_size: Vec<usize>,
    /// Offset of each family inside a packed ply block.
    pub packed_offset: Vec<usize>,
}

fn pow3(n: usize) -> usize {
    3usize.pow(n as u32)
}

/// Build family `f`'s packing table as Edax does (edax-spec §9.3).
fn build_pack(f: &Family) -> (Vec<u32>, usize) {
    let n = pow3(f.len);
    let mut pack = vec![0u32; n];
    let mut next = 0u32;
    let rev: Vec<usize> = (0..f.len).rev().collect();
    let sym: &[usize] = f.sym.unwrap_or(&rev);
    for i in 0..n {
        let mut j = 0usize;
        for (k, &m) in sym.iter().enumerate() {
            let digit = (i / pow3(m)) % 3;
            j += digit * pow3(k);
        }
        if j < i {
            pack[i] = pack[j];
        } else {
            pack[i] = next;
            next += 1;
        }
    }
    (pack, next as usize)
}

impl Layout {
    fn build() -> Layout {
        let squares: Vec<Vec<u8>> = FEATURE_SQUARES
            .iter()
            .map(|s| {
                s.split_whitespace()
                    .map(|t| {
                        Square::parse(t)
                            .expect("static feature table holds valid squares")
                            .index()
                    })
                    .collect()
            })
            .collect();
        let mut family_of = [0usize; N_TERMS];
        let mut pack = Vec::new();
        let mut packed_size = Vec::new();
        let mut packed_offset = Vec::new();
        let mut offset = 0usize;
        for (g, f) in FAMILIES.iter().enumerate() {
            for slot in family_of.iter_mut().skip(f.first).take(f.count) {
                *slot = g;
            }
            let (p, size) = build_pack(f);
            pack.push(p);
            packed_size.push(size);
            packed_offset.push(offset);
            offset += size;
        }
        debug_assert_eq!(offset, PACKED_PER_PLY);
        Layout {
            squares,
            family_of,
            pack,
            packed_size,
            packed_offset,
        }
    }

    /// The shared layout (built once).
    pub fn get() -> &'static Layout {
        static LAYOUT: OnceLock<Layout> = OnceLock::new();
        LAYOUT.get_or_init(Layout::build)
    }

    /// Unpacked base-3 index of feature `k` (0..46) on `board`, from the side to move's view
    /// (digit 0 = mover, 1 = opponent, 2 = empty).
    #[inline]
    pub fn feature_index(&self, board: &Board, k: usize) -> usize {
        let mut idx = 0usize;
        for &sq in &self.squares[k] {
            let bit = 1u64 << sq;
            let d = if board.player & bit != 0 {
                0
            } else if board.opponent & bit != 0 {
                1
            } else {
                2
            };
            idx = idx * 3 + d;
        }
        idx
    }

    /// The 47 offsets inside a packed ply block whose weights sum to the raw evaluation of `board`.
    #[inline]
    pub fn packed_offsets(&self, board: &Board) -> [u32; N_TERMS] {
        let mut out = [0u32; N_TERMS];
        for (k, slot) in out.iter_mut().enumerate().take(N_PATTERNS) {
            let g = self.family_of[k];
            let i = self.feature_index(board, k);
            *slot = (self.packed_offset[g] + self.pack[g][i] as usize) as u32;
        }
        out[N_PATTERNS] = (PACKED_PER_PLY - 1) as u32;
        out
    }
}

/// Edax's ply index of a board: `60 − empties`, clamped to 0..=60.
#[inline]
pub fn ply_of(board: &Board) -> usize {
    60usize.saturating_sub(board.empties() as usize).min(60)
}

/// Edax's rounding of a raw weight sum to discs (edax-spec §8.3): half away from zero, clamped to ±63.
#[inline]
pub fn raw_to_discs(raw: i32) -> i32 {
    let q = if raw > 0 {
        (raw + 64) / 128
    } else {
        (raw - 64) / 128
    };
    q.clamp(-63, 63)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::symmetry::transform;

    #[test]
    fn packed_sizes_match_edax() {
        let l = Layout::get();
        assert_eq!(
            l.packed_size,
            vec![
                10206, 29889, 29646, 29646, 3321, 3321, 3321, 3321, 1134, 378, 135, 45, 1
            ]
        );
        assert_eq!(l.packed_offset[12], PACKED_PER_PLY - 1);
    }

    #[test]
    fn every_feature_has_its_family_length_and_distinct_squares() {
        let l = Layout::get();
        for k in 0..N_PATTERNS {
            let f = &FAMILIES[l.family_of[k]];
            assert_eq!(l.squares[k].len(), f.len, "feature {k}");
            let mask = l.squares[k].iter().fold(0u64, |m, &s| m | 1 << s);
            assert_eq!(mask.count_ones() as usize, f.len, "feature {k}");
        }
    }

    #[test]
    fn start_position_indices() {
        // A1 corner block of the start position is all empty: 3^9 − 1.
        let l = Layout::get();
        assert_eq!(l.feature_index(&Board::start(), 0), 19682);
        // Line 4 (a4..h4) at the start: d4 is White (opponent of Black to move), e4 Black.
        // digits: 2 2 2 1 0 2 2 2
        let expect = [2, 2, 2, 1, 0, 2, 2, 2].iter().fold(0, |a, &d| a * 3 + d);
        assert_eq!(l.feature_index(&Board::start(), 24), expect);
    }

    #[test]
    fn packed_sum_is_invariant_under_the_eight_symmetries() {
        // With arbitrary weights, the sum over the packed offsets must not depend on the symmetry:
        // the 46 features map onto each other and packing merges self-symmetric patterns.
        let l = Layout::get();
        let weights: Vec<i64> = (0..PACKED_PER_PLY as i64)
            .map(|i| (i * 7919) % 1009 - 504)
            .collect();
        let mut b = Board::start();
        let mut seed = 12345u64;
        for _ in 0..40 {
            let moves = b.moves();
            if moves == 0 {
                break;
            }
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (seed >> 33) as u32 % moves.count_ones();
            let sq = bookfarm_engine::board::BitIter(moves)
                .nth(n as usize)
                .expect("n < count");
            b = b.play(sq).expect("legal move");
            let sum = |x: &Board| -> i64 {
                l.packed_offsets(x)
                    .iter()
                    .map(|&o| weights[o as usize])
                    .sum()
            };
            let s0 = sum(&b);
            for s in 1..8 {
                assert_eq!(sum(&transform(&b, s)), s0, "symmetry {s} on {b}");
            }
        }
    }

    #[test]
    fn rounding_follows_edax() {
        assert_eq!(raw_to_discs(0), 0);
        assert_eq!(raw_to_discs(63), 0);
        assert_eq!(raw_to_discs(64), 1);
        assert_eq!(raw_to_discs(-64), -1);
        assert_eq!(raw_to_discs(-63), 0);
        assert_eq!(raw_to_discs(64 * 128), 63);
        assert_eq!(raw_to_discs(-64 * 128), -63);
    }
}
