//! Engine subcommands: `solve`, `search`, `bench` and `calibrate`.
//!
//! `solve` and `search` print a header line, one tab-separated line per position
//! (`index empties depth selectivity score move nodes seconds`, score for the side to move,
//! selectivity in percent) and a final `total nodes seconds` line.

use anyhow::{Context, bail};
use bookfarm_engine::Board;
use bookfarm_engine::endgame::{self, EndgameContext};
use bookfarm_engine::eval::Eval;
use bookfarm_engine::flip::{self, Backend, Kernels};
use bookfarm_engine::formats::obf::{ObfPosition, parse_obf};
use bookfarm_engine::level::{selectivity_from_percent, selectivity_percent};
use bookfarm_engine::search::calibrate::{self, CalibrationConfig};
use bookfarm_engine::search::probcut::ProbcutModel;
use bookfarm_engine::search::{LeafResult, SearchOptions, Searcher};
use bookfarm_engine::square::{Move, Square};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Engine commands on OBF files.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Exact solve of every position of an OBF file.
    Solve {
        /// The OBF file.
        file: PathBuf,
        /// Edax eval.dat (accepted for symmetry with `search`; the exact solver does not use it).
        #[arg(long)]
        eval: Option<PathBuf>,
    },
    /// Search every position of an OBF file at an Edax level or a fixed depth.
    Search(SearchArgs),
    /// Fixed positions at a fixed depth, or leaf searches at Edax levels with `--levels`; the
    /// total node count is a determinism signature.
    Bench(BenchArgs),
    /// Fit the probcut error model on positions from game records (see
    /// `bookfarm_engine::search::calibrate`) and write it as a parameter file.
    Calibrate {
        /// Edax eval.dat [default: the embedded bookfarm weights].
        #[arg(long)]
        eval: Option<PathBuf>,
        /// Game file: one move list per line (e.g. `f5d6c3…`, Logistello `.gam` lines are accepted).
        #[arg(long)]
        games: PathBuf,
        /// Output parameter file.
        #[arg(long)]
        out: PathBuf,
        /// Number of positions sampled.
        #[arg(long, default_value_t = 400)]
        positions: usize,
        /// Deepest search depth of the regression.
        #[arg(long, default_value_t = 10)]
        max_depth: u32,
        /// Empties `A-B` of positions also solved exactly, to measure the selective endgame's
        /// probcut errors (depth = empties; the searcher's selective endgame starts at 21
        /// empties); `none` measures midgame depths only. Exact solves cost: 21-23 with 150
        /// positions adds ≈ 6 CPU minutes.
        #[arg(long, default_value = "none", value_parser = parse_exact_empties)]
        exact_empties: ExactEmpties,
        /// Number of positions sampled for the exact measurements.
        #[arg(long, default_value_t = 200)]
        exact_positions: usize,
    },
}

/// The `--exact-empties` range (`None` for `none`).
#[derive(Debug, Clone)]
pub struct ExactEmpties(Option<std::ops::RangeInclusive<u32>>);

fn parse_exact_empties(text: &str) -> Result<ExactEmpties, String> {
    if text == "none" {
        return Ok(ExactEmpties(None));
    }
    let bad = || format!("expected `none` or empties `A-B` with 1 <= A <= B <= 60, got `{text}`");
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let (a, b): (u32, u32) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a == 0 || a > b || b > 60 {
        return Err(bad());
    }
    Ok(ExactEmpties(Some(a..=b)))
}

/// Options of `search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The OBF file.
    pub file: PathBuf,
    /// Edax level 0..=60 (depth and selectivity from Edax's level table).
    #[arg(long, conflicts_with = "depth", required_unless_present = "depth")]
    pub level: Option<u8>,
    /// Fixed depth.
    #[arg(long)]
    pub depth: Option<u32>,
    /// Probcut confidence in percent with --depth: 73, 87, 95, 98, 99 or 100 (none).
    #[arg(long, requires = "depth", default_value_t = 100)]
    pub selectivity: u32,
    /// Edax eval.dat [default: the embedded bookfarm weights].
    #[arg(long)]
    pub eval: Option<PathBuf>,
    /// Root moves not to consider, e.g. `d3,c4` (applied to every position).
    #[arg(long, default_value = "")]
    pub exclude: String,
    /// Probcut sigma model: `auto` (the model calibrated for the embedded default weights when
    /// they are used, Edax's published constants otherwise), `edax`, `bookfarm` (fitted by
    /// `calibrate` for the default weights), `seed1` (fitted for eval-seed1.dat) or a parameter
    /// file written by `calibrate`.
    #[arg(long, default_value = "auto")]
    pub probcut: String,
}

