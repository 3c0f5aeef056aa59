//! Stable discs exactly as Edax's `get_stable_discs` / `get_stability` (edax-spec §8.5).
//!
//! A disc is *stable* when no sequence of future moves can flip it. Edax computes a sound lower
//! bound of that set as the union of:
//! * the exactly stable discs of the four edges, read from a table over every 8-square edge
//!   pattern that considers every possible future filling of the edge line;
//! * the discs of the inner 6×6 (`0x007e7e7e7e7e7e00`) whose four lines (horizontal, vertical and
//!   both diagonals) are full;
//! * iteratively, inner discs that in each of the four directions either lie on a full line or
//!   touch an already stable disc on one side.
//!
//! The stability cutoffs of the search depend on this set, so it reproduces Edax's result bit for
//! bit (the test suite checks the definition, soundness and symmetry invariance).

use std::sync::LazyLock;

/// Inner 6×6 squares (Edax's `P_central` mask).
const CENTRAL: u64 = 0x007e_7e7e_7e7e_7e00;

/// `EDGE_STABLE[p * 256 + o]`: the stable discs of `p` on an 8-square edge line where `p` and `o`
/// are the two sides' discs (bit i = i-th square of the line); 0 when `p & o != 0`.
static EDGE_STABLE: LazyLock<Box<[u8; 65536]>> = LazyLock::new(build_edge_table);

/// Discs flipped on one 8-square line when the side owning `p` plays on the empty square `x`.
const fn line_flips(p: u8, o: u8, x: u32) -> u8 {
    let mut flips = 0u8;
    // Towards lower squares.
    let mut f = 0u8;
    let mut y = x as i32 - 1;
    while y >= 0 && o & (1 << y) != 0 {
        f |= 1 << y;
        y -= 1;
    }
    if y >= 0 && p & (1 << y) != 0 {
        flips |= f;
    }
    // Towards higher squares.
    f = 0;
    y = x as i32 + 1;
    while y < 8 && o & (1 << y) != 0 {
        f |= 1 << y;
        y += 1;
    }
    if y < 8 && p & (1 << y) != 0 {
        flips |= f;
    }
    flips
}

/// Edax's `find_edge_stable`: the subset of `stable` that stays `p`'s under every filling of the
/// empty squares of the line (each empty square may be taken by either side, in any order, with
/// the flips along the line; the square need not flip anything, as it may be played through
/// another direction).
fn find_edge_stable(p: u8, o: u8, mut stable: u8) -> u8 {
    let e = !(p | o);
    stable &= p;
    if stable == 0 || e == 0 {
        return stable;
    }
    for x in 0..8u32 {
        let b = 1u8 << x;
        if e & b == 0 {
            continue;
        }
        // The player plays on x.
        let f = line_flips(p | b, o, x);
        stable = find_edge_stable(p | b | f, o & !f, stable);
        if stable == 0 {
            return 0;
        }
        // The opponent plays on x.
        let f = line_flips(o | b, p, x);
        stable = find_edge_stable(p & !f, o | b | f, stable);
        if stable == 0 {
            return 0;
        }
    }
    stable
}

fn build_edge_table() -> Box<[u8; 65536]> {
    let mut t = Box::new([0u8; 65536]);
    for p in 0..256usize {
        for o in 0..256usize {
            if p & o == 0 {
                // Stability is mirror-symmetric: reuse the mirrored entry when it is done
                // already (as Edax does), halving the start-up cost.
                let (rp, ro) = ((p as u8).reverse_bits(), (o as u8).reverse_bits());
                let r = usize::from(rp) * 256 + usize::from(ro);
                t[p * 256 + o] = if r < p * 256 + o {
                    t[r].reverse_bits()
                } else {
                    find_edge_stable(p as u8, o as u8, p as u8)
                };
            }
        }
    }
    t
}

/// File A (bits 0, 8, …, 56) packed into a byte, rank 1 in bit 0.
#[inline(always)]
fn pack_a(x: u64) -> usize {
    (((x & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080)) >> 56) as usize
}

/// File H (bits 7, 15, …, 63) packed into a byte, rank 1 in bit 0.
#[inline(always)]
fn pack_h(x: u64) -> usize {
    (((x & 0x8080_8080_8080_8080).wrapping_mul(0x0002_0408_1020_4081)) >> 56) as usize
}

/// Inverse of [`pack_a`]: byte bit k goes to square A(k+1).
const UNPACK_A: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut k = 0;
        while k < 8 {
            if i & (1 << k) != 0 {
                t[i] |= 1u64 << (8 * k);
            }
            k += 1;
        }
        i += 1;
    }
    t
};

