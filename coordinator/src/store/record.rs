//! On-disk records (postcard). Engine and book types do not derive serde; these mirrors do.

use crate::store::Entry;
use bookfarm_book::driver::{DriverState, PassKind, Phase, StepPoint};
use bookfarm_book::grow::{Changes, IllegalGameMove};
use bookfarm_book::model::{BAD_LINK, BookDate, BookHeader, Link, Position};
use bookfarm_book::program::Program;
use bookfarm_engine::search::LeafResult;
use bookfarm_engine::{Board, Move};
use serde::{Deserialize, Serialize};

/// A stored position: Edax's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionRecord {
    /// Canonical board, side to move.
    pub player: u64,
    /// Canonical board, other side.
    pub opponent: u64,
    /// Leaf as the two file bytes (score, move code).
    pub leaf: [u8; 2],
    /// Links as file bytes, in stored order.
    pub links: Vec<[u8; 2]>,
    /// Level 0..=60.
    pub level: u8,
    /// Derived: value, lower, upper.
    pub scores: [i16; 3],
    /// Derived: wins, draws, losses, lines.
    pub counts: [u32; 4],
}

impl PositionRecord {
    /// The record of an entry.
    pub fn from_entry(e: &Entry) -> PositionRecord {
        let p = &e.pos;
        PositionRecord {
            player: p.board.player,
            opponent: p.board.opponent,
            leaf: p.leaf.to_bytes(),
            links: p.links.iter().map(|l| l.to_bytes()).collect(),
            level: p.level,
            scores: [p.value, p.lower, p.upper],
            counts: [p.n_wins, p.n_draws, p.n_losses, p.n_lines],
        }
    }

    /// Back to an entry (unknown move codes, which a record we wrote never holds, become
    /// "no leaf" or are dropped from the links).
    pub fn into_entry(self) -> Entry {
        let board = Board {
            player: self.player,
            opponent: self.opponent,
        };
        let mut pos = Position::new(board, self.level);
        pos.leaf = Link::from_bytes(self.leaf).unwrap_or(BAD_LINK);
        pos.links = self
            .links
            .into_iter()
            .filter_map(Link::from_bytes)
            .collect();
        [pos.value, pos.lower, pos.upper] = self.scores;
        [pos.n_wins, pos.n_draws, pos.n_losses, pos.n_lines] = self.counts;
        Entry { pos }
    }
}

/// A [`PositionRecord`] to encode, borrowed from wherever the position lives (the same fields
/// in the same order, so postcard writes the same bytes: decode it as a [`PositionRecord`]).
/// Checkpoints write every changed position; this spares a clone of each one's links.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PositionRecordRef<'a> {
    /// Canonical board, side to move.
    pub player: u64,
    /// Canonical board, other side.
    pub opponent: u64,
    /// Leaf as the two file bytes.
    pub leaf: [u8; 2],
    /// Links as file bytes, in stored order.
    pub links: &'a [[u8; 2]],
    /// Level 0..=60.
    pub level: u8,
    /// Derived: value, lower, upper.
    pub scores: [i16; 3],
    /// Derived: wins, draws, losses, lines.
    pub counts: [u32; 4],
}

/// The base book: which file (`base/<generation>.dat`) and how many positions it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRecord {
    /// Generation of the file; each replacement of the book writes the next one.
    pub generation: u64,
    /// Positions in the file.
    pub positions: u64,
}

/// The stored book header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRecord {
    /// version, release.
    pub version: [u8; 2],
    /// year.
    pub year: i16,
    /// month, day, hour, minute, second, pad.
    pub date: [u8; 6],
    /// level, n_empties, midgame_error, endcut_error, verbosity.
    pub options: [i32; 5],
}

impl From<&BookHeader> for HeaderRecord {
    fn from(h: &BookHeader) -> HeaderRecord {
        let d = &h.date;
        HeaderRecord {
            version: [h.version, h.release],
            year: d.year,
            date: [d.month, d.day, d.hour, d.minute, d.second, d.pad],
            options: [
                h.level,
                h.n_empties,
                h.midgame_error,
                h.endcut_error,
                h.verbosity,
            ],
        }
    }
}

