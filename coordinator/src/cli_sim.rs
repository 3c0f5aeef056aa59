//! `sim`: the farm simulator (`bookfarm_coordinator::sim`) and the recording of its search
//! time tables.

use crate::cli_args;
use anyhow::{Context, bail};
use bookfarm_book::driver::Operation;
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::sim::{self, Guess, SimConfig, TimeTable};
use bookfarm_engine::Board;
use bookfarm_engine::search::Searcher;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// The simulator.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Simulate builds in virtual time with W workers (the real coordinator service and store,
    /// simulated searches): efficiency, wasted work, coordinator CPU, and whether the book equals
    /// the serial build. One row per worker count, with and without prefetch.
    Run(RunArgs),
    /// Time real leaf searches of book positions at some levels and print them as `times.tsv`
    /// lines (the simulator's duration tables).
    Record(RecordArgs),
}

/// `sim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Worker counts to simulate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,16,128", value_parser = workers)]
    workers: Vec<usize>,
    /// Search threads per worker.
    #[arg(long, default_value_t = 1, value_parser = cli_args::count)]
    threads: usize,
    /// Recorded duration table to use (a level of `sim record`: 4, 8, 12 or 16).
    #[arg(long, default_value_t = 4, value_parser = cli_args::level)]
    times: u8,
    /// Worker speeds spread log-uniformly over [1/S, S] (1: equal speeds).
    #[arg(long, default_value_t = 1.0)]
    spread: f64,
    /// Seed of the worker speeds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Level of the book (what the level table reports; durations come from --times).
    #[arg(long, default_value_t = 4, value_parser = cli_args::search_level)]
    level: u8,
    /// Book depth in plies (bigger: a bigger book).
    #[arg(long, default_value_t = 16, value_parser = cli_args::depth)]
    depth: u8,
    /// Deviate window: relative error.
    #[arg(long, default_value_t = 2)]
    relative: i32,
    /// Deviate window: absolute error.
    #[arg(long, default_value_t = 4)]
    absolute: i32,
    /// Speculative searches per thread at a round's tail.
    #[arg(long, default_value_t = 2)]
    speculation: u32,
    /// Backup leases after this many mean search times (0: off).
    #[arg(long, default_value_t = 4)]
    backup_after: u32,
    /// Share of speculative guesses with a wrong move, in percent (the rest of the guess is
    /// the true result with its score moved by up to ±4).
    #[arg(long, default_value_t = 40)]
    guess_error: u32,
    /// Only with prefetch (default: each worker count with and without).
    #[arg(long)]
    prefetch_only: bool,
    /// Only the serial build: its size and search CPU (to size a simulation before running it).
    #[arg(long)]
    serial_only: bool,
    /// Directory for the simulated stores (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn workers(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err("expected a number of workers from 1 to 100000".into()),
    }
}

/// `sim record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Levels to record, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4,8,12,16", value_parser = cli_args::search_level)]
    levels: Vec<u8>,
    /// Book positions to search (OBF; default: ../shared/golden/levels-positions.obf).
    #[arg(long)]
    positions: Option<PathBuf>,
}

/// Run a `sim` command.
pub fn run(cmd: SimCommand) -> anyhow::Result<()> {
    match cmd {
        SimCommand::Run(a) => run_sims(&a),
        SimCommand::Record(a) => record(&a),
    }
}

fn run_sims(a: &RunArgs) -> anyhow::Result<()> {
    let times = TimeTable::recorded(a.times).with_context(|| {
        format!(
            "--times {}: no recorded table (recorded levels: {:?})",
            a.times,
            TimeTable::recorded_levels()
        )
    })?;
    if !(a.spread.is_finite() && a.spread >= 1.0) {
        bail!("--spread: expected a number ≥ 1");
    }
    let tmp = match &a.dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("temporary directory")?),
    };
    let base = a
        .dir
        .clone()
        .or_else(|| tmp.as_ref().map(|t| t.path().to_path_buf()))
        .context("no store directory")?;
    let ops = vec![Operation::Deviate {
        root: Board::start(),
        params: Deviate::new(a.relative, a.absolute),
    }];
    println!(
        "# sim: deviate {} {} from a new book (level {}, depth {}), level-{} search times (mean {:.4} s), speeds spread {}, guesses {}% wrong moves",
        a.relative,
        a.absolute,
        a.level,
        a.depth,
        a.times,
        times.mean(),
        a.spread,
        a.guess_error
    );
    if a.serial_only {
        let started = std::time::Instant::now();
        let (book, asked) = sim::serial_build(a.level, a.depth, &ops);
        let cpu: f64 = asked.iter().map(|r| times.seconds(r)).sum();
        println!("positions\tserial_searches\tserial_cpu_s\treal_s");
        println!(
            "{}\t{}\t{:.1}\t{:.1}",
            book.len(),
            asked.len(),
            cpu,
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    println!("mode\t{}", sim::SimReport::HEADER);
    let modes: &[(&str, u32, u32)] = if a.prefetch_only {
        &[("prefetch", 1, 1)]
    } else {
        &[("round", 0, 0), ("prefetch", 1, 1)]
    };
    for (i, w) in a.workers.iter().enumerate() {
        for (name, spec, backup) in modes {
            let dir = base.join(format!("w{w}-{name}-{i}"));
            std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
            let cfg = SimConfig {
                workers: *w,
                threads: u32::try_from(a.threads).unwrap_or(1),
                speed_spread: a.spread,
                seed: a.seed,
                times: times.clone(),
                level: a.level,
                depth: a.depth,
                ops: ops.clone(),
                speculation: a.speculation * spec,
                backup_after: a.backup_after * backup,
                guess: Guess::Noisy {
                    move_error_percent: a.guess_error,
                    score_noise: 4,
                },
            };
            let r = sim::simulate(&cfg, &dir)
                .with_context(|| format!("simulation with {w} workers ({name})"))?;
            println!("{name}\t{}", r.row());
            tracing::info!(
                workers = w,
                mode = name,
                real_seconds = r.real_seconds,
                "simulation done"
            );
            if a.dir.is_none() {
                std::fs::remove_dir_all(&dir).ok();
            }
        }
    }
    Ok(())
}

fn record(a: &RecordArgs) -> anyhow::Result<()> {
    let path = a
        .positions
        .clone()
        .unwrap_or_else(|| PathBuf::from("../shared/golden/levels-positions.obf"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let boards: Vec<Board> = bookfarm_engine::formats::obf::parse_obf(&text)
        .with_context(|| path.display().to_string())?
        .into_iter()
        .map(|p| p.board)
        .collect();
    if boards.is_empty() {
        bail!("{}: no positions", path.display());
    }
    let mut searcher = Searcher::new(bookfarm_engine::eval::default_eval());
    println!(
        "# CPU seconds of leaf searches (one thread, embedded evaluation) of the {} positions of {}, by level; recorded by `bookfarm-coordinator sim record`",
        boards.len(),
        path.file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
    );
    for level in &a.levels {
        let t = sim::times::record(&mut searcher, *level, &boards);
        println!("{}", sim::times::format(&t));
    }
    Ok(())
}
