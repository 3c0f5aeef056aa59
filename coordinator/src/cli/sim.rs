//! `sim`: the farm simulator (`bookfarm_coordinator::sim`) and the recording of its search
//! time tables.

use crate::cli::args;
use anyhow::{Context, bail};
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::schedule::{AsyncOptions, Order};
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::service::{StreakRule, TrustRules};
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
    /// Calibrate the program ETA: simulated builds of one program each (every combination of
    /// the lists), the stated range read after every event, and how often it held the
    /// program's actual end at 25, 50 and 75 % of its run (the table of `docs/benchmarks.md`).
    Eta(EtaArgs),
    /// Measure speculation's guesses: the default predictor (a shallow search) at some levels
    /// against leaf searches at a reference level on a book's positions (what calibrates the
    /// simulator's `--guess-error` and `--score-noise`).
    Guesses(GuessesArgs),
    /// The trust table: trusted workers, honest volunteers and liars of each kind over the real
    /// trust code; per liar kind, the overhead, how fast liars are blocked, and the lies left
    /// in the book and in its decisive core at done, against the honest build.
    Trust(TrustArgs),
}

/// `sim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Worker counts to simulate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,16,128", value_parser = workers)]
    workers: Vec<usize>,
    /// Search threads per worker.
    #[arg(long, default_value_t = 1, value_parser = args::count)]
    threads: usize,
    /// Recorded duration table to use (a level of `sim record`: 4, 8, 12 or 16).
    #[arg(long, default_value_t = 4, value_parser = args::level)]
    times: u8,
    /// Worker speeds spread log-uniformly over [1/S, S] (1: equal speeds).
    #[arg(long, default_value_t = 1.0)]
    spread: f64,
    /// Seed of the worker speeds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Level of the book (what the level table reports; durations come from --times).
    #[arg(long, default_value_t = 4, value_parser = args::search_level)]
    level: u8,
    /// Book depth in plies (bigger: a bigger book).
    #[arg(long, default_value_t = 16, value_parser = args::depth)]
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
    /// the true result with its score moved by up to ± `--score-noise`). The defaults (40, 4)
    /// are the model of the published tables; `sim guesses` measured the default level-2
    /// predictor at about 58 and 7 against level-16 searches.
    #[arg(long, default_value_t = 40)]
    guess_error: u32,
    /// Largest error of a speculative guess's score, in discs (0 with `--guess-error 0`: the
    /// predictor knows every result, an upper bound on what speculation can do).
    #[arg(long, default_value_t = 4)]
    score_noise: i32,
    /// Worker crashes: share of searches, in percent, during which the worker crashes (0:
    /// none). A crashed worker's searches are lost; the service takes its leases back after
    /// `--lease-timeout`, and the worker registers again after `--restart-after`.
    #[arg(long, default_value_t = 0.0)]
    crash_percent: f64,
    /// The service's lease timeout with crashes, in virtual seconds (live workers heartbeat
    /// every sixth of it).
    #[arg(long, default_value_t = 60.0)]
    lease_timeout: f64,
    /// How long a crashed worker stays away, in virtual seconds.
    #[arg(long, default_value_t = 120.0)]
    restart_after: f64,
    /// What simulated searches answer: `hash` (a hash of the request: cheap, values
    /// uncorrelated along lines) or `engine:L` (the engine with the embedded weights at level
    /// L, reported at the book's level; results cached for the process).
    #[arg(long, default_value = "hash", value_parser = truth)]
    truth: sim::Truth,
    /// Cores the simulated coordinator serves RPCs with (its growth runner has one more);
    /// each service call's thread CPU time occupies one in virtual time.
    #[arg(long, default_value_t = 4, value_parser = args::count)]
    coordinator_cores: usize,
    /// Charge no coordinator CPU to virtual time (the simulator's figures before it did).
    #[arg(long)]
    free_coordinator: bool,
    /// Only with prefetch (default: each worker count with and without).
    #[arg(long)]
    prefetch_only: bool,
    /// Schedules to simulate, comma-separated: `serial` (round and prefetch modes) and
    /// `async` (the asynchronous schedule, no speculation, backup leases as `--backup-after`).
    #[arg(long, value_delimiter = ',', default_value = "serial", value_parser = args::schedule)]
    schedules: Vec<Schedule>,
    #[command(flatten)]
    async_args: AsyncArgs,
    /// Only the serial build: its size and search CPU (to size a simulation before running it).
    #[arg(long)]
    serial_only: bool,
    /// First print the serial build's chains of dependent searches (`sim::chain`: its wall
    /// with unlimited threads and no guesses, with and without pass barriers) and the highest
    /// efficiency each allows at every worker count.
    #[arg(long)]
    chain: bool,
    /// Directory for the simulated stores (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The asynchronous schedule's options (`sim run` and `sim trust`).
