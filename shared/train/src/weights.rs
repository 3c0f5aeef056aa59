//! Weight files for the trainer: the engine's [`Eval`] (edax-spec §9.1 reader and writer) plus the
//! gzip container the engine embeds, and the conversion from the fitter's packed blocks.

use crate::features::{Layout, N_PLIES, PACKED_PER_PLY};
use bookfarm_engine::eval::{Eval, EvalError, EvalHeader, FILE_SIZE};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::io::{Read, Write};
use std::path::Path;

pub use bookfarm_engine::eval::default::fnv1a64;

/// Errors reading or writing weight files.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The file could not be read, or the gzip stream is corrupt.
    #[error("cannot read weights {path}: {source}")]
    Io {
        /// The file (`-` for in-memory data).
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The (decompressed) data is not a usable eval.dat.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// A packed weight vector of the wrong length.
    #[error("packed weights hold {0} values, expected {expected}", expected = N_PLIES * PACKED_PER_PLY)]
    PackedLength(usize),
}

/// Parse a plain or gzip-compressed (`1f 8b` magic) eval.dat image.
pub fn from_bytes(bytes: &[u8]) -> Result<Eval, WeightsError> {
    Ok(Eval::from_bytes(&decompressed(bytes)?)?)
}

/// The plain image of a plain or gzip-compressed (`1f 8b` magic) file.
fn decompressed(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, WeightsError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::with_capacity(FILE_SIZE);
        GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .map_err(|source| WeightsError::Io {
                path: "-".into(),
                source,
            })?;
        Ok(raw.into())
    } else {
        Ok(bytes.into())
    }
}

/// [`load`] as a shared instance: the engine's default instance when the (decompressed) file is
/// the embedded default image ([`bookfarm_engine::eval::eval_from_bytes_shared`]), so that a
/// search with it uses the default weights' probcut model, as with no file at all.
pub fn load_shared(path: &Path) -> Result<std::sync::Arc<Eval>, WeightsError> {
    let with_path = |e: WeightsError| match e {
        WeightsError::Io { source, .. } => WeightsError::Io {
            path: path.display().to_string(),
            source,
        },
        other => other,
    };
    let bytes = std::fs::read(path).map_err(|source| WeightsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let raw = decompressed(&bytes).map_err(with_path)?;
    Ok(bookfarm_engine::eval::eval_from_bytes_shared(&raw)?)
}

/// Load a plain or gzip-compressed eval.dat file.
pub fn load(path: &Path) -> Result<Eval, WeightsError> {
    let bytes = std::fs::read(path).map_err(|source| WeightsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    from_bytes(&bytes).map_err(|e| match e {
        WeightsError::Io { source, .. } => WeightsError::Io {
            path: path.display().to_string(),
            source,
        },
        other => other,
    })
}

/// The gzip-compressed file image of `eval` (what the engine embeds): an eval.dat, or a
/// `bookfarm-eval2` file for weights with extra terms.
pub fn to_eval_dat_gz(eval: &Eval) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    enc.write_all(&eval.to_file_bytes())
        .and_then(|()| enc.finish())
        .expect("gzip into a Vec cannot fail")
}

/// Build an engine evaluation from ply-major packed weights
/// (`packed[ply * PACKED_PER_PLY + offset]`, offsets as in [`Layout::packed_offsets`]).
pub fn from_packed(header: EvalHeader, packed: &[i16]) -> Result<Eval, WeightsError> {
    if packed.len() != N_PLIES * PACKED_PER_PLY {
        return Err(WeightsError::PackedLength(packed.len()));
    }
    let map = &Layout::get().packed_of_unpacked;
    Ok(Eval::from_fn(header, |ply, i| {
        packed[ply * PACKED_PER_PLY + map[i] as usize]
    }))
}

/// `v.r.b` of an eval.dat header.
pub fn version_string(h: &EvalHeader) -> String {
    format!("{}.{}.{}", h.version, h.release, h.build)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> EvalHeader {
        EvalHeader {
            version: 1,
            release: 2,
            build: 3,
            date: 0.0,
        }
    }

    #[test]
    fn packed_weights_are_written_verbatim() {
        // The engine's writer packs the weights back: the file body is the packed vector itself.
        let packed: Vec<i16> = (0..N_PLIES * PACKED_PER_PLY)
            .map(|i| ((i * 31) % 2001) as i16 - 1000)
            .collect();
        let e = from_packed(header(), &packed).expect("complete vector");
        let img = e.to_bytes();
        assert_eq!(img.len(), FILE_SIZE);
        assert_eq!(&img[0..8], b"XADELAVE");
        let body: Vec<i16> = img[28..]
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(body, packed);
        let gz = to_eval_dat_gz(&e);
        let back = from_bytes(&gz).expect("valid gzip");
        assert_eq!(back.to_bytes(), img);
        assert_eq!(version_string(&back.header()), "1.2.3");
        assert!(matches!(
            from_packed(header(), &packed[1..]),
            Err(WeightsError::PackedLength(_))
        ));
    }

    #[test]
    fn shipped_gzip_loads_as_the_engine_default() {
        use bookfarm_engine::eval::default::{DEFAULT_EVAL_FNV1A64, DEFAULT_EVAL_GZ, default_eval};
        let e = from_bytes(DEFAULT_EVAL_GZ).expect("embedded weights");
        let img = e.to_bytes();
        assert_eq!(fnv1a64(&img), DEFAULT_EVAL_FNV1A64);
        assert_eq!(img, default_eval().to_bytes());
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(matches!(
            from_bytes(&[0x1f, 0x8b, 0, 0]),
            Err(WeightsError::Io { .. })
        ));
        assert!(matches!(
            from_bytes(b"not an eval file"),
            Err(WeightsError::Eval(EvalError::TooShort { .. }))
        ));
        let err = load(Path::new("/nonexistent/eval.dat")).expect_err("missing file");
        assert!(err.to_string().contains("/nonexistent/eval.dat"));
    }
}
