//! The midgame search nodes (edax-spec §7, §8.4, §8.5): `eval_1`, `eval_2`, principal-variation
//! and null-window nodes with a transposition table, stability cutoffs and multi-probcut.
//!
//! Scores are for the side to move, fail-soft. Passes never consume depth. Game over is scored
//! exactly when it is detected at a node (never at a static leaf). With no selectivity and no
//! stability cutoff the value at depth `d` is the reference of edax-spec §8.4.

use super::exact::ExactSolvers;
use super::options::SearchOptions;
use super::ordering::{self, MoveList};
use super::probcut;
use super::tt::Tt;
use crate::board::Board;
use crate::eval::extra::extra_indices_with;
use crate::eval::features::encode;
use crate::eval::{Eval, Features, Lanes, extra_sum, round_clamp};
use crate::level::{NO_SELECTIVITY, SELECTIVITY_T};
use crate::stability::stable_discs;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest score magnitude.
pub const SCORE_MAX: i32 = 64;
/// "Infinite" score (Edax's `SCORE_INF`).
pub const SCORE_INF: i32 = 127;
/// Edax's code for "no move".
pub const NO_MOVE: u8 = 65;

/// Edax's `NWS_STABILITY_THRESHOLD` (with `USE_SOLID` off), indexed by empties.
pub const NWS_STABILITY_THRESHOLD: [i32; 64] = [
    99, 99, 99, 99, 6, 8, 10, 12, 14, 16, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46,
    48, 48, 50, 50, 52, 52, 54, 54, 56, 56, 58, 58, 60, 60, 62, 62, 64, 64, 64, 64, 64, 64, 64, 64,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
];

/// `64 − 2·stable(opponent)`: an upper bound of the exact value of the position.
#[inline]
pub fn stability_upper(board: &Board) -> i32 {
    SCORE_MAX - 2 * stable_discs(board.opponent, board.player).count_ones() as i32
}

/// `2·stable(player) − 64`: a lower bound of the exact value of the position.
#[inline]
pub fn stability_lower(board: &Board) -> i32 {
    2 * stable_discs(board.player, board.opponent).count_ones() as i32 - SCORE_MAX
}

/// The state of one running search; `K` is the code generation of its node routines
/// ([`Portable`] or [`X86V3`]).
pub(crate) struct Ctx<'a, K> {
    pub eval: &'a Eval,
    pub tt: &'a mut Tt,
    pub exact: &'a mut ExactSolvers,
    pub opts: &'a SearchOptions,
    pub abort: &'a AtomicBool,
    pub board: Board,
    pub features: Features,
    pub nodes: u64,
    pub stopped: bool,
    pub selectivity: u8,
    pub probcut_nesting: u32,
    /// PV nodes with at most this many empties are solved (Edax's `depth_pv_extension`; 0 = off).
    pub pv_extension: u32,
    /// Killer moves of depth-1 nodes, per number of empties (0..=64, so that any board indexes
    /// it): the last two moves that cut such a node off, tried first. Like every field, reset for
    /// each search, so the search stays a function of its inputs.
    killer1: [ordering::Killers; 65],
    /// The same for depth-2 nodes.
    killer2: [ordering::Killers; 65],
    /// Per number of empties, the last move that cut a null-window node off (ordered right after
    /// the table move).
    killer_n: [u8; 65],
    codegen: PhantomData<K>,
}

/// Edax's PV extension for a root search at `depth` with `empties` empties (edax-spec §8.5 item 1):
/// off (0) when solving or at depth ≤ 9, else 10, 12, 14 or 16 by depth.
pub fn pv_extension(depth: u32, empties: u32) -> u32 {
    if depth >= empties || depth <= 9 {
        0
    } else if depth <= 12 {
        10
    } else if depth <= 18 {
        12
    } else if depth <= 24 {
        14
    } else {
        16
    }
}

