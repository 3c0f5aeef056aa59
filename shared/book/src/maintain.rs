//! Book maintenance as pure book transformations: Edax's `prune` and `subtree` (edax-spec §4.10).
//! Merging (Edax's is broken, §4.11) is [`crate::merge`].
//! Commands that also need leaf searches (fix, the re-search of cleared leaves) are the caller's.

use crate::mem::{MemBook, NodeId, child_board};
use crate::model::Link;
use crate::negamax::negamax_from;
use bookfarm_engine::Board;
use std::collections::HashSet;

/// Edax's `prune_mark` from `root` (which must be negamaxed): returns the positions kept, in
/// marking order. Edax revisits positions once per path (exponential); the walk here memoizes
/// on (position, deviations, window), which marks the same set.
pub fn prune_mark(book: &MemBook, root: NodeId, pdev: i32, odev: i32) -> Vec<NodeId> {
    /// (pdev, odev, lo, hi) of one visit.
    type State = (i32, i32, i32, i32);
    fn rec(
        book: &MemBook,
        id: NodeId,
        state: State,
        seen: &mut HashSet<(NodeId, State)>,
        kept: &mut HashSet<NodeId>,
        out: &mut Vec<NodeId>,
    ) {
        let (pdev, odev, lo, hi) = state;
        let value = i32::from(book.score(id).value);
        let board = book.board(id);
        if !(lo..=hi).contains(&value) || (board.empties() as i32) < book.header().n_empties - 1 {
            return;
        }
        if kept.insert(id) {
            out.push(id);
        }
        if !seen.insert((id, state)) {
            return;
        }
        for l in book.links(id).collect::<Vec<_>>() {
            let s = i32::from(l.score);
            if value - s <= pdev
                && (lo..=hi).contains(&s)
                && let Some(c) = book.find(&child_board(&board, l.mv))
            {
                rec(book, c, (odev, pdev, -hi, -lo), seen, kept, out);
            }
        }
    }
    let mut seen = HashSet::new();
    let mut kept = HashSet::new();
    let mut out = Vec::new();
    rec(
        book,
        root,
        (pdev, odev, -127, 127),
        &mut seen,
        &mut kept,
        &mut out,
    );
    out
}

/// Remove every position not in `keep`; in the remaining ones drop the links whose child is
/// gone, a dropped link becoming the leaf when its score beats the leaf's (Edax's
/// `book_prune`/`book_subtree` removal). Returns the number of positions removed. Ids change.
pub fn remove_except(book: &mut MemBook, keep: &[NodeId]) -> usize {
    let keep_boards: HashSet<Board> = keep.iter().map(|&id| book.board(id)).collect();
    let doomed: Vec<Board> = book
        .ids()
        .map(|id| book.board(id))
        .filter(|b| !keep_boards.contains(b))
        .collect();
    for b in &doomed {
        book.remove(b);
    }
    let ids: Vec<NodeId> = book.ids().collect();
    for id in ids {
        let board = book.board(id);
        let links: Vec<Link> = book.links(id).collect();
        let mut leaf = book.leaf(id);
        let mut kept_links = Vec::with_capacity(links.len());
        for l in links {
            if book.find(&child_board(&board, l.mv)).is_some() {
                kept_links.push(l);
            } else if l.score > leaf.score {
                leaf = l;
            }
        }
        if kept_links.len() != book.n_link(id) {
            book.set_links(id, &kept_links);
            book.set_leaf(id, leaf);
        }
    }
    doomed.len()
}

/// Edax's `book prune` on the book: negamax from the start position, keep the union of the
/// two passes (the root side plays any book move while the opponent plays best moves, then
/// the reverse) and remove the rest. Returns the number of positions removed (0 without a
/// start position). The caller then links, fixes, negamaxes and sorts as Edax does.
pub fn prune(book: &mut MemBook) -> usize {
    let Some(root) = book.find(&Board::start()) else {
        return 0;
    };
    negamax_from(book, root);
    let mut keep = prune_mark(book, root, 254, 0);
    keep.extend(prune_mark(book, root, 0, 254));
    remove_except(book, &keep)
}

/// Edax's `book subtree` from `board` (any symmetry): keep only the positions reachable from
/// it through links inside the window and depth, remove the rest. Returns the number removed.
pub fn subtree(book: &mut MemBook, board: &Board) -> usize {
    let Some(root) = book.probe(board) else {
        return 0;
    };
    negamax_from(book, root);
    let keep = prune_mark(book, root, 254, 254);
    remove_except(book, &keep)
}

