//! The FFO WTHOR database: `.wtb` game files and the `.JOU`/`.TRN` name lists.
//!
//! Layout (little-endian; see `../shared/data/README.md` §1): a 16-byte header (creation date,
//! number of games N1 at offset 4, N2 at offset 8, the games' year at offset 10, board size P1 at
//! 12, game type P2 at 13, theoretical-score depth P3 at 14), then N1 records of 68 bytes:
//! tournament id, black and white player ids (u16 each), the real score and the theoretical
//! score (Black's discs, empties to the winner), and 60 move bytes `10 * row + col` (1-based,
//! 11 = a1, 88 = h8; 0 ends the game). Passes are not stored; the reader infers them.

use super::{Game, GameError, Replayer};
use crate::square::{Move, Square};

/// Header length.
pub const HEADER_LEN: usize = 16;
/// Game record length.
pub const RECORD_LEN: usize = 68;
/// Length of a player name record in `WTHOR.JOU`.
pub const PLAYER_NAME_LEN: usize = 20;
/// Length of a tournament name record in `WTHOR.TRN`.
pub const TOURNAMENT_NAME_LEN: usize = 26;

/// The 16-byte file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WthorHeader {
    /// Creation century (e.g. 20).
    pub century: u8,
    /// Creation year within the century.
    pub year_in_century: u8,
    /// Creation month.
    pub month: u8,
    /// Creation day.
    pub day: u8,
    /// N1: number of game records.
    pub n_games: u32,
    /// N2: number of name records (`.JOU`/`.TRN`; 0 in `.wtb`).
    pub n_records: u16,
    /// Year of the games.
    pub games_year: u16,
    /// P1: board size (0 or 8 for 8×8).
    pub board_size: u8,
    /// P2: game type (0 = normal).
    pub game_type: u8,
    /// P3: depth (empties) from which the theoretical score is computed.
    pub depth: u8,
    /// Reserved byte.
    pub reserved: u8,
}

impl WthorHeader {
    /// Decode the first 16 bytes.
    pub fn parse(bytes: &[u8]) -> Result<WthorHeader, WthorError> {
        let h: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(WthorError::ShortHeader(bytes.len()))?;
        Ok(WthorHeader {
            century: h[0],
            year_in_century: h[1],
            month: h[2],
            day: h[3],
            n_games: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
            n_records: u16::from_le_bytes([h[8], h[9]]),
            games_year: u16::from_le_bytes([h[10], h[11]]),
            board_size: h[12],
            game_type: h[13],
            depth: h[14],
            reserved: h[15],
        })
    }

    /// Encode as 16 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = self.century;
        h[1] = self.year_in_century;
        h[2] = self.month;
        h[3] = self.day;
        h[4..8].copy_from_slice(&self.n_games.to_le_bytes());
        h[8..10].copy_from_slice(&self.n_records.to_le_bytes());
        h[10..12].copy_from_slice(&self.games_year.to_le_bytes());
        h[12] = self.board_size;
        h[13] = self.game_type;
        h[14] = self.depth;
        h[15] = self.reserved;
        h
    }
}

/// One game record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WthorGame {
    /// Tournament id (index into `WTHOR.TRN`).
    pub tournament: u16,
    /// Black player id (index into `WTHOR.JOU`).
    pub black_player: u16,
    /// White player id.
    pub white_player: u16,
    /// Black's discs at the end as recorded (empties to the winner); may disagree with the moves
    /// for games lost on time or adjudicated.
    pub black_score: u8,
    /// Black's discs under perfect play from the header's depth.
    pub theoretical_black_score: u8,
    /// The replayed moves (passes inserted).
    pub game: Game,
}

/// A `.wtb`, `.JOU` or `.TRN` file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WthorError {
    /// Fewer than 16 bytes.
    #[error("file has {0} bytes, shorter than the 16-byte header")]
    ShortHeader(usize),
    /// The size is not header + count × record length.
    #[error("file has {len} bytes but the header announces {count} records of {record} bytes")]
    SizeMismatch {
        /// File length.
        len: usize,
        /// Records announced.
        count: u64,
        /// Record length.
        record: usize,
    },
    /// A board size other than 8×8.
    #[error("unsupported board size {0} (only 8x8)")]
    BoardSize(u8),
    /// A move byte that is no square code.
    #[error("game {game}: bad move code {code} at byte {index} of the move list")]
    BadMoveCode {
        /// 0-based game index.
        game: usize,
        /// 0-based move byte index.
        index: usize,
        /// The byte.
        code: u8,
    },
    /// A non-zero move byte after the terminating 0.
    #[error("game {game}: move code {code} after the end marker at byte {index}")]
    MoveAfterEnd {
        /// 0-based game index.
        game: usize,
        /// 0-based move byte index.
        index: usize,
        /// The byte.
        code: u8,
    },
    /// A score byte above 64.
    #[error("game {game}: score byte {score} above 64")]
    BadScore {
        /// 0-based game index.
        game: usize,
        /// The byte.
        score: u8,
    },
    /// An illegal move.
    #[error("game {game}: {source}")]
    Illegal {
        /// 0-based game index.
        game: usize,
        /// The replay error.
        source: GameError,
    },
}

