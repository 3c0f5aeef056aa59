//! Negamax exactly as Edax (edax-spec §4.1), as a full recompute from a root and as incremental
//! propagation through the child→parents index, plus Edax's link helpers (`position_link`,
//! `book_sort`).
//!
//! A position's result (value, bounds, W/D/L, lines, link scores) is a pure function of its own
//! leaf, level and links and of its children's results: Edax's `done` flag only memoizes
//! transpositions inside one call, and counts are added once per parent link. So recomputing a
//! position from its children, bottom-up, gives what the full recursion gives for every position
//! reachable from the root; [`propagate`] relies on that.

use crate::mem::{Counts, MemBook, NegamaxMemo, NodeId, Score, child_board};
use crate::model::{Link, SCORE_INF};
use bookfarm_engine::level::{NO_SELECTIVITY, level_params};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

/// What a negamax run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NegamaxStats {
    /// Positions (re)computed.
    pub positions: usize,
    /// Positions whose value, bounds or counts changed.
    pub changed: usize,
    /// Link scores rewritten.
    pub link_updates: usize,
    /// Links whose child is not in the book (skipped; Edax would crash).
    pub missing_children: usize,
}

impl std::ops::AddAssign for NegamaxStats {
    fn add_assign(&mut self, o: NegamaxStats) {
        self.positions += o.positions;
        self.changed += o.changed;
        self.link_updates += o.link_updates;
        self.missing_children += o.missing_children;
    }
}

/// The leaf's contribution: (value, lower, upper, W, D, L, N) before the links (Edax's
/// `position_negamax` prologue).
fn leaf_part(board: &Board, level: u8, leaf: Link, mid: i32, endcut: i32) -> ([i32; 3], [u64; 4]) {
    let e = board.empties();
    let (d, sel) = level_params(level, e);
    let bias = (d & 1) as i32 - (e & 1) as i32;
    let inf = i32::from(SCORE_INF);
    let mut s = [-inf, -inf, -inf];
    let mut c = [0u64; 4];
    if i32::from(leaf.score) > -inf {
        let v = i32::from(leaf.score);
        s[0] = v;
        if d == e && sel == NO_SELECTIVITY {
            s[1] = v;
            s[2] = v;
            match v.cmp(&0) {
                std::cmp::Ordering::Greater => c[0] += 1,
                std::cmp::Ordering::Equal => c[1] += 1,
                std::cmp::Ordering::Less => c[2] += 1,
            }
        } else if d == e {
            s[1] = v - endcut;
            s[2] = v + endcut;
        } else {
            s[1] = v - mid - bias;
            s[2] = v + mid - bias;
        }
        c[3] += 1;
    }
    (s, c)
}

/// The (lower, upper) bounds the leaf of `id` contributes (solved, endcut or midgame with the
/// parity bias, with the header's errors), or `None` without a leaf score.
pub fn leaf_bounds(book: &MemBook, id: NodeId) -> Option<(i32, i32)> {
    let leaf = book.leaf(id);
    if i32::from(leaf.score) <= -i32::from(SCORE_INF) {
        return None;
    }
    let h = book.header();
    let (s, _) = leaf_part(
        &book.board(id),
        book.level(id),
        leaf,
        h.midgame_error,
        h.endcut_error,
    );
    Some((s[1], s[2]))
}

