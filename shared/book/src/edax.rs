//! Edax `book.dat` reader and writer (edax-spec §2), releases 4.4 and 4.6 (identical layout).
//!
//! The reader is strict where Edax is silent: it rejects anything a well-formed Edax book cannot
//! contain, with the byte offset of the problem, and never panics. The writer emits the header
//! and the records in Edax 4.6's hash-bucket order, so that a book read and written again is
//! byte-identical to the original (same record count, so same bucket count, and insertion order
//! = file order inside each bucket).

use crate::mem::{MemBook, NodeId};
use crate::model::{BookDate, BookHeader, Link, MAX_LEVEL, Position};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::io::{self, Write};

/// Size of the file header.
pub const HEADER_SIZE: usize = 42;
/// Size of a record without its links and leaf.
pub const RECORD_FIXED_SIZE: usize = 40;
/// `magic1` ("EDAX" as a little-endian u32).
pub const MAGIC_EDAX: u32 = 0x4544_4158;
/// `magic2` ("BOOK" as a little-endian u32).
pub const MAGIC_BOOK: u32 = 0x424F_4F4B;
/// The only format version.
pub const VERSION: u8 = 4;
/// The release byte we write (Edax 4.6).
pub const RELEASE: u8 = 6;

const CENTRE: u64 = 0x0000_0018_1800_0000;

/// Why a `book.dat` could not be read. Every variant carries the byte offset of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The file is shorter than the 42-byte header.
    #[error("at byte {len}: truncated header ({len} of 42 bytes)")]
    TruncatedHeader {
        /// File length.
        len: usize,
    },
    /// The magic numbers are not "EDAX" "BOOK".
    #[error("at byte 0: not an edax opening book (bad magic)")]
    BadMagic,
    /// The version byte is not 4.
    #[error("at byte 8: incompatible book version {version} (expected 4)")]
    BadVersion {
        /// The version byte found.
        version: u8,
    },
    /// The header's position count is negative.
    #[error("at byte 38: negative position count {n_nodes}")]
    NegativeCount {
        /// The count found.
        n_nodes: i32,
    },
    /// A record is cut short by the end of the file.
    #[error(
        "at byte {offset}: truncated record #{index} ({available} bytes left, {needed} needed)"
    )]
    TruncatedRecord {
        /// Offset of the record.
        offset: usize,
        /// Index of the record (0-based).
        index: usize,
        /// Bytes left in the file.
        available: usize,
        /// Bytes the record needs.
        needed: usize,
    },
    /// The two bitboards share squares.
    #[error("at byte {offset}: overlapping bitboards {player:#018x} and {opponent:#018x}")]
    Overlap {
        /// Offset of the record.
        offset: usize,
        /// Player bitboard.
        player: u64,
        /// Opponent bitboard.
        opponent: u64,
    },
    /// A centre square is empty (impossible in Othello).
    #[error("at byte {offset}: empty centre square on board {board}")]
    EmptyCentre {
        /// Offset of the record.
        offset: usize,
        /// The board.
        board: Board,
    },
    /// The board is not in canonical (normalized) form, so Edax could never find it.
    #[error("at byte {offset}: board {board} is not in canonical form")]
    NotCanonical {
        /// Offset of the record.
        offset: usize,
        /// The board.
        board: Board,
    },
    /// The level is above 60.
    #[error("at byte {offset}: level {level} out of range 0..=60")]
    BadLevel {
        /// Offset of the level byte.
        offset: usize,
        /// The level.
        level: u8,
    },
    /// A move byte is above 65.
    #[error("at byte {offset}: invalid move code {code}")]
    BadMoveCode {
        /// Offset of the move byte.
        offset: usize,
        /// The code.
        code: u8,
    },
    /// More links than the position has legal moves.
    #[error(
        "at byte {offset}: impossible link count {n_link} for a position with {max} possible moves"
    )]
    TooManyLinks {
        /// Offset of the n_link byte.
        offset: usize,
        /// n_link.
        n_link: u8,
        /// Possible moves (legal squares, or 1 for a forced pass).
        max: u32,
    },
    /// A link move is not legal on the record's board.
    #[error("at byte {offset}: link move {mv} is illegal on board {board}")]
    IllegalLink {
        /// Offset of the link.
        offset: usize,
        /// The move.
        mv: Move,
        /// The board.
        board: Board,
    },
    /// Two links share a move.
    #[error("at byte {offset}: duplicate link move {mv}")]
    DuplicateLink {
        /// Offset of the second link.
        offset: usize,
        /// The move.
        mv: Move,
    },
    /// The leaf move is not legal on the board (a pass leaf needs a forced pass and no link).
    #[error("at byte {offset}: leaf move {mv} is illegal on board {board}")]
    IllegalLeaf {
        /// Offset of the leaf.
        offset: usize,
        /// The move.
        mv: Move,
        /// The board.
        board: Board,
    },
    /// The leaf move is also a link move.
    #[error("at byte {offset}: leaf move {mv} is also a link")]
    LeafIsLink {
        /// Offset of the leaf.
        offset: usize,
        /// The move.
        mv: Move,
    },
    /// A board occurs twice.
    #[error("at byte {offset}: duplicate position {board}")]
    DuplicatePosition {
        /// Offset of the second record.
        offset: usize,
        /// The board.
        board: Board,
    },
    /// The header's count differs from the number of records.
    #[error("at byte {offset}: header announces {expected} positions but the file holds {found}")]
    CountMismatch {
        /// File length.
        offset: usize,
        /// Header n_nodes.
        expected: usize,
        /// Records read.
        found: usize,
    },
}

