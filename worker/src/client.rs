//! The gRPC client: identity on every call, the worker's credential in the metadata of every
//! call, explicit message limits and timeouts.

use crate::eval_cache::{Assembler, EvalFetchError};
use bookfarm_proto::MAX_MESSAGE_BYTES;
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::convert::parse_job_id;
use bookfarm_proto::domain::{Ack, CreditNote, Identity, Job, JobResult, LeaseAsk};
use bookfarm_proto::pb;
use bookfarm_proto::pb::enrolment_service_client::EnrolmentServiceClient;
use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
use bookfarm_proto::status::ErrorCode;
use bookfarm_runner::transport::{
    Beat, CallError, CallErrorKind, Leased, Registration, Transport, WorkerInfo,
};
use std::time::Duration;
use tonic::Status;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use uuid::Uuid;

/// A connection to a coordinator (connected lazily; transport errors surface as `Unavailable`).
#[derive(Debug, Clone)]
pub struct Client {
    inner: WorkerServiceClient<InterceptedService<Channel, Bearer>>,
    identity: pb::WorkerIdentity,
    url: String,
    /// The release the coordinator expects, once a registration told it (logged once).
    expected: Option<String>,
}

/// What a worker of `ours` should be told when the coordinator expects `expected`, installed
/// from `hint` (None: the releases match, or the coordinator did not say).
pub fn release_advice(ours: &str, expected: &str, hint: &str) -> Option<String> {
    if expected.is_empty() || expected == ours {
        return None;
    }
    let from = if hint.is_empty() {
        String::new()
    } else {
        format!(" ({hint})")
    };
    Some(format!(
        "this worker is bookfarm {ours}; the coordinator expects {expected}: install bookfarm-worker {expected}{from}"
    ))
}

fn acks(a: Vec<pb::ResultAck>) -> Vec<(Uuid, Ack)> {
    a.into_iter()
        .filter_map(|a| {
            let id = parse_job_id(&a.job_id).ok()?;
            let s = pb::AckStatus::try_from(a.status).ok()?;
            Some((id, Ack::try_from(s).ok()?))
        })
        .collect()
}

impl Client {
    /// A client for `url` (e.g. `http://127.0.0.1:7700`) sending `token` (empty: anonymous).
    pub fn new(
        url: &str,
        identity: &Identity,
        token: &str,
        rpc_timeout: Duration,
    ) -> Result<Client, String> {
        Client::with_tls(url, identity, token, rpc_timeout, None, None)
    }

    /// A client verifying the coordinator's certificate against `ca_pem` (TLS, `https://`).
    pub fn with_tls(
        url: &str,
        identity: &Identity,
        token: &str,
        rpc_timeout: Duration,
        ca_pem: Option<&[u8]>,
        domain: Option<&str>,
    ) -> Result<Client, String> {
        let ep = endpoint(url, rpc_timeout, ca_pem, domain)?;
        let bearer = Bearer::new(token).map_err(|e| format!("worker token: {e}"))?;
        let inner = WorkerServiceClient::with_interceptor(ep.connect_lazy(), bearer)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Client {
            inner,
            identity: identity.into(),
            url: url.to_string(),
            expected: None,
        })
    }

    /// `GetSetup`: the versions and evaluation the coordinator expects (an older coordinator
    /// answers `Unimplemented`).
    pub async fn setup(&mut self) -> Result<pb::GetSetupResponse, Status> {
        Ok(self
            .inner
            .get_setup(pb::GetSetupRequest {})
            .await?
            .into_inner())
    }

    /// `FetchEvaluation`: the coordinator's evaluation of fingerprint `hash`, checked (size
    /// bound before anything is kept, announced size, fingerprint, parse).
    pub async fn fetch_eval(
        &mut self,
        hash: &str,
    ) -> Result<(Vec<u8>, std::sync::Arc<bookfarm_engine::eval::Eval>), EvalFetchError> {
        let call = |s: Status| EvalFetchError::Call(s.message().to_string());
        let mut stream = self
            .inner
            .fetch_evaluation(pb::FetchEvaluationRequest {
                eval_hash: hash.to_string(),
            })
            .await
            .map_err(call)?
            .into_inner();
        let mut a = Assembler::new(hash);
        while let Some(chunk) = stream.message().await.map_err(call)? {
            a.push(chunk.total_bytes, &chunk.data)?;
        }
        a.finish()
    }
}

