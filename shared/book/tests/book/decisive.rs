//! The decisive core against brute force on small random books: the walk equals a plain
//! recursion over the unfolded tree, no change of leaves outside the core moves the root's
//! value, and every core leaf of a grown book is the key of a result the program used.

use crate::common;

use bookfarm_book::decisive::{CoreKey, decisive_core};
use bookfarm_book::driver::run_serial;
use bookfarm_book::mem::child_board;
use bookfarm_book::model::SCORE_INF;
use bookfarm_book::negamax::negamax;
use bookfarm_book::program::Operation;
use bookfarm_book::select::Deviate;
use bookfarm_book::synth::{Draw, SplitMix64, SynthParams, random_book};
use bookfarm_book::{BookHeader, Link, MemBook, NodeId};
use bookfarm_engine::Board;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use proptest::prelude::*;
use rand::SeedableRng;
use std::collections::{BTreeSet, HashSet};

/// The core by plain recursion over the unfolded tree (no memo, no explicit stack), with the
/// walk's choice rule: at a lower-bound position the best move, the leaf on ties, then the
/// first link in stored order; at an upper-bound position every move.
fn naive(book: &MemBook, id: NodeId, at_least: bool, out: &mut BTreeSet<Board>) {
    let board = book.board(id);
    let leaf = book.leaf(id);
    let has_leaf = i32::from(leaf.score) > -i32::from(SCORE_INF);
    let children: Vec<(i32, NodeId)> = book
        .links(id)
        .filter_map(|l| book.find(&child_board(&board, l.mv)))
        .map(|c| (-i32::from(book.score(c).value), c))
        .collect();
    if at_least {
        let mut best = has_leaf.then_some((i32::from(leaf.score), None));
        for &(s, c) in &children {
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, Some(c)));
            }
        }
        match best {
            Some((_, None)) => {
                out.insert(board);
            }
            Some((_, Some(c))) => naive(book, c, false, out),
            None => {}
        }
    } else {
        if has_leaf {
            out.insert(board);
        }
        for &(_, c) in &children {
            naive(book, c, true, out);
        }
    }
}

/// A negamaxed synthetic book of about `positions` positions from random games of `plies`.
fn small_book(seed: u64, positions: usize, plies: u32) -> MemBook {
    let mut b = random_book(SynthParams {
        seed,
        positions,
        plies,
        level: None,
    });
    negamax(&mut b);
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_walk_equals_a_plain_recursion(seed in any::<u64>(), n in 5usize..120, plies in 3u32..9) {
        let book = small_book(seed, n, plies);
        let core = decisive_core(&book, &Board::start());
        let root = book.find(&Board::start()).expect("the start position");
        let mut want = BTreeSet::new();
        if core.value.is_some() {
            naive(&book, root, true, &mut want);
            naive(&book, root, false, &mut want);
        }
        let got: BTreeSet<Board> = core.leaves.iter().map(|l| l.board).collect();
        prop_assert_eq!(got.len(), core.leaves.len(), "each position once");
        prop_assert!(core.positions >= got.len());
        prop_assert_eq!(got, want);
    }

    #[test]
    fn leaves_outside_the_core_cannot_move_the_root_value(seed in any::<u64>(), n in 5usize..160,
                                                          plies in 3u32..10, change in any::<u64>()) {
        let mut book = small_book(seed, n, plies);
        let core = decisive_core(&book, &Board::start());
        let Some(v) = core.value else { return Ok(()); };
        let inside: HashSet<Board> = core.leaves.iter().map(|l| l.board).collect();
        // Every leaf score outside the core changes at once, to anything.
        let mut rng = SplitMix64::seed_from_u64(change);
        let ids: Vec<NodeId> = book.ids().collect();
        let mut changed = 0;
        for id in ids {
            let leaf = book.leaf(id);
            if i32::from(leaf.score) > -i32::from(SCORE_INF) && !inside.contains(&book.board(id)) {
                book.set_leaf(id, Link::new(rng.score(), leaf.mv));
                changed += 1;
            }
        }
        negamax(&mut book);
        let root = book.find(&Board::start()).expect("the start position");
        prop_assert_eq!(i32::from(book.score(root).value), v, "{} leaves changed", changed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_core_leaf_of_a_grown_book_is_the_key_of_a_result(depth in 6i32..12, rel in 0i32..4,
                                                              abs in 0i32..6, level in 1i32..4) {
        let mut book = MemBook::new(BookHeader::new(level, depth));
        let mut asked: Vec<(LeafRequest, LeafResult)> = Vec::new();
        let mut search = |r: &LeafRequest| {
            let x = common::mock(r);
            asked.push((*r, x));
            x
        };
        for op in [Operation::New, Operation::Deviate { params: Deviate::new(rel, abs) }] {
            run_serial(&mut book, op, &mut search);
        }
        let keys: HashSet<CoreKey> = asked.iter().map(|(r, x)| CoreKey::of_result(r, x)).collect();
        let core = decisive_core(&book, &Board::start());
        prop_assert!(core.value.is_some());
        prop_assert!(!core.leaves.is_empty());
        for l in &core.leaves {
            prop_assert!(keys.contains(&l.key()), "{:?}", l);
        }
    }
}

/// The core of a small hand-made book: the root's best move is its leaf on one side and a
/// link on the other; the upper bound takes every move.
#[test]
fn a_hand_made_book() {
    use bookfarm_book::Position;
    use bookfarm_engine::{Move, Square};
    let mut book = MemBook::new(BookHeader::new(2, 10));
    let start = Board::start();
    let sq = |s: &str| Move::Square(Square::parse(s).expect("square"));
    // Root: link f5 (child value -3 → link score 3) and leaf d3 scoring 1: value 3.
    let child = child_board(&start, sq("f5"));
    let mut c = Position::new(child, 2);
    c.leaf = Link::new(-3, sq("f6"));
    book.insert_new(&c);
    let mut p = Position::new(start, 2);
    p.links.push(Link::new(0, sq("f5")));
    p.leaf = Link::new(1, sq("d3"));
    book.insert_new(&p);
    negamax(&mut book);
    let core = decisive_core(&book, &start);
    assert_eq!(core.value, Some(3));
    let boards: BTreeSet<Board> = core.leaves.iter().map(|l| l.board).collect();
    // ≥ 3: the link f5, whose child proves ≤ −3 with its leaf; ≤ 3: every root move (the leaf
    // d3, and f5's child proving ≥ −3, its leaf again).
    assert_eq!(boards, BTreeSet::from([start, child]));
    assert_eq!(core.positions, 2);
    // The result behind the root's leaf has the same key, whatever orientation it was asked
    // in (the start position is symmetric: its leaf may be stored as any image of d3).
    let root_leaf = core
        .leaves
        .iter()
        .find(|l| l.board == start)
        .expect("the root's leaf");
    for s in 0..8 {
        use bookfarm_engine::symmetry::{transform, transform_move, transform_square};
        let f5 = Square::parse("f5").expect("square");
        let req = LeafRequest {
            board: transform(&start, s),
            level: 2,
            excluded: transform_square(f5, s).bit(),
        };
        let res = LeafResult {
            mv: transform_move(sq("d3"), s),
            score: 1,
            depth: 2,
            selectivity: 5,
            exact: false,
            nodes: 1,
            elapsed: std::time::Duration::ZERO,
        };
        assert_eq!(
            CoreKey::of_result(&req, &res),
            root_leaf.key(),
            "symmetry {s}"
        );
        let other = LeafResult { score: 3, ..res };
        assert_ne!(CoreKey::of_result(&req, &other), root_leaf.key());
    }
}
