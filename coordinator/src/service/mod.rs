//! The coordinator's domain service: workers, leases, result validation, growth scheduling.
//! No tonic types here; `crate::grpc` is a thin translation layer over [`Coordinator`].
//!
//! * `jobs`: the job table (jobs keyed by search request, queue, leases, workers);
//! * `growth`: the book, the growth programs (the book crate's driver) and known results.
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
//! * lock order: growth, then jobs.

mod book_view;
mod growth;
mod history;
mod jobs;
pub mod trust;

pub use book_view::{BookEntryView, BookStats, PositionView, Searching};
pub use history::{ContributorReport, HistoryView};
pub use jobs::{Counters, JobClass};
pub use trust::{Standing, TrustCounters, TrustRules};

use crate::error::{CoordinatorError, Result};
use crate::store::Entry;
use crate::store::{Batch, ResultRecord, Store, TrustRecord};
use bookfarm_book::driver::Operation;
use bookfarm_book::model::{BookHeader, Position};
use bookfarm_book::research::Upgrade;
use bookfarm_book::select::Deviate;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchSignature};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::{Ack, Failure, Identity, Job, JobResult, Selector};
use bookfarm_proto::{MAX_LEASE_SLOTS, MAX_RESULTS_PER_CALL, PROTOCOL_VERSION};
use growth::{Growth, Landed, Replay};
pub use growth::{Predictor, PrefetchReport, ShallowSearch};
use history::History;
use jobs::{Jobs, Sample, WorkerEntry};
use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use trust::{Case, Replica, TrustState};
use uuid::Uuid;

/// A source of monotonic time, injected so that lease expiry can be tested without sleeping.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Time elapsed since an arbitrary fixed origin.
    fn now(&self) -> Duration;
}

/// The real clock.
#[derive(Debug)]
pub struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A clock moved by hand (tests, the simulator): nanoseconds since an arbitrary start.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Move time forward.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }

    /// Move time forward to `t` (no effect if `t` is in the past).
    pub fn advance_to(&self, t: Duration) {
        self.0.fetch_max(
            u64::try_from(t.as_nanos()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }
}

/// Service settings (validated library config; see `crate::config` for the file/CLI layers).
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// A worker silent for this long loses its leases (the jobs are re-queued).
    pub lease_timeout: Duration,
    /// Heartbeat period suggested to workers.
    pub heartbeat_interval: Duration,
    /// Failure reports from this many different owners quarantine a job (one owner's reports,
    /// retryable or not, never do; see [`Coordinator::fail`]).
    pub max_failures: u32,
    /// Jobs a worker may hold beyond its search threads (see [`lease_cap`]).
    pub lookahead: u32,
    /// The most search threads a registration is credited with (see [`lease_cap`]).
    pub max_worker_threads: u32,
    /// Longest lease of a level-0 job (see [`max_lease_duration`]).
    pub max_lease_base: Duration,
    /// The longest lease doubles every this many levels.
    pub max_lease_doubling_levels: u8,
    /// Upper bound of the longest lease at any level.
    pub max_lease_cap: Duration,
    /// Required engine version (None: accept any).
    pub engine_version: Option<String>,
    /// Required eval hash (None: accept any).
    pub eval_hash: Option<String>,
    /// The search signature of this run's searches (`SearchSignature` text). The store pins the
    /// first signature it sees (this one, or the first worker's); workers with another are
    /// refused, and a run whose signature differs from the pinned one does not open.
    pub signature: Option<String>,
    /// Bound of the store's page cache, bytes (`cache_capacity_mb`; the in-memory book is
    /// not part of it).
    pub cache_capacity: u64,
    /// Suggested wait for a worker that got no job.
    pub retry_after: Duration,
    /// Speculative prefetch: when fewer round searches are queued than workers have threads,
    /// plan this many searches per registered thread beyond the round (0: off). Speculation
    /// never changes the book, only which searches are done early.
    pub speculation: u32,
    /// Backup leases: an idle worker may get a second lease of a round search whose lease is
    /// older than this many times its level's mean search time (0: off).
    pub backup_after: u32,
    /// Share of the growth thread's time that planning speculation may take (0 < s ≤ 1; 1: no
    /// limit). A plan that took t blocks the next one for t / s − t, so a coordinator whose
    /// growth thread is saturated by results spends it on ingest rather than on guesses.
    pub speculation_share: f64,
    /// Level of the default predictor's guesses (a [`ShallowSearch`]; at most the request's
    /// level). Deeper guesses are right more often, so less speculative work is wasted, but the
    /// growth thread pays them: `sim guesses` measures both (docs/benchmarks.md).
    pub predictor_level: u8,
    /// Apply results on the submitting thread instead of the growth runner thread (the
    /// simulator: one thread, no hand-offs; a server keeps RPCs off growth's path).
    pub inline_growth: bool,
    /// Longest time between two checkpoints of the growth state (the changed positions, the
    /// driver state and the program queue, written in one batch) while results land; zero:
    /// after every growth run. Queueing, finishing or clearing a program, a replay, a pause
    /// and [`Coordinator::flush`] always checkpoint. A crash loses no result, only the growth
    /// work since the last checkpoint, which the next start redoes from the stored results.
    /// Default 5 s: a position that changes every second (the ancestors of the searches that
    /// land) is written once in 5 s instead of 5 times, and sled's inserts of the changed
    /// positions are the store's largest cost (16 × 128 ingest: −11 % CPU per result and
    /// +18 % results/s against 1 s, see `docs/benchmarks.md`).
    pub checkpoint_interval: Duration,
    /// Validation rules: N to earn trust, K invalid results to block, the spot-check floor
    /// (see [`trust`]).
    pub trust: TrustRules,
    /// Search threads of the coordinator's own verifier (its share of the coordinator's CPU;
    /// 0: none). The verifier answers validation and spot-check searches only; the service
    /// draws spot checks only while one is registered. Started by `serve`, not by the service.
    pub verify_threads: u32,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            lease_timeout: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(10),
            max_failures: 2,
            lookahead: 2,
            max_worker_threads: 64,
            max_lease_base: Duration::from_secs(60),
            max_lease_doubling_levels: 4,
            max_lease_cap: Duration::from_secs(6 * 3600),
            engine_version: None,
            eval_hash: None,
            signature: None,
            cache_capacity: crate::store::DEFAULT_CACHE_CAPACITY,
            retry_after: Duration::from_millis(200),
            speculation: 2,
            backup_after: 4,
            speculation_share: 0.25,
            predictor_level: 2,
            inline_growth: false,
            checkpoint_interval: Duration::from_secs(5),
            trust: TrustRules::default(),
            verify_threads: 0,
        }
    }
}

/// The expansion state shown to operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No expansion requested.
    Idle,
    /// Selecting and leasing.
    Running,
    /// Paused: no new leases.
    Paused,
    /// The expansion reached its fixed point.
    Done,
}

impl State {
    /// Lowercase name (`idle|running|paused|done`).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Running => "running",
            State::Paused => "paused",
            State::Done => "done",
        }
    }
}

/// Per-worker figures for the status report.
#[derive(Debug, Clone)]
pub struct WorkerReport {
    /// Worker id.
    pub id: Uuid,
    /// Name given at registration.
    pub name: String,
    /// Its credential's owner (None: anonymous local worker).
    pub owner: Option<String>,
    /// Its credential is trusted by the operator.
    pub trusted: bool,
    /// Engine version it registered with.
    pub version: String,
    /// Search threads.
    pub threads: u32,
    /// Jobs leased now.
    pub in_flight: usize,
    /// Results accepted.
    pub completed: u64,
    /// Failures reported.
    pub failed: u64,
    /// Accepted results per second over the last window.
    pub results_per_second: f64,
    /// Nodes of its accepted searches per second over the last window.
    pub nodes_per_second: f64,
    /// Time since the worker's last call.
    pub last_seen: Duration,
    /// Standing of its results (see [`trust`]).
    pub standing: Standing,
    /// Its contributor's results validated or used by the book.
    pub credit_results: u64,
    /// Its contributor's invalid results.
    pub invalid: u64,
}

/// A quarantined search.
#[derive(Debug, Clone)]
pub struct QuarantineReport {
    /// The last job id.
    pub job_id: Uuid,
    /// The position searched.
    pub board: Board,
    /// The last failure reason.
    pub reason: String,
}

