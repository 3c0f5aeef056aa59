//! The worker's pull loop.

use crate::client::Client;
use crate::config::WorkerConfig;
use crate::exec::{Claim, LeafSearcher, Outcome, Pool, Task};
use bookfarm_proto::domain::{Ack, Identity, JobResult};
use bookfarm_proto::{ENGINE_VERSION, MAX_RESULTS_PER_CALL, PROTOCOL_VERSION};
use rand::Rng;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tonic::{Code, Status};
use uuid::Uuid;

/// First reconnection delay.
const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// Heartbeat period until the coordinator tells us its own.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);

/// Why a worker stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The coordinator refuses this worker (token, protocol, engine or eval mismatch).
    #[error("coordinator refused this worker: {0}")]
    Refused(String),
    /// Bad configuration (URL).
    #[error("{0}")]
    Config(String),
    /// The search threads could not be started.
    #[error("starting search threads: {0}")]
    Threads(#[from] std::io::Error),
    /// The coordinator stayed unreachable for longer than `give_up_after`.
    #[error("coordinator unreachable for {0:?}; giving up")]
    GaveUp(Duration),
}

/// Figures of one worker run.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerStats {
    /// Jobs received.
    pub jobs: u64,
    /// Results the coordinator accepted.
    pub accepted: u64,
    /// Results it already had.
    pub duplicates: u64,
    /// Results it found stale.
    pub stale: u64,
    /// Results it refused (dropped).
    pub refused: u64,
    /// Nodes searched.
    pub nodes: u64,
    /// Time spent searching (sum over threads).
    pub search_time: Duration,
    /// Time spent in RPCs.
    pub rpc_time: Duration,
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

/// Whether an error on a call without results means "this worker cannot work here" (a bad,
/// revoked or blocked credential, or incompatible software).
fn fatal(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::Unauthenticated | Code::PermissionDenied | Code::FailedPrecondition
    )
}

