//! Thin gRPC handlers: decode (validating conversions), call the domain service, encode.
//! Every domain error becomes a status through `bookfarm_proto::status::to_status`.
//!
//! Credentials were checked by the interceptors before a body was read (`crate::identity`);
//! worker handlers bind worker ids to the caller's credential, escape and truncate the strings
//! a worker supplies (`crate::text`), and admin replies are bounded (paged status).

use crate::error::CoordinatorError;
use crate::export::{ExportFormat, decode, encode_book};
use crate::identity::{Identities, IdentityError, Principal, SessionError};
use crate::service::{Coordinator, State, StatusReport};
use crate::service::{CreditReport, TrustCounters};
use crate::store::{CredentialRecord, CredentialState};
use crate::text::{MAX_NAME_CHARS, MAX_REASON_CHARS, clean};
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
    if matches!(e, CoordinatorError::Store(_)) {
        metrics::counter!(crate::telemetry::STORE_ERRORS).increment(1);
    }
    to_status(&e)
}

fn cv(e: ConvertError) -> Status {
    to_status(&e)
}

fn idst(e: IdentityError) -> Status {
    to_status(&e)
}

fn identity(i: Option<pb::WorkerIdentity>) -> Result<Identity, Status> {
    Ok(required(i, "identity").map_err(cv)?.into())
}

