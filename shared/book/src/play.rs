//! The book during play: Edax's random book move (`book randomness`, edax-spec §4.12) and
//! `book analyze` (`play_book_analyze`: the book's verdict on the last moves of a game).

use crate::mem::MemBook;
use crate::query::{BookMove, book_moves, move_text};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::fmt::Write;

/// Edax's `position_get_random_move` on `board` (any orientation): over the book moves sorted
/// best first (stably), count the leading moves whose score is at least the position's stored
/// value minus `randomness`, and pick `random() % count` of them. `None` when the position is
/// not in the book; `Some(Move::None)` when no move qualifies (a stale value above every move;
/// Edax then also returns NOMOVE). With randomness 0 this is the best move (the first one when
/// several tie, if `random` returns 0).
pub fn random_move(
    book: &MemBook,
    board: &Board,
    randomness: i32,
    random: &mut impl FnMut() -> u64,
) -> Option<Move> {
    let (id, moves) = book_moves(book, board)?;
    let value = i32::from(book.score(id).value);
    let n = moves
        .iter()
        .take_while(|m| value <= i32::from(m.score) + randomness)
        .count();
    if n == 0 {
        return Some(Move::None);
    }
    let i = (random() % n as u64) as usize;
    Some(moves[i].mv)
}

/// The book's verdict on one move of a game (a line of Edax's `book analyze`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveVerdict {
    /// Edax's ply column: `61 − empties` of the position before the move.
    pub ply: u32,
    /// Whether Black played the move.
    pub black: bool,
    /// The move played and its book score.
    pub played: BookMove,
    /// The other book moves, moves transposing into the played one removed.
    pub alternatives: usize,
    /// The best of them.
    pub alternative: Option<BookMove>,
}

/// Edax's `play_book_analyze` on a game from the start position (passes inserted where forced):
/// from the last move backwards, the last `n` moves (passes do not count), for each move whose
/// position is in the book and which is one of its book moves, the move's score against the
/// best alternative (the other book moves, without the moves that lead to the same position up
/// to symmetry). Returns the verdicts in Edax's order (last move first), or the index of the
/// first illegal move.
pub fn analyze_game(book: &MemBook, moves: &[Move], n: usize) -> Result<Vec<MoveVerdict>, usize> {
    // The game as (board before, mover is black, move), passes made explicit.
    let mut plies: Vec<(Board, bool, Move)> = Vec::with_capacity(moves.len());
    let mut board = Board::start();
    let mut black = true;
    for (i, &mv) in moves.iter().enumerate() {
        if mv != Move::Pass && board.must_pass() {
            plies.push((board, black, Move::Pass));
            board = board.pass();
            black = !black;
        }
        let next = board.play_move(mv).map_err(|_| i)?;
        plies.push((board, black, mv));
        board = next;
        black = !black;
    }
    let mut out = Vec::new();
    let mut budget = n;
    for &(board, black, mv) in plies.iter().rev() {
        if budget == 0 {
            break;
        }
        // A pass is analyzed but does not count (Edax extends the range by one).
        if mv == Move::Pass {
            budget += 1;
        }
        budget -= 1;
        if let Some(v) = verdict(book, &board, black, mv) {
            out.push(v);
        }
    }
    Ok(out)
}

/// Edax's `play_book_alternative` for one move.
fn verdict(book: &MemBook, board: &Board, black: bool, mv: Move) -> Option<MoveVerdict> {
    let (_, mut list) = book_moves(book, board)?;
    let at = list.iter().position(|m| m.mv == mv)?;
    let played = list.remove(at);
    let reached = canonical(&board.next_unchecked(mv)).0;
    list.retain(|m| canonical(&board.next_unchecked(m.mv)).0 != reached);
    // `movelist_best`: the first move with the highest score (the list is sorted already).
    let alternative = list.first().copied();
    Some(MoveVerdict {
        ply: 61 - board.empties(),
        black,
        played,
        alternatives: list.len(),
        alternative,
    })
}

/// Edax's `book analyze` text: the three header lines, then one line per verdict.
pub fn render_analysis(verdicts: &[MoveVerdict]) -> String {
    let mut out = String::from(
        "\n              N     played        alternative\n\
         ply  level   alt. move  score     score   move\n\
         ---+-------+-----+-----------+--+---------------\n",
    );
    for v in verdicts {
        let _ = write!(
            out,
            "{:3}   book  {:3}    {}    {:+3}  ",
            v.ply,
            v.alternatives,
            move_text(v.played.mv, v.black),
            v.played.score
        );
        if let Some(a) = v.alternative {
            let (m, s) = (i32::from(v.played.score), i32::from(a.score));
            out.push_str(match m.cmp(&s) {
                std::cmp::Ordering::Greater => " > ",
                std::cmp::Ordering::Equal => " = ",
                std::cmp::Ordering::Less => " < ",
            });
            let _ = write!(out, "  {s:+3}     {} ", move_text(a.mv, v.black));
            if m < s {
                out.push_str("<- Edax disagrees");
                if s - m > 4 {
                    out.push_str(" strongly");
                }
            }
        }
        out.push('\n');
    }
    out
}