impl ReadError {
    /// The byte offset the error refers to.
    pub fn offset(&self) -> usize {
        match *self {
            ReadError::TruncatedHeader { len } => len,
            ReadError::BadMagic => 0,
            ReadError::BadVersion { .. } => 8,
            ReadError::NegativeCount { .. } => 38,
            ReadError::TruncatedRecord { offset, .. }
            | ReadError::Overlap { offset, .. }
            | ReadError::EmptyCentre { offset, .. }
            | ReadError::NotCanonical { offset, .. }
            | ReadError::BadLevel { offset, .. }
            | ReadError::BadMoveCode { offset, .. }
            | ReadError::TooManyLinks { offset, .. }
            | ReadError::IllegalLink { offset, .. }
            | ReadError::DuplicateLink { offset, .. }
            | ReadError::IllegalLeaf { offset, .. }
            | ReadError::LeafIsLink { offset, .. }
            | ReadError::DuplicatePosition { offset, .. }
            | ReadError::CountMismatch { offset, .. } => offset,
        }
    }
}

#[inline]
fn u32_at(d: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&d[at..at + 4]);
    u32::from_le_bytes(b)
}

#[inline]
fn i32_at(d: &[u8], at: usize) -> i32 {
    u32_at(d, at) as i32
}

#[inline]
fn u64_at(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[at..at + 8]);
    u64::from_le_bytes(b)
}

#[inline]
fn i16_at(d: &[u8], at: usize) -> i16 {
    i16::from_le_bytes([d[at], d[at + 1]])
}

/// Parse the 42-byte header; returns it with the announced record count.
pub fn read_header(d: &[u8]) -> Result<(BookHeader, usize), ReadError> {
    if d.len() < HEADER_SIZE {
        return Err(ReadError::TruncatedHeader { len: d.len() });
    }
    if u32_at(d, 0) != MAGIC_EDAX || u32_at(d, 4) != MAGIC_BOOK {
        return Err(ReadError::BadMagic);
    }
    if d[8] != VERSION {
        return Err(ReadError::BadVersion { version: d[8] });
    }
    let n_nodes = i32_at(d, 38);
    let count = usize::try_from(n_nodes).map_err(|_| ReadError::NegativeCount { n_nodes })?;
    let header = BookHeader {
        version: d[8],
        release: d[9],
        date: BookDate {
            year: i16_at(d, 10),
            month: d[12],
            day: d[13],
            hour: d[14],
            minute: d[15],
            second: d[16],
            pad: d[17],
        },
        level: i32_at(d, 18),
        n_empties: i32_at(d, 22),
        midgame_error: i32_at(d, 26),
        endcut_error: i32_at(d, 30),
        verbosity: i32_at(d, 34),
    };
    Ok((header, count))
}

