//! Evaluation matches: fixed-depth alpha-beta players with pluggable evaluations, and matches of
//! the engine's own [`Searcher`] at an Edax level under two weight files.
//!
//! The trainer's searcher is deliberately simple (fail-soft negamax alpha-beta, no hash table, mobility move
//! ordering, exact play once the depth reaches the empties) so that a match measures the
//! evaluation, not search tricks. Both sides use the same searcher at the same depth.

use bookfarm_engine::Board;
use bookfarm_engine::board::{BitIter, flips_portable, moves_portable};
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchOptions, Searcher};
use bookfarm_engine::square::Move;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A static evaluation in discs for the side to move.
pub trait Evaluator: Sync {
    /// Score of `board` for its side to move (discs; larger is better).
    fn eval(&self, board: &Board) -> i32;
}

impl Evaluator for bookfarm_engine::eval::Eval {
    fn eval(&self, board: &Board) -> i32 {
        self.eval0(board)
    }
}

/// The hand-made baseline: mobility and corners (in units of about a disc).
#[derive(Debug, Clone, Copy, Default)]
pub struct MobilityCorners;

const CORNERS: u64 = 0x8100_0000_0000_0081;
/// X-squares (diagonally next to a corner).
const X_SQUARES: u64 = 0x4200_0000_0000_4200;

impl Evaluator for MobilityCorners {
    fn eval(&self, b: &Board) -> i32 {
        let mp = moves_portable(b.player, b.opponent).count_ones() as i32;
        let mo = moves_portable(b.opponent, b.player).count_ones() as i32;
        let cp = (b.player & CORNERS).count_ones() as i32;
        let co = (b.opponent & CORNERS).count_ones() as i32;
        // An X-square is only a liability while its corner is empty.
        let empty_corner_x = |c: u64| {
            let mut x = 0u64;
            for (corner, xs) in [(0, 9), (7, 14), (56, 49), (63, 54)] {
                if c & (1u64 << corner) == 0 {
                    x |= 1u64 << xs;
                }
            }
            x & X_SQUARES
        };
        let danger = empty_corner_x(b.player | b.opponent);
        let xp = (b.player & danger).count_ones() as i32;
        let xo = (b.opponent & danger).count_ones() as i32;
        (2 * (mp - mo) + 8 * (cp - co) - 4 * (xp - xo)).clamp(-63, 63)
    }
}

fn search(
    b: &Board,
    depth: u32,
    mut alpha: i32,
    beta: i32,
    ev: &dyn Evaluator,
    passed: bool,
    nodes: &mut u64,
) -> i32 {
    *nodes += 1;
    let moves = moves_portable(b.player, b.opponent);
    if moves == 0 {
        if passed {
            return b.final_score();
        }
        return -search(&b.pass(), depth, -beta, -alpha, ev, true, nodes);
    }
    if depth == 0 {
        return ev.eval(b);
    }
    let mut children: Vec<(u32, Board)> = BitIter(moves)
        .map(|sq| {
            let nb = b.play_flips(sq.index(), flips_portable(b.player, b.opponent, sq.index()));
            let mut key = moves_portable(nb.player, nb.opponent).count_ones() * 4;
            if sq.bit() & CORNERS != 0 {
                key = key.saturating_sub(8);
            }
            (key, nb)
        })
        .collect();
    children.sort_by_key(|c| c.0);
    let mut best = -65;
    for (_, nb) in children {
        let v = -search(&nb, depth - 1, -beta, -alpha, ev, false, nodes);
        if v > best {
            best = v;
            if v > alpha {
                alpha = v;
                if alpha >= beta {
                    break;
                }
            }
        }
    }
    best
}

