//! The worker loop: register, lease jobs a little ahead of the free search threads, run them on
//! the [`Pool`], deliver the results with the next lease call and keep them until the
//! coordinator acknowledges them. Transient failures are retried with jittered exponential
//! backoff; a stop request ([`Stopper::stop`]) stops leasing, hands back the jobs no thread has
//! started, finishes the started ones, delivers their results and returns.
//!
//! The loop runs on the caller's thread and waits on one channel that carries search outcomes
//! and the stop request, with timeouts for heartbeats, idle retries, backoff, the gate and the
//! progress line.
//!
//! A polite worker (the volunteer's `bookfarm-worker`) adds a [`Gate`] that pauses the loop
//! (active hours, battery): a pause hands back the jobs no thread has started at once, lets the
//! started searches finish within [`RunnerConfig::pause_grace`], and then abandons and hands back
//! whatever still runs, so that a paused worker never holds up a program. A CPU share below 1
//! rests each search slot after each search ([`Throttle`]); the loop leases only for slots that
//! are not resting. Every [`RunnerConfig::progress_every`] it logs a progress line, and it logs
//! why it is idle (the coordinator's [`IdleReason`]) once idleness lasts.

use crate::domain::{Ack, CreditNote, IdleReason, JobResult};
use crate::exec::{Claim, Outcome, Pool, SearcherFactory, Task, ThreadInit};
use crate::polite::{Gate, GateState, Progress, Throttle, short_duration};
use crate::transport::{CallError, CallErrorKind, LeaseAsk, Transport, WorkerInfo};
use rand::Rng;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// First reconnection delay.
const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// Heartbeat period until the coordinator tells us its own.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// Shortest wait before leasing again after a lease found no job.
const MIN_IDLE: Duration = Duration::from_millis(10);
/// Idleness shorter than this (the end of a pass) is logged at debug level only.
const IDLE_LOG_AFTER: Duration = Duration::from_secs(5);

/// Why a worker loop stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The coordinator refuses this worker (credential, protocol, engine, eval or signature).
    #[error("coordinator refused this worker: {0}")]
    Refused(String),
    /// The search threads could not be started.
    #[error("starting search threads: {0}")]
    Threads(#[from] std::io::Error),
    /// The coordinator stayed unreachable for longer than `give_up_after`.
    #[error("coordinator unreachable for {0:?}; giving up")]
    GaveUp(Duration),
}

/// A callback run on every result acknowledgement.
#[derive(Clone)]
pub struct AckHook(pub Arc<dyn Fn(Uuid, Ack) + Send + Sync>);

impl std::fmt::Debug for AckHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AckHook")
    }
}

/// Settings of one worker loop.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Search threads.
    pub threads: usize,
    /// Jobs leased beyond the free threads, so no thread idles between results.
    pub lookahead: usize,
    /// Name shown in the coordinator's status.
    pub name: String,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Stop instead of retrying when the coordinator cannot be reached for this long (None:
    /// retry forever).
    pub give_up_after: Option<Duration>,
    /// Called for every acknowledgement the coordinator sends (tests log acknowledged job ids).
    pub on_ack: Option<AckHook>,
    /// Share of each search thread's core the searches may use, 0.01..=1 (1: no cap; see
    /// [`Throttle`]). Below 1 no job is leased ahead of the free threads.
    pub cpu_share: f64,
    /// When the gate pauses the loop, started searches may go on for this long; then they are
    /// abandoned and handed back. A paused worker holds no lease longer than this.
    pub pause_grace: Duration,
    /// How often the gate is asked.
    pub gate_poll: Duration,
    /// Period of the progress line (None: none).
    pub progress_every: Option<Duration>,
    /// Run by each search thread as it starts.
    pub thread_init: Option<ThreadInit>,
    /// The worker searches only part of the time (told at registration).
    pub part_time: bool,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            threads: 1,
            lookahead: 1,
            name: "worker".into(),
            max_backoff: Duration::from_secs(30),
            give_up_after: None,
            on_ack: None,
            cpu_share: 1.0,
            pause_grace: Duration::from_secs(30),
            gate_poll: Duration::from_secs(5),
            progress_every: None,
            thread_init: None,
            part_time: false,
        }
    }
}

