//! A farm in virtual time: the real coordinator service (selection, leases, growth, negamax,
//! the sled result store) driven by W simulated workers whose searches are a pure function of
//! their request ([`Truth`]: a hash, or the engine at a low level) and whose durations come
//! from times recorded from real searches ([`times`]). It measures what a 2-core machine cannot
//! run: how busy a farm of 1 … 10,000 workers stays, how much work speculation wastes, what the
//! coordinator's CPU costs, and whether the book still equals the serial build.
//!
//! The coordinator's CPU is charged to virtual time ([`cores`]): each service call occupies a
//! virtual core (growth runs the growth core, RPCs the RPC cores) for its thread CPU time, and
//! its effect happens when that core is done. Each worker answers through a [`WorkerModel`]
//! (honest by default), where liars plug in.
//!
//! Invariants:
//! * nothing here changes what the service does: the simulation only calls its public API
//!   (register, lease, submit, heartbeat, settle) with the service's clock moved by hand;
//! * a search's result and its duration at speed 1 depend on its request only, so the serial
//!   build and its CPU cost are well defined and every run can be compared with them;
//! * with [`Charge::Fixed`] costs, every figure is a function of the configuration.

pub mod chain;
pub mod cores;
pub mod eta;
pub mod guesses;
pub mod times;
pub mod trust;
pub mod truth;

use crate::error::{CoordinatorError, Result};
use crate::service::trust::CheckKind;
use crate::service::{
    Coordinator, GrowthMode, ManualClock, Predictor, PrefetchReport, ServiceConfig, State,
    TrustCounters, TrustRules, new_book, new_mem_book,
};
use crate::store::Store;
use bookfarm_book::MemBook;
use bookfarm_book::driver::run_serial;
use bookfarm_book::model::Position;
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::schedule::AsyncOptions;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchSignature};
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::{Ack, Identity, IdleReason, Job, JobResult, LeaseAsk};
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
pub use cores::{Charge, CoordinatorModel};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use times::TimeTable;
pub use truth::{Truth, fake_search, mix, reported_depth, request_hash};

/// How the simulated coordinator guesses results when it plans speculative searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Guess {
    /// The true result: an upper bound on what speculation can do.
    Perfect,
    /// The true result with its move replaced by another open move in `move_error_percent` %
    /// of the requests and its score moved by up to ± `score_noise` (a shallow search's
    /// typical disagreement with a deep one).
    Noisy {
        /// Share of guesses whose move is wrong, in percent.
        move_error_percent: u32,
        /// Largest score error.
        score_noise: i32,
    },
}

/// [`Guess`] of [`fake_search`] as the service's [`Predictor`].
#[derive(Debug, Clone, Copy)]
pub struct SimPredictor(pub Guess);

impl Predictor for SimPredictor {
    fn predict(&mut self, req: &LeafRequest) -> LeafResult {
        TruthPredictor(self.0, Truth::Hash).predict(req)
    }
}

/// [`Guess`] of a [`Truth`] as the service's [`Predictor`].
#[derive(Debug, Clone, Copy)]
pub struct TruthPredictor(pub Guess, pub Truth);

impl Predictor for TruthPredictor {
    fn predict(&mut self, req: &LeafRequest) -> LeafResult {
        let mut r = self.1.search(req);
        let Guess::Noisy {
            move_error_percent,
            score_noise,
        } = self.0
        else {
            return r;
        };
        let h = mix(request_hash(req) ^ 0x5eed);
        if (h % 100) < u64::from(move_error_percent) {
            let open: Vec<bookfarm_engine::Square> =
                BitIter(req.board.moves() & !req.excluded).collect();
            if let (Move::Square(_), false) = (r.mv, open.is_empty()) {
                r.mv = Move::Square(open[((h >> 8) as usize) % open.len()]);
            }
        }
        let span = 2 * score_noise.max(0) + 1;
        r.score += ((h >> 32) % span as u64) as i32 - score_noise.max(0);
        r
    }
}

/// What a simulated worker knows when it answers a request.
#[derive(Debug)]
pub struct AnswerCtx<'a> {
    /// The worker's index in the simulation.
    pub worker: usize,
    /// Its registration.
    pub worker_id: uuid::Uuid,
    /// Virtual time.
    pub now: Duration,
    /// The service (a model may look at what a worker could learn from it: its status, the
    /// book).
    pub coordinator: &'a Coordinator,
}

/// How a simulated worker answers a request, given the true result (its search's).
pub trait WorkerModel: Send {
    /// The result the worker submits for `req`.
    fn answer(&mut self, req: &LeafRequest, truth: LeafResult, ctx: &AnswerCtx) -> LeafResult;

    /// The credential the worker registers with (`None`: the operator's own local worker, a
    /// trust root without a credential).
    fn credential(&self) -> Option<&Credential> {
        None
    }
}

/// A credential a simulated worker registers under: the trust model sees its owner and the
/// operator's trust in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Credential name.
    pub name: String,
    /// Its owner (credentials of one owner count as one voice).
    pub owner: String,
    /// Added `--trusted` by the operator (a trust root).
    pub trusted: bool,
}

/// A worker whose contributor the service blocked for invalid results.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockedWorker {
    /// The worker's index.
    pub worker: usize,
    /// Results it had submitted when it was refused.
    pub results: u64,
    /// Virtual time of the refusal, in seconds.
    pub at_seconds: f64,
}

/// An honest worker: submits the true result.
#[derive(Debug, Clone, Copy, Default)]
pub struct Honest;

impl WorkerModel for Honest {
    fn answer(&mut self, _req: &LeafRequest, truth: LeafResult, _ctx: &AnswerCtx) -> LeafResult {
        truth
    }
}

/// The model of each simulated worker, by index (shared by the simulations of one table).
#[derive(Clone)]
pub struct WorkerModels(pub Arc<dyn Fn(usize) -> Box<dyn WorkerModel> + Send + Sync>);

impl WorkerModels {
    /// Every worker honest.
    pub fn honest() -> WorkerModels {
        WorkerModels(Arc::new(|_| Box::new(Honest)))
    }
}

impl Default for WorkerModels {
    fn default() -> WorkerModels {
        WorkerModels::honest()
    }
}

impl std::fmt::Debug for WorkerModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerModels")
    }
}

/// One simulation's settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Simulated workers.
    pub workers: usize,
    /// Search threads per worker.
    pub threads: u32,
    /// Worker speeds spread log-uniformly over [1/s, s] (1: all equal).
    pub speed_spread: f64,
    /// Seed of the worker speeds.
    pub seed: u64,
    /// Search durations at speed 1.
    pub times: TimeTable,
    /// What searches answer.
    pub truth: Truth,
    /// Level and depth of the new book.
    pub level: u8,
    /// Book depth (positions down to 61 − depth empties).
    pub depth: u8,
    /// The growth programs, run after `new`.
    pub ops: Vec<Program>,
    /// Speculative searches per thread at a round's tail (0: off).
    pub speculation: u32,
    /// Backup leases after this many mean search times (0: off).
    pub backup_after: u32,
    /// How speculation guesses.
    pub guess: Guess,
    /// Worker crashes (none: every worker lives through the build).
    pub faults: Option<Faults>,
    /// The coordinator's cores and how its calls are charged to virtual time.
    pub coordinator: CoordinatorModel,
    /// How each worker answers (honest by default).
    pub models: WorkerModels,
    /// How an asynchronous program orders its queue and applies expansions.
    pub async_options: AsyncOptions,
    /// The service's validation rules (what a credential needs to earn trust, the spot-check
    /// ramp and floor, core checks).
    pub trust: TrustRules,
    /// Builds run first on the same service: each replaces the book by a new one
    /// ([`Coordinator::import_book`], which keeps the contributors' standings, as a farm's
    /// coordinator keeps them from build to build) and runs the programs again with the same
    /// workers. The report measures the last build only (0: one build, every volunteer new),
    /// but for [`SimReport::replica_share`], the service's figure since its start.
    pub warmup_builds: u32,
}

