//! Validating conversions between prost messages ([`crate::pb`]) and domain types.
//!
//! Decoding (`TryFrom<pb::…>`) never trusts the peer: overlapping bitboards, unknown move codes,
//! malformed job ids and out-of-range levels are refused with a [`ConvertError`], which maps to
//! `InvalidArgument`.

use crate::domain::{Ack, CreditNote, Failure, Identity, IdleReason, Job, JobResult};
use crate::pb;
use crate::status::{ErrorCode, ServiceError};
use bookfarm_book::BookFormat;
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::research::Upgrade;
use bookfarm_book::select::Deviate;
use bookfarm_engine::search::LeafResult;
use bookfarm_engine::{Board, Move};
use std::time::Duration;
use uuid::Uuid;

/// A message that does not describe a valid domain value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// A required sub-message is absent.
    #[error("missing field {0}")]
    MissingField(&'static str),
    /// Player and opponent bitboards overlap.
    #[error("invalid position: player {player:#018x} and opponent {opponent:#018x} overlap")]
    Overlap {
        /// Player bitboard.
        player: u64,
        /// Opponent bitboard.
        opponent: u64,
    },
    /// A job id is not a UUID.
    #[error("invalid job id {0:?}")]
    JobId(String),
    /// A move code above 65.
    #[error("invalid move code {0} (0..=63 square, 64 pass, 65 no move)")]
    MoveCode(u32),
    /// A selectivity index above 5.
    #[error("invalid selectivity {0} (0..=5)")]
    Selectivity(u32),
    /// A level above 60.
    #[error("invalid level {0} (0..=60)")]
    Level(u32),
    /// A depth above 60.
    #[error("invalid depth {0} (0..=60)")]
    Depth(u32),
    /// A program a start request cannot carry (it starts the selectors, `upgrade`, the
    /// audit and `book add`).
    #[error("{0:?} cannot be started over the admin API")]
    Unsupported(String),
    /// A search program's positions that are not OBF (the message names the line).
    #[error("search positions: {0}")]
    SearchInput(String),
    /// An unknown enum value.
    #[error("invalid {field} value {value}")]
    Enum {
        /// Field name.
        field: &'static str,
        /// The raw value.
        value: i32,
    },
}

impl ServiceError for ConvertError {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidArgument
    }
}

impl TryFrom<pb::Position> for Board {
    type Error = ConvertError;
    fn try_from(p: pb::Position) -> Result<Board, ConvertError> {
        Board::new(p.player, p.opponent).map_err(|_| ConvertError::Overlap {
            player: p.player,
            opponent: p.opponent,
        })
    }
}

impl From<&Board> for pb::Position {
    fn from(b: &Board) -> pb::Position {
        pb::Position {
            player: b.player,
            opponent: b.opponent,
        }
    }
}

/// Parse a job id.
pub fn parse_job_id(s: &str) -> Result<Uuid, ConvertError> {
    Uuid::parse_str(s).map_err(|_| ConvertError::JobId(s.chars().take(64).collect()))
}

/// Decode an Edax move code.
pub fn move_from_code(code: u32) -> Result<Move, ConvertError> {
    u8::try_from(code)
        .ok()
        .and_then(Move::from_code)
        .ok_or(ConvertError::MoveCode(code))
}

/// A required sub-message.
pub fn required<T>(v: Option<T>, field: &'static str) -> Result<T, ConvertError> {
    v.ok_or(ConvertError::MissingField(field))
}

/// The book format an export asks for; unspecified is Edax's `book.dat` (the format of exports
/// before the field was set).
pub fn export_format(value: i32) -> Result<BookFormat, ConvertError> {
    match pb::ExportFormat::try_from(value) {
        Ok(pb::ExportFormat::Edax | pb::ExportFormat::Unspecified) => Ok(BookFormat::Edax),
        Ok(pb::ExportFormat::Csv) => Ok(BookFormat::Csv),
        Ok(pb::ExportFormat::Egbk3) => Ok(BookFormat::Egbk3),
        Err(_) => Err(ConvertError::Enum {
            field: "format",
            value,
        }),
    }
}

impl From<BookFormat> for pb::ExportFormat {
    fn from(f: BookFormat) -> pb::ExportFormat {
        match f {
            BookFormat::Edax => pb::ExportFormat::Edax,
            BookFormat::Csv => pb::ExportFormat::Csv,
            BookFormat::Egbk3 => pb::ExportFormat::Egbk3,
        }
    }
}

