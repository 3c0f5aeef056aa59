//! The enrolment service: the one gRPC entry point a caller without a credential may use
//! (no interceptor; small messages; rate-limited per address in `crate::identity`).

use super::idst;
use crate::identity::Identities;
use bookfarm_proto::pb;
use tonic::{Request, Response, Status};

/// Largest enrolment request (a code and a name).
pub const MAX_ENROL_MESSAGE_BYTES: usize = 4096;

/// The enrolment service.
#[derive(Debug, Clone)]
pub struct EnrolmentApi {
    ids: Identities,
}

impl EnrolmentApi {
    /// The service over a credential registry.
    pub fn new(ids: Identities) -> EnrolmentApi {
        EnrolmentApi { ids }
    }
}

#[tonic::async_trait]
impl pb::enrolment_service_server::EnrolmentService for EnrolmentApi {
    async fn enroll(
        &self,
        req: Request<pb::EnrollRequest>,
    ) -> Result<Response<pb::EnrollResponse>, Status> {
        let peer = req.remote_addr().map(|a| a.ip());
        let r = req.into_inner();
        let ids = self.ids.clone();
        // The store transaction is flushed before the reply: off the async threads.
        let e = tokio::task::spawn_blocking(move || ids.enroll(r.code.trim(), &r.name, peer))
            .await
            .map_err(|e| Status::internal(format!("enrolment task: {e}")))?
            .map_err(idst)?;
        Ok(Response::new(pb::EnrollResponse {
            credential: e.record.name,
            owner: e.record.owner,
            token: e.token,
        }))
    }
}
