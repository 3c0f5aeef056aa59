//! Packed Edax weights (61 ply blocks of 114364 `i16`, units of 1/128 disc) and the `eval.dat`
//! file format (edax-spec §9.1), plain or gzip-compressed.

use crate::features::{Layout, N_PLIES, PACKED_PER_PLY, ply_of, raw_to_discs};
use bookfarm_engine::Board;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::io::{Read, Write};
use std::path::Path;

/// `edax_header` as written by Edax on little-endian machines (bytes "XADE").
pub const EDAX_MAGIC: u32 = 0x4544_4158;
/// `eval_header` (bytes "LAVE").
pub const EVAL_MAGIC: u32 = 0x4556_414C;
/// Header size of an `eval.dat` file.
pub const HEADER_BYTES: usize = 28;
/// Exact size of an `eval.dat` file: 28 + 61 · 114364 · 2 = 13,952,436 bytes.
pub const FILE_BYTES: usize = HEADER_BYTES + N_PLIES * PACKED_PER_PLY * 2;

/// Errors reading or writing weight files.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The file could not be read or written.
    #[error("weights io error: {0}")]
    Io(#[from] std::io::Error),
    /// The data is shorter than a complete eval.dat.
    #[error("eval.dat truncated: {0} bytes, expected at least {FILE_BYTES}")]
    Truncated(usize),
    /// Neither header field carries an Edax magic number.
    #[error("not an eval.dat file: bad magic {0:#010x} {1:#010x}")]
    BadMagic(u32, u32),
}

/// Version triple and date written in the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Version {
    /// Major version.
    pub version: u32,
    /// Release.
    pub release: u32,
    /// Build.
    pub build: u32,
    /// Date field (Edax stores a double; we store YYYYMMDD as a number).
    pub date: f64,
}

/// A full set of packed weights, ply-major: `w[ply * PACKED_PER_PLY + offset]`.
#[derive(Clone, PartialEq)]
pub struct Weights {
    /// Header version information.
    pub version: Version,
    /// The 61 · 114364 weights, in 1/128 disc.
    pub w: Vec<i16>,
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weights")
            .field("version", &self.version)
            .field("len", &self.w.len())
            .finish()
    }
}

impl Weights {
    /// All-zero weights (an evaluation that always returns 0).
    pub fn zeros(version: Version) -> Weights {
        Weights {
            version,
            w: vec![0; N_PLIES * PACKED_PER_PLY],
        }
    }

    /// The weight block of one ply.
    pub fn ply(&self, ply: usize) -> &[i16] {
        &self.w[ply * PACKED_PER_PLY..(ply + 1) * PACKED_PER_PLY]
    }

    /// Raw Edax evaluation (sum of the 47 weights) of `board` for the side to move.
    pub fn raw(&self, board: &Board) -> i32 {
        let l = Layout::get();
        let block = self.ply(ply_of(board));
        l.packed_offsets(board)
            .iter()
            .map(|&o| i32::from(block[o as usize]))
            .sum()
    }

    /// Static evaluation in discs, rounded and clamped as Edax's `search_eval_0`.
    pub fn eval(&self, board: &Board) -> i32 {
        raw_to_discs(self.raw(board))
    }

