//! The persistent book store on sled.
//!
//! One sled tree holds everything, under one-byte key prefixes, so that each logical change
//! (a result linked in, an expansion) is a single atomic `apply_batch`:
//!
//! | key | value |
//! |---|---|
//! | `b` + chunk number (u32 BE) | the base book: up to [`BASE_CHUNK`] positions as `book.dat` records |
//! | `m` + `base` | [`BaseRecord`]: how many chunks and positions the base holds |
//! | `p` + 16-byte canonical board (player BE, opponent BE) | [`PositionRecord`] (postcard) |
//! | `d` + 16-byte job id | board of an accepted job (idempotent resubmission) |
//! | `m` + `header` | [`HeaderRecord`] |
//! | `m` + `expansion` | [`ExpansionRecord`] |
//! | `m` + `history` | [`HistoryRecord`] (web UI charts and contributors) |
//!
//! Other values are postcard. The book is the base with the `p` records over it: a `p` record
//! replaces the base position with its board or adds a position. Replacing the book (import,
//! `book new`, offline rewrites) writes a new base, a few large values instead of one key per
//! position; growth writes the positions it changes as `p` records.
//!
//! Worker credentials live in a second tree (`credentials`, see [`CredentialStore`]).
//!
//! Durability: sled writes become durable only at a flush; the service acknowledges a result
//! only after a flush that followed its batch (see `crate::service`). Derived negamax fields
//! are stored as last written but recomputed in full when the store is opened.
//! Only the coordinator process writes the store (sled locks the directory).

mod credentials;
mod record;

pub use credentials::{CredentialRecord, CredentialState, CredentialStore};
pub use record::{
    ContributorRecord, DriverRecord, ExpansionRecord, ExpansionStateRecord, GrowthRecord,
    BaseRecord, HeaderRecord, HistoryRecord, OperationRecord, PositionRecord, QueueRecord, ResultRecord,
    Sample, TodoRecord,
};

use bookfarm_book::edax::{self, ReadError};
use bookfarm_book::model::{BookHeader, Position};
use bookfarm_book::{MemBook, NodeId};
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use std::path::Path;
use uuid::Uuid;

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
    /// A chunk of the base book is not a sequence of valid `book.dat` records.
    #[error("store base chunk {chunk}: {source}")]
    Base {
        /// The chunk number.
        chunk: u32,
        /// What the record reader found.
        #[source]
        source: ReadError,
    },
    /// A chunk the base record announces is not stored.
    #[error("store base chunk {chunk} is missing")]
    MissingChunk {
        /// The chunk number.
        chunk: u32,
    },
    /// The directory holds no store with a book (the one text for a missing book).
    #[error(
        "{0}: no book here; create one with `book new --db {0}` or `book import FILE --db {0}`"
    )]
    NoBook(String),
}

const P: u8 = b'p';
const B: u8 = b'b';
const D: u8 = b'd';
const M: u8 = b'm';
const R: u8 = b'r';

/// The key of a stored result: its search request (board as searched, excluded moves, level).
fn result_key(r: &LeafRequest) -> [u8; 26] {
    let mut k = [0u8; 26];
    k[0] = R;
    k[1..9].copy_from_slice(&r.board.player.to_be_bytes());
    k[9..17].copy_from_slice(&r.board.opponent.to_be_bytes());
    k[17..25].copy_from_slice(&r.excluded.to_be_bytes());
    k[25] = r.level;
    k
}

fn request_of(k: &[u8]) -> Option<LeafRequest> {
    let k: &[u8; 26] = k.try_into().ok()?;
    let u = |i: usize| k[i..i + 8].try_into().ok().map(u64::from_be_bytes);
    Some(LeafRequest {
        board: Board {
            player: u(1)?,
            opponent: u(9)?,
        },
        excluded: u(17)?,
        level: k[25],
    })
}

fn pos_key(b: &Board) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = P;
    k[1..9].copy_from_slice(&b.player.to_be_bytes());
    k[9..17].copy_from_slice(&b.opponent.to_be_bytes());
    k
}

fn base_key(chunk: u32) -> [u8; 5] {
    let mut k = [B; 5];
    k[1..].copy_from_slice(&chunk.to_be_bytes());
    k
}

/// Positions per chunk of the base book (a chunk is one sled value of about 44 bytes per
/// position: large enough that a 10 M-position book is a few hundred values, small enough
/// that a chunk is a fraction of the store cache).
pub const BASE_CHUNK: usize = 16_384;

fn done_key(id: &Uuid) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = D;
    k[1..].copy_from_slice(id.as_bytes());
    k
}

fn meta_key(name: &str) -> Vec<u8> {
    let mut k = vec![M];
    k.extend_from_slice(name.as_bytes());
    k
}

fn hex(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    postcard::to_stdvec(v).map_err(StoreError::Encode)
}

