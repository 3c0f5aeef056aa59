//! The coordinator's evaluation, fetched and cached: a worker started without `--eval` asks
//! the coordinator which weights it searches with (`GetSetup`); the embedded default needs
//! nothing, other weights are read from the cache (`<cache dir>/eval/<fingerprint>.dat`) or
//! downloaded (`FetchEvaluation`, a stream of chunks) and cached. Sizes are bounded and checked
//! before anything is read past them; a file is used only when its fingerprint is the one asked
//! for and it parses; a bad cache file is removed and fetched again.

use bookfarm_engine::eval::Eval;
use bookfarm_proto::eval_fingerprint;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest evaluation file a worker accepts (bookfarm's and Edax's are about 14 MB).
pub const MAX_EVAL_BYTES: u64 = 64 * 1024 * 1024;

/// Why the coordinator's evaluation could not be had.
#[derive(Debug, thiserror::Error)]
pub enum EvalFetchError {
    /// The announced or received size is over the bound.
    #[error(
        "the coordinator's evaluation is {0} bytes, more than the {MAX_EVAL_BYTES} a worker accepts"
    )]
    TooLarge(u64),
    /// The stream did not carry what it announced.
    #[error("the evaluation stream is malformed: {0}")]
    Malformed(String),
    /// The bytes are not the weights asked for.
    #[error("the evaluation received has fingerprint {got}, not the coordinator's {want}")]
    Fingerprint {
        /// Fingerprint of what arrived.
        got: String,
        /// Fingerprint asked for.
        want: String,
    },
    /// The bytes are not an eval.dat.
    #[error("the evaluation received does not load: {0}")]
    Parse(#[from] bookfarm_engine::eval::EvalError),
    /// The call failed.
    #[error("fetching the evaluation: {0}")]
    Call(String),
    /// The cache could not be written.
    #[error("caching the evaluation in {path}: {source}")]
    Cache {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
}

/// Collects a stream of evaluation chunks: the first announces the total size (checked against
/// the bound before anything is kept), none may run past it, and the end must reach it.
#[derive(Debug)]
pub struct Assembler {
    want: String,
    total: Option<u64>,
    buf: Vec<u8>,
}

impl Assembler {
    /// Expect the weights of fingerprint `want`.
    pub fn new(want: &str) -> Assembler {
        Assembler {
            want: want.to_string(),
            total: None,
            buf: Vec::new(),
        }
    }

    /// One chunk: `total` is read from the first one only.
    pub fn push(&mut self, total: u64, data: &[u8]) -> Result<(), EvalFetchError> {
        let total = match self.total {
            Some(t) => t,
            None => {
                if total > MAX_EVAL_BYTES {
                    return Err(EvalFetchError::TooLarge(total));
                }
                if total == 0 {
                    return Err(EvalFetchError::Malformed("no size announced".into()));
                }
                self.total = Some(total);
                self.buf
                    .reserve_exact(usize::try_from(total).unwrap_or(usize::MAX));
                total
            }
        };
        let after = self.buf.len() as u64 + data.len() as u64;
        if after > total {
            return Err(EvalFetchError::Malformed(format!(
                "{after} bytes received, {total} announced"
            )));
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The stream ended: the whole file, checked (size, fingerprint, parse).
    pub fn finish(self) -> Result<(Vec<u8>, Arc<Eval>), EvalFetchError> {
        let total = self.total.unwrap_or(0);
        if self.buf.is_empty() || self.buf.len() as u64 != total {
            return Err(EvalFetchError::Malformed(format!(
                "{} bytes received, {total} announced",
                self.buf.len()
            )));
        }
        let got = eval_fingerprint(&self.buf);
        if got != self.want {
            return Err(EvalFetchError::Fingerprint {
                got,
                want: self.want,
            });
        }
        let eval = Arc::new(Eval::from_bytes(&self.buf)?);
        Ok((self.buf, eval))
    }
}

/// Where the weights of fingerprint `hash` are cached under `cache_dir`.
pub fn cache_path(cache_dir: &Path, hash: &str) -> PathBuf {
    cache_dir.join("eval").join(format!("{hash}.dat"))
}

/// The cached weights of fingerprint `hash`, checked before use (size bound, fingerprint,
/// parse); a file that fails a check is removed (it is fetched again). None: not cached.
pub fn cached(cache_dir: &Path, hash: &str) -> Option<Arc<Eval>> {
    // Only a fingerprint's characters make a file name.
    if hash.is_empty() || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let p = cache_path(cache_dir, hash);
    let len = std::fs::metadata(&p).ok()?.len();
    let ok = (len <= MAX_EVAL_BYTES)
        .then(|| std::fs::read(&p).ok())
        .flatten()
        .filter(|b| eval_fingerprint(b) == hash)
        .and_then(|b| Eval::from_bytes(&b).ok());
    match ok {
        Some(e) => Some(Arc::new(e)),
        None => {
            tracing::warn!(path = %p.display(), "cached evaluation is damaged: removed, fetching it again");
            let _ = std::fs::remove_file(&p);
            None
        }
    }
}

/// Cache checked weights under their fingerprint (a temporary file renamed into place, so that
/// a reader never sees half a file).
pub fn store(cache_dir: &Path, hash: &str, bytes: &[u8]) -> Result<PathBuf, EvalFetchError> {
    let p = cache_path(cache_dir, hash);
    let err = |source| EvalFetchError::Cache {
        path: p.display().to_string(),
        source,
    };
    let dir = p.parent().unwrap_or(cache_dir);
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(&p).map_err(|e| err(e.error))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_bytes() -> Vec<u8> {
        bookfarm_engine::eval::default::default_eval_dat().to_vec()
    }

    #[test]
    fn a_stream_is_checked_against_its_announced_size_and_fingerprint() {
        let bytes = default_bytes();
        let hash = eval_fingerprint(&bytes);
        let total = bytes.len() as u64;
        // In chunks: the weights, loaded.
        let mut a = Assembler::new(&hash);
        for c in bytes.chunks(1 << 20) {
            a.push(total, c).unwrap();
        }
        let (got, _) = a.finish().unwrap();
        assert_eq!(got, bytes);
        // Oversize announced: refused before anything is kept.
        let mut a = Assembler::new(&hash);
        assert!(matches!(
            a.push(MAX_EVAL_BYTES + 1, &[0]),
            Err(EvalFetchError::TooLarge(_))
        ));
        // More than announced.
        let mut a = Assembler::new(&hash);
        a.push(4, &[1, 2, 3]).unwrap();
        assert!(matches!(
            a.push(4, &[4, 5]),
            Err(EvalFetchError::Malformed(_))
        ));
        // Short, or other weights.
        let mut a = Assembler::new(&hash);
        a.push(total, &bytes[..100]).unwrap();
        assert!(matches!(a.finish(), Err(EvalFetchError::Malformed(_))));
        let mut a = Assembler::new("0123456789abcdef");
        a.push(total, &bytes).unwrap();
        assert!(matches!(
            a.finish(),
            Err(EvalFetchError::Fingerprint { .. })
        ));
    }

    #[test]
    fn a_damaged_cache_file_is_removed_and_a_good_one_used() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = default_bytes();
        let hash = eval_fingerprint(&bytes);
        assert!(cached(dir.path(), &hash).is_none(), "nothing cached yet");
        let p = store(dir.path(), &hash, &bytes).unwrap();
        assert_eq!(p, cache_path(dir.path(), &hash));
        assert!(cached(dir.path(), &hash).is_some());
        // Damaged on disk: removed, not used.
        std::fs::write(&p, &bytes[..1000]).unwrap();
        assert!(cached(dir.path(), &hash).is_none());
        assert!(!p.exists());
        // A name that is not a fingerprint is never a path.
        assert!(cached(dir.path(), "../../etc/passwd").is_none());
    }
}
