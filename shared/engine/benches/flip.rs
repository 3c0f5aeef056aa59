//! Flips and mobility throughput of every backend this CPU supports, on positions taken from a
//! fixed pseudo-random walk of real games (so the mix of squares and densities is realistic).
//!
//! Each iteration computes the flips of every legal move (`flips`) or the mobility (`moves`) of
//! every position; criterion's throughput line gives elements (calls) per second.

use bookfarm_engine::Board;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::flip::Backend;
use bookfarm_engine::testutil::{XorShift, random_ply};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// Positions from pseudo-random games (xorshift choice among legal moves), with their moves.
fn positions() -> Vec<(Board, u64)> {
    let mut out = Vec::new();
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    for _ in 0..200 {
        let mut b = Board::start();
        loop {
            let m = b.moves();
            if m != 0 {
                out.push((b, m));
            }
            match random_ply(&mut rng, &b) {
                Some(next) => b = next,
                None => break,
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let pos = positions();
    let n_flips: u64 = pos.iter().map(|(_, m)| u64::from(m.count_ones())).sum();
    let reference = Backend::Reference.kernels().expect("always available");
    let check: u64 = pos
        .iter()
        .flat_map(|&(b, m)| {
            BitIter(m).map(move |s| reference.flips(b.player, b.opponent, s.index()))
        })
        .fold(0, |a, f| a ^ f.rotate_left(7));

    let mut g = c.benchmark_group("flips");
    g.throughput(Throughput::Elements(n_flips));
    for backend in Backend::available() {
        let k = backend.kernels().expect("available");
        g.bench_function(backend.name(), |bench| {
            bench.iter(|| {
                let mut acc = 0u64;
                for &(b, m) in black_box(&pos) {
                    for s in BitIter(m) {
                        acc ^= k.flips(b.player, b.opponent, s.index()).rotate_left(7);
                    }
                }
                assert_eq!(acc, check);
                acc
            })
        });
    }
    g.finish();

    let moves_check = pos.iter().fold(0u64, |a, &(_, m)| a.wrapping_add(m));
    let mut g = c.benchmark_group("moves");
    g.throughput(Throughput::Elements(pos.len() as u64));
    for backend in Backend::available() {
        let k = backend.kernels().expect("available");
        g.bench_function(backend.name(), |bench| {
            bench.iter(|| {
                let mut acc = 0u64;
                for &(b, _) in black_box(&pos) {
                    acc = acc.wrapping_add(k.moves(b.player, b.opponent));
                }
                assert_eq!(acc, moves_check);
                acc
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
