//! Reading a book: `show`, `check`, `problem`, `accuracy`, `line`, `analyze`, `extract` and
//! `move`, on a store (`--db`) or, where a file is accepted, a book file.

use super::{Db, load_file_or_db, open_db, replay};
use crate::cli::io;
use anyhow::{Context, anyhow, bail};
use bookfarm_book::{BookDate, MemBook, accuracy, extract, leaves, line, play, query};
use bookfarm_coordinator::offline;
use bookfarm_coordinator::service::ServiceConfig;
use bookfarm_coordinator::service::search::render_analysis;
use bookfarm_engine::Move;
use bookfarm_engine::formats::{ggf, transcript, wthor};
use clap::Subcommand;
use rand::{RngCore, SeedableRng};
use std::path::{Path, PathBuf};

/// Reading a book: positions, lines, grades, problems and games.
#[derive(Debug, Subcommand)]
pub enum QueryCommand {
    /// Edax `book show`: the book moves of a position.
    Show {
        #[command(flatten)]
        db: Db,
        /// Moves from the start position (e.g. f5d6c3).
        #[arg(long, default_value = "")]
        moves: String,
    },
    /// Edax `book check [GAMES]`: count the games' moves missing, good and bad in the book;
    /// then report the better leaves (a leaf scoring above every link; `book fix` expands them).
    Check {
        /// Games file (transcripts one per line, or .wtb).
        #[arg(value_parser = crate::cli::args::existing_file)]
        games: Option<PathBuf>,
        #[command(flatten)]
        db: Db,
    },
    /// Edax `book problem [EMPTIES=24] [COUNT=10]`: positions with a unique best book move.
    Problem {
        /// Empty squares of the positions (0..=60).
        #[arg(default_value_t = 24, value_parser = crate::cli::args::empties)]
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
        #[arg(long, required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli::args::book_input)]
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
        #[arg(long, required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli::args::book_input)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
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
        #[arg(value_parser = crate::cli::args::output_file)]
        file: PathBuf,
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
        #[arg(long, default_value_t = 0, value_parser = crate::cli::args::error_margin)]
        randomness: i32,
        /// Keep choosing book moves until the line leaves the book, and print the line.
        #[arg(long)]
        line: bool,
        /// Seed of the random choice [default: from the clock, as Edax].
        #[arg(long)]
        seed: Option<u64>,
        /// The book file (.dat, .csv or .egbk3); or use --db.
        #[arg(long, required_unless_present = "db", conflicts_with = "db", value_parser = crate::cli::args::book_input)]
        file: Option<PathBuf>,
        /// Store directory.
        #[arg(long)]
        db: Option<PathBuf>,
    },
}

/// Run one command of this group.
pub fn run(cmd: QueryCommand) -> anyhow::Result<()> {
    match cmd {
        QueryCommand::Show { db, moves } => {
            let (board, black) = replay_side(&moves)?;
            let c = open_db(&db.db, ServiceConfig::default())?;
            let book = offline::load_book(&c);
            // Edax's text and the position's accuracy grade, then the full-width searches of
            // the position the store holds (`expand analyze`, `expand search`).
            let searched = render_analysis(&c.analysis(&board), black);
            match query::show(&book, &board) {
                Some(text) => {
                    let grade = accuracy::accuracy(&book, &board)
                        .map_or_else(|| "?".to_string(), |a| a.to_string());
                    io::print(&format!("{text}Accuracy: {grade}\n{searched}"))
                }
                None if !searched.is_empty() => io::print(&format!(
                    "The position after {moves:?} is not in the book.\n{searched}"
                )),
                None => bail!("the position after {moves:?} is not in the book"),
            }
        }
        QueryCommand::Check { games, db } => {
            let games = games.as_deref().map(io::read_games).transpose()?;
            io::print(&check(&stored_book(&db)?, games.as_deref()))
        }
        QueryCommand::Problem { empties, count, db } => {
            let book = stored_book(&db)?;
            let mut text = String::new();
            for p in query::problems(&book, empties, count) {
                text.push_str(&p.line());
                text.push('\n');
            }
            io::print(&text)
        }
        QueryCommand::Accuracy { moves, file, db } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            io::print(&grades(&book, &moves)?)
        }
        QueryCommand::Line { moves, file, db } => {
            let list =
                transcript::parse_moves(&moves).with_context(|| format!("moves {moves:?}"))?;
            // With a store, each position's deepest full-width search follows its line.
            let (book, store) = match (file.as_deref(), db.as_deref()) {
                (None, Some(d)) => {
                    let c = open_db(d, ServiceConfig::default())?;
                    (offline::load_book(&c), Some(c))
                }
                (f, d) => (load_file_or_db(f, d)?, None),
            };
            let steps = line::inspect(&book, &list).map_err(|e| anyhow!("moves {moves:?}: {e}"))?;
            let mut text = line::render(&steps);
            if let Some(c) = store {
                text = line_with_searches(&text, &steps, &c);
            }
            io::print(&text)
        }
        QueryCommand::Analyze { game, n, db } => {
            let moves = transcript::parse_moves(&game).with_context(|| format!("game {game:?}"))?;
            let book = stored_book(&db)?;
            let n = n.unwrap_or(moves.len()).clamp(1, moves.len().max(1));
            let verdicts = play::analyze_game(&book, &moves, n)
                .map_err(|i| anyhow!("game {game:?}: move {} is illegal", i + 1))?;
            io::print(&play::render_analysis(&verdicts))
        }
        QueryCommand::Extract { file, db } => {
            let book = stored_book(&db)?;
            let lines = extract::best_lines(&book);
            let bytes = lines_file(&book, &lines, &file)?;
            io::write_atomic(&file, &bytes)?;
            println!("{} games extracted to {}", lines.len(), file.display());
            Ok(())
        }
        QueryCommand::Move {
            moves,
            randomness,
            line,
            seed,
            file,
            db,
        } => {
            let book = load_file_or_db(file.as_deref(), db.as_deref())?;
            let chosen = book_moves(&book, &moves, randomness, line, seed)?;
            let text: String = chosen.iter().map(ToString::to_string).collect();
            io::print(&format!("{text}\n"))
        }
    }
}