impl From<HeaderRecord> for BookHeader {
    fn from(r: HeaderRecord) -> BookHeader {
        let [month, day, hour, minute, second, pad] = r.date;
        let [level, n_empties, midgame_error, endcut_error, verbosity] = r.options;
        BookHeader {
            version: r.version[0],
            release: r.version[1],
            date: BookDate {
                year: r.year,
                month,
                day,
                hour,
                minute,
                second,
                pad,
            },
            level,
            n_empties,
            midgame_error,
            endcut_error,
            verbosity,
        }
    }
}

fn board_of((player, opponent): (u64, u64)) -> Board {
    Board { player, opponent }
}

fn pair(b: &Board) -> (u64, u64) {
    (b.player, b.opponent)
}

fn move_of(code: u8) -> Move {
    Move::from_code(code).unwrap_or(Move::None)
}

/// One point of the farm's history (the overview's charts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Wall-clock time, milliseconds since the Unix epoch (a bucket's start for merged points).
    pub t_ms: u64,
    /// Positions in the book.
    pub positions: u64,
    /// Accepted results per second.
    pub results_per_second: f64,
    /// Nodes of the accepted searches per second.
    pub nodes_per_second: f64,
    /// Value of the start position (-127 when unknown).
    pub root_value: i32,
    /// Registered workers.
    pub workers: u32,
    /// Their search threads.
    pub threads: u32,
    /// Searches waiting.
    pub queued: u64,
    /// Searches leased.
    pub in_flight: u64,
}

/// Results accepted from one contributor (a credential's owner, or an anonymous worker's name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContributorRecord {
    /// Owner, or worker name when `anonymous`.
    pub name: String,
    /// An anonymous local worker (no credential).
    pub anonymous: bool,
    /// Results accepted since the store's history began.
    pub total: u64,
    /// Results per UTC day (days since the epoch), recent days only, oldest first.
    pub days: Vec<(u32, u64)>,
}

/// The farm's history at reduced resolution (per-minute and per-hour points) and the
/// contributors' tallies: what survives a restart (the per-second points do not).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// Per-minute points, oldest first.
    pub minutes: Vec<Sample>,
    /// Per-hour points, oldest first.
    pub hours: Vec<Sample>,
    /// Contributors.
    pub contributors: Vec<ContributorRecord>,
}

fn changes_record(c: &Changes) -> [u64; 3] {
    [c.positions as u64, c.links as u64, c.searches as u64]
}

fn changes_of(c: [u64; 3]) -> Changes {
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Changes {
        positions: n(c[0]),
        links: n(c[1]),
        searches: n(c[2]),
    }
}

const PASSES: [PassKind; 8] = [
    PassKind::DeviateRoot,
    PassKind::DeviateOpponent,
    PassKind::Enhance,
    PassKind::Play,
    PassKind::Extend,
    PassKind::Given,
    PassKind::Upgrade,
    PassKind::Resolve,
];

/// A persisted [`DriverState`] (its program is stored apart: the program the replay log is
/// replaying, else the first of the queue, see [`ProgramRecord`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverRecord {
    /// 0 start, 1 expanding, 2 adding, 3 done, 4 auditing, 5 adding the root line, 6 searching
    /// (a book-neutral program).
    pub phase: u8,
    /// Expanding: index into the pass kinds.
    pub pass: u8,
    /// Expanding: the iteration's root value.
    pub root_value: i32,
    /// Passes marked so far (the [`TodoRecord`] stored beside must carry the same number).
    pub passes: u32,
    /// Expanding/adding/adding the root line: steps done.
    pub cursor: u64,
    /// Adding: the game index.
    pub game: u64,
    /// Expanding: the iteration's changes.
    pub iteration: [u64; 3],
    /// Iterations completed.
    pub iterations: u32,
    /// Total changes.
    pub changes: [u64; 3],
    /// Illegal game moves (game, move index, move code).
    pub illegal: Vec<(u64, u64, u8)>,
}

