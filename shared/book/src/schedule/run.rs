//! The asynchronous program: a growth program (deviate, enhance, play, extend, upgrade) run
//! without passes. A position is expanded (an upgrade: re-searched) as soon as the selection
//! marks it on the current book and the results its step needs are known; the step, its plan
//! and its application are the serial driver's own ([`crate::grow::plan_expand_at`] and
//! [`crate::grow::finish_expand`]; [`crate::research`] for upgrade), so only the order differs.
//!
//! The caller feeds results as they land ([`AsyncGrowth::run`]) and gets back the changes of the
//! set of requests the program waits for ([`AsyncGrowth::take_delta`]); nothing here searches.
//!
//! Invariants:
//! * a step is applied only to a position the selection marks (as of the start of the run's
//!   batch), with a plan made on the current book and every result of that plan known: every
//!   leaf the book gets was searched with the position's links at that moment excluded;
//! * the program is done only when the frontier marks no position it can still expand, no
//!   repair is pending, and the serial selection ([`Selector::serial_marks`]) run on the
//!   negamaxed book finds nothing to expand: the book is a finished book by Edax's rules;
//! * the program's state worth keeping is its operation, level and counters: plans, claims and
//!   the frontier are functions of the book and the known results, and the pending repairs are
//!   the book's positions without a leaf, all rebuilt when a program starts
//!   ([`AsyncGrowth::resume`]).

use super::frontier::{Frontier, FrontierStats, Selector};
use crate::grow::{Changes, ExpandPlan, finish_expand, is_borrowed, leaf_request, plan_expand_at};
use crate::mem::{MemBook, NodeId};
use crate::model::BAD_LINK;
use crate::model::MAX_LEVEL;
use crate::negamax::renegamax;
use crate::program::{Operation, Program};
use crate::research::{finish_research, start_research};
use crate::results::{RequestMap, RequestSet, Results};
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use bookfarm_engine::search::LeafResult;
use bookfarm_engine::symmetry::{canonical, transform, transform_bits, transform_move};
use std::collections::{BTreeSet, HashMap};

/// The selector and root of a program the asynchronous schedule can run, or `None` (new, add,
/// expand and audit have no passes to remove; a root line that is not legal has no root).
pub fn async_selector(program: &Program) -> Option<(Selector, Board)> {
    let selector = match &program.operation {
        Operation::Deviate { params } => Selector::Deviate(*params),
        Operation::Enhance { .. } => Selector::Enhance,
        Operation::Play => Selector::Play,
        Operation::Extend => Selector::Extend,
        Operation::Upgrade { params } => Selector::Upgrade(*params),
        Operation::New
        | Operation::AddGames { .. }
        | Operation::Expand { .. }
        | Operation::Audit { .. }
        | Operation::Search { .. }
        | Operation::Analyze { .. }
        | Operation::StoreAnalysis { .. } => return None,
    };
    Some((selector, program.root_board()?))
}

/// The positions the serial (Edax-literal) selection of `program` would still expand on
/// `book`, negamaxed from the program's root first: empty for a finished book (property 1 of
/// an asynchronous book). Programs without a selection (new, add, expand, audit) have none.
pub fn unfinished(book: &mut MemBook, program: &Program) -> Vec<NodeId> {
    let Some((selector, root)) = async_selector(program) else {
        return Vec::new();
    };
    let Some(root) = book.probe(&root) else {
        return Vec::new();
    };
    renegamax(book, root);
    selector
        .serial_marks(book, root)
        .into_iter()
        .filter(|&id| {
            matches!(selector, Selector::Upgrade(_))
                || book.leaf(id).mv != bookfarm_engine::Move::None
        })
        .collect()
}

/// The order in which marked positions are searched when more are marked than the farm has
/// threads (the queue's priority; with fewer, every marked position is searched at once and
/// the order does not matter). The finished book depends on it: both orders end in a finished
/// book by Edax's rules (the module's invariants), of different sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// In the order positions were marked (FIFO): the closest to the serial program's passes,
    /// so its book stays comparable with the serial one (a few % more positions, the same
    /// root value in the measured builds).
    #[default]
    Marking,
    /// Principal lines first: a position whose value is closer to the window's centre (the
    /// root's value), and whose leaf gives up less against its value, goes first. The root's
    /// value settles early, so fewer positions are expanded under a window that moves later:
    /// far smaller books, whose root value may differ from the serial book's.
    BestFirst,
}

