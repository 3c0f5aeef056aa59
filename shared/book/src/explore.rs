//! The explorer's reads of a book, for the people who use books: every legal move of a
//! position with its value and what the book knows below it (accuracy grade, level, lines,
//! umigame numbers), the principal variation, a game's score and losses move by move, and the
//! lines below a position.
//!
//! Values are from the side to move. A move is
//! * a **link** (its child is in the book and linked): the link's score, as `book show` shows it;
//! * the **leaf**: the leaf's score (a search of the position; the child is not in the book);
//! * a **transposition**: its child is in the book but not linked from here (Edax's `book
//!   fix` would link it): minus the child's value;
//! * **not in the book**: no value.
//!
//! Grades and umigame numbers walk the book below a position, which near the root of a big
//! book is most of it: an [`Explorer`] keeps what it found between calls (for one revision of
//! one book) and each call does at most a [`Budget`] of new work, so a first look may show
//! "pending" or "≥ N" and a later one the rest.

use crate::accuracy::{Accuracy, GradeMemo, Grader};
use crate::mem::{MemBook, NodeId, Revision};
use crate::query::book_moves;
use crate::umigame::{Umigame, UmigameMemo, UmigameOptions};
use bookfarm_engine::{Board, Move};

/// A bound on the positions a walk of the book may expand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    left: u64,
    spent: u64,
}

impl Budget {
    /// At most `positions` expansions.
    pub const fn new(positions: u64) -> Budget {
        Budget {
            left: positions,
            spent: 0,
        }
    }

    /// No bound.
    pub const fn unlimited() -> Budget {
        Budget::new(u64::MAX)
    }

    /// Take one expansion; `false` when none is left.
    #[inline]
    pub fn take(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.spent += 1;
        true
    }

    /// Expansions taken.
    pub const fn spent(&self) -> u64 {
        self.spent
    }

    /// Nothing left.
    pub const fn exhausted(&self) -> bool {
        self.left == 0
    }
}

/// What a legal move is to the book (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoveKind {
    /// A link: the child is in the book.
    Link,
    /// The leaf: the best move outside the book, searched.
    Leaf,
    /// The child is in the book without a link from here.
    Transposition,
    /// Not in the book.
    Out,
}

impl MoveKind {
    /// Lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            MoveKind::Link => "link",
            MoveKind::Leaf => "leaf",
            MoveKind::Transposition => "transposition",
            MoveKind::Out => "out",
        }
    }
}

/// One legal move and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveValue {
    /// The move, in the queried board's orientation (the pass when it is forced).
    pub mv: Move,
    /// Its value from the side to move (`None`: not in the book).
    pub value: Option<i32>,
    /// What it is to the book.
    pub kind: MoveKind,
    /// The child position in the book (the position after the child's forced pass when only
    /// that one is stored).
    pub child: Option<NodeId>,
}

/// The book position of `child` (the position after a move), or of the position after its
/// forced pass when only that one is stored.
pub fn child_node(book: &MemBook, child: &Board) -> Option<NodeId> {
    book.probe(child).or_else(|| {
        (child.moves() == 0)
            .then(|| book.probe(&child.pass()))
            .flatten()
    })
}

/// Every legal move of `board` (the pass when it is forced; nothing when the game is over), in
/// the book's order (`book show`'s: best first) and then square order for the moves that are
/// not book moves.
pub fn move_values(book: &MemBook, board: &Board) -> Vec<MoveValue> {
    let legal: Vec<Move> = if board.must_pass() {
        vec![Move::Pass]
    } else {
        board.legal_squares().map(Move::Square).collect()
    };
    let mut out: Vec<MoveValue> = Vec::with_capacity(legal.len());
    if let Some((_, moves)) = book_moves(book, board) {
        for m in moves {
            // A stale move (not legal here) in a damaged book is not shown.
            if !legal.contains(&m.mv) {
                continue;
            }
            let child = board.next_unchecked(m.mv);
            out.push(MoveValue {
                mv: m.mv,
                value: Some(i32::from(m.score)),
                kind: if m.leaf {
                    MoveKind::Leaf
                } else {
                    MoveKind::Link
                },
                child: if m.leaf {
                    None
                } else {
                    child_node(book, &child)
                },
            });
        }
    }
    for mv in legal {
        if out.iter().any(|m| m.mv == mv) {
            continue;
        }
        let next = board.next_unchecked(mv);
        let child = child_node(book, &next);
        let value = child.map(|id| {
            let v = i32::from(book.score(id).value);
            // The stored child is the position after `next`'s pass: its side moved here.
            if book.board(id) == bookfarm_engine::symmetry::canonical(&next).0 {
                -v
            } else {
                v
            }
        });
        out.push(MoveValue {
            mv,
            value,
            kind: if child.is_some() {
                MoveKind::Transposition
            } else {
                MoveKind::Out
            },
            child,
        });
    }
    out
}