/// The search CPU seconds (at speed 1 × the worker's speed, as [`SimReport::spent_seconds`])
/// the serial build does not use, by what the search was for: what the trust rules cost,
/// cause by cause, and the rest. Their sum is [`SimReport::wasted_seconds`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WasteByCause {
    /// Replicas that validated a held result of a credential still earning trust.
    pub earning: f64,
    /// Spot checks of results applied on one word.
    pub spot: f64,
    /// Core checks of provisional results in the decisive core.
    pub core: f64,
    /// Replicas that settled a disagreement.
    pub settle: f64,
    /// Everything else: first answers the serial build does not use (re-searches after a
    /// take-back, speculation, asynchronous repairs), answers a block or a take-back refused,
    /// searches lost in crashes.
    pub other: f64,
}

impl WasteByCause {
    fn add(&mut self, kind: Option<CheckKind>, secs: f64) {
        *match kind {
            Some(CheckKind::Validation) => &mut self.earning,
            Some(CheckKind::Spot) => &mut self.spot,
            Some(CheckKind::Core) => &mut self.core,
            Some(CheckKind::Settle) => &mut self.settle,
            None => &mut self.other,
        } += secs;
    }
}

/// Where the trust rules' replicas went, as the simulator saw each search: which worker's
/// result a check searched again, and the streak its submitter had when a spot check was drawn.
/// Kinds are indexed as [`TrustBreakdown::KINDS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrustBreakdown {
    /// Per worker: first answers the service accepted (round work; checks not counted).
    pub answers: Vec<u64>,
    /// Per worker: checks searched of its results, by kind.
    pub checked: Vec<[u64; 4]>,
    /// First answers whose spot coin was tossed (an earned submitter's), by its streak then.
    pub tossed_by_streak: BTreeMap<u64, u64>,
    /// Spot checks drawn on those, by the submitter's streak then.
    pub spot_by_streak: BTreeMap<u64, u64>,
    /// Checks searched, by kind.
    pub runs: [CheckRuns; 4],
    /// Wrong first answers (a liar's) the service applied on their submitter's word, not held
    /// for validation: lies that reached the book, whether caught later or not.
    pub lies_applied: u64,
}

impl TrustBreakdown {
    /// The kinds' names, in the order of [`TrustBreakdown::checked`] and
    /// [`TrustBreakdown::runs`].
    pub const KINDS: [&'static str; 4] = ["earning", "spot", "core", "settle"];

    fn index(kind: CheckKind) -> usize {
        match kind {
            CheckKind::Validation => 0,
            CheckKind::Spot => 1,
            CheckKind::Core => 2,
            CheckKind::Settle => 3,
        }
    }
}

/// The checks of one kind a simulation searched.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CheckRuns {
    /// Checks searched.
    pub count: u64,
    /// Their search CPU seconds (as [`SimReport::spent_seconds`]).
    pub seconds: f64,
    /// Of them, checks of a result that is a leaf of the finished book.
    pub in_book: u64,
    /// Of them, checks of a result that is a leaf of the finished book's decisive core.
    pub in_core: u64,
}

/// Worker crashes: a crashed worker's searches are lost, it stops heartbeating, and the
/// service gets its leases back only when the worker has been silent for the lease timeout;
/// it comes back later as a new registration.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// Share of searches, in percent, during which the worker crashes (at a uniformly random
    /// point of the search; a pure function of the seed and the lease's sequence number).
    pub crash_percent: f64,
    /// The service's lease timeout (live workers heartbeat every sixth of it, the service's
    /// default ratio).
    pub lease_timeout: Duration,
    /// How long a crashed worker stays away before it registers again.
    pub restart_after: Duration,
}

/// What a simulation measured.
#[derive(Debug, Clone)]
pub struct SimReport {
    /// Simulated workers and threads.
    pub workers: usize,
    /// Search threads in all.
    pub threads: usize,
    /// Positions of the finished book.
    pub positions: usize,
    /// Positions of the serial build's book.
    pub serial_positions: usize,
    /// Searches the serial build does, and their CPU seconds at speed 1.
    pub serial_searches: usize,
    /// CPU seconds of the serial build's searches at speed 1.
    pub serial_seconds: f64,
    /// Searches done by the farm (duplicates of backup leases included).
    pub searches: usize,
    /// CPU seconds spent on searches the serial build does not need, or did twice.
    pub wasted_seconds: f64,
    /// CPU seconds spent in all.
    pub spent_seconds: f64,
    /// `wasted_seconds` by cause.
    pub waste: WasteByCause,
    /// Virtual wall time of the build.
    pub wall_seconds: f64,
    /// Search capacity over the build: Σ speed × threads × wall.
    pub capacity_seconds: f64,
    /// `serial_seconds` ÷ `capacity_seconds`.
    pub efficiency: f64,
    /// The root's value in the finished book and in the serial build's.
    pub root_value: Option<i32>,
    /// The serial build's root value.
    pub serial_root_value: Option<i32>,
    /// Coordinator CPU charged to virtual time (growth runs and RPC calls) per accepted result.
    pub coordinator_cpu_per_result: Duration,
    /// Of it, growth runs.
    pub growth_cpu_per_result: Duration,
    /// Busy share of the growth core over the build.
    pub growth_utilisation: f64,
    /// Busy share of the RPC cores over the build.
    pub rpc_utilisation: f64,
    /// Growth runs.
    pub growth_runs: u64,
    /// This process's CPU (simulation bookkeeping, the serial build and the store's own
    /// threads included) per accepted result.
    pub process_cpu_per_result: Duration,
    /// Real time the simulation took.
    pub real_seconds: f64,
    /// Whether the book equals the serial build's.
    pub same_as_serial: bool,
    /// Whether the serial selection of the last program, run on the finished book, finds
    /// nothing to expand (an asynchronous book's property 1; always true of the serial book).
    pub finished: bool,
    /// The schedule the programs ran on.
    pub schedule: Schedule,
    /// Growth programs' reports (one line each).
    pub reports: Vec<String>,
    /// Prefetch figures of the service.
    pub prefetch: PrefetchReport,
    /// Speculative and backup leases granted.
    pub speculative_leases: u64,
    /// Backup leases granted.
    pub backup_leases: u64,
    /// Worker crashes.
    pub crashes: u64,
    /// Leases the service took back from silent (crashed) workers.
    pub expired: u64,
    /// What validation did (held, checks, invalid results, rollbacks, replay CPU).
    pub validation: TrustCounters,
    /// The service's replication overhead: replicas' share of the search time.
    pub replica_share: f64,
    /// Workers the service blocked for invalid results, in the order it refused them.
    pub blocked: Vec<BlockedWorker>,
    /// Whether the book's principal variation from the start equals the serial build's.
    pub same_best_line: bool,
    /// Where the trust rules' replicas went.
    pub breakdown: TrustBreakdown,
    /// Thread-seconds (× the worker's speed, as [`SimReport::capacity_seconds`]) of threads
    /// waiting after the service told their worker it is earning trust (its credential holds as
    /// many unconfirmed results as it still needs), until they asked again.
    pub earning_idle_seconds: f64,
    /// Of them, the seconds during which round work was queued (searches the program waited
    /// for that the waiting threads' credentials could not be given).
    pub earning_idle_queued_seconds: f64,
}

