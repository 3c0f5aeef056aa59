//! Book maintenance as pure book transformations: Edax's `prune` and `subtree` (edax-spec §4.10)
//! and a working `merge` (Edax's is broken, §4.11; ours unites positions and links).
//! Commands that also need leaf searches (fix, the re-search of cleared leaves) are the caller's.

use crate::mem::{MemBook, NodeId, child_board};
use crate::model::{BAD_LINK, Link};
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

/// What [`merge`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Positions copied from the source.
    pub added: usize,
    /// Positions whose leaf and level were taken from a higher-level source position.
    pub upgraded: usize,
    /// Links added to existing positions.
    pub links_added: usize,
    /// Positions whose leaf had to be cleared because its move became a link; their leaf needs
    /// a new search (with the links excluded).
    pub need_search: Vec<Board>,
}

/// Merge `src` into `dst`: every source position and link. A position only in `src` is copied.
/// For a position in both, the higher level's leaf and level win (equal levels keep `dst`'s),
/// and the source's links are added (Edax `add_link`: a link on the leaf's move clears the
/// leaf). Values are stale afterwards: negamax the result.
pub fn merge(dst: &mut MemBook, src: &MemBook) -> MergeReport {
    let mut report = MergeReport::default();
    for sid in src.ids() {
        let p = src.position(sid);
        match dst.find(&p.board) {
            None => {
                dst.put_position(&p);
                report.added += 1;
            }
            Some(did) => {
                if p.level > dst.level(did) {
                    let linked = dst.links(did).any(|l| l.mv == p.leaf.mv);
                    dst.set_leaf(did, if linked { BAD_LINK } else { p.leaf });
                    dst.set_level(did, p.level);
                    report.upgraded += 1;
                }
                for &l in &p.links {
                    let had_leaf = dst.leaf(did).mv == l.mv;
                    if dst.add_link(did, l) {
                        report.links_added += 1;
                        if had_leaf {
                            report.need_search.push(p.board);
                        }
                    }
                }
            }
        }
    }
    report.need_search.sort();
    report.need_search.dedup();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negamax::negamax;
    use crate::synth::{SynthParams, random_book};

    fn synth(seed: u64) -> MemBook {
        let mut b = random_book(SynthParams {
            seed,
            positions: 300,
            plies: 10,
            level: Some(4),
        });
        negamax(&mut b);
        b
    }

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

    #[test]
    fn merge_unites_positions_and_links() {
        let a = synth(1);
        let b = synth(2);
        let mut m = a.clone();
        let report = merge(&mut m, &b);
        let boards: HashSet<Board> = a
            .positions()
            .chain(b.positions())
            .map(|p| p.board)
            .collect();
        assert_eq!(m.len(), boards.len());
        assert_eq!(report.added, boards.len() - a.len());
        // Every link of either book is in the merge, and no leaf sits on a link.
        for p in a.positions().chain(b.positions()) {
            let id = m.find(&p.board).expect("merged");
            for l in &p.links {
                assert!(m.links(id).any(|k| k.mv == l.mv));
            }
            let leaf = m.leaf(id);
            assert!(leaf.mv == bookfarm_engine::Move::None || m.links(id).all(|k| k.mv != leaf.mv));
        }
        let stats = negamax(&mut m);
        assert_eq!(stats.missing_children, 0);
    }
}