impl From<pb::WorkerIdentity> for Identity {
    fn from(i: pb::WorkerIdentity) -> Identity {
        Identity {
            protocol_version: i.protocol_version,
            engine_version: i.engine_version,
            eval_hash: i.eval_hash,
            search_signature: i.search_signature,
        }
    }
}

impl From<&Identity> for pb::WorkerIdentity {
    fn from(i: &Identity) -> pb::WorkerIdentity {
        pb::WorkerIdentity {
            protocol_version: i.protocol_version,
            engine_version: i.engine_version.clone(),
            eval_hash: i.eval_hash.clone(),
            search_signature: i.search_signature.clone(),
        }
    }
}

impl From<&Job> for pb::Job {
    fn from(j: &Job) -> pb::Job {
        pb::Job {
            job_id: j.id.to_string(),
            position: Some((&j.board).into()),
            excluded: j.excluded,
            level: u32::from(j.level),
            attempt: j.attempt,
        }
    }
}

impl TryFrom<pb::Job> for Job {
    type Error = ConvertError;
    fn try_from(j: pb::Job) -> Result<Job, ConvertError> {
        let level = u8::try_from(j.level)
            .ok()
            .filter(|&l| l <= 60)
            .ok_or(ConvertError::Level(j.level))?;
        Ok(Job {
            id: parse_job_id(&j.job_id)?,
            board: required(j.position, "position")?.try_into()?,
            excluded: j.excluded,
            level,
            attempt: j.attempt,
        })
    }
}

