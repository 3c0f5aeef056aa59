//! Positions to label: real-game openings followed by random moves, and seeded samples of game
//! positions.
//!
//! The "openings plus random moves" positions are what a book builder's searches meet off the
//! played lines: lopsided positions that human and engine games rarely reach. A position is built
//! from a start drawn uniformly from the given opening positions (positions of real games), then
//! random legal moves (uniform among the legal moves, passing when forced) until a target number
//! of empties drawn uniformly from the band. Starts that end the game before the target are
//! retried with the next random draw. Every returned position is canonical (see
//! [`bookfarm_engine::symmetry::canonical`]), has a legal move, and is unique in its set.

use bookfarm_engine::Board;
use bookfarm_engine::board::{BitIter, flips_portable};
use bookfarm_engine::symmetry::canonical;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::ops::RangeInclusive;

/// Play random moves from `start` until the board has `target` empties; `None` when the game ends
/// first.
fn random_walk(rng: &mut StdRng, start: Board, target: u32) -> Option<Board> {
    let mut b = start;
    while b.empties() > target {
        let mut m = b.moves();
        if m == 0 {
            b = b.pass();
            m = b.moves();
            if m == 0 {
                return None;
            }
        }
        let k = rng.random_range(0..m.count_ones() as usize);
        let sq = BitIter(m).nth(k)?;
        b = b.play_flips(sq.index(), flips_portable(b.player, b.opponent, sq.index()));
    }
    if b.moves() == 0 {
        b = b.pass();
    }
    (b.moves() != 0).then_some(b)
}

/// `n` distinct canonical positions with empties in `band`, each reached from a uniformly drawn
/// start of `starts` by random moves. `exclude` holds canonical `(player, opponent)` keys that
/// must not be returned (e.g. every training position when building a held-out set).
/// Deterministic for equal inputs. Returns fewer than `n` positions only when 100·n walks could
/// not produce enough new ones.
pub fn random_continuations(
    starts: &[Board],
    band: RangeInclusive<u32>,
    n: usize,
    seed: u64,
    exclude: &HashSet<(u64, u64)>,
) -> Vec<Board> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut out = Vec::with_capacity(n);
    let starts: Vec<Board> = starts
        .iter()
        .copied()
        .filter(|s| s.empties() > *band.start())
        .collect();
    if starts.is_empty() {
        return out;
    }
    let mut tries = 0usize;
    while out.len() < n && tries < n.saturating_mul(100) {
        tries += 1;
        let start = starts[rng.random_range(0..starts.len())];
        let target = rng.random_range(band.clone()).min(start.empties());
        let Some(b) = random_walk(&mut rng, start, target) else {
            continue;
        };
        let (c, _) = canonical(&b);
        let key = (c.player, c.opponent);
        if !exclude.contains(&key) && seen.insert(key) {
            out.push(c);
        }
    }
    out
}

/// A seeded sample of `per_empties` positions (with a legal move) for every empties value of
/// `band`, drawn from `pool`, skipping keys in `exclude`. Deterministic for equal inputs.
pub fn sample_by_empties(
    pool: &[Board],
    band: RangeInclusive<u32>,
    per_empties: usize,
    seed: u64,
    exclude: &HashSet<(u64, u64)>,
) -> Vec<Board> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for e in band {
        let mut v: Vec<Board> = pool
            .iter()
            .filter(|b| {
                b.empties() == e && b.moves() != 0 && !exclude.contains(&(b.player, b.opponent))
            })
            .copied()
            .collect();
        v.shuffle(&mut rng);
        v.truncate(per_empties);
        out.extend(v);
    }
    out
}

/// The first `n` positions of a seeded permutation of the positions of `pool` (with a legal move,
/// not in `exclude`) whose empties lie in `band`. Unlike [`sample_by_empties`] the draw is
/// prefix-stable: the draw of `n` positions is the first `n` of the draw of more, so a label set
/// can be extended without relabelling.
pub fn game_positions(
    pool: &[Board],
    band: RangeInclusive<u32>,
    n: usize,
    seed: u64,
    exclude: &HashSet<(u64, u64)>,
) -> Vec<Board> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<Board> = pool
        .iter()
        .filter(|b| {
            band.contains(&b.empties())
                && b.moves() != 0
                && !exclude.contains(&(b.player, b.opponent))
        })
        .copied()
        .collect();
    v.shuffle(&mut rng);
    v.truncate(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts() -> Vec<Board> {
        // The start and its four first-move children: a few real openings.
        let b = Board::start();
        let mut v = vec![b];
        for sq in BitIter(b.moves()) {
            v.push(b.play_flips(sq.index(), flips_portable(b.player, b.opponent, sq.index())));
        }
        v
    }

    #[test]
    fn continuations_are_canonical_distinct_in_band_and_deterministic() {
        let none = HashSet::new();
        let a = random_continuations(&starts(), 20..=22, 50, 9, &none);
        assert_eq!(a.len(), 50);
        let keys: HashSet<(u64, u64)> = a.iter().map(|b| (b.player, b.opponent)).collect();
        assert_eq!(keys.len(), 50, "positions are distinct");
        for b in &a {
            assert!((20..=22).contains(&b.empties()), "{b}");
            assert_eq!(canonical(b).0, *b);
            assert_ne!(b.moves(), 0);
        }
        assert_eq!(a, random_continuations(&starts(), 20..=22, 50, 9, &none));
        assert_ne!(a, random_continuations(&starts(), 20..=22, 50, 10, &none));
        // Excluded keys never come back.
        let b = random_continuations(&starts(), 20..=22, 50, 9, &keys);
        assert!(b.iter().all(|x| !keys.contains(&(x.player, x.opponent))));
    }

    #[test]
    fn sample_takes_the_requested_count_per_empties() {
        let pool = random_continuations(&starts(), 30..=33, 400, 1, &HashSet::new());
        let s = sample_by_empties(&pool, 30..=31, 7, 2, &HashSet::new());
        assert_eq!(s.len(), 14);
        assert_eq!(s.iter().filter(|b| b.empties() == 30).count(), 7);
        let ex: HashSet<(u64, u64)> = s.iter().map(|b| (b.player, b.opponent)).collect();
        let t = sample_by_empties(&pool, 30..=31, 7, 2, &ex);
        assert!(t.iter().all(|b| !ex.contains(&(b.player, b.opponent))));
    }
}