/// Recompute `id` from its leaf and its children's current results, writing value, bounds,
/// counts and link scores. Returns whether value, bounds or counts changed.
///
/// `children`, when given, holds the child id of each link (`u32::MAX` when missing), already
/// looked up by the caller.
fn evaluate(
    book: &mut MemBook,
    id: NodeId,
    children: Option<&[u32]>,
    stats: &mut NegamaxStats,
) -> bool {
    let h = book.header();
    let (mid, endcut) = (h.midgame_error, h.endcut_error);
    let board = book.board(id);
    let (mut s, mut c) = leaf_part(&board, book.level(id), book.leaf(id), mid, endcut);
    for i in 0..book.n_link(id) {
        let l = book.link(id, i);
        let child = match children {
            Some(ch) => (ch[i] != u32::MAX).then_some(NodeId(ch[i])),
            None => book.find(&child_board(&board, l.mv)),
        };
        let Some(cid) = child else {
            stats.missing_children += 1;
            continue;
        };
        let cs = book.score(cid);
        let cc = book.counts(cid);
        let mut score = l.score;
        if i32::from(score) != -i32::from(cs.value) {
            // Edax stores the negated value into a signed char.
            score = (-i32::from(cs.value)) as i8;
            book.set_link_score(id, i, score);
            stats.link_updates += 1;
        }
        s[0] = s[0].max(i32::from(score));
        s[1] = s[1].max(-i32::from(cs.upper));
        s[2] = s[2].max(-i32::from(cs.lower));
        c[0] += u64::from(cc.n_losses);
        c[1] += u64::from(cc.n_draws);
        c[2] += u64::from(cc.n_wins);
        c[3] += u64::from(cc.n_lines);
    }
    let sat = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
    let score = Score {
        value: s[0] as i16,
        lower: s[1] as i16,
        upper: s[2] as i16,
    };
    let counts = Counts {
        n_wins: sat(c[0]),
        n_draws: sat(c[1]),
        n_losses: sat(c[2]),
        n_lines: sat(c[3]),
    };
    stats.positions += 1;
    let changed = book.score(id) != score || book.counts(id) != counts;
    if changed {
        book.set_score(id, score);
        book.set_counts(id, counts);
        stats.changed += 1;
    }
    changed
}

/// Depth-first recursion with Edax's `done` memo. `stack` is a scratch stack of child ids:
/// each call pushes its children's ids, recurses, evaluates from them and pops them.
fn negamax_rec(
    book: &mut MemBook,
    id: NodeId,
    done: &mut [u64],
    stack: &mut Vec<u32>,
    stats: &mut NegamaxStats,
) {
    let k = id.index();
    if done[k / 64] & (1 << (k % 64)) != 0 {
        return;
    }
    done[k / 64] |= 1 << (k % 64);
    let board = book.board(id);
    let base = stack.len();
    let n = book.n_link(id);
    for i in 0..n {
        let l = book.link(id, i);
        let cid = book
            .find(&child_board(&board, l.mv))
            .map_or(u32::MAX, |c| c.0);
        stack.push(cid);
    }
    for i in 0..n {
        let cid = stack[base + i];
        if cid != u32::MAX {
            negamax_rec(book, NodeId(cid), done, stack, stats);
        }
    }
    evaluate(book, id, Some(&stack[base..]), stats);
    stack.truncate(base);
}

/// Edax's `position_negamax` from `root` after `book_clean`: every position reachable from it
/// is recomputed once; others keep their values.
pub fn negamax_from(book: &mut MemBook, root: NodeId) -> NegamaxStats {
    full_negamax(book, root).0
}

/// The full recursion from `root`: its statistics and the positions it reached (a bit per id).
fn full_negamax(book: &mut MemBook, root: NodeId) -> (NegamaxStats, Vec<u64>) {
    let mut done = vec![0u64; book.id_bound().div_ceil(64)];
    let mut stats = NegamaxStats::default();
    let mut stack = Vec::with_capacity(64 * 64);
    negamax_rec(book, root, &mut done, &mut stack, &mut stats);
    (stats, done)
}

