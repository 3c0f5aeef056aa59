//! GGS game files (`.ggf`): `(;GM[Othello]PC[..]PB[..]PW[..]TY[8]RE[..]BO[8 … *]B[f5]W[d6]…;)`.
//!
//! Only standard 8×8 games from the initial position are accepted: `TY` (when present) must be
//! `8`, and `BO` must be the start position with Black (`*`) to move. Random starts (`8r`),
//! synchro games (`s8`), komi, anti and other board sizes are rejected with
//! [`GgfErrorKind::Unsupported`]. Moves are `B[sq]`/`W[sq]`, optionally followed by
//! `/evaluation/time`; a pass is `PA` (a pass that is not written is inferred).

use super::{Game, GameError, Replayer};
use crate::board::Board;
use crate::square::Move;

/// One game of a GGF file.
#[derive(Clone, Debug, PartialEq)]
pub struct GgfGame {
    /// `PB`: Black's name.
    pub black: Option<String>,
    /// `PW`: White's name.
    pub white: Option<String>,
    /// `DT`: date as written.
    pub date: Option<String>,
    /// `RE`: Black's result as written (e.g. `+12.000`, or with a suffix such as `:r`).
    pub result: Option<String>,
    /// The replayed moves.
    pub game: Game,
}

/// What is wrong with a GGF game.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgfErrorKind {
    /// Broken syntax (missing `(;`, `[`, `]`, `;)` …).
    #[error("syntax error: {0}")]
    Syntax(&'static str),
    /// A variant or start position we do not read.
    #[error("unsupported game: {0}")]
    Unsupported(String),
    /// A move value that is no square or pass.
    #[error("bad move {0:?}")]
    BadMove(String),
    /// An illegal move or a move by the wrong colour.
    #[error(transparent)]
    Game(#[from] GameError),
}

/// A GGF error with the byte offset of the game (or property) where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {kind}")]
pub struct GgfError {
    /// Byte offset in the input.
    pub offset: usize,
    /// The problem.
    pub kind: GgfErrorKind,
}

/// The `BO` value of the standard start, ignoring whitespace: size, 64 cells, side to move.
fn is_standard_start(bo: &str) -> bool {
    let compact: String = bo.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(rest) = compact.strip_prefix('8') else {
        return false;
    };
    if rest.len() != 65 || !rest.is_ascii() {
        return false;
    }
    let (cells, side) = rest.split_at(64);
    let Ok(board) = Board::from_cells(cells, true) else {
        return false;
    };
    side == "*" && board == Board::start()
}

fn parse_move(value: &str) -> Result<Move, GgfErrorKind> {
    let mv = value.split('/').next().unwrap_or("").trim();
    match Move::parse(mv) {
        Ok(m @ (Move::Square(_) | Move::Pass)) => Ok(m),
        _ => Err(GgfErrorKind::BadMove(value.to_string())),
    }
}

/// Parse one game starting right after its `(;`; returns the game and the offset after `;)`.
fn parse_game(text: &str, start: usize) -> Result<(GgfGame, usize), GgfError> {
    let b = text.as_bytes();
    let err = |offset, kind| GgfError { offset, kind };
    let mut i = start;
    let mut g = GgfGame {
        black: None,
        white: None,
        date: None,
        result: None,
        game: Game::default(),
    };
    let mut replay = Replayer::new();
    let mut seen_board = false;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return Err(err(start, GgfErrorKind::Syntax("game not closed by ';)'")));
        }
        if b[i] == b';' {
            if b.get(i + 1) == Some(&b')') {
                if !seen_board {
                    return Err(err(
                        start,
                        GgfErrorKind::Unsupported("no BO[] start position".into()),
                    ));
                }
                g.game = replay.finish();
                return Ok((g, i + 2));
            }
            return Err(err(i, GgfErrorKind::Syntax("';' not followed by ')'")));
        }
        let key_start = i;
        while i < b.len() && b[i].is_ascii_uppercase() {
            i += 1;
        }
        if i == key_start {
            return Err(err(i, GgfErrorKind::Syntax("expected a property name")));
        }
        let key = &text[key_start..i];
        if b.get(i) != Some(&b'[') {
            return Err(err(
                i,
                GgfErrorKind::Syntax("expected '[' after a property name"),
            ));
        }
        let Some(len) = text[i + 1..].find(']') else {
            return Err(err(
                i,
                GgfErrorKind::Syntax("property value not closed by ']'"),
            ));
        };
        let value = &text[i + 1..i + 1 + len];
        let at = key_start;
        i += len + 2;
        match key {
            "GM" if value != "Othello" => {
                return Err(err(at, GgfErrorKind::Unsupported(format!("game {value}"))));
            }
            "TY" if value.trim() != "8" => {
                return Err(err(at, GgfErrorKind::Unsupported(format!("type {value}"))));
            }
            "BO" => {
                if !is_standard_start(value) {
                    return Err(err(
                        at,
                        GgfErrorKind::Unsupported(
                            "start position is not the standard 8x8 start".into(),
                        ),
                    ));
                }
                seen_board = true;
            }
            "PB" => g.black = Some(value.to_string()),
            "PW" => g.white = Some(value.to_string()),
            "DT" => g.date = Some(value.to_string()),
            "RE" => g.result = Some(value.to_string()),
            "B" | "W" => {
                if !seen_board {
                    return Err(err(
                        at,
                        GgfErrorKind::Unsupported("moves before BO[]".into()),
                    ));
                }
                let mv = parse_move(value).map_err(|k| err(at, k))?;
                replay
                    .play(mv, Some(key == "B"))
                    .map_err(|e| err(at, GgfErrorKind::Game(e)))?;
            }
            _ => {} // other properties (PC, RB, RW, TI, KM, …) are not needed
        }
    }
}

