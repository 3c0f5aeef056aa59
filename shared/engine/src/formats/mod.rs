//! Readers (and some writers) for Othello game records and test positions.
//!
//! * [`transcript`]: Edax-style move strings `f5d6c3…` (passes inferred or explicit `pa`), and
//!   [`transcript::board_after`], the board a move list reaches;
//! * [`wthor`]: the FFO WTHOR database (`.wtb` games, `.JOU`/`.TRN` name lists);
//! * [`ggf`]: GGS game files (standard 8×8 games from the initial position only);
//! * [`obf`]: Edax/FFO `.obf` positions (read and write) and the exact-score endgame lists
//!   distributed with the flippy engine;
//! * [`records`]: the line formats of the other data sets in `../shared/data` (Logistello's
//!   `logbook.gam`, Egaroucid self-play transcripts, the eOthello CSV).
//!
//! Every game reader produces a [`Game`]: the moves from the standard start position with Black
//! to move first and every pass explicit, already checked legal. Parsers take text or bytes (no
//! IO) and never panic; errors say where (line, record, ply) and what went wrong.
//!
//! ```
//! use bookfarm_engine::formats::transcript::parse_transcript;
//! use bookfarm_engine::Move;
//! // Black has no move after these 8 plies: the reader inserts Black's pass before White's e3.
//! let g = parse_transcript("d3c3b3b2f5a3a1c1 e3").unwrap_or_else(|e| panic!("{e}"));
//! assert_eq!(g.moves[8], Move::Pass);
//! assert_eq!(g.replay().map(|boards| boards.len()), Ok(11));
//! ```

pub mod ggf;
pub mod obf;
pub mod records;
pub mod transcript;
pub mod wthor;

use crate::board::Board;
use crate::square::Move;

/// A game from the standard start position, Black first, with every pass written as
/// [`Move::Pass`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Game {
    /// The moves in order; a pass appears exactly where the side to move had no legal move.
    pub moves: Vec<Move>,
}

/// An illegal move while replaying a game.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GameError {
    /// The move is not legal on the board reached so far.
    #[error("illegal move {mv} at ply {ply} (board {board}, {side} to move)")]
    Illegal {
        /// 0-based index of the move in the game (passes included).
        ply: usize,
        /// The rejected move.
        mv: Move,
        /// The board before the move, from the mover's view (`X` to move).
        board: String,
        /// `black` or `white`.
        side: &'static str,
    },
    /// A move is attributed to the wrong colour (a record that names the mover, like Logistello's
    /// `+d3-c3` or GGF's `B[..]W[..]`, disagrees with the game).
    #[error("move {mv} at ply {ply} is marked for {marked} but {side} is to move")]
    WrongColour {
        /// 0-based ply.
        ply: usize,
        /// The move.
        mv: Move,
        /// The colour the record gives.
        marked: &'static str,
        /// The colour actually to move.
        side: &'static str,
    },
}

const fn side_name(black: bool) -> &'static str {
    if black { "black" } else { "white" }
}

/// Incremental replay that inserts forced passes, shared by every game reader.
#[derive(Debug, Clone)]
pub(crate) struct Replayer {
    board: Board,
    black_to_move: bool,
    moves: Vec<Move>,
}

impl Replayer {
    pub(crate) fn new() -> Replayer {
        Replayer {
            board: Board::start(),
            black_to_move: true,
            moves: Vec::with_capacity(64),
        }
    }

    fn illegal(&self, mv: Move) -> GameError {
        GameError::Illegal {
            ply: self.moves.len(),
            mv,
            board: self.board.to_string(),
            side: side_name(self.black_to_move),
        }
    }

    /// When the record names the mover (`Some(true)` = black), it must be the side to move.
    fn check_colour(&self, mv: Move, colour: Option<bool>) -> Result<(), GameError> {
        match colour {
            Some(black) if black != self.black_to_move => Err(GameError::WrongColour {
                ply: self.moves.len(),
                mv,
                marked: side_name(black),
                side: side_name(self.black_to_move),
            }),
            _ => Ok(()),
        }
    }

    fn pass(&mut self) {
        self.board = self.board.pass();
        self.black_to_move = !self.black_to_move;
        self.moves.push(Move::Pass);
    }

    /// Play `mv`. Before a square move, a pass is inserted when the side to move has no legal
    /// move (and the opponent has). An explicit pass is accepted only when forced.
    /// When `colour` is given (`true` = black), the mover must have that colour (after any
    /// inserted pass).
    pub(crate) fn play(&mut self, mv: Move, colour: Option<bool>) -> Result<(), GameError> {
        match mv {
            Move::Square(sq) => {
                let mut f = self.board.flips(sq);
                let empty = self.board.empty() & sq.bit() != 0;
                // Only when the move is not playable do we look for a forced pass: most plies
                // then cost one flip computation and no mobility.
                if (f == 0 || !empty) && self.board.must_pass() {
                    self.pass();
                    f = self.board.flips(sq);
                }
                self.check_colour(mv, colour)?;
                if f == 0 || !empty {
                    return Err(self.illegal(mv));
                }
                self.board = self.board.play_flips(sq.index(), f);
                self.black_to_move = !self.black_to_move;
                self.moves.push(mv);
                Ok(())
            }
            Move::Pass => {
                if !self.board.must_pass() {
                    return Err(self.illegal(mv));
                }
                self.check_colour(mv, colour)?;
                self.pass();
                Ok(())
            }
            Move::None => Err(self.illegal(mv)),
        }
    }

