//! The persistent book store on sled.
//!
//! One sled tree holds everything, under one-byte key prefixes, so that each logical change
//! (a result linked in, an expansion) is a single atomic `apply_batch`:
//!
//! | key | value (postcard) |
//! |---|---|
//! | `p` + 16-byte canonical board (player BE, opponent BE) | [`PositionRecord`] |
//! | `d` + 16-byte job id | board of an accepted job (idempotent resubmission) |
//! | `m` + `header` | [`HeaderRecord`] |
//! | `m` + `expansion` | [`ExpansionRecord`] |
//! | `m` + `history` | [`HistoryRecord`] (web UI charts and contributors) |
//! | `m` + `growth-log` | [`QueueRecord`]: the programs finished since the base book |
//! | `m` + `base` | [`HeaderRecord`] of the base book (present: replay is possible) |
//! | `r` + request | [`ResultRecord`] (applied results, with the contributors vouching) |
//! | `u` + request | [`CaseRecord`] (replicas of a request waiting for validation) |
//! | `t` + contributor name | [`TrustRecord`] (standing and credit) |
//! | `b` + 16-byte canonical board | the position as it was before growth first changed it (an empty value: growth created it) |
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
use record::LegacyResultRecord;
pub use record::{
    CaseRecord, ContributorRecord, DriverRecord, ExpansionRecord, ExpansionStateRecord,
    GrowthRecord, HeaderRecord, HistoryRecord, OperationRecord, PositionRecord, QueueRecord,
    ReplicaRecord, ResultRecord, Sample, TodoRecord, TrustRecord,
};

use bookfarm_book::model::{BookHeader, Position};
use bookfarm_book::store::{BookStore, StoreError as BookStoreError, ensure_canonical};
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// The directory holds no store with a book (the one text for a missing book).
    #[error(
        "{0}: no book here; create one with `book new --db {0}` or `book import FILE --db {0}`"
    )]
    NoBook(String),
}

const P: u8 = b'p';
const D: u8 = b'd';
const M: u8 = b'm';
const R: u8 = b'r';
const U: u8 = b'u';
const T: u8 = b't';
const B: u8 = b'b';

/// The key of an open case: its request.
fn case_key(r: &LeafRequest) -> [u8; 26] {
    let mut k = result_key(r);
    k[0] = U;
    k
}

fn trust_key(name: &str) -> Vec<u8> {
    let mut k = vec![T];
    k.extend_from_slice(name.as_bytes());
    k
}

fn base_key(b: &Board) -> [u8; 17] {
    let mut k = pos_key(b);
    k[0] = B;
    k
}

/// A stored result, in this version's layout or the one before validation existed.
fn decode_result(k: &[u8], v: &[u8]) -> Result<ResultRecord, StoreError> {
    decode::<ResultRecord>(k, v).or_else(|e| {
        decode::<LegacyResultRecord>(k, v)
            .map(ResultRecord::from)
            .map_err(|_| e)
    })
}

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

fn board_of_key(k: &[u8]) -> Option<Board> {
    let k: &[u8; 17] = k.try_into().ok()?;
    let u = |i: usize| k[i..i + 8].try_into().ok().map(u64::from_be_bytes);
    Some(Board {
        player: u(1)?,
        opponent: u(9)?,
    })
}

fn pos_key(b: &Board) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = P;
    k[1..9].copy_from_slice(&b.player.to_be_bytes());
    k[9..17].copy_from_slice(&b.opponent.to_be_bytes());
    k
}

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
    /// Every position.
    pub entries: Vec<Entry>,
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
    /// Open validation cases, by request.
    pub cases: Vec<(LeafRequest, CaseRecord)>,
    /// Contributors' standing and credit, by name.
    pub trust: Vec<(String, TrustRecord)>,
    /// The programs finished since the base book.
    pub log: Option<QueueRecord>,
    /// Boards whose base version is saved (see [`Batch::put_base`]).
    pub based: Vec<Board>,
    /// The store keeps its base book (created by this version: replay is possible).
    pub has_base: bool,
}