/// Decode a WTHOR move byte (`10 * row + col`, 1-based) into a square.
pub fn decode_move(code: u8) -> Option<Square> {
    let (r, c) = (code / 10, code % 10);
    if (1..=8).contains(&r) && (1..=8).contains(&c) {
        Square::new((r - 1) * 8 + (c - 1))
    } else {
        None
    }
}

/// Encode a square as a WTHOR move byte.
pub const fn encode_move(sq: Square) -> u8 {
    (sq.rank() + 1) * 10 + sq.file() + 1
}

/// Check that `bytes` is exactly the header plus `count` records of `record` bytes.
fn record_count(bytes: &[u8], count: u64, record: usize) -> Result<usize, WthorError> {
    let expected = (count as u128) * (record as u128) + HEADER_LEN as u128;
    if expected != bytes.len() as u128 {
        return Err(WthorError::SizeMismatch {
            len: bytes.len(),
            count,
            record,
        });
    }
    Ok(count as usize)
}

/// Decode one 68-byte record (`game` is its index, for errors).
pub fn parse_record(rec: &[u8; RECORD_LEN], game: usize) -> Result<WthorGame, WthorError> {
    let u16_at = |i: usize| u16::from_le_bytes([rec[i], rec[i + 1]]);
    for score in [rec[6], rec[7]] {
        if score > 64 {
            return Err(WthorError::BadScore { game, score });
        }
    }
    let mut r = Replayer::new();
    let mut ended = false;
    for (index, &code) in rec[8..].iter().enumerate() {
        if code == 0 {
            ended = true;
            continue;
        }
        if ended {
            return Err(WthorError::MoveAfterEnd { game, index, code });
        }
        let sq = decode_move(code).ok_or(WthorError::BadMoveCode { game, index, code })?;
        r.play(Move::Square(sq), None)
            .map_err(|source| WthorError::Illegal { game, source })?;
    }
    Ok(WthorGame {
        tournament: u16_at(0),
        black_player: u16_at(2),
        white_player: u16_at(4),
        black_score: rec[6],
        theoretical_black_score: rec[7],
        game: r.finish(),
    })
}

/// Read a `.wtb` file: the header and every game, replayed. Rejects a size that disagrees with
/// the header, 10×10 boards, bad move codes, scores above 64 and illegal moves.
pub fn read_wtb(bytes: &[u8]) -> Result<(WthorHeader, Vec<WthorGame>), WthorError> {
    let header = WthorHeader::parse(bytes)?;
    if header.board_size != 0 && header.board_size != 8 {
        return Err(WthorError::BoardSize(header.board_size));
    }
    let n = record_count(bytes, u64::from(header.n_games), RECORD_LEN)?;
    let mut games = Vec::with_capacity(n);
    for (g, rec) in bytes[HEADER_LEN..].chunks_exact(RECORD_LEN).enumerate() {
        let rec: &[u8; RECORD_LEN] = rec
            .try_into()
            .expect("chunks_exact yields RECORD_LEN bytes");
        games.push(parse_record(rec, g)?);
    }
    Ok((header, games))
}

/// Write a `.wtb` file (the header's game count is set from `games`). Passes are dropped, as the
/// format stores none; games longer than 60 squares cannot exist.
pub fn write_wtb(header: &WthorHeader, games: &[WthorGame]) -> Vec<u8> {
    let mut h = *header;
    h.n_games = games.len() as u32;
    let mut out = Vec::with_capacity(HEADER_LEN + RECORD_LEN * games.len());
    out.extend_from_slice(&h.to_bytes());
    for g in games {
        let mut rec = [0u8; RECORD_LEN];
        rec[0..2].copy_from_slice(&g.tournament.to_le_bytes());
        rec[2..4].copy_from_slice(&g.black_player.to_le_bytes());
        rec[4..6].copy_from_slice(&g.white_player.to_le_bytes());
        rec[6] = g.black_score;
        rec[7] = g.theoretical_black_score;
        let squares = g.game.moves.iter().filter_map(|m| match m {
            Move::Square(s) => Some(encode_move(*s)),
            _ => None,
        });
        for (slot, code) in rec[8..].iter_mut().zip(squares) {
            *slot = code;
        }
        out.extend_from_slice(&rec);
    }
    out
}

