//! Better leaves (Egaroucid's `upgrade_better_leaves`): positions with links whose leaf scores
//! better than every link. Their value rests on a leaf search the book never followed, so the
//! book's best line leaves the book there. `book check` reports them and `book fix` repairs them
//! by promoting the leaf to a position: Edax's expansion ([`Operation::Expand`]): the
//! child is added with its own leaf search, the parent's leaf becomes a link and the parent is
//! searched again for a new leaf, both at the parent's level.
//!
//! Egaroucid registers the child with the leaf's value and no search; Edax's model needs the
//! child's own leaf to hold its value, hence the searches.

use crate::driver::{Driver, Operation};
use crate::edax::bucket_order;
use crate::grow::Changes;
use crate::mem::{MemBook, NodeId, child_board};
use crate::negamax::negamax;
use bookfarm_engine::Move;
use bookfarm_engine::search::{LeafRequest, LeafResult};

/// Whether `id` has a link and a leaf (a square move) scoring strictly better than every link
/// (link values read from the children, as negamax sets them).
pub fn has_better_leaf(book: &MemBook, id: NodeId) -> bool {
    let leaf = book.leaf(id);
    if !matches!(leaf.mv, Move::Square(_)) {
        return false;
    }
    let board = book.board(id);
    let best_link = book
        .links(id)
        .filter_map(|l| book.find(&child_board(&board, l.mv)))
        .map(|c| -i32::from(book.score(c).value))
        .max();
    best_link.is_some_and(|best| i32::from(leaf.score) > best)
}

/// Every position with a better leaf, in Edax's file order.
pub fn better_leaves(book: &MemBook) -> Vec<NodeId> {
    bucket_order(book)
        .into_iter()
        .filter(|&id| has_better_leaf(book, id))
        .collect()
}

/// Expand every better leaf once (positions created meanwhile are not examined), then negamax
/// from the start position. Returns the positions expanded and the changes.
pub fn upgrade_better_leaves<F>(book: &mut MemBook, search: &mut F) -> (usize, Changes)
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let todo = better_leaves(book);
    let boards = todo.iter().map(|&id| book.board(id)).collect();
    let mut driver = Driver::new(Operation::Expand { boards }, None);
    driver.run_with(book, search);
    negamax(book);
    (todo.len(), driver.state().changes)
}
