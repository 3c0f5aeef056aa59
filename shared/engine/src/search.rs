//! Edax-compatible midgame search and the leaf-search API used by the book builders.
//!
//! One [`Searcher`] per thread owns a transposition table and shares the evaluation weights
//! (`Arc<Eval>`). A search is single-threaded and deterministic: the table starts logically empty
//! for every search, so equal inputs give equal scores, moves and node counts.
//!
//! A search at depth `d` with selectivity `s` follows Edax (edax-spec §7): iterative deepening
//! from a small depth of the same parity, aspiration windows around the previous score (or, for
//! `d ≤ 10`, an exact value for every root move), then the selectivity ramp at the final depth.
//! Root scores are clamped to the root's stability bounds. A root that must pass is searched at the
//! same depth and reports [`Move::Pass`] (at depth 0, as in Edax, its score is the static
//! evaluation of the position itself, not of the pass); a finished game reports its exact score
//! and [`Move::None`]. With `d ≥ empties` the search is an endgame search: exact (through the exact
//! solver) at selectivity 5, or the midgame routines with probcut down to
//! [`SearchOptions::midgame_to_endgame`] empties otherwise.
//!
//! Compatibility with Edax (edax-spec §8.4–8.7): at depths ≤ 8 with no selectivity the scores
//! equal Edax's on every line of the golden fixed-depth files (`tests/engine/fixed_depth.rs`). Included
//! from Edax: the `eval_1` wipe-out rule, passes that do not consume depth, exact game-over
//! scores, the root stability clamp, stability cutoffs in null-window nodes (Edax's threshold
//! table), the multi-PV root for depths ≤ 10, PV extension above depth 9, and multi-probcut
//! with Edax's sigma model ([`probcut::ProbcutModel::EDAX`]). Deliberate differences: the
//! transposition table is logically emptied for every search (Edax keeps entries between
//! searches; we want results independent of history), move ordering is our own (so node counts
//! and, beyond depth 9, some PV-dependent values can differ), no enhanced transposition cutoff,
//! and selective endgames switch to the exact solver below 21 empties instead of 15.

pub mod calibrate;
pub mod exact;
mod midgame;
pub mod options;
pub mod ordering;
pub mod probcut;
pub mod tt;

pub use midgame::{
    NWS_STABILITY_THRESHOLD, SCORE_INF, SCORE_MAX, stability_lower, stability_upper,
};
pub use options::{SEARCH_REVISION, SearchOptions, SearchSignature};

use crate::board::Board;
use crate::eval::Eval;
use crate::level::{NO_SELECTIVITY, level_params};
use crate::square::{Move, Square};
use exact::ExactSolvers;
use midgame::{Ctx, NO_MOVE, Nodes, Portable};
use ordering::MoveList;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tt::Tt;

/// A leaf search at an Edax level, excluding some root moves (the book's existing links).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeafRequest {
    /// The position, seen from the side to move.
    pub board: Board,
    /// Edax level 0..=60 (depth and selectivity come from [`level_params`]).
    pub level: u8,
    /// Squares (bit i = square i) not to consider at the root.
    pub excluded: u64,
}

/// The result of a leaf search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafResult {
    /// Best move; [`Move::None`] when every legal move is excluded or the game is over;
    /// [`Move::Pass`] when the side to move must pass.
    pub mv: Move,
    /// Score for the side to move (−127, Edax's `BAD_LINK` value, when every move is excluded).
    pub score: i32,
    /// Depth of the last completed search.
    pub depth: u32,
    /// Selectivity index of the last completed search (0..=5, 5 = none).
    pub selectivity: u8,
    /// True when the score is the exact game value.
    pub exact: bool,
    /// Nodes searched.
    pub nodes: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// A single-threaded searcher owning its transposition table.
#[derive(Debug)]
pub struct Searcher {
    eval: Arc<Eval>,
    tt: Tt,
    exact: ExactSolvers,
    opts: SearchOptions,
    /// Baseline code generation even where the CPU runs x86-64-v3.
    portable: bool,
}

/// [`Searcher::run`] instantiated for one code generation.
type Runner = fn(&mut Searcher, &Board, u32, u8, u64, &AtomicBool) -> LeafResult;

