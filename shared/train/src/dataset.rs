//! Labelled, de-duplicated training and test positions built from game records.
//!
//! Label policy (documented and measured in docs/training.md):
//! * every position of a game is labelled with the game's final disc difference (black − white,
//!   empties to the winner, taken from the replayed final board, or from the file when the game
//!   stops early with a stored score), turned to the side to move's view;
//! * WTHOR positions with ≥ 24 empties use the stored *theoretical* score instead (perfect play from
//!   the game's 24-empties position), which removes human endgame errors; the 24-empties position
//!   itself is therefore labelled **exactly** ([`LabelKind::Exact`]);
//! * optionally ([`Split::human_min_empties`], default 24 in the CLI) late positions of human games
//!   are not used for training at all: their game results are far from the exact values;
//! * positions are keyed by their canonical form; duplicates are merged into one sample whose label
//!   is the mean of their labels (exact labels win over game-derived ones);
//! * games of the held-out WTHOR years never enter the training set; test positions that also occur
//!   in a training game are dropped from the test set.
//!
//! Samples are cached as fixed 24-byte little-endian records (see [`write_samples`]).

use crate::games::{Game, Source, replay};
use bookfarm_engine::Board;
use bookfarm_engine::symmetry::canonical;
use rayon::prelude::*;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// How a sample's label was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LabelKind {
    /// Mean final result of the games through the position.
    GameResult = 0,
    /// WTHOR theoretical score (perfect play from the game's 24-empties position).
    Theoretical = 1,
    /// Exact minimax value (solver, or the WTHOR theoretical score at exactly 24 empties).
    Exact = 2,
    /// Score of a fixed-depth search of the engine (see [`crate::label`]).
    Search = 3,
}

impl LabelKind {
    fn from_u8(x: u8) -> Option<LabelKind> {
        match x {
            0 => Some(LabelKind::GameResult),
            1 => Some(LabelKind::Theoretical),
            2 => Some(LabelKind::Exact),
            3 => Some(LabelKind::Search),
            _ => None,
        }
    }
}

/// One labelled position (canonical form, side to move's view).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Canonical board.
    pub board: Board,
    /// Label in discs for the side to move.
    pub label: f32,
    /// Number of game occurrences merged into this sample.
    pub count: u16,
    /// Label provenance.
    pub kind: LabelKind,
}

/// Which games are held out for testing, and which training positions are kept.
#[derive(Debug, Clone, Copy)]
pub struct Split {
    /// WTHOR games of this year or later form the test set.
    pub test_from_year: u16,
    /// Training positions of human games (WTHOR, eOthello) with fewer empties are dropped, because
    /// human endgame errors make their game-result labels noisy (measured: MAE ≈ 10 discs against
    /// exact scores at 14–20 empties). 0 keeps everything. Test positions are never dropped.
    pub human_min_empties: u32,
}

impl Split {
    fn is_test(&self, g: &Game) -> bool {
        g.source == Source::Wthor && g.year.is_some_and(|y| y >= self.test_from_year)
    }
}

/// Statistics of a dataset build.
#[derive(Debug, Default, Clone)]
pub struct BuildStats {
    /// Games read.
    pub games: usize,
    /// Games skipped: illegal replay.
    pub illegal: usize,
    /// Games skipped: no usable final result (incomplete without a stored disc difference).
    pub unlabelled: usize,
    /// Positions before de-duplication (train, test).
    pub raw_positions: (usize, usize),
    /// Unique samples (train, test).
    pub unique: (usize, usize),
    /// Test samples dropped because the position also occurs in a training game.
    pub test_overlap_dropped: usize,
}

/// A position occurrence before merging: key, label (discs, side to move), kind.
#[derive(Clone, Copy)]
struct Occ {
    player: u64,
    opponent: u64,
    label: i8,
    kind: LabelKind,
}

fn occurrences(g: &Game, min_empties: u32) -> Result<Vec<Occ>, bool> {
    let Ok(r) = replay(&g.game) else {
        return Err(true);
    };
    let Some(final_black) = r.final_black_diff().or(g.stored_black_diff) else {
        return Err(false);
    };
    // The theoretical score is only meaningful when the game reached 24 empties.
    let theo = g.theoretical_black_diff.filter(|_| g.square_moves() >= 36);
    let mut out = Vec::with_capacity(r.positions.len());
    for &(b, black) in &r.positions {
        let e = b.empties();
        if e < min_empties {
            continue;
        }
        let (black_label, kind) = match theo {
            Some(t) if e == 24 => (t, LabelKind::Exact),
            Some(t) if e > 24 => (t, LabelKind::Theoretical),
            _ => (final_black, LabelKind::GameResult),
        };
        let label = if black { black_label } else { -black_label };
        let (c, _) = canonical(&b);
        out.push(Occ {
            player: c.player,
            opponent: c.opponent,
            label: label.clamp(-64, 64) as i8,
            kind,
        });
    }
    Ok(out)
}