/// The exactly stable edge discs of `p` (Edax `get_stable_edge`).
#[inline]
fn stable_edge(p: u64, o: u64) -> u64 {
    let t: &[u8; 65536] = &EDGE_STABLE;
    let r1 = t[(p as usize & 0xff) * 256 + (o as usize & 0xff)] as u64;
    let r8 = t[(p >> 56) as usize * 256 + (o >> 56) as usize] as u64;
    let fa = t[pack_a(p) * 256 + pack_a(o)] as usize;
    let fh = t[pack_h(p) * 256 + pack_h(o)] as usize;
    r1 | (r8 << 56) | UNPACK_A[fa] | (UNPACK_A[fh] << 7)
}

/// Squares whose horizontal line (rank) is full.
#[inline(always)]
fn full_h(mut full: u64) -> u64 {
    full &= full >> 1;
    full &= full >> 2;
    full &= full >> 4;
    (full & 0x0101_0101_0101_0101).wrapping_mul(0xff)
}

/// Squares whose vertical line (file) is full.
#[inline(always)]
fn full_v(mut full: u64) -> u64 {
    full &= full.rotate_right(8);
    full &= full.rotate_right(16);
    full &= full.rotate_right(32);
    full
}

/// Squares whose line along `dir` (7 or 9) is full; exact for the inner 6×6 squares (the only
/// ones used), via Kogge-Stone fills stopped at the board's rim.
#[inline(always)]
fn full_diag(line: u64, dir: u32) -> u64 {
    const EDGE: u64 = 0xff81_8181_8181_81ff;
    let mut full_l = line & (EDGE | (line >> dir));
    let mut full_r = line & (EDGE | (line << dir));
    let mut edge_l = EDGE | (EDGE >> dir);
    let mut edge_r = EDGE | (EDGE << dir);
    full_l &= edge_l | (full_l >> (2 * dir));
    full_r &= edge_r | (full_r << (2 * dir));
    edge_l |= edge_l >> (2 * dir);
    edge_r |= edge_r << (2 * dir);
    full_l &= edge_l | (full_l >> (4 * dir));
    full_r &= edge_r | (full_r << (4 * dir));
    full_l & full_r
}

/// The stable discs of `player` against `opponent` (Edax `get_stable_discs`; its popcount is
/// Edax's `get_stability`). Returns a subset of `player`. `player & opponent` must be 0.
///
/// ```
/// use bookfarm_engine::stability::stable_discs;
/// // A lone corner disc is stable; a lone centre disc is not.
/// assert_eq!(stable_discs(1, 0x0000_0010_0000_0000), 1);
/// assert_eq!(stable_discs(0x0000_0008_0000_0000, 0x0000_0010_0000_0000), 0);
/// ```
#[inline(always)]
pub fn stable_discs(player: u64, opponent: u64) -> u64 {
    let disc = player | opponent;
    let p_central = player & CENTRAL;
    let fh = full_h(disc);
    let fv = full_v(disc);
    let fd7 = full_diag(disc, 7);
    let fd9 = full_diag(disc, 9);

    let mut stable = stable_edge(player, opponent);
    stable |= fh & fv & fd7 & fd9 & p_central;
    if stable == 0 {
        return 0;
    }
    loop {
        let old = stable;
        let sh = (stable >> 1) | (stable << 1) | fh;
        let sv = (stable >> 8) | (stable << 8) | fv;
        let s7 = (stable >> 7) | (stable << 7) | fd7;
        let s9 = (stable >> 9) | (stable << 9) | fd9;
        stable |= sh & sv & s7 & s9 & p_central;
        if stable == old {
            return stable;
        }
    }
}

/// Number of stable discs of `player` (Edax `get_stability`).
#[inline]
pub fn stability_count(player: u64, opponent: u64) -> u32 {
    stable_discs(player, opponent).count_ones()
}

