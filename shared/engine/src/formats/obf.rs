//! Edax/FFO `.obf` positions (read and write), and the exact-score endgame lists of the flippy
//! engine (`eg_XX_YY.txt`).
//!
//! OBF (edax-spec §10): one position per line; `%` starts a comment; blank lines are skipped.
//! A line is the 64 cells A1..H8 (`X`/`x`/`b`/`*` black, `O`/`o`/`w` white, `-`/`.` empty;
//! whitespace tolerated inside), the side to move (`X` or `O`), an optional `;`, then fields
//! ` MOVE:SCORE;` (exact score of a move, mover's view) or ` SCORE;` (the best score alone).
//! Every form found in `../shared/data/ffo` is accepted: with or without `;`, with or without
//! move scores, trailing spaces, comments.

use crate::board::{Board, ParseBoardError, read_cells};
use crate::square::{Move, Square};
use std::fmt::Write as _;

/// One OBF position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObfPosition {
    /// The board from the mover's view.
    pub board: Board,
    /// Whether Black is to move.
    pub black_to_move: bool,
    /// Listed moves with their exact scores (mover's view), in file order.
    pub scores: Vec<(Move, i32)>,
    /// The best score: the score-only field when present, else the maximum listed move score.
    pub best_score: Option<i32>,
    /// Text after `%` on the position's line, trimmed (`None` without a comment).
    pub comment: Option<String>,
}

/// What is wrong with an OBF or endgame-list line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObfErrorKind {
    /// Fewer than 64 board cells.
    #[error("board has only {0} cells, expected 64")]
    ShortBoard(u32),
    /// A character that is neither a disc nor an empty cell.
    #[error("bad board character {0:?}")]
    BadCell(char),
    /// The side to move is missing or not `X`/`O`.
    #[error("bad or missing side to move {0:?}")]
    BadSide(String),
    /// A `MOVE:SCORE` or `SCORE` field that cannot be parsed.
    #[error("bad field {0:?}")]
    BadField(String),
    /// A score outside -64..=64.
    #[error("score {0} out of range -64..=64")]
    ScoreRange(i64),
    /// A listed move that is not legal on the board.
    #[error("move {0} is not legal on this board")]
    IllegalMove(Move),
    /// A move listed twice.
    #[error("move {0} listed twice")]
    DuplicateMove(Move),
}

/// An OBF or endgame-list parse error, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct ObfError {
    /// 1-based line number.
    pub line: usize,
    /// The problem.
    pub kind: ObfErrorKind,
}

/// Black / white bitboards and the rest of the text after 64 cells (the board's own cell reader).
fn parse_cells(text: &str) -> Result<(u64, u64, &str), ObfErrorKind> {
    read_cells(text).map_err(|e| match e {
        ParseBoardError::BadCell { ch, .. } => ObfErrorKind::BadCell(ch),
        ParseBoardError::TooShort { cells } => ObfErrorKind::ShortBoard(cells),
        // `read_cells` stops after the 64th cell, so it never reports a long board.
        ParseBoardError::TooLong => ObfErrorKind::ShortBoard(64),
    })
}

fn parse_side(s: &str) -> Result<bool, ObfErrorKind> {
    match s {
        "X" | "x" | "B" | "b" | "*" => Ok(true),
        "O" | "o" | "W" | "w" => Ok(false),
        _ => Err(ObfErrorKind::BadSide(s.to_string())),
    }
}

fn parse_score(s: &str) -> Result<i32, ObfErrorKind> {
    let digits = s.strip_prefix('+').unwrap_or(s);
    let v: i64 = digits
        .parse()
        .map_err(|_| ObfErrorKind::BadField(s.to_string()))?;
    if !(-64..=64).contains(&v) {
        return Err(ObfErrorKind::ScoreRange(v));
    }
    Ok(v as i32)
}