impl From<&JobResult> for pb::LeafResult {
    fn from(r: &JobResult) -> pb::LeafResult {
        let l = &r.leaf;
        pb::LeafResult {
            job_id: r.job_id.to_string(),
            r#move: u32::from(l.mv.code()),
            score: l.score,
            depth: l.depth,
            selectivity: u32::from(l.selectivity),
            exact: l.exact,
            nodes: l.nodes,
            elapsed_us: u64::try_from(l.elapsed.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

impl TryFrom<pb::LeafResult> for JobResult {
    type Error = ConvertError;
    fn try_from(r: pb::LeafResult) -> Result<JobResult, ConvertError> {
        if r.depth > 60 {
            return Err(ConvertError::Depth(r.depth));
        }
        let selectivity = u8::try_from(r.selectivity)
            .ok()
            .filter(|&s| s <= 5)
            .ok_or(ConvertError::Selectivity(r.selectivity))?;
        Ok(JobResult {
            job_id: parse_job_id(&r.job_id)?,
            leaf: LeafResult {
                mv: move_from_code(r.r#move)?,
                // The score range is a domain rule checked by the coordinator (it knows the
                // job).
                score: r.score,
                depth: r.depth,
                selectivity,
                exact: r.exact,
                nodes: r.nodes,
                elapsed: Duration::from_micros(r.elapsed_us),
            },
        })
    }
}

impl TryFrom<pb::ReportFailureRequest> for Failure {
    type Error = ConvertError;
    fn try_from(r: pb::ReportFailureRequest) -> Result<Failure, ConvertError> {
        Ok(Failure {
            job_id: parse_job_id(&r.job_id)?,
            reason: r.reason.chars().take(1000).collect(),
            retryable: r.retryable,
        })
    }
}

impl From<Ack> for pb::AckStatus {
    fn from(a: Ack) -> pb::AckStatus {
        match a {
            Ack::Accepted => pb::AckStatus::Accepted,
            Ack::Duplicate => pb::AckStatus::Duplicate,
        }
    }
}

impl TryFrom<pb::AckStatus> for Ack {
    type Error = ConvertError;
    fn try_from(a: pb::AckStatus) -> Result<Ack, ConvertError> {
        match a {
            pb::AckStatus::Accepted => Ok(Ack::Accepted),
            pb::AckStatus::Duplicate => Ok(Ack::Duplicate),
            pb::AckStatus::Unspecified => Err(ConvertError::Enum {
                field: "ack status",
                value: 0,
            }),
        }
    }
}

impl From<IdleReason> for pb::IdleReason {
    fn from(r: IdleReason) -> pb::IdleReason {
        match r {
            IdleReason::BuildDone => pb::IdleReason::BuildDone,
            IdleReason::Paused => pb::IdleReason::Paused,
            IdleReason::QueueEmpty => pb::IdleReason::QueueEmpty,
            IdleReason::WaitingForValidation => pb::IdleReason::WaitingForValidation,
            IdleReason::NotEligible => pb::IdleReason::NotEligible,
            IdleReason::RateLimited => pb::IdleReason::RateLimited,
            IdleReason::NoFit => pb::IdleReason::NoFit,
            IdleReason::Reserved => pb::IdleReason::Reserved,
            IdleReason::Earning => pb::IdleReason::Earning,
        }
    }
}

/// The idle reason of a lease reply's field: `None` for a reason this build does not know
/// (a newer coordinator) or none given.
pub fn idle_reason(value: i32) -> Option<IdleReason> {
    match pb::IdleReason::try_from(value).ok()? {
        pb::IdleReason::Unspecified => None,
        pb::IdleReason::BuildDone => Some(IdleReason::BuildDone),
        pb::IdleReason::Paused => Some(IdleReason::Paused),
        pb::IdleReason::QueueEmpty => Some(IdleReason::QueueEmpty),
        pb::IdleReason::WaitingForValidation => Some(IdleReason::WaitingForValidation),
        pb::IdleReason::NotEligible => Some(IdleReason::NotEligible),
        pb::IdleReason::RateLimited => Some(IdleReason::RateLimited),
        pb::IdleReason::NoFit => Some(IdleReason::NoFit),
        pb::IdleReason::Reserved => Some(IdleReason::Reserved),
        pb::IdleReason::Earning => Some(IdleReason::Earning),
    }
}

impl From<&CreditNote> for pb::WorkerCredit {
    fn from(c: &CreditNote) -> pb::WorkerCredit {
        pb::WorkerCredit {
            standing: c.standing.clone(),
            results: c.results,
            invalid: c.invalid,
        }
    }
}

impl From<pb::WorkerCredit> for CreditNote {
    fn from(c: pb::WorkerCredit) -> CreditNote {
        CreditNote {
            standing: c.standing.chars().take(32).collect(),
            results: c.results,
            invalid: c.invalid,
        }
    }
}

/// A start request's program: its selector's operation and schedule (unspecified:
/// [`Schedule::Auto`]), its new positions at `level`
/// (0: the expanded position's level), from the start position: the request's `from` (a move
/// list or an OBF board of the book) is the service's to resolve against its book. Edax clamps the parameters
/// (deviate: rel to [−129, 129], abs to [0, 65]; enhance: [0, 129]); upgrade and audit levels
/// are clamped to [1, 60], the upgrade's error to [0, 129]. Enhance is repeated until stable
/// ([`Operation::enhance`]).
impl TryFrom<pb::StartExpansionRequest> for Program {
    type Error = ConvertError;

    fn try_from(r: pb::StartExpansionRequest) -> Result<Program, ConvertError> {
        use pb::start_expansion_request::Selector as S;
        let selector = required(r.selector, "selector")?;
        let level = u8::try_from(r.level)
            .ok()
            .filter(|l| *l <= 60)
            .ok_or(ConvertError::Level(r.level))?;
        let operation = match selector {
            S::Deviate(d) => Operation::Deviate {
                params: Deviate::new(d.relative_error, d.absolute_error),
            },
            S::Enhance(e) => {
                Operation::enhance(e.midgame_error.clamp(0, 129), e.endcut_error.clamp(0, 129))
            }
            S::Play(_) => Operation::Play,
            S::Extend(_) => Operation::Extend,
            S::Upgrade(u) => Operation::Upgrade {
                params: Upgrade {
                    level: search_level(u.level),
                    error: u.error.clamp(0, 129),
                },
            },
            S::Audit(a) => Operation::Audit {
                level: search_level(a.level),
                queue: a.queue,
            },
            S::Search(s) => Operation::Search {
                positions: bookfarm_book::searches::SearchSet::parse(
                    &s.obf,
                    bookfarm_book::searches::DEFAULT_MAX_POSITIONS,
                )
                .map_err(|e| ConvertError::SearchInput(e.to_string()))?,
                // Out of range: refused by the service, naming the level.
                level: u8::try_from(s.level).unwrap_or(u8::MAX),
            },
            S::Analyze(a) => Operation::Analyze {
                board: required(a.position, "position")?.try_into()?,
                // Out of range: refused by the service, naming the levels.
                from: u8::try_from(a.level).unwrap_or(u8::MAX),
                up_to: u8::try_from(a.up_to).unwrap_or(u8::MAX),
            },
            S::Add(a) => Operation::AddGames {
                games: a
                    .games
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&c| {
                                Move::from_code(c)
                                    .filter(|m| *m != Move::None)
                                    .ok_or(ConvertError::MoveCode(u32::from(c)))
                            })
                            .collect::<Result<Vec<Move>, ConvertError>>()
                    })
                    .collect::<Result<_, _>>()?,
            },
        };
        let schedule = match pb::ProgramSchedule::try_from(r.schedule) {
            Ok(pb::ProgramSchedule::Unspecified) => Schedule::Auto,
            Ok(pb::ProgramSchedule::Serial) => Schedule::Serial,
            Ok(pb::ProgramSchedule::Async) => Schedule::Async,
            Err(_) => {
                return Err(ConvertError::Enum {
                    field: "schedule",
                    value: r.schedule,
                });
            }
        };
        Ok(Program {
            schedule,
            ..Program::new(operation).at_level((level > 0).then_some(level))
        })
    }
}

/// The start request of a program, for the programs a start request can carry (the selectors,
/// `upgrade` and the audit, from the start position; enhance repeated until stable).
impl TryFrom<&Program> for pb::StartExpansionRequest {
    type Error = ConvertError;

    fn try_from(p: &Program) -> Result<pb::StartExpansionRequest, ConvertError> {
        use pb::start_expansion_request::Selector as S;
        let unsupported = || ConvertError::Unsupported(p.describe());
        let selector = match &p.operation {
            Operation::Deviate { params } => S::Deviate(pb::Deviate {
                relative_error: params.rel,
                absolute_error: params.abs,
            }),
            Operation::Enhance {
                midgame_error,
                endcut_error,
                until_stable: true,
            } => S::Enhance(pb::Enhance {
                midgame_error: *midgame_error,
                endcut_error: *endcut_error,
            }),
            Operation::Play => S::Play(pb::Play {}),
            Operation::Extend => S::Extend(pb::Extend {}),
            Operation::Upgrade { params } => S::Upgrade(pb::Upgrade {
                level: u32::from(params.level),
                error: params.error,
            }),
            Operation::Audit { level, queue } => S::Audit(pb::Audit {
                level: u32::from(*level),
                queue: *queue,
            }),
            Operation::AddGames { games } => S::Add(pb::AddGames {
                games: games
                    .iter()
                    .map(|g| g.iter().map(|m| m.code()).collect())
                    .collect(),
            }),
            Operation::Search { positions, level } => S::Search(pb::SearchFile {
                obf: positions
                    .positions()
                    .iter()
                    .map(|p| {
                        bookfarm_engine::formats::obf::ObfPosition {
                            board: p.board,
                            black_to_move: p.black,
                            scores: Vec::new(),
                            best_score: None,
                            comment: p.comment.as_deref().map(str::to_string),
                        }
                        .to_obf_line()
                            + "\n"
                    })
                    .collect(),
                level: u32::from(*level),
            }),
            Operation::Analyze { board, from, up_to } => S::Analyze(pb::AnalyzePosition {
                position: Some(board.into()),
                level: u32::from(*from),
                up_to: u32::from(*up_to),
                store: false,
            }),
            // Queued only behind its analysis (AnalyzePosition.store).
            Operation::New
            | Operation::Enhance { .. }
            | Operation::Expand { .. }
            | Operation::StoreAnalysis { .. } => {
                return Err(unsupported());
            }
        };
        Ok(pb::StartExpansionRequest {
            selector: Some(selector),
            level: p.level.map_or(0, u32::from),
            // Passes are left out: the reader inserts them where forced.
            from: p
                .root
                .iter()
                .filter(|m| matches!(m, Move::Square(_)))
                .map(ToString::to_string)
                .collect(),
            schedule: match p.schedule {
                Schedule::Auto => pb::ProgramSchedule::Unspecified,
                Schedule::Serial => pb::ProgramSchedule::Serial,
                Schedule::Async => pb::ProgramSchedule::Async,
            } as i32,
            ..Default::default()
        })
    }
}

/// A search level in 1..=60.
fn search_level(level: u32) -> u8 {
    u8::try_from(level.clamp(1, 60)).unwrap_or(60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_reasons_round_trip_and_unknown_ones_are_none() {
        for r in IdleReason::ALL {
            assert_eq!(idle_reason(pb::IdleReason::from(r) as i32), Some(r));
        }
        assert_eq!(idle_reason(0), None);
        assert_eq!(idle_reason(99), None, "a newer coordinator's reason");
    }
    use bookfarm_engine::Square;

    #[test]
    fn position_round_trip_and_overlap() {
        let b = Board::start();
        let p: pb::Position = (&b).into();
        assert_eq!(Board::try_from(p).unwrap(), b);
        let bad = pb::Position {
            player: 1,
            opponent: 3,
        };
        assert!(matches!(
            Board::try_from(bad),
            Err(ConvertError::Overlap { .. })
        ));
    }

    fn sample_result() -> JobResult {
        JobResult {
            job_id: Uuid::new_v4(),
            leaf: LeafResult {
                mv: Move::Square(Square::parse("f5").unwrap()),
                score: -6,
                depth: 12,
                selectivity: 5,
                exact: false,
                nodes: 12345,
                elapsed: Duration::from_micros(777),
            },
        }
    }

    #[test]
    fn result_round_trip() {
        let r = sample_result();
        let p: pb::LeafResult = (&r).into();
        assert_eq!(JobResult::try_from(p).unwrap(), r);
        for mv in [Move::Pass, Move::None] {
            let r = JobResult {
                leaf: LeafResult { mv, ..r.leaf },
                ..r
            };
            assert_eq!(JobResult::try_from(pb::LeafResult::from(&r)).unwrap(), r);
        }
    }

    #[test]
    fn result_rejects_garbage() {
        let good: pb::LeafResult = (&sample_result()).into();
        let cases = [
            (pb::LeafResult {
                r#move: 66,
                ..good.clone()
            }),
            pb::LeafResult {
                selectivity: 6,
                ..good.clone()
            },
            pb::LeafResult {
                depth: 61,
                ..good.clone()
            },
            pb::LeafResult {
                job_id: "not-a-uuid".into(),
                ..good.clone()
            },
        ];
        for c in cases {
            let e = JobResult::try_from(c).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
        }
    }

    #[test]
    fn job_round_trip_and_level_check() {
        let j = Job {
            id: Uuid::new_v4(),
            board: Board::start(),
            excluded: 1 << 19,
            level: 7,
            attempt: 2,
        };
        let p: pb::Job = (&j).into();
        assert_eq!(Job::try_from(p.clone()).unwrap(), j);
        assert_eq!(
            Job::try_from(pb::Job {
                level: 61,
                ..p.clone()
            }),
            Err(ConvertError::Level(61))
        );
        assert_eq!(
            Job::try_from(pb::Job {
                position: None,
                ..p
            }),
            Err(ConvertError::MissingField("position"))
        );
    }

    #[test]
    fn start_requests_clamp_like_edax_and_round_trip() {
        use pb::start_expansion_request::Selector as S;
        let request = |selector, level| pb::StartExpansionRequest {
            selector: Some(selector),
            level,
            schedule: pb::ProgramSchedule::Serial as i32,
            ..Default::default()
        };
        let p = Program::try_from(request(
            S::Deviate(pb::Deviate {
                relative_error: 500,
                absolute_error: -3,
            }),
            0,
        ))
        .unwrap();
        assert_eq!(
            p,
            Program::new(Operation::Deviate {
                params: Deviate { rel: 129, abs: 0 }
            })
        );
        let p = Program::try_from(request(
            S::Upgrade(pb::Upgrade {
                level: 99,
                error: -1,
            }),
            12,
        ))
        .unwrap();
        assert_eq!(
            p,
            Program::new(Operation::Upgrade {
                params: Upgrade {
                    level: 60,
                    error: 0
                }
            })
            .at_level(Some(12))
        );
        assert_eq!(
            Program::try_from(request(S::Play(pb::Play {}), 61)),
            Err(ConvertError::Level(61))
        );
        assert_eq!(
            Program::try_from(pb::StartExpansionRequest {
                selector: None,
                level: 0,
                ..Default::default()
            }),
            Err(ConvertError::MissingField("selector"))
        );
        for op in [
            Operation::Play,
            Operation::Extend,
            Operation::Enhance {
                midgame_error: 2,
                endcut_error: 4,
                until_stable: true,
            },
            Operation::Upgrade {
                params: Upgrade { level: 8, error: 2 },
            },
            Operation::Audit {
                level: 10,
                queue: true,
            },
        ] {
            for level in [None, Some(7)] {
                let p = Program::new(op.clone()).at_level(level);
                let r = pb::StartExpansionRequest::try_from(&p).unwrap();
                assert_eq!(Program::try_from(r), Ok(p));
            }
        }
        // The schedule travels; unspecified (an older client) lets the coordinator choose, and
        // a value this side does not know is refused.
        for schedule in [Schedule::Serial, Schedule::Async, Schedule::Auto] {
            let p = Program {
                schedule,
                ..Program::new(Operation::Extend)
            };
            let r = pb::StartExpansionRequest::try_from(&p).unwrap();
            assert_eq!(Program::try_from(r), Ok(p));
        }
        let r = pb::StartExpansionRequest {
            selector: Some(S::Play(pb::Play {})),
            ..Default::default()
        };
        assert_eq!(
            Program::try_from(r.clone()).unwrap().schedule,
            Schedule::Auto
        );
        assert_eq!(
            Program::try_from(pb::StartExpansionRequest { schedule: 3, ..r }),
            Err(ConvertError::Enum {
                field: "schedule",
                value: 3
            })
        );
        // The root line travels as text, for the service to resolve against its book.
        let rooted = Program {
            root: ["f5", "d6", "c3"]
                .iter()
                .map(|m| Move::Square(Square::parse(m).unwrap()))
                .collect(),
            ..Program::new(Operation::Play)
        };
        let r = pb::StartExpansionRequest::try_from(&rooted).unwrap();
        assert_eq!(r.from, "f5d6c3");
        assert_eq!(Program::try_from(r), Ok(Program::new(Operation::Play)));
        // Games travel as move codes, a pass included; a code that is no move is refused.
        let sq = |m: &str| Move::Square(Square::parse(m).unwrap());
        let add = Program::new(Operation::AddGames {
            games: vec![vec![sq("f5"), sq("d6")], vec![], vec![sq("f5"), Move::Pass]],
        })
        .at_level(Some(4));
        let r = pb::StartExpansionRequest::try_from(&add).unwrap();
        assert_eq!(Program::try_from(r.clone()), Ok(add));
        for bad in [65u8, 66, 255] {
            let mut r = r.clone();
            if let Some(S::Add(a)) = &mut r.selector {
                a.games[0].push(bad);
            }
            assert_eq!(
                Program::try_from(r),
                Err(ConvertError::MoveCode(u32::from(bad)))
            );
        }
        // An analysis travels as its board and levels; overlapping bitboards are refused.
        let analyze = Program::new(Operation::Analyze {
            board: bookfarm_engine::formats::transcript::board_after("f5d6c3").unwrap(),
            from: 2,
            up_to: 9,
        });
        let r = pb::StartExpansionRequest::try_from(&analyze).unwrap();
        assert_eq!(Program::try_from(r.clone()), Ok(analyze));
        let mut bad = r.clone();
        if let Some(S::Analyze(a)) = &mut bad.selector {
            a.position = Some(pb::Position {
                player: 1,
                opponent: 1,
            });
        }
        assert!(matches!(
            Program::try_from(bad),
            Err(ConvertError::Overlap { .. })
        ));
        let mut missing = r;
        if let Some(S::Analyze(a)) = &mut missing.selector {
            a.position = None;
        }
        assert_eq!(
            Program::try_from(missing),
            Err(ConvertError::MissingField("position"))
        );
        // What a start request cannot carry is refused, not dropped.
        for p in [
            Program::new(Operation::New),
            Program::new(Operation::Enhance {
                midgame_error: 2,
                endcut_error: 4,
                until_stable: false,
            }),
        ] {
            assert!(
                matches!(
                    pb::StartExpansionRequest::try_from(&p),
                    Err(ConvertError::Unsupported(_))
                ),
                "{p:?}"
            );
        }
    }

    #[test]
    fn export_formats_round_trip_and_unknown_values_are_refused() {
        for f in BookFormat::ALL {
            assert_eq!(export_format(pb::ExportFormat::from(f) as i32), Ok(f));
        }
        assert_eq!(export_format(0), Ok(BookFormat::Edax), "unspecified");
        assert_eq!(
            export_format(4),
            Err(ConvertError::Enum {
                field: "format",
                value: 4
            })
        );
    }
}
