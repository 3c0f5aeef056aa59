//! The coordinator's domain service: workers, leases, result validation, growth scheduling.
//! No tonic types here; `crate::rpc` (gRPC) and `crate::http` (the web UI) are thin layers over [`Coordinator`].
//!
//! One room per concept, each adding its part of [`Coordinator`]'s methods:
//! * `config`: [`ServiceConfig`] and the injected [`Clock`];
//! * `workers`: identity checks, registration, heartbeats, dropped and blocked workers;
//! * `lease`: leasing (and the waits that keep workers busy), failures, quarantine, expiry;
//! * `submit`: validating and storing results, handing them to growth;
//! * [`trust`]: the validation rules and their ledger (standing, credit, open cases);
//! * `runner`: the growth runner thread, starting, cancelling and pausing programs, durability;
//! * `programs`: the program queue (numbers, states, what each did);
//! * `status`: the status report; `book`: a new book, import and the book's reads;
//!   `book_view` and `history`: the web UI's views;
//! * `jobs`: the job table (jobs keyed by search request, queue, leases, workers);
//! * `growth`: the book, the growth programs (the book crate's driver) and known results;
//! * [`search`]: the book-neutral programs (a batch of searches, the analysis of a position).
//!
//! Concurrency: RPC handlers lock only the job table, briefly. Accepted results are stored
//! (with their provenance) and handed to the **growth runner**, one background thread at a time
//! that feeds them to the driver, persists the book's changes and refreshes the job table with
//! the searches the driver waits for. Store flushes (fsync) happen outside every lock, grouped:
//! one flush makes every batch applied before it durable ([`Coordinator::wait_durable`]).
//!
//! Invariants:
//! * a result is acknowledged only after the batch storing it was flushed; it is applied to the
//!   book afterwards (and again after a crash, from the result store), so nothing acknowledged
//!   is lost;
//! * the book depends only on the growth programs and the results of their requests (see
//!   `bookfarm_book::driver`), not on the workers or on arrival order;
//! * lock order: growth, then jobs; growth, then the explorer's memo.

mod book;
mod book_view;
mod config;
pub mod eta;
mod growth;
mod history;
mod jobs;
mod lease;
mod programs;
mod runner;
pub mod search;
mod status;
mod submit;
pub mod trust;
mod workers;

pub use book::{new_book, new_mem_book};
pub use book_view::{
    BookEntryView, BookStats, EXPORT_MAX_LINES, EXPORT_MAX_POSITIONS, ExportError, PositionView,
    Searching, SubtreeExport,
};
pub use config::{Clock, GrowthMode, ManualClock, ServiceConfig, SystemClock};
pub use growth::{Predictor, PrefetchReport, ShallowSearch};
pub use history::{ContributorReport, HistoryView};
pub use jobs::{Counters, JobClass};
pub use lease::{
    IDLE_POLLS_PER_SECOND, LeaseReply, MAX_RETRY_AFTER, Offer, lease_cap, max_lease_duration,
};
pub use programs::{EtaRange, KEEP_FINISHED, MAX_QUEUED, ProgramProgress, ProgramView};
pub use runner::Queued;
pub use status::{
    CreditReport, QuarantineReport, STATUS_REPORTS, State, StatusReport, TrustHealth, WorkerReport,
    credit_report,
};
pub use trust::{Standing, StreakRule, TrustCounters, TrustRules};
pub use workers::{BlockHook, RemoteWorker};

use crate::error::{CoordinatorError, Result};
use crate::events::EventLog;
use crate::store::{Batch, ProgramState, Store};
use bookfarm_book::program::{Operation, Program};
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchSignature};
use bookfarm_engine::{Board, Move};
use growth::{Growth, Landed, Replay};
use history::History;
use jobs::Jobs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use trust::TrustState;
use workers::HookSlot;