/// Options of the asynchronous program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AsyncOptions {
    /// The queue's order.
    pub order: Order,
    /// Apply an expansion as soon as its child's search is known: the parents whose leaf the
    /// child replaces lose their leaf until their re-search lands (searched first, like a
    /// repair). Shortens each step of a line from the slower of two searches to one search.
    pub early_child: bool,
}

/// What the program waits for changed: requests to search (with their priority, lower first)
/// and requests no longer needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeededDelta {
    /// Newly needed requests and their priorities.
    pub added: Vec<(LeafRequest, u32)>,
    /// Requests no longer needed (the caller may keep their searches running: a result is
    /// stored and used if the position is marked again).
    pub removed: Vec<LeafRequest>,
}

/// What [`AsyncGrowth::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncProgress {
    /// The program is finished.
    Done,
    /// The program waits for results ([`AsyncGrowth::needed`]).
    Waiting,
}

/// Counters of an asynchronous program (reported; the simulator's columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncStats {
    /// Steps applied (expansions, upgrade re-searches, repairs).
    pub applied: u64,
    /// Plans made (a marked position planned, or planned again after it or a result changed).
    pub plans: u64,
    /// Requests that were needed and then dropped without a result (their position left the
    /// window, or its plan changed): searched anyway if already leased, and then unused unless
    /// the position is marked again.
    pub dropped: u64,
    /// Times the serial selection found work the frontier did not mark (must stay 0: the
    /// frontier is then rebuilt).
    pub disagreements: u64,
    /// Runs of the program.
    pub runs: u64,
    /// The frontier's costs.
    pub frontier: FrontierStats,
}

/// A marked position's current plan.
#[derive(Debug, Clone)]
struct Active {
    /// Every request of the plan (for wake-ups and retraction).
    requests: Vec<LeafRequest>,
    /// The requests it counts in [`AsyncGrowth::needed`].
    registered: Vec<LeafRequest>,
    /// The canonical child it claims (expansions whose child is not in the book).
    claim: Option<Board>,
    /// Nothing to do: its leaf cannot be expanded (no move).
    inert: bool,
}

/// A needed request: how many plans need it, and its best priority.
#[derive(Debug, Clone, Copy)]
struct Need {
    count: u32,
    priority: u32,
    /// When it was first needed (ties of equal priority go first come, first served).
    seq: u64,
}

/// The running asynchronous program (see the module docs).
#[derive(Debug, Clone)]
pub struct AsyncGrowth {
    program: Program,
    root: Board,
    selector: Selector,
    frontier: Frontier,
    started: bool,
    done: bool,
    active: HashMap<NodeId, Active>,
    /// Child (canonical board) → the position whose expansion searches it.
    claims: HashMap<Board, NodeId>,
    /// Positions waiting for another's claim on their child.
    claim_waiters: HashMap<Board, Vec<NodeId>>,
    /// Request → the positions whose plan holds it.
    by_request: RequestMap<Vec<NodeId>>,
    needed: RequestMap<Need>,
    /// The next [`Need::seq`].
    next_seq: u64,
    delta: NeededDelta,
    /// Positions whose leaf was retracted, and the request that searches it again.
    repairs: HashMap<NodeId, LeafRequest>,
    /// Positions to plan at the next run.
    pending: BTreeSet<NodeId>,
    changes: Changes,
    stats: AsyncStats,
    options: AsyncOptions,
}

impl AsyncGrowth {
    /// A new program, or `None` when it has no asynchronous form ([`async_selector`]). Its
    /// schedule field is not read: whoever chose this schedule recorded it.
    pub fn new(mut program: Program) -> Option<AsyncGrowth> {
        program.level = program.level.map(|l| l.min(MAX_LEVEL));
        let (selector, root) = async_selector(&program)?;
        Some(AsyncGrowth {
            program,
            root,
            selector,
            frontier: Frontier::new(selector, root),
            started: false,
            done: false,
            active: HashMap::new(),
            claims: HashMap::new(),
            claim_waiters: HashMap::new(),
            by_request: RequestMap::default(),
            needed: RequestMap::default(),
            next_seq: 0,
            delta: NeededDelta::default(),
            repairs: HashMap::new(),
            pending: BTreeSet::new(),
            changes: Changes::default(),
            stats: AsyncStats::default(),
            options: AsyncOptions::default(),
        })
    }