impl DriverRecord {
    /// The record of a driver state (the program is stored apart).
    pub fn new(s: &DriverState) -> DriverRecord {
        let mut r = DriverRecord {
            phase: 0,
            pass: 0,
            root_value: 0,
            passes: s.passes,
            cursor: 0,
            game: 0,
            iteration: [0; 3],
            iterations: s.iterations,
            changes: changes_record(&s.changes),
            illegal: s
                .illegal
                .iter()
                .map(|(g, m)| (*g as u64, m.index as u64, m.mv.code()))
                .collect(),
        };
        match &s.phase {
            Phase::Start => {}
            Phase::Expanding {
                pass,
                root_value,
                todo: _,
                cursor,
                iteration,
            } => {
                r.phase = 1;
                r.pass = PASSES.iter().position(|p| p == pass).unwrap_or(0) as u8;
                r.root_value = *root_value;
                r.cursor = *cursor as u64;
                r.iteration = changes_record(iteration);
            }
            Phase::Adding { game, cursor } => {
                r.phase = 2;
                r.game = *game as u64;
                r.cursor = *cursor as u64;
            }
            Phase::Done => r.phase = 3,
            Phase::Auditing => r.phase = 4,
            Phase::Searching => r.phase = 6,
            Phase::Rooting { cursor } => {
                r.phase = 5;
                r.cursor = *cursor as u64;
            }
        }
        r
    }

    /// The driver state, with its program and the current pass's marked boards.
    pub fn state(&self, program: Program, todo: Vec<Board>) -> DriverState {
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let phase = match self.phase {
            0 => Phase::Start,
            1 => Phase::Expanding {
                pass: PASSES
                    .get(usize::from(self.pass))
                    .copied()
                    .unwrap_or(PassKind::DeviateRoot),
                root_value: self.root_value,
                todo,
                cursor: n(self.cursor),
                iteration: changes_of(self.iteration),
            },
            2 => Phase::Adding {
                game: n(self.game),
                cursor: n(self.cursor),
            },
            4 => Phase::Auditing,
            6 => Phase::Searching,
            5 => Phase::Rooting {
                cursor: n(self.cursor),
            },
            _ => Phase::Done,
        };
        DriverState {
            program,
            phase,
            iterations: self.iterations,
            passes: self.passes,
            changes: changes_of(self.changes),
            illegal: self
                .illegal
                .iter()
                .map(|&(g, i, m)| {
                    (
                        n(g),
                        IllegalGameMove {
                            index: n(i),
                            mv: move_of(m),
                        },
                    )
                })
                .collect(),
            audit: Vec::new(),
            searched: (0, 0),
        }
    }
}

/// The marked boards of the running program's current pass, written only when a pass is marked
/// (they do not change while the pass is expanded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TodoRecord {
    /// [`DriverRecord::passes`] of the pass these boards belong to.
    pub passes: u32,
    /// The marked boards, in expansion order.
    pub todo: Vec<(u64, u64)>,
}

impl TodoRecord {
    /// The record of a driver state's marked boards (empty outside an expansion pass).
    pub fn new(s: &DriverState) -> TodoRecord {
        TodoRecord {
            passes: s.passes,
            todo: match &s.phase {
                Phase::Expanding { todo, .. } => todo.iter().map(pair).collect(),
                _ => Vec::new(),
            },
        }
    }

    /// The boards.
    pub fn boards(&self) -> Vec<Board> {
        self.todo.iter().copied().map(board_of).collect()
    }
}

/// The persisted growth state: the running program's state (its program is the one the replay
/// log is replaying, else the first of the queue) and whether an operator paused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GrowthRecord {
    /// The current program's state (`None`: not started).
    pub driver: Option<DriverRecord>,
    /// Paused by an operator.
    pub paused: bool,
    /// Description of the last program finished (status when idle).
    pub last: String,
}

/// Where a program of the queue stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProgramState {
    /// Waiting for the programs before it.
    Queued,
    /// Started (the first of the queue, once its driver ran).
    Running,
    /// Finished.
    Done,
    /// Cancelled by an operator (`expand cancel`, `expand --replace`), or by a book
    /// replacement.
    Cancelled,
}

impl ProgramState {
    /// The state's name (`queued`, `running`, `done`, `cancelled`).
    pub fn name(self) -> &'static str {
        match self {
            ProgramState::Queued => "queued",
            ProgramState::Running => "running",
            ProgramState::Done => "done",
            ProgramState::Cancelled => "cancelled",
        }
    }

    /// Whether the program will not run (any more).
    pub fn is_final(self) -> bool {
        matches!(self, ProgramState::Done | ProgramState::Cancelled)
    }
}

