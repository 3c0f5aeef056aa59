//! `book search FILE.obf --level L`: the search program of a farm (`expand search`) with
//! in-process workers: every position of the file searched full width at the level, the
//! results written as OBF. The work is kept in a store directory (`--db`, else `OUT.store`
//! next to the output), every result committed as it arrives: an interrupted run is resumed
//! by the same command. The store the command created is removed once the output is written.

use super::{EngineArgs, open_db, store_context};
use crate::cli::io;
use anyhow::{Context, bail};
use bookfarm_book::BookHeader;
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::searches::SearchSet;
use bookfarm_coordinator::offline;
use bookfarm_coordinator::store::Store;
use clap::Subcommand;
use std::path::{Path, PathBuf};

/// Book-neutral searches with in-process workers.
#[derive(Debug, Subcommand)]
pub enum SearchCommand {
    /// Search every position of an OBF file at LEVEL (full width, nothing excluded: what
    /// `bookfarm-worker search FILE --level L` searches) and write each position with its best
    /// move and score, as OBF, in file order (the labels of `bookfarm-train labels run
    /// --results`). Resumable: run the same command again after an interrupt.
    Search {
        /// Positions, one OBF line each (64 cells, the side to move; `%` starts a comment,
        /// kept in the output).
        #[arg(value_parser = crate::cli::args::existing_file)]
        file: PathBuf,
        /// Level of every search (1..=60).
        #[arg(long, value_parser = crate::cli::args::search_level)]
        level: u8,
        /// Output file [default: FILE with the extension `.results.obf`].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Store directory of the work (kept) [default: OUT.store, removed at the end].
        #[arg(long, env = "BOOKFARM_DB")]
        db: Option<PathBuf>,
        #[command(flatten)]
        engine: EngineArgs,
    },
}

/// Run one command of this group.
pub fn run(cmd: SearchCommand) -> anyhow::Result<()> {
    let SearchCommand::Search {
        file,
        level,
        out,
        db,
        engine,
    } = cmd;
    let text = std::fs::read_to_string(&file).with_context(|| format!("{}", file.display()))?;
    let positions = SearchSet::parse(&text, bookfarm_book::searches::DEFAULT_MAX_POSITIONS)
        .with_context(|| format!("{}", file.display()))?;
    let program = Program::new(Operation::Search { positions, level });
    let out = out.unwrap_or_else(|| file.with_extension("results.obf"));
    let (dir, scratch) = match db {
        Some(d) => (d, false),
        None => {
            let mut name = out.as_os_str().to_owned();
            name.push(".store");
            (PathBuf::from(name), true)
        }
    };
    if !Store::dir_has_book(&dir).with_context(|| store_context(&dir))? {
        create_work_store(&dir)?;
    }
    let interrupt = io::interrupt_flag()?;
    let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
    let n = engine.threads();
    let c = open_db(&dir, offline::service_config(&eval, &hash))?;
    let id = c.start(program.clone())?.program;
    super::growth::run_searches(&c, &engine, None, eval, hash, n, interrupt)?;
    let output = c.search_output(id)?;
    io::write_atomic(&out, output.output.text.as_bytes())?;
    let counts = output.output.counts;
    println!(
        "search program #{id}: {} positions, {} results, {} missing; written to {}",
        counts.positions,
        counts.results,
        counts.missing,
        out.display()
    );
    drop(c);
    if scratch {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing the work store {}", dir.display()))?;
    }
    if counts.missing > 0 {
        bail!("{} positions have no result", counts.missing);
    }
    Ok(())
}

/// A store holding an empty book (a search program reads no book position).
fn create_work_store(dir: &Path) -> anyhow::Result<()> {
    let store = Store::open(dir).with_context(|| store_context(dir))?;
    store
        .create(&BookHeader::new(0, 36), &[])
        .with_context(|| store_context(dir))?;
    Ok(())
}