/// One root move with its last score (for ordering the next iteration).
#[derive(Debug, Clone, Copy)]
struct RootMove {
    x: u8,
    flipped: u64,
    score: i32,
}

/// Progress of the iterative deepening.
#[derive(Debug, Clone, Copy)]
struct Best {
    score: i32,
    x: u8,
    depth: u32,
    selectivity: u8,
}

impl Searcher {
    /// A searcher with default options (2^20-entry table). With bookfarm's embedded default
    /// weights ([`crate::eval::default_eval`]) probcut uses the model calibrated for them
    /// ([`probcut::DEFAULT_WEIGHTS_PARAMS`]); with any other weights, Edax's published model.
    pub fn new(eval: Arc<Eval>) -> Searcher {
        let opts = SearchOptions::for_eval(&eval);
        Searcher::with_options(eval, opts)
    }

    /// A searcher with explicit options.
    pub fn with_options(eval: Arc<Eval>, opts: SearchOptions) -> Searcher {
        // Build the stability tables now rather than inside the first search.
        crate::stability::init();
        let tt = Tt::new(opts.tt_bits);
        let exact = ExactSolvers::new(opts.endgame_tt_bits);
        Searcher {
            eval,
            tt,
            exact,
            opts,
            portable: false,
        }
    }

    /// The options in use.
    pub fn options(&self) -> &SearchOptions {
        &self.opts
    }

    /// The evaluation in use.
    pub fn eval(&self) -> &Arc<Eval> {
        &self.eval
    }

    /// Run the baseline code generation of the node routines and of the exact solver even where
    /// the CPU supports x86-64-v3 (with [`crate::flip::set_active`], this reproduces on one machine
    /// what a CPU without AVX2 computes). Results never change, only speed; `tests/backends.rs`
    /// checks it.
    pub fn set_portable_codegen(&mut self, on: bool) {
        self.portable = on;
        self.exact.set_portable_only(on);
    }

    /// Full transposition-table clear.
    pub fn clear(&mut self) {
        self.tt.clear();
        self.exact.clear();
    }

    /// Search at an Edax level (depth and selectivity from the level table).
    pub fn leaf_search(&mut self, req: &LeafRequest, abort: &AtomicBool) -> LeafResult {
        let (depth, sel) = level_params(req.level, req.board.empties());
        self.search_depth(&req.board, depth, sel, req.excluded, abort)
    }

    /// Search at a fixed depth and selectivity index (values above 5 mean 5).
    pub fn search_depth(
        &mut self,
        board: &Board,
        depth: u32,
        selectivity: u8,
        excluded: u64,
        abort: &AtomicBool,
    ) -> LeafResult {
        let start = Instant::now();
        self.tt.new_search();
        let selectivity = selectivity.min(NO_SELECTIVITY);
        let n = board.empties();
        let mut r = if board.moves() == 0 {
            let pass = board.pass();
            if pass.moves() == 0 {
                LeafResult {
                    mv: Move::None,
                    score: board.final_score(),
                    depth: n,
                    selectivity: NO_SELECTIVITY,
                    exact: true,
                    nodes: 1,
                    elapsed: Duration::ZERO,
                }
            } else if depth == 0 {
                // Edax's depth 0 (level 0) never plays the pass: it reports the static evaluation
                // of the position as it stands, clamped to the root's stability bounds, with the
                // move PASS (`iterative_deepening` returns before any search when `end == 0`).
                LeafResult {
                    mv: Move::Pass,
                    score: self
                        .eval
                        .eval0(board)
                        .clamp(stability_lower(board), stability_upper(board)),
                    depth: 0,
                    selectivity: NO_SELECTIVITY,
                    exact: false,
                    nodes: 1,
                    elapsed: Duration::ZERO,
                }
            } else {
                // The pass is searched at the same depth; the opponent's stability bounds are the
                // negation of ours, so the root clamp is unchanged.
                let mut r = self.runner()(self, &pass, depth, selectivity, 0, abort);
                r.score = -r.score;
                r.mv = Move::Pass;
                r.nodes += 1;
                r
            }
        } else {
            self.runner()(self, board, depth, selectivity, excluded, abort)
        };
        r.elapsed = start.elapsed();
        r
    }

