//! The coordinator's domain service: workers, leases, result validation, expansion scheduling.
//! No tonic types here; `crate::grpc` is a thin translation layer over [`Coordinator`].
//!
//! Concurrency: all state sits behind one mutex held only for short, non-blocking sections;
//! store flushes (fsync) happen outside it, on the blocking pool, grouped: one flush makes every
//! batch applied before it durable ([`Coordinator::wait_durable`]).
//!
//! Invariants:
//! * a position has at most one job (queued or leased) — `job_by_board`;
//! * a position is `pending` exactly when it has a job or is quarantined with its provisional leaf;
//! * a job id is accepted at most once (`done`, persisted), so a duplicate submission changes nothing;
//! * a result is acknowledged only after the batch holding it was flushed.

use crate::book_index::{BookIndex, Entry, child_board, to_i8};
use crate::error::{CoordinatorError, Result};
use crate::select::select;
use crate::store::{Batch, ExpansionRecord, ExpansionStateRecord, Store};
use bookfarm_book::model::{BAD_LINK, BookHeader, Link, Position};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::{Ack, Failure, Identity, Job, JobResult, Selector};
use bookfarm_proto::{MAX_LEASE_SLOTS, MAX_RESULTS_PER_CALL, PROTOCOL_VERSION};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
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

/// A clock moved by hand (tests).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Move time forward.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::SeqCst))
    }
}

/// Service settings (validated library config; see `crate::config` for the file/CLI layers).
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// A worker silent for this long loses its leases (the jobs are re-queued).
    pub lease_timeout: Duration,
    /// Heartbeat period suggested to workers.
    pub heartbeat_interval: Duration,
    /// Jobs kept queued ahead of the workers (selection refills below half of it).
    pub high_water: usize,
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
    /// Suggested wait for a worker that got no job.
    pub retry_after: Duration,
    /// Round mode (default): select only when no job is outstanding and expand everything
    /// selected, so that each selection is one Edax iteration and the book depends only on the
    /// leaf results, not on their timing. Continuous mode (false) keeps workers busier at round
    /// ends but selects on provisional values (positions whose re-search is in flight), which
    /// can admit positions Edax's rounds would not: books grow larger and depend on timing.
    pub rounds: bool,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            lease_timeout: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(10),
            high_water: 512,
            max_failures: 2,
            lookahead: 2,
            max_worker_threads: 64,
            max_lease_base: Duration::from_secs(60),
            max_lease_doubling_levels: 4,
            max_lease_cap: Duration::from_secs(6 * 3600),
            engine_version: None,
            eval_hash: None,
            retry_after: Duration::from_millis(200),
            rounds: true,
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
    /// Time since the worker's last call.
    pub last_seen: Duration,
}

/// A quarantined position.
#[derive(Debug, Clone)]
pub struct QuarantineReport {
    /// The last job id.
    pub job_id: Uuid,
    /// The position.
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
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Jobs leased.
    pub leased: u64,
    /// Results accepted.
    pub completed: u64,
    /// Duplicate submissions.
    pub duplicates: u64,
    /// Stale results.
    pub stale: u64,
    /// Failures reported.
    pub failed: u64,
    /// Leases expired.
    pub expired: u64,
    /// Invalid results rejected.
    pub rejected: u64,
}

#[derive(Debug)]
struct JobEntry {
    board: Board,
    excluded: u64,
    level: u8,
    version: u32,
    attempt: u32,
    failures: u32,
    /// Owners whose workers reported this job as failed (see [`Coordinator::fail`]).
    failed_owners: Vec<String>,
    last_reason: String,
    /// Current lessee.
    lease: Option<Uuid>,
    /// When the current lease began (bounded by [`max_lease_duration`]).
    leased_at: Duration,
    /// Every worker that held the job (a late result from one of them is still accepted while
    /// the job is not leased to someone else).
    lessees: Vec<Uuid>,
    queue_key: Option<(u32, u64)>,
}

#[derive(Debug)]
struct WorkerEntry {
    name: String,
    /// Who runs the worker (its credential's owner); `None` for an anonymous local worker,
    /// whose failure reports are trusted one by one.
    owner: Option<String>,
    threads: u32,
    last_seen: Duration,
    jobs: HashSet<Uuid>,
    completed: u64,
    failed: u64,
    recent: VecDeque<Duration>,
}

#[derive(Debug, Clone, Copy)]
struct Expansion {
    selector: Selector,
    level: u8,
    state: State,
}