impl SimReport {
    /// One table row (see [`SimReport::HEADER`]).
    pub fn row(&self) -> String {
        let opt = |v: Option<i32>| v.map_or_else(|| "-".into(), |v| v.to_string());
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{:.3}\t{:.3}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{:.3}\t{:.3}\t{:.1}\t{}\t{}\t{}",
            self.workers,
            self.threads,
            self.positions,
            self.serial_positions,
            self.searches,
            self.serial_searches,
            self.serial_seconds,
            self.wall_seconds,
            self.efficiency,
            self.wasted_seconds / self.spent_seconds.max(f64::MIN_POSITIVE),
            self.speculative_leases,
            self.prefetch.used,
            self.backup_leases,
            self.crashes,
            self.expired,
            opt(self.root_value),
            opt(self.serial_root_value),
            self.coordinator_cpu_per_result.as_secs_f64() * 1e6,
            self.growth_cpu_per_result.as_secs_f64() * 1e6,
            self.growth_utilisation,
            self.rpc_utilisation,
            self.process_cpu_per_result.as_secs_f64() * 1e6,
            if self.same_as_serial { "yes" } else { "NO" },
            if self.finished { "yes" } else { "NO" },
            self.schedule.name(),
        )
    }

    /// The header of [`SimReport::row`].
    pub const HEADER: &'static str = "workers\tthreads\tpositions\tserial_positions\tsearches\tserial_searches\tserial_cpu_s\twall_s\tefficiency\twasted_share\tspeculative_leases\tprefetch_used\tbackup_leases\tcrashes\texpired\troot\tserial_root\tcoord_cpu_us_per_result\tgrowth_cpu_us_per_result\tgrowth_util\trpc_util\tprocess_cpu_us_per_result\tsame_book\tfinished\tschedule";
}

/// How often (real time) long builds log their progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// The serial build: the book crate's driver answering every request with [`fake_search`];
/// returns the book and the requests it searched.
pub fn serial_build(level: u8, depth: u8, ops: &[Program]) -> (MemBook, HashSet<LeafRequest>) {
    serial_build_with(Truth::Hash, level, depth, ops)
}

/// [`serial_build`] with searches answered by `truth`.
pub fn serial_build_with(
    truth: Truth,
    level: u8,
    depth: u8,
    ops: &[Program],
) -> (MemBook, HashSet<LeafRequest>) {
    let mut book = new_mem_book(level, depth);
    let mut asked = HashSet::new();
    let started = Instant::now();
    let mut next_report = PROGRESS_EVERY;
    let mut search = |r: &LeafRequest| {
        asked.insert(*r);
        if started.elapsed() >= next_report {
            next_report += PROGRESS_EVERY;
            tracing::info!(searches = asked.len(), "serial build under way");
        }
        truth.search(r)
    };
    run_serial(&mut book, Operation::New, &mut search);
    for op in ops {
        run_serial(&mut book, op.clone(), &mut search);
    }
    (book, asked)
}

/// The identity simulated workers register with (the signature of the default options).
fn identity() -> Identity {
    let sig = SearchSignature::new(
        &bookfarm_engine::search::SearchOptions::default(),
        "simulated",
    );
    Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "simulated".into(),
        search_signature: sig.to_string(),
    }
}

/// Register simulated worker `w` with the credential of its model (a local worker without).
fn register(
    c: &Coordinator,
    id: &Identity,
    w: usize,
    threads: u32,
    model: &dyn WorkerModel,
) -> Result<uuid::Uuid> {
    let name = format!("sim-{w}");
    match model.credential() {
        None => c.register(id, &name, threads),
        Some(k) => c.register_as(
            id,
            &name,
            threads,
            Some((k.name.as_str(), k.owner.as_str())),
            k.trusted,
        ),
    }
}

/// What happens at a scheduled moment of virtual time.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A search ends on `worker` (in its life `life`: a search of an earlier life was lost
    /// in a crash).
    Done {
        worker: usize,
        job: usize,
        life: u32,
    },
    /// `worker` crashes during a search.
    Crash { worker: usize, life: u32 },
    /// A crashed `worker` registers again.
    Restart { worker: usize },
    /// `worker`, told its credential is earning trust (it holds as many unconfirmed results as
    /// it still needs), leases again after the wait the service suggested.
    Retry { worker: usize, life: u32 },
    /// The growth core starts a run over the results that landed.
    Growth,
    /// A growth run ended: what it planned can be leased.
    Grown,
}

/// An event and when it happens (ties in scheduling order).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Scheduled {
    at: Duration,
    seq: u64,
    event: Event,
}

/// A leased search: its job, when it started and its CPU seconds at the worker's speed.
struct Leased {
    job: Job,
    started: Duration,
    secs: f64,
}

/// The simulated farm and the coordinator's virtual cores (one simulation's mutable state).
struct Farm<'a> {
    cfg: &'a SimConfig,
    c: Coordinator,
    id: Identity,
    ids: Vec<uuid::Uuid>,
    speeds: Vec<f64>,
    models: Vec<Box<dyn WorkerModel>>,
    /// Threads waiting for work (a worker index per thread).
    idle: VecDeque<usize>,
    events: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    leased: Vec<Option<Leased>>,
    free_slots: Vec<usize>,
    /// Per worker: its life (bumped by a crash), whether it is up, its leased slots.
    lives: Vec<u32>,
    up: Vec<bool>,
    held: Vec<Vec<usize>>,
    rpc: cores::Cores,
    growth: cores::Cores,
    /// A growth run is scheduled or under way (in virtual time).
    growth_due: bool,
    searches: usize,
    spent: f64,
    wasted: f64,
    waste: WasteByCause,
    crashes: u64,
    expired: u64,
    accepted_keys: HashSet<LeafRequest>,
    /// Per worker: results submitted; workers refused as blocked (in refusal order).
    submitted: Vec<u64>,
    blocked: Vec<BlockedWorker>,
    breakdown: TrustBreakdown,
    /// The worker whose first answer to each request the service accepted last.
    first_of: std::collections::HashMap<LeafRequest, usize>,
    /// Each check searched: its kind's index, its request and its true result.
    checks: Vec<(usize, LeafRequest, LeafResult)>,
    /// Per worker: threads waiting after an earning answer, until their retry.
    earning_waits: Vec<usize>,
    /// Σ speed of the threads waiting after an earning answer now.
    earning_waiting_speed: f64,
    /// Whether round work was queued after the last event (the service changes only at events).
    round_queued: bool,
    /// Virtual time up to which the waits are counted.
    counted_to: Duration,
    /// [`SimReport::earning_idle_seconds`] and [`SimReport::earning_idle_queued_seconds`].
    earning_idle: f64,
    earning_idle_queued: f64,
}

