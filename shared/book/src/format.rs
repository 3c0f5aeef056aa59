//! Book files: the formats a whole book is read from and written to, chosen by the file
//! extension. Every command and RPC that reads or writes a book file goes through
//! [`BookFormat`], so a format is added, or an extension refused, in one place.
//!
//! * [`BookFormat::Edax`] (`.dat`): Edax's `book.dat` ([`crate::edax`]), read as stored (the
//!   header date included) and written in Edax 4.6 bucket order;
//! * [`BookFormat::Csv`] (`.csv`): Edax's CSV ([`crate::csv`]), linked, negamaxed and sorted on
//!   reading, as Edax's `book import` does (without searching leaves: that needs the engine);
//! * [`BookFormat::Egbk3`] (`.egbk3`): Egaroucid's book ([`crate::egbk3`]), mapped to the Edax
//!   model, linked, negamaxed and sorted on reading.
//!
//! A book read from CSV or `.egbk3` is stamped with the current date (those files have none).
//! Writing never stamps: the caller decides (an export stamps the current date, as Edax's save
//! does; a conversion keeps the header it read).

use crate::csv::{CsvError, export_csv, import_csv};
use crate::edax::{ReadError, book_to_bytes, read_book};
use crate::egbk3::{Egbk3Error, ImportReport};
use crate::mem::MemBook;
use crate::model::BookDate;
use crate::negamax::{link_all, negamax, sort_links};
use std::path::Path;

/// A book file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BookFormat {
    /// Edax's `book.dat`.
    Edax,
    /// Edax's CSV (board, level, leaf).
    Csv,
    /// Egaroucid's `.egbk3`.
    Egbk3,
}

/// A book file that cannot be read, or a file name whose format is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The file name has no extension of a book format.
    #[error("unknown book format (expected a .dat, .csv or .egbk3 extension)")]
    UnknownExtension,
    /// A `book.dat` that cannot be read.
    #[error(transparent)]
    Edax(#[from] ReadError),
    /// A CSV file that is not UTF-8 text.
    #[error("at byte {0}: not UTF-8 text")]
    NotUtf8(usize),
    /// A CSV line that cannot be read.
    #[error(transparent)]
    Csv(#[from] CsvError),
    /// A `.egbk3` file that cannot be read.
    #[error(transparent)]
    Egbk3(#[from] Egbk3Error),
}

/// A book read from a file, with what the conversion noticed.
#[derive(Debug, Clone)]
pub struct ReadBook {
    /// The book.
    pub book: MemBook,
    /// For a `.egbk3` file: what its mapping to the Edax model did (records dropped,
    /// positions that need a leaf search, …).
    pub egbk3: Option<ImportReport>,
}

impl BookFormat {
    /// Every format, in the order of their extensions in messages.
    pub const ALL: [BookFormat; 3] = [BookFormat::Edax, BookFormat::Csv, BookFormat::Egbk3];

    /// The file extension (without the dot).
    pub fn extension(self) -> &'static str {
        match self {
            BookFormat::Edax => "dat",
            BookFormat::Csv => "csv",
            BookFormat::Egbk3 => "egbk3",
        }
    }

    /// The format of an extension (without the dot, any case).
    pub fn from_extension(ext: &str) -> Option<BookFormat> {
        BookFormat::ALL
            .into_iter()
            .find(|f| ext.eq_ignore_ascii_case(f.extension()))
    }

    /// The format of a file name, by its extension; [`FormatError::UnknownExtension`] for any
    /// other name.
    pub fn from_path(path: &Path) -> Result<BookFormat, FormatError> {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(BookFormat::from_extension)
            .ok_or(FormatError::UnknownExtension)
    }

    /// Read a whole file's bytes (see the [module docs](self) for what each format does).
    pub fn read(self, bytes: &[u8]) -> Result<ReadBook, FormatError> {
        match self {
            BookFormat::Edax => Ok(ReadBook {
                book: read_book(bytes)?,
                egbk3: None,
            }),
            BookFormat::Csv => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| FormatError::NotUtf8(e.valid_up_to()))?;
                let mut book = import_csv(text)?;
                link_all(&mut book);
                negamax(&mut book);
                sort_links(&mut book);
                book.header_mut().date = BookDate::now();
                Ok(ReadBook { book, egbk3: None })
            }
            BookFormat::Egbk3 => {
                let records = crate::egbk3::read(bytes)?;
                let (mut book, report) = crate::egbk3::to_book(&records);
                book.header_mut().date = BookDate::now();
                Ok(ReadBook {
                    book,
                    egbk3: Some(report),
                })
            }
        }
    }

    /// The bytes of `book` in this format.
    pub fn write(self, book: &MemBook) -> Vec<u8> {
        match self {
            BookFormat::Edax => book_to_bytes(book),
            BookFormat::Csv => export_csv(book).into_bytes(),
            BookFormat::Egbk3 => crate::egbk3::write(&crate::egbk3::from_book(book)),
        }
    }
}

