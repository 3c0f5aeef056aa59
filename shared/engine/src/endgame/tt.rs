//! Transposition table of the exact endgame solver.
//!
//! Entries hold the full board (no false hits), exact-score bounds and the best move. Buckets of
//! two entries: on a miss, the entry with fewer empties (cheaper to recompute) is replaced.
//! Exact bounds never go stale, so the table may be kept between solves; [`Tt::clear`] empties it.

/// One stored position.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Entry {
    player: u64,
    opponent: u64,
    /// Lower bound of the exact score.
    lower: i8,
    /// Upper bound of the exact score.
    upper: i8,
    /// Best move found (64 = none).
    mv: u8,
    /// Empties of the position (the cost proxy for replacement).
    empties: u8,
}

/// The bounds and move of a hit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub lower: i32,
    pub upper: i32,
    pub mv: u8,
}

/// Move code meaning "no move stored".
pub(crate) const NO_MOVE: u8 = 64;

/// A two-way set-associative table of [`Entry`].
#[derive(Debug)]
pub(crate) struct Tt {
    entries: Vec<[Entry; 2]>,
    shift: u32,
}

#[inline(always)]
fn hash(player: u64, opponent: u64) -> u64 {
    let h = (player ^ opponent.rotate_left(23)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (opponent.wrapping_mul(0xc2b2_ae3d_27d4_eb4f) >> 17)
}

impl Tt {
    /// A table of `2^bits` buckets (2 entries of 24 bytes each); `bits` is clamped to 4..=30.
    pub(crate) fn new(bits: u32) -> Tt {
        let bits = bits.clamp(4, 30);
        Tt {
            entries: vec![[Entry::default(); 2]; 1usize << bits],
            shift: 64 - bits,
        }
    }

    /// Number of buckets.
    pub(crate) fn buckets(&self) -> usize {
        self.entries.len()
    }

    /// Forget every entry.
    pub(crate) fn clear(&mut self) {
        self.entries.fill([Entry::default(); 2]);
    }

    #[inline(always)]
    fn index(&self, player: u64, opponent: u64) -> usize {
        (hash(player, opponent) >> self.shift) as usize
    }

    /// Start loading the bucket of a position into the cache ahead of its [`Tt::probe`] (a hint
    /// only: no effect on any result). A 48-byte bucket may straddle two cache lines: both are
    /// requested.
    #[inline(always)]
    pub(crate) fn prefetch(&self, player: u64, opponent: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = std::ptr::from_ref(&self.entries[self.index(player, opponent)]).cast::<i8>();
            // SAFETY: `_mm_prefetch` is a hint that never faults, on any address; SSE is part of
            // the x86-64 baseline. `p + 47` stays inside the bucket.
            unsafe {
                use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                _mm_prefetch::<_MM_HINT_T0>(p);
                _mm_prefetch::<_MM_HINT_T0>(p.add(47));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (player, opponent);
    }

    /// Look a position up.
    #[inline]
    pub(crate) fn probe(&self, player: u64, opponent: u64) -> Option<Hit> {
        let b = &self.entries[self.index(player, opponent)];
        for e in b {
            if e.player == player && e.opponent == opponent {
                return Some(Hit {
                    lower: i32::from(e.lower),
                    upper: i32::from(e.upper),
                    mv: e.mv,
                });
            }
        }
        None
    }

    /// Record the result `score` of a fail-soft search of window `(alpha, beta)`, merging it with
    /// the bounds already stored for the same position.
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
        let (mut lower, mut upper) = if score <= alpha {
            (-64, score)
        } else if score >= beta {
            (score, 64)
        } else {
            (score, score)
        };
        let i = self.index(player, opponent);
        let b = &mut self.entries[i];
        let slot = if b[0].player == player && b[0].opponent == opponent {
            0
        } else if b[1].player == player && b[1].opponent == opponent {
            1
        } else {
            // Replace the cheaper entry; prefer slot 1 on ties.
            let s = if b[0].empties < b[1].empties { 0 } else { 1 };
            b[s] = Entry {
                player,
                opponent,
                lower: lower as i8,
                upper: upper as i8,
                mv,
                empties: empties as u8,
            };
            return;
        };
        let e = &mut b[slot];
        lower = lower.max(i32::from(e.lower));
        upper = upper.min(i32::from(e.upper));
        if lower > upper {
            // Cannot happen with exact bounds; keep the fresh result only.
            (lower, upper) = if score <= alpha {
                (-64, score)
            } else if score >= beta {
                (score, 64)
            } else {
                (score, score)
            };
        }
        e.lower = lower as i8;
        e.upper = upper as i8;
        if mv != NO_MOVE {
            e.mv = mv;
        }
        e.empties = empties as u8;
    }
}