/// Options of `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Edax eval.dat [default: the embedded bookfarm weights].
    #[arg(long)]
    pub eval: Option<PathBuf>,
    /// Search depth (no selectivity) of the fixed-depth bench.
    #[arg(long, default_value_t = 8)]
    pub depth: u32,
    /// Use the positions of this OBF file instead of the built-in ones (required with --levels).
    #[arg(long)]
    pub obf: Option<PathBuf>,
    /// Run leaf searches at these Edax levels (e.g. `12,16`) instead of the fixed depth, one
    /// thread, reporting nodes and thread CPU seconds per level.
    #[arg(long, value_delimiter = ',', requires = "obf")]
    pub levels: Vec<u8>,
    /// Edax's results on the same positions (`edax-levels.txt`: `level index depth@sel score move
    /// nodes m:ss.sss` lines) to print next to ours, with the CPU ratio.
    #[arg(long, requires = "levels")]
    pub edax: Option<PathBuf>,
    /// Flip and mobility backend: reference, portable, bmi2, avx2 or avx512 [default: the
    /// fastest this CPU has]. The node counts must not change.
    #[arg(long)]
    pub backend: Option<String>,
    /// Run the baseline code generation of the search and the exact solver even where the CPU
    /// runs x86-64-v3.
    #[arg(long)]
    pub portable_codegen: bool,
    /// Probcut sigma model, as with `search` (`auto`, `edax`, `bookfarm`, `seed1` or a file):
    /// for comparing weights each with its own model, e.g. 1.1.0 with its calibrated file.
    #[arg(long, default_value = "auto")]
    pub probcut: String,
}

/// Run one engine command.
pub fn run(cmd: EngineCommand) -> anyhow::Result<()> {
    match cmd {
        EngineCommand::Solve { file, eval } => solve(&file, eval.as_deref()),
        EngineCommand::Search(args) => search(&args),
        EngineCommand::Bench(args) => bench(&args),
        EngineCommand::Calibrate {
            eval,
            games,
            out,
            positions,
            max_depth,
            exact_empties,
            exact_positions,
        } => {
            let config = CalibrationConfig {
                max_depth,
                exact_empties: exact_empties.0,
                ..CalibrationConfig::default()
            };
            calibrate_cmd(
                eval.as_deref(),
                &games,
                &out,
                positions,
                exact_positions,
                &config,
            )
        }
    }
}

/// The weights of `--eval FILE`, or bookfarm's embedded default weights without it.
fn load_eval(path: Option<&Path>) -> anyhow::Result<Arc<Eval>> {
    Ok(load_eval_with_fingerprint(path)?.0)
}

/// [`load_eval`] with the weights' fingerprint.
fn load_eval_with_fingerprint(path: Option<&Path>) -> anyhow::Result<(Arc<Eval>, String)> {
    let (eval, fingerprint) = bookfarm_runner::load_eval(path)?;
    let h = eval.header();
    tracing::info!(
        path = %path.map_or_else(|| "embedded default".to_string(), |p| p.display().to_string()),
        fingerprint = %fingerprint,
        "evaluation weights version {}.{}.{} loaded",
        h.version,
        h.release,
        h.build
    );
    Ok((eval, fingerprint))
}

fn read_obf(path: &Path) -> anyhow::Result<Vec<ObfPosition>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let positions = parse_obf(&text).with_context(|| format!("{}", path.display()))?;
    if positions.is_empty() {
        bail!("{}: no position", path.display());
    }
    Ok(positions)
}

/// Parse `d3,c4 e6` into a square mask.
fn parse_exclude(text: &str) -> anyhow::Result<u64> {
    let mut mask = 0u64;
    for tok in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
    {
        let sq = Square::parse(tok).with_context(|| format!("--exclude: bad square {tok:?}"))?;
        mask |= sq.bit();
    }
    Ok(mask)
}

