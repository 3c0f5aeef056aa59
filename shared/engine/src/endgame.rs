//! Exact endgame solver: perfect-play final scores with Edax's conventions (edax-spec §8.2).
//!
//! Scores are for the side to move, as final disc differences where the empty squares go to the
//! winner (so every exact score is even). The search is fail-soft alpha-beta:
//! * PV nodes ([`solve`] with a wide window, [`solve_root`]) use principal variation search, with
//!   null-window probes and re-searches;
//! * null-window nodes with more than [`SHALLOW_EMPTIES`] empties probe the transposition table,
//!   try the stability cutoff (Edax's `NWS_STABILITY_THRESHOLD` table) and order the moves
//!   fastest-first (Edax's `movelist_evaluate_fast` weights: opponent mobility, corner stability,
//!   potential mobility, square value, parity, hash move and wipe-outs first); from
//!   [`ETC_MIN_EMPTIES`] up they also try enhanced transposition cutoffs; while ordering, they
//!   prefetch the table buckets of their children (one cache line each);
//! * from [`SHALLOW_EMPTIES`] down to 5 empties: no hash, parity ordering plus square classes;
//! * 4, 3, 2 and 1 empties: specialised solvers over the known empty squares, parity sorted, with
//!   a `count_last_flip` style final move (four line patterns and a table).
//!
//! Hot loops do no allocation: move lists live in per-depth scratch buffers of the
//! [`EndgameContext`], which also owns the transposition table and the cancellation flag.
//! The search routines are generated twice (baseline x86-64 with scalar flips and mobility, and
//! x86-64-v3 with POPCNT, LZCNT, BMI1/2 and the AVX2 flips and mobility of [`crate::flip`]); the
//! faster one is chosen at run time, so no build needs `-C target-cpu`. Both give the same
//! scores and node counts.
//!
//! Measured with `cargo bench -p bookfarm-engine --bench endgame` (one thread, busy 2-vCPU
//! machine, see docs/benchmarks.md): FFO #20–#39 in about 12 s CPU (Edax 4.6: 30.7 s on the
//! machine of the golden timings). Selective (probcut) endgame searches are run by the midgame
//! search at depth = empties, which calls [`solve`] below its endgame threshold, as Edax does.

mod lines;
mod tt;

use crate::board::Board;
use crate::square::{Move, Square};
use crate::stability::stable_discs;
use lines::{NEIGHBOUR, flips, last_flip_count, moves};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tt::{NO_MOVE, Tt};

/// Lowest possible score.
pub const SCORE_MIN: i32 = -64;
/// Highest possible score.
pub const SCORE_MAX: i32 = 64;
/// Edax's `SCORE_INF`: above any score. [`solve_root`] returns `-SCORE_INF` with [`Move::None`]
/// when every legal move is excluded.
pub const SCORE_INF: i32 = 127;

/// Null-window nodes with at most this many empties use the hash-free shallow search.
/// Measured on FFO #20–#39 (issue 19, fourth round): 6 visits 19 % fewer nodes than Edax's 7
/// (the table and fastest-first ordering at 7 empties pay for themselves) and takes about 8 %
/// less CPU; 5 saves more nodes but costs more per node.
pub const SHALLOW_EMPTIES: u32 = 6;

/// Edax's `NWS_STABILITY_THRESHOLD` (without `USE_SOLID`): a null-window node with `alpha >= T[n]`
/// at `n` empties tries the stability cutoff (edax-spec §8.5 item 2). Entry 64 (the empty
/// board) is an extra 99 so that any board can index it.
pub const NWS_STABILITY_THRESHOLD: [i32; 65] = [
    99, 99, 99, 99, 6, 8, 10, 12, //
    14, 16, 20, 22, 24, 26, 28, 30, //
    32, 34, 36, 38, 40, 42, 44, 46, //
    48, 48, 50, 50, 52, 52, 54, 54, //
    56, 56, 58, 58, 60, 60, 62, 62, //
    64, 64, 64, 64, 64, 64, 64, 64, //
    99, 99, 99, 99, 99, 99, 99, 99, //
    99, 99, 99, 99, 99, 99, 99, 99, //
    99,
];

/// Null-window nodes with at least this many empties try enhanced transposition cutoffs
/// (children looked up in the table before any search). Measured on FFO #20–#37: 12 saves
/// about 5% of the nodes; lower thresholds cost more probes than they save.
pub const ETC_MIN_EMPTIES: u32 = 12;

