//! A growth program: the one description of a book command that grows the book. The driver runs
//! it ([`crate::driver`]), the coordinator's store keeps it (its serde form, written with
//! postcard), the wire carries it (`bookfarm_proto::convert`), and the command lines build it.
//!
//! A program is an [`Operation`] (what Edax's command does), the line to the position it starts
//! from (`root`, the start position when empty), the level of the positions it creates, and a
//! [`Schedule`].
//!
//! Engine types carry no serde derive: boards and moves are stored here as their bitboards and
//! move codes.

use crate::mem::MemBook;
use crate::query::shortest_line;
use crate::research::Upgrade;
use crate::searches::SearchSet;
use crate::select::Deviate;
use bookfarm_engine::formats::obf::parse_obf_line;
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::formats::{Game, GameError};
use bookfarm_engine::{Board, Move};
use serde::{Deserialize, Serialize};

/// A growth program (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// What the program does.
    pub operation: Operation,
    /// The moves from the start position to the position the selectors and `upgrade` start
    /// from (empty: the start position; passes may be omitted where forced). Programs that
    /// name their positions themselves (`new`, `add`, `expand`, `audit`) ignore it.
    #[serde(with = "moves")]
    pub root: Vec<Move>,
    /// Level of the positions expansions create (`None`: the expanded position's level, as
    /// Edax does).
    pub level: Option<u8>,
    /// How its searches are scheduled.
    pub schedule: Schedule,
}

/// How a program's searches are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Schedule {
    /// Edax's serial program: each step is planned on the book the previous steps left, so the
    /// book depends only on the program and the search results.
    #[default]
    Serial,
    /// No pass barriers ([`crate::schedule::AsyncGrowth`]): a marked position is expanded as
    /// soon as the results its step needs are known. The book is a finished book by Edax's
    /// rules, not the serial one position for position. Programs without passes (new, add,
    /// expand, audit) run serially; [`crate::driver`] runs every program serially.
    Async,
    /// Not chosen yet: the coordinator that runs the program chooses when it starts (`serve`:
    /// by the search threads registered then) and records its choice in the program. Runs as
    /// [`Schedule::Serial`] wherever nobody chooses.
    Auto,
}