/// `book line`'s text with, under each position that has full-width searches in the store, its
/// deepest one (`searched: level 18: C4 +2 (…)`).
fn line_with_searches(
    text: &str,
    steps: &[line::LineStep],
    c: &bookfarm_coordinator::service::Coordinator,
) -> String {
    let mut lines = text.lines();
    let mut out = String::new();
    if let Some(head) = lines.next() {
        out.push_str(head);
        out.push('\n');
    }
    for (l, step) in lines.zip(steps) {
        out.push_str(l);
        out.push('\n');
        if let Some(a) = c.analysis(&step.board).last() {
            out.push_str("        searched: ");
            out.push_str(&a.line(step.black));
            out.push('\n');
        }
    }
    out
}

/// The board after `moves` from the start position and whether Black is to move there.
fn replay_side(moves: &str) -> anyhow::Result<(bookfarm_engine::Board, bool)> {
    let game = transcript::parse_transcript(moves).with_context(|| format!("moves {moves:?}"))?;
    game.final_position()
        .map_err(|e| anyhow!("moves {moves:?}: {e}"))
}

/// The book stored in `db`.
fn stored_book(db: &Db) -> anyhow::Result<MemBook> {
    Ok(offline::load_book(&open_db(
        &db.db,
        ServiceConfig::default(),
    )?))
}

/// `book check`: the games' moves missing, good and bad in the book (illegal moves printed),
/// then the better leaves.
fn check(book: &MemBook, games: Option<&[Vec<Move>]>) -> String {
    let mut text = String::new();
    if let Some(games) = games {
        let r = query::check_games(book, games.iter().map(Vec::as_slice));
        for (g, i) in &r.illegal {
            println!("game {}: illegal move at ply {}", g + 1, i + 1);
        }
        text = format!("{}\n", r.summary());
    }
    let better = leaves::better_leaves(book);
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
    text
}

/// `book accuracy`: the grade of the position after `moves` and of its book moves.
fn grades(book: &MemBook, moves: &str) -> anyhow::Result<String> {
    let board = replay(moves)?;
    let mut grader = accuracy::Grader::new(book);
    let Some(a) = grader.accuracy(&board) else {
        bail!("the position after {moves:?} is not in the book");
    };
    let mut text = format!("accuracy: {a}\n");
    if let Some((_, list)) = query::book_moves(book, &board) {
        for m in list.iter().filter(|m| !m.leaf) {
            let child = board.next_unchecked(m.mv);
            if let Some(c) = grader.accuracy(&child) {
                text.push_str(&format!("  {}:{:+} {c}\n", m.mv, m.score));
            }
        }
    }
    Ok(text)
}

/// `book move`: the book move after `moves` chosen as Edax plays with `randomness`, or with
/// `line` every move until the line leaves the book.
fn book_moves(
    book: &MemBook,
    moves: &str,
    randomness: i32,
    line: bool,
    seed: Option<u64>,
) -> anyhow::Result<Vec<Move>> {
    let mut rng = match seed {
        Some(s) => rand::rngs::StdRng::seed_from_u64(s),
        None => rand::rngs::StdRng::from_os_rng(),
    };
    let mut random = || rng.next_u64();
    let mut board = replay(moves)?;
    let mut chosen = Vec::new();
    loop {
        if board.must_pass() {
            board = board.pass();
        }
        match play::random_move(book, &board, randomness, &mut random) {
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
    Ok(chosen)
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
