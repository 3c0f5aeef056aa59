//! The coordinator's in-memory book: every position keyed by its canonical board, a
//! child→parents index, and Edax's negamax (edax-spec §4.1) both as a full recompute and as an
//! incremental propagation from changed positions to their ancestors.
//!
//! The store (sled) is the source of truth for boards, links, leaves and levels; values, bounds
//! and counts are derived here (a full recompute runs when the store is opened) and kept current
//! incrementally as results land. Invariant (tested): after any sequence of changes followed by
//! [`BookIndex::propagate`], every position equals what [`BookIndex::full_negamax`] computes.

use bookfarm_book::model::{BAD_LINK, BookHeader, Link, Position};
use bookfarm_engine::level::{NO_SELECTIVITY, level_params};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One book position plus the coordinator's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The Edax position (canonical board, leaf, links, derived values).
    pub pos: Position,
    /// A leaf search for this position is queued or in flight; its leaf is provisional.
    pub pending: bool,
    /// Incremented whenever the links (hence the excluded set of its leaf search) change; a
    /// result computed for another version is stale.
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
        self.pos
            .links
            .iter()
            .filter_map(|l| match l.mv {
                Move::Square(s) => Some(s.bit()),
                _ => None,
            })
            .fold(0, |a, b| a | b)
    }
}

/// The canonical board reached from `board` by `mv` (a pass swaps sides).
pub fn child_board(board: &Board, mv: Move) -> Board {
    canonical(&board.next_unchecked(mv)).0
}

/// Derived negamax fields of one position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Derived {
    value: i16,
    lower: i16,
    upper: i16,
    wins: u32,
    draws: u32,
    losses: u32,
    lines: u32,
}

impl Derived {
    fn of(p: &Position) -> Derived {
        Derived {
            value: p.value,
            lower: p.lower,
            upper: p.upper,
            wins: p.n_wins,
            draws: p.n_draws,
            losses: p.n_losses,
            lines: p.n_lines,
        }
    }
}

/// `(lower, upper)` of a leaf as Edax's negamax computes it: exact for a solved leaf, ± endcut for
/// a selective endgame leaf, ± midgame error with the depth/empties parity bias otherwise.
pub fn leaf_bounds(header: &BookHeader, board: &Board, level: u8, score: i32) -> (i32, i32) {
    let e = board.empties();
    let (d, sel) = level_params(level, e);
    let bias = (d & 1) as i32 - (e & 1) as i32;
    if d == e && sel == NO_SELECTIVITY {
        (score, score)
    } else if d == e {
        (score - header.endcut_error, score + header.endcut_error)
    } else {
        (
            score - header.midgame_error - bias,
            score + header.midgame_error - bias,
        )
    }
}

fn to_i16(v: i32) -> i16 {
    i16::try_from(v).unwrap_or(if v < 0 { i16::MIN } else { i16::MAX })
}

/// The in-memory book.
#[derive(Debug, Clone)]
pub struct BookIndex {
    /// The book header (level, depth, errors).
    pub header: BookHeader,
    entries: HashMap<Board, Entry>,
    /// child → parents that hold a link to it (one entry per parent).
    parents: HashMap<Board, Vec<Board>>,
}