const HEADER: &str = "index\tempties\tdepth\tselectivity\tscore\tmove\tnodes\tseconds";

fn print_line(
    out: &mut impl Write,
    index: usize,
    board: &Board,
    r: &LeafResult,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{}\t{}\t{}\t{}\t{:+}\t{}\t{}\t{:.3}",
        index,
        board.empties(),
        r.depth,
        selectivity_percent(r.selectivity),
        r.score,
        r.mv,
        r.nodes,
        r.elapsed.as_secs_f64()
    )
}

fn solve(file: &Path, eval: Option<&Path>) -> anyhow::Result<()> {
    if let Some(path) = eval {
        // Validate the file even though the exact solver does not need weights.
        load_eval(Some(path))?;
    }
    let positions = read_obf(file)?;
    let mut ctx = EndgameContext::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{HEADER}")?;
    let (mut total_nodes, start) = (0u64, Instant::now());
    let mut wrong = 0usize;
    for (i, p) in positions.iter().enumerate() {
        // Like Edax's OBF solver: the hash table is cleared before each problem.
        ctx.clear();
        ctx.nodes = 0;
        let t = Instant::now();
        let (mv, score) = endgame::solve_root(&p.board, 0, &mut ctx);
        let r = LeafResult {
            mv,
            score,
            depth: p.board.empties(),
            selectivity: 5,
            exact: true,
            nodes: ctx.nodes,
            elapsed: t.elapsed(),
        };
        total_nodes += r.nodes;
        print_line(&mut out, i + 1, &p.board, &r)?;
        if let Some(best) = p.best_score
            && best != score
        {
            tracing::error!(
                index = i + 1,
                expected = best,
                got = score,
                "erroneous score"
            );
            wrong += 1;
        } else if let Move::Square(_) = mv
            && !p.scores.is_empty()
            && !p.best_moves().contains(&mv)
        {
            tracing::error!(index = i + 1, %mv, "erroneous move");
            wrong += 1;
        }
    }
    writeln!(
        out,
        "total\t{}\t{:.3}",
        total_nodes,
        start.elapsed().as_secs_f64()
    )?;
    out.flush()?;
    if wrong > 0 {
        bail!(
            "{wrong} of {} results differ from the scores listed in {}",
            positions.len(),
            file.display()
        );
    }
    Ok(())
}