impl<'a, K> Ctx<'a, K> {
    pub fn new(
        eval: &'a Eval,
        tt: &'a mut Tt,
        exact: &'a mut ExactSolvers,
        opts: &'a SearchOptions,
        abort: &'a AtomicBool,
        board: Board,
    ) -> Ctx<'a, K> {
        Ctx {
            eval,
            tt,
            exact,
            opts,
            abort,
            board,
            features: Features::new(&board),
            nodes: 0,
            stopped: false,
            selectivity: NO_SELECTIVITY,
            probcut_nesting: 0,
            pv_extension: 0,
            killer1: [ordering::Killers::NONE; 65],
            killer2: [ordering::Killers::NONE; 65],
            killer_n: [NO_MOVE; 65],
            codegen: PhantomData,
        }
    }

    #[inline]
    fn check_abort(&mut self) -> bool {
        if self.nodes & 0x3ff == 0 && self.abort.load(Ordering::Relaxed) {
            self.stopped = true;
        }
        self.stopped
    }

    /// Play a candidate; returns the previous board for [`Ctx::unmake`].
    #[inline(always)]
    pub fn make(&mut self, x: u8, flipped: u64) -> Board {
        let prev = self.board;
        self.features.play(x, flipped);
        self.board = prev.play_flips(x, flipped);
        prev
    }

    #[inline(always)]
    pub fn unmake(&mut self, x: u8, flipped: u64, prev: Board) {
        self.features.undo(x, flipped);
        self.board = prev;
    }

    #[inline(always)]
    pub fn make_pass(&mut self) {
        self.features.pass();
        self.board = self.board.pass();
    }

    /// Static evaluation of the current position (edax-spec §8.3).
    #[inline(always)]
    pub fn eval0(&self) -> i32 {
        let b = self.board;
        round_clamp(
            self.eval.raw(&self.features, b.empties())
                + self.eval.extra_raw(b.player, b.opponent, b.empties()),
        )
    }

    /// Exact value through the endgame solver.
    pub fn solve_exact(&mut self, alpha: i32, beta: i32) -> i32 {
        let b = self.board;
        let v = self
            .exact
            .solve(&b, alpha, beta, &mut self.nodes, self.abort);
        if self.abort.load(Ordering::Relaxed) {
            self.stopped = true;
        }
        v
    }
}

