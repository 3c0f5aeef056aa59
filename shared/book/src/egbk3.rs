//! Egaroucid's `.egbk3` book format (Egaroucid 6.5+, read and written by
//! `import_file_egbk3`/`save_egbk3` in its `src/engine/book.hpp`), and conversions to and from
//! the Edax model.
//!
//! Layout, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 9 | magic `DICUORAGE` ("EGAROUCID" reversed) |
//! | 9 | 1 | version, 3 |
//! | 10 | 4 | i32 number of boards |
//! | 14 | 25 × n | records |
//!
//! A record: u64 player, u64 opponent, i8 value, i8 level, u32 n_lines, i8 leaf value, i8 leaf
//! move, i8 leaf level. Egaroucid numbers squares from H8 = 0 to A1 = 63 (`HW2_M1 − (8·row +
//! col)`), so its bit `63 − x` is Edax's square `x`: an Egaroucid bitboard is an Edax bitboard
//! with its bits reversed (a 180° rotation, a symmetry of the game), and so is a leaf move.
//! Undefined fields are value −126 (`SCORE_UNDEFINED`), move 125 (`MOVE_UNDEFINED`) and level −1
//! (`LEVEL_UNDEFINED`). Egaroucid stores each position once, under the least of its 8 symmetric
//! boards (player, then opponent, as unsigned integers, in its own bit order), and stores no
//! pass positions (the position after a move that forces a pass is the position after the
//! pass). Its reader drops records whose value is outside ±64 or whose bitboards overlap.
//!
//! Egaroucid's value is a position's own value (a search of that position at `level` when no
//! child is in the book) and its leaf is the best move that is not in the book, scored by a
//! search at `leaf level`. Edax's model has one level per position, the level of its leaf search
//! (edax-spec §3), and values that come only from leaves and links. Conversions:
//!
//! * Edax → egbk3 ([`from_book`]): every position except pass positions; value, level, n_lines;
//!   the leaf when it is a square move, at the position's level; game-over positions have no
//!   leaf (their value is the final score).
//! * egbk3 → Edax ([`to_book`]): the board in Edax's orientation, normalized; level = the leaf
//!   level when the record has a leaf, else its level; the leaf when it is legal; a game-over
//!   position gets Edax's `{final score, NOMOVE}` leaf; pass positions are recreated with a PASS
//!   link; then link, negamax and sort, as Edax's `book import`. A record without a usable
//!   leaf on a position that still has moves that are not links gets a **borrowed leaf**:
//!   Egaroucid's value of the position as the leaf score, with no move (see below).
//!
//! Borrowed leaves. An Egaroucid book that Egaroucid wrote itself has values but, for most
//! positions, no leaf: its value of a position is the negamax of its book children (a book end:
//! its own search at its level), and its import of an Edax book turns every Edax leaf into a
//! child position. Edax's model has no place for such a value: without a leaf, negamax finds
//! nothing below the book ends and every value would come out ±127, every line count 0. So the
//! import keeps Egaroucid's value as the position's leaf score, with the move NOMOVE, as
//! Egaroucid's own Edax export keeps it as the leaf score (with its first missing move):
//! * at a book end the leaf is the position's value, as Egaroucid computed it; at an interior
//!   position, negamax gives max(links, leaf) = Egaroucid's value of the position, which makes
//!   it a deviation candidate whose score is Egaroucid's (optimistic: the best move outside the
//!   book is assumed as good as the position until it is searched);
//! * NOMOVE, not a made-up move: a move would be expanded without a search having chosen it;
//! * nothing new in the model: a leaf with a score and no move on a position with moves that
//!   are not links is what Edax's `position_is_ok` reports as "nomove is wrong"
//!   ([`crate::grow::is_borrowed`]). Edax loads it, its negamax counts it, the `.dat`, CSV and
//!   `.egbk3` writers keep it;
//! * searched lazily, where growth first needs its move: a selector pass that marks a borrowed
//!   leaf searches it first ([`crate::driver::PassKind::Resolve`]), `book fix` searches it in
//!   place at its own level, `book link` searches every NOMOVE leaf. Searching all of them at
//!   import would cost one search per position of the largest public books before anything
//!   grows.
//!
//! Levels: Egaroucid's level N and Edax's level N both search the midgame at depth N and solve
//! exactly from 2N empties for N ≤ 10; above, their endgame horizons are close. Egaroucid's own
//! Edax import and export keep the level number unchanged, and so do we: **Edax level =
//! Egaroucid level** for 0..=60. Levels outside that range (undefined −1, or Egaroucid's
//! `LEVEL_HUMAN` 70 for hand-entered values) are clamped to 0..=60. The horizons, as empties
//! (exact solve / any depth = empties search), from Egaroucid's `level.hpp` and Edax's level
//! table (edax-spec §6):
//!
//! | level | Egaroucid exact / endgame | Edax exact / endgame |
//! |---|---|---|
//! | 1..=10 | ≤ 2N / ≤ 2N | ≤ 2N / ≤ 2N |
//! | 11 | ≤ 21 / ≤ 25 | ≤ 21 / ≤ 24 |
//! | 15 | ≤ 22 / ≤ 27 | ≤ 21 / ≤ 27 |
//! | 21 | ≤ 24 / ≤ 30 | ≤ 24 / ≤ 30 |
//! | 25 | ≤ 26 / ≤ 34 | ≤ 27 / ≤ 33 |
//! | 30 | ≤ 30 / ≤ 36 | ≤ 30 / ≤ 36 |
//! | 40 | ≤ 34 / ≤ 42 | ≤ 34 / ≤ 49 |
//! | 60 | all / all | all / all |
//!
//! So an accuracy grade ([`crate::accuracy`]) read after a conversion can differ from
//! Egaroucid's for a leaf at the edge of a horizon (e.g. a level-11 leaf at 25 empties is an
//! endgame read for Egaroucid and a midgame search for Edax).

