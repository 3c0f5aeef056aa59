//! Checksums of the base book files: `base-sums/<generation>.sum` beside `base/`, a CRC-32C
//! per [`BLOCK`] bytes of the base file, written and synced with it, verified whenever the base
//! is read (opening the store, replays, `book verify`), so that a flipped byte stops the load
//! with the file and the offset of the damaged block instead of becoming a different book.
//!
//! Layout (little-endian): magic `BFSUM\x01\0\0`, the file's length (u64), the block size
//! (u32), one CRC-32C per block (u32 each), and the CRC-32C of everything before it (u32).
//! The base file itself stays an Edax `book.dat`.

use super::StoreError;
use std::path::{Path, PathBuf};

/// Bytes covered by one checksum.
pub const BLOCK: usize = 64 * 1024;

const MAGIC: &[u8; 8] = b"BFSUM\x01\0\0";

/// The directory of the checksum files, beside `base/`.
pub(super) const SUMS_DIR: &str = "base-sums";

/// The checksum file of the base file of `generation`.
pub(super) fn sums_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(SUMS_DIR).join(format!("{generation}.sum"))
}

/// The checksum file's bytes for `data`.
pub(super) fn encode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + 4 * (data.len() / BLOCK + 1));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&(BLOCK as u32).to_le_bytes());
    for block in data.chunks(BLOCK) {
        out.extend_from_slice(&crc32c::crc32c(block).to_le_bytes());
    }
    let all = crc32c::crc32c(&out);
    out.extend_from_slice(&all.to_le_bytes());
    out
}

fn corrupt(path: &Path, offset: u64, what: String) -> StoreError {
    StoreError::Corrupt {
        path: path.display().to_string(),
        offset,
        what,
    }
}

/// Check `data` (the base file at `base`) against the checksum file `sums` (its bytes `s`):
/// a damaged checksum file, a length that differs or a block whose checksum differs is an
/// error naming the file and the offset.
pub(super) fn verify(base: &Path, data: &[u8], sums: &Path, s: &[u8]) -> Result<(), StoreError> {
    let u32_at = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
    if s.len() < 24 || &s[..8] != MAGIC || !(s.len() - 24).is_multiple_of(4) {
        return Err(corrupt(sums, 0, "not a base checksum file".into()));
    }
    let body = s.len() - 4;
    if crc32c::crc32c(&s[..body]) != u32_at(body) {
        return Err(corrupt(
            sums,
            0,
            "the checksum file is damaged (its own checksum differs)".into(),
        ));
    }
    let len = u64::from_le_bytes(s[8..16].try_into().unwrap_or_default());
    let block = u32_at(16) as usize;
    if block == 0 {
        return Err(corrupt(sums, 16, "block size 0".into()));
    }
    if len != data.len() as u64 {
        return Err(corrupt(
            base,
            len.min(data.len() as u64),
            format!(
                "the file has {} bytes, its checksums cover {len}",
                data.len()
            ),
        ));
    }
    let n = (body - 20) / 4;
    if n != data.len().div_ceil(block) {
        return Err(corrupt(sums, 20, "wrong number of block checksums".into()));
    }
    for (i, chunk) in data.chunks(block).enumerate() {
        if crc32c::crc32c(chunk) != u32_at(20 + 4 * i) {
            let at = (i * block) as u64;
            return Err(corrupt(
                base,
                at,
                format!(
                    "checksum mismatch in bytes {at}..{} (the file was changed or damaged \
                     after it was written)",
                    at + chunk.len() as u64
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_byte_flip_is_found_with_its_block() {
        let data: Vec<u8> = (0..(2 * BLOCK + 1000))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let s = encode(&data);
        let (b, p) = (Path::new("base/1.dat"), Path::new("base-sums/1.sum"));
        verify(b, &data, p, &s).unwrap();
        for at in [0, 17, BLOCK - 1, BLOCK, 2 * BLOCK + 999] {
            let mut bad = data.clone();
            bad[at] ^= 0x20;
            match verify(b, &bad, p, &s) {
                Err(StoreError::Corrupt { path, offset, .. }) => {
                    assert_eq!(path, "base/1.dat");
                    assert_eq!(offset, (at / BLOCK * BLOCK) as u64);
                }
                r => panic!("flip at {at}: {r:?}"),
            }
        }
        for at in [0, 9, 20, s.len() - 1] {
            let mut bad = s.clone();
            bad[at] ^= 1;
            assert!(
                matches!(verify(b, &data, p, &bad), Err(StoreError::Corrupt { ref path, .. }) if path == "base-sums/1.sum"),
                "flip at {at} of the checksum file"
            );
        }
        assert!(verify(b, &data[..data.len() - 1], p, &s).is_err());
    }
}
