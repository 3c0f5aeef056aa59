//! `local`: a whole build on this machine: the coordinator's service with in-process workers
//! on every thread, resumable, then the book written to a file.

use super::spinner;
use crate::cli::book::open_db;
use crate::cli::io;
use anyhow::Context;
use bookfarm_book::BookDate;
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::progress::{Progress, Snapshot};
use bookfarm_coordinator::service::{ServiceConfig, StatusReport, new_book};
use bookfarm_coordinator::store::Store;
use indicatif::ProgressBar;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The options of `local`.
#[derive(Debug, clap::Args)]
pub struct LocalArgs {
    /// The store directory (created when new).
    #[arg(long)]
    db: PathBuf,
    /// Search threads [default: all cores].
    #[arg(long, value_parser = crate::cli::args::count)]
    workers: Option<usize>,
    /// Level of new positions (for a new book). Measured on 2 busy cores with 2 workers and
    /// deviate 2,4: level 6 depth 14 gives 2,047 positions in 15 s; level 8 depth 14 gives
    /// 1,716 positions in 122 s.
    #[arg(long, default_value_t = 6, value_parser = crate::cli::args::level)]
    level: u8,
    /// Book depth in plies (for a new book).
    #[arg(long, default_value_t = 14, value_parser = crate::cli::args::depth)]
    depth: u8,
    /// Deviate REL,ABS (Edax's defaults 2,4; -129..=129 and 0..=65).
    #[arg(long, value_parser = crate::cli::args::deviate_pair, default_value = "2,4")]
    deviate: (i32, i32),
    /// Enhance MID,END instead of deviate (each 0..=129).
    #[arg(long, value_parser = crate::cli::args::enhance_pair, conflicts_with = "deviate")]
    enhance: Option<(i32, i32)>,
    /// Output file (.dat, .csv or .egbk3).
    #[arg(long, value_parser = crate::cli::args::book_output)]
    out: PathBuf,
    /// Grow from this position instead of the start position: a move list (f5d6c3) or an OBF
    /// board of the book. The line's missing positions are added first.
    #[arg(long, value_name = "LINE")]
    from: Option<String>,
    /// Seed the book with these games (transcripts one per line, or .wtb) before expanding.
    #[arg(long, value_parser = crate::cli::args::existing_file)]
    games: Option<PathBuf>,
    /// Evaluation weights [default: the embedded bookfarm weights].
    #[arg(long, env = "BOOKFARM_EVAL", value_parser = crate::cli::args::existing_file)]
    eval: Option<PathBuf>,
    /// Also serve HTTP metrics on this address.
    #[arg(long)]
    http: Option<String>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// How the program's searches are scheduled: `serial` (Edax's program: the same book
    /// for the same searches, whatever the threads) or `async` (no pass barriers: a finished
    /// book by Edax's rules, not the serial one position for position; for big farms).
    #[arg(long, default_value = "serial", value_parser = crate::cli::args::schedule)]
    schedule: Schedule,
    /// Jobs leased beyond the free threads (0..=64; more hoards the last jobs of a pass).
    #[arg(long, default_value_t = 1, value_parser = crate::cli::args::lookahead)]
    lookahead: usize,
}

/// Create the store when it holds no book yet; returns true when created.
fn ensure_book(db: &Path, level: u8, depth: u8) -> anyhow::Result<bool> {
    if Store::dir_has_book(db).with_context(|| format!("opening store {}", db.display()))? {
        return Ok(false);
    }
    let store = Store::open(db).with_context(|| format!("opening store {}", db.display()))?;
    let (h, entries) = new_book(level, depth);
    store.create(&h, &entries)?;
    Ok(true)
}

