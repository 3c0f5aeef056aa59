//! The bitboard position seen from the side to move, with Edax's move and scoring rules.

use crate::square::{Move, Square};
use std::fmt;

/// A position seen from the side to move: `player` holds the mover's discs, `opponent` the other side's.
///
/// Invariant for boards built through [`Board::new`]: `player & opponent == 0`.
/// Colour is not part of the board (as in Edax's book).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Board {
    /// Discs of the side to move.
    pub player: u64,
    /// Discs of the side not to move.
    pub opponent: u64,
}

/// A move that cannot be played on a board.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal move {mv} on board {board}")]
pub struct IllegalMove {
    /// The rejected move.
    pub mv: Move,
    /// The board it was tried on, as a 64-character string from the mover's view (X to move).
    pub board: String,
}

/// A board whose bitboards overlap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("overlapping bitboards: player {player:#018x} and opponent {opponent:#018x} share squares")]
pub struct OverlapError {
    /// Player bitboard.
    pub player: u64,
    /// Opponent bitboard.
    pub opponent: u64,
}

const NOT_A: u64 = 0xfefe_fefe_fefe_fefe;
const NOT_H: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Shift every disc one step in direction `dir` (0..8), dropping discs that leave the board.
#[inline(always)]
pub(crate) const fn shift(b: u64, dir: usize) -> u64 {
    match dir {
        0 => (b << 1) & NOT_A, // east (towards h)
        1 => (b >> 1) & NOT_H, // west
        2 => b << 8,           // north (towards rank 8)
        3 => b >> 8,           // south
        4 => (b << 9) & NOT_A, // north-east
        5 => (b << 7) & NOT_H, // north-west
        6 => (b >> 7) & NOT_A, // south-east
        _ => (b >> 9) & NOT_H, // south-west
    }
}

/// Legal-move mask for `player` against `opponent` (portable Kogge-Stone style fill).
#[inline]
pub fn moves_portable(player: u64, opponent: u64) -> u64 {
    let empty = !(player | opponent);
    let mut moves = 0u64;
    let mut dir = 0;
    while dir < 8 {
        let mut t = shift(player, dir) & opponent;
        t |= shift(t, dir) & opponent;
        t |= shift(t, dir) & opponent;
        t |= shift(t, dir) & opponent;
        t |= shift(t, dir) & opponent;
        t |= shift(t, dir) & opponent;
        moves |= shift(t, dir);
        dir += 1;
    }
    moves & empty
}

/// Discs flipped when `player` plays on square `x` (portable reference; 0 if nothing flips).
#[inline]
pub fn flips_portable(player: u64, opponent: u64, x: u8) -> u64 {
    let m = 1u64 << x;
    let mut flipped = 0u64;
    let mut dir = 0;
    while dir < 8 {
        let mut f = 0u64;
        let mut t = shift(m, dir);
        while t & opponent != 0 {
            f |= t;
            t = shift(t, dir);
        }
        if t & player != 0 {
            flipped |= f;
        }
        dir += 1;
    }
    flipped
}

impl Board {
    /// The standard start position, Black to move (Edax's normalized form).
    pub const fn start() -> Board {
        Board {
            player: 0x0000_0008_1000_0000,
            opponent: 0x0000_0010_0800_0000,
        }
    }

    /// Build a board, rejecting overlapping bitboards.
    pub const fn new(player: u64, opponent: u64) -> Result<Board, OverlapError> {
        if player & opponent != 0 {
            Err(OverlapError { player, opponent })
        } else {
            Ok(Board { player, opponent })
        }
    }

    /// Empty squares mask.
    #[inline]
    pub const fn empty(&self) -> u64 {
        !(self.player | self.opponent)
    }

    /// Number of empty squares.
    #[inline(always)]
    pub const fn empties(&self) -> u32 {
        self.empty().count_ones()
    }

    /// Legal-move mask of the side to move (fastest backend of [`crate::flip`]).
    #[inline(always)]
    pub fn moves(&self) -> u64 {
        crate::flip::moves(self.player, self.opponent)
    }