/// The move the book plays from `board`: the best value, a link (or a transposition) before
/// the leaf on a tie, then the book's order; `None` when no legal move has a value.
pub fn best_move(moves: &[MoveValue]) -> Option<MoveValue> {
    let best = moves.iter().filter_map(|m| m.value).max()?;
    let rank = |k: MoveKind| match k {
        MoveKind::Link => 0,
        MoveKind::Transposition => 1,
        MoveKind::Leaf => 2,
        MoveKind::Out => 3,
    };
    moves
        .iter()
        .filter(|m| m.value == Some(best))
        .min_by_key(|m| rank(m.kind))
        .copied()
}

/// The principal variation from `board`: the book's best move at each position (see
/// [`best_move`]), until a position has no move with a value or after the leaf (the line then
/// leaves the book). Passes are written.
pub fn principal_variation(book: &MemBook, board: &Board) -> Vec<Move> {
    let mut line = Vec::new();
    let mut board = *board;
    // A line has at most 60 moves and the passes between them.
    while line.len() < 120 {
        let Some(m) = best_move(&move_values(book, &board)) else {
            break;
        };
        line.push(m.mv);
        if m.kind == MoveKind::Leaf {
            break;
        }
        board = board.next_unchecked(m.mv);
    }
    line
}

/// One move of the explorer: its value and what the book holds below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveInfo {
    /// The move and its value.
    pub value: MoveValue,
    /// The child's level (for the leaf: the level of the search behind it, the position's).
    pub level: Option<u8>,
    /// Lines below the child (Edax's `n_lines`).
    pub lines: Option<u32>,
    /// The child's accuracy grade (`None`: not in the book, or not graded within the budget:
    /// see `grade_pending`).
    pub accuracy: Option<Accuracy>,
    /// The child is in the book but its grade was not found within the budget.
    pub grade_pending: bool,
    /// The umigame numbers after the move (`None`: the child is not in the book).
    pub umigame: Option<Umigame>,
}

/// A position as the explorer shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionInfo {
    /// Every legal move (see [`move_values`] for the order).
    pub moves: Vec<MoveInfo>,
    /// The position's own accuracy grade (`None`: not in the book or not graded yet).
    pub accuracy: Option<Accuracy>,
    /// The position's own umigame numbers (`None`: not in the book).
    pub umigame: Option<Umigame>,
    /// The principal variation.
    pub pv: Vec<Move>,
}

/// Work bounds of one [`Explorer::position`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Positions graded (both tolerances count).
    pub grades: u64,
    /// Positions expanded for umigame numbers.
    pub umigame: u64,
    /// Memoized entries kept (grades plus umigame results) before the memo is emptied.
    pub memo: usize,
}

impl Default for Limits {
    /// 20,000 grades and 20,000 umigame expansions per call (a few milliseconds on a big
    /// book), 4 M memoized results (about 200 MB).
    fn default() -> Limits {
        Limits {
            grades: 20_000,
            umigame: 20_000,
            memo: 4_000_000,
        }
    }
}

/// How many umigame option sets are memoized at once (the most recently used ones).
const UMIGAME_SETS: usize = 4;

/// The explorer's memo for one book: grades and umigame numbers found so far, valid for one
/// [`Revision`] of it (dropped when the book changes).
#[derive(Debug, Default)]
pub struct Explorer {
    revision: Option<Revision>,
    grades: GradeMemo,
    /// Most recently used first.
    umigame: Vec<UmigameMemo>,
}

impl Explorer {
    /// An empty memo.
    pub fn new() -> Explorer {
        Explorer::default()
    }

    /// Results memoized (grades and umigame numbers).
    pub fn memoized(&self) -> usize {
        self.grades.len() + self.umigame.iter().map(UmigameMemo::len).sum::<usize>()
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.revision = None;
        self.grades = GradeMemo::default();
        self.umigame.clear();
    }

