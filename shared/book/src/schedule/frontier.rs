//! Incremental selection: the positions Edax's selectors would mark on the book as it is now,
//! kept up to date from the book's change journal instead of walking the whole window again.
//!
//! Each selector of a program that repeats until nothing changes (deviate, enhance, play,
//! extend, upgrade) is a walk from the root with a `done` memo, and whether it enters a child or
//! marks a position depends only on that position's own record (value, bounds, link scores,
//! leaf, level, empties) and on the walk's *state* there: for deviate the window's sign and the
//! side's allowed deviation (the two passes are two pairs of states), for upgrade the window's
//! sign, for the others nothing (see [`Selector`]). So what the walk visits is reachability in
//! the graph of (position, state) vertices whose edges are the links the walk follows, and the
//! marked positions are the visited ones whose own record passes the marking test.
//!
//! The book is a DAG (a move fills a square; a pass leads to a board with moves), so
//! reachability is kept by reference counting: every (position, state) counts the followed
//! in-edges from visited parents, and every visited (position, state) remembers which of its
//! links it counts. A change of a position's record recomputes its followed links and adjusts
//! its children's counts; a child whose count crosses zero is recomputed in turn. In a DAG this
//! is exact whatever the order; positions are processed parents first (more empties first), so
//! each is recomputed at most once per update.
//!
//! Invariants:
//! * after [`Frontier::update`] with every position the book journaled since the last update,
//!   the marked set equals what [`Frontier::rebuild`] computes from scratch (tested);
//! * it contains every position the serial selector marks on the same book
//!   ([`Selector::serial_marks`]); the two are equal unless a position is reachable at both
//!   parities (through PASS links), where Edax's `done` memo keeps only the first visit and the
//!   frontier keeps both: a superset, so "the frontier marks nothing" implies "Edax marks
//!   nothing";
//! * only a change of the root's value (the window's centre, for deviate and upgrade) or of the
//!   book's ids ([`MemBook::epoch`]) makes an update walk the whole window again.

use crate::mem::{MemBook, NodeId, child_board};
use crate::negamax::leaf_bounds;
use crate::research::{Upgrade, upgrade_mark};
use crate::select::{Deviate, DeviatePass, deviate_pass, enhance_mark, extend_mark, play_mark};
use bookfarm_engine::board::BitIter;
use bookfarm_engine::{Board, Move};
use std::collections::BinaryHeap;

/// A selector of a program that repeats until nothing changes, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// `book deviate REL ABS`: both passes (root side deviating, then the opponent) around the
    /// root's value.
    Deviate(Deviate),
    /// `book enhance` with the errors of the book's header.
    Enhance,
    /// `book play` (HEAD): reachable positions without links.
    Play,
    /// `book extend` (HEAD): reachable positions whose leaf is a best move.
    Extend,
    /// `book upgrade`: positions inside the error window whose level is below the upgrade
    /// level.
    Upgrade(Upgrade),
}

impl Selector {
    /// Walk states: deviate's four are (window sign, deviation) = (+, rel) → (−, 0) → … for the
    /// root side's pass and (+, 0) → (−, rel) → … for the opponent's; upgrade's two are the
    /// window's sign.
    fn states(self) -> usize {
        match self {
            Selector::Deviate(_) => 4,
            Selector::Upgrade(_) => 2,
            _ => 1,
        }
    }

    /// Whether the root is reached in state `j` (the walks start there).
    fn root_state(self, j: usize) -> bool {
        match self {
            Selector::Deviate(_) => j == 0 || j == 2,
            _ => j == 0,
        }
    }

    /// The state of a child reached from state `j`.
    fn next(self, j: usize) -> usize {
        match self {
            Selector::Deviate(_) => j ^ 1,
            Selector::Upgrade(_) => j ^ 1,
            _ => 0,
        }
    }

    /// Whether the window is centred on the root's value (a change of it moves every window).
    fn centred(self) -> bool {
        matches!(self, Selector::Deviate(_) | Selector::Upgrade(_))
    }

    /// Whether following a link reads the child's record (then a child's change recomputes its
    /// parents).
    fn reads_children(self) -> bool {
        matches!(self, Selector::Enhance)
    }