use crate::grow::{PositionProblem, check_position};
use crate::mem::MemBook;
use crate::model::{BAD_LINK, BookHeader, Link, MAX_LEVEL, Position};
use crate::negamax::{link_all, negamax, sort_links};
use bookfarm_engine::symmetry::{canonical, transform, transform_square};
use bookfarm_engine::{Board, Move, Square};
use std::collections::HashMap;

/// The magic string.
pub const MAGIC: &[u8; 9] = b"DICUORAGE";
/// The format version.
pub const VERSION: u8 = 3;
/// Header length in bytes.
pub const HEADER_LEN: usize = 14;
/// Record length in bytes.
pub const RECORD_LEN: usize = 25;
/// Egaroucid's `SCORE_UNDEFINED`.
pub const SCORE_UNDEFINED: i8 = -126;
/// Egaroucid's `MOVE_UNDEFINED`.
pub const MOVE_UNDEFINED: i8 = 125;
/// Egaroucid's `LEVEL_UNDEFINED`.
pub const LEVEL_UNDEFINED: i8 = -1;

/// One record, exactly as stored (Egaroucid's bit and square order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Side to move's discs, Egaroucid bit order (bit 63 = A1).
    pub player: u64,
    /// Opponent's discs, Egaroucid bit order.
    pub opponent: u64,
    /// The position's value.
    pub value: i8,
    /// The level of the value.
    pub level: i8,
    /// Lines below the position.
    pub n_lines: u32,
    /// The leaf's value.
    pub leaf_value: i8,
    /// The leaf move, Egaroucid square index (63 = A1), or [`MOVE_UNDEFINED`].
    pub leaf_move: i8,
    /// The leaf's level.
    pub leaf_level: i8,
}

impl Record {
    /// The board in Edax's bit order.
    pub const fn edax_board(&self) -> Board {
        Board {
            player: self.player.reverse_bits(),
            opponent: self.opponent.reverse_bits(),
        }
    }

