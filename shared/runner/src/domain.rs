//! Plain job and result types of the worker protocol, shared by the coordinator, the worker and
//! the in-process runner (no prost types; `bookfarm_proto::convert` maps them to the wire).

use bookfarm_engine::Board;
#[cfg(doc)]
use bookfarm_engine::Move;
use bookfarm_engine::search::LeafResult;
use std::time::Duration;
use uuid::Uuid;

/// Who a worker claims to be, as carried by every worker RPC.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// Wire protocol version (`bookfarm_proto::PROTOCOL_VERSION` for a compatible peer).
    pub protocol_version: u32,
    /// Engine version string.
    pub engine_version: String,
    /// Fingerprint of the evaluation weights ([`crate::eval_fingerprint`]).
    pub eval_hash: String,
    /// The worker's search signature (`bookfarm_engine::search::SearchSignature` as text).
    pub search_signature: String,
}

/// One leaf-search job as handed to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Unique job id.
    pub id: Uuid,
    /// The position to search (canonical book board, side to move).
    pub board: Board,
    /// Squares that must not be searched (the position's links).
    pub excluded: u64,
    /// Edax level 0..=60.
    pub level: u8,
    /// 0 for the first lease.
    pub attempt: u32,
}

/// The outcome of one leaf search, as reported by a worker: the job it answers and the
/// engine's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobResult {
    /// The job this answers.
    pub job_id: Uuid,
    /// The search's result: best move among the non-excluded moves ([`Move::Pass`] when the
    /// side must pass, [`Move::None`] when every move is excluded or the game is over), score
    /// from the side to move's view, depth, selectivity, exactness, nodes and time.
    pub leaf: LeafResult,
}

/// How the coordinator handled one submitted result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// Linked into the book and durable.
    Accepted,
    /// Submitted before; nothing changed.
    Duplicate,
}

/// What a lease call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseAsk {
    /// Jobs the worker can take.
    pub free: u32,
    /// How long the worker may still search before its active hours end (None: no limit);
    /// the coordinator leases only jobs it expects to end in time.
    pub available: Option<Duration>,
}

/// Why a lease call found no job for a worker (sent by the coordinator with every empty
/// lease, so that a volunteer can tell what its worker waits for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdleReason {
    /// No growth program is running: the build is done (or none was started).
    BuildDone,
    /// The operator paused the build.
    Paused,
    /// Every queued search is being searched by other workers; the next ones come when their
    /// results land.
    QueueEmpty,
    /// The build waits for results being validated (replicas searched by trusted workers).
    WaitingForValidation,
    /// The queued searches need a standing this worker's credential has not earned yet.
    NotEligible,
    /// This worker holds as many jobs as it may, or called more often than allowed.
    RateLimited,
    /// No queued search fits in what is left of this worker's active hours.
    NoFit,
    /// The queued searches are long ones, held for fast always-on machines for a while.
    Reserved,
    /// This worker's credential is earning trust: as many of its results wait for a trusted
    /// worker's confirmation as it still needs (more would only be searched twice).
    Earning,
}

impl IdleReason {
    /// Every reason, in wire order.
    pub const ALL: [IdleReason; 9] = [
        IdleReason::BuildDone,
        IdleReason::Paused,
        IdleReason::QueueEmpty,
        IdleReason::WaitingForValidation,
        IdleReason::NotEligible,
        IdleReason::RateLimited,
        IdleReason::NoFit,
        IdleReason::Reserved,
        IdleReason::Earning,
    ];

    /// The sentence a worker logs.
    pub fn explain(self) -> &'static str {
        match self {
            IdleReason::BuildDone => "the build is done: no growth program is running",
            IdleReason::Paused => "the operator paused the build",
            IdleReason::QueueEmpty => {
                "the queue is empty: other workers hold the current searches, the next ones come when they land"
            }
            IdleReason::WaitingForValidation => {
                "the build waits for results to be validated by trusted workers"
            }
            IdleReason::NotEligible => {
                "the queued searches need a standing this credential has not earned yet"
            }
            IdleReason::RateLimited => {
                "rate limited: this worker holds as many jobs as it may, or calls too often"
            }
            IdleReason::NoFit => "no queued search fits in what is left of the active hours",
            IdleReason::Reserved => {
                "the queued searches are long ones, held for fast always-on machines for a while"
            }
            IdleReason::Earning => {
                "this credential is earning trust: its results wait for trusted workers to confirm them"
            }
        }
    }
}

/// What the coordinator credits a worker's contributor with (its credential, or the anonymous
/// worker), as told with every heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreditNote {
    /// Its standing (`untrusted`, `earned`, `trusted`, `root`).
    pub standing: String,
    /// Results validated or used by the book.
    pub results: u64,
    /// Results found invalid.
    pub invalid: u64,
}

/// A job failure reported by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The failed job.
    pub job_id: Uuid,
    /// Free-form reason for the operator.
    pub reason: String,
    /// False when another attempt cannot help.
    pub retryable: bool,
}