impl std::fmt::Display for BookFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BookFormat::Edax => "Edax book.dat",
            BookFormat::Csv => "Edax CSV",
            BookFormat::Egbk3 => "Egaroucid .egbk3",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BookHeader, Link, Position};
    use bookfarm_engine::{Board, Move, Square};

    fn sq(s: &str) -> Move {
        Move::Square(Square::parse(s).expect("square"))
    }

    /// The start position with a leaf, its F5 child with a leaf, linked and negamaxed.
    fn small_book() -> MemBook {
        let mut book = MemBook::new(BookHeader::new(2, 12));
        let mut root = Position::new(Board::start(), 2);
        root.leaf = Link::new(0, sq("d3"));
        book.insert_new(&root);
        let child = bookfarm_engine::symmetry::canonical(&crate::mem::child_board(
            &Board::start(),
            sq("f5"),
        ))
        .0;
        let mut p = Position::new(child, 2);
        let first = bookfarm_engine::board::BitIter(child.moves())
            .next()
            .expect("a legal move");
        p.leaf = Link::new(-1, Move::Square(first));
        book.insert_new(&p);
        link_all(&mut book);
        negamax(&mut book);
        sort_links(&mut book);
        book
    }

    #[test]
    fn the_extension_names_the_format_and_nothing_else_is_accepted() {
        for (name, want) in [
            ("book.dat", Some(BookFormat::Edax)),
            ("dir.d/BOOK.DAT", Some(BookFormat::Edax)),
            ("b.csv", Some(BookFormat::Csv)),
            ("b.Csv", Some(BookFormat::Csv)),
            ("b.egbk3", Some(BookFormat::Egbk3)),
            ("b.EGBK3", Some(BookFormat::Egbk3)),
            ("b.txt", None),
            ("b.dat.gz", None),
            ("book", None),
            ("egbk3", None),
            ("", None),
        ] {
            let got = BookFormat::from_path(Path::new(name));
            match want {
                Some(f) => assert_eq!(got, Ok(f), "{name}"),
                None => assert_eq!(got, Err(FormatError::UnknownExtension), "{name}"),
            }
        }
        assert_eq!(
            FormatError::UnknownExtension.to_string(),
            "unknown book format (expected a .dat, .csv or .egbk3 extension)"
        );
        for f in BookFormat::ALL {
            assert_eq!(BookFormat::from_extension(f.extension()), Some(f));
        }
    }

    #[test]
    fn every_format_reads_back_what_it_wrote() {
        let book = small_book();
        let positions = |b: &MemBook| {
            let mut v: Vec<Position> = b.positions().collect();
            v.sort_by_key(|p| p.board);
            v
        };
        for f in BookFormat::ALL {
            let bytes = f.write(&book);
            let back = f.read(&bytes).expect("read back");
            assert_eq!(positions(&back.book), positions(&book), "{f}");
            assert_eq!(back.egbk3.is_some(), f == BookFormat::Egbk3, "{f}");
            // Writing what was read gives the same bytes.
            assert_eq!(f.write(&back.book), bytes, "{f}");
        }
        // Only book.dat keeps the header (CSV and .egbk3 have none).
        let dat = BookFormat::Edax
            .read(&BookFormat::Edax.write(&book))
            .expect("dat");
        assert_eq!(dat.book.header(), book.header());
    }

    #[test]
    fn bad_bytes_are_refused_with_the_place() {
        let e = BookFormat::Edax.read(b"EDAX").expect_err("short");
        assert!(
            e.to_string().starts_with("at byte 4: truncated header"),
            "{e}"
        );
        let e = BookFormat::Csv.read(b"ab\xffcd").expect_err("not utf-8");
        assert_eq!(e, FormatError::NotUtf8(2));
        assert_eq!(e.to_string(), "at byte 2: not UTF-8 text");
        let e = BookFormat::Csv.read(b"xx\n").expect_err("bad csv");
        assert_eq!(e.to_string(), "line 1: board has only 2 cells");
        let e = BookFormat::Egbk3
            .read(b"EGAROUCID\x03\0\0\0\0")
            .expect_err("magic");
        assert!(matches!(e, FormatError::Egbk3(Egbk3Error::Magic)), "{e}");
        // Each format refuses the others' bytes.
        let book = small_book();
        for f in BookFormat::ALL {
            for g in BookFormat::ALL {
                if f != g {
                    assert!(g.read(&f.write(&book)).is_err(), "{f} read as {g}");
                }
            }
        }
    }
}
