//! The persistent book store on sled.
//!
//! One sled tree per book generation holds everything of the book, under one-byte key prefixes,
//! so that each logical change (a result linked in, an expansion) is a single atomic
//! `apply_batch`. The tree is `book-<generation as 16 hex digits>`, named by the `book-tree`
//! key of sled's default tree (absent: the tree `book`, as written by earlier versions and
//! read as they wrote it):
//!
//! | key | value (postcard) |
//! |---|---|
//! | `m` + `base` | [`BaseRecord`]: the generation and size of the base book file |
//! | `k` + 8-byte sequence number (BE) + 4-byte chunk index (BE) | [`PositionRecord`]s back to back, at most [`CHUNK_POSITIONS`]: positions one batch wrote |
//! | `m` + `replaced-bytes` | u64: bytes of the chunks the last replacement of the position records wrote |
//! | `p` + 16-byte canonical board (player BE, opponent BE) | legacy [`PositionRecord`] (written by earlier versions; read before the chunks, removed by the next replacement) |
//! | `d` + 16-byte job id | board of an accepted job whose acceptance wrote no `r` record (an `r` record names its job; both make resubmission idempotent) |
//! | `m` + `header` | [`HeaderRecord`] |
//! | `m` + `expansion` | [`ExpansionRecord`] |
//! | `m` + `history` | [`HistoryRecord`] (web UI charts and contributors) |
//! | `m` + `growth-log` | [`QueueRecord`]: the programs finished since the base book |
//! | `m` + `replay-base` | [`HeaderRecord`] of the base book (present: replay is possible) |
//! | `m` + `rollback-requested` | u64: rollbacks by replay requested so far (written with the tombstones of the results a caught worker loses) |
//! | `m` + `rollback-replayed` | u64: the last of those requests a replay covered (written by the checkpoint of the replayed book); a start with fewer replayed than requested replays first |
//! | `g` + 8-byte sequence number (BE) | [`ResultGroupRecord`]: the results one batch stored (one call's applied results, with the contributors vouching), keyed by request |
//! | `x` + request | the sequence number of the batch that removed the request's result: results of that request in earlier groups are dropped |
//! | `r` + request | legacy [`ResultRecord`] (written by earlier versions; read at start-up as if older than every group) |
//! | `u` + request | [`CaseRecord`] (replicas of a request waiting for validation) |
//! | `t` + contributor name | [`TrustRecord`] (standing and credit) |
//! | `b` + 16-byte canonical board | legacy (written by earlier versions, no longer written): a position's `p` record from before growth first changed it (an empty value: none) |
//!
//! The book is a **base** with the position records over it (legacy `p` records, then the `k`
//! chunks in key order): a record replaces the position with its board or adds a position.
//! Every position record is growth's: replacing the book writes a new base file and starts a
//! new tree, so reverting to the base book (a replay) is removing every `p` and `k` record (and
//! restoring a legacy `b` record's saved version, if any). Chunks rather than a key per
//! position: sled applies a batch under a process-wide write lock that stops every other write
//! (results included), and a checkpoint of 100k positions as 100k keys held it for about a
//! second. Superseded versions are dropped by a **fold** ([`Store::positions_fold_due`]): a
//! checkpoint that writes the whole book as the replacement of every position record.
//!
//! Growth state is **checkpointed**: the position records, the header and the growth records
//! (`growth`, `growth-queue`, `growth-todo`, `growth-log`) are written together in one batch
//! at most every `ServiceConfig::checkpoint_interval` (and whenever a program starts or
//! finishes, at pause, replay and clean shutdown), so between checkpoints they describe an
//! earlier moment of the programs than the in-memory book. The book is a function of the
//! programs and the results (`g` records, durable before they are acknowledged), so a
//! restarted coordinator loads the last checkpoint and the driver re-runs from it with the
//! stored results, searching nothing again. The base is an Edax `book.dat` file beside sled's files,
//! `base/<generation>.dat` (records in the book's order, so a reload keeps it), named by the
//! `m base` record. Replacing the book (import, `book new`, offline rewrites) writes the next
//! generation's file and syncs it, writes the few records of the new generation's tree and
//! flushes, then moves the `book-tree` pointer (one insert) and flushes, then drops the old
//! tree and deletes the old file: a crash before the pointer's move is durable leaves the old
//! book, after it the new one; opening the store drops every book tree but the current one and
//! deletes every base file but the current one. The switch does not depend on sled recovering
//! a batch as large as the old book (one removal per key) whole, and costs nothing per key.
//! Growth writes the positions it changes as `k` chunks. The base is not read through sled, so
//! it costs neither sled's page cache nor its write amplification.
//!
//! Results are grouped: a batch's results are one `g` record under the next sequence number, so
//! a call's results cost one sled insert at the tail of the tree (sequential keys) instead of
//! one random insert each; start-up reads the groups in order, a later group's result of a
//! request replacing an earlier one, and drops the results a later `x` tombstone removed.
//! A group is one value of an atomic batch: sled recovers it whole or not at all.
//!
//! Worker credentials live in a tree of their own (`credentials`, see [`CredentialStore`]),
//! which replacing the book never touches.
//!
//! sled 0.34.7 can leave a store it cannot open when killed while writing the snapshot it takes
//! at every open, or the configuration file it writes at a store's first open; the store deletes
//! such files before opening (see `remove_unfinished_sled_files`).
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
    BaseRecord, CaseRecord, ContributorRecord, DriverRecord, ExpansionRecord, ExpansionStateRecord,
    GrowthRecord, HeaderRecord, HistoryRecord, OperationRecord, PositionRecord, PositionRecordRef,
    QueueRecord, ReplicaRecord, ResultGroupRecord, ResultRecord, Sample, TodoRecord, TrustRecord,
};