/// The node routines, compiled once per code generation `$codegen` with the attributes given (the
/// x86-64-v3 copy has POPCNT, BMI and AVX2 for the mobility counts, the feature-vector updates and
/// the inlined AVX2 flips). Both copies are the same source, so they compute the same values.
macro_rules! node_routines {
    ($codegen:ty $(, #[$attr:meta])*) => {
impl Ctx<'_, $codegen> {
    /// Dispatch a child search of the given remaining depth (`pv` = principal-variation node).
    #[inline]
    $(#[$attr])*
    pub fn search(&mut self, alpha: i32, beta: i32, depth: u32, pv: bool) -> i32 {
        let e = self.board.empties();
        // PV extension: a PV node close enough to the end is solved (at the current selectivity).
        if depth >= e || (pv && depth >= 2 && e <= self.pv_extension) {
            if self.selectivity >= NO_SELECTIVITY || e < self.opts.midgame_to_endgame {
                return self.solve_exact(alpha, beta);
            }
            return if pv {
                self.pvs(alpha, beta, e)
            } else {
                self.nws(alpha, e)
            };
        }
        match depth {
            0 => {
                self.nodes += 1;
                self.eval0()
            }
            1 => self.eval1(alpha, beta),
            2 => self.eval2(alpha, beta),
            _ if pv => self.pvs(alpha, beta, depth),
            _ => self.nws(alpha, depth),
        }
    }

    /// Depth-1 search of the current position, from the dispatch.
    #[inline]
    $(#[$attr])*
    pub fn eval1(&mut self, alpha: i32, beta: i32) -> i32 {
        let opponent = *self.features.opponent_indices();
        self.eval1_from(&opponent, alpha, beta)
    }

    /// Depth-1 search (Edax `search_eval_1`): a move that wipes the opponent out scores +64 at
    /// once (when it comes before a cutoff); otherwise the best rounded static score of the
    /// children, clamped to ±63. The moves are tried killers first (the last two moves that cut
    /// a depth-1 node with as many empties off), then in square order: at 84 % of these nodes
    /// one child reaches beta, and the killer finds it sooner (level 12: 10 % fewer nodes).
    /// The children are evaluated from `opponent`, the feature indices of the current position
    /// from the view of the side not to move (`self.features` is not read: from [`Ctx::eval2`]
    /// it still describes the parent).
    $(#[$attr])*
    pub fn eval1_from(&mut self, opponent: &Lanes, alpha: i32, beta: i32) -> i32 {
        let b = self.board;
        let moves = b.moves();
        if moves == 0 {
            self.nodes += 1;
            let pass = b.pass();
            if pass.moves() == 0 {
                return b.final_score();
            }
            // After the pass the side not to move is the one to move now: its view, encoded
            // from scratch (passes are rare).
            let own = encode(b.player, b.opponent);
            self.board = pass;
            let s = -self.eval1_from(&own, -beta, -alpha);
            self.board = b;
            return s;
        }
        let beta = beta.min(SCORE_MAX - 1);
        let weights = self.eval.ply(b.empties() - 1);
        // `bookfarm-eval2` weights add the extra terms of each child (None for eval.dat).
        let extra = self.eval.extra_weights(61 - b.empties() as usize);
        let kernels = crate::flip::active();
        let mut best = -SCORE_INF;
        // Nodes counted locally (this node and each evaluated child), added once at the end.
        let mut nodes = 1;
        let e = b.empties() as usize;
        'groups: for group in self.killer1[e].groups(moves) {
            let mut m = group;
            while m != 0 {
                let x = m.trailing_zeros() as u8;
                m &= m - 1;
                let f = kernels.flips(b.player, b.opponent, x);
                // A wipe-out met before a cutoff scores +64 at once, as in Edax's move loop.
                if f == b.opponent {
                    self.nodes += nodes;
                    return SCORE_MAX;
                }
                nodes += 1;
                // `black_box` keeps the child's indices in memory, so the 47 look-ups read them
                // with one-uop loads; otherwise LLVM extracts each from a register with `vpextrw`
                // (two uops), which measured 4-6 % slower on a level-12 search.
                let child = std::hint::black_box(Features::child_of(opponent, x, f));
                let mut raw = weights.raw(&child);
                if let Some(w) = extra {
                    // The child seen from its side to move (the opponent here).
                    let own = b.opponent & !f;
                    let other = b.player | f | (1u64 << x);
                    raw += extra_sum(
                        w,
                        &extra_indices_with(own, other, |p, o| kernels.moves(p, o)),
                    );
                }
                let s = -(if raw > 0 {
                    (raw + 64) / 128
                } else {
                    (raw - 64) / 128
                });
                if s > best {
                    best = s;
                    if best >= beta {
                        self.killer1[e].record(x);
                        break 'groups;
                    }
                }
            }
        }
        self.nodes += nodes;
        best.clamp(-SCORE_MAX + 1, SCORE_MAX - 1)
    }

    /// Depth-2 search (Edax `search_eval_2`): plain fail-soft alpha-beta, no table, no stability
    /// cutoff; killer moves first, as in [`Ctx::eval1_from`]. The children get their evaluation
    /// base from the mover's view; `self.features` stays at this node.
    $(#[$attr])*
    pub fn eval2(&mut self, mut alpha: i32, beta: i32) -> i32 {
        self.nodes += 1;
        let b = self.board;
        let moves = b.moves();
        // Same pass/game-over block as `eval1`, `nws` and `pvs`, each recursing into itself: kept
        // inline in these hot leaf searches rather than routed through a shared helper.
        if moves == 0 {
            let pass = b.pass();
            if pass.moves() == 0 {
                return b.final_score();
            }
            self.make_pass();
            let s = -self.eval2(-beta, -alpha);
            self.make_pass();
            return s;
        }
        let own = *self.features.indices();
        let mut best = -SCORE_INF;
        let e = b.empties() as usize;
        'groups: for group in self.killer2[e].groups(moves) {
            let mut m = group;
            while m != 0 {
                let x = m.trailing_zeros() as u8;
                m &= m - 1;
                let f = crate::flip::flips(b.player, b.opponent, x);
                let base = Features::mover_after(&own, x, f);
                self.board = b.play_flips(x, f);
                let s = -self.eval1_from(&base, -beta, -alpha);
                self.board = b;
                if s > best {
                    best = s;
                    if best >= beta {
                        self.killer2[e].record(x);
                        break 'groups;
                    }
                    if best > alpha {
                        alpha = best;
                    }
                }
            }
        }
        best
    }

    /// Order a move list: wipe-out, table move, then mobility heuristics refined by a shallow
    /// value at depth ≥ 9 and in solving nodes.
    $(#[$attr])*
    pub fn order(&mut self, list: &mut MoveList, tt_move: u8, depth: u32) {
        let opp = self.board.opponent;
        // Solving nodes (selective endgame) order by static evaluation and mobility only: their
        // subtrees are full-depth, a deeper ordering search would cost more than it saves.
        let solving = depth >= self.board.empties();
        // Which shallow value refines the mobility heuristics: the static evaluation in solving
        // nodes, a depth-2 search from depth 9 up, none below. Below depth 9 the heuristics alone
        // order better per unit of work (as Edax's `movelist_evaluate_fast` below its `MIN_DEPTH`
        // of 9): measured on levels-positions.obf, evaluating at depths 4-8 cost more nodes than
        // it saved (level 12: 10 % more nodes, level 16: about 30 % more).
        #[derive(PartialEq)]
        enum Refine {
            None,
            Static,
            Depth2,
        }
        let refine = if solving {
            Refine::Static
        } else if depth >= 9 {
            Refine::Depth2
        } else {
            Refine::None
        };
        // Children at depth ≥ 3 probe the table first thing: start loading their buckets now,
        // so that the memory latency overlaps the ordering and the earlier siblings' searches.
        let prefetch = depth >= 4;
        let killer = self.killer_n[self.board.empties() as usize];
        for i in 0..list.len() {
            let c = list.as_slice()[i];
            let child = self.board.play_flips(c.x, c.flipped);
            if prefetch {
                self.tt.prefetch(&child);
            }
            let score = if c.flipped == opp {
                ordering::WIPEOUT
            } else if c.x == tt_move {
                ordering::TT_MOVE
            } else if c.x == killer {
                ordering::KILLER
            } else {
                let mut s = ordering::heuristic(&child);
                if refine != Refine::None {
                    let v = if refine == Refine::Static {
                        let idx = self.features.child_indices(c.x, c.flipped);
                        round_clamp(
                            self.eval.raw_indices(&idx, child.empties())
                                + self.eval.extra_raw(
                                    child.player,
                                    child.opponent,
                                    child.empties(),
                                ),
                        )
                    } else {
                        let prev = self.make(c.x, c.flipped);
                        let v = self.eval2(-SCORE_MAX, SCORE_MAX);
                        self.unmake(c.x, c.flipped, prev);
                        v
                    };
                    s += (SCORE_MAX - v) * ordering::W_EVAL;
                }
                s
            };
            list.as_mut_slice()[i].score = score;
        }
    }

    /// Multi-probcut test at a null-window node; `Some(bound)` when the node is cut.
    $(#[$attr])*
    fn probcut(&mut self, alpha: i32, depth: u32) -> Option<i32> {
        let sel = usize::from(self.selectivity.min(NO_SELECTIVITY));
        let t = SELECTIVITY_T[sel];
        let n = self.board.empties();
        let pd = probcut::probcut_depth(depth);
        let (perr, eerr) = probcut::margins(&self.opts.probcut, t, n, depth, pd);
        let beta = alpha + 1;
        let ev = self.eval0();
        self.probcut_nesting += 1;
        let mut result = None;
        let pb = beta + perr;
        if ev >= beta - eerr && pb < SCORE_MAX {
            let s = self.search(pb - 1, pb, pd, false);
            if !self.stopped && s >= pb {
                result = Some(beta);
            }
        }
        let pa = alpha - perr;
        if result.is_none() && ev < alpha + eerr && pa > -SCORE_MAX {
            let s = self.search(pa, pa + 1, pd, false);
            if !self.stopped && s <= pa {
                result = Some(alpha);
            }
        }
        self.probcut_nesting -= 1;
        result
    }

    /// Null-window node `(alpha, alpha + 1)` at depth ≥ 3.
    $(#[$attr])*
    pub fn nws(&mut self, alpha: i32, depth: u32) -> i32 {
        self.nodes += 1;
        if self.check_abort() {
            return 0;
        }
        let b = self.board;
        let e = b.empties();
        if self.opts.stability_cutoff && alpha >= NWS_STABILITY_THRESHOLD[e as usize] {
            let s = stability_upper(&b);
            if s <= alpha {
                return s;
            }
        }
        let sel = self.selectivity;
        let mut tt_move = NO_MOVE;
        if let Some(d) = self.tt.probe(&b) {
            if u32::from(d.depth) >= depth && d.selectivity >= sel {
                if i32::from(d.lower) > alpha {
                    return i32::from(d.lower);
                }
                if i32::from(d.upper) <= alpha {
                    return i32::from(d.upper);
                }
            }
            tt_move = d.mv;
        }
        let moves = b.moves();
        if moves == 0 {
            let pass = b.pass();
            if pass.moves() == 0 {
                return b.final_score();
            }
            self.make_pass();
            let s = -self.search(-alpha - 1, -alpha, depth, false);
            self.make_pass();
            return s;
        }
        if sel < NO_SELECTIVITY
            && depth >= 4
            && self.probcut_nesting < self.opts.probcut_max_nesting
            && let Some(s) = self.probcut(alpha, depth)
        {
            return s;
        }
        let mut list = MoveList::new(&b, moves);
        self.order(&mut list, tt_move, depth);
        let mut best = -SCORE_INF;
        let mut best_move = NO_MOVE;
        while let Some(c) = list.next_best() {
            let prev = self.make(c.x, c.flipped);
            let s = -self.search(-alpha - 1, -alpha, depth - 1, false);
            self.unmake(c.x, c.flipped, prev);
            if self.stopped {
                return 0;
            }
            if s > best {
                best = s;
                best_move = c.x;
                if best > alpha {
                    self.killer_n[e as usize] = c.x;
                    break;
                }
            }
        }
        self.tt
            .store(&b, depth, sel, alpha, alpha + 1, best, best_move);
        best
    }

    /// Principal-variation node `(alpha, beta)` at depth ≥ 3.
    $(#[$attr])*
    pub fn pvs(&mut self, mut alpha: i32, beta: i32, depth: u32) -> i32 {
        self.nodes += 1;
        if self.check_abort() {
            return 0;
        }
        let b = self.board;
        let sel = self.selectivity;
        let mut tt_move = NO_MOVE;
        if let Some(d) = self.tt.probe(&b) {
            if u32::from(d.depth) >= depth && d.selectivity >= sel {
                let (lo, up) = (i32::from(d.lower), i32::from(d.upper));
                if lo >= beta {
                    return lo;
                }
                if up <= alpha {
                    return up;
                }
                if lo == up {
                    return lo;
                }
            }
            tt_move = d.mv;
        }
        let moves = b.moves();
        if moves == 0 {
            let pass = b.pass();
            if pass.moves() == 0 {
                return b.final_score();
            }
            self.make_pass();
            let s = -self.search(-beta, -alpha, depth, true);
            self.make_pass();
            return s;
        }
        let alpha0 = alpha;
        let mut list = MoveList::new(&b, moves);
        self.order(&mut list, tt_move, depth);
        let mut best = -SCORE_INF;
        let mut best_move = NO_MOVE;
        let mut first = true;
        while let Some(c) = list.next_best() {
            let prev = self.make(c.x, c.flipped);
            let s = if first {
                -self.search(-beta, -alpha, depth - 1, true)
            } else {
                let s = -self.search(-alpha - 1, -alpha, depth - 1, false);
                if !self.stopped && alpha < s && s < beta {
                    -self.search(-beta, -alpha, depth - 1, true)
                } else {
                    s
                }
            };
            first = false;
            self.unmake(c.x, c.flipped, prev);
            if self.stopped {
                return 0;
            }
            if s > best {
                best = s;
                best_move = c.x;
                if best >= beta {
                    break;
                }
                if best > alpha {
                    alpha = best;
                }
            }
        }
        self.tt.store(&b, depth, sel, alpha0, beta, best, best_move);
        best
    }
}
    };
}

/// Baseline code generation (any x86-64 or other target).
#[derive(Debug)]
pub(crate) struct Portable;
node_routines!(Portable);

/// x86-64-v3 code generation (POPCNT, LZCNT, BMI1/2, AVX2); a `Ctx<X86V3>` is only built after
/// [`crate::endgame::has_x86_v3`] said the CPU runs it.
#[cfg(target_arch = "x86_64")]
#[derive(Debug)]
pub(crate) struct X86V3;
#[cfg(target_arch = "x86_64")]
node_routines!(X86V3, #[target_feature(enable = "popcnt,lzcnt,bmi1,bmi2,avx2")]);

/// What the root search needs from the node routines, callable whatever the code generation.
pub(crate) trait Nodes {
    /// [`Ctx::search`] of the current position.
    fn child(&mut self, alpha: i32, beta: i32, depth: u32, pv: bool) -> i32;
    /// [`Ctx::order`] of a move list of the current position.
    fn order_moves(&mut self, list: &mut MoveList, tt_move: u8, depth: u32);
}

impl Nodes for Ctx<'_, Portable> {
    fn child(&mut self, alpha: i32, beta: i32, depth: u32, pv: bool) -> i32 {
        self.search(alpha, beta, depth, pv)
    }

    fn order_moves(&mut self, list: &mut MoveList, tt_move: u8, depth: u32) {
        self.order(list, tt_move, depth);
    }
}

#[cfg(target_arch = "x86_64")]
impl Nodes for Ctx<'_, X86V3> {
    fn child(&mut self, alpha: i32, beta: i32, depth: u32, pv: bool) -> i32 {
        // SAFETY: `Ctx<X86V3>` values exist only on CPUs with the x86-64-v3 features (see the
        // type's docs), which is all `search` requires.
        unsafe { self.search(alpha, beta, depth, pv) }
    }

    fn order_moves(&mut self, list: &mut MoveList, tt_move: u8, depth: u32) {
        // SAFETY: as in `child`.
        unsafe { self.order(list, tt_move, depth) }
    }
}
