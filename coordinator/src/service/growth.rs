//! The coordinator's side of book growth: the in-memory book, the queue of growth programs
//! (the book crate's [`Driver`]), the table of known leaf results, and their persistence.
//!
//! The book crate owns what growth *means*; this module only feeds the driver the results that
//! landed, persists what changed (positions, driver state) in one atomic batch, and hands back
//! the requests the driver is blocked on, which the job table turns into round work.
//!
//! Invariants:
//! * the stored positions and the stored driver state always describe the same moment (one
//!   batch), so a restarted coordinator resumes the serial program exactly where it was;
//! * results are stored before they are applied (`submit` writes them), so applying is
//!   idempotent and can be redone after a crash.

use crate::error::CoordinatorError;
use crate::error::Result;
use crate::store::{
    Batch, DriverRecord, GrowthRecord, OperationRecord, QueueRecord, Store, TodoRecord,
};
use bookfarm_book::MemBook;
use bookfarm_book::driver::{Driver, Operation, Progress};
use bookfarm_book::model::{BookHeader, Position};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::collections::{HashMap, VecDeque};

/// The growth state (one owner: the growth runner; status readers lock it briefly).
#[derive(Debug)]
pub(crate) struct Growth {
    pub(crate) book: MemBook,
    /// Every known result (stored ones included), by request.
    pub(crate) results: HashMap<LeafRequest, LeafResult>,
    /// Programs to run, the current one first, with the level of the positions they create.
    queue: VecDeque<(Operation, Option<u8>)>,
    /// The current program (the queue's front), once started.
    driver: Option<Driver>,
    /// Paused by an operator (no leases; results still land).
    pub(crate) paused: bool,
    /// The last finished program.
    last: String,
    /// What the current program waits for.
    pub(crate) needed: Vec<LeafRequest>,
    /// The queue changed since it was last stored.
    queue_dirty: bool,
    /// The pass whose marked boards are stored (see [`TodoRecord`]).
    todo_written: Option<u32>,
    /// Selector iterations completed since start.
    pub(crate) iterations: u32,
    /// One line per program finished since start (what it added).
    pub(crate) reports: Vec<String>,
}

impl Growth {
    /// Rebuild from the store's contents.
    pub(crate) fn load(
        header: BookHeader,
        positions: Vec<Position>,
        record: Option<GrowthRecord>,
        queue: Option<QueueRecord>,
        todo: Option<TodoRecord>,
        results: HashMap<LeafRequest, LeafResult>,
    ) -> Result<Growth> {
        let mut book = MemBook::with_capacity(header, positions.len(), 0);
        for p in &positions {
            book.put_position(p);
        }
        let record = record.unwrap_or_default();
        let queue: VecDeque<(Operation, Option<u8>)> = queue
            .unwrap_or_default()
            .queue
            .iter()
            .map(|(op, level)| (op.operation(), *level))
            .collect();
        let driver = match (&record.driver, queue.front()) {
            (Some(d), Some((op, _))) => {
                let boards = match &todo {
                    Some(t) if t.passes == d.passes => t.boards(),
                    // Outside an expansion pass the list is not used.
                    _ if d.phase != 1 => Vec::new(),
                    _ => {
                        return Err(CoordinatorError::Internal(
                            "stored growth state and marked positions disagree".into(),
                        ));
                    }
                };
                Some(Driver::from_state(d.state(op.clone(), boards)))
            }
            _ => None,
        };
        let todo_written = driver.as_ref().map(|d| d.state().passes);
        if driver.is_none() {
            // At rest, the stored values are a negamax fixed point only for positions
            // reachable from the start; recompute every position as the book crate does.
            let ids: Vec<_> = book.ids().collect();
            bookfarm_book::negamax::propagate(&mut book, &ids);
        }
        book.track_changes();
        book.take_changed();
        Ok(Growth {
            book,
            results,
            queue,
            driver,
            paused: record.paused,
            last: record.last,
            needed: Vec::new(),
            queue_dirty: false,
            todo_written,
            iterations: 0,
            reports: Vec::new(),
        })
    }