use bookfarm_book::MemBook;
use bookfarm_book::edax::{self, ReadError};
use bookfarm_book::model::{BookHeader, Position};
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use std::path::{Path, PathBuf};
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
}

const P: u8 = b'p';
const D: u8 = b'd';
const M: u8 = b'm';
const R: u8 = b'r';
const U: u8 = b'u';
const T: u8 = b't';
const B: u8 = b'b';
const G: u8 = b'g';
const X: u8 = b'x';
const K: u8 = b'k';

/// Positions per chunk of a batch's position records (about 40 KB: well under sled's inline
/// value limit of a quarter segment, so a chunk is one log write).
pub const CHUNK_POSITIONS: usize = 1024;

/// Position chunks are folded (all positions written again as one replacement) once they
/// hold at least twice this or twice the last replacement, whichever is larger.
pub const FOLD_MIN_BYTES: u64 = 8 << 20;

/// The key of chunk `index` of the position records the batch `seq` wrote.
fn chunk_key(seq: u64, index: u32) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0] = K;
    k[1..9].copy_from_slice(&seq.to_be_bytes());
    k[9..].copy_from_slice(&index.to_be_bytes());
    k
}

fn group_key(seq: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = G;
    k[1..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn tomb_key(r: &LeafRequest) -> [u8; 26] {
    let mut k = result_key(r);
    k[0] = X;
    k
}

/// A big-endian u64 at `at` of `v`, if there are 8 bytes there.
fn be_u64(v: &[u8], at: usize) -> Option<u64> {
    v.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
}

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

/// The key of a position record in the layout before chunks (`p`: still read, and removed by
/// the first replacement of the position records).
#[cfg(test)]
fn pos_key(b: &Board) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = P;
    k[1..9].copy_from_slice(&b.player.to_be_bytes());
    k[9..17].copy_from_slice(&b.opponent.to_be_bytes());
    k
}

/// The directory of the base book files, inside the store directory.
const BASE_DIR: &str = "base";

fn base_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(BASE_DIR).join(format!("{generation:016x}.dat"))
}

fn base_io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::BaseIo {
        path: path.display().to_string(),
        source,
    }
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

/// The meta record `name` of `tree`, if stored.
fn meta_in<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    name: &str,
) -> Result<Option<T>, StoreError> {
    let key = meta_key(name);
    match tree.get(&key)? {
        Some(v) => Ok(Some(decode::<T>(&key, &v)?)),
        None => Ok(None),
    }
}

/// Key, in sled's default tree, of the name of the tree holding the current book generation
/// (absent: [`LEGACY_BOOK_TREE`]). Moving it is the one write that switches books.
const BOOK_TREE_KEY: &[u8] = b"book-tree";

/// The book tree of stores written before each generation had a tree of its own, and of a new
/// store until its first book.
const LEGACY_BOOK_TREE: &str = "book";

/// The tree of the book generation whose base file is `base/<generation>.dat`.
fn book_tree_name(generation: u64) -> String {
    format!("{LEGACY_BOOK_TREE}-{generation:016x}")
}