/// A set of writes applied atomically.
#[derive(Debug, Default)]
pub struct Batch {
    batch: sled::Batch,
    /// Number of writes queued.
    pub len: usize,
    new_positions: usize,
}

impl Batch {
    /// Write a position record. `is_new` must be true when the board was not stored before (for
    /// the position count).
    pub fn put_entry(&mut self, e: &Entry, is_new: bool) -> Result<(), StoreError> {
        let rec = PositionRecord::from_entry(e);
        self.batch.insert(&pos_key(&e.pos.board)[..], encode(&rec)?);
        self.len += 1;
        self.new_positions += usize::from(is_new);
        Ok(())
    }

    /// Write a position (its record carries no scheduling state).
    pub fn put_position(&mut self, p: &Position) -> Result<(), StoreError> {
        self.put_entry(&Entry::new(p.clone()), false)
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

    /// Delete a position (a replay drops positions growth created).
    pub fn remove_position(&mut self, b: &Board) {
        self.batch.remove(&pos_key(b)[..]);
        self.len += 1;
    }

    /// Save the base version of a position about to change for the first time (`None`: the
    /// position did not exist before growth created it).
    pub fn put_base(&mut self, b: &Board, old: Option<&PositionRecord>) -> Result<(), StoreError> {
        let v = match old {
            Some(p) => encode(p)?,
            None => Vec::new(),
        };
        self.batch.insert(&base_key(b)[..], v);
        self.len += 1;
        Ok(())
    }

    /// Write (or delete, when `None`) the open case of a request.
    pub fn put_case(
        &mut self,
        req: &LeafRequest,
        case: Option<&CaseRecord>,
    ) -> Result<(), StoreError> {
        match case {
            Some(c) => self.batch.insert(&case_key(req)[..], encode(c)?),
            None => self.batch.remove(&case_key(req)[..]),
        }
        self.len += 1;
        Ok(())
    }

    /// Write a contributor's trust record.
    pub fn put_trust(&mut self, name: &str, t: &TrustRecord) -> Result<(), StoreError> {
        self.batch.insert(trust_key(name), encode(t)?);
        self.len += 1;
        Ok(())
    }

    /// Delete a stored leaf result (its only voucher was caught).
    pub fn remove_result(&mut self, req: &LeafRequest) {
        self.batch.remove(&result_key(req)[..]);
        self.len += 1;
    }

    /// Write the programs finished since the base book.
    pub fn put_log(&mut self, q: &QueueRecord) -> Result<(), StoreError> {
        self.put_meta("growth-log", q)
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

/// The sled-backed store.
#[derive(Debug)]
pub struct Store {
    db: sled::Db,
    tree: sled::Tree,
    positions: AtomicUsize,
}

impl Store {
    /// Open (or create) the store directory (sled flushes in the background every second;
    /// durability points are explicit flushes).
    ///
    /// sled 0.34 releases a dropped database's file lock asynchronously (its flusher thread
    /// holds it for a moment, spacejam/sled#1234), so a reopen right after a drop in the same
    /// process can find the lock taken: the lock is retried for up to [`LOCK_WAIT`]. Another
    /// process holding the store still fails, after that wait.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let config = sled::Config::new().path(dir).flush_every_ms(Some(1000));
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
        let positions = tree.scan_prefix([P]).count();
        Ok(Store {
            db,
            tree,
            positions: AtomicUsize::new(positions),
        })
    }

    /// Open the store of an existing book: refused with [`StoreError::NoBook`] when `dir` does
    /// not exist or holds no book, without creating anything (a mistyped `--db` must not leave
    /// an empty store behind). Every command that needs a book opens it through here.
    pub fn open_book(dir: &Path) -> Result<Store, StoreError> {
        let no_book = || StoreError::NoBook(dir.display().to_string());
        if !dir.is_dir() {
            return Err(no_book());
        }
        let store = Store::open(dir)?;
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

    /// Load the whole store.
    pub fn load(&self, dir_for_errors: &Path) -> Result<Loaded, StoreError> {
        let header = match self.tree.get(meta_key("header"))? {
            Some(v) => decode::<HeaderRecord>(b"mheader", &v)?.into(),
            None => return Err(StoreError::NoBook(dir_for_errors.display().to_string())),
        };
        let mut entries = Vec::with_capacity(self.positions.load(Ordering::Relaxed));
        for kv in self.tree.scan_prefix([P]) {
            let (k, v) = kv?;
            entries.push(decode::<PositionRecord>(&k, &v)?.into_entry());
        }
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
                results.push((req, decode_result(&k, &v)?));
            }
        }
        let mut cases = Vec::new();
        for kv in self.tree.scan_prefix([U]) {
            let (k, v) = kv?;
            if let Some(req) = request_of(&k) {
                cases.push((req, decode::<CaseRecord>(&k, &v)?));
            }
        }
        let trust = self.trust_records()?;
        let mut based = Vec::new();
        for kv in self.tree.scan_prefix([B]) {
            let (k, _) = kv?;
            if let Some(b) = board_of_key(&k) {
                based.push(b);
            }
        }
        let log = self.meta::<QueueRecord>("growth-log")?;
        let has_base = self.tree.contains_key(meta_key("base"))?;
        Ok(Loaded {
            header,
            entries,
            done,
            expansion,
            growth,
            todo,
            queue,
            results,
            signature,
            history,
            cases,
            trust,
            log,
            based,
            has_base,
        })
    }

    /// Every contributor's trust record (`workers list --db`).
    pub fn trust_records(&self) -> Result<Vec<(String, TrustRecord)>, StoreError> {
        let mut out = Vec::new();
        for kv in self.tree.scan_prefix([T]) {
            let (k, v) = kv?;
            out.push((
                String::from_utf8_lossy(&k[1..]).into_owned(),
                decode::<TrustRecord>(&k, &v)?,
            ));
        }
        Ok(out)
    }

    /// The base book's header (None: the store predates base books).
    pub fn base_header(&self) -> Result<Option<BookHeader>, StoreError> {
        Ok(self.meta::<HeaderRecord>("base")?.map(BookHeader::from))
    }

    /// The stored version of a position (a base snapshot's source).
    pub fn position_record(&self, b: &Board) -> Result<Option<PositionRecord>, StoreError> {
        let k = pos_key(b);
        match self.tree.get(k)? {
            Some(v) => Ok(Some(decode::<PositionRecord>(&k, &v)?)),
            None => Ok(None),
        }
    }

    /// The base book's versions of every position growth changed: `None` for positions growth
    /// created.
    pub fn base_positions(&self) -> Result<Vec<(Board, Option<Position>)>, StoreError> {
        let mut out = Vec::new();
        for kv in self.tree.scan_prefix([B]) {
            let (k, v) = kv?;
            let Some(b) = board_of_key(&k) else { continue };
            let p = if v.is_empty() {
                None
            } else {
                Some(decode::<PositionRecord>(&k, &v)?.into_entry().pos)
            };
            out.push((b, p));
        }
        Ok(out)
    }

    /// Apply a batch atomically (not yet durable: see [`Store::flush`]).
    pub fn apply(&self, b: Batch) -> Result<(), StoreError> {
        if b.len == 0 {
            return Ok(());
        }
        self.tree.apply_batch(b.batch)?;
        self.positions.fetch_add(b.new_positions, Ordering::Relaxed);
        Ok(())
    }

    /// Make every write applied so far durable (blocking fsync).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    /// Number of stored positions (kept as a counter: sled's `len` is a full scan).
    pub fn position_count(&self) -> usize {
        self.positions.load(Ordering::Relaxed)
    }

    /// Replace everything the book tree holds (positions, results, growth state, header) by a
    /// new book: the header plus the given positions (all pending a leaf search unless they
    /// already carry one). Worker credentials (their own tree) are kept.
    ///
    /// Crash-safe: the removals and the writes are one sled batch, which sled recovers whole or
    /// not at all, so a kill at any moment leaves the old book or the new one; durable on
    /// return.
    pub fn create(&self, header: &BookHeader, entries: &[Entry]) -> Result<(), StoreError> {
        let mut b = Batch::default();
        for k in self.tree.iter().keys() {
            b.batch.remove(k?);
        }
        for e in entries {
            b.put_entry(e, true)?;
        }
        b.put_header(header)?;
        b.put_expansion(None)?;
        // The entries are the base book: growth saves what it changes under `b`.
        b.put_meta("base", &HeaderRecord::from(header))?;
        self.tree.apply_batch(b.batch)?;
        self.positions
            .store(self.tree.scan_prefix([P]).count(), Ordering::Relaxed);
        self.flush()
    }
}

fn backend(e: StoreError) -> BookStoreError {
    BookStoreError::Backend {
        source: Box::new(e),
    }
}

/// The book crate's storage trait over the sled store, for offline tools. Positions written
/// through it are not pending a search; derived fields are stored as given.
impl BookStore for Store {
    fn header(&self) -> Result<BookHeader, BookStoreError> {
        match self
            .tree
            .get(meta_key("header"))
            .map_err(|e| backend(e.into()))?
        {
            Some(v) => Ok(decode::<HeaderRecord>(b"mheader", &v)
                .map_err(backend)?
                .into()),
            None => Ok(BookHeader::default()),
        }
    }

