//! Re-searching leaves that are already in the book: Edax's `book correct` (re-solve the exact
//! leaves, edax-spec §4.11) and `book upgrade` (what Edax's no-op `book deepen` should have
//! been: re-search, at a higher level, the leaves that can still change a value inside an error
//! window around the root's value).
//!
//! A leaf is re-searched as Edax's `book correct` does: the leaf is cleared and the position
//! searched again with its links excluded (a position whose moves are all links has no leaf and
//! needs no search). An upgrade raises the position's level to the new level before the search,
//! so a value is only ever replaced by one searched at a higher level.

use crate::accuracy::{LeafKind, leaf_kind};
use crate::edax::bucket_order;
use crate::grow::{FixReport, fix_command, leaf_request};
use crate::mem::{MemBook, NodeId, child_board};
use crate::model::{BAD_LINK, Link, MAX_LEVEL, Position};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use std::collections::{HashSet, VecDeque};

/// The position `id` with its leaf cleared and its level set to `level`, and the request that
/// searches its new leaf (`None` when every legal move is a link): the first half of a
/// re-search, a pure function of the book, so a growth program can lease the request and
/// finish the re-search later ([`finish_research`]).
pub(crate) fn start_research(
    book: &MemBook,
    id: NodeId,
    level: u8,
) -> (Position, Option<LeafRequest>) {
    let mut p = book.position(id);
    p.leaf = BAD_LINK;
    p.level = level;
    let request = leaf_request(&p);
    (p, request)
}

/// The second half of a re-search: the new leaf from `result` (when a search was needed), and
/// the position stored.
pub(crate) fn finish_research(
    book: &mut MemBook,
    mut p: Position,
    result: Option<&LeafResult>,
) -> Link {
    if let Some(r) = result {
        crate::grow::apply_leaf(&mut p, r);
    }
    book.put_position(&p);
    p.leaf
}

/// Clear the leaf of `id`, set its level, and search a new leaf through `search` (no search when
/// every legal move is a link). Returns the new leaf and whether a search ran.
fn research<F>(book: &mut MemBook, id: NodeId, level: u8, search: &mut F) -> (Link, bool)
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let (p, request) = start_research(book, id, level);
    let result = request.map(|req| search(&req));
    (finish_research(book, p, result.as_ref()), result.is_some())
}

/// A leaf whose re-search changed its score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Correction {
    /// The position (canonical board).
    pub board: Board,
    /// The leaf before.
    pub old: Link,
    /// The leaf after.
    pub new: Link,
}

/// What [`correct_solved`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorrectReport {
    /// Positions whose leaf is an exact solve at their level (the ones examined).
    pub solved: usize,
    /// Searches run.
    pub searches: usize,
    /// Leaves whose score changed (Edax's "Error found").
    pub corrections: Vec<Correction>,
}

/// Edax's `book_correct_solved`: in file order, every position whose level solves its empties
/// exactly (`LEVEL[level][empties]` = depth = empties at selectivity 5) gets its leaf cleared and
/// searched again; leaves whose score changed are reported. Unlike Edax, a game-over position
/// keeps an exact `{final score, NOMOVE}` leaf (Edax's search would not run and would leave it
/// without a leaf and value). Values are stale afterwards: [`correct_command`] fixes, links and
/// negamaxes.
pub fn correct_solved<F>(book: &mut MemBook, search: &mut F) -> CorrectReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let mut report = CorrectReport::default();
    for id in bucket_order(book) {
        let board = book.board(id);
        let level = book.level(id);
        if leaf_kind(level, board.empties()) != LeafKind::Perfect {
            continue;
        }
        report.solved += 1;
        let old = book.leaf(id);
        let new = if board.is_game_over() {
            let leaf = Link::new(board.final_score() as i8, Move::None);
            book.set_leaf(id, leaf);
            leaf
        } else {
            let (leaf, searched) = research(book, id, level, search);
            report.searches += usize::from(searched);
            leaf
        };
        if new.score != old.score {
            report.corrections.push(Correction { board, old, new });
        }
    }
    report
}

/// The `book correct` command: [`correct_solved`], then Edax's fix, link, negamax and sort
/// ([`fix_command`]).
pub fn correct_command<F>(book: &mut MemBook, search: &mut F) -> (CorrectReport, FixReport)
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let report = correct_solved(book, search);
    let fixed = fix_command(book, search);
    (report, fixed)
}

/// Parameters of `book upgrade` ([`crate::program::Operation::Upgrade`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Upgrade {
    /// The level to re-search at (0..=60).
    pub level: u8,
    /// Half-width of the window around the root's value, in discs.
    pub error: i32,
}

impl Upgrade {
    /// The parameters in range: level at most 60, error at least 0.
    pub fn clamped(self) -> Upgrade {
        Upgrade {
            level: self.level.min(MAX_LEVEL),
            error: self.error.max(0),
        }
    }
}

/// The positions an upgrade re-searches, closest to the root first: a breadth-first walk from
/// `root` (negamaxed) with the window `[v − error, v + error]` around the root's value `v`,
/// negated and swapped at each move (as Edax's deviate window, edax-spec §4.6). A position is
/// visited once, with the window of its first (shortest) path, when its value lies in its
/// window; the walk follows the links whose score lies in the window. A visited position is
/// selected when its level is below the upgrade level and its leaf (a move) scores inside the
/// window: a deeper search of that leaf can still change a value inside the window.
pub fn upgrade_mark(book: &MemBook, root: NodeId, params: Upgrade) -> Vec<NodeId> {
    let v = i32::from(book.score(root).value);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([(root, v - params.error, v + params.error)]);
    seen.insert(root);
    while let Some((id, lo, hi)) = queue.pop_front() {
        let value = i32::from(book.score(id).value);
        if !(lo..=hi).contains(&value) {
            continue;
        }
        let leaf = book.leaf(id);
        if book.level(id) < params.level
            && leaf.mv != Move::None
            && (lo..=hi).contains(&i32::from(leaf.score))
        {
            out.push(id);
        }
        let board = book.board(id);
        for l in book.links(id) {
            if !(lo..=hi).contains(&i32::from(l.score)) {
                continue;
            }
            if let Some(c) = book.find(&child_board(&board, l.mv))
                && seen.insert(c)
            {
                queue.push_back((c, -hi, -lo));
            }
        }
    }
    out
}
