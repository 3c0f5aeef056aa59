//! x86-64 backends behind runtime feature detection: BMI2 (`pext`/`pdep` line lookups) and AVX2
//! (four directions per 256-bit vector).
//!
//! Every function here carries `#[target_feature]`; callers must have checked the feature with
//! `is_x86_feature_detected!` first (see [`super::Backend::is_available`]).

use super::tables::{FLIPPED, LINE, LINE_POS, Lanes, OUTFLANK, RAY_DOWN, RAY_UP};
use std::arch::x86_64::{
    __m256i, _mm_cvtsi128_si64, _mm_or_si128, _mm_unpackhi_epi64, _mm256_add_epi64,
    _mm256_and_si256, _mm256_andnot_si256, _mm256_castsi256_si128, _mm256_cmpeq_epi64,
    _mm256_extracti128_si256, _mm256_load_si256, _mm256_lzcnt_epi64, _mm256_or_si256,
    _mm256_set1_epi64x, _mm256_setr_epi64x, _mm256_setzero_si256, _mm256_slli_epi64,
    _mm256_sllv_epi64, _mm256_srlv_epi64, _mm256_sub_epi64, _pdep_u64, _pext_u64,
};

/// Discs flipped on one line through `x` (`d` in `0..4`), by packing the line with `pext`,
/// looking up the outflanking cells and the flipped cells, and unpacking with `pdep`.
#[inline]
#[target_feature(enable = "bmi2")]
fn line_flips(player: u64, opponent: u64, x: usize, d: usize) -> u64 {
    let mask = LINE[x][d];
    let pos = usize::from(LINE_POS[x][d]);
    let o = _pext_u64(opponent, mask);
    let p = _pext_u64(player, mask);
    let out = OUTFLANK[pos][((o >> 1) & 0x3f) as usize] & (p as u8);
    _pdep_u64(u64::from(FLIPPED[pos][usize::from(out)]), mask)
}

/// Discs flipped when `player` plays `x`, with BMI2 line lookups (as Edax's `flip_bmi2`).
#[inline]
#[target_feature(enable = "bmi2")]
pub fn flips_bmi2(player: u64, opponent: u64, x: u8) -> u64 {
    let x = usize::from(x & 63);
    line_flips(player, opponent, x, 0)
        | line_flips(player, opponent, x, 1)
        | line_flips(player, opponent, x, 2)
        | line_flips(player, opponent, x, 3)
}

/// OR of the four 64-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn or_lanes(v: __m256i) -> u64 {
    let h = _mm_or_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let h = _mm_or_si128(h, _mm_unpackhi_epi64(h, h));
    _mm_cvtsi128_si64(h) as u64
}

/// Loads one 32-byte aligned row of four ray masks.
#[inline]
#[target_feature(enable = "avx2")]
fn load(row: &Lanes) -> __m256i {
    // SAFETY: `Lanes` is `repr(C, align(32))` around `[u64; 4]`, so the pointer is valid for a
    // 32-byte read and 32-byte aligned as `_mm256_load_si256` requires; AVX2 is enabled here.
    unsafe { _mm256_load_si256(std::ptr::from_ref(row).cast::<__m256i>()) }
}

/// Discs flipped when `player` plays `x`, four directions per vector (as Edax's `flip_avx_ppfill`).
///
/// Upward rays isolate their first non-opponent square with `b & -b` in each lane; downward rays
/// use a doubling fill with per-lane variable shifts (AVX2 has no 64-bit leading-zero count).
#[inline]
#[target_feature(enable = "avx2")]
pub fn flips_avx2(player: u64, opponent: u64, x: u8) -> u64 {
    let x = usize::from(x & 63);
    let zero = _mm256_setzero_si256();
    let pp = _mm256_set1_epi64x(player as i64);
    let oo = _mm256_set1_epi64x(opponent as i64);

    // Upward rays (east, north, north-east, north-west).
    let mu = load(&RAY_UP[x]);
    let b = _mm256_andnot_si256(oo, mu);
    let out = _mm256_and_si256(_mm256_and_si256(b, _mm256_sub_epi64(zero, b)), pp);
    let below = _mm256_and_si256(_mm256_add_epi64(out, _mm256_set1_epi64x(-1)), mu);
    let up = _mm256_andnot_si256(_mm256_cmpeq_epi64(out, zero), below);

    // Downward rays (west, south, south-west, south-east): shifts 1, 8, 9, 7 to the right.
    let md = load(&RAY_DOWN[x]);
    let s1 = _mm256_setr_epi64x(1, 8, 9, 7);
    let s2 = _mm256_setr_epi64x(2, 16, 18, 14);
    let e = _mm256_and_si256(oo, md);
    let mut f = _mm256_and_si256(
        e,
        _mm256_srlv_epi64(_mm256_set1_epi64x((1u64 << x) as i64), s1),
    );
    f = _mm256_or_si256(f, _mm256_and_si256(e, _mm256_srlv_epi64(f, s1)));
    let pre = _mm256_and_si256(e, _mm256_srlv_epi64(e, s1));
    f = _mm256_or_si256(f, _mm256_and_si256(pre, _mm256_srlv_epi64(f, s2)));
    f = _mm256_or_si256(f, _mm256_and_si256(pre, _mm256_srlv_epi64(f, s2)));
    // The square just past each run; only it can hold a player disc.
    let out = _mm256_and_si256(_mm256_and_si256(_mm256_srlv_epi64(f, s1), pp), md);
    let down = _mm256_andnot_si256(_mm256_cmpeq_epi64(out, zero), f);

    or_lanes(_mm256_or_si256(up, down))
}