#[derive(Debug, Args)]
pub struct AsyncArgs {
    /// The asynchronous schedule's queue order: `marking` (first marked, first searched: the
    /// book closest to the serial one) or `best-first` (principal lines first: smaller books).
    #[arg(long, default_value = "marking", value_parser = async_order)]
    async_order: Order,
    /// The asynchronous schedule applies an expansion as soon as its child's search lands
    /// (the parents' re-searches follow as repairs): one search per step of a line, not two
    /// (the service's default, `async_early_child`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    early_child: bool,
}

impl AsyncArgs {
    fn options(&self) -> AsyncOptions {
        AsyncOptions {
            order: self.async_order,
            early_child: self.early_child,
        }
    }

    /// How the header line names these options.
    fn describe(&self) -> String {
        format!(
            "async queue {}{}",
            match self.async_order {
                Order::Marking => "marking",
                Order::BestFirst => "best-first",
            },
            if self.early_child {
                ", early child"
            } else {
                ""
            }
        )
    }
}

fn async_order(s: &str) -> Result<Order, String> {
    match s.trim() {
        "marking" => Ok(Order::Marking),
        "best-first" => Ok(Order::BestFirst),
        _ => Err("expected `marking` or `best-first`".into()),
    }
}

fn truth(s: &str) -> Result<sim::Truth, String> {
    match s.trim() {
        "hash" => Ok(sim::Truth::Hash),
        t => t
            .strip_prefix("engine:")
            .and_then(|l| l.parse::<u8>().ok())
            .filter(|l| *l <= 60)
            .map(|level| sim::Truth::Engine { level })
            .ok_or_else(|| "expected `hash` or `engine:LEVEL` (level 0 to 60)".into()),
    }
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
    #[arg(long, value_delimiter = ',', default_value = "4,8,12,16", value_parser = args::search_level)]
    levels: Vec<u8>,
    /// Book positions to search (OBF; default: ../shared/golden/levels-positions.obf).
    #[arg(long)]
    positions: Option<PathBuf>,
}

