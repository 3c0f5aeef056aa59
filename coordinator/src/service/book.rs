//! The book in and out: a new book's positions, importing a book (replacing the one served),
//! and the reads of export, `book show` and `book info` (all from the in-memory book).

use super::Coordinator;
use super::growth::{Growth, Replay};
use crate::error::{CoordinatorError, Result};
use crate::store::Entry;
use bookfarm_book::model::{BookHeader, Position};
use bookfarm_engine::formats::transcript::board_after;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::sync::atomic::Ordering;

/// The positions of a new book (`book new LEVEL DEPTH`): the start position, not searched yet
/// (opening the store queues its search).
pub fn new_book(level: u8, depth: u8) -> (BookHeader, Vec<Entry>) {
    let header = BookHeader::new(i32::from(level), i32::from(depth));
    let start = Position::new(Board::start(), level.min(60));
    (header, vec![Entry::new(start)])
}

/// [`new_book`] as an in-memory book (what serial builds outside a store start from).
pub fn new_mem_book(level: u8, depth: u8) -> bookfarm_book::MemBook {
    let (header, entries) = new_book(level, depth);
    let mut book = bookfarm_book::MemBook::new(header);
    for e in entries {
        book.put_position(&e.pos);
    }
    book
}

impl Coordinator {
    /// Replace the book by imported positions (refused while an expansion runs or jobs are out).
    pub fn import(&self, header: BookHeader, positions: Vec<Position>) -> Result<u64> {
        let mut book =
            bookfarm_book::MemBook::with_capacity(header, positions.len(), positions.len());
        for p in &positions {
            book.put_position(p);
        }
        self.import_book(book)
    }

    /// Replace the book by `book` (refused while an expansion runs or jobs are out).
    pub fn import_book(&self, book: bookfarm_book::MemBook) -> Result<u64> {
        let mut growth = self.growth();
        let mut jobs = self.jobs();
        if (growth.is_running() && !growth.paused) || jobs.in_flight > 0 {
            return Err(CoordinatorError::FailedPrecondition(
                "cannot import while an expansion is running (pause it and let workers drain)"
                    .into(),
            ));
        }
        // The checkpoint in flight belongs to the old book: applied before the new one.
        let writer = growth.set_writer(None);
        self.0.store.create_book(&book)?;
        // A new book starts a new program list (numbered from 1): the programs queued for
        // the old book do not run on this one.
        *growth = Growth::load(
            book,
            None,
            Default::default(),
            None,
            Default::default(),
            Replay::load(None),
        )?;
        growth.set_writer(writer);
        // The old book's cases, vouchers and provisional results go with it; the standings
        // stay (the store carries them into the new book's tree).
        jobs.trust.clear_cases();
        jobs.trust.sources.clear();
        jobs.trust.watch = Default::default();
        self.0.paused.store(false, Ordering::SeqCst);
        let n = growth.book.len() as u64;
        jobs.clear_jobs();
        Ok(n)
    }

    /// A consistent snapshot of the book: header and every position.
    pub fn snapshot(&self) -> (BookHeader, Vec<Position>) {
        let g = self.growth();
        (*g.book.header(), g.book.positions().collect())
    }

    /// A backup of the whole store ([`crate::store::backup`]) in an unnamed temporary file,
    /// rewound, with its length: writes wait while the local copy is taken.
    pub fn backup(&self) -> Result<(std::fs::File, u64, crate::store::backup::BackupSummary)> {
        Ok(self.0.store.backup_file()?)
    }

    /// A copy of the book (export, offline commands).
    pub fn book_snapshot(&self) -> bookfarm_book::MemBook {
        let mut book = self.growth().book.clone();
        book.drop_parent_index();
        book
    }

    /// The book's revision now: equal revisions mean the same book (see
    /// [`bookfarm_book::Revision`]).
    pub fn book_revision(&self) -> bookfarm_book::Revision {
        self.growth().book.revision()
    }

    /// A copy of the book and the revision it is a copy of (taken under one lock: the copy is
    /// exactly that revision).
    pub fn book_snapshot_at(&self) -> (bookfarm_book::Revision, bookfarm_book::MemBook) {
        let g = self.growth();
        let mut book = g.book.clone();
        book.drop_parent_index();
        (g.book.revision(), book)
    }

    /// The book position reached by a move list from the start (canonical coordinates).
    pub fn show(&self, moves: &str) -> Result<Option<Position>> {
        let b = board_after(moves)
            .map_err(|e| CoordinatorError::InvalidArgument(format!("move list: {e}")))?;
        let b = canonical(&b).0;
        Ok(self.growth().book.get(&b))
    }

    /// Header plus counts: (header, positions, links, leaves).
    pub fn info(&self) -> (BookHeader, u64, u64, u64) {
        let g = self.growth();
        let book = &g.book;
        let leaves = book
            .ids()
            .filter(|&id| book.leaf(id).mv != Move::None)
            .count();
        (
            *book.header(),
            book.len() as u64,
            book.n_links() as u64,
            leaves as u64,
        )
    }

    /// Heap bytes of the in-memory book (positions, links, hash table, parent index).
    pub fn book_heap_bytes(&self) -> usize {
        self.growth().book.heap_bytes()
    }

    /// Number of known leaf results (the result store).
    pub fn stored_results(&self) -> usize {
        self.growth().results.len()
    }
}