impl Farm<'_> {
    fn schedule(&mut self, at: Duration, event: Event) {
        self.seq += 1;
        self.events.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// An RPC call made at `at`: runs it on an RPC core; returns its result and end.
    fn rpc<R>(&mut self, at: Duration, f: impl FnOnce(&Coordinator) -> R) -> (R, Duration) {
        let (r, cpu) = self.cfg.coordinator.rpc(|| f(&self.c));
        let end = self.rpc.run(at, cpu);
        (r, end)
    }

    /// Results landed: have the growth core run when it is free.
    fn growth_needed(&mut self, at: Duration) {
        if !self.growth_due {
            self.growth_due = true;
            let start = at.max(self.growth.next_free());
            self.schedule(start, Event::Growth);
        }
    }

    /// Whether worker `w` is a trust root (a local worker, or a credential the operator
    /// trusts): jobs only trust roots may take (checks) can wait for it.
    fn root(&self, w: usize) -> bool {
        self.models[w].credential().is_none_or(|k| k.trusted)
    }

    /// Idle threads lease at `now`, one call each, until the service has no job for them.
    /// What a worker may take depends on its standing and owner (checks go to trust roots, a
    /// replica to another owner), so an empty answer ends the round of calls only once a trust
    /// root and two volunteers (distinct owners) got one, or every idle thread of their kind.
    /// A volunteer told it is earning trust (its own unconfirmed results hold it back, not the
    /// queue) leaves the idle threads and leases again after the service's `retry_after`, as
    /// a real worker does.
    fn lease_idle(&mut self, now: Duration) -> Result<()> {
        let mut tries = self.idle.len();
        let (mut roots, mut volunteers) = (0usize, 0usize);
        for &w in &self.idle {
            if self.root(w) {
                roots += 1;
            } else {
                volunteers += 1;
            }
        }
        let (mut roots_empty, mut volunteers_empty) = (0usize, 0usize);
        let mut empty = Vec::new();
        while tries > 0 {
            tries -= 1;
            let Some(w) = self.idle.pop_front() else {
                break;
            };
            let (id, wid) = (self.id.clone(), self.ids[w]);
            let ask = LeaseAsk {
                free: 1,
                available: None,
            };
            let (got, start) = self.rpc(now, |c| c.offer(&id, &wid, ask));
            let got = match got {
                Err(CoordinatorError::Blocked(_)) => {
                    self.retire(w, start);
                    continue;
                }
                got => got?,
            };
            if got.idle == Some(IdleReason::Earning) {
                volunteers = volunteers.saturating_sub(1);
                self.earning_waits[w] += 1;
                self.earning_waiting_speed += self.speeds[w];
                let life = self.lives[w];
                let at = start + self.c.retry_after();
                self.schedule(at, Event::Retry { worker: w, life });
                continue;
            }
            let Some(job) = got.jobs.into_iter().next() else {
                empty.push(w);
                if self.root(w) {
                    roots_empty += 1;
                } else {
                    volunteers_empty += 1;
                }
                if (roots_empty >= 1 || roots_empty == roots)
                    && (volunteers_empty >= 2 || volunteers_empty == volunteers)
                {
                    break;
                }
                continue;
            };
            self.start_search(w, job, start);
        }
        for w in empty.into_iter().rev() {
            self.idle.push_front(w);
        }
        Ok(())
    }

    /// A thread of `w` that waited after an earning answer asks again (or is gone).
    fn end_earning_wait(&mut self, w: usize) {
        if self.earning_waits[w] > 0 {
            self.earning_waits[w] -= 1;
            self.earning_waiting_speed -= self.speeds[w];
        }
    }

    /// Every thread of `w` waiting after an earning answer is gone (a crash, a block).
    fn drop_earning_waits(&mut self, w: usize) {
        let waiting = std::mem::take(&mut self.earning_waits[w]);
        self.earning_waiting_speed -= self.speeds[w] * waiting as f64;
    }

    /// Virtual time moves to `to`: count the threads waiting after an earning answer since the
    /// last move, and whether round work was queued meanwhile.
    fn pass_time(&mut self, to: Duration) {
        let dt = to.saturating_sub(self.counted_to).as_secs_f64();
        let idle = self.earning_waiting_speed.max(0.0) * dt;
        self.earning_idle += idle;
        if self.round_queued {
            self.earning_idle_queued += idle;
        }
        self.counted_to = self.counted_to.max(to);
    }

    fn start_search(&mut self, w: usize, job: Job, now: Duration) {
        let req = job_request(&job);
        let secs = self.cfg.times.seconds(&req) / self.speeds[w];
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.leased.push(None);
                self.leased.len() - 1
            }
        };
        self.leased[slot] = Some(Leased {
            job,
            started: now,
            secs,
        });
        self.held[w].push(slot);
        let seq = self.seq + 1;
        let draw =
            |salt: u64| (mix(self.cfg.seed ^ mix(seq ^ salt)) >> 11) as f64 / (1u64 << 53) as f64;
        let crash = self
            .cfg
            .faults
            .is_some_and(|f| draw(0xc4a5) * 100.0 < f.crash_percent);
        if crash {
            let at = now + Duration::from_secs_f64(secs * draw(0x7e11));
            let life = self.lives[w];
            self.schedule(at, Event::Crash { worker: w, life });
        } else {
            let at = now + Duration::from_secs_f64(secs);
            let life = self.lives[w];
            self.schedule(
                at,
                Event::Done {
                    worker: w,
                    job: slot,
                    life,
                },
            );
        }
    }

    /// A search ended: the worker submits its answer, then leases again.
    fn done(
        &mut self,
        now: Duration,
        worker: usize,
        job: usize,
        asked: &HashSet<LeafRequest>,
    ) -> Result<()> {
        let Some(l) = self.leased[job].take() else {
            return Ok(());
        };
        self.free_slots.push(job);
        self.held[worker].retain(|&s| s != job);
        let req = job_request(&l.job);
        self.searches += 1;
        self.spent += l.secs * self.speeds[worker];
        let truth = self.cfg.truth.search(&req);
        let ctx = AnswerCtx {
            worker,
            worker_id: self.ids[worker],
            now,
            coordinator: &self.c,
        };
        let leaf = self.models[worker].answer(&req, truth, &ctx);
        let result = JobResult {
            job_id: l.job.id,
            leaf,
        };
        let (id, wid) = (self.id.clone(), self.ids[worker]);
        self.submitted[worker] += 1;
        // What the search was for (a replica serves its job's check), before the submission
        // closes the job or changes its check.
        let kind = self.c.check_kind(&l.job.id);
        let cost = l.secs * self.speeds[worker];
        let streak = match (kind, self.models[worker].credential()) {
            (None, Some(k)) => self.c.streak_of(&k.name),
            _ => None,
        };
        let (acks, end) = self.rpc(now, |c| c.submit(&id, &wid, &[result]));
        let acks = match acks {
            Err(CoordinatorError::Blocked(_)) => {
                self.waste(None, cost);
                self.retire(worker, end);
                return Ok(());
            }
            // The job was taken back while the worker searched (a rollback after a catch
            // rebuilt the job table): the worker drops the result and leases again.
            Err(CoordinatorError::UnknownJob(_)) => {
                self.waste(None, cost);
                self.idle.push_back(worker);
                return self.lease_idle(end);
            }
            acks => acks?,
        };
        let accepted = acks.first() == Some(&Ack::Accepted);
        self.account(
            worker,
            (kind, streak, accepted),
            &l.job.id,
            (req, truth, leaf != truth),
            cost,
        );
        let fresh = accepted && self.accepted_keys.insert(req);
        if !fresh || !asked.contains(&req) {
            self.waste(kind, cost);
        }
        if self.c.landed_pending() > 0 {
            self.growth_needed(end);
        }
        self.idle.push_back(worker);
        self.lease_idle(end)
    }

    /// Count a search of `worker` for `kind` in the trust breakdown: a check by the worker whose
    /// result it searched again, an `accepted` first answer by whether the service drew a spot
    /// check (its job became one) at the submitter's `streak` before it submitted, and whether
    /// it was a `lie` applied on its word.
    fn account(
        &mut self,
        worker: usize,
        (kind, streak, accepted): (Option<CheckKind>, Option<u64>, bool),
        job: &uuid::Uuid,
        (req, truth, lie): (LeafRequest, LeafResult, bool),
        secs: f64,
    ) {
        let b = &mut self.breakdown;
        match kind {
            Some(k) => {
                let i = TrustBreakdown::index(k);
                b.runs[i].count += 1;
                b.runs[i].seconds += secs;
                self.checks.push((i, req, truth));
                if let Some(&w) = self.first_of.get(&req) {
                    b.checked[w][i] += 1;
                }
            }
            None if accepted => {
                let after = self.c.check_kind(job);
                b.answers[worker] += 1;
                self.first_of.insert(req, worker);
                if after == Some(CheckKind::Validation) {
                    return;
                }
                b.lies_applied += u64::from(lie);
                let volunteer = self.models[worker].credential().is_some_and(|k| !k.trusted);
                if let Some(s) = streak.filter(|_| volunteer) {
                    *b.tossed_by_streak.entry(s).or_default() += 1;
                    if after == Some(CheckKind::Spot) {
                        *b.spot_by_streak.entry(s).or_default() += 1;
                    }
                }
            }
            None => {}
        }
    }

    /// `secs` of search CPU the serial build does not use, spent on a search for `kind`.
    fn waste(&mut self, kind: Option<CheckKind>, secs: f64) {
        self.wasted += secs;
        self.waste.add(kind, secs);
    }

    /// The growth core applies what landed.
    fn grow(&mut self, now: Duration) -> Result<()> {
        let pending = self.c.landed_pending();
        let (r, cpu) = self.cfg.coordinator.growth(pending, || self.c.settle());
        r?;
        let end = self.growth.run(now, cpu);
        self.schedule(end, Event::Grown);
        Ok(())
    }

    /// The service refused `worker` as blocked: it stops working (its threads leave the idle
    /// queue; searches it still holds end unsubmitted).
    fn retire(&mut self, worker: usize, now: Duration) {
        if !self.up[worker] {
            return;
        }
        self.up[worker] = false;
        self.idle.retain(|&w| w != worker);
        self.drop_earning_waits(worker);
        self.blocked.push(BlockedWorker {
            worker,
            results: self.submitted[worker],
            at_seconds: now.as_secs_f64(),
        });
    }

    fn crash(&mut self, now: Duration, worker: usize) {
        // Every search the worker had under way is lost, partly done.
        self.crashes += 1;
        self.lives[worker] += 1;
        self.up[worker] = false;
        self.drop_earning_waits(worker);
        for slot in std::mem::take(&mut self.held[worker]) {
            if let Some(l) = self.leased[slot].take() {
                let done = now.saturating_sub(l.started).as_secs_f64().min(l.secs);
                self.spent += done * self.speeds[worker];
                self.waste(None, done * self.speeds[worker]);
                self.free_slots.push(slot);
            }
        }
        self.idle.retain(|&w| w != worker);
        let back = self.cfg.faults.map_or(Duration::ZERO, |f| f.restart_after);
        self.schedule(now + back, Event::Restart { worker });
    }

    /// Live workers heartbeat and the service takes back silent workers' leases, as the
    /// server's periodic expiry does.
    fn heartbeat(&mut self, now: Duration) -> Result<()> {
        let live: Vec<usize> = (0..self.cfg.workers).filter(|&w| self.up[w]).collect();
        for w in live {
            let jobs: Vec<uuid::Uuid> = self.held[w]
                .iter()
                .filter_map(|&s| self.leased[s].as_ref().map(|l| l.job.id))
                .collect();
            let (id, wid) = (self.id.clone(), self.ids[w]);
            let (r, _) = self.rpc(now, |c| c.heartbeat(&id, &wid, &jobs));
            match r {
                Err(CoordinatorError::Blocked(_)) => self.retire(w, now),
                r => {
                    r?;
                }
            }
        }
        let (n, _) = self.rpc(now, |c| c.expire_leases());
        self.expired += n as u64;
        if n > 0 {
            self.lease_idle(now)?;
        }
        Ok(())
    }

    /// A warm-up build is over: replace the book by a new one and start the programs again
    /// with the same workers (standings kept), counting from `now` as a build of its own.
    fn next_build(&mut self, now: Duration) -> Result<()> {
        let book = new_mem_book(self.cfg.level, self.cfg.depth);
        self.c.import_book(book)?;
        // The new book's start position is searched first, as opening a store with a new
        // book does.
        self.c.start(Program::new(Operation::New))?;
        for op in &self.cfg.ops {
            self.c.start(op.clone())?;
        }
        self.searches = 0;
        self.spent = 0.0;
        self.wasted = 0.0;
        self.waste = WasteByCause::default();
        self.crashes = 0;
        self.expired = 0;
        self.accepted_keys.clear();
        self.breakdown = TrustBreakdown {
            answers: vec![0; self.cfg.workers],
            checked: vec![[0; 4]; self.cfg.workers],
            ..TrustBreakdown::default()
        };
        self.first_of.clear();
        self.checks.clear();
        self.earning_idle = 0.0;
        self.earning_idle_queued = 0.0;
        for cores in [&mut self.rpc, &mut self.growth] {
            cores.busy = Duration::ZERO;
            cores.calls = 0;
        }
        self.growth_needed(now);
        self.lease_idle(now)
    }

    /// Whether the build is over: every program finished and nothing queued.
    fn finished(&self) -> bool {
        let s = self.c.status();
        s.queued == 0 && matches!(s.state, State::Done | State::Idle)
    }
}

