//! `book extract`: the book's best-play lines from the start position (Edax's
//! `book_extract_skeleton`), and the line audit that plays them to the end with a stronger search
//! (Egaroucid's draw verification, its issue #448).
//!
//! Edax walks every best book move (the links and the leaf scoring the position's best score)
//! from hand-picked openings until the line leaves the book, and writes each line as a game.
//! Its opening rule is that lines start with F5 (D3, C4 and E6 reach the same position by
//! symmetry) and that transpositions are not extracted twice; Edax hard-codes this for its own
//! book (the lines below f5d6c4 and f5f6e6f4). Here the rule is applied to any book: the first
//! move is F5, and a best move is skipped when the position it reaches (up to symmetry) was
//! already reached by an earlier line.

use crate::mem::MemBook;
use crate::query::book_moves;
use crate::results::Results;
use bookfarm_engine::search::LeafRequest;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move, Square};
use std::collections::HashSet;

/// The F5 opening move all lines start with.
const F5: u8 = 37;

/// Every best-play line of the book from the start position, deduplicated by the opening rule
/// of the [module docs](self), in depth-first order (best moves in the book's sorted order).
/// Each line ends where the book has no position (after a leaf move) or no move. A line holds
/// its passes explicitly. Empty when the start position is not in the book.
pub fn best_lines(book: &MemBook) -> Vec<Vec<Move>> {
    let mut out = Vec::new();
    if book.probe(&Board::start()).is_none() {
        return out;
    }
    let f5 = Move::Square(Square::new(F5).expect("F5 is a square"));
    let board = Board::start().next_unchecked(f5);
    let mut seen = HashSet::from([canonical(&board).0]);
    let mut line = vec![f5];
    walk(book, &board, &mut line, &mut seen, &mut out);
    out
}

fn walk(
    book: &MemBook,
    board: &Board,
    line: &mut Vec<Move>,
    seen: &mut HashSet<Board>,
    out: &mut Vec<Vec<Move>>,
) {
    let moves = match book_moves(book, board) {
        Some((_, m)) if !m.is_empty() => m,
        _ => {
            out.push(line.clone());
            return;
        }
    };
    let best = moves[0].score;
    for m in moves.iter().take_while(|m| m.score == best) {
        let next = board.next_unchecked(m.mv);
        if !seen.insert(canonical(&next).0) {
            continue;
        }
        line.push(m.mv);
        walk(book, &next, line, seen, out);
        line.pop();
    }
}

/// The book's value of the start position, from Black's side, when known.
pub fn root_value(book: &MemBook) -> Option<i32> {
    let id = book.probe(&Board::start())?;
    let v = i32::from(book.score(id).value);
    (-64..=64).contains(&v).then_some(v)
}

/// One best line played to the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    /// The book line (from the start position).
    pub line: Vec<Move>,
    /// The moves the search played after the book line, to the end of the game.
    pub continuation: Vec<Move>,
    /// The book's value of the line, from Black's side (every best line has the root's value).
    pub book_value: i32,
    /// The final disc difference reached, from Black's side (empties to the winner).
    pub result: i32,
}

/// `LINE book +V played out +R (CONTINUATION)`, as the audit reports a line.
impl std::fmt::Display for AuditLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let moves = |m: &[Move]| -> String { m.iter().map(ToString::to_string).collect() };
        write!(
            f,
            "{} book {:+} played out {:+} ({})",
            moves(&self.line),
            self.book_value,
            self.result,
            moves(&self.continuation)
        )
    }
}

impl AuditLine {
    /// Whether the result contradicts the book: a different outcome (win, draw or loss for
    /// Black) than the book's value says.
    pub fn contradicts(&self) -> bool {
        self.book_value.signum() != self.result.signum()
    }
}

/// Play `line` from the start position, then let the search at `level` play both sides to the
/// end of the game, taking its results from `results`. `Ok(Some((continuation, score)))`: the
/// moves searched and the final score from Black's side; `Ok(None)`: the line is illegal;
/// `Err(request)`: the next search is not known yet (everything before it is, so calling again
/// with its result goes one move further: the play-out is a pure function of the line, the
/// level and the results).
pub fn play_out_known(
    line: &[Move],
    level: u8,
    results: &dyn Results,
) -> Result<Option<(Vec<Move>, i32)>, LeafRequest> {
    let mut board = Board::start();
    let mut black = true;
    for &mv in line {
        let Ok(next) = board.play_move(mv) else {
            return Ok(None);
        };
        board = next;
        black = !black;
    }
    let mut continuation = Vec::new();
    while !board.is_game_over() {
        let mv = if board.must_pass() {
            Move::Pass
        } else {
            let request = LeafRequest {
                board,
                level,
                excluded: 0,
            };
            results.result(&request).ok_or(request)?.mv
        };
        let Ok(next) = board.play_move(mv) else {
            return Ok(None);
        };
        board = next;
        black = !black;
        continuation.push(mv);
    }
    let score = board.final_score();
    Ok(Some((continuation, if black { score } else { -score })))
}

/// The line audit on known results: each of `lines` (from [`best_lines`]) played to the end at
/// `level` as far as `results` go. `Ok`: every line is finished (lines that cannot be replayed
/// are skipped); `Err`: the next search of every unfinished line (the lines are independent, so
/// these can run at the same time). The growth driver runs the audit on a cluster this way
/// ([`crate::program::Operation::Audit`]).
pub fn audit_known(
    book: &MemBook,
    lines: &[Vec<Move>],
    level: u8,
    results: &dyn Results,
) -> Result<Vec<AuditLine>, Vec<LeafRequest>> {
    let Some(book_value) = root_value(book) else {
        return Ok(Vec::new());
    };
    let mut done = Vec::new();
    let mut missing = Vec::new();
    for line in lines {
        match play_out_known(line, level, results) {
            Ok(Some((continuation, result))) => done.push(AuditLine {
                line: line.clone(),
                continuation,
                book_value,
                result,
            }),
            Ok(None) => {}
            Err(request) => missing.push(request),
        }
    }
    if missing.is_empty() {
        Ok(done)
    } else {
        Err(missing)
    }
}