/// Figures of one worker loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerStats {
    /// Jobs received.
    pub jobs: u64,
    /// Results the coordinator accepted.
    pub accepted: u64,
    /// Results it already had.
    pub duplicates: u64,
    /// Results it refused (dropped).
    pub refused: u64,
    /// Searches finished (delivered or not).
    pub searched: u64,
    /// Jobs handed back unsearched or abandoned (drain, pause).
    pub released: u64,
    /// Nodes searched.
    pub nodes: u64,
    /// Time spent searching (sum over threads).
    pub search_time: Duration,
    /// Time spent in calls to the coordinator (a lease that waits for new jobs included).
    pub rpc_time: Duration,
    /// Thread time without a job: for every moment, the search threads no leased job occupied
    /// (waiting for jobs at the end of a pass, or for the coordinator).
    pub idle_time: Duration,
    /// Wall time with no job at all (every thread idle: the coordinator had nothing to lease,
    /// as between two passes of a serial growth program); part of `idle_time`.
    pub starved_time: Duration,
    /// Wall time of the loop.
    pub wall_time: Duration,
}

/// What the loop's channel carries.
#[derive(Debug)]
pub enum Event {
    /// A search finished.
    Outcome(Outcome),
    /// Stop: drain and return.
    Stop,
}

impl From<Outcome> for Event {
    fn from(o: Outcome) -> Event {
        Event::Outcome(o)
    }
}

/// Asks a running loop to stop (drain and return). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Stopper(mpsc::Sender<Event>);

impl Stopper {
    /// Ask the loop to drain and return (a no-op once it has returned).
    pub fn stop(&self) {
        let _ = self.0.send(Event::Stop);
    }
}

/// A worker loop not started yet (create it first to hand out [`Stopper`]s).
#[derive(Debug)]
pub struct Runner {
    tx: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
    gate: Option<Box<dyn Gate>>,
}

impl Default for Runner {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        Runner { tx, rx, gate: None }
    }
}

/// Jittered exponential backoff.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(max: Duration) -> Backoff {
        Backoff {
            next: INITIAL_BACKOFF,
            max,
        }
    }
    fn reset(&mut self) {
        self.next = INITIAL_BACKOFF;
    }
    fn step(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        // Full jitter in [base/2, base].
        let ms = u64::try_from(base.as_millis()).unwrap_or(u64::MAX).max(2);
        Duration::from_millis(rand::rng().random_range(ms / 2..=ms))
    }
}

/// Sets every registered abort flag when dropped.
#[derive(Debug, Default)]
struct AbortAll(std::sync::Mutex<Vec<Arc<AtomicBool>>>);

impl AbortAll {
    fn push(&self, a: Arc<AtomicBool>) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Keep the list short: finished searches no longer need their flag.
        v.retain(|f| Arc::strong_count(f) > 1);
        v.push(a);
    }
}

impl Drop for AbortAll {
    fn drop(&mut self) {
        for a in self.0.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            a.store(true, Ordering::Relaxed);
        }
    }
}

/// A job the loop holds: its abort flag and claim, what it is, and since when it is held.
#[derive(Debug)]
struct Held {
    abort: Arc<AtomicBool>,
    claim: Arc<Claim>,
    level: u8,
    empties: u32,
    since: Instant,
}

/// A pause of the gate.
#[derive(Debug)]
struct Pause {
    reason: String,
    /// Started searches are abandoned at this moment.
    deadline: Instant,
}

/// The gate's last answer.
#[derive(Debug)]
struct GateView {
    gate: Box<dyn Gate>,
    /// When it answers next.
    next: Instant,
    /// When it last answered, and what search time it allowed then.
    at: Instant,
    available: Option<Duration>,
}