fn worker_id(s: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(s).map_err(|_| st(CoordinatorError::UnknownWorker(clean(s, MAX_NAME_CHARS))))
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
pub struct WorkerApi {
    c: Coordinator,
    ids: Identities,
}

impl WorkerApi {
    /// Handlers over the service and the credential registry.
    pub fn new(c: Coordinator, ids: Identities) -> WorkerApi {
        WorkerApi { c, ids }
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
        let wid = self
            .ids
            .open_session(&p, peer, || {
                self.c.register_as(
                    &id,
                    &name,
                    r.threads,
                    p.credential().zip(p.owner()),
                    p.trusted(),
                )
            })
            .map_err(|e| match e {
                SessionError::Identity(e) => idst(e),
                SessionError::Register(e) => st(e),
            })?;
        let cfg = self.c.config();
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
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let held: Vec<Uuid> = r
            .job_ids
            .iter()
            .filter_map(|j| Uuid::parse_str(j).ok())
            .collect();
        let cancelled = self.c.heartbeat(&id, &w, &held).map_err(st)?;
        Ok(Response::new(pb::HeartbeatResponse {
            cancelled_job_ids: cancelled.iter().map(Uuid::to_string).collect(),
        }))
    }

    async fn lease_jobs(
        &self,
        req: Request<pb::LeaseJobsRequest>,
    ) -> Result<Response<pb::LeaseJobsResponse>, Status> {
        let t0 = Instant::now();
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let rs = results(r.results)?;
        let a = if rs.is_empty() {
            Vec::new()
        } else {
            self.c.submit(&id, &w, &rs).map_err(st)?
        };
        let jobs = self
            .c
            .lease_waiting(&id, &w, r.free_slots, GROWTH_WAIT)
            .await
            .map_err(st)?;
        if !rs.is_empty() {
            // Acknowledge only what is durable.
            self.c.wait_durable().await.map_err(st)?;
        }
        let retry_after_ms = if jobs.is_empty() {
            u32::try_from(self.c.retry_after().as_millis()).unwrap_or(u32::MAX)
        } else {
            0
        };
        metrics::histogram!(crate::telemetry::LEASE_SECONDS).record(t0.elapsed().as_secs_f64());
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
        let w = self.session(&req, &req.get_ref().worker_id)?;
        let r = req.into_inner();
        let id = identity(r.identity)?;
        let rs = results(r.results)?;
        let a = self.c.submit(&id, &w, &rs).map_err(st)?;
        self.c.wait_durable().await.map_err(st)?;
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
        let quarantined = self.c.fail(&id, &w, &f).map_err(st)?;
        self.c.wait_durable().await.map_err(st)?;
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
        let released = self.c.release_leases(&id, &w, &jobs).map_err(st)?;
        Ok(Response::new(pb::ReleaseResponse { released }))
    }
}

/// The operator-facing service (the admin interceptor has checked the caller).
#[derive(Debug, Clone)]
pub struct AdminApi {
    c: Coordinator,
    ids: Identities,
}

impl AdminApi {
    /// Handlers over the service and the credential registry.
    pub fn new(c: Coordinator, ids: Identities) -> AdminApi {
        AdminApi { c, ids }
    }
}

/// Workers listed in one status reply unless the caller asks for fewer.
pub const STATUS_PAGE: usize = 100;
/// Most workers one status reply lists.
pub const STATUS_PAGE_MAX: usize = 1000;
/// Most quarantined positions one status reply lists.
pub const STATUS_QUARANTINED_MAX: usize = 100;

fn credential_state(s: CredentialState) -> pb::CredentialState {
    match s {
        CredentialState::Active => pb::CredentialState::Active,
        CredentialState::Blocked => pb::CredentialState::Blocked,
        CredentialState::Revoked => pb::CredentialState::Revoked,
    }
}

/// The wire form of a credential.
pub fn credential(
    r: &CredentialRecord,
    live_sessions: usize,
    credit: Option<&CreditReport>,
) -> pb::Credential {
    pb::Credential {
        credit: credit.map(credit_pb),
        name: r.name.clone(),
        owner: r.owner.clone(),
        trusted: r.trusted,
        state: credential_state(r.state) as i32,
        reason: r.reason.clone(),
        created_unix: r.created_unix,
        live_sessions: u32::try_from(live_sessions).unwrap_or(u32::MAX),
    }
}

/// A contributor's standing and credit on the wire.
pub fn credit_pb(c: &CreditReport) -> pb::Credit {
    pb::Credit {
        name: c.name.clone(),
        owner: c.owner.clone(),
        standing: c.standing.as_str().into(),
        streak: c.streak,
        results: c.results,
        nodes: c.nodes,
        cpu_seconds: c.cpu.as_secs_f64(),
        invalid: c.invalid,
        blocked: c.blocked,
        time_to_trust_ms: c
            .time_to_trust
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

fn validation_pb(v: &TrustCounters) -> pb::Validation {
    pb::Validation {
        held: v.held,
        validated: v.validated,
        applied_at_once: v.applied_at_once,
        spot_checks: v.spot_checks,
        invalid: v.invalid,
        reached_book: v.reached_book,
        rollbacks: v.rollbacks,
        dropped: v.dropped,
        used_nodes: v.used_nodes,
        replica_nodes: v.replica_nodes,
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

/// The wire form of a status report, with one page of the workers (ordered by id; `limit` 0:
/// [`STATUS_PAGE`], at most [`STATUS_PAGE_MAX`]). The web UI's `/api/v1/status` is built from
/// this same message, so that `status --json` and the API say the same thing.
pub fn status_response(s: StatusReport, offset: usize, limit: usize) -> pb::GetStatusResponse {
    let mut workers = s.workers;
    workers.sort_by_key(|w| w.id);
    let limit = match limit {
        0 => STATUS_PAGE,
        n => n.min(STATUS_PAGE_MAX),
    };
    pb::GetStatusResponse {
        positions: s.positions,
        queued: s.queued,
        in_flight: s.in_flight,
        workers_total: workers.len() as u64,
        quarantined_total: s.quarantined.len() as u64,
        workers: workers
            .iter()
            .skip(offset)
            .take(limit)
            .map(|w| pb::WorkerStatus {
                worker_id: w.id.to_string(),
                name: w.name.clone(),
                threads: w.threads,
                in_flight: u32::try_from(w.in_flight).unwrap_or(u32::MAX),
                completed: w.completed,
                failed: w.failed,
                results_per_second: w.results_per_second,
                last_seen_ms: u64::try_from(w.last_seen.as_millis()).unwrap_or(u64::MAX),
                owner: w.owner.clone().unwrap_or_default(),
                engine_version: w.version.clone(),
                nodes_per_second: w.nodes_per_second,
                trusted: w.trusted,
                standing: w.standing.as_str().into(),
                credit_results: w.credit_results,
                invalid: w.invalid,
            })
            .collect(),
        results_per_second: s.results_per_second,
        state: state(s.state) as i32,
        expansion: s.expansion,
        completed: s.completed,
        quarantined: s
            .quarantined
            .iter()
            .take(STATUS_QUARANTINED_MAX)
            .map(|q| pb::QuarantinedJob {
                job_id: q.job_id.to_string(),
                position: Some((&q.board).into()),
                last_reason: q.reason.clone(),
            })
            .collect(),
        root_value: s.root_value,
        nodes_per_second: s.nodes_per_second,
        threads: s.threads,
        busy_threads: s.busy_threads,
        validation: Some(validation_pb(&s.validation)),
        credit: s.credit.iter().map(credit_pb).collect(),
        mean_search_us: s.mean_search.map_or(0, |d| {
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
        }),
        speculative_leased: s.speculative_leased,
        prefetch_used: s.prefetch.used,
        prefetch_unused: s.prefetch.unused,
        backup_leased: s.backup_leased,
        reports: s.reports,
        programs_finished: s.programs_finished,
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
        let r = req.into_inner();
        Ok(Response::new(status_response(
            self.c.status(),
            r.worker_offset as usize,
            r.worker_limit as usize,
        )))
    }

    async fn start_expansion(
        &self,
        req: Request<pb::StartExpansionRequest>,
    ) -> Result<Response<pb::StartExpansionResponse>, Status> {
        let r = req.into_inner();
        let sel = required(r.selector, "selector").map_err(cv)?.into();
        let level = u8::try_from(r.level)
            .ok()
            .filter(|l| *l <= 60)
            .ok_or_else(|| cv(ConvertError::Level(r.level)))?;
        let c = self.c.clone();
        let queued = tokio::task::spawn_blocking(move || c.start_expansion(sel, level))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(st)?;
        Ok(Response::new(pb::StartExpansionResponse { queued }))
    }

    async fn pause(
        &self,
        _req: Request<pb::PauseRequest>,
    ) -> Result<Response<pb::PauseResponse>, Status> {
        self.c.set_paused(true).map_err(st)?;
        Ok(Response::new(pb::PauseResponse {}))
    }

    async fn resume(
        &self,
        _req: Request<pb::ResumeRequest>,
    ) -> Result<Response<pb::ResumeResponse>, Status> {
        self.c.set_paused(false).map_err(st)?;
        Ok(Response::new(pb::ResumeResponse {}))
    }

    type ExportBookStream = ExportStream;

    async fn export_book(
        &self,
        req: Request<pb::ExportBookRequest>,
    ) -> Result<Response<Self::ExportBookStream>, Status> {
        let r = req.into_inner();
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
        let c = self.c.clone();
        let bytes = tokio::task::spawn_blocking(move || encode_book(c.book_snapshot(), format))
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
        let c = self.c.clone();
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
        _req: Request<pb::BookInfoRequest>,
    ) -> Result<Response<pb::BookInfoResponse>, Status> {
        let (h, positions, links, leaves) = self.c.info();
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
        let p = self.c.show(&r.moves).map_err(st)?;
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

    async fn add_credential(
        &self,
        req: Request<pb::AddCredentialRequest>,
    ) -> Result<Response<pb::AddCredentialResponse>, Status> {
        let r = req.into_inner();
        let owner = Some(r.owner).filter(|o| !o.is_empty());
        let ids = self.ids.clone();
        let (token, rec) =
            tokio::task::spawn_blocking(move || ids.add(&r.name, owner.as_deref(), r.trusted))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(idst)?;
        Ok(Response::new(pb::AddCredentialResponse {
            token,
            credential: Some(credential(&rec, 0, None)),
        }))
    }

    async fn list_credentials(
        &self,
        _req: Request<pb::ListCredentialsRequest>,
    ) -> Result<Response<pb::ListCredentialsResponse>, Status> {
        let credit = self.c.status().credit;
        Ok(Response::new(pb::ListCredentialsResponse {
            credentials: self
                .ids
                .list()
                .iter()
                .map(|c| {
                    let mine = credit.iter().find(|x| x.name == c.record.name);
                    credential(&c.record, c.live_sessions, mine)
                })
                .collect(),
        }))
    }

    async fn set_credential_state(
        &self,
        req: Request<pb::SetCredentialStateRequest>,
    ) -> Result<Response<pb::SetCredentialStateResponse>, Status> {
        let r = req.into_inner();
        let state = match pb::CredentialState::try_from(r.state) {
            Ok(pb::CredentialState::Active) => CredentialState::Active,
            Ok(pb::CredentialState::Blocked) => CredentialState::Blocked,
            Ok(pb::CredentialState::Revoked) => CredentialState::Revoked,
            _ => {
                return Err(cv(ConvertError::Enum {
                    field: "state",
                    value: r.state,
                }));
            }
        };
        let ids = self.ids.clone();
        let (rec, ended) =
            tokio::task::spawn_blocking(move || ids.set_state(&r.name, state, &r.reason))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(idst)?;
        // The credential's sessions end now: their leases go back to the queue.
        self.c.drop_workers(&ended);
        Ok(Response::new(pb::SetCredentialStateResponse {
            credential: Some(credential(&rec, 0, None)),
        }))
    }

    async fn release_quarantine(
        &self,
        req: Request<pb::ReleaseQuarantineRequest>,
    ) -> Result<Response<pb::ReleaseQuarantineResponse>, Status> {
        let r = req.into_inner();
        let boards = if r.all {
            None
        } else {
            Some(
                r.positions
                    .into_iter()
                    .map(|p| bookfarm_engine::Board::try_from(p).map_err(cv))
                    .collect::<Result<Vec<_>, Status>>()?,
            )
        };
        let c = self.c.clone();
        let released =
            tokio::task::spawn_blocking(move || c.release_quarantined(boards.as_deref()))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(st)?;
        Ok(Response::new(pb::ReleaseQuarantineResponse { released }))
    }
}
