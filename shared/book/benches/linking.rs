//! Cost of growth's transposition linking per new position on a synthetic book of ≥ 1 M
//! positions (random games of 30 plies, Edax-style links): for a random leaf child not in the
//! book, finding its book parents ([`plan_parent_links`]: un-moves, one hash probe each, the
//! moves of each parent found) and adding their links ([`apply_parent_links`]), timed one by
//! one; prints p50/p99/max and the mean numbers of un-moves, parents and re-searches.
//!
//! `cargo bench -p bookfarm-book --bench linking`; `BOOK_BENCH_POSITIONS` overrides the size.

use bookfarm_book::grow::{apply_parent_links, plan_parent_links};
use bookfarm_book::negamax::negamax;
use bookfarm_book::synth::{Draw, SplitMix64, SynthParams, random_book};
use bookfarm_book::{NodeId, Position};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::unmove::for_each_unmove;
use bookfarm_engine::{Move, Square};
use rand::SeedableRng;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const SAMPLES: usize = 20_000;

/// A stand-in search result: the lowest open square (re-searches are searches, not linking).
fn lowest_open(r: &LeafRequest) -> LeafResult {
    let open = r.board.moves() & !r.excluded;
    let mv = Square::new(open.trailing_zeros() as u8).map_or(Move::None, Move::Square);
    LeafResult {
        mv,
        score: 0,
        depth: 0,
        selectivity: 5,
        exact: false,
        nodes: 0,
        elapsed: Duration::ZERO,
    }
}

fn main() {
    let positions = std::env::var("BOOK_BENCH_POSITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let t = Instant::now();
    let mut book = random_book(SynthParams {
        seed: 1,
        positions,
        plies: 30,
        level: Some(10),
    });
    negamax(&mut book);
    eprintln!(
        "synthetic book: {} positions, {} links, built in {:.1?}",
        book.len(),
        book.n_links(),
        t.elapsed()
    );
    let ids: Vec<NodeId> = book.ids().collect();
    let mut rng = SplitMix64::seed_from_u64(11);
    let (mut find, mut link, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let (mut unmoves, mut parents, mut searches) = (0usize, 0usize, 0usize);
    let mut max_unmoves = 0usize;
    for _ in 0..SAMPLES * 20 {
        if total.len() == SAMPLES {
            break;
        }
        let id = ids[rng.below(ids.len() as u64) as usize];
        let leaf = book.leaf(id);
        if !matches!(leaf.mv, Move::Square(_)) {
            continue;
        }
        let child = book.board(id).next_unchecked(leaf.mv);
        if book.probe(&child).is_some() {
            continue;
        }
        let mut n = 0;
        for_each_unmove(&child, |_, _| n += 1);
        unmoves += n;
        max_unmoves = max_unmoves.max(n);
        let t0 = Instant::now();
        let plan = plan_parent_links(&book, &child);
        let t1 = Instant::now();
        // The child enters the book (not timed), then its parents link to it.
        let results: HashMap<LeafRequest, LeafResult> = plan
            .iter()
            .filter_map(|p| p.request)
            .map(|r| (r, lowest_open(&r)))
            .collect();
        book.insert_new(&Position::new(canonical(&child).0, 10));
        let t2 = Instant::now();
        let ch = apply_parent_links(&mut book, &plan, 0, &results).expect("every result known");
        let t3 = Instant::now();
        assert!(ch.links >= 1, "the expanded parent links to its leaf child");
        parents += plan.len();
        searches += ch.searches;
        find.push(t1 - t0);
        link.push(t3 - t2);
        total.push((t1 - t0) + (t3 - t2));
    }
    let n = total.len().max(1) as f64;
    for (name, v) in [
        ("find parents", &mut find),
        ("add links", &mut link),
        ("linking", &mut total),
    ] {
        v.sort();
        let pct = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
        eprintln!(
            "{name}: {} new positions, p50 {:?}, p99 {:?}, max {:?}",
            v.len(),
            pct(0.50),
            pct(0.99),
            v.last().copied().unwrap_or_default()
        );
    }
    eprintln!(
        "per new position: {:.1} un-moves (max {max_unmoves}), {:.2} parents linked, {:.2} re-searches",
        unmoves as f64 / n,
        parents as f64 / n,
        searches as f64 / n
    );
}