    /// A program resumed after a restart: the counters it had; the rest is rebuilt from the
    /// book and the known results by the next [`AsyncGrowth::run`] (which does not change the
    /// header again: a resumed enhance keeps the errors it stored).
    pub fn resume(program: Program, changes: Changes) -> Option<AsyncGrowth> {
        let mut g = AsyncGrowth::new(program)?;
        g.changes = changes;
        g.started = true;
        Some(g)
    }

    /// Set the options (before the first run).
    pub fn set_options(&mut self, options: AsyncOptions) {
        self.options = options;
    }

    /// The options.
    pub fn options(&self) -> AsyncOptions {
        self.options
    }

    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Changes so far (Edax's counters: positions, links, searches).
    pub fn changes(&self) -> Changes {
        self.changes
    }

    /// Counters.
    pub fn stats(&self) -> AsyncStats {
        AsyncStats {
            frontier: self.frontier.stats(),
            ..self.stats
        }
    }

    /// Whether the program is finished.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Positions marked now (the frontier's size).
    pub fn marked(&self) -> usize {
        self.frontier.len()
    }

    /// Every request the program waits for now, with its priority (lower first), in the
    /// order to search them (priority, then first needed first): the whole set, for a caller
    /// that starts over or keeps a plain list; [`AsyncGrowth::take_delta`] gives the changes.
    pub fn needed(&self) -> Vec<(LeafRequest, u32)> {
        let mut v: Vec<(LeafRequest, u32, u64)> = self
            .needed
            .iter()
            .map(|(r, n)| (*r, n.priority, n.seq))
            .collect();
        v.sort_unstable_by_key(|&(_, p, seq)| (p, seq));
        v.into_iter().map(|(r, p, _)| (r, p)).collect()
    }

    /// The changes of [`AsyncGrowth::needed`] since the last call.
    pub fn take_delta(&mut self) -> NeededDelta {
        let mut d = std::mem::take(&mut self.delta);
        // A request added then removed (or the reverse) within one delta nets out.
        d.added.retain(|(r, _)| self.needed.contains_key(r));
        d.removed.retain(|r| !self.needed.contains_key(r));
        d.removed
            .sort_unstable_by_key(|r| (r.board.player, r.board.opponent, r.excluded));
        d.removed.dedup();
        let mut seen = RequestSet::default();
        d.added.retain(|(r, _)| seen.insert(*r));
        d
    }

    fn start(&mut self, book: &mut MemBook) {
        self.started = true;
        self.repair_holes(book);
        if let Operation::Enhance {
            midgame_error,
            endcut_error,
            ..
        } = &self.program.operation
        {
            let h = book.header_mut();
            h.midgame_error = (*midgame_error).clamp(0, 129);
            h.endcut_error = (*endcut_error).clamp(0, 129);
        }
    }

    /// Plan a repair for every position left without the leaf it should have ("no leaf" while a
    /// move is left to search), first, as a retracted leaf is. Growth leaves one only in a
    /// retraction or an early child, whose repair follows, so a hole when a program starts is a
    /// repair that a restart (the program's plans are not stored) or the cancel of an earlier
    /// asynchronous program cut off; an imported book may hold some too. `book fix` would
    /// search each (property 2 of a finished book). Returns the number of holes.
    fn repair_holes(&mut self, book: &MemBook) -> usize {
        let holes: Vec<(NodeId, LeafRequest)> = book
            .ids()
            .filter(|&id| book.leaf(id) == BAD_LINK && !self.repairs.contains_key(&id))
            .filter_map(|id| leaf_request(&book.position(id)).map(|r| (id, r)))
            .collect();
        for &(id, req) in &holes {
            self.repairs.insert(id, req);
            self.need(req, 0);
            self.pending.insert(id);
        }
        holes.len()
    }

    /// Run as far as the known results allow: apply every step whose results are known, let
    /// the selection mark what the book's changes opened, and plan it. `landed` are the
    /// requests whose results arrived since the last run (their positions are looked at
    /// first; any known result is used wherever a plan needs it).
    pub fn run(
        &mut self,
        book: &mut MemBook,
        results: &dyn Results,
        landed: &[LeafRequest],
    ) -> AsyncProgress {
        if self.done {
            return AsyncProgress::Done;
        }
        self.stats.runs += 1;
        if !self.started {
            self.start(book);
        }
        if !book.has_parent_index() {
            book.build_parent_index();
        }
        book.track_selection();
        let mut touched: BTreeSet<(u32, NodeId)> = BTreeSet::new();
        // Repairs are few (a caught liar's leaves): each run looks at all of them.
        let repairs: Vec<NodeId> = self.repairs.keys().copied().collect();
        for id in std::mem::take(&mut self.pending).into_iter().chain(repairs) {
            if book.is_live(id) {
                touched.insert((self.order(book, id), id));
            }
        }
        for r in landed {
            if self.needed.remove(r).is_some() {
                self.delta.removed.push(*r);
            }
            if let Some(ids) = self.by_request.get(r) {
                for &id in ids {
                    touched.insert((self.order(book, id), id));
                }
            }
        }
        loop {
            let Some(root) = book.probe(&self.frontier_root()) else {
                self.finish();
                return AsyncProgress::Done;
            };
            renegamax(book, root);
            let changed = book.take_selection_changes();
            self.frontier.update(book, &changed);
            for id in self.frontier.take_events() {
                if self.frontier.is_marked(id) {
                    touched.insert((self.order(book, id), id));
                } else {
                    for w in self.release(id) {
                        touched.insert((self.order(book, w), w));
                    }
                }
            }
            for &id in &changed {
                if self.active.contains_key(&id) || self.repairs.contains_key(&id) {
                    touched.insert((self.order(book, id), id));
                }
            }
            // Plan what changed (a plan can hand a claim on; its waiters plan next).
            let mut ready = BTreeSet::new();
            while let Some((prio, id)) = touched.pop_first() {
                if !book.is_live(id) {
                    continue;
                }
                if self.repairs.contains_key(&id) {
                    if self.plan_repair(book, id, results) {
                        ready.insert((prio, id));
                    }
                } else if self.frontier.is_marked(id) {
                    let (complete, wake) = self.plan(book, id, results);
                    if complete {
                        ready.insert((prio, id));
                    }
                    for w in wake {
                        touched.insert((self.order(book, w), w));
                    }
                } else {
                    for w in self.release(id) {
                        touched.insert((self.order(book, w), w));
                    }
                }
            }
            if ready.is_empty() {
                break;
            }
            // Apply, closest to the root first, every step whose results are known.
            for (_, id) in ready {
                for w in self.apply(book, id, results) {
                    if book.is_live(w) {
                        touched.insert((self.order(book, w), w));
                    }
                }
            }
        }
        if self.active.values().all(|a| a.inert) {
            self.check_done(book)
        } else {
            AsyncProgress::Waiting
        }
    }

    fn frontier_root(&self) -> Board {
        self.root
    }

    /// The priority of a position's requests, lower first: repairs, then the [`Order`] (ties
    /// in the order the caller queued them).
    fn order(&self, book: &MemBook, id: NodeId) -> u32 {
        if self.repairs.contains_key(&id) {
            return 0;
        }
        match self.options.order {
            Order::BestFirst => 1 + self.frontier.relevance(book, id).min(1 << 24),
            Order::Marking => 1,
        }
    }

    /// Nothing marked can be expanded: finished if the serial selection agrees.
    fn check_done(&mut self, book: &mut MemBook) -> AsyncProgress {
        if !self.repairs.is_empty() || self.active.values().any(|a| !a.inert) {
            return AsyncProgress::Waiting;
        }
        let Some(root) = book.probe(&self.frontier_root()) else {
            self.finish();
            return AsyncProgress::Done;
        };
        let missed = self
            .selector
            .serial_marks(book, root)
            .into_iter()
            .any(|id| self.expandable(book, id));
        if !missed {
            self.finish();
            return AsyncProgress::Done;
        }
        // The frontier disagrees with the serial selection (it must not): start it over and
        // plan what it marks at the next run.
        self.stats.disagreements += 1;
        self.frontier.rebuild(book);
        self.frontier.take_events();
        let marked: Vec<NodeId> = self.frontier.marked().collect();
        self.pending.extend(marked);
        AsyncProgress::Waiting
    }

    fn finish(&mut self) {
        self.done = true;
        let all: Vec<NodeId> = self.active.keys().copied().collect();
        for id in all {
            self.release(id);
        }
        for (r, _) in std::mem::take(&mut self.needed) {
            self.delta.removed.push(r);
        }
        self.by_request.clear();
        self.claims.clear();
        self.claim_waiters.clear();
    }

    /// Whether marking `id` gives a step to run (a leaf to expand, a leaf to re-search).
    fn expandable(&self, book: &MemBook, id: NodeId) -> bool {
        match self.selector {
            Selector::Upgrade(_) => true,
            _ => book.leaf(id).mv != bookfarm_engine::Move::None || is_borrowed(&book.position(id)),
        }
    }

    fn need(&mut self, r: LeafRequest, priority: u32) {
        match self.needed.get_mut(&r) {
            Some(n) => {
                n.count += 1;
                if priority < n.priority {
                    n.priority = priority;
                    self.delta.added.push((r, priority));
                }
            }
            None => {
                self.next_seq += 1;
                let seq = self.next_seq;
                self.needed.insert(
                    r,
                    Need {
                        count: 1,
                        priority,
                        seq,
                    },
                );
                self.delta.added.push((r, priority));
            }
        }
    }

    fn unneed(&mut self, r: &LeafRequest) {
        if let Some(n) = self.needed.get_mut(r) {
            n.count -= 1;
            if n.count == 0 {
                self.needed.remove(r);
                self.delta.removed.push(*r);
                self.stats.dropped += 1;
            }
        }
    }

    /// Forget `id`'s plan (its registrations and its claim); returns the positions that waited
    /// for its claim (they plan again).
    fn release(&mut self, id: NodeId) -> Vec<NodeId> {
        let Some(a) = self.active.remove(&id) else {
            return Vec::new();
        };
        for r in &a.registered {
            self.unneed(r);
        }
        for r in &a.requests {
            if let Some(v) = self.by_request.get_mut(r) {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    self.by_request.remove(r);
                }
            }
        }
        match a.claim {
            Some(c) if self.claims.get(&c) == Some(&id) => {
                self.claims.remove(&c);
                self.claim_waiters.remove(&c).unwrap_or_default()
            }
            Some(c) => {
                if let Some(w) = self.claim_waiters.get_mut(&c) {
                    w.retain(|&x| x != id);
                }
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// (Re)plan the marked position `id` on the current book. Returns whether every result it
    /// needs is known (it is ready to apply), and the positions to plan again (waiters of a
    /// claim it gave up).
    fn plan(&mut self, book: &MemBook, id: NodeId, results: &dyn Results) -> (bool, Vec<NodeId>) {
        self.stats.plans += 1;
        let old_claim = self.active.get(&id).and_then(|a| a.claim);
        let mut waiters = self.release(id);
        let prio = self.order(book, id);
        let mut child_known = false;
        let (requests, claim, inert) = match self.selector {
            Selector::Upgrade(u) => {
                let (_, req) = start_research(book, id, u.clamped().level);
                (req.into_iter().collect::<Vec<_>>(), None, false)
            }
            // A borrowed leaf is searched before its position can be expanded.
            _ if is_borrowed(&book.position(id)) => {
                let req = leaf_request(&book.position(id));
                (req.into_iter().collect(), None, false)
            }
            _ => match plan_expand_at(book, id, self.program.level) {
                Some(p) => {
                    let claim = (!p.child_exists).then(|| canonical(&p.child.board).0);
                    child_known = p.child_exists
                        || p.child_request.is_none_or(|r| results.result(&r).is_some());
                    (p.requests().collect(), claim, false)
                }
                None => (Vec::new(), None, true),
            },
        };
        // Another marked position's expansion searches the same child: wait for it (its
        // application links this position to the child and re-searches it).
        if let Some(c) = claim
            && let Some(&owner) = self.claims.get(&c)
            && owner != id
        {
            self.claim_waiters.entry(c).or_default().push(id);
            self.active.insert(
                id,
                Active {
                    requests: Vec::new(),
                    registered: Vec::new(),
                    claim: Some(c),
                    inert: false,
                },
            );
            return (false, waiters);
        }
        if let Some(c) = claim {
            self.claims.insert(c, id);
            if old_claim == Some(c) {
                // Still this position's child: its waiters keep waiting.
                self.claim_waiters
                    .entry(c)
                    .or_default()
                    .extend(std::mem::take(&mut waiters));
            }
        }
        let mut registered = Vec::new();
        let mut complete = true;
        for r in &requests {
            self.by_request.entry(*r).or_default().push(id);
            if results.result(r).is_none() {
                complete = false;
                if !registered.contains(r) {
                    self.need(*r, prio);
                    registered.push(*r);
                }
            }
        }
        self.active.insert(
            id,
            Active {
                requests,
                registered,
                claim,
                inert,
            },
        );
        let ready = complete || (self.options.early_child && child_known && claim.is_some());
        (ready && !inert, waiters)
    }

    /// Apply `id`'s step if its plan, made again on the current book, is complete (the book
    /// may have changed since the plan was made, by earlier steps of this batch). Returns the
    /// positions to plan again (itself when the plan changed; the waiters of its claim).
    fn apply(&mut self, book: &mut MemBook, id: NodeId, results: &dyn Results) -> Vec<NodeId> {
        if !book.is_live(id) {
            return Vec::new();
        }
        if let Some(req) = self.repairs.get(&id).copied() {
            let current = leaf_request(&book.position(id));
            let result = current.and_then(|r| results.result(&r));
            if current.is_some() && (current != Some(req) || result.is_none()) {
                return vec![id];
            }
            self.repairs.remove(&id);
            self.unneed(&req);
            if let Some(r) = result {
                let mut p = book.position(id);
                crate::grow::apply_leaf(&mut p, &r);
                book.put_position(&p);
                self.changes.searches += 1;
            }
            self.stats.applied += 1;
            return vec![id];
        }
        match self.selector {
            Selector::Upgrade(u) => {
                let (p, request) = start_research(book, id, u.clamped().level);
                let result = match request {
                    Some(r) => match results.result(&r) {
                        Some(res) => Some(res),
                        None => return vec![id],
                    },
                    None => None,
                };
                self.changes.searches += 1;
                finish_research(book, p, result.as_ref());
            }
            _ if is_borrowed(&book.position(id)) => {
                let mut p = book.position(id);
                let Some(r) = leaf_request(&p).and_then(|q| results.result(&q)) else {
                    return vec![id];
                };
                crate::grow::apply_leaf(&mut p, &r);
                book.put_position(&p);
                self.changes.searches += 1;
            }
            _ => {
                let Some(plan): Option<ExpandPlan> = plan_expand_at(book, id, self.program.level)
                else {
                    return vec![id];
                };
                let missing: Vec<LeafRequest> = plan
                    .requests()
                    .filter(|r| results.result(r).is_none())
                    .collect();
                let child_missing = !plan.child_exists
                    && plan
                        .child_request
                        .is_some_and(|r| results.result(&r).is_none());
                if !missing.is_empty()
                    && (!self.options.early_child || child_missing || plan.child_exists)
                {
                    return vec![id];
                }
                // Re-searches not known yet: applied as "no leaf", then searched as repairs.
                let pending = Pending {
                    known: results,
                    missing: &missing,
                };
                let results: &dyn Results = &pending;
                let mut later: Vec<Board> = Vec::new();
                if plan.parent_request.is_some_and(|r| missing.contains(&r)) {
                    later.push(plan.parent);
                }
                for pl in &plan.parent_links {
                    if pl.request.is_some_and(|r| missing.contains(&r)) {
                        later.push(pl.board);
                    }
                }
                let applied = finish_expand(book, &plan, results);
                for b in later {
                    if let Some(pid) = book.find(&b) {
                        let mut p = book.position(pid);
                        p.leaf = BAD_LINK;
                        book.put_position(&p);
                        if let Some(req) = leaf_request(&p) {
                            let waiters = self.release(pid);
                            self.pending.extend(waiters);
                            self.repairs.insert(pid, req);
                            self.need(req, 0);
                            self.pending.insert(pid);
                        }
                    }
                }
                if let Ok(out) = applied {
                    self.changes.searches += plan.requests().count();
                    self.changes.links +=
                        plan.child.links.len() + usize::from(out.link_added) + out.parents.links;
                    self.changes.positions += usize::from(out.child_added);
                }
            }
        }
        self.stats.applied += 1;
        let mut wake = self.release(id);
        wake.push(id);
        wake
    }

    /// Plan the repair of `id` (a retracted leaf); returns whether its result is known.
    fn plan_repair(&mut self, book: &MemBook, id: NodeId, results: &dyn Results) -> bool {
        let Some(old) = self.repairs.get(&id).copied() else {
            return false;
        };
        let current = leaf_request(&book.position(id));
        match current {
            None => true,
            Some(r) => {
                if r != old {
                    self.unneed(&old);
                    self.repairs.insert(id, r);
                    self.need(r, 0);
                }
                results.result(&r).is_some()
            }
        }
    }

    /// Retract-and-repair: the results of `dropped` (requests and the results they had) are
    /// no longer believed (the caller has removed them from its results, or replaced them
    /// with the results that overturned them). Every position whose current leaf came from one
    /// of them loses that leaf (it stays in the book, its value from its links) and is searched
    /// again first (a replacement already known repairs it at the next run); plans holding a
    /// dropped request are made again. Returns the positions whose leaf was cleared.
    pub fn retract(
        &mut self,
        book: &mut MemBook,
        dropped: &[(LeafRequest, LeafResult)],
    ) -> Vec<Board> {
        let mut cleared = Vec::new();
        for (q, r) in dropped {
            if let Some(ids) = self.by_request.get(q).cloned() {
                for id in ids {
                    if book.is_live(id) && self.active.contains_key(&id) {
                        // Planned again at the next run (the request is unknown now).
                        let waiters = self.release(id);
                        self.pending.insert(id);
                        self.pending.extend(waiters);
                    }
                }
            }
            let Some(id) = book.probe(&q.board) else {
                continue;
            };
            if !leaf_came_from(book, id, q, r) {
                continue;
            }
            book.set_leaf(id, BAD_LINK);
            let mut p = book.position(id);
            // The value follows from the links alone until the new leaf lands.
            p.value = p
                .links
                .iter()
                .map(|l| i16::from(l.score))
                .max()
                .unwrap_or(-crate::model::SCORE_INF);
            book.put_position(&p);
            let req = leaf_request(&book.position(id)).unwrap_or(*q);
            let waiters = self.release(id);
            self.pending.extend(waiters);
            self.pending.insert(id);
            self.repairs.insert(id, req);
            self.need(req, 0);
            cleared.push(book.board(id));
        }
        if !cleared.is_empty() {
            self.done = false;
        }
        cleared
    }

    /// A one-line summary of the program's state (for logs and failed tests).
    pub fn summary(&self) -> String {
        format!(
            "done {} marked {} active {} (inert {}, waiting on a claim {}) needed {} repairs {} \
             pending {} claims {} {:?}",
            self.done,
            self.frontier.len(),
            self.active.len(),
            self.active.values().filter(|a| a.inert).count(),
            self.active
                .values()
                .filter(|a| a.requests.is_empty() && !a.inert)
                .count(),
            self.needed.len(),
            self.repairs.len(),
            self.pending.len(),
            self.claims.len(),
            self.stats()
        )
    }

    /// Positions waiting for a repair.
    pub fn repairs(&self) -> usize {
        self.repairs.len()
    }
}

/// Known results, with the requests of `missing` answered "no leaf" (an expansion applied before
/// its re-searches are known; they follow as repairs).
struct Pending<'a> {
    known: &'a dyn Results,
    missing: &'a [LeafRequest],
}

impl Results for Pending<'_> {
    fn result(&self, request: &LeafRequest) -> Option<LeafResult> {
        self.known.result(request).or_else(|| {
            self.missing.contains(request).then_some(LeafResult {
                mv: bookfarm_engine::Move::None,
                score: -127,
                depth: 0,
                selectivity: 0,
                exact: false,
                nodes: 0,
                elapsed: std::time::Duration::ZERO,
            })
        })
    }
}

/// Whether the current leaf of `id` is the result `r` of the search `q`: `q` searched the
/// position (in some orientation) at its level with some of its current links excluded (a link
/// added later to a move that was not the leaf needs no new search, as in Edax), and `r`,
/// mapped to the book's orientation, is the leaf.
pub fn leaf_came_from(book: &MemBook, id: NodeId, q: &LeafRequest, r: &LeafResult) -> bool {
    let board = book.board(id);
    let leaf = book.leaf(id);
    if q.level != book.level(id) || leaf.mv == bookfarm_engine::Move::None {
        return false;
    }
    let mut links = 0u64;
    for l in book.links(id) {
        if let bookfarm_engine::Move::Square(s) = l.mv {
            links |= s.bit();
        }
    }
    (0..8u8).any(|s| {
        transform(&q.board, s) == board
            && transform_bits(q.excluded, s) & !links == 0
            && transform_move(r.mv, s) == leaf.mv
            && i32::from(leaf.score) == r.score.clamp(-127, 127)
    })
}
