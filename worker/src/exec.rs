//! Running leaf searches on dedicated threads.

use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, Searcher};
use bookfarm_proto::domain::{Job, JobResult};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// One search thread's engine. Implementations own their state (transposition table).
pub trait LeafSearcher: Send {
    /// Best move and score of `job` (its position, level and excluded moves); polls `abort`.
    fn search(&mut self, job: &Job, abort: &AtomicBool) -> JobResult;
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
    fn search(&mut self, job: &Job, abort: &AtomicBool) -> JobResult {
        let r = self.0.leaf_search(
            &LeafRequest {
                board: job.board,
                level: job.level,
                excluded: job.excluded,
            },
            abort,
        );
        JobResult::from_leaf(job.id, &r)
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
    /// Who claimed the task first: a search thread starting it, or the pull loop withdrawing
    /// it (to hand it back to the coordinator).
    pub claim: Arc<Claim>,
}

/// A task's claim: queued, then either started (by a search thread) or withdrawn (by the pull
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

/// A fixed pool of search threads fed through a channel.
#[derive(Debug)]
pub struct Pool {
    tx: Option<mpsc::Sender<Task>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// Start `n` threads, each with its own searcher from `make`; outcomes go to `out`.
    pub fn new(
        n: usize,
        make: &dyn Fn() -> Box<dyn LeafSearcher>,
        out: UnboundedSender<Outcome>,
    ) -> std::io::Result<Pool> {
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let rx = rx.clone();
            let out = out.clone();
            let mut s = make();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("search-{i}"))
                    .spawn(move || {
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
                                s.search(&job, &task.abort)
                            }));
                            let o = match r {
                                Ok(_) if task.abort.load(std::sync::atomic::Ordering::SeqCst) => {
                                    Outcome::Aborted(job)
                                }
                                Ok(r) => Outcome::Done(r),
                                Err(p) => {
                                    let msg = p
                                        .downcast_ref::<&str>()
                                        .map(|s| s.to_string())
                                        .or_else(|| p.downcast_ref::<String>().cloned())
                                        .unwrap_or_else(|| "search panicked".into());
                                    Outcome::Panicked(job, msg)
                                }
                            };
                            if out.send(o).is_err() {
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

/// The evaluation weights could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadEvalError {
    /// The file could not be read.
    #[error("reading evaluation {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid eval.dat.
    #[error("loading evaluation {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parse error.
        #[source]
        source: bookfarm_engine::eval::EvalError,
    },
}

/// The search signature of the engine searchers ([`EngineSearcher`]) over `eval`, whose
/// fingerprint is `eval_hash`, as the text workers send.
pub fn signature(eval: &Arc<Eval>, eval_hash: &str) -> String {
    use bookfarm_engine::search::{SearchOptions, SearchSignature};
    SearchSignature::new(&SearchOptions::for_eval(eval), eval_hash).to_string()
}

/// Load evaluation weights from `path`, or bookfarm's embedded default weights when `None`;
/// returns them with their fingerprint ([`bookfarm_proto::eval_fingerprint`] of the file bytes).
pub fn load_eval(path: Option<&std::path::Path>) -> Result<(Arc<Eval>, String), LoadEvalError> {
    match path {
        Some(p) => {
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|source| LoadEvalError::Read {
                path: name.clone(),
                source,
            })?;
            let e = Eval::from_bytes(&bytes)
                .map_err(|source| LoadEvalError::Parse { path: name, source })?;
            Ok((Arc::new(e), bookfarm_proto::eval_fingerprint(&bytes)))
        }
        None => {
            let bytes = bookfarm_engine::eval::default::default_eval_dat();
            Ok((
                bookfarm_engine::eval::default_eval(),
                bookfarm_proto::eval_fingerprint(&bytes),
            ))
        }
    }
}
