//! The book model: links, positions and the book header, with Edax's sentinels (edax-spec §2–3).

use bookfarm_engine::symmetry::{canonical, transform_move};
use bookfarm_engine::{Board, Move};

/// Edax's "unknown" score (`SCORE_INF`): the score of an empty leaf and the initial value/lower.
pub const SCORE_INF: i16 = 127;

/// Highest level stored in a book position.
pub const MAX_LEVEL: u8 = 60;

/// A scored move: a link to a child position in the book, or a position's best non-link move (leaf).
///
/// Moves are expressed in the coordinates of the stored (canonical) board of the position that
/// holds the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Link {
    /// Score from the side to move's point of view; `-127` means "unknown".
    pub score: i8,
    /// The move; links never hold [`Move::None`].
    pub mv: Move,
}

/// "No leaf": Edax's `BAD_LINK` `{score: -127, move: NOMOVE}` (bytes `81 41`).
pub const BAD_LINK: Link = Link {
    score: -127,
    mv: Move::None,
};

impl Link {
    /// A link with the given score and move.
    pub const fn new(score: i8, mv: Move) -> Link {
        Link { score, mv }
    }

    /// The two file bytes: the score byte, then the Edax move code.
    pub const fn to_bytes(self) -> [u8; 2] {
        [self.score as u8, self.mv.code()]
    }

    /// Decode the two file bytes; `None` when the move code is above 65.
    pub const fn from_bytes(b: [u8; 2]) -> Option<Link> {
        match Move::from_code(b[1]) {
            Some(mv) => Some(Link {
                score: b[0] as i8,
                mv,
            }),
            None => None,
        }
    }
}

/// One book position (edax-spec §3): a canonical board seen from the side to move, its links to
/// child positions in the book, its leaf, its statistics and its negamaxed score with error bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The canonical ("unique") board, player = side to move.
    pub board: Board,
    /// Best move among the legal moves that are not links, or [`BAD_LINK`].
    pub leaf: Link,
    /// Links to children in the book, in stored order.
    pub links: Vec<Link>,
    /// Number of won full games below (negamax).
    pub n_wins: u32,
    /// Number of drawn full games below (negamax).
    pub n_draws: u32,
    /// Number of lost full games below (negamax).
    pub n_losses: u32,
    /// Number of lines (paths to a leaf) below (negamax).
    pub n_lines: u32,
    /// Negamax value, `-127` when unknown.
    pub value: i16,
    /// Lower error bound of the value.
    pub lower: i16,
    /// Upper error bound of the value.
    pub upper: i16,
    /// Search level of the leaf, 0..=60.
    pub level: u8,
}

impl Position {
    /// A fresh position as Edax's `position_init` leaves it, on `board`, at `level`: no leaf, no
    /// links, zero counts, value = lower = −127 and upper = +127. The board is stored as given.
    pub const fn new(board: Board, level: u8) -> Position {
        Position {
            board,
            leaf: BAD_LINK,
            links: Vec::new(),
            n_wins: 0,
            n_draws: 0,
            n_losses: 0,
            n_lines: 0,
            value: -SCORE_INF,
            lower: -SCORE_INF,
            upper: SCORE_INF,
            level,
        }
    }

    /// Replace the board by its canonical form (AVX2 symmetry order, as we write books) and map
    /// every link and the leaf move through the same symmetry (edax-spec §1.5).
    pub fn normalize(&mut self) {
        let (c, s) = canonical(&self.board);
        self.board = c;
        for l in &mut self.links {
            l.mv = transform_move(l.mv, s);
        }
        self.leaf.mv = transform_move(self.leaf.mv, s);
    }

    /// Number of empty squares of the board.
    pub const fn empties(&self) -> u32 {
        self.board.empties()
    }

    /// The link with move `mv`, if any.
    pub fn link(&self, mv: Move) -> Option<&Link> {
        self.links.iter().find(|l| l.mv == mv)
    }
}

/// The `date` block of the book header: local time of the last save, plus the struct padding byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BookDate {
    /// Year, e.g. 2026.
    pub year: i16,
    /// Month 1..=12.
    pub month: u8,
    /// Day 1..=31.
    pub day: u8,
    /// Hour 0..=23.
    pub hour: u8,
    /// Minute 0..=59.
    pub minute: u8,
    /// Second 0..=60.
    pub second: u8,
    /// The struct padding byte (uninitialized memory in Edax; normally 0). Kept only so that a
    /// read-write round trip and the dump's `--header` line reproduce the file.
    pub pad: u8,
}

