//! The decisive core: the leaf results the root's value depends on.
//!
//! After negamax the root has value `v`. Two proof trees establish it:
//! * **lower bound** (`value ≥ v`): at the positions of the root's side, one best move (a leaf, or
//!   a link whose child proves the opposite bound); at the opponent's positions every move, the
//!   leaf and every link;
//! * **upper bound** (`value ≤ v`): the reverse.
//!
//! Their union is the *core*. A position's value is the maximum of its leaf score and the negated
//! values of its linked children, so a proof that `value(p) ≥ t` needs one move scoring at least
//! `t` (the other moves can only raise the maximum), and a proof that `value(p) ≤ t` needs every
//! move to score at most `t`. Hence **no change of leaves outside the core can move the root's
//! value** in either direction (tested against brute force on random books). A result that is
//! not in the core can change what a selector marks, never the value of the finished book.
//!
//! The walk is one depth-first pass over the book after negamax: each position is visited at most
//! four times (two bounds, two thresholds `±v`; transpositions are memoized). Among the moves that
//! prove a lower bound, the best is taken (ties: the leaf, whose proof is one result, then links
//! in stored order), so the root's best line lies in the core.
//!
//! Leaves are returned as the book holds them (canonical board, level, leaf link in the canonical
//! board's coordinates); [`CoreKey`] is the same key computed from a leaf request and its result,
//! which is how the results behind a core position are found (a book position's leaf cannot be
//! turned back into its request: the request's board is the board as played, and links added
//! since without a re-search exclude moves the request did not).

use crate::mem::{MemBook, NodeId, child_board};
use crate::model::{Link, SCORE_INF};
use bookfarm_engine::Board;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::{canonical, transform, transform_move};

/// Which results a book leaf is: the canonical board, its level and its leaf (move in the
/// canonical board's coordinates, normalised over the board's own symmetries, and the score
/// byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CoreKey {
    /// The canonical board.
    pub board: Board,
    /// The leaf's search level.
    pub level: u8,
    /// The leaf move's code (Edax's: square, 64 pass, 65 none), normalised.
    pub mv: u8,
    /// The leaf score byte.
    pub score: i8,
}

impl CoreKey {
    /// The key of a book leaf: `board` canonical, `leaf` in its coordinates.
    pub fn of_leaf(board: &Board, level: u8, leaf: Link) -> CoreKey {
        CoreKey {
            board: *board,
            level,
            mv: normalised_move(board, leaf.mv),
            score: leaf.score,
        }
    }

    /// The key of the leaf that `result`, the answer to `request`, gives its position.
    pub fn of_result(request: &LeafRequest, result: &LeafResult) -> CoreKey {
        let (board, s) = canonical(&request.board);
        let score = result
            .score
            .clamp(-i32::from(SCORE_INF), i32::from(SCORE_INF)) as i8;
        CoreKey::of_leaf(
            &board,
            request.level,
            Link::new(score, transform_move(result.mv, s)),
        )
    }
}

/// The code of `mv` on `board` up to the board's own symmetries (the smallest image): a
/// self-symmetric position's leaf can be stored as any of its images.
fn normalised_move(board: &Board, mv: bookfarm_engine::Move) -> u8 {
    (0u8..8)
        .filter(|&s| transform(board, s) == *board)
        .map(|s| transform_move(mv, s).code())
        .min()
        .unwrap_or_else(|| mv.code())
}

/// A position of the core whose leaf the root's value uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreLeaf {
    /// The canonical board.
    pub board: Board,
    /// The leaf's level.
    pub level: u8,
    /// The leaf (move in the canonical board's coordinates).
    pub leaf: Link,
}

impl CoreLeaf {
    /// Its key (see [`CoreKey`]).
    pub fn key(&self) -> CoreKey {
        CoreKey::of_leaf(&self.board, self.level, self.leaf)
    }
}