/// Run one simulated build in store directory `dir` (which must be empty).
pub fn simulate(cfg: &SimConfig, dir: &Path) -> Result<SimReport> {
    simulate_full(cfg, dir, &mut |_, _| {}, |_, _| ()).map(|(r, ())| r)
}

/// [`simulate`], then `inspect` the finished book and the serial build's book.
pub fn simulate_inspect<T>(
    cfg: &SimConfig,
    dir: &Path,
    inspect: impl FnOnce(&MemBook, &MemBook) -> T,
) -> Result<(SimReport, T)> {
    simulate_full(cfg, dir, &mut |_, _| {}, inspect)
}

/// [`simulate`], calling `observe` with the virtual time and the service after each event
/// (what an operator polling the status would see then).
pub fn simulate_observed(
    cfg: &SimConfig,
    dir: &Path,
    observe: &mut dyn FnMut(Duration, &Coordinator),
) -> Result<SimReport> {
    simulate_full(cfg, dir, observe, |_, _| ()).map(|(r, ())| r)
}

fn simulate_full<T>(
    cfg: &SimConfig,
    dir: &Path,
    observe: &mut dyn FnMut(Duration, &Coordinator),
    inspect: impl FnOnce(&MemBook, &MemBook) -> T,
) -> Result<(SimReport, T)> {
    if cfg.workers == 0 || cfg.threads == 0 {
        return Err(CoordinatorError::InvalidArgument(
            "a simulation needs at least one worker and one thread".into(),
        ));
    }
    let real = Instant::now();
    let cpu0 = cpu_time::ProcessTime::now();
    let (serial, asked) = serial_build_with(cfg.truth, cfg.level, cfg.depth, &cfg.ops);
    let serial_seconds: f64 = asked.iter().map(|r| cfg.times.seconds(r)).sum();

    let store = Store::open(dir)?;
    let (h, entries) = new_book(cfg.level, cfg.depth);
    store.create(&h, &entries)?;
    let clock = Arc::new(ManualClock::default());
    let service = ServiceConfig {
        speculation: cfg.speculation,
        backup_after: cfg.backup_after,
        // Planning's CPU is charged to the growth core: no throttle by real time.
        speculation_share: 1.0,
        max_worker_threads: cfg.threads.max(1),
        // Virtual time runs as long as the build needs: no lease may expire.
        max_lease_base: Duration::from_secs(u64::MAX / 4),
        max_lease_cap: Duration::from_secs(u64::MAX / 4),
        // Only a crashed worker falls silent: the timeout is the faults' (none without).
        lease_timeout: cfg
            .faults
            .map_or(Duration::from_secs(u64::MAX / 4), |f| f.lease_timeout),
        // Live workers heartbeat at the service's default ratio (10 s for 60 s).
        heartbeat_interval: cfg
            .faults
            .map_or(ServiceConfig::default().heartbeat_interval, |f| {
                (f.lease_timeout / 6).max(Duration::from_millis(1))
            }),
        signature: Some(identity().search_signature),
        growth: GrowthMode::Deferred,
        async_options: cfg.async_options,
        trust: cfg.trust,
        // The spot coin's key and the ids it is keyed with follow the seed: a run is a
        // function of its configuration when its charges are fixed.
        trust_seed: Some(mix(cfg.seed ^ 0xc017)),
        seeded_ids: Some(mix(cfg.seed ^ 0x1d5)),
        ..ServiceConfig::default()
    };
    let c = Coordinator::open(store, dir, service, clock.clone())?;
    c.set_predictor(Box::new(TruthPredictor(cfg.guess, cfg.truth)));
    for op in &cfg.ops {
        c.start(op.clone())?;
    }
    let id = identity();
    let ln_spread = cfg.speed_spread.max(1.0).ln();
    let mut speeds = Vec::with_capacity(cfg.workers);
    let mut ids = Vec::with_capacity(cfg.workers);
    let mut models = Vec::with_capacity(cfg.workers);
    for w in 0..cfg.workers {
        let model = (cfg.models.0)(w);
        ids.push(register(&c, &id, w, cfg.threads, model.as_ref())?);
        let u = (mix(cfg.seed ^ mix(w as u64)) >> 11) as f64 / (1u64 << 53) as f64;
        speeds.push((ln_spread * (2.0 * u - 1.0)).exp());
        models.push(model);
    }
    let mut farm = Farm {
        cfg,
        c,
        id,
        ids,
        speeds,
        models,
        idle: (0..cfg.threads)
            .flat_map(|_| 0..cfg.workers)
            .collect::<Vec<_>>()
            .into(),
        events: BinaryHeap::new(),
        seq: 0,
        leased: Vec::new(),
        free_slots: Vec::new(),
        lives: vec![0; cfg.workers],
        up: vec![true; cfg.workers],
        held: vec![Vec::new(); cfg.workers],
        rpc: cores::Cores::new(cfg.coordinator.rpc_cores),
        growth: cores::Cores::new(1),
        growth_due: false,
        searches: 0,
        spent: 0.0,
        wasted: 0.0,
        waste: WasteByCause::default(),
        crashes: 0,
        expired: 0,
        accepted_keys: HashSet::new(),
        submitted: vec![0; cfg.workers],
        blocked: Vec::new(),
        breakdown: TrustBreakdown {
            answers: vec![0; cfg.workers],
            checked: vec![[0; 4]; cfg.workers],
            ..TrustBreakdown::default()
        },
        first_of: std::collections::HashMap::new(),
        checks: Vec::new(),
        earning_waits: vec![0; cfg.workers],
        earning_waiting_speed: 0.0,
        round_queued: false,
        counted_to: Duration::ZERO,
        earning_idle: 0.0,
        earning_idle_queued: 0.0,
    };
    let heartbeat = cfg
        .faults
        .map(|f| (f.lease_timeout / 6).max(Duration::from_millis(1)));
    let mut next_heartbeat = heartbeat;
    let mut next_report = real.elapsed() + PROGRESS_EVERY;
    farm.lease_idle(Duration::ZERO)?;
    let mut warmups = cfg.warmup_builds;
    // When the measured build began, and the validation counters then.
    let mut began = Duration::ZERO;
    let mut counted = TrustCounters::default();
    let mut leases = (0, 0);
    loop {
        if real.elapsed() >= next_report {
            next_report += PROGRESS_EVERY;
            tracing::info!(
                workers = cfg.workers,
                searches = farm.searches,
                serial_searches = asked.len(),
                virtual_seconds = clock_now(&clock).as_secs_f64(),
                crashes = farm.crashes,
                "simulation under way"
            );
        }
        let next_event = farm.events.peek().map(|Reverse(e)| e.at);
        if let (Some(period), Some(t)) = (heartbeat, next_heartbeat)
            && next_event.is_none_or(|e| t <= e)
        {
            // A finished build waits for no expiry (the searches still under way end it),
            // and one with nothing scheduled, queued or in flight is stalled (below).
            let s = farm.c.status();
            if !farm.finished() && (next_event.is_some() || s.queued > 0 || s.in_flight > 0) {
                farm.pass_time(t);
                clock.advance_to(t);
                farm.heartbeat(t)?;
                farm.round_queued = farm.c.queued_round() > 0;
                next_heartbeat = Some(t + period);
                continue;
            }
        }
        let Some(Reverse(next)) = farm.events.pop() else {
            if farm.finished() && warmups > 0 {
                warmups -= 1;
                began = clock_now(&clock);
                counted = farm.c.status().validation;
                let k = farm.c.counters();
                leases = (k.speculative_leased, k.backup_leased);
                farm.next_build(began)?;
                continue;
            }
            if farm.finished() {
                break;
            }
            let s = farm.c.status();
            return Err(CoordinatorError::Internal(format!(
                "simulation stalled: state {}, {} queued, {} in flight",
                s.state.as_str(),
                s.queued,
                s.in_flight
            )));
        };
        if matches!(next.event, Event::Restart { .. } | Event::Retry { .. }) && farm.finished() {
            // A worker coming back after the build ended does not make it longer.
            if let Event::Retry { worker, .. } = next.event {
                farm.end_earning_wait(worker);
            }
            continue;
        }
        farm.pass_time(next.at);
        clock.advance_to(next.at);
        let now = next.at;
        match next.event {
            Event::Done { worker, job, life } => {
                if life == farm.lives[worker] {
                    farm.done(now, worker, job, &asked)?;
                }
            }
            Event::Crash { worker, life } => {
                if life == farm.lives[worker] {
                    farm.crash(now, worker);
                }
            }
            Event::Restart { worker } => {
                if farm.blocked.iter().any(|b| b.worker == worker) {
                    continue;
                }
                let (id, threads) = (farm.id.clone(), cfg.threads);
                let model = std::mem::replace(&mut farm.models[worker], Box::new(Honest));
                let (wid, end) =
                    farm.rpc(now, |c| register(c, &id, worker, threads, model.as_ref()));
                farm.models[worker] = model;
                farm.ids[worker] = wid?;
                farm.up[worker] = true;
                farm.idle
                    .extend(std::iter::repeat_n(worker, cfg.threads as usize));
                farm.lease_idle(end)?;
            }
            Event::Retry { worker, life } => {
                if life == farm.lives[worker] && farm.up[worker] {
                    farm.end_earning_wait(worker);
                    farm.idle.push_front(worker);
                    farm.lease_idle(now)?;
                }
            }
            Event::Growth => farm.grow(now)?,
            Event::Grown => {
                farm.growth_due = false;
                if farm.c.landed_pending() > 0 {
                    farm.growth_needed(now);
                }
                farm.lease_idle(now)?;
            }
        }
        farm.round_queued = farm.c.queued_round() > 0;
        observe(now, &farm.c);
    }
    farm.c.flush()?;
    let wall = clock_now(&clock).saturating_sub(began);
    let capacity: f64 =
        farm.speeds.iter().sum::<f64>() * f64::from(cfg.threads) * wall.as_secs_f64();
    let book = farm.c.book_snapshot();
    let positions: Vec<Position> = book.positions().collect();
    let same = same_positions(positions, &serial);
    let mut finished_book = book.clone();
    // A later program may open what an earlier one finished: the last one is checked.
    let finished = cfg
        .ops
        .last()
        .is_none_or(|op| bookfarm_book::schedule::unfinished(&mut finished_book, op).is_empty());
    let status = farm.c.status();
    let counters = farm.c.counters();
    let results = u32::try_from(farm.searches.max(1)).unwrap_or(u32::MAX);
    let root = |b: &MemBook| bookfarm_book::extract::root_value(b);
    let line = |b: &MemBook| bookfarm_book::explore::principal_variation(b, &Board::start());
    let report = SimReport {
        workers: cfg.workers,
        threads: cfg.workers * cfg.threads as usize,
        positions: book.len(),
        serial_positions: serial.len(),
        serial_searches: asked.len(),
        serial_seconds,
        searches: farm.searches,
        wasted_seconds: farm.wasted,
        spent_seconds: farm.spent,
        waste: farm.waste,
        wall_seconds: wall.as_secs_f64(),
        capacity_seconds: capacity,
        efficiency: if capacity > 0.0 {
            serial_seconds / capacity
        } else {
            0.0
        },
        root_value: root(&book),
        serial_root_value: root(&serial),
        coordinator_cpu_per_result: (farm.growth.busy + farm.rpc.busy) / results,
        growth_cpu_per_result: farm.growth.busy / results,
        growth_utilisation: farm.growth.utilisation(wall),
        rpc_utilisation: farm.rpc.utilisation(wall),
        growth_runs: farm.growth.calls,
        process_cpu_per_result: cpu0.elapsed() / results,
        real_seconds: real.elapsed().as_secs_f64(),
        same_as_serial: same,
        finished,
        schedule: cfg.ops.first().map_or(Schedule::Serial, |p| p.schedule),
        reports: status.reports.clone(),
        prefetch: status.prefetch,
        speculative_leases: counters.speculative_leased.saturating_sub(leases.0),
        backup_leases: counters.backup_leased.saturating_sub(leases.1),
        crashes: farm.crashes,
        expired: farm.expired,
        validation: status.validation.since(&counted),
        replica_share: status.health.overhead(),
        same_best_line: line(&book) == line(&serial),
        blocked: farm.blocked,
        breakdown: checks_in_book(farm.breakdown, &farm.checks, &book),
        earning_idle_seconds: farm.earning_idle,
        earning_idle_queued_seconds: farm.earning_idle_queued,
    };
    let inspected = inspect(&book, &serial);
    Ok((report, inspected))
}