fn search(args: &SearchArgs) -> anyhow::Result<()> {
    let eval = load_eval(args.eval.as_deref())?;
    let excluded = parse_exclude(&args.exclude)?;
    let sel = selectivity_from_percent(args.selectivity).with_context(|| {
        format!(
            "--selectivity {}: expected one of 73, 87, 95, 98, 99, 100",
            args.selectivity
        )
    })?;
    if let Some(level) = args.level
        && level > 60
    {
        bail!("--level {level}: expected 0..=60");
    }
    let opts = SearchOptions {
        probcut: ProbcutModel::from_spec(&args.probcut, &eval)?,
        ..SearchOptions::default()
    };
    let positions = read_obf(&args.file)?;
    let mut searcher = Searcher::with_options(eval, opts);
    let abort = AtomicBool::new(false);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{HEADER}")?;
    let (mut total_nodes, start) = (0u64, Instant::now());
    for (i, p) in positions.iter().enumerate() {
        let r = match (args.level, args.depth) {
            (Some(level), _) => searcher.leaf_search(
                &bookfarm_engine::search::LeafRequest {
                    board: p.board,
                    level,
                    excluded,
                },
                &abort,
            ),
            (None, Some(depth)) => searcher.search_depth(&p.board, depth, sel, excluded, &abort),
            (None, None) => bail!("pass --level L or --depth D"),
        };
        total_nodes += r.nodes;
        print_line(&mut out, i + 1, &p.board, &r)?;
    }
    writeln!(
        out,
        "total\t{}\t{:.3}",
        total_nodes,
        start.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// The built-in bench positions: 24 positions from deterministic pseudo-random games, at
/// 12 to 58 discs (a spread of opening, midgame and early endgame positions).
pub fn bench_positions() -> Vec<Board> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut out = Vec::new();
    while out.len() < 24 {
        let target_empties = 48 - 2 * (out.len() as u32 % 20);
        let mut b = Board::start();
        loop {
            if b.empties() <= target_empties || b.is_game_over() {
                break;
            }
            let moves = b.moves();
            if moves == 0 {
                b = b.pass();
                continue;
            }
            let k = (next() >> 32) as u32 % moves.count_ones();
            let mut m = moves;
            for _ in 0..k {
                m &= m - 1;
            }
            let x = m.trailing_zeros() as u8;
            b = b.play_flips(x, b.flips(Square::new(x).expect("bit index < 64")));
        }
        if !b.is_game_over() && b.moves() != 0 {
            out.push(b);
        }
    }
    out
}

/// CPU time of the calling thread (Linux `/proc/thread-self/schedstat`, nanosecond resolution),
/// or `None` where unavailable. The bench reports it next to wall time because wall time on a
/// shared machine is inflated by other tenants.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// The process-wide flip/mobility kernels of `--backend NAME` (flips and mobility from that
/// backend), or the detected ones.
fn select_backend(name: Option<&str>) -> anyhow::Result<Kernels> {
    let Some(name) = name else {
        return Ok(flip::active());
    };
    let backend = Backend::from_name(name).with_context(|| {
        format!("--backend {name}: expected reference, portable, bmi2, avx2 or avx512")
    })?;
    let kernels = Kernels::new(backend, backend).with_context(|| format!("--backend {name}"))?;
    flip::set_active(kernels);
    Ok(kernels)
}

fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    let kernels = select_backend(args.backend.as_deref())?;
    let (eval, fingerprint) = load_eval_with_fingerprint(args.eval.as_deref())?;
    let opts = SearchOptions {
        probcut: ProbcutModel::from_spec(&args.probcut, &eval)?,
        ..SearchOptions::for_eval(&eval)
    };
    let signature = bookfarm_engine::search::SearchSignature::new(&opts, &fingerprint).to_string();
    let boards: Vec<Board> = match &args.obf {
        Some(p) => read_obf(p)?.into_iter().map(|p| p.board).collect(),
        None => bench_positions(),
    };
    let mut searcher = Searcher::with_options(eval, opts);
    searcher.set_portable_codegen(args.portable_codegen);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "search signature: {signature} (hash {})",
        bookfarm_engine::search::SearchSignature::parse(&signature)
            .map(|s| s.hash())
            .unwrap_or_default()
    )?;
    writeln!(
        out,
        "backend: flips {}, mobility {}, search code generation {}",
        kernels.flips_backend(),
        kernels.moves_backend(),
        if args.portable_codegen {
            "baseline"
        } else {
            "run-time selected"
        }
    )?;
    if args.levels.is_empty() {
        bench_depth(&mut out, &mut searcher, &boards, args.depth)
    } else {
        let edax = match &args.edax {
            Some(path) => read_edax_levels(path)?,
            None => Vec::new(),
        };
        bench_levels(&mut out, &mut searcher, &boards, &args.levels, &edax)
    }
}

/// The fixed-depth bench: every board at `depth`, no selectivity.
fn bench_depth(
    out: &mut impl Write,
    searcher: &mut Searcher,
    boards: &[Board],
    depth: u32,
) -> anyhow::Result<()> {
    let abort = AtomicBool::new(false);
    writeln!(out, "{HEADER}")?;
    let (mut total_nodes, start) = (0u64, Instant::now());
    let cpu_start = thread_cpu_seconds();
    for (i, b) in boards.iter().enumerate() {
        let r = searcher.search_depth(b, depth, 5, 0, &abort);
        total_nodes += r.nodes;
        print_line(out, i + 1, b, &r)?;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, thread_cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => secs,
    };
    writeln!(out, "total\t{total_nodes}\t{secs:.3}")?;
    writeln!(
        out,
        "bench: {} positions, depth {depth}, {total_nodes} nodes, {secs:.3} s wall, {cpu:.3} s cpu, {:.0} nodes/cpu-s",
        boards.len(),
        total_nodes as f64 / cpu.max(1e-9)
    )?;
    Ok(())
}

/// One line of Edax's level results (`edax-levels.txt`).
#[derive(Debug, Clone, PartialEq)]
struct EdaxLevelLine {
    level: u8,
    /// 1-based position index in the OBF file.
    index: usize,
    score: i32,
    mv: String,
    nodes: u64,
    seconds: f64,
}

