//! [`MemBook`]: the compact in-memory book.
//!
//! Layout (designed for millions of positions):
//! * `nodes`: one fixed-size 48-byte record per position, in insertion order (Edax keeps file
//!   order inside a hash bucket, and the writer needs it). Removed positions become tombstones and
//!   are compacted away once they are the majority, so ids stay stable between compactions.
//! * `links`: one shared arena of 2-byte links; a node holds the offset of its run. A node whose
//!   link list grows is moved to the end of the arena; the holes are compacted later.
//! * `table`: a hash table of `u32` node ids (the board is not duplicated in the table).
//! * `parents`: the optional child→parents index used by incremental negamax, built on first
//!   use and then maintained by every mutation.

use crate::model::{BAD_LINK, BookHeader, Link, Position};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use hashbrown::HashTable;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifier of a position inside one [`MemBook`]; stable until [`MemBook::compact`] (which runs
/// by itself when removed positions outnumber live ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A link as stored in the arena: the two file bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RawLink {
    score: i8,
    code: u8,
}

impl RawLink {
    const fn from_link(l: Link) -> RawLink {
        RawLink {
            score: l.score,
            code: l.mv.code(),
        }
    }

    fn to_link(self) -> Link {
        // Invariant: only valid codes (0..=65) are stored, see `from_link`.
        let mv = Move::from_code(self.code).unwrap_or(Move::None);
        Link {
            score: self.score,
            mv,
        }
    }
}

/// One state of one book: equal revisions mean the same book with no change in between, so
/// whatever was computed from a book (a cache of the explorer, an encoded file) stays valid
/// while [`MemBook::revision`] returns the same value. Every book value (every
/// [`MemBook::new`], every clone) has its own identity, so two books never share a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision {
    /// The book value's identity (process-wide counter).
    book: u64,
    /// Changes made to it since it was created.
    changes: u64,
}

/// Identities of book values (see [`Revision`]).
static NEXT_BOOK: AtomicU64 = AtomicU64::new(1);

/// The revision counter of one book value; a clone is a new book value with its own identity.
#[derive(Debug)]
struct RevisionCounter(Revision);

impl RevisionCounter {
    fn fresh() -> RevisionCounter {
        RevisionCounter(Revision {
            book: NEXT_BOOK.fetch_add(1, Ordering::Relaxed),
            changes: 0,
        })
    }

    fn bump(&mut self) {
        self.0.changes += 1;
    }
}

impl Clone for RevisionCounter {
    fn clone(&self) -> RevisionCounter {
        RevisionCounter::fresh()
    }
}

/// Level value marking a removed node.
const DEAD: u8 = u8::MAX;
const NONE: u32 = u32::MAX;

/// One position record (48 bytes).
#[derive(Debug, Clone, Copy)]
struct Node {
    board: Board,
    /// n_wins, n_draws, n_losses, n_lines.
    counts: [u32; 4],
    links_at: u32,
    value: i16,
    lower: i16,
    upper: i16,
    leaf: RawLink,
    n_link: u8,
    level: u8,
}

/// Game statistics of a position: wins, draws, losses and lines below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Won full games.
    pub n_wins: u32,
    /// Drawn full games.
    pub n_draws: u32,
    /// Lost full games.
    pub n_losses: u32,
    /// Lines.
    pub n_lines: u32,
}

/// Negamax score of a position with its error bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Score {
    /// Value.
    pub value: i16,
    /// Lower bound.
    pub lower: i16,
    /// Upper bound.
    pub upper: i16,
}