/// Default transposition table size: `2^18` buckets of 3 entries (16 MiB).
pub const DEFAULT_TT_BITS: u32 = 18;

/// Jon C. Wright's square values, as used by Edax's move ordering.
const SQUARE_VALUE: [i32; 64] = [
    18, 4, 16, 12, 12, 16, 4, 18, //
    4, 2, 6, 8, 8, 6, 2, 4, //
    16, 6, 14, 10, 10, 14, 6, 16, //
    12, 8, 10, 0, 0, 10, 8, 12, //
    12, 8, 10, 0, 0, 10, 8, 12, //
    16, 6, 14, 10, 10, 14, 6, 16, //
    4, 2, 6, 8, 8, 6, 2, 4, //
    18, 4, 16, 12, 12, 16, 4, 18, //
];

const W_WIPEOUT: i32 = 1 << 30;
const W_HASH_MOVE: i32 = 1 << 29;
const W_MOBILITY: i32 = 1 << 15;
const W_CORNER_STABILITY: i32 = 1 << 11;
const W_POTENTIAL_MOBILITY: i32 = 1 << 5;
const W_LOW_PARITY: i32 = 1 << 3;

const CORNERS: u64 = 0x8100_0000_0000_0081;

/// Square classes tried in this order by the shallow search (within each parity class):
/// corners, A/B-like squares, the rest of the edges and centre, C squares, X squares.
const SQUARE_CLASSES: [u64; 5] = [
    CORNERS,
    0x2400_a500_00a5_0024,
    !(CORNERS | 0x2400_a500_00a5_0024 | 0x4281_0000_0000_8142 | 0x0042_0000_0000_4200),
    0x4281_0000_0000_8142,
    0x0042_0000_0000_4200,
];

/// The four 4×4 quadrants (parity regions).
const QUADRANTS: [u64; 4] = [
    0x0000_0000_0f0f_0f0f,
    0x0000_0000_f0f0_f0f0,
    0x0f0f_0f0f_0000_0000,
    0xf0f0_f0f0_0000_0000,
];

/// Capacity of a scratch move list (moves never exceed the empties).
const MAX_MOVES: usize = 64;

/// A scored move of a scratch list.
#[derive(Clone, Copy, Default, Debug)]
struct MoveEntry {
    flipped: u64,
    score: i32,
    x: u8,
}

/// Mutable state of exact solves: node counter, transposition table, scratch move lists and the
/// cancellation flag. One per thread; reuse it across solves (the table stays valid: exact
/// bounds never go stale).
pub struct EndgameContext {
    /// Positions visited so far (every call of a node routine, leaves included); the caller may
    /// reset it.
    pub nodes: u64,
    abort: Arc<AtomicBool>,
    aborted: bool,
    portable_only: bool,
    tt: Tt,
    lists: Vec<[MoveEntry; MAX_MOVES]>,
}

impl fmt::Debug for EndgameContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndgameContext")
            .field("nodes", &self.nodes)
            .field("aborted", &self.aborted)
            .field("tt_buckets", &self.tt.buckets())
            .finish()
    }
}

impl Default for EndgameContext {
    fn default() -> Self {
        Self::new()
    }
}

impl EndgameContext {
    /// A context with the default table size ([`DEFAULT_TT_BITS`]).
    pub fn new() -> EndgameContext {
        Self::with_tt_bits(DEFAULT_TT_BITS)
    }

    /// A context whose transposition table has `2^bits` 64-byte buckets of three entries
    /// (`bits` is clamped to 4..=30).
    pub fn with_tt_bits(bits: u32) -> EndgameContext {
        crate::stability::init();
        EndgameContext {
            nodes: 0,
            abort: Arc::new(AtomicBool::new(false)),
            aborted: false,
            portable_only: false,
            tt: Tt::new(bits),
            lists: vec![[MoveEntry::default(); MAX_MOVES]; 65],
        }
    }