/// Read a `WTHOR.JOU` (`width` = [`PLAYER_NAME_LEN`]) or `WTHOR.TRN` ([`TOURNAMENT_NAME_LEN`])
/// name list: N2 Latin-1 names, NUL-padded.
pub fn read_names(bytes: &[u8], width: usize) -> Result<Vec<String>, WthorError> {
    let header = WthorHeader::parse(bytes)?;
    let width = width.max(1);
    record_count(bytes, u64::from(header.n_records), width)?;
    Ok(bytes[HEADER_LEN..]
        .chunks_exact(width)
        .map(|r| {
            let end = r.iter().position(|&b| b == 0).unwrap_or(r.len());
            // Latin-1: every byte is the code point of the same value.
            r[..end]
                .iter()
                .map(|&b| char::from(b))
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::transcript::parse_transcript;

    #[test]
    fn move_codes() {
        for s in Square::all() {
            assert_eq!(decode_move(encode_move(s)), Some(s));
        }
        assert_eq!(decode_move(11).map(|s| s.to_string()), Some("a1".into()));
        assert_eq!(decode_move(88).map(|s| s.to_string()), Some("h8".into()));
        for bad in [0, 9, 10, 19, 20, 89, 90, 255] {
            assert_eq!(decode_move(bad), None, "{bad}");
        }
    }

    fn sample() -> (WthorHeader, Vec<WthorGame>) {
        let header = WthorHeader {
            century: 20,
            year_in_century: 26,
            n_games: 0,
            games_year: 2026,
            depth: 22,
            ..WthorHeader::default()
        };
        let game = WthorGame {
            tournament: 3,
            black_player: 7,
            white_player: 9,
            black_score: 33,
            theoretical_black_score: 32,
            game: parse_transcript("f5d6c3d3c4").expect("legal"),
        };
        (header, vec![game.clone(), game])
    }

    #[test]
    fn write_read_round_trip_and_errors() {
        let (h, games) = sample();
        let bytes = write_wtb(&h, &games);
        assert_eq!(bytes.len(), HEADER_LEN + 2 * RECORD_LEN);
        let (h2, g2) = read_wtb(&bytes).expect("valid");
        assert_eq!(h2.n_games, 2);
        assert_eq!(g2, games);
        // Truncated file, bad size, bad board size, bad code, illegal move, move after end.
        assert!(matches!(
            read_wtb(&bytes[..10]),
            Err(WthorError::ShortHeader(10))
        ));
        assert!(matches!(
            read_wtb(&bytes[..bytes.len() - 1]),
            Err(WthorError::SizeMismatch { .. })
        ));
        let mut b = bytes.clone();
        b[12] = 10;
        assert_eq!(read_wtb(&b), Err(WthorError::BoardSize(10)));
        let mut b = bytes.clone();
        b[HEADER_LEN + 8] = 99;
        assert!(matches!(
            read_wtb(&b),
            Err(WthorError::BadMoveCode {
                game: 0,
                index: 0,
                code: 99
            })
        ));
        let mut b = bytes.clone();
        b[HEADER_LEN + RECORD_LEN + 8] = 11; // a1 as Black's first move
        assert!(matches!(
            read_wtb(&b),
            Err(WthorError::Illegal { game: 1, .. })
        ));
        let mut b = bytes.clone();
        b[HEADER_LEN + 8 + 10] = 11;
        assert!(matches!(
            read_wtb(&b),
            Err(WthorError::MoveAfterEnd { index: 10, .. })
        ));
        let mut b = bytes;
        b[HEADER_LEN + 6] = 65;
        assert!(matches!(
            read_wtb(&b),
            Err(WthorError::BadScore { score: 65, .. })
        ));
    }

    #[test]
    fn names() {
        let mut bytes = WthorHeader {
            n_records: 2,
            ..WthorHeader::default()
        }
        .to_bytes()
        .to_vec();
        let mut a = [0u8; PLAYER_NAME_LEN];
        a[..5].copy_from_slice(b"Tamen");
        let mut b = [0u8; PLAYER_NAME_LEN];
        b[..4].copy_from_slice(&[b'L', 0xe9, b'o', b'n']);
        bytes.extend_from_slice(&a);
        bytes.extend_from_slice(&b);
        assert_eq!(
            read_names(&bytes, PLAYER_NAME_LEN),
            Ok(vec!["Tamen".into(), "Léon".into()])
        );
        assert!(read_names(&bytes[..bytes.len() - 1], PLAYER_NAME_LEN).is_err());
    }
}