    /// Drop what was found on another revision, or everything once the memo is over `limit`.
    fn sync(&mut self, book: &MemBook, limit: usize) {
        if self.revision != Some(book.revision()) || self.memoized() > limit {
            self.clear();
            self.revision = Some(book.revision());
        }
    }

    /// `board` (any orientation; `black`: Black to move) as the explorer shows it, with the
    /// umigame numbers under `options`, within `limits`.
    pub fn position(
        &mut self,
        book: &MemBook,
        board: &Board,
        black: bool,
        options: UmigameOptions,
        limits: Limits,
    ) -> PositionInfo {
        self.sync(book, limits.memo);
        let values = move_values(book, board);
        let node = book.probe(board);

        let mut grades = Budget::new(limits.grades);
        let mut grader = Grader::with_memo(book, std::mem::take(&mut self.grades));
        let accuracy = node.and_then(|id| grader.of_within(id, &mut grades));
        let graded: Vec<Option<Accuracy>> = values
            .iter()
            .map(|m| m.child.and_then(|c| grader.of_within(c, &mut grades)))
            .collect();
        self.grades = grader.into_memo();

        let at = match self.umigame.iter().position(|m| m.options() == options) {
            Some(i) => i,
            None => {
                self.umigame.truncate(UMIGAME_SETS - 1);
                self.umigame.push(UmigameMemo::new(options));
                self.umigame.len() - 1
            }
        };
        let mut memo = self.umigame.remove(at);
        let mut spend = Budget::new(limits.umigame);
        // The moves first (best first), then the position, which reuses their results.
        let counted: Vec<Option<Umigame>> = values
            .iter()
            .map(|m| {
                m.child
                    .map(|_| memo.of(book, &board.next_unchecked(m.mv), !black, &mut spend))
            })
            .collect();
        let umigame = node.map(|_| memo.of(book, board, black, &mut spend));
        self.umigame.insert(0, memo);

        let moves = values
            .iter()
            .zip(graded)
            .zip(counted)
            .map(|((&value, accuracy), umigame)| {
                let (level, lines) = match (value.kind, value.child, node) {
                    (MoveKind::Leaf, _, Some(n)) => (Some(book.level(n)), None),
                    (_, Some(c), _) => (Some(book.level(c)), Some(book.counts(c).n_lines)),
                    _ => (None, None),
                };
                MoveInfo {
                    value,
                    level,
                    lines,
                    accuracy,
                    grade_pending: value.child.is_some() && accuracy.is_none(),
                    umigame,
                }
            })
            .collect();
        PositionInfo {
            moves,
            accuracy,
            umigame,
            pv: principal_variation(book, board),
        }
    }
}

/// One move of a game, as the book sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GamePly {
    /// The move (passes written).
    pub mv: Move,
    /// Black played it.
    pub black: bool,
    /// The best value among the legal moves, from the mover (`None`: no move has a value).
    pub best: Option<i32>,
    /// The move's value, from the mover (`None`: not in the book).
    pub value: Option<i32>,
    /// What the move is to the book.
    pub kind: MoveKind,
    /// `best − value`: what the move lost against the book's best (`None`: unknown).
    pub loss: Option<i32>,
    /// The value of the position after the move, from Black (`None`: not in the book; after
    /// the leaf, the leaf's score).
    pub after: Option<i32>,
}

/// A game as the book sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GameAnalysis {
    /// The start position's value, from Black (`None`: not in the book).
    pub start: Option<i32>,
    /// The moves.
    pub plies: Vec<GamePly>,
    /// The index of the first move after which the game is not in the book (`None`: it never
    /// left).
    pub left_book: Option<usize>,
}

/// A move of a game that is not legal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("move {index} ({mv}) is illegal")]
pub struct IllegalGameMove {
    /// 1-based index of the move.
    pub index: usize,
    /// The move.
    pub mv: Move,
}

/// The value of a book position from Black.
fn black_value(book: &MemBook, board: &Board, black: bool) -> Option<i32> {
    let id = child_node(book, board)?;
    let v = i32::from(book.score(id).value);
    let stored_as_is = book.board(id) == bookfarm_engine::symmetry::canonical(board).0;
    // The stored position is `board` from its mover, or the position after its pass.
    let mover_black = if stored_as_is { black } else { !black };
    Some(if mover_black { v } else { -v })
}