/// Best move of `b` (which must have a legal move) at fixed `depth` with `ev`; ties keep the first
/// move in square order. Returns `(square index, score)`.
pub fn best_move(b: &Board, depth: u32, ev: &dyn Evaluator) -> Option<(u8, i32)> {
    let moves = b.moves();
    if moves == 0 {
        return None;
    }
    let d = if b.empties() <= depth {
        64
    } else {
        depth.saturating_sub(1)
    };
    let mut nodes = 0;
    let mut best: Option<(u8, i32)> = None;
    for sq in BitIter(moves) {
        let nb = b.play_flips(sq.index(), flips_portable(b.player, b.opponent, sq.index()));
        let alpha = best.map_or(-65, |x| x.1);
        let v = -search(&nb, d, -64, -alpha, ev, false, &mut nodes);
        if best.is_none_or(|x| v > x.1) {
            best = Some((sq.index(), v));
        }
    }
    best
}

/// Negamax score of `b` for its side to move at fixed `depth` with `ev` (exact when the depth
/// reaches the empties; a pass does not consume depth; depth 0 is the static evaluation).
pub fn search_score(b: &Board, depth: u32, ev: &dyn Evaluator) -> i32 {
    let d = if b.empties() <= depth { 64 } else { depth };
    let mut nodes = 0;
    search(b, d, -64, 64, ev, false, &mut nodes)
}

/// Outcome of one game from `start`: final disc difference (empties to the winner) for player a,
/// who moves first when `first_to_move`. `choose(board, a_to_move)` picks the square to play on a
/// board with a legal move.
fn play_game(start: Board, first_to_move: bool, mut choose: impl FnMut(&Board, bool) -> u8) -> i32 {
    // `a_to_move` tracks whose turn it is; the score is returned from a's point of view.
    let mut board = start;
    let mut a_to_move = first_to_move;
    loop {
        if board.moves() == 0 {
            if board.pass().moves() == 0 {
                let s = board.final_score();
                return if a_to_move { s } else { -s };
            }
            board = board.pass();
            a_to_move = !a_to_move;
            continue;
        }
        let sq = choose(&board, a_to_move);
        board = board.play_flips(sq, flips_portable(board.player, board.opponent, sq));
        a_to_move = !a_to_move;
    }
}

/// Match statistics from the first evaluation's point of view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MatchResult {
    /// Games played.
    pub games: usize,
    /// Wins, draws and losses of the first evaluation.
    pub wins: usize,
    /// Draws.
    pub draws: usize,
    /// Losses.
    pub losses: usize,
    /// Sum of disc differences (first evaluation's view).
    pub disc_sum: i64,
    /// Points of the first evaluation in each opening pair (its two games, one per colour), in
    /// half points: 0 (two losses) to 4 (two wins).
    pub pair_half_points: Vec<u8>,
    /// Search effort of each side (first evaluation, second): nodes and thread CPU seconds over
    /// all its moves; zero where the match does not measure it.
    pub effort: [Effort; 2],
}

/// Nodes searched and thread CPU seconds spent by one side of a match.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Effort {
    /// Nodes of every search the side ran.
    pub nodes: u64,
    /// CPU seconds of the searching thread over those searches (0 where the platform cannot say).
    pub cpu_secs: f64,
}

impl std::ops::AddAssign for Effort {
    fn add_assign(&mut self, o: Effort) {
        self.nodes += o.nodes;
        self.cpu_secs += o.cpu_secs;
    }
}

impl MatchResult {
    /// Score rate: (wins + draws / 2) / games.
    pub fn win_rate(&self) -> f64 {
        (self.wins as f64 + 0.5 * self.draws as f64) / self.games.max(1) as f64
    }
    /// Mean disc difference per game.
    pub fn mean_discs(&self) -> f64 {
        self.disc_sum as f64 / self.games.max(1) as f64
    }

    /// 95 % confidence interval of the score rate (normal approximation over the opening pairs,
    /// the independent units of a paired match: both games of a pair share their opening).
    pub fn score_ci95(&self) -> (f64, f64) {
        let n = self.pair_half_points.len();
        if n < 2 {
            return (0.0, 1.0);
        }
        let x: Vec<f64> = self
            .pair_half_points
            .iter()
            .map(|&h| f64::from(h) / 4.0)
            .collect();
        let mean = x.iter().sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = 1.96 * (var / n as f64).sqrt();
        (mean - half, mean + half)
    }
}