/// Whether a sled tree is one of the book's (current, legacy or generation; not the
/// credentials or sled's own).
fn is_book_tree(name: &[u8]) -> bool {
    name == LEGACY_BOOK_TREE.as_bytes()
        || name.starts_with(format!("{LEGACY_BOOK_TREE}-").as_bytes())
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
    /// Ids of accepted jobs: their `d` records and the jobs the `r` records name.
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
    /// Rollbacks by replay requested, and the last one a stored checkpoint covers.
    pub rollbacks: (u64, u64),
}

/// A set of writes applied atomically.
#[derive(Debug, Default)]
pub struct Batch {
    batch: sled::Batch,
    /// Number of writes queued.
    pub len: usize,
    /// Results stored (`Some`) or removed (`None`) by this batch, the last write of each
    /// request: one `g` record and the `x` tombstones at [`Store::apply`].
    results: std::collections::HashMap<LeafRequest, Option<ResultRecord>>,
    /// Writes of `len` that are result writes (`put_result`, `remove_result`).
    result_writes: usize,
    /// Position records, encoded back to back, at most [`CHUNK_POSITIONS`] per chunk: one
    /// `k` record each at [`Store::apply`].
    chunks: Vec<Vec<u8>>,
    /// Positions in the last chunk.
    chunk_len: usize,
    /// Whether the batch's positions replace every stored position record.
    replace_positions: bool,
}

impl Batch {
    /// Write a position record (over the base position with its board, if any).
    pub fn put_entry(&mut self, e: &Entry) -> Result<(), StoreError> {
        self.put_position(&e.pos)
    }

    /// Write a position (its record carries no scheduling state).
    pub fn put_position(&mut self, p: &Position) -> Result<(), StoreError> {
        let links: Vec<[u8; 2]> = p.links.iter().map(|l| l.to_bytes()).collect();
        self.put_record(&PositionRecordRef {
            player: p.board.player,
            opponent: p.board.opponent,
            leaf: p.leaf.to_bytes(),
            links: &links,
            level: p.level,
            scores: [p.value, p.lower, p.upper],
            counts: [p.n_wins, p.n_draws, p.n_losses, p.n_lines],
        })
    }

    /// Write the position `id` of `book` (what [`Batch::put_position`] of
    /// `book.position(id)` writes, without building the position).
    pub fn put_book_position(
        &mut self,
        book: &MemBook,
        id: bookfarm_book::NodeId,
    ) -> Result<(), StoreError> {
        let mut links = [[0u8; 2]; 64];
        let mut n = 0;
        for (slot, l) in links.iter_mut().zip(book.links(id)) {
            *slot = l.to_bytes();
            n += 1;
        }
        let board = book.board(id);
        let score = book.score(id);
        let c = book.counts(id);
        self.put_record(&PositionRecordRef {
            player: board.player,
            opponent: board.opponent,
            leaf: book.leaf(id).to_bytes(),
            links: &links[..n],
            level: book.level(id),
            scores: [score.value, score.lower, score.upper],
            counts: [c.n_wins, c.n_draws, c.n_losses, c.n_lines],
        })
    }

