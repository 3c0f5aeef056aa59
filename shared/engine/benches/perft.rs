//! perft(9) (and 10) from the start position, with the active (fastest) flip backend.

use bookfarm_engine::Board;
use bookfarm_engine::perft::perft;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("perft");
    g.sample_size(10);
    g.bench_function("perft9", |b| {
        b.iter(|| {
            let n = perft(black_box(&Board::start()), 9);
            assert_eq!(n, 3_005_288);
            n
        })
    });
    g.bench_function("perft10", |b| {
        b.iter(|| {
            let n = perft(black_box(&Board::start()), 10);
            assert_eq!(n, 24_571_284);
            n
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
