//! `bookfarm-train`: build the dataset, fit the evaluation, measure it (see docs/training.md).

use anyhow::{Context, Result, bail};
use bookfarm_engine::endgame::EndgameContext;
use bookfarm_engine::eval::EvalHeader;
use bookfarm_engine::eval::{Eval, default_eval};
use bookfarm_engine::formats::obf::{ObfPosition, parse_flippy, parse_obf, write_obf};
use bookfarm_engine::search::probcut::ProbcutModel;
use bookfarm_train::dataset::{self, LabelKind, Sample, Split};
use bookfarm_train::fit::{self, Checkpoint, FitParams};
use bookfarm_train::label::{self, LabelSpec};
use bookfarm_train::play::{self, MobilityCorners};
use bookfarm_train::solve::solve_exact;
use bookfarm_train::weights::{self, fnv1a64, version_string};
use bookfarm_train::{games, measure, positions};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::info;

#[derive(Parser, Debug)]
#[command(
    name = "bookfarm-train",
    about = "Train bookfarm's pattern evaluation (Edax eval.dat layout)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Read every game set, replay, de-duplicate, label, split and cache train.bin / test.bin.
    Dataset {
        /// The data folder (../shared/data).
        #[arg(long, default_value = "../shared/data")]
        data: PathBuf,
        /// Output directory for the caches.
        #[arg(long, default_value = "target/train")]
        out: PathBuf,
        /// WTHOR games from this year on are the held-out test set.
        #[arg(long, default_value_t = 2015)]
        test_from_year: u16,
        /// Drop training positions of human games with fewer empties (0 keeps all).
        #[arg(long, default_value_t = 0)]
        human_min_empties: u32,
    },
    /// Solve a seeded sample of test (or train) positions exactly and write them as a new cache.
    Exact {
        /// Input sample cache.
        #[arg(long)]
        input: PathBuf,
        /// Output sample cache (exact labels only).
        #[arg(long)]
        out: PathBuf,
        /// Empties to sample, e.g. 14,15,16,18,19,20.
        #[arg(long, value_delimiter = ',')]
        empties: Vec<u32>,
        /// Positions per empties value.
        #[arg(long, default_value_t = 200)]
        per_empties: usize,
        /// Sampling seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Label positions with the engine's searcher (exact, or a fixed-depth search), resumable: real
    /// openings followed by random moves (--openings), or a seeded sample of a cache's positions.
    Label {
        /// Sample cache holding the openings (with --openings) or the positions to sample.
        #[arg(long)]
        from: PathBuf,
        /// Empties band of the openings taken from --from, e.g. 40-50; the labelled positions
        /// continue them with random moves. Without it, positions of --from are sampled.
        #[arg(long, value_parser = parse_band)]
        openings: Option<(u32, u32)>,
        /// Empties band of the labelled positions, e.g. 20-22.
        #[arg(long, value_parser = parse_band)]
        empties: (u32, u32),
        /// Positions in total (with --openings) or per empties value (sampling).
        #[arg(long)]
        count: usize,
        /// Seed of the position draw.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Search depth; at or above the empties the label is exact.
        #[arg(long, default_value_t = 60)]
        depth: u32,
        /// Selectivity index 0..=5 (5 = no probcut).
        #[arg(long, default_value_t = 5)]
        selectivity: u8,
        /// Weights of the labelling search (default: the embedded default evaluation).
        #[arg(long)]
        eval: Option<PathBuf>,
        /// Caches whose positions are never labelled (e.g. the training caches for a held-out set).
        #[arg(long)]
        exclude: Vec<PathBuf>,
        /// Output cache (resumed when it exists).
        #[arg(long)]
        out: PathBuf,
        /// Positions per checkpoint.
        #[arg(long, default_value_t = 64)]
        chunk: usize,
        /// Keep the labels of --from instead of searching (sampling only, e.g. the WTHOR
        /// theoretical scores of held-out games).
        #[arg(long, conflicts_with_all = ["openings", "eval"])]
        keep_labels: bool,
    },
    /// Match of the engine's own searcher at an Edax level: weights vs other weights, from random
    /// openings, colours swapped.
    EngineMatch {
        /// Weights (eval.dat or .gz).
        #[arg(long)]
        weights: PathBuf,
        /// Opponent weights (default: the embedded default evaluation).
        #[arg(long)]
        opponent: Option<PathBuf>,
        /// Opening pairs (each is played twice).
        #[arg(long, default_value_t = 200)]
        pairs: usize,
        /// Edax level of both sides.
        #[arg(long)]
        level: u8,
        /// Probcut model of the weights' side: `edax`, `bookfarm` (the embedded default weights'
        /// model), `seed1` or a model file (`bookfarm-worker calibrate`). Default: Edax's
        /// constants, as for any weights loaded from a file.
        #[arg(long)]
        probcut: Option<String>,
        /// Probcut model of the opponent's side, as --probcut. Default: the embedded default
        /// weights' model without --opponent, else Edax's constants.
        #[arg(long)]
        opponent_probcut: Option<String>,
        /// Equal time instead of equal level: each side gets this many milliseconds of thread CPU
        /// a midgame move (iterative deepening at the level's selectivity); the level still
        /// decides where the endgame is solved exactly.
        #[arg(long)]
        move_cpu_ms: Option<u64>,
        /// Random plies of each opening.
        #[arg(long, default_value_t = 8)]
        plies: usize,
        /// Opening seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Fit the weights (resumable through --checkpoint) and write eval.dat and eval.dat.gz.
    Fit {
        /// Training caches (several allowed; later files override labels of earlier ones).
        #[arg(long, required = true)]
        train: Vec<PathBuf>,
        /// `K:PATH`: a further training cache (after every --train, so it overrides them) whose
        /// samples count K times in the loss (weighted least squares), e.g. a few thousand
        /// exact labels among 10^6 search labels.
        #[arg(long, value_parser = parse_weighted)]
        weighted_train: Vec<(u32, PathBuf)>,
        /// `E:D`: add D discs to the search labels of positions with E empties (repeatable): the
        /// labelling search's mean signed error against exact solves there, measured by `labels
        /// quality`, taken out (e.g. `21:2.3` for depth-16 labels that are 2.3 discs too low at
        /// 21 empties).
        #[arg(long, value_parser = parse_offset)]
        label_offset: Vec<(u32, f32)>,
        /// Output directory.
        #[arg(long, default_value = "target/train")]
        out: PathBuf,
        /// Checkpoint file (resumes when it exists).
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        /// Plies per phase bucket.
        #[arg(long, default_value_t = 2)]
        bucket_width: usize,
        /// Neighbouring plies also used to train a bucket.
        #[arg(long, default_value_t = 1)]
        overlap: usize,
        /// Weight of overlap samples per ply outside the bucket (`--overlap-decay 0.7`: 0.7 one
        /// ply out, 0.49 two plies out, ...); 1 = full weight.
        #[arg(long, default_value_t = 1.0)]
        overlap_decay: f32,
        /// Huber loss threshold in discs (0 = least squares).
        #[arg(long, default_value_t = 0.0)]
        huber: f32,
        /// Full-batch Adam epochs per bucket.
        #[arg(long, default_value_t = 300)]
        epochs: usize,
        /// Initial learning rate (discs).
        #[arg(long, default_value_t = 0.5)]
        lr: f32,
        /// L2 strength (zero pseudo-observations per weight).
        #[arg(long, default_value_t = 2.0)]
        l2: f32,
        /// Fine-tune from this checkpoint (same bucket width) or weight file (eval.dat or .gz, see
        /// `Checkpoint::from_eval`): start from its weights, L2 towards them; buckets without
        /// samples keep them.
        #[arg(long)]
        prior: Option<PathBuf>,
        /// Train only on exactly labelled samples (solver labels and the WTHOR 24-empties scores).
        #[arg(long)]
        only_exact: bool,
        /// Train only on exact and search labels (no game results, no WTHOR theoretical scores).
        #[arg(long, conflicts_with = "only_exact")]
        only_search_labels: bool,
        /// Never train on positions of these caches (the held-out sets).
        #[arg(long)]
        exclude: Vec<PathBuf>,
        /// Fit only these buckets (parameter experiments, or a fine-tune of selected phases);
        /// the others keep `--prior`, or stay zero without one.
        #[arg(long, value_delimiter = ',')]
        only_buckets: Vec<usize>,
        /// Hold out this many per mille of the merged training samples (a fixed hash of the
        /// position, `fit::in_validation`) and report the fitted weights' static MAE on them per
        /// training cache and empties band: for choosing L2 / overlap without the held-out sets.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..1000))]
        validation: u32,
        /// Version triple written in the eval.dat header, e.g. 1.0.0.
        #[arg(long, default_value = "1.0.0")]
        version: String,
        /// Fit the `bookfarm-eval2` model: Edax's patterns plus the engine's extra terms
        /// (mobility pair, potential mobilities, quadrant parity, three 10-square patterns);
        /// writes eval2.bin(.gz).
        #[arg(long)]
        extra: bool,
    },
    /// MAE / RMSE of the static evaluation per empties bucket.
    Measure {
        /// Weights (eval.dat or .gz).
        #[arg(long)]
        weights: PathBuf,
        /// Sample caches to measure on.
        #[arg(long, required = true)]
        samples: Vec<PathBuf>,
        /// Also measure fixed-depth searches at these depths (exact-labelled samples only).
        #[arg(long, value_delimiter = ',')]
        depths: Vec<u32>,
        /// Empties bands to report, e.g. 14-16,18-20 (default: the fixed buckets of `measure`).
        #[arg(long, value_delimiter = ',', value_parser = parse_band)]
        bands: Vec<(u32, u32)>,
        /// Error analysis of the exactly labelled samples per band, grouped by |exact score|,
        /// mobility, |disc difference| or |static eval| (calibration), e.g. score,eval.
        #[arg(long, value_delimiter = ',')]
        by: Vec<measure::By>,
    },
    /// Label quality: labels of caches against the exact labels of the same positions in a
    /// reference cache (e.g. a held-out set and a search-labelled redraw of it), per band.
    Compare {
        /// Cache with exact labels.
        #[arg(long)]
        reference: PathBuf,
        /// Caches whose labels are compared (positions without an exact reference are skipped).
        #[arg(long, required = true)]
        labels: Vec<PathBuf>,
        /// Empties bands to report, e.g. 20-22,20-20.
        #[arg(long, value_delimiter = ',', value_parser = parse_band, required = true)]
        bands: Vec<(u32, u32)>,
    },
    /// Match: weights vs the mobility+corner evaluation, from random openings, colours swapped.
    Match {
        /// Weights (eval.dat or .gz).
        #[arg(long)]
        weights: PathBuf,
        /// Second weights instead of the mobility+corner baseline.
        #[arg(long)]
        opponent: Option<PathBuf>,
        /// Opening pairs (each is played twice).
        #[arg(long, default_value_t = 100)]
        pairs: usize,
        /// Fixed search depth for both sides.
        #[arg(long, default_value_t = 4)]
        depth: u32,
        /// Random plies of each opening.
        #[arg(long, default_value_t = 8)]
        plies: usize,
        /// Opening seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Convert the flippy exact endgame files (13–22 empties) into a sample cache of exact labels,
    /// dropping positions that occur in a training cache.
    Flippy {
        /// The flippy_endgame folder.
        #[arg(long, default_value = "../shared/data/ffo/flippy_endgame")]
        dir: PathBuf,
        /// Training cache to check for overlap.
        #[arg(long)]
        train: PathBuf,
        /// Output cache.
        #[arg(long)]
        out: PathBuf,
    },
    /// Solve FFO positions exactly with the engine's searcher (depth = empties, no selectivity)
    /// under each given evaluation; prints nodes and time (the evaluation only orders moves).
    Ffo {
        /// OBF file (e.g. ../shared/data/ffo/fforum-40-59.obf).
        #[arg(long)]
        obf: PathBuf,
        /// How many positions from the top of the file.
        #[arg(long, default_value_t = 10)]
        count: usize,
        /// Weight files to compare.
        #[arg(long, required = true)]
        weights: Vec<PathBuf>,
    },
    /// The committed label store (`shared/train/labels`): resumable labelling runs into
    /// append-only sets, listing, label quality.
    Labels {
        #[command(subcommand)]
        cmd: LabelsCmd,
    },
    /// Write weights as a `bookfarm-eval2` file with all extra-term weights zero: it evaluates
    /// (and searches) exactly as the input; a start for `fit --extra --prior`.
    Eval2 {
        /// Weights (eval.dat or .gz).
        #[arg(long)]
        weights: PathBuf,
        /// Output file (plain `bookfarm-eval2` image).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the FNV-1a 64 hash and header of a weight file.
    Info {
        /// Weights (eval.dat or .gz).
        weights: PathBuf,
    },
}

/// Which positions a labelling run draws (prefix-stable: a larger `--count` extends the draw).
#[derive(clap::Args, Debug, Clone)]
struct DrawArgs {
    /// Sample cache holding the openings (`--openings`), the game positions (`--games`), or a
    /// label set to sample (`--sample-of`).
    #[arg(long)]
    from: PathBuf,
    /// Openings of --from with this many empties, continued by random moves to --empties.
    #[arg(long, value_parser = parse_band, conflicts_with = "games")]
    openings: Option<(u32, u32)>,
    /// Positions of --from itself: a seeded permutation of those in --empties (prefix-stable).
    /// Without --openings and --games, `label`'s sample of --count positions per empties value
    /// (not prefix-stable: a fixed-size set such as a held-out set).
    #[arg(long)]
    games: bool,
    /// Empties band of the drawn positions.
    #[arg(long, value_parser = parse_band)]
    empties: (u32, u32),
    /// Positions to draw (a run labels the draw up to here; not part of the set's identity,
    /// except for the per-empties sample, where it is the sample size per empties value).
    #[arg(long)]
    count: usize,
    /// Seed of the draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Positions of these caches or label sets are never drawn.
    #[arg(long)]
    exclude: Vec<PathBuf>,
}

impl DrawArgs {
    /// The canonical text of the draw (a set's identity): inputs by file name.
    fn describe(&self) -> String {
        // Inputs by file name; a committed label part by its set and part (`SET/part-00000.bfl.gz`).
        let name = |p: &PathBuf| {
            let file = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            match p.parent().and_then(|d| d.file_name()) {
                Some(set) if bookfarm_train::labels::is_label_path(p) && p.is_file() => {
                    format!("{}/{file}", set.to_string_lossy())
                }
                _ => file,
            }
        };
        let kind = match (self.openings, self.games) {
            (Some((lo, hi)), _) => format!("random openings={lo}-{hi}"),
            (None, true) => "games".to_string(),
            (None, false) => format!("sample per-empties={}", self.count),
        };
        // The count is not part of the identity: the draw of n positions is the prefix of the
        // draw of more, so a set grows by running it again with a larger --count.
        let mut d = format!(
            "{kind} from={} empties={}-{} seed={}",
            name(&self.from),
            self.empties.0,
            self.empties.1,
            self.seed
        );
        for e in &self.exclude {
            d.push_str(&format!(" exclude={}", name(e)));
        }
        d
    }

    /// Draw the positions.
    fn draw(&self) -> Result<Vec<bookfarm_engine::Board>> {
        let from = dataset::read_samples(&self.from)
            .with_context(|| format!("reading {}", self.from.display()))?;
        let pool: Vec<bookfarm_engine::Board> = from.iter().map(|s| s.board).collect();
        let excluded = keys_of(&self.exclude)?;
        let band = self.empties.0..=self.empties.1;
        Ok(match (self.openings, self.games) {
            (Some((lo, hi)), _) => {
                let starts: Vec<_> = pool
                    .into_iter()
                    .filter(|b| (lo..=hi).contains(&b.empties()))
                    .collect();
                positions::random_continuations(&starts, band, self.count, self.seed, &excluded)
            }
            (None, true) => {
                positions::game_positions(&pool, band, self.count, self.seed, &excluded)
            }
            (None, false) => {
                positions::sample_by_empties(&pool, band, self.count, self.seed, &excluded)
            }
        })
    }
}

/// Options of `labels run`.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Store root.
    #[arg(long, default_value = "shared/train/labels")]
    root: PathBuf,
    /// Set name (a directory of the store).
    #[arg(long)]
    set: String,
    #[command(flatten)]
    draw: DrawArgs,
    /// Search depth (60 = exact with selectivity 5).
    #[arg(long, default_value_t = 60)]
    depth: u32,
    /// Selectivity index 0..=5 (0 = 73 %, 5 = none).
    #[arg(long, default_value_t = 5)]
    selectivity: u8,
    /// Weights of the search (default: the embedded evaluation).
    #[arg(long)]
    eval: Option<PathBuf>,
    /// Work checkpoints (outside version control).
    #[arg(long, default_value = "target/train/labels-work")]
    work: PathBuf,
    /// Positions per checkpoint.
    #[arg(long, default_value_t = 256)]
    chunk: usize,
    /// Largest part, in labels.
    #[arg(long, default_value_t = 200_000)]
    part_max: usize,
    /// A part is cut after this many seconds.
    #[arg(long, default_value_t = 1800)]
    part_secs: u64,
    /// Stop after this many seconds, cutting the part in progress (0 = run to --count): lets
    /// a queue take turns between sets.
    #[arg(long, default_value_t = 0)]
    run_secs: u64,
    /// Label with the leaf search of this Edax level (depth and selectivity per empties, as
    /// `book search --level L` and the farm's leaf searches) instead of --depth/--selectivity.
    #[arg(long, conflicts_with_all = ["depth", "selectivity"])]
    level: Option<u8>,
    /// Write the positions this run would search (after the committed parts, without labels
    /// known in other sets) to this OBF file and stop: the input of `book search` / `expand
    /// search` (each line's comment is `SET INDEX`).
    #[arg(long, conflicts_with = "results")]
    export: Option<PathBuf>,
    /// Take the labels from this OBF file (the output of `book search` / `expand search`: a
    /// best score per position) instead of searching; the run stops at the first draw
    /// position without a result.
    #[arg(long)]
    results: Option<PathBuf>,
    /// CPU seconds the search program reported for --results (recorded per part, pro rata).
    #[arg(long, default_value_t = 0.0, requires = "results")]
    results_cpu_s: f64,
}

#[derive(Subcommand, Debug)]
enum LabelsCmd {
    /// Label a draw into a committed set, resuming after its parts (see `labels.rs`). Run it at
    /// idle priority (`chrt --idle 0`); kill it at any time.
    Run(Box<RunArgs>),
    /// Write a set's labels as a sample cache (for tools and scripts that take cache files).
    Cache {
        /// The set directory (or one part file).
        #[arg(long)]
        set: PathBuf,
        /// Output sample cache.
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the store's sets as a Markdown table (the index of `labels/README.md`).
    List {
        /// Store root.
        #[arg(long, default_value = "shared/train/labels")]
        root: PathBuf,
    },
    /// Label quality of a set: its labels against the exact labels of the same positions in
    /// another set (an exact sample of it), per empties band; written to `quality-NNN.txt`.
    Quality {
        /// The set measured.
        #[arg(long)]
        set: PathBuf,
        /// Set (or cache) with exact labels of some of its positions.
        #[arg(long)]
        exact: PathBuf,
        /// Empties bands, e.g. 18-18,19-19,20-22.
        #[arg(long, value_delimiter = ',', value_parser = parse_band, required = true)]
        bands: Vec<(u32, u32)>,
    },
}

fn parse_version(s: &str) -> Result<EvalHeader> {
    let parts: Vec<u32> = s
        .split('.')
        .map(|p| p.parse::<u32>())
        .collect::<Result<_, _>>()
        .context("version must be v.r.b")?;
    let [version, release, build] = parts[..] else {
        bail!("version must be v.r.b, got {s}")
    };
    Ok(EvalHeader {
        version,
        release,
        build,
        date: 0.0,
    })
}

/// `lo-hi` or a single value, as an inclusive empties band.
fn parse_weighted(s: &str) -> Result<(u32, PathBuf)> {
    let (k, path) = s
        .split_once(':')
        .with_context(|| format!("{s}: expected K:PATH"))?;
    let k: u32 = k.trim().parse()?;
    if k == 0 {
        bail!("{s}: the weight K must be at least 1");
    }
    Ok((k, PathBuf::from(path)))
}

fn parse_offset(s: &str) -> Result<(u32, f32)> {
    let (e, d) = s
        .split_once(':')
        .with_context(|| format!("{s}: expected EMPTIES:DISCS"))?;
    let (e, d): (u32, f32) = (e.trim().parse()?, d.trim().parse()?);
    if e > 60 || !d.is_finite() || d.abs() > 64.0 {
        bail!("{s}: empties must be 0..=60 and the offset within ±64 discs");
    }
    Ok((e, d))
}

fn parse_band(s: &str) -> Result<(u32, u32)> {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let (lo, hi) = (lo.trim().parse::<u32>()?, hi.trim().parse::<u32>()?);
    if lo > hi || hi > 60 {
        bail!("bad empties band {s}");
    }
    Ok((lo, hi))
}

/// Canonical keys of every position in `caches`.
fn keys_of(caches: &[PathBuf]) -> Result<HashSet<(u64, u64)>> {
    let mut keys = HashSet::new();
    for p in caches {
        let s = dataset::read_samples(p).with_context(|| format!("reading {}", p.display()))?;
        keys.extend(s.iter().map(|x| (x.board.player, x.board.opponent)));
    }
    Ok(keys)
}

/// A training sample with the index of the cache it came from.
type Tagged = (Sample, usize);

/// Empties bands of the validation report.
const VALIDATION_BANDS: [(u32, u32); 6] =
    [(0, 13), (14, 16), (17, 19), (20, 22), (23, 26), (27, 60)];

/// Static MAE of `w` on the validation samples, per training cache and empties band (only the
/// buckets this run fitted when `--only-buckets` restricted it), next to the MAE on the samples
/// it was fitted on: a validation MAE close to the training MAE means the fit is not
/// overfitting, so what remains is what the model cannot represent (or the labels' noise).
fn print_validation(
    w: &Eval,
    val: &[Tagged],
    fitted_on: &[Tagged],
    train: &[PathBuf],
    bucket_width: usize,
    only_buckets: &[usize],
) {
    let fitted = |s: &Sample| {
        only_buckets.is_empty()
            || only_buckets.contains(&(bookfarm_train::features::ply_of(&s.board) / bucket_width))
    };
    let mae_of = |set: &[Tagged], k: usize, lo: u32, hi: u32| {
        let pairs: Vec<(f64, f64)> = set
            .par_iter()
            .filter(|(s, o)| *o == k && fitted(s) && (lo..=hi).contains(&s.board.empties()))
            .map(|(s, _)| (f64::from(w.eval0(&s.board)), f64::from(s.label)))
            .collect();
        measure::errors(&pairs)
    };
    println!(
        "| validation: cache | empties | n | static MAE | static RMSE | training n | training MAE |\n|---|---|---|---|---|---|---|"
    );
    for (k, p) in train.iter().enumerate() {
        for &(lo, hi) in &VALIDATION_BANDS {
            let e = mae_of(val, k, lo, hi);
            if e.n == 0 {
                continue;
            }
            let t = mae_of(fitted_on, k, lo, hi);
            let name = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            println!(
                "| {name} | {lo}–{hi} | {} | {:.2} | {:.2} | {} | {:.2} |",
                e.n, e.mae, e.rmse, t.n, t.mae
            );
        }
    }
}

/// One result line of a match, after `prefix`.
fn print_match(prefix: &str, r: &play::MatchResult, secs: f32) {
    let (lo, hi) = r.score_ci95();
    println!(
        "{prefix}games {} wins {} draws {} losses {} score rate {:.1}% (95% CI {:.1}-{:.1}%) mean disc diff {:+.2} ({secs:.0} s) pairs by half points 0-4: {:?}",
        r.games,
        r.wins,
        r.draws,
        r.losses,
        100.0 * r.win_rate(),
        100.0 * lo,
        100.0 * hi,
        r.mean_discs(),
        (0u8..=4)
            .map(|h| r.pair_half_points.iter().filter(|&&x| x == h).count())
            .collect::<Vec<_>>(),
    );
    let [a, b] = r.effort;
    if a.nodes + b.nodes > 0 {
        println!(
            "{prefix}effort: nodes {} / {} ({:.3}x), thread CPU {:.1} s / {:.1} s ({:.3}x), ns/node {:.1} / {:.1}",
            a.nodes,
            b.nodes,
            a.nodes as f64 / b.nodes.max(1) as f64,
            a.cpu_secs,
            b.cpu_secs,
            a.cpu_secs / b.cpu_secs.max(1e-9),
            1e9 * a.cpu_secs / a.nodes.max(1) as f64,
            1e9 * b.cpu_secs / b.nodes.max(1) as f64,
        );
    }
}

/// One side of an engine match: `eval` with the probcut model `spec` names
/// ([`ProbcutModel::from_spec`]), or the model a searcher picks for `eval` without one.
fn match_side(eval: Arc<Eval>, spec: Option<&str>) -> Result<play::Side> {
    let mut side = play::Side::new(eval);
    if let Some(spec) = spec {
        side.opts.probcut = ProbcutModel::from_spec(spec, &side.eval)?;
    }
    Ok(side)
}

/// Weights from a file, or the embedded default evaluation.
fn eval_or_default(path: Option<&PathBuf>) -> Result<Arc<Eval>> {
    Ok(match path {
        Some(p) => weights::load_shared(p)?,
        None => default_eval(),
    })
}

/// Identity of an evaluation for label metadata: its version header and FNV-1a 64.
fn eval_identity(eval: &Eval) -> String {
    format!(
        "{} fnv1a64={:016x}",
        version_string(&eval.header()),
        fnv1a64(&eval.to_file_bytes())
    )
}

fn labels_cmd(cmd: LabelsCmd) -> Result<()> {
    use bookfarm_train::labels::{self, RunParams};
    match cmd {
        LabelsCmd::Run(args) => {
            let RunArgs {
                root,
                set,
                draw,
                depth,
                selectivity,
                eval,
                work,
                chunk,
                part_max,
                part_secs,
                run_secs,
                level,
                export,
                results,
                results_cpu_s,
            } = *args;
            // A set that already covers the requested draw has nothing to do: skip the draw
            // (loading the source and exclusion caches costs more than the check).
            let wanted = if draw.openings.is_none() && !draw.games {
                draw.count * (draw.empties.1 - draw.empties.0 + 1) as usize
            } else {
                draw.count
            };
            let dir = root.join(&set);
            if export.is_none() && dir.join(labels::SET_FILE).is_file() {
                let have = labels::read_set(&dir)?.covered();
                if have >= wanted {
                    println!(
                        "set {set}: {have} positions before, {have} after; 0 parts written, 0 searched, 0 copied"
                    );
                    return Ok(());
                }
            }
            let t = Instant::now();
            let boards = draw.draw()?;
            info!(
                positions = boards.len(),
                secs = t.elapsed().as_secs_f32(),
                "positions drawn"
            );
            let spec = LabelSpec { depth, selectivity };
            let ev = eval_or_default(eval.as_ref())?;
            let exact = level.is_none() && spec == LabelSpec::EXACT;
            let results = match &results {
                Some(path) => Some(read_results(path)?),
                None => None,
            };
            let results_cpu_per_label = results
                .as_ref()
                .map_or(0.0, |r| results_cpu_s / r.len().max(1) as f64);
            let opts = bookfarm_engine::search::SearchOptions::for_eval(&ev);
            let engine = bookfarm_engine::search::SearchSignature::new(&opts, "-").engine;
            let params = RunParams {
                root,
                set,
                draw: draw.describe(),
                spec,
                level,
                results,
                results_cpu_per_label,
                eval: if exact {
                    "-".into()
                } else {
                    eval_identity(&ev)
                },
                engine,
                command: std::env::args().collect::<Vec<_>>().join(" "),
                work,
                chunk,
                part_max,
                part_secs,
                run_secs,
            };
            if let Some(out) = export {
                let todo = labels::missing(&params, &boards)?;
                let lines: Vec<ObfPosition> = todo
                    .iter()
                    .map(|&(i, b)| ObfPosition {
                        board: b,
                        black_to_move: true,
                        scores: Vec::new(),
                        best_score: None,
                        comment: Some(format!("{} {i}", params.set)),
                    })
                    .collect();
                std::fs::write(&out, write_obf(&lines))?;
                println!("{}: {} positions to label", out.display(), lines.len());
                return Ok(());
            }
            let pb = ProgressBar::new(boards.len() as u64);
            pb.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} labelled (eta {eta})",
                )
                .expect("static template"),
            );
            let r = labels::run_set(
                &params,
                &boards,
                &ev,
                || false,
                |done, _| pb.set_position(done as u64),
            )?;
            pb.finish();
            println!(
                "set {}: {} positions before, {} after; {} parts written, {} searched, {} copied",
                params.set, r.had, r.covered, r.parts_written, r.searched, r.copied
            );
        }
        LabelsCmd::List { root } => print!("{}", labels_table(&root)?),
        LabelsCmd::Cache { set, out } => {
            let samples = dataset::read_samples(&set)
                .with_context(|| format!("reading {}", set.display()))?;
            dataset::write_samples(&out, &samples)?;
            println!("{}: {} samples", out.display(), samples.len());
        }
        LabelsCmd::Quality { set, exact, bands } => {
            let s = labels::read_set(&set)?;
            let reference = dataset::read_samples(&exact)
                .with_context(|| format!("reading {}", exact.display()))?;
            let table = measure::label_errors(&reference, &s.samples(), &bands);
            let mut k = 0;
            while set.join(format!("quality-{k:03}.txt")).exists() {
                k += 1;
            }
            let text = format!(
                "# Label quality of set {} ({} labels) against the exact labels of {}\n# command: {}\n{table}",
                s.info.get("set").map_or("?", String::as_str),
                s.covered(),
                exact.display(),
                std::env::args().collect::<Vec<_>>().join(" ")
            );
            std::fs::write(set.join(format!("quality-{k:03}.txt")), &text)?;
            print!("{text}");
        }
    }
    Ok(())
}

