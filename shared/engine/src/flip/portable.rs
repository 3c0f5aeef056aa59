//! Fast portable backends: bit-scan flips over precomputed rays and doubling-fill mobility.
//!
//! Both are plain integer code that every target compiles; they are the fallback when no
//! `std::arch` backend is available and are cross-checked against [`crate::board::flips_portable`]
//! and [`crate::board::moves_portable`].

use super::tables::{RAY_DOWN, RAY_UP};

/// Discs flipped when `player` plays `x` (bit-scan method, as Edax's `flip_bitscan`).
///
/// In each upward ray the first square that is not an opponent disc is isolated with
/// `b & -b`; in each downward ray with a leading-zero count. When that square holds a player
/// disc, the ray squares in between (all opponent discs by construction) flip.
#[inline]
pub fn flips_bitscan(player: u64, opponent: u64, x: u8) -> u64 {
    let up = &RAY_UP[usize::from(x & 63)].0;
    let down = &RAY_DOWN[usize::from(x & 63)].0;
    let mut flipped = 0u64;
    let mut d = 0;
    while d < 4 {
        // Upward: lowest non-opponent square of the ray.
        let m = up[d];
        let b = !opponent & m;
        let out = b & b.wrapping_neg() & player;
        // `out - 1` are the squares below the outflanking disc; zero when nothing outflanks.
        flipped |= out.wrapping_sub(u64::from(out != 0)) & m;

        // Downward: highest non-opponent square of the ray. `| 1` keeps the shift in range when
        // `b == 0`; square a1 then selected is either off the ray or an opponent disc, so the
        // AND with `player` clears it.
        let m = down[d];
        let b = !opponent & m;
        let out = ((1u64 << 63) >> (b | 1).leading_zeros()) & player & m;
        // Squares above the outflanking disc, restricted to the ray; zero when `out == 0`.
        flipped |= (out << 1).wrapping_neg() & m;
        d += 1;
    }
    flipped
}

const NOT_EDGE_FILES: u64 = 0x7e7e_7e7e_7e7e_7e7e;

/// Moves reached by shifting left by `s` through runs of `o` (already edge-masked as needed).
#[inline(always)]
fn fill_left(p: u64, o: u64, s: u32) -> u64 {
    let mut f = o & (p << s);
    f |= o & (f << s);
    let pre = o & (o << s);
    let s2 = s + s;
    f |= pre & (f << s2);
    f |= pre & (f << s2);
    f << s
}

/// Moves reached by shifting right by `s` through runs of `o`.
#[inline(always)]
fn fill_right(p: u64, o: u64, s: u32) -> u64 {
    let mut f = o & (p >> s);
    f |= o & (f >> s);
    let pre = o & (o >> s);
    let s2 = s + s;
    f |= pre & (f >> s2);
    f |= pre & (f >> s2);
    f >> s
}

/// Legal-move mask with the doubling fill (as Edax's generic `get_moves`): three shift steps
/// per direction cover runs of up to six opponent discs.
///
/// Horizontal and diagonal directions mask the opponent to files b..g, so a run can never wrap
/// from the h-file to the a-file; the final shift starts from files b..g and cannot wrap either.
#[inline]
pub fn moves_doubling(player: u64, opponent: u64) -> u64 {
    let inner = opponent & NOT_EDGE_FILES;
    let moves = fill_left(player, inner, 1)
        | fill_right(player, inner, 1)
        | fill_left(player, opponent, 8)
        | fill_right(player, opponent, 8)
        | fill_left(player, inner, 7)
        | fill_right(player, inner, 7)
        | fill_left(player, inner, 9)
        | fill_right(player, inner, 9);
    moves & !(player | opponent)
}
