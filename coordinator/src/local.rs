//! In-process workers: the runner's worker loop ([`bookfarm_runner::Runner`]) on this machine's
//! threads, calling the [`Coordinator`] service directly through [`InProcess`] (no TCP, no
//! protobuf). `bookfarm-coordinator local` and the searching `book … --db` commands use it.
//!
//! Durability: a remote worker's result is acknowledged only after a flush (the gRPC handlers
//! wait for it). In-process results are acknowledged once applied to the store, which sled
//! flushes within a second: a crash loses at most that second of searches, and the growth state
//! stored with the book never runs ahead of the results (sled recovers a prefix of its log), so
//! running the command again searches them again.

use crate::error::{CoordinatorError, Result};
use crate::live::Live;
use crate::service::{Coordinator, State, StatusReport};
use bookfarm_proto::domain::{Ack, Failure, Identity, JobResult};
use bookfarm_proto::status::{ErrorCode, ServiceError};
use bookfarm_proto::{ENGINE_VERSION, MAX_RESULTS_PER_CALL, PROTOCOL_VERSION};
use bookfarm_runner::exec::SearcherFactory;
use bookfarm_runner::transport::{
    Beat, CallError, CallErrorKind, LeaseAsk, Leased, Registration, Transport, WorkerInfo,
};
use bookfarm_runner::{Runner, RunnerConfig, WorkerStats};
use std::future::Future;
use std::time::Duration;
use uuid::Uuid;

/// How often progress is reported.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// How long an in-process lease that found no job waits for growth runs under way to queue the
/// next searches.
const GROWTH_WAIT: Duration = Duration::from_millis(500);

/// What a service error means to the worker loop.
fn call_error(e: &CoordinatorError) -> CallError {
    let kind = match e.code() {
        ErrorCode::UnknownWorker => CallErrorKind::UnknownWorker,
        ErrorCode::Unauthenticated | ErrorCode::PermissionDenied => CallErrorKind::Unauthorized,
        ErrorCode::FailedPrecondition => CallErrorKind::Incompatible,
        ErrorCode::InvalidArgument | ErrorCode::NotFound | ErrorCode::ResourceExhausted => {
            CallErrorKind::Rejected
        }
        _ => CallErrorKind::Unavailable,
    };
    CallError::new(kind, e.to_string())
}

/// The worker loop's transport into a coordinator in this process: each call is the domain
/// service's method of the same name.
#[derive(Debug, Clone)]
pub struct InProcess {
    live: Live,
    identity: Identity,
    /// Registers as the coordinator's verifier (check jobs only).
    verifier: bool,
}

impl InProcess {
    /// Calls into `c` with the identity of a worker searching with `search_signature` over
    /// weights whose fingerprint is `eval_hash`.
    pub fn new(c: Coordinator, eval_hash: &str, search_signature: &str) -> InProcess {
        InProcess::over(
            Live::fixed(c, crate::identity::Identities::local()),
            eval_hash,
            search_signature,
        )
    }

    /// [`InProcess::new`] over the service `live` serves (unavailable while its store is being
    /// reopened).
    pub fn over(live: Live, eval_hash: &str, search_signature: &str) -> InProcess {
        InProcess {
            live,
            identity: Identity {
                protocol_version: PROTOCOL_VERSION,
                engine_version: ENGINE_VERSION.to_string(),
                eval_hash: eval_hash.to_string(),
                search_signature: search_signature.to_string(),
            },
            verifier: false,
        }
    }

    /// [`InProcess::new`] for the coordinator's verifier: it answers validation and
    /// spot-check searches only (see `crate::service::trust`).
    pub fn verifier(live: Live, eval_hash: &str, search_signature: &str) -> InProcess {
        InProcess {
            verifier: true,
            ..InProcess::over(live, eval_hash, search_signature)
        }
    }

    /// The service.
    fn c(&self) -> Result<Coordinator, CallError> {
        self.live.get().map_err(|e| call_error(&e))
    }