/// `breakdown` with each kind's checks counted by whether the result they searched again is a
/// leaf of `book`, and of its decisive core from the start.
fn checks_in_book(
    mut breakdown: TrustBreakdown,
    checks: &[(usize, LeafRequest, LeafResult)],
    book: &MemBook,
) -> TrustBreakdown {
    use bookfarm_book::decisive::{CoreKey, decisive_core};
    let leaves: HashSet<CoreKey> = book
        .positions()
        .filter(|p| p.leaf != bookfarm_book::model::BAD_LINK)
        .map(|p| CoreKey::of_leaf(&p.board, p.level, p.leaf))
        .collect();
    let core: HashSet<CoreKey> = decisive_core(book, &Board::start())
        .leaves
        .iter()
        .map(|l| l.key())
        .collect();
    for (i, req, truth) in checks {
        let key = CoreKey::of_result(req, truth);
        breakdown.runs[*i].in_book += u64::from(leaves.contains(&key));
        breakdown.runs[*i].in_core += u64::from(core.contains(&key));
    }
    breakdown
}

fn clock_now(clock: &ManualClock) -> Duration {
    crate::service::Clock::now(clock)
}

fn job_request(job: &Job) -> LeafRequest {
    LeafRequest {
        board: job.board,
        level: job.level,
        excluded: job.excluded,
    }
}