    /// The board reached so far, from the side to move's view.
    pub(crate) fn board(&self) -> Board {
        self.board
    }

    pub(crate) fn finish(self) -> Game {
        Game { moves: self.moves }
    }
}

impl Game {
    /// Build a game from moves played from the start position, inserting every forced pass that
    /// is not written and accepting written passes only where forced.
    pub fn from_moves(moves: impl IntoIterator<Item = Move>) -> Result<Game, GameError> {
        let mut r = Replayer::new();
        for mv in moves {
            r.play(mv, None)?;
        }
        Ok(r.finish())
    }

    /// Replay the stored moves strictly (passes must be present where forced) and return the
    /// boards from the mover's view: `boards[i]` is the position before `moves[i]`, and the last
    /// board is the final position (`moves.len() + 1` boards). Black is to move on even indices.
    pub fn replay(&self) -> Result<Vec<Board>, GameError> {
        let mut boards = Vec::with_capacity(self.moves.len() + 1);
        let mut b = Board::start();
        boards.push(b);
        for (ply, &mv) in self.moves.iter().enumerate() {
            b = b.play_move(mv).map_err(|_| GameError::Illegal {
                ply,
                mv,
                board: b.to_string(),
                side: side_name(ply % 2 == 0),
            })?;
            boards.push(b);
        }
        Ok(boards)
    }

    /// The final position and whether Black is to move there.
    pub fn final_position(&self) -> Result<(Board, bool), GameError> {
        let boards = self.replay()?;
        let last = boards.len() - 1;
        Ok((boards[last], last % 2 == 0))
    }

    /// Final disc counts `(black, white)`.
    pub fn final_discs(&self) -> Result<(u32, u32), GameError> {
        let (b, black_to_move) = self.final_position()?;
        let (p, o) = (b.player.count_ones(), b.opponent.count_ones());
        Ok(if black_to_move { (p, o) } else { (o, p) })
    }

    /// Whether the game reached a position where neither side can move.
    pub fn is_finished(&self) -> Result<bool, GameError> {
        Ok(self.final_position()?.0.is_game_over())
    }

    /// The moves as an Edax-style transcript (`f5d6c3…`, lowercase, passes omitted because the
    /// reader infers them).
    pub fn to_transcript(&self) -> String {
        let mut s = String::with_capacity(2 * self.moves.len());
        for m in &self.moves {
            if let Move::Square(sq) = m {
                s.push_str(&sq.to_string());
            }
        }
        s
    }
}

/// Black's final disc difference with the empty squares given to the winner (Edax / WTHOR
/// convention), from final disc counts.
pub const fn disc_diff_empties_to_winner(black: u32, white: u32) -> i32 {
    let diff = black as i32 - white as i32;
    let empties = 64 - black as i32 - white as i32;
    if diff > 0 {
        diff + empties
    } else if diff < 0 {
        diff - empties
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::square::Square;

    fn sq(s: &str) -> Move {
        Move::Square(Square::parse(s).expect("square"))
    }

    #[test]
    fn replay_and_errors() {
        let g = Game::from_moves([sq("f5"), sq("d6"), sq("c3")]).expect("legal");
        let boards = g.replay().expect("legal");
        assert_eq!(boards.len(), 4);
        assert_eq!(boards[0], Board::start());
        // f5 flips e5, d6 flips d5, c3 flips d4: Black 5 discs, White 2.
        assert_eq!(g.final_discs(), Ok((5, 2)));
        let e = Game::from_moves([sq("f5"), sq("f5")]).unwrap_err();
        assert!(matches!(e, GameError::Illegal { ply: 1, .. }), "{e}");
        assert!(Game::from_moves([Move::Pass]).is_err());
        assert!(Game::from_moves([Move::None]).is_err());
        // A stored game without its forced passes fails the strict replay.
        let bad = Game {
            moves: vec![sq("a1")],
        };
        assert!(matches!(
            bad.replay(),
            Err(GameError::Illegal { ply: 0, .. })
        ));
    }

    #[test]
    fn empties_to_winner() {
        assert_eq!(disc_diff_empties_to_winner(40, 20), 24);
        assert_eq!(disc_diff_empties_to_winner(13, 0), 64);
        assert_eq!(disc_diff_empties_to_winner(0, 13), -64);
        assert_eq!(disc_diff_empties_to_winner(30, 30), 0);
    }
}
