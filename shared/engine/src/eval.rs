//! Edax's pattern evaluation (edax-spec §8.3, §9): the `eval.dat` weight file, its unpacked
//! per-ply tables and the depth-0 score.
//!
//! The file stores, for each of the 61 plies (`ply = 60 − empties`), 114,364 packed `i16` weights:
//! each family is folded by one board symmetry ([`features::Family::sym`]). Loading unpacks them
//! into 226,315 weights per ply so that an evaluation is the sum of 47 table lookups indexed by the
//! [`Features`] of the position. One [`Eval`] (about 27 MB) is shared read-only between threads,
//! e.g. through an `Arc<Eval>`.

pub mod default;
pub mod extra;
pub mod features;

pub use default::{
    DEFAULT_EVAL_FNV1A64, DEFAULT_EVAL_VERSION, default_eval, eval_from_bytes_shared,
    is_default_eval,
};
pub use features::{FEATURE_OFFSET, Features, Lanes, N_FEATURES, N_PACKED, N_WEIGHTS};

use crate::board::Board;
use features::FAMILIES;
use std::path::{Path, PathBuf};

/// Number of plies (0..=60) with their own weights.
pub const N_PLY: usize = 61;
/// Size of the file header.
pub const HEADER_SIZE: usize = 28;
/// Exact size of a complete `eval.dat` (trailing bytes are accepted and ignored).
pub const FILE_SIZE: usize = HEADER_SIZE + N_PLY * N_PACKED * 2;

/// `edax_header` value ("EDAX").
pub const EDAX_MAGIC: u32 = 0x4544_4158;
/// `eval_header` value ("EVAL").
pub const EVAL_MAGIC: u32 = 0x4556_414C;
/// `edax_header` as read from a file written with the opposite byte order.
pub const EDAX_MAGIC_SWAPPED: u32 = 0x5841_4445;
/// `eval_header` as read from a file written with the opposite byte order.
pub const EVAL_MAGIC_SWAPPED: u32 = 0x4C41_5645;

/// Stride of one ply in the unpacked table (one padding weight keeps it even).
const STRIDE: usize = N_WEIGHTS + 1;

/// The weights an evaluation may address from the start of its ply: any `u16` index past the
/// largest feature offset. Reading through a `&[i16; WINDOW]` lets the compiler drop the 47
/// per-look-up bounds checks (an in-family index is below `3^10`, so only real weights are read).
const WINDOW: usize = FEATURE_OFFSET[N_FEATURES - 1] as usize + u16::MAX as usize + 1;

/// Zero weights after the last ply, so that the last ply's window is inside the table.
const PAD: usize = WINDOW - STRIDE;

/// Length of the unpacked table.
const TABLE_LEN: usize = N_PLY * STRIDE + PAD;

/// Largest static score (a static evaluation is never ±64).
pub const EVAL_MAX: i32 = 63;

/// An `eval.dat` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The file could not be read.
    #[error("cannot read evaluation file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The data is shorter than a complete file.
    #[error("evaluation data too short: {len} bytes, expected at least {expected}")]
    TooShort {
        /// Bytes available.
        len: usize,
        /// Bytes required.
        expected: usize,
    },
    /// A `bookfarm-eval2` file of another layout than this build's.
    #[error(
        "bookfarm-eval2 layout not supported: version {version}, {extra_len} extra weights per ply, {plies} plies"
    )]
    Eval2Layout {
        /// Layout version.
        version: u32,
        /// Extra weights per ply.
        extra_len: u32,
        /// Ply count.
        plies: u32,
    },
    /// Neither header field carries an Edax magic number.
    #[error(
        "not an edax evaluation file: header {edax:#010x} {eval:#010x} (expected \"EDAX\"/\"EVAL\")"
    )]
    BadMagic {
        /// First header word.
        edax: u32,
        /// Second header word.
        eval: u32,
    },
}

/// The informational header fields (Edax prints but never checks them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalHeader {
    /// Version number.
    pub version: u32,
    /// Release number.
    pub release: u32,
    /// Build number.
    pub build: u32,
    /// Date as stored (a C `double`).
    pub date: f64,
}

/// Magic of a `bookfarm-eval2` file (Edax's patterns plus [`extra`] terms).
pub const EVAL2_MAGIC: &[u8; 8] = b"BFEVAL2\0";
/// Version of the `bookfarm-eval2` layout (2: the counts and the three extra patterns; version 1,
/// the counts alone, is no longer read).
pub const EVAL2_VERSION: u32 = 2;
/// Size of the `bookfarm-eval2` header: magic, version, extra length, ply count.
pub const EVAL2_HEADER: usize = 8 + 4 + 4 + 4;