/// A subtree with more positions than asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the subtree holds more than {0} positions")]
pub struct SubtreeTooBig(pub usize);

/// The positions reachable from `board` (any symmetry) through links, as a new book with
/// `book`'s header, values and counts, without touching `book`: a closed set (no link leaves
/// it), so its values are its own negamax. It is what [`subtree`] keeps on a book without
/// positions beyond its depth. At most `max` positions, else [`SubtreeTooBig`]; an empty book
/// when `board` is not in `book`.
pub fn subtree_copy(book: &MemBook, board: &Board, max: usize) -> Result<MemBook, SubtreeTooBig> {
    let mut out = MemBook::new(*book.header());
    let Some(root) = book.probe(board) else {
        return Ok(out);
    };
    let mut seen = HashSet::from([root]);
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        if seen.len() > max {
            return Err(SubtreeTooBig(max));
        }
        let b = book.board(id);
        for l in book.links(id) {
            if let Some(c) = book.find(&child_board(&b, l.mv))
                && seen.insert(c)
            {
                stack.push(c);
            }
        }
    }
    if seen.len() > max {
        return Err(SubtreeTooBig(max));
    }
    // The book's order (Edax's writer keeps file order within a bucket).
    let mut ids: Vec<NodeId> = seen.into_iter().collect();
    ids.sort_unstable();
    for id in ids {
        out.insert_new(&book.position(id));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::test_book as synth;

    #[test]
    fn subtree_keeps_exactly_the_reachable_positions() {
        let mut book = synth(5);
        // Pick a child of the start position as the new root.
        let start = book.find(&Board::start()).expect("start");
        let first = book.link(start, 0);
        let root_board = child_board(&Board::start(), first.mv);
        let before = book.len();
        let removed = subtree(&mut book, &root_board);
        assert!(removed > 0 && removed < before);
        // Every remaining position is reachable from the root, and no link dangles.
        let root = book.find(&root_board).expect("root kept");
        let mut seen = HashSet::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if seen.insert(id) {
                let b = book.board(id);
                for l in book.links(id) {
                    stack.push(book.find(&child_board(&b, l.mv)).expect("no dangling link"));
                }
            }
        }
        assert_eq!(seen.len(), book.len());
    }

    #[test]
    fn subtree_copy_equals_subtree_and_is_bounded() {
        let book = synth(5);
        let start = book.find(&Board::start()).expect("start");
        let root_board = child_board(&Board::start(), book.link(start, 0).mv);
        let mut kept = book.clone();
        subtree(&mut kept, &root_board);
        let copy = subtree_copy(&book, &root_board, usize::MAX).expect("no bound");
        let boards = |b: &MemBook| b.ids().map(|id| b.position(id)).collect::<Vec<_>>();
        let mut want = boards(&kept);
        let mut got = boards(&copy);
        want.sort_by_key(|p| p.board);
        got.sort_by_key(|p| p.board);
        assert_eq!(got, want);
        assert_eq!(
            subtree_copy(&book, &root_board, copy.len() - 1).map(|b| b.len()),
            Err(SubtreeTooBig(copy.len() - 1))
        );
        assert_eq!(
            subtree_copy(&book, &root_board, copy.len()).map(|b| b.len()),
            Ok(copy.len())
        );
        assert!(
            subtree_copy(&book, &Board::default(), 10)
                .expect("empty")
                .is_empty()
        );
    }

    #[test]
    fn prune_keeps_root_and_best_lines_and_leaves_no_dangling_link() {
        let mut book = synth(9);
        let before = book.len();
        let removed = prune(&mut book);
        assert_eq!(book.len() + removed, before);
        assert!(book.find(&Board::start()).is_some());
        for id in book.ids() {
            let b = book.board(id);
            for l in book.links(id) {
                assert!(book.find(&child_board(&b, l.mv)).is_some());
            }
        }
        // The best line from the start survives.
        let mut id = book.find(&Board::start()).expect("start");
        while book.n_link(id) > 0 {
            let v = book.score(id).value;
            let Some(best) = book.links(id).find(|l| i16::from(l.score) == v) else {
                break;
            };
            id = book
                .find(&child_board(&book.board(id), best.mv))
                .expect("best child kept");
        }
    }
}