    /// [`Searcher::run`] with the node routines compiled for x86-64-v3 when the CPU runs them,
    /// else the baseline ones.
    fn runner(&self) -> Runner {
        #[cfg(target_arch = "x86_64")]
        if !self.portable && crate::endgame::has_x86_v3() {
            return Searcher::run::<midgame::X86V3>;
        }
        Searcher::run::<Portable>
    }

    /// Search a position that has at least one legal move, with the node routines of code
    /// generation `K`.
    fn run<K>(
        &mut self,
        board: &Board,
        depth: u32,
        target_sel: u8,
        excluded: u64,
        abort: &AtomicBool,
    ) -> LeafResult
    where
        for<'c> Ctx<'c, K>: Nodes,
    {
        let n = board.empties();
        let root_mask = board.moves() & !excluded;
        // Exact solves can happen in any search (endgame, PV extension): start from empty
        // solver tables so that node counts never depend on earlier searches.
        self.exact.prepare();
        let eval = Arc::clone(&self.eval);
        let mut ctx = Ctx::<K>::new(
            &eval,
            &mut self.tt,
            &mut self.exact,
            &self.opts,
            abort,
            *board,
        );
        let result = |best: Best, nodes: u64| LeafResult {
            mv: if best.x == NO_MOVE {
                Move::None
            } else {
                Square::new(best.x).map_or(Move::None, Move::Square)
            },
            score: best.score,
            depth: best.depth,
            selectivity: best.selectivity,
            exact: best.depth >= n && best.selectivity >= NO_SELECTIVITY,
            nodes,
            elapsed: Duration::ZERO,
        };
        if root_mask == 0 {
            return LeafResult {
                mv: Move::None,
                score: -SCORE_INF,
                depth: depth.min(n),
                selectivity: target_sel,
                exact: false,
                nodes: 0,
                elapsed: Duration::ZERO,
            };
        }
        let lower = stability_lower(board);
        let upper = stability_upper(board);
        // Initial root order: the node ordering heuristic at the final depth.
        let mut list = MoveList::new(board, root_mask);
        ctx.order_moves(&mut list, NO_MOVE, depth.clamp(1, 8));
        let mut roots: Vec<RootMove> = std::iter::from_fn(|| list.next_best())
            .map(|c| RootMove {
                x: c.x,
                flipped: c.flipped,
                score: 0,
            })
            .collect();
        let mut best = Best {
            score: ctx.eval0().clamp(lower, upper),
            x: roots[0].x,
            depth: 0,
            selectivity: NO_SELECTIVITY,
        };
        if depth == 0 {
            return result(best, ctx.nodes + 1);
        }
        let solving = depth >= n;
        if solving && target_sel >= NO_SELECTIVITY {
            let mut nodes = ctx.nodes;
            let (mv, score) = ctx.exact.solve_root(board, excluded, &mut nodes, abort);
            if abort.load(std::sync::atomic::Ordering::Relaxed) {
                return result(best, nodes);
            }
            return LeafResult {
                mv,
                score,
                depth: n,
                selectivity: NO_SELECTIVITY,
                exact: true,
                nodes,
                elapsed: Duration::ZERO,
            };
        }
        // Iterative deepening schedule (edax-spec §7, step 3).
        let end: i32 = if solving {
            let e = n as i32 - 8;
            if e <= 0 { 2 - (n as i32 & 1) } else { e }
        } else {
            depth as i32
        };
        let mut start = 6 - (end & 1);
        if start > end - 2 {
            start = end - 2;
        }
        if start <= 0 {
            start = 2 - (end & 1);
        }
        let mut sel = if depth > 10 { 0 } else { NO_SELECTIVITY }.min(target_sel);
        let bounds = (lower, upper);
        let mut d = start;
        while d < end {
            let du = d as u32;
            match aspiration(&mut ctx, &mut roots, du, sel, best.score, bounds, false) {
                Some((s, x)) => {
                    best = Best {
                        score: s,
                        x,
                        depth: du,
                        selectivity: sel,
                    }
                }
                None => return result(best, ctx.nodes),
            }
            d += 2;
        }
        let final_depth = if solving { n } else { end as u32 };
        loop {
            match aspiration(
                &mut ctx,
                &mut roots,
                final_depth,
                sel,
                best.score,
                bounds,
                solving,
            ) {
                Some((s, x)) => {
                    best = Best {
                        score: s,
                        x,
                        depth: final_depth,
                        selectivity: sel,
                    }
                }
                None => return result(best, ctx.nodes),
            }
            if sel >= target_sel {
                break;
            }
            sel += 1;
            let fd = final_depth;
            if solving
                && ((fd < 21 && sel >= 1)
                    || (fd < 24 && sel >= 2)
                    || (fd < 27 && sel >= 3)
                    || (fd < 30 && sel >= 4)
                    || best.score.abs() >= SCORE_MAX)
            {
                sel = target_sel;
            }
        }
        result(best, ctx.nodes)
    }
}

