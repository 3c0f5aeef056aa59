//! Growth programs on a stored book (`new`, `add`, `deviate`, `enhance`, `play`, `extend`,
//! `upgrade`, `audit`): the store is opened as a coordinator and its searches drained by
//! in-process workers ([`offline::run_local`]), every result committed as it arrives, so an
//! interrupt loses at most the searches in flight and running the command again resumes.

use super::{Db, EngineArgs, RootArgs, SelectArgs, open_db, store_context};
use crate::cli::io;
use anyhow::{Context, bail};
use bookfarm_book::MemBook;
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::research::Upgrade;
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::offline;
use bookfarm_coordinator::progress::{Progress, Snapshot};
use bookfarm_coordinator::service::{Coordinator, ServiceConfig, StatusReport, new_book};
use bookfarm_coordinator::store::Store;
use bookfarm_engine::Move;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Growth programs on a stored book, run by in-process workers.
#[derive(Debug, Subcommand)]
pub enum GrowthCommand {
    /// Edax `book new [LEVEL=21] [DEPTH=36]`: a new book holding the searched start position.
    New {
        /// Level of new positions (0..=60).
        #[arg(default_value_t = 21, value_parser = crate::cli::args::level)]
        level: u8,
        /// Book depth in plies (1..=60).
        #[arg(default_value_t = 36, value_parser = crate::cli::args::depth)]
        depth: u8,
        #[command(flatten)]
        db: Db,
        /// Replace a book already in the store.
        #[arg(long)]
        force: bool,
        /// Keep a book already in the store and succeed (a container's first-start step).
        #[arg(long, conflicts_with = "force")]
        if_missing: bool,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book add GAMES`: add the games' positions (transcripts one per line, or .wtb).
    Add {
        /// Games file.
        #[arg(value_parser = crate::cli::args::existing_file)]
        games: PathBuf,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book deviate [REL=2] [ABS=4]`.
    Deviate {
        /// Relative error in discs (-129..=129).
        #[arg(allow_negative_numbers = true, default_value_t = 2, value_parser = crate::cli::args::relative_error)]
        rel: i32,
        /// Absolute error in discs (0..=65).
        #[arg(default_value_t = 4, value_parser = crate::cli::args::absolute_error)]
        abs: i32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Edax `book enhance [MID=2] [END=4]`.
    Enhance {
        /// Midgame error in discs (0..=129).
        #[arg(default_value_t = 2, value_parser = crate::cli::args::error_margin)]
        mid: i32,
        /// Endcut error in discs (0..=129).
        #[arg(default_value_t = 4, value_parser = crate::cli::args::error_margin)]
        end: i32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Edax `book play`: expand every reachable position without links.
    Play {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Edax `book extend`: expand the leaves that are best moves.
    Extend {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Re-search, at LEVEL, the leaves of positions below LEVEL that can still change a value
    /// inside the error window around the root's value, closest to the root first, until none
    /// is left; a value is never replaced by one from a lower level (what Edax's deepen should
    /// have been).
    Upgrade {
        /// The level to re-search at (1..=60).
        #[arg(value_parser = crate::cli::args::search_level)]
        level: u8,
        /// Half-width of the window around the root's value, in discs (0..=129).
        #[arg(long, default_value_t = 4, value_parser = crate::cli::args::error_margin)]
        error: i32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        root: RootArgs,
    },
    /// Line audit: play the book's best lines to the end with a search at LEVEL and report the
    /// lines whose result contradicts the book's value (win, draw or loss).
    Audit {
        /// The level of the search that plays the lines out.
        #[arg(value_parser = crate::cli::args::search_level)]
        level: u8,
        /// Write the contradicting lines (book line and continuation) as transcripts to FILE,
        /// ready for `book add`.
        #[arg(long, value_parser = crate::cli::args::output_file)]
        contradictions: Option<PathBuf>,
        /// Add the contradicting lines (book line and continuation) to the book afterwards,
        /// as `book add` does.
        #[arg(long)]
        queue: bool,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book deepen`: a no-op in Edax 4.4+ (it re-searches leaves at their own level);
    /// use `book upgrade LEVEL` instead.
    Deepen {
        #[command(flatten)]
        db: Db,
    },
}

/// Run one command of this group.
pub fn run(cmd: GrowthCommand) -> anyhow::Result<()> {
    match cmd {
        GrowthCommand::New {
            level,
            depth,
            db,
            force,
            if_missing,
            engine,
        } => book_new(level, depth, &db.db, force, if_missing, &engine),
        GrowthCommand::Add { games, db, engine } => {
            let games = io::read_games(&games)?;
            searches(&db.db, &engine, |c| {
                c.add_games(&games)?;
                Ok(None)
            })
        }
        GrowthCommand::Deviate {
            rel,
            abs,
            db,
            engine,
            select,
            root,
        } => {
            let params = Deviate::new(rel, abs);
            expansion(
                &db.db,
                &engine,
                &select,
                &root,
                Operation::Deviate { params },
            )
        }
        GrowthCommand::Enhance {
            mid,
            end,
            db,
            engine,
            select,
            root,
        } => expansion(
            &db.db,
            &engine,
            &select,
            &root,
            Operation::enhance(mid, end),
        ),
        GrowthCommand::Play {
            db,
            engine,
            select,
            root,
        } => expansion(&db.db, &engine, &select, &root, Operation::Play),
        GrowthCommand::Extend {
            db,
            engine,
            select,
            root,
        } => expansion(&db.db, &engine, &select, &root, Operation::Extend),
        // Upgrade and audit are growth programs: the same ones `expand upgrade` and `expand
        // audit` run on a cluster, here with in-process workers.
        GrowthCommand::Upgrade {
            level,
            error,
            db,
            engine,
            root,
        } => searches(&db.db, &engine, |c| {
            let params = Upgrade { level, error };
            Ok(Some(root.program(c, Operation::Upgrade { params })?))
        }),
        GrowthCommand::Audit {
            level,
            contradictions,
            queue,
            db,
            engine,
        } => audit(level, contradictions.as_deref(), queue, &db.db, &engine),
        GrowthCommand::Deepen { db } => {
            open_db(&db.db, ServiceConfig::default())?;
            println!(
                "deepen: nothing to do. Edax 4.4+ re-searches the selected leaves at their own \
                 level, so its deepen changes nothing (edax-spec 4.11); use `book upgrade LEVEL` \
                 to re-search leaves at a higher level"
            );
            Ok(())
        }
    }
}

/// The line audit at `level`, then the contradicting lines written to `contradictions`.
fn audit(
    level: u8,
    contradictions: Option<&Path>,
    queue: bool,
    db: &Path,
    engine: &EngineArgs,
) -> anyhow::Result<()> {
    let interrupt = io::interrupt_flag()?;
    let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
    let n = engine.threads();
    let c = open_db(db, offline::service_config(&eval, &hash))?;
    let audit = Program::new(Operation::Audit { level, queue });
    run_searches(&c, engine, Some(audit), eval, hash, n, interrupt)?;
    if let Some(path) = contradictions {
        let games: String = c
            .last_audit()
            .iter()
            .filter(|a| a.contradicts())
            .map(|a| format!("{}{}\n", game_text(&a.line), game_text(&a.continuation)))
            .collect();
        io::write_atomic(path, games.as_bytes())?;
    }
    Ok(())
}

/// Open the store with the engine's evaluation fingerprint, let `prepare` queue searches (and
/// name the program to run), then run them with in-process workers.
fn searches(
    db: &Path,
    engine: &EngineArgs,
    prepare: impl FnOnce(&Coordinator) -> anyhow::Result<Option<Program>>,
) -> anyhow::Result<()> {
    // Catch Ctrl-C before anything touches the store.
    let interrupt = io::interrupt_flag()?;
    let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
    let n = engine.threads();
    let c = open_db(db, offline::service_config(&eval, &hash))?;
    let program = prepare(&c)?;
    run_searches(&c, engine, program, eval, hash, n, interrupt)
}

/// Run `program` (or the searches already queued) with `n` in-process workers, with a progress
/// bar unless `--quiet`, and print the programs' reports.
pub(super) fn run_searches(
    c: &Coordinator,
    engine: &EngineArgs,
    program: Option<Program>,
    eval: Arc<Eval>,
    hash: String,
    n: usize,
    (flag, rt): (Arc<AtomicBool>, tokio::runtime::Runtime),
) -> anyhow::Result<()> {
    let bar = if engine.quiet {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(0);
        b.set_style(
            ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:30} {pos}/{len} searches | {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };
    let before = c.status().completed;
    let t0 = Instant::now();
    let mut progress = Progress::new();
    let out = rt.block_on(offline::run_local(
        c,
        program,
        n,
        eval,
        hash,
        io::flag_set(flag),
        |s: &StatusReport| {
            let done = s.completed - before;
            bar.set_length(done + s.queued + s.in_flight);
            bar.set_position(done);
            // The shared progress line: positions, results/s, nodes/s with its sparkline, queue,
            // round ETA.
            let snap = Snapshot::from(s);
            progress.observe(t0.elapsed(), &snap);
            bar.set_message(progress.line(&snap));
        },
    ))?;
    bar.finish_and_clear();
    for line in c.reports() {
        println!("{line}");
    }
    let s = c.status();
    let verb = if out.interrupted {
        "interrupted (run again to resume)"
    } else {
        "done"
    };
    println!(
        "{verb}: {} positions, {} searches in {:.1}s on {n} threads",
        s.positions,
        s.completed - before,
        t0.elapsed().as_secs_f64()
    );
    if out.interrupted {
        bail!("interrupted");
    }
    Ok(())
}

/// `book new`: a fresh store holding the start position, searched.
fn book_new(
    level: u8,
    depth: u8,
    db: &Path,
    force: bool,
    if_missing: bool,
    engine: &EngineArgs,
) -> anyhow::Result<()> {
    let exists = Store::dir_has_book(db).with_context(|| store_context(db))?;
    if exists && if_missing {
        println!("{} already holds a book; kept", db.display());
        return Ok(());
    }
    if exists && !force {
        bail!(
            "{} already holds a book (use --force to replace it)",
            db.display()
        );
    }
    let interrupt = io::interrupt_flag()?;
    let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
    let store = Store::open(db).with_context(|| store_context(db))?;
    let (h, entries) = new_book(level, depth);
    store
        .create(&h, &entries)
        .with_context(|| store_context(db))?;
    drop(store);
    let n = engine.threads();
    let c = open_db(db, offline::service_config(&eval, &hash))?;
    println!("new book in {}: level {level}, depth {depth}", db.display());
    run_searches(&c, engine, None, eval, hash, n, interrupt)
}

/// A selector command: `--dry-run` counts the first selection on a copy; otherwise run the
/// expansion to its fixed point with in-process workers.
fn expansion(
    db: &Path,
    engine: &EngineArgs,
    select: &SelectArgs,
    root: &RootArgs,
    operation: Operation,
) -> anyhow::Result<()> {
    if select.dry_run {
        let c = open_db(db, ServiceConfig::default())?;
        let program = root.program(&c, operation)?;
        let mut book = offline::load_book(&c);
        match first_selection(&mut book, program.clone()) {
            Some(n) => println!(
                "{}: {n} positions would be expanded in the first pass",
                program.describe()
            ),
            None => println!(
                "{}: the root line's missing positions would be added first",
                program.describe()
            ),
        }
        return Ok(());
    }
    searches(db, engine, |c| Ok(Some(root.program(c, operation)?)))
}

/// How many positions the first pass of `program` marks that is not empty (the growth
/// driver's marking, run on a copy with no search result known; 0: every pass of the first
/// iteration marks nothing, the program is done at once); `None` when the program must first
/// add missing positions of its root line.
fn first_selection(book: &mut MemBook, program: Program) -> Option<usize> {
    let mut driver = bookfarm_book::driver::Driver::new(program);
    let none: std::collections::HashMap<LeafRequest, LeafResult> = std::collections::HashMap::new();
    let _ = driver.run(book, &none, 0);
    match &driver.state().phase {
        bookfarm_book::driver::Phase::Expanding { todo, .. } => Some(todo.len()),
        bookfarm_book::driver::Phase::Rooting { .. } => None,
        _ => Some(0),
    }
}

/// Moves as a transcript (passes omitted).
fn game_text(moves: &[Move]) -> String {
    moves
        .iter()
        .filter(|m| matches!(m, Move::Square(_)))
        .map(ToString::to_string)
        .collect()
}