/// Hash of a canonical board for the in-memory table (not Edax's bucket hash).
#[inline]
pub(crate) fn table_hash(b: &Board) -> u64 {
    let x = u128::from(b.player ^ 0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(u128::from(b.opponent ^ 0xc2b2_ae3d_27d4_eb4f));
    let h = (x as u64) ^ ((x >> 64) as u64);
    h ^ b.player.rotate_left(23) ^ b.opponent.wrapping_mul(0xff51_afd7_ed55_8ccd)
}

/// The canonical board reached by playing `mv` on `board` (Edax's `board_next` then `board_unique`).
#[inline]
pub fn child_board(board: &Board, mv: Move) -> Board {
    canonical(&board.next_unchecked(mv)).0
}

/// Child→parents index: for each node, the list of (parent, link) edges pointing at it, as
/// intrusive singly linked lists in one edge arena. A parent with several links to one child
/// (symmetric moves) appears once per link. Links whose child is not in the book are kept in
/// `dangling`, keyed by the child board, and attached when that child is inserted.
#[derive(Debug, Clone, Default)]
struct ParentIndex {
    head: Vec<u32>,
    /// (parent id, next edge).
    edges: Vec<(u32, u32)>,
    free: u32,
    dangling: HashMap<Board, Vec<u32>>,
}

impl ParentIndex {
    fn new(n_nodes: usize) -> ParentIndex {
        ParentIndex {
            head: vec![NONE; n_nodes],
            edges: Vec::new(),
            free: NONE,
            dangling: HashMap::new(),
        }
    }

    fn ensure_node(&mut self, id: u32) {
        let need = id as usize + 1;
        if self.head.len() < need {
            self.head.resize(need, NONE);
        }
    }

    fn add(&mut self, child: u32, parent: u32) {
        self.ensure_node(child);
        let e = if self.free != NONE {
            let e = self.free;
            self.free = self.edges[e as usize].1;
            self.edges[e as usize] = (parent, self.head[child as usize]);
            e
        } else {
            self.edges.push((parent, self.head[child as usize]));
            (self.edges.len() - 1) as u32
        };
        self.head[child as usize] = e;
    }

    /// Remove one edge child→parent (if present).
    fn remove(&mut self, child: u32, parent: u32) {
        let Some(&h) = self.head.get(child as usize) else {
            return;
        };
        let mut prev = NONE;
        let mut e = h;
        while e != NONE {
            let (p, next) = self.edges[e as usize];
            if p == parent {
                if prev == NONE {
                    self.head[child as usize] = next;
                } else {
                    self.edges[prev as usize].1 = next;
                }
                self.edges[e as usize] = (NONE, self.free);
                self.free = e;
                return;
            }
            prev = e;
            e = next;
        }
    }

    /// Detach and return every parent of `child`.
    fn take_parents(&mut self, child: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let Some(h) = self.head.get_mut(child as usize) else {
            return out;
        };
        let mut e = std::mem::replace(h, NONE);
        while e != NONE {
            let (p, next) = self.edges[e as usize];
            out.push(p);
            self.edges[e as usize] = (NONE, self.free);
            self.free = e;
            e = next;
        }
        out
    }

    fn parents(&self, child: u32) -> ParentIter<'_> {
        ParentIter {
            index: self,
            edge: self.head.get(child as usize).copied().unwrap_or(NONE),
        }
    }

    fn add_dangling(&mut self, child: Board, parent: u32) {
        self.dangling.entry(child).or_default().push(parent);
    }

    fn remove_dangling(&mut self, child: &Board, parent: u32) {
        if let Some(v) = self.dangling.get_mut(child) {
            if let Some(i) = v.iter().position(|&p| p == parent) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.dangling.remove(child);
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        self.head.capacity() * 4 + self.edges.capacity() * 8 + self.dangling.len() * 48
    }
}

struct ParentIter<'a> {
    index: &'a ParentIndex,
    edge: u32,
}

impl Iterator for ParentIter<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        if self.edge == NONE {
            return None;
        }
        let (p, next) = self.index.edges[self.edge as usize];
        self.edge = next;
        Some(p)
    }
}

/// The in-memory book: header plus positions keyed by canonical board (see the module docs for
/// the layout). Iteration order is insertion order, which for a book read from a file is file
/// order.
#[derive(Clone)]
pub struct MemBook {
    header: BookHeader,
    nodes: Vec<Node>,
    links: Vec<RawLink>,
    table: HashTable<u32>,
    live: usize,
    dead_links: usize,
    parents: Option<ParentIndex>,
    /// Positions changed since the last [`MemBook::take_changed`], when tracking is on.
    changed: Option<ChangeLog>,
    /// Positions changed since the last [`MemBook::take_selection_changes`], when tracking is
    /// on (a second journal: the asynchronous schedule's incremental selection reads it while
    /// checkpoints read the first).
    selection: Option<ChangeLog>,
    /// Bumped whenever node ids may have changed meaning (a removal or a compaction), so that
    /// caches keyed by id know to rebuild.
    epoch: u64,
    /// What [`crate::negamax::renegamax`] kept from its last run, while still valid.
    negamax_memo: Option<NegamaxMemo>,
    /// Bumped by every change (see [`Revision`]).
    revision: RevisionCounter,
}

