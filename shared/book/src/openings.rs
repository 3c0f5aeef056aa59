//! Opening names: a position reached by a named line carries its name, whatever the
//! orientation (the four first moves are one up to symmetry) and the move order. The explorer
//! shows the deepest named position of a line.
//!
//! The list is text, one opening a line: its moves from the start position (the engine's
//! transcript form, passes inferred), then its name; `#` starts a comment line. The project's
//! own small list ([`Openings::builtin`], `data/openings.txt`) names a few well-known
//! openings; a user's file in the same format replaces it.

use bookfarm_engine::Board;
use bookfarm_engine::formats::transcript::parse_transcript;
use bookfarm_engine::symmetry::canonical;
use std::collections::HashMap;

/// The project's list.
const BUILTIN: &str = include_str!("../data/openings.txt");

/// Longest name kept.
pub const MAX_NAME: usize = 100;

/// Most openings in one list.
pub const MAX_OPENINGS: usize = 100_000;

/// A list that cannot be read: the 1-based line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct OpeningsError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// A named opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// Its name.
    pub name: String,
    /// Plies of its line.
    pub ply: usize,
}

/// A list of opening names, keyed by position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Openings {
    /// (canonical board from the side to move, Black to move) → opening.
    by_position: HashMap<(Board, bool), Opening>,
}

impl Openings {
    /// The project's own list.
    pub fn builtin() -> Openings {
        Openings::parse(BUILTIN).unwrap_or_default()
    }

    /// Read a list (see the [module docs](self)). A later line naming the same position
    /// replaces an earlier one.
    pub fn parse(text: &str) -> Result<Openings, OpeningsError> {
        let mut by_position = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let err = |message: String| OpeningsError {
                line: i + 1,
                message,
            };
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (moves, name) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| err("a line holds moves, then a name".into()))?;
            let name = name.trim();
            if name.chars().count() > MAX_NAME {
                return Err(err(format!("name longer than {MAX_NAME} characters")));
            }
            if name.chars().any(char::is_control) {
                return Err(err("control character in the name".into()));
            }
            let game = parse_transcript(moves).map_err(|e| err(e.to_string()))?;
            let (board, black) = game.final_position().map_err(|e| err(e.to_string()))?;
            if by_position.len() == MAX_OPENINGS {
                return Err(err(format!("more than {MAX_OPENINGS} openings")));
            }
            by_position.insert(
                (canonical(&board).0, black),
                Opening {
                    name: name.to_string(),
                    ply: game.moves.len(),
                },
            );
        }
        Ok(Openings { by_position })
    }

    /// Openings in the list.
    pub fn len(&self) -> usize {
        self.by_position.len()
    }

    /// The list is empty.
    pub fn is_empty(&self) -> bool {
        self.by_position.is_empty()
    }

    /// The name of `board` (any orientation; `black`: Black to move), if it has one.
    pub fn name(&self, board: &Board, black: bool) -> Option<&Opening> {
        self.by_position.get(&(canonical(board).0, black))
    }

    /// The deepest named position among `positions` (a line's positions from the start, each
    /// with Black to move or not), with its index in the line.
    pub fn deepest(
        &self,
        positions: impl IntoIterator<Item = (Board, bool)>,
    ) -> Option<(usize, &Opening)> {
        positions
            .into_iter()
            .enumerate()
            .filter_map(|(i, (b, black))| self.name(&b, black).map(|o| (i, o)))
            .last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Vec<(Board, bool)> {
        let g = parse_transcript(text).expect("legal");
        let mut b = Board::start();
        let mut black = true;
        let mut out = vec![(b, black)];
        for m in g.moves {
            b = b.play_move(m).expect("legal");
            black = !black;
            out.push((b, black));
        }
        out
    }

    #[test]
    fn the_builtin_list_reads_and_names_every_orientation() {
        let o = Openings::builtin();
        assert!(o.len() >= 6);
        let tiger = o.deepest(line("f5d6c3d3c4")).expect("named");
        assert_eq!((tiger.0, tiger.1.name.as_str()), (5, "Tiger"));
        // The same opening from 1.d3 (a symmetry of the board) and one move deeper.
        let (at, named) = o.deepest(line("d3c5f6f5e6e3")).expect("named");
        assert_eq!((at, named.name.as_str()), (5, "Tiger"));
        let (at, named) = o.deepest(line("f5d6")).expect("named");
        assert_eq!(
            (at, named.name.as_str(), named.ply),
            (2, "Perpendicular opening", 2)
        );
        assert!(o.deepest(line("")).is_none());
    }

    #[test]
    fn a_user_list_replaces_and_bad_lines_are_refused() {
        let o = Openings::parse("# mine\n\nf5 First\nf5d6  Second one\n").expect("valid");
        assert_eq!(o.len(), 2);
        assert_eq!(
            o.deepest(line("f5d6c3")).map(|(i, n)| (i, n.name.clone())),
            Some((2, "Second one".into()))
        );
        assert_eq!(o.deepest(line("f5f4")).map(|(i, _)| i), Some(1));
        let e = Openings::parse("f5 ok\nf5d6\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = Openings::parse("f5a1 Bad\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.to_string().starts_with("line 1: "), "{e}");
        let e = Openings::parse(&format!("f5 {}\n", "x".repeat(MAX_NAME + 1))).unwrap_err();
        assert!(e.message.contains("longer"));
        assert!(Openings::parse("f5 a\u{7}b\n").is_err());
    }
}
