//! The coordinator's in-memory book: the book crate's compact [`MemBook`] (positions addressed by
//! [`NodeId`], child→parents index, Edax's `add_link`) plus the coordinator's own per-position
//! scheduling state ([`Sched`]: pending, version, quarantined) in a side table indexed by
//! `NodeId`. Values come from the book crate's Edax negamax: [`propagate`] incrementally from
//! changed positions to their ancestors, and a full recompute when the store is opened.
//!
//! The store (sled) is the source of truth for boards, links, leaves and levels; values, bounds
//! and counts are derived here. Invariant (tested): after any sequence of changes followed by
//! [`BookIndex::propagate`], every position equals what [`BookIndex::full_negamax`] computes.
//! The coordinator never removes positions, so node ids are stable and the side table is dense.

use bookfarm_book::mem::{MemBook, NodeId};
use bookfarm_book::model::{BookHeader, Link, Position};
use bookfarm_book::negamax::{NegamaxStats, link_position, propagate};
use bookfarm_engine::{Board, Move};

/// The coordinator's scheduling state of one position (not part of the Edax book).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sched {
    /// A leaf search for this position is queued or in flight; its leaf is provisional.
    pub pending: bool,
    /// Incremented whenever the links (hence the excluded set of its leaf search) change; a
    /// result computed for another version is stale.
    pub version: u32,
    /// The leaf search failed too often; the position is no longer scheduled.
    pub quarantined: bool,
}

/// One book position plus its scheduling state, as a value (what the store persists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The Edax position (canonical board, leaf, links, derived values).
    pub pos: Position,
    /// A leaf search for this position is queued or in flight; its leaf is provisional.
    pub pending: bool,
    /// The links version (see [`Sched::version`]).
    pub version: u32,
    /// The leaf search failed too often; the position is no longer scheduled.
    pub quarantined: bool,
}

impl Entry {
    /// A fresh entry for a position.
    pub fn new(pos: Position) -> Entry {
        Entry {
            pos,
            pending: false,
            version: 0,
            quarantined: false,
        }
    }

    /// Squares of the position's links (the moves its leaf search must exclude).
    pub fn excluded(&self) -> u64 {
        excluded_of(self.pos.links.iter().copied())
    }

    /// The scheduling part.
    pub fn sched(&self) -> Sched {
        Sched {
            pending: self.pending,
            version: self.version,
            quarantined: self.quarantined,
        }
    }
}

fn excluded_of(links: impl Iterator<Item = Link>) -> u64 {
    links
        .filter_map(|l| match l.mv {
            Move::Square(s) => Some(s.bit()),
            _ => None,
        })
        .fold(0, |a, b| a | b)
}

pub use bookfarm_book::mem::child_board;

/// Clamp to a link score byte.
pub fn to_i8(v: i32) -> i8 {
    i8::try_from(v.clamp(-127, 127)).expect("clamped to the i8 range")
}

/// The in-memory book.
#[derive(Debug, Clone)]
pub struct BookIndex {
    book: MemBook,
    /// Scheduling state, indexed by `NodeId` (ids are dense: nothing is ever removed).
    sched: Vec<Sched>,
}

impl BookIndex {
    /// An empty book with `header`.
    pub fn new(header: BookHeader) -> BookIndex {
        let mut book = MemBook::new(header);
        book.build_parent_index();
        BookIndex {
            book,
            sched: Vec::new(),
        }
    }

    /// The underlying book (selection and export read it directly).
    pub fn book(&self) -> &MemBook {
        &self.book
    }

    /// The book header (level, depth, errors).
    pub fn header(&self) -> &BookHeader {
        self.book.header()
    }

    /// Replace the header (values are not recomputed; call [`BookIndex::full_negamax`]).
    pub fn set_header(&mut self, header: BookHeader) {
        self.book.set_header(header);
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.book.len()
    }

    /// True when the book has no position.
    pub fn is_empty(&self) -> bool {
        self.book.is_empty()
    }

    /// The node id of a canonical board.
    pub fn id(&self, board: &Board) -> Option<NodeId> {
        self.book.find(board)
    }

    /// Whether the canonical board is in the book.
    pub fn contains(&self, board: &Board) -> bool {
        self.book.find(board).is_some()
    }

    /// The entry of a canonical board (a copy).
    pub fn get(&self, board: &Board) -> Option<Entry> {
        self.id(board).map(|id| self.entry(id))
    }