/// The state incremental negamax keeps between runs from one root: the positions the root
/// reaches (as of the last run) and every position touched since. Invariant: while the memo
/// exists, every position the root reached at the last run held the result a full negamax
/// gives, except positions journaled in `dirty`; mutations that break this without touching a
/// position (removal, compaction, a header change) drop the memo.
#[derive(Clone)]
pub(crate) struct NegamaxMemo {
    pub(crate) root: NodeId,
    /// A bit per node id: reached by the last run.
    pub(crate) reach: Vec<u64>,
    pub(crate) dirty: ChangeLog,
}

/// The change journal: a bit per node id and the ids in first-change order.
#[derive(Clone, Default)]
pub(crate) struct ChangeLog {
    seen: Vec<u64>,
    pub(crate) ids: Vec<NodeId>,
}

impl ChangeLog {
    fn mark(&mut self, id: NodeId) {
        let (w, b) = (id.index() / 64, 1u64 << (id.index() % 64));
        if self.seen.len() <= w {
            self.seen.resize(w + 1, 0);
        }
        if self.seen[w] & b == 0 {
            self.seen[w] |= b;
            self.ids.push(id);
        }
    }
}

impl std::fmt::Debug for MemBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemBook")
            .field("header", &self.header)
            .field("positions", &self.live)
            .field("links", &(self.links.len() - self.dead_links))
            .finish_non_exhaustive()
    }
}

impl Default for MemBook {
    fn default() -> MemBook {
        MemBook::new(BookHeader::default())
    }
}

impl MemBook {
    /// An empty book with `header`.
    pub fn new(header: BookHeader) -> MemBook {
        MemBook::with_capacity(header, 0, 0)
    }

    /// An empty book with room for `positions` positions and `links` links.
    pub fn with_capacity(header: BookHeader, positions: usize, links: usize) -> MemBook {
        MemBook {
            header,
            nodes: Vec::with_capacity(positions),
            links: Vec::with_capacity(links),
            table: HashTable::with_capacity(positions),
            live: 0,
            dead_links: 0,
            parents: None,
            changed: None,
            selection: None,
            epoch: 0,
            negamax_memo: None,
            revision: RevisionCounter::fresh(),
        }
    }

    /// The book's current revision: it changes with every change of a position, a link, the
    /// header or the set of positions, and only then.
    pub fn revision(&self) -> Revision {
        self.revision.0
    }

    /// Start recording which positions change (see [`MemBook::take_changed`]).
    pub fn track_changes(&mut self) {
        self.changed.get_or_insert_with(ChangeLog::default);
    }

    /// The positions added or modified since tracking started or since the last call, in
    /// first-change order (each once). Removals are not journaled (callers that track changes
    /// never remove). Empty when tracking is off.
    pub fn take_changed(&mut self) -> Vec<NodeId> {
        match &mut self.changed {
            Some(log) => {
                log.seen.iter_mut().for_each(|w| *w = 0);
                std::mem::take(&mut log.ids)
            }
            None => Vec::new(),
        }
    }

    /// Start the second change journal (see [`MemBook::take_selection_changes`]).
    pub fn track_selection(&mut self) {
        self.selection.get_or_insert_with(ChangeLog::default);
    }

    /// The positions added or modified since [`MemBook::track_selection`] or since the last
    /// call, in first-change order (each once): [`MemBook::take_changed`]'s journal, kept
    /// apart so that its two readers (checkpoints and incremental selection) do not take each
    /// other's entries. Empty when tracking is off.
    pub fn take_selection_changes(&mut self) -> Vec<NodeId> {
        match &mut self.selection {
            Some(log) => {
                log.seen.iter_mut().for_each(|w| *w = 0);
                std::mem::take(&mut log.ids)
            }
            None => Vec::new(),
        }
    }

