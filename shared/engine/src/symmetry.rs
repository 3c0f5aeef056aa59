//! The eight board symmetries and the canonical ("unique") form, exactly as Edax (edax-spec §1.3–1.5).
//!
//! Symmetry index `s` in `0..8`: bit 0 mirrors files (a↔h), bit 1 mirrors ranks (1↔8), bit 2
//! transposes about the A1–H8 diagonal; the operations apply in that order.
//! The canonical board is the minimum of the 8 transforms, comparing player first, then opponent.

use crate::board::Board;
use crate::square::{Move, Square};

/// Order in which AVX2 builds of Edax try symmetries; the first strict minimum wins.
/// We write books with this order (the one of the official x86-64-v3 binaries).
pub const AVX2_ORDER: [u8; 8] = [0, 4, 1, 6, 2, 5, 3, 7];
/// Order of generic/SSE2/ARM builds of Edax.
pub const GENERIC_ORDER: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

/// Mirror files: a↔h (reverse the bits inside each byte).
#[inline]
pub const fn flip_horizontal(mut b: u64) -> u64 {
    b = ((b >> 1) & 0x5555_5555_5555_5555) | ((b & 0x5555_5555_5555_5555) << 1);
    b = ((b >> 2) & 0x3333_3333_3333_3333) | ((b & 0x3333_3333_3333_3333) << 2);
    ((b >> 4) & 0x0f0f_0f0f_0f0f_0f0f) | ((b & 0x0f0f_0f0f_0f0f_0f0f) << 4)
}

/// Mirror ranks: 1↔8 (byte swap).
#[inline]
pub const fn flip_vertical(b: u64) -> u64 {
    b.swap_bytes()
}

/// Transpose about the A1–H8 diagonal (`x -> (x >> 3) | ((x & 7) << 3)`).
#[inline]
pub const fn transpose(mut b: u64) -> u64 {
    let mut t = (b ^ (b >> 7)) & 0x00aa_00aa_00aa_00aa;
    b = b ^ t ^ (t << 7);
    t = (b ^ (b >> 14)) & 0x0000_cccc_0000_cccc;
    b = b ^ t ^ (t << 14);
    t = (b ^ (b >> 28)) & 0x0000_0000_f0f0_f0f0;
    b ^ t ^ (t << 28)
}

/// Apply symmetry `s` (0..8) to a bitboard.
#[inline]
pub const fn transform_bits(mut b: u64, s: u8) -> u64 {
    if s & 1 != 0 {
        b = flip_horizontal(b);
    }
    if s & 2 != 0 {
        b = flip_vertical(b);
    }
    if s & 4 != 0 {
        b = transpose(b);
    }
    b
}

/// Apply symmetry `s` to a board.
#[inline]
pub const fn transform(b: &Board, s: u8) -> Board {
    Board {
        player: transform_bits(b.player, s),
        opponent: transform_bits(b.opponent, s),
    }
}

/// Apply symmetry `s` to a square (Edax `symetry(x, s)`).
#[inline]
pub const fn transform_square(x: Square, s: u8) -> Square {
    let mut i = x.index();
    if s & 1 != 0 {
        i ^= 7;
    }
    if s & 2 != 0 {
        i ^= 56;
    }
    if s & 4 != 0 {
        i = (i >> 3) | ((i & 7) << 3);
    }
    match Square::new(i) {
        Some(sq) => sq,
        None => x, // unreachable: i stays in 0..64
    }
}

/// Apply symmetry `s` to a move; passes and no-moves are unchanged.
#[inline]
pub const fn transform_move(m: Move, s: u8) -> Move {
    match m {
        Move::Square(x) => Move::Square(transform_square(x, s)),
        other => other,
    }
}

/// The inverse symmetry of `s` (5 and 6 are each other's inverse; the others are involutions).
#[inline]
pub const fn inverse(s: u8) -> u8 {
    match s {
        5 => 6,
        6 => 5,
        s => s,
    }
}

/// Canonical board and the symmetry index that produced it, trying symmetries in `order`
/// (a candidate replaces the best only when strictly smaller).
#[inline]
pub fn canonical_with_order(b: &Board, order: &[u8; 8]) -> (Board, u8) {
    let mut best = transform(b, order[0]);
    let mut best_s = order[0];
    for &s in &order[1..] {
        let c = transform(b, s);
        if (c.player, c.opponent) < (best.player, best.opponent) {
            best = c;
            best_s = s;
        }
    }
    (best, best_s)
}

/// Canonical board with Edax's AVX2 iteration order (the order we write books with).
#[inline]
pub fn canonical(b: &Board) -> (Board, u8) {
    canonical_with_order(b, &AVX2_ORDER)
}

/// The first symmetry `s` in plain order 0..8 with `transform(stored, s) == query`
/// (Edax `position_get_moves`), or `None` when the boards are not equivalent.
pub fn find_symmetry(stored: &Board, query: &Board) -> Option<u8> {
    (0u8..8).find(|&s| transform(stored, s) == *query)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow_transform_bits(b: u64, s: u8) -> u64 {
        let mut r = 0;
        for i in 0..64u8 {
            if b & (1 << i) != 0 {
                let sq = Square::new(i)
                    .map(|q| transform_square(q, s).index())
                    .unwrap_or(0);
                r |= 1 << sq;
            }
        }
        r
    }

    #[test]
    fn bit_transforms_match_square_transforms() {
        let samples = [
            0x0123_4567_89ab_cdefu64,
            1,
            0x8000_0000_0000_0000,
            0x0000_0008_1000_0000,
            0xdead_beef_0bad_f00d,
        ];
        for &b in &samples {
            for s in 0..8 {
                assert_eq!(
                    transform_bits(b, s),
                    slow_transform_bits(b, s),
                    "s={s} b={b:#x}"
                );
            }
        }
    }

    #[test]
    fn inverses() {
        let b = 0x0123_4567_89ab_cdefu64;
        for s in 0..8 {
            assert_eq!(transform_bits(transform_bits(b, s), inverse(s)), b);
        }
    }

    #[test]
    fn start_is_canonical() {
        let (c, s) = canonical(&Board::start());
        assert_eq!(c, Board::start());
        assert_eq!(s, 0);
    }
}
