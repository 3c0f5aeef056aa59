//! Offline book commands on a store directory (`bookfarm-coordinator book … --db DIR`).
//!
//! Two ways to change a stored book:
//!
//! * searches the service can schedule (the leaf searches of new positions, deviate, enhance,
//!   play, extend) run through [`run_local`]: the store is opened as a [`Coordinator`] and
//!   drained by in-process workers over [`crate::local::run`], the same machinery as
//!   `bookfarm-coordinator local`. Every result is committed as it arrives, so an interrupt
//!   loses at most the searches in flight and running the command again resumes;
//! * whole-book transformations of the book crate (negamax, fix, prune, subtree, merge, fill)
//!   run on a [`MemBook`] copy ([`load_book`]) and replace the stored book at the end
//!   ([`replace_book`]). An interrupt before the replacement leaves the store as it was.

use crate::error::CoordinatorError;
use crate::export::to_mem_book;
use crate::local::{LocalOptions, LocalOutcome};
use crate::server;
use crate::service::{Coordinator, ServiceConfig, State, StatusReport};
use crate::store::Store;
use bookfarm_book::MemBook;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, LeafResult, Searcher};
use bookfarm_proto::domain::Selector;
use bookfarm_worker::exec::{EngineSearcher, LeafSearcher};
use bookfarm_worker::pull_loop::SearcherFactory;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Errors of the offline commands.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The directory holds no store with a book.
    #[error(
        "{0}: no book here; create one with `book new --db {0}` or `book import FILE --db {0}`"
    )]
    NoBook(String),
    /// The store or the service failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Open an existing store holding a book, without creating anything when there is none (a
/// mistyped `--db` must not leave an empty store behind).
pub fn open(db: &Path, cfg: ServiceConfig) -> Result<Coordinator, OfflineError> {
    let no_book = || OfflineError::NoBook(db.display().to_string());
    if !db.is_dir() {
        return Err(no_book());
    }
    {
        let store = Store::open(db)?;
        if !store.has_book()? {
            return Err(no_book());
        }
    }
    Ok(server::open(db, cfg)?)
}

/// Whether `db` already holds a book (false when the directory does not exist).
pub fn has_book(db: &Path) -> Result<bool, OfflineError> {
    if !db.is_dir() {
        return Ok(false);
    }
    Ok(Store::open(db)?.has_book()?)
}

/// The stored book as a [`MemBook`] (a consistent snapshot).
pub fn load_book(c: &Coordinator) -> MemBook {
    let (h, positions) = c.snapshot();
    to_mem_book(h, &positions)
}

/// Replace the stored book by `book` (header and positions; values are recomputed by the
/// service). Returns the number of positions stored.
pub fn replace_book(c: &Coordinator, book: &MemBook) -> Result<u64, OfflineError> {
    let positions = book.positions().collect();
    Ok(c.import(*book.header(), positions)?)
}

/// The service configuration of an offline run over `eval` (fingerprint `eval_hash`).
pub fn service_config(eval: &Arc<Eval>, eval_hash: &str) -> ServiceConfig {
    ServiceConfig {
        eval_hash: Some(eval_hash.to_string()),
        signature: Some(bookfarm_worker::exec::signature(eval, eval_hash)),
        engine_version: Some(bookfarm_proto::ENGINE_VERSION.to_string()),
        ..ServiceConfig::default()
    }
}

/// What [`run_local`] did.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    /// Stopped by the interrupt (the store holds every committed result; run again to resume).
    pub interrupted: bool,
    /// What the local run reported.
    pub local: LocalOutcome,
}

/// Run the leaf searches `c` schedules with `threads` in-process engine workers over `eval`:
/// with a `selector`, start that expansion and run it to its fixed point; without one, only
/// drain the searches already queued (new positions of `book new` / `book add`). Stops early
/// when `interrupt` resolves. `progress` is called every [`crate::local::PROGRESS_INTERVAL`].
pub async fn run_local(
    c: &Coordinator,
    selector: Option<Selector>,
    threads: usize,
    eval: Arc<Eval>,
    eval_hash: String,
    interrupt: impl Future<Output = ()>,
    progress: impl FnMut(&StatusReport),
) -> Result<RunOutcome, OfflineError> {
    if let Some(sel) = selector {
        c.start_expansion(sel, 0)?;
    }
    let search_signature = bookfarm_worker::exec::signature(&eval, &eval_hash);
    let factory: SearcherFactory =
        Arc::new(move || -> Box<dyn LeafSearcher> { Box::new(EngineSearcher::new(eval.clone())) });
    let opts = LocalOptions {
        workers: threads.max(1),
        eval_hash,
        search_signature,
        http: None,
        lookahead: 1,
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    let watcher = c.clone();
    let draining = selector.is_none();
    // local::run stops at the expansion's fixed point; a drain has no expansion, so stop it
    // when nothing is queued or in flight.
    let stop = async move {
        let drained = async {
            loop {
                let s = watcher.status();
                if draining && s.queued == 0 && s.in_flight == 0 && s.state != State::Running {
                    return;
                }
                tokio::time::sleep(crate::local::PROGRESS_INTERVAL).await;
            }
        };
        tokio::select! {
            _ = interrupt => flag.store(true, Ordering::SeqCst),
            _ = drained => {}
        }
    };
    let local = crate::local::run(c.clone(), &opts, factory, stop, progress).await?;
    c.flush()?;
    Ok(RunOutcome {
        interrupted: interrupted.load(Ordering::SeqCst),
        local,
    })
}

/// A sequential leaf-search callback for the book crate's drivers ([`bookfarm_book::grow`]),
/// running the engine on the calling thread and polling `abort`.
pub fn engine_search(
    eval: Arc<Eval>,
    abort: Arc<AtomicBool>,
) -> impl FnMut(&LeafRequest) -> LeafResult {
    let mut searcher = Searcher::new(eval);
    move |req: &LeafRequest| searcher.leaf_search(req, &abort)
}