/// A program of the queue (`q` + id): what it is, where it stands, when it was queued, started
/// and ended (milliseconds since the Unix epoch), and what it did. Written when it changes
/// state, in the growth checkpoint that changes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramRecord {
    /// The program's number (1, 2, …; never reused within a book).
    pub id: u64,
    /// The program.
    pub program: Program,
    /// Where it stands.
    pub state: ProgramState,
    /// When it was queued.
    pub submitted_ms: u64,
    /// When it started.
    pub started_ms: Option<u64>,
    /// When it ended (done or cancelled).
    pub finished_ms: Option<u64>,
    /// What it did, once ended (the report line).
    pub report: String,
}

/// A program the replay log holds: one that changed the book since the base book, with the
/// point it was cut at when an operator cancelled it while it ran (a replay stops there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedProgram {
    /// Its number in the queue.
    pub id: u64,
    /// The program.
    pub program: Program,
    /// Where it was cut (`None`: it ran to its end).
    pub stop: Option<StepPoint>,
}

/// The replay log (`m growth-log`): the programs that changed the book since the base book,
/// oldest first; during a replay, the first `replayed` have been run again and the next one is
/// running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LogRecord {
    /// The programs.
    pub programs: Vec<LoggedProgram>,
    /// How many of them a replay in progress has run again (all of them: no replay).
    pub replayed: u64,
}

/// A stored leaf result with its provenance, keyed by its search request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// The search's result (stored as its fields: move code, score, depth, selectivity,
    /// exact, nodes, search time in microseconds).
    #[serde(with = "leaf_fields")]
    pub leaf: LeafResult,
    /// The worker that sent it.
    pub worker: [u8; 16],
    /// The job it answered.
    pub job: [u8; 16],
    /// Milliseconds since the Unix epoch when it was accepted.
    pub accepted_ms: u64,
    /// The contributors vouching for it (credential names, `(local)`, `(coordinator)`, ...;
    /// see `crate::service::trust`), the submitter first.
    pub sources: Vec<String>,
}

/// The results one batch stored (see `crate::store`): (player, opponent, excluded moves,
/// level, result) each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultGroupRecord {
    /// The results, by request.
    pub results: Vec<(u64, u64, u64, u8, ResultRecord)>,
}

/// One contributor's standing and credit (see `crate::service::trust`), keyed by its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TrustRecord {
    /// Its owner (empty: the coordinator's own).
    pub owner: String,
    /// The coordinator's own searches (verifier, in-process workers).
    pub root: bool,
    /// Trusted by the operator (`workers add --trusted`, anonymous loopback workers).
    pub given: bool,
    /// Consecutive results that agreed with the trust root (reset by an invalid one).
    pub streak: u64,
    /// When it first earned trust, milliseconds since the Unix epoch (0: never).
    pub earned_ms: u64,
    /// When its first result arrived, milliseconds since the Unix epoch.
    pub first_ms: u64,
    /// Invalid results (at `block_after` it is blocked).
    pub invalid: u64,
    /// Blocked for invalid results: its calls are refused.
    pub blocked: bool,
    /// Results validated or used by the book.
    pub results: u64,
    /// Nodes of those results.
    pub nodes: u64,
    /// Search time of those results, microseconds (as reported by the worker).
    pub cpu_us: u64,
    /// Results it sent that were not needed for validation (spot checks and replicas of the
    /// root's work count here, not in `results`).
    pub replicas: u64,
}

/// One replica of a request whose case is open (stored so that an acknowledged replica
/// survives a restart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaRecord {
    /// Its contributor.
    pub contributor: String,
    /// The contributor's owner.
    pub owner: String,
    /// Its standing when it arrived (`Standing as u8`).
    pub standing: u8,
    /// The result.
    pub result: ResultRecord,
}

/// An open case: the replicas of one request waiting for a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseRecord {
    /// The replicas, earliest first.
    pub replicas: Vec<ReplicaRecord>,
    /// The first replica's result reached the book already (a spot check is open).
    pub applied: bool,
}

