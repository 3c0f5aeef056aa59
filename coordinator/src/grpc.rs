//! Thin gRPC handlers: decode (validating conversions), call the domain service, encode.
//! Every domain error becomes a status through `bookfarm_proto::status::to_status`.

use crate::error::CoordinatorError;
use crate::export::{ExportFormat, decode, encode};
use crate::service::{Coordinator, State};
use bookfarm_proto::convert::{ConvertError, required};
use bookfarm_proto::domain::{Failure, Identity, JobResult};
use bookfarm_proto::pb;
use bookfarm_proto::status::to_status;
use futures::Stream;
use std::pin::Pin;
use std::time::Instant;

/// How long a lease that found no job waits for a growth run under way to queue some.
const GROWTH_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
use tonic::{Request, Response, Status};
use uuid::Uuid;

fn st(e: CoordinatorError) -> Status {
    to_status(&e)
}

fn cv(e: ConvertError) -> Status {
    to_status(&e)
}

fn identity(i: Option<pb::WorkerIdentity>) -> Result<Identity, Status> {
    Ok(required(i, "identity").map_err(cv)?.into())
}

fn worker_id(s: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(s).map_err(|_| {
        st(CoordinatorError::UnknownWorker(
            s.chars().take(64).collect(),
        ))
    })
}

fn results(rs: Vec<pb::LeafResult>) -> Result<Vec<JobResult>, Status> {
    if rs.len() > bookfarm_proto::MAX_RESULTS_PER_CALL {
        return Err(st(CoordinatorError::TooMany {
            got: rs.len(),
            max: bookfarm_proto::MAX_RESULTS_PER_CALL,
        }));
    }
    rs.into_iter()
        .map(|r| JobResult::try_from(r).map_err(cv))
        .collect()
}

fn acks(a: Vec<bookfarm_proto::domain::Ack>, rs: &[JobResult]) -> Vec<pb::ResultAck> {
    a.into_iter()
        .zip(rs)
        .map(|(a, r)| pb::ResultAck {
            job_id: r.job_id.to_string(),
            status: pb::AckStatus::from(a) as i32,
        })
        .collect()
}

/// The worker-facing service.
#[derive(Debug, Clone)]
pub struct WorkerApi(pub Coordinator);

#[tonic::async_trait]
impl pb::worker_service_server::WorkerService for WorkerApi {
    async fn register_worker(
        &self,
        req: Request<pb::RegisterWorkerRequest>,
    ) -> Result<Response<pb::RegisterWorkerResponse>, Status> {
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let wid = self.0.register(&id, &r.name, r.threads).map_err(st)?;
        let cfg = self.0.config();
        Ok(Response::new(pb::RegisterWorkerResponse {
            worker_id: wid.to_string(),
            heartbeat_interval_ms: u32::try_from(cfg.heartbeat_interval.as_millis())
                .unwrap_or(u32::MAX),
            lease_timeout_ms: u32::try_from(cfg.lease_timeout.as_millis()).unwrap_or(u32::MAX),
        }))
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let w = worker_id(&r.worker_id)?;
        let held: Vec<Uuid> = r
            .job_ids
            .iter()
            .filter_map(|j| Uuid::parse_str(j).ok())
            .collect();
        let cancelled = self.0.heartbeat(&id, &w, &held).map_err(st)?;
        Ok(Response::new(pb::HeartbeatResponse {
            cancelled_job_ids: cancelled.iter().map(Uuid::to_string).collect(),
        }))
    }

    async fn lease_jobs(
        &self,
        req: Request<pb::LeaseJobsRequest>,
    ) -> Result<Response<pb::LeaseJobsResponse>, Status> {
        let t0 = Instant::now();
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let w = worker_id(&r.worker_id)?;
        let rs = results(r.results)?;
        let a = if rs.is_empty() {
            Vec::new()
        } else {
            self.0.submit(&id, &w, &rs).map_err(st)?
        };
        let jobs = self
            .0
            .lease_waiting(&id, &w, r.free_slots, GROWTH_WAIT)
            .await
            .map_err(st)?;
        if !rs.is_empty() {
            // Acknowledge only what is durable.
            self.0.wait_durable().await.map_err(st)?;
        }
        let retry_after_ms = if jobs.is_empty() {
            u32::try_from(self.0.config().retry_after.as_millis()).unwrap_or(u32::MAX)
        } else {
            0
        };
        metrics::histogram!("bookfarm_lease_seconds").record(t0.elapsed().as_secs_f64());
        Ok(Response::new(pb::LeaseJobsResponse {
            jobs: jobs.iter().map(pb::Job::from).collect(),
            acks: acks(a, &rs),
            retry_after_ms,
        }))
    }