/// What [`negamax_from`] gives, recomputing only what changed since the last `renegamax` from
/// the same `root`: the positions touched since (leaves, links, levels, new positions) and their
/// ancestors the root reaches, plus every position that became reachable. The growth driver
/// closes each of Edax's deviate/enhance iterations with a negamax of the whole book; on a big
/// book with a small pass this is most of a pass's cost.
///
/// Equal to [`negamax_from`] because a position's result is a pure function of its own data and
/// its children's results (module docs), positions the root reached at the last run held full
/// negamax results then, and everything that changed since is journaled by the book (the memo
/// is dropped by mutations that are not: removals, compaction, header changes). The first call,
/// and any call after the memo was dropped, runs the full recursion. Debug builds check every
/// incremental run against the full recursion on a copy.
pub fn renegamax(book: &mut MemBook, root: NodeId) -> NegamaxStats {
    let Some(memo) = book.take_negamax_memo().filter(|m| m.root == root) else {
        let (stats, done) = full_negamax(book, root);
        book.set_negamax_memo(NegamaxMemo {
            root,
            reach: done,
            dirty: Default::default(),
        });
        return stats;
    };
    #[cfg(debug_assertions)]
    let expected = {
        let mut copy = book.clone();
        negamax_from(&mut copy, root);
        copy
    };
    let NegamaxMemo {
        mut reach, dirty, ..
    } = memo;
    reach.resize(book.id_bound().div_ceil(64), 0);
    let reached =
        |reach: &[u64], id: NodeId| reach[id.index() / 64] & (1 << (id.index() % 64)) != 0;
    let mut stats = NegamaxStats::default();
    // Positions that became reachable (new positions, positions linked for the first time)
    // hang below touched positions the root reached: recompute each such subtree in full.
    let mut stack = Vec::with_capacity(64 * 64);
    for &id in &dirty.ids {
        if !book.is_live(id) || !reached(&reach, id) {
            continue;
        }
        let board = book.board(id);
        for i in 0..book.n_link(id) {
            let mv = book.link(id, i).mv;
            if let Some(c) = book.find(&child_board(&board, mv))
                && !reached(&reach, c)
            {
                negamax_rec(book, c, &mut reach, &mut stack, &mut stats);
            }
        }
    }
    let changed: Vec<NodeId> = dirty
        .ids
        .iter()
        .copied()
        .filter(|&id| book.is_live(id) && reached(&reach, id))
        .collect();
    stats += propagate_within(book, &changed, &|id| reached(&reach, id), true);
    book.set_negamax_memo(NegamaxMemo {
        root,
        reach,
        dirty: Default::default(),
    });
    #[cfg(debug_assertions)]
    for id in book.ids() {
        debug_assert!(
            book.position(id) == expected.position(id),
            "incremental negamax differs from the full recursion at {:?}",
            book.board(id)
        );
    }
    stats
}

/// Edax's `book_negamax`: negamax from the start position (nothing happens without it).
pub fn negamax(book: &mut MemBook) -> NegamaxStats {
    match book.find(&Board::start()) {
        Some(root) => negamax_from(book, root),
        None => NegamaxStats::default(),
    }
}

