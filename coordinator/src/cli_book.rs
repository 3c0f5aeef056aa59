//! `book …` subcommands: on book files (`dump`, `convert`, `info`, `stats`) and, with `--db`,
//! Edax's book command set on a store directory (see [`bookfarm_coordinator::offline`]).
//!
//! Errors are reported as one line naming the file, the byte offset (book.dat) or line (CSV)
//! and the problem; `main` prints it and exits with status 1.

use anyhow::{Context, anyhow, bail};
use bookfarm_book::{
    BookDate, MemBook, accuracy, csv, dump, edax, egbk3, extract, grow, info, leaves, line,
    maintain, merge, negamax, play, query, research, synth,
};
use bookfarm_coordinator::offline;
use bookfarm_coordinator::progress::{Progress, Snapshot};
use bookfarm_coordinator::service::{
    Coordinator, ServiceConfig, StatusReport, new_book, operation,
};
use bookfarm_coordinator::store::{Store, StoreError};
use bookfarm_coordinator::{CoordinatorError, server};
use bookfarm_engine::eval::Eval;
use bookfarm_engine::formats::{ggf, transcript, wthor};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::Selector;
use bookfarm_runner::exec::engine_factory;
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use rand::{RngCore, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Offline book commands: on book files (dump, convert, info, stats) and, with `--db DIR`, on
/// a store directory (Edax's `book …` command set).
#[derive(Debug, Subcommand)]
pub enum BookCommand {
    /// Print the canonical dump of an Edax book.dat (as `edax_book_dump.py --header`).
    Dump {
        /// The book file.
        #[arg(value_parser = crate::cli_args::existing_file)]
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
        #[arg(value_parser = crate::cli_args::existing_file)]
        input: PathBuf,
        /// Output file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli_args::output_file)]
        output: PathBuf,
    },
    /// Print Edax's `book info` facts: positions, links, leaves, levels, depth.
    Info {
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli_args::existing_file)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Print Edax's `book stats`: hash, stage and best-score distributions.
    Stats {
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli_args::existing_file)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Edax `book new [LEVEL=21] [DEPTH=36]`: a new book holding the searched start position.
    New {
        /// Level of new positions (0..=60).
        #[arg(default_value_t = 21, value_parser = crate::cli_args::level)]
        level: u8,
        /// Book depth in plies (1..=60).
        #[arg(default_value_t = 36, value_parser = crate::cli_args::depth)]
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
        #[arg(value_parser = crate::cli_args::output_file)]
        file: PathBuf,
    },
    /// Edax `book import FILE`: replace the store's book by a book.dat or CSV.
    Import {
        /// The book (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli_args::existing_file)]
        file: PathBuf,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book export FILE`: write the store's book as book.dat or CSV.
    Export {
        #[command(flatten)]
        db: Db,
        /// Output file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli_args::output_file)]
        file: PathBuf,
    },
    /// Edax `book negamax`: recompute every value and sort the links.
    Negamax {
        #[command(flatten)]
        db: Db,
    },
    /// Link every transposition with Edax's `book_link` rule (each position to its book
    /// children; a leaf a link replaces is searched again), negamax, sort: a repair for
    /// imported books (books grown here are linked already, and then nothing changes).
    Link {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book fix`: rebuild broken positions, link, search missing leaves, negamax; then
    /// expand the better leaves (a leaf scoring above every link) once; sort.
    Fix {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book prune`: keep the positions reachable by book moves of one side against best
    /// moves of the other, then fix.
    Prune {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book subtree`: keep only the positions below the given one.
    Subtree {
        #[command(flatten)]
        db: Db,
        /// Moves from the start position to the subtree's root (e.g. f5d6c3).
        #[arg(long, default_value = "")]
        moves: String,
    },
    /// Edax `book show`: the book moves of a position.
    Show {
        #[command(flatten)]
        db: Db,
        /// Moves from the start position (e.g. f5d6c3).
        #[arg(long, default_value = "")]
        moves: String,
    },
    /// Edax `book add GAMES`: add the games' positions (transcripts one per line, or .wtb).
    Add {
        /// Games file.
        #[arg(value_parser = crate::cli_args::existing_file)]
        games: PathBuf,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book deviate [REL=2] [ABS=4]`.
    Deviate {
        /// Relative error in discs (-129..=129).
        #[arg(allow_negative_numbers = true, default_value_t = 2, value_parser = crate::cli_args::relative_error)]
        rel: i32,
        /// Absolute error in discs (0..=65).
        #[arg(default_value_t = 4, value_parser = crate::cli_args::absolute_error)]
        abs: i32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Edax `book enhance [MID=2] [END=4]`.
    Enhance {
        /// Midgame error in discs (0..=129).
        #[arg(default_value_t = 2, value_parser = crate::cli_args::error_margin)]
        mid: i32,
        /// Endcut error in discs (0..=129).
        #[arg(default_value_t = 4, value_parser = crate::cli_args::error_margin)]
        end: i32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Edax `book play`: expand every reachable position without links.
    Play {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Edax `book extend`: expand the leaves that are best moves.
    Extend {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Edax `book fill [DEPTH=1]`: add missing children near the book's positions.
    Fill {
        /// Fill depth (1..=61).
        #[arg(default_value_t = 1, value_parser = crate::cli_args::fill_depth)]
        depth: u32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Merge another book into the store's book: for a position in both, the higher level's
    /// leaf wins, at equal levels the newer book's (by header date; the merged book on a tie);
    /// then link, search cleared leaves, negamax (Edax's own `book merge` is broken).
    Merge {
        /// The other book (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli_args::existing_file)]
        other: PathBuf,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book check [GAMES]`: count the games' moves missing, good and bad in the book;
    /// then report the better leaves (a leaf scoring above every link; `book fix` expands them).
    Check {
        /// Games file (transcripts one per line, or .wtb).
        #[arg(value_parser = crate::cli_args::existing_file)]
        games: Option<PathBuf>,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book problem [EMPTIES=24] [COUNT=10]`: positions with a unique best book move.
    Problem {
        /// Empty squares of the positions (0..=60).
        #[arg(default_value_t = 24, value_parser = crate::cli_args::empties)]
        empties: u32,
        /// Number of positions.
        #[arg(default_value_t = 10)]
        count: usize,
        #[command(flatten)]
        db: Db,
    },
    /// Egaroucid's accuracy grade (A–F, AA–AF) of a position and of its book moves.
    Accuracy {
        /// Moves from the start position (e.g. f5d6c3; empty = the start).
        #[arg(default_value = "")]
        moves: String,
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(long, required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli_args::existing_file)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Every position of a line as the book holds it: value, bounds, level, lines, accuracy,
    /// leaf and links.
    Line {
        /// Moves from the start position (e.g. f5d6c3).
        moves: String,
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(long, required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli_args::existing_file)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Edax `book depth [DEPTH=36]`: set the book depth (positions are added down to
    /// 61 − DEPTH empties).
    Depth {
        /// Book depth in plies (1..=60).
        #[arg(default_value_t = 36, value_parser = crate::cli_args::depth)]
        depth: u8,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book correct`: re-solve every leaf whose level solves it exactly, report the
    /// changed ones, then fix, link, negamax and sort.
    Correct {
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book analyze GAME [N]`: the book's verdict on each of the last N moves of a game.
    Analyze {
        /// The game's moves from the start position (e.g. f5d6c3d3c4).
        game: String,
        /// Number of moves to analyze, from the last one [default: all].
        n: Option<usize>,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book extract FILE`: the book's best-play lines from the start position (first move
    /// F5, transpositions once), written as transcripts, GGF (.ggf) or WTHOR (.wtb).
    Extract {
        /// Output file: .ggf, .wtb, or anything else for transcripts one per line.
        #[arg(value_parser = crate::cli_args::output_file)]
        file: PathBuf,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book store GAME`: add a game's positions (searching new leaves), link, negamax.
    Store {
        /// The game's moves from the start position (e.g. f5d6c3d3c4).
        game: String,
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
    /// A book move chosen as Edax plays from its book with `book randomness R`: uniformly among
    /// the best-sorted moves scoring at least the position's value minus R.
    Move {
        /// Moves from the start position (e.g. f5d6; empty = the start).
        #[arg(default_value = "")]
        moves: String,
        /// Edax's book randomness, in discs (0..=129).
        #[arg(long, default_value_t = 0, value_parser = crate::cli_args::error_margin)]
        randomness: i32,
        /// Keep choosing book moves until the line leaves the book, and print the line.
        #[arg(long)]
        line: bool,
        /// Seed of the random choice [default: from the clock, as Edax].
        #[arg(long)]
        seed: Option<u64>,
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(long, required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli_args::existing_file)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Re-search, at LEVEL, the leaves of positions below LEVEL that can still change a value
    /// inside the error window around the root's value, closest to the root first, until none
    /// is left; a value is never replaced by one from a lower level (what Edax's deepen should
    /// have been).
    Upgrade {
        /// The level to re-search at (1..=60).
        #[arg(value_parser = crate::cli_args::search_level)]
        level: u8,
        /// Half-width of the window around the root's value, in discs (0..=129).
        #[arg(long, default_value_t = 4, value_parser = crate::cli_args::error_margin)]
        error: i32,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Line audit: play the book's best lines to the end with a search at LEVEL and report the
    /// lines whose result contradicts the book's value (win, draw or loss).
    Audit {
        /// The level of the search that plays the lines out.
        #[arg(value_parser = crate::cli_args::search_level)]
        level: u8,
        /// Write the contradicting lines (book line and continuation) as transcripts to FILE,
        /// ready for `book add`.
        #[arg(long, value_parser = crate::cli_args::output_file)]
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
    #[arg(long, value_parser = crate::cli_args::count)]
    threads: Option<usize>,
    /// Evaluation weights [default: the embedded bookfarm weights].
    #[arg(long, env = "BOOKFARM_EVAL", value_parser = crate::cli_args::existing_file)]
    eval: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Options of the selector commands.
#[derive(Debug, Clone, clap::Args)]
pub struct SelectArgs {
    /// Print how many positions the first selection would expand, change nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Dat,
    Csv,
    Egbk3,
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
        Some("egbk3") => Ok(Format::Egbk3),
        _ => Err(anyhow!(
            "{}: unknown book format (expected a .dat, .csv or .egbk3 extension)",
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
        Format::Egbk3 => {
            let records = egbk3::read(&bytes).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            let (mut book, report) = egbk3::to_book(&records);
            book.header_mut().date = BookDate::now();
            tracing::info!(
                records = report.records,
                dropped = report.dropped,
                duplicates = report.duplicates,
                pass_positions = report.pass_positions,
                "{}: Egaroucid book read",
                path.display()
            );
            if !report.need_search.is_empty() || report.bad_leaves > 0 {
                tracing::warn!(
                    need_search = report.need_search.len(),
                    bad_leaves = report.bad_leaves,
                    "{}: positions without a usable leaf; run `book fix` to search them",
                    path.display()
                );
            }
            Ok(book)
        }
    }
}

fn save(book: &MemBook, path: &Path) -> anyhow::Result<()> {
    let bytes = match format_of(path)? {
        Format::Dat => edax::book_to_bytes(book),
        Format::Csv => csv::export_csv(book).into_bytes(),
        Format::Egbk3 => egbk3::write(&egbk3::from_book(book)),
    };
    write_file(path, &bytes)
}

/// Moves as a transcript (passes omitted).
fn game_text(moves: &[Move]) -> String {
    moves
        .iter()
        .filter(|m| matches!(m, Move::Square(_)))
        .map(ToString::to_string)
        .collect()
}

/// Write `bytes` through a temporary sibling and a rename (never a half-written file).
fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp-bookfarm");
    std::fs::write(&tmp, bytes).with_context(|| tmp.display().to_string())?;
    std::fs::rename(&tmp, path).with_context(|| path.display().to_string())?;
    Ok(())
}

/// The extracted lines in the format of `path`'s extension: WTHOR (.wtb; both scores are Black's
/// discs under the book's value of the start position), GGF (.ggf) or transcripts.
fn lines_file(book: &MemBook, lines: &[Vec<Move>], path: &Path) -> anyhow::Result<Vec<u8>> {
    let games = lines
        .iter()
        .map(|l| bookfarm_engine::formats::Game::from_moves(l.iter().copied()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("a book line does not replay: {e}"))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let value = extract::root_value(book).unwrap_or(0);
    Ok(match ext.as_deref() {
        Some("wtb") => {
            let black = u8::try_from((64 + value) / 2).unwrap_or(32);
            let date = BookDate::now();
            let header = wthor::WthorHeader {
                century: (date.year / 100) as u8,
                year_in_century: (date.year % 100) as u8,
                month: date.month,
                day: date.day,
                games_year: date.year as u16,
                board_size: 8,
                ..wthor::WthorHeader::default()
            };
            let records: Vec<_> = games
                .into_iter()
                .map(|game| wthor::WthorGame {
                    tournament: 0,
                    black_player: 0,
                    white_player: 0,
                    black_score: black,
                    theoretical_black_score: black,
                    game,
                })
                .collect();
            wthor::write_wtb(&header, &records)
        }
        Some("ggf") => {
            let mut text = String::new();
            for game in games {
                let g = ggf::GgfGame {
                    black: Some("book".into()),
                    white: Some("book".into()),
                    date: None,
                    result: Some(format!("{value:+}")),
                    game,
                };
                text.push_str(&ggf::write_ggf(&g, "bookfarm"));
                text.push('\n');
            }
            text.into_bytes()
        }
        _ => games
            .iter()
            .map(|g| format!("{}\n", g.to_transcript()))
            .collect::<String>()
            .into_bytes(),
    })
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
        BookCommand::Info { file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            print(&info::BookInfo::of(&book).to_string())
        }
        BookCommand::Stats { file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            print(&info::BookStats::of(&book).to_string())
        }
        BookCommand::New {
            level,
            depth,
            db,
            force,
            if_missing,
            engine,
        } => book_new(level, depth, &db.db, force, if_missing, &engine),
        BookCommand::Synth {
            positions,
            plies,
            seed,
            file,
        } => {
            format_of(&file)?;
            let mut book = synth::random_book(synth::SynthParams {
                seed,
                positions,
                plies,
                level: None,
            });
            negamax::negamax(&mut book);
            negamax::sort_links(&mut book);
            book.header_mut().date = BookDate::now();
            save(&book, &file)?;
            println!(
                "wrote {} positions, {} links to {}",
                book.len(),
                book.n_links(),
                file.display()
            );
            Ok(())
        }
        BookCommand::Import { file, db } => {
            // Read and check the whole file before touching the store.
            let book = load(&file)?;
            // Ctrl-C must not stop the replacement halfway.
            let (_interrupt, _rt) = interrupt_flag()?;
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
        BookCommand::Export { db, file } => {
            format_of(&file)?;
            let c = open_db(&db.db, ServiceConfig::default())?;
            let mut book = offline::load_book(&c);
            book.header_mut().date = BookDate::now();
            save(&book, &file)?;
            println!("wrote {} positions to {}", book.len(), file.display());
            Ok(())
        }
        BookCommand::Negamax { db } => transform(&db.db, None, |book, _| {
            negamax::negamax(book);
            negamax::sort_links(book);
            Ok(format!("negamax: root value {}", root_value(book)))
        }),
        BookCommand::Link { db, engine } => transform(&db.db, Some(&engine), |book, search| {
            let mut search = search.context("link needs the engine")?;
            let before = root_value(book);
            let r = grow::link_command(book, &mut search);
            Ok(format!(
                "link: {} links added, {} searches, {} positions and {} link scores changed by \
                 negamax; root value {before} -> {}",
                r.changes.links,
                r.changes.searches,
                r.negamax.changed,
                r.negamax.link_updates,
                root_value(book)
            ))
        }),
        BookCommand::Fix { db, engine } => transform(&db.db, Some(&engine), |book, search| {
            let mut search = search.context("fix needs the engine")?;
            let r = grow::fix_command(book, &mut search);
            let (better, up) = leaves::upgrade_better_leaves(book, &mut search);
            negamax::sort_links(book);
            Ok(format!(
                "fix: {} broken positions ({} removed), {} links added, {} searches; \
                 {better} better leaves expanded ({} positions added)",
                r.problems.len(),
                r.removed.len(),
                r.changes.links,
                r.changes.searches + up.searches,
                up.positions
            ))
        }),
        BookCommand::Prune { db, engine } => transform(&db.db, Some(&engine), |book, search| {
            let mut search = search.context("prune needs the engine")?;
            let removed = maintain::prune(book);
            let r = grow::fix_command(book, &mut search);
            Ok(format!(
                "prune: {removed} positions removed, {} left ({} searches to fix)",
                book.len(),
                r.changes.searches
            ))
        }),
        BookCommand::Subtree { db, moves } => {
            let board = replay(&moves)?;
            transform(&db.db, None, move |book, _| {
                if book.probe(&board).is_none() {
                    bail!("the position after {moves:?} is not in the book");
                }
                let removed = maintain::subtree(book, &board);
                negamax::negamax(book);
                negamax::sort_links(book);
                Ok(format!(
                    "subtree: {removed} positions removed, {} left",
                    book.len()
                ))
            })
        }
        BookCommand::Show { db, moves } => {
            let board = replay(&moves)?;
            let c = open_db(&db.db, ServiceConfig::default())?;
            let book = offline::load_book(&c);
            match query::show(&book, &board) {
                Some(text) => {
                    // Edax's text, then the position's accuracy grade.
                    let grade = accuracy::accuracy(&book, &board)
                        .map_or_else(|| "?".to_string(), |a| a.to_string());
                    print(&format!("{text}Accuracy: {grade}\n"))
                }
                None => bail!("the position after {moves:?} is not in the book"),
            }
        }
        BookCommand::Add { games, db, engine } => {
            let games = read_games(&games)?;
            searches(&db.db, &engine, None, |c| {
                c.add_games(&games)?;
                Ok(())
            })
        }
        BookCommand::Deviate {
            rel,
            abs,
            db,
            engine,
            select,
        } => {
            let sel = Selector::Deviate {
                relative: rel,
                absolute: abs,
            };
            expansion(&db.db, &engine, &select, sel)
        }
        BookCommand::Enhance {
            mid,
            end,
            db,
            engine,
            select,
        } => {
            let sel = Selector::Enhance {
                midgame: mid,
                endcut: end,
            };
            expansion(&db.db, &engine, &select, sel)
        }
        BookCommand::Play { db, engine, select } => {
            expansion(&db.db, &engine, &select, Selector::Play)
        }
        BookCommand::Extend { db, engine, select } => {
            expansion(&db.db, &engine, &select, Selector::Extend)
        }
        BookCommand::Fill { depth, db, engine } => {
            transform(&db.db, Some(&engine), move |book, search| {
                let mut search = search.context("fill needs the engine")?;
                let r = grow::fill(book, depth, &mut search);
                Ok(format!(
                    "fill: {} positions added, {} searches in {} passes",
                    r.changes.positions, r.changes.searches, r.passes
                ))
            })
        }
        BookCommand::Merge { other, db, engine } => {
            let src = load(&other)?;
            transform(&db.db, Some(&engine), move |book, search| {
                let mut search = search.context("merge needs the engine")?;
                let newer = merge::Newer::by_date(&book.header().date, &src.header().date);
                let r = merge::merge_by_level(book, &src, newer);
                let linked = grow::link_book(book, &mut search);
                negamax::negamax(book);
                negamax::sort_links(book);
                Ok(format!(
                    "merge (higher level wins, equal level: the {} book): {} positions added, \
                     {} upgraded, {} replaced, {} kept, {} links added, {} searches",
                    match newer {
                        merge::Newer::Incoming => "merged",
                        merge::Newer::Existing => "stored",
                    },
                    r.added,
                    r.upgraded,
                    r.replaced,
                    r.kept,
                    r.links_added + linked.links,
                    linked.searches
                ))
            })
        }
        BookCommand::Check { games, db } => {
            let games = games.as_deref().map(read_games).transpose()?;
            let c = open_db(&db.db, ServiceConfig::default())?;
            let book = offline::load_book(&c);
            let mut text = String::new();
            if let Some(games) = games {
                let r = query::check_games(&book, games.iter().map(Vec::as_slice));
                for (g, i) in &r.illegal {
                    println!("game {}: illegal move at ply {}", g + 1, i + 1);
                }
                text = format!("{}\n", r.summary());
            }
            let better = leaves::better_leaves(&book);
            text.push_str(&format!(
                "Better leaves: {} positions whose leaf scores above every link\n",
                better.len()
            ));
            for &id in better.iter().take(20) {
                let b = book.board(id);
                let black = b.empties().is_multiple_of(2);
                let leaf = book.leaf(id);
                text.push_str(&format!(
                    "  {} leaf {}:{:+}\n",
                    query::board_text(&b, black),
                    query::move_text(leaf.mv, black),
                    leaf.score
                ));
            }
            print(&text)
        }
        BookCommand::Accuracy { moves, file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            let board = replay(&moves)?;
            let mut grader = accuracy::Grader::new(&book);
            let Some(a) = grader.accuracy(&board) else {
                bail!("the position after {moves:?} is not in the book");
            };
            let mut text = format!("accuracy: {a}\n");
            if let Some((_, list)) = query::book_moves(&book, &board) {
                for m in list.iter().filter(|m| !m.leaf) {
                    let child = board.next_unchecked(m.mv);
                    if let Some(c) = grader.accuracy(&child) {
                        text.push_str(&format!("  {}:{:+} {c}\n", m.mv, m.score));
                    }
                }
            }
            print(&text)
        }
        BookCommand::Line { moves, file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            let list =
                transcript::parse_moves(&moves).with_context(|| format!("moves {moves:?}"))?;
            let steps = line::inspect(&book, &list).map_err(|e| anyhow!("moves {moves:?}: {e}"))?;
            print(&line::render(&steps))
        }
        BookCommand::Depth { depth, db } => transform(&db.db, None, move |book, _| {
            book.header_mut().n_empties = 61 - i32::from(depth);
            Ok(format!(
                "depth: book depth {depth} (n_empties {})",
                61 - depth
            ))
        }),
        BookCommand::Correct { db, engine } => transform(&db.db, Some(&engine), |book, search| {
            let mut search = search.context("correct needs the engine")?;
            let (r, fixed) = research::correct_command(book, &mut search);
            let mut found = String::new();
            for c in &r.corrections {
                let black = c.board.empties().is_multiple_of(2);
                found.push_str(&format!(
                    "error found: {} leaf {}:{:+} instead of {}:{:+}\n",
                    query::board_text(&c.board, black),
                    query::move_text(c.new.mv, black),
                    c.new.score,
                    query::move_text(c.old.mv, black),
                    c.old.score
                ));
            }
            Ok(format!(
                "{found}correct: {} solved positions, {} searches, {} errors found; fix: {} searches",
                r.solved,
                r.searches,
                r.corrections.len(),
                fixed.changes.searches
            ))
        }),
        BookCommand::Analyze { game, n, db } => {
            let moves = transcript::parse_moves(&game).with_context(|| format!("game {game:?}"))?;
            let c = open_db(&db.db, ServiceConfig::default())?;
            let book = offline::load_book(&c);
            let n = n.unwrap_or(moves.len()).clamp(1, moves.len().max(1));
            let verdicts = play::analyze_game(&book, &moves, n)
                .map_err(|i| anyhow!("game {game:?}: move {} is illegal", i + 1))?;
            print(&play::render_analysis(&verdicts))
        }
        BookCommand::Extract { file, db } => {
            let c = open_db(&db.db, ServiceConfig::default())?;
            let book = offline::load_book(&c);
            let lines = extract::best_lines(&book);
            let bytes = lines_file(&book, &lines, &file)?;
            write_file(&file, &bytes)?;
            println!("{} games extracted to {}", lines.len(), file.display());
            Ok(())
        }
        BookCommand::Store { game, db, engine } => {
            let moves = transcript::parse_moves(&game).with_context(|| format!("game {game:?}"))?;
            transform(&db.db, Some(&engine), move |book, search| {
                let mut search = search.context("store needs the engine")?;
                let r = grow::store_game(book, &moves, &mut search);
                let illegal = r.illegal.map_or_else(String::new, |ill| {
                    format!("illegal move {} at ply {}\n", ill.mv, ill.index + 1)
                });
                Ok(format!(
                    "{illegal}store: {} moves replayed, {} positions and {} links added, {} searches",
                    r.replayed, r.changes.positions, r.changes.links, r.changes.searches
                ))
            })
        }
        BookCommand::Deepen { db } => {
            open_db(&db.db, ServiceConfig::default())?;
            println!(
                "deepen: nothing to do. Edax 4.4+ re-searches the selected leaves at their own \
                 level, so its deepen changes nothing (edax-spec 4.11); use `book upgrade LEVEL` \
                 to re-search leaves at a higher level"
            );
            Ok(())
        }
        BookCommand::Move {
            moves,
            randomness,
            line,
            seed,
            file,
            db,
        } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            let mut rng = match seed {
                Some(s) => rand::rngs::StdRng::seed_from_u64(s),
                None => rand::rngs::StdRng::from_os_rng(),
            };
            let mut random = || rng.next_u64();
            let mut board = replay(&moves)?;
            let mut chosen = Vec::new();
            loop {
                if board.must_pass() {
                    board = board.pass();
                }
                match play::random_move(&book, &board, randomness, &mut random) {
                    None if chosen.is_empty() => {
                        bail!("the position after {moves:?} is not in the book")
                    }
                    Some(Move::None) if chosen.is_empty() => {
                        bail!("no book move within the randomness (stale value?)")
                    }
                    Some(mv) if mv != Move::None => {
                        chosen.push(mv);
                        board = board.next_unchecked(mv);
                        if !line {
                            break;
                        }
                    }
                    _ => break,
                }
            }
            let text: String = chosen.iter().map(ToString::to_string).collect();
            print(&format!("{text}\n"))
        }
        // Upgrade and audit are growth programs: the same ones `expand upgrade` and `expand
        // audit` run on a cluster, here with in-process workers.
        BookCommand::Upgrade {
            level,
            error,
            db,
            engine,
        } => searches(
            &db.db,
            &engine,
            Some(Selector::Upgrade { level, error }),
            |_| Ok(()),
        ),
        BookCommand::Audit {
            level,
            contradictions,
            queue,
            db,
            engine,
        } => {
            let interrupt = interrupt_flag()?;
            let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
            let n = threads(&engine);
            let c = open_db(&db.db, offline::service_config(&eval, &hash))?;
            let sel = Selector::Audit { level, queue };
            run_searches(&c, &engine, Some(sel), eval, hash, n, interrupt)?;
            if let Some(path) = contradictions {
                let games: String = c
                    .last_audit()
                    .iter()
                    .filter(|a| a.contradicts())
                    .map(|a| format!("{}{}\n", game_text(&a.line), game_text(&a.continuation)))
                    .collect();
                write_file(&path, games.as_bytes())?;
            }
            Ok(())
        }
        BookCommand::Problem { empties, count, db } => {
            let c = open_db(&db.db, ServiceConfig::default())?;
            let book = offline::load_book(&c);
            let mut text = String::new();
            for p in query::problems(&book, empties, count) {
                text.push_str(&p.line());
                text.push('\n');
            }
            print(&text)
        }
    }
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

fn load_file_or_db(file: Option<&Path>, db: Option<&Path>) -> anyhow::Result<MemBook> {
    match (file, db) {
        (Some(f), _) => load(f),
        (None, Some(d)) => Ok(offline::load_book(&open_db(d, ServiceConfig::default())?)),
        (None, None) => bail!("give a book file or --db DIR"),
    }
}

fn root_value(book: &MemBook) -> String {
    book.probe(&Board::start())
        .map_or_else(|| "unknown".into(), |id| book.score(id).value.to_string())
}

/// The board after `moves` (from the start position; empty = the start).
fn replay(moves: &str) -> anyhow::Result<Board> {
    let mut b = Board::start();
    for mv in transcript::parse_moves(moves).with_context(|| format!("moves {moves:?}"))? {
        if b.must_pass() && mv != Move::Pass {
            b = b.pass();
        }
        b = b
            .play_move(mv)
            .map_err(|e| anyhow!("moves {moves:?}: {e}"))?;
    }
    Ok(b)
}

/// Games of a file: WTHOR by the .wtb extension, else transcripts one per line (empty lines
/// and `#` comments skipped).
fn read_games(path: &Path) -> anyhow::Result<Vec<Vec<Move>>> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    let wtb = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("wtb"));
    if wtb {
        let (_, games) = wthor::read_wtb(&bytes).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        return Ok(games.into_iter().map(|g| g.game.moves).collect());
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        anyhow!(
            "{}: at byte {}: not UTF-8 text",
            path.display(),
            e.valid_up_to()
        )
    })?;
    let mut games = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        games.push(
            transcript::parse_moves(line)
                .map_err(|e| anyhow!("{}: line {}: {e}", path.display(), i + 1))?,
        );
    }
    Ok(games)
}

/// Ctrl-C (and SIGTERM) as a flag: installed once, the signal no longer kills the process, so
/// a store write in progress always completes. Returns the flag and the runtime that watches.
pub(crate) fn interrupt_flag() -> anyhow::Result<(Arc<AtomicBool>, tokio::runtime::Runtime)> {
    let rt = runtime()?;
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    rt.spawn(async move {
        shutdown_signal().await;
        f.store(true, Ordering::SeqCst);
    });
    Ok((flag, rt))
}

/// Resolves once `flag` is set (by [`interrupt_flag`]'s watcher).
pub(crate) async fn flag_set(flag: Arc<AtomicBool>) {
    while !flag.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn threads(e: &EngineArgs) -> usize {
    e.threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

type Search<'a> = Option<&'a mut dyn FnMut(&LeafRequest) -> LeafResult>;

/// Run a whole-book transformation on a copy of the stored book and store the result; an
/// interrupt (Ctrl-C) before the end leaves the store unchanged. With the engine, `f`'s
/// searches run on every thread ([`offline::speculate`]: `f` may run several times on copies;
/// the book stored is the one a serial run gives).
fn transform<F>(db: &Path, engine: Option<&EngineArgs>, mut f: F) -> anyhow::Result<()>
where
    F: FnMut(&mut MemBook, Search<'_>) -> anyhow::Result<String>,
{
    let make = match engine {
        Some(e) => Some(engine_factory(
            bookfarm_runner::load_eval(e.eval.as_deref())?.0,
        )),
        None => None,
    };
    let c = open_db(db, ServiceConfig::default())?;
    let (abort, _rt) = interrupt_flag()?;
    let mut book = offline::load_book(&c);
    let message = match (make, engine) {
        (Some(make), Some(e)) => {
            let n = threads(e);
            let t0 = Instant::now();
            let run =
                offline::speculate(&mut book, &make, n, &abort, |b, search| f(b, Some(search)));
            let (message, sp) = match run {
                Ok(done) => done,
                Err(offline::SpeculateError::Interrupted) => {
                    bail!("interrupted: the store is unchanged")
                }
                Err(e) => return Err(e.into()),
            };
            tracing::info!(
                threads = n,
                waves = sp.waves,
                searched = sp.searched,
                used = sp.used,
                seconds = t0.elapsed().as_secs_f64(),
                "searches done"
            );
            message?
        }
        _ => f(&mut book, None)?,
    };
    if abort.load(Ordering::SeqCst) {
        bail!("interrupted: the store is unchanged");
    }
    let n = offline::replace_book(&c, &book).with_context(|| store_context(db))?;
    c.flush().with_context(|| store_context(db))?;
    println!("{message}; {n} positions stored");
    Ok(())
}

/// Open the store with the engine's evaluation fingerprint, let `prepare` queue searches, then
/// run them (and the `selector`'s expansion) with in-process workers.
fn searches(
    db: &Path,
    engine: &EngineArgs,
    selector: Option<Selector>,
    prepare: impl FnOnce(&Coordinator) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    // Catch Ctrl-C before anything touches the store.
    let interrupt = interrupt_flag()?;
    let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
    let n = threads(engine);
    let c = open_db(db, offline::service_config(&eval, &hash))?;
    prepare(&c)?;
    run_searches(&c, engine, selector, eval, hash, n, interrupt)
}

fn run_searches(
    c: &Coordinator,
    engine: &EngineArgs,
    selector: Option<Selector>,
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
        selector,
        n,
        eval,
        hash,
        flag_set(flag),
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
    let interrupt = interrupt_flag()?;
    let (eval, hash) = bookfarm_runner::load_eval(engine.eval.as_deref())?;
    let store = Store::open(db).with_context(|| store_context(db))?;
    let (h, entries) = new_book(level, depth);
    store
        .create(&h, &entries)
        .with_context(|| store_context(db))?;
    drop(store);
    let n = threads(engine);
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
    sel: Selector,
) -> anyhow::Result<()> {
    if select.dry_run {
        let c = open_db(db, ServiceConfig::default())?;
        let mut book = offline::load_book(&c);
        let n = first_selection(&mut book, sel);
        println!("{sel}: {n} positions would be expanded in the first pass");
        return Ok(());
    }
    searches(db, engine, Some(sel), |_| Ok(()))
}

/// How many positions the first pass of `sel` marks (the growth driver's first marking, run
/// on a copy with no search result known).
fn first_selection(book: &mut MemBook, sel: Selector) -> usize {
    let mut driver = bookfarm_book::driver::Driver::new(operation(sel), None);
    let none: std::collections::HashMap<LeafRequest, LeafResult> = std::collections::HashMap::new();
    let _ = driver.run(book, &none, 0);
    match &driver.state().phase {
        bookfarm_book::driver::Phase::Expanding { todo, .. } => todo.len(),
        _ => 0,
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
