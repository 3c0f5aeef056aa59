//! Branch-light flip computation from per-square line masks, and Edax's `count_last_flip`
//! equivalent for the last empty square.
//!
//! For each square and each of the 8 directions, `LINES[x][d]` holds the squares strictly beyond
//! `x` in that direction. Directions 0..4 go towards higher bit indices (E, N, NE, NW), 4..8 towards
//! lower ones (W, S, SW, SE), so the nearest square is the lowest (resp. highest) set bit.

/// `LINES[x][d]`: the squares beyond `x` in direction `d`.
pub(crate) static LINES: [[u64; 8]; 64] = build_lines();

const fn build_lines() -> [[u64; 8]; 64] {
    // (file step, rank step); the first four increase the bit index.
    const DIRS: [(i32, i32); 8] = [
        (1, 0),
        (0, 1),
        (1, 1),
        (-1, 1),
        (-1, 0),
        (0, -1),
        (-1, -1),
        (1, -1),
    ];
    let mut t = [[0u64; 8]; 64];
    let mut x = 0;
    while x < 64 {
        let mut d = 0;
        while d < 8 {
            let (df, dr) = DIRS[d];
            let mut f = (x % 8) as i32 + df;
            let mut r = (x / 8) as i32 + dr;
            let mut m = 0u64;
            while f >= 0 && f < 8 && r >= 0 && r < 8 {
                m |= 1u64 << (r * 8 + f);
                f += df;
                r += dr;
            }
            t[x][d] = m;
            d += 1;
        }
        x += 1;
    }
    t
}

/// Legal moves of `p` against `o` (Kogge-Stone fills in the 8 directions), always inlined so
/// that it is compiled with the caller's target features.
#[inline(always)]
pub(crate) fn moves(p: u64, o: u64) -> u64 {
    #[inline(always)]
    fn dir(p: u64, o: u64, sh: u32, left: bool) -> u64 {
        let step = |b: u64| if left { b << sh } else { b >> sh };
        let mut t = step(p) & o;
        t |= step(t) & o;
        let o2 = o & step(o);
        let step2 = |b: u64| if left { b << (2 * sh) } else { b >> (2 * sh) };
        t |= step2(t) & o2;
        t |= step2(t) & o2;
        step(t)
    }
    let h = o & 0x7e7e_7e7e_7e7e_7e7e;
    let m = dir(p, h, 1, true)
        | dir(p, h, 1, false)
        | dir(p, o, 8, true)
        | dir(p, o, 8, false)
        | dir(p, h, 7, true)
        | dir(p, h, 7, false)
        | dir(p, h, 9, true)
        | dir(p, h, 9, false);
    m & !(p | o)
}

/// `NEIGHBOUR[x]`: the up to 8 squares adjacent to `x`. A move on `x` can only be legal when
/// one of them holds an opponent disc (a cheap pre-filter before computing flips).
pub(crate) static NEIGHBOUR: [u64; 64] = {
    let mut t = [0u64; 64];
    let mut x = 0;
    while x < 64 {
        let (f, r) = ((x % 8) as i32, (x / 8) as i32);
        let mut m = 0u64;
        let mut dr = -1;
        while dr <= 1 {
            let mut df = -1;
            while df <= 1 {
                let (ff, rr) = (f + df, r + dr);
                if (dr != 0 || df != 0) && ff >= 0 && ff < 8 && rr >= 0 && rr < 8 {
                    m |= 1u64 << (rr * 8 + ff);
                }
                df += 1;
            }
            dr += 1;
        }
        t[x] = m;
        x += 1;
    }
    t
};

/// Bits strictly above bit `i` (0 for `i == 63`).
#[inline(always)]
const fn above(i: u32) -> u64 {
    (u64::MAX << i) ^ (1u64 << i)
}

/// Discs flipped when `p` plays on the empty square `x` against `o` (0 if the move is illegal).
#[inline(always)]
pub(crate) fn flips(p: u64, o: u64, x: usize) -> u64 {
    let l = &LINES[x];
    let mut f = 0u64;
    let not_o = !o;
    // Upward directions: the nearest non-opponent square is the lowest set bit.
    let mut d = 0;
    while d < 4 {
        let m = l[d];
        let b = m & not_o;
        let first = b & b.wrapping_neg();
        if first & p != 0 {
            f |= m & (first - 1);
        }
        d += 1;
    }
    // Downward directions: the nearest non-opponent square is the highest set bit.
    while d < 8 {
        let m = l[d];
        let b = m & not_o;
        if b != 0 {
            let i = 63 - b.leading_zeros();
            if (p >> i) & 1 != 0 {
                f |= m & above(i);
            }
        }
        d += 1;
    }
    f
}

