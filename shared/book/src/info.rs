//! The facts of Edax's `book info` (edax-spec §5.3).

use crate::edax::{bucket_count, edax_hash};
use crate::mem::MemBook;
use bookfarm_engine::Move;
use std::fmt;

/// What `book info` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookInfo {
    /// Header version and release (`Edax Book 4.6`).
    pub version: (u8, u8),
    /// Book date: year, month, day, hour, minute, second.
    pub date: (i16, u8, u8, u8, u8, u8),
    /// Number of positions.
    pub positions: usize,
    /// Number of links.
    pub links: usize,
    /// Number of positions whose leaf move is not NOMOVE.
    pub leaves: usize,
    /// Positions per level, for each level present, ascending.
    pub levels: Vec<(u8, usize)>,
    /// `61 - n_empties`.
    pub depth: i32,
    /// Edax's memory estimate: `positions*64 + buckets*16 + links*2` (x86-64 sizes).
    pub memory: usize,
    /// Smallest bucket size, positions / buckets (integer), largest bucket size.
    pub hash_balance: (usize, usize, usize),
}

impl BookInfo {
    /// Gather the facts of `book`.
    pub fn of(book: &MemBook) -> BookInfo {
        let h = book.header();
        let mut per_level = [0usize; 256];
        let mut leaves = 0;
        let n = bucket_count(book.len());
        let mut buckets = vec![0u32; n];
        for id in book.ids() {
            per_level[usize::from(book.level(id))] += 1;
            if book.leaf(id).mv != Move::None {
                leaves += 1;
            }
            buckets[(edax_hash(&book.board(id)) & (n as u64 - 1)) as usize] += 1;
        }
        let min = buckets.iter().copied().min().unwrap_or(0) as usize;
        let max = buckets.iter().copied().max().unwrap_or(0) as usize;
        BookInfo {
            version: (h.version, h.release),
            date: (
                h.date.year,
                h.date.month,
                h.date.day,
                h.date.hour,
                h.date.minute,
                h.date.second,
            ),
            positions: book.len(),
            links: book.n_links(),
            leaves,
            levels: per_level
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(l, &c)| (l as u8, c))
                .collect(),
            depth: 61 - h.n_empties,
            memory: book.len() * 64 + n * 16 + book.n_links() * 2,
            hash_balance: (min, book.len() / n, max),
        }
    }
}

impl fmt::Display for BookInfo {
    /// Edax's text, one fact per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s) = self.date;
        writeln!(
            f,
            "Edax Book {}.{}; {}-{}-{} {}:{:02}:{:02};",
            self.version.0, self.version.1, y, mo, d, h, mi, s
        )?;
        writeln!(
            f,
            "Positions: {} (moves = {} links + {} leaves);",
            self.positions, self.links, self.leaves
        )?;
        for &(l, c) in &self.levels {
            writeln!(f, "Level {l} : {c} nodes")?;
        }
        writeln!(f, "Depth: {}", self.depth)?;
        writeln!(f, "Memory occupation: {}", self.memory)?;
        let (a, b, c) = self.hash_balance;
        writeln!(f, "Hash balance: {a} < {b} < {c}")
    }
}
