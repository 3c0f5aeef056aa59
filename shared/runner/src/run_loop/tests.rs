//! The loop against a fake coordinator.
use super::*;
use crate::domain::Job;
use crate::exec::LeafSearcher;
use crate::polite::{Gate, GateState};
use crate::transport::{Beat, Leased, Registration};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

/// The request's first legal move, found in `elapsed` (as the searcher reports it).
fn first_move(req: &LeafRequest, elapsed: Duration) -> LeafResult {
    let mv = bookfarm_engine::board::BitIter(req.board.moves())
        .next()
        .map_or(Move::None, Move::Square);
    LeafResult {
        mv,
        score: 0,
        depth: 1,
        selectivity: 5,
        exact: false,
        nodes: 1,
        elapsed,
    }
}

/// Answers every search with the request's first legal move.
struct FirstMove;

impl LeafSearcher for FirstMove {
    fn search(&mut self, req: &LeafRequest, _abort: &AtomicBool) -> LeafResult {
        first_move(req, Duration::from_micros(1))
    }
}

/// Searches until told to finish (`go`) or aborted; counts the searches started.
struct Blocker {
    started: Arc<AtomicUsize>,
    go: Arc<AtomicBool>,
}

impl LeafSearcher for Blocker {
    fn search(&mut self, req: &LeafRequest, abort: &AtomicBool) -> LeafResult {
        self.started.fetch_add(1, Ordering::SeqCst);
        while !self.go.load(Ordering::SeqCst) && !abort.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        first_move(req, Duration::from_micros(1))
    }
}

/// A gate the test sets.
#[derive(Debug, Clone)]
struct Switch(Arc<Mutex<GateState>>);

impl Switch {
    fn new(s: GateState) -> Switch {
        Switch(Arc::new(Mutex::new(s)))
    }
    fn set(&self, s: GateState) {
        *self.0.lock().unwrap() = s;
    }
}

impl Gate for Switch {
    fn state(&mut self) -> GateState {
        self.0.lock().unwrap().clone()
    }
}

/// Poll `cond` until it holds; a hang guard, not a timing assertion.
fn until(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A coordinator with a fixed list of jobs that forgets the worker once.
#[derive(Default)]
struct Fake {
    queue: Mutex<Vec<Job>>,
    results: Mutex<Vec<JobResult>>,
    registrations: Mutex<u32>,
    forget_once: AtomicBool,
    refuse: bool,
    /// Every lease call's ask, in order.
    asks: Mutex<Vec<LeaseAsk>>,
    /// Every job handed back, in order.
    released: Mutex<Vec<Uuid>>,
    /// What registrations said.
    who: Mutex<Vec<WorkerInfo>>,
}

struct FakeTransport(Arc<Fake>);

impl Transport for FakeTransport {
    fn endpoint(&self) -> String {
        "fake".into()
    }
    fn max_results(&self) -> usize {
        3
    }
    fn register(&mut self, who: &WorkerInfo) -> Result<Registration, CallError> {
        if self.0.refuse {
            return Err(CallError::new(CallErrorKind::Unauthorized, "bad token"));
        }
        *self.0.registrations.lock().unwrap() += 1;
        self.0.who.lock().unwrap().push(who.clone());
        Ok(Registration {
            worker_id: Uuid::new_v4(),
            heartbeat: Duration::from_millis(5),
            lease_timeout: Duration::from_secs(1),
        })
    }
    fn lease(
        &mut self,
        _worker: Uuid,
        ask: LeaseAsk,
        results: &[JobResult],
    ) -> Result<Leased, CallError> {
        if self.0.forget_once.swap(false, Ordering::SeqCst) {
            return Err(CallError::new(
                CallErrorKind::UnknownWorker,
                "unknown worker",
            ));
        }
        assert!(results.len() <= 3, "at most max_results per call");
        self.0.asks.lock().unwrap().push(ask);
        self.0.results.lock().unwrap().extend_from_slice(results);
        let mut q = self.0.queue.lock().unwrap();
        let n = (ask.free as usize).min(q.len());
        let jobs: Vec<Job> = q.drain(..n).collect();
        Ok(Leased {
            idle: jobs.is_empty().then_some(IdleReason::QueueEmpty),
            jobs,
            acks: results.iter().map(|r| (r.job_id, Ack::Accepted)).collect(),
            retry_after: Duration::from_millis(1),
        })
    }
    fn submit(
        &mut self,
        worker: Uuid,
        results: &[JobResult],
    ) -> Result<Vec<(Uuid, Ack)>, CallError> {
        Ok(self.lease(worker, LeaseAsk::default(), results)?.acks)
    }
    fn heartbeat(&mut self, _worker: Uuid, _held: &[Uuid]) -> Result<Beat, CallError> {
        Ok(Beat::default())
    }
    fn fail(&mut self, _: Uuid, _: Uuid, _: &str, _: bool) -> Result<bool, CallError> {
        Ok(false)
    }
    fn release(&mut self, _worker: Uuid, jobs: &[Uuid]) -> Result<u32, CallError> {
        self.0.released.lock().unwrap().extend_from_slice(jobs);
        Ok(jobs.len() as u32)
    }
}

fn jobs(n: usize) -> Vec<Job> {
    (0..n)
        .map(|i| Job {
            id: Uuid::new_v4(),
            board: Board::start(),
            excluded: 0,
            level: 1,
            attempt: u32::try_from(i).unwrap(),
        })
        .collect()
}

fn factory() -> SearcherFactory {
    Arc::new(|| -> Box<dyn LeafSearcher> { Box::new(FirstMove) })
}

#[test]
fn every_job_is_searched_and_acknowledged_then_the_loop_drains() {
    let fake = Arc::new(Fake {
        queue: Mutex::new(jobs(20)),
        forget_once: AtomicBool::new(true),
        ..Fake::default()
    });
    let runner = Runner::new();
    let stop = runner.stopper();
    let t = FakeTransport(fake.clone());
    let cfg = RunnerConfig {
        threads: 2,
        ..RunnerConfig::default()
    };
    let h = std::thread::spawn(move || runner.run(cfg, t, &factory()));
    let t0 = Instant::now();
    while fake.results.lock().unwrap().len() < 20 {
        assert!(t0.elapsed() < Duration::from_secs(10), "jobs not delivered");
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.stop();
    let stats = h.join().unwrap().unwrap();
    assert_eq!((stats.jobs, stats.accepted, stats.nodes), (20, 20, 20));
    assert_eq!(
        *fake.registrations.lock().unwrap(),
        2,
        "registered again once"
    );
    let mut ids: Vec<_> = fake
        .results
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.job_id)
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20, "each result delivered once");
    assert!(stats.idle_time >= stats.starved_time);
}

