//! Evaluation weights as the runner uses them: loaded from a file or the embedded default, with
//! the fingerprint and search signature every worker announces.

use bookfarm_engine::eval::Eval;
use std::sync::Arc;

/// The evaluation weights could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadEvalError {
    /// The file could not be read.
    #[error("reading evaluation {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid eval.dat.
    #[error("loading evaluation {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parse error.
        #[source]
        source: bookfarm_engine::eval::EvalError,
    },
}

/// A stable fingerprint of evaluation weights: 64-bit FNV-1a of the bytes, as 16 hex digits.
///
/// Workers send it with every call; a coordinator configured with an evaluation refuses workers
/// whose weights differ, since their scores would not be comparable.
pub fn eval_fingerprint(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The search signature of the engine searchers ([`crate::exec::EngineSearcher`]) over `eval`,
/// whose fingerprint is `eval_hash`, as the text workers send.
pub fn signature(eval: &Arc<Eval>, eval_hash: &str) -> String {
    use bookfarm_engine::search::{SearchOptions, SearchSignature};
    SearchSignature::new(&SearchOptions::for_eval(eval), eval_hash).to_string()
}

/// Load evaluation weights from `path`, or bookfarm's embedded default weights when `None`;
/// returns them with their fingerprint ([`eval_fingerprint`] of the file bytes).
pub fn load_eval(path: Option<&std::path::Path>) -> Result<(Arc<Eval>, String), LoadEvalError> {
    match path {
        Some(p) => {
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|source| LoadEvalError::Read {
                path: name.clone(),
                source,
            })?;
            let e = Eval::from_bytes(&bytes)
                .map_err(|source| LoadEvalError::Parse { path: name, source })?;
            Ok((Arc::new(e), eval_fingerprint(&bytes)))
        }
        None => {
            let bytes = bookfarm_engine::eval::default::default_eval_dat();
            Ok((
                bookfarm_engine::eval::default_eval(),
                eval_fingerprint(&bytes),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_fnv1a() {
        // Known FNV-1a 64 test vectors.
        assert_eq!(eval_fingerprint(b""), "cbf29ce484222325");
        assert_eq!(eval_fingerprint(b"a"), "af63dc4c8601ec8c");
    }
}
