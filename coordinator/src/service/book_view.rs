//! Read-only views of the book for the web UI's explorer: one position as `book show` sees it
//! (the same book-crate functions), whether it is being searched, every legal move with its
//! grade and umigame numbers (`bookfarm_book::explore`, memoized per book revision), a game's
//! losses, the subtree and lines below a position, and whole-book statistics.
//!
//! Everything reads the in-memory book under the growth lock, for a bounded time: the
//! explorer's walks have a budget per call (`ServiceConfig::explorer`), exports a size limit.

use super::Coordinator;
use bookfarm_book::explore::{self, GameAnalysis, IllegalGameMove, PositionInfo, TooManyLines};
use bookfarm_book::maintain::{SubtreeTooBig, subtree_copy};
use bookfarm_book::mem::Counts;
use bookfarm_book::query::{BookMove, book_moves, game_stats};
use bookfarm_book::umigame::UmigameOptions;
use bookfarm_book::{BookDate, BookFormat, MemBook};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
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
    /// Its full-width searches whose results are confirmed, lowest level first (see
    /// [`super::search`]).
    pub analysis: Vec<super::search::Analysis>,
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

/// A subtree of the book to download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubtreeExport {
    /// A book file of this format.
    Book(BookFormat),
    /// The lines below the position, one transcript a line.
    Lines,
}

/// A subtree that cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The position is not in the book.
    #[error("this position is not in the book")]
    NotInBook,
    /// Too many positions.
    #[error("{0}: export a deeper position")]
    TooBig(#[from] SubtreeTooBig),
    /// Too many lines.
    #[error("{0}: export a deeper position")]
    TooManyLines(#[from] TooManyLines),
}

/// Most positions a subtree export holds (a `.dat` of about 10 MB).
pub const EXPORT_MAX_POSITIONS: usize = 200_000;

/// Most lines a line-list export holds.
pub const EXPORT_MAX_LINES: usize = 100_000;

impl Coordinator {
    /// A growth program is running (not paused): the book changes while one looks at it.
    pub fn growing(&self) -> bool {
        let g = self.growth();
        g.is_running() && !g.paused
    }

    /// `board` (any orientation; `black`: Black to move) as the explorer shows it: every legal
    /// move with its value, grade, level, lines and umigame numbers under `options`, the
    /// position's own grade and numbers, and the principal variation. Grades and numbers not
    /// found within the configured work come back pending or as lower bounds; what was found is
    /// kept until the book changes, so asking again completes them.
    pub fn explore(&self, board: &Board, black: bool, options: UmigameOptions) -> PositionInfo {
        let g = self.growth();
        let mut memo = self.0.explorer.lock().unwrap_or_else(|p| p.into_inner());
        memo.position(&g.book, board, black, options, self.0.cfg.explorer)
    }

    /// Forget the explorer's grades and umigame numbers (they are recomputed on demand).
    pub fn drop_explorer_memo(&self) {
        self.0
            .explorer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The book's view of a game from the start (every pass written): each move's value and
    /// loss, the score after it, where it left the book.
    pub fn analyze_game(&self, moves: &[Move]) -> Result<GameAnalysis, IllegalGameMove> {
        explore::analyze_game(&self.growth().book, moves)
    }

    /// The subtree below `board` (reached from the start by `line`) as a file: a book of the
    /// positions reachable through links (at most [`EXPORT_MAX_POSITIONS`], dated now, written
    /// by the book crate's format owner), or its lines (at most [`EXPORT_MAX_LINES`], each the
    /// whole transcript from the start).
    pub fn export_subtree(
        &self,
        board: &Board,
        line: &[Move],
        what: SubtreeExport,
    ) -> Result<Vec<u8>, ExportError> {
        match what {
            SubtreeExport::Book(format) => {
                let mut book: MemBook = {
                    let g = self.growth();
                    if g.book.probe(board).is_none() {
                        return Err(ExportError::NotInBook);
                    }
                    subtree_copy(&g.book, board, EXPORT_MAX_POSITIONS)?
                };
                book.header_mut().date = BookDate::now();
                Ok(format.write(&book))
            }
            SubtreeExport::Lines => {
                let lines = {
                    let g = self.growth();
                    if g.book.probe(board).is_none() {
                        return Err(ExportError::NotInBook);
                    }
                    explore::book_lines(&g.book, board, line, EXPORT_MAX_LINES)?
                };
                let mut out = String::new();
                for l in lines {
                    for m in l {
                        out.push_str(&match m {
                            Move::Pass => "pa".to_string(),
                            m => m.to_edax_upper().to_ascii_lowercase(),
                        });
                    }
                    out.push('\n');
                }
                Ok(out.into_bytes())
            }
        }
    }

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
        PositionView {
            entry,
            searching,
            analysis: self.analysis(board),
        }
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
