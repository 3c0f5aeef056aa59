//! bookfarm's own default evaluation: Edax-layout weights trained by `bookfarm-train` from the
//! game sets in `../shared/data` (see `docs/training.md`), embedded as a gzip-compressed
//! `eval.dat` (the plain file, once decompressed, loads in Edax itself).
//!
//! Use [`default_eval`] wherever no `--eval FILE` is given; report [`DEFAULT_EVAL_VERSION`] and
//! [`DEFAULT_EVAL_FNV1A64`] to identify the weights.

use super::Eval;
use std::io::Read;
use std::sync::{Arc, OnceLock};

/// Name and version of the embedded weights (also stored in the eval.dat header as v.r.b).
pub const DEFAULT_EVAL_VERSION: &str = "bookfarm-eval 1.8.0";

/// FNV-1a 64-bit hash of the decompressed `eval.dat` image (`bookfarm-train info` prints it).
pub const DEFAULT_EVAL_FNV1A64: u64 = 0x38cf_9f82_ff25_87ec;

/// The embedded gzip-compressed `eval.dat`.
pub static DEFAULT_EVAL_GZ: &[u8] = include_bytes!("../../weights/bookfarm-eval-1.8.0.dat.gz");

/// FNV-1a 64-bit hash of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The decompressed default `eval.dat` image (13,952,436 bytes).
pub fn default_eval_dat() -> Vec<u8> {
    let mut out = Vec::with_capacity(super::FILE_SIZE);
    flate2::read::GzDecoder::new(DEFAULT_EVAL_GZ)
        .read_to_end(&mut out)
        .expect("the embedded default weights are a valid gzip stream (checked by tests)");
    out
}

impl Eval {
    /// A fresh copy of bookfarm's default evaluation (decompresses and unpacks the embedded file;
    /// prefer the shared [`default_eval`]).
    pub fn default_weights() -> Eval {
        Eval::from_bytes(&default_eval_dat())
            .expect("the embedded default weights are a complete eval.dat (checked by tests)")
    }
}

static DEFAULT: OnceLock<Arc<Eval>> = OnceLock::new();

/// The default evaluation, built once and shared.
pub fn default_eval() -> Arc<Eval> {
    Arc::clone(DEFAULT.get_or_init(|| Arc::new(Eval::default_weights())))
}

/// True when `eval` is the shared instance returned by [`default_eval`] (a cheap pointer check
/// that never builds the default weights). Weights loaded from a file are that instance when
/// they come through [`eval_from_bytes_shared`] and the file is the default image.
pub fn is_default_eval(eval: &Arc<Eval>) -> bool {
    DEFAULT.get().is_some_and(|d| Arc::ptr_eq(d, eval))
}

/// Parse an `eval.dat` (or `bookfarm-eval2`) image like [`Eval::from_bytes`], returning the
/// shared [`default_eval`] instance when `bytes` is the embedded default image byte for byte.
///
/// Whoever loads weights from a file must use this: a searcher picks the probcut model
/// calibrated for the default weights only for that instance ([`is_default_eval`]), so the
/// default weights read from their file search exactly as the embedded ones and announce the
/// same signature.
pub fn eval_from_bytes_shared(bytes: &[u8]) -> Result<Arc<Eval>, super::EvalError> {
    if bytes.len() == super::FILE_SIZE
        && fnv1a64(bytes) == DEFAULT_EVAL_FNV1A64
        && bytes == default_eval_dat().as_slice()
    {
        return Ok(default_eval());
    }
    Ok(Arc::new(Eval::from_bytes(bytes)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Board;
    use crate::testdata::shared_dir_or_skip;

    #[test]
    fn embedded_file_matches_its_hash_and_size() {
        let img = default_eval_dat();
        assert_eq!(img.len(), super::super::FILE_SIZE);
        assert_eq!(fnv1a64(&img), DEFAULT_EVAL_FNV1A64);
        let e = default_eval();
        let h = e.header();
        assert_eq!(
            format!("bookfarm-eval {}.{}.{}", h.version, h.release, h.build),
            DEFAULT_EVAL_VERSION
        );
        // The start position is balanced: a sane evaluation is close to 0.
        assert!(
            e.eval0(&Board::start()).abs() <= 4,
            "start eval {}",
            e.eval0(&Board::start())
        );
    }

    #[test]
    fn the_default_image_loads_as_the_default_instance() {
        let img = default_eval_dat();
        let e = eval_from_bytes_shared(&img).expect("the default image loads");
        assert!(is_default_eval(&e));
        // Same searches as the embedded weights: the calibrated probcut model, not Edax's.
        let opts = crate::search::SearchOptions::for_eval(&e);
        assert_eq!(
            opts.probcut,
            crate::search::probcut::ProbcutModel::calibrated_default_weights().expect("parses")
        );
        assert_ne!(opts.probcut, crate::search::probcut::ProbcutModel::EDAX);
        // Any other image is a weights instance of its own, with Edax's model.
        let mut other = img.clone();
        let last = other.len() - 1;
        other[last] ^= 1;
        let o = eval_from_bytes_shared(&other).expect("a changed weight still loads");
        assert!(!is_default_eval(&o));
        assert_eq!(
            crate::search::SearchOptions::for_eval(&o).probcut,
            crate::search::probcut::ProbcutModel::EDAX
        );
        // Trailing bytes make another file (another fingerprint): not the default instance.
        let mut longer = img;
        longer.push(0);
        assert!(!is_default_eval(
            &eval_from_bytes_shared(&longer).expect("loads")
        ));
        assert!(eval_from_bytes_shared(&[]).is_err());
    }

    #[test]
    fn default_eval_predicts_exact_endgame_scores() {
        // Regression guard on quality: static MAE against the exact scores of the flippy endgame
        // positions (19–22 empties, none of them in the training set). Weights 1.0.0 measured 8.87,
        // 1.1.0 about 8.0, 1.7.0 and 1.8.0 7.69: the bound fails weights no better than 1.1.0.
        let Some(shared) = shared_dir_or_skip() else {
            return;
        };
        let e = default_eval();
        let mut sum = 0i64;
        let mut n = 0i64;
        for f in ["eg_19_20.txt", "eg_21_22.txt"] {
            let text = std::fs::read_to_string(shared.join("data/ffo/flippy_endgame").join(f))
                .expect("readable");
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let black = fields[1] == "Black";
                let b = Board::from_cells(fields[0], black).expect("valid board");
                let black_score: i32 = fields[3].parse().expect("integer score");
                let score = if black { black_score } else { -black_score };
                sum += i64::from((e.eval0(&b) - score).abs());
                n += 1;
            }
        }
        assert!(n > 900, "only {n} positions read");
        let mae = sum as f64 / n as f64;
        assert!(mae < 8.0, "static MAE {mae:.2} against exact scores");
    }
}
