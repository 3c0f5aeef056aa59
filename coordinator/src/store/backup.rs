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
use std::io::{BufRead, Seek, SeekFrom, Write};
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

/// A writer that hashes what it forwards, so the `end` line seals everything before it without
/// holding it.
struct Sealed<W: Write> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for Sealed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Bytes of the base file hex-encoded per write (the line is written in pieces).
const HEX_PIECE: usize = 64 * 1024;

impl Store {
    /// Write the backup of the store (see the module docs) to `out`, record by record: memory
    /// stays bounded by the largest record and the base file, whatever the store's size.
    /// Batches and replacements wait while it is written, so `out` should be fast (a local
    /// file, not a network peer).
    pub fn backup_to<W: Write>(&self, out: W) -> Result<BackupSummary, StoreError> {
        let io = |source| StoreError::Io {
            path: "backup".to_string(),
            source,
        };
        let _one = self
            .replacing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self
            .tree
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = Sealed {
            inner: std::io::BufWriter::with_capacity(1 << 20, out),
            hash: Sha256::new(),
        };
        writeln!(out, "{HEADER}").map_err(io)?;
        writeln!(out, "# format-version {}", super::FORMAT_VERSION).map_err(io)?;
        let mut summary = BackupSummary::default();
        let default = self.db.name();
        let mut names = self.db.tree_names();
        names.sort();
        for name in names {
            // Only the current generation: others are left by an interrupted replacement.
            if is_book_tree(&name) && name != current.name() {
                continue;
            }
            let tree_hex = hex(&name);
            for kv in self.db.open_tree(&name)?.iter() {
                let (k, v) = kv?;
                writeln!(out, "tree {tree_hex} {} {}", hex(&k), hex(&v)).map_err(io)?;
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
            write!(out, "file {} ", hex(rel.as_bytes())).map_err(io)?;
            for piece in bytes.chunks(HEX_PIECE) {
                out.write_all(hex(piece).as_bytes()).map_err(io)?;
            }
            out.write_all(b"\n").map_err(io)?;
            summary.base_bytes = bytes.len() as u64;
        }
        drop(current);
        let Sealed { mut inner, hash } = out;
        let sum = hash.finalize();
        writeln!(inner, "end {}", hex(&sum)).map_err(io)?;
        inner.flush().map_err(io)?;
        Ok(summary)
    }

    /// The backup written to an unnamed temporary file in the store's directory (gone with the
    /// process, whatever ends it), rewound: writes wait only as long as the local copy takes,
    /// not as long as a client takes to read it. Returns the file, its length and what it
    /// holds.
    pub fn backup_file(&self) -> Result<(std::fs::File, u64, BackupSummary), StoreError> {
        let io = |source| StoreError::Io {
            path: self.dir.display().to_string(),
            source,
        };
        let mut file = tempfile::tempfile_in(&self.dir).map_err(io)?;
        let summary = self.backup_to(&mut file)?;
        let len = file.seek(SeekFrom::End(0)).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        Ok((file, len, summary))
    }
}

/// Check a whole backup read from `r` without holding it: the header first, the last
/// non-empty line `end <SHA-256 of every byte before it>`. A backup whose `end` line is missing
/// (cut short) or whose SHA-256 differs (damaged) is refused.
fn check<R: BufRead>(mut r: R) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: "backup".to_string(),
        source,
    };
    let mut hash = Sha256::new();
    // The last non-empty line read and the empty lines after it: not hashed yet.
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut first = true;
    loop {
        let mut line = Vec::new();
        if r.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        if first {
            if !line.starts_with(HEADER.as_bytes()) {
                return Err(bad("not a bookfarm store backup (no header line)"));
            }
            first = false;
        }
        if line.iter().all(|&b| b == b'\n' || b == b'\r') {
            held.push(line);
            continue;
        }
        for h in held.drain(..) {
            hash.update(&h);
        }
        held.push(line);
    }
    if first {
        return Err(bad("not a bookfarm store backup (empty)"));
    }
    let last = held.first().map(|l| l.trim_ascii_end()).unwrap_or_default();
    let Some(sum) = last.strip_prefix(b"end ") else {
        return Err(bad(
            "the backup is incomplete (no `end` line): it was cut short; use another backup",
        ));
    };
    if hex(&hash.finalize()).as_bytes() != sum {
        return Err(bad(
            "the backup is damaged (its SHA-256 differs from its `end` line); use another backup",
        ));
    }
    Ok(())
}

/// Make the store of the backup file `backup` in `dir`, which must not exist: the whole backup
/// checked first (read once, not held), then written line by line into `<dir>.restoring`
/// (removed first if a restore cut short left it), flushed, opened and loaded (every record's
/// checksum and the base file checked, migrated if the backup is of an earlier format), then
/// renamed to `dir`. Returns what it holds.
pub fn restore(backup: &Path, dir: &Path) -> Result<BackupSummary, StoreError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StoreError::Io { path, source }
    };
    let reader = || {
        std::fs::File::open(backup)
            .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
            .map_err(io(backup))
    };
    if dir.exists() {
        return Err(bad(format!(
            "{} exists: restore into a new directory",
            dir.display()
        )));
    }
    check(reader()?)?;
    let mut tmp = PathBuf::from(dir);
    tmp.as_mut_os_string().push(".restoring");
    match std::fs::remove_dir_all(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&tmp)(e)),
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    // Checked whole above: the body is every line before the `end` line.
    let lines = reader()?
        .lines()
        .map(|l| l.map_err(|_| bad("the backup is not text")))
        .take_while(|l| !matches!(l, Ok(l) if l.starts_with("end ")));
    dump::restore_lines(lines, &tmp)?;
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
