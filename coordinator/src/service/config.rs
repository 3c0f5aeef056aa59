//! The service's settings and its clock: [`ServiceConfig`] (the validated library config; see
//! `crate::config` for the file and command-line layers) and [`Clock`], injected so that leases
//! and rates can be tested and simulated without sleeping.

use super::trust::TrustRules;
#[cfg(doc)]
use super::{Coordinator, ShallowSearch, lease_cap, max_lease_duration, trust};
use bookfarm_book::explore::Limits;
use bookfarm_book::openings::Openings;
use bookfarm_book::schedule::AsyncOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    /// The most positions a search program may hold (`expand search`, `book search`).
    pub search_max_positions: usize,
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
    /// A job expected to take this long at the farm's pace is a *long* job: it goes to fast
    /// always-on workers first (see `jobs::fit`).
    pub long_job: Duration,
    /// How long a long job is held for fast always-on workers after a part-time or slower
    /// worker was first refused it (zero: never held).
    pub reserve_for: Duration,
    /// Share of the growth thread's time that planning speculation may take (0 < s ≤ 1; 1: no
    /// limit). A plan that took t blocks the next one for t / s − t, so a coordinator whose
    /// growth thread is saturated by results spends it on ingest rather than on guesses.
    pub speculation_share: f64,
    /// Search threads from which a program queued without a schedule ([`Schedule::Auto`],
    /// an admin start request that names none) runs on the asynchronous schedule: chosen when
    /// the program starts, from the threads registered then (0: always serial). Below it the
    /// serial program with speculation keeps the farm as busy for a book that is the serial
    /// build's; above it the asynchronous schedule keeps it busier (the simulator's table in
    /// `docs/schedules.md`).
    ///
    /// [`Schedule::Auto`]: bookfarm_book::program::Schedule::Auto
    pub async_threads: usize,
    /// How the asynchronous schedule orders its queue and applies expansions. Default: the
    /// marking order (the book closest to the serial one) and early children (an expansion
    /// applied once its child's search lands: one search per step of a line instead of two, the
    /// simulator's big farms' wall time −40 %, `docs/schedules.md`).
    pub async_options: AsyncOptions,
    /// Level of the default predictor's guesses (a [`ShallowSearch`]; at most the request's
    /// level). Deeper guesses are right more often, so less speculative work is wasted, but the
    /// growth thread pays them: `sim guesses` measures both (docs/benchmarks.md).
    pub predictor_level: u8,
    /// Where landed results are applied (a server: on the growth runner thread).
    pub growth: GrowthMode,
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
    /// Validation rules: N to earn trust, K invalid results to block, the spot-check floor,
    /// core checks, the checks' share of a worker's leases (see [`trust`]).
    pub trust: TrustRules,
    /// Search threads of the coordinator's own verifier (its share of the coordinator's CPU;
    /// 0: none). The verifier answers checks only (validations, settlements, core and spot
    /// checks), before anyone else; without it trusted workers run them. Started by `serve`,
    /// not by the service.
    pub verify_threads: u32,
    /// The key of the spot-check coin (`None`: drawn from the OS at every start). Fixed only
    /// by simulations and tests that must repeat; a worker that knew it could tell which of
    /// its answers will be checked.
    pub trust_seed: Option<u64>,
    /// Job and worker ids from a counter under this key instead of the clock and the OS
    /// (`None`, the default). For simulations that must repeat only: the counter starts again
    /// at every start, so a store would take new jobs for old ones.
    pub seeded_ids: Option<u64>,
    /// Events the event log keeps (the oldest beyond are removed as new ones come; see
    /// `crate::events`).
    pub event_log_max: u64,
    /// The explorer's opening names (the project's list unless the operator gave a file).
    pub openings: Arc<Openings>,
    /// Serve the whole book on the HTTP port as `/book.dat` and `/book.egbk3` (off: those
    /// routes answer 404). See `crate::http::publish`.
    pub publish_book: bool,
    /// The explorer's work per request: grades and umigame expansions, memo size.
    pub explorer: Limits,
    /// Where volunteers get the worker release this coordinator expects
    /// ([`bookfarm_proto::RELEASE`]): told to every worker that registers, and logged by one of
    /// another release (empty: nothing said).
    pub worker_install_hint: String,
}

/// Default of [`ServiceConfig::async_threads`].
pub const DEFAULT_ASYNC_THREADS: usize = 256;

/// Where growth runs apply the results that landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrowthMode {
    /// On the growth runner thread, started by each submission that lands results (a server:
    /// RPCs stay off growth's path).
    #[default]
    Thread,
    /// On the submitting thread, inside [`Coordinator::submit`] (one thread, no hand-offs).
    Inline,
    /// Only when the caller asks ([`Coordinator::settle`]): the simulator runs growth when its
    /// virtual growth core is free and charges the run to it.
    Deferred,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            lease_timeout: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(10),
            max_failures: 2,
            lookahead: 2,
            max_worker_threads: 64,
            search_max_positions: bookfarm_book::searches::DEFAULT_MAX_POSITIONS,
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
            long_job: Duration::from_secs(120),
            reserve_for: Duration::from_secs(30),
            speculation_share: 0.25,
            predictor_level: 2,
            async_threads: DEFAULT_ASYNC_THREADS,
            async_options: AsyncOptions {
                early_child: true,
                ..AsyncOptions::default()
            },
            growth: GrowthMode::Thread,
            checkpoint_interval: Duration::from_secs(5),
            trust: TrustRules::default(),
            verify_threads: 0,
            trust_seed: None,
            seeded_ids: None,
            event_log_max: crate::events::DEFAULT_MAX_EVENTS,
            openings: Arc::new(Openings::builtin()),
            publish_book: false,
            explorer: Limits::default(),
            worker_install_hint: String::new(),
        }
    }
}
