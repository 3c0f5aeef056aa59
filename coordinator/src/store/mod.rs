//! The persistent book store on sled.
//!
//! One sled tree per book generation holds everything of the book, under one-byte key prefixes
//! (the layout: `keys.rs`), so that each logical change (a result linked in, an expansion) is a
//! single atomic `apply_batch` ([`Batch`], [`Store::apply`]). The book is a **base** file
//! (`base/<generation>.dat`, an Edax `book.dat` beside sled's files) with growth's position
//! records over it; replacing the book writes a new base file and a new tree and moves one
//! pointer (see `generations.rs`). Worker credentials live in a tree of their own
//! ([`CredentialStore`]), and so does the event log ([`EventStore`]); replacing the book never
//! touches them, and carries the contributors' trust records (standings) into the new tree.
//!
//! The rooms:
//! - `keys.rs`: the key layout of every tree, key encoders, postcard encoding;
//! - `batch.rs`: [`Batch`] and [`Store::apply`] (result groups, position chunks);
//! - `load.rs`: what a start reads ([`Store::load`]: book, results, trust, growth state);
//! - `generations.rs`: base files, generation trees and the pointer switch, folds of the
//!   position records, reverting to the base book;
//! - `format.rs`: the store's format version and the migrations between versions (how to
//!   change the format is written there);
//! - `sled_repair.rs`: files a killed sled left unfinished, removed before it opens;
//! - `record.rs`: the on-disk records; `credentials.rs`: the credential tree; `invitations.rs`:
//!   the invitation tree; `events.rs`: the event log's tree;
//! - [`backup`]: a consistent copy of the store taken while it serves, and restoring one;
//! - [`dump`]: a store directory as text (the format fixtures of the migration tests).
//!
//! Growth state is **checkpointed**: the position records, the header and the growth records
//! (`growth`, the programs and `program-queue`, `growth-todo`, `growth-log`) are written together in one batch
//! at most every `ServiceConfig::checkpoint_interval` (and whenever a program starts or
//! finishes, at pause, replay and clean shutdown), so between checkpoints they describe an
//! earlier moment of the programs than the in-memory book. The book is a function of the
//! programs and the results (`g` records, durable before they are acknowledged), so a
//! restarted coordinator loads the last checkpoint and the driver re-runs from it with the
//! stored results, searching nothing again.
//!
//! **Format versions.** The store carries its format version (`format-version` in sled's
//! default tree). Opening a store runs, before anything else reads it, the migration steps from
//! its version to this build's ([`FORMAT_VERSION`]); a store of a newer version, or one
//! written before versions existed, is refused with an error that says what to do. Changing
//! the format (any record's encoding included) is: a step function from the current version to
//! the next, appended to `format::MIGRATIONS` (the version follows); a fixture of the new version
//! (`fixtures/v<N>.txt`, a small real store dumped with the `store_dump` example) with its test
//! in `format_tests.rs`; and the earlier fixtures' tests, which now run the step, checked
//! against what it changes (details: `format.rs`).
//!
//! Durability: sled writes become durable only at a flush; the service acknowledges a result
//! only after a flush that followed its batch (see `crate::service`). Derived negamax fields
//! are stored as last written but recomputed in full when the store is opened.
//! Only the coordinator process writes the store (sled locks the directory).

pub mod backup;
mod batch;
mod credentials;
pub mod dump;
mod events;
mod format;
mod generations;
mod invitations;
mod keys;
mod load;
mod record;
mod sled_gate;
mod sled_repair;
mod sums;
mod to_v2;
mod to_v3;
mod to_v4;
mod to_v5;
mod to_v6;