/// Merge sorted occurrences into samples: exact labels win, otherwise the best kind present wins,
/// and the label is the mean over the occurrences of that kind.
fn merge(mut occ: Vec<Occ>) -> Vec<Sample> {
    occ.par_sort_unstable_by_key(|o| (o.player, o.opponent, std::cmp::Reverse(o.kind)));
    let mut out = Vec::new();
    let mut i = 0;
    while i < occ.len() {
        let mut j = i;
        let (p, o, best) = (occ[i].player, occ[i].opponent, occ[i].kind);
        let mut sum = 0i64;
        let mut n = 0i64;
        let mut total = 0usize;
        while j < occ.len() && occ[j].player == p && occ[j].opponent == o {
            if occ[j].kind == best {
                sum += i64::from(occ[j].label);
                n += 1;
            }
            total += 1;
            j += 1;
        }
        out.push(Sample {
            board: Board {
                player: p,
                opponent: o,
            },
            label: sum as f32 / n as f32,
            count: total.min(u16::MAX as usize) as u16,
            kind: best,
        });
        i = j;
    }
    out
}

/// Build the (train, test) samples from `games`.
pub fn build(games: &[Game], split: Split) -> (Vec<Sample>, Vec<Sample>, BuildStats) {
    let mut stats = BuildStats {
        games: games.len(),
        ..BuildStats::default()
    };
    let results: Vec<(bool, Result<Vec<Occ>, bool>)> = games
        .par_iter()
        .map(|g| {
            let test = split.is_test(g);
            let human = matches!(g.source, Source::Wthor | Source::Eothello);
            let min_empties = if human && !test {
                split.human_min_empties
            } else {
                0
            };
            (test, occurrences(g, min_empties))
        })
        .collect();
    let mut train = Vec::new();
    let mut test = Vec::new();
    for (is_test, r) in results {
        match r {
            Ok(v) if is_test => test.extend(v),
            Ok(v) => train.extend(v),
            Err(true) => stats.illegal += 1,
            Err(false) => stats.unlabelled += 1,
        }
    }
    stats.raw_positions = (train.len(), test.len());
    let train = merge(train);
    let test_all = merge(test);
    let before = test_all.len();
    let test: Vec<Sample> = test_all
        .into_iter()
        .filter(|s| {
            train
                .binary_search_by_key(&(s.board.player, s.board.opponent), |t| {
                    (t.board.player, t.board.opponent)
                })
                .is_err()
        })
        .collect();
    stats.test_overlap_dropped = before - test.len();
    stats.unique = (train.len(), test.len());
    (train, test, stats)
}

/// File magic of a sample cache.
const MAGIC: &[u8; 8] = b"BFSAMP01";
/// Size of one record on disk.
pub const RECORD_BYTES: usize = 24;

/// Errors reading a sample cache.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// IO failure.
    #[error("dataset io error: {0}")]
    Io(#[from] std::io::Error),
    /// Not a sample cache or a corrupt one.
    #[error("bad sample file: {0}")]
    Format(String),
}

/// Write samples: magic, u64 count, then per sample player u64, opponent u64, label f32, count u16,
/// kind u8, one zero byte (all little-endian).
pub fn write_samples(path: &Path, samples: &[Sample]) -> Result<(), DatasetError> {
    let mut w = BufWriter::new(std::fs::File::create(path)?);
    w.write_all(MAGIC)?;
    w.write_all(&(samples.len() as u64).to_le_bytes())?;
    for s in samples {
        let mut rec = [0u8; RECORD_BYTES];
        rec[0..8].copy_from_slice(&s.board.player.to_le_bytes());
        rec[8..16].copy_from_slice(&s.board.opponent.to_le_bytes());
        rec[16..20].copy_from_slice(&s.label.to_le_bytes());
        rec[20..22].copy_from_slice(&s.count.to_le_bytes());
        rec[22] = s.kind as u8;
        w.write_all(&rec)?;
    }
    w.flush()?;
    Ok(())
}