/// Recompute every position once, children before parents: what [`propagate`] over every id
/// computes (it evaluates each queued position once in the same order, since every position is
/// queued from the start), in one pass, without the parent index, the heap or the queued set.
/// A store's start-up uses it on books of many millions of positions.
pub fn recompute_all(book: &mut MemBook) -> NegamaxStats {
    let ids: Vec<NodeId> = book.ids().collect();
    let keys: Vec<u8> = ids.iter().map(|&id| order_key(&book.board(id))).collect();
    // Counting sort by key (stable: insertion order inside a key, which does not matter since
    // no position of a key is a child of another of the same key).
    let mut start = vec![0usize; usize::from(u8::MAX) + 2];
    for &k in &keys {
        start[usize::from(k) + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut order = vec![NodeId(0); ids.len()];
    for (&id, &k) in ids.iter().zip(&keys) {
        let slot = &mut start[usize::from(k)];
        order[*slot] = id;
        *slot += 1;
    }
    drop((ids, keys));
    let mut stats = NegamaxStats::default();
    for id in order {
        evaluate(book, id, None, &mut stats);
    }
    stats
}

/// Processing key: children before parents. Empties decrease along a move; a pass keeps them,
/// and the passing position (no move) sorts after its child (which has moves).
fn order_key(b: &Board) -> u8 {
    (b.empties() as u8) * 2 + u8::from(b.moves() == 0)
}

/// Incremental negamax: the leaves, levels or links of `changed` were modified; recompute them,
/// then their ancestors through the parent index (built on first use), stopping where value,
/// bounds and counts do not change. Children are always recomputed before their parents, so each
/// position is evaluated at most once per call.
pub fn propagate(book: &mut MemBook, changed: &[NodeId]) -> NegamaxStats {
    propagate_within(book, changed, &|_| true, false)
}

/// [`propagate`] through the ancestors `within` accepts only. With `force`, the parents of every
/// position of `changed` are recomputed even when it did not change now (its result may have
/// changed earlier without its parents following).
fn propagate_within(
    book: &mut MemBook,
    changed: &[NodeId],
    within: &dyn Fn(NodeId) -> bool,
    force: bool,
) -> NegamaxStats {
    if !book.has_parent_index() {
        book.build_parent_index();
    }
    let mut stats = NegamaxStats::default();
    let mut heap = BinaryHeap::new();
    let mut queued = HashSet::new();
    for &id in changed {
        if book.is_live(id) && queued.insert(id) {
            heap.push(Reverse((order_key(&book.board(id)), id)));
        }
    }
    let mut parents = Vec::new();
    let forced: HashSet<NodeId> = if force {
        queued.clone()
    } else {
        HashSet::new()
    };
    while let Some(Reverse((_, id))) = heap.pop() {
        queued.remove(&id);
        if evaluate(book, id, None, &mut stats) || forced.contains(&id) {
            parents.clear();
            parents.extend(book.parents(id));
            for &p in &parents {
                if within(p) && queued.insert(p) {
                    heap.push(Reverse((order_key(&book.board(p)), p)));
                }
            }
        }
    }
    stats
}

/// Edax's `book_sort`: for each position, an (unstable) selection sort of the links by score,
/// descending: for each i, the first strictly greatest link after i is swapped into place.
pub fn sort_links(book: &mut MemBook) {
    let ids: Vec<NodeId> = book.ids().collect();
    for id in ids {
        sort_position_links(book, id);
    }
}

/// `book_sort` for one position.
pub fn sort_position_links(book: &mut MemBook, id: NodeId) {
    let n = book.n_link(id);
    for i in 0..n {
        let mut best = i;
        for j in i + 1..n {
            if book.link(id, j).score > book.link(id, best).score {
                best = j;
            }
        }
        if best != i {
            book.swap_links(id, i, best);
        }
    }
}

/// Edax's `position_link`: for each legal move in increasing square order whose child is in the
/// book, add the link `{-child.value, move}` (Edax `add_link` semantics); a position that must
/// pass gets a PASS link when the swapped board is in the book. Returns the links added.
pub fn link_position(book: &mut MemBook, id: NodeId) -> usize {
    let board = book.board(id);
    let moves = board.moves();
    let mut found = Vec::new();
    if moves != 0 {
        for sq in bookfarm_engine::board::BitIter(moves) {
            let mv = Move::Square(sq);
            if let Some(c) = book.find(&child_board(&board, mv)) {
                found.push(Link::new((-i32::from(book.score(c).value)) as i8, mv));
            }
        }
    } else if board.pass().moves() != 0
        && let Some(c) = book.find(&canonical(&board.pass()).0)
    {
        found.push(Link::new(
            (-i32::from(book.score(c).value)) as i8,
            Move::Pass,
        ));
    }
    found.into_iter().filter(|&l| book.add_link(id, l)).count()
}

/// `position_link` over the whole book (the linking half of Edax's `book_link`; the leaf
/// searches it also runs need the engine and are not done here). Returns the links added.
pub fn link_all(book: &mut MemBook) -> usize {
    let ids: Vec<NodeId> = book.ids().collect();
    ids.into_iter().map(|id| link_position(book, id)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Position;
    use crate::synth::{Draw, SplitMix64, SynthParams, random_book, random_leaf};
    use bookfarm_engine::board::BitIter;
    use rand::SeedableRng;

    /// A random legal move of `b` (a pass when it has none), `None` at the end of the game.
    fn random_move(b: &Board, rng: &mut SplitMix64) -> Option<Move> {
        let moves = b.moves();
        if moves != 0 {
            let k = rng.below(u64::from(moves.count_ones())) as usize;
            BitIter(moves).nth(k).map(Move::Square)
        } else if b.pass().moves() != 0 {
            Some(Move::Pass)
        } else {
            None
        }
    }

    /// Incremental negamax equals the full recursion after the mutations growth makes (new
    /// leaves, new levels, new positions linked below the book, transpositions linked, and
    /// positions that were in the book but unreachable becoming reachable), and recomputes
    /// fewer positions.
    #[test]
    fn renegamax_equals_the_full_recursion_after_growth_like_mutations() {
        for seed in 1..=4u64 {
            let mut book = random_book(SynthParams {
                seed,
                positions: 1_500,
                plies: 12,
                level: None,
            });
            let mut rng = SplitMix64::seed_from_u64(seed * 1_000 + 7);
            // Unreachable positions with stale values: the tails of random games past the
            // book's depth, linked among themselves but not to the book.
            let mut orphans = Vec::new();
            for _ in 0..30 {
                let mut b = Board::start();
                for ply in 0..18 {
                    let Some(mv) = random_move(&b, &mut rng) else {
                        break;
                    };
                    let parent = b;
                    b = b.next_unchecked(mv);
                    if ply >= 13 && book.probe(&b).is_none() {
                        let id = book
                            .insert_new(&Position::new(canonical(&b).0, rng.below(61) as u8))
                            .expect("new position");
                        random_leaf(&mut book, id, &mut rng);
                        orphans.push((parent, id));
                    }
                }
            }
            for &(_, id) in &orphans {
                link_position(&mut book, id);
            }
            let root = book.find(&Board::start()).expect("start position");
            let first = renegamax(&mut book, root);
            let mut fewer = 0;
            for round in 0..12 {
                let ids: Vec<NodeId> = book.ids().collect();
                for _ in 0..20 {
                    let id = ids[rng.below(ids.len() as u64) as usize];
                    match rng.below(3) {
                        0 => random_leaf(&mut book, id, &mut rng),
                        1 => book.set_level(id, rng.below(61) as u8),
                        _ => {
                            // A new position below `id`, linked (with its other book
                            // children) as growth links it.
                            let b = book.board(id);
                            if let Some(mv) = random_move(&b, &mut rng) {
                                let c = child_board(&b, mv);
                                if book.find(&c).is_none() {
                                    let cid = book
                                        .insert_new(&Position::new(c, rng.below(61) as u8))
                                        .expect("new position");
                                    random_leaf(&mut book, cid, &mut rng);
                                    link_position(&mut book, cid);
                                    // Its value, before any parent links to it (growth
                                    // evaluates a new child first): the parent's value then
                                    // moves inside `add_link`, its parents' do not.
                                    propagate(&mut book, &[cid]);
                                }
                                link_position(&mut book, id);
                            }
                        }
                    }
                }
                // Link an unreachable tail to the book: its whole subtree becomes reachable.
                if let Some(&(parent, _)) = orphans.get(round)
                    && let Some(p) = book.probe(&parent)
                {
                    link_position(&mut book, p);
                }
                let mut full = book.clone();
                let want = negamax_from(&mut full, root);
                let got = renegamax(&mut book, root);
                for id in full.ids() {
                    assert_eq!(
                        book.position(id),
                        full.position(id),
                        "seed {seed} round {round}"
                    );
                }
                assert!(got.positions <= want.positions);
                fewer += usize::from(got.positions < want.positions / 2);
            }
            assert!(first.positions > 0);
            assert!(
                fewer >= 6,
                "seed {seed}: incremental runs did not save work ({fewer}/12)"
            );
        }
    }
}
