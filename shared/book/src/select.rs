//! Edax's book selectors as pure functions: they walk the book exactly as Edax does (depth-first
//! in stored link order with the `done` memo) and return the positions Edax would mark `todo`,
//! in marking order, without changing the book. Expanding them (searching the leaf child and
//! re-searching the leaf) is the caller's job (edax-spec §4.4).

use crate::mem::{MemBook, NodeId, child_board};
use crate::negamax::leaf_bounds;
use crate::negamax::negamax_from;
use bookfarm_engine::Board;

/// The marking walk's memo (Edax's `done` flags after `book_clean`).
struct Done(Vec<u64>);

impl Done {
    fn new(book: &MemBook) -> Done {
        Done(vec![0; book.id_bound().div_ceil(64)])
    }
    /// Mark `id`; returns false if it was already marked.
    fn mark(&mut self, id: NodeId) -> bool {
        let (w, b) = (id.index() / 64, 1u64 << (id.index() % 64));
        let fresh = self.0[w] & b == 0;
        self.0[w] |= b;
        fresh
    }
}

fn children(book: &MemBook, id: NodeId) -> Vec<(i8, Option<NodeId>)> {
    let board = book.board(id);
    book.links(id)
        .map(|l| (l.score, book.find(&child_board(&board, l.mv))))
        .collect()
}

/// Whether the walk stops at `id` because it is past the book depth or the game is over.
fn outside(book: &MemBook, id: NodeId) -> bool {
    let b = book.board(id);
    (b.empties() as i32) < book.header().n_empties || b.is_game_over()
}

/// Parameters of Edax's `book deviate <rel> <abs>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Deviate {
    /// Relative error allowed per deviating move (clamped to −129..=129).
    pub rel: i32,
    /// Absolute window half-width around the root value (clamped to 0..=65).
    pub abs: i32,
}

impl Deviate {
    /// Edax's clamping of the two arguments.
    pub fn new(rel: i32, abs: i32) -> Deviate {
        Deviate {
            rel: rel.clamp(-129, 129),
            abs: abs.clamp(0, 65),
        }
    }
}

impl Default for Deviate {
    /// Edax's defaults, `deviate 2 4`.
    fn default() -> Deviate {
        Deviate::new(2, 4)
    }
}

/// Which of deviate's two passes: the root side deviates (the opponent plays best moves only),
/// or the reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviatePass {
    /// `pdev = rel, odev = 0`.
    RootSide,
    /// `pdev = 0, odev = rel`.
    OpponentSide,
}

/// Edax's recursive `book_deviate` marking from `root` with explicit deviations and window.
pub fn deviate_mark(
    book: &MemBook,
    root: NodeId,
    pdev: i32,
    odev: i32,
    lo: i32,
    hi: i32,
) -> Vec<NodeId> {
    fn rec(
        book: &MemBook,
        id: NodeId,
        (pdev, odev, lo, hi): (i32, i32, i32, i32),
        done: &mut Done,
        out: &mut Vec<NodeId>,
    ) {
        let value = i32::from(book.score(id).value);
        if !(lo..=hi).contains(&value) || outside(book, id) || !done.mark(id) {
            return;
        }
        for (score, child) in children(book, id) {
            let s = i32::from(score);
            if value - s <= pdev
                && (lo..=hi).contains(&s)
                && let Some(c) = child
            {
                rec(book, c, (odev, pdev, -hi, -lo), done, out);
            }
        }
        let leaf = i32::from(book.leaf(id).score);
        if value - leaf <= pdev && (lo..=hi).contains(&leaf) {
            out.push(id);
        }
    }
    let mut done = Done::new(book);
    let mut out = Vec::new();
    rec(book, root, (pdev, odev, lo, hi), &mut done, &mut out);
    out
}

/// One pass of `book deviate` from `root`: the window is `s ± abs` where `s` is the root value
/// taken at the start of the iteration (pass it for both passes; Edax does not negamax between
/// them). Returns the positions to expand.
pub fn deviate_pass(
    book: &MemBook,
    root: NodeId,
    params: Deviate,
    root_value: i32,
    pass: DeviatePass,
) -> Vec<NodeId> {
    let (pdev, odev) = match pass {
        DeviatePass::RootSide => (params.rel, 0),
        DeviatePass::OpponentSide => (0, params.rel),
    };
    deviate_mark(
        book,
        root,
        pdev,
        odev,
        root_value - params.abs,
        root_value + params.abs,
    )
}

/// Edax's `book enhance` marking from `root` (after the errors were stored in the header and the
/// book negamaxed): positions whose leaf bounds could still change the root's bounds.
pub fn enhance_mark(book: &MemBook, root: NodeId) -> Vec<NodeId> {
    fn rec(book: &MemBook, id: NodeId, done: &mut Done, out: &mut Vec<NodeId>) {
        if outside(book, id) || !done.mark(id) {
            return;
        }
        let s = book.score(id);
        let (lower, upper) = (i32::from(s.lower), i32::from(s.upper));
        for (_, child) in children(book, id) {
            let Some(c) = child else { continue };
            let cs = book.score(c);
            if -i32::from(cs.upper) >= lower || -i32::from(cs.lower) >= upper {
                rec(book, c, done, out);
            }
        }
        if let Some((lo, up)) = leaf_bounds(book, id)
            && (lo >= lower || up >= upper)
        {
            out.push(id);
        }
    }
    let mut done = Done::new(book);
    let mut out = Vec::new();
    rec(book, root, &mut done, &mut out);
    out
}

/// The walk shared by `book play` and `book extend` (HEAD): every link is followed from
/// positions inside the book depth and not game over; `pick` decides which to mark.
fn walk_all(book: &MemBook, root: NodeId, pick: &dyn Fn(&MemBook, NodeId) -> bool) -> Vec<NodeId> {
    fn rec(
        book: &MemBook,
        id: NodeId,
        pick: &dyn Fn(&MemBook, NodeId) -> bool,
        done: &mut Done,
        out: &mut Vec<NodeId>,
    ) {
        if outside(book, id) || !done.mark(id) {
            return;
        }
        for (_, child) in children(book, id) {
            if let Some(c) = child {
                rec(book, c, pick, done, out);
            }
        }
        if pick(book, id) {
            out.push(id);
        }
    }
    let mut done = Done::new(book);
    let mut out = Vec::new();
    rec(book, root, pick, &mut done, &mut out);
    out
}

/// `book play` (HEAD) marking: reachable positions without links.
pub fn play_mark(book: &MemBook, root: NodeId) -> Vec<NodeId> {
    walk_all(book, root, &|b, id| b.n_link(id) == 0)
}

/// `book extend` (HEAD) marking: reachable positions whose leaf is a best move (ties included).
pub fn extend_mark(book: &MemBook, root: NodeId) -> Vec<NodeId> {
    walk_all(book, root, &|b, id| {
        i16::from(b.leaf(id).score) >= b.score(id).value
    })
}

/// Negamax from the position of `board` (any symmetry) as the selectors' drivers do before
/// marking; returns its id and value, or `None` when the board is not in the book.
pub fn prepare_root(book: &mut MemBook, board: &Board) -> Option<(NodeId, i32)> {
    let root = book.probe(board)?;
    negamax_from(book, root);
    Some((root, i32::from(book.score(root).value)))
}