/// Discs flipped when `player` plays `x`, with AVX-512 CD/VL (as Edax's `flip_avx512cd`): the
/// bit-scan method of [`super::portable::flips_bitscan`] on four rays per vector, the downward
/// rays using the per-lane leading-zero count `vplzcntq`.
#[inline]
#[target_feature(enable = "avx2,avx512cd,avx512vl")]
pub fn flips_avx512(player: u64, opponent: u64, x: u8) -> u64 {
    let x = usize::from(x & 63);
    let zero = _mm256_setzero_si256();
    let pp = _mm256_set1_epi64x(player as i64);
    let oo = _mm256_set1_epi64x(opponent as i64);

    // Upward rays: lowest non-opponent square, `b & -b` (the same lines as in `flips_avx2`, kept
    // inline so each kernel stays one straight-line function under its own target features).
    let mu = load(&RAY_UP[x]);
    let b = _mm256_andnot_si256(oo, mu);
    let out = _mm256_and_si256(_mm256_and_si256(b, _mm256_sub_epi64(zero, b)), pp);
    let below = _mm256_and_si256(_mm256_add_epi64(out, _mm256_set1_epi64x(-1)), mu);
    let up = _mm256_andnot_si256(_mm256_cmpeq_epi64(out, zero), below);

    // Downward rays: highest non-opponent square, `(1 << 63) >> lzcnt(b | 1)`; as in the
    // portable code, the `| 1` only ever selects a1 when it is off the ray or an opponent disc.
    let md = load(&RAY_DOWN[x]);
    let b = _mm256_or_si256(_mm256_andnot_si256(oo, md), _mm256_set1_epi64x(1));
    let top = _mm256_srlv_epi64(_mm256_set1_epi64x(i64::MIN), _mm256_lzcnt_epi64(b));
    let out = _mm256_and_si256(_mm256_and_si256(top, pp), md);
    // Ray squares above the outflanking disc: -(out << 1), zero when `out == 0`.
    let down = _mm256_and_si256(_mm256_sub_epi64(zero, _mm256_slli_epi64::<1>(out)), md);

    or_lanes(_mm256_or_si256(up, down))
}

/// Legal-move mask, four directions per vector (as Edax's `get_moves_avx2`): the doubling fill of
/// [`super::portable::moves_doubling`] run on lanes with shifts 1, 8, 9, 7 in both senses.
#[inline]
#[target_feature(enable = "avx2")]
pub fn moves_avx2(player: u64, opponent: u64) -> u64 {
    let pp = _mm256_set1_epi64x(player as i64);
    let inner = 0x7e7e_7e7e_7e7e_7e7e_i64;
    // Vertical runs need no file mask; the others are kept off the a- and h-files to avoid wraps.
    let mo = _mm256_and_si256(
        _mm256_set1_epi64x(opponent as i64),
        _mm256_setr_epi64x(inner, -1, inner, inner),
    );
    let s1 = _mm256_setr_epi64x(1, 8, 9, 7);
    let s2 = _mm256_setr_epi64x(2, 16, 18, 14);

    let mut l = _mm256_and_si256(mo, _mm256_sllv_epi64(pp, s1));
    let mut r = _mm256_and_si256(mo, _mm256_srlv_epi64(pp, s1));
    l = _mm256_or_si256(l, _mm256_and_si256(mo, _mm256_sllv_epi64(l, s1)));
    r = _mm256_or_si256(r, _mm256_and_si256(mo, _mm256_srlv_epi64(r, s1)));
    let pre_l = _mm256_and_si256(mo, _mm256_sllv_epi64(mo, s1));
    let pre_r = _mm256_and_si256(mo, _mm256_srlv_epi64(mo, s1));
    l = _mm256_or_si256(l, _mm256_and_si256(pre_l, _mm256_sllv_epi64(l, s2)));
    r = _mm256_or_si256(r, _mm256_and_si256(pre_r, _mm256_srlv_epi64(r, s2)));
    l = _mm256_or_si256(l, _mm256_and_si256(pre_l, _mm256_sllv_epi64(l, s2)));
    r = _mm256_or_si256(r, _mm256_and_si256(pre_r, _mm256_srlv_epi64(r, s2)));
    let m = _mm256_or_si256(_mm256_sllv_epi64(l, s1), _mm256_srlv_epi64(r, s1));
    or_lanes(m) & !(player | opponent)
}