    /// A number that changes whenever a node id may stop naming the position it named (a
    /// removal, a compaction): caches keyed by [`NodeId`] rebuild when it moves.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Record a change of `id` in the journal (no-op when tracking is off).
    fn touch(&mut self, id: NodeId) {
        self.revision.bump();
        if let Some(log) = &mut self.changed {
            log.mark(id);
        }
        if let Some(log) = &mut self.selection {
            log.mark(id);
        }
        if let Some(memo) = &mut self.negamax_memo {
            memo.dirty.mark(id);
        }
    }

    /// Drop the negamax memo when `links` lose a move `id` links now: positions below it may
    /// no longer be reachable, which no journal entry says.
    fn drop_memo_unless_kept(&mut self, id: NodeId, links: &[Link]) {
        if self.negamax_memo.is_some() && self.links(id).any(|l| links.iter().all(|k| k.mv != l.mv))
        {
            self.negamax_memo = None;
        }
    }

    /// Take the incremental negamax memo (journaling stops until it is put back).
    pub(crate) fn take_negamax_memo(&mut self) -> Option<NegamaxMemo> {
        self.negamax_memo.take()
    }

    /// Keep the incremental negamax memo.
    pub(crate) fn set_negamax_memo(&mut self, memo: NegamaxMemo) {
        self.negamax_memo = Some(memo);
    }

    /// The header.
    pub fn header(&self) -> &BookHeader {
        &self.header
    }

    /// Replace the header.
    pub fn set_header(&mut self, header: BookHeader) {
        // The errors enter every position's bounds.
        self.negamax_memo = None;
        self.revision.bump();
        self.header = header;
    }

    /// Mutable access to the header (e.g. to change the errors as `book enhance` does).
    pub fn header_mut(&mut self) -> &mut BookHeader {
        self.negamax_memo = None;
        self.revision.bump();
        &mut self.header
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether the book is empty.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Total number of links.
    pub fn n_links(&self) -> usize {
        self.links.len() - self.dead_links
    }

    /// The id of the position stored under the canonical `board`.
    #[inline]
    pub fn find(&self, board: &Board) -> Option<NodeId> {
        let nodes = &self.nodes;
        self.table
            .find(table_hash(board), |&id| nodes[id as usize].board == *board)
            .map(|&id| NodeId(id))
    }

    /// The id of the position equivalent to any (possibly non-canonical) `board`.
    pub fn probe(&self, board: &Board) -> Option<NodeId> {
        self.find(&canonical(board).0)
    }

    /// Live ids in insertion order.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.level != DEAD)
            .map(|(i, _)| NodeId(i as u32))
    }

    /// Whether `id` refers to a live position.
    pub fn is_live(&self, id: NodeId) -> bool {
        self.nodes.get(id.index()).is_some_and(|n| n.level != DEAD)
    }

    /// One past the largest id (ids of removed positions included): the size of per-id side tables.
    pub fn id_bound(&self) -> usize {
        self.nodes.len()
    }

    /// The board of `id`.
    #[inline]
    pub fn board(&self, id: NodeId) -> Board {
        self.nodes[id.index()].board
    }

    /// The level of `id`.
    #[inline]
    pub fn level(&self, id: NodeId) -> u8 {
        self.nodes[id.index()].level
    }

    /// The leaf of `id`.
    #[inline]
    pub fn leaf(&self, id: NodeId) -> Link {
        self.nodes[id.index()].leaf.to_link()
    }

    /// Number of links of `id`.
    #[inline]
    pub fn n_link(&self, id: NodeId) -> usize {
        usize::from(self.nodes[id.index()].n_link)
    }

    /// The `i`-th link of `id`.
    #[inline]
    pub fn link(&self, id: NodeId, i: usize) -> Link {
        let n = &self.nodes[id.index()];
        self.links[n.links_at as usize + i].to_link()
    }

