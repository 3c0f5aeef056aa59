//! Book files: `dump`, `convert`, `info`, `stats` and `synth` on files, and a store's
//! `import` and `export`. Every file is read and written through [`crate::cli::io`], in the
//! format its extension names ([`bookfarm_book::BookFormat`]).

use super::{Db, load_file_or_db, open_db, store_context};
use crate::cli::io;
use anyhow::Context;
use bookfarm_book::{BookDate, dump, info, synth};
use bookfarm_coordinator::offline;
use bookfarm_coordinator::service::ServiceConfig;
use bookfarm_coordinator::store::Store;
use clap::Subcommand;
use std::path::PathBuf;

/// Commands on book files.
#[derive(Debug, Subcommand)]
pub enum FileCommand {
    /// Print the canonical dump of an Edax book.dat (as `edax_book_dump.py --header`).
    Dump {
        /// The book file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_input)]
        file: PathBuf,
        /// Omit the first `# {…}` header line (the tool's output without `--header`).
        #[arg(long)]
        no_header: bool,
    },
    /// Convert between Edax's book.dat, CSV and Egaroucid's .egbk3, chosen by the file
    /// extensions (.dat, .csv, .egbk3).
    ///
    /// dat→dat rewrites the records in Edax 4.6 bucket order keeping the header (date included);
    /// csv→dat links the positions, negamaxes and sorts them as Edax's `book import` does
    /// (without re-searching leaves: that needs the engine), stamping the current UTC time;
    /// .egbk3 is read and written with Egaroucid's layout and levels (see
    /// `bookfarm_book::egbk3`), linked and negamaxed like a CSV.
    Convert {
        /// Input file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_input)]
        input: PathBuf,
        /// Output file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_output)]
        output: PathBuf,
    },
    /// Compare two books position by position: the positions only in A, only in B, and in
    /// both with a different value, level or leaf; a summary line, then the positions, each
    /// named by its shortest book line.
    Diff {
        /// Book A (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_input)]
        a: PathBuf,
        /// Book B (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_input)]
        b: PathBuf,
        /// Positions listed of each kind (0: the summary only).
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Print Edax's `book info` facts: positions, links, leaves, levels, depth.
    Info {
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli::args::book_input)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Print Edax's `book stats`: hash, stage and best-score distributions.
    Stats {
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli::args::book_input)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Write a deterministic synthetic book: the positions of random games from the start
    /// until the book holds N, linked, with random leaves and levels, negamaxed (big-book
    /// measurements: `docs/big-books.md`).
    Synth {
        /// Number of positions.
        #[arg(long, default_value_t = 1_000_000)]
        positions: usize,
        /// Plies per random game (the book depth).
        #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=60))]
        plies: u32,
        /// Random seed (the same seed and sizes give the same book).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_output)]
        file: PathBuf,
    },
    /// Edax `book import FILE`: replace the store's book by a book.dat, CSV or .egbk3.
    Import {
        /// The book (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_input)]
        file: PathBuf,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book export FILE`: write the store's book as book.dat, CSV or .egbk3.
    Export {
        #[command(flatten)]
        db: Db,
        /// Output file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_output)]
        file: PathBuf,
    },
}

/// Run one command of this group.
pub fn run(cmd: FileCommand) -> anyhow::Result<()> {
    match cmd {
        FileCommand::Dump { file, no_header } => {
            let book = io::read_book(&file)?;
            io::print(&dump::dump(&book, !no_header))
        }
        FileCommand::Convert { input, output } => {
            let book = io::read_book(&input)?;
            io::write_book(&output, &book)?;
            tracing::info!(
                positions = book.len(),
                links = book.n_links(),
                "{} -> {}",
                input.display(),
                output.display()
            );
            Ok(())
        }
        FileCommand::Diff { a, b, limit } => {
            let (a, b) = (io::read_book(&a)?, io::read_book(&b)?);
            io::print(&bookfarm_book::diff::diff(&a, &b).report(&a, &b, limit))
        }
        FileCommand::Info { file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            io::print(&info::BookInfo::of(&book).to_string())
        }
        FileCommand::Stats { file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            io::print(&info::BookStats::of(&book).to_string())
        }
        FileCommand::Synth {
            positions,
            plies,
            seed,
            file,
        } => {
            let mut book = synth::synth_book(seed, positions, plies);
            book.header_mut().date = BookDate::now();
            io::write_book(&file, &book)?;
            println!(
                "wrote {} positions, {} links to {}",
                book.len(),
                book.n_links(),
                file.display()
            );
            Ok(())
        }
        FileCommand::Import { file, db } => {
            // Read and check the whole file before touching the store.
            let book = io::read_book(&file)?;
            // Ctrl-C must not stop the replacement halfway.
            let (_interrupt, _rt) = io::interrupt_flag()?;
            let store = Store::open(&db.db).with_context(|| store_context(&db.db))?;
            // The values are recomputed when the store is opened; the base is written as read.
            store
                .create_book(&book)
                .with_context(|| store_context(&db.db))?;
            println!(
                "imported {} positions from {} into {}",
                book.len(),
                file.display(),
                db.db.display()
            );
            Ok(())
        }
        FileCommand::Export { db, file } => {
            let c = open_db(&db.db, ServiceConfig::default())?;
            let mut book = offline::load_book(&c);
            book.header_mut().date = BookDate::now();
            io::write_book(&file, &book)?;
            println!("wrote {} positions to {}", book.len(), file.display());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden(name: &str) -> Option<PathBuf> {
        bookfarm_engine::testdata::shared_dir_or_skip().map(|d| d.join("golden").join(name))
    }

    #[test]
    fn convert_roundtrips_golden_books() {
        for name in ["book-tiny", "book-small"] {
            let (Some(dat), Some(csv_path)) = (
                golden(&format!("{name}.dat")),
                golden(&format!("{name}.csv")),
            ) else {
                return;
            };
            let dir = tempfile::tempdir().expect("tempdir");
            let out = dir.path().join("x.dat");
            run(FileCommand::Convert {
                input: dat.clone(),
                output: out.clone(),
            })
            .expect("dat -> dat");
            assert!(
                std::fs::read(&out).ok() == std::fs::read(&dat).ok(),
                "{name}"
            );
            let csv_out = dir.path().join("x.csv");
            run(FileCommand::Convert {
                input: dat.clone(),
                output: csv_out.clone(),
            })
            .expect("dat -> csv");
            assert_eq!(
                std::fs::read_to_string(&csv_out).ok(),
                std::fs::read_to_string(&csv_path).ok()
            );
            // csv -> dat: link + negamax + sort rebuild every position line of the dump; only
            // the header differs (n_empties one smaller, as Edax's import; a new date).
            let back = dir.path().join("y.dat");
            run(FileCommand::Convert {
                input: csv_path,
                output: back.clone(),
            })
            .expect("csv -> dat");
            let a = dump::dump(&io::read_book(&back).expect("load y"), false);
            let b = dump::dump(&io::read_book(&dat).expect("load golden"), false);
            assert_eq!(
                a.lines().skip(1).collect::<Vec<_>>(),
                b.lines().skip(1).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn errors_name_file_and_offset() {
        let Some(dat) = golden("book-small.dat") else {
            return;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let t = dir.path().join("t.dat");
        let bytes = std::fs::read(&dat).expect("read");
        std::fs::write(&t, &bytes[..1000]).expect("write");
        let e = io::read_book(&t).expect_err("truncated").to_string();
        assert!(
            e.starts_with(&format!("{}: at byte 994: truncated record", t.display())),
            "{e}"
        );
        let c = dir.path().join("c.csv");
        std::fs::write(&c, "xx\n").expect("write");
        let e = io::read_book(&c).expect_err("bad csv").to_string();
        assert!(e.ends_with("c.csv: line 1: board has only 2 cells"), "{e}");
        assert!(io::read_book(&dir.path().join("book.txt")).is_err());
        // No half-written output when the input is bad.
        let out = dir.path().join("o.dat");
        assert!(
            run(FileCommand::Convert {
                input: t,
                output: out.clone()
            })
            .is_err()
        );
        assert!(!out.exists());
        // Nor for an output whose extension names no book format.
        let txt = dir.path().join("o.txt");
        let e = run(FileCommand::Convert {
            input: dat,
            output: txt.clone(),
        })
        .expect_err("unknown extension");
        assert!(e.to_string().contains("unknown book format"), "{e}");
        assert!(!txt.exists());
    }
}
