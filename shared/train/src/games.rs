//! Game-record readers for the training sets in `../shared/data` and game replay.
//!
//! These are small, self-contained readers for the formats described in `data/README.md`
//! (WTHOR `.wtb`, Logistello `.gam(.gz)`, Egaroucid transcripts with a label, eOthello CSV).
//! Passes are never stored in these formats: [`replay`] infers them (a move that is illegal for a
//! side without legal moves is a pass).

use bookfarm_engine::{Board, Square};
use flate2::read::GzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where a game comes from (the populations are kept apart for validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// FFO WTHOR tournament games (human).
    Wthor,
    /// Logistello book/self-play games.
    Logistello,
    /// Egaroucid self-play games.
    Egaroucid,
    /// eOthello online games (human).
    Eothello,
}

/// One game record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Game {
    /// Origin of the game.
    pub source: Source,
    /// Year of the games file (WTHOR only).
    pub year: Option<u16>,
    /// Moves in order, passes omitted.
    pub moves: Vec<Square>,
    /// Final disc difference black − white stored in the file, when the file stores one.
    pub stored_black_diff: Option<i32>,
    /// WTHOR theoretical score: black − white under perfect play from the 24-empties position.
    pub theoretical_black_diff: Option<i32>,
}

/// Errors reading game files.
#[derive(Debug, thiserror::Error)]
pub enum GamesError {
    /// IO error on a file.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A malformed record.
    #[error("{path}: record {record}: {msg}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Record number (0-based).
        record: usize,
        /// What is wrong.
        msg: String,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, GamesError> {
    std::fs::read(path).map_err(|source| GamesError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn fmt_err(path: &Path, record: usize, msg: impl Into<String>) -> GamesError {
    GamesError::Format {
        path: path.to_path_buf(),
        record,
        msg: msg.into(),
    }
}

/// Parse a WTHOR `.wtb` image (16-byte header, 68-byte records, moves `10·row + col`, 1-based).
pub fn parse_wthor(bytes: &[u8], path: &Path) -> Result<Vec<Game>, GamesError> {
    if bytes.len() < 16 {
        return Err(fmt_err(path, 0, "file shorter than the 16-byte header"));
    }
    let n = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    let year = u16::from_le_bytes([bytes[10], bytes[11]]);
    if bytes.len() < 16 + 68 * n {
        return Err(fmt_err(
            path,
            n,
            format!(
                "header announces {n} games but the file holds {} bytes",
                bytes.len()
            ),
        ));
    }
    let mut games = Vec::with_capacity(n);
    for g in 0..n {
        let r = &bytes[16 + 68 * g..16 + 68 * (g + 1)];
        let mut moves = Vec::with_capacity(60);
        for &m in &r[8..68] {
            if m == 0 {
                break;
            }
            let (row, col) = (m / 10, m % 10);
            if !(1..=8).contains(&row) || !(1..=8).contains(&col) {
                return Err(fmt_err(path, g, format!("bad move byte {m}")));
            }
            moves.push(Square::new((row - 1) * 8 + col - 1).expect("row and col are 1..=8"));
        }
        let real = i32::from(r[6]);
        let theo = i32::from(r[7]);
        games.push(Game {
            source: Source::Wthor,
            year: Some(year),
            moves,
            stored_black_diff: (real <= 64).then_some(2 * real - 64),
            theoretical_black_diff: (theo <= 64).then_some(2 * theo - 64),
        });
    }
    Ok(games)
}

/// Parse a run of 2-character squares (`f5d6c3…`).
fn parse_squares(s: &str) -> Option<Vec<Square>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|t| Square::parse(t).ok())
        })
        .collect()
}

/// Parse a Logistello `.gam` text: `+d3-c3…: -04 10` (the score is the raw black − white count).
pub fn parse_logistello(text: &str, path: &Path) -> Result<Vec<Game>, GamesError> {
    let mut games = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (mv, rest) = line
            .split_once(':')
            .ok_or_else(|| fmt_err(path, i, "missing ':'"))?;
        let cleaned: String = mv.chars().filter(|c| *c != '+' && *c != '-').collect();
        let moves = parse_squares(&cleaned).ok_or_else(|| fmt_err(path, i, "bad move text"))?;
        let score = rest
            .split_whitespace()
            .next()
            .and_then(|t| t.parse::<i32>().ok());
        games.push(Game {
            source: Source::Logistello,
            year: None,
            moves,
            stored_black_diff: score,
            theoretical_black_diff: None,
        });
    }
    Ok(games)
}

/// Parse an Egaroucid transcript file: `<moves> <label>` per line. `label_is_diff` tells whether the
/// label is a disc difference (scored files) or only 1/0/−1 (the early self-play file).
pub fn parse_transcripts(
    text: &str,
    path: &Path,
    label_is_diff: bool,
) -> Result<Vec<Game>, GamesError> {
    let mut games = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let Some(mv) = it.next() else { continue };
        let moves = parse_squares(mv).ok_or_else(|| fmt_err(path, i, "bad move text"))?;
        let label = it.next().and_then(|t| t.parse::<i32>().ok());
        games.push(Game {
            source: Source::Egaroucid,
            year: None,
            moves,
            stored_black_diff: if label_is_diff { label } else { None },
            theoretical_black_diff: None,
        });
    }
    Ok(games)
}