    /// Discs flipped by playing square `x` (0 when the move flips nothing, i.e. is illegal).
    /// The content of `x` itself is not checked (fastest backend of [`crate::flip`]).
    #[inline]
    pub fn flips(&self, x: Square) -> u64 {
        crate::flip::flips(self.player, self.opponent, x.index())
    }

    /// The board after the side to move plays `x` with the given `flipped` discs (no legality check).
    #[inline]
    pub const fn play_flips(&self, x: u8, flipped: u64) -> Board {
        Board {
            player: self.opponent ^ flipped,
            opponent: self.player ^ flipped ^ (1u64 << x),
        }
    }

    /// The board after a pass: the sides swap.
    #[inline]
    pub const fn pass(&self) -> Board {
        Board {
            player: self.opponent,
            opponent: self.player,
        }
    }

    /// Play a square move if legal (the square is empty and flips at least one disc).
    pub fn play(&self, x: Square) -> Result<Board, IllegalMove> {
        let f = self.flips(x);
        if self.empty() & x.bit() == 0 || f == 0 {
            return Err(IllegalMove {
                mv: Move::Square(x),
                board: self.to_string(),
            });
        }
        Ok(self.play_flips(x.index(), f))
    }

    /// Play any [`Move`]: a legal square, or a pass when the side to move has no move and the
    /// opponent has one. `Move::None` is never legal.
    pub fn play_move(&self, mv: Move) -> Result<Board, IllegalMove> {
        match mv {
            Move::Square(s) => self.play(s),
            Move::Pass if self.must_pass() => Ok(self.pass()),
            _ => Err(IllegalMove {
                mv,
                board: self.to_string(),
            }),
        }
    }

    /// Edax's unchecked "next board": squares are played with their flips, `PASS`/`NOMOVE` swap sides.
    #[inline]
    pub fn next_unchecked(&self, mv: Move) -> Board {
        match mv {
            Move::Square(s) => self.play_flips(s.index(), self.flips(s)),
            Move::Pass | Move::None => self.pass(),
        }
    }

    /// Whether `mv` is legal here (square with flips, or pass when forced).
    pub fn is_legal(&self, mv: Move) -> bool {
        match mv {
            Move::Square(s) => self.moves() & s.bit() != 0,
            Move::Pass => self.must_pass(),
            Move::None => false,
        }
    }

    /// True when the side to move has no move but the opponent has one.
    pub fn must_pass(&self) -> bool {
        self.moves() == 0 && self.pass().moves() != 0
    }

    /// True when neither side can move.
    pub fn is_game_over(&self) -> bool {
        self.moves() == 0 && self.pass().moves() == 0
    }

    /// Edax's final score for the side to move (`solve`): the disc difference, with the empty
    /// squares given to the winner; a draw scores 0.
    pub const fn final_score(&self) -> i32 {
        let p = self.player.count_ones() as i32;
        let o = self.opponent.count_ones() as i32;
        let e = self.empties() as i32;
        let diff = p - o;
        if diff > 0 {
            diff + e
        } else if diff < 0 {
            diff - e
        } else {
            0
        }
    }

    /// Iterate over the legal moves' squares in increasing square order.
    pub fn legal_squares(&self) -> impl Iterator<Item = Square> {
        BitIter(self.moves())
    }

    /// The 64-character board string from the mover's view: `X` to move, `O` opponent, `-` empty.
    pub fn to_string_x(&self) -> String {
        self.to_string()
    }

    /// Parse 64 cells (A1..H8; `X`/`x`/`b`/`*` black, `O`/`o`/`w` white, `-`/`.` empty; whitespace
    /// skipped) and a side to move (`X`/`B`/`*` or `O`/`W`), returning the board from the mover's view.
    pub fn from_cells(cells: &str, black_to_move: bool) -> Result<Board, ParseBoardError> {
        let (black, white, rest) = read_cells(cells)?;
        if rest.chars().any(|c| !c.is_whitespace()) {
            return Err(ParseBoardError::TooLong);
        }
        Ok(Board::from_colours(black, white, black_to_move))
    }

    /// The board from the mover's view, given the black and white discs and the side to move.
    pub(crate) const fn from_colours(black: u64, white: u64, black_to_move: bool) -> Board {
        if black_to_move {
            Board {
                player: black,
                opponent: white,
            }
        } else {
            Board {
                player: white,
                opponent: black,
            }
        }
    }
}