    /// The cancellation flag: set it (from any thread) to make the running solve return early.
    /// It is not reset automatically; clear it before the next solve.
    pub fn abort_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.abort)
    }

    /// Replace the cancellation flag, e.g. by one shared with other searches.
    pub fn set_abort_handle(&mut self, abort: Arc<AtomicBool>) {
        self.abort = abort;
    }

    /// True when the last solve was cancelled: its result is meaningless.
    pub fn aborted(&self) -> bool {
        self.aborted
    }

    /// Use the baseline (portable) code generation even when the CPU supports x86-64-v3, e.g.
    /// to test or time both paths on one machine. Results never change, only speed.
    pub fn set_portable_only(&mut self, on: bool) {
        self.portable_only = on;
    }

    /// Empty the transposition table (Edax's OBF solver does it before each problem).
    pub fn clear(&mut self) {
        self.tt.clear();
    }
}

/// Exact score of `board` for the side to move, fail-soft within `(alpha, beta)`: the result
/// `v` is exact when `alpha < v < beta`, an upper bound when `v <= alpha` and a lower bound when
/// `v >= beta`. Use `(-64, 64)` (or wider) for the exact value.
///
/// Cancellation: when the context's abort flag is set the search stops early,
/// [`EndgameContext::aborted`] turns true and the returned value is meaningless.
pub fn solve(board: &Board, alpha: i32, beta: i32, ctx: &mut EndgameContext) -> i32 {
    let abort = Arc::clone(&ctx.abort);
    solve_with_abort(board, alpha, beta, ctx, &abort)
}

/// [`solve`] with an external cancellation flag instead of the context's own.
pub fn solve_with_abort(
    board: &Board,
    alpha: i32,
    beta: i32,
    ctx: &mut EndgameContext,
    abort: &AtomicBool,
) -> i32 {
    let (p, o) = (board.player, board.opponent);
    #[cfg(target_arch = "x86_64")]
    if !ctx.portable_only && has_x86_v3() {
        let mut s = Solver::<X86V3>::new(ctx, abort);
        // SAFETY: the CPU supports every feature the X86V3 routines are compiled with
        // (checked at run time by `has_x86_v3`).
        let v = unsafe { s.solve(p, o, alpha, beta) };
        s.finish();
        return v;
    }
    let mut s = Solver::<Portable>::new(ctx, abort);
    let v = s.solve(p, o, alpha, beta);
    s.finish();
    v
}

/// True when the x86-64-v3 routines can run on this CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_x86_v3() -> bool {
    std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("avx2")
}

/// Best move and exact score of `board` among the legal moves not in `excluded` (bit i =
/// square i), with Edax's root conventions:
/// * game over: `(Move::None, final score)`;
/// * the side to move must pass: `(Move::Pass, exact score)` (the exclusion set is ignored);
/// * every legal move excluded: `(Move::None, -SCORE_INF)`.
///
/// Among equal best scores the first move in the solver's ordering is returned.
pub fn solve_root(board: &Board, excluded: u64, ctx: &mut EndgameContext) -> (Move, i32) {
    let abort = Arc::clone(&ctx.abort);
    solve_root_with_abort(board, excluded, ctx, &abort)
}

/// [`solve_root`] with an external cancellation flag instead of the context's own.
pub fn solve_root_with_abort(
    board: &Board,
    excluded: u64,
    ctx: &mut EndgameContext,
    abort: &AtomicBool,
) -> (Move, i32) {
    let (p, o) = (board.player, board.opponent);
    #[cfg(target_arch = "x86_64")]
    if !ctx.portable_only && has_x86_v3() {
        let mut s = Solver::<X86V3>::new(ctx, abort);
        // SAFETY: the CPU supports every feature the X86V3 routines are compiled with
        // (checked at run time by `has_x86_v3`).
        let r = unsafe { s.root(p, o, excluded) };
        s.finish();
        return r;
    }
    let mut s = Solver::<Portable>::new(ctx, abort);
    let r = s.root(p, o, excluded);
    s.finish();
    r
}

/// Parity bits: bit q set when quadrant q holds an odd number of empty squares.
#[inline(always)]
fn parity_mask(empty: u64) -> u64 {
    let mut odd = 0u64;
    for q in QUADRANTS {
        if (empty & q).count_ones() & 1 != 0 {
            odd |= q;
        }
    }
    odd
}

/// Empty squares next to a disc of `o` (Edax's potential moves of the side owning `p`).
#[inline(always)]
fn potential_mobility(p: u64, o: u64) -> i32 {
    let h = o & 0x7e7e_7e7e_7e7e_7e7e;
    let v = o & 0x00ff_ffff_ffff_ff00;
    let d = o & 0x007e_7e7e_7e7e_7e00;
    let m = (h << 1) | (h >> 1) | (v << 8) | (v >> 8) | (d << 7) | (d >> 7) | (d << 9) | (d >> 9);
    let m = m & !(p | o);
    (m.count_ones() + (m & CORNERS).count_ones()) as i32
}