/// Window for results-per-second figures.
const RATE_WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Inner {
    index: BookIndex,
    root: Board,
    jobs: HashMap<Uuid, JobEntry>,
    job_by_board: HashMap<Board, Uuid>,
    queue: BTreeSet<(u32, u64, Uuid)>,
    seq: u64,
    in_flight: usize,
    done: HashSet<Uuid>,
    workers: HashMap<Uuid, WorkerEntry>,
    expansion: Option<Expansion>,
    /// Results landed since the last selection run.
    dirty: bool,
    /// Results accepted since the last selection run (selection walks the whole frontier, so
    /// it runs once per batch of results rather than after each).
    since_select: usize,
    quarantined: HashMap<Board, QuarantineReport>,
    counters: Counters,
    recent: VecDeque<Duration>,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    store: Store,
    cfg: ServiceConfig,
    clock: Arc<dyn Clock>,
    written: AtomicU64,
    flushed: AtomicU64,
    flush_lock: tokio::sync::Mutex<()>,
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
/// never answers cannot stall a round; its late result is still accepted while nobody else holds
/// the job.
pub fn max_lease_duration(level: u8, cfg: &ServiceConfig) -> Duration {
    let doublings = u32::from(level) / u32::from(cfg.max_lease_doubling_levels.max(1));
    let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
    cfg.max_lease_base
        .saturating_mul(factor)
        .min(cfg.max_lease_cap)
}

/// The leaf-search priority of a position: shallower first.
fn priority(b: &Board) -> u32 {
    60u32.saturating_sub(b.empties())
}

/// Whether a position needs a leaf search (Edax `position_search`'s condition): a legal move
/// that is not a link, or a forced pass without a PASS link. Game-over positions are scored
/// directly.
pub fn needs_search(e: &Entry) -> bool {
    let b = &e.pos.board;
    if b.is_game_over() {
        return false;
    }
    if b.moves() == 0 {
        return e.pos.links.is_empty();
    }
    b.moves() & !e.excluded() != 0
}

/// A fresh entry for a new book position: game-over positions get their exact score, others
/// are marked pending a leaf search when they need one.
fn new_entry(board: Board, level: u8) -> Entry {
    let mut e = Entry::new(Position::new(board, level));
    if board.is_game_over() {
        e.pos.leaf = Link::new(to_i8(board.final_score()), Move::None);
    }
    e
}

/// The positions of a new book (`book new LEVEL DEPTH`): the start position, pending its search.
pub fn new_book(level: u8, depth: u8) -> (BookHeader, Vec<Entry>) {
    let header = BookHeader::new(i32::from(level), i32::from(depth));
    let mut e = new_entry(Board::start(), level);
    e.pending = needs_search(&e);
    (header, vec![e])
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

impl Coordinator {
    /// Open the service over a store: load the book, recompute negamax, re-queue every pending
    /// position (jobs leased before a crash go back to the queue) and restore the expansion.
    pub fn open(
        store: Store,
        dir: &Path,
        cfg: ServiceConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Coordinator> {
        let loaded = store.load(dir)?;
        let mut index = BookIndex::new(loaded.header);
        for e in loaded.entries {
            index.insert(e);
        }
        index.full_negamax();
        let mut inner = Inner {
            index,
            root: canonical(&Board::start()).0,
            jobs: HashMap::new(),
            job_by_board: HashMap::new(),
            queue: BTreeSet::new(),
            seq: 0,
            in_flight: 0,
            done: loaded.done.into_iter().collect(),
            workers: HashMap::new(),
            expansion: loaded.expansion.map(|x| Expansion {
                selector: x.selector(),
                level: x.level,
                state: match x.state {
                    ExpansionStateRecord::Running => State::Running,
                    ExpansionStateRecord::Paused => State::Paused,
                    ExpansionStateRecord::Done => State::Done,
                },
            }),
            dirty: true,
            since_select: 0,
            quarantined: HashMap::new(),
            counters: Counters::default(),
            recent: VecDeque::new(),
        };
        let pending: Vec<(Board, bool)> = inner
            .index
            .entries()
            .filter(|e| e.pending)
            .map(|e| (e.pos.board, e.quarantined))
            .collect();
        for (b, q) in pending {
            if q {
                inner.quarantined.insert(
                    b,
                    QuarantineReport {
                        job_id: Uuid::nil(),
                        board: b,
                        reason: "quarantined before restart".into(),
                    },
                );
            } else {
                inner.enqueue(b);
            }
        }
        Ok(Coordinator(Arc::new(Shared {
            inner: Mutex::new(inner),
            store,
            cfg,
            clock,
            written: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            flush_lock: tokio::sync::Mutex::new(()),
        })))
    }

    /// Replace whatever the store holds by an imported book and open the service on it.
    pub fn open_for_import(
        store: Store,
        dir: &Path,
        header: BookHeader,
        positions: Vec<Position>,
    ) -> Result<Coordinator> {
        let entries: Vec<Entry> = positions.into_iter().map(Entry::new).collect();
        store.create(&header, &entries)?;
        Coordinator::open(
            store,
            dir,
            ServiceConfig::default(),
            Arc::new(SystemClock::default()),
        )
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough state (every mutation is
        // applied to memory before the store); keep serving rather than poisoning forever.
        self.0.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The service configuration.
    pub fn config(&self) -> &ServiceConfig {
        &self.0.cfg
    }

    fn now(&self) -> Duration {
        self.0.clock.now()
    }

    /// Check a worker's software: protocol, engine and evaluation. Credentials are checked
    /// before a request reaches the service (`crate::identity`).
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
        Ok(())
    }

    /// Register an anonymous worker; returns its id.
    pub fn register(&self, id: &Identity, name: &str, threads: u32) -> Result<Uuid> {
        self.register_owned(id, name, threads, None)
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
        self.check_identity(id)?;
        let wid = Uuid::new_v4();
        let now = self.now();
        let mut g = self.lock();
        g.workers.insert(
            wid,
            WorkerEntry {
                name: name.chars().take(128).collect(),
                owner: owner.map(str::to_string),
                threads,
                last_seen: now,
                jobs: HashSet::new(),
                completed: 0,
                failed: 0,
                recent: VecDeque::new(),
            },
        );
        metrics::gauge!("bookfarm_workers").set(g.workers.len() as f64);
        tracing::info!(worker_id = %wid, name, threads, "worker registered");
        Ok(wid)
    }

    fn touch(g: &mut Inner, worker: &Uuid, now: Duration) -> Result<()> {
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
        let mut g = self.lock();
        Self::touch(&mut g, worker, now)?;
        Ok(held
            .iter()
            .filter(|j| g.jobs.get(j).is_none_or(|e| e.lease != Some(*worker)))
            .copied()
            .collect())
    }

    /// Lease up to `slots` jobs to a worker (none while paused).
    pub fn lease(&self, id: &Identity, worker: &Uuid, slots: u32) -> Result<Vec<Job>> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.lock();
        Self::touch(&mut g, worker, now)?;
        g.maybe_select(&self.0.store, &self.0.cfg)?;
        if matches!(
            g.expansion,
            Some(Expansion {
                state: State::Paused,
                ..
            })
        ) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let room = g.workers.get(worker).map_or(0, |w| {
            lease_cap(w.threads, &self.0.cfg).saturating_sub(w.jobs.len())
        });
        let slots = (slots.min(MAX_LEASE_SLOTS) as usize).min(room);
        while out.len() < slots {
            let Some(key) = g.queue.pop_first() else {
                break;
            };
            let jid = key.2;
            let Some(j) = g.jobs.get_mut(&jid) else {
                continue;
            };
            j.queue_key = None;
            j.lease = Some(*worker);
            j.leased_at = now;
            if !j.lessees.contains(worker) {
                j.lessees.push(*worker);
            }
            let job = Job {
                id: jid,
                board: j.board,
                excluded: j.excluded,
                level: j.level,
                attempt: j.attempt,
            };
            j.attempt += 1;
            out.push(job);
            g.in_flight += 1;
            if let Some(w) = g.workers.get_mut(worker) {
                w.jobs.insert(jid);
            }
        }
        g.counters.leased += out.len() as u64;
        metrics::counter!("bookfarm_jobs_leased_total").increment(out.len() as u64);
        g.update_gauges();
        Ok(out)
    }

    /// Validate and apply results from a worker. Either every result is valid (then valid ones
    /// are linked in, stale ones re-queued and duplicates ignored) or the call fails and nothing
    /// changes. The effects are applied to the store but not yet durable: callers must
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
        let mut g = self.lock();
        Self::touch(&mut g, worker, now)?;
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
            let leased_here =
                j.lease == Some(*worker) || (j.lease.is_none() && j.lessees.contains(worker));
            if !leased_here {
                g.counters.rejected += 1;
                return Err(CoordinatorError::NotLeased {
                    job: r.job_id,
                    worker: *worker,
                });
            }
            let current = g.index.sched(&j.board).map(|s| s.version);
            if current != Some(j.version) {
                acks.push(Ack::Stale);
                continue;
            }
            if let Err(e) = validate(j, r) {
                g.counters.rejected += 1;
                return Err(e);
            }
            acks.push(Ack::Accepted);
        }
        // Pass 2: apply.
        let mut batch = Batch::default();
        let mut seeds = Vec::new();
        for (r, ack) in results.iter().zip(&acks) {
            match ack {
                Ack::Duplicate => g.counters.duplicates += 1,
                Ack::Stale => {
                    g.counters.stale += 1;
                    metrics::counter!("bookfarm_jobs_stale_total").increment(1);
                    g.requeue_stale(r.job_id);
                }
                Ack::Accepted => {
                    let j = g.remove_job(r.job_id).expect("validated above");
                    g.index.set_leaf(&j.board, Link::new(to_i8(r.score), r.mv));
                    if let Some(s) = g.index.sched_mut(&j.board) {
                        s.pending = false;
                    }
                    let e = g.index.get(&j.board).expect("validated above");
                    batch.put_entry(&e, false)?;
                    batch.put_done(&r.job_id, &j.board)?;
                    seeds.push(j.board);
                    g.done.insert(r.job_id);
                    g.counters.completed += 1;
                    g.recent.push_back(now);
                    if let Some(w) = g.workers.get_mut(worker) {
                        w.completed += 1;
                        w.recent.push_back(now);
                    }
                }
            }
        }
        if !seeds.is_empty() {
            g.since_select += seeds.len();
            g.index.propagate(seeds);
            g.dirty = true;
            metrics::counter!("bookfarm_jobs_completed_total")
                .increment(acks.iter().filter(|a| **a == Ack::Accepted).count() as u64);
        }
        self.0.store.apply(batch)?;
        self.0.written.fetch_add(1, Ordering::SeqCst);
        g.trim_rates(now);
        g.maybe_select(&self.0.store, &self.0.cfg)?;
        g.update_gauges();
        Ok(acks)
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

    /// Blocking flush (shutdown, tests).
    pub fn flush(&self) -> Result<()> {
        Ok(self.0.store.flush()?)
    }

    /// A worker reports that a job failed. The position is quarantined only once workers of
    /// `max_failures` different owners reported it (a report from an anonymous local worker
    /// counts as its own owner); until then the job goes back to the queue, whatever
    /// `retryable` says, so that one client cannot take a position out of the book. Returns
    /// true when quarantined.
    pub fn fail(&self, id: &Identity, worker: &Uuid, f: &Failure) -> Result<bool> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.lock();
        Self::touch(&mut g, worker, now)?;
        let Some(j) = g.jobs.get_mut(&f.job_id) else {
            if g.done.contains(&f.job_id) {
                return Ok(false);
            }
            return Err(CoordinatorError::UnknownJob(f.job_id));
        };
        if j.lease != Some(*worker) {
            return Err(CoordinatorError::NotLeased {
                job: f.job_id,
                worker: *worker,
            });
        }
        let owner = g.workers.get(worker).and_then(|w| w.owner.clone());
        let j = g.jobs.get_mut(&f.job_id).expect("present above");
        j.failures += 1;
        j.last_reason = f.reason.clone();
        let owner = owner.unwrap_or_else(|| format!("anonymous report {}", j.failures));
        if !j.failed_owners.contains(&owner) {
            j.failed_owners.push(owner);
        }
        let quarantine = j.failed_owners.len() >= self.0.cfg.max_failures.max(1) as usize;
        g.counters.failed += 1;
        metrics::counter!("bookfarm_jobs_failed_total").increment(1);
        if let Some(w) = g.workers.get_mut(worker) {
            w.failed += 1;
        }
        tracing::warn!(job_id = %f.job_id, worker_id = %worker, reason = %f.reason, quarantine, "job failed");
        if quarantine {
            let j = g.remove_job(f.job_id).expect("present above");
            let mut batch = Batch::default();
            if let Some(s) = g.index.sched_mut(&j.board) {
                s.quarantined = true;
            }
            if let Some(e) = g.index.get(&j.board) {
                batch.put_entry(&e, false)?;
            }
            g.quarantined.insert(
                j.board,
                QuarantineReport {
                    job_id: f.job_id,
                    board: j.board,
                    reason: f.reason.clone(),
                },
            );
            self.0.store.apply(batch)?;
        } else {
            g.release(f.job_id);
        }
        g.update_gauges();
        Ok(quarantine)
    }

    /// A worker hands back jobs it will not search (it is draining): each of them still leased
    /// to it goes back to the queue at once. Returns how many.
    pub fn release_leases(&self, id: &Identity, worker: &Uuid, jobs: &[Uuid]) -> Result<u32> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.lock();
        Self::touch(&mut g, worker, now)?;
        let mut n = 0;
        for jid in jobs {
            if g.jobs.get(jid).is_some_and(|j| j.lease == Some(*worker)) {
                g.release(*jid);
                n += 1;
            }
        }
        g.update_gauges();
        Ok(n)
    }

    /// Forget workers at once (their credential was revoked or blocked): their leases go back
    /// to the queue and their ids stop working. Returns how many jobs were re-queued.
    pub fn drop_workers(&self, workers: &[Uuid]) -> usize {
        let mut g = self.lock();
        let n = workers
            .iter()
            .filter_map(|w| g.remove_worker(*w))
            .map(|(_, n)| n)
            .sum();
        g.update_gauges();
        n
    }

    /// Put quarantined positions back in the queue (all of them, or those of `boards`, in any
    /// orientation); returns how many. The operator's answer to a quarantine that was wrong.
    pub fn release_quarantined(&self, boards: Option<&[Board]>) -> Result<u64> {
        let mut g = self.lock();
        let chosen: Vec<Board> = match boards {
            None => g.quarantined.keys().copied().collect(),
            Some(bs) => bs
                .iter()
                .map(|b| canonical(b).0)
                .filter(|b| g.quarantined.contains_key(b))
                .collect(),
        };
        let mut batch = Batch::default();
        for b in &chosen {
            g.quarantined.remove(b);
            if let Some(s) = g.index.sched_mut(b) {
                s.quarantined = false;
            }
            g.enqueue(*b);
            if let Some(e) = g.index.get(b) {
                batch.put_entry(&e, false)?;
            }
        }
        self.0.store.apply(batch)?;
        self.0.store.flush()?;
        g.dirty = true;
        g.update_gauges();
        tracing::info!(released = chosen.len(), "quarantined positions released");
        Ok(chosen.len() as u64)
    }

    /// Re-queue the jobs of workers silent for longer than the lease timeout; returns how many
    /// jobs went back to the queue. Called periodically by the server.
    pub fn expire_leases(&self) -> usize {
        let now = self.now();
        let timeout = self.0.cfg.lease_timeout;
        let mut g = self.lock();
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
        metrics::counter!("bookfarm_jobs_expired_total").increment(n as u64);
        g.update_gauges();
        n
    }

    /// Start (or replace) an expansion. Enhance stores its errors in the header and recomputes
    /// negamax. Returns the number of jobs queued by the first selection.
    pub fn start_expansion(&self, selector: Selector, level: u8) -> Result<u64> {
        let mut g = self.lock();
        let mut batch = Batch::default();
        if let Selector::Enhance { midgame, endcut } = selector {
            let mut h = *g.index.header();
            h.midgame_error = midgame;
            h.endcut_error = endcut;
            g.index.set_header(h);
            batch.put_header(&h)?;
            g.index.full_negamax();
        }
        let x = Expansion {
            selector,
            level,
            state: State::Running,
        };
        g.expansion = Some(x);
        batch.put_expansion(Some(&record(&x)))?;
        self.0.store.apply(batch)?;
        self.0.store.flush()?;
        g.dirty = true;
        let before = g.queue.len();
        g.maybe_select(&self.0.store, &self.0.cfg)?;
        tracing::info!(%selector, level, "expansion started");
        Ok(g.queue.len().saturating_sub(before) as u64)
    }

    /// Pause (true) or resume (false) the expansion.
    pub fn set_paused(&self, paused: bool) -> Result<()> {
        let mut g = self.lock();
        let Some(mut x) = g.expansion else {
            return Err(CoordinatorError::FailedPrecondition(
                "no expansion to pause or resume".into(),
            ));
        };
        x.state = match (paused, x.state) {
            (true, State::Running) => State::Paused,
            (false, State::Paused) => State::Running,
            (_, s) => s,
        };
        g.expansion = Some(x);
        g.dirty = true;
        let mut batch = Batch::default();
        batch.put_expansion(Some(&record(&x)))?;
        self.0.store.apply(batch)?;
        self.0.store.flush()?;
        Ok(())
    }

    /// The status report.
    pub fn status(&self) -> StatusReport {
        let now = self.now();
        let mut g = self.lock();
        g.trim_rates(now);
        let rate = |v: &VecDeque<Duration>| {
            v.len() as f64 / RATE_WINDOW.as_secs_f64().min(now.as_secs_f64().max(1.0))
        };
        let workers = g
            .workers
            .iter()
            .map(|(id, w)| WorkerReport {
                id: *id,
                name: w.name.clone(),
                threads: w.threads,
                in_flight: w.jobs.len(),
                completed: w.completed,
                failed: w.failed,
                results_per_second: rate(&w.recent),
                last_seen: now.saturating_sub(w.last_seen),
            })
            .collect();
        StatusReport {
            positions: g.index.len() as u64,
            queued: g.queue.len() as u64,
            in_flight: g.in_flight as u64,
            workers,
            results_per_second: rate(&g.recent),
            state: g.state(),
            expansion: g
                .expansion
                .map(|x| {
                    if x.level > 0 {
                        format!("{} level {}", x.selector, x.level)
                    } else {
                        x.selector.to_string()
                    }
                })
                .unwrap_or_default(),
            completed: g.counters.completed,
            quarantined: g.quarantined.values().cloned().collect(),
            root_value: g
                .index
                .id(&g.root)
                .map(|id| i32::from(g.index.book().score(id).value))
                .unwrap_or(-127),
        }
    }

    /// Counters since start.
    pub fn counters(&self) -> Counters {
        self.lock().counters
    }

    /// A consistent snapshot of the book: header and every position.
    pub fn snapshot(&self) -> (BookHeader, Vec<Position>) {
        let g = self.lock();
        (*g.index.header(), g.index.positions().collect())
    }

    /// A consistent copy of the in-memory book (values current, no parent index): cheaper than
    /// [`Coordinator::snapshot`] for exports, as it copies the compact arrays.
    pub fn book_snapshot(&self) -> bookfarm_book::MemBook {
        let mut book = self.lock().index.book().clone();
        book.drop_parent_index();
        book
    }

    /// The book position reached by a move list from the start (canonical coordinates).
    pub fn show(&self, moves: &str) -> Result<Option<Position>> {
        let b = canonical(&replay(moves)?).0;
        Ok(self.lock().index.get(&b).map(|e| e.pos))
    }

    /// Header plus counts: (header, positions, links, leaves).
    pub fn info(&self) -> (BookHeader, u64, u64, u64) {
        let g = self.lock();
        let book = g.index.book();
        let leaves = book
            .ids()
            .filter(|&id| book.leaf(id).mv != Move::None)
            .count();
        (
            *g.index.header(),
            g.index.len() as u64,
            g.index.n_links() as u64,
            leaves as u64,
        )
    }

    /// Add games (move lists from the start position) as Edax's `book add` does
    /// (edax-spec §4.5): replay at most `60 - n_empties` moves (passes inserted where forced,
    /// stopping at the first illegal move), add every reached position except the start, link
    /// them, and queue a leaf search for each position that needs one. Returns the number of
    /// positions added.
    pub fn add_games(&self, games: &[Vec<Move>]) -> Result<usize> {
        let mut g = self.lock();
        let n_empties = u32::try_from(g.index.header().n_empties.max(0)).unwrap_or(0);
        let max_plies = 60usize.saturating_sub(n_empties as usize);
        let level = u8::try_from(g.index.header().level.clamp(0, 60)).unwrap_or(0);
        let mut added = 0usize;
        let mut touched = Vec::new();
        let mut batch = Batch::default();
        let mut new_boards = HashSet::new();
        for game in games {
            let mut b = Board::start();
            let mut path = Vec::new();
            for mv in game.iter().take(max_plies) {
                if b.must_pass() && *mv != Move::Pass {
                    b = b.pass();
                    path.push(b);
                }
                match b.play_move(*mv) {
                    Ok(n) => b = n,
                    Err(_) => break,
                }
                path.push(b);
            }
            // Deepest first, so that each new position links to its already-added child.
            for raw in path.iter().rev() {
                if raw.empties() + 1 < n_empties {
                    continue;
                }
                let c = canonical(raw).0;
                if !g.index.contains(&c) {
                    g.index.insert(new_entry(c, level));
                    new_boards.insert(c);
                    added += 1;
                }
                g.index.link_children(&c);
                touched.push(c);
            }
        }
        touched.sort();
        touched.dedup();
        for b in &touched {
            let needs = g.index.get(b).is_some_and(|e| {
                !e.pending
                    && e.pos.leaf.mv == Move::None
                    && e.pos.leaf.score <= -127
                    && needs_search(&e)
            });
            if needs {
                if let Some(s) = g.index.sched_mut(b) {
                    s.pending = true;
                }
                g.enqueue(*b);
            }
        }
        g.index.propagate(touched.iter().copied());
        for b in &touched {
            if let Some(e) = g.index.get(b) {
                batch.put_entry(&e, new_boards.contains(b))?;
            }
            if batch.len >= 512 {
                self.0.store.apply(std::mem::take(&mut batch))?;
            }
        }
        self.0.store.apply(batch)?;
        self.0.store.flush()?;
        g.dirty = true;
        g.update_gauges();
        Ok(added)
    }

    /// Heap bytes of the in-memory book (positions, links, hash table, parent index and the
    /// scheduling side table), as allocated capacity.
    pub fn book_heap_bytes(&self) -> usize {
        self.lock().index.heap_bytes()
    }

    /// Check that the incrementally maintained values equal a full recompute (tests, `--check`).
    pub fn verify_negamax(&self) -> bool {
        let g = self.lock();
        let mut full = g.index.clone();
        full.full_negamax();
        full.positions()
            .all(|p| g.index.get(&p.board).map(|x| x.pos) == Some(p))
    }

    /// Replace the book by imported positions (refused while an expansion runs or jobs are out).
    pub fn import(&self, header: BookHeader, positions: Vec<Position>) -> Result<u64> {
        let mut g = self.lock();
        if g.state() == State::Running || g.in_flight > 0 {
            return Err(CoordinatorError::FailedPrecondition(
                "cannot import while an expansion is running (pause it and let workers drain)"
                    .into(),
            ));
        }
        let entries: Vec<Entry> = positions.into_iter().map(Entry::new).collect();
        self.0.store.create(&header, &entries)?;
        let mut index = BookIndex::new(header);
        for e in entries {
            index.insert(e);
        }
        index.full_negamax();
        let n = index.len() as u64;
        g.index = index;
        g.jobs.clear();
        g.job_by_board.clear();
        g.queue.clear();
        g.in_flight = 0;
        g.expansion = None;
        g.quarantined.clear();
        Ok(n)
    }
}

