//! Transposition table: two-way buckets keyed by the full board, with a generation stamp so that
//! a new search starts from a logically empty table in O(1) (searches stay deterministic: equal
//! inputs give equal node counts, whatever was searched before).

use crate::board::Board;

/// What the table knows about a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtData {
    /// Lower bound of the score.
    pub lower: i8,
    /// Upper bound of the score.
    pub upper: i8,
    /// Remaining depth of the search that produced the bounds.
    pub depth: u8,
    /// Selectivity index of that search (5 = none).
    pub selectivity: u8,
    /// Best move code (65 = none).
    pub mv: u8,
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    player: u64,
    opponent: u64,
    generation: u32,
    lower: i8,
    upper: i8,
    depth: u8,
    selectivity: u8,
    mv: u8,
}

/// Two entries (32 bytes each) in one 64-byte cache line: a probe touches a single line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket([Entry; 2]);

/// A fixed-size transposition table (a power of two of entries, in two-entry buckets).
#[derive(Debug)]
pub struct Tt {
    buckets: Vec<Bucket>,
    /// Number of buckets − 1.
    mask: usize,
    generation: u32,
}

#[inline]
fn hash(b: &Board) -> u64 {
    let h = b.player.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ b.opponent
            .wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            .rotate_left(31);
    h ^ (h >> 29)
}

const NO_MOVE: u8 = 65;

impl Tt {
    /// A table of `2^bits` entries (`bits` is clamped to 4..=28).
    pub fn new(bits: u32) -> Tt {
        let n = 1usize << bits.clamp(4, 28);
        Tt {
            buckets: vec![Bucket::default(); n / 2],
            mask: n / 2 - 1,
            generation: 1,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.buckets.len() * 2
    }

    /// Always false (the table has a fixed size).
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Forget every entry in O(1) by starting a new generation.
    pub fn new_search(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.clear();
        }
    }

    /// Zero the whole table.
    pub fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.generation = 1;
    }

    /// The bucket of a position (the same pair of entries as before buckets were explicit:
    /// entries `2i` and `2i + 1` of a `2^bits` table).
    #[inline]
    fn bucket(&self, b: &Board) -> usize {
        ((hash(b) as usize) >> 1) & self.mask
    }

    /// Start loading the bucket of `b` into the cache, ahead of a [`Tt::probe`] of it (a hint
    /// only: no effect on any result).
    #[inline(always)]
    pub fn prefetch(&self, b: &Board) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = std::ptr::from_ref(&self.buckets[self.bucket(b)]).cast::<i8>();
            // SAFETY: `_mm_prefetch` is a hint that never faults, on any address; SSE is part of
            // the x86-64 baseline.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = b;
    }

    /// Look a position up.
    #[inline]
    pub fn probe(&self, b: &Board) -> Option<TtData> {
        let i = self.bucket(b);
        for e in &self.buckets[i].0 {
            if e.generation == self.generation && e.player == b.player && e.opponent == b.opponent {
                return Some(TtData {
                    lower: e.lower,
                    upper: e.upper,
                    depth: e.depth,
                    selectivity: e.selectivity,
                    mv: e.mv,
                });
            }
        }
        None
    }

    /// Record a fail-soft result `score` of a search with window `(alpha, beta)`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn store(
        &mut self,
        b: &Board,
        depth: u32,
        selectivity: u8,
        alpha: i32,
        beta: i32,
        score: i32,
        mv: u8,
    ) {
        let (lower, upper) = bounds(alpha, beta, score);
        let depth = depth.min(255) as u8;
        let i = self.bucket(b);
        let generation = self.generation;
        let pair = &mut self.buckets[i].0;
        // Same position: refine or replace.
        for e in pair.iter_mut() {
            if e.generation == generation && e.player == b.player && e.opponent == b.opponent {
                if depth > e.depth || (depth == e.depth && selectivity > e.selectivity) {
                    e.lower = lower;
                    e.upper = upper;
                    e.depth = depth;
                    e.selectivity = selectivity;
                    if mv != NO_MOVE {
                        e.mv = mv;
                    }
                } else if depth == e.depth && selectivity == e.selectivity {
                    let l = e.lower.max(lower);
                    let u = e.upper.min(upper);
                    if l <= u {
                        e.lower = l;
                        e.upper = u;
                    } else {
                        e.lower = lower;
                        e.upper = upper;
                    }
                    if mv != NO_MOVE {
                        e.mv = mv;
                    }
                } else if e.mv == NO_MOVE {
                    e.mv = mv;
                }
                return;
            }
        }
        // Replace a slot of an older search first, then the shallower one.
        let slot = {
            let (a, c) = (&pair[0], &pair[1]);
            let stale_a = a.generation != generation;
            let stale_c = c.generation != generation;
            if stale_a {
                0
            } else if stale_c || c.depth < a.depth {
                1
            } else {
                0
            }
        };
        pair[slot] = Entry {
            player: b.player,
            opponent: b.opponent,
            generation,
            lower,
            upper,
            depth,
            selectivity,
            mv,
        };
    }
}

/// Bounds implied by a fail-soft score in a window.
#[inline]
fn bounds(alpha: i32, beta: i32, score: i32) -> (i8, i8) {
    let s = score.clamp(-64, 64) as i8;
    if score <= alpha {
        (-64, s)
    } else if score >= beta {
        (s, 64)
    } else {
        (s, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_probe_and_generations() {
        let mut tt = Tt::new(10);
        let b = Board::start();
        assert!(tt.probe(&b).is_none());
        tt.store(&b, 4, 5, -10, 10, 3, 19);
        let d = tt.probe(&b).expect("stored");
        assert_eq!((d.lower, d.upper, d.depth, d.mv), (3, 3, 4, 19));
        // A fail-high at the same depth tightens the lower bound only.
        tt.store(&b, 4, 5, 5, 6, 7, 65);
        let d = tt.probe(&b).expect("stored");
        // Inconsistent with the stored exact value: the newer bounds win.
        assert_eq!((d.lower, d.upper, d.mv), (7, 64, 19));
        // Deeper result replaces.
        tt.store(&b, 6, 5, -64, 64, -2, 37);
        let d = tt.probe(&b).expect("stored");
        assert_eq!((d.lower, d.upper, d.depth, d.mv), (-2, -2, 6, 37));
        tt.new_search();
        assert!(tt.probe(&b).is_none());
        tt.store(&b, 1, 5, -64, 64, 0, 19);
        tt.clear();
        assert!(tt.probe(&b).is_none());
    }

    #[test]
    fn bounds_of_windows() {
        assert_eq!(bounds(-5, 5, -5), (-64, -5));
        assert_eq!(bounds(-5, 5, 5), (5, 64));
        assert_eq!(bounds(-5, 5, 0), (0, 0));
    }
}