/// Edax's `get_corner_stability`: own discs at or next to a corner that are trivially stable.
#[inline(always)]
fn corner_stability(p: u64) -> i32 {
    let stable = CORNERS & p;
    let stable = (stable
        | (((stable.wrapping_mul(5) >> 1) & 0x4200_0000_0000_0042)
            | (stable << 8)
            | (stable >> 8)))
        & p;
    stable.count_ones() as i32
}

/// Edax's `solve` on bitboards (empties go to the winner).
#[inline(always)]
fn final_score(p: u64, o: u64) -> i32 {
    Board {
        player: p,
        opponent: o,
    }
    .final_score()
}

/// Score of the position with one empty square `x`, `p` to move (all other squares full).
#[inline(always)]
fn solve1(p: u64, x: usize) -> i32 {
    let pc = p.count_ones() as i32;
    let n = last_flip_count(p, x) as i32;
    if n > 0 {
        return 2 * (pc + 1 + n) - 64;
    }
    let n = last_flip_count(!p & !(1u64 << x), x) as i32;
    if n > 0 {
        return 2 * (pc - n) - 64;
    }
    if 2 * pc > 63 {
        2 * pc - 62
    } else {
        2 * pc - 64
    }
}

/// Search state of one solve (borrowed pieces of the context).
struct Solver<'a, K> {
    nodes: u64,
    tt: &'a mut Tt,
    lists: &'a mut [[MoveEntry; MAX_MOVES]],
    abort: &'a AtomicBool,
    aborted: bool,
    ctx_nodes: &'a mut u64,
    ctx_aborted: &'a mut bool,
    kernel: PhantomData<K>,
}

impl<'a, K> Solver<'a, K> {
    fn new(ctx: &'a mut EndgameContext, abort: &'a AtomicBool) -> Solver<'a, K> {
        ctx.aborted = false;
        Solver {
            nodes: 0,
            tt: &mut ctx.tt,
            lists: &mut ctx.lists,
            abort,
            aborted: false,
            ctx_nodes: &mut ctx.nodes,
            ctx_aborted: &mut ctx.aborted,
            kernel: PhantomData,
        }
    }

    fn finish(self) {
        *self.ctx_nodes += self.nodes;
        *self.ctx_aborted = self.aborted;
    }
}