/// Enrol with the coordinator at `url`: an invitation `code` (empty: open enrolment) becomes
/// this machine's credential, named after `name`.
pub async fn enroll(
    url: &str,
    code: &str,
    name: &str,
    ca_pem: Option<&[u8]>,
    domain: Option<&str>,
) -> Result<pb::EnrollResponse, Status> {
    let ep =
        endpoint(url, Duration::from_secs(30), ca_pem, domain).map_err(Status::invalid_argument)?;
    let ch = ep
        .connect()
        .await
        .map_err(|e| Status::unavailable(format!("connecting to {url}: {e}")))?;
    Ok(EnrolmentServiceClient::new(ch)
        .enroll(pb::EnrollRequest {
            code: code.to_string(),
            name: name.to_string(),
        })
        .await?
        .into_inner())
}

/// The coordinator's endpoint (TLS when `ca_pem` is given).
fn endpoint(
    url: &str,
    rpc_timeout: Duration,
    ca_pem: Option<&[u8]>,
    domain: Option<&str>,
) -> Result<Endpoint, String> {
    {
        let mut ep = Endpoint::from_shared(url.to_string())
            .map_err(|e| format!("invalid coordinator url {url:?}: {e}"))?;
        if let Some(ca) = ca_pem {
            let mut tls = tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(ca));
            if let Some(d) = domain {
                tls = tls.domain_name(d);
            }
            ep = ep
                .tls_config(tls)
                .map_err(|e| format!("tls configuration for {url:?}: {e}"))?;
        }
        Ok(ep
            .connect_timeout(Duration::from_secs(5))
            .timeout(rpc_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_while_idle(true))
    }
}

impl Client {
    /// `RegisterWorker`. A coordinator that expects another release is logged (once), with
    /// what to install.
    pub async fn register(&mut self, who: &WorkerInfo) -> Result<Registration, Status> {
        let r = self
            .inner
            .register_worker(pb::RegisterWorkerRequest {
                identity: Some(self.identity.clone()),
                name: who.name.clone(),
                threads: who.threads,
                part_time: who.part_time,
                worker_version: bookfarm_proto::RELEASE.into(),
            })
            .await?
            .into_inner();
        if self.expected.as_deref() != Some(r.worker_version.as_str()) {
            if let Some(advice) =
                release_advice(bookfarm_proto::RELEASE, &r.worker_version, &r.install_hint)
            {
                tracing::warn!("{advice}");
            }
            self.expected = Some(r.worker_version.clone());
        }
        let worker_id = Uuid::parse_str(&r.worker_id).map_err(|_| {
            Status::internal(format!(
                "coordinator sent a bad worker id {:?}",
                r.worker_id
            ))
        })?;
        Ok(Registration {
            worker_id,
            heartbeat: Duration::from_millis(u64::from(r.heartbeat_interval_ms.max(100))),
            lease_timeout: Duration::from_millis(u64::from(r.lease_timeout_ms)),
        })
    }

    /// `LeaseJobs`, carrying finished results. Jobs that do not decode, and jobs beyond the free
    /// slots asked for, are dropped with a warning ([`accept_jobs`]; the coordinator re-leases
    /// them after the lease timeout).
    pub async fn lease(
        &mut self,
        worker: Uuid,
        ask: LeaseAsk,
        results: &[JobResult],
    ) -> Result<Leased, Status> {
        let r = self
            .inner
            .lease_jobs(pb::LeaseJobsRequest {
                identity: Some(self.identity.clone()),
                worker_id: worker.to_string(),
                free_slots: ask.free,
                results: results.iter().map(pb::LeafResult::from).collect(),
                available_ms: ask
                    .available
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            })
            .await?
            .into_inner();
        Ok(Leased {
            jobs: accept_jobs(r.jobs, ask.free),
            acks: acks(r.acks),
            retry_after: Duration::from_millis(u64::from(r.retry_after_ms)),
            idle: bookfarm_proto::convert::idle_reason(r.idle_reason),
        })
    }

    /// `SubmitResults`.
    pub async fn submit(
        &mut self,
        worker: Uuid,
        results: &[JobResult],
    ) -> Result<Vec<(Uuid, Ack)>, Status> {
        let r = self
            .inner
            .submit_results(pb::SubmitResultsRequest {
                identity: Some(self.identity.clone()),
                worker_id: worker.to_string(),
                results: results.iter().map(pb::LeafResult::from).collect(),
            })
            .await?
            .into_inner();
        Ok(acks(r.acks))
    }