#[derive(Debug)]
struct Shared {
    jobs: Mutex<Jobs>,
    growth: Mutex<Growth>,
    /// Results accepted but not yet applied to the book.
    inbox: Mutex<Vec<Landed>>,
    /// A growth run is under way (the runner thread exists).
    running: AtomicBool,
    /// Leasing is paused (mirrors the growth state's flag, so that leases need no growth lock).
    paused: AtomicBool,
    /// Work arrived for the runner since its last pass.
    pending: AtomicBool,
    /// Growth runs completed (waiters watch it).
    runs: tokio::sync::watch::Sender<u64>,
    /// The same count for waiters on plain threads (in-process workers).
    runs_done: (Mutex<u64>, std::sync::Condvar),
    /// The search signature the book is pinned to (None until the first run or worker).
    signature: Mutex<Option<SearchSignature>>,
    /// Time series and contributors for the web UI (lock taken last, alone).
    history: Mutex<History>,
    /// Shared with the growth state's checkpoint writer (see [`growth::CheckpointWriter`]).
    store: Arc<Store>,
    cfg: ServiceConfig,
    clock: Arc<dyn Clock>,
    written: AtomicU64,
    flushed: AtomicU64,
    flush_lock: tokio::sync::Mutex<()>,
    /// Results dropped by caught workers, waiting for the growth runner's recovery (replay or
    /// retraction, `Growth::recover`), with the number of the last rollback request they
    /// belong to (none known: requested before a restart).
    rollback: Mutex<Option<(u64, Vec<LeafRequest>)>>,
    /// Rollback requests so far (stored as `rollback-requested` with the removals, so that a
    /// coordinator killed before the recovery recovers when it starts again).
    rollbacks_requested: AtomicU64,
    /// The growth state (negamaxes, done) whose decisive core trust saw last (see
    /// `runner`'s `hand_core_to_trust`).
    core_epoch: AtomicU64,
    /// See [`BlockHook`].
    on_block: Mutex<HookSlot>,
    /// Callers waiting for searches in flight (see `lease::MAX_FLIGHT_WAITERS`).
    flight_waiters: AtomicUsize,
    /// The farm's event log (see [`crate::events`]).
    events: EventLog,
    /// What the programs that ended since start cost.
    costs: Mutex<programs::ProgramCosts>,
    /// The explorer's grades and umigame numbers found so far (`book_view`; lock taken after
    /// growth's).
    explorer: Mutex<bookfarm_book::explore::Explorer>,
}

/// The coordinator service: a cheap-clone handle.
#[derive(Debug, Clone)]
pub struct Coordinator(Arc<Shared>);

/// Whether the start position still lacks its first search (a book just created).
fn start_unsearched(book: &bookfarm_book::MemBook) -> bool {
    book.find(&Board::start()).is_some_and(|id| {
        book.leaf(id).mv == Move::None && book.n_link(id) == 0 && book.score(id).value <= -127
    })
}