/// Parse one OBF line (without its line number); `Ok(None)` for blank and comment-only lines.
pub fn parse_obf_line(line: &str) -> Result<Option<ObfPosition>, ObfErrorKind> {
    let (body, comment) = match line.split_once('%') {
        Some((b, c)) => (b, Some(c.trim().to_string())),
        None => (line, None),
    };
    if body.trim().is_empty() {
        return Ok(None);
    }
    let (black, white, rest) = parse_cells(body)?;
    let mut fields = rest.split(';');
    let side = fields.next().unwrap_or("").trim();
    let black_to_move = parse_side(side)?;
    let board = Board::from_colours(black, white, black_to_move);
    let legal = board.moves();
    let mut scores: Vec<(Move, i32)> = Vec::new();
    let mut explicit_best = None;
    for field in fields {
        let field = field.trim();
        if field.is_empty() {
            continue;
        }
        match field.split_once(':') {
            Some((m, sc)) => {
                let mv = Move::parse(m).map_err(|_| ObfErrorKind::BadField(field.to_string()))?;
                let ok = match mv {
                    Move::Square(s) => legal & s.bit() != 0,
                    Move::Pass => board.must_pass(),
                    Move::None => false,
                };
                if !ok {
                    return Err(ObfErrorKind::IllegalMove(mv));
                }
                if scores.iter().any(|&(m2, _)| m2 == mv) {
                    return Err(ObfErrorKind::DuplicateMove(mv));
                }
                scores.push((mv, parse_score(sc.trim())?));
            }
            None => explicit_best = Some(parse_score(field)?),
        }
    }
    let best_score = explicit_best.or_else(|| scores.iter().map(|&(_, s)| s).max());
    Ok(Some(ObfPosition {
        board,
        black_to_move,
        scores,
        best_score,
        comment,
    }))
}

/// Parse a whole OBF file; errors carry the 1-based line number.
pub fn parse_obf(text: &str) -> Result<Vec<ObfPosition>, ObfError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match parse_obf_line(line) {
            Ok(Some(p)) => out.push(p),
            Ok(None) => {}
            Err(kind) => return Err(ObfError { line: i + 1, kind }),
        }
    }
    Ok(out)
}

impl ObfPosition {
    /// Black's and White's bitboards.
    pub fn black_white(&self) -> (u64, u64) {
        if self.black_to_move {
            (self.board.player, self.board.opponent)
        } else {
            (self.board.opponent, self.board.player)
        }
    }

    /// The moves whose listed score equals the best score.
    pub fn best_moves(&self) -> Vec<Move> {
        match self.best_score {
            Some(b) => self
                .scores
                .iter()
                .filter(|&&(_, s)| s == b)
                .map(|&(m, _)| m)
                .collect(),
            None => Vec::new(),
        }
    }

    /// The line as Edax writes it: `board side;` then ` MOVE:+score;` per listed move (uppercase
    /// moves, explicit sign), then ` +score;` when the best score is not the maximum listed score
    /// (e.g. nothing is listed), then ` % comment`. Parsing the line gives back `self`.
    pub fn to_obf_line(&self) -> String {
        let (black, white) = self.black_white();
        let mut s = String::with_capacity(96 + 10 * self.scores.len());
        for i in 0..64 {
            let m = 1u64 << i;
            s.push(if black & m != 0 {
                'X'
            } else if white & m != 0 {
                'O'
            } else {
                '-'
            });
        }
        s.push_str(if self.black_to_move { " X;" } else { " O;" });
        for &(mv, score) in &self.scores {
            let _ = write!(s, " {}:{score:+};", mv.to_edax_upper());
        }
        // The best score is implied by the listed moves unless it differs from their maximum
        // (or nothing is listed); then it is written as a score-only field so it reads back.
        let listed_best = self.scores.iter().map(|&(_, sc)| sc).max();
        if let Some(b) = self.best_score.filter(|&b| Some(b) != listed_best) {
            let _ = write!(s, " {b:+};");
        }
        if let Some(c) = &self.comment {
            let _ = write!(s, " % {c}");
        }
        s
    }
}

