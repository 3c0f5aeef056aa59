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

/// The fingerprint of loaded weights: [`eval_fingerprint`] of the file bytes, prefixed by the
/// format's name for any format other than Edax's eval.dat (`bookfarm-eval2:0123…`), so that a
/// search signature names the evaluation format.
pub fn format_fingerprint(eval: &Eval, bytes: &[u8]) -> String {
    match eval.format() {
        bookfarm_engine::eval::EvalFormat::EdaxEvalDat => eval_fingerprint(bytes),
        other => format!("{}:{}", other.name(), eval_fingerprint(bytes)),
    }
}

/// Load evaluation weights from `path`, or bookfarm's embedded default weights when `None`;
/// returns them with their fingerprint ([`format_fingerprint`] of the file bytes).
pub fn load_eval(path: Option<&std::path::Path>) -> Result<(Arc<Eval>, String), LoadEvalError> {
    match path {
        Some(p) => {
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|source| LoadEvalError::Read {
                path: name.clone(),
                source,
            })?;
            // The default image comes back as the shared default instance (same probcut model,
            // same signature as the embedded weights).
            let e = bookfarm_engine::eval::eval_from_bytes_shared(&bytes)
                .map_err(|source| LoadEvalError::Parse { path: name, source })?;
            let fingerprint = format_fingerprint(&e, &bytes);
            Ok((e, fingerprint))
        }
        None => {
            let bytes = bookfarm_engine::eval::default::default_eval_dat();
            let e = bookfarm_engine::eval::default_eval();
            let fingerprint = format_fingerprint(&e, &bytes);
            Ok((e, fingerprint))
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

    #[test]
    fn the_fingerprint_names_a_bookfarm_eval2_file() {
        let e = Arc::new(Eval::default_weights().with_extra(|_, _| 0));
        let bytes = e.to_file_bytes();
        let fp = format_fingerprint(&e, &bytes);
        assert_eq!(fp, format!("bookfarm-eval2:{}", eval_fingerprint(&bytes)));
        assert!(signature(&e, &fp).contains("eval=bookfarm-eval2:"));
        // Edax-format weights keep the bare hash (signatures of existing books are unchanged).
        let (_, default_fp) = load_eval(None).expect("default");
        assert_eq!(
            default_fp,
            eval_fingerprint(&bookfarm_engine::eval::default::default_eval_dat())
        );
    }

    #[test]
    fn the_default_weights_file_searches_as_the_embedded_weights() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eval.dat");
        std::fs::write(&path, bookfarm_engine::eval::default::default_eval_dat()).expect("write");
        let (embedded, embedded_fp) = load_eval(None).expect("default");
        let (from_file, file_fp) = load_eval(Some(&path)).expect("file");
        assert!(bookfarm_engine::eval::is_default_eval(&from_file));
        assert_eq!(file_fp, embedded_fp);
        // Same probcut model, so the same signature as every worker on the embedded weights.
        assert_eq!(
            signature(&from_file, &file_fp),
            signature(&embedded, &embedded_fp)
        );
    }
}
