//! What a start reads: [`Store::load`] (the book, the results, the trust records, the growth
//! state), and the readers behind it.
//!
//! The book is the base file's positions in order with the `k` chunks over them, in the order
//! they were written: a record with a known board replaces that position in place; others are
//! appended. The results are the `g` groups in order (a later group's result of a request
//! replacing an earlier one) without those a later `x` tombstone removed.

use super::generations::{base_file, base_io};
use super::keys::{D, G, K, Q, T, U, X, be_u64, decode, hex, request_of, unseal};
use super::{
    BaseRecord, CaseRecord, GrowthRecord, HeaderRecord, HistoryRecord, LogRecord, PositionRecord,
    ProgramRecord, ResultGroupRecord, ResultRecord, Store, StoreError, TodoRecord, TrustRecord,
};
use bookfarm_book::MemBook;
use bookfarm_book::edax::{self, ReadError};
use bookfarm_book::model::BookHeader;
use bookfarm_engine::Board;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::path::Path;
use uuid::Uuid;

/// What [`Store::load`] returns: everything the service needs to rebuild its state.
#[derive(Debug)]
pub struct Loaded {
    /// The book header.
    pub header: BookHeader,
    /// The book: the base with the position chunks over it, negamax fields as stored.
    pub book: MemBook,
    /// Ids of accepted jobs: their `d` records and the jobs the stored results name.
    pub done: Vec<Uuid>,
    /// The growth programs and the running one's state.
    pub growth: Option<GrowthRecord>,
    /// The running program's marked boards.
    pub todo: Option<TodoRecord>,
    /// The programs of the queue (queued, running, and the last finished), by id.
    pub programs: Vec<ProgramRecord>,
    /// The ids of the programs still to run, in run order.
    pub program_queue: Vec<u64>,
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
    /// The replay log: the programs that changed the book since the base book.
    pub log: Option<LogRecord>,
    /// Rollbacks by replay requested, and the last one a stored checkpoint covers.
    pub rollbacks: (u64, u64),
}

impl Store {
    /// The book: the base file's positions in order, then the `k` chunks in the order they
    /// were written over them (a record with a known board replaces that position in place;
    /// others are appended).
    fn load_book(&self, header: BookHeader) -> Result<MemBook, StoreError> {
        let mut book = self.load_base(header)?;
        for kv in self.tree().scan_prefix([K]) {
            let (k, v) = kv?;
            let mut rest: &[u8] = unseal(&k, &v)?;
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

    /// The base file's positions in order under `header`.
    pub(super) fn load_base(&self, header: BookHeader) -> Result<MemBook, StoreError> {
        let base = self.meta::<BaseRecord>("base")?;
        let positions = base.map_or(0, |b| usize::try_from(b.positions).unwrap_or(usize::MAX));
        // Links are about one per position in grown books; the arena grows if not.
        let mut book = MemBook::with_capacity(header, positions, positions);
        if let Some(base) = base {
            let path = base_file(&self.dir, base.generation);
            let bytes = std::fs::read(&path).map_err(base_io(&path))?;
            self.check_base_sums(base.generation, &path, &bytes)?;
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

    /// Load the whole store, every record's checksum checked first
    /// ([`Store::verify_records`]).
    pub fn load(&self, dir_for_errors: &Path) -> Result<Loaded, StoreError> {
        self.verify_records()?;
        let Some(header) = self.meta::<HeaderRecord>("header")? else {
            return Err(StoreError::NoBook(dir_for_errors.display().to_string()));
        };
        let header = BookHeader::from(header);
        let book = self.load_book(header)?;
        let mut done = Vec::new();
        for kv in self.tree().scan_prefix([D]) {
            let (k, v) = kv?;
            unseal(&k, &v)?;
            if let Ok(b) = <[u8; 16]>::try_from(&k[1..]) {
                done.push(Uuid::from_bytes(b));
            }
        }
        let growth = self.meta::<GrowthRecord>("growth")?;
        let mut programs = Vec::new();
        for kv in self.tree().scan_prefix([Q]) {
            let (k, v) = kv?;
            programs.push(decode::<ProgramRecord>(&k, &v)?);
        }
        let program_queue = self.meta::<Vec<u64>>("program-queue")?.unwrap_or_default();
        let todo = self.meta::<TodoRecord>("growth-todo")?;
        let signature = self.meta::<String>("signature")?;
        // The history only feeds charts: an unreadable one is dropped rather than refusing to
        // open the book (a change of its layout is a migration like any other).
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
        let log = self.meta::<LogRecord>("growth-log")?;
        let rollbacks = (
            self.meta::<u64>("rollback-requested")?.unwrap_or(0),
            self.meta::<u64>("rollback-replayed")?.unwrap_or(0),
        );
        Ok(Loaded {
            header,
            book,
            done,
            growth,
            todo,
            programs,
            program_queue,
            results,
            signature,
            history,
            cases,
            trust,
            log,
            rollbacks,
        })
    }

    /// Every stored result: the groups in order (a later group's result of a request replaces
    /// an earlier one), without the results a tombstone removed after their group.
    pub(super) fn results(&self) -> Result<Vec<(LeafRequest, ResultRecord)>, StoreError> {
        let removed = self.tombstones()?;
        let mut results = std::collections::HashMap::new();
        self.each_grouped_result(|seq, req, r| {
            if removed.get(&req).is_none_or(|&t| t < seq) {
                results.insert(req, r);
            }
        })?;
        Ok(results.into_iter().collect())
    }

    /// The results the tombstones removed: for each removed request, the last result stored
    /// at or before its removal, in request order. A caught contributor's rollback removes its
    /// results in the batch that requests the rollback, so after a restart these are the
    /// dropped results growth retracts (with those of earlier rollbacks, whose leaves are no
    /// longer in the book).
    pub fn removed_results(&self) -> Result<Vec<(LeafRequest, LeafResult)>, StoreError> {
        let removed = self.tombstones()?;
        if removed.is_empty() {
            return Ok(Vec::new());
        }
        // Groups come in sequence order: the last result kept is the latest.
        let mut last = std::collections::BTreeMap::new();
        self.each_grouped_result(|seq, req, r| {
            if removed.get(&req).is_some_and(|&t| seq <= t) {
                let b = req.board;
                last.insert(
                    (b.player, b.opponent, req.excluded, req.level),
                    (req, r.leaf),
                );
            }
        })?;
        Ok(last.into_values().collect())
    }

    /// The tombstones: each removed request with the sequence number of its removal.
    fn tombstones(&self) -> Result<std::collections::HashMap<LeafRequest, u64>, StoreError> {
        let mut removed = std::collections::HashMap::new();
        for kv in self.tree().scan_prefix([X]) {
            let (k, v) = kv?;
            if let (Some(req), Some(seq)) = (request_of(&k), be_u64(unseal(&k, &v)?, 0)) {
                removed.insert(req, seq);
            }
        }
        Ok(removed)
    }

    /// Every result of every stored group, in group sequence order, with its group's sequence.
    fn each_grouped_result(
        &self,
        mut f: impl FnMut(u64, LeafRequest, ResultRecord),
    ) -> Result<(), StoreError> {
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
                f(seq, req, r);
            }
        }
        Ok(())
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
}
