//! Better leaves (Egaroucid's `upgrade_better_leaves`): positions with links whose leaf scores
//! better than every link. Their value rests on a leaf search the book never followed, so the
//! book's best line leaves the book there. `book check` reports them and `book fix` repairs them
//! by promoting the leaf to a position: Edax's expansion ([`crate::program::Operation::Expand`]
//! of the positions [`better_leaves`] finds): the child is added with its own leaf search, the
//! parent's leaf becomes a link and the parent is searched again for a new leaf, both at the
//! parent's level.
//!
//! Egaroucid registers the child with the leaf's value and no search; Edax's model needs the
//! child's own leaf to hold its value, hence the searches.

use crate::edax::bucket_order;
use crate::mem::{MemBook, NodeId, child_board};
use bookfarm_engine::Move;

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