/// Code generation of the search routines (instantiated per instruction-set [`Kernel`]).
macro_rules! search_impl {
    ($kernel:ty, $moves:path, $flips:path $(, #[$attr:meta])*) => {
impl Solver<'_, $kernel> {

    /// Flips of a move by `p` on `x`, or 0 without computing them when no opponent disc is
    /// adjacent.
    #[inline]
    $(#[$attr])*
    fn flips_if_adjacent(p: u64, o: u64, x: usize) -> u64 {
        if NEIGHBOUR[x] & o == 0 { 0 } else { $flips(p, o, x) }
    }

    $(#[$attr])*
    fn solve(&mut self, p: u64, o: u64, alpha: i32, beta: i32) -> i32 {
        let alpha = alpha.max(-SCORE_INF);
        let beta = beta.min(SCORE_INF).max(alpha + 1);
        let e = (!(p | o)).count_ones();
        if beta == alpha + 1 {
            self.nws(p, o, alpha, e)
        } else {
            self.pvs(p, o, alpha, beta, e)
        }
    }

    $(#[$attr])*
    fn root(&mut self, p: u64, o: u64, excluded: u64) -> (Move, i32) {
        let e = (!(p | o)).count_ones();
        let all = $moves(p, o);
        if all == 0 {
            if $moves(o, p) == 0 {
                self.nodes += 1;
                return (Move::None, final_score(p, o));
            }
            let v = -self.pvs(o, p, -SCORE_MAX, -SCORE_MIN, e);
            return (Move::Pass, v);
        }
        let legal = all & !excluded;
        if legal == 0 {
            return (Move::None, -SCORE_INF);
        }
        self.nodes += 1;
        // A move stored by an earlier solve of this position is tried first.
        let tt_move = self.tt.probe(p, o).map_or(NO_MOVE, |h| h.mv);
        let n = self.build_list(p, o, legal, e, tt_move);
        let (mut alpha, beta) = (-SCORE_INF, SCORE_MAX);
        let mut best = -SCORE_INF;
        let mut best_x = 0u8;
        // The PVS loop of `pvs` again, on purpose: the root has no beta cut, breaks (not returns)
        // on abort and handles exclusions; a shared loop would put those branches in the hot `pvs`.
        for i in 0..n {
            let m = self.pick(e, i, n);
            let (np, no) = (o ^ m.flipped, p ^ m.flipped ^ (1u64 << m.x));
            let v = if i == 0 {
                -self.pvs(np, no, -beta, -alpha, e - 1)
            } else {
                let mut v = -self.nws(np, no, -alpha - 1, e - 1);
                if v > alpha && v < beta && !self.aborted {
                    v = -self.pvs(np, no, -beta, -alpha, e - 1);
                }
                v
            };
            if self.aborted {
                break;
            }
            if v > best {
                best = v;
                best_x = m.x;
                alpha = alpha.max(v);
            }
        }
        if !self.aborted && legal == all {
            // Without exclusions the root score is the position's exact value.
            self.tt.store(p, o, e, -SCORE_INF, SCORE_INF, best, best_x);
        }
        let mv = Square::new(best_x).map_or(Move::None, Move::Square);
        (mv, best)
    }

    /// Fill the scratch list of depth `e` with the moves of `legal`, scored for ordering.
    #[inline]
    $(#[$attr])*
    fn build_list(&mut self, p: u64, o: u64, legal: u64, e: u32, tt_move: u8) -> usize {
        let odd = if e < 12 { parity_mask(!(p | o)) } else { 0 };
        // Children that will probe the table have their buckets requested now, while the
        // list is scored and sorted (a cache miss in the table is the largest single cost).
        let prefetch = e > SHALLOW_EMPTIES + 1;
        let list = &mut self.lists[e as usize];
        let mut n = 0;
        let mut mm = legal;
        while mm != 0 {
            let x = mm.trailing_zeros() as usize;
            mm &= mm - 1;
            let f = $flips(p, o, x);
            let np = o ^ f;
            let no = p ^ f ^ (1u64 << x);
            if prefetch {
                self.tt.prefetch(np, no);
            }
            let score = if np == 0 {
                W_WIPEOUT
            } else if x as u8 == tt_move {
                W_HASH_MOVE
            } else {
                let mut s = SQUARE_VALUE[x];
                if odd & (1u64 << x) != 0 {
                    s += W_LOW_PARITY;
                }
                s += (36 - potential_mobility(np, no)) * W_POTENTIAL_MOBILITY;
                s += corner_stability(no) * W_CORNER_STABILITY;
                let m = $moves(np, no);
                let wm = (m.count_ones() + (m & CORNERS).count_ones()) as i32;
                s += (36 - wm) * W_MOBILITY;
                s
            };
            list[n] = MoveEntry {
                flipped: f,
                score,
                x: x as u8,
            };
            n += 1;
        }
        n
    }

    /// Selection sort step: move the best remaining entry to position `i` and return it.
    #[inline]
    $(#[$attr])*
    fn pick(&mut self, e: u32, i: usize, n: usize) -> MoveEntry {
        let list = &mut self.lists[e as usize];
        let mut b = i;
        for j in i + 1..n {
            if list[j].score > list[b].score {
                b = j;
            }
        }
        list.swap(i, b);
        list[i]
    }

    #[inline]
    $(#[$attr])*
    fn check_abort(&mut self) -> bool {
        if self.abort.load(Ordering::Relaxed) {
            self.aborted = true;
        }
        self.aborted
    }

    /// Principal variation search node (window `(alpha, beta)`, fail-soft).
    $(#[$attr])*
    fn pvs(&mut self, p: u64, o: u64, mut alpha: i32, beta: i32, e: u32) -> i32 {
        if e == 0 {
            self.nodes += 1;
            return final_score(p, o);
        }
        if beta == alpha + 1 {
            return self.nws(p, o, alpha, e);
        }
        self.nodes += 1;
        if self.check_abort() {
            return alpha;
        }
        let mut tt_move = NO_MOVE;
        if let Some(h) = self.tt.probe(p, o) {
            if h.lower >= beta {
                return h.lower;
            }
            if h.upper <= alpha {
                return h.upper;
            }
            if h.lower == h.upper {
                return h.lower;
            }
            tt_move = h.mv;
        }
        let legal = $moves(p, o);
        if legal == 0 {
            if $moves(o, p) == 0 {
                return final_score(p, o);
            }
            return -self.pvs(o, p, -beta, -alpha, e);
        }
        let alpha0 = alpha;
        let n = self.build_list(p, o, legal, e, tt_move);
        let mut best = -SCORE_INF;
        let mut best_x = NO_MOVE;
        for i in 0..n {
            let m = self.pick(e, i, n);
            let (np, no) = (o ^ m.flipped, p ^ m.flipped ^ (1u64 << m.x));
            let v = if i == 0 {
                -self.pvs(np, no, -beta, -alpha, e - 1)
            } else {
                let mut v = -self.nws(np, no, -alpha - 1, e - 1);
                if v > alpha && v < beta && !self.aborted {
                    v = -self.pvs(np, no, -beta, -alpha, e - 1);
                }
                v
            };
            if self.aborted {
                return alpha;
            }
            if v > best {
                best = v;
                best_x = m.x;
                if v >= beta {
                    break;
                }
                alpha = alpha.max(v);
            }
        }
        self.tt.store(p, o, e, alpha0, beta, best, best_x);
        best
    }

    /// Null-window search with window `(alpha, alpha + 1)` at `e` empties.
    #[inline]
    $(#[$attr])*
    fn nws(&mut self, p: u64, o: u64, alpha: i32, e: u32) -> i32 {
        match e {
            0 => {
                self.nodes += 1;
                final_score(p, o)
            }
            1 => {
                self.nodes += 1;
                solve1(p, (!(p | o)).trailing_zeros() as usize)
            }
            2 => {
                let empty = !(p | o);
                let x1 = empty.trailing_zeros() as usize;
                let x2 = 63 - empty.leading_zeros() as usize;
                self.solve2(p, o, alpha, x1, x2)
            }
            3 => {
                let x = sorted_empties::<3>(!(p | o));
                self.solve3(p, o, alpha, x)
            }
            4 => self.solve4(p, o, alpha),
            _ if e <= SHALLOW_EMPTIES => self.nws_shallow(p, o, alpha, e),
            _ => self.nws_endgame(p, o, alpha, e),
        }
    }

    /// Null-window node with a hash table and fastest-first ordering.
    $(#[$attr])*
    fn nws_endgame(&mut self, p: u64, o: u64, alpha: i32, e: u32) -> i32 {
        self.nodes += 1;
        if self.check_abort() {
            return alpha;
        }
        if alpha >= NWS_STABILITY_THRESHOLD[e as usize] {
            let s = SCORE_MAX - 2 * stable_discs(o, p).count_ones() as i32;
            if s <= alpha {
                return s;
            }
        }
        let mut tt_move = NO_MOVE;
        if let Some(h) = self.tt.probe(p, o) {
            if h.lower > alpha {
                return h.lower;
            }
            if h.upper <= alpha {
                return h.upper;
            }
            tt_move = h.mv;
        }
        let legal = $moves(p, o);
        if legal == 0 {
            if $moves(o, p) == 0 {
                return final_score(p, o);
            }
            return -self.nws_endgame(o, p, -alpha - 1, e);
        }
        let n = self.build_list(p, o, legal, e, tt_move);
        if e >= ETC_MIN_EMPTIES {
            // Enhanced transposition cutoff: a child already known to fail low for the
            // opponent refutes this node without a search.
            for i in 0..n {
                let m = self.lists[e as usize][i];
                let (np, no) = (o ^ m.flipped, p ^ m.flipped ^ (1u64 << m.x));
                if let Some(h) = self.tt.probe(np, no)
                    && -h.upper > alpha
                {
                    self.tt.store(p, o, e, alpha, alpha + 1, -h.upper, m.x);
                    return -h.upper;
                }
            }
        }
        let mut best = -SCORE_INF;
        let mut best_x = NO_MOVE;
        for i in 0..n {
            let m = self.pick(e, i, n);
            let v = -self.nws(
                o ^ m.flipped,
                p ^ m.flipped ^ (1u64 << m.x),
                -alpha - 1,
                e - 1,
            );
            if self.aborted {
                return alpha;
            }
            if v > best {
                best = v;
                best_x = m.x;
                if v > alpha {
                    break;
                }
            }
        }
        self.tt.store(p, o, e, alpha, alpha + 1, best, best_x);
        best
    }

    /// Null-window node at 5..=[`SHALLOW_EMPTIES`] empties: parity and square-class ordering,
    /// stability cutoff, no hash table.
    $(#[$attr])*
    fn nws_shallow(&mut self, p: u64, o: u64, alpha: i32, e: u32) -> i32 {
        self.nodes += 1;
        if alpha >= NWS_STABILITY_THRESHOLD[e as usize] {
            let s = SCORE_MAX - 2 * stable_discs(o, p).count_ones() as i32;
            if s <= alpha {
                return s;
            }
        }
        let legal = $moves(p, o);
        if legal == 0 {
            if $moves(o, p) == 0 {
                return final_score(p, o);
            }
            return -self.nws_shallow(o, p, -alpha - 1, e);
        }
        let odd = parity_mask(!(p | o));
        let mut best = -SCORE_INF;
        for class in [legal & odd, legal & !odd] {
            for sq in SQUARE_CLASSES {
                let mut mm = class & sq;
                while mm != 0 {
                    let x = mm.trailing_zeros() as usize;
                    mm &= mm - 1;
                    let f = $flips(p, o, x);
                    let (np, no) = (o ^ f, p ^ f ^ (1u64 << x));
                    let v = if e == 5 {
                        -self.solve4(np, no, -alpha - 1)
                    } else {
                        -self.nws_shallow(np, no, -alpha - 1, e - 1)
                    };
                    if v > best {
                        best = v;
                        if v > alpha {
                            return v;
                        }
                    }
                }
            }
        }
        best
    }

    /// Four empties: parity-sorted squares, stability cutoff.
    $(#[$attr])*
    fn solve4(&mut self, p: u64, o: u64, alpha: i32) -> i32 {
        self.nodes += 1;
        if alpha >= NWS_STABILITY_THRESHOLD[4] {
            let s = SCORE_MAX - 2 * stable_discs(o, p).count_ones() as i32;
            if s <= alpha {
                return s;
            }
        }
        let x = sorted_empties::<4>(!(p | o));
        let rest = |i: usize| -> [usize; 3] {
            match i {
                0 => [x[1], x[2], x[3]],
                1 => [x[0], x[2], x[3]],
                2 => [x[0], x[1], x[3]],
                _ => [x[0], x[1], x[2]],
            }
        };
        let mut best = -SCORE_INF;
        for (i, &xi) in x.iter().enumerate() {
            let f = Self::flips_if_adjacent(p, o, xi);
            if f != 0 {
                let v = -self.solve3(o ^ f, p ^ f ^ (1u64 << xi), -alpha - 1, rest(i));
                if v > best {
                    best = v;
                    if v > alpha {
                        return v;
                    }
                }
            }
        }
        if best > -SCORE_INF {
            return best;
        }
        // Pass: the opponent moves, then it is our turn again with three empties.
        let mut worst = SCORE_INF;
        for (i, &xi) in x.iter().enumerate() {
            let f = Self::flips_if_adjacent(o, p, xi);
            if f != 0 {
                let v = self.solve3(p ^ f, o ^ f ^ (1u64 << xi), alpha, rest(i));
                if v < worst {
                    worst = v;
                    if v <= alpha {
                        return v;
                    }
                }
            }
        }
        if worst < SCORE_INF {
            worst
        } else {
            final_score(p, o)
        }
    }

    /// Three empties `x` (parity sorted by the caller or by [`sorted_empties`]).
    $(#[$attr])*
    fn solve3(&mut self, p: u64, o: u64, alpha: i32, x: [usize; 3]) -> i32 {
        self.nodes += 1;
        let pairs = [(x[0], x[1], x[2]), (x[1], x[0], x[2]), (x[2], x[0], x[1])];
        let mut best = -SCORE_INF;
        for &(a, b, c) in &pairs {
            let f = Self::flips_if_adjacent(p, o, a);
            if f != 0 {
                let v = -self.solve2(o ^ f, p ^ f ^ (1u64 << a), -alpha - 1, b, c);
                if v > best {
                    best = v;
                    if v > alpha {
                        return v;
                    }
                }
            }
        }
        if best > -SCORE_INF {
            return best;
        }
        let mut worst = SCORE_INF;
        for &(a, b, c) in &pairs {
            let f = Self::flips_if_adjacent(o, p, a);
            if f != 0 {
                let v = self.solve2(p ^ f, o ^ f ^ (1u64 << a), alpha, b, c);
                if v < worst {
                    worst = v;
                    if v <= alpha {
                        return v;
                    }
                }
            }
        }
        if worst < SCORE_INF {
            worst
        } else {
            final_score(p, o)
        }
    }

    /// Two empties `x1`, `x2`.
    #[inline]
    $(#[$attr])*
    fn solve2(&mut self, p: u64, o: u64, alpha: i32, x1: usize, x2: usize) -> i32 {
        self.nodes += 1;
        let mut best = -SCORE_INF;
        let f = Self::flips_if_adjacent(p, o, x1);
        if f != 0 {
            self.nodes += 1;
            best = -solve1(o ^ f, x2);
            if best > alpha {
                return best;
            }
        }
        let f = Self::flips_if_adjacent(p, o, x2);
        if f != 0 {
            self.nodes += 1;
            let v = -solve1(o ^ f, x1);
            if v > best {
                best = v;
            }
        }
        if best > -SCORE_INF {
            return best;
        }
        let mut worst = SCORE_INF;
        let f = Self::flips_if_adjacent(o, p, x1);
        if f != 0 {
            self.nodes += 1;
            worst = solve1(p ^ f, x2);
            if worst <= alpha {
                return worst;
            }
        }
        let f = Self::flips_if_adjacent(o, p, x2);
        if f != 0 {
            self.nodes += 1;
            worst = worst.min(solve1(p ^ f, x1));
        }
        if worst < SCORE_INF {
            worst
        } else {
            final_score(p, o)
        }
    }
}
    };
}

/// Portable code generation (baseline x86-64 / any target).
#[derive(Debug)]
struct Portable;
search_impl!(Portable, moves, flips);

/// x86-64-v3 code generation (POPCNT, LZCNT, BMI1/2, AVX2), chosen at run time.
#[cfg(target_arch = "x86_64")]
#[derive(Debug)]
struct X86V3;
#[cfg(target_arch = "x86_64")]
search_impl!(X86V3, moves_v3, flips_v3, #[target_feature(enable = "popcnt,lzcnt,bmi1,bmi2,avx2")]);

/// Legal moves with AVX2 (four directions per vector, as Edax's `get_moves_avx2`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "popcnt,lzcnt,bmi1,bmi2,avx2")]
fn moves_v3(p: u64, o: u64) -> u64 {
    crate::flip::x86::moves_avx2(p, o)
}

/// Flips with AVX2 (four directions per vector, as Edax's `flip_avx_ppfill`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "popcnt,lzcnt,bmi1,bmi2,avx2")]
fn flips_v3(p: u64, o: u64, x: usize) -> u64 {
    crate::flip::x86::flips_avx2(p, o, x as u8)
}

/// The `N` empty squares of `empty`, squares of odd quadrants first (stable otherwise).
#[inline(always)]
fn sorted_empties<const N: usize>(empty: u64) -> [usize; N] {
    let odd = parity_mask(empty);
    let mut out = [0usize; N];
    let mut k = 0;
    for part in [empty & odd, empty & !odd] {
        let mut m = part;
        while m != 0 && k < N {
            out[k] = m.trailing_zeros() as usize;
            m &= m - 1;
            k += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solve1_matches_rules() {
        // Random full boards but one square, against the board's own rules.
        let mut rng = crate::testutil::XorShift(0x2545_f491_4f6c_dd1d);
        for _ in 0..10000 {
            let r = rng.next_u64();
            let x = (r % 64) as usize;
            let p = (r.rotate_left(17) ^ r.wrapping_mul(3)) & !(1u64 << x);
            let o = !p & !(1u64 << x);
            let b = Board {
                player: p,
                opponent: o,
            };
            let expected = if b.moves() != 0 {
                b.play(Square::new(x as u8).unwrap())
                    .unwrap()
                    .pass()
                    .final_score()
            } else if b.pass().moves() != 0 {
                b.pass()
                    .play(Square::new(x as u8).unwrap())
                    .unwrap()
                    .final_score()
            } else {
                b.final_score()
            };
            assert_eq!(solve1(p, x), expected, "{b}");
        }
    }

    #[test]
    fn corner_stability_counts_corner_groups() {
        assert_eq!(corner_stability(1), 1);
        assert_eq!(corner_stability(0b11), 2);
        assert_eq!(corner_stability(0b10), 0);
        assert_eq!(corner_stability(1 | (1 << 8) | (1 << 1)), 3);
    }
}
