//! The coordinator's side of book growth: the in-memory book, the queue of growth programs
//! (the book crate's [`Driver`]), the table of known leaf results, and their persistence.
//!
//! The book crate owns what growth *means*; this module only feeds the driver the results that
//! landed, checkpoints what changed (positions, driver state) in one atomic batch, and hands
//! back the requests the driver is blocked on, which the job table turns into round work.
//!
//! Invariants:
//! * the stored positions and the stored driver state always describe the same moment (one
//!   batch, a **checkpoint**), so a restarted coordinator resumes the serial program exactly
//!   where that checkpoint left it;
//! * checkpoints are taken at most every `checkpoint_interval` while results land, and always
//!   when the program queue changes (a program queued, finished or cleared, a replay) and on
//!   pause and clean shutdown ([`Growth::persist`]); between two checkpoints the in-memory book
//!   is ahead of the stored one, never the other way round;
//! * results are stored (and durable before they are acknowledged) before they are applied
//!   (`submit` writes them), so applying is idempotent: after a crash the driver re-runs from
//!   the last checkpoint with the stored results and reaches the same book without searching
//!   any of them again (the book depends only on the programs and the results);
//! * dropped results (a caught liar's) are taken back by one owner, [`Growth::recover`]: by
//!   replay when the book's last program is serial, by retract-and-repair when it is
//!   asynchronous (a finished one is re-opened).

use super::programs::{Programs, ProgramsWritten};
use crate::error::CoordinatorError;
use crate::error::Result;
use crate::events::{CostRecord, EventKind, EventRecord, event, unix_ms};
use crate::store::{
    Batch, DriverRecord, GrowthRecord, LogRecord, LoggedProgram, ProgramRecord, ProgramState,
    Store, TodoRecord,
};
use bookfarm_book::MemBook;
use bookfarm_book::driver::{
    Driver, DriverState, Phase, Progress, RequestMap, RequestSet, Results,
};
use bookfarm_book::extract::AuditLine;
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::schedule::run::async_selector;
use bookfarm_book::schedule::{AsyncGrowth, AsyncOptions, AsyncProgress, NeededDelta};
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchOptions, Searcher};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;

/// Applied results between two snapshots of the asynchronous program's decisive core for trust
/// (each is a walk of O(core) positions; trust's `core_settle` counts applied results too).
const ASYNC_CORE_EVERY: usize = 256;
/// A result accepted from a worker, on its way to growth.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Landed {
    pub(crate) key: LeafRequest,
    pub(crate) result: LeafResult,
    /// The search was first leased speculatively.
    pub(crate) prefetched: bool,
}

/// A cheap guess of a leaf search's result, used only to plan speculative searches (a wrong
/// guess wastes a speculative search; it never reaches the book).
pub trait Predictor: Send + std::fmt::Debug {
    /// The guessed result of `request`.
    fn predict(&mut self, request: &LeafRequest) -> LeafResult;
}

/// The default [`Predictor`]: a search at a low level with the embedded evaluation (tens of
/// microseconds per guess).
#[derive(Debug)]
pub struct ShallowSearch {
    searcher: Searcher,
    level: u8,
}

impl ShallowSearch {
    /// Guesses by searching at `level` (at most the request's own level).
    pub fn new(level: u8) -> ShallowSearch {
        let eval = bookfarm_engine::eval::default_eval();
        let opts = SearchOptions {
            tt_bits: 14,
            endgame_tt_bits: 12,
            ..SearchOptions::for_eval(&eval)
        };
        ShallowSearch {
            searcher: Searcher::with_options(eval, opts),
            level,
        }
    }
}

impl Predictor for ShallowSearch {
    fn predict(&mut self, request: &LeafRequest) -> LeafResult {
        let shallow = LeafRequest {
            level: request.level.min(self.level),
            ..*request
        };
        self.searcher.leaf_search(&shallow, &AtomicBool::new(false))
    }
}

/// How much prefetched work served the book (status and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchReport {
    /// Searches planned speculatively since start (every plan counted once per request).
    pub planned: u64,
    /// Prefetched results that growth has used.
    pub used: u64,
    /// Prefetched results not used (yet).
    pub unused: u64,
}

/// The known results as the real program sees them: every hit on a prefetched result counts
/// it as used.
struct Consuming<'a> {
    results: &'a RequestMap<LeafResult>,
    prefetched: &'a RefCell<RequestSet>,
    used: &'a Cell<u64>,
}

impl Results for Consuming<'_> {
    fn result(&self, request: &LeafRequest) -> Option<LeafResult> {
        let r = self.results.get(request).copied();
        if r.is_some() && self.prefetched.borrow_mut().remove(request) {
            self.used.set(self.used.get() + 1);
        }
        r
    }
}

/// The known results plus guesses, for a simulated run of the programs: each request neither
/// known, nor listed as round work, nor being searched costs one unit of `budget`, and once it
/// is spent the simulation blocks.
struct Guessing<'a> {
    known: &'a RequestMap<LeafResult>,
    round: &'a RequestSet,
    searching: &'a RequestSet,
    spent: Cell<usize>,
    guessed: RefCell<RequestMap<LeafResult>>,
    speculative: RefCell<Vec<LeafRequest>>,
    budget: usize,
    predictor: RefCell<&'a mut dyn Predictor>,
    /// Guesses of earlier plans (see [`Growth::guesses`]).
    cache: RefCell<&'a mut RequestMap<LeafResult>>,
}

impl Results for Guessing<'_> {
    fn result(&self, request: &LeafRequest) -> Option<LeafResult> {
        if let Some(r) = self.known.get(request) {
            return Some(*r);
        }
        if let Some(r) = self.guessed.borrow().get(request) {
            return Some(*r);
        }
        let round = self.round.contains(request);
        let free = round || self.searching.contains(request);
        if !free && self.spent.get() >= self.budget {
            return None;
        }
        if !free {
            self.spent.set(self.spent.get() + 1);
        }
        let cached = self.cache.borrow().get(request).copied();
        let r = cached.unwrap_or_else(|| {
            let r = self.predictor.borrow_mut().predict(request);
            self.cache.borrow_mut().insert(*request, r);
            r
        });
        self.guessed.borrow_mut().insert(*request, r);
        if !round {
            self.speculative.borrow_mut().push(*request);
        }
        Some(r)
    }
}

/// The most guesses [`Growth`] keeps between plans (about 100 bytes each).
const MAX_GUESSES: usize = 1 << 18;

/// Contradictions an audit report lists (the count is always given).
const AUDIT_REPORT_LINES: usize = 100;

/// The report of a finished line audit: one line per contradicting book line (at most
/// [`AUDIT_REPORT_LINES`]), then the summary. The same text as `book audit`.
pub(crate) fn audit_report(level: u8, audit: &[AuditLine]) -> String {
    let bad: Vec<&AuditLine> = audit.iter().filter(|a| a.contradicts()).collect();
    let mut text = String::new();
    for a in bad.iter().take(AUDIT_REPORT_LINES) {
        text.push_str(&format!("contradiction: {a}\n"));
    }
    if bad.len() > AUDIT_REPORT_LINES {
        text.push_str(&format!(
            "… and {} more contradictions\n",
            bad.len() - AUDIT_REPORT_LINES
        ));
    }
    text.push_str(&format!(
        "audit at level {level}: {} best lines played to the end, {} contradict the book",
        audit.len(),
        bad.len()
    ));
    text
}

/// The root's value for a report ("unknown" when the start position has none).
fn root_value(book: &MemBook) -> String {
    bookfarm_book::extract::root_value(book).map_or_else(|| "unknown".into(), |v| v.to_string())
}

/// The job-table priorities below the asynchronous program's own (which [`Growth::take_needed`]
/// shifts by this much): those of the analyses' searches that go ahead of it, in queue order.
const AHEAD_PRIORITIES: u32 = 1 << 16;

/// What the programs wait for, handed to the job table (see [`Growth::take_needed`]).
#[derive(Debug)]
pub(crate) enum Needed {
    /// The serial program's round work, first needed first: the table is synced to it whole.
    List(Vec<LeafRequest>),
    /// The asynchronous program's whole needed set with its priorities (lower first), in the
    /// order to search it: the table is synced to it, and speculation is dropped.
    Whole(Vec<(LeafRequest, u32)>),
    /// What the asynchronous program's needed set gained and lost since it was last handed
    /// over.
    Delta(NeededDelta),
}

