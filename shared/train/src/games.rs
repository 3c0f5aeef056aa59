//! The training game sets of `../shared/data`, read with the engine's readers
//! ([`bookfarm_engine::formats`]: WTHOR, Logistello, Egaroucid, eOthello), tagged with their
//! source and the labels each format stores.
//!
//! The engine's readers replay every game (inserting forced passes) and reject a file at its first
//! illegal game, so every [`Game`] here is legal.

use bookfarm_engine::formats::records::{
    RecordError, read_egaroucid, read_eothello, read_logistello,
};
use bookfarm_engine::formats::wthor::{WthorError, read_wtb};
use bookfarm_engine::formats::{self, GameError};
use bookfarm_engine::{Board, Move};
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

/// One game record with its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Game {
    /// Origin of the game.
    pub source: Source,
    /// Year of the games file (WTHOR only).
    pub year: Option<u16>,
    /// The replayed moves (passes explicit).
    pub game: formats::Game,
    /// Final disc difference black − white stored in the file, when the file stores one.
    pub stored_black_diff: Option<i32>,
    /// WTHOR theoretical score: black − white under perfect play from the 24-empties position.
    pub theoretical_black_diff: Option<i32>,
}

impl Game {
    /// Number of discs played (passes not counted).
    pub fn square_moves(&self) -> usize {
        self.game
            .moves
            .iter()
            .filter(|m| matches!(m, Move::Square(_)))
            .count()
    }
}

impl Game {
    /// A game of a source without year or theoretical score.
    fn without_year(source: Source, game: formats::Game, stored_black_diff: Option<i32>) -> Game {
        Game {
            source,
            year: None,
            game,
            stored_black_diff,
            theoretical_black_diff: None,
        }
    }
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
    /// A malformed or illegal WTHOR file.
    #[error("{path}: {source}")]
    Wthor {
        /// The file.
        path: PathBuf,
        /// The reader's error.
        source: WthorError,
    },
    /// A malformed or illegal line of a text game file.
    #[error("{path}: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The reader's error (with its line).
        source: RecordError,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, GamesError> {
    std::fs::read(path).map_err(|source| GamesError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn record_err(path: &Path) -> impl FnOnce(RecordError) -> GamesError + '_ {
    move |source| GamesError::Record {
        path: path.to_path_buf(),
        source,
    }
}

/// Black − white from a WTHOR score byte (Black's discs, empties to the winner).
fn wthor_diff(black_discs: u8) -> i32 {
    2 * i32::from(black_discs) - 64
}

/// Read a WTHOR `.wtb` image.
pub fn read_wthor(bytes: &[u8], path: &Path) -> Result<Vec<Game>, GamesError> {
    let (header, games) = read_wtb(bytes).map_err(|source| GamesError::Wthor {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(games
        .into_iter()
        .map(|g| Game {
            source: Source::Wthor,
            year: Some(header.games_year),
            game: g.game,
            stored_black_diff: Some(wthor_diff(g.black_score)),
            theoretical_black_diff: Some(wthor_diff(g.theoretical_black_score)),
        })
        .collect())
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
        games.extend(read_wthor(&read(p)?, p)?);
    }
    let log = data.join("logistello/logbook.gam.gz");
    let mut text = String::new();
    GzDecoder::new(read(&log)?.as_slice())
        .read_to_string(&mut text)
        .map_err(|source| GamesError::Io {
            path: log.clone(),
            source,
        })?;
    // Logistello's score is the raw black − white count (empties not credited).
    games.extend(
        read_logistello(&text)
            .map_err(record_err(&log))?
            .into_iter()
            .map(|g| Game::without_year(Source::Logistello, g.game, Some(g.label))),
    );
    // The early self-play file labels only the result (1/0/−1), not a disc difference.
    for (name, label_is_diff) in [
        ("egaroucid3_selfplay_scored.txt", true),
        ("egaroucid4_egaroucen_selfplay_scored.txt", true),
        ("egaroucid_early_selfplay_results.txt", false),
    ] {
        let p = data.join("egaroucid").join(name);
        let text = String::from_utf8_lossy(&read(&p)?).into_owned();
        games.extend(
            read_egaroucid(&text)
                .map_err(record_err(&p))?
                .into_iter()
                .map(|g| {
                    Game::without_year(Source::Egaroucid, g.game, label_is_diff.then_some(g.label))
                }),
        );
    }
    let p = data.join("eothello/othello_dataset.csv");
    let text = String::from_utf8_lossy(&read(&p)?).into_owned();
    games.extend(
        read_eothello(&text)
            .map_err(record_err(&p))?
            .into_iter()
            .map(|g| Game::without_year(Source::Eothello, g.game, None)),
    );
    Ok(games)
}

/// A replayed game: the position before every disc played and who was to move.
#[derive(Debug, Clone)]
pub struct Replay {
    /// `(board before the move, black to move)` for every square move (passes skipped).
    pub positions: Vec<(Board, bool)>,
    /// The final position.
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

/// Replay a game with the engine ([`formats::Game::replay`]) and keep the positions before each
/// square move.
pub fn replay(game: &formats::Game) -> Result<Replay, GameError> {
    let boards = game.replay()?;
    let positions = game
        .moves
        .iter()
        .zip(&boards)
        .enumerate()
        .filter(|(_, (m, _))| matches!(m, Move::Square(_)))
        .map(|(ply, (_, &b))| (b, ply.is_multiple_of(2)))
        .collect();
    let n = game.moves.len();
    Ok(Replay {
        positions,
        last: boards[n],
        last_black: n.is_multiple_of(2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::formats::records::parse_logistello_line;
    use bookfarm_engine::testdata::shared_dir_or_skip;

    #[test]
    fn wthor_file_reads_and_replays() {
        let Some(shared) = shared_dir_or_skip() else {
            return;
        };
        let p = shared.join("data/wthor/WTH_2021.wtb");
        let games = read_wthor(&std::fs::read(&p).expect("readable"), &p).expect("valid wthor");
        assert_eq!(games.len(), 320);
        assert!(games.iter().all(|g| g.year == Some(2021)));
        let mut agree = 0;
        for g in &games {
            let r = replay(&g.game).expect("legal game");
            assert_eq!(r.positions.len(), g.square_moves());
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
    fn bad_wthor_is_an_error_naming_the_file() {
        let err = read_wthor(&[0u8; 10], Path::new("x.wtb")).expect_err("short file");
        assert!(err.to_string().starts_with("x.wtb: "), "{err}");
    }

    #[test]
    fn replay_skips_passes_and_scores_the_end() {
        // Black passes between White's b1 and g1: 60 discs, 61 plies.
        let text = "+d3-c3+c4-e3+c2-b3+d2-e1+d1-c1+f4-d6+e6-g4+b2-f6+d7-c8+e7-d8+f3-f5+g5-h4+h6-f2+f7-h5+g6-c6+c5-c7+b6-b5+f8-a6+b4-a5+a4-e8+b8-h7+g8-b7+g2-g3+h2-a1+f1-e2+h3-a3+a8-a7+h8-g7+a2-b1-g1+h1: +00 10";
        let g = parse_logistello_line(text).expect("valid line").game;
        assert_eq!(g.moves.len(), 61);
        let r = replay(&g).expect("legal game with a pass");
        assert_eq!(r.positions.len(), 60);
        assert!(r.positions.iter().all(|(b, _)| b.moves() != 0));
        assert!(r.last.is_game_over());
        assert_eq!(r.final_black_diff(), Some(0));
    }
}