/// Random opening of `plies` random legal moves (restarted if the game ends early).
pub fn random_opening(rng: &mut StdRng, plies: usize) -> Board {
    'outer: loop {
        let mut b = Board::start();
        for _ in 0..plies {
            let m = b.moves();
            if m == 0 {
                continue 'outer;
            }
            let k = rng.random_range(0..m.count_ones() as usize);
            let sq = BitIter(m).nth(k).expect("k < count");
            b = b.play_flips(sq.index(), flips_portable(b.player, b.opponent, sq.index()));
        }
        if b.moves() != 0 {
            return b;
        }
    }
}

/// `pairs` seeded random openings of `plies` plies (the starts of every match).
fn openings(pairs: usize, plies: usize, seed: u64) -> Vec<Board> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..pairs)
        .map(|_| random_opening(&mut rng, plies))
        .collect()
}

/// Play `pairs` openings twice each (colours swapped) between `a` and `b` at `depth`, in parallel.
pub fn play_match(
    a: &dyn Evaluator,
    b: &dyn Evaluator,
    pairs: usize,
    depth: u32,
    plies: usize,
    seed: u64,
) -> MatchResult {
    use rayon::prelude::*;
    let openings = openings(pairs, plies, seed);
    let choose = |board: &Board, a_to_move: bool| {
        let ev = if a_to_move { a } else { b };
        best_move(board, depth, ev)
            .expect("side to move has a legal move")
            .0
    };
    let scores: Vec<i32> = openings
        .par_iter()
        .flat_map_iter(|&o| [play_game(o, true, choose), play_game(o, false, choose)])
        .collect();
    tally(&scores)
}

/// How each side of an engine match searches a move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MoveBudget {
    /// Edax `level`: depth and endgame solve from [`bookfarm_engine::level::level_params`]
    /// (deterministic: every search starts from a logically empty table).
    Level(u8),
    /// Equal time: where `level` solves the position exactly (its depth reaches the game's end),
    /// as [`MoveBudget::Level`]; elsewhere iterative deepening at the level's selectivity from
    /// depth 1, starting no iteration that the thread CPU spent so far plus the last iteration's
    /// time times its growth would take past `cpu` (so weights that cost more per node search
    /// shallower). Not deterministic: it depends on measured CPU time.
    Cpu {
        /// Level giving the selectivity and the exact-solve threshold.
        level: u8,
        /// Thread CPU budget of one midgame move.
        cpu: std::time::Duration,
    },
}

/// One move of `s` under `budget` (the position has a legal move).
fn budgeted_search(
    s: &mut Searcher,
    board: &Board,
    budget: MoveBudget,
    never: &AtomicBool,
) -> LeafResult {
    let (level, cpu) = match budget {
        MoveBudget::Level(level) => (level, None),
        MoveBudget::Cpu { level, cpu } => (level, Some(cpu)),
    };
    let (depth, sel) = bookfarm_engine::level::level_params(level, board.empties());
    let Some(cpu) = cpu.filter(|_| depth < board.empties()) else {
        let req = LeafRequest {
            board: *board,
            level,
            excluded: 0,
        };
        return s.leaf_search(&req, never);
    };
    // Without a thread clock the budget counts as spent after the first iteration.
    let clock = cpu_time::ThreadTime::try_now().ok();
    let spent = || {
        clock
            .and_then(|t| t.try_elapsed().ok())
            .map_or(f64::INFINITY, |d| d.as_secs_f64())
    };
    let (mut best, mut nodes, mut prev_took) = (None::<LeafResult>, 0u64, None::<f64>);
    for d in 1..board.empties() {
        let t0 = spent();
        let r = s.search_depth(board, d, sel, 0, never);
        let now = spent();
        let took = (now - t0).max(0.0);
        nodes += r.nodes;
        best = Some(r);
        let growth = prev_took
            .filter(|&p| p > 0.0)
            .map_or(4.0, |p| (took / p).clamp(1.5, 16.0));
        if now + took * growth > cpu.as_secs_f64() {
            break;
        }
        prev_took = Some(took);
    }
    let mut r = best.unwrap_or_else(|| s.search_depth(board, 1, sel, 0, never));
    // Every iteration's nodes count: they are the side's effort.
    r.nodes = nodes.max(r.nodes);
    r
}