/// The weight-file format of an [`Eval`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalFormat {
    /// Edax's `eval.dat`: the 47 pattern features.
    EdaxEvalDat,
    /// `bookfarm-eval2`: Edax's patterns plus the [`extra`] terms (mobility, potential mobility,
    /// quadrant parity, three 10-square patterns).
    Bookfarm2,
}

impl EvalFormat {
    /// Short name, as it appears in search signatures (`eval2:` prefix) and reports.
    pub fn name(self) -> &'static str {
        match self {
            EvalFormat::EdaxEvalDat => "edax-eval.dat",
            EvalFormat::Bookfarm2 => "bookfarm-eval2",
        }
    }
}

/// Unpacked evaluation weights for plies 0..=60.
pub struct Eval {
    header: EvalHeader,
    /// `TABLE_LEN` weights; ply `p` starts at `p * STRIDE` (the last [`PAD`] are zeros).
    weights: Vec<i16>,
    /// `bookfarm-eval2` only: [`extra::EXTRA_LEN`] weights per ply, ply-major.
    extra: Option<Vec<i16>>,
    /// Bit `ply` set when that ply has a non-zero extra weight: the other plies skip the extra
    /// terms, which would add 0.
    extra_live: u64,
}

impl std::fmt::Debug for Eval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eval")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// For one family: `pack[i]` = packed index of unpacked index `i` (edax-spec §9.3).
pub fn pack_table(len: u32, sym: &[u32]) -> Vec<u32> {
    let n = 3usize.pow(len);
    let mut pow3 = vec![1usize; len as usize + 1];
    for k in 1..pow3.len() {
        pow3[k] = pow3[k - 1] * 3;
    }
    let mut pack = vec![0u32; n];
    let mut next = 0u32;
    for i in 0..n {
        let mut j = 0usize;
        for (k, &s) in sym.iter().enumerate() {
            let d = (i / pow3[s as usize]) % 3;
            j += d * pow3[k];
        }
        if j < i {
            pack[i] = pack[j];
        } else {
            pack[i] = next;
            next += 1;
        }
    }
    pack
}