impl Schedule {
    /// The name commands and reports use (`serial`, `async`, `auto`).
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Serial => "serial",
            Schedule::Async => "async",
            Schedule::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Schedule {
    type Err = String;

    fn from_str(s: &str) -> Result<Schedule, String> {
        match s {
            "serial" => Ok(Schedule::Serial),
            "async" => Ok(Schedule::Async),
            "auto" => Ok(Schedule::Auto),
            _ => Err(format!("unknown schedule {s:?} (serial, async or auto)")),
        }
    }
}

/// What a growth program does (Edax's book commands that search).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// `book new`: add (and search) the start position.
    New,
    /// `book deviate REL ABS` from the root: iterations of the root side's pass then the
    /// opponent's, each marked on the iteration's root value, until an iteration adds nothing.
    Deviate {
        /// Relative and absolute errors.
        params: Deviate,
    },
    /// `book enhance MID END` from the root (errors stored in the header). Edax runs exactly one
    /// iteration; `until_stable` repeats until an iteration adds nothing.
    Enhance {
        /// Midgame error.
        midgame_error: i32,
        /// Endcut error.
        endcut_error: i32,
        /// Repeat until nothing changes (Edax: false).
        until_stable: bool,
    },
    /// `book play` (Edax HEAD) from the root: expand reachable positions without links, until an
    /// iteration adds nothing.
    Play,
    /// `book extend` (Edax HEAD) from the root: expand reachable leaves that are best moves,
    /// until an iteration adds nothing.
    Extend,
    /// Edax's `book_expand` of given positions (canonical boards), in the given order, once.
    Expand {
        /// The positions to expand.
        #[serde(with = "boards")]
        boards: Vec<Board>,
    },
    /// `book add`: games from the start position (Edax's `book_add_game` for each).
    AddGames {
        /// Move lists.
        #[serde(with = "games")]
        games: Vec<Vec<Move>>,
    },
    /// `book upgrade LEVEL [--error E]` from the root: rounds of marking
    /// ([`crate::research::upgrade_mark`]) and re-searching the marked leaves at the level in
    /// marking order (closest to the root first), each round on the values the previous one
    /// left, until a round marks nothing.
    Upgrade {
        /// Level and error window.
        params: Upgrade,
    },
    /// The line audit: the book's best lines ([`crate::extract::best_lines`]) played to the end
    /// by searches at `level` (both sides); the lines are independent, so the next search of
    /// every unfinished line is requested at once. The book is not changed; the outcome is
    /// [`crate::driver::DriverState::audit`], and with `queue` the contradicting lines are
    /// added to the book by a follow-up program ([`crate::driver::DriverState::follow_up`]).
    Audit {
        /// The level of the searches that play the lines out.
        level: u8,
        /// Queue the contradicting games (book line and continuation) for `book add`.
        queue: bool,
    },
    /// `book search` / `expand search`: the full-width leaf search of every position of a
    /// file at `level` ([`crate::searches`]). The book is not changed; the output is built
    /// from the results when it is written.
    Search {
        /// The positions, in file order.
        positions: SearchSet,
        /// The level of every search (1..=60).
        level: u8,
    },
    /// `expand analyze`: the full-width leaf searches of one position (its canonical board) at
    /// the levels [`crate::searches::analysis_levels`] gives from `from` to `up_to`, lowest
    /// first (the driver's lookahead lists the next levels with the first: a worker with
    /// several free threads searches them side by side). The book is
    /// not changed.
    Analyze {
        /// The position (any orientation; the requests are its canonical board's).
        #[serde(with = "board")]
        board: Board,
        /// The first level.
        from: u8,
        /// The last level.
        up_to: u8,
    },
    /// `expand analyze --store`: the deepest level of an analysis stored in the book. The
    /// missing positions of the root line are added first (as `book store` adds a game's),
    /// then the root position's leaf is re-searched at `level` with its links excluded and its
    /// level raised to `level` (the re-search of [`crate::research`]; a position already at
    /// `level` or above, or without a leaf move, is left as it is: a level is never lowered),
    /// then the book is negamaxed from the start position.
    StoreAnalysis {
        /// The level the root's leaf is searched at (1..=60).
        level: u8,
    },
}

impl Operation {
    /// The short name of the operation (`new`, `deviate 2 4`, …).
    pub fn describe(&self) -> String {
        match self {
            Operation::New => "new".into(),
            Operation::Deviate { params } => format!("deviate {} {}", params.rel, params.abs),
            Operation::Enhance {
                midgame_error,
                endcut_error,
                ..
            } => format!("enhance {midgame_error} {endcut_error}"),
            Operation::Play => "play".into(),
            Operation::Extend => "extend".into(),
            Operation::AddGames { games } => format!("add {} games", games.len()),
            Operation::Expand { boards } => format!("expand {} positions", boards.len()),
            Operation::Upgrade { params } => {
                format!("upgrade {} --error {}", params.level, params.error)
            }
            Operation::Audit { level, queue } => {
                format!("audit {level}{}", if *queue { " --queue" } else { "" })
            }
            Operation::Search { positions, level } => {
                format!("search {} positions at level {level}", positions.len())
            }
            Operation::Analyze { from, up_to, .. } if from == up_to => {
                format!("analyze at level {from}")
            }
            Operation::Analyze { from, up_to, .. } => format!("analyze levels {from}..{up_to}"),
            Operation::StoreAnalysis { level } => format!("store the analysis at level {level}"),
        }
    }

    /// Whether the operation leaves the book as it is: it only asks for searches and reads
    /// their results (a search program, an analysis). A replay of the book's programs skips
    /// it.
    pub fn is_book_neutral(&self) -> bool {
        matches!(self, Operation::Search { .. } | Operation::Analyze { .. })
    }