/// How growth recovered from dropped results ([`Growth::recover`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// Retracted in the running asynchronous program (described), clearing `cleared` leaves.
    Retracted { program: String, cleared: usize },
    /// The last logged program (asynchronous, described) was re-opened to repair: it runs
    /// until it finishes again.
    Reopened { program: String, cleared: usize },
    /// Rollback by replay of `programs` programs from the base book.
    Replayed { programs: usize },
}

/// The growth state (one owner: the growth runner; status readers lock it briefly).
#[derive(Debug)]
pub(crate) struct Growth {
    pub(crate) book: MemBook,
    /// Every known result (stored ones included), by request.
    pub(crate) results: RequestMap<LeafResult>,
    /// The program queue (the current program is its first, unless a replay runs).
    pub(crate) programs: Programs,
    /// The current program (the one the replay log is replaying, else the queue's first),
    /// once started.
    driver: Option<Driver>,
    /// The current program, once started, on the asynchronous schedule (then `driver` is
    /// `None`). Not persisted: a restart plans it again from the book and the stored results.
    asynchronous: Option<AsyncGrowth>,
    /// Results landed since the asynchronous program last ran (it looks at their positions
    /// first).
    landed_keys: Vec<LeafRequest>,
    /// Results an asynchronous program (running, or finished and re-opened by the rollback that
    /// follows) may have applied that a landed result for the same request replaced (a check
    /// overturned the first answer), since its last run: the leaves they gave are retracted
    /// before it runs, and the new result repairs them.
    replaced: Vec<(LeafRequest, LeafResult)>,
    /// The running asynchronous program is the last logged one, re-opened to repair results
    /// dropped after it finished ([`Growth::recover`]), with the last rollback request its
    /// repair covers (0 until one): not the queue's, so it leaves the queue and the log alone.
    reopened: Option<u64>,
    /// The job table holds the asynchronous program's needed set (as of its last delta taken):
    /// from then on only the changes are handed over ([`Growth::take_needed`]).
    async_synced: bool,
    /// The analyses' searches last handed to the job table ahead of the asynchronous
    /// program's own (see [`Growth::take_needed`]).
    ahead_handed: Vec<LeafRequest>,
    /// Paused by an operator (no leases; results still land).
    pub(crate) paused: bool,
    /// The last finished program.
    last: String,
    /// What the current program waits for.
    pub(crate) needed: Vec<LeafRequest>,
    /// The pass whose marked boards are stored (see [`TodoRecord`]).
    todo_written: Option<u32>,
    /// Selector iterations completed since start.
    pub(crate) iterations: u32,
    /// One line per program finished since start (what it added).
    pub(crate) reports: Vec<String>,
    /// Prefetched results not used yet.
    prefetched: RefCell<RequestSet>,
    /// Prefetched results used.
    prefetch_used: Cell<u64>,
    /// Speculative searches planned.
    prefetch_planned: u64,
    /// The program pass the last speculative plan started from (program count, pass).
    planned_from: Option<(usize, u32)>,
    /// Programs finished since start.
    pub(crate) finished: usize,
    /// Negamaxes the programs ran (one per serial iteration and program end) and replays since
    /// start: the book's values, and so the decisive core, change only then.
    pub(crate) negamaxes: u64,
    /// Snapshots of the asynchronous program's book handed to trust: its values change with
    /// every result (incremental negamax), so its decisive core is taken every
    /// [`ASYNC_CORE_EVERY`] applied results instead of after negamaxes.
    pub(crate) async_cores: u64,
    /// Results applied to the asynchronous program since its last core snapshot.
    async_since_core: usize,
    /// Results landed since the last speculative plan.
    pub(crate) landed_since_plan: usize,
    /// No speculative plan before this instant (see [`ServiceConfig::speculation_share`]).
    ///
    /// [`ServiceConfig::speculation_share`]: super::ServiceConfig::speculation_share
    pub(crate) next_plan_at: Option<std::time::Instant>,
    /// Guesses results for speculation (built on first use).
    predictor: Option<Box<dyn Predictor>>,
    /// The predictor's guesses of requests without a result yet, kept across plans: a big
    /// farm plans again after every few dozen results, and each plan guesses mostly the same
    /// requests (at most [`MAX_GUESSES`]; emptied when full, a landed result drops its guess).
    guesses: RequestMap<LeafResult>,
    /// The lines of the last line audit finished since start.
    pub(crate) last_audit: Vec<AuditLine>,
    /// What a replay needs: the programs finished since the base book.
    replay: Replay,
    /// When the growth state was last written (see [`Growth::checkpoint_due`]).
    checkpointed_at: std::time::Instant,
    /// The book was reset to the base book (a replay) since the last checkpoint: the next one
    /// also removes the stored book's position records ([`Store::revert_to_base`]).
    reverted: bool,
    /// Boards changed since the last checkpoint that was written: kept until a checkpoint's
    /// batch is applied, so a failed write (a full disk) loses none of them.
    unwritten: HashSet<bookfarm_engine::Board>,
    /// The rollback request the replay since the last checkpoint covers.
    replayed_through: Option<u64>,
    /// Applies checkpoints on a thread of its own (None: on the caller's thread).
    writer: Option<CheckpointWriter>,
    /// What the checkpoint handed to `writer` and not yet confirmed wrote.
    in_flight: Option<Written>,
    /// Program events not yet recorded (the runner takes them after each run, see
    /// [`Growth::take_events`]).
    events: Vec<EventRecord>,
    /// When the running program started (wall-clock ms) and the book's size then (None: not
    /// seen starting by this process, e.g. resumed from a checkpoint).
    started: Option<(u64, usize)>,
    /// The pace of the running book-neutral program (its finish estimate).
    pace: super::search::pace::Pace,
    /// The running program's passes as the runner saw them (its finish estimate).
    pub(crate) eta: super::eta::Trace,
}

/// A program as status shows it (with the level of the positions it creates, when set).
pub(crate) fn describe(p: &Program) -> String {
    let what = match p.level {
        Some(level) => format!("{} level {level}", p.describe()),
        None => p.describe(),
    };
    match p.schedule {
        Schedule::Serial => what,
        s => format!("{what} ({})", s.name()),
    }
}

/// What the coordinator's choice of a schedule looks at, when a program queued without one
/// ([`Schedule::Auto`]) starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AutoSchedule {
    /// Search threads registered now.
    pub(crate) threads: usize,
    /// [`super::ServiceConfig::async_threads`].
    pub(crate) async_threads: usize,
    /// [`super::ServiceConfig::async_options`]: what an asynchronous program runs with.
    pub(crate) options: AsyncOptions,
}

impl AutoSchedule {
    /// The schedule `program` runs on: its own, or for [`Schedule::Auto`] the asynchronous
    /// schedule when the program has one (deviate, enhance, play, extend, upgrade) and at
    /// least `async_threads` (> 0) search threads are registered, else the serial one.
    pub(crate) fn choose(&self, program: &Program) -> Schedule {
        match program.schedule {
            Schedule::Auto
                if self.async_threads > 0
                    && self.threads >= self.async_threads
                    && async_selector(program).is_some() =>
            {
                Schedule::Async
            }
            Schedule::Auto => Schedule::Serial,
            chosen => chosen,
        }
    }
}

/// What a checkpoint's batch writes of the growth state: if applying it fails, it is marked
/// unwritten again, so the next checkpoint writes it whole.
#[derive(Debug, Default)]
struct Written {
    boards: HashSet<bookfarm_engine::Board>,
    reverted: bool,
    replayed_through: Option<u64>,
    log: bool,
    programs: ProgramsWritten,
    /// `todo_written` before this checkpoint, when it wrote the marked boards.
    todo_before: Option<Option<u32>>,
}