impl Eval {
    /// Load an `eval.dat` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Eval, EvalError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Eval::from_bytes(&bytes)
    }

    /// Parse the bytes of an `eval.dat` with Edax's checks: one correct magic is enough, the
    /// byte-swapped variant is accepted, every ply must be complete, trailing bytes are ignored.
    pub fn from_bytes(bytes: &[u8]) -> Result<Eval, EvalError> {
        if bytes.starts_with(EVAL2_MAGIC) {
            return Eval::from_eval2_bytes(bytes);
        }
        if bytes.len() < FILE_SIZE {
            return Err(EvalError::TooShort {
                len: bytes.len(),
                expected: FILE_SIZE,
            });
        }
        let word =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let edax = word(0);
        let eval = word(4);
        let native = edax == EDAX_MAGIC || eval == EVAL_MAGIC;
        let swapped_magic = edax == EDAX_MAGIC_SWAPPED || eval == EVAL_MAGIC_SWAPPED;
        if !native && !swapped_magic {
            return Err(EvalError::BadMagic { edax, eval });
        }
        let swap = edax == EDAX_MAGIC_SWAPPED;
        let fix32 = |v: u32| if swap { v.swap_bytes() } else { v };
        let mut date = [0u8; 8];
        date.copy_from_slice(&bytes[20..28]);
        let header = EvalHeader {
            version: fix32(word(8)),
            release: fix32(word(12)),
            build: fix32(word(16)),
            date: f64::from_le_bytes(date),
        };
        let packs: Vec<Vec<u32>> = FAMILIES.iter().map(|f| pack_table(f.len, f.sym)).collect();
        let mut weights = vec![0i16; TABLE_LEN];
        let mut packed = vec![0i16; N_PACKED];
        for ply in 0..N_PLY {
            let base = HEADER_SIZE + ply * N_PACKED * 2;
            for (i, w) in packed.iter_mut().enumerate() {
                let o = base + 2 * i;
                let v = i16::from_le_bytes([bytes[o], bytes[o + 1]]);
                *w = if swap { v.swap_bytes() } else { v };
            }
            let out = &mut weights[ply * STRIDE..(ply + 1) * STRIDE];
            let mut poff = 0usize;
            for (fam, pack) in FAMILIES.iter().zip(&packs) {
                for (i, &p) in pack.iter().enumerate() {
                    out[fam.offset + i] = packed[poff + p as usize];
                }
                poff += fam.packed;
            }
        }
        Ok(Eval {
            header,
            weights,
            extra: None,
            extra_live: 0,
        })
    }

    /// Parse a `bookfarm-eval2` image: magic, u32 version, u32 extra length per ply, u32 ply
    /// count (all little endian), a complete `eval.dat` image, then the extra weights (`i16`,
    /// ply-major).
    fn from_eval2_bytes(bytes: &[u8]) -> Result<Eval, EvalError> {
        let expected = EVAL2_HEADER + FILE_SIZE + N_PLY * extra::EXTRA_LEN * 2;
        if bytes.len() < expected {
            return Err(EvalError::TooShort {
                len: bytes.len(),
                expected,
            });
        }
        let word =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let (version, len, plies) = (word(8), word(12), word(16));
        if version != EVAL2_VERSION || len as usize != extra::EXTRA_LEN || plies as usize != N_PLY {
            return Err(EvalError::Eval2Layout {
                version,
                extra_len: len,
                plies,
            });
        }
        let mut e = Eval::from_bytes(&bytes[EVAL2_HEADER..EVAL2_HEADER + FILE_SIZE])?;
        let start = EVAL2_HEADER + FILE_SIZE;
        e.set_extra(
            bytes[start..expected]
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]))
                .collect(),
        );
        Ok(e)
    }

    /// The file format of these weights.
    pub fn format(&self) -> EvalFormat {
        if self.extra.is_some() {
            EvalFormat::Bookfarm2
        } else {
            EvalFormat::EdaxEvalDat
        }
    }

    /// The same pattern weights with extra-term weights `extra(ply, index)` for every ply
    /// 0..=60 and index 0..[`extra::EXTRA_LEN`]: a `bookfarm-eval2` evaluation.
    pub fn with_extra(mut self, mut extra: impl FnMut(usize, usize) -> i16) -> Eval {
        let mut x = vec![0i16; N_PLY * extra::EXTRA_LEN];
        for ply in 0..N_PLY {
            for i in 0..extra::EXTRA_LEN {
                x[ply * extra::EXTRA_LEN + i] = extra(ply, i);
            }
        }
        self.set_extra(x);
        self
    }

    /// Install the extra weights ([`N_PLY`] blocks of [`extra::EXTRA_LEN`]) and note which plies
    /// have any.
    fn set_extra(&mut self, x: Vec<i16>) {
        self.extra_live = x
            .chunks_exact(extra::EXTRA_LEN)
            .enumerate()
            .filter(|(_, w)| w.iter().any(|&v| v != 0))
            .fold(0, |live, (ply, _)| live | 1 << ply);
        self.extra = Some(x);
    }

    /// The extra-term weights of one ply (`bookfarm-eval2` only), or `None` when they are all
    /// zero (the terms would add nothing, so evaluations skip them).
    #[inline(always)]
    pub fn extra_weights(&self, ply: usize) -> Option<&[i16]> {
        if self.extra_live & (1 << ply) == 0 {
            return None;
        }
        self.extra
            .as_deref()
            .map(|x| &x[ply * extra::EXTRA_LEN..(ply + 1) * extra::EXTRA_LEN])
    }

    /// The file image: `eval.dat` for Edax-format weights, `bookfarm-eval2` otherwise.
    pub fn to_file_bytes(&self) -> Vec<u8> {
        let dat = self.to_bytes();
        let Some(x) = &self.extra else { return dat };
        let mut out = Vec::with_capacity(EVAL2_HEADER + dat.len() + x.len() * 2);
        out.extend_from_slice(EVAL2_MAGIC);
        out.extend_from_slice(&EVAL2_VERSION.to_le_bytes());
        out.extend_from_slice(&(extra::EXTRA_LEN as u32).to_le_bytes());
        out.extend_from_slice(&(N_PLY as u32).to_le_bytes());
        out.extend_from_slice(&dat);
        for v in x {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Build an evaluation from unpacked weights: `weights(ply, index)` for every ply 0..=60 and
    /// unpacked index 0..[`N_WEIGHTS`]. Indices folded together by the packing must agree; the
    /// smallest unpacked index of each class wins.
    pub fn from_fn(header: EvalHeader, mut weights: impl FnMut(usize, usize) -> i16) -> Eval {
        let mut w = vec![0i16; TABLE_LEN];
        for ply in 0..N_PLY {
            for i in 0..N_WEIGHTS {
                w[ply * STRIDE + i] = weights(ply, i);
            }
        }
        // Re-fold so that symmetric indices share one weight, as in a file.
        let e = Eval {
            header,
            weights: w,
            extra: None,
            extra_live: 0,
        };
        match Eval::from_bytes(&e.to_bytes()) {
            Ok(folded) => folded,
            Err(_) => unreachable!("to_bytes always writes a complete, valid file"),
        }
    }

    /// The header fields.
    pub fn header(&self) -> EvalHeader {
        self.header
    }

    /// Serialize as a little-endian `eval.dat` (packing each family back; the weight of a packed
    /// slot is the one of its smallest unpacked index).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FILE_SIZE);
        out.extend_from_slice(&EDAX_MAGIC.to_le_bytes());
        out.extend_from_slice(&EVAL_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.header.version.to_le_bytes());
        out.extend_from_slice(&self.header.release.to_le_bytes());
        out.extend_from_slice(&self.header.build.to_le_bytes());
        out.extend_from_slice(&self.header.date.to_le_bytes());
        let packs: Vec<Vec<u32>> = FAMILIES.iter().map(|f| pack_table(f.len, f.sym)).collect();
        let mut packed = vec![0i16; N_PACKED];
        for ply in 0..N_PLY {
            let w = self.ply_weights(ply);
            let mut poff = 0usize;
            for (fam, pack) in FAMILIES.iter().zip(&packs) {
                // Walk downwards so the smallest unpacked index of each class is written last.
                for (i, &p) in pack.iter().enumerate().rev() {
                    packed[poff + p as usize] = w[fam.offset + i];
                }
                poff += fam.packed;
            }
            for v in &packed {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    /// Write [`Eval::to_file_bytes`] to a file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), EvalError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_file_bytes()).map_err(|source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The unpacked weights of one ply (`ply` ≤ 60).
    #[inline]
    pub fn ply_weights(&self, ply: usize) -> &[i16] {
        &self.weights[ply * STRIDE..ply * STRIDE + N_WEIGHTS]
    }

    /// Raw weight sum of a position with `empties` empty squares (0..=60) and its features.
    #[inline(always)]
    pub fn raw(&self, features: &Features, empties: u32) -> i32 {
        self.raw_indices(features.indices(), empties)
    }

    /// Raw weight sum for explicit feature indices (see [`Features::child_indices`]).
    #[inline(always)]
    pub fn raw_indices(&self, indices: &Lanes, empties: u32) -> i32 {
        self.ply(empties).raw(indices)
    }

    /// The weights of positions with `empties` empty squares (0..=60), for several evaluations
    /// at one ply (the slice is checked once).
    #[inline(always)]
    pub fn ply(&self, empties: u32) -> PlyWeights<'_> {
        let base = 60usize.saturating_sub(empties as usize) * STRIDE;
        PlyWeights(
            self.weights[base..base + WINDOW]
                .try_into()
                .expect("a window of WINDOW weights"),
        )
    }

    /// Raw weight sum of a board, encoded from scratch (patterns and, for `bookfarm-eval2`,
    /// the extra terms).
    pub fn raw_board(&self, board: &Board) -> i32 {
        self.raw(&Features::new(board), board.empties())
            + self.extra_raw(board.player, board.opponent, board.empties())
    }

    /// Sum of the extra terms' weights for `own` to move against `other` with `empties` empty
    /// squares (0 for Edax-format weights).
    #[inline(always)]
    pub fn extra_raw(&self, own: u64, other: u64, empties: u32) -> i32 {
        match self.extra_weights(60usize.saturating_sub(empties as usize)) {
            Some(w) => extra_sum(w, &extra::extra_indices(own, other)),
            None => 0,
        }
    }

    /// Edax's depth-0 score of a board (`search_eval_0`): rounded and clamped to ±63.
    pub fn eval0(&self, board: &Board) -> i32 {
        round_clamp(self.raw_board(board))
    }
}

/// The weights of one ply, with the padding that lets any `u16` index be read unchecked.
#[derive(Debug, Clone, Copy)]
pub struct PlyWeights<'a>(&'a [i16; WINDOW]);

impl PlyWeights<'_> {
    /// Raw weight sum for feature indices (see [`Features::child_indices`]). Always inlined, so
    /// that the search's x86-64-v3 copy gets it compiled with its features.
    #[inline(always)]
    pub fn raw(&self, indices: &Lanes) -> i32 {
        let w = self.0;
        let i = &indices.0;
        // Unrolled with constant offsets: one index load, one weight load and one add per feature.
        macro_rules! sum {
            ($($k:literal)*) => {
                0 $(+ i32::from(w[FEATURE_OFFSET[$k] as usize + usize::from(i[$k])]))*
            };
        }
        sum!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
            33 34 35 36 37 38 39 40 41 42 43 44 45 46)
    }
}