#[test]
fn a_refused_worker_stops_with_the_reason() {
    let fake = Arc::new(Fake {
        refuse: true,
        ..Fake::default()
    });
    let e = Runner::new()
        .run(RunnerConfig::default(), FakeTransport(fake), &factory())
        .unwrap_err();
    assert!(
        matches!(&e, RunnerError::Refused(m) if m == "bad token"),
        "{e}"
    );
}

/// A loop over `fake` with searchers that block until `go`, and a gate the test switches.
struct Paused {
    fake: Arc<Fake>,
    started: Arc<AtomicUsize>,
    go: Arc<AtomicBool>,
    gate: Switch,
    stop: Stopper,
    handle: std::thread::JoinHandle<Result<WorkerStats, RunnerError>>,
}

fn blocked_loop(jobs_queued: usize, cfg: RunnerConfig) -> Paused {
    let fake = Arc::new(Fake {
        queue: Mutex::new(jobs(jobs_queued)),
        ..Fake::default()
    });
    let started = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let make: SearcherFactory = {
        let (started, go) = (started.clone(), go.clone());
        Arc::new(move || -> Box<dyn LeafSearcher> {
            Box::new(Blocker {
                started: started.clone(),
                go: go.clone(),
            })
        })
    };
    let gate = Switch::new(GateState::Run {
        available: Some(Duration::from_secs(3600)),
    });
    let runner = Runner::new().with_gate(Box::new(gate.clone()));
    let stop = runner.stopper();
    let t = FakeTransport(fake.clone());
    let handle = std::thread::spawn(move || runner.run(cfg, t, &make));
    Paused {
        fake,
        started,
        go,
        gate,
        stop,
        handle,
    }
}

fn polite(threads: usize, grace: Duration) -> RunnerConfig {
    RunnerConfig {
        threads,
        lookahead: 1,
        pause_grace: grace,
        gate_poll: Duration::from_millis(1),
        part_time: true,
        ..RunnerConfig::default()
    }
}