    /// The leaf move as an Edax square of [`Record::edax_board`], when it names a square.
    pub fn edax_leaf_move(&self) -> Option<Square> {
        u8::try_from(self.leaf_move)
            .ok()
            .filter(|&m| m < 64)
            .and_then(|m| Square::new(63 - m))
    }

    fn to_bytes(self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.player.to_le_bytes());
        b[8..16].copy_from_slice(&self.opponent.to_le_bytes());
        b[16] = self.value as u8;
        b[17] = self.level as u8;
        b[18..22].copy_from_slice(&self.n_lines.to_le_bytes());
        b[22] = self.leaf_value as u8;
        b[23] = self.leaf_move as u8;
        b[24] = self.leaf_level as u8;
        b
    }

    fn from_bytes(b: &[u8; RECORD_LEN]) -> Record {
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        Record {
            player: u64_at(0),
            opponent: u64_at(8),
            value: b[16] as i8,
            level: b[17] as i8,
            n_lines: u32::from_le_bytes([b[18], b[19], b[20], b[21]]),
            leaf_value: b[22] as i8,
            leaf_move: b[23] as i8,
            leaf_level: b[24] as i8,
        }
    }
}

/// A `.egbk3` file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Egbk3Error {
    /// Fewer bytes than the header.
    #[error("at byte {0}: truncated header")]
    ShortHeader(usize),
    /// The magic is not `DICUORAGE`.
    #[error("at byte 0: not an Egaroucid book (no DICUORAGE magic)")]
    Magic,
    /// A version other than 3.
    #[error("at byte 9: unsupported version {0} (only 3)")]
    Version(u8),
    /// A negative board count.
    #[error("at byte 10: negative board count {0}")]
    Count(i32),
    /// The file ends inside a record.
    #[error("at byte {offset}: truncated record {index} of {count}")]
    Truncated {
        /// Offset of the record.
        offset: usize,
        /// Its index.
        index: usize,
        /// Records announced.
        count: usize,
    },
    /// Bytes after the announced records.
    #[error("at byte {0}: trailing bytes after the last record")]
    Trailing(usize),
    /// A record whose bitboards overlap.
    #[error("at byte {0}: player and opponent discs overlap")]
    Overlap(usize),
}

/// Read a `.egbk3` file: every record as stored.
pub fn read(d: &[u8]) -> Result<Vec<Record>, Egbk3Error> {
    if d.len() < HEADER_LEN {
        return Err(Egbk3Error::ShortHeader(d.len()));
    }
    if &d[0..9] != MAGIC {
        return Err(Egbk3Error::Magic);
    }
    if d[9] != VERSION {
        return Err(Egbk3Error::Version(d[9]));
    }
    let n = i32::from_le_bytes([d[10], d[11], d[12], d[13]]);
    let count = usize::try_from(n).map_err(|_| Egbk3Error::Count(n))?;
    let mut out = Vec::with_capacity(count.min(d.len() / RECORD_LEN));
    for index in 0..count {
        let offset = HEADER_LEN + index * RECORD_LEN;
        let Some(bytes) = d.get(offset..offset + RECORD_LEN) else {
            return Err(Egbk3Error::Truncated {
                offset,
                index,
                count,
            });
        };
        let mut rec = [0u8; RECORD_LEN];
        rec.copy_from_slice(bytes);
        let r = Record::from_bytes(&rec);
        if r.player & r.opponent != 0 {
            return Err(Egbk3Error::Overlap(offset));
        }
        out.push(r);
    }
    let end = HEADER_LEN + count * RECORD_LEN;
    if d.len() > end {
        return Err(Egbk3Error::Trailing(end));
    }
    Ok(out)
}