/// One aspiration search at `depth` (edax-spec §7); `None` when aborted.
fn aspiration<'a, K>(
    ctx: &mut Ctx<'a, K>,
    roots: &mut [RootMove],
    depth: u32,
    sel: u8,
    prev: i32,
    (lower, upper): (i32, i32),
    solving: bool,
) -> Option<(i32, u8)>
where
    Ctx<'a, K>: Nodes,
{
    ctx.selectivity = sel;
    ctx.pv_extension = midgame::pv_extension(depth, ctx.board.empties());
    if depth <= ctx.opts.multipv_depth {
        return root_search(
            ctx,
            roots,
            -SCORE_MAX,
            SCORE_MAX,
            depth,
            true,
            (lower, upper),
        );
    }
    let lo = (lower - 2).max(-SCORE_MAX);
    let hi = (upper + 2).min(SCORE_MAX);
    let mut w = (10 - depth as i32).max(1);
    if solving && w & 1 == 1 {
        w += 1;
    }
    if hi - lo <= 2 * w {
        return root_search(ctx, roots, lo, hi, depth, false, (lower, upper));
    }
    let mut score = prev.clamp(lo, hi);
    let (mut left, mut right) = (w, w);
    for _round in 0..10 {
        let alpha = (score - left).max(lo);
        let beta = (score + right).min(hi);
        let (s, x) = root_search(ctx, roots, alpha, beta, depth, false, (lower, upper))?;
        if s <= alpha && alpha > lo {
            left *= 2;
            right = 1;
            score = s;
        } else if s >= beta && beta < hi {
            right *= 2;
            left = 1;
            score = s;
        } else {
            return Some((s, x));
        }
    }
    root_search(ctx, roots, lo, hi, depth, false, (lower, upper))
}