/// Parse every game of a GGF text (games are `(;` … `;)`; text between games is ignored).
pub fn parse_ggf(text: &str) -> Result<Vec<GgfGame>, GgfError> {
    let mut games = Vec::new();
    let mut i = 0;
    while let Some(p) = text[i..].find("(;") {
        let (g, next) = parse_game(text, i + p + 2)?;
        games.push(g);
        i = next;
    }
    Ok(games)
}

/// The `BO` value of the standard start: size, the 8 rows (`*` Black, `O` White, `-` empty),
/// Black to move.
const START_BO: &str =
    "8 -------- -------- -------- ---O*--- ---*O--- -------- -------- -------- *";

/// Write one game as a GGF game: `(;GM[Othello]PC[..]DT[..]PB[..]PW[..]RE[..]TY[8]BO[start]`
/// then the moves as `B[f5]W[d6]…` (a pass is `PA`), then `;)`. Absent names, date and result
/// are omitted; `place` is the `PC` value. [`parse_ggf`] reads it back.
pub fn write_ggf(game: &GgfGame, place: &str) -> String {
    let mut out = format!("(;GM[Othello]PC[{place}]");
    let props = [
        ("DT", &game.date),
        ("PB", &game.black),
        ("PW", &game.white),
        ("RE", &game.result),
    ];
    for (key, value) in props {
        if let Some(v) = value {
            out.push_str(&format!("{key}[{v}]"));
        }
    }
    out.push_str(&format!("TY[8]BO[{START_BO}]"));
    for (i, mv) in game.game.moves.iter().enumerate() {
        let side = if i % 2 == 0 { 'B' } else { 'W' };
        let text = match mv {
            Move::Square(sq) => sq.to_string(),
            _ => "PA".to_string(),
        };
        out.push_str(&format!("{side}[{text}]"));
    }
    out.push_str(";)");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_games_read_back() {
        let moves = crate::formats::transcript::parse_moves("f5d6c3d3c4").expect("moves");
        let g = GgfGame {
            black: Some("book".into()),
            white: None,
            date: None,
            result: Some("+2".into()),
            game: Game::from_moves(moves).expect("legal"),
        };
        let text = write_ggf(&g, "bookfarm");
        assert!(text.starts_with("(;GM[Othello]PC[bookfarm]PB[book]RE[+2]TY[8]BO[8 "));
        assert!(text.ends_with("B[f5]W[d6]B[c3]W[d3]B[c4];)"));
        assert_eq!(parse_ggf(&text), Ok(vec![g]));
    }

    const START: &str = START_BO;

    fn game(moves: &str) -> String {
        format!(
            "(;GM[Othello]PC[GGS/os]DT[2003.12.15_13:24:03.MET]PB[alice]PW[bob]RB[2000]RW[2001]TI[05:00//02:00]TY[8]RE[+2.000]BO[{START}]{moves};)"
        )
    }

    #[test]
    fn reads_standard_games() {
        let text = format!(
            "{}\n{}\n",
            game("B[f5//0.01]W[d6/-1.50/2.3]B[C3]"),
            game("")
        );
        let games = parse_ggf(&text).expect("valid");
        assert_eq!(games.len(), 2);
        assert_eq!(games[0].black.as_deref(), Some("alice"));
        assert_eq!(games[0].result.as_deref(), Some("+2.000"));
        assert_eq!(games[0].game.to_transcript(), "f5d6c3");
        assert!(games[1].game.moves.is_empty());
        assert_eq!(parse_ggf(""), Ok(vec![]));
    }

    #[test]
    fn rejects_variants_and_bad_games() {
        let unsupported = |t: &str| {
            matches!(
                parse_ggf(t),
                Err(GgfError {
                    kind: GgfErrorKind::Unsupported(_),
                    ..
                })
            )
        };
        assert!(unsupported(&game("").replace("TY[8]", "TY[8r]")));
        assert!(unsupported(&game("").replace("TY[8]", "TY[s8]")));
        assert!(unsupported(&game("").replace("---O*---", "---**---")));
        assert!(unsupported(&game("").replace("-------- *]", "-------- O]")));
        assert!(unsupported(&game("").replace("BO[8 ", "BO[10 ")));
        assert!(unsupported(&game("").replace("GM[Othello]", "GM[Chess]")));
        assert!(matches!(
            parse_ggf(&game("B[f5]B[d6]")),
            Err(GgfError {
                kind: GgfErrorKind::Game(GameError::WrongColour { .. }),
                ..
            })
        ));
        assert!(matches!(
            parse_ggf(&game("B[a1]")),
            Err(GgfError {
                kind: GgfErrorKind::Game(GameError::Illegal { .. }),
                ..
            })
        ));
        assert!(matches!(
            parse_ggf(&game("B[zz]")),
            Err(GgfError {
                kind: GgfErrorKind::BadMove(_),
                ..
            })
        ));
        let g = game("B[f5]");
        assert!(matches!(
            parse_ggf(&g[..g.len() - 2]),
            Err(GgfError {
                kind: GgfErrorKind::Syntax(_),
                ..
            })
        ));
        assert!(parse_ggf("(;GM[Othello]B[f5;)").is_err());
        assert!(parse_ggf("(;gm[x];)").is_err());
    }
}