/// Write positions as an OBF file (one [`ObfPosition::to_obf_line`] per line).
pub fn write_obf(positions: &[ObfPosition]) -> String {
    let mut s = String::new();
    for p in positions {
        s.push_str(&p.to_obf_line());
        s.push('\n');
    }
    s
}

/// One position of the flippy endgame lists (`eg_13_14.txt` …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlippyPosition {
    /// The board from the mover's view.
    pub board: Board,
    /// Whether Black is to move.
    pub black_to_move: bool,
    /// The listed best move: a square, or for index `-1` in the file [`Move::Pass`] when the side
    /// to move must pass and [`Move::None`] otherwise (one line of `eg_13_14.txt` has `-1` with a
    /// legal move available and score +64: the move was not recorded).
    pub best_move: Move,
    /// Exact final disc difference from **Black's** view (empties to the winner), whatever the
    /// side to move.
    pub score_black: i32,
}

impl FlippyPosition {
    /// The exact score from the side to move's view (Edax's convention).
    pub const fn score_for_mover(&self) -> i32 {
        if self.black_to_move {
            self.score_black
        } else {
            -self.score_black
        }
    }
}

/// Parse one flippy endgame line `<64 cells> <Black|White> <best square index> <score>`; the index
/// is `-1` when no move is recorded (see [`FlippyPosition::best_move`]).
pub fn parse_flippy_line(line: &str) -> Result<FlippyPosition, ObfErrorKind> {
    let (black, white, rest) = parse_cells(line)?;
    let mut it = rest.split_whitespace();
    let side = it.next().unwrap_or("");
    let black_to_move = match side {
        "Black" | "black" | "B" | "X" => true,
        "White" | "white" | "W" | "O" => false,
        _ => return Err(ObfErrorKind::BadSide(side.to_string())),
    };
    let board = Board::from_colours(black, white, black_to_move);
    let idx = it.next().unwrap_or("");
    let best_move = if idx == "-1" {
        if board.must_pass() {
            Move::Pass
        } else {
            Move::None
        }
    } else {
        let sq = idx
            .parse::<u8>()
            .ok()
            .and_then(Square::new)
            .ok_or_else(|| ObfErrorKind::BadField(idx.to_string()))?;
        if board.moves() & sq.bit() == 0 {
            return Err(ObfErrorKind::IllegalMove(Move::Square(sq)));
        }
        Move::Square(sq)
    };
    let sc = it.next().unwrap_or("");
    let score_black = parse_score(sc)?;
    if let Some(extra) = it.next() {
        return Err(ObfErrorKind::BadField(extra.to_string()));
    }
    Ok(FlippyPosition {
        board,
        black_to_move,
        best_move,
        score_black,
    })
}