    /// Whether a queue runs the operation before the programs queued before it (after the
    /// running one and the top-priority programs queued earlier): an analysis (`expand
    /// analyze`) and the store of one.
    pub fn is_top_priority(&self) -> bool {
        matches!(
            self,
            Operation::Analyze { .. } | Operation::StoreAnalysis { .. }
        )
    }

    /// `book enhance MID END` as the coordinator runs it (every command and the admin API):
    /// repeated until an iteration adds nothing, where Edax runs one iteration (edax-spec
    /// §4.7).
    pub fn enhance(midgame_error: i32, endcut_error: i32) -> Operation {
        Operation::Enhance {
            midgame_error,
            endcut_error,
            until_stable: true,
        }
    }

    /// Whether the operation starts from the program's root (the selectors and `upgrade`).
    pub fn has_root(&self) -> bool {
        matches!(
            self,
            Operation::Deviate { .. }
                | Operation::Enhance { .. }
                | Operation::Play
                | Operation::Extend
                | Operation::Upgrade { .. }
                | Operation::StoreAnalysis { .. }
        )
    }
}

impl Program {
    /// `operation` from the start position, creating positions at the expanded position's
    /// level, serially.
    pub fn new(operation: Operation) -> Program {
        Program {
            operation,
            root: Vec::new(),
            level: None,
            schedule: Schedule::Serial,
        }
    }

    /// The program with new positions at `level` (`None`: the expanded position's level).
    pub fn at_level(mut self, level: Option<u8>) -> Program {
        self.level = level;
        self
    }

    /// The position the root line reaches (passes inserted where forced); `None` when the line
    /// is not legal.
    pub fn root_board(&self) -> Option<Board> {
        self.root_boards()?.last().copied()
    }

    /// Every position of the root line, the start position first and the root last (passes
    /// inserted where forced); `None` when the line is not legal.
    pub fn root_boards(&self) -> Option<Vec<Board>> {
        let game = Game::from_moves(self.root.iter().copied()).ok()?;
        game.replay().ok()
    }

    /// The short name of the program: its operation's, then the root line when it is not the
    /// start position (`deviate 2 4`, `play from f5d6`).
    pub fn describe(&self) -> String {
        let what = self.operation.describe();
        if self.root.is_empty() || !self.operation.has_root() {
            return what;
        }
        let line: String = self
            .root
            .iter()
            .filter_map(|m| match m {
                Move::Square(sq) => Some(sq.to_string()),
                _ => None,
            })
            .collect();
        format!("{what} from {line}")
    }
}

/// Why a program cannot start from the root it was given (`--from LINE`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RootError {
    /// Neither a move list nor an OBF board.
    #[error(
        "--from {0:?}: neither a move list (f5d6c3) nor an OBF board (64 cells and the side to move)"
    )]
    Syntax(String),
    /// A move of the line cannot be played.
    #[error("--from: the line's move {mv} at ply {ply} is illegal")]
    Illegal {
        /// 1-based ply of the move (forced passes counted).
        ply: usize,
        /// The move.
        mv: Move,
    },
    /// An OBF board that is not in the book: there is no line to add it by.
    #[error(
        "--from: the position is not in the book; give the moves that reach it (its missing positions are then added)"
    )]
    NotInBook,
    /// An OBF board in the book that no book line reaches from the start position.
    #[error(
        "--from: no book line reaches the position from the start position; give the moves that reach it"
    )]
    Unreachable,
    /// The root is deeper than the book: the program would have nothing to grow.
    #[error(
        "--from: the root has {empties} empty squares, past the book's depth (positions down to {n_empties} empties)"
    )]
    PastDepth {
        /// The root's empty squares.
        empties: u32,
        /// The book's limit (Edax's `n_empties`).
        n_empties: i32,
    },
}