/// The figures at the last progress line.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: Instant,
    searched: u64,
    nodes: u64,
}

struct Loop<T> {
    cfg: RunnerConfig,
    transport: T,
    worker: Option<Uuid>,
    heartbeat: Duration,
    outstanding: HashMap<Uuid, Held>,
    finished: Vec<JobResult>,
    failures: Vec<(Uuid, String)>,
    stats: WorkerStats,
    backoff: Backoff,
    last_ok: Instant,
    draining: bool,
    /// When the idle-time integral was last advanced.
    mark: Instant,
    /// Since when leases found no job, and how many jobs were held then.
    waiting: Option<(Instant, usize)>,
    gate: Option<GateView>,
    pause: Option<Pause>,
    throttle: Throttle,
    /// Why the last lease found no job (while the worker holds none), since when, and whether
    /// that was logged at info level.
    idle: Option<(Option<IdleReason>, Instant, bool)>,
    /// The coordinator's last word on this worker's credit.
    credit: Option<CreditNote>,
    progress: Mark,
}

impl<T: Transport> Loop<T> {
    /// Advance the idle-time integral to now (the threads no job occupies were idle since the
    /// last mark). Called before anything changes the set of outstanding jobs.
    fn tick(&mut self) {
        let now = Instant::now();
        let free = self.cfg.threads.saturating_sub(self.outstanding.len());
        self.stats.idle_time += (now - self.mark) * u32::try_from(free).unwrap_or(u32::MAX);
        if self.outstanding.is_empty() {
            self.stats.starved_time += now - self.mark;
        }
        self.mark = now;
    }

    fn outcome(&mut self, o: Outcome) {
        self.tick();
        match o {
            Outcome::Done(r) => {
                if self.outstanding.remove(&r.job_id).is_some() {
                    self.stats.nodes += r.leaf.nodes;
                    self.stats.search_time += r.leaf.elapsed;
                    self.stats.searched += 1;
                    self.throttle.finished(Instant::now(), r.leaf.elapsed);
                    tracing::debug!(job_id = %r.job_id, mv = %r.leaf.mv, score = r.leaf.score, nodes = r.leaf.nodes, "search done");
                    self.finished.push(r);
                }
            }
            Outcome::Aborted(job) => {
                self.outstanding.remove(&job.id);
                tracing::debug!(job_id = %job.id, "search aborted; its partial result is dropped");
            }
            Outcome::Panicked(job, msg) => {
                self.outstanding.remove(&job.id);
                tracing::error!(job_id = %job.id, %msg, "search panicked");
                self.failures.push((job.id, msg));
            }
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Outcome(o) => self.outcome(o),
            Event::Stop if !self.draining => {
                self.draining = true;
                if let Some(w) = self.worker {
                    self.release_unstarted(w);
                }
                tracing::info!(
                    in_flight = self.outstanding.len(),
                    "draining: finishing started jobs"
                );
            }
            Event::Stop => {}
        }
    }

    fn ok(&mut self) {
        self.backoff.reset();
        self.last_ok = Instant::now();
    }