fn record(x: &Expansion) -> ExpansionRecord {
    ExpansionRecord::new(
        x.selector,
        x.level,
        match x.state {
            State::Paused => ExpansionStateRecord::Paused,
            State::Done => ExpansionStateRecord::Done,
            _ => ExpansionStateRecord::Running,
        },
    )
}

/// Validate one result against its job: the move must be legal and not excluded (a pass only
/// when forced and not already linked; "no move" only when nothing is left to search), the score
/// within [-64, 64], and an exact score even (Edax's final scores give the empties to the winner,
/// so they are always even).
fn validate(j: &JobEntry, r: &JobResult) -> Result<()> {
    let b = &j.board;
    let open = b.moves() & !j.excluded;
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
    Ok(())
}

impl Inner {
    fn state(&self) -> State {
        self.expansion.map_or(State::Idle, |x| x.state)
    }

    fn update_gauges(&self) {
        metrics::gauge!("bookfarm_queue_depth").set(self.queue.len() as f64);
        metrics::gauge!("bookfarm_in_flight").set(self.in_flight as f64);
        metrics::gauge!("bookfarm_positions").set(self.index.len() as f64);
        metrics::gauge!("bookfarm_workers").set(self.workers.len() as f64);
    }

    fn trim_rates(&mut self, now: Duration) {
        let cut = now.saturating_sub(RATE_WINDOW);
        while self.recent.front().is_some_and(|t| *t < cut) {
            self.recent.pop_front();
        }
        for w in self.workers.values_mut() {
            while w.recent.front().is_some_and(|t| *t < cut) {
                w.recent.pop_front();
            }
        }
    }