/// `sim trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// Search threads in all (W) to simulate, comma-separated: W / T machines of `--threads` T
    /// threads each (rounded up).
    #[arg(long, value_delimiter = ',', default_value = "100,1000", value_parser = workers)]
    workers: Vec<usize>,
    /// Search threads per machine (T): each machine is one credential of its own owner holding
    /// up to T leases at once, as `bookfarm-worker run --threads T` (1: every thread a
    /// volunteer of its own).
    #[arg(long, default_value_t = 1, value_parser = args::count)]
    threads: usize,
    /// Share of the machines the operator trusts, in percent (at least one).
    #[arg(long, default_value_t = 5.0)]
    trusted_percent: f64,
    /// Share of the machines that lie, in percent (at least one), in the rows with liars.
    #[arg(long, default_value_t = 5.0)]
    liar_percent: f64,
    /// Rows: `honest` (volunteers only), then liar kinds: `always`, `10%`, `sleeper[@N]` (honest
    /// for N answers, then always), `core` (only on the honest book's decisive core), `1/500`
    /// or `N/1000`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "honest,always,10%,sleeper,core,1/500"
    )]
    kinds: Vec<String>,
    /// Recorded duration table to use (a level of `sim record`: 4, 8, 12 or 16).
    #[arg(long, default_value_t = 16, value_parser = args::level)]
    times: u8,
    /// Worker speeds spread log-uniformly over [1/S, S] (1: equal speeds).
    #[arg(long, default_value_t = 1.0)]
    spread: f64,
    /// Seed of the worker speeds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Level of the book (what the level table reports; durations come from --times).
    #[arg(long, default_value_t = 4, value_parser = args::search_level)]
    level: u8,
    /// Book depth in plies.
    #[arg(long, default_value_t = 14, value_parser = args::depth)]
    depth: u8,
    /// Deviate window: relative error.
    #[arg(long, default_value_t = 2)]
    relative: i32,
    /// Deviate window: absolute error.
    #[arg(long, default_value_t = 4)]
    absolute: i32,
    /// What simulated searches answer (see `sim run --truth`).
    #[arg(long, default_value = "engine:2", value_parser = truth)]
    truth: sim::Truth,
    /// Cores the simulated coordinator serves RPCs with (its growth runner has one more).
    #[arg(long, default_value_t = 4, value_parser = args::count)]
    coordinator_cores: usize,
    /// The schedule of the build: `serial` or `async` (the asynchronous schedule; its book is
    /// compared with the honest serial build's, which it need not equal).
    #[arg(long, default_value = "serial", value_parser = args::schedule)]
    schedule: Schedule,
    #[command(flatten)]
    async_args: AsyncArgs,
    #[command(flatten)]
    rules: RulesArgs,
    /// How coordinator CPU is charged to virtual time: `measured` (each call's thread CPU: runs
    /// differ with the machine's load) or `fixed` (a modelled cost per operation: 30 µs per
    /// RPC call, 1 ms per growth run plus 50 µs per result it applies; with it a run is a
    /// function of its options).
    #[arg(long, default_value = "measured", value_parser = coordinator_cost)]
    coordinator_cost: sim::Charge,
    /// Builds run first with the same workers, each on a new book, their standings kept (as a
    /// farm's coordinator keeps them from build to build): the row measures the build after
    /// them, whose volunteers return with the standing they earned (0: every volunteer new;
    /// `replica_share`, the service's own figure, counts from its start, warm-up builds
    /// included).
    #[arg(long, default_value_t = 0)]
    warmup_builds: u32,
    /// After each row, `#` lines saying where the replicas went: first answers per volunteer,
    /// checks by kind, spot checks drawn at each streak.
    #[arg(long)]
    breakdown: bool,
    /// Directory for the simulated stores (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The validation rules of `sim trust` (each defaults to the service's).
#[derive(Debug, Args)]
pub struct RulesArgs {
    /// N: results a trust root must confirm before a new credential's word counts.
    #[arg(long, default_value_t = TrustRules::default().earn_after, value_parser = clap::value_parser!(u64).range(1..))]
    earn_after: u64,
    /// Lowest spot-check probability of a result applied on one word (0 to 1).
    #[arg(long, default_value_t = TrustRules::default().spot_floor, value_parser = probability)]
    spot_floor: f64,
    /// Results applied while a provisional result stays in the decisive core before its core
    /// check.
    #[arg(long, default_value_t = TrustRules::default().core_settle)]
    core_settle: u64,
    /// What lengthens a streak: `confirmed` (results a trust root confirmed) or `results`
    /// (also results applied on the contributor's word with no check drawn).
    #[arg(long, default_value = TrustRules::default().streak.as_str(), value_parser = streak_rule)]
    streak: StreakRule,
}

impl RulesArgs {
    fn rules(&self) -> TrustRules {
        TrustRules {
            earn_after: self.earn_after,
            spot_floor: self.spot_floor,
            core_settle: self.core_settle,
            streak: self.streak,
            ..TrustRules::default()
        }
    }

    /// How the header line names the rules.
    fn describe(&self) -> String {
        format!(
            "rules: N = {}, spot floor {}, core settle {}, streak counts {}",
            self.earn_after,
            self.spot_floor,
            self.core_settle,
            self.streak.as_str()
        )
    }
}

fn probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err("expected a probability from 0 to 1".into()),
    }
}

fn coordinator_cost(s: &str) -> Result<sim::Charge, String> {
    match s.trim() {
        "measured" => Ok(sim::Charge::Measured),
        "fixed" => Ok(sim::Charge::Fixed {
            per_call: std::time::Duration::from_micros(30),
            per_run: std::time::Duration::from_millis(1),
            per_result: std::time::Duration::from_micros(50),
        }),
        _ => Err("expected `measured` or `fixed`".into()),
    }
}

fn streak_rule(s: &str) -> Result<StreakRule, String> {
    StreakRule::parse(s).ok_or_else(|| "expected `confirmed` or `results`".into())
}