    fn acks(&self, worker: Uuid, results: &[JobResult]) -> Result<Vec<(Uuid, Ack)>, CallError> {
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let a = self
            .c()?
            .submit(&self.identity, &worker, results)
            .map_err(|e| call_error(&e))?;
        Ok(results.iter().map(|r| r.job_id).zip(a).collect())
    }
}

impl Transport for InProcess {
    fn endpoint(&self) -> String {
        "in-process".into()
    }

    fn max_results(&self) -> usize {
        MAX_RESULTS_PER_CALL
    }

    fn register(&mut self, who: &WorkerInfo) -> Result<Registration, CallError> {
        let c = self.c()?;
        let worker_id = if self.verifier {
            c.register_verifier(&self.identity, who.threads)
        } else {
            c.register(&self.identity, &who.name, who.threads)
        }
        .map_err(|e| call_error(&e))?;
        let cfg = c.config();
        Ok(Registration {
            worker_id,
            heartbeat: cfg.heartbeat_interval,
            lease_timeout: cfg.lease_timeout,
        })
    }

    fn lease(
        &mut self,
        worker: Uuid,
        ask: LeaseAsk,
        results: &[JobResult],
    ) -> Result<Leased, CallError> {
        let acks = self.acks(worker, results)?;
        let c = self.c()?;
        let offer = c
            .offer_blocking(&self.identity, &worker, ask, GROWTH_WAIT)
            .map_err(|e| call_error(&e))?;
        let retry_after = if offer.jobs.is_empty() {
            c.retry_after()
        } else {
            Duration::ZERO
        };
        Ok(Leased {
            jobs: offer.jobs,
            acks,
            retry_after,
            idle: offer.idle,
        })
    }

    fn submit(
        &mut self,
        worker: Uuid,
        results: &[JobResult],
    ) -> Result<Vec<(Uuid, Ack)>, CallError> {
        self.acks(worker, results)
    }

    fn heartbeat(&mut self, worker: Uuid, held: &[Uuid]) -> Result<Beat, CallError> {
        let (cancelled, credit) = self
            .c()?
            .heartbeat_credit(&self.identity, &worker, held)
            .map_err(|e| call_error(&e))?;
        Ok(Beat {
            cancelled,
            credit: Some(credit),
        })
    }

    fn fail(
        &mut self,
        worker: Uuid,
        job: Uuid,
        reason: &str,
        retryable: bool,
    ) -> Result<bool, CallError> {
        let f = Failure {
            job_id: job,
            reason: reason.to_string(),
            retryable,
        };
        self.c()?
            .fail(&self.identity, &worker, &f)
            .map_err(|e| call_error(&e))
    }

    fn release(&mut self, worker: Uuid, jobs: &[Uuid]) -> Result<u32, CallError> {
        self.c()?
            .release_leases(&self.identity, &worker, jobs)
            .map_err(|e| call_error(&e))
    }
}

/// Options of a local run.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Search threads of the in-process worker.
    pub workers: usize,
    /// Fingerprint of the evaluation the searchers load.
    pub eval_hash: String,
    /// The searchers' search signature.
    pub search_signature: String,
    /// Optional HTTP listener address for metrics.
    pub http: Option<String>,
    /// Jobs leased beyond the free threads (hides the call between two searches; more hoards
    /// jobs at the end of a pass).
    pub lookahead: usize,
}

/// What a local run did.
#[derive(Debug, Clone, Default)]
pub struct LocalOutcome {
    /// Stopped by the interrupt rather than by reaching the fixed point.
    pub interrupted: bool,
    /// The in-process worker's figures (search, call and idle time, results).
    pub workers: Vec<WorkerStats>,
}