    /// Append one record to the last chunk (a new one when it is full).
    fn put_record(&mut self, rec: &PositionRecordRef<'_>) -> Result<(), StoreError> {
        if self.chunk_len == CHUNK_POSITIONS || self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(CHUNK_POSITIONS * 48));
            self.chunk_len = 0;
        }
        if let Some(chunk) = self.chunks.last_mut() {
            *chunk = postcard::to_extend(rec, std::mem::take(chunk)).map_err(StoreError::Encode)?;
        }
        self.chunk_len += 1;
        self.len += 1;
        Ok(())
    }

    /// Make this batch's positions the only stored position records: every `p` and `k`
    /// record is removed when it is applied (the base file's positions stay).
    pub fn replace_positions(&mut self) {
        self.replace_positions = true;
        self.len += 1;
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

    /// Record that rollback by replay number `n` was requested (with the removals it follows).
    pub fn put_rollback_requested(&mut self, n: u64) -> Result<(), StoreError> {
        self.put_meta("rollback-requested", &n)
    }

    /// Record that the book in this checkpoint is replayed through rollback request `n`.
    pub fn put_rollback_replayed(&mut self, n: u64) -> Result<(), StoreError> {
        self.put_meta("rollback-replayed", &n)
    }

    /// Write the book header.
    pub fn put_header(&mut self, h: &BookHeader) -> Result<(), StoreError> {
        self.put_meta("header", &HeaderRecord::from(h))
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
        self.results.insert(*req, None);
        self.len += 1;
        self.result_writes += 1;
    }

    /// Write the programs finished since the base book.
    pub fn put_log(&mut self, q: &QueueRecord) -> Result<(), StoreError> {
        self.put_meta("growth-log", q)
    }

    /// Store a leaf result under its request (in this batch's result group).
    pub fn put_result(&mut self, req: &LeafRequest, r: &ResultRecord) -> Result<(), StoreError> {
        self.results.insert(*req, Some(r.clone()));
        self.len += 1;
        self.result_writes += 1;
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

/// sled's data file, whose `flock` marks the directory as open.
const SLED_DATA_FILE: &str = "db";

/// sled's configuration file (segment size, compression, version), written at the first open.
const SLED_CONF_FILE: &str = "conf";

/// Delete the files sled began and never finished: its snapshots (`snap.<lsn>.generating`),
/// unless another process holds the store, and the configuration of a store whose first open
/// was cut short.
///
/// sled 0.34.7 writes a snapshot of its page table at every open, after recovering its log:
/// into `snap.<lsn>.generating`, synced, then renamed to `snap.<lsn>`; older snapshots are
/// removed only after the rename. But its search for the newest snapshot skips only names
/// ending in `.in___motion` (an older suffix), so a `.generating` file is read as the newest
/// snapshot, and one cut short by a kill fails its checksum: every later open returns
/// `Corruption { at: None }` (spacejam/sled#1527, #1533). Deleting it is what the rename would
/// have made unnecessary: the previous snapshot (or none) is still there, and so is the log the
/// new one was built from (recovery only zeroed what lies past the log's end), so recovery runs
/// again from there, as after a kill just before the snapshot was begun.
///
/// The files are only deleted under the lock sled takes on its data file (an `flock`, which
/// conflicts between open files even in one process): a process holding the store may be
/// writing its own snapshot. The lock is released before sled opens the store.
///
/// Likewise sled writes its configuration file `conf` at a store's first open without
/// syncing it, in two writes (the lines, then their checksum), and only then creates its data
/// file; a `conf` cut short between them makes every later open fail (`Corruption`). A `conf`
/// without a data file is such a first open's, and the store never held anything: it is
/// deleted and sled writes it again. (If another process is between those two steps of its own
/// first open, it has read its configuration already and goes on; the next open rewrites the
/// same lines.)
fn remove_unfinished_sled_files(dir: &Path) -> Result<(), StoreError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StoreError::Io { path, source }
    };
    let data = dir.join(SLED_DATA_FILE);
    let file = match std::fs::File::open(&data) {
        Ok(f) => f,
        // A new store: sled has written no snapshot yet, and perhaps part of its configuration.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let conf = dir.join(SLED_CONF_FILE);
            return match std::fs::remove_file(&conf) {
                Ok(()) => {
                    tracing::warn!(path = %conf.display(), "removing the configuration of a store sled did not finish creating");
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(&conf)(e)),
            };
        }
        Err(e) => return Err(io(&data)(e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        // Open elsewhere (or still closing here, sled#1234): sled's own lock fails and is retried.
        Err(std::fs::TryLockError::WouldBlock) => return Ok(()),
        Err(std::fs::TryLockError::Error(e)) => return Err(io(&data)(e)),
    }
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        let unfinished = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("snap.") && n.ends_with(".generating"));
        if unfinished {
            tracing::warn!(path = %path.display(), "removing a snapshot sled did not finish writing");
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    // Dropping `file` releases the lock.
    Ok(())
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
    /// The tree of the current book generation (switched by [`Store::create_book`]).
    tree: std::sync::RwLock<sled::Tree>,
    /// Held by [`Store::create_book`].
    replacing: std::sync::Mutex<()>,
    dir: PathBuf,
    /// The sequence number of the next result group.
    next_group: std::sync::atomic::AtomicU64,
    /// The sequence number of the next batch that writes position chunks.
    next_chunk: std::sync::atomic::AtomicU64,
    /// Bytes of the stored position chunks.
    chunk_bytes: std::sync::atomic::AtomicU64,
    /// Bytes of the chunks the last replacement of the position records wrote.
    replaced_bytes: std::sync::atomic::AtomicU64,
    /// The floor of [`Store::positions_fold_due`] ([`FOLD_MIN_BYTES`] unless set).
    fold_min_bytes: std::sync::atomic::AtomicU64,
    /// Replacements of the position records applied since the store was opened.
    replacements: std::sync::atomic::AtomicU64,
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
    ///
    /// Before sled opens, a snapshot sled did not finish writing is deleted (a kill during an
    /// earlier open would otherwise leave a store sled refuses to open); after, the book trees
    /// and base files of an interrupted replacement are dropped.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> Result<Store, StoreError> {
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .flush_every_ms(Some(1000));
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        let db = loop {
            remove_unfinished_sled_files(dir)?;
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
        let current = match db.get(BOOK_TREE_KEY)? {
            Some(name) => name.to_vec(),
            None => LEGACY_BOOK_TREE.as_bytes().to_vec(),
        };
        // Any other book tree is a generation a replacement did not finish switching to (killed
        // before the pointer moved) or did not finish dropping (killed after): neither is the book.
        for name in db.tree_names() {
            if is_book_tree(&name) && name != current {
                tracing::info!(
                    tree = %String::from_utf8_lossy(&name),
                    "dropping a book generation left by an interrupted replacement"
                );
                db.drop_tree(&name)?;
            }
        }
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
        let replaced_bytes = match tree.get(meta_key("replaced-bytes"))? {
            Some(v) => decode::<u64>(b"mreplaced-bytes", &v)?,
            None => 0,
        };
        use std::sync::atomic::AtomicU64;
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

    /// Delete the base files the store does not reference (left by a replacement that crashed
    /// before its pointer moved, or whose old file was not deleted yet).
    fn remove_stale_bases(&self) -> Result<(), StoreError> {
        let keep = self
            .meta::<BaseRecord>("base")?
            .map(|b| base_file(&self.dir, b.generation));
        let dir = self.dir.join(BASE_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(base_io(&dir)(e)),
        };
        for entry in entries {
            let path = entry.map_err(base_io(&dir))?.path();
            if Some(&path) != keep.as_ref() {
                std::fs::remove_file(&path).map_err(base_io(&path))?;
            }
        }
        Ok(())
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

    /// The book: the base file's positions in order, then the `p` records (an earlier
    /// version's layout) and the `k` chunks in the order they were written over them (a record
    /// with a known board replaces that position in place; others are appended).
    fn load_book(&self, header: BookHeader) -> Result<MemBook, StoreError> {
        let mut book = self.load_base(header)?;
        for kv in self.tree().scan_prefix([P]) {
            let (k, v) = kv?;
            book.put_position(&decode::<PositionRecord>(&k, &v)?.into_entry().pos);
        }
        for kv in self.tree().scan_prefix([K]) {
            let (k, v) = kv?;
            let mut rest: &[u8] = &v;
            while !rest.is_empty() {
                let (rec, tail) =
                    postcard::take_from_bytes::<PositionRecord>(rest).map_err(|source| {
                        StoreError::Decode {
                            key: hex(&k),
                            source,
                        }
                    })?;
                book.put_position(&rec.into_entry().pos);
                rest = tail;
            }
        }
        book.shrink_to_fit();
        Ok(book)
    }

    /// Whether the next checkpoint should write every position again as a replacement of the
    /// stored ones ([`Batch::replace_positions`]): once the chunks hold twice what the last
    /// replacement wrote (at least twice [`FOLD_MIN_BYTES`]), so a grown book's store holds
    /// at most about three times its positions, and each change is written about twice.
    pub fn positions_fold_due(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let floor = self.fold_min_bytes.load(Relaxed);
        let replaced = self.replaced_bytes.load(Relaxed).max(floor);
        self.chunk_bytes.load(Relaxed) >= 2 * replaced
    }

    /// Replacements of the position records ([`Batch::replace_positions`]) applied since the
    /// store was opened.
    pub fn position_replacements(&self) -> u64 {
        self.replacements.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Set the floor of [`Store::positions_fold_due`] (default [`FOLD_MIN_BYTES`]; tests set
    /// a small one to fold small books).
    pub fn set_fold_min_bytes(&self, bytes: u64) {
        self.fold_min_bytes
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// The base file's positions in order under `header`.
    fn load_base(&self, header: BookHeader) -> Result<MemBook, StoreError> {
        let base = self.meta::<BaseRecord>("base")?;
        let positions = base.map_or(0, |b| usize::try_from(b.positions).unwrap_or(usize::MAX));
        // Links are about one per position in grown books; the arena grows if not.
        let mut book = MemBook::with_capacity(header, positions, positions);
        if let Some(base) = base {
            let path = base_file(&self.dir, base.generation);
            let bytes = std::fs::read(&path).map_err(base_io(&path))?;
            let bad = |source| StoreError::Base {
                path: path.display().to_string(),
                source,
            };
            let (_, count) = edax::read_header(&bytes).map_err(bad)?;
            let read = edax::read_records(&bytes, edax::HEADER_SIZE, &mut book).map_err(bad)?;
            if read != count || count != positions {
                return Err(bad(ReadError::CountMismatch {
                    offset: bytes.len(),
                    expected: positions,
                    found: read,
                }));
            }
        }
        Ok(book)
    }

    /// Load the whole store.
    pub fn load(&self, dir_for_errors: &Path) -> Result<Loaded, StoreError> {
        let header = match self.tree().get(meta_key("header"))? {
            Some(v) => decode::<HeaderRecord>(b"mheader", &v)?.into(),
            None => return Err(StoreError::NoBook(dir_for_errors.display().to_string())),
        };
        let book = self.load_book(header)?;
        let mut done = Vec::new();
        for kv in self.tree().scan_prefix([D]) {
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
        let results = self.results()?;
        // A stored result names the job that delivered it: its job was accepted too (jobs
        // settled without writing a result record have a `d` record of their own).
        done.extend(
            results
                .iter()
                .filter(|(_, r)| r.job != [0; 16])
                .map(|(_, r)| Uuid::from_bytes(r.job)),
        );
        let mut cases = Vec::new();
        for kv in self.tree().scan_prefix([U]) {
            let (k, v) = kv?;
            if let Some(req) = request_of(&k) {
                cases.push((req, decode::<CaseRecord>(&k, &v)?));
            }
        }
        let trust = self.trust_records()?;
        let log = self.meta::<QueueRecord>("growth-log")?;
        let rollbacks = (
            self.meta::<u64>("rollback-requested")?.unwrap_or(0),
            self.meta::<u64>("rollback-replayed")?.unwrap_or(0),
        );
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
            cases,
            trust,
            log,
            rollbacks,
        })
    }

    /// Every stored result: the legacy `r` records, then the groups in order (a later group's
    /// result of a request replaces an earlier one), without the results a tombstone removed
    /// after their group.
    fn results(&self) -> Result<Vec<(LeafRequest, ResultRecord)>, StoreError> {
        let mut removed = std::collections::HashMap::new();
        for kv in self.tree().scan_prefix([X]) {
            let (k, v) = kv?;
            if let (Some(req), Some(seq)) = (request_of(&k), be_u64(&v, 0)) {
                removed.insert(req, seq);
            }
        }
        let mut results = std::collections::HashMap::new();
        for kv in self.tree().scan_prefix([R]) {
            let (k, v) = kv?;
            if let Some(req) = request_of(&k) {
                results.insert(req, decode_result(&k, &v)?);
            }
        }
        for kv in self.tree().scan_prefix([G]) {
            let (k, v) = kv?;
            let Some(seq) = be_u64(&k, 1) else { continue };
            for (p, o, excluded, level, r) in decode::<ResultGroupRecord>(&k, &v)?.results {
                let req = LeafRequest {
                    board: Board {
                        player: p,
                        opponent: o,
                    },
                    excluded,
                    level,
                };
                if removed.get(&req).is_none_or(|&t| t < seq) {
                    results.insert(req, r);
                }
            }
        }
        Ok(results.into_iter().collect())
    }

    /// Every contributor's trust record (`workers list --db`).
    pub fn trust_records(&self) -> Result<Vec<(String, TrustRecord)>, StoreError> {
        let mut out = Vec::new();
        for kv in self.tree().scan_prefix([T]) {
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
        Ok(self
            .meta::<HeaderRecord>("replay-base")?
            .map(BookHeader::from))
    }

    /// The positions legacy `b` records saved (growth changed them since the base book; their
    /// `p` record from before, `None`: none). Stores written by this version have none.
    fn legacy_base_positions(&self) -> Result<Vec<Position>, StoreError> {
        let mut out = Vec::new();
        for kv in self.tree().scan_prefix([B]) {
            let (k, v) = kv?;
            if board_of_key(&k).is_some() && !v.is_empty() {
                out.push(decode::<PositionRecord>(&k, &v)?.into_entry().pos);
            }
        }
        Ok(out)
    }

    /// The base book a replay starts from: the base file under the base header, with the
    /// versions legacy `b` records saved (see [`Store::revert_to_base`], which makes the
    /// stored book this one). Writes nothing. `None`: the store predates base books.
    pub fn base_book(&self) -> Result<Option<MemBook>, StoreError> {
        let Some(header) = self.base_header()? else {
            return Ok(None);
        };
        let mut book = self.load_base(header)?;
        for p in self.legacy_base_positions()? {
            book.put_position(&p);
        }
        book.shrink_to_fit();
        Ok(Some(book))
    }

    /// Queue in `batch` what turns the stored book back into [`Store::base_book`]: every `p`
    /// and `k` record removed (all are growth's), the legacy `b` records' versions written
    /// back. Positions written to `batch` afterwards override these (they come later in the
    /// chunks), so a checkpoint can revert and write the replayed book in one batch.
    pub fn revert_to_base(&self, batch: &mut Batch) -> Result<(), StoreError> {
        batch.replace_positions();
        for p in self.legacy_base_positions()? {
            batch.put_position(&p)?;
        }
        Ok(())
    }

    /// Apply a batch atomically (not yet durable: see [`Store::flush`]): its results become
    /// one `g` record under the next sequence number, its removals `x` tombstones naming it.
    /// Batches that store or remove results must be applied one at a time (the service does so
    /// under its job-table lock), so that sequence numbers follow the order of the writes.
    ///
    /// A batch that only stores results (the usual submission of a local build) is its `g`
    /// record alone, written as one sled insert: one key is atomic by itself, and sled seals
    /// and writes its log buffer at every `apply_batch` (about 85 µs of CPU and 350 µs of wall
    /// time each, against a few µs for an insert, measured on sled 0.34.7). Durability is the
    /// same: a flush makes every earlier write durable, in log order.
    pub fn apply(&self, mut b: Batch) -> Result<(), StoreError> {
        if b.len == 0 {
            return Ok(());
        }
        // Held for the write: a replacement of the book switches trees between writes, never
        // during one (a write to the old generation would be lost with it).
        let tree = self
            .tree
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let group_only = b.len == b.result_writes && b.results.values().all(Option::is_some);
        if !b.results.is_empty() {
            let seq = self
                .next_group
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut group = ResultGroupRecord::default();
            for (req, r) in b.results.drain() {
                match r {
                    Some(r) => group.results.push((
                        req.board.player,
                        req.board.opponent,
                        req.excluded,
                        req.level,
                        r,
                    )),
                    None => {
                        b.batch.insert(&tomb_key(&req)[..], &seq.to_be_bytes()[..]);
                        b.batch.remove(&result_key(&req)[..]);
                    }
                }
            }
            // Written even when empty (a batch that only removes results): the next start
            // takes its first sequence number after the last group, so a number a tombstone
            // carries is never handed out again (a result stored again under it would be
            // dropped as removed).
            if group_only {
                tree.insert(&group_key(seq)[..], encode(&group)?)?;
                return Ok(());
            }
            b.batch.insert(&group_key(seq)[..], encode(&group)?);
        }
        // Position records go in chunks of many positions under one sequence number: a
        // checkpoint of 100,000 positions is then about a hundred keys. sled applies a batch
        // under a process-wide write lock that stops every other write (results included), and
        // one key per position held it for about a second.
        let replace = b.replace_positions;
        if replace {
            for k in tree.scan_prefix([P]).keys() {
                b.batch.remove(k?);
            }
            for k in tree.scan_prefix([K]).keys() {
                b.batch.remove(k?);
            }
        }
        let mut written = 0u64;
        if !b.chunks.is_empty() {
            let seq = self
                .next_chunk
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            for (i, chunk) in b.chunks.iter().enumerate() {
                let index = u32::try_from(i).unwrap_or(u32::MAX);
                b.batch.insert(&chunk_key(seq, index)[..], &chunk[..]);
                written += chunk.len() as u64;
            }
        }
        if replace {
            b.batch
                .insert(meta_key("replaced-bytes"), encode(&written)?);
        }
        tree.apply_batch(b.batch)?;
        use std::sync::atomic::Ordering::Relaxed;
        if replace {
            self.chunk_bytes.store(written, Relaxed);
            self.replaced_bytes.store(written, Relaxed);
            self.replacements.fetch_add(1, Relaxed);
            tracing::debug!(bytes = written, "position records replaced");
        } else {
            self.chunk_bytes.fetch_add(written, Relaxed);
        }
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

    /// Replace the book (positions, results, growth state, header: everything but the worker
    /// credentials) by `book` as the new base (its positions in its order, all pending a leaf
    /// search unless they already carry one).
    ///
    /// Crash-safe, durable on return: the new base file is written and synced, the new
    /// generation's tree (base record, header, replay base: a few keys) is written and flushed,
    /// then the pointer to it is moved by one sled insert and flushed: a kill at any moment
    /// leaves the old book (the pointer not moved: opening the store drops the new tree and
    /// deletes its file) or the new one (opening drops the old tree if this did not finish).
    /// Nothing is written per position but the file's bytes, and nothing per key of the old
    /// book: its tree is dropped whole.
    pub fn create_book(&self, book: &MemBook) -> Result<(), StoreError> {
        // One replacement at a time (two would write the same generation).
        let _one = self
            .replacing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let new = self.write_generation(&self.tree(), book)?;
        let old = {
            // Writers wait for the switch (see `Store::apply`); a batch applied to the old
            // generation before it is dropped with that generation, as the old book's.
            let mut current = self
                .tree
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let old = self.switch_generation(&mut current, new)?;
            // The new generation holds no position chunks.
            self.chunk_bytes
                .store(0, std::sync::atomic::Ordering::Relaxed);
            self.replaced_bytes
                .store(0, std::sync::atomic::Ordering::Relaxed);
            old
        };
        self.drop_generation(&old)
    }

    /// Write `book` as the generation after `current`'s: its base file (synced) and its tree
    /// (flushed), which the pointer does not name yet.
    fn write_generation(
        &self,
        current: &sled::Tree,
        book: &MemBook,
    ) -> Result<sled::Tree, StoreError> {
        let generation = meta_in::<BaseRecord>(current, "base")?.map_or(1, |b| b.generation + 1);
        let dir = self.dir.join(BASE_DIR);
        std::fs::create_dir_all(&dir).map_err(base_io(&dir))?;
        let path = base_file(&self.dir, generation);
        let file = std::fs::File::create(&path).map_err(base_io(&path))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        edax::write_book_in_order(book, &mut w).map_err(base_io(&path))?;
        let file = w.into_inner().map_err(|e| base_io(&path)(e.into_error()))?;
        file.sync_all().map_err(base_io(&path))?;
        // The file's directory entry must be durable before the record naming it is.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(base_io(&dir))?;
        let name = book_tree_name(generation);
        // A tree of that name is an earlier attempt's that failed before its switch.
        if self.db.tree_names().iter().any(|n| n == name.as_bytes()) {
            self.db.drop_tree(&name)?;
        }
        let tree = self.db.open_tree(&name)?;
        let mut b = Batch::default();
        b.put_meta(
            "base",
            &BaseRecord {
                generation,
                positions: book.len() as u64,
            },
        )?;
        b.put_header(book.header())?;
        // The new base is the book replays start from.
        b.put_meta("replay-base", &HeaderRecord::from(book.header()))?;
        tree.apply_batch(b.batch)?;
        self.flush()?;
        Ok(tree)
    }

    /// Make `new` the book: move the pointer to it (one insert, flushed: the commit point of a
    /// replacement) and hand it to the store's readers and writers. Returns the old generation.
    fn switch_generation(
        &self,
        current: &mut sled::Tree,
        new: sled::Tree,
    ) -> Result<sled::Tree, StoreError> {
        self.db.insert(BOOK_TREE_KEY, &*new.name())?;
        self.flush()?;
        Ok(std::mem::replace(current, new))
    }

    /// Drop a generation the pointer no longer names, and its base file (a kill before this
    /// ends leaves them to the next open, which drops them).
    fn drop_generation(&self, old: &sled::Tree) -> Result<(), StoreError> {
        self.db.drop_tree(old.name())?;
        self.remove_stale_bases()
    }
}

#[cfg(test)]
mod tests;