    async fn submit_results(
        &self,
        req: Request<pb::SubmitResultsRequest>,
    ) -> Result<Response<pb::SubmitResultsResponse>, Status> {
        let t0 = Instant::now();
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let w = worker_id(&r.worker_id)?;
        let rs = results(r.results)?;
        let a = self.0.submit(&id, &w, &rs).map_err(st)?;
        self.0.wait_durable().await.map_err(st)?;
        metrics::histogram!("bookfarm_submit_seconds").record(t0.elapsed().as_secs_f64());
        Ok(Response::new(pb::SubmitResultsResponse {
            acks: acks(a, &rs),
        }))
    }

    async fn report_failure(
        &self,
        req: Request<pb::ReportFailureRequest>,
    ) -> Result<Response<pb::ReportFailureResponse>, Status> {
        let r = req.into_inner();
        let id = identity(r.identity.clone())?;
        let w = worker_id(&r.worker_id)?;
        let f = Failure::try_from(r).map_err(cv)?;
        let quarantined = self.0.fail(&id, &w, &f).map_err(st)?;
        self.0.wait_durable().await.map_err(st)?;
        Ok(Response::new(pb::ReportFailureResponse { quarantined }))
    }
}

/// The operator-facing service.
#[derive(Debug, Clone)]
pub struct AdminApi(pub Coordinator);

impl AdminApi {
    fn auth(&self, a: Option<pb::AdminAuth>) -> Result<(), Status> {
        self.0
            .check_admin(&a.map(|a| a.auth_token).unwrap_or_default())
            .map_err(st)
    }
}

fn state(s: State) -> pb::ExpansionState {
    match s {
        State::Idle => pb::ExpansionState::Idle,
        State::Running => pb::ExpansionState::Running,
        State::Paused => pb::ExpansionState::Paused,
        State::Done => pb::ExpansionState::Done,
    }
}

/// Size of the chunks an export is streamed in.
const EXPORT_CHUNK: usize = 1 << 20;

type ExportStream = Pin<Box<dyn Stream<Item = Result<pb::ExportChunk, Status>> + Send>>;

#[tonic::async_trait]
impl pb::admin_service_server::AdminService for AdminApi {
    async fn get_status(
        &self,
        req: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        self.auth(req.into_inner().auth)?;
        let s = self.0.status();
        Ok(Response::new(pb::GetStatusResponse {
            positions: s.positions,
            queued: s.queued,
            in_flight: s.in_flight,
            workers: s
                .workers
                .iter()
                .map(|w| pb::WorkerStatus {
                    worker_id: w.id.to_string(),
                    name: w.name.clone(),
                    threads: w.threads,
                    in_flight: u32::try_from(w.in_flight).unwrap_or(u32::MAX),
                    completed: w.completed,
                    failed: w.failed,
                    results_per_second: w.results_per_second,
                    last_seen_ms: u64::try_from(w.last_seen.as_millis()).unwrap_or(u64::MAX),
                })
                .collect(),
            results_per_second: s.results_per_second,
            state: state(s.state) as i32,
            expansion: s.expansion,
            completed: s.completed,
            quarantined: s
                .quarantined
                .iter()
                .map(|q| pb::QuarantinedJob {
                    job_id: q.job_id.to_string(),
                    position: Some((&q.board).into()),
                    last_reason: q.reason.clone(),
                })
                .collect(),
            root_value: s.root_value,
        }))
    }

