//! The asynchronous schedule's properties, checked with the crate's own Edax-literal selection:
//! whatever order and batches results land in, the program ends with a book on which
//! (1) the serial selection with the program's parameters finds nothing to expand,
//! (2) `book fix` and `book link` change nothing (every position is well formed, linked, and a
//!     negamax fixed point), and
//! (3) every leaf is the result of a search of its position with its current links excluded;
//! and retracting lies (retract-and-repair) ends in the same properties with honest leaves only.

use crate::common;

use bookfarm_book::driver::run_serial;
use bookfarm_book::grow::{check_position, fix, link_command};
use bookfarm_book::negamax::negamax_from;
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::research::{Upgrade, upgrade_mark};
use bookfarm_book::schedule::run::{AsyncOptions, Order, leaf_came_from};
use bookfarm_book::schedule::{AsyncGrowth, AsyncProgress};
use bookfarm_book::select::{
    Deviate, DeviatePass, deviate_pass, enhance_mark, extend_mark, play_mark,
};
use bookfarm_book::synth::{Draw, SplitMix64};
use bookfarm_book::{BookHeader, MemBook, NodeId};
use bookfarm_engine::board::BitIter;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use rand::SeedableRng;
use std::collections::{HashMap, HashSet};

/// The test search: the crate's mock with scores folded into −4..=4 (finished games keep
/// their score), so that the windows of the selectors hold much of the book.
fn search(req: &LeafRequest) -> LeafResult {
    let mut r = common::mock(req);
    if r.mv != Move::None {
        r.score = r.score.rem_euclid(9) - 4;
    }
    r
}

/// A new book (the start position searched) of `depth` plies at `level`; the results it used
/// are recorded in `farm`.
fn new_book(level: i32, depth: i32, farm: &mut Farm) -> MemBook {
    let mut book = MemBook::new(BookHeader::new(level, depth));
    serially(&mut book, Operation::New, farm);
    book
}

/// Run `op` serially with the mock search, recording its results in `farm`.
fn serially(book: &mut MemBook, op: Operation, farm: &mut Farm) {
    let results = &mut farm.results;
    run_serial(book, op, &mut |r: &LeafRequest| {
        let res = search(r);
        results.insert(*r, res);
        res
    });
}

/// A result that is not the search's: another open move when there is one, the score moved.
fn lie(req: &LeafRequest) -> LeafResult {
    let mut r = search(req);
    let open = req.board.moves() & !req.excluded;
    if let Some(sq) = BitIter(open).last()
        && r.mv != Move::Pass
    {
        r.mv = Move::Square(sq);
    }
    r.score = (r.score + 9).clamp(-64, 64);
    r
}

/// A farm in miniature: the program's needed requests are answered in random order and random
/// batches; a request no longer needed is dropped unless "leased" (then its result still lands,
/// as a late worker's would). `liars` answers those requests with a lie.
struct Farm {
    rng: SplitMix64,
    results: HashMap<LeafRequest, LeafResult>,
    outstanding: Vec<LeafRequest>,
    leased: HashSet<LeafRequest>,
    /// Requests whose stored result is a lie.
    lies: HashSet<LeafRequest>,
    /// Answer a request with a lie with this probability (percent).
    lie_percent: u64,
    batch: usize,
}

impl Farm {
    fn new(seed: u64, batch: usize) -> Farm {
        Farm {
            rng: SplitMix64::seed_from_u64(seed),
            results: HashMap::new(),
            outstanding: Vec::new(),
            leased: HashSet::new(),
            lies: HashSet::new(),
            lie_percent: 0,
            batch,
        }
    }

    /// Run `g` to its end; returns the number of runs.
    fn run(&mut self, g: &mut AsyncGrowth, book: &mut MemBook) -> usize {
        let mut landed = Vec::new();
        for runs in 1.. {
            let progress = g.run(book, &self.results, &landed);
            landed.clear();
            let d = g.take_delta();
            let mut out: HashSet<LeafRequest> = self.outstanding.iter().copied().collect();
            for (r, _) in d.added {
                if !self.results.contains_key(&r) && out.insert(r) {
                    self.outstanding.push(r);
                }
            }
            for r in d.removed {
                if !self.leased.contains(&r) {
                    self.outstanding.retain(|x| *x != r);
                }
            }
            if progress == AsyncProgress::Done {
                return runs;
            }
            assert!(
                !self.outstanding.is_empty(),
                "the program waits for nothing but is not done: {}",
                g.summary()
            );
            // Some searches start (leased), some finish.
            for _ in 0..self.batch {
                let i = self.rng.below(self.outstanding.len() as u64) as usize;
                self.leased.insert(self.outstanding[i]);
            }
            let k = 1 + self
                .rng
                .below(self.batch.min(self.outstanding.len()) as u64)
                as usize;
            for _ in 0..k {
                let i = self.rng.below(self.outstanding.len() as u64) as usize;
                let r = self.outstanding.swap_remove(i);
                self.leased.remove(&r);
                let res = if self.rng.below(100) < self.lie_percent {
                    self.lies.insert(r);
                    lie(&r)
                } else {
                    search(&r)
                };
                self.results.insert(r, res);
                landed.push(r);
            }
        }
        unreachable!()
    }
}