    /// The window `[lo, hi]` of state `j` around `centre`.
    fn window(self, j: usize, centre: i32) -> (i32, i32) {
        let half = match self {
            Selector::Deviate(d) => d.abs,
            Selector::Upgrade(u) => u.clamped().error,
            _ => return (i32::MIN, i32::MAX),
        };
        let (lo, hi) = (centre - half, centre + half);
        if j.is_multiple_of(2) {
            (lo, hi)
        } else {
            (-hi, -lo)
        }
    }

    /// Deviate's allowed deviation in state `j` (`value − score ≤ dev`).
    fn deviation(self, j: usize) -> i32 {
        match self {
            Selector::Deviate(d) => [d.rel, 0, 0, d.rel][j],
            _ => i32::MAX,
        }
    }

    /// The positions the serial (Edax-literal) selection marks on `book` as it is (negamaxed by
    /// the caller), from `root`: deviate's two passes around the root's value, enhance's,
    /// play's, extend's or upgrade's marking. A program of the asynchronous schedule is
    /// finished when this is empty.
    pub fn serial_marks(self, book: &MemBook, root: NodeId) -> Vec<NodeId> {
        match self {
            Selector::Deviate(d) => {
                let s = i32::from(book.score(root).value);
                let mut out = deviate_pass(book, root, d, s, DeviatePass::RootSide);
                out.extend(deviate_pass(book, root, d, s, DeviatePass::OpponentSide));
                out.sort_unstable();
                out.dedup();
                out
            }
            Selector::Enhance => enhance_mark(book, root),
            Selector::Play => play_mark(book, root),
            Selector::Extend => extend_mark(book, root),
            Selector::Upgrade(u) => upgrade_mark(book, root, u.clamped()),
        }
    }
}

/// What the frontier's updates cost so far (reported by the schedule).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrontierStats {
    /// Walks of the whole window (the first one, root value changes, id changes).
    pub rebuilds: u64,
    /// Positions recomputed by incremental updates.
    pub recomputed: u64,
}

/// The incremental marking of one selector from one root (see the module docs).
#[derive(Debug, Clone)]
pub struct Frontier {
    selector: Selector,
    root_board: Board,
    /// The root's id and the book epoch it was found in.
    root: Option<NodeId>,
    epoch: u64,
    /// The root value the windows are centred on.
    centre: i32,
    built: bool,
    ns: usize,
    /// Followed in-edges from visited parents, per (id, state).
    count: Vec<u32>,
    /// The links a visited (id, state) follows, as move bits (a square's bit; a position that
    /// must pass has only a PASS link, bit 0).
    follows: Vec<u64>,
    /// Marked positions (a bit per id).
    marked: Vec<u64>,
    n_marked: usize,
    /// Positions whose marking may have changed since the last [`Frontier::take_events`].
    events: Vec<NodeId>,
    /// Scratch: positions queued for recomputation (a bit per id).
    queued: Vec<u64>,
    stats: FrontierStats,
}

fn bit_of(mv: Move) -> u64 {
    match mv {
        Move::Square(s) => s.bit(),
        _ => 1,
    }
}

/// Parents first: more empties first; a position that must pass before its (same-empties)
/// child.
fn order_key(b: &Board) -> u8 {
    (b.empties() as u8) * 2 + u8::from(b.moves() == 0)
}