/// The status report.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// Positions in the book.
    pub positions: u64,
    /// Jobs waiting for a worker.
    pub queued: u64,
    /// Jobs leased.
    pub in_flight: u64,
    /// Registered workers.
    pub workers: Vec<WorkerReport>,
    /// Accepted results per second (recent window).
    pub results_per_second: f64,
    /// Nodes of the accepted searches per second (recent window).
    pub nodes_per_second: f64,
    /// Mean duration of the searches accepted in the recent window (None: none).
    pub mean_search: Option<Duration>,
    /// Search threads of all registered workers.
    pub threads: u64,
    /// Threads holding a search now (per worker, the fewer of its threads and its leases).
    pub busy_threads: u64,
    /// Expansion state.
    pub state: State,
    /// Description of the expansion.
    pub expansion: String,
    /// Results accepted since start.
    pub completed: u64,
    /// Quarantined positions.
    pub quarantined: Vec<QuarantineReport>,
    /// Value of the root position (-127 when unknown).
    pub root_value: i32,
    /// How speculative prefetch served.
    pub prefetch: PrefetchReport,
    /// Leases of speculative jobs since start.
    pub speculative_leased: u64,
    /// Backup leases since start.
    pub backup_leased: u64,
    /// What the last growth programs did (at most [`STATUS_REPORTS`], oldest first).
    pub reports: Vec<String>,
    /// Growth programs finished since start.
    pub programs_finished: u64,
    /// What validation did since start.
    pub validation: TrustCounters,
    /// Standing and credit of every contributor seen.
    pub credit: Vec<CreditReport>,
}

/// One contributor's standing and credit (a credential, the coordinator's own searches, the
/// in-process workers or an anonymous worker).
#[derive(Debug, Clone, PartialEq)]
pub struct CreditReport {
    /// Contributor name (credential name, `(local)`, `(coordinator)`, `(anonymous) NAME`).
    pub name: String,
    /// Owner (empty for the coordinator's own).
    pub owner: String,
    /// Standing now.
    pub standing: Standing,
    /// Consecutive results that agreed with the trust root.
    pub streak: u64,
    /// Results validated or used by the book.
    pub results: u64,
    /// Nodes of those results.
    pub nodes: u64,
    /// Search time of those results (reported by the worker).
    pub cpu: Duration,
    /// Invalid results.
    pub invalid: u64,
    /// Blocked for invalid results.
    pub blocked: bool,
    /// Time from its first result to earned trust (None: not earned).
    pub time_to_trust: Option<Duration>,
}

/// Called with a contributor's name when it is blocked for invalid results: the server blocks
/// the credential and returns the worker ids of its sessions, which the service then forgets
/// (their leases go back to the queue).
pub type BlockHook = Box<dyn Fn(&str) -> Vec<Uuid> + Send + Sync>;

/// How many program reports the status carries.
pub const STATUS_REPORTS: usize = 20;

/// The most speculative searches planned at once (a plan runs the programs on a copy of the
/// book, so its cost grows with it).
const MAX_SPECULATION: usize = 4096;

/// Empty lease calls per second the idle threads of a farm may make together (see
/// [`Coordinator::retry_after`]).
pub const IDLE_POLLS_PER_SECOND: f64 = 1000.0;

/// Longest wait suggested to an idle worker (far below the session timeout).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// Most [`Coordinator::lease_waiting`] callers that wait at once for the results other workers
/// hold (growth idle, the driver blocked on searches in flight). Each growth run wakes every
/// waiter to lease again, so a farm of thousands of idle workers must not all wait: the others
/// get an empty reply and `retry_after`, as before.
const MAX_FLIGHT_WAITERS: usize = 64;

/// Counts a caller among the [`MAX_FLIGHT_WAITERS`] while it lives.
struct FlightWaiter<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> FlightWaiter<'a> {
    fn enter(count: &'a std::sync::atomic::AtomicUsize) -> Option<FlightWaiter<'a>> {
        if count.fetch_add(1, Ordering::SeqCst) >= MAX_FLIGHT_WAITERS {
            count.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(FlightWaiter(count))
    }
}

impl Drop for FlightWaiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Window for results-per-second figures.
const RATE_WINDOW: Duration = Duration::from_secs(10);

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
    /// Results dropped by caught workers, waiting for the growth runner's replay, with the
    /// number of the last rollback request they belong to.
    rollback: Mutex<Option<(u64, Vec<LeafRequest>)>>,
    /// Rollback requests so far (stored as `rollback-requested` with the removals, so that a
    /// coordinator killed before the replay replays when it starts again).
    rollbacks_requested: AtomicU64,
    /// See [`BlockHook`].
    on_block: Mutex<HookSlot>,
    /// Callers waiting for searches in flight (see [`MAX_FLIGHT_WAITERS`]).
    flight_waiters: std::sync::atomic::AtomicUsize,
}

/// The report of a contributor's record.
pub fn credit_report(name: &str, t: &TrustRecord, rules: &TrustRules) -> CreditReport {
    CreditReport {
        name: name.to_string(),
        owner: t.owner.clone(),
        standing: trust::standing(t, rules),
        streak: t.streak,
        results: t.results,
        nodes: t.nodes,
        cpu: Duration::from_micros(t.cpu_us),
        invalid: t.invalid,
        blocked: t.blocked,
        time_to_trust: (t.earned_ms > 0)
            .then(|| Duration::from_millis(t.earned_ms.saturating_sub(t.first_ms))),
    }
}

/// The block hook's slot (Debug without the closure).
#[derive(Default)]
struct HookSlot(Option<BlockHook>);

impl std::fmt::Debug for HookSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "HookSlot(set)"
        } else {
            "HookSlot(none)"
        })
    }
}

/// The coordinator service: a cheap-clone handle.
#[derive(Debug, Clone)]
pub struct Coordinator(Arc<Shared>);

/// How many jobs one worker may hold at once: its declared threads (at most
/// `max_worker_threads`) plus `lookahead`. Workers lease a little ahead of their free threads;
/// anything more only hoards jobs that other workers could search.
pub fn lease_cap(threads: u32, cfg: &ServiceConfig) -> usize {
    threads.min(cfg.max_worker_threads) as usize + cfg.lookahead as usize
}

/// How long a job of `level` may stay leased, heartbeats or not: `max_lease_base` doubled every
/// `max_lease_doubling_levels` levels (a search's time grows geometrically with its depth), at
/// most `max_lease_cap`. Past it the job goes back to the queue, so a worker that heartbeats but
/// never answers cannot stall the growth program; its late result is still accepted while
/// nobody else holds the job.
pub fn max_lease_duration(level: u8, cfg: &ServiceConfig) -> Duration {
    let doublings = u32::from(level) / u32::from(cfg.max_lease_doubling_levels.max(1));
    let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
    cfg.max_lease_base
        .saturating_mul(factor)
        .min(cfg.max_lease_cap)
}

/// The positions of a new book (`book new LEVEL DEPTH`): the start position, not searched yet
/// (opening the store queues its search).
pub fn new_book(level: u8, depth: u8) -> (BookHeader, Vec<Entry>) {
    let header = BookHeader::new(i32::from(level), i32::from(depth));
    let start = Position::new(Board::start(), level.min(60));
    (header, vec![Entry::new(start)])
}

/// Replay a move list from the start position; returns the final board.
pub fn replay(moves: &str) -> Result<Board> {
    let s: String = moves.chars().filter(|c| !c.is_whitespace()).collect();
    let mut b = Board::start();
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(CoordinatorError::InvalidArgument(format!(
            "move list {s:?} has an odd length"
        )));
    }
    for ch in bytes.chunks(2) {
        let t = String::from_utf8_lossy(ch);
        let mv = Move::parse(&t)
            .map_err(|e| CoordinatorError::InvalidArgument(format!("move list: {e}")))?;
        if b.must_pass() {
            b = b.pass();
        }
        b = b
            .play_move(mv)
            .map_err(|e| CoordinatorError::InvalidArgument(format!("move list: {e}")))?;
    }
    Ok(b)
}