    /// Queue a leaf search for a position (no-op when it already has a job).
    fn enqueue(&mut self, b: Board) {
        if self.job_by_board.contains_key(&b) {
            return;
        }
        let Some(e) = self.index.get(&b) else { return };
        let jid = Uuid::new_v4();
        self.seq += 1;
        let key = (priority(&b), self.seq);
        self.jobs.insert(
            jid,
            JobEntry {
                board: b,
                excluded: e.excluded(),
                level: e.pos.level,
                version: e.version,
                attempt: 0,
                failures: 0,
                failed_owners: Vec::new(),
                last_reason: String::new(),
                lease: None,
                leased_at: Duration::ZERO,
                lessees: Vec::new(),
                queue_key: Some(key),
            },
        );
        self.queue.insert((key.0, key.1, jid));
        self.job_by_board.insert(b, jid);
    }

    /// Put a leased job back in the queue.
    fn release(&mut self, jid: Uuid) {
        let Some(j) = self.jobs.get_mut(&jid) else {
            return;
        };
        if let Some(w) = j.lease.take() {
            self.in_flight -= 1;
            if let Some(w) = self.workers.get_mut(&w) {
                w.jobs.remove(&jid);
            }
        }
        if j.queue_key.is_none() {
            self.seq += 1;
            let key = (priority(&j.board), self.seq);
            j.queue_key = Some(key);
            self.queue.insert((key.0, key.1, jid));
        }
    }

