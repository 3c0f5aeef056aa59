//! The worker-facing service: registration, heartbeats, leases (with the results they carry),
//! submissions, failure reports and released leases.

use super::{acks, cv, identity, idst, results, st, worker_id};
use crate::error::CoordinatorError;
use crate::identity::{Identities, Principal, SessionError};
use crate::live::Live;
use crate::service::{Coordinator, RemoteWorker};
use crate::text::{MAX_NAME_CHARS, MAX_REASON_CHARS, clean};
use bookfarm_proto::domain::Failure;
use bookfarm_proto::domain::LeaseAsk;
use bookfarm_proto::pb;
use governor::{DefaultKeyedRateLimiter, Quota};
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use uuid::Uuid;

/// How long a lease that found no job waits for a growth run under way to queue some.
const GROWTH_WAIT: Duration = Duration::from_millis(500);

/// What a lease call asks for.
fn lease_ask(r: &pb::LeaseJobsRequest) -> LeaseAsk {
    LeaseAsk {
        free: r.free_slots,
        available: r.available_ms.map(Duration::from_millis),
    }
}

/// Chunks of the evaluation stream.
const EVAL_CHUNK: usize = 1 << 20;
/// Evaluation downloads one credential (or address) may make per hour, and at once.
const EVAL_FETCHES_PER_HOUR: u32 = 6;
const EVAL_FETCH_BURST: u32 = 3;

type EvalStream = Pin<Box<dyn Stream<Item = Result<pb::EvaluationChunk, Status>> + Send>>;

/// The coordinator's evaluation file (`serve --eval`), served to workers that lack it.
#[derive(Clone)]
pub struct EvalFile(pub Arc<[u8]>);

impl std::fmt::Debug for EvalFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EvalFile({} bytes)", self.0.len())
    }
}

/// The worker-facing service.
#[derive(Debug, Clone)]
pub struct WorkerApi {
    live: Live,
    ids: Identities,
    eval: Option<EvalFile>,
    fetches: Arc<DefaultKeyedRateLimiter<String>>,
}

impl WorkerApi {
    /// Handlers over the service and its credential registry.
    pub fn new(live: Live) -> WorkerApi {
        let ids = live.ids().clone();
        let quota = Quota::per_hour(NonZeroU32::new(EVAL_FETCHES_PER_HOUR).expect("not 0"))
            .allow_burst(NonZeroU32::new(EVAL_FETCH_BURST).expect("not 0"));
        WorkerApi {
            live,
            ids,
            eval: None,
            fetches: Arc::new(DefaultKeyedRateLimiter::keyed(quota)),
        }
    }

    /// Serve `eval` (the file whose fingerprint the service requires) to workers that lack it.
    pub fn with_eval(mut self, eval: Option<EvalFile>) -> WorkerApi {
        self.eval = eval;
        self
    }

    /// The service (unavailable while its store is being reopened).
    fn c(&self) -> Result<Coordinator, Status> {
        self.live.get().map_err(st)
    }

    /// The worker id of a call, which must have been opened with the caller's credential.
    fn session<T>(&self, req: &Request<T>, id: &str) -> Result<Uuid, Status> {
        let w = worker_id(id)?;
        self.ids
            .check_session(&Principal::of(req)?, &w)
            .map_err(idst)?;
        Ok(w)
    }
}

#[tonic::async_trait]
impl pb::worker_service_server::WorkerService for WorkerApi {
    async fn register_worker(
        &self,
        req: Request<pb::RegisterWorkerRequest>,
    ) -> Result<Response<pb::RegisterWorkerResponse>, Status> {
        let p = Principal::of(&req)?;
        let peer = req.remote_addr().map(|a| a.ip());
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let name = clean(&r.name, MAX_NAME_CHARS);
        let release = clean(&r.worker_version, 32);
        let who = RemoteWorker {
            name: &name,
            threads: r.threads,
            credential: p.credential().zip(p.owner()),
            trusted: p.trusted(),
            part_time: r.part_time,
            release: &release,
        };
        let c = self.c()?;
        let wid = self
            .ids
            .open_session(&p, peer, || c.register_remote(&id, &who))
            .map_err(|e| match e {
                SessionError::Identity(e) => idst(e),
                SessionError::Register(e) => st(e),
            })?;
        let cfg = c.config();
        Ok(Response::new(pb::RegisterWorkerResponse {
            worker_id: wid.to_string(),
            heartbeat_interval_ms: u32::try_from(cfg.heartbeat_interval.as_millis())
                .unwrap_or(u32::MAX),
            lease_timeout_ms: u32::try_from(cfg.lease_timeout.as_millis()).unwrap_or(u32::MAX),
            worker_version: bookfarm_proto::RELEASE.into(),
            install_hint: cfg.worker_install_hint.clone(),
        }))
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let held: Vec<Uuid> = r
            .job_ids
            .iter()
            .filter_map(|j| Uuid::parse_str(j).ok())
            .collect();
        let (cancelled, credit) = self.c()?.heartbeat_credit(&id, &w, &held).map_err(st)?;
        Ok(Response::new(pb::HeartbeatResponse {
            cancelled_job_ids: cancelled.iter().map(Uuid::to_string).collect(),
            credit: Some(pb::WorkerCredit::from(&credit)),
        }))
    }