/// Property (1) with the crate's serial selectors.
fn serial_selection_finds_nothing(book: &mut MemBook, op: &Operation) {
    let root = book.find(&Board::start()).expect("root");
    negamax_from(book, root);
    let expandable = |b: &MemBook, ids: Vec<NodeId>| -> Vec<NodeId> {
        ids.into_iter()
            .filter(|&id| b.leaf(id).mv != Move::None)
            .collect()
    };
    let marked = match op {
        Operation::Deviate { params, .. } => {
            let s = i32::from(book.score(root).value);
            let mut m = deviate_pass(book, root, *params, s, DeviatePass::RootSide);
            m.extend(deviate_pass(
                book,
                root,
                *params,
                s,
                DeviatePass::OpponentSide,
            ));
            expandable(book, m)
        }
        Operation::Enhance { .. } => expandable(book, enhance_mark(book, root)),
        Operation::Play => expandable(book, play_mark(book, root)),
        Operation::Extend => expandable(book, extend_mark(book, root)),
        Operation::Upgrade { params, .. } => upgrade_mark(book, root, params.clamped()),
        _ => unreachable!(),
    };
    assert!(
        marked.is_empty(),
        "{op:?}: the serial selection marks {} positions",
        marked.len()
    );
}

/// Property (2): `book fix` finds nothing to fix and `book link` + negamax change nothing.
fn fix_changes_nothing(book: &MemBook) {
    for p in book.positions() {
        assert_eq!(check_position(&p), None, "{}", p.board);
    }
    let mut fixed = book.clone();
    let report = fix(&mut fixed, &mut |r| panic!("book fix searched {r:?}"));
    assert!(report.problems.is_empty() && report.changes.searches == 0);
    let mut linked = book.clone();
    let r = link_command(&mut linked, &mut |r| panic!("book link searched {r:?}"));
    assert!(r.is_fixed_point(), "{r:?}");
}

/// Property (3): every leaf with a move is the stored (honest) result of a request that
/// searched its position with its current links excluded.
fn leaves_are_results(book: &MemBook, farm: &Farm) {
    let mut by_board: HashMap<Board, Vec<LeafRequest>> = HashMap::new();
    for r in farm.results.keys() {
        by_board
            .entry(bookfarm_engine::symmetry::canonical(&r.board).0)
            .or_default()
            .push(*r);
    }
    for id in book.ids() {
        let leaf = book.leaf(id);
        if leaf.mv == Move::None {
            continue;
        }
        let board = book.board(id);
        let found = by_board
            .get(&board)
            .into_iter()
            .flatten()
            .any(|q| !farm.lies.contains(q) && leaf_came_from(book, id, q, &farm.results[q]));
        assert!(found, "leaf {:?} of {board} is no honest result", leaf);
    }
}

fn assert_finished(book: &mut MemBook, op: &Operation, farm: &Farm) {
    serial_selection_finds_nothing(book, op);
    fix_changes_nothing(book);
    leaves_are_results(book, farm);
}

/// The program's options by test case: both orders, with and without early children.
fn options(case: u64) -> AsyncOptions {
    AsyncOptions {
        order: if case.is_multiple_of(2) {
            Order::BestFirst
        } else {
            Order::Marking
        },
        early_child: case.is_multiple_of(3),
    }
}

fn deviate(rel: i32, abs: i32) -> Operation {
    Operation::Deviate {
        params: Deviate::new(rel, abs),
    }
}

#[test]
fn deviate_in_any_order_ends_in_a_finished_book() {
    for seed in 1..=6u64 {
        let op = deviate(2, 4);
        let mut farm = Farm::new(seed, 1 + (seed as usize % 3) * 10);
        let mut book = new_book(2, 8, &mut farm);
        let mut g = AsyncGrowth::new(Program::new(op.clone())).expect("async");
        g.set_options(options(seed));
        farm.run(&mut g, &mut book);
        assert!(g.is_done());
        assert!(book.len() > 10, "{}", book.len());
        assert_eq!(g.stats().disagreements, 0);
        assert_finished(&mut book, &op, &farm);
        // The serial program on the same start grows a book of the same kind.
        let mut other = Farm::new(seed, 1);
        let mut serial = new_book(2, 8, &mut other);
        serially(&mut serial, op.clone(), &mut other);
        serial_selection_finds_nothing(&mut serial, &op);
    }
}