/// `LINE_FLIPS[i][pattern]`: discs flipped along one line of eight squares when the mover plays
/// its square `i`, every other square of the line being occupied; bit `j` of `pattern` is set
/// when square `j` of the line holds a mover's disc (bit `i` is ignored). Squares off the board
/// (short diagonals) read as opponent discs at the far ends of the line, where no mover disc
/// can follow them, so they never count.
static LINE_FLIPS: [[u8; 256]; 8] = {
    let mut t = [[0u8; 256]; 8];
    let mut i = 0;
    while i < 8 {
        let mut pattern = 0;
        while pattern < 256 {
            let mut n = 0;
            // Towards higher squares, then towards lower ones.
            let mut j = i + 1;
            while j < 8 && pattern & (1 << j) == 0 {
                j += 1;
            }
            if j < 8 {
                n += j - i - 1;
            }
            let mut j = i as i32 - 1;
            while j >= 0 && pattern & (1 << j) == 0 {
                j -= 1;
            }
            if j >= 0 {
                n += i - j as usize - 1;
            }
            t[i][pattern] = n as u8;
            pattern += 1;
        }
        i += 1;
    }
    t
};

/// The a1–h8 diagonal and the h1–a8 anti-diagonal through each square.
static DIAGONALS: [[u64; 2]; 64] = {
    let mut t = [[0u64; 2]; 64];
    let mut x = 0;
    while x < 64 {
        t[x] = [
            LINES[x][2] | LINES[x][6] | 1 << x,
            LINES[x][3] | LINES[x][7] | 1 << x,
        ];
        x += 1;
    }
    t
};

/// Number of discs `p` flips by playing the last empty square `x`, every other square being
/// occupied (the opponent owns `!p` minus `x`). Edax's `count_last_flip`: the four lines through
/// `x` are gathered into 8-bit patterns (a row by a shift, a column and the two diagonals by a
/// multiplication that moves each square to its rank or file bit without carries) and looked up
/// in [`LINE_FLIPS`].
#[inline(always)]
pub(crate) fn last_flip_count(p: u64, x: usize) -> u32 {
    const A_FILE: u64 = 0x0101_0101_0101_0101;
    let (file, rank) = (x & 7, x >> 3);
    let row = (p >> (8 * rank)) as u8;
    // a-file bit of rank r -> bit 56 + r.
    let col = ((((p >> file) & A_FILE).wrapping_mul(0x0102_0408_1020_4080)) >> 56) as u8;
    // Each diagonal square sits on its own file: summing the ranks keeps one bit per file.
    let [d, a] = DIAGONALS[x];
    let diag = ((p & d).wrapping_mul(A_FILE) >> 56) as u8;
    let anti = ((p & a).wrapping_mul(A_FILE) >> 56) as u8;
    u32::from(LINE_FLIPS[file][usize::from(row)])
        + u32::from(LINE_FLIPS[rank][usize::from(col)])
        + u32::from(LINE_FLIPS[file][usize::from(diag)])
        + u32::from(LINE_FLIPS[file][usize::from(anti)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::flips_portable;
    use crate::testutil::XorShift;

    #[test]
    fn flips_match_portable() {
        let mut r = XorShift(0x1234_5678_9abc_def1);
        for _ in 0..20000 {
            let occ = r.next_u64() | r.next_u64();
            let p = occ & r.next_u64();
            let o = occ & !p;
            for x in 0..64u8 {
                if occ & (1 << x) == 0 {
                    assert_eq!(flips(p, o, x as usize), flips_portable(p, o, x));
                }
            }
        }
    }

    #[test]
    fn moves_match_portable() {
        let mut r = XorShift(7);
        for _ in 0..20000 {
            let occ = r.next_u64() | r.next_u64();
            let p = occ & r.next_u64();
            let o = occ & !p;
            assert_eq!(moves(p, o), crate::board::moves_portable(p, o));
        }
    }

    #[test]
    fn last_flip_count_matches_portable() {
        let mut r = XorShift(42);
        for _ in 0..20000 {
            let x = (r.next_u64() % 64) as u8;
            let p = r.next_u64() & !(1u64 << x);
            let o = !p & !(1u64 << x);
            assert_eq!(
                last_flip_count(p, x as usize),
                flips_portable(p, o, x).count_ones()
            );
        }
    }
}
