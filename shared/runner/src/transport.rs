//! How the worker loop talks to a coordinator: the [`Transport`] trait. The worker crate's gRPC
//! client is one implementation; the coordinator's in-process transport (a direct call into its
//! domain service) is the other.
//!
//! Calls block the loop's thread; an implementation over an async client drives its futures to
//! completion on its own runtime.

pub use crate::domain::LeaseAsk;
use crate::domain::{Ack, CreditNote, IdleReason, Job, JobResult};
use std::time::Duration;
use uuid::Uuid;

/// What a call's failure means to the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallErrorKind {
    /// The credential is missing, wrong, revoked or blocked: this worker cannot work here.
    Unauthorized,
    /// The worker's software does not fit the coordinator (protocol, engine, evaluation, search
    /// signature) or the call came in the wrong state.
    Incompatible,
    /// The coordinator does not know this worker id (restarted, or expired it): register again.
    UnknownWorker,
    /// The call's content was refused (an invalid result, a job this worker does not hold).
    Rejected,
    /// The coordinator could not be reached or answered with a transient error: retry later.
    Unavailable,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// What the failure means.
    pub kind: CallErrorKind,
    /// The coordinator's (or the transport's) message.
    pub message: String,
}

impl CallError {
    /// A failure of kind `kind`.
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> CallError {
        CallError {
            kind,
            message: message.into(),
        }
    }

    /// Whether a call without results failing this way means the worker must stop.
    pub fn fatal(&self) -> bool {
        matches!(
            self.kind,
            CallErrorKind::Unauthorized | CallErrorKind::Incompatible
        )
    }

    /// Whether the coordinator refused the results the call carried (submitting them one by one
    /// finds the bad ones).
    pub fn refuses_content(&self) -> bool {
        matches!(
            self.kind,
            CallErrorKind::Rejected | CallErrorKind::Incompatible
        )
    }
}

/// What registration returns.
#[derive(Debug, Clone, Copy)]
pub struct Registration {
    /// The worker id.
    pub worker_id: Uuid,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Lease timeout.
    pub lease_timeout: Duration,
}

/// Who registers: what the coordinator needs to know of a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Name shown in the coordinator's status.
    pub name: String,
    /// Search threads.
    pub threads: u32,
    /// The worker searches only part of the time (active hours, or a battery it pauses on):
    /// long jobs go to always-on machines first.
    pub part_time: bool,
}

/// What a lease call returns.
#[derive(Debug, Clone, Default)]
pub struct Leased {
    /// New jobs.
    pub jobs: Vec<Job>,
    /// Acknowledgements of the submitted results.
    pub acks: Vec<(Uuid, Ack)>,
    /// Suggested wait when no job was given.
    pub retry_after: Duration,
    /// Why no job was given (None: jobs were given, or the coordinator did not say).
    pub idle: Option<IdleReason>,
}

/// What a heartbeat returns.
#[derive(Debug, Clone, Default)]
pub struct Beat {
    /// Jobs to abandon (their lease was lost).
    pub cancelled: Vec<Uuid>,
    /// The worker's credit and standing, when the coordinator tells them.
    pub credit: Option<CreditNote>,
}

/// The worker side of the protocol, one method per call (see the `bookfarm.v1` worker service).
pub trait Transport: Send {
    /// Where the calls go (for logs).
    fn endpoint(&self) -> String;

    /// Most results one call may carry.
    fn max_results(&self) -> usize;

    /// Register a worker.
    fn register(&mut self, who: &WorkerInfo) -> Result<Registration, CallError>;

    /// Deliver finished results and lease up to `ask.free` jobs. A result is acknowledged only
    /// once the coordinator will not lose it (for a remote coordinator: durable on disk).
    fn lease(
        &mut self,
        worker: Uuid,
        ask: LeaseAsk,
        results: &[JobResult],
    ) -> Result<Leased, CallError>;

    /// Deliver results without leasing.
    fn submit(
        &mut self,
        worker: Uuid,
        results: &[JobResult],
    ) -> Result<Vec<(Uuid, Ack)>, CallError>;

    /// Extend the leases of `held`; returns the jobs to abandon (and the worker's credit).
    fn heartbeat(&mut self, worker: Uuid, held: &[Uuid]) -> Result<Beat, CallError>;

    /// Report a failed job; returns whether it was quarantined.
    fn fail(
        &mut self,
        worker: Uuid,
        job: Uuid,
        reason: &str,
        retryable: bool,
    ) -> Result<bool, CallError>;

    /// Hand back jobs this worker will not search; returns how many were re-queued.
    fn release(&mut self, worker: Uuid, jobs: &[Uuid]) -> Result<u32, CallError>;
}