    /// Parse an `eval.dat` image (either endianness, lax magic check as Edax; trailing bytes ignored).
    pub fn from_eval_dat(bytes: &[u8]) -> Result<Weights, WeightsError> {
        if bytes.len() < FILE_BYTES {
            return Err(WeightsError::Truncated(bytes.len()));
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let (e, v) = (u32_at(0), u32_at(4));
        // Opposite-endian files read as the byte-swapped magics (Edax XADE/LAVE tests).
        let ok_a = e == EDAX_MAGIC.swap_bytes() || v == EVAL_MAGIC.swap_bytes();
        let ok_b = e == EDAX_MAGIC || v == EVAL_MAGIC;
        if !ok_a && !ok_b {
            return Err(WeightsError::BadMagic(e, v));
        }
        let swap = e == EDAX_MAGIC.swap_bytes();
        let fix32 = |x: u32| if swap { x.swap_bytes() } else { x };
        let mut date_bytes = [0u8; 8];
        date_bytes.copy_from_slice(&bytes[20..28]);
        let date = if swap {
            f64::from_be_bytes(date_bytes)
        } else {
            f64::from_le_bytes(date_bytes)
        };
        let version = Version {
            version: fix32(u32_at(8)),
            release: fix32(u32_at(12)),
            build: fix32(u32_at(16)),
            date,
        };
        let w = bytes[HEADER_BYTES..FILE_BYTES]
            .chunks_exact(2)
            .map(|c| {
                if swap {
                    i16::from_be_bytes([c[0], c[1]])
                } else {
                    i16::from_le_bytes([c[0], c[1]])
                }
            })
            .collect();
        Ok(Weights { version, w })
    }

    /// The little-endian `eval.dat` image Edax loads.
    pub fn to_eval_dat(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FILE_BYTES);
        out.extend_from_slice(&EDAX_MAGIC.to_le_bytes());
        out.extend_from_slice(&EVAL_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.version.version.to_le_bytes());
        out.extend_from_slice(&self.version.release.to_le_bytes());
        out.extend_from_slice(&self.version.build.to_le_bytes());
        out.extend_from_slice(&self.version.date.to_le_bytes());
        for x in &self.w {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Load a plain or gzip-compressed (`1f 8b` magic) eval.dat file.
    pub fn load(path: &Path) -> Result<Weights, WeightsError> {
        let bytes = std::fs::read(path)?;
        Weights::from_bytes(&bytes)
    }

    /// Parse a plain or gzip-compressed eval.dat image.
    pub fn from_bytes(bytes: &[u8]) -> Result<Weights, WeightsError> {
        if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut raw = Vec::with_capacity(FILE_BYTES);
            GzDecoder::new(bytes).read_to_end(&mut raw)?;
            Weights::from_eval_dat(&raw)
        } else {
            Weights::from_eval_dat(bytes)
        }
    }

    /// Write the plain eval.dat file.
    pub fn save_eval_dat(&self, path: &Path) -> Result<(), WeightsError> {
        std::fs::write(path, self.to_eval_dat())?;
        Ok(())
    }

    /// The gzip-compressed eval.dat image (what the engine embeds).
    pub fn to_eval_dat_gz(&self) -> Result<Vec<u8>, WeightsError> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::best());
        enc.write_all(&self.to_eval_dat())?;
        Ok(enc.finish()?)
    }
}

/// FNV-1a 64-bit hash, used as the reported identity of a weight set (hash of the plain eval.dat image).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Weights {
        let v = Version {
            version: 1,
            release: 2,
            build: 3,
            date: 20261122.0,
        };
        let mut w = Weights::zeros(v);
        for (i, x) in w.w.iter_mut().enumerate() {
            *x = ((i * 31) % 2001) as i16 - 1000;
        }
        w
    }

    #[test]
    fn eval_dat_roundtrip_and_size() {
        let w = sample();
        let img = w.to_eval_dat();
        assert_eq!(img.len(), 13_952_436);
        assert_eq!(&img[0..8], b"XADELAVE");
        assert_eq!(Weights::from_eval_dat(&img).expect("valid image"), w);
        let gz = w.to_eval_dat_gz().expect("in-memory gzip");
        assert_eq!(Weights::from_bytes(&gz).expect("valid gz"), w);
    }

    #[test]
    fn big_endian_image_is_byte_swapped_on_load() {
        let w = sample();
        let mut img = w.to_eval_dat();
        for c in img[0..20].chunks_exact_mut(4) {
            c.reverse();
        }
        img[20..28].reverse();
        for c in img[HEADER_BYTES..].chunks_exact_mut(2) {
            c.reverse();
        }
        assert_eq!(Weights::from_eval_dat(&img).expect("swapped image"), w);
    }

    #[test]
    fn bad_files_are_rejected() {
        let w = sample();
        let img = w.to_eval_dat();
        assert!(matches!(
            Weights::from_eval_dat(&img[..img.len() - 2]),
            Err(WeightsError::Truncated(_))
        ));
        let mut bad = img.clone();
        bad[0..8].copy_from_slice(b"abcdefgh");
        assert!(matches!(
            Weights::from_eval_dat(&bad),
            Err(WeightsError::BadMagic(..))
        ));
        // One correct magic is enough (Edax's lax check).
        let mut half = img;
        half[0..4].copy_from_slice(b"abcd");
        assert!(Weights::from_eval_dat(&half).is_ok());
    }
}