/// Best scores of an OBF results file (`book search` output), by canonical position (a score
/// is the mover's, and symmetric positions have the same value).
fn read_results(path: &std::path::Path) -> Result<std::collections::HashMap<(u64, u64), i8>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let positions = parse_obf(&text).with_context(|| format!("{}", path.display()))?;
    let mut out = std::collections::HashMap::new();
    for p in positions {
        let Some(score) = p.best_score else {
            bail!(
                "{}: a position without a score: {}",
                path.display(),
                p.board
            );
        };
        let c = bookfarm_engine::symmetry::canonical(&p.board).0;
        out.insert((c.player, c.opponent), score as i8);
    }
    Ok(out)
}

/// The store's sets as a Markdown table: spec, labels per empties band, CPU, size, quality.
fn labels_table(root: &std::path::Path) -> Result<String> {
    use bookfarm_train::labels;
    let mut out = String::from(
        "| set | draw | label | eval | parts | labels | per empties | CPU s | bytes |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for dir in labels::set_dirs(root)? {
        let s = labels::read_set(&dir)?;
        let mut per: std::collections::BTreeMap<u32, usize> = Default::default();
        for l in s.parts.iter().flat_map(|p| &p.labels) {
            *per.entry(l.board.empties()).or_default() += 1;
        }
        let per = per
            .iter()
            .map(|(e, n)| format!("{e}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let cpu: f64 = s
            .parts
            .iter()
            .filter_map(|p| p.meta.get("cpu_s").and_then(|c| c.parse::<f64>().ok()))
            .sum();
        let bytes: u64 = (0..s.parts.len())
            .filter_map(|k| std::fs::metadata(labels::part_path(&dir, k)).ok())
            .map(|m| m.len())
            .sum();
        let get = |k: &str| s.info.get(k).map_or("", String::as_str).to_string();
        let label = if get("kind") == "exact" {
            "exact".to_string()
        } else {
            format!(
                "depth {} at {} %",
                get("depth"),
                bookfarm_engine::level::selectivity_percent(
                    get("selectivity").parse().unwrap_or(5)
                )
            )
        };
        out.push_str(&format!(
            "| {} | {} | {label} | {} | {} | {} | {per} | {cpu:.0} | {bytes} |\n",
            get("set"),
            get("draw"),
            get("eval"),
            s.parts.len(),
            s.covered()
        ));
    }
    Ok(out)
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Dataset {
            data,
            out,
            test_from_year,
            human_min_empties,
        } => {
            std::fs::create_dir_all(&out)?;
            let t = Instant::now();
            let g = games::read_all(&data)
                .with_context(|| format!("reading games under {}", data.display()))?;
            info!(
                games = g.len(),
                secs = t.elapsed().as_secs_f32(),
                "games read"
            );
            let (train, test, st) = dataset::build(
                &g,
                Split {
                    test_from_year,
                    human_min_empties,
                },
            );
            info!(?st, secs = t.elapsed().as_secs_f32(), "dataset built");
            dataset::write_samples(&out.join("train.bin"), &train)?;
            dataset::write_samples(&out.join("test.bin"), &test)?;
            println!(
                "games {} illegal {} unlabelled {} | positions train {} test {} | unique train {} test {} (dropped {} test positions seen in training)",
                st.games,
                st.illegal,
                st.unlabelled,
                st.raw_positions.0,
                st.raw_positions.1,
                st.unique.0,
                st.unique.1,
                st.test_overlap_dropped
            );
        }
        Cmd::Exact {
            input,
            out,
            empties,
            per_empties,
            seed,
        } => {
            let all = dataset::read_samples(&input)?;
            let mut rng = StdRng::seed_from_u64(seed);
            let mut chosen: Vec<Sample> = Vec::new();
            for e in &empties {
                let mut pool: Vec<Sample> = all
                    .iter()
                    .filter(|s| s.board.empties() == *e && s.board.moves() != 0)
                    .copied()
                    .collect();
                pool.shuffle(&mut rng);
                pool.truncate(per_empties);
                chosen.extend(pool);
            }
            let pb = ProgressBar::new(chosen.len() as u64);
            pb.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} solved ({per_sec})",
                )
                .expect("static template"),
            );
            let t = Instant::now();
            let solved: Vec<(Sample, u64, f64)> = chosen
                .par_iter()
                .map_init(
                    || EndgameContext::with_tt_bits(18),
                    |ctx, s| {
                        let t0 = Instant::now();
                        let (v, nodes) = solve_exact(&s.board, ctx);
                        pb.inc(1);
                        (
                            Sample {
                                label: v as f32,
                                kind: LabelKind::Exact,
                                ..*s
                            },
                            nodes,
                            t0.elapsed().as_secs_f64(),
                        )
                    },
                )
                .collect();
            pb.finish();
            for e in &empties {
                let rows: Vec<&(Sample, u64, f64)> = solved
                    .iter()
                    .filter(|r| r.0.board.empties() == *e)
                    .collect();
                let n = rows.len().max(1) as f64;
                let old_label: Vec<(f64, f64)> = rows
                    .iter()
                    .map(|r| {
                        let orig = chosen
                            .iter()
                            .find(|c| c.board == r.0.board)
                            .map_or(0.0, |c| f64::from(c.label));
                        (orig, f64::from(r.0.label))
                    })
                    .collect();
                let err = measure::errors(&old_label);
                println!(
                    "empties {e}: {} positions, mean {:.0} nodes, mean {:.4} s/position; previous label vs exact: MAE {:.2} RMSE {:.2}",
                    rows.len(),
                    rows.iter().map(|r| r.1 as f64).sum::<f64>() / n,
                    rows.iter().map(|r| r.2).sum::<f64>() / n,
                    err.mae,
                    err.rmse
                );
            }
            let out_samples: Vec<Sample> = solved.into_iter().map(|r| r.0).collect();
            dataset::write_samples(&out, &out_samples)?;
            info!(
                n = out_samples.len(),
                secs = t.elapsed().as_secs_f32(),
                "exact labels written"
            );
        }
        Cmd::Fit {
            mut train,
            weighted_train,
            label_offset,
            out,
            checkpoint,
            bucket_width,
            overlap,
            overlap_decay,
            huber,
            epochs,
            lr,
            l2,
            only_buckets,
            validation,
            prior,
            only_exact,
            only_search_labels,
            exclude,
            version,
            extra,
        } => {
            anyhow::ensure!(
                overlap_decay > 0.0 && overlap_decay <= 1.0,
                "--overlap-decay must be in (0, 1], got {overlap_decay}"
            );
            anyhow::ensure!(
                huber >= 0.0 && huber.is_finite(),
                "--huber must be a finite threshold >= 0, got {huber}"
            );
            let held_out = keys_of(&exclude)?;
            std::fs::create_dir_all(&out)?;
            // Weight of each training cache (index into `train`): 1, or K for --weighted-train.
            let mut cache_weight = vec![1u32; train.len()];
            for (k, p) in weighted_train {
                train.push(p);
                cache_weight.push(k);
            }
            let mut samples: Vec<Sample> = Vec::new();
            // The training cache each sample came from (index into `train`).
            let mut origin: Vec<usize> = Vec::new();
            for (k, p) in train.iter().enumerate() {
                let s =
                    dataset::read_samples(p).with_context(|| format!("reading {}", p.display()))?;
                info!(file = %p.display(), n = s.len(), "samples loaded");
                origin.extend(std::iter::repeat_n(k, s.len()));
                samples.extend(s);
            }
            // Later files override earlier labels of the same (canonical) position.
            let mut idx: Vec<usize> = (0..samples.len()).collect();
            idx.par_sort_by_key(|&i| {
                (
                    samples[i].board.player,
                    samples[i].board.opponent,
                    std::cmp::Reverse(i),
                )
            });
            idx.dedup_by_key(|i| (samples[*i].board.player, samples[*i].board.opponent));
            let (val, samples): (Vec<Tagged>, Vec<Tagged>) = idx
                .into_iter()
                .map(|i| (samples[i], origin[i]))
                .filter(|(s, _)| !only_exact || s.kind == LabelKind::Exact)
                .filter(|(s, _)| {
                    !only_search_labels || matches!(s.kind, LabelKind::Exact | LabelKind::Search)
                })
                .filter(|(s, _)| !held_out.contains(&(s.board.player, s.board.opponent)))
                .partition(|(s, _)| fit::in_validation(&s.board, validation));
            let mut tagged = samples;
            fit::offset_search_labels(&mut tagged, &label_offset);
            let samples = fit::repeat_weighted(&tagged, &cache_weight);
            info!(
                n = samples.len(),
                validation = val.len(),
                "training samples after merging"
            );
            let params = FitParams {
                bucket_width,
                overlap,
                overlap_decay,
                huber,
                epochs,
                lr,
                l2,
                version: parse_version(&version)?,
                only_buckets: only_buckets.clone(),
                extra,
            };
            let block = if extra {
                bookfarm_train::features::BLOCK2
            } else {
                bookfarm_train::features::PACKED_PER_PLY
            };
            let prior_ck = match &prior {
                Some(p) => {
                    let bytes = std::fs::read(p)?;
                    Some(if bytes.starts_with(b"BFCKPT") {
                        Checkpoint::from_bytes(&bytes)?
                    } else {
                        Checkpoint::from_eval(&weights::from_bytes(&bytes)?, bucket_width, block)
                    })
                }
                None => None,
            };
            let mut ck = match &checkpoint {
                Some(p) if p.exists() => {
                    let c = Checkpoint::from_bytes(&std::fs::read(p)?)?;
                    info!(
                        done = c.buckets.iter().filter(|b| b.is_some()).count(),
                        "resuming from checkpoint"
                    );
                    c
                }
                _ => Checkpoint::with_block(bucket_width, block),
            };
            let t = Instant::now();
            let reports = fit::fit(
                &samples,
                &params,
                &mut ck,
                checkpoint.as_deref(),
                prior_ck.as_ref(),
                true,
            )?;
            for r in &reports {
                info!(
                    bucket = r.bucket,
                    samples = r.samples,
                    train_rmse = r.rmse,
                    "bucket fitted"
                );
            }
            let w = ck.to_eval(params.version);
            let img = w.to_file_bytes();
            let name = if extra { "eval2.bin" } else { "eval.dat" };
            std::fs::write(out.join(name), &img)?;
            std::fs::write(out.join(format!("{name}.gz")), weights::to_eval_dat_gz(&w))?;
            println!(
                "fit done in {:.1} s; {name} fnv1a64 {:016x}",
                t.elapsed().as_secs_f32(),
                fnv1a64(&img)
            );
            if !val.is_empty() {
                print_validation(&w, &val, &tagged, &train, bucket_width, &only_buckets);
            }
        }
        Cmd::Measure {
            weights,
            samples,
            depths,
            bands,
            by,
        } => {
            let w = weights::load(&weights)?;
            let bands = if bands.is_empty() {
                measure::BUCKETS.to_vec()
            } else {
                bands
            };
            for p in &samples {
                let s = dataset::read_samples(p)?;
                println!("{}: {} samples", p.display(), s.len());
                print!("{}", measure::table(&w, &s, &depths, &bands));
                for &b in &by {
                    print!("{}", measure::breakdown(&w, &s, &depths, &bands, b));
                }
            }
        }
        Cmd::Compare {
            reference,
            labels,
            bands,
        } => {
            let r = dataset::read_samples(&reference)
                .with_context(|| format!("reading {}", reference.display()))?;
            for p in &labels {
                let s =
                    dataset::read_samples(p).with_context(|| format!("reading {}", p.display()))?;
                println!("{}: {} samples", p.display(), s.len());
                print!("{}", measure::label_errors(&r, &s, &bands));
            }
        }
        Cmd::Label {
            from,
            openings,
            empties,
            count,
            seed,
            depth,
            selectivity,
            eval,
            exclude,
            out,
            chunk,
            keep_labels,
        } => {
            let t = Instant::now();
            let from_samples = dataset::read_samples(&from)
                .with_context(|| format!("reading {}", from.display()))?;
            let pool: Vec<bookfarm_engine::Board> = from_samples.iter().map(|s| s.board).collect();
            let excluded = keys_of(&exclude)?;
            let band = empties.0..=empties.1;
            let boards = match openings {
                Some((lo, hi)) => {
                    let starts: Vec<_> = pool
                        .into_iter()
                        .filter(|b| (lo..=hi).contains(&b.empties()))
                        .collect();
                    positions::random_continuations(&starts, band, count, seed, &excluded)
                }
                None => positions::sample_by_empties(&pool, band, count, seed, &excluded),
            };
            info!(
                positions = boards.len(),
                secs = t.elapsed().as_secs_f32(),
                "positions drawn"
            );
            if let Some(dir) = out.parent() {
                std::fs::create_dir_all(dir)?;
            }
            if keep_labels {
                let mut by_key: Vec<&Sample> = from_samples.iter().collect();
                by_key.sort_unstable_by_key(|s| (s.board.player, s.board.opponent));
                let kept: Vec<Sample> = boards
                    .iter()
                    .filter_map(|b| {
                        by_key
                            .binary_search_by_key(&(b.player, b.opponent), |s| {
                                (s.board.player, s.board.opponent)
                            })
                            .ok()
                            .map(|i| *by_key[i])
                    })
                    .collect();
                dataset::write_samples(&out, &kept)?;
                println!("{} samples kept with their labels", kept.len());
                return Ok(());
            }
            let ev = eval_or_default(eval.as_ref())?;
            let pb = ProgressBar::new(boards.len() as u64);
            pb.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} labelled (eta {eta})",
                )
                .expect("static template"),
            );
            let spec = LabelSpec { depth, selectivity };
            let samples = label::label_resumable(&boards, spec, &ev, &out, chunk, |done, _| {
                pb.set_position(done as u64)
            })?;
            pb.finish();
            for e in empties.0..=empties.1 {
                let rows: Vec<&Sample> =
                    samples.iter().filter(|s| s.board.empties() == e).collect();
                let n = rows.len().max(1) as f64;
                println!(
                    "empties {e}: {} positions ({} exact), mean |label| {:.1}",
                    rows.len(),
                    rows.iter().filter(|s| s.kind == LabelKind::Exact).count(),
                    rows.iter().map(|s| f64::from(s.label.abs())).sum::<f64>() / n
                );
            }
            info!(
                n = samples.len(),
                secs = t.elapsed().as_secs_f32(),
                "labels written"
            );
        }
        Cmd::Labels { cmd } => labels_cmd(cmd)?,
        Cmd::Eval2 { weights, out } => {
            let w = weights::load(&weights)?.with_extra(|_, _| 0);
            let img = w.to_file_bytes();
            std::fs::write(&out, &img)?;
            println!(
                "{}: {} fnv1a64 {:016x}",
                out.display(),
                w.format().name(),
                fnv1a64(&img)
            );
        }
        Cmd::EngineMatch {
            weights,
            opponent,
            pairs,
            level,
            probcut,
            opponent_probcut,
            move_cpu_ms,
            plies,
            seed,
        } => {
            let a = match_side(Arc::new(weights::load(&weights)?), probcut.as_deref())?;
            let b = match_side(
                eval_or_default(opponent.as_ref())?,
                opponent_probcut.as_deref(),
            )?;
            let t = Instant::now();
            let pb = ProgressBar::new(pairs as u64);
            pb.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} opening pairs (eta {eta})",
                )
                .expect("static template"),
            );
            let (budget, prefix) = match move_cpu_ms {
                Some(ms) => (
                    play::MoveBudget::Cpu {
                        level,
                        cpu: Duration::from_millis(ms),
                    },
                    format!("level {level}, {ms} ms CPU a midgame move: "),
                ),
                None => (play::MoveBudget::Level(level), format!("level {level}: ")),
            };
            let r = play::play_engine_match(&a, &b, pairs, budget, plies, seed, || pb.inc(1));
            pb.finish();
            print_match(&prefix, &r, t.elapsed().as_secs_f32());
        }
        Cmd::Match {
            weights,
            opponent,
            pairs,
            depth,
            plies,
            seed,
        } => {
            let w = weights::load(&weights)?;
            let t = Instant::now();
            let r = match opponent {
                Some(o) => play::play_match(&w, &weights::load(&o)?, pairs, depth, plies, seed),
                None => play::play_match(&w, &MobilityCorners, pairs, depth, plies, seed),
            };
            print_match("", &r, t.elapsed().as_secs_f32());
        }
        Cmd::Flippy { dir, train, out } => {
            let train = dataset::read_samples(&train)?;
            let mut keys: Vec<(u64, u64)> = train
                .iter()
                .map(|s| (s.board.player, s.board.opponent))
                .collect();
            keys.sort_unstable();
            let mut samples = Vec::new();
            let mut overlap = 0usize;
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            files.sort();
            for f in files {
                let positions = parse_flippy(&std::fs::read_to_string(&f)?)
                    .with_context(|| format!("reading {}", f.display()))?;
                for p in positions {
                    let (c, _) = bookfarm_engine::symmetry::canonical(&p.board);
                    if keys.binary_search(&(c.player, c.opponent)).is_ok() {
                        overlap += 1;
                        continue;
                    }
                    samples.push(Sample {
                        board: c,
                        label: p.score_for_mover() as f32,
                        count: 1,
                        kind: LabelKind::Exact,
                    });
                }
            }
            dataset::write_samples(&out, &samples)?;
            println!(
                "{} flippy positions kept, {overlap} dropped (also in training)",
                samples.len()
            );
        }
        Cmd::Ffo {
            obf,
            count,
            weights,
        } => {
            use bookfarm_engine::search::Searcher;
            use std::sync::atomic::AtomicBool;
            let positions = parse_obf(&std::fs::read_to_string(&obf)?)
                .with_context(|| format!("reading {}", obf.display()))?;
            let boards: Vec<(String, bookfarm_engine::Board)> = positions
                .into_iter()
                .take(count)
                .map(|p| {
                    let want = p
                        .best_score
                        .map_or_else(|| "?".to_string(), |s| format!("{s:+}"));
                    (want, p.board)
                })
                .collect();
            let abort = AtomicBool::new(false);
            for w in &weights {
                let eval = Arc::new(weights::load(w)?);
                let (mut nodes, mut secs) = (0u64, 0f64);
                for (want, b) in &boards {
                    let mut s = Searcher::new(Arc::clone(&eval));
                    let r = s.search_depth(b, b.empties(), 5, 0, &abort);
                    nodes += r.nodes;
                    secs += r.elapsed.as_secs_f64();
                    println!(
                        "{} empties {} score {:+} (expected {want}) nodes {} time {:.2} s",
                        w.display(),
                        b.empties(),
                        r.score,
                        r.nodes,
                        r.elapsed.as_secs_f64()
                    );
                }
                println!("{}: total nodes {nodes} time {secs:.1} s", w.display());
            }
        }
        Cmd::Info { weights } => {
            let w = weights::load(&weights)?;
            let h = w.header();
            println!(
                "{} version {} date {} fnv1a64 {:016x}",
                w.format().name(),
                version_string(&h),
                h.date,
                fnv1a64(&w.to_file_bytes())
            );
        }
    }
    Ok(())
}
