//! Speculative prefetch: round work first, each request guessed once.

use super::*;

/// Speculative searches are leased only when no round work waits, and a speculative search
/// that the program then needs serves it without being searched again.
#[test]
fn speculative_searches_wait_for_round_work_and_serve_the_next_pass() {
    let f = fixture(2, 10, speculating());
    f.c.set_predictor(Box::new(crate::sim::SimPredictor(
        crate::sim::Guess::Perfect,
    )));
    let mut speculative_seen = false;
    take_turns(&f.c, 2, |c, job, queued_round_before| {
        if c.jobs().jobs.get(&job.id).map(|j| j.class) == Some(JobClass::Speculative) {
            speculative_seen = true;
            assert_eq!(queued_round_before, 0, "round work was waiting");
        }
    });
    let s = f.c.status();
    assert_eq!(s.state, State::Done);
    assert!(speculative_seen);
    assert!(s.prefetch.used > 0, "{s:?}");
    // With perfect guesses and one worker nothing is wasted... except what the last pass
    // planned for a pass that never came.
    let (book, asked) = crate::sim::serial_build(2, 10, &[deviate24()]);
    assert!(crate::sim::same_positions(f.c.snapshot().1, &book));
    assert!(f.c.stored_results() >= asked.len());
}

/// Counts the predictor's calls per request.
#[derive(Debug)]
struct CountingPredictor(Arc<Mutex<HashMap<LeafRequest, u32>>>);

impl Predictor for CountingPredictor {
    fn predict(&mut self, request: &LeafRequest) -> LeafResult {
        *self.0.lock().unwrap().entry(*request).or_default() += 1;
        crate::sim::SimPredictor(crate::sim::Guess::Noisy {
            move_error_percent: 40,
            score_noise: 4,
        })
        .predict(request)
    }
}

/// Plans follow each other every few results and guess mostly the same requests: each
/// request is guessed once, however many plans use the guess, and the book is the serial one.
#[test]
fn each_request_is_guessed_once_across_plans() {
    let f = fixture(2, 10, speculating());
    let calls = Arc::new(Mutex::new(HashMap::new()));
    f.c.set_predictor(Box::new(CountingPredictor(calls.clone())));
    take_turns(&f.c, 3, |_, _, _| {});
    assert_eq!(f.c.status().state, State::Done);
    let calls = calls.lock().unwrap();
    assert!(calls.len() > 10, "{} requests guessed", calls.len());
    let twice: Vec<_> = calls.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "guessed more than once: {twice:?}");
    let (book, _) = crate::sim::serial_build(2, 10, &[deviate24()]);
    assert!(crate::sim::same_positions(f.c.snapshot().1, &book));
}

/// Start `deviate24` and let `workers` one-thread workers hold one job each and answer in
/// turns (one holds a round's last search while the others idle) with the simulator's search
/// until the build is done; `on_lease` sees every leased job with the round jobs queued just
/// before it was leased.
fn take_turns(
    c: &Coordinator,
    workers: usize,
    mut on_lease: impl FnMut(&Coordinator, &Job, usize),
) {
    let id = identity();
    let ws: Vec<Uuid> = (0..workers)
        .map(|i| c.register(&id, &format!("w{i}"), 1).unwrap())
        .collect();
    let mut held: Vec<Option<Job>> = vec![None; workers];
    c.start(deviate24()).unwrap();
    for turn in 0..100_000 {
        if c.status().state == State::Done && held.iter().all(Option::is_none) {
            break;
        }
        for k in 0..workers {
            if held[k].is_some() {
                continue;
            }
            let queued_round_before = c.jobs().queued_round();
            held[k] = c.lease(&id, &ws[k], 1).unwrap().pop();
            if let Some(job) = &held[k] {
                on_lease(c, job, queued_round_before);
            }
        }
        if let Some(job) = held[turn % workers].take() {
            c.submit(&id, &ws[turn % workers], &[sim_result(&job)])
                .unwrap();
        }
        c.settle().unwrap();
    }
}

fn sim_result(job: &Job) -> JobResult {
    let req = LeafRequest {
        board: job.board,
        level: job.level,
        excluded: job.excluded,
    };
    JobResult {
        job_id: job.id,
        leaf: crate::sim::fake_search(&req),
    }
}