/// Read a sample cache written by [`write_samples`], or the labels of a committed label set
/// directory or part file ([`crate::labels`]), so every command takes either.
pub fn read_samples(path: &Path) -> Result<Vec<Sample>, DatasetError> {
    if crate::labels::is_label_path(path) {
        return crate::labels::read_samples(path).map_err(|e| DatasetError::Format(e.to_string()));
    }
    let mut r = BufReader::new(std::fs::File::open(path)?);
    let mut head = [0u8; 16];
    r.read_exact(&mut head)?;
    if &head[0..8] != MAGIC {
        return Err(DatasetError::Format(format!(
            "{}: bad magic",
            path.display()
        )));
    }
    let n = u64::from_le_bytes(head[8..16].try_into().expect("8-byte slice"));
    let len = std::fs::metadata(path)?.len();
    if len != 16 + n * RECORD_BYTES as u64 {
        return Err(DatasetError::Format(format!(
            "{}: {n} records announced, {len} bytes",
            path.display()
        )));
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut rec = [0u8; RECORD_BYTES];
    for _ in 0..n {
        r.read_exact(&mut rec)?;
        let player = u64::from_le_bytes(rec[0..8].try_into().expect("8-byte slice"));
        let opponent = u64::from_le_bytes(rec[8..16].try_into().expect("8-byte slice"));
        let board =
            Board::new(player, opponent).map_err(|e| DatasetError::Format(e.to_string()))?;
        let label = f32::from_le_bytes(rec[16..20].try_into().expect("4-byte slice"));
        if !label.is_finite() || label.abs() > 64.0 {
            return Err(DatasetError::Format(format!("label {label} out of range")));
        }
        let count = u16::from_le_bytes([rec[20], rec[21]]);
        let kind = LabelKind::from_u8(rec[22])
            .ok_or_else(|| DatasetError::Format(format!("bad kind {}", rec[22])))?;
        out.push(Sample {
            board,
            label,
            count,
            kind,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::formats::transcript::parse_transcript;

    fn game(moves: &str, year: u16, diff: i32, theo: i32) -> Game {
        Game {
            source: Source::Wthor,
            year: Some(year),
            game: parse_transcript(moves).expect("legal transcript"),
            stored_black_diff: Some(diff),
            theoretical_black_diff: Some(theo),
        }
    }

    #[test]
    fn duplicates_merge_by_canonical_form_and_test_overlap_is_dropped() {
        // f5 and its symmetric d3 reach equivalent positions; both games are incomplete so the stored
        // score is used, and they are shorter than 36 moves so the theoretical score is not.
        let games = vec![
            game("f5d6", 2000, 10, 0),
            game("d3c5", 2001, -20, 0),
            game("f5f6", 2020, 4, 0),
        ];
        let (train, test, st) = build(
            &games,
            Split {
                test_from_year: 2015,
                human_min_empties: 0,
            },
        );
        assert_eq!(st.raw_positions, (4, 2));
        // start, after f5 (== after d3): 2 unique training positions.
        assert_eq!(train.len(), 2);
        let start = canonical(&Board::start()).0;
        let s = train
            .iter()
            .find(|s| s.board == start)
            .expect("start position");
        assert_eq!(s.count, 2);
        assert!(
            (s.label - (-5.0)).abs() < 1e-6,
            "mean of +10 and −20 for black = −5, got {}",
            s.label
        );
        let after = train.iter().find(|s| s.board != start).expect("after f5");
        assert!(
            (after.label - 5.0).abs() < 1e-6,
            "white to move: mean of −10 and +20"
        );
        // The test game's two positions both occur in training games.
        assert_eq!(test.len(), 0);
        assert_eq!(st.test_overlap_dropped, 2);
    }

    #[test]
    fn late_human_positions_can_be_dropped_from_training_only() {
        let games = vec![game("f5d6c3", 2000, 10, 0), game("f5f6e6", 2020, 4, 0)];
        let (train, test, _) = build(
            &games,
            Split {
                test_from_year: 2015,
                human_min_empties: 59,
            },
        );
        // Training keeps the positions with 60 and 59 empties only; the test game keeps all three.
        assert_eq!(train.len(), 2);
        assert!(train.iter().all(|s| s.board.empties() >= 59));
        assert_eq!(test.len(), 1, "only the 58-empties test position is new");
    }

    #[test]
    fn sample_file_roundtrip_and_corruption() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("s.bin");
        let samples = vec![
            Sample {
                board: Board::start(),
                label: -3.5,
                count: 7,
                kind: LabelKind::GameResult,
            },
            Sample {
                board: Board::start().pass(),
                label: 12.0,
                count: 1,
                kind: LabelKind::Exact,
            },
        ];
        write_samples(&p, &samples).expect("write");
        assert_eq!(read_samples(&p).expect("read"), samples);
        let mut bytes = std::fs::read(&p).expect("read bytes");
        bytes.pop();
        std::fs::write(&p, &bytes).expect("write");
        assert!(read_samples(&p).is_err());
    }
}