/// Force the lazily built edge table (about 64 KiB), e.g. before timing a search.
pub fn init() {
    LazyLock::force(&EDGE_STABLE);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{Board, flips_portable, moves_portable};
    use crate::symmetry::{transform, transform_bits};
    use crate::testutil::{XorShift, random_board};

    #[test]
    #[allow(clippy::identity_op)]
    fn edge_table_basics() {
        init();
        let t: &[u8; 65536] = &EDGE_STABLE;
        // Full line: everything stable.
        assert_eq!(t[0x0f * 256 + 0xf0], 0x0f);
        // A lone corner is stable, a lone C-square is not.
        assert_eq!(t[0x01 * 256], 0x01);
        assert_eq!(t[0x02 * 256], 0x00);
        // Corner plus adjacent run of own discs is stable.
        assert_eq!(t[0x07 * 256], 0x07);
        // Own corner run followed by opponent disc then empty: still stable (anchored at corner).
        assert_eq!(t[0x03 * 256 + 0x04], 0x03);
        // A disc between an opponent corner and an empty square can be flipped.
        assert_eq!(t[0x02 * 256 + 0x01], 0x00);
        // Overlapping patterns are zero.
        assert_eq!(t[0x01 * 256 + 0x01], 0);
        // Every entry equals the direct search (the table reuses mirrored entries).
        for p in 0..256usize {
            for o in 0..256usize {
                if p & o == 0 {
                    assert_eq!(t[p * 256 + o], find_edge_stable(p as u8, o as u8, p as u8));
                    let rp = (p as u8).reverse_bits() as usize;
                    let ro = (o as u8).reverse_bits() as usize;
                    assert_eq!(t[p * 256 + o].reverse_bits(), t[rp * 256 + ro]);
                }
            }
        }
    }

    #[test]
    fn full_lines_are_exact_on_inner_squares() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let disc = rng.next_u64() | rng.next_u64() | rng.next_u64();
            let d7 = full_diag(disc, 7);
            let d9 = full_diag(disc, 9);
            let h = full_h(disc);
            let v = full_v(disc);
            for x in 0..64i32 {
                if CENTRAL & (1 << x) == 0 {
                    continue;
                }
                let (r, c) = (x / 8, x % 8);
                let line_full = |dr: i32, dc: i32| {
                    let mut ok = true;
                    for s in [-1, 1] {
                        let (mut rr, mut cc) = (r, c);
                        while (0..8).contains(&rr) && (0..8).contains(&cc) {
                            ok &= disc & (1u64 << (rr * 8 + cc)) != 0;
                            rr += s * dr;
                            cc += s * dc;
                        }
                    }
                    ok
                };
                let bit = |m: u64| m & (1u64 << x) != 0;
                assert_eq!(bit(h), line_full(0, 1));
                assert_eq!(bit(v), line_full(1, 0));
                assert_eq!(bit(d9), line_full(1, 1), "d9 {disc:#x} {x}");
                assert_eq!(bit(d7), line_full(1, -1), "d7 {disc:#x} {x}");
            }
        }
    }

    #[test]
    fn full_board_is_all_stable() {
        let p = 0x0f0f_0f0f_0f0f_0f0f;
        assert_eq!(stable_discs(p, !p), p);
        assert_eq!(stable_discs(!p, p), !p);
    }

    #[test]
    fn start_position_has_no_stable_discs() {
        let b = Board::start();
        assert_eq!(stable_discs(b.player, b.opponent), 0);
        assert_eq!(stable_discs(b.opponent, b.player), 0);
    }

    #[test]
    fn inner_disc_touching_stable_discs() {
        // Player owns a1, b1, a2 and b2: b2 touches stable a1 (diagonal), b1 / a2 (straight),
        // and its remaining half-lines ... lead to the stable neighbours: it is stable through
        // the iteration (for each direction at least one neighbour is stable).
        let p = (1u64 << 0) | (1 << 1) | (1 << 8) | (1 << 9);
        // a1, b1, a2 stable (edge table); b2 needs a stable neighbour along the a3-c1 diagonal
        // too, which is missing (a3 and c1 are empty): not stable.
        assert_eq!(stable_discs(p, 1 << 63), 0b11 | (1 << 8));
        // Add c1 and a3: b2 now has a stable neighbour in every direction.
        let p2 = p | (1 << 2) | (1 << 16);
        assert_eq!(stable_discs(p2, 1 << 63), p2);
    }

    /// Every disc reported stable stays the player's in random continuations of the game.
    #[test]
    fn stable_discs_never_flip() {
        let mut rng = XorShift(12345);
        for game in 0..300 {
            let start = random_board(&mut rng, 20 + game % 40);
            for (me, them, mover_is_me) in [
                (start.player, start.opponent, true),
                (start.opponent, start.player, false),
            ] {
                let st = stable_discs(me, them);
                assert_eq!(st & !me, 0);
                for _ in 0..4 {
                    // Random continuation to the end, tracking the colour of `me`.
                    let mut b = start;
                    let mut my_turn = mover_is_me;
                    loop {
                        let mine = if my_turn { b.player } else { b.opponent };
                        assert_eq!(st & !mine, 0, "stable disc flipped: {start}");
                        let m = moves_portable(b.player, b.opponent);
                        if m == 0 {
                            if moves_portable(b.opponent, b.player) == 0 {
                                break;
                            }
                            b = b.pass();
                            my_turn = !my_turn;
                            continue;
                        }
                        let x = rng.pick_square(m);
                        b = b.play_flips(x, flips_portable(b.player, b.opponent, x));
                        my_turn = !my_turn;
                    }
                }
            }
        }
    }

    #[test]
    fn symmetric_invariance() {
        let mut rng = XorShift(777);
        for i in 0..500 {
            let b = random_board(&mut rng, 10 + i % 50);
            let st = stable_discs(b.player, b.opponent);
            for s in 0..8 {
                let t = transform(&b, s);
                assert_eq!(stable_discs(t.player, t.opponent), transform_bits(st, s));
            }
        }
    }
}
