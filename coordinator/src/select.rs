//! Frontier selection: Edax's deviate, enhance, play and extend rules (edax-spec §4.6–4.8), taken
//! from the book crate's tested selectors ([`bookfarm_book::select`]) and run over the
//! coordinator's in-memory book. They return the positions whose leaf should be expanded, in
//! Edax's marking order; the scheduler skips positions whose leaf search is in flight and re-runs
//! selection as results land (design.md "Frontier selection").

use crate::book_index::BookIndex;
use bookfarm_book::select::{
    Deviate, DeviatePass, deviate_pass, enhance_mark, extend_mark, play_mark,
};
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::Selector;

/// Which of deviate's passes a selection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passes {
    /// Only this pass (Edax's order: each pass is expanded before the next is marked).
    One(DeviatePass),
    /// Both passes with one root value, their union in marking order, first pass first
    /// (continuous mode, which does not wait for a pass's searches before selecting again).
    Both,
}

/// Positions to expand under `selector`, walking from `root` (a canonical board), with both
/// deviate passes (see [`Passes::Both`]).
pub fn select(index: &BookIndex, root: &Board, selector: Selector) -> Vec<Board> {
    select_passes(index, root, selector, Passes::Both)
}

/// Positions to expand under `selector` from `root`; for deviate, `passes` picks the pass(es)
/// (other selectors have a single pass and ignore it). The deviate window is centred on the
/// root's current value. Positions without a leaf move are never returned.
pub fn select_passes(
    index: &BookIndex,
    root: &Board,
    selector: Selector,
    passes: Passes,
) -> Vec<Board> {
    let book = index.book();
    let Some(r) = book.find(root) else {
        return Vec::new();
    };
    let ids = match selector {
        Selector::Deviate { relative, absolute } => {
            let params = Deviate::new(relative, absolute);
            let s = i32::from(book.score(r).value);
            match passes {
                Passes::One(p) => deviate_pass(book, r, params, s, p),
                Passes::Both => {
                    let mut ids = deviate_pass(book, r, params, s, DeviatePass::RootSide);
                    let mut seen: std::collections::HashSet<_> = ids.iter().copied().collect();
                    for id in deviate_pass(book, r, params, s, DeviatePass::OpponentSide) {
                        if seen.insert(id) {
                            ids.push(id);
                        }
                    }
                    ids
                }
            }
        }
        Selector::Enhance { .. } => enhance_mark(book, r),
        Selector::Play => play_mark(book, r),
        Selector::Extend => extend_mark(book, r),
    };
    ids.into_iter()
        .filter(|&id| book.leaf(id).mv != Move::None)
        .map(|id| book.board(id))
        .collect()
}