    /// `Heartbeat`; returns the jobs to abandon and the worker's credit.
    pub async fn heartbeat(&mut self, worker: Uuid, held: &[Uuid]) -> Result<Beat, Status> {
        let r = self
            .inner
            .heartbeat(pb::HeartbeatRequest {
                identity: Some(self.identity.clone()),
                worker_id: worker.to_string(),
                job_ids: held.iter().map(Uuid::to_string).collect(),
            })
            .await?
            .into_inner();
        Ok(Beat {
            cancelled: r
                .cancelled_job_ids
                .iter()
                .filter_map(|s| Uuid::parse_str(s).ok())
                .collect(),
            credit: r.credit.map(CreditNote::from),
        })
    }

    /// `ReportFailure`; returns whether the job was quarantined.
    pub async fn fail(
        &mut self,
        worker: Uuid,
        job: Uuid,
        reason: &str,
        retryable: bool,
    ) -> Result<bool, Status> {
        let r = self
            .inner
            .report_failure(pb::ReportFailureRequest {
                identity: Some(self.identity.clone()),
                worker_id: worker.to_string(),
                job_id: job.to_string(),
                reason: reason.to_string(),
                retryable,
            })
            .await?
            .into_inner();
        Ok(r.quarantined)
    }

    /// `Release`: hand back jobs this worker will not search; returns how many were re-queued.
    pub async fn release(&mut self, worker: Uuid, jobs: &[Uuid]) -> Result<u32, Status> {
        let r = self
            .inner
            .release(pb::ReleaseRequest {
                identity: Some(self.identity.clone()),
                worker_id: worker.to_string(),
                job_ids: jobs.iter().map(Uuid::to_string).collect(),
            })
            .await?
            .into_inner();
        Ok(r.released)
    }
}

/// What a gRPC status means to the worker loop (its class as `bookfarm_proto::status` maps
/// it; an unknown worker id is told apart by the status's metadata, not by its message).
pub fn call_error(s: &Status) -> CallError {
    let kind = match ErrorCode::of(s) {
        Some(ErrorCode::Unauthenticated | ErrorCode::PermissionDenied) => {
            CallErrorKind::Unauthorized
        }
        Some(ErrorCode::FailedPrecondition) => CallErrorKind::Incompatible,
        Some(ErrorCode::UnknownWorker) => CallErrorKind::UnknownWorker,
        Some(ErrorCode::InvalidArgument | ErrorCode::NotFound) => CallErrorKind::Rejected,
        _ => CallErrorKind::Unavailable,
    };
    CallError::new(kind, s.message())
}

/// The gRPC client as the worker loop's [`Transport`]: each call is driven to completion on
/// the runtime behind `rt` (the loop runs on a thread outside the runtime's workers).
#[derive(Debug)]
pub struct GrpcTransport {
    client: Client,
    rt: tokio::runtime::Handle,
}

impl GrpcTransport {
    /// Calls through `client` on the runtime `rt`.
    pub fn new(client: Client, rt: tokio::runtime::Handle) -> GrpcTransport {
        GrpcTransport { client, rt }
    }
}

impl Transport for GrpcTransport {
    fn endpoint(&self) -> String {
        self.client.url.clone()
    }

    fn max_results(&self) -> usize {
        bookfarm_proto::MAX_RESULTS_PER_CALL
    }

    fn register(&mut self, who: &WorkerInfo) -> Result<Registration, CallError> {
        let c = &mut self.client;
        self.rt
            .block_on(c.register(who))
            .map_err(|s| call_error(&s))
    }

    fn lease(
        &mut self,
        worker: Uuid,
        ask: LeaseAsk,
        results: &[JobResult],
    ) -> Result<Leased, CallError> {
        let c = &mut self.client;
        self.rt
            .block_on(c.lease(worker, ask, results))
            .map_err(|s| call_error(&s))
    }

    fn submit(
        &mut self,
        worker: Uuid,
        results: &[JobResult],
    ) -> Result<Vec<(Uuid, Ack)>, CallError> {
        let c = &mut self.client;
        self.rt
            .block_on(c.submit(worker, results))
            .map_err(|s| call_error(&s))
    }

    fn heartbeat(&mut self, worker: Uuid, held: &[Uuid]) -> Result<Beat, CallError> {
        let c = &mut self.client;
        self.rt
            .block_on(c.heartbeat(worker, held))
            .map_err(|s| call_error(&s))
    }

    fn fail(
        &mut self,
        worker: Uuid,
        job: Uuid,
        reason: &str,
        retryable: bool,
    ) -> Result<bool, CallError> {
        let c = &mut self.client;
        self.rt
            .block_on(c.fail(worker, job, reason, retryable))
            .map_err(|s| call_error(&s))
    }

    fn release(&mut self, worker: Uuid, jobs: &[Uuid]) -> Result<u32, CallError> {
        let c = &mut self.client;
        self.rt
            .block_on(c.release(worker, jobs))
            .map_err(|s| call_error(&s))
    }
}