/// The book's view of `moves` from the start position (every pass written, as the engine's
/// transcript reader gives them): each move's value and loss, the score after each move, and
/// where the game left the book.
pub fn analyze_game(book: &MemBook, moves: &[Move]) -> Result<GameAnalysis, IllegalGameMove> {
    let mut board = Board::start();
    let mut black = true;
    let mut plies = Vec::with_capacity(moves.len());
    let mut left_book = None;
    for (i, &mv) in moves.iter().enumerate() {
        let next = board
            .play_move(mv)
            .map_err(|_| IllegalGameMove { index: i + 1, mv })?;
        let values = move_values(book, &board);
        let best = values.iter().filter_map(|m| m.value).max();
        let played = values.iter().find(|m| m.mv == mv).copied();
        let value = played.and_then(|m| m.value);
        let kind = played.map_or(MoveKind::Out, |m| m.kind);
        let mut after = black_value(book, &next, !black);
        if after.is_none() && kind == MoveKind::Leaf {
            after = value.map(|v| if black { v } else { -v });
        }
        if left_book.is_none() && child_node(book, &next).is_none() {
            left_book = Some(i);
        }
        plies.push(GamePly {
            mv,
            black,
            best,
            value,
            kind,
            loss: best.zip(value).map(|(b, v)| b - v),
            after,
        });
        board = next;
        black = !black;
    }
    Ok(GameAnalysis {
        start: black_value(book, &Board::start(), true),
        plies,
        left_book,
    })
}

/// More lines than asked for below a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than {0} lines below this position")]
pub struct TooManyLines(pub usize);