/// One side of an engine match: its evaluation and its search options (the probcut model).
#[derive(Clone)]
pub struct Side {
    /// Evaluation weights.
    pub eval: Arc<Eval>,
    /// Search options, as [`SearchOptions::for_eval`] gives them unless a model is chosen.
    pub opts: SearchOptions,
}

impl std::fmt::Debug for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Side")
            .field("eval", &self.eval.header())
            .field("opts", &self.opts)
            .finish()
    }
}

impl Side {
    /// `eval` with the options a [`Searcher::new`] would use.
    pub fn new(eval: Arc<Eval>) -> Side {
        let opts = SearchOptions::for_eval(&eval);
        Side { eval, opts }
    }

    fn searcher(&self) -> Searcher {
        Searcher::with_options(Arc::clone(&self.eval), self.opts.clone())
    }
}

/// Play `pairs` random `plies`-ply openings twice each (colours swapped) between the engine's own
/// [`Searcher`] on side `a` and on side `b`, both searching under `budget` (each side keeps one
/// searcher per worker thread), in parallel. `on_pair` is called after every finished opening
/// pair (progress).
pub fn play_engine_match(
    a: &Side,
    b: &Side,
    pairs: usize,
    budget: MoveBudget,
    plies: usize,
    seed: u64,
    on_pair: impl Fn() + Sync,
) -> MatchResult {
    use rayon::prelude::*;
    let openings = openings(pairs, plies, seed);
    let never = AtomicBool::new(false);
    let played: Vec<([i32; 2], [Effort; 2])> = openings
        .par_iter()
        .map_init(
            || (a.searcher(), b.searcher()),
            |(sa, sb), &o| {
                let mut effort = [Effort::default(); 2];
                let mut choose = |board: &Board, a_to_move: bool| {
                    let s = if a_to_move { &mut *sa } else { &mut *sb };
                    let cpu = cpu_time::ThreadTime::try_now().ok();
                    let r = budgeted_search(s, board, budget, &never);
                    effort[usize::from(!a_to_move)] += Effort {
                        nodes: r.nodes,
                        cpu_secs: cpu
                            .and_then(|t| t.try_elapsed().ok())
                            .map_or(0.0, |d| d.as_secs_f64()),
                    };
                    match r.mv {
                        Move::Square(sq) => sq.index(),
                        other => panic!("searcher returned {other:?} on a board with moves"),
                    }
                };
                let pair = [
                    play_game(o, true, &mut choose),
                    play_game(o, false, &mut choose),
                ];
                on_pair();
                (pair, effort)
            },
        )
        .collect();
    let scores: Vec<i32> = played.iter().flat_map(|(pair, _)| *pair).collect();
    let mut r = tally(&scores);
    for (_, e) in &played {
        r.effort[0] += e[0];
        r.effort[1] += e[1];
    }
    r
}