/// Applies checkpoint batches on a thread of its own, one at a time and in the order they were
/// built, so that the growth thread (the pipeline between landed results and the next jobs)
/// does not spend its time in sled's inserts of the changed positions.
///
/// Order and durability: a checkpoint is built from results already applied to the store
/// (`submit` applies them before growth sees them), so sled's log holds them before the
/// checkpoint whatever the writer's delay, and the stored growth state never runs ahead of
/// the stored results. At most one checkpoint is in flight: the next one (and every
/// synchronous [`Growth::persist`]: flush, pause, import) first waits for it, so checkpoints
/// reach sled in order and a replay's reversion scans a store that holds every earlier one.
#[derive(Debug)]
pub(crate) struct CheckpointWriter {
    tx: Option<std::sync::mpsc::Sender<Batch>>,
    done: std::sync::mpsc::Receiver<std::result::Result<(), crate::store::StoreError>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CheckpointWriter {
    /// Start the writer thread over `store`.
    pub(crate) fn spawn(store: std::sync::Arc<Store>) -> std::io::Result<CheckpointWriter> {
        let (tx, rx) = std::sync::mpsc::channel::<Batch>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn(move || {
                for batch in rx {
                    if done_tx.send(store.apply(batch)).is_err() {
                        break;
                    }
                }
            })?;
        Ok(CheckpointWriter {
            tx: Some(tx),
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for CheckpointWriter {
    /// The batch in flight is applied before the writer (and its handle on the store) goes.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("checkpoint writer panicked");
        }
    }
}

/// The programs that changed the book since the base book (finished ones, and cancelled
/// ones with the point they were cut at): with the base book and the result store, everything
/// needed to grow the book again (rollback by replay).
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// The programs, oldest first.
    pub(crate) log: Vec<LoggedProgram>,
    /// How many of them the replay in progress has run again (all of them: no replay); the
    /// next one is the current program.
    pub(crate) replayed: usize,
    /// `log` or `replayed` changed since they were stored.
    pub(crate) log_dirty: bool,
}

impl Replay {
    /// From the store's record.
    pub(crate) fn load(log: Option<LogRecord>) -> Replay {
        let log = log.unwrap_or_default();
        let replayed = usize::try_from(log.replayed)
            .unwrap_or(usize::MAX)
            .min(log.programs.len());
        Replay {
            log: log.programs,
            replayed,
            log_dirty: false,
        }
    }

    /// The program being replayed, if a replay runs.
    fn replaying(&self) -> Option<&LoggedProgram> {
        self.log.get(self.replayed)
    }

    /// Log a program that changed the book (nothing is being replayed when one ends or is
    /// cancelled).
    fn push(&mut self, logged: LoggedProgram) {
        self.log.push(logged);
        self.replayed = self.log.len();
        self.log_dirty = true;
    }

    fn record(&self) -> LogRecord {
        LogRecord {
            programs: self.log.clone(),
            replayed: self.replayed as u64,
        }
    }
}

impl Growth {
    /// Rebuild from the store's contents.
    pub(crate) fn load(
        mut book: MemBook,
        record: Option<GrowthRecord>,
        programs: Programs,
        todo: Option<TodoRecord>,
        results: RequestMap<LeafResult>,
        replay: Replay,
    ) -> Result<Growth> {
        let record = record.unwrap_or_default();
        let current = match replay.replaying() {
            Some(l) => Some((&l.program, l.stop)),
            None => programs.front().map(|r| (&r.program, None)),
        };
        let driver = match (&record.driver, current) {
            (Some(d), Some((program, stop))) => {
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
                Some(Driver::from_state(d.state(program.clone(), boards)).stopping_at(stop))
            }
            _ => None,
        };
        let todo_written = driver.as_ref().map(|d| d.state().passes);
        if driver.is_none() {
            // At rest, the stored values are a negamax fixed point only for positions
            // reachable from the start; recompute every position as the book crate does (the
            // parent index is built when growth first needs it).
            bookfarm_book::negamax::recompute_all(&mut book);
        }
        book.track_changes();
        book.take_changed();
        Ok(Growth {
            book,
            results,
            programs,
            driver,
            asynchronous: None,
            landed_keys: Vec::new(),
            replaced: Vec::new(),
            reopened: None,
            async_synced: false,
            ahead_handed: Vec::new(),
            paused: record.paused,
            last: record.last,
            needed: Vec::new(),
            todo_written,
            iterations: 0,
            reports: Vec::new(),
            prefetched: RefCell::new(RequestSet::default()),
            prefetch_used: Cell::new(0),
            prefetch_planned: 0,
            planned_from: None,
            finished: 0,
            negamaxes: 0,
            async_cores: 0,
            async_since_core: 0,
            landed_since_plan: 0,
            next_plan_at: None,
            predictor: None,
            guesses: RequestMap::default(),
            last_audit: Vec::new(),
            replay,
            checkpointed_at: std::time::Instant::now(),
            reverted: false,
            unwritten: HashSet::new(),
            replayed_through: None,
            writer: None,
            in_flight: None,
            events: Vec::new(),
            started: None,
            pace: Default::default(),
            eta: super::eta::Trace::default(),
        })
    }

    /// Rollback by replay: forget the `dropped` results, put the base book back and run every
    /// program since it again, reusing every known result (the driver then blocks on the
    /// searches the dropped results answered, which become round work again). The book after
    /// the replay is the book those results and programs give, whoever sent them first.
    /// `through`: the last rollback request (see [`Store`]'s `rollback-requested`) this replay
    /// covers, recorded by the checkpoint that stores the replayed book. Returns the number of
    /// programs queued again.
    pub(crate) fn replay(
        &mut self,
        store: &Store,
        dropped: &[LeafRequest],
        through: u64,
    ) -> Result<usize> {
        let mut book = store.base_book()?;
        for k in dropped {
            self.results.remove(k);
        }
        // The stored book is reverted by the checkpoint that ends this growth run (the queue
        // changes below force one), in the same batch as the replayed book's positions and
        // the growth state: a crash before it leaves the previous checkpoint whole.
        self.reverted = true;
        self.replayed_through = Some(through);
        self.negamaxes += 1;
        bookfarm_book::negamax::recompute_all(&mut book);
        book.track_changes();
        book.take_changed();
        self.book = book;
        tracing::warn!(
            programs = self.replay.log.len(),
            dropped = dropped.len(),
            "rollback: replaying the growth programs from the base book"
        );
        // The logged programs run again first; the queue's current program starts again
        // after them (what it did so far was done on the book the replay replaces).
        self.replay.replayed = 0;
        self.replay.log_dirty = true;
        self.driver = None;
        self.asynchronous = None;
        self.reopened = None;
        self.landed_keys.clear();
        self.replaced.clear();
        self.todo_written = None;
        self.needed.clear();
        self.planned_from = None;
        // The logged programs, then the queue's (its current one starts again).
        Ok(self.replay.log.len() + self.programs.len())
    }

    /// Recovery when results are dropped (a caught liar's that nobody vouches for): the one
    /// place that decides between retract-and-repair and rollback by replay. The book is judged
    /// by the last program that changed it: the running one, else the last logged.
    ///
    /// * **Asynchronous**: retract-and-repair, never a replay (an asynchronous book is judged
    ///   by its properties, not rebuilt in a serial order). Every leaf that came from a dropped
    ///   result is cleared, wherever it is in the book (positions of earlier programs too), and
    ///   searched again first; the positions stay and selection goes on. While that program
    ///   runs, it repairs. Once it has finished (a late spot or core check), it is
    ///   **re-opened**: started again on the current book with its recorded parameters and
    ///   options, ahead of any queued program, until its serial selection finds nothing again
    ///   ([`Growth::end_repair`]); the log and its record are unchanged. A program that was
    ///   running before a restart is started again first, and repairs.
    /// * **Serial** (a serial program running, the last logged program serial, or a replay
    ///   whose current program is serial): rollback by replay ([`Growth::replay`]). A serial
    ///   book is defined by the serial order from its starting book, which only a replay
    ///   rebuilds; so a serial program logged after an asynchronous one means a replay, even
    ///   when the dropped results were the asynchronous program's.
    ///
    /// `dropped` empty means the dropped requests are not known here: a rollback requested
    /// before a restart (`rollback-requested` above `rollback-replayed`), recovered by the
    /// start's first growth run, before any submission. The store still holds them: the
    /// results its tombstones removed ([`Store::removed_results`]).
    ///
    /// A rollback is recorded as covered (`rollback-replayed` = `through`) by the checkpoint
    /// that follows the replay or retraction, and for a re-opened program by the checkpoint
    /// after it finished again: a restart before then recovers again (the holes a retraction
    /// left are repaired when the program starts, see `AsyncGrowth`).
    pub(crate) fn recover(
        &mut self,
        store: &Store,
        dropped: &[LeafRequest],
        through: u64,
        auto: AutoSchedule,
    ) -> Result<Recovery> {
        if self.driver.is_none() && self.asynchronous.is_none() && self.replay.replaying().is_none()
        {
            match self.programs.front() {
                // Its work is in the book (a restart): it goes on, and repairs.
                Some(r) if r.state == ProgramState::Running => {
                    self.start_current(auto);
                }
                _ => self.reopen(auto),
            }
        }
        if self.asynchronous.is_none() {
            let programs = self.replay(store, dropped, through)?;
            return Ok(Recovery::Replayed { programs });
        }
        // A request whose wrong result a check replaced keeps the new result: its old leaf is
        // retracted with the replaced results, before the program runs.
        let pairs: Vec<(LeafRequest, LeafResult)> = if dropped.is_empty() {
            store
                .removed_results()?
                .into_iter()
                .filter(|(k, r)| {
                    self.results
                        .get(k)
                        .is_none_or(|now| (now.mv, now.score) != (r.mv, r.score))
                })
                .collect()
        } else {
            dropped
                .iter()
                .filter(|k| !self.replaced.iter().any(|(r, _)| r == *k))
                .filter_map(|k| self.results.remove(k).map(|r| (*k, r)))
                .collect()
        };
        let Some(g) = self.asynchronous.as_mut() else {
            return Err(CoordinatorError::Internal(
                "retraction without an asynchronous program".into(),
            ));
        };
        let cleared = g.retract(&mut self.book, &pairs).len();
        let program = describe(g.program());
        tracing::warn!(
            dropped = pairs.len(),
            cleared,
            program = %program,
            reopened = self.reopened.is_some(),
            "retract-and-repair: leaves from dropped results are searched again"
        );
        match self.reopened.as_mut() {
            Some(t) => {
                *t = (*t).max(through);
                Ok(Recovery::Reopened { program, cleared })
            }
            None => {
                self.replayed_through = Some(through);
                Ok(Recovery::Retracted { program, cleared })
            }
        }
    }

    /// Re-open the last logged program if it ran asynchronously (see [`Growth::recover`]):
    /// it runs again on the current book, with its recorded parameters and `auto`'s options.
    fn reopen(&mut self, auto: AutoSchedule) {
        let Some(last) = self
            .replay
            .log
            .last()
            .filter(|l| l.stop.is_none() && l.program.schedule == Schedule::Async)
        else {
            return;
        };
        let Some(mut g) = AsyncGrowth::new(last.program.clone()) else {
            return;
        };
        g.set_options(auto.options);
        tracing::info!(
            program = %describe(g.program()),
            "re-opened to repair results dropped after it finished"
        );
        self.asynchronous = Some(g);
        self.reopened = Some(0);
        self.landed_keys.clear();
        self.async_synced = false;
    }

    /// A re-opened program finished again (see [`Growth::recover`]): report it, and record the
    /// rollbacks up to `through` as covered by the next checkpoint (due now). Its log entry and
    /// record stay as they were; a later replay runs it as logged.
    fn end_repair(&mut self, st: &DriverState, through: u64) {
        let report = format!(
            "{} repaired after a late catch: {} new positions, {} links, {} searches; root \
             value {}",
            describe(&st.program),
            st.changes.positions,
            st.changes.links,
            st.changes.searches,
            root_value(&self.book)
        );
        tracing::info!(positions = self.book.len(), %report, "repair done");
        self.reports.push(report);
        self.negamaxes += 1;
        self.replayed_through = self.replayed_through.max(Some(through));
    }

    /// Take accepted results in (they are stored already).
    pub(crate) fn land(&mut self, landed: Vec<Landed>) {
        self.landed_since_plan += landed.len();
        if self.asynchronous.is_some() {
            self.landed_keys.extend(landed.iter().map(|l| l.key));
            self.async_since_core += landed.len();
            if self.async_since_core >= ASYNC_CORE_EVERY {
                self.async_since_core = 0;
                self.async_cores += 1;
            }
        }
        for l in landed {
            if l.prefetched && !self.results.contains_key(&l.key) {
                self.prefetched.get_mut().insert(l.key);
            }
            self.guesses.remove(&l.key);
            // Kept while no serial program runs: an asynchronous program, running or re-opened
            // by the rollback that follows, retracts their leaves (a replay needs none).
            if let Some(old) = self.results.insert(l.key, l.result)
                && self.driver.is_none()
                && (old.mv, old.score) != (l.result.mv, l.result.score)
            {
                self.replaced.push((l.key, old));
            }
        }
    }

    /// Replace the predictor used by [`Growth::speculate`].
    pub(crate) fn set_predictor(&mut self, predictor: Box<dyn Predictor>) {
        self.predictor = Some(predictor);
        self.guesses.clear();
    }

    /// How prefetching served so far.
    pub(crate) fn prefetch_report(&self) -> PrefetchReport {
        PrefetchReport {
            planned: self.prefetch_planned,
            used: self.prefetch_used.get(),
            unused: self.prefetched.borrow().len() as u64,
        }
    }

    /// Whether the program moved to another pass since the last speculative plan.
    pub(crate) fn plan_is_stale(&self) -> bool {
        let now = self
            .driver
            .as_ref()
            .map(|d| (self.finished, d.state().passes));
        now != self.planned_from
    }

    /// The searches the programs will probably need after the current round work, most likely
    /// first, at most `budget`: the programs run on a copy of the book with guessed results
    /// (the [`Predictor`], by default a [`ShallowSearch`] at `predictor_level`) for every
    /// request not known yet. The real book is untouched, so a
    /// wrong guess only costs a wasted search.
    pub(crate) fn speculate(
        &mut self,
        budget: usize,
        searching: &RequestSet,
        predictor_level: u8,
    ) -> Vec<LeafRequest> {
        let Some(driver) = &self.driver else {
            return Vec::new();
        };
        if budget == 0 {
            return Vec::new();
        }
        self.planned_from = Some((self.finished, driver.state().passes));
        self.landed_since_plan = 0;
        let mut driver = driver.clone();
        let mut book = self.book.clone();
        let round: RequestSet = self.needed.iter().copied().collect();
        if self.guesses.len() > MAX_GUESSES {
            self.guesses.clear();
        }
        let predictor = self
            .predictor
            .get_or_insert_with(|| Box::new(ShallowSearch::new(predictor_level)));
        let guessing = Guessing {
            known: &self.results,
            round: &round,
            searching,
            spent: Cell::new(0),
            guessed: RefCell::new(RequestMap::default()),
            speculative: RefCell::new(Vec::new()),
            budget,
            predictor: RefCell::new(predictor.as_mut()),
            cache: RefCell::new(&mut self.guesses),
        };
        // The programs after the current one: the rest of a replay, then the queue.
        let replaying = self.replay.replayed < self.replay.log.len();
        let mut later = self
            .replay
            .log
            .iter()
            .skip(self.replay.replayed + 1)
            .map(|l| (&l.program, l.stop))
            .chain(
                self.programs
                    .queued()
                    .skip(usize::from(!replaying))
                    .map(|r| (&r.program, None)),
            );
        loop {
            match driver.run(&mut book, &guessing, 0) {
                Progress::Blocked(_) => break,
                Progress::Done => match later.next() {
                    Some((program, stop)) => {
                        driver = Driver::new(program.clone()).stopping_at(stop);
                    }
                    None => break,
                },
            }
        }
        let planned = guessing.speculative.into_inner();
        self.prefetch_planned += guessing.spent.get() as u64;
        planned
    }

    /// Queue a program at the end of the queue; returns its id.
    pub(crate) fn push(&mut self, program: Program) -> u64 {
        self.programs.push(program, super::now_ms(), false)
    }

    /// Cancel program `id`: a waiting one leaves the queue; the running one stops before its
    /// next step, keeping what it did (the replay log records the point it was cut at, so a
    /// replay cuts it there too). Returns the cancelled program. A re-opened program's repair
    /// is no queued program and goes on (the book regains its properties first).
    pub(crate) fn cancel(&mut self, id: u64) -> Result<ProgramRecord> {
        let now = super::now_ms();
        let replaying = self.replay.replaying().is_some();
        if self.programs.front().is_some_and(|r| r.id == id) {
            let mut report = "cancelled before it started".to_string();
            // While a replay runs, the current program is the replay's: the queue's first
            // starts again after it, so nothing of it is in the book.
            if !replaying && let Some(d) = self.driver.take() {
                let st = d.state();
                let ch = changes_so_far(st);
                report = format!(
                    "cancelled after {} new positions, {} links, {} searches",
                    ch.positions, ch.links, ch.searches
                );
                if let Some(stop) = st.point() {
                    self.replay.push(LoggedProgram {
                        id,
                        program: st.program.clone(),
                        stop: Some(stop),
                    });
                }
                self.todo_written = None;
                self.needed.clear();
                self.planned_from = None;
            }
            // An asynchronous program has no point to cut a replay at: what it added stays in
            // the book, and a replay does not run it.
            if !replaying
                && self.reopened.is_none()
                && let Some(g) = self.asynchronous.take()
            {
                let ch = g.changes();
                report = format!(
                    "cancelled after {} new positions, {} links, {} searches (asynchronous)",
                    ch.positions, ch.links, ch.searches
                );
                self.landed_keys.clear();
                self.needed.clear();
            }
            tracing::info!(program = id, %report, "growth program cancelled");
            if let Some(r) = self.programs.front() {
                let mut e = event(
                    EventKind::ProgramCancelled,
                    &describe(&r.program),
                    "",
                    report.clone(),
                );
                e.program = id;
                if r.state == ProgramState::Running {
                    e.cost = Some(CostRecord {
                        positions: self
                            .started
                            .map_or(0, |(_, len)| self.book.len().saturating_sub(len) as u64),
                        wall_ms: self.started.map_or(0, |(t, _)| e.t_ms.saturating_sub(t)),
                        ..CostRecord::default()
                    });
                }
                self.events.push(e);
            }
            self.started = None;
            return self
                .programs
                .end_front(ProgramState::Cancelled, report, now)
                .ok_or(CoordinatorError::UnknownProgram(id));
        }
        if let Some(r) = self.programs.take_waiting(id) {
            tracing::info!(program = id, "queued program cancelled");
            let mut e = event(
                EventKind::ProgramCancelled,
                &describe(&r.program),
                "",
                "cancelled before it started".into(),
            );
            e.program = id;
            self.events.push(e);
            return Ok(self.programs.end(
                r,
                ProgramState::Cancelled,
                "cancelled before it started".into(),
                now,
            ));
        }
        match self.programs.get(id) {
            Some(r) => Err(CoordinatorError::FailedPrecondition(format!(
                "program #{id} is {} already",
                r.state.name()
            ))),
            None => Err(CoordinatorError::UnknownProgram(id)),
        }
    }

    /// Cancel every program of the queue (the running one first); returns their ids.
    pub(crate) fn cancel_all(&mut self) -> Result<Vec<u64>> {
        let ids: Vec<u64> = self.programs.queued().map(|r| r.id).collect();
        for id in &ids {
            self.cancel(*id)?;
        }
        Ok(ids)
    }

    /// The programs listed (see [`Programs::list`]), the running one with its progress.
    pub(crate) fn list(&self, finished: bool) -> Vec<super::programs::ProgramView> {
        self.views(self.programs.list(finished))
    }

    /// Follow the running program's passes for its finish estimate (after each growth run;
    /// `now`: the service clock).
    pub(crate) fn observe_eta(&mut self, now: std::time::Duration) {
        if self.replay.replaying().is_some() || self.reopened.is_some() {
            return;
        }
        let Some(r) = self.programs.front() else {
            return;
        };
        if let Some(g) = self.asynchronous.as_ref() {
            self.eta
                .observe_async(r.id, g.stats().applied, g.marked() as u64, now);
        } else if let Some(d) = self.driver.as_ref() {
            self.eta.observe(r.id, d.state(), now);
        }
    }

    /// The running program's id and its finish estimate at `now` (None: no program runs; an
    /// estimate of None: not known yet).
    pub(crate) fn eta_at(
        &self,
        now: std::time::Duration,
    ) -> Option<(u64, Option<super::eta::Estimate>)> {
        if self.replay.replaying().is_some() || self.reopened.is_some() {
            return None;
        }
        let r = self.programs.front()?;
        if let Some(g) = self.asynchronous.as_ref() {
            let open_ended = !super::eta::one_pass(&g.program().operation);
            let e = self
                .eta
                .estimate_async(r.id, g.marked() as u64, open_ended, now);
            return Some((r.id, e));
        }
        let d = self.driver.as_ref()?;
        Some((r.id, self.eta.estimate(r.id, d.state(), now)))
    }

    /// The program running now (or the queue's first) and the last one ended, listed.
    pub(crate) fn current_and_last(
        &self,
    ) -> (
        Option<super::programs::ProgramView>,
        Option<super::programs::ProgramView>,
    ) {
        let mut v = self
            .views(
                self.programs
                    .front()
                    .into_iter()
                    .chain(self.programs.last_ended())
                    .cloned()
                    .collect(),
            )
            .into_iter();
        match self.programs.front() {
            Some(_) => (v.next(), v.next()),
            None => (None, v.next()),
        }
    }

    /// `records` listed, the running one with its progress.
    fn views(&self, records: Vec<ProgramRecord>) -> Vec<super::programs::ProgramView> {
        let running = match (&self.asynchronous, &self.driver) {
            _ if self.replay.replaying().is_some() => None,
            (Some(g), _) => Some((async_progress(g), async_figures(g))),
            (None, Some(d)) => Some((progress(d.state()), figures(d.state()))),
            (None, None) => None,
        };
        records
            .into_iter()
            .map(|record| {
                let (progress, figures) = match (&running, record.state) {
                    (Some((p, f)), ProgramState::Running) => {
                        let mut f = *f;
                        if f.unit == SEARCHES {
                            f.eta = self.pace.eta(record.id, f.done, f.total, unix_ms());
                        }
                        (p.clone(), f)
                    }
                    (None, ProgramState::Running) if self.replay.replaying().is_some() => (
                        "waiting for a replay of the earlier programs".into(),
                        Default::default(),
                    ),
                    (_, ProgramState::Queued) => self.searched_ahead(&record.program),
                    _ => Default::default(),
                };
                super::programs::ProgramView {
                    description: describe(&record.program),
                    progress,
                    figures,
                    record,
                }
            })
            .collect()
    }

    /// What a queued analysis searched ahead of the running program (see `analyses_ahead`):
    /// its levels with a result of all it searches (nothing for another program).
    fn searched_ahead(&self, program: &Program) -> (String, super::programs::ProgramProgress) {
        let Operation::Analyze { board, from, up_to } = &program.operation else {
            return Default::default();
        };
        let levels = bookfarm_book::searches::analysis_levels(board, *from, *up_to);
        let done = levels
            .iter()
            .filter(|&&l| {
                self.results
                    .contains_key(&bookfarm_book::searches::analysis_request(board, l))
            })
            .count();
        let figures = super::programs::ProgramProgress {
            done: done as u64,
            total: levels.len() as u64,
            unit: SEARCHES,
            ..Default::default()
        };
        let progress = if done > 0 {
            "searched ahead of the running program".into()
        } else {
            String::new()
        };
        (progress, figures)
    }

    /// Whether a program is queued or running (a replay and a re-opened program included).
    pub(crate) fn is_running(&self) -> bool {
        !self.programs.is_empty() || self.replay.replaying().is_some() || self.reopened.is_some()
    }

    /// The current program: a re-opened one, the one a replay runs again, else the queue's
    /// first.
    fn current(&self) -> Option<&Program> {
        if self.reopened.is_some() {
            return self.asynchronous.as_ref().map(AsyncGrowth::program);
        }
        match self.replay.replaying() {
            Some(l) => Some(&l.program),
            None => self.programs.front().map(|r| &r.program),
        }
    }

    /// The decisive core of the book (`bookfarm_book::decisive`): from the start position, plus
    /// the running program's root when it has another.
    pub(crate) fn decisive_core(&self) -> bookfarm_book::decisive::CoreSet {
        let start = bookfarm_engine::Board::start();
        let mut core = bookfarm_book::decisive::decisive_core(&self.book, &start);
        if let Some(root) = self.current().and_then(|p| p.root_board())
            && bookfarm_engine::symmetry::canonical(&root).0
                != bookfarm_engine::symmetry::canonical(&start).0
        {
            let below = bookfarm_book::decisive::decisive_core(&self.book, &root);
            let seen: HashSet<bookfarm_engine::Board> =
                core.leaves.iter().map(|l| l.board).collect();
            core.positions += below.positions;
            core.leaves.extend(
                below
                    .leaves
                    .into_iter()
                    .filter(|l| !seen.contains(&l.board)),
            );
        }
        core
    }

    /// Whether programs ran and all finished.
    pub(crate) fn is_done(&self) -> bool {
        !self.is_running() && !self.last.is_empty()
    }

    /// The running program's description, or the last finished one's.
    pub(crate) fn describe(&self) -> String {
        match self.current() {
            Some(p) if self.reopened.is_some() => {
                format!(
                    "{}, repairing results dropped after it finished",
                    describe(p)
                )
            }
            Some(p) => describe(p),
            None => self.last.clone(),
        }
    }

    /// The program events since the last call (the runner records them).
    pub(crate) fn take_events(&mut self) -> Vec<EventRecord> {
        std::mem::take(&mut self.events)
    }

    /// Start the current program (the one a replay runs again, else the queue's first) on its
    /// schedule; `auto` chooses one for a program queued without ([`AutoSchedule`]). Returns
    /// false when there is none.
    fn start_current(&mut self, auto: AutoSchedule) -> bool {
        let replaying = self.replay.replaying().is_some();
        let (mut program, stop) = match (self.replay.replaying(), self.programs.front()) {
            (Some(l), _) => (l.program.clone(), l.stop),
            (None, Some(r)) => (r.program.clone(), None),
            (None, None) => return false,
        };
        if program.schedule == Schedule::Auto {
            program.schedule = auto.choose(&program);
            tracing::info!(
                program = %describe(&program),
                threads = auto.threads,
                async_threads = auto.async_threads,
                "schedule chosen: {} ({} search threads registered, async from {})",
                program.schedule.name(),
                auto.threads,
                auto.async_threads
            );
            if !replaying {
                self.programs.set_front_schedule(program.schedule);
            }
        }
        // A replay runs programs again: their events were recorded the first time.
        if !replaying {
            self.programs.start_front(super::now_ms());
            let mut e = event(
                EventKind::ProgramStarted,
                &describe(&program),
                "",
                format!("{} positions in the book", self.book.len()),
            );
            e.program = self.programs.front().map_or(0, |r| r.id);
            self.events.push(e);
            self.started = Some((unix_ms(), self.book.len()));
        }
        // Programs without passes (new, add, expand, audit) have no asynchronous form
        // and run serially, as does a replay's program stopped part way.
        self.asynchronous = (program.schedule == Schedule::Async && stop.is_none())
            .then(|| AsyncGrowth::new(program.clone()))
            .flatten()
            .map(|mut g| {
                g.set_options(auto.options);
                g
            });
        self.landed_keys.clear();
        self.async_synced = false;
        if self.asynchronous.is_none() {
            // A serial program is rolled back by replay: nothing to retract.
            self.replaced.clear();
            self.driver = Some(Driver::new(program).stopping_at(stop));
        }
        true
    }

    /// Run the programs as far as the known results allow, checkpoint what changed when one is
    /// due ([`Growth::checkpoint_due`]), and return the requests the current program is blocked
    /// on (empty when every program finished). `lookahead`: how many later steps of the pass
    /// have their requests queued as round work (the farm's threads cannot hold more than a
    /// few jobs each); `checkpoint_interval`: see [`Growth::checkpoint_due`].
    pub(crate) fn advance(
        &mut self,
        store: &Store,
        lookahead: usize,
        checkpoint_interval: std::time::Duration,
        auto: AutoSchedule,
    ) -> Result<()> {
        self.needed.clear();
        loop {
            let replaying = self.replay.replaying().is_some();
            if self.driver.is_none() && self.asynchronous.is_none() && !self.start_current(auto) {
                break;
            }
            if let Some(g) = self.asynchronous.as_mut() {
                if !self.replaced.is_empty() {
                    let replaced = std::mem::take(&mut self.replaced);
                    let cleared = g.retract(&mut self.book, &replaced);
                    tracing::warn!(
                        replaced = replaced.len(),
                        cleared = cleared.len(),
                        "results replaced by a check: their leaves are searched again"
                    );
                }
                let results = Consuming {
                    results: &self.results,
                    prefetched: &self.prefetched,
                    used: &self.prefetch_used,
                };
                let landed = std::mem::take(&mut self.landed_keys);
                match g.run(&mut self.book, &results, &landed) {
                    // What it waits for is handed over by `take_needed`.
                    AsyncProgress::Waiting => break,
                    AsyncProgress::Done => {
                        let (changes, stats) = (g.changes(), g.stats());
                        tracing::info!(
                            applied = stats.applied,
                            dropped = stats.dropped,
                            runs = stats.runs,
                            "asynchronous program done"
                        );
                        let st = DriverState {
                            program: g.program().clone(),
                            phase: Phase::Done,
                            iterations: 0,
                            passes: 0,
                            changes,
                            illegal: Vec::new(),
                            audit: Vec::new(),
                            searched: (0, 0),
                        };
                        self.asynchronous = None;
                        if let Some(through) = self.reopened.take() {
                            self.end_repair(&st, through);
                        } else {
                            self.finish(st, replaying);
                        }
                        continue;
                    }
                }
            }
            let Some(driver) = self.driver.as_mut() else {
                break;
            };
            let results = Consuming {
                results: &self.results,
                prefetched: &self.prefetched,
                used: &self.prefetch_used,
            };
            let iterations = driver.state().iterations;
            let progress = driver.run(&mut self.book, &results, lookahead);
            if driver.state().iterations != iterations {
                self.negamaxes += 1;
            }
            match progress {
                Progress::Blocked(need) => {
                    let st = driver.state();
                    if st.phase == Phase::Searching && !replaying {
                        let id = self.programs.front().map_or(0, |r| r.id);
                        self.pace.observe(id, unix_ms(), st.searched.0 as u64);
                    }
                    self.needed = need;
                    break;
                }
                Progress::Done => {
                    let st = driver.state().clone();
                    self.driver = None;
                    self.finish(st, replaying);
                }
            }
        }
        if self.checkpoint_due(checkpoint_interval) {
            self.persist_in_background(store)?;
        }
        Ok(())
    }

    /// What the programs wait for, for the job table (after [`Growth::advance`]): the serial
    /// program's round work as a whole list; the asynchronous program's needed set whole once
    /// (at its start), then only what changed since the last call, so a run costs what it
    /// changed (at W = 1,000 the set holds thousands of requests). The searches of the
    /// analyses queued behind the current program go first on either schedule (see
    /// `analyses_ahead`).
    pub(crate) fn take_needed(&mut self) -> Needed {
        let ahead: Vec<LeafRequest> = self.analyses_ahead().into_iter().map(|(q, _)| q).collect();
        let Some(g) = self.asynchronous.as_mut() else {
            // Ahead of the current program's own, unless it is one of them (first come,
            // first served).
            if ahead.is_empty() {
                return Needed::List(self.needed.clone());
            }
            let front_first = self
                .programs
                .front()
                .is_some_and(|r| r.program.operation.is_top_priority());
            let (mut list, then) = if front_first {
                (self.needed.clone(), ahead)
            } else {
                (ahead, self.needed.clone())
            };
            let mut seen: RequestSet = list.iter().copied().collect();
            list.extend(then.into_iter().filter(|r| seen.insert(*r)));
            return Needed::List(list);
        };
        // The asynchronous program's priorities come after the analyses' (below
        // `AHEAD_PRIORITIES`, in queue order). While the analyses' searches are unchanged,
        // only the program's changes are handed over; when they change (an analysis queued,
        // a level landed: rare, a few searches each) the whole set is, so the table drops
        // what no longer goes ahead.
        if self.async_synced && ahead == self.ahead_handed {
            let mut d = g.take_delta();
            for (_, p) in &mut d.added {
                *p = p.saturating_add(AHEAD_PRIORITIES);
            }
            d.removed.retain(|r| !ahead.contains(r));
            return Needed::Delta(d);
        }
        g.take_delta();
        self.async_synced = true;
        let mut whole: Vec<(LeafRequest, u32)> = ahead
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let p = u32::try_from(i).unwrap_or(u32::MAX);
                (*q, p.min(AHEAD_PRIORITIES - 1))
            })
            .collect();
        whole.extend(
            g.needed()
                .into_iter()
                .map(|(q, p)| (q, p.saturating_add(AHEAD_PRIORITIES))),
        );
        self.ahead_handed = ahead;
        Needed::Whole(whole)
    }