fn test_bit(bits: &[u64], i: usize) -> bool {
    bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

fn set_bit(bits: &mut Vec<u64>, i: usize, on: bool) {
    if bits.len() <= i / 64 {
        bits.resize(i / 64 + 1, 0);
    }
    if on {
        bits[i / 64] |= 1 << (i % 64);
    } else {
        bits[i / 64] &= !(1 << (i % 64));
    }
}

impl Frontier {
    /// An empty frontier of `selector` from the position of `root` (any orientation); the
    /// first [`Frontier::update`] builds it.
    pub fn new(selector: Selector, root: Board) -> Frontier {
        Frontier {
            selector,
            root_board: root,
            root: None,
            epoch: 0,
            centre: 0,
            built: false,
            ns: selector.states(),
            count: Vec::new(),
            follows: Vec::new(),
            marked: Vec::new(),
            n_marked: 0,
            events: Vec::new(),
            queued: Vec::new(),
            stats: FrontierStats::default(),
        }
    }

    /// The selector.
    pub fn selector(&self) -> Selector {
        self.selector
    }

    /// The root's id in the book as of the last update (`None`: not in the book).
    pub fn root(&self) -> Option<NodeId> {
        self.root
    }

    /// Whether `id` is marked.
    pub fn is_marked(&self, id: NodeId) -> bool {
        test_bit(&self.marked, id.index())
    }

    /// How many positions are marked.
    pub fn len(&self) -> usize {
        self.n_marked
    }

    /// Whether nothing is marked.
    pub fn is_empty(&self) -> bool {
        self.n_marked == 0
    }

    /// The marked positions, in id order.
    pub fn marked(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.marked.iter().enumerate().flat_map(|(w, &bits)| {
            BitIter(bits).map(move |s| NodeId((w * 64 + usize::from(s.index())) as u32))
        })
    }

    /// The positions whose marking changed since the last call (each once, in id order; read
    /// [`Frontier::is_marked`] for the state now). A position marked and unmarked again in
    /// between may be listed too.
    pub fn take_events(&mut self) -> Vec<NodeId> {
        let mut ev = std::mem::take(&mut self.events);
        ev.sort_unstable();
        ev.dedup();
        ev
    }

    /// What the updates cost so far.
    pub fn stats(&self) -> FrontierStats {
        self.stats
    }

    /// Bring the marking up to date after the positions `changed` (every position the book
    /// journaled since the last update) changed. Walks the whole window again only on the first
    /// call, when the root's value moved (deviate, upgrade), or when ids changed meaning.
    pub fn update(&mut self, book: &MemBook, changed: &[NodeId]) {
        let root = book.probe(&self.root_board);
        let centre = root.map_or(0, |r| i32::from(book.score(r).value));
        if !self.built
            || root != self.root
            || book.epoch() != self.epoch
            || (self.selector.centred() && centre != self.centre)
        {
            self.rebuild(book);
            return;
        }
        self.grow_to(book);
        let mut heap = BinaryHeap::new();
        for &id in changed {
            if !book.is_live(id) {
                continue;
            }
            self.enqueue(book, &mut heap, id);
            let fresh = self.count[id.index() * self.ns..(id.index() + 1) * self.ns]
                .iter()
                .all(|&c| c == 0);
            if self.selector.reads_children() || fresh {
                // A new position may be the child of links that did not count it (its
                // parents' dangling links), and enhance's parents read its bounds.
                let parents: Vec<NodeId> = book.parents(id).collect();
                for p in parents {
                    self.enqueue(book, &mut heap, p);
                }
            }
        }
        self.drain(book, heap);
    }

    /// How far `id` (marked) is from the principal lines, lower first: in the state where it
    /// is marked closest to them, twice the distance of its value from the window's centre
    /// (the root's value, negated at the opponent's parity) plus how much its leaf gives up
    /// against its value. The principal variation's positions are 0: their expansions move
    /// the root's value, and with it every window, so doing them first leaves fewer
    /// positions expanded under a window that later moves. 0 for selectors without a window.
    pub fn relevance(&self, book: &MemBook, id: NodeId) -> u32 {
        if !self.selector.centred() || id.index() * self.ns >= self.count.len() {
            return 0;
        }
        let value = i32::from(book.score(id).value);
        let leaf = i32::from(book.leaf(id).score);
        (0..self.ns)
            .filter(|&j| self.reached(id, j) && self.open(book, id, j) && self.marks(book, id, j))
            .map(|j| {
                let centre = if j % 2 == 0 {
                    self.centre
                } else {
                    -self.centre
                };
                (2 * (value - centre).abs() + (value - leaf).max(0)) as u32
            })
            .min()
            .unwrap_or(u32::MAX / 2)
    }

    /// The root value the windows are centred on.
    pub fn centre(&self) -> i32 {
        self.centre
    }

    /// Recompute the marking from scratch (the window's walk from the root).
    pub fn rebuild(&mut self, book: &MemBook) {
        self.stats.rebuilds += 1;
        let before = std::mem::take(&mut self.marked);
        self.n_marked = 0;
        self.count.clear();
        self.follows.clear();
        self.queued.clear();
        self.root = book.probe(&self.root_board);
        self.epoch = book.epoch();
        self.centre = self.root.map_or(0, |r| i32::from(book.score(r).value));
        self.built = true;
        self.grow_to(book);
        if !book.has_parent_index() {
            // Parents are read by incremental updates; the book keeps the index current.
            debug_assert!(false, "the frontier needs the book's parent index");
        }
        if let Some(r) = self.root {
            let mut heap = BinaryHeap::new();
            self.enqueue(book, &mut heap, r);
            self.drain(book, heap);
        }
        let words = before.len().max(self.marked.len());
        for w in 0..words {
            let old = before.get(w).copied().unwrap_or(0);
            let new = self.marked.get(w).copied().unwrap_or(0);
            for s in BitIter(old ^ new) {
                self.events
                    .push(NodeId((w * 64 + usize::from(s.index())) as u32));
            }
        }
    }

    fn grow_to(&mut self, book: &MemBook) {
        let n = book.id_bound();
        if self.count.len() < n * self.ns {
            self.count.resize(n * self.ns, 0);
            self.follows.resize(n * self.ns, 0);
        }
        let words = n.div_ceil(64);
        if self.marked.len() < words {
            self.marked.resize(words, 0);
        }
        if self.queued.len() < words {
            self.queued.resize(words, 0);
        }
    }

    fn enqueue(&mut self, book: &MemBook, heap: &mut BinaryHeap<(u8, u32)>, id: NodeId) {
        if !test_bit(&self.queued, id.index()) {
            set_bit(&mut self.queued, id.index(), true);
            heap.push((order_key(&book.board(id)), id.0));
        }
    }

    fn drain(&mut self, book: &MemBook, mut heap: BinaryHeap<(u8, u32)>) {
        while let Some((_, raw)) = heap.pop() {
            let id = NodeId(raw);
            set_bit(&mut self.queued, id.index(), false);
            self.recompute(book, id, &mut heap);
        }
    }

    fn reached(&self, id: NodeId, j: usize) -> bool {
        (Some(id) == self.root && self.selector.root_state(j))
            || self.count[id.index() * self.ns + j] > 0
    }

    /// Whether the walk enters `id` in state `j` once it reaches it.
    fn open(&self, book: &MemBook, id: NodeId, j: usize) -> bool {
        let b = book.board(id);
        let inside = (b.empties() as i32) >= book.header().n_empties && !b.is_game_over();
        match self.selector {
            Selector::Deviate(_) => {
                let (lo, hi) = self.selector.window(j, self.centre);
                inside && (lo..=hi).contains(&i32::from(book.score(id).value))
            }
            Selector::Upgrade(_) => {
                let (lo, hi) = self.selector.window(j, self.centre);
                (lo..=hi).contains(&i32::from(book.score(id).value))
            }
            Selector::Enhance | Selector::Play | Selector::Extend => inside,
        }
    }

    /// The links the walk follows from `id` in state `j` (entered), as move bits, children in
    /// the book only.
    fn followed(&self, book: &MemBook, id: NodeId, j: usize) -> u64 {
        let board = book.board(id);
        let value = i32::from(book.score(id).value);
        let (lo, hi) = self.selector.window(j, self.centre);
        let dev = self.selector.deviation(j);
        let s = book.score(id);
        let mut bits = 0u64;
        for l in book.links(id) {
            let score = i32::from(l.score);
            let take = match self.selector {
                Selector::Deviate(_) => value - score <= dev && (lo..=hi).contains(&score),
                Selector::Upgrade(_) => (lo..=hi).contains(&score),
                Selector::Play | Selector::Extend | Selector::Enhance => true,
            };
            if !take {
                continue;
            }
            let Some(c) = book.find(&child_board(&board, l.mv)) else {
                continue;
            };
            if let Selector::Enhance = self.selector {
                let cs = book.score(c);
                if !(-i32::from(cs.upper) >= i32::from(s.lower)
                    || -i32::from(cs.lower) >= i32::from(s.upper))
                {
                    continue;
                }
            }
            bits |= bit_of(l.mv);
        }
        bits
    }

    /// Whether an entered `id` is marked in state `j`.
    fn marks(&self, book: &MemBook, id: NodeId, j: usize) -> bool {
        let leaf = book.leaf(id);
        let s = book.score(id);
        match self.selector {
            Selector::Deviate(_) => {
                let (lo, hi) = self.selector.window(j, self.centre);
                let score = i32::from(leaf.score);
                i32::from(s.value) - score <= self.selector.deviation(j)
                    && (lo..=hi).contains(&score)
            }
            Selector::Upgrade(u) => {
                let (lo, hi) = self.selector.window(j, self.centre);
                book.level(id) < u.clamped().level
                    && leaf.mv != Move::None
                    && (lo..=hi).contains(&i32::from(leaf.score))
            }
            Selector::Enhance => leaf_bounds(book, id)
                .is_some_and(|(lo, up)| lo >= i32::from(s.lower) || up >= i32::from(s.upper)),
            Selector::Play => book.n_link(id) == 0,
            Selector::Extend => i16::from(leaf.score) >= s.value,
        }
    }

    /// The child of `id` through the link of move bit `bit`.
    fn child_of_bit(book: &MemBook, board: &Board, bit: u64) -> Option<NodeId> {
        let mv = if board.moves() == 0 {
            Move::Pass
        } else {
            Move::Square(bookfarm_engine::Square::new(bit.trailing_zeros() as u8)?)
        };
        book.find(&child_board(board, mv))
    }

    fn recompute(&mut self, book: &MemBook, id: NodeId, heap: &mut BinaryHeap<(u8, u32)>) {
        self.stats.recomputed += 1;
        let board = book.board(id);
        let mut mark = false;
        for j in 0..self.ns {
            let entered = self.reached(id, j) && self.open(book, id, j);
            let new = if entered {
                self.followed(book, id, j)
            } else {
                0
            };
            mark |= entered && self.marks(book, id, j);
            let k = id.index() * self.ns + j;
            let old = self.follows[k];
            if new == old {
                continue;
            }
            self.follows[k] = new;
            let next = self.selector.next(j);
            for s in BitIter(old & !new) {
                if let Some(c) = Self::child_of_bit(book, &board, 1 << s.index()) {
                    let ck = c.index() * self.ns + next;
                    self.count[ck] = self.count[ck].saturating_sub(1);
                    if self.count[ck] == 0 {
                        self.enqueue(book, heap, c);
                    }
                }
            }
            for s in BitIter(new & !old) {
                if let Some(c) = Self::child_of_bit(book, &board, 1 << s.index()) {
                    self.grow_to(book);
                    let ck = c.index() * self.ns + next;
                    self.count[ck] += 1;
                    if self.count[ck] == 1 {
                        self.enqueue(book, heap, c);
                    }
                }
            }
        }
        if mark != self.is_marked(id) {
            set_bit(&mut self.marked, id.index(), mark);
            if mark {
                self.n_marked += 1;
            } else {
                self.n_marked -= 1;
            }
            self.events.push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Link, Position};
    use crate::negamax::{link_position, renegamax};
    use crate::synth::{Draw, SplitMix64, SynthParams, random_book, random_leaf};
    use bookfarm_engine::symmetry::canonical;
    use rand::SeedableRng;
    use std::collections::BTreeSet;

    fn selectors() -> Vec<Selector> {
        vec![
            Selector::Deviate(Deviate::new(2, 4)),
            Selector::Deviate(Deviate::new(0, 2)),
            Selector::Enhance,
            Selector::Play,
            Selector::Extend,
            Selector::Upgrade(Upgrade {
                level: 30,
                error: 3,
            }),
        ]
    }

    /// Scores close to each other (−6..=6), so that deviate's and upgrade's windows hold
    /// much of the book.
    fn narrow(book: &mut MemBook, rng: &mut SplitMix64) {
        let ids: Vec<NodeId> = book.ids().collect();
        for id in ids {
            let leaf = book.leaf(id);
            if leaf.mv != Move::None && leaf.score > -64 {
                book.set_leaf(id, Link::new(rng.below(13) as i8 - 6, leaf.mv));
            }
        }
    }

    /// One growth-like mutation: a new leaf, a new level, or a new position below a random
    /// one (linked to its book children, then linked from its parent).
    fn mutate(book: &mut MemBook, rng: &mut SplitMix64) {
        let ids: Vec<NodeId> = book.ids().collect();
        let id = ids[rng.below(ids.len() as u64) as usize];
        match rng.below(3) {
            0 => {
                random_leaf(book, id, rng);
                let leaf = book.leaf(id);
                if leaf.mv != Move::None && leaf.score > -64 {
                    book.set_leaf(id, Link::new(rng.below(13) as i8 - 6, leaf.mv));
                }
            }
            1 => book.set_level(id, rng.below(61) as u8),
            _ => {
                let b = book.board(id);
                let moves = b.moves();
                if moves == 0 {
                    return;
                }
                let k = rng.below(u64::from(moves.count_ones())) as usize;
                let Some(sq) = BitIter(moves).nth(k) else {
                    return;
                };
                let c = canonical(&b.next_unchecked(Move::Square(sq))).0;
                if book.find(&c).is_none() {
                    let cid = book
                        .insert_new(&Position::new(c, rng.below(61) as u8))
                        .expect("new position");
                    random_leaf(book, cid, rng);
                    link_position(book, cid);
                }
                link_position(book, id);
            }
        }
    }

    fn marked(f: &Frontier) -> BTreeSet<NodeId> {
        f.marked().collect()
    }

    fn has_pass_links(book: &MemBook) -> bool {
        book.ids()
            .any(|id| book.links(id).any(|l| l.mv == Move::Pass))
    }

    /// After growth-like mutations and incremental negamax, the incremental marking equals a
    /// rebuild from scratch and contains the serial selector's marks (equal to them without
    /// PASS links); the events name every position whose marking changed.
    #[test]
    fn incremental_marking_equals_a_rebuild_and_the_serial_selection() {
        let mut incremental_rounds = 0;
        for seed in 1..=6u64 {
            for sel in selectors() {
                let mut rng = SplitMix64::seed_from_u64(seed * 31 + 5);
                let mut book = random_book(SynthParams {
                    seed,
                    positions: 400,
                    plies: 11,
                    level: None,
                });
                narrow(&mut book, &mut rng);
                book.build_parent_index();
                book.track_selection();
                let root = book.find(&Board::start()).expect("start position");
                renegamax(&mut book, root);
                let mut f = Frontier::new(sel, Board::start());
                let ch = book.take_selection_changes();
                f.update(&book, &ch);
                f.take_events();
                for round in 0..25 {
                    let before = marked(&f);
                    for _ in 0..1 + rng.below(3) {
                        mutate(&mut book, &mut rng);
                    }
                    renegamax(&mut book, root);
                    let rebuilds = f.stats().rebuilds;
                    let ch = book.take_selection_changes();
                    f.update(&book, &ch);
                    incremental_rounds += usize::from(f.stats().rebuilds == rebuilds);
                    let mut fresh = Frontier::new(sel, Board::start());
                    fresh.rebuild(&book);
                    let now = marked(&f);
                    assert_eq!(now, marked(&fresh), "seed {seed} {sel:?} round {round}");
                    assert_eq!(now.len(), f.len());
                    let serial: BTreeSet<NodeId> =
                        sel.serial_marks(&book, root).into_iter().collect();
                    assert!(
                        serial.is_subset(&now),
                        "seed {seed} {sel:?} round {round}: serial marks outside the frontier"
                    );
                    if !has_pass_links(&book) {
                        assert_eq!(serial, now, "seed {seed} {sel:?} round {round}");
                    }
                    let events: BTreeSet<NodeId> = f.take_events().into_iter().collect();
                    let flipped: BTreeSet<NodeId> =
                        before.symmetric_difference(&now).copied().collect();
                    assert!(
                        flipped.is_subset(&events),
                        "seed {seed} {sel:?} round {round}"
                    );
                }
            }
        }
        // Most rounds did not move the root's value: the incremental path was exercised.
        assert!(incremental_rounds > 300, "{incremental_rounds}");
    }
}
