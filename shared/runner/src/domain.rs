//! Plain job and result types of the worker protocol, shared by the coordinator, the worker and
//! the in-process runner (no prost types; `bookfarm_proto::convert` maps them to the wire).

use bookfarm_engine::search::LeafResult;
use bookfarm_engine::{Board, Move};
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

/// The outcome of one leaf search, as reported by a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobResult {
    /// The job this answers.
    pub job_id: Uuid,
    /// Best move among the non-excluded moves, [`Move::Pass`] when the side must pass,
    /// [`Move::None`] when every move is excluded or the game is over.
    pub mv: Move,
    /// Score from the side to move's view.
    pub score: i32,
    /// Depth actually searched.
    pub depth: u32,
    /// Selectivity index actually used (0..=5, 5 = none).
    pub selectivity: u8,
    /// Exact endgame score.
    pub exact: bool,
    /// Nodes searched.
    pub nodes: u64,
    /// Wall time of the search.
    pub elapsed: Duration,
}

impl JobResult {
    /// The answer of job `job_id` from an engine leaf search.
    pub fn from_leaf(job_id: Uuid, r: &LeafResult) -> JobResult {
        JobResult {
            job_id,
            mv: r.mv,
            score: r.score,
            depth: r.depth,
            selectivity: r.selectivity,
            exact: r.exact,
            nodes: r.nodes,
            elapsed: r.elapsed,
        }
    }

    /// The leaf-search result this reports.
    pub fn leaf(&self) -> LeafResult {
        LeafResult {
            mv: self.mv,
            score: self.score,
            depth: self.depth,
            selectivity: self.selectivity,
            exact: self.exact,
            nodes: self.nodes,
            elapsed: self.elapsed,
        }
    }
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

/// Which selector drives an expansion (Edax's book commands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// `book deviate REL ABS`.
    Deviate {
        /// Relative error: how far below the best a deviation may be.
        relative: i32,
        /// Absolute error: window around the root value.
        absolute: i32,
    },
    /// `book enhance MID END` (stores the errors in the book header).
    Enhance {
        /// Midgame error.
        midgame: i32,
        /// Endcut error.
        endcut: i32,
    },
    /// `book play`: expand every reachable position without links.
    Play,
    /// `book extend`: expand leaves that are (one of) the best moves.
    Extend,
    /// `book upgrade LEVEL --error E`: re-search at `level` the leaves that can still change a
    /// value inside the window of `error` discs around the root's value.
    Upgrade {
        /// The level to re-search at.
        level: u8,
        /// Half-width of the window, in discs.
        error: i32,
    },
    /// The line audit: play the book's best lines to the end at `level`; with `queue`, add the
    /// lines whose result contradicts the book to the book.
    Audit {
        /// The level of the searches that play the lines out.
        level: u8,
        /// Queue the contradicting lines for expansion.
        queue: bool,
    },
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Deviate { relative, absolute } => write!(f, "deviate {relative} {absolute}"),
            Selector::Enhance { midgame, endcut } => write!(f, "enhance {midgame} {endcut}"),
            Selector::Play => f.write_str("play"),
            Selector::Extend => f.write_str("extend"),
            Selector::Upgrade { level, error } => write!(f, "upgrade {level} --error {error}"),
            Selector::Audit { level, queue } => {
                write!(f, "audit {level}{}", if *queue { " --queue" } else { "" })
            }
        }
    }
}
