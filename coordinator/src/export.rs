//! Book snapshots to and from Edax's formats, through the book crate's readers and writers.

use bookfarm_book::edax::{ReadError, book_to_bytes, read_book};
use bookfarm_book::{BookHeader, MemBook, Position, csv};
use std::path::Path;

/// Output format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Edax `book.dat` (4.6 bucket order).
    Edax,
    /// Edax CSV (board, level, leaf).
    Csv,
}

impl ExportFormat {
    /// `.csv` → CSV, anything else → book.dat.
    pub fn from_path(p: &Path) -> ExportFormat {
        match p.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => ExportFormat::Csv,
            _ => ExportFormat::Edax,
        }
    }
}

/// A [`MemBook`] holding a snapshot.
pub fn to_mem_book(header: BookHeader, positions: &[Position]) -> MemBook {
    let mut book = MemBook::with_capacity(header, positions.len(), positions.len() * 2);
    for p in positions {
        book.insert_new(p);
    }
    book
}

/// Encode a snapshot (the header date is stamped with the current time, as Edax's save does).
pub fn encode(header: BookHeader, positions: &[Position], format: ExportFormat) -> Vec<u8> {
    encode_book(to_mem_book(header, positions), format)
}

/// Encode a book (for example [`crate::service::Coordinator::book_snapshot`]), stamping the
/// header date with the current time as Edax's save does.
pub fn encode_book(mut book: MemBook, format: ExportFormat) -> Vec<u8> {
    book.header_mut().date = bookfarm_book::BookDate::now();
    match format {
        ExportFormat::Edax => book_to_bytes(&book),
        ExportFormat::Csv => csv::export_csv(&book).into_bytes(),
    }
}

/// Decode an Edax `book.dat` image.
pub fn decode(bytes: &[u8]) -> Result<(BookHeader, Vec<Position>), ReadError> {
    let book = read_book(bytes)?;
    Ok((*book.header(), book.positions().collect()))
}
