//! `book line`: every position of a line of play as the book holds it (value, bounds, level,
//! lines, leaf, links and accuracy), to inspect a line move by move.

use crate::accuracy::{Accuracy, Grader};
use crate::query::{BookMove, book_moves, move_text};
use bookfarm_engine::{Board, Move};
use std::fmt::{self, Write};

/// What the book holds about one position of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineEntry {
    /// Negamax value.
    pub value: i16,
    /// Lower bound.
    pub lower: i16,
    /// Upper bound.
    pub upper: i16,
    /// Level of the position's leaf search.
    pub level: u8,
    /// Lines below the position (Edax's `n_lines`).
    pub n_lines: u32,
    /// The leaf, in the line's orientation (`None`: no leaf).
    pub leaf: Option<BookMove>,
    /// The links, in the line's orientation, best first.
    pub links: Vec<BookMove>,
    /// Egaroucid's accuracy grade.
    pub accuracy: Accuracy,
}

/// One position of the line: the board reached and the move that reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineStep {
    /// Moves played before this position (passes included).
    pub ply: usize,
    /// The move that led here (`None` for the first position).
    pub mv: Option<Move>,
    /// The board, side to move's view, in the line's orientation.
    pub board: Board,
    /// Whether Black is to move.
    pub black: bool,
    /// The book's entry, `None` when the position is not in the book.
    pub entry: Option<LineEntry>,
}

/// A move of the line could not be played.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("move {index} ({mv}) is illegal")]
pub struct IllegalLineMove {
    /// 1-based index of the move in the given list.
    pub index: usize,
    /// The move.
    pub mv: Move,
}

/// The positions of the line `moves` from the start position (passes inserted where forced),
/// with what `book` holds about each.
pub fn inspect(book: &crate::MemBook, moves: &[Move]) -> Result<Vec<LineStep>, IllegalLineMove> {
    let mut grader = Grader::new(book);
    let mut entry = |b: &Board| -> Option<LineEntry> {
        let (id, list) = book_moves(book, b)?;
        let s = book.score(id);
        let (leaf, links): (Vec<BookMove>, Vec<BookMove>) = list.into_iter().partition(|m| m.leaf);
        Some(LineEntry {
            value: s.value,
            lower: s.lower,
            upper: s.upper,
            level: book.level(id),
            n_lines: book.counts(id).n_lines,
            leaf: leaf.first().copied(),
            links,
            accuracy: grader.of(id),
        })
    };
    let mut board = Board::start();
    let mut black = true;
    let mut steps = vec![LineStep {
        ply: 0,
        mv: None,
        board,
        black,
        entry: entry(&board),
    }];
    let mut push = |board: Board, black: bool, mv: Move, steps: &mut Vec<LineStep>| {
        steps.push(LineStep {
            ply: steps.len(),
            mv: Some(mv),
            board,
            black,
            entry: entry(&board),
        });
    };
    for (i, &mv) in moves.iter().enumerate() {
        let illegal = IllegalLineMove { index: i + 1, mv };
        if mv != Move::Pass && board.must_pass() {
            board = board.pass();
            black = !black;
            push(board, black, Move::Pass, &mut steps);
        }
        board = board.play_move(mv).map_err(|_| illegal)?;
        black = !black;
        push(board, black, mv, &mut steps);
    }
    Ok(steps)
}

impl fmt::Display for LineStep {
    /// One line: ply, move (case by colour), then `value [lower, upper]`, level, lines,
    /// accuracy, leaf and links, or `not in the book`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The mover of `mv` is the side not to move now.
        let mv = self
            .mv
            .map_or_else(|| "--".to_string(), |m| move_text(m, !self.black));
        write!(f, "{:3} {:>2} ", self.ply, mv)?;
        let Some(e) = &self.entry else {
            return f.write_str(" not in the book");
        };
        let mut links = String::new();
        for m in &e.links {
            let _ = write!(links, " {}:{:+}", move_text(m.mv, self.black), m.score);
        }
        let leaf = e.leaf.map_or_else(
            || "--".to_string(),
            |m| format!("{}:{:+}", move_text(m.mv, self.black), m.score),
        );
        write!(
            f,
            "{:+4} [{:+4}, {:+4}] level {:2} lines {:10} accuracy {:2} leaf {:>6} links{}",
            e.value,
            e.lower,
            e.upper,
            e.level,
            e.n_lines,
            e.accuracy.to_string(),
            leaf,
            if links.is_empty() { " --" } else { &links }
        )
    }
}

/// The whole inspection as text: a header line, then one line per position.
pub fn render(steps: &[LineStep]) -> String {
    let mut out = String::from("ply mv value [lower, upper] level, lines, accuracy, leaf, links\n");
    for s in steps {
        let _ = writeln!(out, "{s}");
    }
    out
}