/// The recorded duration table of `--times` and a checked `--spread` (what every simulation
/// command needs before it runs).
fn recorded_times(level: u8, spread: f64) -> anyhow::Result<TimeTable> {
    let times = TimeTable::recorded(level).with_context(|| {
        format!(
            "--times {level}: no recorded table (recorded levels: {:?})",
            TimeTable::recorded_levels()
        )
    })?;
    if !(spread.is_finite() && spread >= 1.0) {
        bail!("--spread: expected a number ≥ 1");
    }
    Ok(times)
}

fn trust_table(a: &TrustArgs) -> anyhow::Result<()> {
    let times = recorded_times(a.times, a.spread)?;
    for (name, p) in [
        ("--trusted-percent", a.trusted_percent),
        ("--liar-percent", a.liar_percent),
    ] {
        if !(0.0..=50.0).contains(&p) {
            bail!("{name}: expected a share from 0 to 50");
        }
    }
    let kinds = a
        .kinds
        .iter()
        .map(|k| match k.trim() {
            "honest" => Ok(None),
            k => sim::trust::LiarKind::parse(k).map(Some).with_context(|| {
                format!("--kinds: unknown liar kind {k:?} (honest, always, 10%, sleeper[@N], core, 1/500, N/1000)")
            }),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tmp = tempfile::tempdir().context("temporary directory")?;
    let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let ops = vec![Program {
        schedule: a.schedule,
        ..Program::new(Operation::Deviate {
            params: Deviate::new(a.relative, a.absolute),
        })
    }];
    let threads = u32::try_from(a.threads).context("--threads")?;
    println!(
        "# sim trust: deviate {} {} from a new book (level {}, depth {}, {}){}, {} results, level-{} search times, {} search thread{} per machine (one credential each), {} % of the machines trusted, {} % liars, no verifier, coordinator: {} RPC cores + 1 growth core, {}; {}",
        a.relative,
        a.absolute,
        a.level,
        a.depth,
        if a.schedule == Schedule::Async {
            format!("asynchronous schedule, {}", a.async_args.describe())
        } else {
            format!("{} schedule", a.schedule.name())
        },
        match a.warmup_builds {
            0 => String::new(),
            n => format!(
                " after {n} warm-up build{} with the same workers",
                if n == 1 { "" } else { "s" }
            ),
        },
        a.truth.describe(),
        a.times,
        a.threads,
        if a.threads == 1 { "" } else { "s" },
        a.trusted_percent,
        a.liar_percent,
        a.coordinator_cores,
        match a.coordinator_cost {
            sim::Charge::Measured => "thread CPU charged",
            sim::Charge::Fixed { .. } => "fixed costs charged",
        },
        a.rules.describe(),
    );
    println!("{}", sim::trust::TrustRow::HEADER);
    for (i, w) in a.workers.iter().enumerate() {
        let machines = sim::trust::machines(*w, a.threads);
        for (j, kind) in kinds.iter().enumerate() {
            let dir = base.join(format!("trust-w{w}-{i}-{j}"));
            std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
            let cfg = SimConfig {
                workers: machines,
                threads,
                speed_spread: a.spread,
                seed: a.seed,
                times: times.clone(),
                level: a.level,
                depth: a.depth,
                ops: ops.clone(),
                speculation: 0,
                backup_after: 0,
                guess: Guess::Perfect,
                // No crashes, but leases expire as on a real farm: a lease whose job a
                // rollback took back ends at the lease timeout.
                faults: Some(sim::Faults {
                    crash_percent: 0.0,
                    lease_timeout: std::time::Duration::from_secs(60),
                    restart_after: std::time::Duration::from_secs(120),
                }),
                coordinator: sim::CoordinatorModel {
                    rpc_cores: a.coordinator_cores,
                    charge: a.coordinator_cost,
                },
                models: sim::WorkerModels::honest(),
                async_options: a.async_args.options(),
                truth: a.truth,
                trust: a.rules.rules(),
                warmup_builds: a.warmup_builds,
            };
            let who = sim::trust::Mix::of(machines, a.trusted_percent, a.liar_percent, *kind);
            let r = sim::trust::simulate_trust(&cfg, who, &dir).with_context(|| {
                format!("trust simulation with {w} threads on {machines} machines")
            })?;
            println!("{}", r.row());
            if a.breakdown {
                for line in r.breakdown() {
                    println!("{line}");
                }
            }
            tracing::info!(
                workers = w,
                real_seconds = r.report.real_seconds,
                "trust simulation done"
            );
            if a.dir.is_none() {
                std::fs::remove_dir_all(&dir).ok();
            }
        }
    }
    Ok(())
}

/// `sim guesses`.
#[derive(Debug, Args)]
pub struct GuessesArgs {
    /// An Edax book whose positions give the leaf requests (each with its links excluded).
    #[arg(long)]
    book: PathBuf,
    /// Level of the reference searches.
    #[arg(long, default_value_t = 16, value_parser = args::search_level)]
    reference: u8,
    /// Predictor levels to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,6", value_parser = args::search_level)]
    levels: Vec<u8>,
    /// Use every Nth request only (in board order), to bound the reference searches' time.
    #[arg(long, default_value_t = 1, value_parser = args::count)]
    every: usize,
}

/// `sim eta`.
#[derive(Debug, Args)]
pub struct EtaArgs {
    /// Worker counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64", value_parser = workers)]
    workers: Vec<usize>,
    /// Book depths in plies, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "12,16", value_parser = args::depth)]
    depths: Vec<u8>,
    /// Programs, comma-separated: `deviate:REL:ABS` or `enhance:MID:END` (until stable).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "deviate:2:4,deviate:4:8,enhance:4:8"
    )]
    programs: Vec<String>,
    /// Seeds (worker speeds), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    seeds: Vec<u64>,
    /// Schedules the programs run on, comma-separated (`serial`, `async`): one table each.
    #[arg(long, value_delimiter = ',', default_value = "serial,async", value_parser = args::schedule)]
    schedules: Vec<Schedule>,
    /// Worker speeds spread log-uniformly over [1/S, S].
    #[arg(long, default_value_t = 4.0)]
    spread: f64,
    /// Recorded duration table (a level of `sim record`).
    #[arg(long, default_value_t = 4, value_parser = args::level)]
    times: u8,
    /// Print each build's row too.
    #[arg(long)]
    verbose: bool,
}