/// Edax's `PVS_root`; with `multipv` every move gets an exact value. Reorders `roots` by score.
fn root_search<'a, K>(
    ctx: &mut Ctx<'a, K>,
    roots: &mut [RootMove],
    mut alpha: i32,
    beta: i32,
    depth: u32,
    multipv: bool,
    (lower, upper): (i32, i32),
) -> Option<(i32, u8)>
where
    Ctx<'a, K>: Nodes,
{
    let mut best = -SCORE_INF;
    let mut best_x = NO_MOVE;
    let child_depth = depth - 1;
    for i in 0..roots.len() {
        let rm = roots[i];
        let prev = ctx.make(rm.x, rm.flipped);
        let s = if i == 0 {
            -ctx.child(-beta, -alpha, child_depth, true)
        } else if multipv {
            let s = -ctx.child(SCORE_MAX - 1, SCORE_MAX, child_depth, false);
            if !ctx.stopped && s > -SCORE_MAX {
                -ctx.child(-SCORE_MAX, SCORE_MAX, child_depth, true)
            } else {
                s
            }
        } else {
            let s = -ctx.child(-alpha - 1, -alpha, child_depth, false);
            if !ctx.stopped && alpha < s && s < beta {
                -ctx.child(-beta, -alpha, child_depth, true)
            } else {
                s
            }
        };
        ctx.unmake(rm.x, rm.flipped, prev);
        if ctx.stopped {
            return None;
        }
        let s = s.clamp(lower, upper);
        roots[i].score = s;
        if s > best {
            best = s;
            best_x = rm.x;
            if !multipv {
                if best >= beta {
                    // Moves after a cutoff keep their old scores, below this one.
                    for r in roots[i + 1..].iter_mut() {
                        r.score = r.score.min(s - 1);
                    }
                    break;
                }
                if best > alpha {
                    alpha = best;
                }
            }
        } else if !multipv {
            roots[i].score = s.min(best - 1);
        }
    }
    // Best first, ties in previous order, for the next iteration.
    roots.sort_by_key(|r| std::cmp::Reverse(r.score));
    Some((best, best_x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::shared_dir_or_skip;

    fn eval() -> Option<Arc<Eval>> {
        let dir = shared_dir_or_skip()?;
        Some(Arc::new(
            Eval::load(dir.join("golden/eval-seed1.dat")).expect("eval-seed1.dat loads"),
        ))
    }

    /// A searcher with default options but a `2^tt_bits`-entry table (small tables keep tests light).
    fn searcher(e: Arc<Eval>, tt_bits: u32) -> Searcher {
        Searcher::with_options(
            e,
            SearchOptions {
                tt_bits,
                ..SearchOptions::default()
            },
        )
    }

    #[test]
    fn game_over_pass_and_excluded() {
        let Some(e) = eval() else { return };
        let mut s = searcher(e, 12);
        let abort = AtomicBool::new(false);
        // Game over: exact score, no move.
        let over = Board::new(0xffff, 0xff00_0000_0000_0000).expect("disjoint");
        let r = s.search_depth(&over, 4, 5, 0, &abort);
        assert_eq!(
            (r.mv, r.score, r.exact),
            (Move::None, over.final_score(), true)
        );
        // Every move excluded: no move.
        let b = Board::start();
        let r = s.search_depth(&b, 3, 5, b.moves(), &abort);
        assert_eq!((r.mv, r.score), (Move::None, -SCORE_INF));
        // Excluding all but one move returns that move.
        let f5 = Square::parse("f5").expect("f5");
        let r = s.search_depth(&b, 3, 5, b.moves() & !f5.bit(), &abort);
        assert_eq!(r.mv, Move::Square(f5));
        // Determinism: same inputs, same nodes.
        let r1 = s.search_depth(&b, 6, 5, 0, &abort);
        let r2 = s.search_depth(&b, 6, 5, 0, &abort);
        assert_eq!(r1.nodes, r2.nodes);
        assert_eq!(r1.score, r2.score);
        // Abort before start: returns promptly with a legal move.
        let stop = AtomicBool::new(true);
        let r = s.search_depth(&b, 12, 5, 0, &stop);
        assert!(matches!(r.mv, Move::Square(_)));
    }

    /// Positions of the golden fixed-depth file (20 positions, 14 to 60 empties).
    fn golden_boards() -> Option<Vec<Board>> {
        let dir = shared_dir_or_skip()?;
        let text = std::fs::read_to_string(dir.join("golden/edax-fixed-depth.txt")).ok()?;
        Some(
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f[4] == "0").then(|| Board::from_cells(f[1], f[2] == "X").expect("board"))
                })
                .collect(),
        )
    }

    #[test]
    fn probcut_prunes_and_stays_close() {
        let (Some(e), Some(boards)) = (eval(), golden_boards()) else {
            return;
        };
        let mut s = searcher(e, 16);
        let abort = AtomicBool::new(false);
        let (mut n_sel, mut n_full, mut diff) = (0u64, 0u64, 0i32);
        let mut used = 0;
        for b in boards.iter().filter(|b| b.empties() > 20) {
            let full = s.search_depth(b, 8, 5, 0, &abort);
            let sel = s.search_depth(b, 8, 0, 0, &abort);
            assert_eq!((sel.depth, sel.selectivity, sel.exact), (8, 0, false));
            assert!(b.is_legal(sel.mv));
            n_full += full.nodes;
            n_sel += sel.nodes;
            diff += (full.score - sel.score).abs();
            used += 1;
        }
        assert!(used >= 10);
        // 73% probcut must save work, and its scores stay near the full-width ones.
        assert!(n_sel * 10 < n_full * 8, "probcut nodes {n_sel} vs {n_full}");
        assert!(diff <= 3 * used, "mean score difference {} / {used}", diff);
    }

    #[test]
    fn selective_endgame_uses_midgame_routines_above_15_empties() {
        let (Some(e), Some(boards)) = (eval(), golden_boards()) else {
            return;
        };
        let mut s = Searcher::with_options(
            e,
            SearchOptions {
                tt_bits: 16,
                // Edax's threshold, so that this 17-20 empties position runs the selective path.
                midgame_to_endgame: 15,
                ..SearchOptions::default()
            },
        );
        let abort = AtomicBool::new(false);
        let b = boards
            .iter()
            .find(|b| (17..=20).contains(&b.empties()))
            .expect("a golden position with 17-20 empties");
        let n = b.empties();
        let exact = s.search_depth(b, 60, 5, 0, &abort);
        assert!(exact.exact && exact.depth == n);
        assert_eq!(
            exact.score,
            crate::endgame::solve(b, -64, 64, &mut crate::endgame::EndgameContext::new())
        );
        let sel = s.search_depth(b, 60, 1, 0, &abort);
        assert_eq!((sel.depth, sel.selectivity, sel.exact), (n, 1, false));
        assert!(
            (sel.score - exact.score).abs() <= 8,
            "{} vs {}",
            sel.score,
            exact.score
        );
        // The level table route gives the same as the explicit depth.
        let lvl = s.leaf_search(
            &LeafRequest {
                board: *b,
                level: 60,
                excluded: 0,
            },
            &abort,
        );
        assert_eq!((lvl.score, lvl.nodes), (exact.score, exact.nodes));
    }

    #[test]
    fn abort_from_another_thread_stops_a_deep_search() {
        let (Some(e), Some(boards)) = (eval(), golden_boards()) else {
            return;
        };
        let mut s = searcher(e, 16);
        let b = *boards
            .iter()
            .find(|b| b.empties() >= 40)
            .expect("an opening position");
        let abort = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&abort);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        // Depth 30 with no selectivity would take hours: only the abort can end it.
        let r = s.search_depth(&b, 30, 5, 0, &abort);
        t.join().expect("timer thread");
        assert!(r.depth < 30);
        assert!(b.is_legal(r.mv));
    }

    #[test]
    fn searcher_is_send() {
        fn assert_send<T: Send>() {}
        assert_send::<Searcher>();
        assert_send::<LeafResult>();
    }

    #[test]
    fn node_counts_do_not_depend_on_history() {
        let (Some(e), Some(boards)) = (eval(), golden_boards()) else {
            return;
        };
        let mut s = searcher(e, 16);
        let abort = AtomicBool::new(false);
        let mid = *boards
            .iter()
            .find(|b| (18..=22).contains(&b.empties()))
            .expect("18-22 empties");
        let end = *boards
            .iter()
            .find(|b| b.empties() <= 16)
            .expect("an endgame position");
        // Depth 11 uses the PV extension (exact solves of PV nodes with at most 10 empties).
        let first = s.search_depth(&mid, 11, 5, 0, &abort);
        let other = s.search_depth(&end, 30, 5, 0, &abort);
        assert!(other.exact);
        let again = s.search_depth(&mid, 11, 5, 0, &abort);
        assert_eq!(
            (first.score, first.mv, first.nodes),
            (again.score, again.mv, again.nodes)
        );
        let mut fresh = searcher(Arc::clone(s.eval()), 16);
        let third = fresh.search_depth(&mid, 11, 5, 0, &abort);
        assert_eq!((first.score, first.nodes), (third.score, third.nodes));
    }

    /// Edax's depth 0 at a root that must pass (issue 19): the static evaluation of the position
    /// as it stands, clamped to its stability bounds, with the move PASS; not the negated
    /// evaluation of the position after the pass.
    #[test]
    fn depth0_at_a_must_pass_root_scores_the_position_itself() {
        let Some(e) = eval() else { return };
        let mut s = searcher(Arc::clone(&e), 12);
        let abort = AtomicBool::new(false);
        let mut rng = crate::testutil::XorShift(0x5eed_0019);
        let (mut roots, mut not_negated_pass, mut clamped) = (0, 0, 0);
        for _game in 0..3000 {
            let mut b = Board::start();
            while let Some(next) = crate::testutil::random_ply(&mut rng, &b) {
                if b.must_pass() {
                    let (lower, upper) = (stability_lower(&b), stability_upper(&b));
                    let expected = e.eval0(&b).clamp(lower, upper);
                    let r = s.search_depth(&b, 0, 5, 0, &abort);
                    assert_eq!(
                        (r.mv, r.score, r.depth, r.exact),
                        (Move::Pass, expected, 0, false)
                    );
                    // Level 0 is depth 0 at every number of empties.
                    let req = LeafRequest {
                        board: b,
                        level: 0,
                        excluded: 0,
                    };
                    assert_eq!(s.leaf_search(&req, &abort).score, expected);
                    roots += 1;
                    if expected != (-e.eval0(&b.pass())).clamp(lower, upper) {
                        not_negated_pass += 1;
                    }
                    if expected != e.eval0(&b) {
                        clamped += 1;
                    }
                }
                b = next;
            }
        }
        // The sample must tell the rule apart from the pass-first rule and exercise the clamp.
        assert!(roots >= 100, "{roots} must-pass positions");
        assert!(
            not_negated_pass > 0 && clamped > 0,
            "{not_negated_pass} {clamped}"
        );
    }

    /// Negamax of the static evaluation to `depth` (passes do not count as plies).
    fn negamax(e: &Eval, b: &Board, depth: u32) -> i32 {
        if depth == 0 {
            return e.eval0(b);
        }
        let moves = b.moves();
        if moves == 0 {
            let pass = b.pass();
            if pass.moves() == 0 {
                return b.final_score();
            }
            return -negamax(e, &pass, depth);
        }
        crate::board::BitIter(moves)
            .map(|x| -negamax(e, &b.play(x).expect("legal"), depth - 1))
            .max()
            .expect("a move")
    }

    /// `bookfarm-eval2` weights: the search's incremental paths (the node's own evaluation at
    /// depth 1, the children's evaluation inside depth-1 nodes at depth 2) add the extra terms
    /// exactly as `Eval::eval0` does.
    #[test]
    fn eval2_searches_equal_negamax_of_the_static_evaluation() {
        let Some(base) = eval() else { return };
        let e2 = Eval::from_bytes(&base.to_bytes())
            .expect("reloads")
            // Small enough that the 28 terms keep scores inside what stable discs allow (the
            // search's stability cutoff assumes evaluations are possible final scores).
            .with_extra(|ply, i| ((ply * 7919 + i * 104_729) % 241) as i16 - 120);
        assert_eq!(e2.format(), crate::eval::EvalFormat::Bookfarm2);
        let back = Eval::from_bytes(&e2.to_file_bytes()).expect("eval2 image loads");
        assert_eq!(back.to_file_bytes(), e2.to_file_bytes());
        let e2 = Arc::new(e2);
        let mut s = searcher(Arc::clone(&e2), 12);
        let abort = AtomicBool::new(false);
        let mut rng = crate::testutil::XorShift(0xe7a1_0002);
        let (mut tried, mut differs) = (0, 0);
        for _game in 0..40 {
            let mut b = Board::start();
            while let Some(next) = crate::testutil::random_ply(&mut rng, &b) {
                let wipeout = crate::board::BitIter(b.moves())
                    .any(|x| b.play(x).is_ok_and(|c| c.player == 0));
                if (20..=50).contains(&b.empties()) && b.moves() != 0 && !wipeout {
                    for depth in [1, 2] {
                        let want = negamax(&e2, &b, depth);
                        let r = s.search_depth(&b, depth, 5, 0, &abort);
                        assert_eq!(r.score, want, "{b} depth {depth}");
                        tried += 1;
                        differs += usize::from(want != negamax(&base, &b, depth));
                    }
                }
                b = next;
            }
        }
        assert!(tried > 500, "{tried} searches");
        assert!(
            differs > tried / 2,
            "the extra terms change most scores: {differs} of {tried}"
        );
    }

    #[test]
    fn pass_root_is_searched_at_same_depth() {
        let Some(e) = eval() else { return };
        let mut s = searcher(e, 12);
        let abort = AtomicBool::new(false);
        // Side to move (player) has no move but the opponent does.
        let b = Board::new(0b10, 0b01).expect("disjoint");
        assert!(b.must_pass());
        let r = s.search_depth(&b, 2, 5, 0, &abort);
        assert_eq!(r.mv, Move::Pass);
        let r2 = s.search_depth(&b.pass(), 2, 5, 0, &abort);
        assert_eq!(r.score, -r2.score);
    }
}