    /// Remove a worker and put the jobs leased to it back in the queue; returns its name and
    /// how many jobs went back (None when unknown).
    fn remove_worker(&mut self, wid: Uuid) -> Option<(String, usize)> {
        let w = self.workers.remove(&wid)?;
        let mut n = 0;
        for jid in w.jobs {
            if self.jobs.get(&jid).is_some_and(|j| j.lease == Some(wid)) {
                self.release(jid);
                n += 1;
            }
        }
        Some((w.name, n))
    }

    /// Re-queue jobs leased for longer than [`max_lease_duration`] of their level (the lessee
    /// learns it from its next heartbeat); returns how many.
    fn expire_overdue(&mut self, now: Duration, cfg: &ServiceConfig) -> usize {
        let overdue: Vec<(Uuid, Option<Uuid>)> = self
            .jobs
            .iter()
            .filter(|(_, j)| {
                j.lease.is_some()
                    && now.saturating_sub(j.leased_at) > max_lease_duration(j.level, cfg)
            })
            .map(|(id, j)| (*id, j.lease))
            .collect();
        for (jid, w) in &overdue {
            tracing::warn!(job_id = %jid, worker_id = ?w, "lease past its maximum duration: job re-queued");
            self.release(*jid);
        }
        overdue.len()
    }

