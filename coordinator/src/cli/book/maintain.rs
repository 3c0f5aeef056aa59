//! Whole-book transformations: each runs on a copy of the stored book and replaces it at the
//! end ([`transform`]), so an interrupt before the end leaves the store as it was. Their
//! searches run on every thread, and the book stored is the one a serial run gives.

use super::{Db, EngineArgs, open_db, replay, root_value, store_context};
use crate::cli::io;
use anyhow::{Context, bail};
use bookfarm_book::driver::run_serial;
use bookfarm_book::program::Operation;
use bookfarm_book::{MemBook, grow, leaves, maintain, merge, negamax, query, research};
use bookfarm_coordinator::offline;
use bookfarm_coordinator::service::ServiceConfig;
use bookfarm_engine::Move;
use bookfarm_engine::formats::transcript;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_runner::exec::engine_factory;
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Whole-book transformations of a stored book.
#[derive(Debug, Subcommand)]
pub enum MaintainCommand {
    /// Check a stored book without changing it: the base file against its checksums (the
    /// error names the file and the offset of a damaged block), then every store record read
    /// and decoded as a start reads them.
    Verify {
        #[command(flatten)]
        db: Db,
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
    /// Edax `book fill [DEPTH=1]`: add missing children near the book's positions.
    Fill {
        /// Fill depth (1..=61).
        #[arg(default_value_t = 1, value_parser = crate::cli::args::fill_depth)]
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
        #[arg(value_parser = crate::cli::args::book_input)]
        other: PathBuf,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Edax `book depth [DEPTH=36]`: set the book depth (positions are added down to
    /// 61 − DEPTH empties).
    Depth {
        /// Book depth in plies (1..=60).
        #[arg(default_value_t = 36, value_parser = crate::cli::args::depth)]
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
    /// Edax `book store GAME`: add a game's positions (searching new leaves), link, negamax.
    Store {
        /// The game's moves from the start position (e.g. f5d6c3d3c4).
        game: String,
        #[command(flatten)]
        db: Db,
        #[command(flatten)]
        engine: EngineArgs,
    },
}

/// Run one command of this group.
pub fn run(cmd: MaintainCommand) -> anyhow::Result<()> {
    match cmd {
        MaintainCommand::Verify { db } => {
            let store = bookfarm_coordinator::store::Store::open_book(&db.db)
                .with_context(|| store_context(&db.db))?;
            let bytes = store.verify_base()?;
            let records = store.verify_records()?;
            let loaded = store.load(&db.db)?;
            println!(
                "ok: {} ({bytes} bytes of base file and {records} records checked, {} positions, \
                 {} results read)",
                db.db.display(),
                loaded.book.len(),
                loaded.results.len()
            );
            Ok(())
        }
        MaintainCommand::Negamax { db } => transform(&db.db, None, |book, _| {
            negamax::negamax(book);
            negamax::sort_links(book);
            Ok(format!("negamax: root value {}", root_value(book)))
        }),
        MaintainCommand::Link { db, engine } => transform(&db.db, Some(&engine), link),
        MaintainCommand::Fix { db, engine } => transform(&db.db, Some(&engine), fix),
        MaintainCommand::Prune { db, engine } => transform(&db.db, Some(&engine), prune),
        MaintainCommand::Subtree { db, moves } => {
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
        MaintainCommand::Fill { depth, db, engine } => {
            transform(&db.db, Some(&engine), move |book, search| {
                let mut search = search.context("fill needs the engine")?;
                let r = grow::fill(book, depth, &mut search);
                Ok(format!(
                    "fill: {} positions added, {} searches in {} passes",
                    r.changes.positions, r.changes.searches, r.passes
                ))
            })
        }
        MaintainCommand::Merge { other, db, engine } => {
            let other = io::read_book(&other)?;
            transform(&db.db, Some(&engine), move |book, search| {
                merge_book(book, &other, search)
            })
        }
        MaintainCommand::Depth { depth, db } => transform(&db.db, None, move |book, _| {
            book.header_mut().n_empties = 61 - i32::from(depth);
            Ok(format!(
                "depth: book depth {depth} (n_empties {})",
                61 - depth
            ))
        }),
        MaintainCommand::Correct { db, engine } => transform(&db.db, Some(&engine), correct),
        MaintainCommand::Store { game, db, engine } => {
            let moves = transcript::parse_moves(&game).with_context(|| format!("game {game:?}"))?;
            transform(&db.db, Some(&engine), move |book, search| {
                store_game(book, &moves, search)
            })
        }
    }
}

/// The searches of a transformation: `None` for the ones that search nothing.
type Search<'a> = Option<&'a mut dyn FnMut(&LeafRequest) -> LeafResult>;

/// `book link`: Edax's `book_link`, negamax, sort.
fn link(book: &mut MemBook, search: Search<'_>) -> anyhow::Result<String> {
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
}

/// `book fix`: Edax's fix, then the better leaves expanded once, negamax, sort.
fn fix(book: &mut MemBook, search: Search<'_>) -> anyhow::Result<String> {
    let mut search = search.context("fix needs the engine")?;
    let r = grow::fix_command(book, &mut search);
    let boards: Vec<_> = leaves::better_leaves(book)
        .into_iter()
        .map(|id| book.board(id))
        .collect();
    let better = boards.len();
    let up = run_serial(book, Operation::Expand { boards }, &mut search).changes;
    negamax::negamax(book);
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
}

/// `book prune`, then fix.
fn prune(book: &mut MemBook, search: Search<'_>) -> anyhow::Result<String> {
    let mut search = search.context("prune needs the engine")?;
    let removed = maintain::prune(book);
    let r = grow::fix_command(book, &mut search);
    Ok(format!(
        "prune: {removed} positions removed, {} left ({} searches to fix)",
        book.len(),
        r.changes.searches
    ))
}

/// `book merge OTHER`: merge by level, link, search cleared leaves, negamax, sort.
fn merge_book(book: &mut MemBook, other: &MemBook, search: Search<'_>) -> anyhow::Result<String> {
    let mut search = search.context("merge needs the engine")?;
    let newer = merge::Newer::by_date(&book.header().date, &other.header().date);
    let r = merge::merge_by_level(book, other, newer);
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
}

/// `book correct`: re-solve the exact leaves, report the changed ones, then fix.
fn correct(book: &mut MemBook, search: Search<'_>) -> anyhow::Result<String> {
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
}

/// `book store GAME`: add the game's positions, link, negamax.
fn store_game(book: &mut MemBook, moves: &[Move], search: Search<'_>) -> anyhow::Result<String> {
    let mut search = search.context("store needs the engine")?;
    let r = grow::store_game(book, moves, &mut search);
    let illegal = r.illegal.map_or_else(String::new, |ill| {
        format!("illegal move {} at ply {}\n", ill.mv, ill.index + 1)
    });
    Ok(format!(
        "{illegal}store: {} moves replayed, {} positions and {} links added, {} searches",
        r.replayed, r.changes.positions, r.changes.links, r.changes.searches
    ))
}

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
    let (abort, _rt) = io::interrupt_flag()?;
    let mut book = offline::load_book(&c);
    let message = match (make, engine) {
        (Some(make), Some(e)) => {
            let n = e.threads();
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
