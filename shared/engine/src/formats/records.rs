//! Line formats of the other game collections in `../shared/data` (README §2–§4).
//!
//! * Logistello `logbook.gam`: `+d3-c3+c4…: -04 10`, each move signed by its colour (`+` Black,
//!   `-` White; passes implicit), then `:` and Black's raw final disc difference (empties not
//!   credited) and a constant field.
//! * Egaroucid self-play: `<transcript> <label>` (a disc difference or a -1/0/1 result).
//! * eOthello CSV: header `Othello_game_id,winner,game_moves`, rows `id,winner,transcript`.
//!
//! The readers take the decompressed text (the caller gunzips `logbook.gam.gz`) and stop at the
//! first bad line with its 1-based number.

use super::transcript::{TranscriptError, parse_transcript};
use super::{Game, GameError, Replayer};
use crate::square::{Move, Square};

/// A game with an integer label from its record (a score or a result, depending on the source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabeledGame {
    /// The replayed game.
    pub game: Game,
    /// The label as written.
    pub label: i32,
}

/// One eOthello game.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EothelloGame {
    /// `Othello_game_id`.
    pub id: u64,
    /// `winner`: 1 Black, 0 draw, -1 White.
    pub winner: i8,
    /// The replayed game.
    pub game: Game,
}

/// What is wrong with a record line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordErrorKind {
    /// The line does not have the expected shape.
    #[error("malformed record: {0}")]
    Malformed(String),
    /// The moves cannot be read.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// A move is illegal or attributed to the wrong colour.
    #[error(transparent)]
    Game(#[from] GameError),
}

/// A record error with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct RecordError {
    /// 1-based line number.
    pub line: usize,
    /// The problem.
    pub kind: RecordErrorKind,
}

fn malformed(what: &str) -> RecordErrorKind {
    RecordErrorKind::Malformed(what.to_string())
}

/// Parse one Logistello line; the label is Black's raw final disc difference.
pub fn parse_logistello_line(line: &str) -> Result<LabeledGame, RecordErrorKind> {
    let (moves, tail) = line
        .split_once(':')
        .ok_or_else(|| malformed("missing ':' before the score"))?;
    let label = tail
        .split_whitespace()
        .next()
        .and_then(|t| t.strip_prefix('+').unwrap_or(t).parse::<i32>().ok())
        .filter(|v| (-64..=64).contains(v))
        .ok_or_else(|| malformed("bad score after ':'"))?;
    let b = moves.trim().as_bytes();
    if b.len() % 3 != 0 {
        return Err(malformed("moves are not sign + square triples"));
    }
    let mut r = Replayer::new();
    for t in b.chunks_exact(3) {
        let black = match t[0] {
            b'+' => true,
            b'-' => false,
            _ => return Err(malformed("move without '+' or '-' sign")),
        };
        let (f, k) = (t[1].to_ascii_lowercase(), t[2]);
        if !(b'a'..=b'h').contains(&f) || !(b'1'..=b'8').contains(&k) {
            return Err(malformed("bad square"));
        }
        let sq = Square::new((k - b'1') * 8 + (f - b'a')).ok_or_else(|| malformed("bad square"))?;
        r.play(Move::Square(sq), Some(black))?;
    }
    Ok(LabeledGame {
        game: r.finish(),
        label,
    })
}

/// Parse one Egaroucid line `<transcript> <label>`.
pub fn parse_egaroucid_line(line: &str) -> Result<LabeledGame, RecordErrorKind> {
    let mut it = line.split_whitespace();
    let moves = it.next().ok_or_else(|| malformed("empty line"))?;
    let label = it
        .next()
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|v| (-64..=64).contains(v))
        .ok_or_else(|| malformed("missing or bad label"))?;
    if it.next().is_some() {
        return Err(malformed("extra fields after the label"));
    }
    Ok(LabeledGame {
        game: parse_transcript(moves)?,
        label,
    })
}

/// Parse one eOthello CSV row `id,winner,moves` (not the header).
pub fn parse_eothello_row(line: &str) -> Result<EothelloGame, RecordErrorKind> {
    let mut it = line.trim().split(',');
    let (Some(id), Some(winner), Some(moves), None) = (it.next(), it.next(), it.next(), it.next())
    else {
        return Err(malformed("expected 3 comma-separated fields"));
    };
    let id = id.parse().map_err(|_| malformed("bad game id"))?;
    let winner = match winner {
        "1" => 1,
        "0" => 0,
        "-1" => -1,
        _ => return Err(malformed("winner is not 1, 0 or -1")),
    };
    Ok(EothelloGame {
        id,
        winner,
        game: parse_transcript(moves)?,
    })
}

fn read_lines<T>(
    text: &str,
    skip_header: Option<&str>,
    parse: impl Fn(&str) -> Result<T, RecordErrorKind>,
) -> Result<Vec<T>, RecordError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if let (0, Some(h)) = (i, skip_header) {
            if line.trim() != h {
                return Err(RecordError {
                    line: 1,
                    kind: malformed("unexpected header"),
                });
            }
            continue;
        }
        out.push(parse(line).map_err(|kind| RecordError { line: i + 1, kind })?);
    }
    Ok(out)
}

/// Read a whole Logistello `logbook.gam` text.
pub fn read_logistello(text: &str) -> Result<Vec<LabeledGame>, RecordError> {
    read_lines(text, None, parse_logistello_line)
}

/// Read a whole Egaroucid self-play file.
pub fn read_egaroucid(text: &str) -> Result<Vec<LabeledGame>, RecordError> {
    read_lines(text, None, parse_egaroucid_line)
}

/// The header line of the eOthello CSV.
pub const EOTHELLO_HEADER: &str = "Othello_game_id,winner,game_moves";

/// Read the eOthello CSV (the header line is required).
pub fn read_eothello(text: &str) -> Result<Vec<EothelloGame>, RecordError> {
    read_lines(text, Some(EOTHELLO_HEADER), parse_eothello_row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logistello() {
        let g = parse_logistello_line("+d3-c3+c4-e3: +02 10").expect("legal");
        assert_eq!(g.label, 2);
        assert_eq!(g.game.to_transcript(), "d3c3c4e3");
        assert!(matches!(
            parse_logistello_line("+d3+c3: +00 10"),
            Err(RecordErrorKind::Game(GameError::WrongColour { ply: 1, .. }))
        ));
        assert!(parse_logistello_line("+d3-c3").is_err());
        assert!(parse_logistello_line("+d3-c: 0 10").is_err());
        assert!(parse_logistello_line("*d3: 0 10").is_err());
        let e = read_logistello("+d3-c3: 0 10\n+a1: 0 10\n").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn egaroucid_and_eothello() {
        let g = parse_egaroucid_line("f5d6c3 -10").expect("legal");
        assert_eq!((g.label, g.game.moves.len()), (-10, 3));
        assert!(parse_egaroucid_line("f5d6c3").is_err());
        assert!(parse_egaroucid_line("f5d6c3 1 2").is_err());
        let csv = format!("{EOTHELLO_HEADER}\n1056798,1,f5d6c4\n");
        let rows = read_eothello(&csv).expect("valid");
        assert_eq!(
            (rows[0].id, rows[0].winner, rows[0].game.moves.len()),
            (1056798, 1, 3)
        );
        assert!(read_eothello("1,1,f5\n").is_err());
        assert!(read_eothello(&format!("{EOTHELLO_HEADER}\n1,2,f5\n")).is_err_and(|e| e.line == 2));
    }
}