    /// Time a call to the coordinator.
    fn call<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        let t0 = Instant::now();
        let r = f(&mut self.transport);
        self.stats.rpc_time += t0.elapsed();
        r
    }

    fn record_acks(&mut self, acks: &[(Uuid, Ack)]) {
        for (id, a) in acks {
            if let Some(h) = &self.cfg.on_ack {
                (h.0)(*id, *a);
            }
            match a {
                Ack::Accepted => self.stats.accepted += 1,
                Ack::Duplicate => self.stats.duplicates += 1,
            }
            self.finished.retain(|r| r.job_id != *id);
        }
    }

    /// Connection trouble: wait (handling outcomes and a stop meanwhile), or give up.
    fn wait_backoff(
        &mut self,
        rx: &mpsc::Receiver<Event>,
        e: &CallError,
    ) -> Result<(), RunnerError> {
        if let Some(limit) = self.cfg.give_up_after
            && self.last_ok.elapsed() > limit
        {
            return Err(RunnerError::GaveUp(limit));
        }
        let d = self.backoff.step();
        tracing::warn!(kind = ?e.kind, error = %e.message, retry_in_ms = d.as_millis() as u64, "coordinator call failed");
        let until = Instant::now() + d;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(ev) => self.event(ev),
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// Draining: withdraw the leased jobs no thread has started and hand them back, so that
    /// other workers search them now rather than after a lease timeout.
    fn release_unstarted(&mut self, worker: Uuid) {
        self.tick();
        let withdrawn: Vec<Uuid> = self
            .outstanding
            .iter()
            .filter(|(_, h)| h.claim.withdraw())
            .map(|(id, _)| *id)
            .collect();
        self.hand_back(worker, withdrawn, "unstarted");
    }

    /// Hand jobs back to the coordinator (they are no longer this loop's).
    fn hand_back(&mut self, worker: Uuid, jobs: Vec<Uuid>, what: &str) {
        if jobs.is_empty() {
            return;
        }
        for id in &jobs {
            self.outstanding.remove(id);
        }
        self.stats.released += jobs.len() as u64;
        match self.call(|t| t.release(worker, &jobs)) {
            Ok(n) => tracing::info!(released = n, "handed {what} jobs back"),
            Err(e) => {
                tracing::warn!(error = %e, "could not hand jobs back; they return after the lease timeout")
            }
        }
    }

    /// Ask the gate (when it is due) and enter or leave a pause.
    fn poll_gate(&mut self, now: Instant) {
        let Some(g) = self.gate.as_mut().filter(|g| now >= g.next) else {
            return;
        };
        g.next = now + self.cfg.gate_poll;
        g.at = now;
        let state = g.gate.state();
        match state {
            GateState::Run { available } => {
                g.available = available;
                if let Some(p) = self.pause.take() {
                    tracing::info!(was = %p.reason, "resuming: searching again");
                }
            }
            GateState::Pause(reason) => {
                g.available = Some(Duration::ZERO);
                match &mut self.pause {
                    Some(p) if p.reason == reason => {}
                    Some(p) => {
                        tracing::info!(%reason, "still paused");
                        p.reason = reason;
                    }
                    None => {
                        tracing::info!(
                            %reason,
                            in_flight = self.outstanding.len(),
                            grace_s = self.cfg.pause_grace.as_secs_f64(),
                            "paused: unstarted jobs go back now, started searches may finish within the grace"
                        );
                        self.pause = Some(Pause {
                            reason,
                            deadline: now + self.cfg.pause_grace,
                        });
                        if let Some(w) = self.worker {
                            self.release_unstarted(w);
                        }
                    }
                }
            }
        }
    }

    /// Paused past the grace: abandon the searches still running and hand them back.
    fn enforce_pause(&mut self, worker: Uuid, now: Instant) {
        if self.outstanding.is_empty() || self.pause.as_ref().is_none_or(|p| now < p.deadline) {
            return;
        }
        self.tick();
        let jobs: Vec<Uuid> = self.outstanding.keys().copied().collect();
        for h in self.outstanding.values() {
            h.abort.store(true, Ordering::Relaxed);
        }
        tracing::info!(
            jobs = jobs.len(),
            "paused past the grace: abandoning the running searches"
        );
        self.hand_back(worker, jobs, "abandoned");
    }

    /// How long the gate still allows searching, now (None: no limit).
    fn available(&self, now: Instant) -> Option<Duration> {
        let g = self.gate.as_ref()?;
        g.available
            .map(|a| a.saturating_sub(now.saturating_duration_since(g.at)))
    }

    /// Jobs to ask for now: free threads that are not resting, plus the lookahead (none under
    /// a CPU cap), minus the jobs held; none while draining or paused.
    fn free_slots(&mut self, now: Instant) -> usize {
        if self.draining || self.pause.is_some() {
            return 0;
        }
        let threads = self.cfg.threads.saturating_sub(self.throttle.resting(now));
        let ahead = if self.throttle.capped() {
            0
        } else {
            self.cfg.lookahead
        };
        (threads + ahead).saturating_sub(self.outstanding.len())
    }

    /// A lease found no job for free threads: note why, and log it once idleness lasts.
    fn note_idle(&mut self, reason: Option<IdleReason>, now: Instant) {
        if !self.outstanding.is_empty() {
            return;
        }
        let sentence = reason.map_or("the coordinator gave no reason", IdleReason::explain);
        match &mut self.idle {
            Some((r, since, logged)) if *r == reason => {
                if !*logged && now.duration_since(*since) >= IDLE_LOG_AFTER {
                    *logged = true;
                    tracing::info!("idle: {sentence}");
                }
            }
            _ => {
                tracing::debug!("idle: {sentence}");
                let logged = self.idle.as_ref().is_some_and(|i| i.2);
                if logged {
                    // Already idle for long: a new reason is news.
                    tracing::info!("idle: {sentence}");
                }
                self.idle = Some((reason, now, logged));
            }
        }
    }

    /// Jobs arrived: idleness ends.
    fn note_busy(&mut self, now: Instant) {
        if let Some((_, since, true)) = self.idle.take() {
            tracing::info!(
                "working again after {} idle",
                short_duration(now.duration_since(since))
            );
        }
    }

    /// The progress line, when due.
    fn progress(&mut self, now: Instant) {
        let Some(every) = self.cfg.progress_every else {
            return;
        };
        if now.duration_since(self.progress.at) < every {
            return;
        }
        let current = self
            .outstanding
            .values()
            .filter(|h| !h.abort.load(Ordering::Relaxed))
            .min_by_key(|h| h.since)
            .map(|h| (h.level, h.empties, now.duration_since(h.since)));
        let p = Progress {
            period: now.duration_since(self.progress.at),
            searches: self.stats.searched - self.progress.searched,
            searches_total: self.stats.searched,
            nodes: self.stats.nodes - self.progress.nodes,
            accepted: self.stats.accepted,
            credit: self
                .credit
                .as_ref()
                .map(|c| (c.standing.clone(), c.results)),
            current,
            idle: self.idle.as_ref().map(|i| {
                i.0.map_or("the coordinator gave no reason", IdleReason::explain)
                    .to_string()
            }),
            paused: self.pause.as_ref().map(|p| p.reason.clone()),
        };
        tracing::info!("progress: {}", p.render());
        self.progress = Mark {
            at: now,
            searched: self.stats.searched,
            nodes: self.stats.nodes,
        };
    }

    /// When the loop must wake next regardless of outcomes: the gate, a resting slot, the
    /// pause's grace, the progress line.
    fn next_wake(&self) -> Option<Instant> {
        let gate = self.gate.as_ref().map(|g| g.next);
        let rest = if self.pause.is_some() || self.draining {
            None
        } else {
            self.throttle.next_wake()
        };
        let grace = self
            .pause
            .as_ref()
            .filter(|_| !self.outstanding.is_empty())
            .map(|p| p.deadline);
        let progress = self.cfg.progress_every.map(|e| self.progress.at + e);
        [gate, rest, grace, progress].into_iter().flatten().min()
    }

    /// The coordinator refused a batch: submit the results one by one and drop the refused ones.
    fn submit_singly(&mut self, worker: Uuid) {
        let batch: Vec<JobResult> = self.finished.clone();
        for r in batch {
            match self.call(|t| t.submit(worker, &[r])) {
                Ok(acks) => self.record_acks(&acks),
                Err(e) if e.refuses_content() => {
                    tracing::warn!(job_id = %r.job_id, error = %e, "result refused; dropped");
                    self.stats.refused += 1;
                    self.finished.retain(|x| x.job_id != r.job_id);
                }
                Err(_) => return,
            }
        }
    }
}