pub use batch::{Batch, CHUNK_POSITIONS};
pub use credentials::{CredentialRecord, CredentialState, CredentialStore};
pub use events::EventStore;
pub use format::FORMAT_VERSION;
pub use generations::FOLD_MIN_BYTES;
pub use invitations::{EnrolError, InvitationRecord, InvitationStore};
pub use load::Loaded;
pub use record::{
    BaseRecord, CaseRecord, ContributorRecord, CostRecord, DriverRecord, EventKind, EventRecord,
    GrowthRecord, HeaderRecord, HistoryRecord, LogRecord, LoggedProgram, PositionRecord,
    PositionRecordRef, ProgramRecord, ProgramState, ReplicaRecord, ResultGroupRecord, ResultRecord,
    Sample, TodoRecord, TrustRecord,
};

use bookfarm_book::edax::ReadError;
use bookfarm_book::model::Position;
use keys::{G, K, be_u64, meta_in, meta_key};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// Errors of the sled store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sled failed.
    #[error("store: {0}")]
    Sled(#[from] sled::Error),
    /// A record could not be decoded.
    #[error("store record {key}: {source}")]
    Decode {
        /// Hex of the key.
        key: String,
        /// The postcard error.
        #[source]
        source: postcard::Error,
    },
    /// A record could not be encoded.
    #[error("store encode: {0}")]
    Encode(#[source] postcard::Error),
    /// The base book file could not be read, written or removed.
    #[error("store base {path}: {source}")]
    BaseIo {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The base book file is not the `book.dat` its record announces.
    #[error("store base {path}: {source}")]
    Base {
        /// The file.
        path: String,
        /// What the reader found.
        #[source]
        source: ReadError,
    },
    /// A file of sled's directory could not be read or removed.
    #[error("store {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds no store with a book (the one text for a missing book).
    #[error(
        "{0}: no book here; create one with `book new --db {0}` or `book import FILE --db {0}`"
    )]
    NoBook(String),
    /// A file of the store does not match its checksum: it was damaged after it was written.
    #[error(
        "{path}: corrupt at byte offset {offset}: {what}; restore the store from a backup, or \
         re-import the book from an export"
    )]
    Corrupt {
        /// The damaged file.
        path: String,
        /// Where (the start of the damaged block).
        offset: u64,
        /// What differs.
        what: String,
    },
    /// A record of the store does not match its checksum: it was damaged after it was written
    /// (by the disk, or by a change of sled's files). It is never served.
    #[error(
        "store record {key}: corrupt ({what}); the store cannot be served as it is: restore the \
         store from a backup, or re-import the book from an export (docs/reliability.md)"
    )]
    CorruptRecord {
        /// The record's key (text when printable, else prefix + hex).
        key: String,
        /// What differs.
        what: String,
    },
    /// The directory holds a store written before stores carried a format version: this build
    /// cannot read it (the one text for a store of an old layout).
    #[error(
        "{0}: this store was written by an earlier build of bookfarm, before stores carried a \
         format version, and this build cannot read it. With the build that wrote it, export \
         the book (`bookfarm-coordinator book export book.dat --db {0}`); then, with this \
         build, import it into a new store (`bookfarm-coordinator book import book.dat --db \
         NEW_DIR`) and add the worker credentials again (`workers add`)"
    )]
    Unversioned(String),
    /// A store's text form ([`dump`]) is malformed, or its directory holds a store already.
    #[error("store dump, line {line}: {reason}")]
    Dump {
        /// The line (1-based; 0: not a line's fault).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A migration step found a record it cannot carry to the next format version.
    #[error("store format migration from version {from}: {reason}")]
    Migration {
        /// The version the step migrates from.
        from: u32,
        /// What it found.
        reason: String,
    },
    /// The store's format is newer than this build knows.
    #[error(
        "{dir}: this store has format version {found}, newer than this build's {known}: \
         open it with the build that wrote it or a later one"
    )]
    NewerFormat {
        /// The store directory.
        dir: String,
        /// The store's version.
        found: u32,
        /// The newest version this build reads.
        known: u32,
    },
}