    /// A stale result: refresh the job from the position and queue it again.
    fn requeue_stale(&mut self, jid: Uuid) {
        let Some(j) = self.jobs.get(&jid) else { return };
        let b = j.board;
        if let Some(e) = self.index.get(&b) {
            let (ex, v, needs) = (e.excluded(), e.version, needs_search(&e));
            if !needs {
                self.remove_job(jid);
                if let Some(s) = self.index.sched_mut(&b) {
                    s.pending = false;
                }
                self.index.set_leaf(&b, BAD_LINK);
                return;
            }
            let j = self.jobs.get_mut(&jid).expect("present above");
            j.excluded = ex;
            j.version = v;
        }
        self.release(jid);
    }

    /// Remove a job entirely (accepted or quarantined).
    fn remove_job(&mut self, jid: Uuid) -> Option<JobEntry> {
        let j = self.jobs.remove(&jid)?;
        if let Some(k) = j.queue_key {
            self.queue.remove(&(k.0, k.1, jid));
        }
        if let Some(w) = j.lease {
            self.in_flight -= 1;
            if let Some(w) = self.workers.get_mut(&w) {
                w.jobs.remove(&jid);
            }
        }
        self.job_by_board.remove(&j.board);
        Some(j)
    }

    /// Run selection when the expansion runs, the queue is below half the high-water mark and
    /// results landed since the last run; expand the selected positions until the queue reaches
    /// the high-water mark. Marks the expansion done at its fixed point.
    fn maybe_select(&mut self, store: &Store, cfg: &ServiceConfig) -> Result<()> {
        let Some(mut x) = self.expansion else {
            return Ok(());
        };
        let high_water = if cfg.rounds {
            usize::MAX
        } else {
            cfg.high_water
        };
        if x.state != State::Running || !self.dirty {
            return Ok(());
        }
        if cfg.rounds {
            if !self.jobs.is_empty() {
                return Ok(());
            }
        } else if self.queue.len() >= high_water / 2
            || (!self.queue.is_empty() && self.since_select < high_water / 4)
        {
            return Ok(());
        }
        self.dirty = false;
        self.since_select = 0;
        let todo = select(&self.index, &self.root, x.selector);
        let mut batch = Batch::default();
        let mut expanded = 0usize;
        let mut seeds = Vec::new();
        for a in todo {
            if self.queue.len() >= high_water {
                // More work remains: select again once the queue drains.
                self.dirty = true;
                break;
            }
            if self
                .index
                .sched(&a)
                .is_none_or(|s| s.pending || s.quarantined)
            {
                continue;
            }
            if self.expand(a, x.level, &mut batch, &mut seeds)? {
                expanded += 1;
            }
            if batch.len >= 512 {
                store.apply(std::mem::take(&mut batch))?;
            }
        }
        self.index.propagate(seeds);
        store.apply(batch)?;
        if expanded > 0 {
            // Expansions changed the book (links, values): the next call selects again, even
            // when they queued no job (a transposition linked in, a fully linked position).
            self.dirty = true;
        }
        if expanded == 0 && self.jobs.is_empty() {
            x.state = State::Done;
            self.expansion = Some(x);
            let mut b = Batch::default();
            b.put_expansion(Some(&record(&x)))?;
            store.apply(b)?;
            tracing::info!(positions = self.index.len(), "expansion done");
        }
        Ok(())
    }

