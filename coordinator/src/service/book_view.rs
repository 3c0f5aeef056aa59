//! Read-only views of the book for the web UI's explorer: one position as `book show` sees it
//! (the same book-crate functions), whether it is being searched, and whole-book statistics.

use super::Coordinator;
use bookfarm_book::mem::Counts;
use bookfarm_book::query::{BookMove, book_moves, game_stats};
use bookfarm_engine::Board;
use bookfarm_engine::symmetry::canonical;
use std::collections::BTreeMap;

/// Whether a search of a position is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searching {
    /// Waiting for a worker.
    Queued,
    /// Leased to a worker.
    Leased,
}

impl Searching {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Searching::Queued => "queued",
            Searching::Leased => "leased",
        }
    }
}

/// A book position as `book show` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookEntryView {
    /// Level of the position.
    pub level: u8,
    /// Best score and its bounds.
    pub value: i16,
    /// Lower bound.
    pub lower: i16,
    /// Upper bound.
    pub upper: i16,
    /// Book moves in the queried board's orientation, best first (`book show`'s order).
    pub moves: Vec<BookMove>,
    /// Wins, draws, losses and lines below (Edax's game statistics).
    pub counts: Counts,
}

/// One position of the explorer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionView {
    /// The book's record of it (None: not in the book).
    pub entry: Option<BookEntryView>,
    /// A search of it queued or leased now.
    pub searching: Option<Searching>,
}

/// Whole-book statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BookStats {
    /// Positions.
    pub positions: u64,
    /// Links.
    pub links: u64,
    /// Positions with a leaf move.
    pub leaves: u64,
    /// Positions per (level, ply), ascending.
    pub by_level_ply: Vec<(u8, u8, u64)>,
    /// Positions per best score, ascending.
    pub best_scores: Vec<(i16, u64)>,
}

impl Coordinator {
    /// The book's view of `board` (any orientation; moves are given in its orientation).
    pub fn position_view(&self, board: &Board) -> PositionView {
        let entry = {
            let g = self.growth();
            book_moves(&g.book, board).map(|(id, moves)| {
                let s = g.book.score(id);
                BookEntryView {
                    level: g.book.level(id),
                    value: s.value,
                    lower: s.lower,
                    upper: s.upper,
                    moves,
                    counts: game_stats(&g.book, id),
                }
            })
        };
        let key = canonical(board).0;
        let searching = self
            .jobs()
            .jobs
            .values()
            .filter(|j| canonical(&j.key.board).0 == key)
            .map(|j| {
                if !j.leases.is_empty() {
                    Searching::Leased
                } else {
                    Searching::Queued
                }
            })
            .max_by_key(|s| *s == Searching::Leased);
        PositionView { entry, searching }
    }

    /// Positions per level and ply, the best-score distribution and the counts (one pass over
    /// the book under the growth lock: callers cache it).
    pub fn book_stats(&self) -> BookStats {
        let g = self.growth();
        let book = &g.book;
        let mut cells: BTreeMap<(u8, u8), u64> = BTreeMap::new();
        let mut scores: BTreeMap<i16, u64> = BTreeMap::new();
        let mut leaves = 0;
        for id in book.ids() {
            let b = book.board(id);
            let ply = u8::try_from((b.player | b.opponent).count_ones().saturating_sub(4))
                .unwrap_or(u8::MAX);
            *cells.entry((book.level(id), ply)).or_default() += 1;
            *scores.entry(book.score(id).value).or_default() += 1;
            leaves += u64::from(book.leaf(id).mv != bookfarm_engine::Move::None);
        }
        BookStats {
            positions: book.len() as u64,
            links: book.n_links() as u64,
            leaves,
            by_level_ply: cells.into_iter().map(|((l, p), n)| (l, p, n)).collect(),
            best_scores: scores.into_iter().collect(),
        }
    }
}
