//! Book benchmarks on a synthetic book of ≥ 1 M positions (random games, Edax-style links):
//! book.dat read and write (positions/s), full negamax (time per position), incremental update
//! latency (p50/p99 of one leaf change + propagation), and heap bytes per position.
//!
//! `BOOK_BENCH_POSITIONS` overrides the size (default 1 000 000).

use bookfarm_book::edax::{book_to_bytes, read_book};
use bookfarm_book::mem::child_board;
use bookfarm_book::negamax::{link_position, negamax, propagate, sort_links};
use bookfarm_book::synth::{Draw, SplitMix64, SynthParams, random_book, random_leaf};
use bookfarm_book::{Link, MemBook, NodeId, Position};
use bookfarm_engine::Move;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::SeedableRng;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn positions() -> usize {
    std::env::var("BOOK_BENCH_POSITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// The benchmark book, negamaxed, built once.
fn book() -> &'static MemBook {
    static BOOK: OnceLock<MemBook> = OnceLock::new();
    BOOK.get_or_init(|| {
        let t = Instant::now();
        let mut b = random_book(SynthParams {
            seed: 1,
            positions: positions(),
            plies: 30,
            level: Some(10),
        });
        let s = negamax(&mut b);
        assert_eq!(s.missing_children, 0);
        eprintln!(
            "synthetic book: {} positions, {} links, built in {:.1?}",
            b.len(),
            b.n_links(),
            t.elapsed()
        );
        b
    })
}

fn bench_io(c: &mut Criterion) {
    let book = book();
    let bytes = book_to_bytes(book);
    let mut g = c.benchmark_group("book.dat");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(book.len() as u64));
    g.bench_function("read", |b| {
        b.iter(|| {
            let r = read_book(black_box(&bytes)).expect("valid");
            assert_eq!(r.len(), book.len());
            r
        })
    });
    g.bench_function("write", |b| {
        b.iter(|| {
            let w = book_to_bytes(black_box(book));
            assert_eq!(w.len(), bytes.len());
            w
        })
    });
    g.finish();
}

fn bench_negamax(c: &mut Criterion) {
    let book = book();
    let mut g = c.benchmark_group("negamax");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(book.len() as u64));
    let mut work = book.clone();
    g.bench_function("full", |b| {
        b.iter(|| {
            let s = negamax(&mut work);
            assert_eq!(s.positions, book.len());
            s
        })
    });
    // Edax's figures (edax-timings.txt: 0.135 ms per `book negamax` on book-small.dat, 1,054
    // positions, including its sort) are on cache-resident books: compare like with like.
    if let Some(dir) = bookfarm_engine::testdata::shared_dir() {
        let bytes = std::fs::read(dir.join("golden/book-small.dat")).expect("golden book");
        let mut small = read_book(&bytes).expect("golden book");
        g.throughput(Throughput::Elements(small.len() as u64));
        g.bench_function("golden-small+sort", |b| {
            b.iter(|| {
                let s = negamax(&mut small);
                sort_links(&mut small);
                s
            })
        });
    }
    let mut synth8k = random_book(SynthParams {
        seed: 3,
        positions: 8_479,
        plies: 16,
        level: Some(4),
    });
    g.throughput(Throughput::Elements(synth8k.len() as u64));
    g.bench_function("synthetic-8k", |b| b.iter(|| negamax(&mut synth8k)));
    g.finish();
}

/// Incremental latency: random leaf score changes, each followed by `propagate`, timed one by
/// one; prints p50/p99/max and checks the result against a full recompute at the end.
fn incremental_latency() {
    let mut work = book().clone();
    let t = Instant::now();
    work.build_parent_index();
    let index_time = t.elapsed();
    let ids: Vec<NodeId> = work.ids().collect();
    let mut rng = SplitMix64::seed_from_u64(7);
    let mut times = Vec::with_capacity(20_000);
    let mut touched = 0usize;
    for _ in 0..20_000 {
        let id = ids[rng.below(ids.len() as u64) as usize];
        let leaf = work.leaf(id);
        if leaf.mv == Move::None {
            continue;
        }
        work.set_leaf(id, Link::new(rng.score(), leaf.mv));
        let t = Instant::now();
        let s = propagate(&mut work, &[id]);
        times.push(t.elapsed());
        touched += s.positions;
    }
    times.sort();
    let pct = |times: &[Duration], p: f64| times[((times.len() - 1) as f64 * p) as usize];
    // Expansions (edax-spec §4.4): the leaf child enters the book, the leaf becomes a link and a
    // new leaf is chosen. These change n_lines, so they propagate up to every ancestor.
    let mut exp_times = Vec::with_capacity(5_000);
    let mut exp_touched = 0usize;
    for _ in 0..200_000 {
        if exp_times.len() == 5_000 {
            break;
        }
        let id = ids[rng.below(ids.len() as u64) as usize];
        let leaf = work.leaf(id);
        if !matches!(leaf.mv, Move::Square(_)) {
            continue;
        }
        let child = child_board(&work.board(id), leaf.mv);
        if work.find(&child).is_some() {
            continue;
        }
        let t = Instant::now();
        let level = work.level(id);
        let cid = work
            .insert_new(&Position::new(child, level))
            .expect("new child");
        link_position(&mut work, cid);
        random_leaf(&mut work, cid, &mut rng);
        let v = work.score(cid).value;
        work.add_link(id, Link::new((-i32::from(v)) as i8, leaf.mv));
        random_leaf(&mut work, id, &mut rng);
        let s = propagate(&mut work, &[cid, id]);
        exp_times.push(t.elapsed());
        exp_touched += s.positions;
    }
    exp_times.sort();
    let mut full = work.clone();
    negamax(&mut full);
    let same = work.ids().all(|id| {
        let f = full.find(&work.board(id)).expect("same boards");
        work.score(id) == full.score(f) && work.counts(id) == full.counts(f)
    });
    assert!(same, "incremental differs from full recompute");
    eprintln!(
        "incremental: {} updates, p50 {:?}, p99 {:?}, max {:?}, mean positions recomputed {:.1}; \
         parent index built in {:?}",
        times.len(),
        pct(&times, 0.50),
        pct(&times, 0.99),
        times.last().copied().unwrap_or_default(),
        touched as f64 / times.len() as f64,
        index_time
    );
    eprintln!(
        "expansion: {} updates, p50 {:?}, p99 {:?}, max {:?}, mean positions recomputed {:.1}",
        exp_times.len(),
        pct(&exp_times, 0.50),
        pct(&exp_times, 0.99),
        exp_times.last().copied().unwrap_or_default(),
        exp_touched as f64 / exp_times.len().max(1) as f64
    );
    let b = book();
    eprintln!(
        "memory: {:.1} heap bytes/position without parent index, {:.1} with ({} positions, {} links)",
        b.heap_bytes() as f64 / b.len() as f64,
        work.heap_bytes() as f64 / work.len() as f64,
        b.len(),
        b.n_links()
    );
    let read = read_book(&book_to_bytes(b)).expect("valid");
    eprintln!(
        "memory of a book read from book.dat: {:.1} heap bytes/position",
        read.heap_bytes() as f64 / read.len() as f64
    );
    let mut tight = b.clone();
    tight.shrink_to_fit();
    eprintln!(
        "memory after shrink_to_fit: {:.1} heap bytes/position",
        tight.heap_bytes() as f64 / tight.len() as f64
    );
}

fn bench_incremental(_c: &mut Criterion) {
    incremental_latency();
}

criterion_group!(benches, bench_io, bench_negamax, bench_incremental);
criterion_main!(benches);