/// Wins, draws, losses and disc sum of per-game scores (first player's view).
fn tally(scores: &[i32]) -> MatchResult {
    let mut r = MatchResult {
        games: scores.len(),
        ..MatchResult::default()
    };
    let half = |s: i32| match s.cmp(&0) {
        std::cmp::Ordering::Greater => 2u8,
        std::cmp::Ordering::Equal => 1,
        std::cmp::Ordering::Less => 0,
    };
    r.pair_half_points = scores
        .chunks(2)
        .map(|p| p.iter().map(|&s| half(s)).sum())
        .collect();
    for &s in scores {
        r.disc_sum += i64::from(s);
        match s.cmp(&0) {
            std::cmp::Ordering::Greater => r.wins += 1,
            std::cmp::Ordering::Equal => r.draws += 1,
            std::cmp::Ordering::Less => r.losses += 1,
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::solve_exact;
    use bookfarm_engine::endgame::EndgameContext;

    #[test]
    fn deep_enough_search_is_exact() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut checked = 0;
        while checked < 5 {
            let mut b = random_opening(&mut rng, 50);
            if b.moves() == 0 {
                b = b.pass();
            }
            if b.moves() == 0 {
                continue;
            }
            let (_, v) = best_move(&b, 20, &MobilityCorners).expect("has moves");
            let mut ctx = EndgameContext::with_tt_bits(12);
            assert_eq!(v, solve_exact(&b, &mut ctx).0, "{b}");
            checked += 1;
        }
    }

    #[test]
    fn self_match_is_colour_symmetric() {
        // The same evaluation on both sides: each opening is played from both colours with identical
        // deterministic play, so the two games cancel exactly.
        let r = play_match(&MobilityCorners, &MobilityCorners, 4, 2, 8, 1);
        assert_eq!(r.games, 8);
        assert_eq!(r.disc_sum, 0);
        assert_eq!(r.wins, r.losses);
        // Every pair scores one point (a win and a loss, or two draws): no spread at all.
        assert_eq!(r.pair_half_points, vec![2; 4]);
        assert_eq!(r.score_ci95(), (0.5, 0.5));
    }

    #[test]
    fn a_cpu_budget_deepens_only_in_the_midgame() {
        let d = bookfarm_engine::eval::default_eval();
        let mut s = Searcher::new(Arc::clone(&d));
        let never = AtomicBool::new(false);
        let none = MoveBudget::Cpu {
            level: 8,
            cpu: std::time::Duration::ZERO,
        };
        let mut rng = StdRng::seed_from_u64(11);
        // Midgame: a zero budget stops after the first iteration, the depth-1 search.
        let mid = random_opening(&mut rng, 20);
        assert!(mid.empties() > 16);
        let r = budgeted_search(&mut s, &mid, none, &never);
        let one = s.search_depth(&mid, 1, 5, 0, &never);
        assert_eq!((r.mv, r.score, r.depth), (one.mv, one.score, 1));
        // Where level 8 solves exactly (16 empties or fewer), the budget does not apply.
        // A random opening always leaves the side to move a legal move.
        let end = random_opening(&mut rng, 46);
        let r = budgeted_search(&mut s, &end, none, &never);
        let level = budgeted_search(&mut s, &end, MoveBudget::Level(8), &never);
        assert!(r.exact);
        assert_eq!(
            (r.mv, r.score, r.nodes),
            (level.mv, level.score, level.nodes)
        );
    }

    #[test]
    fn engine_self_match_is_colour_symmetric_and_differs_from_a_weaker_eval() {
        let d = Side::new(bookfarm_engine::eval::default_eval());
        let r = play_engine_match(&d, &d, 3, MoveBudget::Level(2), 8, 1, || {});
        assert_eq!(r.games, 6);
        assert_eq!(r.disc_sum, 0);
        assert_eq!(r.wins, r.losses);
        // Each side plays the other's moves of the swapped game: the same searches, the same nodes.
        assert!(r.effort[0].nodes > 0, "{r:?}");
        assert_eq!(r.effort[0].nodes, r.effort[1].nodes);
        // All-zero weights make every move look equal: the default weights must beat them.
        let zero = Side::new(Arc::new(Eval::from_fn(d.eval.header(), |_, _| 0)));
        let r = play_engine_match(&d, &zero, 3, MoveBudget::Level(2), 8, 1, || {});
        assert!(r.disc_sum > 0, "{r:?}");
    }
}