impl BookDate {
    /// The UTC calendar date and time of `unix_seconds` seconds after 1970-01-01 (Edax stamps
    /// local time; we stamp UTC).
    pub fn from_unix(unix_seconds: u64) -> BookDate {
        let days = (unix_seconds / 86_400) as i64;
        let rem = unix_seconds % 86_400;
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        BookDate {
            year: i16::try_from(year).unwrap_or(i16::MAX),
            month: month as u8,
            day: day as u8,
            hour: (rem / 3600) as u8,
            minute: (rem / 60 % 60) as u8,
            second: (rem % 60) as u8,
            pad: 0,
        }
    }

    /// The current UTC time.
    pub fn now() -> BookDate {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        BookDate::from_unix(secs)
    }
}

/// The 42-byte book.dat header (edax-spec §2.1), without the record count, which is derived
/// from the book when writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookHeader {
    /// Format version, always 4.
    pub version: u8,
    /// Release: 4 (Edax 4.4), 5 or 6 (4.6). Edax ignores it on load; we write 6.
    pub release: u8,
    /// Date of the last save.
    pub date: BookDate,
    /// Default level for new positions.
    pub level: i32,
    /// Book depth limit as a number of empties; the user-facing depth is `61 - n_empties`.
    pub n_empties: i32,
    /// Midgame error used by the negamax bounds (default 2, set by `enhance`).
    pub midgame_error: i32,
    /// Endcut error used by the negamax bounds (default 1, set by `enhance`).
    pub endcut_error: i32,
    /// Search verbosity of book commands (normally 0).
    pub verbosity: i32,
}

impl BookHeader {
    /// The header of a new book (`book new LEVEL DEPTH`): version 4, release 6, errors 2 and 1,
    /// `n_empties = 61 - depth`, zero date.
    pub const fn new(level: i32, depth: i32) -> BookHeader {
        BookHeader {
            version: 4,
            release: 6,
            date: BookDate {
                year: 0,
                month: 0,
                day: 0,
                hour: 0,
                minute: 0,
                second: 0,
                pad: 0,
            },
            level,
            n_empties: 61 - depth,
            midgame_error: 2,
            endcut_error: 1,
            verbosity: 0,
        }
    }

    /// The user-facing book depth, `61 - n_empties`.
    pub const fn depth(&self) -> i32 {
        61 - self.n_empties
    }
}

impl Default for BookHeader {
    /// Edax's defaults for `book new` (level 21, depth 36).
    fn default() -> BookHeader {
        BookHeader::new(21, 36)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::Square;
    use bookfarm_engine::symmetry::transform;

    #[test]
    fn link_bytes_roundtrip() {
        assert_eq!(BAD_LINK.to_bytes(), [0x81, 0x41]);
        assert_eq!(Link::from_bytes([0x81, 0x41]), Some(BAD_LINK));
        assert_eq!(Link::from_bytes([0, 66]), None);
        let l = Link::new(-5, Move::Pass);
        assert_eq!(Link::from_bytes(l.to_bytes()), Some(l));
    }

    #[test]
    fn normalize_maps_moves() {
        // f5 from the start, seen in a rotated frame: normalizing must map the move back to a
        // square that is legal on the canonical board.
        let b = transform(&Board::start(), 5);
        let mut p = Position::new(b, 3);
        let f5 = Square::parse("f5").map(Move::Square).expect("f5");
        let m = transform_move(f5, 5);
        p.leaf = Link::new(1, m);
        p.normalize();
        assert_eq!(p.board, Board::start());
        assert!(p.board.is_legal(p.leaf.mv));
    }

    #[test]
    fn unix_dates() {
        let d = BookDate::from_unix(0);
        assert_eq!((d.year, d.month, d.day, d.hour), (1970, 1, 1, 0));
        // 2026-11-22 05:38:21 UTC.
        let d = BookDate::from_unix(1_795_325_901);
        assert_eq!(
            (d.year, d.month, d.day, d.hour, d.minute, d.second),
            (2026, 11, 22, 5, 38, 21)
        );
        let d = BookDate::from_unix(951_782_400); // 2000-02-29
        assert_eq!((d.year, d.month, d.day), (2000, 2, 29));
    }

    #[test]
    fn header_depth() {
        let h = BookHeader::new(2, 12);
        assert_eq!(h.n_empties, 49);
        assert_eq!(h.depth(), 12);
    }
}
