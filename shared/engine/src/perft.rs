//! perft: the number of games of a given length from a position, as in OEIS A124004.
//!
//! **Pass convention.** A forced pass is a move: it consumes one ply of depth, exactly like a
//! square move. A finished game (neither side can move) is one leaf at every remaining depth: it
//! counts as a game "at the end of ply n" even though it ended earlier. This is the convention of
//! A124004 ("number of possible Othello games at the end of the n-th ply"). From the start
//! position the counts are 4, 12, 56, 244, 1396, 8200, 55092, 390216, 3005288 for depths 1..=9,
//! then 24571284 and 212258800 for depths 10 and 11.
//!
//! Depths 1..=8 do not depend on the convention (no pass or game end can happen that early).
//! Depth 9 already separates "a pass consumes a ply" from "a pass is free" (3005288 vs 3005320),
//! and depths 10 and 11 separate "finished games count" from "finished games vanish"
//! (24571284 vs 24571056 at depth 10); the tests check all three.
//!
//! The counter uses bulk counting at depth 1 (the popcount of the move mask) and the
//! [`Board`]'s active flip backend.

use crate::board::{BitIter, Board};

/// Number of games of `depth` plies from `board`: passes count as plies, and a finished game counts
/// once at every remaining depth (see the module docs). `perft(b, 0) == 1`.
pub fn perft(board: &Board, depth: u32) -> u64 {
    if depth == 0 {
        return 1;
    }
    let moves = board.moves();
    if moves == 0 {
        let passed = board.pass();
        if passed.moves() == 0 {
            return 1; // game over: the finished game is one leaf
        }
        return perft(&passed, depth - 1);
    }
    if depth == 1 {
        return u64::from(moves.count_ones());
    }
    let mut n = 0;
    for sq in BitIter(moves) {
        let next = board.play_flips(sq.index(), board.flips(sq));
        n += perft(&next, depth - 1);
    }
    n
}

/// perft split by first move, in increasing square order (a `Move::Pass` entry when the side to
/// move must pass, a `Move::None` entry with count 1 when the game is over), as chess-engine
/// "divide" does; the counts sum to [`perft`] for `depth >= 1`.
pub fn divide(board: &Board, depth: u32) -> Vec<(crate::Move, u64)> {
    use crate::Move;
    if depth == 0 {
        return Vec::new();
    }
    let moves = board.moves();
    if moves == 0 {
        let passed = board.pass();
        if passed.moves() == 0 {
            return vec![(Move::None, 1)];
        }
        return vec![(Move::Pass, perft(&passed, depth - 1))];
    }
    BitIter(moves)
        .map(|sq| {
            let next = board.play_flips(sq.index(), board.flips(sq));
            (Move::Square(sq), perft(&next, depth - 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divide_sums_to_perft() {
        let d = divide(&Board::start(), 5);
        assert_eq!(d.len(), 4);
        assert_eq!(
            d.iter().map(|(_, n)| n).sum::<u64>(),
            perft(&Board::start(), 5)
        );
        // The start position is symmetric: every first move leads to the same count.
        assert!(d.iter().all(|&(_, n)| n == d[0].1));
    }

    #[test]
    fn game_over_and_pass_positions() {
        // Game over (no empty square): one finished game at every depth.
        let full = Board {
            player: !0 ^ 1,
            opponent: 1,
        };
        assert_eq!(perft(&full, 0), 1);
        assert_eq!(perft(&full, 3), 1);
        assert_eq!(divide(&full, 3), vec![(crate::Move::None, 1)]);
        // Only one colour on the board: neither side can move.
        let b = Board {
            player: 0,
            opponent: 0b11,
        };
        assert_eq!(perft(&b, 1), 1);
        // X on a1, O on b1: X can play c1; O has nothing to outflank.
        let x_moves = Board {
            player: 0b001,
            opponent: 0b010,
        };
        assert_eq!(perft(&x_moves, 1), 1);
        // Seen from O: O has no move (nothing to outflank), X has c1, so O must pass.
        let o_passes = x_moves.pass();
        assert!(o_passes.must_pass());
        assert_eq!(perft(&o_passes, 1), 1); // the pass
        assert_eq!(perft(&o_passes, 2), 1); // pass, then X plays c1
        assert_eq!(perft(&o_passes, 3), 1); // then the game is over and stays one leaf
        assert_eq!(divide(&o_passes, 2), vec![(crate::Move::Pass, 1)]);
    }
}
