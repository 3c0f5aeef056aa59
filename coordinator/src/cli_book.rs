//! `book …` subcommands on book files: `dump`, `convert`, `info`.
//!
//! Errors are reported as one line naming the file, the byte offset (book.dat) or line (CSV)
//! and the problem; `main` prints it and exits with status 1.

use anyhow::{Context, anyhow};
use bookfarm_book::{BookDate, MemBook, csv, dump, edax, info, negamax};
use clap::Subcommand;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Offline book commands.
#[derive(Debug, Subcommand)]
pub enum BookCommand {
    /// Print the canonical dump of an Edax book.dat (as `edax_book_dump.py --header`).
    Dump {
        /// The book file.
        file: PathBuf,
        /// Omit the first `# {…}` header line (the tool's output without `--header`).
        #[arg(long)]
        no_header: bool,
    },
    /// Convert between Edax's book.dat and CSV, chosen by the file extensions (.dat, .csv).
    ///
    /// dat→dat rewrites the records in Edax 4.6 bucket order keeping the header (date included);
    /// csv→dat links the positions, negamaxes and sorts them as Edax's `book import` does
    /// (without re-searching leaves: that needs the engine), stamping the current UTC time.
    Convert {
        /// Input file (.dat or .csv).
        input: PathBuf,
        /// Output file (.dat or .csv).
        output: PathBuf,
    },
    /// Print Edax's `book info` facts: positions, links, leaves, levels, depth.
    Info {
        /// The book file (.dat or .csv).
        file: PathBuf,
    },
    /// Print Edax's `book stats`: hash, stage and best-score distributions.
    Stats {
        /// The book file (.dat or .csv).
        file: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Dat,
    Csv,
}

fn format_of(path: &Path) -> anyhow::Result<Format> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("dat") => Ok(Format::Dat),
        Some("csv") => Ok(Format::Csv),
        _ => Err(anyhow!(
            "{}: unknown book format (expected a .dat or .csv extension)",
            path.display()
        )),
    }
}

/// Read a book.dat or CSV file into memory (a CSV import is linked, negamaxed and sorted).
fn load(path: &Path) -> anyhow::Result<MemBook> {
    let format = format_of(path)?;
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    match format {
        Format::Dat => edax::read_book(&bytes).map_err(|e| anyhow!("{}: {e}", path.display())),
        Format::Csv => {
            let text = std::str::from_utf8(&bytes).map_err(|e| {
                anyhow!(
                    "{}: at byte {}: not UTF-8 text",
                    path.display(),
                    e.valid_up_to()
                )
            })?;
            let mut book = csv::import_csv(text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            negamax::link_all(&mut book);
            negamax::negamax(&mut book);
            negamax::sort_links(&mut book);
            book.header_mut().date = BookDate::now();
            Ok(book)
        }
    }
}

fn save(book: &MemBook, path: &Path) -> anyhow::Result<()> {
    let bytes = match format_of(path)? {
        Format::Dat => edax::book_to_bytes(book),
        Format::Csv => csv::export_csv(book).into_bytes(),
    };
    // Write to a temporary sibling, then rename: a failed write never leaves a half file.
    let tmp = path.with_extension("tmp-bookfarm");
    std::fs::write(&tmp, &bytes).with_context(|| tmp.display().to_string())?;
    std::fs::rename(&tmp, path).with_context(|| path.display().to_string())?;
    Ok(())
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // A closed pipe (`| head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// Run one offline book command.
pub fn run(cmd: BookCommand) -> anyhow::Result<()> {
    match cmd {
        BookCommand::Dump { file, no_header } => {
            let book = load(&file)?;
            print(&dump::dump(&book, !no_header))
        }
        BookCommand::Convert { input, output } => {
            let book = load(&input)?;
            save(&book, &output)?;
            tracing::info!(
                positions = book.len(),
                links = book.n_links(),
                "{} -> {}",
                input.display(),
                output.display()
            );
            Ok(())
        }
        BookCommand::Info { file } => {
            let book = load(&file)?;
            print(&info::BookInfo::of(&book).to_string())
        }
        BookCommand::Stats { file } => {
            let book = load(&file)?;
            print(&info::BookStats::of(&book).to_string())
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
            run(BookCommand::Convert {
                input: dat.clone(),
                output: out.clone(),
            })
            .expect("dat -> dat");
            assert!(
                std::fs::read(&out).ok() == std::fs::read(&dat).ok(),
                "{name}"
            );
            let csv_out = dir.path().join("x.csv");
            run(BookCommand::Convert {
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
            run(BookCommand::Convert {
                input: csv_path,
                output: back.clone(),
            })
            .expect("csv -> dat");
            let a = dump::dump(&load(&back).expect("load y"), false);
            let b = dump::dump(&load(&dat).expect("load golden"), false);
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
        let e = load(&t).expect_err("truncated").to_string();
        assert!(
            e.starts_with(&format!("{}: at byte 994: truncated record", t.display())),
            "{e}"
        );
        let c = dir.path().join("c.csv");
        std::fs::write(&c, "xx\n").expect("write");
        let e = load(&c).expect_err("bad csv").to_string();
        assert!(e.ends_with("c.csv: line 1: board has only 2 cells"), "{e}");
        assert!(load(&dir.path().join("book.txt")).is_err());
        // No half-written output when the input is bad.
        let out = dir.path().join("o.dat");
        assert!(
            run(BookCommand::Convert {
                input: t,
                output: out.clone()
            })
            .is_err()
        );
        assert!(!out.exists());
    }
}
