//! Backups: a consistent copy of the whole store taken while it serves, and a store made from
//! one.
//!
//! A backup is the store's text form ([`super::dump`]: every record of sled's default tree, of
//! the current book generation, of the credentials, invitations and event log, and the current
//! base book file), between a header line and a last line `end <SHA-256 of everything
//! before it>`, so a copy cut short or damaged is refused as a whole. The book generation is
//! copied while no batch can be applied and no replacement can switch books (the store's
//! tree lock, held for writing), so its records are those of one moment: results with their
//! provenance, trust records, programs and checkpoints agree. Credentials, invitations and
//! events are copied in the same pause; they are written outside batches, each record on its
//! own, so each is whole.
//!
//! [`restore`] writes a backup into a new directory (built beside it and renamed into place, so
//! a kill leaves no half store under the name), then opens and loads it: every record's
//! checksum and the base file are checked before it is reported good.

use super::generations::{BASE_DIR, base_file};
use super::keys::{FORMAT_KEY, decode, hex, is_book_tree, meta_key};
use super::{BaseRecord, Store, StoreError, dump};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The first line of every backup.
const HEADER: &str = "# bookfarm store backup";

/// What a backup or a restore holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackupSummary {
    /// Records of every tree.
    pub records: u64,
    /// Bytes of the base book file.
    pub base_bytes: u64,
}

fn bad(reason: impl Into<String>) -> StoreError {
    StoreError::Dump {
        line: 0,
        reason: reason.into(),
    }
}

impl Store {
    /// The backup of the store (see the module docs); batches and replacements wait while it
    /// is taken.
    pub fn backup(&self) -> Result<(Vec<u8>, BackupSummary), StoreError> {
        let _one = self
            .replacing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self
            .tree
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = String::new();
        let _ = writeln!(out, "{HEADER}");
        let _ = writeln!(out, "# format-version {}", super::FORMAT_VERSION);
        let mut summary = BackupSummary::default();
        let default = self.db.name();
        let mut names = self.db.tree_names();
        names.sort();
        for name in names {
            // Only the current generation: others are left by an interrupted replacement.
            if is_book_tree(&name) && name != current.name() {
                continue;
            }
            for kv in self.db.open_tree(&name)?.iter() {
                let (k, v) = kv?;
                let _ = writeln!(out, "tree {} {} {}", hex(&name), hex(&k), hex(&v));
                // Counted as [`Store::verify_records`] counts (the format version apart).
                if !(name == default && &k[..] == FORMAT_KEY) {
                    summary.records += 1;
                }
            }
        }
        let base_key = meta_key("base");
        if let Some(v) = current.get(&base_key)? {
            let base: BaseRecord = decode(&base_key, &v)?;
            let path = base_file(&self.dir, base.generation);
            let bytes = std::fs::read(&path).map_err(super::generations::base_io(&path))?;
            self.check_base_sums(base.generation, &path, &bytes)?;
            let rel = path
                .strip_prefix(&self.dir)
                .map_or_else(|_| format!("{BASE_DIR}/?"), |p| p.display().to_string());
            let _ = writeln!(out, "file {} {}", hex(rel.as_bytes()), hex(&bytes));
            summary.base_bytes = bytes.len() as u64;
        }
        drop(current);
        let sum = Sha256::digest(out.as_bytes());
        let _ = writeln!(out, "end {}", hex(&sum));
        Ok((out.into_bytes(), summary))
    }
}

/// The text of a backup without its last line, checked: a backup whose `end` line is missing
/// (cut short) or whose SHA-256 differs (damaged) is refused.
fn checked(bytes: &[u8]) -> Result<&str, StoreError> {
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not a backup (not text)"))?;
    if !text.starts_with(HEADER) {
        return Err(bad("not a bookfarm store backup (no header line)"));
    }
    let body_end = text.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
    let last = text[body_end..].trim_end();
    let Some(sum) = last.strip_prefix("end ") else {
        return Err(bad(
            "the backup is incomplete (no `end` line): it was cut short; use another backup",
        ));
    };
    let body = &text[..body_end];
    if hex(&Sha256::digest(body.as_bytes())) != sum {
        return Err(bad(
            "the backup is damaged (its SHA-256 differs from its `end` line); use another backup",
        ));
    }
    Ok(body)
}

/// Make the store of a backup in `dir`, which must not exist: written into `<dir>.restoring`
/// (removed first if a restore cut short left it), flushed, opened and loaded (every record's
/// checksum and the base file checked, migrated if the backup is of an earlier format), then
/// renamed to `dir`. Returns what it holds.
pub fn restore(bytes: &[u8], dir: &Path) -> Result<BackupSummary, StoreError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StoreError::Io { path, source }
    };
    if dir.exists() {
        return Err(bad(format!(
            "{} exists: restore into a new directory",
            dir.display()
        )));
    }
    let body = checked(bytes)?;
    let mut tmp = PathBuf::from(dir);
    tmp.as_mut_os_string().push(".restoring");
    match std::fs::remove_dir_all(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&tmp)(e)),
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    dump::restore(body, &tmp)?;
    let summary = {
        let store = Store::open_book(&tmp)?;
        let loaded = store.load(&tmp)?;
        let records = store.verify_records()?;
        let base_bytes = store.verify_base()?;
        drop(loaded);
        BackupSummary {
            records,
            base_bytes,
        }
    };
    std::fs::rename(&tmp, dir).map_err(io(dir))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io(parent))?;
    }
    Ok(summary)
}
