//! Move lists and move ordering for the midgame search.
//!
//! Order of preference: a move that wipes the opponent out, the transposition-table move, the
//! killer move (the last move that cut a null-window node with as many empties off), then a
//! heuristic score made of (most important first) a shallow evaluation of the child when the
//! remaining depth allows it, the opponent's mobility (corners count double), the stability of
//! the mover's corners, and the opponent's potential mobility. The weights follow Edax's
//! `movelist_evaluate` scale (2^15 for evaluation and mobility, 2^11 for corner stability, 2^5 for
//! potential mobility).

use crate::board::Board;

/// Maximum number of legal moves in an Othello position (33 is the known maximum).
pub const MAX_MOVES: usize = 34;

/// One candidate move.
#[derive(Debug, Clone, Copy, Default)]
pub struct Candidate {
    /// Square index.
    pub x: u8,
    /// Discs it flips.
    pub flipped: u64,
    /// Ordering score (higher first).
    pub score: i32,
}

/// A fixed-capacity move list, consumed best-first by selection.
#[derive(Debug, Clone)]
pub struct MoveList {
    moves: [Candidate; MAX_MOVES],
    len: usize,
    next: usize,
}

impl MoveList {
    /// The legal moves of `board` restricted to `mask`, with their flips, unscored.
    #[inline(always)]
    pub fn new(board: &Board, moves: u64) -> MoveList {
        let mut list = MoveList {
            moves: [Candidate::default(); MAX_MOVES],
            len: 0,
            next: 0,
        };
        let mut m = moves;
        while m != 0 && list.len < MAX_MOVES {
            let x = m.trailing_zeros() as u8;
            m &= m - 1;
            let flipped = crate::flip::flips(board.player, board.opponent, x);
            list.moves[list.len] = Candidate {
                x,
                flipped,
                score: 0,
            };
            list.len += 1;
        }
        list
    }

    /// Number of moves.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no move.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All candidates (in current order).
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Candidate] {
        &mut self.moves[..self.len]
    }

    /// All candidates (in current order).
    #[inline]
    pub fn as_slice(&self) -> &[Candidate] {
        &self.moves[..self.len]
    }

    /// The next best candidate (selection sort step; ties keep square order).
    #[inline(always)]
    pub fn next_best(&mut self) -> Option<Candidate> {
        if self.next >= self.len {
            return None;
        }
        let mut best = self.next;
        for i in self.next + 1..self.len {
            if self.moves[i].score > self.moves[best].score {
                best = i;
            }
        }
        // Rotate so that equal scores keep their relative order.
        let c = self.moves[best];
        self.moves.copy_within(self.next..best, self.next + 1);
        self.moves[self.next] = c;
        self.next += 1;
        Some(c)
    }
}

/// The last two moves that cut a node off at one number of empties (killer moves), most recent
/// first; 65 = none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Killers([u8; 2]);

impl Killers {
    /// No killer move yet.
    pub const NONE: Killers = Killers([65; 2]);

    /// `moves` split into (first killer, second killer, the rest), each a subset of `moves`.
    #[inline(always)]
    pub fn groups(self, moves: u64) -> [u64; 3] {
        let bit = |x: u8| if x < 64 { 1u64 << x } else { 0 };
        let a = moves & bit(self.0[0]);
        let b = moves & bit(self.0[1]) & !a;
        [a, b, moves & !(a | b)]
    }

    /// Record a move that cut a node off.
    #[inline(always)]
    pub fn record(&mut self, x: u8) {
        if self.0[0] != x {
            self.0[1] = self.0[0];
            self.0[0] = x;
        }
    }
}

const CORNERS: u64 = 0x8100_0000_0000_0081;

/// Mobility with corners counted twice.
#[inline(always)]
pub fn weighted_mobility(moves: u64) -> i32 {
    (moves.count_ones() + (moves & CORNERS).count_ones()) as i32
}

/// Empty squares next to `opponent` discs (potential mobility of the side facing them).
#[inline(always)]
pub fn potential_mobility(player: u64, opponent: u64) -> i32 {
    let e = !(player | opponent);
    let o = opponent;
    let n = ((o << 1) & 0xfefe_fefe_fefe_fefe)
        | ((o >> 1) & 0x7f7f_7f7f_7f7f_7f7f)
        | (o << 8)
        | (o >> 8)
        | ((o << 9) & 0xfefe_fefe_fefe_fefe)
        | ((o >> 9) & 0x7f7f_7f7f_7f7f_7f7f)
        | ((o << 7) & 0x7f7f_7f7f_7f7f_7f7f)
        | ((o >> 7) & 0xfefe_fefe_fefe_fefe);
    (n & e).count_ones() as i32
}

/// Corner discs of `p` and the edge discs next to an owned corner (a cheap stability estimate).
#[inline(always)]
pub fn corner_stability(p: u64) -> i32 {
    let c = p & CORNERS;
    let near = ((c << 1) & 0x0200_0000_0000_0002)
        | ((c >> 1) & 0x4000_0000_0000_0040)
        | ((c << 8) & 0x0000_0000_0000_0100)
        | ((c >> 8) & 0x0080_0000_0000_0000)
        | ((c >> 8) & 0x0001_0000_0000_0000)
        | ((c << 8) & 0x0000_0000_0000_8000);
    (c | (near & p)).count_ones() as i32
}

/// Ordering weight of the evaluation term.
pub const W_EVAL: i32 = 1 << 15;
/// Ordering weight of the opponent's mobility.
pub const W_MOBILITY: i32 = 1 << 15;
/// Ordering weight of the corner stability.
pub const W_CORNER_STABILITY: i32 = 1 << 11;
/// Ordering weight of the potential mobility.
pub const W_POTENTIAL_MOBILITY: i32 = 1 << 5;
/// Score of the transposition-table move.
pub const TT_MOVE: i32 = 1 << 29;
/// Score of the killer move of null-window nodes (just below the table move).
pub const KILLER: i32 = TT_MOVE - 1;
/// Score of a wipe-out move.
pub const WIPEOUT: i32 = 1 << 30;

/// Heuristic part of a move's score from the child board (seen from the opponent's side).
#[inline(always)]
pub fn heuristic(child: &Board) -> i32 {
    let opp_moves = child.moves();
    (36 - potential_mobility(child.player, child.opponent)) * W_POTENTIAL_MOBILITY
        + corner_stability(child.opponent) * W_CORNER_STABILITY
        + (36 - weighted_mobility(opp_moves)) * W_MOBILITY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_order() {
        let b = Board::start();
        let mut l = MoveList::new(&b, b.moves());
        assert_eq!(l.len(), 4);
        for (i, c) in l.as_mut_slice().iter_mut().enumerate() {
            c.score = [1, 5, 5, 0][i];
        }
        let order: Vec<u8> = std::iter::from_fn(|| l.next_best()).map(|c| c.x).collect();
        // d3 = 19, c4 = 26, f5 = 37, e6 = 44: c4 and f5 tie and keep square order.
        assert_eq!(order, vec![26, 37, 19, 44]);
    }

    #[test]
    fn mobility_helpers() {
        assert_eq!(weighted_mobility(0x81), 4);
        assert_eq!(corner_stability(0x3), 2);
        assert_eq!(corner_stability(0x2), 0);
        let b = Board::start();
        assert_eq!(potential_mobility(b.player, b.opponent), 10);
    }
}
