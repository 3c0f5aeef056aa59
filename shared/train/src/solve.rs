//! A small exact endgame solver used to label training/test positions.
//!
//! Fail-soft negamax alpha-beta with fastest-first ordering (fewest opponent replies, corners
//! first) above a few empties; scores follow Edax's final-score convention (empties to the winner).
//! It is a fallback for this crate: the engine's `endgame::solve` replaces it where available.

use bookfarm_engine::Board;
use bookfarm_engine::board::flips_portable;

/// Node counter and abort flag for one solve.
#[derive(Debug, Default)]
pub struct SolveStats {
    /// Nodes visited.
    pub nodes: u64,
}

const CORNERS: u64 = 0x8100_0000_0000_0081;

/// Exact score of `board` for the side to move (perfect play, empties to the winner).
pub fn solve_exact(board: &Board, stats: &mut SolveStats) -> i32 {
    solve(board.player, board.opponent, -64, 64, false, stats)
}

fn final_score(p: u64, o: u64) -> i32 {
    let pc = p.count_ones() as i32;
    let oc = o.count_ones() as i32;
    let e = 64 - pc - oc;
    let d = pc - oc;
    if d > 0 {
        d + e
    } else if d < 0 {
        d - e
    } else {
        0
    }
}

fn solve(p: u64, o: u64, mut alpha: i32, beta: i32, passed: bool, stats: &mut SolveStats) -> i32 {
    stats.nodes += 1;
    let empty = !(p | o);
    let n_empty = empty.count_ones();
    if n_empty == 0 {
        return final_score(p, o);
    }
    let moves = bookfarm_engine::board::moves_portable(p, o);
    if moves == 0 {
        if passed {
            return final_score(p, o);
        }
        return -solve(o, p, -beta, -alpha, true, stats);
    }
    let mut best = -65;
    if n_empty <= 6 {
        let mut m = moves;
        while m != 0 {
            let x = m.trailing_zeros() as u8;
            m &= m - 1;
            let f = flips_portable(p, o, x);
            let np = o ^ f;
            let no = p ^ f ^ (1u64 << x);
            let v = -solve(np, no, -beta, -alpha, false, stats);
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
        return best;
    }
    // Fastest-first: order children by the opponent's mobility, corners preferred.
    let mut list: [(i32, u64, u64); 32] = [(0, 0, 0); 32];
    let mut n = 0usize;
    let mut m = moves;
    while m != 0 {
        let x = m.trailing_zeros() as u8;
        m &= m - 1;
        let f = flips_portable(p, o, x);
        let np = o ^ f;
        let no = p ^ f ^ (1u64 << x);
        let mob = bookfarm_engine::board::moves_portable(np, no);
        let mut key = (mob.count_ones() as i32) * 16 + (mob & CORNERS).count_ones() as i32 * 8;
        if (1u64 << x) & CORNERS != 0 {
            key -= 12;
        }
        if n < list.len() {
            list[n] = (key, np, no);
            n += 1;
        }
    }
    list[..n].sort_unstable_by_key(|e| e.0);
    for &(_, np, no) in &list[..n] {
        let v = -solve(np, no, -beta, -alpha, false, stats);
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

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::testdata::shared_dir_or_skip;

    #[test]
    fn ffo_easy_positions_match_their_scores() {
        let Some(shared) = shared_dir_or_skip() else {
            return;
        };
        let text =
            std::fs::read_to_string(shared.join("data/ffo/fforum-1-19.obf")).expect("readable obf");
        // FFO #1..#7 have 14 empties with best scores +18 +10 +2 0 +32 +14 +8 (edax-spec §10.2).
        let expect = [18, 10, 2, 0, 32, 14, 8];
        for (line, want) in text
            .lines()
            .filter(|l| !l.starts_with('%') && !l.trim().is_empty())
            .zip(expect)
        {
            let cells = &line[..64];
            let black = line.as_bytes()[65] == b'X';
            let b = Board::from_cells(cells, black).expect("valid obf board");
            let mut st = SolveStats::default();
            assert_eq!(solve_exact(&b, &mut st), want, "{line}");
        }
    }

    #[test]
    fn game_over_positions_are_scored_with_empties_to_the_winner() {
        // Player has 3 discs, opponent none: no one can move.
        let b = Board::new(0b111, 0).expect("disjoint");
        let mut st = SolveStats::default();
        assert_eq!(solve_exact(&b, &mut st), 64);
        assert_eq!(solve_exact(&b.pass(), &mut st), -64);
    }
}