/// The root line `text` names in `book`: a move list from the start position (passes may be
/// omitted where forced), or an OBF board (then the shortest line of the book's moves that
/// reaches it). An empty text is the start position. The root must be within the book depth.
pub fn resolve_root(text: &str, book: &MemBook) -> Result<Vec<Move>, RootError> {
    let text = text.trim();
    let line = match parse_moves(text) {
        Ok(moves) => moves,
        Err(_) => {
            let board = match parse_obf_line(text) {
                Ok(Some(p)) => p.board,
                _ => return Err(RootError::Syntax(text.to_string())),
            };
            if book.probe(&board).is_none() {
                return Err(RootError::NotInBook);
            }
            shortest_line(book, &board).ok_or(RootError::Unreachable)?
        }
    };
    check_root(&line, book)?;
    Ok(line)
}

/// Whether a program can start from the root `line` in `book`: the line is legal and the
/// root within the book depth (at least `n_empties` empties).
pub fn check_root(line: &[Move], book: &MemBook) -> Result<(), RootError> {
    let game = Game::from_moves(line.iter().copied()).map_err(|e| match e {
        GameError::Illegal { ply, mv, .. } => RootError::Illegal { ply: ply + 1, mv },
        _ => RootError::Syntax(format!("{line:?}")),
    })?;
    let (root, _) = game
        .final_position()
        .map_err(|_| RootError::Syntax(format!("{line:?}")))?;
    let n_empties = book.header().n_empties;
    if (root.empties() as i32) < n_empties {
        return Err(RootError::PastDepth {
            empties: root.empties(),
            n_empties,
        });
    }
    Ok(())
}

impl From<Operation> for Program {
    fn from(operation: Operation) -> Program {
        Program::new(operation)
    }
}