/// Whether `positions` are exactly the book's positions (any order).
pub fn same_positions(mut positions: Vec<Position>, book: &MemBook) -> bool {
    let mut theirs: Vec<Position> = book.positions().collect();
    positions.sort_by_key(|p| p.board);
    theirs.sort_by_key(|p| p.board);
    positions == theirs
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::Board;
    use bookfarm_engine::level::level_params;

    fn config(workers: usize, prefetch: bool) -> SimConfig {
        SimConfig {
            workers,
            threads: 1,
            speed_spread: 3.0,
            seed: 7,
            times: TimeTable::recorded(16).expect("recorded level-16 times"),
            level: 4,
            depth: 10,
            ops: vec![Program::new(Operation::Deviate {
                params: bookfarm_book::select::Deviate::new(2, 4),
            })],
            speculation: if prefetch { 2 } else { 0 },
            backup_after: if prefetch { 2 } else { 0 },
            guess: Guess::Noisy {
                move_error_percent: 40,
                score_noise: 4,
            },
            faults: None,
            coordinator: CoordinatorModel {
                rpc_cores: 2,
                charge: Charge::Fixed {
                    per_call: Duration::from_micros(50),
                    per_run: Duration::from_micros(200),
                    per_result: Duration::from_micros(100),
                },
            },
            models: WorkerModels::honest(),
            async_options: AsyncOptions::default(),
            truth: Truth::Hash,
            trust: TrustRules::default(),
            warmup_builds: 0,
        }
    }

    /// Prefetch and backup leases change which searches are done when, never the book: with
    /// workers of random speeds (results landing in any order), the book equals the serial
    /// build, and prefetched results serve the rounds.
    #[test]
    fn prefetching_farms_of_random_speeds_build_the_serial_book() {
        for workers in [1, 3, 8] {
            let round =
                simulate(&config(workers, false), tempfile::tempdir().unwrap().path()).unwrap();
            let pre =
                simulate(&config(workers, true), tempfile::tempdir().unwrap().path()).unwrap();
            for r in [&round, &pre] {
                assert!(r.same_as_serial, "{workers} workers: {}", r.row());
                assert!(r.positions > 100, "{}", r.row());
                assert_eq!(r.serial_searches, round.serial_searches);
            }
            assert_eq!(round.speculative_leases + round.backup_leases, 0);
            assert_eq!(round.wasted_seconds, 0.0, "{}", round.row());
            if workers > 1 {
                assert!(pre.speculative_leases > 0, "{}", pre.row());
                assert!(pre.prefetch.used > 0, "{}", pre.row());
                assert!(
                    pre.efficiency > round.efficiency,
                    "prefetch {} vs round {}",
                    pre.row(),
                    round.row()
                );
            }
        }
    }

    /// Workers that crash mid-search (their searches lost, their leases held until the service
    /// finds them silent, back later as new registrations) slow the farm down and never change
    /// the book.
    #[test]
    fn crashing_workers_lose_time_but_not_the_book() {
        let calm = simulate(&config(6, true), tempfile::tempdir().unwrap().path()).unwrap();
        let cfg = SimConfig {
            faults: Some(Faults {
                crash_percent: 5.0,
                lease_timeout: Duration::from_secs(30),
                restart_after: Duration::from_secs(60),
            }),
            ..config(6, true)
        };
        let r = simulate(&cfg, tempfile::tempdir().unwrap().path()).unwrap();
        assert!(r.same_as_serial, "{}", r.row());
        assert_eq!(r.serial_searches, calm.serial_searches);
        assert!(r.crashes > 0 && r.expired > 0, "{}", r.row());
        assert_eq!((calm.crashes, calm.expired), (0, 0), "{}", calm.row());
        assert!(
            r.efficiency < calm.efficiency,
            "{} vs {}",
            r.row(),
            calm.row()
        );
    }

    /// [`fake_search`] as a worker's searcher.
    struct FakeSearcher;

    impl bookfarm_runner::exec::LeafSearcher for FakeSearcher {
        fn search(
            &mut self,
            req: &LeafRequest,
            _abort: &std::sync::atomic::AtomicBool,
        ) -> LeafResult {
            fake_search(req)
        }
    }

    /// The simulator's reference (the serial build) is the book a real `local` build grows
    /// with the same search: the in-process worker loop, 2 threads, prefetch on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_serial_build_is_what_a_real_local_build_grows_with_the_same_search() {
        let dir = tempfile::tempdir().unwrap();
        let (h, entries) = new_book(4, 12);
        Store::open(dir.path())
            .unwrap()
            .create(&h, &entries)
            .unwrap();
        let sig = identity().search_signature;
        let cfg = ServiceConfig {
            signature: Some(sig.clone()),
            ..ServiceConfig::default()
        };
        let c = crate::server::open(dir.path(), cfg).unwrap();
        c.set_predictor(Box::new(SimPredictor(Guess::Noisy {
            move_error_percent: 40,
            score_noise: 4,
        })));
        let ops = vec![Program::new(Operation::Deviate {
            params: bookfarm_book::select::Deviate::new(2, 4),
        })];
        for op in &ops {
            c.start(op.clone()).unwrap();
        }
        let opts = crate::local::LocalOptions {
            workers: 2,
            eval_hash: "simulated".into(),
            search_signature: sig,
            http: None,
            lookahead: 2,
        };
        let factory: bookfarm_runner::exec::SearcherFactory =
            Arc::new(|| -> Box<dyn bookfarm_runner::exec::LeafSearcher> { Box::new(FakeSearcher) });
        let out = crate::local::run(c.clone(), &opts, factory, std::future::pending(), |_| {})
            .await
            .unwrap();
        assert!(!out.interrupted);
        let (serial, asked) = serial_build(4, 12, &ops);
        assert!(serial.len() > 100);
        assert!(same_positions(c.snapshot().1, &serial));
        // Every search the serial build needs was done, plus what prefetch wasted.
        assert!(c.stored_results() >= asked.len());
    }

    /// Coordinator CPU occupies virtual cores: a growth core busy for most of the build stretches
    /// the wall time and reports its utilisation; the book does not change.
    #[test]
    fn coordinator_cpu_is_charged_to_virtual_time() {
        let free = SimConfig {
            coordinator: CoordinatorModel::free(),
            ..config(8, false)
        };
        let heavy = SimConfig {
            coordinator: CoordinatorModel {
                rpc_cores: 1,
                charge: Charge::Fixed {
                    per_call: Duration::from_millis(1),
                    per_run: Duration::from_millis(20),
                    per_result: Duration::from_millis(40),
                },
            },
            ..config(8, false)
        };
        let dir = || tempfile::tempdir().unwrap();
        let f = simulate(&free, dir().path()).unwrap();
        let h = simulate(&heavy, dir().path()).unwrap();
        assert!(
            f.same_as_serial && h.same_as_serial,
            "{}\n{}",
            f.row(),
            h.row()
        );
        assert_eq!(f.coordinator_cpu_per_result, Duration::ZERO);
        assert_eq!((f.growth_utilisation, f.rpc_utilisation), (0.0, 0.0));
        assert!(
            h.wall_seconds > f.wall_seconds * 1.1,
            "{}\n{}",
            f.row(),
            h.row()
        );
        assert!(h.efficiency < f.efficiency);
        // Each result costs its share of a run plus 40 ms, and two RPC calls of 1 ms.
        let per = h.coordinator_cpu_per_result.as_secs_f64();
        assert!((0.042..0.070).contains(&per), "{per}");
        assert!(h.growth_utilisation > 0.2 && h.growth_utilisation <= 1.0 + 1e-9);
        assert!(h.growth_runs > 0 && h.growth_runs as usize <= h.searches);
    }

    /// `config` with its programs on the asynchronous schedule (no speculation: it has no
    /// guesses to make).
    fn asynchronous(workers: usize) -> SimConfig {
        let c = config(workers, false);
        SimConfig {
            ops: c
                .ops
                .iter()
                .map(|p| Program {
                    schedule: Schedule::Async,
                    ..p.clone()
                })
                .collect(),
            ..c
        }
    }

    /// The asynchronous schedule over the real service: whatever the farm, the book it
    /// finishes is finished by Edax's rules (the serial selection finds nothing on it), and
    /// without pass barriers a farm of 16 stays busier than the serial program keeps it.
    #[test]
    fn the_asynchronous_schedule_finishes_its_book_and_keeps_a_farm_busier() {
        let dir = || tempfile::tempdir().unwrap();
        for workers in [1, 3, 16] {
            let r = simulate(&asynchronous(workers), dir().path()).unwrap();
            assert_eq!(r.schedule, Schedule::Async);
            assert!(r.finished, "{}", r.row());
            assert!(r.positions > 100, "{}", r.row());
            assert!(
                r.reports.iter().any(|l| l.contains("(asynchronous)")),
                "{:?}",
                r.reports
            );
            if workers == 16 {
                let serial = simulate(&config(16, false), dir().path()).unwrap();
                assert!(serial.finished && serial.same_as_serial, "{}", serial.row());
                assert!(
                    r.efficiency > serial.efficiency,
                    "async {}\nserial {}",
                    r.row(),
                    serial.row()
                );
            }
        }
    }

    /// A report's figures that are functions of the configuration (not the process's CPU and
    /// real time, which are measured).
    fn repeatable(r: &SimReport) -> String {
        SimReport {
            process_cpu_per_result: Duration::ZERO,
            real_seconds: 0.0,
            ..r.clone()
        }
        .row()
    }

    /// With fixed coordinator charges an asynchronous build is a function of its
    /// configuration, as a serial one is: the same farm twice gives the same figures.
    #[test]
    fn an_asynchronous_run_with_fixed_charges_repeats() {
        let dir = || tempfile::tempdir().unwrap();
        let cfg = SimConfig {
            async_options: AsyncOptions {
                early_child: true,
                ..AsyncOptions::default()
            },
            ..asynchronous(16)
        };
        let a = simulate(&cfg, dir().path()).unwrap();
        let b = simulate(&cfg, dir().path()).unwrap();
        assert_eq!(repeatable(&a), repeatable(&b));
    }

    /// Counts the answers it gives (honestly).
    struct Counting(Arc<std::sync::atomic::AtomicUsize>, usize);

    impl WorkerModel for Counting {
        fn answer(&mut self, req: &LeafRequest, truth: LeafResult, ctx: &AnswerCtx) -> LeafResult {
            assert_eq!(ctx.worker, self.1);
            assert_eq!(truth, fake_search(req));
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            truth
        }
    }

    /// Every submitted result is the worker model's answer.
    #[test]
    fn every_answer_is_the_worker_models() {
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let m = n.clone();
        let cfg = SimConfig {
            models: WorkerModels(Arc::new(move |w| Box::new(Counting(m.clone(), w)))),
            async_options: AsyncOptions::default(),
            ..config(3, true)
        };
        let r = simulate(&cfg, tempfile::tempdir().unwrap().path()).unwrap();
        assert!(r.same_as_serial);
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), r.searches);
    }

    /// The engine as the truth: a pure function of the request, reported at the request's
    /// level (what the coordinator validates), searched at most at the truth's level.
    #[test]
    fn engine_truth_is_pure_and_reports_the_requests_level() {
        let t = Truth::Engine { level: 2 };
        let req = LeafRequest {
            board: Board::start(),
            level: 12,
            excluded: 0,
        };
        let r = t.search(&req);
        assert_eq!(r, t.search(&req));
        assert_eq!((r.depth, r.selectivity), level_params(12, 60));
        assert!(matches!(r.mv, Move::Square(_)) && !r.exact);
        // The same result as a level-2 search of the request.
        let eval = bookfarm_engine::eval::default_eval();
        let opts = bookfarm_engine::search::SearchOptions {
            tt_bits: 16,
            endgame_tt_bits: 14,
            ..bookfarm_engine::search::SearchOptions::for_eval(&eval)
        };
        let mut s = bookfarm_engine::search::Searcher::with_options(eval, opts);
        let direct = s.leaf_search(
            &LeafRequest { level: 2, ..req },
            &std::sync::atomic::AtomicBool::new(false),
        );
        assert_eq!((r.mv, r.score), (direct.mv, direct.score));
    }

    #[test]
    fn fake_search_is_pure_and_reports_the_level_tables_depth() {
        let req = LeafRequest {
            board: Board::start(),
            level: 8,
            excluded: 0,
        };
        assert_eq!(fake_search(&req), fake_search(&req));
        let r = fake_search(&req);
        assert!(matches!(r.mv, Move::Square(_)));
        assert_eq!((r.depth, r.selectivity), level_params(8, 60));
        let all = LeafRequest {
            excluded: Board::start().moves(),
            ..req
        };
        assert_eq!(fake_search(&all).mv, Move::None);
        // A finished game is scored, not played.
        let over = LeafRequest {
            board: Board {
                player: !0 >> 4,
                opponent: 0,
            },
            level: 8,
            excluded: 0,
        };
        let end = fake_search(&over);
        assert_eq!((end.mv, end.score), (Move::None, over.board.final_score()));
        assert_eq!((end.depth, end.selectivity), (4, 5));
        let mut p = SimPredictor(Guess::Perfect);
        assert_eq!(p.predict(&req), r);
    }
}