impl LocalOutcome {
    /// Share of worker thread time spent without a job (`idle_time` over threads × wall).
    pub fn idle_share(&self, threads: usize) -> f64 {
        let idle: f64 = self.workers.iter().map(|w| w.idle_time.as_secs_f64()).sum();
        let wall: f64 = self
            .workers
            .iter()
            .map(|w| w.wall_time.as_secs_f64())
            .fold(0.0, f64::max);
        let total = wall * threads.max(1) as f64;
        if total > 0.0 { idle / total } else { 0.0 }
    }
}

/// Run in-process workers (`opts.workers` search threads) on `c` until its expansion is done
/// (or `interrupt` resolves), then stop them (drain) and flush the store. `progress` is called
/// every [`PROGRESS_INTERVAL`]. With `opts.http`, the metrics endpoints are served meanwhile.
pub async fn run(
    c: Coordinator,
    opts: &LocalOptions,
    factory: SearcherFactory,
    interrupt: impl Future<Output = ()>,
    mut progress: impl FnMut(&StatusReport),
) -> Result<LocalOutcome> {
    let (stop_http, http_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let http = match &opts.http {
        Some(h) => {
            let l = tokio::net::TcpListener::bind(h)
                .await
                .map_err(|e| CoordinatorError::Internal(format!("binding HTTP {h}: {e}")))?;
            let _ = crate::http::metrics_handle();
            let app = crate::http::router(c.clone(), crate::identity::Identities::local());
            Some(tokio::spawn(async move {
                axum::serve(l, app)
                    .with_graceful_shutdown(async {
                        let _ = http_stop_rx.await;
                    })
                    .await
            }))
        }
        None => None,
    };
    let runner = Runner::new();
    let stopper = runner.stopper();
    let cfg = RunnerConfig {
        threads: opts.workers.max(1),
        lookahead: opts.lookahead,
        name: "local".into(),
        ..RunnerConfig::default()
    };
    let transport = InProcess::new(c.clone(), &opts.eval_hash, &opts.search_signature);
    let mut worker = tokio::task::spawn_blocking(move || runner.run(cfg, transport, &factory));
    tokio::pin!(interrupt);
    let mut interrupted = false;
    let mut finished = None;
    loop {
        let s = c.status();
        progress(&s);
        if s.state == State::Done {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(PROGRESS_INTERVAL) => {}
            _ = &mut interrupt => { interrupted = true; break; }
            // The loop only returns early when the service refuses it (a bug in this process).
            r = &mut worker => { finished = Some(r); break; }
        }
    }
    stopper.stop();
    let joined = match finished {
        Some(r) => r,
        None => worker.await,
    };
    let stats = match joined {
        Ok(r) => r.map_err(|e| CoordinatorError::Internal(format!("in-process worker: {e}"))),
        Err(e) => Err(CoordinatorError::Internal(format!(
            "in-process worker: {e}"
        ))),
    };
    if let Some(h) = http {
        let _ = stop_http.send(());
        let _ = h.await;
    }
    c.flush()?;
    Ok(LocalOutcome {
        interrupted,
        workers: vec![stats?],
    })
}

/// The coordinator's verifier running on `threads` threads of this process (its configured
/// share of the CPU), until the returned handle is stopped or dropped.
pub fn spawn_verifier(
    live: Live,
    threads: usize,
    factory: SearcherFactory,
    eval_hash: &str,
    search_signature: &str,
) -> Verifier {
    let runner = Runner::new();
    let stopper = runner.stopper();
    let cfg = RunnerConfig {
        threads: threads.max(1),
        lookahead: 0,
        name: "verifier".into(),
        ..RunnerConfig::default()
    };
    let transport = InProcess::verifier(live, eval_hash, search_signature);
    let thread = std::thread::spawn(move || {
        if let Err(e) = runner.run(cfg, transport, &factory) {
            tracing::error!(error = %e, "verifier stopped");
        }
    });
    Verifier {
        stopper,
        thread: Some(thread),
    }
}

/// A running verifier (stopped when dropped).
#[derive(Debug)]
pub struct Verifier {
    stopper: bookfarm_runner::Stopper,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Verifier {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