/// Parse the eOthello CSV (`Othello_game_id,winner,game_moves`).
pub fn parse_eothello(text: &str, path: &Path) -> Result<Vec<Game>, GamesError> {
    let mut games = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.trim().split(',').collect();
        if fields.len() < 3 {
            continue;
        }
        let moves = parse_squares(fields[2]).ok_or_else(|| fmt_err(path, i, "bad move text"))?;
        games.push(Game {
            source: Source::Eothello,
            year: None,
            moves,
            stored_black_diff: None,
            theoretical_black_diff: None,
        });
    }
    Ok(games)
}

/// Read every game set under a `data/` directory (the layout of `../shared/data`).
pub fn read_all(data: &Path) -> Result<Vec<Game>, GamesError> {
    let mut games = Vec::new();
    let wthor = data.join("wthor");
    let mut wtb: Vec<PathBuf> = std::fs::read_dir(&wthor)
        .map_err(|source| GamesError::Io {
            path: wthor.clone(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("wtb")))
        .collect();
    wtb.sort();
    for p in &wtb {
        games.extend(parse_wthor(&read(p)?, p)?);
    }
    let log = data.join("logistello/logbook.gam.gz");
    let mut text = String::new();
    GzDecoder::new(read(&log)?.as_slice())
        .read_to_string(&mut text)
        .map_err(|source| GamesError::Io {
            path: log.clone(),
            source,
        })?;
    games.extend(parse_logistello(&text, &log)?);
    for (name, is_diff) in [
        ("egaroucid3_selfplay_scored.txt", true),
        ("egaroucid4_egaroucen_selfplay_scored.txt", true),
        ("egaroucid_early_selfplay_results.txt", false),
    ] {
        let p = data.join("egaroucid").join(name);
        let text = String::from_utf8_lossy(&read(&p)?).into_owned();
        games.extend(parse_transcripts(&text, &p, is_diff)?);
    }
    let p = data.join("eothello/othello_dataset.csv");
    let text = String::from_utf8_lossy(&read(&p)?).into_owned();
    games.extend(parse_eothello(&text, &p)?);
    Ok(games)
}

/// A replayed game: the position before every move (side to move's view) and who was to move.
#[derive(Debug, Clone)]
pub struct Replay {
    /// `(board before the move, black to move)` for every stored move.
    pub positions: Vec<(Board, bool)>,
    /// The position after the last move.
    pub last: Board,
    /// Whether black is to move in `last`.
    pub last_black: bool,
}

impl Replay {
    /// Final disc difference black − white (empties to the winner) when the game reached its end.
    pub fn final_black_diff(&self) -> Option<i32> {
        if !self.last.is_game_over() {
            return None;
        }
        let s = self.last.final_score();
        Some(if self.last_black { s } else { -s })
    }
}

/// Replay a move list from the start position, inferring passes. `None` on an illegal move.
pub fn replay(moves: &[Square]) -> Option<Replay> {
    let mut b = Board::start();
    let mut black = true;
    let mut positions = Vec::with_capacity(moves.len());
    for &m in moves {
        if b.moves() & m.bit() == 0 {
            if b.moves() == 0 && b.pass().moves() & m.bit() != 0 {
                b = b.pass();
                black = !black;
            } else {
                return None;
            }
        }
        positions.push((b, black));
        b = b.play(m).ok()?;
        black = !black;
    }
    if b.moves() == 0 && b.pass().moves() != 0 {
        b = b.pass();
        black = !black;
    }
    Some(Replay {
        positions,
        last: b,
        last_black: black,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::testdata::shared_dir_or_skip;

    #[test]
    fn wthor_file_parses_and_replays() {
        let Some(shared) = shared_dir_or_skip() else {
            return;
        };
        let p = shared.join("data/wthor/WTH_2021.wtb");
        let games = parse_wthor(&std::fs::read(&p).expect("readable"), &p).expect("valid wthor");
        assert_eq!(games.len(), 320);
        let mut agree = 0;
        for g in &games {
            let r = replay(&g.moves).expect("legal game");
            if r.final_black_diff().is_some() && r.final_black_diff() == g.stored_black_diff {
                agree += 1;
            }
        }
        // data/README: the stored score matches the replay in 99.7% of all WTHOR games.
        assert!(
            agree >= 300,
            "only {agree} of 320 games agree with their stored score"
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let p = Path::new("x");
        assert!(parse_wthor(&[0u8; 10], p).is_err());
        let mut hdr = vec![0u8; 16];
        hdr[4] = 1;
        assert!(parse_wthor(&hdr, p).is_err());
        assert!(parse_logistello("+d3-c3 -04 10", p).is_err());
        assert!(parse_transcripts("f5d6z9 1", p, true).is_err());
        assert!(replay(&[Square::parse("a1").expect("valid")]).is_none());
    }

    #[test]
    fn logistello_pass_is_inferred() {
        let text = "+d3-c3+c4-e3+c2-b3+d2-e1+d1-c1+f4-d6+e6-g4+b2-f6+d7-c8+e7-d8+f3-f5+g5-h4+h6-f2+f7-h5+g6-c6+c5-c7+b6-b5+f8-a6+b4-a5+a4-e8+b8-h7+g8-b7+g2-g3+h2-a1+f1-e2+h3-a3+a8-a7+h8-g7+a2-b1-g1+h1: +00 10";
        let g = parse_logistello(text, Path::new("x")).expect("valid line");
        let r = replay(&g[0].moves).expect("legal game with a pass");
        assert!(r.last.is_game_over());
        assert_eq!(r.final_black_diff(), Some(0));
    }
}
