//! The coordinator's domain errors and their gRPC classes.

use crate::store::StoreError;
use bookfarm_engine::Move;
use bookfarm_proto::status::{ErrorCode, ServiceError};
use uuid::Uuid;

/// Errors of the coordinator service.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// Missing or wrong token.
    #[error("invalid authentication token")]
    Unauthenticated,
    /// The worker speaks another protocol version.
    #[error(
        "protocol version {got} is not supported: this coordinator speaks version {want}; {install}"
    )]
    ProtocolVersion {
        /// Version sent by the worker (0 = unset).
        got: u32,
        /// Version of this coordinator.
        want: u32,
        /// What to install (the release the coordinator expects, and where from).
        install: String,
    },
    /// The worker runs another engine version.
    #[error("engine version {got:?} does not match the coordinator's {want:?}; {install}")]
    EngineVersion {
        /// Worker's engine version.
        got: String,
        /// Expected engine version.
        want: String,
        /// What to install (the release the coordinator expects, and where from).
        install: String,
    },
    /// The worker loaded other evaluation weights.
    #[error(
        "evaluation hash {got:?} does not match the coordinator's {want:?} (load the same eval file)"
    )]
    EvalHash {
        /// Worker's eval hash.
        got: String,
        /// Expected eval hash.
        want: String,
    },
    /// The search signature differs from the book's (or is missing).
    #[error("search signature: {0}")]
    Signature(String),
    /// A result's depth or selectivity is not what the level table gives for its search.
    #[error(
        "job {job}: depth {depth} at selectivity {selectivity} does not match level {level} at {empties} empties"
    )]
    BadDepth {
        /// The job.
        job: uuid::Uuid,
        /// Reported depth.
        depth: u32,
        /// Reported selectivity index.
        selectivity: u8,
        /// The job's level.
        level: u8,
        /// Empties of the searched position.
        empties: u32,
    },
    /// Unknown worker id (e.g. after a coordinator restart): register again.
    #[error("unknown worker {0} (register again)")]
    UnknownWorker(String),
    /// Unknown job id.
    #[error("unknown job {0}")]
    UnknownJob(Uuid),
    /// No program of the queue has this number (never queued, or forgotten long ago).
    #[error("no program #{0} (see `expand list --all`)")]
    UnknownProgram(u64),
    /// The job is leased to another worker.
    #[error("job {job} is not leased to worker {worker}")]
    NotLeased {
        /// Job id.
        job: Uuid,
        /// Caller.
        worker: Uuid,
    },
    /// The result's move is illegal, excluded, or inconsistent with the position.
    #[error("job {job}: move {mv} is illegal or excluded on the job's position")]
    IllegalMove {
        /// Job id.
        job: Uuid,
        /// The move.
        mv: Move,
    },
    /// The score is outside [-64, 64].
    #[error("job {job}: score {score} is outside [-64, 64]")]
    ScoreOutOfRange {
        /// Job id.
        job: Uuid,
        /// The score.
        score: i32,
    },
    /// An exact score must be even.
    #[error("job {job}: exact score {score} has the wrong parity (exact scores are even)")]
    ExactParity {
        /// Job id.
        job: Uuid,
        /// The score.
        score: i32,
    },
    /// Too many items in one call.
    #[error("too many results in one call: {got} (at most {max})")]
    TooMany {
        /// Items sent.
        got: usize,
        /// Limit.
        max: usize,
    },
    /// The worker's contributor was blocked for invalid results.
    #[error("{0} is blocked: it sent too many invalid results")]
    Blocked(String),
    /// A request argument is invalid (e.g. a move list that cannot be played).
    #[error("{0}")]
    InvalidArgument(String),
    /// The operation is not possible in the current state.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The service cannot answer now (its store is being reopened): retry shortly.
    #[error("unavailable: {0}; retry shortly")]
    Unavailable(String),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ServiceError for CoordinatorError {
    fn code(&self) -> ErrorCode {
        use CoordinatorError as E;
        match self {
            E::Unauthenticated => ErrorCode::Unauthenticated,
            E::ProtocolVersion { .. }
            | E::EngineVersion { .. }
            | E::EvalHash { .. }
            | E::Signature(_)
            | E::NotLeased { .. }
            | E::FailedPrecondition(_) => ErrorCode::FailedPrecondition,
            E::UnknownWorker(_) => ErrorCode::UnknownWorker,
            E::UnknownJob(_) | E::UnknownProgram(_) => ErrorCode::NotFound,
            E::IllegalMove { .. }
            | E::ScoreOutOfRange { .. }
            | E::ExactParity { .. }
            | E::BadDepth { .. }
            | E::InvalidArgument(_) => ErrorCode::InvalidArgument,
            E::TooMany { .. } => ErrorCode::ResourceExhausted,
            E::Blocked(_) => ErrorCode::PermissionDenied,
            E::Store(_) | E::Internal(_) => ErrorCode::Internal,
            E::Unavailable(_) => ErrorCode::Unavailable,
        }
    }
}

/// Result type of the coordinator library.
pub type Result<T, E = CoordinatorError> = std::result::Result<T, E>;