/// Every line of links from `board` (in its orientation) to a position without links, each
/// after `prefix` (the moves that reached `board`), at most `max` of them. A position reached
/// by several move orders is on one line per order. Empty when `board` is not in the book.
pub fn book_lines(
    book: &MemBook,
    board: &Board,
    prefix: &[Move],
    max: usize,
) -> Result<Vec<Vec<Move>>, TooManyLines> {
    fn walk(
        book: &MemBook,
        board: &Board,
        line: &mut Vec<Move>,
        out: &mut Vec<Vec<Move>>,
        max: usize,
    ) -> Result<(), TooManyLines> {
        let links: Vec<Move> = book_moves(book, board)
            .map(|(_, m)| m.into_iter().filter(|m| !m.leaf).map(|m| m.mv).collect())
            .unwrap_or_default();
        // A line has at most 60 moves and the passes between them.
        if links.is_empty() || line.len() >= 120 {
            if out.len() == max {
                return Err(TooManyLines(max));
            }
            out.push(line.clone());
            return Ok(());
        }
        for mv in links {
            let Ok(next) = board.play_move(mv) else {
                continue;
            };
            line.push(mv);
            walk(book, &next, line, out, max)?;
            line.pop();
        }
        Ok(())
    }
    let mut out = Vec::new();
    if book.probe(board).is_none() {
        return Ok(out);
    }
    walk(book, board, &mut prefix.to_vec(), &mut out, max)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::test_book;
    use bookfarm_engine::formats::transcript::parse_transcript;

    #[test]
    fn move_values_agree_with_book_show_and_cover_every_legal_move() {
        let book = test_book(4);
        for id in book.ids().take(200) {
            let board = book.board(id);
            let values = move_values(&book, &board);
            let (_, shown) = book_moves(&book, &board).expect("in the book");
            let legal = if board.must_pass() {
                1
            } else {
                board.moves().count_ones() as usize
            };
            assert_eq!(values.len(), legal);
            for (v, s) in values.iter().zip(&shown) {
                assert_eq!((v.mv, v.value), (s.mv, Some(i32::from(s.score))));
            }
            for v in &values {
                match v.kind {
                    MoveKind::Link => {
                        let c = v.child.expect("linked child");
                        // Negamaxed: the link scores the child's value.
                        assert_eq!(v.value, Some(-i32::from(book.score(c).value)));
                    }
                    MoveKind::Leaf => assert!(v.child.is_none()),
                    MoveKind::Transposition => assert!(v.child.is_some() && v.value.is_some()),
                    MoveKind::Out => assert!(v.child.is_none() && v.value.is_none()),
                }
            }
        }
    }

    #[test]
    fn the_principal_variation_follows_the_best_values() {
        let book = test_book(6);
        let start = Board::start();
        let pv = principal_variation(&book, &start);
        assert!(!pv.is_empty());
        let root = i32::from(book.score(book.probe(&start).expect("start")).value);
        // Along the PV, every move keeps the root's value (negamax), alternating sides.
        let mut board = start;
        let mut sign = 1;
        for (i, &mv) in pv.iter().enumerate() {
            let m = move_values(&book, &board)
                .into_iter()
                .find(|m| m.mv == mv)
                .expect("a legal move");
            assert_eq!(m.value.map(|v| v * sign), Some(root), "move {i}");
            assert_eq!(
                Some(m),
                best_move(&move_values(&book, &board)),
                "move {i} is the best"
            );
            if m.kind == MoveKind::Leaf {
                assert_eq!(i, pv.len() - 1, "the line ends after the leaf");
            }
            board = board.next_unchecked(mv);
            sign = -sign;
        }
    }

    #[test]
    fn a_game_that_leaves_the_book() {
        let book = test_book(7);
        let start = Board::start();
        let pv = principal_variation(&book, &Board::start());
        // Follow the book's best line until a move outside the book is possible, play it.
        let mut board = start;
        let mut moves = Vec::new();
        let out = loop {
            if let Some(m) = move_values(&book, &board)
                .into_iter()
                .find(|m| m.kind == MoveKind::Out)
                && !moves.is_empty()
            {
                break m;
            }
            let next = pv[moves.len()];
            moves.push(next);
            board = board.next_unchecked(next);
        };
        let k = moves.len();
        assert!(k >= 1 && k < pv.len());
        moves.push(out.mv);
        let a = analyze_game(&book, &moves).expect("legal");
        assert_eq!(a.plies.len(), k + 1);
        assert_eq!(a.left_book, Some(k));
        for p in &a.plies[..k] {
            assert_eq!(p.loss, Some(0), "the PV loses nothing");
        }
        assert_eq!(a.plies[k].value, None);
        assert_eq!(a.plies[k].loss, None);
        assert_eq!(a.plies[k].after, None);
        let root = extract_root(&book);
        assert_eq!(a.start, Some(root));
        for p in &a.plies[..k] {
            assert_eq!(p.after, Some(root), "Black's view along the PV");
        }
        // An illegal move is an error naming it.
        let bad = parse_transcript("f5").expect("legal").moves;
        let mut twice = bad.clone();
        twice.extend(&bad);
        assert_eq!(
            analyze_game(&book, &twice),
            Err(IllegalGameMove {
                index: 2,
                mv: bad[0]
            })
        );
    }

    fn extract_root(book: &MemBook) -> i32 {
        crate::extract::root_value(book).expect("root value")
    }

    #[test]
    fn lines_end_where_the_links_end_and_are_bounded() {
        let book = test_book(8);
        let f5 = parse_transcript("f5").expect("legal");
        let (board, _) = f5.final_position().expect("legal");
        let lines = book_lines(&book, &board, &f5.moves, 100_000).expect("small book");
        assert!(lines.len() > 3);
        for l in &lines {
            assert_eq!(l[0], f5.moves[0]);
            let mut b = Board::start();
            for &m in l {
                b = b.play_move(m).expect("legal line");
            }
            let (_, moves) = book_moves(&book, &b).expect("ends in the book");
            assert!(moves.iter().all(|m| m.leaf), "ends without links");
        }
        assert_eq!(
            book_lines(&book, &board, &f5.moves, 3),
            Err(TooManyLines(3))
        );
    }

    #[test]
    fn explorer_memo_follows_the_book_revision() {
        let mut book = test_book(9);
        let mut ex = Explorer::new();
        let start = Board::start();
        let o = UmigameOptions::default();
        let a = ex.position(&book, &start, true, o, Limits::default());
        assert!(a.umigame.is_some_and(|u| u.exact()));
        assert!(a.accuracy.is_some());
        assert!(ex.memoized() > 0);
        // A tiny budget still answers, from the memo.
        let tiny = Limits {
            grades: 0,
            umigame: 0,
            memo: 1 << 20,
        };
        assert_eq!(ex.position(&book, &start, true, o, tiny), a);
        // A change of the book drops the memo: nothing can be answered without work.
        let id = book.probe(&start).expect("start");
        let level = book.level(id);
        book.set_level(id, level);
        let b = ex.position(&book, &start, true, o, tiny);
        assert!(b.umigame.is_some_and(|u| !u.exact()));
        assert!(b.accuracy.is_none());
        assert!(b.moves.iter().any(|m| m.grade_pending));
    }
}