    /// Queue a program.
    pub(crate) fn push(&mut self, op: Operation, level: Option<u8>) {
        self.queue.push_back((op, level));
        self.queue_dirty = true;
    }

    /// Drop every queued program and the running one.
    pub(crate) fn clear(&mut self) {
        self.queue.clear();
        self.queue_dirty = true;
        self.driver = None;
        self.needed.clear();
    }

    /// Whether a program is queued or running.
    pub(crate) fn is_running(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Whether programs ran and all finished.
    pub(crate) fn is_done(&self) -> bool {
        self.queue.is_empty() && !self.last.is_empty()
    }

    /// The running program's description, or the last finished one's.
    pub(crate) fn describe(&self) -> String {
        match self.queue.front() {
            Some((op, Some(level))) => format!("{} level {level}", op.describe()),
            Some((op, None)) => op.describe(),
            None => self.last.clone(),
        }
    }

    /// Run the programs as far as the known results allow, persist what changed, and return
    /// the requests the current program is blocked on (empty when every program finished).
    pub(crate) fn advance(&mut self, store: &Store) -> Result<Vec<LeafRequest>> {
        self.needed.clear();
        while let Some((op, level)) = self.queue.front() {
            let driver = self
                .driver
                .get_or_insert_with(|| Driver::new(op.clone(), *level));
            let progress = driver.run(&mut self.book, &self.results, usize::MAX);
            let st = driver.state().clone();
            match progress {
                Progress::Blocked(need) => {
                    self.needed = need;
                    break;
                }
                Progress::Done => {
                    tracing::info!(
                        program = %self.describe(),
                        positions = self.book.len(),
                        added = st.changes.positions,
                        links = st.changes.links,
                        searches = st.changes.searches,
                        iterations = st.iterations,
                        "growth program done"
                    );
                    self.iterations += st.iterations;
                    self.reports.push(match op {
                        Operation::AddGames { games } => format!(
                            "added {} games: {} new positions, {} links",
                            games.len(),
                            st.changes.positions,
                            st.changes.links
                        ),
                        _ => format!(
                            "{}: {} new positions, {} links, {} searches in {} iterations",
                            op.describe(),
                            st.changes.positions,
                            st.changes.links,
                            st.changes.searches,
                            st.iterations
                        ),
                    });
                    self.last = self.describe();
                    self.queue.pop_front();
                    self.queue_dirty = true;
                    self.driver = None;
                }
            }
        }
        self.persist(store)?;
        Ok(self.needed.clone())
    }

    /// Write the changed positions and the growth state in one batch.
    pub(crate) fn persist(&mut self, store: &Store) -> Result<()> {
        let mut batch = Batch::default();
        for id in self.book.take_changed() {
            if self.book.is_live(id) {
                let pos = self.book.position(id);
                batch.put_position(&pos)?;
            }
        }
        batch.put_header(self.book.header())?;
        if let Some(d) = &self.driver
            && self.todo_written != Some(d.state().passes)
        {
            batch.put_todo(&TodoRecord::new(d.state()))?;
            self.todo_written = Some(d.state().passes);
        }
        if self.queue_dirty {
            batch.put_queue(&QueueRecord {
                queue: self
                    .queue
                    .iter()
                    .map(|(op, level)| (OperationRecord::new(op), *level))
                    .collect(),
            })?;
            self.queue_dirty = false;
        }
        batch.put_growth(&self.record())?;
        store.apply(batch)?;
        Ok(())
    }

    fn record(&self) -> GrowthRecord {
        GrowthRecord {
            driver: self.driver.as_ref().map(|d| DriverRecord::new(d.state())),
            paused: self.paused,
            last: self.last.clone(),
        }
    }
}