/// Build (or resume) the book in `--db` and write it to `--out`.
pub fn run(a: LocalArgs) -> anyhow::Result<()> {
    let operation = match a.enhance {
        Some((midgame, endcut)) => Operation::enhance(midgame, endcut),
        None => Operation::Deviate {
            params: Deviate::new(a.deviate.0, a.deviate.1),
        },
    };
    let workers = a
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Catch Ctrl-C before anything touches the store.
    let (flag, rt) = io::interrupt_flag()?;
    let (weights, hash) = bookfarm_runner::load_eval(a.eval.as_deref())?;
    let created = ensure_book(&a.db, a.level, a.depth)?;
    let search_signature = bookfarm_runner::signature(&weights, &hash);
    let cfg = ServiceConfig {
        eval_hash: Some(hash.clone()),
        signature: Some(search_signature.clone()),
        engine_version: Some(bookfarm_proto::ENGINE_VERSION.to_string()),
        lookahead: u32::try_from(a.lookahead).unwrap_or(u32::MAX),
        ..ServiceConfig::default()
    };
    let c = open_db(&a.db, cfg)?;
    let (h, _, _, _) = c.info();
    if created {
        println!(
            "new book: level {}, depth {} in {}",
            h.level,
            h.depth(),
            a.db.display()
        );
    } else {
        println!(
            "resuming book in {}: level {}, depth {}, {} positions",
            a.db.display(),
            h.level,
            h.depth(),
            c.status().positions
        );
    }
    if let Some(g) = &a.games {
        c.add_games(&io::read_games(g)?)?;
    }
    let mut program = Program {
        schedule: a.schedule,
        ..Program::new(operation)
    };
    if let Some(text) = &a.from {
        program.root = c.resolve_root(text)?;
    }
    c.start(program)?;
    let t0 = Instant::now();
    let opts = bookfarm_coordinator::local::LocalOptions {
        workers,
        eval_hash: hash,
        search_signature,
        http: a.http.clone(),
        lookahead: a.lookahead,
    };
    let quiet = a.quiet;
    let terminal = !quiet && std::io::stderr().is_terminal();
    let bar = if terminal {
        spinner()
    } else {
        ProgressBar::hidden()
    };
    let mut progress = Progress::new();
    let mut next_log = Duration::ZERO;
    let outcome = rt.block_on(bookfarm_coordinator::local::run(
        c.clone(),
        &opts,
        bookfarm_runner::exec::engine_factory(weights),
        io::flag_set(flag),
        |s: &StatusReport| {
            // One line on a terminal, refreshed; a log line every 10 s otherwise.
            let snap = Snapshot::from(s);
            let at = t0.elapsed();
            progress.observe(at, &snap);
            let line = progress.line(&snap);
            if terminal {
                bar.set_message(line);
            } else if !quiet && at >= next_log {
                tracing::info!(progress = %line, "local build");
                next_log = at + Duration::from_secs(10);
            }
        },
    ))?;
    bar.finish_and_clear();
    for line in c.reports() {
        println!("{line}");
    }
    let s = c.status();
    // Stamped with the current date, as Edax's save does.
    let mut book = c.book_snapshot();
    book.header_mut().date = BookDate::now();
    io::write_book(&a.out, &book)?;
    println!(
        "{}: {} positions, {} results in {:.1}s; wrote {}",
        if outcome.interrupted {
            "interrupted (run again to resume)"
        } else {
            "done"
        },
        s.positions,
        s.completed,
        t0.elapsed().as_secs_f64(),
        a.out.display()
    );
    println!(
        "decisive core: {} leaves ({:.1} % of the positions; no other leaf can move the root's value)",
        s.validation.core_size,
        100.0 * s.validation.core_size as f64 / s.positions.max(1) as f64
    );
    for w in &outcome.workers {
        println!(
            "workers: {} threads, {:.2}s searching ({} nodes), {:.2}s idle ({:.1}% of thread time; \
             {:.2}s with no job at all), {:.2}s in service calls",
            workers,
            w.search_time.as_secs_f64(),
            w.nodes,
            w.idle_time.as_secs_f64(),
            100.0 * outcome.idle_share(workers),
            w.starved_time.as_secs_f64(),
            w.rpc_time.as_secs_f64()
        );
    }
    Ok(())
}