    async fn start_expansion(
        &self,
        req: Request<pb::StartExpansionRequest>,
    ) -> Result<Response<pb::StartExpansionResponse>, Status> {
        let r = req.into_inner();
        self.auth(r.auth)?;
        let sel = required(r.selector, "selector").map_err(cv)?.into();
        let level = u8::try_from(r.level)
            .ok()
            .filter(|l| *l <= 60)
            .ok_or_else(|| cv(ConvertError::Level(r.level)))?;
        let c = self.0.clone();
        let queued = tokio::task::spawn_blocking(move || c.start_expansion(sel, level))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(st)?;
        Ok(Response::new(pb::StartExpansionResponse { queued }))
    }

    async fn pause(
        &self,
        req: Request<pb::PauseRequest>,
    ) -> Result<Response<pb::PauseResponse>, Status> {
        self.auth(req.into_inner().auth)?;
        self.0.set_paused(true).map_err(st)?;
        Ok(Response::new(pb::PauseResponse {}))
    }

    async fn resume(
        &self,
        req: Request<pb::ResumeRequest>,
    ) -> Result<Response<pb::ResumeResponse>, Status> {
        self.auth(req.into_inner().auth)?;
        self.0.set_paused(false).map_err(st)?;
        Ok(Response::new(pb::ResumeResponse {}))
    }

    type ExportBookStream = ExportStream;

    async fn export_book(
        &self,
        req: Request<pb::ExportBookRequest>,
    ) -> Result<Response<Self::ExportBookStream>, Status> {
        let r = req.into_inner();
        self.auth(r.auth)?;
        let format = match pb::ExportFormat::try_from(r.format) {
            Ok(pb::ExportFormat::Csv) => ExportFormat::Csv,
            Ok(pb::ExportFormat::Edax) | Ok(pb::ExportFormat::Unspecified) => ExportFormat::Edax,
            Err(_) => {
                return Err(cv(ConvertError::Enum {
                    field: "format",
                    value: r.format,
                }));
            }
        };
        let c = self.0.clone();
        let bytes = tokio::task::spawn_blocking(move || {
            let (h, positions) = c.snapshot();
            encode(h, &positions, format)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        let chunks: Vec<Result<pb::ExportChunk, Status>> = bytes
            .chunks(EXPORT_CHUNK)
            .map(|c| Ok(pb::ExportChunk { data: c.to_vec() }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn import_book(
        &self,
        req: Request<pb::ImportBookRequest>,
    ) -> Result<Response<pb::ImportBookResponse>, Status> {
        let r = req.into_inner();
        self.auth(r.auth)?;
        let c = self.0.clone();
        let n = tokio::task::spawn_blocking(move || {
            let (h, positions) = decode(&r.data)
                .map_err(|e| CoordinatorError::InvalidArgument(format!("book.dat: {e}")))?;
            c.import(h, positions)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(st)?;
        Ok(Response::new(pb::ImportBookResponse { positions: n }))
    }

    async fn book_info(
        &self,
        req: Request<pb::BookInfoRequest>,
    ) -> Result<Response<pb::BookInfoResponse>, Status> {
        self.auth(req.into_inner().auth)?;
        let (h, positions, links, leaves) = self.0.info();
        Ok(Response::new(pb::BookInfoResponse {
            level: u32::try_from(h.level).unwrap_or(0),
            depth: u32::try_from(h.depth()).unwrap_or(0),
            midgame_error: h.midgame_error,
            endcut_error: h.endcut_error,
            positions,
            links,
            leaves,
        }))
    }

    async fn show_position(
        &self,
        req: Request<pb::ShowPositionRequest>,
    ) -> Result<Response<pb::ShowPositionResponse>, Status> {
        let r = req.into_inner();
        self.auth(r.auth)?;
        let p = self.0.show(&r.moves).map_err(st)?;
        let link = |l: &bookfarm_book::Link| pb::BookLink {
            r#move: u32::from(l.mv.code()),
            score: i32::from(l.score),
        };
        Ok(Response::new(match p {
            None => pb::ShowPositionResponse::default(),
            Some(p) => pb::ShowPositionResponse {
                found: true,
                position: Some((&p.board).into()),
                value: i32::from(p.value),
                lower: i32::from(p.lower),
                upper: i32::from(p.upper),
                level: u32::from(p.level),
                links: p.links.iter().map(link).collect(),
                leaf: Some(link(&p.leaf)),
                wins: p.n_wins,
                draws: p.n_draws,
                losses: p.n_losses,
                lines: p.n_lines,
            },
        }))
    }
}