/// Decode and validate one record at `offset`; returns the position and the record size.
fn read_record(d: &[u8], offset: usize, index: usize) -> Result<(Position, usize), ReadError> {
    let available = d.len() - offset;
    if available < RECORD_FIXED_SIZE + 2 {
        return Err(ReadError::TruncatedRecord {
            offset,
            index,
            available,
            needed: RECORD_FIXED_SIZE + 2,
        });
    }
    let n_link = d[offset + 38];
    let size = RECORD_FIXED_SIZE + 2 * usize::from(n_link) + 2;
    if available < size {
        return Err(ReadError::TruncatedRecord {
            offset,
            index,
            available,
            needed: size,
        });
    }
    let r = &d[offset..offset + size];
    let player = u64_at(r, 0);
    let opponent = u64_at(r, 8);
    let board = Board::new(player, opponent).map_err(|_| ReadError::Overlap {
        offset,
        player,
        opponent,
    })?;
    if (player | opponent) & CENTRE != CENTRE {
        return Err(ReadError::EmptyCentre { offset, board });
    }
    if canonical(&board).0 != board {
        return Err(ReadError::NotCanonical { offset, board });
    }
    let level = r[39];
    if level > MAX_LEVEL {
        return Err(ReadError::BadLevel {
            offset: offset + 39,
            level,
        });
    }
    let moves = board.moves();
    let must_pass = moves == 0 && board.pass().moves() != 0;
    let max = if moves != 0 {
        moves.count_ones()
    } else {
        u32::from(must_pass)
    };
    if u32::from(n_link) > max {
        return Err(ReadError::TooManyLinks {
            offset: offset + 38,
            n_link,
            max,
        });
    }
    let link_at = |k: usize| -> Result<Link, ReadError> {
        let at = RECORD_FIXED_SIZE + 2 * k;
        Link::from_bytes([r[at], r[at + 1]]).ok_or(ReadError::BadMoveCode {
            offset: offset + at + 1,
            code: r[at + 1],
        })
    };
    let mut links = Vec::with_capacity(usize::from(n_link));
    let mut seen = 0u128;
    for k in 0..usize::from(n_link) {
        let l = link_at(k)?;
        let at = offset + RECORD_FIXED_SIZE + 2 * k;
        let legal = match l.mv {
            Move::Square(s) => moves & s.bit() != 0,
            Move::Pass => must_pass,
            Move::None => false,
        };
        if !legal {
            return Err(ReadError::IllegalLink {
                offset: at,
                mv: l.mv,
                board,
            });
        }
        let bit = 1u128 << l.mv.code();
        if seen & bit != 0 {
            return Err(ReadError::DuplicateLink {
                offset: at,
                mv: l.mv,
            });
        }
        seen |= bit;
        links.push(l);
    }
    let leaf = link_at(usize::from(n_link))?;
    let leaf_at = offset + size - 2;
    let leaf_legal = match leaf.mv {
        Move::Square(s) => moves & s.bit() != 0,
        Move::Pass => must_pass && n_link == 0,
        Move::None => true,
    };
    if !leaf_legal {
        return Err(ReadError::IllegalLeaf {
            offset: leaf_at,
            mv: leaf.mv,
            board,
        });
    }
    if leaf.mv != Move::None && seen & (1u128 << leaf.mv.code()) != 0 {
        return Err(ReadError::LeafIsLink {
            offset: leaf_at,
            mv: leaf.mv,
        });
    }
    let position = Position {
        board,
        leaf,
        links,
        n_wins: u32_at(r, 16),
        n_draws: u32_at(r, 20),
        n_losses: u32_at(r, 24),
        n_lines: u32_at(r, 28),
        value: i16_at(r, 32),
        lower: i16_at(r, 34),
        upper: i16_at(r, 36),
        level,
    };
    Ok((position, size))
}

