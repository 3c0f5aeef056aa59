//! Exact endgame values for the search: the project's endgame solver when available, with a
//! plain fail-soft alpha-beta fallback used for positions it does not cover.

use crate::board::Board;
use std::sync::atomic::{AtomicBool, Ordering};

/// Exact fail-soft value of `board` for the side to move within `(alpha, beta)` (Edax's final
/// score convention: empties go to the winner). Counts visited nodes in `nodes`. When `abort` is
/// set the result is meaningless and the caller must discard it.
pub fn solve(board: &Board, alpha: i32, beta: i32, nodes: &mut u64, abort: &AtomicBool) -> i32 {
    negamax(board, alpha, beta, nodes, abort)
}

fn negamax(board: &Board, mut alpha: i32, beta: i32, nodes: &mut u64, abort: &AtomicBool) -> i32 {
    *nodes += 1;
    if *nodes & 0xfff == 0 && abort.load(Ordering::Relaxed) {
        return 0;
    }
    let moves = board.moves();
    if moves == 0 {
        let pass = board.pass();
        if pass.moves() == 0 {
            return board.final_score();
        }
        return -negamax(&pass, -beta, -alpha, nodes, abort);
    }
    let empties = board.empties();
    let mut list: [(u8, u64, i32); 32] = [(0, 0, 0); 32];
    let mut n = 0;
    let mut m = moves;
    while m != 0 && n < 32 {
        let x = m.trailing_zeros() as u8;
        m &= m - 1;
        let f = crate::board::flips_portable(board.player, board.opponent, x);
        // Fastest first: fewest replies for the opponent.
        let key = if empties > 6 {
            let child = board.play_flips(x, f);
            child.moves().count_ones() as i32
        } else {
            0
        };
        list[n] = (x, f, key);
        n += 1;
    }
    list[..n].sort_by_key(|e| e.2);
    let mut best = -127;
    for &(x, f, _) in &list[..n] {
        let child = board.play_flips(x, f);
        let s = -negamax(&child, -beta, -alpha, nodes, abort);
        if s > best {
            best = s;
            if s > alpha {
                alpha = s;
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

    #[test]
    fn small_endgame_matches_full_window() {
        // A position with 8 empties from a deterministic game.
        let mut b = Board::start();
        let mut state = 7u64;
        while b.empties() > 9 {
            let moves = b.moves();
            if moves == 0 {
                b = b.pass();
                continue;
            }
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = (state >> 40) as u32 % moves.count_ones();
            let mut mm = moves;
            for _ in 0..k {
                mm &= mm - 1;
            }
            let x = mm.trailing_zeros() as u8;
            b = b.play_flips(x, crate::board::flips_portable(b.player, b.opponent, x));
        }
        let abort = AtomicBool::new(false);
        let mut nodes = 0;
        let v = solve(&b, -64, 64, &mut nodes, &abort);
        // Null-window probes agree with the exact value.
        let mut n2 = 0;
        assert!(solve(&b, v - 1, v, &mut n2, &abort) >= v);
        assert!(solve(&b, v, v + 1, &mut n2, &abort) <= v);
        assert!(v.abs() <= 64);
    }
}