/// Moves as their codes ([`Move::code`]).
mod moves {
    use bookfarm_engine::Move;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(moves: &[Move], s: S) -> Result<S::Ok, S::Error> {
        moves
            .iter()
            .map(|m| m.code())
            .collect::<Vec<u8>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Move>, D::Error> {
        Vec::<u8>::deserialize(d)?
            .into_iter()
            .map(|c| {
                Move::from_code(c)
                    .ok_or_else(|| serde::de::Error::custom(format!("bad move code {c}")))
            })
            .collect()
    }
}

/// Games as lists of move codes.
mod games {
    use bookfarm_engine::Move;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(games: &[Vec<Move>], s: S) -> Result<S::Ok, S::Error> {
        games
            .iter()
            .map(|g| g.iter().map(|m| m.code()).collect())
            .collect::<Vec<Vec<u8>>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<Move>>, D::Error> {
        Vec::<Vec<u8>>::deserialize(d)?
            .into_iter()
            .map(|g| {
                g.into_iter()
                    .map(|c| {
                        Move::from_code(c)
                            .ok_or_else(|| serde::de::Error::custom(format!("bad move code {c}")))
                    })
                    .collect()
            })
            .collect()
    }
}

/// A board as its (player, opponent) bitboards; overlapping discs are refused.
mod board {
    use bookfarm_engine::Board;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(b: &Board, s: S) -> Result<S::Ok, S::Error> {
        (b.player, b.opponent).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Board, D::Error> {
        let (player, opponent) = <(u64, u64)>::deserialize(d)?;
        if player & opponent == 0 {
            Ok(Board { player, opponent })
        } else {
            Err(serde::de::Error::custom(format!(
                "overlapping board {player:#018x}:{opponent:#018x}"
            )))
        }
    }
}

/// Boards as (player, opponent) bitboards; overlapping discs are refused.
mod boards {
    use bookfarm_engine::Board;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(boards: &[Board], s: S) -> Result<S::Ok, S::Error> {
        boards
            .iter()
            .map(|b| (b.player, b.opponent))
            .collect::<Vec<(u64, u64)>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Board>, D::Error> {
        Vec::<(u64, u64)>::deserialize(d)?
            .into_iter()
            .map(|(player, opponent)| {
                if player & opponent == 0 {
                    Ok(Board { player, opponent })
                } else {
                    Err(serde::de::Error::custom(format!(
                        "overlapping board {player:#018x}:{opponent:#018x}"
                    )))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::Square;

    fn sq(s: &str) -> Move {
        Move::Square(Square::parse(s).expect("square"))
    }

    fn every_operation() -> Vec<Operation> {
        vec![
            Operation::New,
            Operation::Deviate {
                params: Deviate::new(-2, 4),
            },
            Operation::Enhance {
                midgame_error: 2,
                endcut_error: 4,
                until_stable: true,
            },
            Operation::Play,
            Operation::Extend,
            Operation::Expand {
                boards: vec![Board::start(), Board::start().pass()],
            },
            Operation::AddGames {
                games: vec![vec![sq("f5"), sq("d6")], vec![], vec![sq("c4"), Move::Pass]],
            },
            Operation::Upgrade {
                params: Upgrade { level: 8, error: 2 },
            },
            Operation::Audit {
                level: 10,
                queue: true,
            },
            Operation::Search {
                positions: crate::searches::SearchSet::parse(
                    "---------------------------OX------XO--------------------------- X; % a\n",
                    10,
                )
                .expect("obf"),
                level: 6,
            },
            Operation::Analyze {
                board: Board::start(),
                from: 4,
                up_to: 12,
            },
            Operation::StoreAnalysis { level: 14 },
        ]
    }

    #[test]
    fn programs_survive_their_stored_form() {
        for operation in every_operation() {
            for (root, level, schedule) in [
                (vec![], None, Schedule::Serial),
                (vec![sq("f5"), sq("d6")], Some(12), Schedule::Async),
            ] {
                let p = Program {
                    operation: operation.clone(),
                    root,
                    level,
                    schedule,
                };
                let bytes = postcard::to_allocvec(&p).expect("encode");
                assert_eq!(postcard::from_bytes::<Program>(&bytes), Ok(p));
            }
        }
    }

    #[test]
    fn bad_stored_moves_and_boards_are_refused() {
        // postcard: the operation, then the root's length and codes, the level, the schedule.
        // A root holding move code 99:
        let mut bytes = postcard::to_allocvec(&Program::new(Operation::Play)).expect("encode");
        let n = bytes.len();
        bytes.truncate(n - 3);
        bytes.extend_from_slice(&[1, 99, 0, 0]);
        assert!(postcard::from_bytes::<Program>(&bytes).is_err());
        let overlapping = Program::new(Operation::Expand {
            boards: vec![Board {
                player: 1,
                opponent: 0,
            }],
        });
        let mut bytes = postcard::to_allocvec(&overlapping).expect("encode");
        // The board's opponent bitboard (the varint 0 before the empty root, the level and the
        // schedule) becomes 1: the discs overlap.
        let last_board_byte = bytes.len() - 4;
        assert_eq!(bytes[last_board_byte], 0);
        bytes[last_board_byte] = 1;
        assert!(postcard::from_bytes::<Program>(&bytes).is_err());
    }

    #[test]
    fn the_root_line_names_the_starting_position() {
        let p = Program::new(Operation::Play);
        assert_eq!(p.root_board(), Some(Board::start()));
        assert_eq!(p.describe(), "play");
        let f5d6 = Program {
            root: vec![sq("f5"), sq("d6")],
            ..Program::new(Operation::Deviate {
                params: Deviate::new(2, 4),
            })
        };
        let want = Board::start()
            .play_move(sq("f5"))
            .and_then(|b| b.play_move(sq("d6")))
            .expect("legal");
        assert_eq!(f5d6.root_board(), Some(want));
        assert_eq!(f5d6.describe(), "deviate 2 4 from f5d6");
        // Programs that name their own positions ignore the root.
        let audit = Program {
            root: vec![sq("f5")],
            ..Program::new(Operation::Audit {
                level: 6,
                queue: false,
            })
        };
        assert_eq!(audit.describe(), "audit 6");
        let illegal = Program {
            root: vec![sq("a1")],
            ..Program::new(Operation::Play)
        };
        assert_eq!(illegal.root_board(), None);
        for op in every_operation() {
            assert_eq!(Program::from(op.clone()).describe(), op.describe());
        }
    }
}
