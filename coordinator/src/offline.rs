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
//!   run on a [`MemBook`] copy ([`load_book`]), their searches on every thread through
//!   [`speculate`], and replace the stored book at the end ([`replace_book`]). An interrupt
//!   before the replacement leaves the store as it was.

use crate::error::CoordinatorError;
use crate::local::{LocalOptions, LocalOutcome};
use crate::service::{Coordinator, ServiceConfig, State, StatusReport};
use bookfarm_book::MemBook;
use bookfarm_book::program::Program;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use bookfarm_runner::exec::{SearchPanicked, SearcherFactory, engine_factory, search_all};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Errors of the offline commands.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The store or the service failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The stored book as a [`MemBook`] (a consistent snapshot).
pub fn load_book(c: &Coordinator) -> MemBook {
    c.book_snapshot()
}

/// Replace the stored book by `book` (header and positions; values are recomputed by the
/// service). Returns the number of positions stored.
pub fn replace_book(c: &Coordinator, book: &MemBook) -> Result<u64, OfflineError> {
    let mut copy = book.clone();
    copy.drop_parent_index();
    Ok(c.import_book(copy)?)
}

/// The service configuration of an offline run over `eval` (fingerprint `eval_hash`).
pub fn service_config(eval: &Arc<Eval>, eval_hash: &str) -> ServiceConfig {
    ServiceConfig {
        eval_hash: Some(eval_hash.to_string()),
        signature: Some(bookfarm_runner::signature(eval, eval_hash)),
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
/// with a `program`, start it and run it to its end; without one, only
/// drain the searches already queued (new positions of `book new` / `book add`). Stops early
/// when `interrupt` resolves. `progress` is called every [`crate::local::PROGRESS_INTERVAL`].
pub async fn run_local(
    c: &Coordinator,
    program: Option<Program>,
    threads: usize,
    eval: Arc<Eval>,
    eval_hash: String,
    interrupt: impl Future<Output = ()>,
    progress: impl FnMut(&StatusReport),
) -> Result<RunOutcome, OfflineError> {
    let draining = program.is_none();
    if let Some(program) = program {
        c.start(program)?;
    }
    let search_signature = bookfarm_runner::signature(&eval, &eval_hash);
    let factory = engine_factory(eval);
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
    Ok(RunOutcome {
        interrupted: interrupted.load(Ordering::SeqCst),
        local,
    })
}

/// A provisional answer to `req` while its real result is unknown: the first move the search
/// may play (a pass when forced, no move when none is open), score 0, the level's depth. Only
/// runs whose results are thrown away ever see it (see [`speculate`]).
fn provisional(req: &LeafRequest) -> LeafResult {
    let b: &Board = &req.board;
    let open = b.moves() & !req.excluded;
    let mv = if b.must_pass() {
        Move::Pass
    } else {
        bookfarm_engine::board::BitIter(open)
            .next()
            .map_or(Move::None, Move::Square)
    };
    let (depth, selectivity) = bookfarm_engine::level::level_params(req.level, b.empties());
    LeafResult {
        mv,
        score: 0,
        depth,
        selectivity,
        exact: false,
        nodes: 0,
        elapsed: std::time::Duration::ZERO,
    }
}

/// Why [`speculate`] stopped without an answer.
#[derive(Debug, thiserror::Error)]
pub enum SpeculateError {
    /// The abort flag was set (the book is unchanged).
    #[error("interrupted")]
    Interrupted,
    /// A search panicked (an engine bug).
    #[error(transparent)]
    Panicked(#[from] SearchPanicked),
}

/// What [`speculate`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Speculation {
    /// Runs of the algorithm (the last one is the serial run).
    pub waves: usize,
    /// Searches run.
    pub searched: usize,
    /// Searches the serial run asked for (repeated requests counted each time).
    pub used: usize,
}

/// Run `algo` on `book` as if its searches were answered one by one by a serial engine, but
/// run them on `threads` threads.
///
/// The book crate's whole-book algorithms (fill, fix, link, merge, correct, upgrade…) ask for
/// one search at a time through a callback. Searches are deterministic, so with several threads
/// `algo` first runs on a copy of the book with every request answered provisionally and
/// recorded; the recorded requests are searched in parallel ([`search_all`]); then `algo` runs
/// on `book` with the recorded results answered from the table and any other request searched
/// at once, serially. That second run sees exactly the results a serial run sees, so its book
/// and its return value are the serial ones. The price is one more run of the algorithm and the
/// searches a provisional answer led to (few for fill, fix, link and merge, whose requests
/// depend mostly on which positions exist); it pays when the searches cost more than twice the
/// algorithm's own walk (measured: fill 3 at level 6 is about even, see docs/benchmarks.md).
pub fn speculate<R>(
    book: &mut MemBook,
    make: &SearcherFactory,
    threads: usize,
    abort: &AtomicBool,
    mut algo: impl FnMut(&mut MemBook, &mut dyn FnMut(&LeafRequest) -> LeafResult) -> R,
) -> Result<(R, Speculation), SpeculateError> {
    let mut stats = Speculation::default();
    let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
    if threads > 1 {
        let mut copy = book.clone();
        let mut missing: Vec<LeafRequest> = Vec::new();
        let mut seen: HashSet<LeafRequest> = HashSet::new();
        algo(&mut copy, &mut |req: &LeafRequest| {
            if seen.insert(*req) {
                missing.push(*req);
            }
            provisional(req)
        });
        stats.waves += 1;
        let results = search_all(make, threads, &missing, abort)?;
        if abort.load(Ordering::SeqCst) {
            return Err(SpeculateError::Interrupted);
        }
        stats.searched += missing.len();
        known.extend(missing.into_iter().zip(results));
    }
    // The serial run: known results from the table, the others searched now.
    let mut s = make();
    let mut used = 0;
    let mut fresh = 0;
    let r = algo(book, &mut |req: &LeafRequest| {
        used += 1;
        match known.get(req) {
            Some(r) => *r,
            None => {
                fresh += 1;
                let r = s.search(req, abort);
                known.insert(*req, r);
                r
            }
        }
    });
    if abort.load(Ordering::SeqCst) {
        return Err(SpeculateError::Interrupted);
    }
    stats.waves += 1;
    stats.searched += fresh;
    stats.used = used;
    Ok((r, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_book::synth::{SynthParams, random_book};
    use bookfarm_book::{dump, grow, merge, negamax};

    fn book(seed: u64, positions: usize) -> MemBook {
        let mut b = random_book(SynthParams {
            seed,
            positions,
            plies: 10,
            level: Some(2),
        });
        negamax::negamax(&mut b);
        b
    }

    /// Fill, fix (after clearing some leaves) and merge's link step on two threads give the
    /// book and the report of the serial run, and search nothing the serial run does not.
    #[test]
    fn speculation_gives_the_serial_book() {
        let make = engine_factory(bookfarm_engine::eval::default_eval());
        let abort = AtomicBool::new(false);
        let other = book(8, 120);
        let algo = |b: &mut MemBook, mut search: &mut dyn FnMut(&LeafRequest) -> LeafResult| {
            let filled = grow::fill(b, 1, &mut search);
            let ids: Vec<_> = b.ids().step_by(7).collect();
            for id in ids {
                let mut p = b.position(id);
                p.leaf = bookfarm_book::model::BAD_LINK;
                b.put_position(&p);
            }
            let fixed = grow::fix_command(b, &mut search);
            merge::merge_by_level(b, &other, merge::Newer::Incoming);
            let linked = grow::link_book(b, &mut search);
            (filled, fixed.changes, linked)
        };
        let mut serial = book(7, 150);
        let (r1, s1) = speculate(&mut serial, &make, 1, &abort, algo).expect("serial");
        let mut parallel = book(7, 150);
        let (r2, s2) = speculate(&mut parallel, &make, 2, &abort, algo).expect("parallel");
        assert!(s1.used > 0, "the algorithms searched");
        assert_eq!(r1, r2);
        assert_eq!(dump::dump(&serial, false), dump::dump(&parallel, false));
        assert_eq!(s2.used, s1.used);
        assert!(s2.searched <= s1.searched, "no search was wasted");
        assert!(s2.waves >= 2);
    }
}