/// The decisive core of a book.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreSet {
    /// The root's value (`None`: the root is not in the book or has no value yet; the core is
    /// then empty).
    pub value: Option<i32>,
    /// The leaves the value uses, each position once, in walk order.
    pub leaves: Vec<CoreLeaf>,
    /// Positions the two proofs visit (leaves' positions and the positions linking them).
    pub positions: usize,
}

/// The two bounds a position is asked to prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// `value ≥ t`: one best move.
    AtLeast,
    /// `value ≤ t`: every move.
    AtMost,
}

struct Walk<'a> {
    book: &'a MemBook,
    /// Per position: bit 0/1 AtLeast with t = v / −v, bit 2/3 AtMost with t = v / −v;
    /// bit 4: its leaf is in the core; bit 5: visited at all.
    seen: Vec<u8>,
    v: i32,
    leaves: Vec<CoreLeaf>,
    positions: usize,
}

impl Walk<'_> {
    fn bit(&self, bound: Bound, t: i32) -> u8 {
        let neg = u8::from(t != self.v);
        match bound {
            Bound::AtLeast => 1 << neg,
            Bound::AtMost => 4 << neg,
        }
    }

    fn add_leaf(&mut self, id: NodeId) {
        let i = id.index();
        if self.seen[i] & 16 == 0 {
            self.seen[i] |= 16;
            self.leaves.push(CoreLeaf {
                board: self.book.board(id),
                level: self.book.level(id),
                leaf: self.book.leaf(id),
            });
        }
    }

    /// Prove `bound` with threshold `t` at `id`, with an explicit stack (books can be deep).
    fn prove(&mut self, id: NodeId, bound: Bound, t: i32) {
        let mut stack = vec![(id, bound, t)];
        while let Some((id, bound, t)) = stack.pop() {
            let i = id.index();
            let bit = self.bit(bound, t);
            if self.seen[i] & bit != 0 {
                continue;
            }
            if self.seen[i] & 32 == 0 {
                self.positions += 1;
            }
            self.seen[i] |= bit | 32;
            let board = self.book.board(id);
            let leaf = self.book.leaf(id);
            let has_leaf = i32::from(leaf.score) > -i32::from(SCORE_INF);
            match bound {
                Bound::AtLeast => {
                    // The best move; the leaf wins ties (its proof is itself).
                    let mut best: Option<(i32, Option<NodeId>)> =
                        has_leaf.then_some((i32::from(leaf.score), None));
                    for l in self.book.links(id) {
                        let Some(c) = self.book.find(&child_board(&board, l.mv)) else {
                            continue;
                        };
                        let s = -i32::from(self.book.score(c).value);
                        if best.is_none_or(|(b, _)| s > b) {
                            best = Some((s, Some(c)));
                        }
                    }
                    match best {
                        Some((_, None)) => self.add_leaf(id),
                        Some((_, Some(c))) => stack.push((c, Bound::AtMost, -t)),
                        None => {}
                    }
                }
                Bound::AtMost => {
                    if has_leaf {
                        self.add_leaf(id);
                    }
                    let n = stack.len();
                    for l in self.book.links(id) {
                        if let Some(c) = self.book.find(&child_board(&board, l.mv)) {
                            stack.push((c, Bound::AtLeast, -t));
                        }
                    }
                    // Visit the links in stored order (the stack pops the last first).
                    stack[n..].reverse();
                }
            }
        }
    }
}

/// The decisive core of `book` from `root` (any orientation), on the book's current values
/// (run it after negamax).
pub fn decisive_core(book: &MemBook, root: &Board) -> CoreSet {
    let Some(rid) = book.find(&canonical(root).0) else {
        return CoreSet::default();
    };
    let v = i32::from(book.score(rid).value);
    if v.abs() >= i32::from(SCORE_INF) {
        return CoreSet::default();
    }
    let mut w = Walk {
        book,
        seen: vec![0; book.id_bound()],
        v,
        leaves: Vec::new(),
        positions: 0,
    };
    w.prove(rid, Bound::AtLeast, v);
    w.prove(rid, Bound::AtMost, v);
    CoreSet {
        value: Some(v),
        leaves: w.leaves,
        positions: w.positions,
    }
}