#[test]
fn every_program_kind_ends_in_a_finished_book() {
    // Each program with the depth of its new book (and a serial deviate first for upgrade,
    // which re-searches what is there).
    let programs = [
        (
            Operation::Enhance {
                midgame_error: 5,
                endcut_error: 5,
                until_stable: true,
            },
            8,
            false,
        ),
        (Operation::Play, 8, false),
        (Operation::Extend, 6, false),
        (
            Operation::Upgrade {
                params: Upgrade { level: 6, error: 4 },
            },
            7,
            true,
        ),
        (deviate(0, 2), 8, false),
        (deviate(3, 6), 6, false),
    ];
    for (k, (op, depth, grown)) in programs.iter().enumerate() {
        for seed in 1..=3u64 {
            let mut farm = Farm::new(seed * 10 + k as u64, 9);
            let mut book = new_book(2, *depth, &mut farm);
            if *grown {
                serially(&mut book, deviate(1, 1), &mut farm);
            }
            // What the serial program does from the same book.
            let mut serial = book.clone();
            let state = run_serial(&mut serial, op.clone(), &mut search);
            assert!(state.changes.searches > 0, "{op:?}");
            let mut g = AsyncGrowth::new(Program::new(op.clone())).expect("async");
            g.set_options(options(seed + k as u64));
            farm.run(&mut g, &mut book);
            assert!(g.is_done());
            assert!(g.stats().applied > 0, "{op:?} {:?}", g.stats());
            assert_eq!(g.stats().disagreements, 0);
            assert_finished(&mut book, op, &farm);
        }
    }
}

/// Lies are caught after they were applied: retract-and-repair clears the leaves they gave,
/// searches them again, selection goes on, and the finished book holds honest leaves only.
#[test]
fn retracted_lies_are_repaired_into_a_finished_book() {
    let mut total_cleared = 0;
    for seed in 1..=4u64 {
        let op = deviate(2, 4);
        let mut farm = Farm::new(seed, 6);
        let mut book = new_book(2, 8, &mut farm);
        farm.lie_percent = 15;
        let mut g = AsyncGrowth::new(Program::new(op.clone())).expect("async");
        g.set_options(options(seed));
        // Grow part of the way (or all of it) with lies among the results.
        let stop = 20 + seed as usize * 15;
        let mut landed = Vec::new();
        for _ in 0..stop {
            if g.run(&mut book, &farm.results, &landed) == AsyncProgress::Done {
                break;
            }
            landed.clear();
            for (r, _) in g.take_delta().added {
                farm.outstanding.push(r);
            }
            farm.outstanding
                .sort_by_key(|r| (r.board.player, r.board.opponent, r.excluded));
            farm.outstanding.dedup();
            farm.outstanding.retain(|r| !farm.results.contains_key(r));
            for _ in 0..3.min(farm.outstanding.len()) {
                let i = farm.rng.below(farm.outstanding.len() as u64) as usize;
                let r = farm.outstanding.swap_remove(i);
                let res = if farm.rng.below(100) < farm.lie_percent {
                    farm.lies.insert(r);
                    lie(&r)
                } else {
                    search(&r)
                };
                farm.results.insert(r, res);
                landed.push(r);
            }
        }
        // The liar is caught: its results are dropped and retracted.
        let dropped: Vec<(LeafRequest, LeafResult)> =
            farm.lies.iter().map(|r| (*r, farm.results[r])).collect();
        assert!(!dropped.is_empty());
        for (r, _) in &dropped {
            farm.results.remove(r);
        }
        farm.lies.clear();
        farm.lie_percent = 0;
        let cleared = g.retract(&mut book, &dropped);
        for b in &cleared {
            let id = book.find(b).expect("a cleared position stays in the book");
            assert_eq!(book.leaf(id).mv, Move::None, "{b}: leaf kept after retract");
        }
        // Every cleared leaf is to be searched again (early children add repairs of their own).
        assert!(g.repairs() >= cleared.len());
        total_cleared += cleared.len();
        g.run(&mut book, &farm.results, &[]);
        // Only honest results from now on; the outstanding list starts over from the program.
        farm.outstanding.clear();
        for (r, _) in g.needed() {
            farm.outstanding.push(r);
        }
        g.take_delta();
        farm.run(&mut g, &mut book);
        assert!(g.is_done());
        assert_eq!(g.repairs(), 0);
        assert_finished(&mut book, &op, &farm);
    }
    // Some lie was in the book when the liar was caught (else retract was not tested).
    assert!(total_cleared > 0);
}