impl BookIndex {
    /// An empty book with `header`.
    pub fn new(header: BookHeader) -> BookIndex {
        BookIndex {
            header,
            entries: HashMap::new(),
            parents: HashMap::new(),
        }
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the book has no position.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of a canonical board.
    pub fn get(&self, board: &Board) -> Option<&Entry> {
        self.entries.get(board)
    }

    /// Mutable access to an entry. Callers that change links must use [`BookIndex::add_link`]
    /// so that the parents index stays right.
    pub fn get_mut(&mut self, board: &Board) -> Option<&mut Entry> {
        self.entries.get_mut(board)
    }

    /// Whether the canonical board is in the book.
    pub fn contains(&self, board: &Board) -> bool {
        self.entries.contains_key(board)
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// Insert (or replace) an entry; its links are added to the parents index.
    pub fn insert(&mut self, entry: Entry) {
        let b = entry.pos.board;
        if let Some(old) = self.entries.get(&b) {
            let old_children: Vec<Board> = old
                .pos
                .links
                .iter()
                .map(|l| child_board(&b, l.mv))
                .collect();
            for c in old_children {
                if let Some(ps) = self.parents.get_mut(&c) {
                    ps.retain(|p| *p != b);
                }
            }
        }
        for l in &entry.pos.links {
            self.add_parent(child_board(&b, l.mv), b);
        }
        self.entries.insert(b, entry);
    }

    fn add_parent(&mut self, child: Board, parent: Board) {
        let ps = self.parents.entry(child).or_default();
        if !ps.contains(&parent) {
            ps.push(parent);
        }
    }

    /// Add a link to `parent` as Edax's `add_link` does: an existing link with the same move gets
    /// the new score; otherwise the link is appended, the value raised to the link score, and the
    /// leaf cleared when it was the same move. Returns true when a link was added.
    pub fn add_link(&mut self, parent: &Board, link: Link) -> bool {
        let Some(e) = self.entries.get_mut(parent) else {
            return false;
        };
        if let Some(l) = e.pos.links.iter_mut().find(|l| l.mv == link.mv) {
            l.score = link.score;
            return false;
        }
        e.pos.links.push(link);
        e.pos.value = e.pos.value.max(i16::from(link.score));
        if e.pos.leaf.mv == link.mv {
            e.pos.leaf = BAD_LINK;
        }
        e.version = e.version.wrapping_add(1);
        let child = child_board(parent, link.mv);
        self.add_parent(child, *parent);
        true
    }

    /// Edax's `position_link` for a new position: link every legal move (increasing square
    /// order) whose child is in the book, or the pass when the side must pass.
    pub fn link_children(&mut self, board: &Board) {
        let mut links = Vec::new();
        if board.moves() != 0 {
            for s in board.legal_squares() {
                let mv = Move::Square(s);
                if let Some(c) = self.entries.get(&child_board(board, mv)) {
                    links.push(Link::new(to_i8(-i32::from(c.pos.value)), mv));
                }
            }
        } else if board.must_pass()
            && let Some(c) = self.entries.get(&child_board(board, Move::Pass))
        {
            links.push(Link::new(to_i8(-i32::from(c.pos.value)), Move::Pass));
        }
        for l in links {
            self.add_link(board, l);
        }
    }

    /// Parents holding a link to `board`.
    pub fn parents(&self, board: &Board) -> &[Board] {
        self.parents.get(board).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Recompute one position from its leaf and its children's current values; returns true
    /// when a value, bound or count changed (link score updates alone do not count).
    fn recompute(&mut self, board: &Board) -> bool {
        let Some(e) = self.entries.get(board) else {
            return false;
        };
        let p = &e.pos;
        let (mut value, mut lower, mut upper) = (-127i32, -127i32, -127i32);
        let (mut w, mut d, mut l, mut n) = (0u64, 0u64, 0u64, 0u64);
        if p.leaf.score > -127 {
            let s = i32::from(p.leaf.score);
            value = s;
            let (lo, up) = leaf_bounds(&self.header, &p.board, p.level, s);
            lower = lo;
            upper = up;
            let (dd, sel) = level_params(p.level, p.board.empties());
            if dd == p.board.empties() && sel == NO_SELECTIVITY {
                match s.signum() {
                    1 => w += 1,
                    -1 => l += 1,
                    _ => d += 1,
                }
            }
            n += 1;
        }
        let mut link_scores = Vec::with_capacity(p.links.len());
        for link in &p.links {
            let Some(c) = self.entries.get(&child_board(board, link.mv)) else {
                // An inconsistent book (missing child): the link keeps its stored score.
                link_scores.push(link.score);
                value = value.max(i32::from(link.score));
                continue;
            };
            let c = &c.pos;
            let ls = to_i8(-i32::from(c.value));
            link_scores.push(ls);
            value = value.max(i32::from(ls));
            lower = lower.max(-i32::from(c.upper));
            upper = upper.max(-i32::from(c.lower));
            w += u64::from(c.n_losses);
            d += u64::from(c.n_draws);
            l += u64::from(c.n_wins);
            n += u64::from(c.n_lines);
        }
        let sat = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
        let new = Derived {
            value: to_i16(value),
            lower: to_i16(lower),
            upper: to_i16(upper),
            wins: sat(w),
            draws: sat(d),
            losses: sat(l),
            lines: sat(n),
        };
        let e = self.entries.get_mut(board).expect("entry checked above");
        let old = Derived::of(&e.pos);
        for (link, s) in e.pos.links.iter_mut().zip(link_scores) {
            link.score = s;
        }
        let p = &mut e.pos;
        p.value = new.value;
        p.lower = new.lower;
        p.upper = new.upper;
        p.n_wins = new.wins;
        p.n_draws = new.draws;
        p.n_losses = new.losses;
        p.n_lines = new.lines;
        old != new
    }

    /// Full negamax of every position (children before parents, each computed once).
    pub fn full_negamax(&mut self) {
        let mut boards: Vec<Board> = self.entries.keys().copied().collect();
        boards.sort_by_key(|b| (b.empties(), *b));
        let mut done = HashSet::with_capacity(boards.len());
        for b in boards {
            self.negamax_rec(b, &mut done);
        }
    }

    fn negamax_rec(&mut self, b: Board, done: &mut HashSet<Board>) {
        if !done.insert(b) {
            return;
        }
        let children: Vec<Board> = match self.entries.get(&b) {
            Some(e) => e.pos.links.iter().map(|l| child_board(&b, l.mv)).collect(),
            None => return,
        };
        for c in children {
            self.negamax_rec(c, done);
        }
        self.recompute(&b);
    }

    /// Incremental negamax: recompute the `seeds` and, wherever a value, bound or count changed,
    /// their ancestors (fewest empties first, so most positions are recomputed once). Returns
    /// every position recomputed.
    pub fn propagate(&mut self, seeds: impl IntoIterator<Item = Board>) -> Vec<Board> {
        let mut work: BTreeSet<(u32, Board)> = seeds
            .into_iter()
            .filter(|b| self.entries.contains_key(b))
            .map(|b| (b.empties(), b))
            .collect();
        let mut touched = Vec::new();
        while let Some((_, b)) = work.pop_first() {
            touched.push(b);
            if self.recompute(&b) {
                for &p in self.parents(&b) {
                    work.insert((p.empties(), p));
                }
            }
        }
        touched
    }

    /// Number of links over all positions.
    pub fn n_links(&self) -> usize {
        self.entries.values().map(|e| e.pos.links.len()).sum()
    }
}

/// Clamp to a link score byte.
pub fn to_i8(v: i32) -> i8 {
    i8::try_from(v.clamp(-127, 127)).expect("clamped to the i8 range")
}

#[cfg(test)]
mod tests;
