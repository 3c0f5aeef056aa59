//! Deterministic synthetic books for tests and benchmarks: the positions of random games from
//! the start position, linked as Edax links them, with random levels and random leaf scores.
//! The books are structurally valid Edax books (canonical boards, legal links and leaves, no
//! leaf on a link move), so every reader check and algorithm applies to them.

use crate::mem::{MemBook, NodeId};
use crate::model::{BAD_LINK, BookHeader, Link, Position};
use crate::negamax::link_position;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use rand::{Rng, SeedableRng};

/// The generator of synthetic books: small, fast and seedable (`SplitMix64::seed_from_u64`).
pub use rand_xoshiro::SplitMix64;

/// The draws synthetic books and their tests make, on any generator.
pub trait Draw: Rng {
    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.random_range(0..n)
    }

    /// A score in −64..=64.
    fn score(&mut self) -> i8 {
        self.random_range(-64..=64)
    }
}

impl<R: Rng + ?Sized> Draw for R {}

/// Parameters of a synthetic book.
#[derive(Debug, Clone, Copy)]
pub struct SynthParams {
    /// Random seed.
    pub seed: u64,
    /// Stop adding games once the book holds this many positions.
    pub positions: usize,
    /// Plies per game (the book depth).
    pub plies: u32,
    /// Level of every position, or `None` for a random level 0..=60 per position.
    pub level: Option<u8>,
}

/// Pick a random set bit of a non-zero mask.
fn random_bit(rng: &mut SplitMix64, mask: u64) -> u8 {
    let n = mask.count_ones();
    let k = rng.below(u64::from(n)) as usize;
    BitIter(mask).nth(k).map_or(0, |s| s.index())
}

/// Give `id` a random leaf among its legal non-link moves (Edax's leaf conventions for passes
/// and game-over positions).
pub fn random_leaf(book: &mut MemBook, id: NodeId, rng: &mut SplitMix64) {
    let board = book.board(id);
    let moves = board.moves();
    let mut linked = 0u64;
    let mut pass_linked = false;
    for l in book.links(id) {
        match l.mv {
            Move::Square(s) => linked |= s.bit(),
            _ => pass_linked = true,
        }
    }
    let leaf = if moves != 0 {
        let free = moves & !linked;
        if free == 0 {
            BAD_LINK
        } else {
            let sq = random_bit(rng, free);
            Link::new(rng.score(), Move::from_code(sq).unwrap_or(Move::None))
        }
    } else if board.pass().moves() != 0 {
        if pass_linked {
            BAD_LINK
        } else {
            Link::new(rng.score(), Move::Pass)
        }
    } else {
        Link::new(board.final_score() as i8, Move::None)
    };
    book.set_leaf(id, leaf);
}

/// Build a synthetic book (not negamaxed: run [`crate::negamax::negamax`] on it).
pub fn random_book(p: SynthParams) -> MemBook {
    let mut rng = SplitMix64::seed_from_u64(p.seed);
    let mut header = BookHeader::new(i32::from(p.level.unwrap_or(10)), p.plies as i32);
    header.midgame_error = rng.below(4) as i32;
    header.endcut_error = rng.below(4) as i32;
    let mut book = MemBook::with_capacity(header, p.positions, p.positions * 3 / 2);
    let mut guard = 0usize;
    while book.len() < p.positions && guard < p.positions.saturating_mul(4) + 16 {
        guard += 1;
        let mut b = Board::start();
        for ply in 0..=p.plies {
            let c = canonical(&b).0;
            if book.find(&c).is_none() {
                let level = p.level.unwrap_or_else(|| rng.below(61) as u8);
                book.insert_new(&Position::new(c, level));
            }
            if ply == p.plies {
                break;
            }
            let moves = b.moves();
            if moves != 0 {
                let x = random_bit(&mut rng, moves);
                b = b.play_flips(
                    x,
                    bookfarm_engine::board::flips_portable(b.player, b.opponent, x),
                );
            } else if b.pass().moves() != 0 {
                b = b.pass();
            } else {
                break;
            }
        }
    }
    let ids: Vec<NodeId> = book.ids().collect();
    for &id in &ids {
        link_position(&mut book, id);
    }
    for &id in &ids {
        random_leaf(&mut book, id, &mut rng);
    }
    book
}

/// The book `book synth` writes: [`random_book`] with a random level per position,
/// negamaxed, links sorted (the header's date is the caller's).
pub fn synth_book(seed: u64, positions: usize, plies: u32) -> MemBook {
    let mut book = random_book(SynthParams {
        seed,
        positions,
        plies,
        level: None,
    });
    crate::negamax::negamax(&mut book);
    crate::negamax::sort_links(&mut book);
    book
}

/// A negamaxed synthetic book of 300 positions over 10 plies at level 4, for unit tests.
#[cfg(test)]
pub(crate) fn test_book(seed: u64) -> MemBook {
    let mut b = random_book(SynthParams {
        seed,
        positions: 300,
        plies: 10,
        level: Some(4),
    });
    crate::negamax::negamax(&mut b);
    b
}
