//! Merging two books by a stated rule (Egaroucid's `Book::merge`, flippy's "never replace a value
//! with one from a lower level"): for a position in both books, the leaf of the **higher level**
//! wins; at **equal levels the newer book's** leaf wins. A book's values come only from its
//! leaves and links (edax-spec §4.1), so this decides every value: no value is ever replaced by
//! one searched at a lower level. Links are united. Positions of one book only are copied.
//!
//! Afterwards the caller links the book and searches the leaves that had to be cleared (their
//! move became a link) at the position's (winning) level, then negamaxes: the `book merge`
//! command runs [`crate::grow::link_book`], negamax and the link sort.

use crate::mem::MemBook;
use crate::model::{BAD_LINK, BookDate};
use bookfarm_engine::Board;

/// Which book is the newer one, for positions at equal levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Newer {
    /// The book merged in (`src`): its leaf wins at equal levels (Egaroucid's rule for a book
    /// it imports).
    Incoming,
    /// The book merged into (`dst`): it keeps its leaf at equal levels.
    Existing,
}

impl Newer {
    /// The newer of two books by their header dates; the incoming book when the dates are
    /// equal.
    pub fn by_date(existing: &BookDate, incoming: &BookDate) -> Newer {
        let key = |d: &BookDate| (d.year, d.month, d.day, d.hour, d.minute, d.second);
        if key(incoming) >= key(existing) {
            Newer::Incoming
        } else {
            Newer::Existing
        }
    }
}

/// What [`merge_by_level`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Positions only in the incoming book, copied.
    pub added: usize,
    /// Positions whose incoming leaf was searched at a higher level: taken with its level.
    pub upgraded: usize,
    /// Positions at equal levels whose incoming leaf was taken because that book is newer.
    pub replaced: usize,
    /// Positions in both books that kept their own leaf and level (higher, or equal and newer).
    pub kept: usize,
    /// Links added to existing positions.
    pub links_added: usize,
    /// Positions whose leaf was cleared because its move became a link: they need a leaf
    /// search (at their level) before negamax.
    pub need_search: Vec<Board>,
}

/// Merge `src` into `dst` by the rule of the [module docs](self). Values are stale afterwards.
pub fn merge_by_level(dst: &mut MemBook, src: &MemBook, newer: Newer) -> MergeReport {
    let mut report = MergeReport::default();
    for sid in src.ids() {
        let p = src.position(sid);
        let Some(did) = dst.find(&p.board) else {
            dst.put_position(&p);
            report.added += 1;
            continue;
        };
        let (mine, theirs) = (dst.level(did), p.level);
        let take = theirs > mine || (theirs == mine && newer == Newer::Incoming);
        if take {
            if theirs > mine {
                report.upgraded += 1;
            } else {
                report.replaced += 1;
            }
            let linked = dst.links(did).any(|l| l.mv == p.leaf.mv);
            dst.set_leaf(did, if linked { BAD_LINK } else { p.leaf });
            dst.set_level(did, theirs);
            if linked {
                report.need_search.push(p.board);
            }
        } else {
            report.kept += 1;
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
    report.need_search.sort();
    report.need_search.dedup();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negamax::negamax;
    use crate::synth::test_book as synth;
    use std::collections::HashSet;

    #[test]
    fn merge_unites_positions_and_links() {
        let a = synth(1);
        let b = synth(2);
        let mut m = a.clone();
        let report = merge_by_level(&mut m, &b, Newer::Existing);
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

    #[test]
    fn newer_by_date() {
        let old = BookDate::from_unix(1_000_000);
        let new = BookDate::from_unix(2_000_000);
        assert_eq!(Newer::by_date(&old, &new), Newer::Incoming);
        assert_eq!(Newer::by_date(&new, &old), Newer::Existing);
        assert_eq!(Newer::by_date(&new, &new), Newer::Incoming);
    }
}