    fn entry(&self, id: NodeId) -> Entry {
        let s = self.sched[id.index()];
        Entry {
            pos: self.book.position(id),
            pending: s.pending,
            version: s.version,
            quarantined: s.quarantined,
        }
    }

    /// The scheduling state of a canonical board.
    pub fn sched(&self, board: &Board) -> Option<Sched> {
        self.id(board).map(|id| self.sched[id.index()])
    }

    /// Mutable scheduling state of a canonical board.
    pub fn sched_mut(&mut self, board: &Board) -> Option<&mut Sched> {
        let id = self.id(board)?;
        Some(&mut self.sched[id.index()])
    }

    /// The leaf of a canonical board.
    pub fn leaf(&self, board: &Board) -> Option<Link> {
        self.id(board).map(|id| self.book.leaf(id))
    }

    /// Set the leaf of a canonical board (values follow at the next [`BookIndex::propagate`]).
    /// Returns false when the board is not in the book.
    pub fn set_leaf(&mut self, board: &Board, leaf: Link) -> bool {
        match self.id(board) {
            Some(id) => {
                self.book.set_leaf(id, leaf);
                true
            }
            None => false,
        }
    }

    /// The squares a leaf search of `board` must exclude (its links), or `None` when absent.
    pub fn excluded(&self, board: &Board) -> Option<u64> {
        self.id(board).map(|id| excluded_of(self.book.links(id)))
    }

    /// Every entry, in insertion order.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.book.ids().map(|id| self.entry(id))
    }

    /// Every position, in insertion order.
    pub fn positions(&self) -> impl Iterator<Item = Position> + '_ {
        self.book.positions()
    }

    /// Insert (or replace) an entry; the parent index follows its links.
    pub fn insert(&mut self, entry: Entry) {
        let id = self.book.put_position(&entry.pos);
        if self.sched.len() <= id.index() {
            self.sched.resize(id.index() + 1, Sched::default());
        }
        self.sched[id.index()] = entry.sched();
    }

    /// Add a link to `parent` with Edax's `add_link` semantics (see [`MemBook::add_link`]); a
    /// new link bumps the position's version. Returns true when a link was added.
    pub fn add_link(&mut self, parent: &Board, link: Link) -> bool {
        let Some(id) = self.id(parent) else {
            return false;
        };
        let added = self.book.add_link(id, link);
        if added {
            self.bump(id);
        }
        added
    }

    /// Edax's `position_link` for a position: link every legal move (increasing square order)
    /// whose child is in the book, or the pass when the side must pass. Returns the links added.
    pub fn link_children(&mut self, board: &Board) -> usize {
        let Some(id) = self.id(board) else { return 0 };
        let n = link_position(&mut self.book, id);
        if n > 0 {
            self.bump(id);
        }
        n
    }

    fn bump(&mut self, id: NodeId) {
        let s = &mut self.sched[id.index()];
        s.version = s.version.wrapping_add(1);
    }

    /// Parents holding a link to `board` (one entry per link).
    pub fn parents(&self, board: &Board) -> Vec<Board> {
        match self.id(board) {
            Some(id) => self.book.parents(id).map(|p| self.book.board(p)).collect(),
            None => Vec::new(),
        }
    }

    /// Full negamax of every position, reachable from the start or not: every position is
    /// queued for the book crate's [`propagate`], which evaluates children before parents, so
    /// each position is computed once from final child values (what Edax's `position_negamax`
    /// gives for the positions it reaches).
    pub fn full_negamax(&mut self) -> NegamaxStats {
        let ids: Vec<NodeId> = self.book.ids().collect();
        propagate(&mut self.book, &ids)
    }

    /// Incremental negamax: recompute the `seeds` and, wherever a value, bound or count changed,
    /// their ancestors (children before parents).
    pub fn propagate(&mut self, seeds: impl IntoIterator<Item = Board>) -> NegamaxStats {
        let ids: Vec<NodeId> = seeds
            .into_iter()
            .filter_map(|b| self.book.find(&b))
            .collect();
        propagate(&mut self.book, &ids)
    }

    /// Number of links over all positions.
    pub fn n_links(&self) -> usize {
        self.book.n_links()
    }

    /// Heap bytes held: the book (records, links, hash table, parent index) plus the side table.
    pub fn heap_bytes(&self) -> usize {
        self.book.heap_bytes() + self.sched.capacity() * std::mem::size_of::<Sched>()
    }
}

#[cfg(test)]
mod tests;