/// A stored book position (the store's unit of writing; scheduling state lives in the job
/// table and the growth state, not here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The Edax position (canonical board, leaf, links, derived values).
    pub pos: Position,
}

impl Entry {
    /// The entry of a position.
    pub fn new(pos: Position) -> Entry {
        Entry { pos }
    }
}

/// How long [`Store::open`] waits for the store's file lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Default bound of sled's page cache (`cache_capacity_mb` in `coordinator.toml`). sled's own
/// default is 1 GiB; the in-memory book holds everything the service reads, so the cache only
/// serves writes and the start-up scan.
pub const DEFAULT_CACHE_CAPACITY: u64 = 64 << 20;

/// The sled-backed store.
#[derive(Debug)]
pub struct Store {
    /// The tree of the current book generation (switched by [`Store::create_book`]).
    tree: std::sync::RwLock<sled::Tree>,
    /// Held by [`Store::create_book`].
    replacing: std::sync::Mutex<()>,
    dir: PathBuf,
    /// The sequence number of the next result group.
    next_group: AtomicU64,
    /// The sequence number of the next batch that writes position chunks.
    next_chunk: AtomicU64,
    /// Bytes of the stored position chunks.
    chunk_bytes: AtomicU64,
    /// Bytes of the chunks the last replacement of the position records wrote.
    replaced_bytes: AtomicU64,
    /// The floor of [`Store::positions_fold_due`] ([`FOLD_MIN_BYTES`] unless set).
    fold_min_bytes: AtomicU64,
    /// Replacements of the position records applied since the store was opened.
    replacements: AtomicU64,
    /// Declared after the tree handles: its drop is the store's last flush ([`sled_gate::Db`]).
    db: sled_gate::Db,
}