/// Write records as a `.egbk3` file.
pub fn write(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + RECORD_LEN * records.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let n = i32::try_from(records.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
    for r in records.iter().take(n as usize) {
        out.extend_from_slice(&r.to_bytes());
    }
    out
}

/// Egaroucid's stored form of an Edax board: the least of the 8 symmetric boards in Egaroucid's
/// bit order (player, then opponent), with the symmetry (of [`transform`]) that gives it (the
/// first in plain order when several do).
pub fn representative(b: &Board) -> (u64, u64, u8) {
    let mut best = (u64::MAX, u64::MAX, 0u8);
    for s in 0..8u8 {
        let t = transform(b, s);
        let key = (t.player.reverse_bits(), t.opponent.reverse_bits());
        if key < (best.0, best.1) {
            best = (key.0, key.1, s);
        }
    }
    best
}

/// An Edax level as an Egaroucid level (the same number).
fn level_byte(level: u8) -> i8 {
    level.min(MAX_LEVEL) as i8
}

/// An Egaroucid level as an Edax level: the same number, clamped to 0..=60.
pub fn edax_level(level: i8) -> u8 {
    level.clamp(0, MAX_LEVEL as i8) as u8
}

/// The records of an Edax book ([module docs](self)): every position but the pass positions,
/// in the book's order.
pub fn from_book(book: &MemBook) -> Vec<Record> {
    let mut out = Vec::with_capacity(book.len());
    for id in book.ids() {
        let b = book.board(id);
        if b.must_pass() {
            continue;
        }
        let (player, opponent, s) = representative(&b);
        let value = book.score(id).value;
        let level = level_byte(book.level(id));
        let leaf = book.leaf(id);
        let (leaf_value, leaf_move, leaf_level) = match leaf.mv {
            Move::Square(sq) => (
                leaf.score,
                (63 - transform_square(sq, s).index()) as i8,
                level,
            ),
            _ => (SCORE_UNDEFINED, MOVE_UNDEFINED, LEVEL_UNDEFINED),
        };
        out.push(Record {
            player,
            opponent,
            value: if (-64..=64).contains(&value) {
                value as i8
            } else {
                SCORE_UNDEFINED
            },
            level,
            n_lines: book.counts(id).n_lines,
            leaf_value,
            leaf_move,
            leaf_level,
        });
    }
    out
}

/// What [`to_book`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Records read.
    pub records: usize,
    /// Records dropped as Egaroucid drops them (value outside ±64).
    pub dropped: usize,
    /// Records of a position already imported (the higher level wins, equal → the later).
    pub duplicates: usize,
    /// Pass positions recreated.
    pub pass_positions: usize,
    /// Positions whose leaf was dropped because its move is illegal on the board.
    pub bad_leaves: usize,
    /// Positions given a borrowed leaf (Egaroucid's value, no move; [module docs](self)).
    pub borrowed: usize,
}

/// The Edax position of one record (board normalized, leaf mapped), or `None` when Egaroucid
/// would drop it; the flag tells whether a leaf move was dropped as illegal.
fn position_of(r: &Record) -> Option<(Position, bool)> {
    if !(-64..=64).contains(&r.value) {
        return None;
    }
    let board = r.edax_board();
    let has_leaf = (-64..=64).contains(&r.leaf_value) && r.edax_leaf_move().is_some();
    let level = edax_level(if has_leaf { r.leaf_level } else { r.level });
    let mut p = Position::new(board, level);
    let mut bad_leaf = false;
    if board.is_game_over() {
        p.leaf = Link::new(board.final_score() as i8, Move::None);
    } else if has_leaf {
        let mv = r.edax_leaf_move().map(Move::Square).unwrap_or(Move::None);
        if board.is_legal(mv) {
            p.leaf = Link::new(r.leaf_value, mv);
        } else {
            bad_leaf = true;
        }
    }
    p.value = i16::from(r.value);
    p.n_lines = r.n_lines;
    p.normalize();
    Some((p, bad_leaf))
}