/// Read the first 64 cells of `text` (A1..H8, whitespace skipped; the cell letters of
/// [`Board::from_cells`]): black and white discs, and the text after the 64th cell.
/// Errors are [`ParseBoardError::BadCell`] and [`ParseBoardError::TooShort`], never `TooLong`.
pub(crate) fn read_cells(text: &str) -> Result<(u64, u64, &str), ParseBoardError> {
    let (mut black, mut white) = (0u64, 0u64);
    let mut n = 0u32;
    for (i, c) in text.char_indices() {
        if n == 64 {
            return Ok((black, white, &text[i..]));
        }
        if c.is_whitespace() {
            continue;
        }
        match c {
            'X' | 'x' | 'b' | 'B' | '*' => black |= 1 << n,
            'O' | 'o' | 'w' | 'W' => white |= 1 << n,
            '-' | '.' | 'e' | 'E' => {}
            _ => return Err(ParseBoardError::BadCell { index: n, ch: c }),
        }
        n += 1;
    }
    if n == 64 {
        Ok((black, white, ""))
    } else {
        Err(ParseBoardError::TooShort { cells: n })
    }
}

/// A board string that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseBoardError {
    /// A character that is no disc or empty cell.
    #[error("bad board character {ch:?} at cell {index}")]
    BadCell {
        /// Cell index 0..64.
        index: u32,
        /// The character.
        ch: char,
    },
    /// Fewer than 64 cells.
    #[error("board has only {cells} cells, expected 64")]
    TooShort {
        /// Cells read.
        cells: u32,
    },
    /// More than 64 cells.
    #[error("board has more than 64 cells")]
    TooLong,
}

/// Iterator over the set bits of a mask as squares, lowest first.
#[derive(Debug, Clone, Copy)]
pub struct BitIter(pub u64);

impl Iterator for BitIter {
    type Item = Square;
    #[inline]
    fn next(&mut self) -> Option<Square> {
        if self.0 == 0 {
            return None;
        }
        let x = self.0.trailing_zeros() as u8;
        self.0 &= self.0 - 1;
        Square::new(x)
    }
}

impl fmt::Display for Board {
    /// 64 characters A1..H8, `X` = side to move, `O` = opponent, `-` = empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(64);
        for i in 0..64 {
            let m = 1u64 << i;
            s.push(if self.player & m != 0 {
                'X'
            } else if self.opponent & m != 0 {
                'O'
            } else {
                '-'
            });
        }
        f.write_str(&s)
    }
}

impl fmt::Debug for Board {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Board({:#018x}, {:#018x} {})",
            self.player, self.opponent, self
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_moves() {
        let b = Board::start();
        let names: Vec<String> = b.legal_squares().map(|s| s.to_string()).collect();
        assert_eq!(names, ["d3", "c4", "f5", "e6"]);
        assert_eq!(b.empties(), 60);
        assert!(!b.must_pass());
        assert!(!b.is_game_over());
    }

    #[test]
    fn play_f5() {
        let b = Board::start().play(Square::parse("f5").unwrap()).unwrap();
        // White to move; black now has d5, e5, f5 and e4.
        assert_eq!(b.opponent.count_ones(), 4);
        assert_eq!(b.player.count_ones(), 1);
        assert!(Board::start().play(Square::parse("a1").unwrap()).is_err());
    }

    #[test]
    fn final_score_gives_empties_to_winner() {
        let b = Board {
            player: 0b111,
            opponent: 0b1000,
        };
        assert_eq!(b.final_score(), 3 - 1 + 60);
        assert_eq!(b.pass().final_score(), -(3 - 1 + 60));
        let d = Board {
            player: 1,
            opponent: 2,
        };
        assert_eq!(d.final_score(), 0);
    }

    #[test]
    fn parse_cells() {
        let b = Board::from_cells(&Board::start().to_string(), true).unwrap();
        assert_eq!(b, Board::start());
        assert!(Board::from_cells("XO", true).is_err());
        assert!(matches!(
            Board::from_cells(&"Z".repeat(64), true),
            Err(ParseBoardError::BadCell { .. })
        ));
    }
}
