//! The worker loop: register, lease jobs a little ahead of the free search threads, run them on
//! the [`Pool`], deliver the results with the next lease call and keep them until the
//! coordinator acknowledges them. Transient failures are retried with jittered exponential
//! backoff; a stop request ([`Stopper::stop`]) stops leasing, hands back the jobs no thread has
//! started, finishes the started ones, delivers their results and returns.
//!
//! The loop runs on the caller's thread and waits on one channel that carries search outcomes
//! and the stop request, with timeouts for heartbeats, idle retries and backoff.

use crate::domain::{Ack, JobResult};
use crate::exec::{Claim, Outcome, Pool, SearcherFactory, Task};
use crate::transport::{CallError, CallErrorKind, Transport};
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
}

impl Default for Runner {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        Runner { tx, rx }
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

struct Loop<T> {
    cfg: RunnerConfig,
    transport: T,
    worker: Option<Uuid>,
    heartbeat: Duration,
    outstanding: HashMap<Uuid, (Arc<AtomicBool>, Arc<Claim>)>,
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
            .filter(|(_, (_, claim))| claim.withdraw())
            .map(|(id, _)| *id)
            .collect();
        if withdrawn.is_empty() {
            return;
        }
        for id in &withdrawn {
            self.outstanding.remove(id);
        }
        match self.call(|t| t.release(worker, &withdrawn)) {
            Ok(n) => tracing::info!(released = n, "handed unstarted jobs back"),
            Err(e) => {
                tracing::warn!(error = %e, "could not hand jobs back; they return after the lease timeout")
            }
        }
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