    /// The searches without a result of the analyses queued right behind the current program
    /// (queue order, each analysis's levels lowest first): round work ahead of the current
    /// program's own (behind them when it is an analysis or the store of one), so that an
    /// analysis asked for while a long program runs is searched at once (pre-emption: the
    /// program's searches wait, its steps do not change), on the serial and the asynchronous
    /// schedule. The results are kept as any result; the analysis shows each level as it
    /// lands and ends as soon as it reaches the front of the queue. A book-neutral search
    /// cannot change the book, so the book and the replay log are the same whenever it is
    /// searched.
    ///
    /// Each search comes with the id of the analysis it belongs to.
    fn analyses_ahead(&self) -> Vec<(LeafRequest, u64)> {
        let mut out = Vec::new();
        for r in self
            .programs
            .queued()
            .skip(1)
            .take_while(|r| r.program.operation.is_top_priority())
        {
            if let Operation::Analyze { board, from, up_to } = &r.program.operation {
                out.extend(
                    bookfarm_book::searches::analysis_levels(board, *from, *up_to)
                        .into_iter()
                        .map(|level| bookfarm_book::searches::analysis_request(board, level))
                        .filter(|q| !self.results.contains_key(q))
                        .map(|q| (q, r.id)),
                );
            }
        }
        out
    }

