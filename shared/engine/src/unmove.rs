//! Predecessor generation ("un-moves"): every board from which a legal square move leads to a
//! given board.
//!
//! A board is seen from the side to move, so the side that just moved owns `opponent`. Undoing
//! its move at square `s` empties `s` and gives back to the side to move a non-empty set of
//! flipped discs: in each of the eight directions from `s`, a (possibly empty) prefix of the
//! mover's run of discs, always leaving at least one disc of the run beyond the prefix (the
//! anchor that bracketed it). The predecessor's move at `s` must flip exactly that set, which
//! also rules out every square where, with `s` empty, the mover would bracket discs of the side
//! to move: such a disc cannot have been the last one played.
//!
//! Passes are not un-moves: the board before a forced pass is [`pass_predecessor`].
//! The generator allocates nothing and reports each predecessor once.

use crate::board::{Board, shift};
use crate::square::Square;

/// Call `f(predecessor, square)` for every board `predecessor` on which the side to move has
/// the legal move `square` leading to `board` (`predecessor.play(square) == Ok(*board)`), each
/// pair once. Boards whose last move was a pass have no such predecessor unless the board
/// before the pass does (see [`pass_predecessor`]).
pub fn for_each_unmove(board: &Board, mut f: impl FnMut(Board, Square)) {
    let mover = board.opponent;
    let other = board.player;
    for s in crate::board::BitIter(mover) {
        let sb = s.bit();
        // A disc that, with its square empty, would bracket discs of the side to move cannot
        // be the last one played: the move would have flipped them.
        if crate::flip::flips(mover ^ sb, other, s.index()) != 0 {
            continue;
        }
        // For each direction with a run of at least two mover discs, the cumulative flipped
        // prefixes of 1..len-1 discs (the disc after the prefix is the anchor).
        let mut prefixes = [[0u64; 6]; 8];
        let mut n = [0usize; 8];
        let mut dirs = 0;
        for dir in 0..8 {
            let mut t = shift(sb, dir);
            let mut acc = 0u64;
            let mut k = 0;
            while t & mover != 0 && shift(t, dir) & mover != 0 {
                acc |= t;
                prefixes[dirs][k] = acc;
                k += 1;
                t = shift(t, dir);
            }
            if k > 0 {
                n[dirs] = k;
                dirs += 1;
            }
        }
        // Odometer over the per-direction choices (0 = nothing flipped there), skipping the
        // all-zero combination, which flips nothing.
        let mut choice = [0usize; 8];
        'combos: loop {
            let mut d = 0;
            loop {
                if d == dirs {
                    break 'combos;
                }
                if choice[d] < n[d] {
                    choice[d] += 1;
                    break;
                }
                choice[d] = 0;
                d += 1;
            }
            let mut flipped = 0u64;
            for d in 0..dirs {
                if choice[d] > 0 {
                    flipped |= prefixes[d][choice[d] - 1];
                }
            }
            let prev = Board {
                player: mover ^ sb ^ flipped,
                opponent: other | flipped,
            };
            debug_assert_eq!(prev.flips(s), flipped);
            f(prev, s);
        }
    }
}

/// Every un-move of `board` (see [`for_each_unmove`]), collected.
pub fn unmoves(board: &Board) -> Vec<(Board, Square)> {
    let mut v = Vec::new();
    for_each_unmove(board, |b, s| v.push((b, s)));
    v
}

/// The board from which a forced pass leads to `board`, if any: `board` with the sides
/// swapped, when the side to move there has no move and `board`'s side to move has one.
pub fn pass_predecessor(board: &Board) -> Option<Board> {
    let prev = board.pass();
    prev.must_pass().then_some(prev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{XorShift, random_board};

    #[test]
    fn start_position_has_no_predecessor() {
        assert!(unmoves(&Board::start()).is_empty());
        assert_eq!(pass_predecessor(&Board::start()), None);
    }

    #[test]
    fn after_f5_the_start_is_the_only_predecessor_with_a_full_centre() {
        let f5 = Square::parse("f5").unwrap();
        let d5 = Square::parse("d5").unwrap();
        let b = Board::start().play(f5).unwrap();
        let all = unmoves(&b);
        // Besides the start, d5 can be undone with e5 flipped back, leaving the centre square
        // d5 empty: a legal predecessor of the board, though not one a game reaches.
        assert_eq!(all.len(), 2);
        assert!(all.contains(&(Board::start(), f5)));
        let (p, s) = all.iter().find(|(_, s)| *s == d5).copied().unwrap();
        assert_eq!(p.empty() & d5.bit(), d5.bit());
        assert_eq!(p.play(s), Ok(b));
    }

    #[test]
    fn every_predecessor_plays_to_the_board() {
        let mut rng = XorShift(0x5eed);
        for plies in 1..50 {
            let b = random_board(&mut rng, plies);
            for (p, s) in unmoves(&b) {
                assert_eq!(p.play(s), Ok(b));
            }
        }
    }
}