    /// Run the loop on this thread over `transport` with searchers from `make`, until stopped
    /// (then drain: finish the started jobs, deliver their results) or refused.
    pub fn run<T: Transport>(
        self,
        cfg: RunnerConfig,
        transport: T,
        make: &SearcherFactory,
    ) -> Result<WorkerStats, RunnerError> {
        let Runner { tx, rx } = self;
        let started = Instant::now();
        let threads = cfg.threads.max(1);
        let pool = Pool::new(threads, make, tx)?;
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
            let Some(worker) = l.worker else {
                let name = l.cfg.name.clone();
                let n = u32::try_from(threads).unwrap_or(u32::MAX);
                match l.call(|t| t.register(&name, n)) {
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
            let free = if l.draining {
                0
            } else {
                capacity.saturating_sub(l.outstanding.len())
            };
            let mut idle: Option<Duration> = None;
            if free > 0 || !l.finished.is_empty() {
                let n = l.finished.len().min(l.transport.max_results());
                let batch: Vec<JobResult> = l.finished[..n].to_vec();
                let slots = u32::try_from(free).unwrap_or(u32::MAX);
                match l.call(|t| t.lease(worker, slots, &batch)) {
                    Ok(leased) => {
                        l.ok();
                        l.record_acks(&leased.acks);
                        l.stats.jobs += leased.jobs.len() as u64;
                        if free > 0 && leased.jobs.is_empty() {
                            idle = Some(leased.retry_after.max(MIN_IDLE));
                            l.waiting
                                .get_or_insert((Instant::now(), l.outstanding.len()));
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
                        for job in leased.jobs {
                            let abort = Arc::new(AtomicBool::new(false));
                            let claim = Arc::new(Claim::default());
                            aborts.push(abort.clone());
                            l.outstanding.insert(job.id, (abort.clone(), claim.clone()));
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
            let wake = idle.map_or(next_heartbeat, |d| (now + d).min(next_heartbeat));
            match rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(e) => l.event(e),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) if Instant::now() >= next_heartbeat => {
                    next_heartbeat = Instant::now() + l.heartbeat;
                    let held: Vec<Uuid> = l.outstanding.keys().copied().collect();
                    match l.call(|t| t.heartbeat(worker, &held)) {
                        Ok(cancel) => {
                            l.ok();
                            for id in cancel {
                                if let Some((a, _)) = l.outstanding.get(&id) {
                                    a.store(true, Ordering::Relaxed);
                                }
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
mod tests {
    use super::*;
    use crate::domain::Job;
    use crate::exec::LeafSearcher;
    use crate::transport::{Leased, Registration};
    use bookfarm_engine::search::{LeafRequest, LeafResult};
    use bookfarm_engine::{Board, Move};
    use std::sync::Mutex;

    /// Answers every search with the request's first legal move.
    struct FirstMove;

    impl LeafSearcher for FirstMove {
        fn search(&mut self, req: &LeafRequest, _abort: &AtomicBool) -> LeafResult {
            let mv = bookfarm_engine::board::BitIter(req.board.moves())
                .next()
                .map_or(Move::None, Move::Square);
            LeafResult {
                mv,
                score: 0,
                depth: 1,
                selectivity: 5,
                exact: false,
                nodes: 1,
                elapsed: Duration::from_micros(1),
            }
        }
    }

    /// A coordinator with a fixed list of jobs that forgets the worker once.
    #[derive(Default)]
    struct Fake {
        queue: Mutex<Vec<Job>>,
        results: Mutex<Vec<JobResult>>,
        registrations: Mutex<u32>,
        forget_once: AtomicBool,
        refuse: bool,
    }

    struct FakeTransport(Arc<Fake>);

    impl Transport for FakeTransport {
        fn endpoint(&self) -> String {
            "fake".into()
        }
        fn max_results(&self) -> usize {
            3
        }
        fn register(&mut self, _name: &str, _threads: u32) -> Result<Registration, CallError> {
            if self.0.refuse {
                return Err(CallError::new(CallErrorKind::Unauthorized, "bad token"));
            }
            *self.0.registrations.lock().unwrap() += 1;
            Ok(Registration {
                worker_id: Uuid::new_v4(),
                heartbeat: Duration::from_millis(5),
                lease_timeout: Duration::from_secs(1),
            })
        }
        fn lease(
            &mut self,
            _worker: Uuid,
            free: u32,
            results: &[JobResult],
        ) -> Result<Leased, CallError> {
            if self.0.forget_once.swap(false, Ordering::SeqCst) {
                return Err(CallError::new(
                    CallErrorKind::UnknownWorker,
                    "unknown worker",
                ));
            }
            assert!(results.len() <= 3, "at most max_results per call");
            self.0.results.lock().unwrap().extend_from_slice(results);
            let mut q = self.0.queue.lock().unwrap();
            let n = (free as usize).min(q.len());
            Ok(Leased {
                jobs: q.drain(..n).collect(),
                acks: results.iter().map(|r| (r.job_id, Ack::Accepted)).collect(),
                retry_after: Duration::from_millis(1),
            })
        }
        fn submit(
            &mut self,
            worker: Uuid,
            results: &[JobResult],
        ) -> Result<Vec<(Uuid, Ack)>, CallError> {
            Ok(self.lease(worker, 0, results)?.acks)
        }
        fn heartbeat(&mut self, _worker: Uuid, _held: &[Uuid]) -> Result<Vec<Uuid>, CallError> {
            Ok(Vec::new())
        }
        fn fail(&mut self, _: Uuid, _: Uuid, _: &str, _: bool) -> Result<bool, CallError> {
            Ok(false)
        }
        fn release(&mut self, _worker: Uuid, jobs: &[Uuid]) -> Result<u32, CallError> {
            Ok(jobs.len() as u32)
        }
    }

    fn jobs(n: usize) -> Vec<Job> {
        (0..n)
            .map(|i| Job {
                id: Uuid::new_v4(),
                board: Board::start(),
                excluded: 0,
                level: 1,
                attempt: u32::try_from(i).unwrap(),
            })
            .collect()
    }

    fn factory() -> SearcherFactory {
        Arc::new(|| -> Box<dyn LeafSearcher> { Box::new(FirstMove) })
    }

    #[test]
    fn every_job_is_searched_and_acknowledged_then_the_loop_drains() {
        let fake = Arc::new(Fake {
            queue: Mutex::new(jobs(20)),
            forget_once: AtomicBool::new(true),
            ..Fake::default()
        });
        let runner = Runner::new();
        let stop = runner.stopper();
        let t = FakeTransport(fake.clone());
        let cfg = RunnerConfig {
            threads: 2,
            ..RunnerConfig::default()
        };
        let h = std::thread::spawn(move || runner.run(cfg, t, &factory()));
        let t0 = Instant::now();
        while fake.results.lock().unwrap().len() < 20 {
            assert!(t0.elapsed() < Duration::from_secs(10), "jobs not delivered");
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.stop();
        let stats = h.join().unwrap().unwrap();
        assert_eq!((stats.jobs, stats.accepted, stats.nodes), (20, 20, 20));
        assert_eq!(
            *fake.registrations.lock().unwrap(),
            2,
            "registered again once"
        );
        let mut ids: Vec<_> = fake
            .results
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.job_id)
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 20, "each result delivered once");
        assert!(stats.idle_time >= stats.starved_time);
    }

    #[test]
    fn a_refused_worker_stops_with_the_reason() {
        let fake = Arc::new(Fake {
            refuse: true,
            ..Fake::default()
        });
        let e = Runner::new()
            .run(RunnerConfig::default(), FakeTransport(fake), &factory())
            .unwrap_err();
        assert!(
            matches!(&e, RunnerError::Refused(m) if m == "bad token"),
            "{e}"
        );
    }
}
