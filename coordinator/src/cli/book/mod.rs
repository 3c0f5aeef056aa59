//! `book …`: Edax's book command set, on book files and, with `--db`, on a store directory
//! (see [`bookfarm_coordinator::offline`]). One module per group:
//!
//! * [`files`]: book files: dump, convert, info, stats, synth, and a store's import and export;
//! * [`maintain`]: whole-book transformations on a copy of the stored book, replacing it at the
//!   end (negamax, link, fix, prune, subtree, fill, merge, depth, correct, store);
//! * [`growth`]: growth programs run by in-process workers, committed as results arrive (new,
//!   add, deviate, enhance, play, extend, upgrade, audit);
//! * [`query`]: reading a book (show, check, problem, accuracy, line, analyze, extract, move);
//! * [`search`]: `book search`, a farm's search program with in-process workers.
//!
//! Errors are reported as one line naming the file, the byte offset (book.dat) or line (CSV)
//! and the problem; `main` prints it and exits with status 1.

use anyhow::{Context, bail};
use bookfarm_book::MemBook;
use bookfarm_coordinator::CoordinatorError;
use bookfarm_coordinator::offline;
use bookfarm_coordinator::server;
use bookfarm_coordinator::service::{Coordinator, ServiceConfig};
use bookfarm_coordinator::store::StoreError;
use bookfarm_engine::Board;
use bookfarm_engine::formats::transcript;
use clap::Subcommand;
use std::path::{Path, PathBuf};

mod files;
mod growth;
mod maintain;
mod query;
mod search;

/// Offline book commands: on book files (dump, convert, info, stats) and, with `--db DIR`, on
/// a store directory (Edax's `book …` command set).
#[derive(Debug, Subcommand)]
pub enum BookCommand {
    #[command(flatten)]
    Files(files::FileCommand),
    #[command(flatten)]
    Maintain(maintain::MaintainCommand),
    #[command(flatten)]
    Growth(growth::GrowthCommand),
    #[command(flatten)]
    Query(query::QueryCommand),
    #[command(flatten)]
    Search(search::SearchCommand),
}

/// Run one offline book command.
pub fn run(cmd: BookCommand) -> anyhow::Result<()> {
    match cmd {
        BookCommand::Files(cmd) => files::run(cmd),
        BookCommand::Maintain(cmd) => maintain::run(cmd),
        BookCommand::Growth(cmd) => growth::run(cmd),
        BookCommand::Query(cmd) => query::run(cmd),
        BookCommand::Search(cmd) => search::run(cmd),
    }
}

/// The store directory.
#[derive(Debug, Clone, clap::Args)]
pub struct Db {
    /// Store directory.
    #[arg(long, env = "BOOKFARM_DB")]
    db: PathBuf,
}

/// Engine options of the commands that search leaves.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineArgs {
    /// Search threads [default: all cores].
    #[arg(long, value_parser = crate::cli::args::count)]
    threads: Option<usize>,
    /// Evaluation weights [default: the embedded bookfarm weights].
    #[arg(long, env = "BOOKFARM_EVAL", value_parser = crate::cli::args::existing_file)]
    eval: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

impl EngineArgs {
    /// Search threads: `--threads`, else every core.
    fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }
}

/// Where a growth program starts.
#[derive(Debug, Clone, clap::Args)]
pub struct RootArgs {
    /// Start from this position instead of the start position, as Edax's book commands start
    /// from the current board: a move list (f5d6c3) or an OBF board of the book. The line's
    /// positions missing from the book are added first (as `book store` adds them); the
    /// program's values and window are the root's.
    #[arg(long, value_name = "LINE")]
    from: Option<String>,
}

impl RootArgs {
    /// `operation` from this root (resolved against `c`'s book).
    pub(crate) fn program(
        &self,
        c: &Coordinator,
        operation: bookfarm_book::program::Operation,
    ) -> anyhow::Result<bookfarm_book::program::Program> {
        let mut program = bookfarm_book::program::Program::new(operation);
        if let Some(text) = &self.from {
            program.root = c.resolve_root(text)?;
        }
        Ok(program)
    }
}

/// Options of the selector commands.
#[derive(Debug, Clone, clap::Args)]
pub struct SelectArgs {
    /// Print how many positions the first selection would expand, change nothing.
    #[arg(long)]
    dry_run: bool,
}

fn store_context(db: &Path) -> String {
    format!("store {}", db.display())
}

/// Open the book stored in `db` (the one store-opening path of every command: a missing book
/// is one error naming the directory and how to create a book there).
pub(crate) fn open_db(db: &Path, cfg: ServiceConfig) -> anyhow::Result<Coordinator> {
    match server::open(db, cfg) {
        Ok(c) => Ok(c),
        // That message names the directory already.
        Err(e @ CoordinatorError::Store(StoreError::NoBook(_))) => Err(e.into()),
        Err(e) => Err(anyhow::Error::new(e).context(store_context(db))),
    }
}

/// The book of a file, or the one stored in a directory.
fn load_file_or_db(file: Option<&Path>, db: Option<&Path>) -> anyhow::Result<MemBook> {
    match (file, db) {
        (Some(f), _) => crate::cli::io::read_book(f),
        (None, Some(d)) => Ok(offline::load_book(&open_db(d, ServiceConfig::default())?)),
        (None, None) => bail!("give a book file or --db DIR"),
    }
}

/// The book's value of the start position.
fn root_value(book: &MemBook) -> String {
    book.probe(&Board::start())
        .map_or_else(|| "unknown".into(), |id| book.score(id).value.to_string())
}

/// The board after `moves` from the start position (empty = the start), read by the engine's
/// move-list parser.
fn replay(moves: &str) -> anyhow::Result<Board> {
    transcript::board_after(moves).with_context(|| format!("moves {moves:?}"))
}
