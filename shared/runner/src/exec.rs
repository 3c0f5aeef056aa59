//! Running leaf searches on dedicated OS threads (never on an async runtime).

use crate::domain::{Job, JobResult};
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, LeafResult, Searcher};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// One search thread's engine. Implementations own their state (transposition table).
pub trait LeafSearcher: Send {
    /// Best move and score of `req` (its position, level and excluded moves); polls `abort`.
    fn search(&mut self, req: &LeafRequest, abort: &AtomicBool) -> LeafResult;
}

/// The real engine.
#[derive(Debug)]
pub struct EngineSearcher(Searcher);

impl EngineSearcher {
    /// A searcher over shared evaluation weights.
    pub fn new(eval: Arc<Eval>) -> EngineSearcher {
        EngineSearcher(Searcher::new(eval))
    }
}

impl LeafSearcher for EngineSearcher {
    fn search(&mut self, req: &LeafRequest, abort: &AtomicBool) -> LeafResult {
        self.0.leaf_search(req, abort)
    }
}

/// A factory of searchers, one per thread.
pub type SearcherFactory = Arc<dyn Fn() -> Box<dyn LeafSearcher> + Send + Sync>;

/// The factory of engine searchers over `eval`.
pub fn engine_factory(eval: Arc<Eval>) -> SearcherFactory {
    Arc::new(move || -> Box<dyn LeafSearcher> { Box::new(EngineSearcher::new(eval.clone())) })
}

/// The search request of a job.
pub fn job_request(job: &Job) -> LeafRequest {
    LeafRequest {
        board: job.board,
        level: job.level,
        excluded: job.excluded,
    }
}

/// A finished (or panicked) search.
#[derive(Debug)]
pub enum Outcome {
    /// The search returned.
    Done(JobResult),
    /// The search panicked (an engine bug); reported to the coordinator as a failure.
    Panicked(Job, String),
    /// The search was aborted (lease cancelled, shutdown): its partial result is never
    /// submitted, since the coordinator compares results exactly.
    Aborted(Job),
}

/// A job handed to the pool with its abort flag.
#[derive(Debug)]
pub struct Task {
    /// The job.
    pub job: Job,
    /// Set to abandon the search.
    pub abort: Arc<AtomicBool>,
    /// Who claimed the task first: a search thread starting it, or the loop withdrawing it (to
    /// hand it back to the coordinator).
    pub claim: Arc<Claim>,
}

/// A task's claim: queued, then either started (by a search thread) or withdrawn (by the
/// loop), whichever comes first.
#[derive(Debug, Default)]
pub struct Claim(AtomicU8);

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const WITHDRAWN: u8 = 2;

impl Claim {
    /// A search thread starts the task; false when it was withdrawn.
    pub fn start(&self) -> bool {
        self.0
            .compare_exchange(QUEUED, STARTED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Withdraw the task before a thread starts it; false when it has started.
    pub fn withdraw(&self) -> bool {
        self.0
            .compare_exchange(QUEUED, WITHDRAWN, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

/// The message of a caught panic.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "search panicked".into())
}

/// Run by each search thread as it starts, before its first search (the worker process lowers
/// the scheduling priority of its search threads there, and only theirs).
#[derive(Clone)]
pub struct ThreadInit(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for ThreadInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThreadInit")
    }
}

/// A fixed pool of search threads fed through a channel.
#[derive(Debug)]
pub struct Pool {
    tx: Option<mpsc::Sender<Task>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// Start `n` threads (at least one), each with its own searcher from `make`; outcomes go
    /// to `out` (as any message type an [`Outcome`] converts into).
    pub fn new<M>(n: usize, make: &SearcherFactory, out: mpsc::Sender<M>) -> std::io::Result<Pool>
    where
        M: From<Outcome> + Send + 'static,
    {
        Pool::with_init(n, make, out, None)
    }

    /// [`Pool::new`], each thread running `init` first.
    pub fn with_init<M>(
        n: usize,
        make: &SearcherFactory,
        out: mpsc::Sender<M>,
        init: Option<&ThreadInit>,
    ) -> std::io::Result<Pool>
    where
        M: From<Outcome> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let rx = rx.clone();
            let out = out.clone();
            let mut s = make();
            let init = init.cloned();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("search-{i}"))
                    .spawn(move || {
                        if let Some(init) = init {
                            (init.0)();
                        }
                        loop {
                            let task = {
                                let guard = rx.lock().unwrap_or_else(|p| p.into_inner());
                                guard.recv()
                            };
                            let Ok(task) = task else { break };
                            if !task.claim.start() {
                                // Withdrawn while queued: handed back to the coordinator.
                                continue;
                            }
                            let job = task.job;
                            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                s.search(&job_request(&job), &task.abort)
                            }));
                            let o = match r {
                                Ok(_) if task.abort.load(Ordering::SeqCst) => Outcome::Aborted(job),
                                Ok(leaf) => Outcome::Done(JobResult {
                                    job_id: job.id,
                                    leaf,
                                }),
                                Err(p) => Outcome::Panicked(job, panic_message(&*p)),
                            };
                            if out.send(M::from(o)).is_err() {
                                break;
                            }
                        }
                    })?,
            );
        }
        Ok(Pool {
            tx: Some(tx),
            threads,
        })
    }

    /// Queue a task (runs as soon as a thread is free).
    pub fn submit(&self, t: Task) {
        if let Some(tx) = &self.tx {
            // The threads only stop when the pool is dropped, so sending cannot fail here.
            let _ = tx.send(t);
        }
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A search of [`search_all`] panicked.
#[derive(Debug, thiserror::Error)]
#[error("a leaf search panicked: {0}")]
pub struct SearchPanicked(pub String);

/// `f` applied to every item on `threads` threads, each with its own searcher from `make`;
/// returns the answers in the order of `items`. Items are taken one at a time, so long and
/// short ones balance.
pub fn map_with_searchers<T, R, F>(
    make: &SearcherFactory,
    threads: usize,
    items: &[T],
    f: F,
) -> Result<Vec<R>, SearchPanicked>
where
    T: Sync,
    R: Send,
    F: Fn(&mut dyn LeafSearcher, &T) -> R + Sync,
{
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let n = threads.clamp(1, items.len().max(1));
    let outcome: Result<(), String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| {
                    let mut s = make();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        let r = f(&mut *s, item);
                        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map(|_| ()).map_err(|p| panic_message(&*p)))
    });
    outcome.map_err(SearchPanicked)?;
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .ok_or_else(|| SearchPanicked("a search thread stopped early".into()))
        })
        .collect()
}

/// Search every request on `threads` threads, polling `abort`; returns the results in the
/// order of `requests`. Searches are deterministic, so the results equal those of a serial loop
/// over the same searcher kind.
pub fn search_all(
    make: &SearcherFactory,
    threads: usize,
    requests: &[LeafRequest],
    abort: &AtomicBool,
) -> Result<Vec<LeafResult>, SearchPanicked> {
    map_with_searchers(make, threads, requests, |s, req| s.search(req, abort))
}