/// Read a whole `book.dat` image into a [`MemBook`] (records in file order).
pub fn read_book(d: &[u8]) -> Result<MemBook, ReadError> {
    let (header, count) = read_header(d)?;
    // Do not trust the count for allocation beyond what the file can hold.
    let cap = count.min((d.len() - HEADER_SIZE) / (RECORD_FIXED_SIZE + 2));
    let mut book = MemBook::with_capacity(header, cap, cap);
    let index = read_records(d, HEADER_SIZE, &mut book)?;
    if index != count {
        return Err(ReadError::CountMismatch {
            offset: d.len(),
            expected: count,
            found: index,
        });
    }
    // The link arena was sized by a guess; give back what it over-allocated.
    book.shrink_to_fit();
    Ok(book)
}

/// Decode and validate the header-less records of `d[offset..]` into `book`, appended in order
/// (a board already in `book` is an error); returns how many were read. `book.dat` is a header
/// followed by such records.
pub fn read_records(d: &[u8], mut offset: usize, book: &mut MemBook) -> Result<usize, ReadError> {
    let mut index = 0;
    while offset < d.len() {
        let (p, size) = read_record(d, offset, index)?;
        if book.insert_new(&p).is_none() {
            return Err(ReadError::DuplicatePosition {
                offset,
                board: p.board,
            });
        }
        offset += size;
        index += 1;
    }
    Ok(index)
}

/// Raw CRC-32C (Castagnoli) of the 8 little-endian bytes of `v`, starting from `crc`, with no
/// initial or final inversion (the SSE4.2 `crc32q` instruction, as Edax uses it).
#[inline]
pub fn crc32c_u64(crc: u32, v: u64) -> u32 {
    // The crate computes the standard CRC (inverted in and out); undo both inversions.
    !crc32c::crc32c_append(!crc, &v.to_le_bytes())
}

/// Edax 4.6's board hash (`board_get_hash`): `(c << 32) | crc32c(c, opponent)` with
/// `c = crc32c(0, player)`.
#[inline]
pub fn edax_hash(b: &Board) -> u64 {
    let c = crc32c_u64(0, b.player);
    (u64::from(c) << 32) | u64::from(crc32c_u64(c, b.opponent))
}

/// Number of hash buckets Edax uses for a book of `n_nodes` positions: 65536, doubled while
/// `16 n < n_nodes`.
pub fn bucket_count(n_nodes: usize) -> usize {
    let mut n = 65536usize;
    while 16 * n < n_nodes {
        n *= 2;
    }
    n
}