    async fn lease_jobs(
        &self,
        req: Request<pb::LeaseJobsRequest>,
    ) -> Result<Response<pb::LeaseJobsResponse>, Status> {
        let t0 = Instant::now();
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let ask = lease_ask(&r);
        let id = identity(r.identity)?;
        let rs = results(r.results)?;
        let reply = self
            .c()?
            .submit_and_lease(&id, &w, &rs, ask, GROWTH_WAIT)
            .await
            .map_err(st)?;
        metrics::histogram!(crate::telemetry::LEASE_SECONDS).record(t0.elapsed().as_secs_f64());
        Ok(Response::new(pb::LeaseJobsResponse {
            jobs: reply.jobs.iter().map(pb::Job::from).collect(),
            acks: acks(reply.acks, &rs),
            retry_after_ms: u32::try_from(reply.retry_after.as_millis()).unwrap_or(u32::MAX),
            idle_reason: reply.idle.map_or(0, |r| pb::IdleReason::from(r) as i32),
        }))
    }

    async fn submit_results(
        &self,
        req: Request<pb::SubmitResultsRequest>,
    ) -> Result<Response<pb::SubmitResultsResponse>, Status> {
        let t0 = Instant::now();
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let rs = results(r.results)?;
        let a = self.c()?.submit_durable(&id, &w, &rs).await.map_err(st)?;
        metrics::histogram!(crate::telemetry::SUBMIT_SECONDS).record(t0.elapsed().as_secs_f64());
        Ok(Response::new(pb::SubmitResultsResponse {
            acks: acks(a, &rs),
        }))
    }

    async fn report_failure(
        &self,
        req: Request<pb::ReportFailureRequest>,
    ) -> Result<Response<pb::ReportFailureResponse>, Status> {
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity.clone())?;
        let mut f = Failure::try_from(r).map_err(cv)?;
        f.reason = clean(&f.reason, MAX_REASON_CHARS);
        let quarantined = self.c()?.fail_durable(&id, &w, &f).await.map_err(st)?;
        Ok(Response::new(pb::ReportFailureResponse { quarantined }))
    }

    async fn release(
        &self,
        req: Request<pb::ReleaseRequest>,
    ) -> Result<Response<pb::ReleaseResponse>, Status> {
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity)?;
        if r.job_ids.len() > bookfarm_proto::MAX_RESULTS_PER_CALL {
            return Err(st(CoordinatorError::TooMany {
                got: r.job_ids.len(),
                max: bookfarm_proto::MAX_RESULTS_PER_CALL,
            }));
        }
        let jobs: Vec<Uuid> = r
            .job_ids
            .iter()
            .filter_map(|j| Uuid::parse_str(j).ok())
            .collect();
        let released = self.c()?.release_leases(&id, &w, &jobs).map_err(st)?;
        Ok(Response::new(pb::ReleaseResponse { released }))
    }

    async fn get_setup(
        &self,
        _req: Request<pb::GetSetupRequest>,
    ) -> Result<Response<pb::GetSetupResponse>, Status> {
        let c = self.c()?;
        let cfg = c.config();
        Ok(Response::new(pb::GetSetupResponse {
            protocol_version: bookfarm_proto::PROTOCOL_VERSION,
            engine_version: cfg.engine_version.clone().unwrap_or_default(),
            worker_version: bookfarm_proto::RELEASE.into(),
            install_hint: cfg.worker_install_hint.clone(),
            eval_hash: cfg.eval_hash.clone().unwrap_or_default(),
            eval_bytes: self.eval.as_ref().map_or(0, |e| e.0.len() as u64),
        }))
    }

    type FetchEvaluationStream = EvalStream;

    async fn fetch_evaluation(
        &self,
        req: Request<pb::FetchEvaluationRequest>,
    ) -> Result<Response<Self::FetchEvaluationStream>, Status> {
        let p = Principal::of(&req)?;
        let peer = req.remote_addr().map(|a| a.ip());
        let want = req.into_inner().eval_hash;
        let bytes = match (&self.eval, &self.c()?.config().eval_hash) {
            (Some(e), Some(h)) if *h == want => e.0.clone(),
            _ => {
                return Err(Status::not_found(format!(
                    "this coordinator serves no evaluation of fingerprint {:?}",
                    clean(&want, 32)
                )));
            }
        };
        let who = p
            .credential()
            .map(str::to_string)
            .or_else(|| peer.map(|ip| ip.to_string()))
            .unwrap_or_default();
        if self.fetches.check_key(&who).is_err() {
            return Err(Status::resource_exhausted(format!(
                "the evaluation was fetched {EVAL_FETCH_BURST} times by {who} lately; cache it (at most {EVAL_FETCHES_PER_HOUR} per hour)"
            )));
        }
        tracing::info!(credential = %who, bytes = bytes.len(), "evaluation fetched");
        let total = bytes.len() as u64;
        let chunks: Vec<Result<pb::EvaluationChunk, Status>> = bytes
            .chunks(EVAL_CHUNK)
            .map(|c| {
                Ok(pb::EvaluationChunk {
                    total_bytes: total,
                    data: c.to_vec(),
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }
}
