//! Lookup tables for the fast flip backends, all built at compile time by `const fn`.
//!
//! Directions are numbered so that index `d` in `0..4` of [`RAY_UP`] goes towards higher square
//! indices (east +1, north +8, north-east +9, north-west +7) and the same index of [`RAY_DOWN`]
//! goes the opposite way (west −1, south −8, south-west −9, south-east −7).

/// Square-index steps of the four "upward" directions, as `(file step, rank step)`.
const UP_STEPS: [(i32, i32); 4] = [(1, 0), (0, 1), (1, 1), (-1, 1)];

/// The squares reached from `x` by repeatedly stepping `(df, dr)`, `x` itself excluded.
const fn ray(x: usize, df: i32, dr: i32) -> u64 {
    let mut f = (x & 7) as i32 + df;
    let mut r = (x >> 3) as i32 + dr;
    let mut m = 0u64;
    while f >= 0 && f < 8 && r >= 0 && r < 8 {
        m |= 1u64 << (r * 8 + f);
        f += df;
        r += dr;
    }
    m
}

const fn build_rays(sign: i32) -> [[u64; 4]; 64] {
    let mut t = [[0u64; 4]; 64];
    let mut x = 0;
    while x < 64 {
        let mut d = 0;
        while d < 4 {
            t[x][d] = ray(x, UP_STEPS[d].0 * sign, UP_STEPS[d].1 * sign);
            d += 1;
        }
        x += 1;
    }
    t
}

/// A 32-byte aligned row of four masks, so the AVX2 backend can load it with one aligned load.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub(crate) struct Lanes(pub [u64; 4]);

const fn align_rows(rows: [[u64; 4]; 64]) -> [Lanes; 64] {
    let mut t = [Lanes([0; 4]); 64];
    let mut x = 0;
    while x < 64 {
        t[x] = Lanes(rows[x]);
        x += 1;
    }
    t
}

/// `RAY_UP[x][d]`: squares strictly beyond `x` in upward direction `d`, up to the board edge.
pub(crate) static RAY_UP: [Lanes; 64] = align_rows(build_rays(1));
/// `RAY_DOWN[x][d]`: squares strictly beyond `x` in downward direction `d`, up to the board edge.
pub(crate) static RAY_DOWN: [Lanes; 64] = align_rows(build_rays(-1));

/// `LINE[x][d]`: the full line through `x` (both rays plus `x`): rank, file, diagonal, anti-diagonal.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // used by the BMI2 backend
pub(crate) static LINE: [[u64; 4]; 64] = {
    let up = build_rays(1);
    let down = build_rays(-1);
    let mut t = [[0u64; 4]; 64];
    let mut x = 0;
    while x < 64 {
        let mut d = 0;
        while d < 4 {
            t[x][d] = up[x][d] | down[x][d] | (1u64 << x);
            d += 1;
        }
        x += 1;
    }
    t
};

/// `LINE_POS[x][d]`: the position of `x` inside `LINE[x][d]` once the line is packed by `pext`
/// (the number of line squares with a lower index than `x`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // used by the BMI2 backend
pub(crate) static LINE_POS: [[u8; 4]; 64] = {
    let mut t = [[0u8; 4]; 64];
    let mut x = 0;
    while x < 64 {
        let mut d = 0;
        while d < 4 {
            t[x][d] = (LINE[x][d] & ((1u64 << x) - 1)).count_ones() as u8;
            d += 1;
        }
        x += 1;
    }
    t
};

/// `OUTFLANK[pos][inner]`: on a packed line of up to 8 cells with the mover at `pos`, and the
/// opponent occupying the inner cells `inner << 1` (cells 1..=6; end cells can never flip), the
/// cells just past each run of at least one opponent disc adjacent to `pos`. A run that reaches
/// the end of a short (diagonal) line yields a cell past the line, where the packed player line
/// is always 0, so ANDing the result with the packed player line is exact.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // used by the BMI2 backend
pub(crate) static OUTFLANK: [[u8; 64]; 8] = {
    let mut t = [[0u8; 64]; 8];
    let mut pos = 0;
    while pos < 8 {
        let mut inner = 0;
        while inner < 64 {
            let o = (inner as u32) << 1;
            let mut out = 0u32;
            let mut i = pos + 1;
            while i < 8 && o & (1 << i) != 0 {
                i += 1;
            }
            if i > pos + 1 && i < 8 {
                out |= 1 << i;
            }
            let mut j = pos as i32 - 1;
            while j >= 0 && o & (1 << j) != 0 {
                j -= 1;
            }
            if j < pos as i32 - 1 && j >= 0 {
                out |= 1 << j;
            }
            t[pos][inner] = out as u8;
            inner += 1;
        }
        pos += 1;
    }
    t
};

/// `FLIPPED[pos][out]`: the cells strictly between `pos` and every cell of `out` on a packed line.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // used by the BMI2 backend
pub(crate) static FLIPPED: [[u8; 256]; 8] = {
    let mut t = [[0u8; 256]; 8];
    let mut pos = 0;
    while pos < 8 {
        let mut out = 0;
        while out < 256 {
            let mut f = 0u32;
            let mut j = 0;
            while j < 8 {
                if out & (1 << j) != 0 {
                    let (lo, hi) = if j < pos { (j, pos) } else { (pos, j) };
                    let mut k = lo + 1;
                    while k < hi {
                        f |= 1 << k;
                        k += 1;
                    }
                }
                j += 1;
            }
            t[pos][out] = f as u8;
            out += 1;
        }
        pos += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rays_of_corner_and_centre() {
        // a1: east is b1..h1, north is a2..a8, north-east is the long diagonal, north-west is empty.
        assert_eq!(
            RAY_UP[0].0,
            [0xfe, 0x0101_0101_0101_0100, 0x8040_2010_0804_0200, 0]
        );
        assert_eq!(RAY_DOWN[0].0, [0, 0, 0, 0]);
        // Every line holds its own square and the two rays.
        for (x, lines) in LINE.iter().enumerate() {
            for (d, &line) in lines.iter().enumerate() {
                let (up, down) = (RAY_UP[x].0[d], RAY_DOWN[x].0[d]);
                assert_eq!(up & down, 0);
                assert_eq!(line, up | down | (1u64 << x));
                assert_eq!(line.count_ones(), up.count_ones() + down.count_ones() + 1);
            }
        }
    }

    #[test]
    fn outflank_and_flipped_examples() {
        // Mover at cell 0, opponents on cells 1 and 2: outflank cell 3, flipping cells 1 and 2.
        assert_eq!(OUTFLANK[0][0b11], 0b1000);
        assert_eq!(FLIPPED[0][0b1000], 0b0110);
        // Mover at cell 7, opponent on cell 6 only (inner bit 5): outflank cell 5, flipping cell 6.
        assert_eq!(OUTFLANK[7][0b10_0000], 0b10_0000);
        assert_eq!(FLIPPED[7][0b10_0000], 0b100_0000);
        // A run over every inner cell is outflanked by the end cell 7.
        assert_eq!(OUTFLANK[0][0b11_1111], 0b1000_0000);
        assert_eq!(FLIPPED[0][0b1000_0000], 0b0111_1110);
    }
}
