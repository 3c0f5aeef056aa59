//! The gRPC transport: thin tonic handlers that decode (validating conversions), call the
//! domain service (`crate::service`) and encode. Every domain error becomes a status through
//! `bookfarm_proto::status::to_status`.
//!
//! Credentials were checked by the interceptors before a body was read (`crate::identity`);
//! worker handlers bind worker ids to the caller's credential, escape and truncate the strings
//! a worker supplies (`crate::text`), and admin replies are bounded (paged status).
//!
//! * `worker`: [`WorkerApi`], the worker-facing service;
//! * `admin`: [`AdminApi`], the operator-facing service;
//! * `encode`: domain reports as wire messages ([`status_response`], [`credential`]), shared
//!   with `status --json`, `workers list` and the web UI's JSON API;
//! * [`conn`]: the gRPC port's connection limits, below HTTP/2.

mod admin;
pub mod conn;
mod encode;
mod enrol;
mod worker;

pub use admin::AdminApi;
pub use encode::{
    STATUS_PAGE, STATUS_PAGE_MAX, STATUS_QUARANTINED_MAX, credential, credit_pb, invitation,
    program_info, status_response,
};
pub use enrol::{EnrolmentApi, MAX_ENROL_MESSAGE_BYTES};
pub use worker::{EvalFile, WorkerApi};

use crate::error::CoordinatorError;
use crate::identity::IdentityError;
use crate::text::{MAX_NAME_CHARS, clean};
use bookfarm_proto::convert::{ConvertError, required};
use bookfarm_proto::domain::{Ack, Identity, JobResult};
use bookfarm_proto::pb;
use bookfarm_proto::status::to_status;
use tonic::Status;
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

fn acks(a: Vec<Ack>, rs: &[JobResult]) -> Vec<pb::ResultAck> {
    a.into_iter()
        .zip(rs)
        .map(|(a, r)| pb::ResultAck {
            job_id: r.job_id.to_string(),
            status: pb::AckStatus::from(a) as i32,
        })
        .collect()
}
