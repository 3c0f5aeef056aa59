//! perft from the start position against OEIS A124004 (pass convention in `perft`'s module docs),
//! with every flip/mobility backend the CPU supports.

use bookfarm_engine::Board;
use bookfarm_engine::flip::{self, Backend, Kernels};
use bookfarm_engine::perft::{divide, perft};
use bookfarm_engine::symmetry::transform;

/// A124004, depths 0..=11.
const A124004: [u64; 12] = [
    1, 4, 12, 56, 244, 1396, 8200, 55092, 390216, 3005288, 24571284, 212258800,
];

#[test]
fn start_position_depths_0_to_11() {
    for (d, &n) in A124004.iter().enumerate() {
        assert_eq!(perft(&Board::start(), d as u32), n, "perft({d})");
    }
}

#[test]
fn every_backend_gives_the_same_counts() {
    // perft(9) walks 3 million leaves through every flip and mobility call, so it exercises the
    // backends on real game positions (the unit tests cover random and line-exhaustive boards).
    let saved = flip::active();
    for b in Backend::available() {
        let k = b.kernels().expect("available backend");
        flip::set_active(k);
        assert_eq!(perft(&Board::start(), 9), A124004[9], "backend {b}");
    }
    // Mixed pairs as chosen by detection must work too.
    flip::set_active(Kernels::detect());
    assert_eq!(perft(&Board::start(), 8), A124004[8]);
    flip::set_active(saved);
}

#[test]
fn divide_and_symmetry() {
    let d = divide(&Board::start(), 7);
    assert_eq!(d.iter().map(|(_, n)| n).sum::<u64>(), A124004[7]);
    // perft is invariant under the 8 symmetries.
    let b = Board::start()
        .play(bookfarm_engine::Square::parse("f5").expect("square"))
        .expect("legal");
    let n = perft(&b, 6);
    for s in 0..8 {
        assert_eq!(perft(&transform(&b, s), 6), n, "symmetry {s}");
    }
}
