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

/// What `book stats` reports (edax-spec §5.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookStats {
    /// (bucket size, number of buckets of that size), ascending.
    pub hash: Vec<(usize, usize)>,
    /// Per number of empties, ascending: (empties, positions, links, leaves, terminal nodes).
    /// Leaves are positions whose leaf move is not NOMOVE; terminal nodes have no link.
    pub stages: Vec<(u32, usize, usize, usize, usize)>,
    /// (value, positions), ascending.
    pub scores: Vec<(i16, usize)>,
}

impl BookStats {
    /// Gather the statistics of `book`.
    pub fn of(book: &MemBook) -> BookStats {
        use std::collections::BTreeMap;
        let n = bucket_count(book.len());
        let mut buckets = vec![0usize; n];
        let mut stages: BTreeMap<u32, (usize, usize, usize, usize)> = BTreeMap::new();
        let mut scores: BTreeMap<i16, usize> = BTreeMap::new();
        for id in book.ids() {
            let b = book.board(id);
            buckets[(edax_hash(&b) & (n as u64 - 1)) as usize] += 1;
            let s = stages.entry(b.empties()).or_default();
            s.0 += 1;
            s.1 += book.n_link(id);
            s.2 += usize::from(book.leaf(id).mv != Move::None);
            s.3 += usize::from(book.n_link(id) == 0);
            *scores.entry(book.score(id).value).or_default() += 1;
        }
        let mut hash: BTreeMap<usize, usize> = BTreeMap::new();
        for &c in &buckets {
            *hash.entry(c).or_default() += 1;
        }
        BookStats {
            hash: hash.into_iter().collect(),
            stages: stages
                .into_iter()
                .map(|(e, (p, l, v, t))| (e, p, l, v, t))
                .collect(),
            scores: scores.into_iter().collect(),
        }
    }
}

impl fmt::Display for BookStats {
    /// Edax's text (bucket sizes of 255 and more are summed on one `>` line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\n\nBook statistics:\n\nHash distribution:\nindex    positions\n"
        )?;
        let big: usize = self
            .hash
            .iter()
            .filter(|&&(s, _)| s >= 255)
            .map(|&(_, c)| c)
            .sum();
        for &(size, count) in self.hash.iter().filter(|&&(s, _)| s < 255) {
            writeln!(f, "{size:5} {count:12}")?;
        }
        if big > 0 {
            writeln!(f, ">{:4} {big:12}", 255)?;
        }
        write!(
            f,
            "\nStage distribution:\nstage    positions        links       leaves      terminal nodes\n"
        )?;
        for &(e, p, l, v, t) in &self.stages {
            writeln!(f, "{e:5} {p:12} {l:12} {v:12} {t:12}")?;
        }
        write!(f, "\nBest Score Distribution:\nScore    positions\n")?;
        for &(s, c) in &self.scores {
            writeln!(f, "{s:+5} {c:12}")?;
        }
        Ok(())
    }
}