/// An Edax book from records ([module docs](self)): normalized positions in file order, pass
/// positions recreated, then linked, negamaxed and sorted. The header is Edax's `book_init`
/// with the maximum level and the minimum empties (as Edax's CSV import).
pub fn to_book(records: &[Record]) -> (MemBook, ImportReport) {
    let mut report = ImportReport {
        records: records.len(),
        ..ImportReport::default()
    };
    let mut book = MemBook::new(BookHeader::new(0, 0));
    // Egaroucid's value of each imported position (the record kept).
    let mut values: HashMap<Board, i8> = HashMap::new();
    let mut max_level = 0u8;
    let mut min_empties = 60u32;
    for r in records {
        let Some((p, bad_leaf)) = position_of(r) else {
            report.dropped += 1;
            continue;
        };
        match book.find(&p.board) {
            Some(id) if book.level(id) > p.level => report.duplicates += 1,
            Some(_) => {
                report.duplicates += 1;
                report.bad_leaves += usize::from(bad_leaf);
                book.put_position(&p);
                values.insert(p.board, r.value);
            }
            None => {
                report.bad_leaves += usize::from(bad_leaf);
                book.put_position(&p);
                values.insert(p.board, r.value);
            }
        }
        max_level = max_level.max(p.level);
        min_empties = min_empties.min(p.board.empties());
    }
    report.pass_positions = add_pass_positions(&mut book);
    let h = book.header_mut();
    h.level = i32::from(max_level);
    h.n_empties = min_empties as i32;
    link_all(&mut book);
    let leafless: Vec<_> = book
        .ids()
        .filter(|&id| {
            book.leaf(id) == BAD_LINK
                && check_position(&book.position(id)) == Some(PositionProblem::BadNoMove)
        })
        .collect();
    for id in leafless {
        if let Some(&v) = values.get(&book.board(id)) {
            book.set_leaf(id, Link::new(v, Move::None));
            report.borrowed += 1;
        }
    }
    negamax(&mut book);
    sort_links(&mut book);
    (book, report)
}