/// The jobs of a lease answer the worker takes: those that decode (a level above 60, a board
/// with a square of both colours or a malformed id is refused with a warning naming what is
/// wrong), at most `free` of them (the slots the worker asked for: a coordinator that sends more
/// gets the first `free` done and the rest dropped with a warning).
pub fn accept_jobs(jobs: Vec<pb::Job>, free: u32) -> Vec<Job> {
    let sent = jobs.len();
    let free = usize::try_from(free).unwrap_or(usize::MAX);
    if sent > free {
        tracing::warn!(
            sent,
            free,
            "the coordinator sent more jobs than the free slots asked for: keeping the first"
        );
    }
    jobs.into_iter()
        .take(free)
        .filter_map(|j| match Job::try_from(j) {
            Ok(j) => Some(j),
            Err(e) => {
                tracing::warn!(error = %e, "refusing a job the coordinator sent");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_proto::status::{ServiceError, to_status};

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Coded(&'static str, ErrorCode);

    impl ServiceError for Coded {
        fn code(&self) -> ErrorCode {
            self.1
        }
    }

    #[test]
    fn a_worker_of_another_release_is_told_what_to_install() {
        assert_eq!(release_advice("0.1.0", "0.1.0", "x"), None);
        assert_eq!(
            release_advice("0.1.0", "", ""),
            None,
            "an older coordinator says nothing"
        );
        assert_eq!(
            release_advice("0.1.0", "0.2.0", "https://example.org/bookfarm").as_deref(),
            Some(
                "this worker is bookfarm 0.1.0; the coordinator expects 0.2.0: install \
                 bookfarm-worker 0.2.0 (https://example.org/bookfarm)"
            )
        );
        assert!(release_advice("0.3.0", "0.2.0", "").is_some_and(|a| a.ends_with("0.2.0")));
    }

    /// The loop re-registers on the coordinator's unknown-worker signal, not on a message.
    #[test]
    fn statuses_map_to_what_the_loop_does() {
        let kind = |s: Status| call_error(&s).kind;
        let gone = to_status(&Coded(
            "unknown worker 7 (register again)",
            ErrorCode::UnknownWorker,
        ));
        assert_eq!(kind(gone), CallErrorKind::UnknownWorker);
        assert_eq!(
            kind(Status::not_found("unknown worker 7 (register again)")),
            CallErrorKind::Rejected,
            "a message is not a signal"
        );
        assert_eq!(
            kind(to_status(&Coded("unknown job", ErrorCode::NotFound))),
            CallErrorKind::Rejected
        );
        assert_eq!(
            kind(Status::permission_denied("blocked")),
            CallErrorKind::Unauthorized
        );
        assert_eq!(
            kind(Status::failed_precondition("protocol")),
            CallErrorKind::Incompatible
        );
        assert_eq!(
            kind(Status::unavailable("down")),
            CallErrorKind::Unavailable
        );
        assert_eq!(kind(Status::unknown("reset")), CallErrorKind::Unavailable);
    }

    /// A coordinator's absurd lease answers are refused without a panic: more jobs than the
    /// free slots (the first ones kept), a level above 60, a board with a square of both
    /// colours, a missing board, a malformed job id.
    #[test]
    fn absurd_jobs_from_a_coordinator_are_refused() {
        let job = |id: u128, level: u32, player: u64, opponent: u64| pb::Job {
            job_id: uuid::Uuid::from_u128(id).to_string(),
            position: Some(pb::Position { player, opponent }),
            excluded: 0,
            level,
            attempt: 0,
        };
        let start = bookfarm_engine::Board::start();
        let good = |id| job(id, 12, start.player, start.opponent);
        let many: Vec<pb::Job> = (1..=1000).map(good).collect();
        let kept = accept_jobs(many, 3);
        let ids: Vec<u128> = kept.iter().map(|j| j.id.as_u128()).collect();
        assert_eq!(ids, [1, 2, 3]);
        let bad = vec![
            job(10, 61, start.player, start.opponent),
            job(11, u32::MAX, start.player, start.opponent),
            job(12, 12, 0b11, 0b10),
            pb::Job {
                position: None,
                ..good(13)
            },
            pb::Job {
                job_id: "not a uuid".into(),
                ..good(14)
            },
            good(15),
        ];
        let kept = accept_jobs(bad, 10);
        let ids: Vec<u128> = kept.iter().map(|j| j.id.as_u128()).collect();
        assert_eq!(ids, [15]);
        assert!(accept_jobs(vec![good(1)], 0).is_empty());
    }
}
