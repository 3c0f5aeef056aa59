//! Plain job and result types of the worker protocol, shared by the coordinator, the worker and
//! the in-process runner (no prost types; `bookfarm_proto::convert` maps them to the wire).

use bookfarm_engine::Board;
#[cfg(doc)]
use bookfarm_engine::Move;
use bookfarm_engine::search::LeafResult;
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