/// Add Edax's pass positions: for every move of a book position that leaves the opponent
/// without a move while the position after the pass is in the book, the passing position (with
/// the level of the position after the pass). Returns how many were added.
fn add_pass_positions(book: &mut MemBook) -> usize {
    let mut new: Vec<Position> = Vec::new();
    for id in book.ids() {
        let b = book.board(id);
        for sq in b.legal_squares() {
            let next = b.play_flips(sq.index(), b.flips(sq));
            if !next.must_pass() {
                continue;
            }
            let Some(after) = book.probe(&next.pass()) else {
                continue;
            };
            let (c, _) = canonical(&next);
            if book.find(&c).is_none() && new.iter().all(|p| p.board != c) {
                let mut p = Position::new(c, book.level(after));
                p.leaf = BAD_LINK;
                new.push(p);
            }
        }
    }
    for p in &new {
        book.put_position(p);
    }
    new.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Egaroucid's coordinate of a square name, as its `get_coord_from_chars` computes it.
    fn egaroucid_cell(name: &str) -> u32 {
        let b = name.as_bytes();
        let x = u32::from(b[0] - b'a');
        let y = u32::from(b[1] - b'1');
        63 - (y * 8 + x)
    }

    #[test]
    fn bit_order_is_reversed() {
        // Black's f5 from the start: Black (X) then has d5 e5 f5 e4; White (O) d4, and White
        // is to move. In Egaroucid's numbering, bit 63 - (8·row + col).
        let bits = |names: &[&str]| names.iter().fold(0u64, |a, n| a | 1 << egaroucid_cell(n));
        let r = Record {
            player: bits(&["d4"]),
            opponent: bits(&["d5", "e5", "f5", "e4"]),
            value: 0,
            level: 5,
            n_lines: 1,
            leaf_value: 0,
            leaf_move: egaroucid_cell("f6") as i8,
            leaf_level: 5,
        };
        let f5 = Square::parse("f5").expect("f5");
        let after_f5 = Board::start().play(f5).expect("legal");
        assert_eq!(r.edax_board(), after_f5);
        assert_eq!(r.edax_leaf_move(), Square::parse("f6").ok());
        let bytes = write(&[r]);
        assert_eq!(&bytes[..10], b"DICUORAGE\x03");
        assert_eq!(&bytes[10..14], &1i32.to_le_bytes());
        assert_eq!(bytes.len(), HEADER_LEN + RECORD_LEN);
        assert_eq!(read(&bytes), Ok(vec![r]));
    }

    #[test]
    fn reader_errors_name_the_offset() {
        assert_eq!(read(b"DICUORAGE\x03"), Err(Egbk3Error::ShortHeader(10)));
        assert_eq!(read(b"EGAROUCID\x03\0\0\0\0"), Err(Egbk3Error::Magic));
        assert_eq!(read(b"DICUORAGE\x02\0\0\0\0"), Err(Egbk3Error::Version(2)));
        let mut one = write(&[Record {
            player: 1,
            opponent: 2,
            value: 0,
            level: 1,
            n_lines: 0,
            leaf_value: SCORE_UNDEFINED,
            leaf_move: MOVE_UNDEFINED,
            leaf_level: LEVEL_UNDEFINED,
        }]);
        assert!(read(&one).is_ok());
        one.push(0);
        assert_eq!(read(&one), Err(Egbk3Error::Trailing(39)));
        one.truncate(30);
        assert!(matches!(
            read(&one),
            Err(Egbk3Error::Truncated { offset: 14, .. })
        ));
        let overlap = write(&[Record {
            player: 3,
            opponent: 2,
            value: 0,
            level: 1,
            n_lines: 0,
            leaf_value: 0,
            leaf_move: 0,
            leaf_level: 0,
        }]);
        assert_eq!(read(&overlap), Err(Egbk3Error::Overlap(14)));
    }

    /// Egaroucid stores no pass position: it is left out of the records and recreated, with a
    /// PASS link and the level of the position after the pass, when read back.
    #[test]
    fn pass_positions_are_dropped_and_recreated() {
        use bookfarm_engine::formats::transcript::parse_moves;
        // After these 8 moves Black has no move and White has.
        let moves = parse_moves("d3c3b3b2f5a3a1").expect("moves");
        let mut x = Board::start();
        for mv in moves {
            x = x.play_move(mv).expect("legal");
        }
        let c1 = Move::Square(Square::parse("c1").expect("c1"));
        let y = x.play_move(c1).expect("legal");
        assert!(y.must_pass());
        let z = y.pass();
        let first_other = |b: &Board, not: Move| {
            b.legal_squares()
                .map(Move::Square)
                .find(|&m| m != not)
                .expect("a move")
        };
        let mut book = MemBook::new(BookHeader::new(5, 60));
        for (b, leaf) in [
            (x, Link::new(3, first_other(&x, c1))),
            (y, BAD_LINK),
            (z, Link::new(-2, first_other(&z, Move::None))),
        ] {
            let mut p = Position::new(b, 5);
            p.leaf = leaf;
            p.normalize();
            book.put_position(&p);
        }
        link_all(&mut book);
        let root = book.probe(&x).expect("x");
        crate::negamax::negamax_from(&mut book, root);
        let records = from_book(&book);
        assert_eq!(records.len(), 2);
        let (back, report) = to_book(&records);
        assert_eq!(report.pass_positions, 1);
        assert_eq!(back.len(), 3);
        let yp = back.get(&canonical(&y).0).expect("pass position recreated");
        assert_eq!(yp.links.len(), 1);
        assert_eq!(yp.links[0].mv, Move::Pass);
        assert_eq!(yp.level, 5);
        let xp = back.get(&canonical(&x).0).expect("kept");
        assert_eq!(xp.links.len(), 1, "linked to the pass position");
    }

    #[test]
    fn levels_map_by_number() {
        assert_eq!(edax_level(21), 21);
        assert_eq!(edax_level(LEVEL_UNDEFINED), 0);
        assert_eq!(edax_level(70), 60);
        assert_eq!(level_byte(60), 60);
    }
}