/// Live ids in Edax 4.6's file order: by bucket `edax_hash & (n - 1)`, then insertion order.
pub fn bucket_order(book: &MemBook) -> Vec<NodeId> {
    let n = bucket_count(book.len());
    let mask = (n - 1) as u64;
    let ids: Vec<NodeId> = book.ids().collect();
    let buckets: Vec<u32> = ids
        .iter()
        .map(|&id| (edax_hash(&book.board(id)) & mask) as u32)
        .collect();
    // Counting sort: stable, so insertion order is kept inside a bucket.
    let mut start = vec![0u32; n + 1];
    for &b in &buckets {
        start[b as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut out = vec![NodeId(0); ids.len()];
    for (&id, &b) in ids.iter().zip(&buckets) {
        let slot = &mut start[b as usize];
        out[*slot as usize] = id;
        *slot += 1;
    }
    out
}

/// `ids` (live, possibly repeated) in the order [`bucket_order`] lists them, without visiting
/// the rest of the book: what a pass that expands a few marked positions of a big book needs.
pub fn sort_in_bucket_order(book: &MemBook, ids: impl IntoIterator<Item = NodeId>) -> Vec<NodeId> {
    let mask = (bucket_count(book.len()) - 1) as u64;
    // Ids grow with insertion ([`MemBook::ids`] lists them in insertion order), so (bucket, id)
    // is (bucket, insertion order).
    let mut keyed: Vec<(u32, u32)> = ids
        .into_iter()
        .map(|id| ((edax_hash(&book.board(id)) & mask) as u32, id.0))
        .collect();
    keyed.sort_unstable();
    keyed.dedup();
    keyed.into_iter().map(|(_, id)| NodeId(id)).collect()
}

fn header_bytes(h: &BookHeader, n_nodes: usize) -> [u8; HEADER_SIZE] {
    let mut b = [0u8; HEADER_SIZE];
    b[0..4].copy_from_slice(&MAGIC_EDAX.to_le_bytes());
    b[4..8].copy_from_slice(&MAGIC_BOOK.to_le_bytes());
    b[8] = h.version;
    b[9] = h.release;
    b[10..12].copy_from_slice(&h.date.year.to_le_bytes());
    b[12] = h.date.month;
    b[13] = h.date.day;
    b[14] = h.date.hour;
    b[15] = h.date.minute;
    b[16] = h.date.second;
    b[17] = h.date.pad;
    b[18..22].copy_from_slice(&h.level.to_le_bytes());
    b[22..26].copy_from_slice(&h.n_empties.to_le_bytes());
    b[26..30].copy_from_slice(&h.midgame_error.to_le_bytes());
    b[30..34].copy_from_slice(&h.endcut_error.to_le_bytes());
    b[34..38].copy_from_slice(&h.verbosity.to_le_bytes());
    let n = i32::try_from(n_nodes).unwrap_or(i32::MAX);
    b[38..42].copy_from_slice(&n.to_le_bytes());
    b
}

/// Append the `book.dat` record of `id` (its 40 fixed bytes, links and leaf) to `out`.
fn push_record(out: &mut Vec<u8>, book: &MemBook, id: NodeId) {
    let b = book.board(id);
    let c = book.counts(id);
    let s = book.score(id);
    out.extend_from_slice(&b.player.to_le_bytes());
    out.extend_from_slice(&b.opponent.to_le_bytes());
    out.extend_from_slice(&c.n_wins.to_le_bytes());
    out.extend_from_slice(&c.n_draws.to_le_bytes());
    out.extend_from_slice(&c.n_losses.to_le_bytes());
    out.extend_from_slice(&c.n_lines.to_le_bytes());
    out.extend_from_slice(&s.value.to_le_bytes());
    out.extend_from_slice(&s.lower.to_le_bytes());
    out.extend_from_slice(&s.upper.to_le_bytes());
    out.push(book.n_link(id) as u8);
    out.push(book.level(id));
    for l in book.links(id) {
        out.extend_from_slice(&l.to_bytes());
    }
    out.extend_from_slice(&book.leaf(id).to_bytes());
}

/// The `book.dat` image of `book`: its header as stored (date included; stamp it before saving
/// if wanted) with `n_nodes` = the number of positions, then the records in bucket order.
pub fn book_to_bytes(book: &MemBook) -> Vec<u8> {
    let order = bucket_order(book);
    let mut out = Vec::with_capacity(HEADER_SIZE + book.len() * 44 + book.n_links() * 2);
    out.extend_from_slice(&header_bytes(book.header(), book.len()));
    for id in order {
        push_record(&mut out, book, id);
    }
    out
}

/// Write `book` as a `book.dat` to `w` with the records in the book's own (insertion) order
/// instead of Edax's bucket order: Edax and [`read_book`] read it, and reading it back keeps the
/// order (the coordinator's store keeps its base book so).
pub fn write_book_in_order<W: Write>(book: &MemBook, w: &mut W) -> io::Result<()> {
    w.write_all(&header_bytes(book.header(), book.len()))?;
    let mut buf = Vec::with_capacity(1 << 16);
    for id in book.ids() {
        push_record(&mut buf, book, id);
        if buf.len() >= 1 << 15 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)
}

/// Write `book` as `book.dat` to `w` (see [`book_to_bytes`]).
pub fn write_book<W: Write>(book: &MemBook, w: &mut W) -> io::Result<()> {
    w.write_all(&book_to_bytes(book))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_test_vector() {
        let s = Board::start();
        assert_eq!(crc32c_u64(0, s.player), 0x7966_0235);
        assert_eq!(crc32c_u64(0x7966_0235, s.opponent), 0xA176_709E);
        assert_eq!(edax_hash(&s) & 0xffff, 28830);
    }

    #[test]
    fn sorting_a_subset_in_bucket_order_equals_filtering_the_whole_order() {
        use crate::synth::{SynthParams, random_book};
        let book = random_book(SynthParams {
            seed: 7,
            positions: 3_000,
            plies: 30,
            level: None,
        });
        let all = bucket_order(&book);
        assert_eq!(sort_in_bucket_order(&book, book.ids()), all);
        for step in [2usize, 7, 31] {
            let subset: Vec<NodeId> = book
                .ids()
                .filter(|id| (id.0 as usize).is_multiple_of(step))
                .collect();
            let mut shuffled = subset.clone();
            shuffled.reverse();
            shuffled.extend_from_slice(&subset[..subset.len() / 3]);
            let want: Vec<NodeId> = all
                .iter()
                .copied()
                .filter(|id| subset.contains(id))
                .collect();
            assert_eq!(
                sort_in_bucket_order(&book, shuffled),
                want,
                "every {step}th id"
            );
        }
    }

    #[test]
    fn bucket_counts() {
        assert_eq!(bucket_count(0), 65536);
        assert_eq!(bucket_count(16 * 65536), 65536);
        assert_eq!(bucket_count(16 * 65536 + 1), 131072);
    }

    #[test]
    fn one_position_roundtrip_and_spec_header() {
        let mut h = BookHeader::new(21, 37);
        h.date = BookDate {
            year: 2026,
            month: 11,
            day: 22,
            hour: 5,
            minute: 1,
            second: 18,
            pad: 0,
        };
        let mut book = MemBook::new(h);
        book.insert_new(&Position::new(Board::start(), 21));
        let bytes = book_to_bytes(&book);
        let expect_header = [
            0x58, 0x41, 0x44, 0x45, 0x4b, 0x4f, 0x4f, 0x42, 0x04, 0x06, 0xea, 0x07, 0x0b, 0x16,
            0x05, 0x01, 0x12, 0x00, 0x15, 0, 0, 0, 0x18, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
            0, 1, 0, 0, 0,
        ];
        assert_eq!(bytes[..HEADER_SIZE], expect_header);
        assert_eq!(bytes.len(), HEADER_SIZE + 42);
        let back = read_book(&bytes).expect("read back");
        assert_eq!(back.header(), book.header());
        assert_eq!(back.get(&Board::start()), book.get(&Board::start()));
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(
            read_book(b"short"),
            Err(ReadError::TruncatedHeader { len: 5 })
        ));
        let mut book = MemBook::new(BookHeader::new(2, 12));
        book.insert_new(&Position::new(Board::start(), 2));
        let good = book_to_bytes(&book);
        let mut bad = good.clone();
        bad[0] ^= 1;
        assert_eq!(read_book(&bad).err(), Some(ReadError::BadMagic));
        let mut bad = good.clone();
        bad[8] = 3;
        assert_eq!(
            read_book(&bad).err(),
            Some(ReadError::BadVersion { version: 3 })
        );
        let bad = &good[..good.len() - 1];
        assert!(matches!(
            read_book(bad),
            Err(ReadError::TruncatedRecord { offset: 42, .. })
        ));
        let mut bad = good.clone();
        bad[42 + 8 + 3] |= 0x10; // opponent gets e4 (bit 28), which the player holds
        assert!(matches!(read_book(&bad), Err(ReadError::Overlap { .. })));
        let mut bad = good.clone();
        bad[38] = 2;
        assert!(matches!(
            read_book(&bad),
            Err(ReadError::CountMismatch {
                expected: 2,
                found: 1,
                ..
            })
        ));
        // Leaf a1 is illegal at the start.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] = 0;
        assert!(matches!(
            read_book(&bad),
            Err(ReadError::IllegalLeaf { offset: 82, .. })
        ));
        // Duplicate record.
        let mut dup = good.clone();
        dup.extend_from_slice(&good[HEADER_SIZE..]);
        dup[38] = 2;
        assert!(matches!(
            read_book(&dup),
            Err(ReadError::DuplicatePosition { offset: 84, .. })
        ));
    }
}
