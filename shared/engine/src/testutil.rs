//! Test and bench support, not part of the engine's API: one small deterministic generator and
//! random playouts from the start position (shared by the unit tests, integration tests and
//! benches, so each failure reproduces from its seed), and the benches' thread CPU clock.

use crate::board::{Board, flips_portable};

/// Xorshift64 (shifts 13, 7, 17): a tiny deterministic generator; the seed must be non-zero.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A square of the non-empty mask `moves` chosen at random (the k-th set bit, lowest first).
    pub fn pick_square(&mut self, moves: u64) -> u8 {
        debug_assert_ne!(moves, 0, "pick_square needs a non-empty mask");
        let k = self.next_u64() % u64::from(moves.count_ones());
        let mut m = moves;
        for _ in 0..k {
            m &= m - 1;
        }
        m.trailing_zeros() as u8
    }
}

/// One random ply from `b`: a random legal move, or a pass when forced; `None` at game over.
pub fn random_ply(rng: &mut XorShift, b: &Board) -> Option<Board> {
    let m = b.moves();
    if m == 0 {
        let pass = b.pass();
        return (pass.moves() != 0).then_some(pass);
    }
    let x = rng.pick_square(m);
    Some(b.play_flips(x, flips_portable(b.player, b.opponent, x)))
}

/// The board after a random game of `plies` plies from the start (a forced pass counts as a ply;
/// the game stops early when it is over).
pub fn random_board(rng: &mut XorShift, plies: u32) -> Board {
    let mut b = Board::start();
    for _ in 0..plies {
        match random_ply(rng, &b) {
            Some(next) => b = next,
            None => break,
        }
    }
    b
}

/// CPU time of the calling thread in seconds (Linux `/proc/thread-self/schedstat`), or `None`
/// where that file does not exist; the benches report nodes per CPU second with it.
pub fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}