/// Parse `level index depth@sel score move nodes m:ss.sss` lines (`#` lines are comments).
fn parse_edax_levels(text: &str) -> anyhow::Result<Vec<EdaxLevelLine>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parse = || -> Option<EdaxLevelLine> {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [level, index, _, score, mv, nodes, time] = f.as_slice() else {
                return None;
            };
            let (min, sec) = time.split_once(':')?;
            Some(EdaxLevelLine {
                level: level.parse().ok()?,
                index: index.parse().ok()?,
                score: score.parse().ok()?,
                mv: mv.to_lowercase(),
                nodes: nodes.parse().ok()?,
                seconds: min.parse::<f64>().ok()? * 60.0 + sec.parse::<f64>().ok()?,
            })
        };
        out.push(parse().with_context(|| format!("line {}: cannot read {line:?}", n + 1))?);
    }
    Ok(out)
}

fn read_edax_levels(path: &Path) -> anyhow::Result<Vec<EdaxLevelLine>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_edax_levels(&text).with_context(|| format!("{}", path.display()))
}

/// Leaf searches of every board at each level, one thread, with Edax's figures next to ours.
fn bench_levels(
    out: &mut impl Write,
    searcher: &mut Searcher,
    boards: &[Board],
    levels: &[u8],
    edax: &[EdaxLevelLine],
) -> anyhow::Result<()> {
    let abort = AtomicBool::new(false);
    writeln!(
        out,
        "level\tindex\tempties\tscore\tmove\tnodes\tcpu_s\tedax_score\tedax_move\tedax_nodes\tedax_s"
    )?;
    let mut signature = 0u64;
    let mut summaries = Vec::new();
    for &level in levels {
        if level > 60 {
            bail!("--levels {level}: expected 0..=60");
        }
        let (mut nodes, mut cpu, mut edax_nodes, mut edax_s) = (0u64, 0f64, 0u64, 0f64);
        let (mut compared, mut score_diff, mut same_move) = (0usize, 0i64, 0usize);
        for (i, b) in boards.iter().enumerate() {
            let req = bookfarm_engine::search::LeafRequest {
                board: *b,
                level,
                excluded: 0,
            };
            let cpu0 = thread_cpu_seconds();
            let r = searcher.leaf_search(&req, &abort);
            let secs = match (cpu0, thread_cpu_seconds()) {
                (Some(a), Some(c)) => c - a,
                _ => r.elapsed.as_secs_f64(),
            };
            nodes += r.nodes;
            cpu += secs;
            let ours = format!(
                "{level}\t{}\t{}\t{:+}\t{}\t{}\t{secs:.3}",
                i + 1,
                b.empties(),
                r.score,
                r.mv,
                r.nodes
            );
            match edax.iter().find(|e| e.level == level && e.index == i + 1) {
                Some(e) => {
                    compared += 1;
                    edax_nodes += e.nodes;
                    edax_s += e.seconds;
                    score_diff += i64::from((r.score - e.score).abs());
                    if r.mv.to_string() == e.mv {
                        same_move += 1;
                    }
                    writeln!(
                        out,
                        "{ours}\t{:+}\t{}\t{}\t{:.3}",
                        e.score, e.mv, e.nodes, e.seconds
                    )?;
                }
                None => writeln!(out, "{ours}\t-\t-\t-\t-")?,
            }
        }
        signature += nodes;
        let mut line = format!(
            "level {level}: {} positions, {nodes} nodes, {cpu:.3} s cpu",
            boards.len()
        );
        if compared > 0 {
            line += &format!(
                "; Edax ({compared} positions) {edax_nodes} nodes, {edax_s:.3} s; cpu ratio {:.2}x, nodes ratio {:.2}x; mean |score - Edax| {:.2}, same move {same_move}/{compared}",
                cpu / edax_s.max(1e-9),
                nodes as f64 / (edax_nodes as f64).max(1.0),
                score_diff as f64 / compared as f64
            );
        }
        summaries.push(line);
    }
    for line in &summaries {
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "bench: {} positions, levels {levels:?}, {signature} nodes",
        boards.len()
    )?;
    Ok(())
}