#[test]
fn a_pause_hands_back_unstarted_jobs_at_once_and_lets_started_ones_finish() {
    let p = blocked_loop(10, polite(2, Duration::from_secs(3600)));
    // Two searches run, one job waits (lookahead 1).
    until("two searches started", || {
        p.started.load(Ordering::SeqCst) == 2
    });
    until("three jobs leased", || {
        p.fake.queue.lock().unwrap().len() == 7
    });
    let asks = p.fake.asks.lock().unwrap().clone();
    assert!(
        asks.iter()
            .all(|a| a.available.is_some_and(|d| d <= Duration::from_secs(3600))),
        "the active time left goes with every lease: {asks:?}"
    );
    assert!(p.fake.who.lock().unwrap()[0].part_time);
    p.gate.set(GateState::Pause("on battery".into()));
    until("the unstarted job handed back", || {
        p.fake.released.lock().unwrap().len() == 1
    });
    let asked = p.fake.asks.lock().unwrap().len();
    // The started searches finish within the grace and are delivered; nothing new is leased.
    p.go.store(true, Ordering::SeqCst);
    until("both results delivered", || {
        p.fake.results.lock().unwrap().len() == 2
    });
    let asks = p.fake.asks.lock().unwrap().clone();
    assert!(
        asks[asked..].iter().all(|a| a.free == 0),
        "no job asked for while paused: {:?}",
        &asks[asked..]
    );
    assert_eq!(p.fake.queue.lock().unwrap().len(), 7);
    // Resumed: it leases again.
    p.gate.set(GateState::Run { available: None });
    until("leasing again", || p.fake.queue.lock().unwrap().is_empty());
    until("every job delivered", || {
        p.fake.results.lock().unwrap().len() == 9
    });
    p.stop.stop();
    let stats = p.handle.join().unwrap().unwrap();
    assert_eq!(stats.released, 1);
    assert_eq!(stats.searched, 9);
    let released = p.fake.released.lock().unwrap().clone();
    let delivered: Vec<Uuid> = p
        .fake
        .results
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.job_id)
        .collect();
    assert!(
        !delivered.contains(&released[0]),
        "a job handed back is not searched"
    );
}

#[test]
fn a_pause_abandons_and_hands_back_what_runs_past_the_grace() {
    let p = blocked_loop(2, polite(2, Duration::ZERO));
    until("two searches started", || {
        p.started.load(Ordering::SeqCst) == 2
    });
    p.gate
        .set(GateState::Pause("outside the active hours".into()));
    // Grace 0: both running searches are abandoned and handed back (the searcher sees its
    // abort flag; its partial result is never delivered).
    until("both jobs handed back", || {
        p.fake.released.lock().unwrap().len() == 2
    });
    p.stop.stop();
    let stats = p.handle.join().unwrap().unwrap();
    assert_eq!((stats.released, stats.searched), (2, 0));
    assert!(p.fake.results.lock().unwrap().is_empty());
    assert!(
        p.fake.asks.lock().unwrap().iter().all(|a| a.free <= 3),
        "never more than threads + lookahead"
    );
}

#[test]
fn under_a_cpu_cap_a_slot_rests_after_its_search_and_nothing_is_leased_ahead() {
    // One thread at half a core; the search says it took an hour, so its slot rests an hour.
    struct Hour;
    impl LeafSearcher for Hour {
        fn search(&mut self, req: &LeafRequest, _abort: &AtomicBool) -> LeafResult {
            first_move(req, Duration::from_secs(3600))
        }
    }
    let fake = Arc::new(Fake {
        queue: Mutex::new(jobs(5)),
        ..Fake::default()
    });
    let inits = Arc::new(AtomicUsize::new(0));
    let cfg = RunnerConfig {
        threads: 1,
        lookahead: 4,
        cpu_share: 0.5,
        thread_init: Some(ThreadInit({
            let inits = inits.clone();
            Arc::new(move || {
                inits.fetch_add(1, Ordering::SeqCst);
            })
        })),
        ..RunnerConfig::default()
    };
    let runner = Runner::new();
    let stop = runner.stopper();
    let t = FakeTransport(fake.clone());
    let make: SearcherFactory = Arc::new(|| -> Box<dyn LeafSearcher> { Box::new(Hour) });
    let h = std::thread::spawn(move || runner.run(cfg, t, &make));
    until("the first result delivered", || {
        fake.results.lock().unwrap().len() == 1
    });
    stop.stop();
    let stats = h.join().unwrap().unwrap();
    assert_eq!(stats.searched, 1);
    let asks = fake.asks.lock().unwrap().clone();
    assert_eq!(
        asks.iter()
            .map(|a| a.free)
            .filter(|f| *f > 0)
            .collect::<Vec<_>>(),
        [1],
        "one job for the one thread, none ahead, none while it rests: {asks:?}"
    );
    assert_eq!(fake.queue.lock().unwrap().len(), 4);
    assert_eq!(
        inits.load(Ordering::SeqCst),
        1,
        "each search thread runs the init once"
    );
}
