//! The storage abstraction: a minimal, object-safe key-value view of a book, keyed by canonical
//! board. [`crate::MemBook`] is the implementation used by the algorithms, the file formats and
//! the tests; the coordinator's store loads into and writes from a `MemBook` as a whole (a base
//! of `book.dat` records plus the positions changed since), rather than position by position.

use crate::model::{BookHeader, Position};
use bookfarm_engine::Board;
use bookfarm_engine::symmetry::canonical;

/// Errors of a [`BookStore`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A position whose board is not in canonical form was offered for storage.
    #[error("board {board} is not in canonical form")]
    NotCanonical {
        /// The offending board.
        board: Board,
    },
    /// The storage backend failed (IO, corruption, …).
    #[error("store backend: {source}")]
    Backend {
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Check that `board` is canonical, as every stored board must be.
pub fn ensure_canonical(board: &Board) -> Result<(), StoreError> {
    if canonical(board).0 == *board {
        Ok(())
    } else {
        Err(StoreError::NotCanonical { board: *board })
    }
}

/// A book: the header plus positions keyed by their canonical board.
///
/// Boards passed in and out are canonical (edax-spec §1.4); `put` rejects others with
/// [`StoreError::NotCanonical`]. Implementations do not interpret the positions: negamax and
/// the selectors run on [`crate::MemBook`]. Iteration order is the implementation's (for `MemBook`: insertion order).
pub trait BookStore {
    /// The book header.
    fn header(&self) -> Result<BookHeader, StoreError>;
    /// Replace the book header.
    fn set_header(&mut self, header: BookHeader) -> Result<(), StoreError>;
    /// The position stored under `board`, if any.
    fn get(&self, board: &Board) -> Result<Option<Position>, StoreError>;
    /// Insert `position`, or replace the one with the same board (keeping its place in the order).
    fn put(&mut self, position: Position) -> Result<(), StoreError>;
    /// Remove and return the position stored under `board`.
    fn remove(&mut self, board: &Board) -> Result<Option<Position>, StoreError>;
    /// Whether a position is stored under `board`.
    fn contains(&self, board: &Board) -> Result<bool, StoreError>;
    /// Number of positions.
    fn len(&self) -> Result<usize, StoreError>;
    /// Whether the book holds no position.
    fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
    }
    /// Every position, in the store's order.
    fn iter(&self) -> Box<dyn Iterator<Item = Result<Position, StoreError>> + '_>;
}

/// Copy the header and every position of `src` into `dst` (positions already in `dst` are
/// replaced). Returns the number of positions copied.
pub fn copy_book(src: &dyn BookStore, dst: &mut dyn BookStore) -> Result<usize, StoreError> {
    dst.set_header(src.header()?)?;
    let mut n = 0;
    for p in src.iter() {
        dst.put(p?)?;
        n += 1;
    }
    Ok(n)
}