fn decode<'a, T: serde::Deserialize<'a>>(k: &[u8], v: &'a [u8]) -> Result<T, StoreError> {
    postcard::from_bytes(v).map_err(|source| StoreError::Decode {
        key: hex(k),
        source,
    })
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

/// What [`Store::load`] returns: everything the service needs to rebuild its state.
#[derive(Debug)]
pub struct Loaded {
    /// The book header.
    pub header: BookHeader,
    /// The book: the base with the `p` records over it, negamax fields as stored.
    pub book: MemBook,
    /// Ids of accepted jobs.
    pub done: Vec<Uuid>,
    /// The last expansion request, if any (stores written before growth programs).
    pub expansion: Option<ExpansionRecord>,
    /// The growth programs and the running one's state.
    pub growth: Option<GrowthRecord>,
    /// The running program's marked boards.
    pub todo: Option<TodoRecord>,
    /// The queue of growth programs.
    pub queue: Option<QueueRecord>,
    /// Every stored leaf result, by request.
    pub results: Vec<(LeafRequest, ResultRecord)>,
    /// The search signature the book is pinned to.
    pub signature: Option<String>,
    /// The farm's history (None when absent or unreadable: it only feeds charts).
    pub history: Option<HistoryRecord>,
}

/// A set of writes applied atomically.
#[derive(Debug, Default)]
pub struct Batch {
    batch: sled::Batch,
    /// Number of writes queued.
    pub len: usize,
}

impl Batch {
    /// Write a position record (over the base position with its board, if any).
    pub fn put_entry(&mut self, e: &Entry) -> Result<(), StoreError> {
        let rec = PositionRecord::from_entry(e);
        self.batch.insert(&pos_key(&e.pos.board)[..], encode(&rec)?);
        self.len += 1;
        Ok(())
    }

    /// Write a position (its record carries no scheduling state).
    pub fn put_position(&mut self, p: &Position) -> Result<(), StoreError> {
        self.put_entry(&Entry::new(p.clone()))
    }

    /// Record an accepted job id.
    pub fn put_done(&mut self, id: &Uuid, board: &Board) -> Result<(), StoreError> {
        self.batch
            .insert(&done_key(id)[..], encode(&(board.player, board.opponent))?);
        self.len += 1;
        Ok(())
    }

    /// Write the meta record `name`.
    fn put_meta<T: serde::Serialize>(&mut self, name: &str, v: &T) -> Result<(), StoreError> {
        self.batch.insert(meta_key(name), encode(v)?);
        self.len += 1;
        Ok(())
    }

    /// Write the book header.
    pub fn put_header(&mut self, h: &BookHeader) -> Result<(), StoreError> {
        self.put_meta("header", &HeaderRecord::from(h))
    }

    /// Store a leaf result under its request.
    pub fn put_result(&mut self, req: &LeafRequest, r: &ResultRecord) -> Result<(), StoreError> {
        self.batch.insert(&result_key(req)[..], encode(r)?);
        self.len += 1;
        Ok(())
    }

    /// Write the growth state.
    pub fn put_growth(&mut self, g: &GrowthRecord) -> Result<(), StoreError> {
        self.put_meta("growth", g)
    }

    /// Write the queue of growth programs.
    pub fn put_queue(&mut self, q: &QueueRecord) -> Result<(), StoreError> {
        self.put_meta("growth-queue", q)
    }

    /// Write the current pass's marked boards.
    pub fn put_todo(&mut self, t: &TodoRecord) -> Result<(), StoreError> {
        self.put_meta("growth-todo", t)
    }

    /// Write the farm's history.
    pub fn put_history(&mut self, h: &HistoryRecord) -> Result<(), StoreError> {
        self.put_meta("history", h)
    }

    /// Pin the book to a search signature.
    pub fn put_signature(&mut self, sig: &str) -> Result<(), StoreError> {
        self.put_meta("signature", &sig)
    }

    /// Write (or clear) the expansion state.
    pub fn put_expansion(&mut self, x: Option<&ExpansionRecord>) -> Result<(), StoreError> {
        match x {
            Some(x) => self.batch.insert(meta_key("expansion"), encode(x)?),
            None => self.batch.remove(meta_key("expansion")),
        }
        self.len += 1;
        Ok(())
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
    db: sled::Db,
    tree: sled::Tree,
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
    /// sled 0.34 releases a dropped database's file lock asynchronously (its flusher thread
    /// holds it for a moment, spacejam/sled#1234), so a reopen right after a drop in the same
    /// process can find the lock taken: the lock is retried for up to [`LOCK_WAIT`]. Another
    /// process holding the store still fails, after that wait.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> Result<Store, StoreError> {
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .flush_every_ms(Some(1000));
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        let db = loop {
            match config.open() {
                // sled reports the failed flock as ErrorKind::Other with this message.
                Err(sled::Error::Io(e))
                    if e.kind() == std::io::ErrorKind::Other
                        && e.to_string().starts_with("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => break r?,
            }
        };
        let tree = db.open_tree("book")?;
        Ok(Store { db, tree })
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

    /// Whether the store holds a book header.
    pub fn has_book(&self) -> Result<bool, StoreError> {
        Ok(self.tree.contains_key(meta_key("header"))?)
    }

    /// The meta record `name`, if stored.
    fn meta<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StoreError> {
        let key = meta_key(name);
        match self.tree.get(&key)? {
            Some(v) => Ok(Some(decode::<T>(&key, &v)?)),
            None => Ok(None),
        }
    }

    /// The book: the base chunks in order, then the `p` records over them (a record with a base
    /// board replaces that position in place; others are appended in key order).
    fn load_book(&self, header: BookHeader) -> Result<MemBook, StoreError> {
        let base = self.meta::<BaseRecord>("base")?.unwrap_or_default();
        let positions = usize::try_from(base.positions).unwrap_or(usize::MAX);
        // Links are about one per position in grown books; the arena grows if not.
        let mut book = MemBook::with_capacity(header, positions, positions);
        for chunk in 0..base.chunks {
            let k = base_key(chunk);
            let v = self
                .tree
                .get(k)?
                .ok_or(StoreError::MissingChunk { chunk })?;
            edax::read_records(&v, 0, &mut book)
                .map_err(|source| StoreError::Base { chunk, source })?;
        }
        for kv in self.tree.scan_prefix([P]) {
            let (k, v) = kv?;
            book.put_position(&decode::<PositionRecord>(&k, &v)?.into_entry().pos);
        }
        book.shrink_to_fit();
        Ok(book)
    }

    /// Load the whole store.
    pub fn load(&self, dir_for_errors: &Path) -> Result<Loaded, StoreError> {
        let header = match self.tree.get(meta_key("header"))? {
            Some(v) => decode::<HeaderRecord>(b"mheader", &v)?.into(),
            None => return Err(StoreError::NoBook(dir_for_errors.display().to_string())),
        };
        let book = self.load_book(header)?;
        let mut done = Vec::new();
        for kv in self.tree.scan_prefix([D]) {
            let (k, _) = kv?;
            if let Ok(b) = <[u8; 16]>::try_from(&k[1..]) {
                done.push(Uuid::from_bytes(b));
            }
        }
        let expansion = self.meta::<ExpansionRecord>("expansion")?;
        let growth = self.meta::<GrowthRecord>("growth")?;
        let queue = self.meta::<QueueRecord>("growth-queue")?;
        let todo = self.meta::<TodoRecord>("growth-todo")?;
        let signature = self.meta::<String>("signature")?;
        // The history only feeds charts: an unreadable one (another version's layout) is
        // dropped rather than refusing to open the book.
        let history = self.meta::<HistoryRecord>("history").unwrap_or_else(|e| {
            tracing::warn!(error = %e, "stored history unreadable: starting a new one");
            None
        });
        let mut results = Vec::new();
        for kv in self.tree.scan_prefix([R]) {
            let (k, v) = kv?;
            if let Some(req) = request_of(&k) {
                results.push((req, decode::<ResultRecord>(&k, &v)?));
            }
        }
        Ok(Loaded {
            header,
            book,
            done,
            expansion,
            growth,
            todo,
            queue,
            results,
            signature,
            history,
        })
    }

    /// Apply a batch atomically (not yet durable: see [`Store::flush`]).
    pub fn apply(&self, b: Batch) -> Result<(), StoreError> {
        if b.len == 0 {
            return Ok(());
        }
        self.tree.apply_batch(b.batch)?;
        Ok(())
    }

    /// Make every write applied so far durable (blocking fsync).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    /// Replace everything the book tree holds by `header` and `entries` (see
    /// [`Store::create_book`]).
    pub fn create(&self, header: &BookHeader, entries: &[Entry]) -> Result<(), StoreError> {
        let mut book = MemBook::with_capacity(*header, entries.len(), entries.len());
        for e in entries {
            book.put_position(&e.pos);
        }
        self.create_book(&book)
    }

    /// Replace everything the book tree holds (positions, results, growth state, header) by
    /// `book` as the new base (its positions in its order, all pending a leaf search unless they
    /// already carry one). Worker credentials (their own tree) are kept.
    ///
    /// Crash-safe: the removals and the writes are one sled batch, which sled recovers whole or
    /// not at all, so a kill at any moment leaves the old book or the new one; durable on
    /// return. The base is [`BASE_CHUNK`] positions per value, so the batch holds a few hundred
    /// values for ten million positions.
    pub fn create_book(&self, book: &MemBook) -> Result<(), StoreError> {
        let mut b = Batch::default();
        for k in self.tree.iter().keys() {
            b.batch.remove(k?);
        }
        let ids: Vec<NodeId> = book.ids().collect();
        let mut chunks = 0u32;
        for part in ids.chunks(BASE_CHUNK) {
            let mut v = Vec::with_capacity(part.len() * 46);
            for &id in part {
                edax::push_record(&mut v, book, id);
            }
            b.batch.insert(&base_key(chunks)[..], v);
            chunks += 1;
        }
        b.put_meta(
            "base",
            &BaseRecord {
                chunks,
                positions: ids.len() as u64,
            },
        )?;
        b.put_header(book.header())?;
        b.put_expansion(None)?;
        self.tree.apply_batch(b.batch)?;
        self.flush()
    }

    /// Bytes sled occupies on disk (log, snapshots and blobs).
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        Ok(self.db.size_on_disk()?)
    }
}

#[cfg(test)]
mod tests;
