//! Squares and moves in Edax numbering: A1 = 0, B1 = 1, …, H8 = 63; `PASS` = 64, `NOMOVE` = 65.

use std::fmt;

/// A board square, `0..64` with `index = 8 * row + col` (row 0 is rank 1, col 0 is file a).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Square(u8);

impl Square {
    /// The square with Edax index `index`, or `None` when `index >= 64`.
    pub const fn new(index: u8) -> Option<Square> {
        if index < 64 {
            Some(Square(index))
        } else {
            None
        }
    }

    /// The Edax index 0..64.
    pub const fn index(self) -> u8 {
        self.0
    }

    /// The single-bit mask of this square.
    pub const fn bit(self) -> u64 {
        1u64 << self.0
    }

    /// File 0..8 (a..h).
    pub const fn file(self) -> u8 {
        self.0 & 7
    }

    /// Rank 0..8 (1..8).
    pub const fn rank(self) -> u8 {
        self.0 >> 3
    }

    /// Iterate over every square in index order.
    pub fn all() -> impl Iterator<Item = Square> {
        (0u8..64).map(Square)
    }

    /// Parse `a1`..`h8` (case-insensitive).
    pub fn parse(s: &str) -> Result<Square, ParseMoveError> {
        let b = s.as_bytes();
        if b.len() != 2 {
            return Err(ParseMoveError(s.to_string()));
        }
        let f = b[0].to_ascii_lowercase();
        let r = b[1];
        if !(b'a'..=b'h').contains(&f) || !(b'1'..=b'8').contains(&r) {
            return Err(ParseMoveError(s.to_string()));
        }
        Ok(Square((r - b'1') * 8 + (f - b'a')))
    }
}

impl fmt::Display for Square {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            (b'a' + self.file()) as char,
            (b'1' + self.rank()) as char
        )
    }
}

impl fmt::Debug for Square {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A move as Edax stores it: a square, a pass, or "no move".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Move {
    /// Put a disc on a square.
    Square(Square),
    /// The side to move has no legal move and passes (Edax code 64).
    Pass,
    /// No move (Edax code 65): e.g. an empty leaf or a game-over position.
    None,
}

/// Edax code of a pass.
pub const PASS: u8 = 64;
/// Edax code of "no move".
pub const NOMOVE: u8 = 65;

impl Move {
    /// The Edax byte code: 0..63, 64 (pass) or 65 (no move).
    pub const fn code(self) -> u8 {
        match self {
            Move::Square(s) => s.0,
            Move::Pass => PASS,
            Move::None => NOMOVE,
        }
    }

    /// Decode an Edax byte code; `None` for codes above 65.
    pub const fn from_code(code: u8) -> Option<Move> {
        match code {
            0..=63 => Some(Move::Square(Square(code))),
            PASS => Some(Move::Pass),
            NOMOVE => Some(Move::None),
            _ => None,
        }
    }

    /// Parse `a1`..`h8`, `pa`/`ps`/`pass`/`@@` for a pass and `--`/`none` for no move (case-insensitive).
    pub fn parse(s: &str) -> Result<Move, ParseMoveError> {
        let l = s.trim().to_ascii_lowercase();
        match l.as_str() {
            "pa" | "ps" | "pass" | "@@" => Ok(Move::Pass),
            "--" | "none" => Ok(Move::None),
            _ => Square::parse(&l).map(Move::Square),
        }
    }

    /// Text as used by the book dump and our CLIs: `a1`..`h8`, `pass`, `none`.
    pub fn to_lower_text(self) -> String {
        match self {
            Move::Square(s) => s.to_string(),
            Move::Pass => "pass".into(),
            Move::None => "none".into(),
        }
    }

    /// Edax's uppercase text: `A1`..`H8`, `PA`, `--`.
    pub fn to_edax_upper(self) -> String {
        match self {
            Move::Square(s) => s.to_string().to_ascii_uppercase(),
            Move::Pass => "PA".into(),
            Move::None => "--".into(),
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_lower_text())
    }
}

/// A move string that is not a square, pass or no-move.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid move {0:?}")]
pub struct ParseMoveError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn square_roundtrip() {
        for s in Square::all() {
            assert_eq!(Square::parse(&s.to_string()), Ok(s));
        }
        assert_eq!(Square::parse("A1").map(|s| s.index()), Ok(0));
        assert_eq!(Square::parse("h8").map(|s| s.index()), Ok(63));
        assert!(Square::parse("i1").is_err());
        assert!(Square::parse("a9").is_err());
        assert!(Square::parse("a").is_err());
    }

    #[test]
    fn move_codes() {
        for c in 0..=65u8 {
            assert_eq!(Move::from_code(c).map(Move::code), Some(c));
        }
        assert_eq!(Move::from_code(66), None);
        assert_eq!(Move::parse("PA"), Ok(Move::Pass));
        assert_eq!(Move::parse("--"), Ok(Move::None));
        assert_eq!(Move::Pass.to_edax_upper(), "PA");
    }
}