/// The growth program of a selector, from the start position.
pub fn operation(selector: Selector) -> Operation {
    let root = Board::start();
    match selector {
        Selector::Deviate { relative, absolute } => Operation::Deviate {
            root,
            params: Deviate::new(relative, absolute),
        },
        // The cluster repeats enhance until it adds nothing (Edax's runs it once, edax-spec §4.7).
        Selector::Enhance { midgame, endcut } => Operation::Enhance {
            root,
            midgame_error: midgame,
            endcut_error: endcut,
            until_stable: true,
        },
        Selector::Play => Operation::Play { root },
        Selector::Extend => Operation::Extend { root },
        Selector::Upgrade { level, error } => Operation::Upgrade {
            root,
            params: Upgrade { level, error },
        },
        Selector::Audit { level, queue } => Operation::Audit { level, queue },
    }
}

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

fn now_ms() -> u64 {
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
        let results: bookfarm_book::driver::RequestMap<LeafResult> = loaded
            .results
            .iter()
            .map(|(k, r)| (*k, r.result()))
            .collect();
        let trust = TrustState::load(
            loaded.trust,
            loaded.cases,
            loaded.results.iter().map(|(k, r)| (*k, r.sources.clone())),
        );
        let mut growth = Growth::load(
            loaded.book,
            loaded.growth,
            loaded.queue,
            loaded.todo,
            results,
            Replay::load(loaded.log),
        )?;
        if !growth.is_running() && start_unsearched(&growth.book) {
            growth.push(Operation::New, None);
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
        jobs.done = loaded.done.into_iter().collect();
        jobs.trust = trust;
        let history = History::from_record(loaded.history);
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
            on_block: Mutex::new(HookSlot::default()),
            flight_waiters: std::sync::atomic::AtomicUsize::new(0),
        }));
        c.run_growth()?;
        c.reopen_cases();
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

    fn now(&self) -> Duration {
        self.0.clock.now()
    }

    /// Check a worker's software: protocol, engine, evaluation and search signature.
    /// Credentials are checked before a request reaches the service (`crate::identity`).
    pub fn check_identity(&self, id: &Identity) -> Result<()> {
        let cfg = &self.0.cfg;
        if id.protocol_version != PROTOCOL_VERSION {
            return Err(CoordinatorError::ProtocolVersion {
                got: id.protocol_version,
                want: PROTOCOL_VERSION,
            });
        }
        if let Some(v) = &cfg.engine_version
            && *v != id.engine_version
        {
            return Err(CoordinatorError::EngineVersion {
                got: id.engine_version.clone(),
                want: v.clone(),
            });
        }
        if let Some(h) = &cfg.eval_hash
            && *h != id.eval_hash
        {
            return Err(CoordinatorError::EvalHash {
                got: id.eval_hash.clone(),
                want: h.clone(),
            });
        }
        self.check_signature(&id.search_signature)
    }

    /// A worker's search signature must be the book's; the first one seen pins the book when
    /// nothing did before.
    fn check_signature(&self, text: &str) -> Result<()> {
        let Some(theirs) = SearchSignature::parse(text) else {
            return Err(CoordinatorError::Signature(if text.is_empty() {
                "the worker sent none (upgrade the worker)".into()
            } else {
                format!("cannot parse {text:?}")
            }));
        };
        let mut pinned = self.0.signature.lock().unwrap_or_else(|p| p.into_inner());
        match &*pinned {
            Some(ours) if *ours != theirs => Err(CoordinatorError::Signature(format!(
                "the worker's differs from the book's: {} (worker vs book)",
                theirs.differences(ours).join("; ")
            ))),
            Some(_) => Ok(()),
            None => {
                let mut b = Batch::default();
                b.put_signature(&theirs.to_string())?;
                self.0.store.apply(b)?;
                self.0.store.flush()?;
                tracing::info!(signature = %theirs, "book pinned to the first worker's search signature");
                *pinned = Some(theirs);
                Ok(())
            }
        }
    }

    /// Register one of the coordinator's in-process workers (its own searches: the trust
    /// root); returns its id.
    pub fn register(&self, id: &Identity, name: &str, threads: u32) -> Result<Uuid> {
        let who = (trust::LOCAL.to_string(), String::new(), false, true);
        self.enroll(id, name, threads, None, who, false)
    }

    /// Register a worker run by `owner` (its credential's owner; `None`: anonymous local
    /// worker); returns its id.
    pub fn register_owned(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        owner: Option<&str>,
    ) -> Result<Uuid> {
        self.register_with(id, name, threads, owner, false)
    }

    /// [`Coordinator::register_owned`] with the trust the operator gave the credential (the
    /// owner stands for the credential's name: tests, benches).
    pub fn register_with(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        owner: Option<&str>,
        trusted: bool,
    ) -> Result<Uuid> {
        self.register_as(id, name, threads, owner.map(|o| (o, o)), trusted)
    }

    /// Register a remote worker: `credential` is its (credential name, owner), `None` for an
    /// anonymous worker (loopback only, while no credential exists: the operator's own, whose
    /// results count as trusted); `trusted` the operator's trust in the credential. The
    /// worker's results are credited to, and trusted as, the credential (see [`trust`]).
    pub fn register_as(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        credential: Option<(&str, &str)>,
        trusted: bool,
    ) -> Result<Uuid> {
        let name: String = name.chars().take(128).collect();
        let (contributor, owner, given) = match credential {
            Some((c, o)) => (c.to_string(), o.to_string(), trusted),
            None => (
                format!("{} {name}", trust::ANONYMOUS),
                trust::ANONYMOUS.to_string(),
                true,
            ),
        };
        self.enroll(
            id,
            &name,
            threads,
            credential.map(|(_, o)| o),
            (contributor, owner, given, false),
            false,
        )
    }

    /// Register the coordinator's verifier (its own searches: the trust root).
    pub fn register_verifier(&self, id: &Identity, threads: u32) -> Result<Uuid> {
        let who = (trust::VERIFIER.to_string(), String::new(), false, true);
        self.enroll(id, "verifier", threads, None, who, true)
    }

    /// Register a worker as `contributor` = (name, owner, given trust, root).
    fn enroll(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        owner: Option<&str>,
        contributor: (String, String, bool, bool),
        verifier: bool,
    ) -> Result<Uuid> {
        self.check_identity(id)?;
        let (who, who_owner, given, root) = contributor;
        let trusted = given || root;
        let wid = Uuid::new_v4();
        let now = self.now();
        let mut g = self.jobs();
        if g.trust.blocked(&who) {
            return Err(CoordinatorError::Blocked(who));
        }
        let before = g.trust.records.get(&who).cloned();
        g.trust.enroll(&who, &who_owner, given, root);
        if g.trust.records.get(&who) != before.as_ref()
            && let Some(r) = g.trust.records.get(&who)
        {
            let mut b = Batch::default();
            b.put_trust(&who, r)?;
            let r = r.clone();
            self.0.store.apply(b)?;
            g.trust.unwritten.remove(&who);
            g.trust.written.insert(who.clone(), r);
        }
        g.trust.verifiers += usize::from(verifier);
        g.add_worker(
            wid,
            WorkerEntry {
                name: name.chars().take(128).collect(),
                owner: owner.map(str::to_string),
                trusted,
                version: id.engine_version.chars().take(64).collect(),
                threads,
                last_seen: now,
                jobs: HashSet::new(),
                completed: 0,
                failed: 0,
                recent: VecDeque::new(),
                contributor: who.clone(),
                verifier,
            },
        );
        g.update_gauges();
        tracing::info!(worker_id = %wid, name, threads, contributor = %who, "worker registered");
        Ok(wid)
    }

    /// Refuse a worker whose contributor was blocked for invalid results.
    fn check_blocked(g: &Jobs, worker: &Uuid) -> Result<()> {
        match g.workers.get(worker) {
            Some(w) if g.trust.blocked(&w.contributor) => {
                Err(CoordinatorError::Blocked(w.contributor.clone()))
            }
            _ => Ok(()),
        }
    }

    fn touch(g: &mut Jobs, worker: &Uuid, now: Duration) -> Result<()> {
        match g.workers.get_mut(worker) {
            Some(w) => {
                w.last_seen = now;
                Ok(())
            }
            None => Err(CoordinatorError::UnknownWorker(worker.to_string())),
        }
    }

    /// Heartbeat: extends the worker's leases; returns the listed jobs it no longer holds.
    pub fn heartbeat(&self, id: &Identity, worker: &Uuid, held: &[Uuid]) -> Result<Vec<Uuid>> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        Ok(held
            .iter()
            .filter(|j| g.jobs.get(j).is_none_or(|e| !e.leased_to(worker)))
            .copied()
            .collect())
    }

    /// Lease up to `slots` jobs to a worker (none while paused).
    pub fn lease(&self, id: &Identity, worker: &Uuid, slots: u32) -> Result<Vec<Job>> {
        self.check_identity(id)?;
        let paused = self.0.paused.load(Ordering::SeqCst);
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        Self::check_blocked(&g, worker)?;
        if paused {
            return Ok(Vec::new());
        }
        let room = g.workers.get(worker).map_or(0, |w| {
            lease_cap(w.threads, &self.0.cfg).saturating_sub(w.jobs.len())
        });
        let slots = (slots.min(MAX_LEASE_SLOTS) as usize).min(room);
        Ok(g.lease(worker, slots, now, &self.0.cfg))
    }

    /// [`Coordinator::lease`]; when it finds no job while a growth run is under way (results
    /// just landed) or other workers hold searches the driver waits for, wait up to `wait` in
    /// all for the runs to queue the next searches, leasing again after each, so that workers
    /// do not sleep through the end of every pass.
    pub async fn lease_waiting(
        &self,
        id: &Identity,
        worker: &Uuid,
        slots: u32,
        wait: Duration,
    ) -> Result<Vec<Job>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut waiter = None;
        loop {
            let mut runs = self.growth_runs();
            let jobs = self.lease(id, worker, slots)?;
            // A worker still holding jobs never waits: its threads are busy, and the call would
            // hold back the results and leases it makes next. Otherwise it waits while growth
            // runs are under way, leasing again after each (a run that applied results may
            // queue nothing; the next one queues the next pass), up to `wait` in all.
            if !jobs.is_empty() || slots == 0 {
                return Ok(jobs);
            }
            let (holds, in_flight) = {
                let g = self.jobs();
                let holds = g.workers.get(worker).is_some_and(|w| !w.jobs.is_empty());
                (holds, g.in_flight)
            };
            if holds {
                return Ok(jobs);
            }
            if !(self.growth_busy() || runs.has_changed().unwrap_or(false)) {
                // Growth is idle, blocked on searches other workers hold: their results start
                // the next run, which queues what comes next. Waiting for it (a few callers at
                // a time) instead of sleeping `retry_after` (200 ms and more) keeps the farm's
                // threads busy across the tail of every pass.
                if in_flight == 0 {
                    return Ok(jobs);
                }
                if waiter.is_none() {
                    waiter = FlightWaiter::enter(&self.0.flight_waiters);
                    if waiter.is_none() {
                        return Ok(jobs);
                    }
                }
            }
            if tokio::time::timeout_at(deadline, runs.changed())
                .await
                .is_err()
            {
                return self.lease(id, worker, slots);
            }
        }
    }

    /// [`Coordinator::lease`] for a caller on a plain thread (an in-process worker): when it
    /// finds no job for a worker that holds none while growth runs are under way (results just
    /// landed), wait for them, up to `wait` in all, and lease again after each, so that the
    /// searches the runs queue (the next pass) are leased at once. A worker still holding jobs
    /// never waits: its caller would stop delivering their results meanwhile.
    pub fn lease_blocking(
        &self,
        id: &Identity,
        worker: &Uuid,
        slots: u32,
        wait: Duration,
    ) -> Result<Vec<Job>> {
        let deadline = Instant::now() + wait;
        loop {
            let seen = self.growth_run_count();
            let jobs = self.lease(id, worker, slots)?;
            if !jobs.is_empty() || slots == 0 {
                return Ok(jobs);
            }
            if self.holds_jobs(worker) || !(self.growth_busy() || self.growth_run_count() != seen) {
                return Ok(jobs);
            }
            let (count, cv) = &self.0.runs_done;
            let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
            while *n == seen {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    return Ok(jobs);
                };
                n = cv
                    .wait_timeout(n, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }

    /// How long a worker that got no job should wait before asking again: the configured
    /// `retry_after`, stretched so that the farm's idle workers together poll at most
    /// [`IDLE_POLLS_PER_SECOND`] times a second (10,000 idle workers would otherwise flood the
    /// coordinator with 50,000 empty calls a second), and never beyond [`MAX_RETRY_AFTER`].
    /// A worker makes one call for all its free threads, so the idle workers are estimated as
    /// the idle threads over the mean threads per worker (counting threads instead would make
    /// a farm of few big workers sleep through the end of every pass with work queued).
    pub fn retry_after(&self) -> Duration {
        let idle = {
            let g = self.jobs();
            let threads = g.threads();
            let idle_threads = threads.saturating_sub(g.in_flight);
            if threads == 0 {
                0
            } else {
                idle_threads
                    .saturating_mul(g.workers.len())
                    .div_ceil(threads)
            }
        };
        let spread = Duration::from_secs_f64(idle as f64 / IDLE_POLLS_PER_SECOND);
        self.0.cfg.retry_after.max(spread).min(MAX_RETRY_AFTER)
    }

    fn growth_run_count(&self) -> u64 {
        *self.0.runs_done.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `worker` holds a lease now.
    fn holds_jobs(&self, worker: &Uuid) -> bool {
        self.jobs()
            .workers
            .get(worker)
            .is_some_and(|w| !w.jobs.is_empty())
    }

    /// Whether the growth runner has work under way (a worker that got no job may wait for it
    /// instead of sleeping: new jobs appear when it finishes).
    pub fn growth_busy(&self) -> bool {
        self.0.running.load(Ordering::SeqCst) || self.0.pending.load(Ordering::SeqCst)
    }

    /// A receiver that changes whenever a growth run finishes.
    pub fn growth_runs(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.runs.subscribe()
    }

    /// Validate and store results from a worker. Either every result is valid (then valid ones
    /// are stored with their provenance and handed to growth, duplicates ignored) or the call
    /// fails and nothing changes. The results are stored but not yet durable: callers must
    /// [`Coordinator::wait_durable`] before acknowledging.
    pub fn submit(&self, id: &Identity, worker: &Uuid, results: &[JobResult]) -> Result<Vec<Ack>> {
        self.check_identity(id)?;
        if results.len() > MAX_RESULTS_PER_CALL {
            return Err(CoordinatorError::TooMany {
                got: results.len(),
                max: MAX_RESULTS_PER_CALL,
            });
        }
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        Self::check_blocked(&g, worker)?;
        let who = g
            .workers
            .get(worker)
            .map(|w| w.contributor.clone())
            .unwrap_or_default();
        // Pass 1: validate everything without changing anything.
        let mut acks = Vec::with_capacity(results.len());
        let mut seen = HashSet::new();
        for r in results {
            if !seen.insert(r.job_id) {
                g.counters.rejected += 1;
                return Err(CoordinatorError::InvalidArgument(format!(
                    "job {} appears twice in one call",
                    r.job_id
                )));
            }
            if g.done.contains(&r.job_id) {
                acks.push(Ack::Duplicate);
                continue;
            }
            let Some(j) = g.jobs.get(&r.job_id) else {
                g.counters.rejected += 1;
                return Err(CoordinatorError::UnknownJob(r.job_id));
            };
            if !j.lessees.contains(worker) {
                g.counters.rejected += 1;
                return Err(CoordinatorError::NotLeased {
                    job: r.job_id,
                    worker: *worker,
                });
            }
            if let Err(e) = validate(&j.key, r) {
                g.counters.rejected += 1;
                return Err(e);
            }
            // A contributor answers a request once (another session of the same credential
            // adds nothing to a case).
            let answered = g
                .trust
                .cases
                .get(&j.key)
                .is_some_and(|c| c.replicas.iter().any(|x| x.contributor == who));
            acks.push(if answered {
                Ack::Duplicate
            } else {
                Ack::Accepted
            });
        }
        // Pass 2: store, and let the validation rules decide what reaches the book.
        let mut batch = Batch::default();
        let mut landed = Vec::new();
        let mut caught = Vec::new();
        let mut rollback = Vec::new();
        // Contributors whose trust record changed: written once per call, in their final state.
        let mut touched = Vec::new();
        let at = now_ms();
        for (r, ack) in results.iter().zip(&acks) {
            if *ack == Ack::Duplicate {
                g.counters.duplicates += 1;
                continue;
            }
            g.record_search_time(&r.job_id, worker, now);
            let Some((key, prefetched)) = g.jobs.get(&r.job_id).map(|j| (j.key, j.prefetched))
            else {
                continue;
            };
            let outcome = self.take_replica(
                &mut g,
                &mut batch,
                &mut touched,
                (worker, &who),
                (key, r),
                at,
            )?;
            if let Some(result) = outcome.apply {
                if prefetched {
                    g.counters.speculative_completed += 1;
                }
                g.landed.insert(key);
                landed.push(Landed {
                    key,
                    result,
                    prefetched,
                });
            }
            caught.extend(outcome.losers);
            if outcome.reached_book {
                rollback.push(key);
            }
            g.counters.completed += 1;
            let l = Sample {
                at: now,
                nodes: r.nodes,
                search_us: u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX),
            };
            g.recent.push_back(l);
            if let Some(w) = g.workers.get_mut(worker) {
                w.completed += 1;
                w.recent.push_back(l);
                let who = match &w.owner {
                    Some(o) => (false, o.clone()),
                    None => (true, w.name.clone()),
                };
                *g.contributions.entry(who).or_default() += 1;
            }
        }
        let mut blocked = Vec::new();
        for loser in caught {
            let (dropped, block) = self.catch(&mut g, &mut batch, &loser)?;
            rollback.extend(dropped);
            if block {
                blocked.push(loser);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        let interval_ms =
            u64::try_from(self.0.cfg.checkpoint_interval.as_millis()).unwrap_or(u64::MAX);
        for (name, t) in g.trust.records_to_write(&touched, at, interval_ms) {
            batch.put_trust(&name, &t)?;
        }
        let replay = !rollback.is_empty();
        if replay {
            g.trust.counters.rollbacks += 1;
            // Durable with the removals: a coordinator killed before the replay replays at its
            // next start (the stored book may already hold the dropped results' effects).
            let n = self.0.rollbacks_requested.fetch_add(1, Ordering::SeqCst) + 1;
            batch.put_rollback_requested(n)?;
            let mut pending = self.0.rollback.lock().unwrap_or_else(|p| p.into_inner());
            let (through, dropped) = pending.get_or_insert_with(|| (n, Vec::new()));
            *through = n;
            dropped.extend(rollback);
        }
        self.0.store.apply(batch)?;
        self.0.written.fetch_add(1, Ordering::SeqCst);
        g.trim_rates(now, Some(worker));
        g.update_gauges();
        drop(g);
        for b in blocked {
            tracing::warn!(contributor = %b, "blocked: too many invalid results");
            let ended = match &self.0.on_block.lock().unwrap_or_else(|p| p.into_inner()).0 {
                Some(hook) => hook(&b),
                None => Vec::new(),
            };
            self.drop_workers(&ended);
        }
        if !landed.is_empty() || replay {
            metrics::counter!(crate::telemetry::JOBS_COMPLETED).increment(landed.len() as u64);
            self.0
                .inbox
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(landed);
            if self.0.cfg.inline_growth {
                if let Err(e) = self.run_growth() {
                    tracing::error!(error = %e, "growth run failed");
                }
            } else {
                self.kick();
            }
        }
        Ok(acks)
    }

    /// Fold one accepted replica into its request's case (see [`trust`]): credit, streaks,
    /// invalid counts, the stored result and case, and the job (closed, or a check job).
    /// The contributors whose trust record changed are added to `touched` (the caller writes
    /// them once per call).
    fn take_replica(
        &self,
        g: &mut Jobs,
        batch: &mut Batch,
        touched: &mut Vec<String>,
        (worker, who): (&Uuid, &str),
        (key, r): (LeafRequest, &JobResult),
        at: u64,
    ) -> Result<Taken> {
        let rules = self.0.cfg.trust;
        let standing = g.trust.standing_of(who, &rules);
        let owner = g
            .trust
            .records
            .get(who)
            .map(|t| t.owner.clone())
            .unwrap_or_default();
        let result = r.leaf();
        let mut case = g.trust.cases.remove(&key).unwrap_or_default();
        let first = case.replicas.is_empty();
        let was_applied = case.applied;
        case.replicas.push(Replica {
            contributor: who.to_string(),
            owner,
            standing,
            result,
        });
        let applied = was_applied.then(|| case.replicas[0].result);
        // Judged on the first replica's score: the result the book would use.
        let critical = g.trust.window.critical(&key, case.replicas[0].result.score);
        let streak = g.trust.records.get(who).map_or(0, |t| t.streak);
        let spot = g.trust.verifiers > 0
            && trust::coin(&r.job_id) < trust::spot_probability(streak, &rules);
        let d = trust::decide(
            &case.replicas,
            applied.as_ref(),
            critical,
            spot,
            g.trust.verifiers > 0,
        );
        // Counters.
        let c = &mut g.trust.counters;
        if first {
            c.used_nodes += r.nodes;
            match (&d.apply, &d.need) {
                (None, _) => c.held += 1,
                (Some(_), need) => {
                    c.applied_at_once += 1;
                    c.spot_checks += u64::from(need.is_some());
                }
            }
        } else {
            c.replica_nodes += r.nodes;
            if d.apply.is_some() && !was_applied {
                c.validated += 1;
            }
        }
        c.invalid += d.losers.len() as u64;
        let reached_book = was_applied && d.losers.contains(&case.replicas[0].contributor);
        c.reached_book += u64::from(reached_book);
        // Records: credit once per replica, streaks, invalid results.
        if touched.last().is_none_or(|t| t != who) {
            touched.push(who.to_string());
        }
        if let Some(t) = g.trust.records.get_mut(who)
            && t.first_ms == 0
        {
            t.first_ms = at;
        }
        for (i, x) in case.replicas.iter().enumerate() {
            if !d.credited.contains(&x.contributor) || (i == 0 && was_applied) {
                continue;
            }
            if let Some(t) = g.trust.records.get_mut(&x.contributor) {
                t.results += 1;
                t.nodes += x.result.nodes;
                t.cpu_us += u64::try_from(x.result.elapsed.as_micros()).unwrap_or(u64::MAX);
                touched.push(x.contributor.clone());
            }
        }
        for name in &d.confirmed {
            if let Some(t) = g.trust.records.get_mut(name) {
                t.streak += 1;
                if t.streak == rules.earn_after && !t.given && !t.root {
                    t.earned_ms = at;
                    tracing::info!(contributor = %name, "trust earned");
                }
                touched.push(name.clone());
            }
        }
        let first_replica = case.replicas[0].clone();
        for name in &d.losers {
            if let Some(t) = g.trust.records.get_mut(name) {
                if reached_book && *name == first_replica.contributor {
                    // Its credit for the result the book used is taken back.
                    let r = &first_replica.result;
                    t.results = t.results.saturating_sub(1);
                    t.nodes = t.nodes.saturating_sub(r.nodes);
                    t.cpu_us = t
                        .cpu_us
                        .saturating_sub(u64::try_from(r.elapsed.as_micros()).unwrap_or(0));
                }
                t.streak = 0;
                t.invalid += 1;
                if t.invalid >= rules.block_after && !t.root {
                    t.blocked = true;
                }
                touched.push(name.clone());
            }
            tracing::warn!(contributor = %name, request = ?key, "invalid result caught");
        }
        // The stored result and who vouches for it.
        let chosen = d.apply.or(applied.filter(|_| d.need.is_none()));
        // Whether this batch stores a result record naming this job (which then also records
        // the job as accepted, see `Store::load`).
        let names_job = chosen.is_some();
        if let Some(res) = chosen {
            let mut rec = ResultRecord::of(&res);
            rec.worker = *worker.as_bytes();
            rec.job = *r.job_id.as_bytes();
            rec.accepted_ms = at;
            rec.sources.clone_from(&d.sources);
            batch.put_result(&key, &rec)?;
            // The coordinator's own results are never dropped: only others' are tracked (a
            // local build keeps no such map).
            if d.sources
                .iter()
                .all(|c| g.trust.standing_of(c, &rules) == Standing::Root)
            {
                g.trust.sources.remove(&key);
            } else {
                g.trust.sources.insert(key, d.sources);
            }
        }
        let job = g.job_of(&key);
        match d.need {
            Some(need) => {
                case.applied |= d.apply.is_some();
                batch.put_case(
                    &key,
                    Some(&trust::case_record(&case.replicas, case.applied)),
                )?;
                g.trust.cases.insert(key, case);
                if let Some(id) = job {
                    g.make_check(id, worker, need);
                }
            }
            None => {
                if !first {
                    batch.put_case(&key, None)?;
                }
                if let Some(id) = job {
                    g.remove(id);
                }
                g.done.insert(r.job_id);
                if !names_job {
                    batch.put_done(&r.job_id, &key.board)?;
                }
            }
        }
        Ok(Taken {
            apply: d.apply,
            losers: d.losers,
            reached_book,
        })
    }

    /// A contributor was caught with an invalid result: drop every applied result no one else
    /// vouches for (trusted, or earned from another owner) and its replicas in open cases.
    /// Returns the dropped requests (the book must be replayed when any was applied) and
    /// whether the contributor is blocked now.
    fn catch(
        &self,
        g: &mut Jobs,
        batch: &mut Batch,
        loser: &str,
    ) -> Result<(Vec<LeafRequest>, bool)> {
        let rules = self.0.cfg.trust;
        let mut dropped = Vec::new();
        let keys: Vec<LeafRequest> = g
            .trust
            .sources
            .iter()
            .filter(|(_, s)| s.iter().any(|c| c == loser))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            let Some(mut srcs) = g.trust.sources.remove(&k) else {
                continue;
            };
            srcs.retain(|c| c != loser);
            if srcs
                .iter()
                .any(|c| g.trust.standing_of(c, &rules) >= Standing::Earned)
            {
                g.trust.sources.insert(k, srcs);
            } else {
                batch.remove_result(&k);
                dropped.push(k);
            }
        }
        g.trust.counters.dropped += dropped.len() as u64;
        let open: Vec<LeafRequest> = g
            .trust
            .cases
            .iter()
            .filter(|(_, c)| c.replicas.iter().any(|x| x.contributor == loser))
            .map(|(k, _)| *k)
            .collect();
        for k in open {
            let Some(mut case) = g.trust.cases.remove(&k) else {
                continue;
            };
            if case
                .replicas
                .first()
                .is_some_and(|x| x.contributor == loser)
            {
                case.applied = false;
            }
            case.replicas.retain(|x| x.contributor != loser);
            if case.replicas.is_empty() {
                batch.put_case(&k, None)?;
                // The search starts over as ordinary work (growth lists it again if needed).
                if let Some(id) = g.job_of(&k) {
                    g.remove(id);
                }
            } else {
                batch.put_case(&k, Some(&trust::case_record(&case.replicas, case.applied)))?;
                g.trust.cases.insert(k, case);
            }
        }
        let blocked = g.trust.blocked(loser);
        tracing::warn!(contributor = %loser, dropped = dropped.len(), blocked, "results of a caught contributor dropped");
        Ok((dropped, blocked))
    }

    /// After a restart: the jobs of open cases are check jobs again.
    fn reopen_cases(&self) {
        let mut g = self.jobs();
        let open: Vec<(LeafRequest, Case)> =
            g.trust.cases.iter().map(|(k, c)| (*k, c.clone())).collect();
        for (k, case) in open {
            let applied = case.applied.then(|| case.replicas[0].result);
            let d = trust::decide(&case.replicas, applied.as_ref(), true, false, false);
            if let (Some(id), Some(need)) = (g.job_of(&k), d.need) {
                g.make_check(id, &Uuid::nil(), need);
            }
        }
    }

    /// Call `hook` with a contributor's name when it is blocked for invalid results.
    pub fn set_block_hook(&self, hook: BlockHook) {
        self.0.on_block.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(hook);
    }

    /// Have the growth runner apply what landed (one runner thread at a time; a kick while it
    /// runs makes it run once more).
    fn kick(&self) {
        self.0.pending.store(true, Ordering::SeqCst);
        if self.0.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("growth".into())
            .spawn(move || {
                loop {
                    me.0.pending.store(false, Ordering::SeqCst);
                    if let Err(e) = me.run_growth() {
                        if matches!(e, CoordinatorError::Store(_)) {
                            metrics::counter!(crate::telemetry::STORE_ERRORS).increment(1);
                        }
                        tracing::error!(error = %e, "growth run failed");
                    }
                    me.0.running.store(false, Ordering::SeqCst);
                    if !me.0.pending.load(Ordering::SeqCst)
                        || me.0.running.swap(true, Ordering::SeqCst)
                    {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            // The results stay in the inbox; the next kick tries again.
            self.0.running.store(false, Ordering::SeqCst);
            tracing::error!(error = %e, "could not start the growth runner");
        }
    }

    /// One growth run: apply the landed results, advance the programs, persist, and refresh the
    /// job table with what they wait for.
    fn run_growth(&self) -> Result<()> {
        let landed = std::mem::take(&mut *self.0.inbox.lock().unwrap_or_else(|p| p.into_inner()));
        let applied: Vec<LeafRequest> = landed.iter().map(|l| l.key).collect();
        let rollback = self
            .0
            .rollback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut growth = self.growth();
        growth.land(landed);
        if let Some((through, dropped)) = rollback {
            growth.replay(&self.0.store, &dropped, through)?;
        }
        // Round work queued ahead: enough for every registered thread to hold a few jobs; more
        // would only cost the growth run look-ups (a pass can hold many thousands of steps).
        let lookahead = self.jobs().threads().saturating_mul(4).max(256);
        let needed = growth.advance(&self.0.store, lookahead, self.0.cfg.checkpoint_interval)?;
        let window = growth.window(&needed, self.0.cfg.trust.window_margin);
        let positions = growth.book.len();
        // Speculate only at a round's tail: when fewer round searches wait than the workers
        // have threads (before that, every idle thread gets round work anyway); plan again
        // when the speculative searches planned run low too, or the program moved to another
        // pass (the old plan guessed it).
        let tail_threads = {
            let mut jobs = self.jobs();
            for k in &applied {
                jobs.landed.remove(k);
            }
            jobs.sync(&needed, None);
            jobs.trust.window = window;
            let threads = jobs.threads();
            // A big farm drains any plan at once: plan again after a share of it landed
            // rather than after every result.
            let low =
                jobs.queued() < threads && growth.landed_since_plan >= (threads / 16).clamp(1, 64);
            (jobs.queued_round() < threads && (low || growth.plan_is_stale()))
                .then(|| (threads, jobs.searching()))
        };
        let speculative = match tail_threads {
            _ if self.0.cfg.speculation == 0 || !growth.is_running() => Some(Vec::new()),
            Some(_) if growth.next_plan_at.is_some_and(|t| Instant::now() < t) => None,
            Some((threads, searching)) => {
                let budget = threads.saturating_mul(self.0.cfg.speculation as usize);
                let started = Instant::now();
                let list = growth.speculate(
                    budget.min(MAX_SPECULATION),
                    &searching,
                    self.0.cfg.predictor_level,
                );
                let share = self.0.cfg.speculation_share;
                growth.next_plan_at = (share < 1.0)
                    .then(|| started + started.elapsed().mul_f64(1.0 / share.max(0.01)));
                Some(list)
            }
            None => None,
        };
        if let Some(list) = speculative {
            self.jobs().sync(&needed, Some(&list));
        }
        let prefetch = growth.prefetch_report();
        drop(growth);
        metrics::gauge!(crate::telemetry::POSITIONS).set(positions as f64);
        metrics::gauge!(crate::telemetry::PREFETCH_USED).set(prefetch.used as f64);
        metrics::gauge!(crate::telemetry::PREFETCH_UNUSED).set(prefetch.unused as f64);
        self.0.runs.send_modify(|n| *n += 1);
        let (count, cv) = &self.0.runs_done;
        *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        cv.notify_all();
        Ok(())
    }

    /// Wait until every result handed to growth so far is applied (tests, commands that read
    /// the book right after their searches).
    pub fn settle(&self) -> Result<()> {
        while self.growth_busy() {
            std::thread::sleep(Duration::from_micros(20));
        }
        let pending = !self
            .0
            .inbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        if pending {
            self.run_growth()?;
        }
        Ok(())
    }

    /// Wait until every store write applied before this call is durable (group commit: one
    /// fsync serves every caller waiting at that moment).
    pub async fn wait_durable(&self) -> Result<()> {
        let ticket = self.0.written.fetch_add(1, Ordering::SeqCst) + 1;
        let _g = self.0.flush_lock.lock().await;
        if self.0.flushed.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        let target = self.0.written.load(Ordering::SeqCst);
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.0.store.flush())
            .await
            .map_err(|e| CoordinatorError::Internal(format!("flush task: {e}")))??;
        self.0.flushed.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    /// Checkpoint the growth state and make every store write durable (blocking; clean
    /// shutdown, commands that end, tests). A coordinator stopped without it loses nothing:
    /// the next one re-runs growth from the last checkpoint with the stored results.
    pub fn flush(&self) -> Result<()> {
        self.growth().persist(&self.0.store)?;
        let mut g = self.jobs();
        // Count-only trust changes not written yet (see `TrustState::records_to_write`).
        let counts = g.trust.take_unwritten();
        if !counts.is_empty() {
            let mut b = Batch::default();
            for (name, t) in &counts {
                b.put_trust(name, t)?;
            }
            if let Err(e) = self.0.store.apply(b) {
                g.trust.unwritten.extend(counts.into_iter().map(|(n, _)| n));
                return Err(e.into());
            }
        }
        drop(g);
        Ok(self.0.store.flush()?)
    }

    /// A worker reports that a job failed. The search is quarantined only once workers of
    /// `max_failures` different owners reported it (a report from an anonymous local worker
    /// counts as its own owner); until then the job goes back to the queue, whatever
    /// `retryable` says, so that one client cannot take a search out of the growth program.
    /// Quarantine lives in memory: a restart gives the search another chance. Returns true when
    /// quarantined.
    pub fn fail(&self, id: &Identity, worker: &Uuid, f: &Failure) -> Result<bool> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        let owner = g.workers.get(worker).and_then(|w| w.owner.clone());
        let Some(j) = g.jobs.get_mut(&f.job_id) else {
            if g.done.contains(&f.job_id) {
                return Ok(false);
            }
            return Err(CoordinatorError::UnknownJob(f.job_id));
        };
        if !j.leased_to(worker) {
            return Err(CoordinatorError::NotLeased {
                job: f.job_id,
                worker: *worker,
            });
        }
        j.failures += 1;
        let owner = owner.unwrap_or_else(|| format!("anonymous report {}", j.failures));
        if !j.failed_owners.contains(&owner) {
            j.failed_owners.push(owner);
        }
        let quarantine = j.failed_owners.len() >= self.0.cfg.max_failures.max(1) as usize;
        g.counters.failed += 1;
        metrics::counter!(crate::telemetry::JOBS_FAILED).increment(1);
        if let Some(w) = g.workers.get_mut(worker) {
            w.failed += 1;
        }
        tracing::warn!(job_id = %f.job_id, worker_id = %worker, reason = %f.reason, quarantine, "job failed");
        if quarantine {
            if let Some(j) = g.remove(f.job_id) {
                g.quarantined.insert(
                    j.key,
                    QuarantineReport {
                        job_id: f.job_id,
                        board: j.key.board,
                        reason: f.reason.clone(),
                    },
                );
            }
        } else {
            g.release(f.job_id, worker);
        }
        g.update_gauges();
        Ok(quarantine)
    }

    /// A worker hands back jobs it will not search (it is draining): each of them still leased
    /// to it goes back to the queue at once. Returns how many.
    pub fn release_leases(&self, id: &Identity, worker: &Uuid, jobs: &[Uuid]) -> Result<u32> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        let mut n = 0;
        for jid in jobs {
            if g.jobs.get(jid).is_some_and(|j| j.leased_to(worker)) {
                g.release(*jid, worker);
                n += 1;
            }
        }
        g.update_gauges();
        Ok(n)
    }

    /// Forget workers at once (their credential was revoked or blocked): their leases go back
    /// to the queue and their ids stop working. Returns how many jobs were re-queued.
    pub fn drop_workers(&self, workers: &[Uuid]) -> usize {
        let mut g = self.jobs();
        let n = workers
            .iter()
            .filter_map(|w| g.remove_worker(*w))
            .map(|(_, n)| n)
            .sum();
        g.update_gauges();
        n
    }

    /// Put quarantined searches back in the queue (all of them, or those of `boards`, in any
    /// orientation) if the growth programs still wait for them; returns how many were released.
    /// The operator's answer to a quarantine that was wrong.
    pub fn release_quarantined(&self, boards: Option<&[Board]>) -> Result<u64> {
        let growth = self.growth();
        let mut g = self.jobs();
        let wanted: Option<HashSet<Board>> =
            boards.map(|bs| bs.iter().map(|b| canonical(b).0).collect());
        let chosen: Vec<LeafRequest> = g
            .quarantined
            .keys()
            .filter(|k| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(&canonical(&k.board).0))
            })
            .copied()
            .collect();
        for k in &chosen {
            g.quarantined.remove(k);
        }
        g.sync(&growth.needed, None);
        drop(g);
        drop(growth);
        tracing::info!(released = chosen.len(), "quarantined searches released");
        Ok(chosen.len() as u64)
    }

    /// Re-queue the jobs of workers silent for longer than the lease timeout; returns how many
    /// jobs went back to the queue. Called periodically by the server.
    pub fn expire_leases(&self) -> usize {
        let now = self.now();
        let timeout = self.0.cfg.lease_timeout;
        let mut g = self.jobs();
        let silent: Vec<Uuid> = g
            .workers
            .iter()
            .filter(|(_, w)| now.saturating_sub(w.last_seen) > timeout)
            .map(|(id, _)| *id)
            .collect();
        let mut n = 0;
        for wid in silent {
            if let Some((name, k)) = g.remove_worker(wid) {
                n += k;
                tracing::warn!(worker_id = %wid, name = %name, "worker silent: leases expired");
            }
        }
        n += g.expire_overdue(now, &self.0.cfg);
        g.counters.expired += n as u64;
        metrics::counter!(crate::telemetry::JOBS_EXPIRED).increment(n as u64);
        g.update_gauges();
        n
    }

    /// Queue a growth program (run after the programs already queued) and start it; `level`
    /// sets the level of the positions it creates (`None`: the expanded position's). Returns
    /// the number of searches queued.
    pub fn start(&self, op: Operation, level: Option<u8>) -> Result<u64> {
        tracing::info!(program = %op.describe(), ?level, "growth program queued");
        self.growth().push(op, level);
        self.run_growth()?;
        self.0.store.flush()?;
        Ok(self.jobs().queued() as u64)
    }

    /// Start an expansion by a selector from the start position (`level` 0: the expanded
    /// position's level). Returns the number of searches queued.
    pub fn start_expansion(&self, selector: Selector, level: u8) -> Result<u64> {
        self.start(operation(selector), (level > 0).then_some(level))
    }

    /// Queue `book add` of games (move lists from the start position).
    pub fn add_games(&self, games: &[Vec<Move>]) -> Result<u64> {
        self.start(
            Operation::AddGames {
                games: games.to_vec(),
            },
            None,
        )
    }

    /// Pause (true) or resume (false) the growth programs.
    pub fn set_paused(&self, paused: bool) -> Result<()> {
        let mut g = self.growth();
        if !g.is_running() {
            return Err(CoordinatorError::FailedPrecondition(
                "no expansion to pause or resume".into(),
            ));
        }
        g.paused = paused;
        self.0.paused.store(paused, Ordering::SeqCst);
        g.persist(&self.0.store)?;
        drop(g);
        self.0.store.flush()?;
        Ok(())
    }

    /// The status report.
    pub fn status(&self) -> StatusReport {
        let (positions, state, expansion, root_value, prefetch, reports, programs_finished) = {
            let g = self.growth();
            let state = match (g.is_running(), g.paused, g.is_done()) {
                (true, true, _) => State::Paused,
                (true, false, _) => State::Running,
                (false, _, true) => State::Done,
                _ => State::Idle,
            };
            let root = canonical(&Board::start()).0;
            let root_value = g
                .book
                .find(&root)
                .map_or(-127, |id| i32::from(g.book.score(id).value));
            let skip = g.reports.len().saturating_sub(STATUS_REPORTS);
            (
                g.book.len() as u64,
                state,
                g.describe(),
                root_value,
                g.prefetch_report(),
                g.reports[skip..].to_vec(),
                g.finished as u64,
            )
        };
        let now = self.now();
        let mut g = self.jobs();
        // A build is done once its programs finished and no check of a result the book uses
        // is pending while a verifier runs to settle it: a caught lie still changes the book
        // (replay) until then.
        let checking = g.trust.verifiers > 0 && g.trust.cases.values().any(|c| c.applied);
        let state = if state == State::Done && checking {
            State::Running
        } else {
            state
        };
        g.trim_rates(now, None);
        let window = RATE_WINDOW.as_secs_f64().min(now.as_secs_f64().max(1.0));
        let rate = |v: &VecDeque<Sample>| v.len() as f64 / window;
        // A fold from +0.0: an empty f64 sum is -0.0.
        let nodes = |v: &VecDeque<Sample>| v.iter().fold(0.0, |a, l| a + l.nodes as f64) / window;
        let workers: Vec<WorkerReport> = g
            .workers
            .iter()
            .map(|(id, w)| WorkerReport {
                id: *id,
                name: w.name.clone(),
                owner: w.owner.clone(),
                trusted: w.trusted,
                version: w.version.clone(),
                threads: w.threads,
                in_flight: w.jobs.len(),
                completed: w.completed,
                failed: w.failed,
                results_per_second: rate(&w.recent),
                nodes_per_second: nodes(&w.recent),
                last_seen: now.saturating_sub(w.last_seen),
                standing: g.trust.standing_of(&w.contributor, &self.0.cfg.trust),
                credit_results: g.trust.records.get(&w.contributor).map_or(0, |t| t.results),
                invalid: g.trust.records.get(&w.contributor).map_or(0, |t| t.invalid),
            })
            .collect();
        let rules = self.0.cfg.trust;
        let mut credit: Vec<CreditReport> = g
            .trust
            .records
            .iter()
            .map(|(name, t)| credit_report(name, t, &rules))
            .collect();
        credit.sort_by(|a, b| a.name.cmp(&b.name));
        let searched: u64 = g.recent.iter().map(|l| l.search_us).sum();
        let mean_search =
            (!g.recent.is_empty()).then(|| Duration::from_micros(searched / g.recent.len() as u64));
        StatusReport {
            positions,
            queued: g.queued() as u64,
            in_flight: g.in_flight as u64,
            threads: workers.iter().map(|w| u64::from(w.threads)).sum(),
            busy_threads: workers
                .iter()
                .map(|w| u64::from(w.threads).min(w.in_flight as u64))
                .sum(),
            workers,
            results_per_second: rate(&g.recent),
            nodes_per_second: nodes(&g.recent),
            mean_search,
            state,
            expansion,
            completed: g.counters.completed,
            quarantined: g.quarantined.values().cloned().collect(),
            root_value,
            prefetch,
            speculative_leased: g.counters.speculative_leased,
            backup_leased: g.counters.backup_leased,
            validation: g.trust.counters,
            credit,
            reports,
            programs_finished,
        }
    }

    /// Replace how speculation guesses results (simulations, tests; the default is
    /// [`ShallowSearch`] at level 2).
    pub fn set_predictor(&self, predictor: Box<dyn Predictor>) {
        self.growth().set_predictor(predictor);
    }

    /// Counters since start.
    pub fn counters(&self) -> Counters {
        self.jobs().counters
    }

    /// A consistent snapshot of the book: header and every position.
    pub fn snapshot(&self) -> (BookHeader, Vec<Position>) {
        let g = self.growth();
        (*g.book.header(), g.book.positions().collect())
    }

    /// A copy of the book (export, offline commands).
    pub fn book_snapshot(&self) -> bookfarm_book::MemBook {
        let mut book = self.growth().book.clone();
        book.drop_parent_index();
        book
    }

    /// The book position reached by a move list from the start (canonical coordinates).
    pub fn show(&self, moves: &str) -> Result<Option<Position>> {
        let b = canonical(&replay(moves)?).0;
        Ok(self.growth().book.get(&b))
    }

    /// Header plus counts: (header, positions, links, leaves).
    pub fn info(&self) -> (BookHeader, u64, u64, u64) {
        let g = self.growth();
        let book = &g.book;
        let leaves = book
            .ids()
            .filter(|&id| book.leaf(id).mv != Move::None)
            .count();
        (
            *book.header(),
            book.len() as u64,
            book.n_links() as u64,
            leaves as u64,
        )
    }

    /// Heap bytes of the in-memory book (positions, links, hash table, parent index).
    pub fn book_heap_bytes(&self) -> usize {
        self.growth().book.heap_bytes()
    }

    /// What each growth program finished since the service opened added, one line each.
    pub fn reports(&self) -> Vec<String> {
        self.growth().reports.clone()
    }

    /// The lines of the last line audit finished since start (every line, contradicting or
    /// not).
    pub fn last_audit(&self) -> Vec<bookfarm_book::extract::AuditLine> {
        self.growth().last_audit.clone()
    }

    /// Number of known leaf results (the result store).
    pub fn stored_results(&self) -> usize {
        self.growth().results.len()
    }

    /// Replace the book by imported positions (refused while an expansion runs or jobs are out).
    pub fn import(&self, header: BookHeader, positions: Vec<Position>) -> Result<u64> {
        let mut book =
            bookfarm_book::MemBook::with_capacity(header, positions.len(), positions.len());
        for p in &positions {
            book.put_position(p);
        }
        self.import_book(book)
    }

    /// Replace the book by `book` (refused while an expansion runs or jobs are out).
    pub fn import_book(&self, book: bookfarm_book::MemBook) -> Result<u64> {
        let mut growth = self.growth();
        let mut jobs = self.jobs();
        if (growth.is_running() && !growth.paused) || jobs.in_flight > 0 {
            return Err(CoordinatorError::FailedPrecondition(
                "cannot import while an expansion is running (pause it and let workers drain)"
                    .into(),
            ));
        }
        // The checkpoint in flight belongs to the old book: applied before the new one.
        let writer = growth.set_writer(None);
        self.0.store.create_book(&book)?;
        *growth = Growth::load(
            book,
            None,
            None,
            None,
            Default::default(),
            Replay::load(None),
        )?;
        growth.set_writer(writer);
        jobs.trust.cases.clear();
        jobs.trust.sources.clear();
        growth.clear();
        self.0.paused.store(false, Ordering::SeqCst);
        let n = growth.book.len() as u64;
        jobs.clear_jobs();
        Ok(n)
    }
}

/// What one replica did (see [`Coordinator::take_replica`]).
#[derive(Debug)]
struct Taken {
    /// The result the book must use now.
    apply: Option<LeafResult>,
    /// Contributors caught with an invalid result.
    losers: Vec<String>,
    /// A wrong result had reached the book (replay).
    reached_book: bool,
}

/// Validate one result against its search: the move must be legal and not excluded (a pass only
/// when forced; "no move" only when nothing is left to search), the score within [-64, 64], an
/// exact score even (Edax's final scores give the empties to the winner), and the depth and
/// selectivity those of the level table for the position (a finished game reports its empties
/// at full selectivity). Workers never submit aborted searches, so a completed search always
/// reports the level table's depth and selectivity.
fn validate(key: &LeafRequest, r: &JobResult) -> Result<()> {
    let b = &key.board;
    let open = b.moves() & !key.excluded;
    let ok = match r.mv {
        Move::Square(s) => open & s.bit() != 0,
        Move::Pass => b.must_pass(),
        Move::None => open == 0 && !b.must_pass(),
    };
    if !ok {
        return Err(CoordinatorError::IllegalMove {
            job: r.job_id,
            mv: r.mv,
        });
    }
    if !(-64..=64).contains(&r.score) {
        return Err(CoordinatorError::ScoreOutOfRange {
            job: r.job_id,
            score: r.score,
        });
    }
    if r.exact && r.score % 2 != 0 {
        return Err(CoordinatorError::ExactParity {
            job: r.job_id,
            score: r.score,
        });
    }
    // A finished game is scored, not searched: every empty is "searched", at full selectivity.
    let empties = b.empties();
    let want = if b.is_game_over() {
        (empties, bookfarm_engine::level::NO_SELECTIVITY)
    } else {
        bookfarm_engine::level::level_params(key.level, empties)
    };
    if (r.depth, r.selectivity) != want {
        return Err(CoordinatorError::BadDepth {
            job: r.job_id,
            depth: r.depth,
            selectivity: r.selectivity,
            level: key.level,
            empties,
        });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