fn unknown_worker(s: &Status) -> bool {
    s.code() == Code::NotFound && s.message().starts_with("unknown worker")
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

/// A factory of searchers, one per thread.
pub type SearcherFactory = Arc<dyn Fn() -> Box<dyn LeafSearcher> + Send + Sync>;

struct Loop {
    cfg: WorkerConfig,
    client: Client,
    worker: Option<Uuid>,
    heartbeat: Duration,
    outstanding: HashMap<Uuid, (Arc<AtomicBool>, Arc<Claim>)>,
    finished: Vec<JobResult>,
    failures: Vec<(Uuid, String)>,
    stats: WorkerStats,
    backoff: Backoff,
    last_ok: Instant,
}

impl Loop {
    fn outcome(&mut self, o: Outcome) {
        match o {
            Outcome::Done(r) => {
                if self.outstanding.remove(&r.job_id).is_some() {
                    self.stats.nodes += r.nodes;
                    self.stats.search_time += r.elapsed;
                    tracing::debug!(job_id = %r.job_id, mv = %r.mv, score = r.score, nodes = r.nodes, "search done");
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

    fn ok(&mut self) {
        self.backoff.reset();
        self.last_ok = Instant::now();
    }

    fn record_acks(&mut self, acks: &[(Uuid, Ack)]) {
        for (id, a) in acks {
            if let Some(h) = &self.cfg.on_ack {
                (h.0)(*id, *a);
            }
            match a {
                Ack::Accepted => self.stats.accepted += 1,
                Ack::Duplicate => self.stats.duplicates += 1,
                Ack::Stale => self.stats.stale += 1,
            }
            self.finished.retain(|r| r.job_id != *id);
        }
    }

    /// Connection trouble: wait, or give up.
    async fn wait_backoff(&mut self, s: &Status) -> Result<(), WorkerError> {
        if let Some(limit) = self.cfg.give_up_after
            && self.last_ok.elapsed() > limit
        {
            return Err(WorkerError::GaveUp(limit));
        }
        let d = self.backoff.step();
        tracing::warn!(code = ?s.code(), error = %s.message(), retry_in_ms = d.as_millis() as u64, "coordinator call failed");
        tokio::time::sleep(d).await;
        Ok(())
    }

    /// Draining: withdraw the leased jobs no thread has started and hand them back (`Release`),
    /// so that other workers search them now rather than after a lease timeout.
    async fn release_unstarted(&mut self, worker: Uuid) {
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
        match self.client.release(worker, &withdrawn).await {
            Ok(n) => tracing::info!(released = n, "handed unstarted jobs back"),
            Err(s) => {
                tracing::warn!(error = %s.message(), "could not hand jobs back; they return after the lease timeout")
            }
        }
    }

    /// The coordinator refused a batch: submit the results one by one and drop the refused ones.
    async fn submit_singly(&mut self, worker: Uuid) {
        let batch: Vec<JobResult> = self.finished.clone();
        for r in batch {
            let t0 = Instant::now();
            let res = self.client.submit(worker, &[r]).await;
            self.stats.rpc_time += t0.elapsed();
            match res {
                Ok(acks) => self.record_acks(&acks),
                Err(s)
                    if matches!(
                        s.code(),
                        Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition
                    ) && !unknown_worker(&s) =>
                {
                    tracing::warn!(job_id = %r.job_id, error = %s.message(), "result refused; dropped");
                    self.stats.refused += 1;
                    self.finished.retain(|x| x.job_id != r.job_id);
                }
                Err(_) => return,
            }
        }
    }
}

/// Run a worker until `shutdown` resolves (then drain: finish leased jobs, deliver their
/// results, exit).
pub async fn run(
    cfg: WorkerConfig,
    make: SearcherFactory,
    shutdown: impl Future<Output = ()>,
) -> Result<WorkerStats, WorkerError> {
    let identity = Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.to_string(),
        eval_hash: cfg.eval_hash.clone(),
        search_signature: cfg.search_signature.clone(),
    };
    let client = Client::with_tls(
        &cfg.coordinator,
        &identity,
        &cfg.token,
        cfg.rpc_timeout,
        cfg.tls_ca.as_deref(),
        cfg.tls_domain.as_deref(),
    )
    .map_err(WorkerError::Config)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let threads = cfg.threads.max(1);
    let pool = Pool::new(threads, &*make, tx)?;
    let capacity = threads + cfg.lookahead;
    // Declared after the pool, so dropped before it: abandons running searches on any exit
    // path before the pool joins its threads.
    let aborts = AbortAll::default();
    let mut l = Loop {
        backoff: Backoff::new(cfg.max_backoff),
        cfg,
        client,
        worker: None,
        heartbeat: DEFAULT_HEARTBEAT,
        outstanding: HashMap::new(),
        finished: Vec::new(),
        failures: Vec::new(),
        stats: WorkerStats::default(),
        last_ok: Instant::now(),
    };
    tokio::pin!(shutdown);
    let mut draining = false;
    let mut next_heartbeat = tokio::time::Instant::now() + l.heartbeat;
    loop {
        while let Ok(o) = rx.try_recv() {
            l.outcome(o);
        }
        if draining && l.outstanding.is_empty() && l.finished.is_empty() && l.failures.is_empty() {
            break;
        }
        let Some(worker) = l.worker else {
            let t0 = Instant::now();
            let r = l
                .client
                .register(&l.cfg.name, u32::try_from(threads).unwrap_or(u32::MAX))
                .await;
            l.stats.rpc_time += t0.elapsed();
            match r {
                Ok(reg) => {
                    l.ok();
                    l.worker = Some(reg.worker_id);
                    l.heartbeat = reg.heartbeat;
                    tracing::info!(worker_id = %reg.worker_id, coordinator = %l.cfg.coordinator, threads, "registered");
                }
                Err(s) if fatal(&s) => return Err(WorkerError::Refused(s.message().to_string())),
                Err(s) => {
                    if draining && l.outstanding.is_empty() {
                        tracing::warn!(
                            undelivered = l.finished.len(),
                            "coordinator unreachable while draining; exiting"
                        );
                        break;
                    }
                    tokio::select! {
                        r = l.wait_backoff(&s) => r?,
                        _ = &mut shutdown, if !draining => { draining = true; }
                    }
                }
            }
            continue;
        };
        // Failures first (rare).
        for (job, msg) in std::mem::take(&mut l.failures) {
            if let Err(s) = l.client.fail(worker, job, &msg, true).await {
                tracing::warn!(job_id = %job, error = %s.message(), "could not report failure");
            }
        }
        let free = if draining {
            0
        } else {
            capacity.saturating_sub(l.outstanding.len())
        };
        let mut idle: Option<Duration> = None;
        if free > 0 || !l.finished.is_empty() {
            let n = l.finished.len().min(MAX_RESULTS_PER_CALL);
            let batch: Vec<JobResult> = l.finished[..n].to_vec();
            let t0 = Instant::now();
            let r = l
                .client
                .lease(worker, u32::try_from(free).unwrap_or(u32::MAX), &batch)
                .await;
            l.stats.rpc_time += t0.elapsed();
            match r {
                Ok(leased) => {
                    l.ok();
                    l.record_acks(&leased.acks);
                    l.stats.jobs += leased.jobs.len() as u64;
                    if free > 0 && leased.jobs.is_empty() {
                        idle = Some(leased.retry_after.max(Duration::from_millis(10)));
                    }
                    for job in leased.jobs {
                        let abort = Arc::new(AtomicBool::new(false));
                        let claim = Arc::new(Claim::default());
                        aborts.push(abort.clone());
                        l.outstanding.insert(job.id, (abort.clone(), claim.clone()));
                        pool.submit(Task { job, abort, claim });
                    }
                }
                Err(s) if unknown_worker(&s) => {
                    tracing::warn!("coordinator forgot this worker; registering again");
                    l.worker = None;
                    continue;
                }
                Err(s)
                    if !batch.is_empty()
                        && matches!(
                            s.code(),
                            Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition
                        ) =>
                {
                    l.submit_singly(worker).await;
                    continue;
                }
                Err(s) if fatal(&s) => return Err(WorkerError::Refused(s.message().to_string())),
                Err(s) => {
                    tokio::select! {
                        r = l.wait_backoff(&s) => r?,
                        _ = &mut shutdown, if !draining => { draining = true; }
                    }
                    continue;
                }
            }
        }
        if !l.finished.is_empty() && (free > 0 || draining) && idle.is_none() {
            // More results than one call carries: loop at once.
            continue;
        }
        let idle_sleep = tokio::time::sleep(idle.unwrap_or(Duration::from_secs(3600)));
        tokio::select! {
            o = rx.recv() => if let Some(o) = o { l.outcome(o) },
            _ = tokio::time::sleep_until(next_heartbeat) => {
                next_heartbeat = tokio::time::Instant::now() + l.heartbeat;
                let held: Vec<Uuid> = l.outstanding.keys().copied().collect();
                match l.client.heartbeat(worker, &held).await {
                    Ok(cancel) => {
                        l.ok();
                        for id in cancel {
                            if let Some((a, _)) = l.outstanding.get(&id) {
                                a.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(s) if unknown_worker(&s) => l.worker = None,
                    Err(s) if matches!(s.code(), Code::Unauthenticated | Code::PermissionDenied) => {
                        return Err(WorkerError::Refused(s.message().to_string()));
                    }
                    Err(s) => tracing::debug!(error = %s.message(), "heartbeat failed"),
                }
            }
            _ = idle_sleep, if idle.is_some() => {}
            _ = &mut shutdown, if !draining => {
                draining = true;
                l.release_unstarted(worker).await;
                tracing::info!(in_flight = l.outstanding.len(), "draining: finishing started jobs");
            }
        }
    }
    drop(aborts);
    drop(pool);
    tracing::info!(
        accepted = l.stats.accepted,
        jobs = l.stats.jobs,
        "worker stopped"
    );
    Ok(l.stats)
}