impl Runner {
    /// A loop not started yet.
    pub fn new() -> Runner {
        Runner::default()
    }

    /// A handle that stops the loop.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.tx.clone())
    }

    /// Pause and resume the loop as `gate` says (asked every [`RunnerConfig::gate_poll`]).
    pub fn with_gate(mut self, gate: Box<dyn Gate>) -> Runner {
        self.gate = Some(gate);
        self
    }

    /// Run the loop on this thread over `transport` with searchers from `make`, until stopped
    /// (then drain: finish the started jobs, deliver their results) or refused.
    pub fn run<T: Transport>(
        self,
        cfg: RunnerConfig,
        transport: T,
        make: &SearcherFactory,
    ) -> Result<WorkerStats, RunnerError> {
        let Runner { tx, rx, gate } = self;
        let started = Instant::now();
        let threads = cfg.threads.max(1);
        let pool = Pool::with_init(threads, make, tx, cfg.thread_init.as_ref())?;
        let capacity = threads + cfg.lookahead;
        // Declared after the pool, so dropped before it: abandons running searches on any exit
        // path before the pool joins its threads.
        let aborts = AbortAll::default();
        let mut l = Loop {
            backoff: Backoff::new(cfg.max_backoff),
            cfg: RunnerConfig { threads, ..cfg },
            transport,
            worker: None,
            heartbeat: DEFAULT_HEARTBEAT,
            outstanding: HashMap::new(),
            finished: Vec::new(),
            failures: Vec::new(),
            stats: WorkerStats::default(),
            last_ok: Instant::now(),
            draining: false,
            mark: started,
            waiting: None,
            gate: gate.map(|gate| GateView {
                gate,
                next: started,
                at: started,
                available: None,
            }),
            pause: None,
            throttle: Throttle::new(cfg.cpu_share),
            idle: None,
            credit: None,
            progress: Mark {
                at: started,
                searched: 0,
                nodes: 0,
            },
        };
        let mut next_heartbeat = Instant::now() + l.heartbeat;
        loop {
            while let Ok(e) = rx.try_recv() {
                l.event(e);
            }
            if l.draining
                && l.outstanding.is_empty()
                && l.finished.is_empty()
                && l.failures.is_empty()
            {
                break;
            }
            let now = Instant::now();
            l.poll_gate(now);
            let Some(worker) = l.worker else {
                let who = WorkerInfo {
                    name: l.cfg.name.clone(),
                    threads: u32::try_from(threads).unwrap_or(u32::MAX),
                    part_time: l.cfg.part_time,
                };
                match l.call(|t| t.register(&who)) {
                    Ok(reg) => {
                        l.ok();
                        l.worker = Some(reg.worker_id);
                        l.heartbeat = reg.heartbeat;
                        next_heartbeat = Instant::now() + l.heartbeat;
                        tracing::info!(worker_id = %reg.worker_id, coordinator = %l.transport.endpoint(), threads, "registered");
                    }
                    Err(e) if e.fatal() => return Err(RunnerError::Refused(e.message)),
                    Err(e) => {
                        if l.draining && l.outstanding.is_empty() {
                            tracing::warn!(
                                undelivered = l.finished.len(),
                                "coordinator unreachable while draining; exiting"
                            );
                            break;
                        }
                        l.wait_backoff(&rx, &e)?;
                    }
                }
                continue;
            };
            // Failures first (rare).
            for (job, msg) in std::mem::take(&mut l.failures) {
                if let Err(e) = l.call(|t| t.fail(worker, job, &msg, true)) {
                    tracing::warn!(job_id = %job, error = %e, "could not report failure");
                }
            }
            l.enforce_pause(worker, now);
            let free = l.free_slots(now).min(capacity);
            let mut idle: Option<Duration> = None;
            if free > 0 || !l.finished.is_empty() {
                let n = l.finished.len().min(l.transport.max_results());
                let batch: Vec<JobResult> = l.finished[..n].to_vec();
                let ask = LeaseAsk {
                    free: u32::try_from(free).unwrap_or(u32::MAX),
                    available: l.available(now),
                };
                match l.call(|t| t.lease(worker, ask, &batch)) {
                    Ok(leased) => {
                        l.ok();
                        l.record_acks(&leased.acks);
                        l.stats.jobs += leased.jobs.len() as u64;
                        if free > 0 && leased.jobs.is_empty() {
                            idle = Some(leased.retry_after.max(MIN_IDLE));
                            l.waiting
                                .get_or_insert((Instant::now(), l.outstanding.len()));
                            l.note_idle(leased.idle, Instant::now());
                        }
                        if !leased.jobs.is_empty() {
                            l.note_busy(Instant::now());
                        }
                        if !leased.jobs.is_empty()
                            && let Some((since, held)) = l.waiting.take()
                        {
                            // One line per wait for jobs: `held` 0 is a wait between two passes
                            // of a serial program, more is the tail of a pass.
                            tracing::debug!(
                                waited_us = since.elapsed().as_micros() as u64,
                                held,
                                jobs = leased.jobs.len(),
                                "jobs after a wait"
                            );
                        }
                        l.tick();
                        let at = Instant::now();
                        for job in leased.jobs {
                            let abort = Arc::new(AtomicBool::new(false));
                            let claim = Arc::new(Claim::default());
                            aborts.push(abort.clone());
                            let held = Held {
                                abort: abort.clone(),
                                claim: claim.clone(),
                                level: job.level,
                                empties: job.board.empties(),
                                since: at,
                            };
                            l.outstanding.insert(job.id, held);
                            pool.submit(Task { job, abort, claim });
                        }
                    }
                    Err(e) if e.kind == CallErrorKind::UnknownWorker => {
                        tracing::warn!("coordinator forgot this worker; registering again");
                        l.worker = None;
                        continue;
                    }
                    Err(e) if !batch.is_empty() && e.refuses_content() => {
                        l.submit_singly(worker);
                        continue;
                    }
                    Err(e) if e.fatal() => return Err(RunnerError::Refused(e.message)),
                    Err(e) => {
                        l.wait_backoff(&rx, &e)?;
                        continue;
                    }
                }
            }
            if !l.finished.is_empty() && (free > 0 || l.draining) && idle.is_none() {
                // More results than one call carries: loop at once.
                continue;
            }
            let now = Instant::now();
            l.progress(now);
            let mut wake = idle.map_or(next_heartbeat, |d| (now + d).min(next_heartbeat));
            if let Some(t) = l.next_wake() {
                wake = wake.min(t);
            }
            match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(e) => l.event(e),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) if Instant::now() >= next_heartbeat => {
                    next_heartbeat = Instant::now() + l.heartbeat;
                    let held: Vec<Uuid> = l.outstanding.keys().copied().collect();
                    match l.call(|t| t.heartbeat(worker, &held)) {
                        Ok(beat) => {
                            l.ok();
                            for id in beat.cancelled {
                                if let Some(h) = l.outstanding.get(&id) {
                                    h.abort.store(true, Ordering::Relaxed);
                                }
                            }
                            if beat.credit.is_some() {
                                l.credit = beat.credit;
                            }
                        }
                        Err(e) if e.kind == CallErrorKind::UnknownWorker => l.worker = None,
                        Err(e) if e.kind == CallErrorKind::Unauthorized => {
                            return Err(RunnerError::Refused(e.message));
                        }
                        Err(e) => tracing::debug!(error = %e, "heartbeat failed"),
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        l.tick();
        drop(aborts);
        drop(pool);
        l.stats.wall_time = started.elapsed();
        tracing::info!(
            accepted = l.stats.accepted,
            jobs = l.stats.jobs,
            "worker stopped"
        );
        Ok(l.stats)
    }
}

#[cfg(test)]
mod tests;
