//! [`Batch`]: a set of writes applied atomically, and [`Store::apply`], which turns its results
//! into one result group and its positions into chunks.
//!
//! Results are grouped: a batch's results are one `g` record under the next sequence number, so
//! a call's results cost one sled insert at the tail of the tree (sequential keys) instead of
//! one random insert each; start-up reads the groups in order, a later group's result of a
//! request replacing an earlier one, and drops the results a later `x` tombstone removed.
//! A group is one value of an atomic batch: sled recovers it whole or not at all.
//!
//! Position records go in chunks of many positions under one sequence number (`k` records):
//! sled applies a batch under a process-wide write lock that stops every other write (results
//! included), and a checkpoint of 100k positions as 100k keys held it for about a second.

use super::keys::{
    K, U, X, chunk_key, done_key, encode, group_key, meta_key, program_key, request_key, seal,
    trust_key,
};
use super::{
    CaseRecord, Entry, GrowthRecord, HeaderRecord, HistoryRecord, LogRecord, PositionRecordRef,
    ProgramRecord, ResultGroupRecord, ResultRecord, Store, StoreError, TodoRecord, TrustRecord,
};
use bookfarm_book::MemBook;
use bookfarm_book::model::{BookHeader, Position};
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use uuid::Uuid;

/// Positions per chunk of a batch's position records (about 40 KB: well under sled's inline
/// value limit of a quarter segment, so a chunk is one log write).
pub const CHUNK_POSITIONS: usize = 1024;

/// A set of writes applied atomically ([`Store::apply`]).
#[derive(Debug, Default)]
pub struct Batch {
    /// The writes other than results and positions.
    pub(super) batch: sled::Batch,
    /// Number of writes queued.
    pub len: usize,
    /// Results stored (`Some`) or removed (`None`) by this batch, the last write of each
    /// request: one `g` record and the `x` tombstones at [`Store::apply`].
    pub(super) results: std::collections::HashMap<LeafRequest, Option<ResultRecord>>,
    /// Writes of `len` that are result writes (`put_result`, `remove_result`).
    pub(super) result_writes: usize,
    /// Position records, encoded back to back, at most [`CHUNK_POSITIONS`] per chunk: one
    /// `k` record each at [`Store::apply`].
    pub(super) chunks: Vec<Vec<u8>>,
    /// Positions in the last chunk.
    chunk_len: usize,
    /// Whether the batch's positions replace every stored position record.
    pub(super) replace_positions: bool,
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

    /// Make this batch's positions the only stored position records: every `k` record is
    /// removed when it is applied (the base file's positions stay).
    pub fn replace_positions(&mut self) {
        self.replace_positions = true;
        self.len += 1;
    }

    /// Record an accepted job id.
    pub fn put_done(&mut self, id: &Uuid, board: &Board) -> Result<(), StoreError> {
        let k = done_key(id);
        self.batch
            .insert(&k[..], encode(&k, &(board.player, board.opponent))?);
        self.len += 1;
        Ok(())
    }

    /// Write the meta record `name`.
    pub(super) fn put_meta<T: serde::Serialize>(
        &mut self,
        name: &str,
        v: &T,
    ) -> Result<(), StoreError> {
        let k = meta_key(name);
        let v = encode(&k, v)?;
        self.batch.insert(k, v);
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
            Some(c) => {
                let k = request_key(U, req);
                self.batch.insert(&k[..], encode(&k, c)?)
            }
            None => self.batch.remove(&request_key(U, req)[..]),
        }
        self.len += 1;
        Ok(())
    }

    /// Write a contributor's trust record.
    pub fn put_trust(&mut self, name: &str, t: &TrustRecord) -> Result<(), StoreError> {
        let k = trust_key(name);
        let v = encode(&k, t)?;
        self.batch.insert(k, v);
        self.len += 1;
        Ok(())
    }

    /// Delete a stored leaf result (its only voucher was caught).
    pub fn remove_result(&mut self, req: &LeafRequest) {
        self.results.insert(*req, None);
        self.len += 1;
        self.result_writes += 1;
    }

    /// Write the replay log (the programs that changed the book since the base book).
    pub fn put_log(&mut self, log: &LogRecord) -> Result<(), StoreError> {
        self.put_meta("growth-log", log)
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

    /// Write a program of the queue.
    pub fn put_program(&mut self, p: &ProgramRecord) -> Result<(), StoreError> {
        let k = program_key(p.id);
        self.batch.insert(&k, encode(&k, p)?);
        self.len += 1;
        Ok(())
    }

    /// Remove a program's record (one of the oldest finished, no longer listed).
    pub fn remove_program(&mut self, id: u64) {
        self.batch.remove(&program_key(id));
        self.len += 1;
    }

    /// Write the ids of the programs still to run, in run order.
    pub fn put_program_queue(&mut self, ids: &[u64]) -> Result<(), StoreError> {
        self.put_meta("program-queue", &ids)
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
}

impl Store {
    /// Lift the block for invalid results of contributor `name` in a stopped coordinator's
    /// store (`workers unblock --db`; a running service does it in its own state,
    /// `Coordinator::unblock_contributor`), durable on return; its other counts stay. Returns
    /// whether it was blocked.
    pub fn unblock_trust(&self, name: &str) -> Result<bool, StoreError> {
        let key = trust_key(name);
        let Some(v) = self.tree().get(&key)? else {
            return Ok(false);
        };
        let mut t: TrustRecord = super::keys::decode(&key, &v)?;
        if !t.blocked {
            return Ok(false);
        }
        t.blocked = false;
        let mut b = Batch::default();
        b.put_trust(name, &t)?;
        self.apply(b)?;
        self.flush()?;
        Ok(true)
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
                        let k = request_key(X, &req);
                        b.batch.insert(&k[..], seal(&k, &seq.to_be_bytes()));
                    }
                }
            }
            // Written even when empty (a batch that only removes results): the next start
            // takes its first sequence number after the last group, so a number a tombstone
            // carries is never handed out again (a result stored again under it would be
            // dropped as removed).
            let k = group_key(seq);
            if group_only {
                tree.insert(&k[..], encode(&k, &group)?)?;
                return Ok(());
            }
            b.batch.insert(&k[..], encode(&k, &group)?);
        }
        // Position records go in chunks of many positions under one sequence number: a
        // checkpoint of 100,000 positions is then about a hundred keys. sled applies a batch
        // under a process-wide write lock that stops every other write (results included), and
        // one key per position held it for about a second.
        let replace = b.replace_positions;
        if replace {
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
                let k = chunk_key(seq, index);
                let v = seal(&k, chunk);
                written += v.len() as u64;
                b.batch.insert(&k[..], v);
            }
        }
        if replace {
            let k = meta_key("replaced-bytes");
            let v = encode(&k, &written)?;
            b.batch.insert(k, v);
        }
        super::sled_gate::apply(&tree, b.batch)?;
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
}