impl ResultRecord {
    /// A record of `leaf` without provenance (filled in by the caller).
    pub fn of(leaf: &LeafResult) -> ResultRecord {
        ResultRecord {
            leaf: *leaf,
            worker: [0; 16],
            job: [0; 16],
            accepted_ms: 0,
            sources: Vec::new(),
        }
    }
}

/// A [`LeafResult`] stored as the tuple of its fields (the engine's type derives no serde):
/// move code, score, depth, selectivity, exact, nodes, search time in microseconds. Postcard
/// writes a tuple as its fields back to back, so a record holding one is laid out as one
/// holding the fields.
mod leaf_fields {
    use bookfarm_engine::Move;
    use bookfarm_engine::search::LeafResult;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    type Fields = (u8, i32, u32, u8, bool, u64, u64);

    pub fn serialize<S: Serializer>(l: &LeafResult, s: S) -> Result<S::Ok, S::Error> {
        let elapsed_us = u64::try_from(l.elapsed.as_micros()).unwrap_or(u64::MAX);
        let fields: Fields = (
            l.mv.code(),
            l.score,
            l.depth,
            l.selectivity,
            l.exact,
            l.nodes,
            elapsed_us,
        );
        fields.serialize(s)
    }

    /// An unknown move code (which a record we wrote never holds) reads as "no move".
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LeafResult, D::Error> {
        let (mv, score, depth, selectivity, exact, nodes, elapsed_us) = Fields::deserialize(d)?;
        Ok(LeafResult {
            mv: Move::from_code(mv).unwrap_or(Move::None),
            score,
            depth,
            selectivity,
            exact,
            nodes,
            elapsed: Duration::from_micros(elapsed_us),
        })
    }
}

/// What happened, in one event of the log (`events` tree, see `events.rs`). Variants are only
/// ever appended (postcard stores the variant's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    /// The store's format was migrated (detail: from and to).
    StoreMigrated,
    /// A program was queued (subject: its description).
    ProgramQueued,
    /// A program started running.
    ProgramStarted,
    /// A program finished (with its cost).
    ProgramDone,
    /// A program was cancelled or replaced before it finished.
    ProgramCancelled,
    /// The operator added a worker credential (subject: its name).
    CredentialAdded,
    /// The operator blocked a credential (detail: the reason).
    CredentialBlocked,
    /// The operator unblocked a credential.
    CredentialUnblocked,
    /// The operator revoked a credential.
    CredentialRevoked,
    /// A volunteer enrolled: a credential created from an invitation or by open enrolment.
    Enrolled,
    /// A contributor's result disagreed with the settled result (detail: what it lost).
    LieCaught,
    /// The coordinator blocked a contributor for invalid results.
    ContributorBlocked,
    /// The growth programs were replayed without the results of caught contributors.
    Replay,
    /// A search was quarantined after repeated failures (subject: the position).
    Quarantined,
    /// A worker registered (subject: its name).
    WorkerJoined,
    /// A worker left: its session ended, or it fell silent and its leases expired.
    WorkerLeft,
    /// The results of caught contributors were retracted from an asynchronous book: the leaves
    /// they gave are searched again (no replay; detail: the program that repairs them).
    Retract,
}

/// What a program cost, kept with its `ProgramDone` event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostRecord {
    /// Search time of every accepted search of the program's jobs (replicas, checks and
    /// speculative searches included), as the workers reported it, in microseconds.
    pub cpu_us: u64,
    /// Accepted searches (replicas included).
    pub searches: u64,
    /// Search time of the replicas beyond a request's first (validation and checks).
    pub replica_cpu_us: u64,
    /// Positions the book gained.
    pub positions: u64,
    /// Wall time from start to end, milliseconds.
    pub wall_ms: u64,
}

/// One event of the farm's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// When, milliseconds since the Unix epoch.
    pub t_ms: u64,
    /// What happened.
    pub kind: EventKind,
    /// What it is about: a credential, contributor or worker name, a program, a position.
    pub subject: String,
    /// The subject's owner (empty: none or not known).
    pub owner: String,
    /// Details: a reason, counts.
    pub detail: String,
    /// The program it belongs to (0: none).
    pub program: u64,
    /// A finished program's cost.
    pub cost: Option<CostRecord>,
}