    fn set_header(&mut self, header: BookHeader) -> Result<(), BookStoreError> {
        let mut b = Batch::default();
        b.put_header(&header).map_err(backend)?;
        self.apply(b).map_err(backend)
    }

    fn get(&self, board: &Board) -> Result<Option<Position>, BookStoreError> {
        let k = pos_key(board);
        match self.tree.get(k).map_err(|e| backend(e.into()))? {
            Some(v) => Ok(Some(
                decode::<PositionRecord>(&k, &v)
                    .map_err(backend)?
                    .into_entry()
                    .pos,
            )),
            None => Ok(None),
        }
    }

    fn put(&mut self, position: Position) -> Result<(), BookStoreError> {
        ensure_canonical(&position.board)?;
        let is_new = !self
            .tree
            .contains_key(pos_key(&position.board))
            .map_err(|e| backend(e.into()))?;
        let mut b = Batch::default();
        b.put_entry(&Entry::new(position), is_new)
            .map_err(backend)?;
        self.apply(b).map_err(backend)
    }

    fn remove(&mut self, board: &Board) -> Result<Option<Position>, BookStoreError> {
        let old = BookStore::get(self, board)?;
        if old.is_some() {
            self.tree
                .remove(pos_key(board))
                .map_err(|e| backend(e.into()))?;
            self.positions.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(old)
    }

    fn contains(&self, board: &Board) -> Result<bool, BookStoreError> {
        self.tree
            .contains_key(pos_key(board))
            .map_err(|e| backend(e.into()))
    }

    fn len(&self) -> Result<usize, BookStoreError> {
        Ok(self.position_count())
    }

    fn iter(&self) -> Box<dyn Iterator<Item = Result<Position, BookStoreError>> + '_> {
        Box::new(self.tree.scan_prefix([P]).map(|kv| {
            let (k, v) = kv.map_err(|e| backend(e.into()))?;
            Ok(decode::<PositionRecord>(&k, &v)
                .map_err(backend)?
                .into_entry()
                .pos)
        }))
    }
}

#[cfg(test)]
mod tests;