/// Sum of one ply's extra weights `w` at the indices `idx` (from [`extra::extra_indices`]).
#[inline(always)]
pub fn extra_sum(w: &[i16], idx: &[u32; extra::N_EXTRA]) -> i32 {
    idx.iter().map(|&i| i32::from(w[i as usize])).sum()
}

/// Round a raw sum to discs half away from zero (C truncation of `(raw ± 64) / 128`), then clamp
/// to [−63, 63] (edax-spec §8.3).
#[inline]
pub fn round_clamp(raw: i32) -> i32 {
    let q = if raw > 0 {
        (raw + 64) / 128
    } else {
        (raw - 64) / 128
    };
    q.clamp(-EVAL_MAX, EVAL_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::shared_dir_or_skip;

    fn seed1() -> Option<Vec<u8>> {
        let dir = shared_dir_or_skip()?;
        Some(std::fs::read(dir.join("golden/eval-seed1.dat")).expect("eval-seed1.dat readable"))
    }

    #[test]
    fn pack_sizes() {
        for f in FAMILIES.iter() {
            let p = pack_table(f.len, f.sym);
            let n = p.iter().max().map_or(0, |m| *m as usize + 1);
            assert_eq!(n, f.packed, "family {}", f.name);
        }
    }

    #[test]
    fn rounding() {
        assert_eq!(round_clamp(0), 0);
        assert_eq!(round_clamp(63), 0);
        assert_eq!(round_clamp(64), 1);
        assert_eq!(round_clamp(-63), 0);
        assert_eq!(round_clamp(-64), -1);
        assert_eq!(round_clamp(191), 1);
        assert_eq!(round_clamp(192), 2);
        assert_eq!(round_clamp(64 * 128), 63);
        assert_eq!(round_clamp(-64 * 128), -63);
        assert_eq!(round_clamp(i32::MAX / 2), 63);
    }

    #[test]
    fn load_and_round_trip() {
        let Some(bytes) = seed1() else { return };
        assert_eq!(bytes.len(), FILE_SIZE);
        let e = Eval::from_bytes(&bytes).expect("valid file");
        assert_eq!(e.header().build, 1);
        assert_eq!(
            e.to_bytes(),
            bytes,
            "writer reproduces the file byte for byte"
        );
        // Symmetric indices share one weight: A1 C1 … of C9 mirrored gives the same weight.
        let t = pack_table(9, FAMILIES[0].sym);
        let w = e.ply_weights(30);
        for i in 0..t.len() {
            let j = t
                .iter()
                .position(|&p| p == t[i])
                .expect("class has a first member");
            assert_eq!(w[i], w[j]);
        }
        // Trailing bytes are ignored.
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"trailing");
        let e2 = Eval::from_bytes(&longer).expect("trailing bytes accepted");
        assert_eq!(e2.to_bytes(), bytes);
    }

    #[test]
    fn lax_magic_and_byte_swap() {
        let Some(bytes) = seed1() else { return };
        let reference = Eval::from_bytes(&bytes).expect("valid file");
        // Only one magic field correct: accepted.
        let mut one = bytes.clone();
        one[0..4].copy_from_slice(&0u32.to_le_bytes());
        assert!(Eval::from_bytes(&one).is_ok());
        let mut other = bytes.clone();
        other[4..8].copy_from_slice(&0u32.to_le_bytes());
        assert!(Eval::from_bytes(&other).is_ok());
        // Both wrong: rejected with a clear error.
        let mut bad = bytes.clone();
        bad[0..8].copy_from_slice(&[0; 8]);
        let err = Eval::from_bytes(&bad).expect_err("both magics wrong");
        assert!(err.to_string().contains("not an edax evaluation file"));
        // Byte-swapped file (written on a big-endian machine): same weights.
        let mut sw = bytes.clone();
        for o in (0..20).step_by(4) {
            sw[o..o + 4].reverse();
        }
        for o in (HEADER_SIZE..FILE_SIZE).step_by(2) {
            sw.swap(o, o + 1);
        }
        let e = Eval::from_bytes(&sw).expect("swapped file accepted");
        assert_eq!(e.header().build, reference.header().build);
        assert_eq!(e.to_bytes(), bytes);
    }

    #[test]
    fn truncated_and_missing() {
        let Some(bytes) = seed1() else { return };
        let err = Eval::from_bytes(&bytes[..FILE_SIZE - 2]).expect_err("truncated");
        assert!(matches!(err, EvalError::TooShort { .. }));
        assert!(Eval::from_bytes(&[]).is_err());
        let err = Eval::load("/nonexistent/eval.dat").expect_err("missing");
        assert!(err.to_string().starts_with("cannot read evaluation file"));
    }

    #[test]
    fn from_fn_folds_and_evaluates() {
        // A synthetic eval: only the constant weight, set per ply.
        let e = Eval::from_fn(
            EvalHeader {
                version: 0,
                release: 0,
                build: 0,
                date: 0.0,
            },
            |ply, i| {
                if i == N_WEIGHTS - 1 {
                    ply as i16 * 128
                } else {
                    0
                }
            },
        );
        let b = Board::start();
        assert_eq!(e.raw_board(&b), 0);
        let b1 = b
            .play(crate::Square::parse("f5").expect("f5"))
            .expect("legal");
        assert_eq!(e.eval0(&b1), 1);
        let reloaded = Eval::from_bytes(&e.to_bytes()).expect("round trip");
        assert_eq!(reloaded.to_bytes(), e.to_bytes());
    }

    #[test]
    fn eval2_skips_plies_without_extra_weights_and_rejects_version_1() {
        let header = EvalHeader {
            version: 0,
            release: 0,
            build: 0,
            date: 0.0,
        };
        let base = Eval::from_fn(header, |ply, i| ((ply * 31 + i * 7) % 97) as i16 - 48);
        // Extra weights at ply 40 only: one triangle weight for every empty-corner look-up.
        let triangle_empty = extra::EXTRA_OFFSETS[extra::N_COUNTS];
        let e2 = Eval::from_bytes(&base.to_bytes())
            .expect("reloads")
            .with_extra(|ply, i| {
                if ply == 40 && i == triangle_empty {
                    128
                } else {
                    0
                }
            });
        assert!(e2.extra_weights(39).is_none() && e2.extra_weights(41).is_none());
        assert!(e2.extra_weights(40).is_some());
        let image = e2.to_file_bytes();
        let back = Eval::from_bytes(&image).expect("eval2 image loads");
        assert_eq!(back.format(), EvalFormat::Bookfarm2);
        assert!(back.extra_weights(39).is_none() && back.extra_weights(40).is_some());
        // Positions of other plies evaluate as the patterns alone.
        let mut b = Board::start();
        for x in [
            "f5", "d6", "c3", "d3", "c4", "f4", "c5", "b3", "c2", "e3", "d2", "c6",
        ] {
            b = b
                .play(crate::Square::parse(x).expect("square"))
                .expect("legal");
            assert_eq!(back.raw_board(&b), base.raw_board(&b), "{b}");
        }
        // 20 empties (ply 40): the triangles of a1 and h8, each read by two look-ups (the
        // pattern and its mirror about the diagonal cover the same squares), add 4 × 128.
        let tri_a1: u64 = extra::PATTERNS[0].iter().map(|&q| 1u64 << q).sum();
        let empty = tri_a1 | tri_a1.reverse_bits();
        let own = !empty & 0x5555_5555_5555_5555;
        let b20 = Board::new(own, !empty & !own).expect("disjoint");
        assert_eq!(b20.empties(), 20);
        assert_eq!(
            back.raw_board(&b20) - base.raw_board(&b20),
            4 * 128,
            "{b20}"
        );
        // Version 1 images (the counts alone) are refused with a clear error.
        let mut v1 = image.clone();
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        let err = Eval::from_bytes(&v1).expect_err("version 1");
        assert!(
            matches!(err, EvalError::Eval2Layout { version: 1, .. }),
            "{err}"
        );
    }
}