    /// The queued analysis each search listed ahead of the current program's own belongs to
    /// (see `analyses_ahead`; the first in the queue when two ask the same): what it costs is
    /// charged to that analysis, not to the running program. A search the current serial
    /// program waits for too is the current program's.
    pub(crate) fn ahead_owners(&self) -> RequestMap<u64> {
        let ahead = self.analyses_ahead();
        let mut owners = RequestMap::default();
        if ahead.is_empty() {
            return owners;
        }
        let own: RequestSet = self.needed.iter().copied().collect();
        for (q, id) in ahead {
            if !own.contains(&q) {
                owners.entry(q).or_insert(id);
            }
        }
        owners
    }

    /// Hand the asynchronous program's needed set over whole at the next [`Growth::take_needed`]
    /// (the job table lost jobs it may wait for).
    pub(crate) fn resync_needed(&mut self) {
        self.async_synced = false;
    }

    /// Every request the running asynchronous program waits for, with its priority (`None`
    /// when no asynchronous program runs).
    pub(crate) fn async_needed(&self) -> Option<Vec<(LeafRequest, u32)>> {
        self.asynchronous.as_ref().map(AsyncGrowth::needed)
    }

    /// The current program `st` is done: report it, log it for replays, and move on (an
    /// audit that queues its contradicting lines runs their `book add` next, with the level
    /// the audit was started with).
    fn finish(&mut self, st: DriverState, replaying: bool) {
        let program = &st.program;
        tracing::info!(
            program = %describe(program),
            positions = self.book.len(),
            added = st.changes.positions,
            links = st.changes.links,
            searches = st.changes.searches,
            iterations = st.iterations,
            replaying,
            "growth program done"
        );
        self.iterations += st.iterations;
        let report = match &program.operation {
            Operation::AddGames { games } => format!(
                "added {} games: {} new positions, {} links",
                games.len(),
                st.changes.positions,
                st.changes.links
            ),
            Operation::Upgrade { params } => format!(
                "upgrade to level {} (error {}): {} positions raised in {} rounds; root value {}",
                params.level,
                params.error,
                st.changes.searches,
                st.iterations,
                root_value(&self.book)
            ),
            Operation::Audit { level, .. } => {
                self.last_audit = st.audit.clone();
                audit_report(*level, &st.audit)
            }
            Operation::Search { positions, level } => format!(
                "searched {} positions at level {level}: {} distinct searches",
                positions.len(),
                st.searched.1
            ),
            Operation::Analyze { board, from, up_to } => {
                let levels: Vec<String> =
                    bookfarm_book::searches::analysis_levels(board, *from, *up_to)
                        .iter()
                        .map(u8::to_string)
                        .collect();
                format!("analysed at levels {}", levels.join(", "))
            }
            Operation::StoreAnalysis { .. } => {
                let stored = program
                    .root_board()
                    .and_then(|b| self.book.probe(&b))
                    .map_or("not in the book".to_string(), |id| {
                        let p = self.book.position(id);
                        format!("at level {}, value {}", p.level, p.value)
                    });
                format!(
                    "{}: {} new positions, {} searches; the position is {stored}",
                    program.describe(),
                    st.changes.positions,
                    st.changes.searches,
                )
            }
            _ if program.schedule == Schedule::Async && st.iterations == 0 => format!(
                "{} (asynchronous): {} new positions, {} links, {} searches; root value {}",
                program.describe(),
                st.changes.positions,
                st.changes.links,
                st.changes.searches,
                root_value(&self.book)
            ),
            _ => format!(
                "{}: {} new positions, {} links, {} searches in {} iterations",
                program.describe(),
                st.changes.positions,
                st.changes.links,
                st.changes.searches,
                st.iterations
            ),
        };
        self.reports.push(report.clone());
        self.last = describe(program);
        self.finished += 1;
        self.negamaxes += 1;
        if !replaying {
            let mut e = event(EventKind::ProgramDone, &self.last, "", report.clone());
            e.program = self.programs.front().map_or(0, |r| r.id);
            e.cost = Some(CostRecord {
                positions: st.changes.positions as u64,
                wall_ms: self
                    .started
                    .take()
                    .map_or(0, |(t, _)| e.t_ms.saturating_sub(t)),
                ..CostRecord::default()
            });
            self.events.push(e);
        }
        if replaying {
            self.replay.replayed += 1;
            self.replay.log_dirty = true;
            return;
        }
        let follow_up = st.follow_up();
        let now = super::now_ms();
        if let Some(r) = self.programs.end_front(ProgramState::Done, report, now)
            && !r.program.operation.is_book_neutral()
        {
            // A book-neutral program changed nothing a replay would have to do again.
            // The log is what a replay runs again. An audit changes no position; its
            // follow-up is logged as its own program when it finishes (with the exact games),
            // so the audit is logged without queueing one.
            let mut logged = r.program;
            if let Operation::Audit { queue, .. } = &mut logged.operation
                && follow_up.is_some()
            {
                *queue = false;
            }
            self.replay.push(LoggedProgram {
                id: r.id,
                program: logged,
                stop: None,
            });
        }
        if let Some(next) = follow_up {
            tracing::info!(program = %next.describe(), "follow-up program queued");
            self.programs.push(next, now, true);
        }
    }