/// Parse a flippy endgame file; blank lines and `%`/`#` comment lines are skipped.
pub fn parse_flippy(text: &str) -> Result<Vec<FlippyPosition>, ObfError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') || t.starts_with('#') {
            continue;
        }
        out.push(parse_flippy_line(t).map_err(|kind| ObfError { line: i + 1, kind })?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FFO40: &str =
        "O--OOOOX-OOOOOOXOOXXOOOXOOXOOOXXOOOOOOXX---OOOOX----O--X-------- X; A2:+38; C7:+36;";

    #[test]
    fn every_form() {
        let full = parse_obf_line(FFO40).expect("ok").expect("position");
        assert!(full.black_to_move);
        assert_eq!(full.board.empties(), 20);
        assert_eq!(full.best_score, Some(38));
        assert_eq!(full.scores.len(), 2);
        assert_eq!(full.best_moves(), vec![Move::parse("a2").expect("move")]);
        // Without the trailing `;` and without fields at all.
        let cells = &FFO40[..64];
        let bare = parse_obf_line(&format!("{cells} X"))
            .expect("ok")
            .expect("position");
        assert_eq!(bare.board, full.board);
        assert!(bare.scores.is_empty() && bare.best_score.is_none());
        let semi = parse_obf_line(&format!("{cells} X;"))
            .expect("ok")
            .expect("position");
        assert_eq!(semi, bare);
        // Score-only field, comment, spaces inside the board, lowercase cells.
        let spaced: String = cells
            .as_bytes()
            .chunks(8)
            .map(|c| String::from_utf8_lossy(c).to_lowercase())
            .collect::<Vec<_>>()
            .join(" ");
        let p = parse_obf_line(&format!("{spaced} X; +38; % ffo #40"))
            .expect("ok")
            .expect("position");
        assert_eq!(p.board, full.board);
        assert_eq!(p.best_score, Some(38));
        assert_eq!(p.comment.as_deref(), Some("ffo #40"));
        assert_eq!(parse_obf_line("% just a comment"), Ok(None));
        assert_eq!(parse_obf_line("   "), Ok(None));
    }

    #[test]
    fn errors_with_lines() {
        let text = format!("% header\n\n{FFO40}\n{} X; A1:+3;\n", &FFO40[..64]);
        let e = parse_obf(&text).unwrap_err();
        assert_eq!(e.line, 4);
        assert_eq!(
            e.kind,
            ObfErrorKind::IllegalMove(Move::parse("a1").expect("move"))
        );
        assert!(matches!(
            parse_obf_line("XO"),
            Err(ObfErrorKind::ShortBoard(2))
        ));
        assert!(matches!(
            parse_obf_line(&format!("{} Z;", &FFO40[..64])),
            Err(ObfErrorKind::BadSide(_))
        ));
        assert!(matches!(
            parse_obf_line(&format!("{} X; A2:+99;", &FFO40[..64])),
            Err(ObfErrorKind::ScoreRange(99))
        ));
        assert!(matches!(
            parse_obf_line(&format!("{} X; A2:+3; A2:+3;", &FFO40[..64])),
            Err(ObfErrorKind::DuplicateMove(_))
        ));
        assert!(matches!(
            parse_obf_line(&format!("{} X; A2:x;", &FFO40[..64])),
            Err(ObfErrorKind::BadField(_))
        ));
    }

    #[test]
    fn write_round_trip() {
        let p = parse_obf_line(FFO40).expect("ok").expect("position");
        assert_eq!(p.to_obf_line(), FFO40);
        let mut q = p.clone();
        q.scores.clear();
        q.comment = Some("note".into());
        assert_eq!(parse_obf(&write_obf(&[q.clone()])), Ok(vec![q]));
        // Found by fuzzing: moves listed and a score-only field that disagrees with them.
        let mixed = format!("{} X; A2:+38; C7:+36; -4;", &FFO40[..64]);
        let m = parse_obf_line(&mixed).expect("ok").expect("position");
        assert_eq!(m.best_score, Some(-4));
        assert_eq!(m.to_obf_line(), mixed);
    }

    #[test]
    fn flippy_line() {
        let line = "-OOOOOO---OOOO-XXXOOXXXX-OOXXOOX-OXOOOXX-XXXXXXX--OOXX-X-OOOO-X- Black 32 -34";
        let p = parse_flippy_line(line).expect("ok");
        assert!(p.black_to_move);
        assert_eq!(p.best_move.to_string(), "a5");
        assert_eq!(p.score_for_mover(), -34);
        // Index -1: no move recorded (line 153 of eg_13_14.txt, where White could play b7).
        let quirk = "--OO-----OOO--XXOOXOOXXXOOXXXXXX-OXXXXXX-XXXXXXXX-XXXXXX-XXXXXXX White -1 64";
        let p = parse_flippy_line(quirk).expect("ok");
        assert_eq!((p.best_move, p.score_for_mover()), (Move::None, -64));
        // Index -1 where the side to move must pass: the pass.
        let pass = "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXO- White -1 64";
        let p = parse_flippy_line(pass).expect("ok");
        assert!(p.board.must_pass());
        assert_eq!(p.best_move, Move::Pass);
        assert!(parse_flippy_line(&line.replace("32", "0")).is_err());
        assert!(parse_flippy(&format!("\n{line}\nbad\n")).is_err_and(|e| e.line == 3));
    }
}
