//! Transposition table of the exact endgame solver.
//!
//! Entries hold the full board (no false hits), exact-score bounds and the best move. Buckets of
//! three entries fill one 64-byte cache line; on a miss, the entry with the fewest empties
//! (cheapest to recompute) is replaced.
//! Exact bounds never go stale, so the table may be kept between solves; [`Tt::clear`] empties it.

/// The bounds and move of a hit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub lower: i32,
    pub upper: i32,
    pub mv: u8,
}

/// Move code meaning "no move stored".
pub(crate) const NO_MOVE: u8 = 64;

/// Entries per bucket.
const WAYS: usize = 3;

/// Three stored positions in one 64-byte cache line (a probe or a prefetch touches one line):
/// the boards first, then per entry the lower and upper bounds of the exact score, the best move
/// (64 = none) and the empties (the cost proxy for replacement). An all-zero entry is free (no
/// position has no disc).
#[derive(Clone, Copy, Default, Debug)]
#[repr(C, align(64))]
struct Bucket {
    player: [u64; WAYS],
    opponent: [u64; WAYS],
    lower: [i8; WAYS],
    upper: [i8; WAYS],
    mv: [u8; WAYS],
    empties: [u8; WAYS],
}

/// A three-way set-associative table of positions.
#[derive(Debug)]
pub(crate) struct Tt {
    buckets: Vec<Bucket>,
    shift: u32,
}

#[inline(always)]
fn hash(player: u64, opponent: u64) -> u64 {
    let h = (player ^ opponent.rotate_left(23)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (opponent.wrapping_mul(0xc2b2_ae3d_27d4_eb4f) >> 17)
}

impl Tt {
    /// A table of `2^bits` buckets (3 entries in 64 bytes each); `bits` is clamped to 4..=30.
    pub(crate) fn new(bits: u32) -> Tt {
        let bits = bits.clamp(4, 30);
        Tt {
            buckets: vec![Bucket::default(); 1usize << bits],
            shift: 64 - bits,
        }
    }

    /// Number of buckets.
    pub(crate) fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Forget every entry.
    pub(crate) fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
    }

    #[inline(always)]
    fn index(&self, player: u64, opponent: u64) -> usize {
        (hash(player, opponent) >> self.shift) as usize
    }

    /// The slot of a position in its bucket.
    #[inline(always)]
    fn find(b: &Bucket, player: u64, opponent: u64) -> Option<usize> {
        (0..WAYS).find(|&i| b.player[i] == player && b.opponent[i] == opponent)
    }

    /// Start loading the bucket of a position into the cache ahead of its [`Tt::probe`] (a hint
    /// only: no effect on any result).
    #[inline(always)]
    pub(crate) fn prefetch(&self, player: u64, opponent: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = std::ptr::from_ref(&self.buckets[self.index(player, opponent)]).cast::<i8>();
            // SAFETY: `_mm_prefetch` is a hint that never faults, on any address; SSE is part of
            // the x86-64 baseline.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (player, opponent);
    }

    /// Look a position up.
    #[inline]
    pub(crate) fn probe(&self, player: u64, opponent: u64) -> Option<Hit> {
        let b = &self.buckets[self.index(player, opponent)];
        Self::find(b, player, opponent).map(|i| Hit {
            lower: i32::from(b.lower[i]),
            upper: i32::from(b.upper[i]),
            mv: b.mv[i],
        })
    }

    /// Record the result `score` of a fail-soft search of window `(alpha, beta)`, merging it with
    /// the bounds already stored for the same position. A new position replaces the entry with
    /// the fewest empties (the cheapest to recompute; the last such slot on ties).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store(
        &mut self,
        player: u64,
        opponent: u64,
        empties: u32,
        alpha: i32,
        beta: i32,
        score: i32,
        mv: u8,
    ) {
        let fresh = if score <= alpha {
            (-64, score)
        } else if score >= beta {
            (score, 64)
        } else {
            (score, score)
        };
        let i = self.index(player, opponent);
        let b = &mut self.buckets[i];
        let (slot, (lower, upper)) = match Self::find(b, player, opponent) {
            Some(slot) => {
                let lower = fresh.0.max(i32::from(b.lower[slot]));
                let upper = fresh.1.min(i32::from(b.upper[slot]));
                // Crossed bounds cannot happen with exact bounds; keep the fresh result then.
                let merged = if lower > upper { fresh } else { (lower, upper) };
                if mv != NO_MOVE {
                    b.mv[slot] = mv;
                }
                (slot, merged)
            }
            None => {
                let mut slot = 0;
                for k in 1..WAYS {
                    if b.empties[k] <= b.empties[slot] {
                        slot = k;
                    }
                }
                b.player[slot] = player;
                b.opponent[slot] = opponent;
                b.mv[slot] = mv;
                (slot, fresh)
            }
        };
        b.lower[slot] = lower as i8;
        b.upper[slot] = upper as i8;
        b.empties[slot] = empties as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
        assert_eq!(std::mem::align_of::<Bucket>(), 64);
    }

    #[test]
    fn store_merges_bounds_and_replaces_the_cheapest_entry() {
        // A 16-bucket table: positions that share bucket 0 collide.
        let mut tt = Tt::new(4);
        let mut same_bucket = (1u64..)
            .map(|p| (p, 1u64 << 63))
            .filter(|&(p, o)| tt.index(p, o) == 0);
        let boards: Vec<(u64, u64)> = same_bucket.by_ref().take(4).collect();
        let [a, b, c, d] = [boards[0], boards[1], boards[2], boards[3]];

        // Fail high, then fail low on the same position: the bounds are merged.
        tt.store(a.0, a.1, 20, -10, -9, 4, 19);
        tt.store(a.0, a.1, 20, 8, 9, 6, NO_MOVE);
        let h = tt.probe(a.0, a.1).expect("stored");
        assert_eq!((h.lower, h.upper, h.mv), (4, 6, 19));

        // Three ways: b and c fill the bucket; d replaces the entry with the fewest empties.
        tt.store(b.0, b.1, 9, -64, 64, 2, 3);
        tt.store(c.0, c.1, 15, -64, 64, -2, 5);
        tt.store(d.0, d.1, 12, -64, 64, 0, 7);
        assert!(tt.probe(b.0, b.1).is_none());
        for (board, score) in [(c, -2), (d, 0)] {
            let h = tt.probe(board.0, board.1).expect("kept");
            assert_eq!((h.lower, h.upper), (score, score));
        }
        assert!(tt.probe(a.0, a.1).is_some());

        tt.clear();
        assert!(tt.probe(a.0, a.1).is_none());
    }
}
