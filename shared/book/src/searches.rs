//! Book-neutral searches: the input of a search program (the positions of an OBF file, each
//! searched full width at one level: [`crate::program::Operation::Search`]), its output, and the
//! levels an analysis of one position searches ([`crate::program::Operation::Analyze`]).
//!
//! * The request of a search program's position is `{board as the file gives it (mover's view),
//!   excluded 0, level}`: exactly what `bookfarm-worker search FILE --level L` searches, so the
//!   results (move, score, depth, selectivity, nodes) are the same. Duplicate boards share one
//!   request.
//! * The requests of an analysis are the position's canonical board, nothing excluded, so that
//!   every orientation of it (every line that reaches it) finds them.
//!
//! Invariants:
//! * an input is refused whole, naming the line, or accepted whole: a program never holds a
//!   position the parser did not read;
//! * an output is built from the results at the moment it is written, never appended to, so a
//!   result withdrawn before (a caught liar's) never reaches it.

use bookfarm_engine::formats::obf::{ObfError, ObfPosition, parse_obf};
use bookfarm_engine::level::level_params;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;
use std::sync::Arc;

/// The most positions one search program may hold by default.
pub const DEFAULT_MAX_POSITIONS: usize = 1_000_000;

/// What is wrong with a search program's input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchInputError {
    /// A line that is not an OBF position (the error names the line).
    #[error(transparent)]
    Obf(#[from] ObfError),
    /// The file holds no position.
    #[error("no position in the file")]
    Empty,
    /// More positions than a program may hold.
    #[error("{n} positions, more than the {max} a search program may hold: split the file")]
    TooMany {
        /// Positions in the file.
        n: usize,
        /// The limit.
        max: usize,
    },
}

/// One position of a search program's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPosition {
    /// The board, side to move's view.
    pub board: Board,
    /// Black is to move.
    pub black: bool,
    /// The comment of its line (after `%`), trimmed.
    pub comment: Option<Box<str>>,
}

/// The positions of a search program, in file order (shared: a program is cloned and listed
/// often, its positions never change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSet(Arc<[SearchPosition]>);

/// What an output holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputCounts {
    /// Positions of the input.
    pub positions: usize,
    /// Positions written with their result.
    pub results: usize,
    /// Positions left out: no (confirmed) result yet.
    pub missing: usize,
}

/// A built output: the OBF text and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOutput {
    /// The file's text.
    pub text: String,
    /// What it holds.
    pub counts: OutputCounts,
}

impl SearchSet {
    /// The positions of the OBF `text` (the engine's parser: an error names the line), at most
    /// `max` of them.
    pub fn parse(text: &str, max: usize) -> Result<SearchSet, SearchInputError> {
        let positions = parse_obf(text)?;
        if positions.is_empty() {
            return Err(SearchInputError::Empty);
        }
        if positions.len() > max {
            return Err(SearchInputError::TooMany {
                n: positions.len(),
                max,
            });
        }
        Ok(SearchSet(
            positions
                .into_iter()
                .map(|p| SearchPosition {
                    board: p.board,
                    black: p.black_to_move,
                    comment: p.comment.map(String::into_boxed_str),
                })
                .collect(),
        ))
    }

    /// The positions, in file order.
    pub fn positions(&self) -> &[SearchPosition] {
        &self.0
    }

    /// Positions (duplicates included).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The distinct requests at `level`, in order of first occurrence.
    pub fn requests(&self, level: u8) -> Vec<LeafRequest> {
        let mut seen = crate::results::RequestSet::default();
        self.0
            .iter()
            .map(|p| search_request(&p.board, level))
            .filter(|r| seen.insert(*r))
            .collect()
    }

    /// The output at `level`: a first comment line `% bookfarm search level=L positions=N
    /// results=R missing=M` followed by `header` (the caller's `key=value` fields), then one
    /// line per position whose request has a result (`result`), in file order, with its side
    /// to move and comment: `CELLS SIDE; MOVE:+SCORE;` (a finished game, which has no move:
    /// `CELLS SIDE; +SCORE;`). `bookfarm_engine::formats::obf::parse_obf` reads the score back
    /// as the position's best score.
    pub fn output(
        &self,
        level: u8,
        header: &str,
        result: impl Fn(&LeafRequest) -> Option<LeafResult>,
    ) -> SearchOutput {
        let mut found: HashMap<LeafRequest, Option<LeafResult>> = HashMap::new();
        let mut body = String::with_capacity(self.0.len() * 80);
        let mut counts = OutputCounts {
            positions: self.0.len(),
            ..OutputCounts::default()
        };
        for p in self.0.iter() {
            let req = search_request(&p.board, level);
            let r = *found.entry(req).or_insert_with(|| result(&req));
            let Some(r) = r else {
                counts.missing += 1;
                continue;
            };
            let scores = match r.mv {
                Move::Square(_) | Move::Pass => vec![(r.mv, r.score)],
                Move::None => Vec::new(),
            };
            let line = ObfPosition {
                board: p.board,
                black_to_move: p.black,
                scores,
                best_score: Some(r.score),
                comment: p.comment.as_deref().map(str::to_string),
            };
            body.push_str(&line.to_obf_line());
            body.push('\n');
            counts.results += 1;
        }
        let mut text = format!(
            "% bookfarm search level={level} positions={} results={} missing={}",
            counts.positions, counts.results, counts.missing
        );
        if !header.is_empty() {
            text.push(' ');
            text.push_str(header);
        }
        text.push('\n');
        text.push_str(&body);
        SearchOutput { text, counts }
    }
}

/// The request of a search program's position: the board as given, nothing excluded.
pub fn search_request(board: &Board, level: u8) -> LeafRequest {
    LeafRequest {
        board: *board,
        level,
        excluded: 0,
    }
}

/// The request of the analysis of `board` at `level`: its canonical board, nothing excluded.
pub fn analysis_request(board: &Board, level: u8) -> LeafRequest {
    search_request(&canonical(board).0, level)
}

/// The levels an analysis of `board` from `from` to `up_to` searches, in order: `from`, then
/// each higher level whose depth and selectivity at the board's empties differ from the level
/// before it (at 20 empties every level from 11 up is the same exact solve: searched once). A
/// finished game has one "search" (its score).
pub fn analysis_levels(board: &Board, from: u8, up_to: u8) -> Vec<u8> {
    let empties = board.empties();
    let mut out = Vec::new();
    let mut last = None;
    for level in from..=up_to.max(from) {
        let params = level_params(level, empties);
        if last != Some(params) {
            out.push(level);
            last = Some(params);
        }
        if board.is_game_over() {
            break;
        }
    }
    out
}

impl Serialize for SearchSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0
            .iter()
            .map(|p| {
                (
                    p.board.player,
                    p.board.opponent,
                    p.black,
                    p.comment.as_deref(),
                )
            })
            .collect::<Vec<(u64, u64, bool, Option<&str>)>>()
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SearchSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SearchSet, D::Error> {
        Vec::<(u64, u64, bool, Option<String>)>::deserialize(d)?
            .into_iter()
            .map(|(player, opponent, black, comment)| {
                if player & opponent == 0 {
                    Ok(SearchPosition {
                        board: Board { player, opponent },
                        black,
                        comment: comment.map(String::into_boxed_str),
                    })
                } else {
                    Err(serde::de::Error::custom(format!(
                        "overlapping board {player:#018x}:{opponent:#018x}"
                    )))
                }
            })
            .collect::<Result<Arc<[SearchPosition]>, D::Error>>()
            .map(SearchSet)
    }
}

#[cfg(test)]
mod tests;