    /// Whether the growth run that just ended must write a checkpoint: always when the program
    /// queue or the replay log changed (a program was queued, finished or cleared, or a
    /// replay began), otherwise once `interval` has passed since the last one (zero: after
    /// every run). Skipping one loses nothing: the results are stored, and a restart re-runs
    /// the driver from the last checkpoint.
    fn checkpoint_due(&self, interval: std::time::Duration) -> bool {
        self.programs.is_dirty()
            || self.replay.log_dirty
            || self.reverted
            || self.replayed_through.is_some()
            || self.checkpointed_at.elapsed() >= interval
    }

    /// Apply checkpoints on `writer`'s thread from now on (see [`CheckpointWriter`]).
    pub(crate) fn set_writer(
        &mut self,
        writer: Option<CheckpointWriter>,
    ) -> Option<CheckpointWriter> {
        self.settle_checkpoint();
        std::mem::replace(&mut self.writer, writer)
    }

    /// Wait until the checkpoint in flight (if any) is applied. If applying it failed, what it
    /// wrote is marked unwritten again (the next checkpoint writes it whole) and the error is
    /// logged: the results it covered are stored, so nothing is lost meanwhile.
    pub(crate) fn settle_checkpoint(&mut self) {
        let Some(written) = self.in_flight.take() else {
            return;
        };
        let outcome = match &self.writer {
            Some(w) => w
                .done
                .recv()
                .map_err(|_| "checkpoint writer stopped".to_string()),
            None => Err("checkpoint writer gone".to_string()),
        };
        let error = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => {
                // The thread is gone: write on the growth thread from now on.
                self.writer = None;
                e
            }
        };
        metrics::counter!(crate::telemetry::STORE_ERRORS).increment(1);
        tracing::error!(error = %error, "checkpoint failed; the next one writes it again");
        self.unmark(written);
    }

    /// Mark what a checkpoint that was not applied wrote as unwritten again.
    fn unmark(&mut self, written: Written) {
        self.unwritten.extend(written.boards);
        self.reverted |= written.reverted;
        self.replayed_through = self.replayed_through.max(written.replayed_through);
        self.replay.log_dirty |= written.log;
        self.programs.unwrite(written.programs);
        if let Some(before) = written.todo_before {
            self.todo_written = before;
        }
    }

    /// Write a checkpoint now and wait for it: every position changed since the last one and
    /// the growth state in one batch (after a replay, the stored book's reversion to the base
    /// book too).
    pub(crate) fn persist(&mut self, store: &Store) -> Result<()> {
        self.settle_checkpoint();
        let (batch, written) = self.checkpoint(store)?;
        if let Err(e) = store.apply(batch) {
            self.unmark(written);
            return Err(e.into());
        }
        Ok(())
    }

    /// Write a checkpoint on the writer's thread (on this one without a writer): the growth
    /// run goes on while sled inserts the positions.
    fn persist_in_background(&mut self, store: &Store) -> Result<()> {
        self.settle_checkpoint();
        let Some(tx) = self.writer.as_ref().and_then(|w| w.tx.clone()) else {
            return self.persist(store);
        };
        let (batch, written) = self.checkpoint(store)?;
        match tx.send(batch) {
            Ok(()) => self.in_flight = Some(written),
            Err(std::sync::mpsc::SendError(batch)) => {
                // The thread is gone: write here, and from now on.
                self.writer = None;
                if let Err(e) = store.apply(batch) {
                    self.unmark(written);
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// Build a checkpoint's batch and mark what it writes as written (see [`Written`]).
    fn checkpoint(&mut self, store: &Store) -> Result<(Batch, Written)> {
        for id in self.book.take_changed() {
            if self.book.is_live(id) {
                self.unwritten.insert(self.book.board(id));
            }
        }
        // Nothing is marked written until the batch is built; a batch that fails to apply
        // is marked unwritten again (`settle_checkpoint`).
        let mut batch = Batch::default();
        if self.reverted {
            store.revert_to_base(&mut batch);
        }
        if let Some(n) = self.replayed_through {
            batch.put_rollback_replayed(n)?;
        }
        if !self.reverted && store.positions_fold_due() {
            // The stored chunks are mostly superseded versions: write the whole book once
            // as their replacement.
            batch.replace_positions();
            for id in self.book.ids() {
                batch.put_book_position(&self.book, id)?;
            }
        } else {
            for b in &self.unwritten {
                if let Some(id) = self.book.find(b) {
                    batch.put_book_position(&self.book, id)?;
                }
            }
        }
        let log_written = self.replay.log_dirty;
        if log_written {
            batch.put_log(&self.replay.record())?;
        }
        batch.put_header(self.book.header())?;
        let todo = match &self.driver {
            Some(d) if self.todo_written != Some(d.state().passes) => {
                batch.put_todo(&TodoRecord::new(d.state()))?;
                Some(d.state().passes)
            }
            _ => None,
        };
        let programs = self.programs.write(&mut batch)?;
        batch.put_growth(&self.record())?;
        let written = Written {
            boards: std::mem::take(&mut self.unwritten),
            reverted: std::mem::take(&mut self.reverted),
            replayed_through: self.replayed_through.take(),
            log: log_written,
            programs,
            todo_before: todo.map(|t| self.todo_written.replace(t)),
        };
        self.replay.log_dirty &= !log_written;
        self.checkpointed_at = std::time::Instant::now();
        Ok((batch, written))
    }

    fn record(&self) -> GrowthRecord {
        GrowthRecord {
            driver: self.driver.as_ref().map(|d| DriverRecord::new(d.state())),
            paused: self.paused,
            last: self.last.clone(),
        }
    }
}

/// What a program changed so far (its completed iterations and the current one).
fn changes_so_far(st: &DriverState) -> bookfarm_book::grow::Changes {
    let mut ch = st.changes;
    if let Phase::Expanding { iteration, .. } = &st.phase {
        ch += *iteration;
    }
    ch
}

/// The unit of a book-neutral program's figures.
const SEARCHES: &str = "searches";

/// Where a running program stands, as figures: units done and known in all (its current pass's
/// positions, the games of a book add, the root line's positions), and the positions it added.
fn figures(st: &DriverState) -> super::programs::ProgramProgress {
    let (done, total, unit) = match &st.phase {
        Phase::Expanding { todo, cursor, .. } => (*cursor as u64, todo.len() as u64, "positions"),
        Phase::Adding { game, .. } => match &st.program.operation {
            Operation::AddGames { games } => (
                (*game as u64).min(games.len() as u64),
                games.len() as u64,
                "games",
            ),
            _ => (0, 0, ""),
        },
        Phase::Rooting { cursor } => (
            *cursor as u64,
            st.program.root.len() as u64 + 1,
            "positions",
        ),
        Phase::Searching => (st.searched.0 as u64, st.searched.1 as u64, SEARCHES),
        Phase::Start | Phase::Auditing | Phase::Done => (0, 0, ""),
    };
    let mut f = super::programs::ProgramProgress {
        done,
        total,
        unit,
        ..Default::default()
    };
    f.cost.positions = changes_so_far(st).positions as u64;
    f
}

/// Where a running asynchronous program stands, as figures: the expansions applied out of
/// those applied and marked now (the frontier grows as it goes), and the positions it added.
fn async_figures(g: &AsyncGrowth) -> super::programs::ProgramProgress {
    let applied = g.stats().applied;
    let mut f = super::programs::ProgramProgress {
        done: applied,
        total: applied + g.marked() as u64,
        unit: "expansions",
        ..Default::default()
    };
    f.cost.positions = g.changes().positions as u64;
    f
}

/// Where a running asynchronous program stands, in words.
fn async_progress(g: &AsyncGrowth) -> String {
    let ch = g.changes();
    format!(
        "asynchronous: {} expansions, {} positions marked; {} new positions, {} searches so far",
        g.stats().applied,
        g.marked(),
        ch.positions,
        ch.searches
    )
}

/// Where a running program stands, in words.
fn progress(st: &DriverState) -> String {
    let ch = changes_so_far(st);
    let added = format!(
        "{} new positions, {} searches so far",
        ch.positions, ch.searches
    );
    match &st.phase {
        Phase::Start => "starting".into(),
        Phase::Expanding {
            pass, todo, cursor, ..
        } => format!(
            "iteration {}, {} pass: {}/{} positions; {added}",
            st.iterations + 1,
            pass_name(*pass),
            cursor,
            todo.len()
        ),
        Phase::Adding { game, .. } => match &st.program.operation {
            Operation::AddGames { games } => {
                format!(
                    "game {}/{}; {added}",
                    (game + 1).min(games.len()),
                    games.len()
                )
            }
            _ => added,
        },
        Phase::Auditing => "playing the best lines out".into(),
        Phase::Searching => format!("{}/{} searches", st.searched.0, st.searched.1),
        Phase::Rooting { cursor } => format!(
            "adding the root line's missing positions: {cursor}/{}",
            st.program.root.len() + 1
        ),
        Phase::Done => "done".into(),
    }
}

/// The name of a marking pass.
fn pass_name(pass: bookfarm_book::driver::PassKind) -> &'static str {
    use bookfarm_book::driver::PassKind as P;
    match pass {
        P::DeviateRoot => "deviate (root side)",
        P::DeviateOpponent => "deviate (opponent side)",
        P::Enhance => "enhance",
        P::Play => "play",
        P::Extend => "extend",
        P::Given => "expand",
        P::Upgrade => "upgrade",
        P::Resolve => "borrowed leaves",
    }
}