    /// The links of `id`, in stored order.
    pub fn links(&self, id: NodeId) -> impl ExactSizeIterator<Item = Link> + '_ {
        let n = &self.nodes[id.index()];
        let at = n.links_at as usize;
        self.links[at..at + usize::from(n.n_link)]
            .iter()
            .map(|l| l.to_link())
    }

    /// The score and bounds of `id`.
    #[inline]
    pub fn score(&self, id: NodeId) -> Score {
        let n = &self.nodes[id.index()];
        Score {
            value: n.value,
            lower: n.lower,
            upper: n.upper,
        }
    }

    /// The game statistics of `id`.
    #[inline]
    pub fn counts(&self, id: NodeId) -> Counts {
        let c = self.nodes[id.index()].counts;
        Counts {
            n_wins: c[0],
            n_draws: c[1],
            n_losses: c[2],
            n_lines: c[3],
        }
    }

    /// The full position `id`.
    pub fn position(&self, id: NodeId) -> Position {
        let n = &self.nodes[id.index()];
        Position {
            board: n.board,
            leaf: n.leaf.to_link(),
            links: self.links(id).collect(),
            n_wins: n.counts[0],
            n_draws: n.counts[1],
            n_losses: n.counts[2],
            n_lines: n.counts[3],
            value: n.value,
            lower: n.lower,
            upper: n.upper,
            level: n.level,
        }
    }

    /// The position stored under the canonical `board`.
    pub fn get(&self, board: &Board) -> Option<Position> {
        self.find(board).map(|id| self.position(id))
    }

    /// Every position in insertion order.
    pub fn positions(&self) -> impl Iterator<Item = Position> + '_ {
        self.ids().map(|id| self.position(id))
    }

    /// Insert a position whose board must be new and canonical (not checked here beyond a debug
    /// assertion; the file readers check both). Returns its id, or `None` (and stores nothing)
    /// when a position with this board already exists.
    pub fn insert_new(&mut self, position: &Position) -> Option<NodeId> {
        debug_assert_eq!(canonical(&position.board).0, position.board);
        if self.find(&position.board).is_some() {
            return None;
        }
        Some(self.push_node(position))
    }

    /// Insert or replace `position` (its board is taken as canonical). A replaced position keeps
    /// its id and its place in the order. Returns the id.
    pub fn put_position(&mut self, position: &Position) -> NodeId {
        match self.find(&position.board) {
            Some(id) => {
                self.drop_memo_unless_kept(id, &position.links);
                self.unindex_links(id);
                self.write_links(id, &position.links);
                let n = &mut self.nodes[id.index()];
                n.leaf = RawLink::from_link(position.leaf);
                n.counts = [
                    position.n_wins,
                    position.n_draws,
                    position.n_losses,
                    position.n_lines,
                ];
                n.value = position.value;
                n.lower = position.lower;
                n.upper = position.upper;
                n.level = position.level.min(DEAD - 1);
                self.index_links(id);
                self.touch(id);
                id
            }
            None => self.push_node(position),
        }
    }

    fn push_node(&mut self, position: &Position) -> NodeId {
        let id = u32::try_from(self.nodes.len()).expect("fewer than 2^32 positions");
        let at = self.links.len() as u32;
        let n_link = position.links.len().min(usize::from(u8::MAX));
        self.links.extend(
            position.links[..n_link]
                .iter()
                .map(|&l| RawLink::from_link(l)),
        );
        self.nodes.push(Node {
            board: position.board,
            counts: [
                position.n_wins,
                position.n_draws,
                position.n_losses,
                position.n_lines,
            ],
            links_at: at,
            value: position.value,
            lower: position.lower,
            upper: position.upper,
            leaf: RawLink::from_link(position.leaf),
            n_link: n_link as u8,
            level: position.level.min(DEAD - 1),
        });
        let nodes = &self.nodes;
        self.table
            .insert_unique(table_hash(&position.board), id, |&i| {
                table_hash(&nodes[i as usize].board)
            });
        self.live += 1;
        self.touch(NodeId(id));
        let nid = NodeId(id);
        if let Some(pi) = self.parents.as_mut() {
            pi.ensure_node(id);
            if let Some(waiting) = pi.dangling.remove(&position.board) {
                for p in waiting {
                    pi.add(id, p);
                }
            }
        }
        self.index_links(nid);
        nid
    }

    /// Remove the position stored under `board`, returning it. Links pointing at it stay (they
    /// become dangling, as in Edax until `fix`/`prune` drop them).
    pub fn remove(&mut self, board: &Board) -> Option<Position> {
        let id = self.find(board)?;
        let pos = self.position(id);
        // The parents' results change without being touched.
        self.negamax_memo = None;
        self.revision.bump();
        self.epoch += 1;
        self.unindex_links(id);
        if let Some(pi) = self.parents.as_mut() {
            for p in pi.take_parents(id.0) {
                pi.add_dangling(*board, p);
            }
        }
        let nodes = &self.nodes;
        if let Ok(entry) = self
            .table
            .find_entry(table_hash(board), |&i| nodes[i as usize].board == *board)
        {
            entry.remove();
        }
        let n = &mut self.nodes[id.index()];
        self.dead_links += usize::from(n.n_link);
        n.n_link = 0;
        n.level = DEAD;
        self.live -= 1;
        if self.nodes.len() > 1024 && self.live < self.nodes.len() / 2 {
            self.compact();
        }
        Some(pos)
    }

    /// Drop tombstones and arena holes. Ids change; the parent index is rebuilt if it existed.
    pub fn compact(&mut self) {
        // Ids change.
        self.negamax_memo = None;
        self.revision.bump();
        self.epoch += 1;
        let had_parents = self.parents.is_some();
        let mut nodes = Vec::with_capacity(self.live);
        let mut links = Vec::with_capacity(self.n_links());
        for n in self.nodes.iter().filter(|n| n.level != DEAD) {
            let at = n.links_at as usize;
            let mut m = *n;
            m.links_at = links.len() as u32;
            links.extend_from_slice(&self.links[at..at + usize::from(n.n_link)]);
            nodes.push(m);
        }
        self.nodes = nodes;
        self.links = links;
        self.dead_links = 0;
        self.table.clear();
        let nodes = &self.nodes;
        for (i, n) in nodes.iter().enumerate() {
            self.table
                .insert_unique(table_hash(&n.board), i as u32, |&j| {
                    table_hash(&nodes[j as usize].board)
                });
        }
        self.parents = None;
        if had_parents {
            self.build_parent_index();
        }
    }

    /// Set the leaf of `id`.
    pub fn set_leaf(&mut self, id: NodeId, leaf: Link) {
        self.touch(id);
        self.nodes[id.index()].leaf = RawLink::from_link(leaf);
    }

    /// Set the level of `id` (clamped to 60).
    pub fn set_level(&mut self, id: NodeId, level: u8) {
        self.touch(id);
        self.nodes[id.index()].level = level.min(60);
    }

    /// Set the score of `id`.
    pub fn set_score(&mut self, id: NodeId, score: Score) {
        if self.score(id) != score {
            self.touch(id);
        }
        let n = &mut self.nodes[id.index()];
        n.value = score.value;
        n.lower = score.lower;
        n.upper = score.upper;
    }

    /// Set the game statistics of `id`.
    pub fn set_counts(&mut self, id: NodeId, c: Counts) {
        if self.counts(id) != c {
            self.touch(id);
        }
        self.nodes[id.index()].counts = [c.n_wins, c.n_draws, c.n_losses, c.n_lines];
    }

    /// Set the score of the `i`-th link of `id`.
    pub fn set_link_score(&mut self, id: NodeId, i: usize, score: i8) {
        if self.link(id, i).score != score {
            self.touch(id);
        }
        let at = self.nodes[id.index()].links_at as usize;
        self.links[at + i].score = score;
    }

    /// Swap the `i`-th and `j`-th links of `id`.
    pub fn swap_links(&mut self, id: NodeId, i: usize, j: usize) {
        if i != j {
            self.touch(id);
        }
        let at = self.nodes[id.index()].links_at as usize;
        self.links.swap(at + i, at + j);
    }

    /// Edax's `add_link`: if a link with the same move exists, overwrite its score and return
    /// `false`; otherwise append the link, raise the value to the link score if higher, clear the
    /// leaf when it had this move, and return `true`.
    pub fn add_link(&mut self, id: NodeId, link: Link) -> bool {
        let existing = self.links(id).position(|l| l.mv == link.mv);
        if let Some(i) = existing {
            self.set_link_score(id, i, link.score);
            return false;
        }
        self.touch(id);
        let mut all: Vec<Link> = self.links(id).collect();
        all.push(link);
        self.unindex_links(id);
        self.write_links(id, &all);
        self.index_links(id);
        let n = &mut self.nodes[id.index()];
        n.value = n.value.max(i16::from(link.score));
        if n.leaf.code == link.mv.code() {
            n.leaf = RawLink::from_link(BAD_LINK);
        }
        true
    }

    /// Replace the whole link list of `id` (the parent index follows).
    pub fn set_links(&mut self, id: NodeId, links: &[Link]) {
        self.drop_memo_unless_kept(id, links);
        self.touch(id);
        self.unindex_links(id);
        self.write_links(id, links);
        self.index_links(id);
    }

    /// Store `links` for `id`, in place when they fit, else at the end of the arena.
    fn write_links(&mut self, id: NodeId, links: &[Link]) {
        let n_link = links.len().min(usize::from(u8::MAX));
        let node = &mut self.nodes[id.index()];
        let old = usize::from(node.n_link);
        if n_link <= old {
            let at = node.links_at as usize;
            for (k, l) in links[..n_link].iter().enumerate() {
                self.links[at + k] = RawLink::from_link(*l);
            }
            self.dead_links += old - n_link;
        } else {
            self.dead_links += old;
            node.links_at = self.links.len() as u32;
            self.links
                .extend(links[..n_link].iter().map(|&l| RawLink::from_link(l)));
        }
        node.n_link = n_link as u8;
        if self.dead_links > 4096 && self.dead_links > self.links.len() / 2 {
            self.compact_links();
        }
    }

    fn compact_links(&mut self) {
        let mut links = Vec::with_capacity(self.n_links());
        for n in self.nodes.iter_mut() {
            let at = n.links_at as usize;
            let k = usize::from(n.n_link);
            n.links_at = links.len() as u32;
            links.extend_from_slice(&self.links[at..at + k]);
        }
        self.links = links;
        self.dead_links = 0;
    }

    /// The child board of each of `id`'s links, with its node when the child is in the book.
    fn link_children(&self, id: NodeId) -> Vec<(Board, Option<NodeId>)> {
        let board = self.board(id);
        self.links(id)
            .map(|l| {
                let c = child_board(&board, l.mv);
                (c, self.find(&c))
            })
            .collect()
    }

    /// Add the parent-index edges of `id`'s links (no-op without an index).
    fn index_links(&mut self, id: NodeId) {
        if self.parents.is_none() {
            return;
        }
        let children = self.link_children(id);
        if let Some(pi) = self.parents.as_mut() {
            for (c, cid) in children {
                match cid {
                    Some(cid) => pi.add(cid.0, id.0),
                    None => pi.add_dangling(c, id.0),
                }
            }
        }
    }

    /// Remove the parent-index edges of `id`'s links (no-op without an index).
    fn unindex_links(&mut self, id: NodeId) {
        if self.parents.is_none() {
            return;
        }
        let children = self.link_children(id);
        if let Some(pi) = self.parents.as_mut() {
            for (c, cid) in children {
                match cid {
                    Some(cid) => pi.remove(cid.0, id.0),
                    None => pi.remove_dangling(&c, id.0),
                }
            }
        }
    }

    /// Build the child→parents index (O(positions + links)); afterwards every mutation keeps it
    /// up to date. Called by incremental negamax on first use.
    pub fn build_parent_index(&mut self) {
        let mut pi = ParentIndex::new(self.nodes.len());
        for id in self.ids() {
            let board = self.board(id);
            for l in self.links(id) {
                let c = child_board(&board, l.mv);
                match self.find(&c) {
                    Some(cid) => pi.add(cid.0, id.0),
                    None => pi.add_dangling(c, id.0),
                }
            }
        }
        self.parents = Some(pi);
    }

    /// Whether the parent index is built.
    pub fn has_parent_index(&self) -> bool {
        self.parents.is_some()
    }

    /// Drop the parent index (to save memory when no incremental update is planned).
    pub fn drop_parent_index(&mut self) {
        self.parents = None;
    }

    /// The parents of `id` (one entry per link pointing at it; empty without an index).
    pub fn parents(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.parents
            .as_ref()
            .into_iter()
            .flat_map(move |pi| pi.parents(id.0))
            .map(NodeId)
    }

    /// Heap bytes held by the book (records, link arena, hash table, parent index), as allocated
    /// capacity; the figure behind "bytes per position".
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.links.capacity() * std::mem::size_of::<RawLink>()
            + self.table.capacity() * (std::mem::size_of::<u32>() + 1)
            + self.parents.as_ref().map_or(0, ParentIndex::heap_bytes)
            + self.negamax_memo.as_ref().map_or(0, |m| {
                (m.reach.capacity() + m.dirty.seen.capacity()) * 8 + m.dirty.ids.capacity() * 4
            })
    }

    /// Release spare capacity of the record and link vectors.
    pub fn shrink_to_fit(&mut self) {
        self.nodes.shrink_to_fit();
        self.links.shrink_to_fit();
        let nodes = &self.nodes;
        self.table
            .shrink_to_fit(|&i| table_hash(&nodes[i as usize].board));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::Square;

    fn sq(s: &str) -> Move {
        Move::Square(Square::parse(s).expect("square"))
    }

    #[test]
    fn the_revision_changes_with_every_change_and_only_then() {
        let mut book = crate::synth::test_book(2);
        let r0 = book.revision();
        // Reading and a negamax that finds nothing to change keep it.
        let _ = book.positions().count();
        crate::negamax::negamax(&mut book);
        assert_eq!(book.revision(), r0);
        let id = book.find(&Board::start()).expect("start");
        book.set_level(id, book.level(id));
        let r1 = book.revision();
        assert_ne!(r1, r0);
        book.header_mut().midgame_error += 1;
        assert_ne!(book.revision(), r1);
        // A clone is another book: its changes never meet the original's revisions.
        let copy = book.clone();
        assert_ne!(copy.revision(), book.revision());
        let r2 = book.revision();
        let board = book.board(id);
        book.remove(&board);
        assert_ne!(book.revision(), r2);
    }

    #[test]
    fn node_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 48);
    }

    #[test]
    fn insert_get_remove() {
        let mut b = MemBook::default();
        let start = Board::start();
        let mut p = Position::new(start, 2);
        p.links.push(Link::new(-1, sq("f5")));
        p.leaf = Link::new(-3, sq("d3"));
        let id = b.insert_new(&p).expect("new");
        assert!(b.insert_new(&p).is_none());
        assert_eq!(b.get(&start), Some(p.clone()));
        assert_eq!(b.len(), 1);
        assert_eq!(b.n_links(), 1);
        // Edax add_link: the leaf move becomes a link and the leaf is cleared.
        assert!(b.add_link(id, Link::new(0, sq("d3"))));
        assert_eq!(b.leaf(id), BAD_LINK);
        assert_eq!(b.score(id).value, 0);
        assert!(!b.add_link(id, Link::new(5, sq("d3"))));
        assert_eq!(b.link(id, 1), Link::new(5, sq("d3")));
        assert_eq!(b.remove(&start).map(|q| q.links.len()), Some(2));
        assert!(b.is_empty());
        assert!(b.get(&start).is_none());
    }

    #[test]
    fn parent_index_follows_mutations() {
        let mut b = MemBook::default();
        let start = Board::start();
        let child = child_board(&start, sq("f5"));
        let mut root = Position::new(start, 2);
        root.links = vec![Link::new(0, sq("f5")), Link::new(0, sq("d3"))];
        let rid = b.insert_new(&root).expect("root");
        b.build_parent_index();
        // The child arrives after its parent: the dangling links attach to it (twice: f5 and d3
        // reach the same canonical board).
        let cid = b.insert_new(&Position::new(child, 2)).expect("child");
        assert_eq!(b.parents(cid).collect::<Vec<_>>(), vec![rid, rid]);
        b.set_links(rid, &[Link::new(0, sq("f5"))]);
        assert_eq!(b.parents(cid).collect::<Vec<_>>(), vec![rid]);
        b.remove(&start);
        assert_eq!(b.parents(cid).count(), 0);
    }
}