fn calibrate_cmd(
    eval: Option<&Path>,
    games: &Path,
    out_path: &Path,
    positions: usize,
    exact_positions: usize,
    config: &CalibrationConfig,
) -> anyhow::Result<()> {
    let eval_arg = match eval.and_then(Path::file_name) {
        Some(name) => format!("--eval {} ", name.to_string_lossy()),
        None => String::new(),
    };
    let eval = load_eval(eval)?;
    let text = std::fs::read_to_string(games)
        .with_context(|| format!("cannot read {}", games.display()))?;
    let mut boards = calibrate::positions_from_games_with(&text, positions, config)
        .with_context(|| format!("{}", games.display()))?;
    boards.extend(
        calibrate::exact_positions_from_games(&text, exact_positions, config)
            .with_context(|| format!("{}", games.display()))?,
    );
    if boards.is_empty() {
        bail!("{}: no usable position", games.display());
    }
    let exact_arg = match &config.exact_empties {
        Some(r) => format!(
            "--exact-empties {}-{} --exact-positions {exact_positions}",
            r.start(),
            r.end()
        ),
        None => "--exact-empties none".to_string(),
    };
    tracing::info!(
        positions = boards.len(),
        max_depth = config.max_depth,
        exact = %exact_arg,
        "calibrating probcut"
    );
    let cpu_start = thread_cpu_seconds();
    let mut searcher = Searcher::new(eval);
    let fit = calibrate::calibrate(&mut searcher, &boards, config);
    let text = format!(
        "# command: bookfarm-worker calibrate {eval_arg}--games {} --positions {positions} --max-depth {} {exact_arg}{}{}\n{}",
        games.file_name().map_or_else(
            || games.display().to_string(),
            |f| f.to_string_lossy().into_owned()
        ),
        config.max_depth,
        if eval_arg.is_empty() {
            format!(
                "  (no --eval: the embedded default weights, {})",
                bookfarm_engine::eval::DEFAULT_EVAL_VERSION
            )
        } else {
            String::new()
        },
        match (cpu_start, thread_cpu_seconds()) {
            (Some(a), Some(b)) => format!("; {:.0} CPU s", b - a),
            _ => String::new(),
        },
        calibrate::report(&fit, &boards.len(), games)
    );
    std::fs::write(out_path, &text)
        .with_context(|| format!("cannot write {}", out_path.display()))?;
    print!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_empties_parsing() {
        assert_eq!(
            parse_exact_empties("21-23").ok().map(|e| e.0),
            Some(Some(21..=23))
        );
        assert_eq!(parse_exact_empties("none").ok().map(|e| e.0), Some(None));
        for bad in ["", "21", "0-3", "25-21", "21-61", "a-b", "21-23-25"] {
            assert!(parse_exact_empties(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn exclude_parsing() {
        assert_eq!(parse_exclude("").ok(), Some(0));
        let m = parse_exclude("d3, c4 e6").expect("valid");
        assert_eq!(m.count_ones(), 3);
        assert!(parse_exclude("z9").is_err());
    }

    #[test]
    fn bench_positions_are_fixed() {
        let a = bench_positions();
        assert_eq!(a, bench_positions());
        assert_eq!(a.len(), 24);
        assert!(a.iter().all(|b| b.moves() != 0));
    }

    #[test]
    fn edax_level_lines() {
        let lines = parse_edax_levels(
            "# comment\n12 3 12@73% -4 B6 6084985 0:00.235\n\n16 1 16@73% +1 f5 7 1:02.5\n",
        )
        .expect("valid");
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            EdaxLevelLine {
                level: 12,
                index: 3,
                score: -4,
                mv: "b6".to_string(),
                nodes: 6084985,
                seconds: 0.235
            }
        );
        assert!((lines[1].seconds - 62.5).abs() < 1e-9);
        assert!(parse_edax_levels("12 3 12@73% -4 b6 6084985").is_err());
        assert!(parse_edax_levels("12 3 12@73% x b6 1 0:00.1").is_err());
    }

    #[test]
    fn missing_eval_means_the_default_weights() {
        let eval = load_eval(None).expect("the embedded weights load");
        assert!(bookfarm_engine::eval::is_default_eval(&eval));
        assert!(load_eval(Some(Path::new("/nonexistent/eval.dat"))).is_err());
    }
}