impl Store {
    /// Open (or create) the store directory with the default cache bound (see
    /// [`Store::open_with_cache`]).
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_with_cache(dir, DEFAULT_CACHE_CAPACITY)
    }

    /// Open (or create) the store directory, sled's page cache bounded to `cache_bytes` (sled
    /// flushes in the background every second; durability points are explicit flushes).
    ///
    /// In order: the files a killed sled left unfinished are removed and sled opens, its lock
    /// retried for up to [`LOCK_WAIT`] (`sled_repair.rs`); the store's format is checked and
    /// migrated to this build's (`format.rs`: an empty store gets [`FORMAT_VERSION`], an old or
    /// newer one is refused); the book trees and base files of an interrupted
    /// replacement are dropped; the counters of the current generation are read.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> Result<Store, StoreError> {
        let db = sled_repair::open_sled(dir, cache_bytes)?;
        format::check_and_migrate(&db, dir)?;
        // The default tree names the current book: checked before it decides what to drop.
        for kv in db.iter() {
            let (k, v) = kv?;
            if &k[..] != keys::FORMAT_KEY {
                keys::unseal(&k, &v)?;
            }
        }
        let current = generations::drop_unfinished_generations(&db)?;
        let tree = db.open_tree(&current)?;
        let next_group = match tree.scan_prefix([G]).keys().next_back() {
            Some(k) => be_u64(&k?, 1).map_or(1, |s| s + 1),
            None => 1,
        };
        let mut next_chunk = 1;
        let mut chunk_bytes = 0;
        for kv in tree.scan_prefix([K]) {
            let (k, v) = kv?;
            next_chunk = be_u64(&k, 1).map_or(next_chunk, |s| s + 1);
            chunk_bytes += v.len() as u64;
        }
        let replaced_bytes = meta_in::<u64>(&tree, "replaced-bytes")?.unwrap_or(0);
        let store = Store {
            db,
            tree: std::sync::RwLock::new(tree),
            replacing: std::sync::Mutex::new(()),
            dir: dir.to_path_buf(),
            next_group: AtomicU64::new(next_group),
            next_chunk: AtomicU64::new(next_chunk),
            chunk_bytes: AtomicU64::new(chunk_bytes),
            replaced_bytes: AtomicU64::new(replaced_bytes),
            fold_min_bytes: AtomicU64::new(FOLD_MIN_BYTES),
            replacements: AtomicU64::new(0),
        };
        store.remove_stale_bases()?;
        Ok(store)
    }

    /// Open the store of an existing book: refused with [`StoreError::NoBook`] when `dir` does
    /// not exist or holds no book, without creating anything (a mistyped `--db` must not leave
    /// an empty store behind). Every command that needs a book opens it through here.
    pub fn open_book(dir: &Path) -> Result<Store, StoreError> {
        Store::open_book_with_cache(dir, DEFAULT_CACHE_CAPACITY)
    }

    /// [`Store::open_book`] with sled's page cache bounded to `cache_bytes`.
    pub fn open_book_with_cache(dir: &Path, cache_bytes: u64) -> Result<Store, StoreError> {
        let no_book = || StoreError::NoBook(dir.display().to_string());
        if !dir.is_dir() {
            return Err(no_book());
        }
        let store = Store::open_with_cache(dir, cache_bytes)?;
        if !store.has_book()? {
            // A damaged key of the header is not a missing book.
            store.verify_records()?;
            return Err(no_book());
        }
        Ok(store)
    }

    /// Whether `dir` holds a store with a book (false when the directory does not exist).
    pub fn dir_has_book(dir: &Path) -> Result<bool, StoreError> {
        if !dir.is_dir() {
            return Ok(false);
        }
        Store::open(dir)?.has_book()
    }

    /// The tree of the current book generation (a handle: a read that races a replacement of
    /// the book may find the old generation dropped, an error, never a mix of the two books).
    fn tree(&self) -> sled::Tree {
        self.tree
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether the store holds a book header.
    pub fn has_book(&self) -> Result<bool, StoreError> {
        Ok(self.tree().contains_key(meta_key("header"))?)
    }

    /// The meta record `name`, if stored.
    fn meta<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StoreError> {
        meta_in(&self.tree(), name)
    }

    /// Whether the store can take writes now: a small file written, synced and removed in its
    /// directory (a full or read-only disk fails here), then a flush of sled (which fails
    /// while sled holds an earlier write error). The store's contents are not touched.
    pub fn probe_writable(&self) -> Result<(), StoreError> {
        Store::probe_dir(&self.dir)?;
        self.flush()
    }

    /// Whether the disk of the store directory `dir` takes writes now: a small file written,
    /// synced and removed there (a full or read-only disk fails). Nothing of sled is touched.
    pub fn probe_dir(dir: &Path) -> Result<(), StoreError> {
        use std::io::Write;
        let path = dir.join(".write-probe");
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        let r = (|| {
            let mut f = std::fs::File::create(&path)?;
            f.write_all(&[0u8; 4096])?;
            f.sync_all()
        })();
        let _ = std::fs::remove_file(&path);
        r.map_err(io)
    }

    /// Check the checksum of every record of every tree (the book's, the credentials, the
    /// invitations, the event log, sled's default tree): the number of records checked, or the
    /// first damaged record's [`StoreError::CorruptRecord`]. [`Store::load`] runs it first, so a
    /// start never serves a damaged record of any tree; `book verify` reports it.
    pub fn verify_records(&self) -> Result<u64, StoreError> {
        let mut n = 0;
        let default = self.db.name();
        for name in self.db.tree_names() {
            for kv in self.db.open_tree(&name)?.iter() {
                let (k, v) = kv?;
                if name == default && &k[..] == keys::FORMAT_KEY {
                    continue;
                }
                keys::unseal(&k, &v)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Make every write applied so far durable (blocking fsync).
    pub fn flush(&self) -> Result<(), StoreError> {
        sled_gate::flush(&self.db)?;
        Ok(())
    }
}

#[cfg(test)]
mod format_tests;
#[cfg(test)]
mod tests;