/// A program of `sim eta --programs`.
fn eta_program(s: &str) -> anyhow::Result<Program> {
    let parts: Vec<&str> = s.split(':').collect();
    let num = |i: usize| -> anyhow::Result<i32> {
        parts
            .get(i)
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("{s:?}: expected deviate:REL:ABS or enhance:MID:END"))
    };
    Ok(Program::new(match parts[0] {
        "deviate" => Operation::Deviate {
            params: Deviate::new(num(1)?, num(2)?),
        },
        "enhance" => Operation::Enhance {
            midgame_error: num(1)?,
            endcut_error: num(2)?,
            until_stable: true,
        },
        _ => bail!("{s:?}: expected deviate:REL:ABS or enhance:MID:END"),
    }))
}

fn eta(a: &EtaArgs) -> anyhow::Result<()> {
    let times = TimeTable::recorded(a.times)
        .with_context(|| format!("--times {}: no recorded table", a.times))?;
    if !(a.spread.is_finite() && a.spread >= 1.0) {
        bail!("--spread: expected a number ≥ 1");
    }
    let programs = a
        .programs
        .iter()
        .map(|p| eta_program(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let tmp = tempfile::tempdir().context("temporary directory")?;
    let fractions = [0.1, 0.25, 0.5, 0.75, 0.9];
    println!(
        "# sim eta: programs {:?}, depths {:?}, workers {:?}, seeds {:?}, schedules {:?}, speeds spread {}, level-{} search times; range = work left × [{}, {}], open-ended programs' high at least elapsed × {} and point at least elapsed × {}",
        a.programs,
        a.depths,
        a.workers,
        a.seeds,
        a.schedules.iter().map(|s| s.name()).collect::<Vec<_>>(),
        a.spread,
        a.times,
        bookfarm_coordinator::service::eta::LOW,
        bookfarm_coordinator::service::eta::HIGH,
        bookfarm_coordinator::service::eta::PAST,
        bookfarm_coordinator::service::eta::MEDIAN_PAST
    );
    if a.verbose {
        println!("schedule	program	depth	workers	seed	positions	wall_s	held_25	held_50	held_75");
    }
    let mut n = 0;
    for &schedule in &a.schedules {
        let mut runs = Vec::new();
        for (pi, program) in programs.iter().enumerate() {
            for &depth in &a.depths {
                for &w in &a.workers {
                    for &seed in &a.seeds {
                        n += 1;
                        let dir = tmp.path().join(format!("run-{n}"));
                        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
                        let cfg = sim::eta::eta_config(
                            Program {
                                schedule,
                                ..program.clone()
                            },
                            w,
                            depth,
                            seed,
                            a.spread,
                            times.clone(),
                        );
                        let run = sim::eta::eta_run(&cfg, &dir)
                            .with_context(|| format!("simulation {n}"))?;
                        std::fs::remove_dir_all(&dir).ok();
                        if a.verbose {
                            let held = |f: f64| {
                                run.check(f).map_or("-".to_string(), |(h, r, _)| {
                                    format!("{}({r:.2})", if h { "yes" } else { "no" })
                                })
                            };
                            println!(
                                "{}	{}	{depth}	{w}	{seed}	{}	{:.1}	{}	{}	{}",
                                schedule.name(),
                                a.programs[pi],
                                run.report.positions,
                                run.end - run.start,
                                held(0.25),
                                held(0.5),
                                held(0.75)
                            );
                        }
                        runs.push(run);
                    }
                }
            }
        }
        println!("schedule	fraction	runs	held	coverage	actual/point p10	p50	p90	width/actual p50");
        for c in sim::eta::coverage(&runs, &fractions) {
            println!(
                "{}	{:.0} %	{}	{}	{:.0} %	{:.2}	{:.2}	{:.2}	{:.2}",
                schedule.name(),
                c.fraction * 100.0,
                c.runs,
                c.held,
                100.0 * c.held as f64 / c.runs.max(1) as f64,
                c.ratio[0],
                c.ratio[1],
                c.ratio[2],
                c.width
            );
        }
    }
    Ok(())
}

/// Run a `sim` command.
pub fn run(cmd: SimCommand) -> anyhow::Result<()> {
    match cmd {
        SimCommand::Run(a) => run_sims(&a),
        SimCommand::Record(a) => record(&a),
        SimCommand::Guesses(a) => guesses(&a),
        SimCommand::Trust(a) => trust_table(&a),
        SimCommand::Eta(a) => eta(&a),
    }
}

fn run_sims(a: &RunArgs) -> anyhow::Result<()> {
    let times = recorded_times(a.times, a.spread)?;
    if !(0..=64).contains(&a.score_noise) {
        bail!("--score-noise: expected a number of discs from 0 to 64");
    }
    if !(0.0..=50.0).contains(&a.crash_percent) {
        bail!("--crash-percent: expected a share from 0 to 50");
    }
    let seconds = |name: &str, v: f64| {
        if v.is_finite() && (0.001..=1e7).contains(&v) {
            Ok(std::time::Duration::from_secs_f64(v))
        } else {
            Err(anyhow::anyhow!(
                "{name}: expected virtual seconds from 0.001 to 10^7"
            ))
        }
    };
    let faults = if a.crash_percent > 0.0 {
        Some(sim::Faults {
            crash_percent: a.crash_percent,
            lease_timeout: seconds("--lease-timeout", a.lease_timeout)?,
            restart_after: seconds("--restart-after", a.restart_after)?,
        })
    } else {
        None
    };
    let tmp = match &a.dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("temporary directory")?),
    };
    let base = a
        .dir
        .clone()
        .or_else(|| tmp.as_ref().map(|t| t.path().to_path_buf()))
        .context("no store directory")?;
    let ops = vec![Program::new(Operation::Deviate {
        params: Deviate::new(a.relative, a.absolute),
    })];
    println!(
        "# sim: deviate {} {} from a new book (level {}, depth {}), {} results, level-{} search times (mean {:.4} s), speeds spread {}, guesses {}% wrong moves, scores ± {}, crashes {}% (lease timeout {} s, restart after {} s), coordinator: {}{}",
        a.relative,
        a.absolute,
        a.level,
        a.depth,
        a.truth.describe(),
        a.times,
        times.mean(),
        a.spread,
        a.guess_error,
        a.score_noise,
        a.crash_percent,
        a.lease_timeout,
        a.restart_after,
        if a.free_coordinator {
            "free (no CPU charged)".to_string()
        } else {
            format!(
                "{} RPC cores + 1 growth core, thread CPU charged",
                a.coordinator_cores
            )
        },
        if a.schedules.contains(&Schedule::Async) {
            format!(", {}", a.async_args.describe())
        } else {
            String::new()
        }
    );
    if a.chain {
        let started = std::time::Instant::now();
        let c = sim::chain::serial_chains(a.truth, &times, a.level, a.depth, &ops);
        println!(
            "# chains of the serial build: {} searches, {:.1} s of search, {} passes; line chain {:.1} s, pass chain {:.1} s (real {:.1} s)",
            c.searches,
            c.seconds,
            c.passes,
            c.line_seconds,
            c.pass_seconds,
            started.elapsed().as_secs_f64()
        );
        for w in &a.workers {
            let threads = w * a.threads;
            println!(
                "# efficiency bound at {threads} threads: {:.3} (line chain), {:.3} (pass chain)",
                c.efficiency_bound(threads, c.line_seconds),
                c.efficiency_bound(threads, c.pass_seconds)
            );
        }
    }
    if a.serial_only {
        let started = std::time::Instant::now();
        let (book, asked) = sim::serial_build_with(a.truth, a.level, a.depth, &ops);
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
    let mut modes: Vec<(&str, u32, u32, Schedule)> = Vec::new();
    if a.schedules.contains(&Schedule::Serial) {
        if !a.prefetch_only {
            modes.push(("round", 0, 0, Schedule::Serial));
        }
        modes.push(("prefetch", 1, 1, Schedule::Serial));
    }
    if a.schedules.contains(&Schedule::Async) {
        modes.push(("async", 0, 1, Schedule::Async));
    }
    for (i, w) in a.workers.iter().enumerate() {
        for (name, spec, backup, schedule) in &modes {
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
                ops: ops
                    .iter()
                    .map(|p| Program {
                        schedule: *schedule,
                        ..p.clone()
                    })
                    .collect(),
                speculation: a.speculation * spec,
                backup_after: a.backup_after * backup,
                guess: Guess::Noisy {
                    move_error_percent: a.guess_error,
                    score_noise: a.score_noise,
                },
                faults,
                coordinator: if a.free_coordinator {
                    sim::CoordinatorModel::free()
                } else {
                    sim::CoordinatorModel {
                        rpc_cores: a.coordinator_cores,
                        charge: sim::Charge::Measured,
                    }
                },
                models: sim::WorkerModels::honest(),
                truth: a.truth,
                async_options: a.async_args.options(),
                trust: TrustRules::default(),
                warmup_builds: 0,
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

fn guesses(a: &GuessesArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&a.book).with_context(|| format!("reading {}", a.book.display()))?;
    let book = bookfarm_book::edax::read_book(&bytes)
        .with_context(|| format!("{}: not an Edax book", a.book.display()))?;
    let requests: Vec<_> = sim::guesses::book_requests(&book, a.reference)
        .into_iter()
        .step_by(a.every.max(1))
        .collect();
    if requests.is_empty() {
        bail!("{}: no position with a move to search", a.book.display());
    }
    println!(
        "# guesses of {} leaf requests of {} ({} positions) against level-{} searches (embedded evaluation)",
        requests.len(),
        a.book.display(),
        book.len(),
        a.reference
    );
    let mut searcher = Searcher::new(bookfarm_engine::eval::default_eval());
    let started = std::time::Instant::now();
    let mut next = std::time::Duration::from_secs(10);
    let reference_cpu = cpu_time::ThreadTime::now();
    let mut reference_seconds = 0.0;
    let qualities = sim::guesses::measure(&mut searcher, &requests, &a.levels, |n| {
        if started.elapsed() >= next {
            next += std::time::Duration::from_secs(10);
            tracing::info!(
                searched = n,
                of = requests.len(),
                "reference searches under way"
            );
        }
        if n == requests.len() {
            reference_seconds = reference_cpu.elapsed().as_secs_f64();
        }
    });
    println!(
        "# reference: {:.1} CPU s ({:.1} ms per search)",
        reference_seconds,
        1e3 * reference_seconds / requests.len() as f64
    );
    println!("level\trequests\twrong_move_pct\tmean_abs_score_err\tp50\tp90\tp99\tus_per_guess");
    for q in &qualities {
        println!(
            "{}\t{}\t{:.1}\t{:.2}\t{}\t{}\t{}\t{:.0}",
            q.level,
            q.requests,
            q.wrong_move_percent(),
            q.mean_score_error(),
            q.score_error_quantile(0.5),
            q.score_error_quantile(0.9),
            q.score_error_quantile(0.99),
            q.micros_per_guess()
        );
    }
    Ok(())
}