    /// Expand position `a` through its leaf (edax-spec §4.4, design.md "Job model"): link the
    /// child (creating it with a provisional leaf and queueing its search when new) and queue
    /// the re-search of `a`'s leaf with the move now excluded.
    fn expand(
        &mut self,
        a: Board,
        level: u8,
        batch: &mut Batch,
        seeds: &mut Vec<Board>,
    ) -> Result<bool> {
        let Some(e) = self.index.get(&a) else {
            return Ok(false);
        };
        let leaf = e.pos.leaf;
        if leaf.mv == Move::None || leaf.score <= -127 {
            return Ok(false);
        }
        let child_level = if level > 0 { level } else { e.pos.level };
        let b = child_board(&a, leaf.mv);
        let is_new = !self.index.contains(&b);
        if is_new {
            self.index.insert(new_entry(b, child_level));
            self.index.link_children(&b);
            let c = self.index.get(&b).expect("just inserted");
            if needs_search(&c) {
                // Until its search returns, the child's value is the parent's leaf estimate.
                self.index
                    .set_leaf(&b, Link::new(to_i8(-i32::from(leaf.score)), Move::None));
                if let Some(s) = self.index.sched_mut(&b) {
                    s.pending = true;
                }
                self.enqueue(b);
            }
        }
        self.index.add_link(&a, leaf);
        let needs = self.index.get(&a).is_some_and(|e| needs_search(&e));
        if needs {
            if let Some(s) = self.index.sched_mut(&a) {
                s.pending = true;
            }
            self.enqueue(a);
        }
        seeds.push(b);
        seeds.push(a);
        if let Some(c) = self.index.get(&b) {
            batch.put_entry(&c, is_new)?;
        }
        if let Some(p) = self.index.get(&a) {
            batch.put_entry(&p, false)?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