/// The signature a store opens with: the pinned one, which a run's own signature must equal;
/// a run's signature pins an unpinned store.
fn pin_signature(
    store: &Store,
    stored: Option<&str>,
    run: Option<&str>,
) -> Result<Option<SearchSignature>> {
    let parse = |t: &str| {
        SearchSignature::parse(t)
            .ok_or_else(|| CoordinatorError::Signature(format!("cannot parse {t:?}")))
    };
    let stored = stored.map(parse).transpose()?;
    let run = run.map(parse).transpose()?;
    match (stored, run) {
        (Some(s), Some(r)) if s != r => Err(CoordinatorError::Signature(format!(
            "this book was built under another search signature; {} (this run vs the book)",
            r.differences(&s).join("; ")
        ))),
        (Some(s), _) => Ok(Some(s)),
        (None, Some(r)) => {
            let mut b = Batch::default();
            b.put_signature(&r.to_string())?;
            store.apply(b)?;
            Ok(Some(r))
        }
        (None, None) => Ok(None),
    }
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Coordinator {
    /// Open the service over a store: load the book, the growth state and the stored results,
    /// resume the growth programs (queueing the searches they wait for).
    pub fn open(
        store: Store,
        dir: &Path,
        cfg: ServiceConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Coordinator> {
        let loaded = store.load(dir)?;
        let results: bookfarm_book::driver::RequestMap<LeafResult> =
            loaded.results.iter().map(|(k, r)| (*k, r.leaf)).collect();
        let trust = TrustState::load(
            loaded.trust,
            loaded.cases,
            loaded
                .results
                .iter()
                .map(|(k, r)| (*k, r.sources.clone(), r.leaf)),
            cfg.trust_seed
                .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0),
        );
        let mut growth = Growth::load(
            loaded.book,
            loaded.growth,
            programs::Programs::load(loaded.programs, &loaded.program_queue),
            loaded.todo,
            results,
            Replay::load(loaded.log),
        )?;
        if !growth.is_running() && start_unsearched(&growth.book) {
            growth.push(Program::new(Operation::New));
        }
        let store = Arc::new(store);
        growth.set_writer(Some(
            growth::CheckpointWriter::spawn(store.clone())
                .map_err(|e| CoordinatorError::Internal(format!("checkpoint writer: {e}")))?,
        ));
        let pinned = pin_signature(
            &store,
            loaded.signature.as_deref(),
            cfg.signature.as_deref(),
        )?;
        let mut jobs = Jobs::default();
        jobs.seeded_ids = cfg.seeded_ids.map(|key| (key, 0));
        jobs.done = loaded.done.into_iter().collect();
        jobs.trust = trust;
        jobs.blocks_recorded = jobs
            .trust
            .records
            .iter()
            .filter(|(_, t)| t.blocked)
            .map(|(name, _)| name.clone())
            .collect();
        // A program resumed from the store is charged from now on (what it cost before the
        // restart is not kept).
        if let Some(r) = growth.programs.front()
            && r.state == ProgramState::Running
        {
            jobs.cost.program_id = r.id;
        }
        let history = History::from_record(loaded.history);
        let events = EventLog::open(&store, cfg.event_log_max)?;
        let (runs, _) = tokio::sync::watch::channel(0);
        let paused = growth.paused;
        let c = Coordinator(Arc::new(Shared {
            jobs: Mutex::new(jobs),
            growth: Mutex::new(growth),
            inbox: Mutex::new(Vec::new()),
            running: AtomicBool::new(false),
            paused: AtomicBool::new(paused),
            pending: AtomicBool::new(false),
            runs,
            runs_done: (Mutex::new(0), std::sync::Condvar::new()),
            signature: Mutex::new(pinned),
            history: Mutex::new(history),
            store,
            cfg,
            clock,
            written: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            flush_lock: tokio::sync::Mutex::new(()),
            rollback: Mutex::new(
                (loaded.rollbacks.0 > loaded.rollbacks.1).then(|| (loaded.rollbacks.0, Vec::new())),
            ),
            rollbacks_requested: AtomicU64::new(loaded.rollbacks.0),
            core_epoch: AtomicU64::new(u64::MAX),
            on_block: Mutex::new(HookSlot::default()),
            flight_waiters: AtomicUsize::new(0),
            events,
            costs: Mutex::new(programs::ProgramCosts::default()),
            explorer: Mutex::new(bookfarm_book::explore::Explorer::new()),
        }));
        c.run_growth()?;
        {
            // After a restart, open cases are check jobs again (a new job for a result the book
            // uses: growth does not list it).
            let now = c.now();
            let mut g = c.jobs();
            for (k, need) in g.trust.open_needs() {
                g.add_check(k, need, now);
            }
        }
        c.growth().settle_checkpoint();
        c.0.store.flush()?;
        Ok(c)
    }

    fn jobs(&self) -> MutexGuard<'_, Jobs> {
        // A panic while holding the lock leaves consistent-enough state (every mutation is
        // applied to memory before the store); keep serving rather than poisoning forever.
        self.0.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn growth(&self) -> MutexGuard<'_, Growth> {
        self.0.growth.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The service configuration.
    pub fn config(&self) -> &ServiceConfig {
        &self.0.cfg
    }

    /// The farm's event log (shared with the credential registry, see
    /// [`crate::identity::Identities::set_events`]).
    pub fn events(&self) -> &EventLog {
        &self.0.events
    }

    fn now(&self) -> Duration {
        self.0.clock.now()
    }

    /// The check a replica of job `id` serves now (`None`: round work, or no such job): what
    /// the simulator charges that search to.
    pub(crate) fn check_kind(&self, id: &uuid::Uuid) -> Option<trust::CheckKind> {
        self.jobs()
            .jobs
            .get(id)
            .and_then(|j| j.need.as_ref())
            .map(|n| n.kind)
    }

    /// The streak of `contributor` now (`None`: no record): what the simulator reads to say
    /// where spot checks fall on the ramp.
    pub(crate) fn streak_of(&self, contributor: &str) -> Option<u64> {
        self.jobs().trust.records.get(contributor).map(|r| r.streak)
    }

    /// Round searches waiting for a worker now: what the simulator reads to say whether threads
    /// told their credential is earning trust sat idle while round work waited.
    pub(crate) fn queued_round(&self) -> usize {
        self.jobs().queued_round()
    }
}

#[cfg(test)]
pub(crate) mod tests;
