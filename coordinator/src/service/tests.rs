use super::*;
use bookfarm_engine::Square;
use bookfarm_engine::board::BitIter;
use bookfarm_proto::ENGINE_VERSION;
use std::collections::HashMap;

/// A deterministic stand-in for the engine: the lowest open square, scored by a hash of the
/// resulting board (so transpositions agree), even and within [-20, 20].
pub(crate) fn mock_result(job: &Job) -> JobResult {
    let b = job.board;
    let open = b.moves() & !job.excluded;
    let (mv, score) = if b.moves() == 0 {
        (Move::Pass, 0)
    } else if let Some(x) = BitIter(open).next() {
        let sq = x;
        let child = canonical(&b.play(sq).unwrap()).0;
        let h = child.player.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ child.opponent.rotate_left(17);
        (Move::Square(sq), ((h % 21) as i32 - 10) * 2)
    } else {
        (Move::None, 0)
    };
    JobResult {
        job_id: job.id,
        mv,
        score,
        depth: expected(job).0,
        selectivity: expected(job).1,
        exact: false,
        nodes: 1,
        elapsed: Duration::from_micros(1),
    }
}

/// The depth and selectivity a search of `job` reports (the level table's).
pub(crate) fn expected(job: &Job) -> (u32, u8) {
    if job.board.is_game_over() {
        (job.board.empties(), 5)
    } else {
        bookfarm_engine::level::level_params(job.level, job.board.empties())
    }
}

pub(crate) fn identity() -> Identity {
    Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "00".into(),
        search_signature: test_signature("00"),
    }
}

pub(crate) fn test_signature(eval: &str) -> String {
    bookfarm_engine::search::SearchSignature::new(
        &bookfarm_engine::search::SearchOptions::default(),
        eval,
    )
    .to_string()
}

struct Fixture {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    c: Coordinator,
}

fn fixture(level: u8, depth: u8, cfg: ServiceConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (h, entries) = new_book(level, depth);
    store.create(&h, &entries).unwrap();
    let clock = Arc::new(ManualClock::default());
    let c = Coordinator::open(store, dir.path(), cfg, clock.clone()).unwrap();
    Fixture { dir, clock, c }
}

fn reopen(f: Fixture, cfg: ServiceConfig) -> Fixture {
    let Fixture { dir, clock, c } = f;
    c.flush().unwrap();
    drop(c);
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg, clock.clone()).unwrap();
    Fixture { dir, clock, c }
}

/// Run the mock engine until the growth programs are done; returns the number of accepted
/// results.
fn drive(c: &Coordinator, slots: u32) -> u64 {
    drive_workers(c, 1, slots, 0)
}

/// Run `workers` mock workers leasing `slots` jobs each, in turns, until the growth programs
/// are done. Each submits its results in an order scrambled by `seed`, so that results land
/// in a different order from the serial program's.
fn drive_workers(c: &Coordinator, workers: usize, slots: u32, seed: u64) -> u64 {
    let id = identity();
    let ws: Vec<Uuid> = (0..workers)
        .map(|i| c.register(&id, &format!("t{i}"), 1).unwrap())
        .collect();
    let mut held: Vec<Vec<Job>> = vec![Vec::new(); workers];
    let mut accepted = 0;
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for round in 0..1_000_000usize {
        let k = round % workers;
        held[k].extend(c.lease(&id, &ws[k], slots).unwrap());
        if held[k].is_empty() {
            c.settle().unwrap();
            if held.iter().all(Vec::is_empty) {
                let s = c.status();
                if s.queued == 0 {
                    assert_eq!(s.in_flight, 0);
                    break;
                }
            }
            continue;
        }
        // Submit a scrambled part of what this worker holds.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = 1 + (rng as usize) % held[k].len();
        let take: Vec<Job> = if rng & 1 == 0 {
            held[k].drain(..n).collect()
        } else {
            let at = held[k].len() - n;
            held[k].drain(at..).rev().collect()
        };
        let results: Vec<JobResult> = take.iter().map(mock_result).collect();
        let acks = c.submit(&id, &ws[k], &results).unwrap();
        accepted += acks.iter().filter(|a| **a == Ack::Accepted).count() as u64;
    }
    c.settle().unwrap();
    accepted
}

/// [`mock_result`] as a leaf search (the book crate's driver).
fn mock_search(r: &LeafRequest) -> LeafResult {
    let j = Job {
        id: Uuid::nil(),
        board: r.board,
        excluded: r.excluded,
        level: r.level,
        attempt: 0,
    };
    mock_result(&j).leaf()
}

/// The book the book crate's driver grows serially from a new book with the same searches.
fn serial_book(level: u8, depth: u8, ops: &[Operation]) -> bookfarm_book::MemBook {
    let (h, entries) = new_book(level, depth);
    let mut book = bookfarm_book::MemBook::new(h);
    for e in entries {
        book.put_position(&e.pos);
    }
    let mut search = mock_search;
    bookfarm_book::driver::Driver::new(Operation::New, None).run_with(&mut book, &mut search);
    for op in ops {
        bookfarm_book::driver::Driver::new(op.clone(), None).run_with(&mut book, &mut search);
    }
    book
}

/// The coordinator's book equals `want` exactly: positions, links, leaves, levels, values.
fn assert_same_book(c: &Coordinator, want: &bookfarm_book::MemBook) {
    let (_, mut ours) = c.snapshot();
    let mut theirs: Vec<Position> = want.positions().collect();
    ours.sort_by_key(|p| p.board);
    theirs.sort_by_key(|p| p.board);
    assert_eq!(ours.len(), theirs.len(), "positions");
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
}

/// The coordinator's book is a fixed point of Edax's linking and negamax (`book link`).
fn assert_linked(c: &Coordinator) {
    let mut book = c.book_snapshot();
    let r = bookfarm_book::grow::link_command(&mut book, &mut |r| {
        panic!("book link searched {r:?}: a transposition was left unlinked")
    });
    assert!(r.is_fixed_point(), "book link changed the book: {r:?}");
}

fn deviate24() -> Selector {
    Selector::Deviate {
        relative: 2,
        absolute: 4,
    }
}

/// The book crate's full Edax negamax (from the start position) agrees with ours.
fn assert_matches_book_crate(c: &Coordinator) {
    let (h, positions) = c.snapshot();
    let mut book = crate::export::to_mem_book(h, &positions);
    bookfarm_book::negamax::negamax(&mut book);
    for p in &positions {
        let q = book.get(&p.board).unwrap();
        assert_eq!(
            (
                p.value, p.lower, p.upper, p.n_wins, p.n_draws, p.n_losses, p.n_lines
            ),
            (
                q.value, q.lower, q.upper, q.n_wins, q.n_draws, q.n_losses, q.n_lines
            ),
            "{}",
            p.board
        );
    }
}

#[test]
fn deviate_builds_a_consistent_book_to_completion() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let n = drive(&f.c, 7);
    let s = f.c.status();
    assert_eq!(s.state, State::Done, "{s:?}");
    assert!(s.positions > 20, "{s:?}");
    assert_eq!(s.completed, n);
    assert_matches_book_crate(&f.c);
    assert_same_book(&f.c, &serial_book(2, 10, &[operation(deviate24())]));
    assert_linked(&f.c);
    // Nothing is left pending, every position's leaf excludes its links.
    let (h, positions) = f.c.snapshot();
    let book = f.c.book_snapshot();
    assert_eq!(*book.header(), h);
    assert_eq!(book.positions().collect::<Vec<_>>(), positions);
    for p in &positions {
        for l in &p.links {
            assert_ne!(l.mv, p.leaf.mv);
        }
    }
}

#[test]
fn cluster_and_book_crate_grow_the_same_book() {
    let games: Vec<Vec<Move>> = ["f5d6c3d3c4f4f6f3e6e7", "f5f6e6f4e3c5c4e7", "c4e3f6e6f5g6"]
        .iter()
        .map(|g| bookfarm_engine::formats::transcript::parse_moves(g).unwrap())
        .collect();
    let root = Board::start();
    let ops = vec![
        Operation::AddGames {
            games: games.clone(),
        },
        operation(deviate24()),
        operation(Selector::Enhance {
            midgame: 2,
            endcut: 4,
        }),
        Operation::Extend { root },
        Operation::Play { root },
    ];
    let want = serial_book(2, 8, &ops);
    for (workers, slots, seed) in [(1, 1, 0), (3, 4, 2)] {
        let f = fixture(2, 8, ServiceConfig::default());
        for op in &ops {
            f.c.start(op.clone(), None).unwrap();
        }
        let accepted = drive_workers(&f.c, workers, slots, seed);
        assert_eq!(f.c.status().state, State::Done);
        assert_same_book(&f.c, &want);
        assert_linked(&f.c);
        // No request was searched twice.
        assert_eq!(accepted as usize, f.c.stored_results());
    }
}

#[test]
fn restart_requeues_in_flight_and_keeps_accepted_results() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    // A few rounds, then leave jobs leased and "crash".
    let mut done_ids = Vec::new();
    for _ in 0..5 {
        let jobs = f.c.lease(&id, &w, 4).unwrap();
        let r: Vec<_> = jobs.iter().map(mock_result).collect();
        f.c.submit(&id, &w, &r).unwrap();
        f.c.settle().unwrap();
        done_ids.extend(r.iter().map(|r| r.job_id));
    }
    let leased = f.c.lease(&id, &w, 3).unwrap();
    assert!(!leased.is_empty());
    let before = f.c.snapshot().1.len();
    let f = reopen(f, ServiceConfig::default());
    let s = f.c.status();
    assert_eq!(s.positions as usize, before);
    assert_eq!(s.in_flight, 0);
    assert!(s.queued >= leased.len() as u64);
    assert_eq!(s.state, State::Running);
    assert_matches_book_crate(&f.c);
    // Every accepted id is still known (from its result record or its own `d` record):
    // resubmitting them is harmless, every one a duplicate.
    let w2 = f.c.register(&id, "t2", 1).unwrap();
    let dups: Vec<JobResult> = done_ids
        .iter()
        .map(|&job_id| JobResult {
            job_id,
            mv: Move::None,
            score: 0,
            depth: 0,
            selectivity: 5,
            exact: false,
            nodes: 0,
            elapsed: Duration::ZERO,
        })
        .collect();
    assert_eq!(
        f.c.submit(&id, &w2, &dups).unwrap(),
        vec![Ack::Duplicate; dups.len()]
    );
    // The old lease of the crashed run is unknown now.
    let stale = mock_result(&leased[0]);
    assert!(matches!(
        f.c.submit(&id, &w2, &[stale]),
        Err(CoordinatorError::UnknownJob(_))
    ));
    drive(&f.c, 5);
    assert_eq!(f.c.status().state, State::Done);
    assert_matches_book_crate(&f.c);
    // Resumed mid-pass from the stored driver state and marked positions: exactly the serial
    // book.
    assert_same_book(&f.c, &serial_book(2, 10, &[operation(deviate24())]));
}

/// The search request of a job.
fn request_of(j: &Job) -> LeafRequest {
    LeafRequest {
        board: j.board,
        excluded: j.excluded,
        level: j.level,
    }
}

/// Lease up to `slots` jobs at a time for worker `w` and submit `answer`'s results for them
/// (the mock engine's, or altered ones) until no work is queued; returns every request leased.
fn answer_until_done(
    c: &Coordinator,
    w: &Uuid,
    slots: u32,
    mut answer: impl FnMut(&[Job]) -> Vec<JobResult>,
) -> Vec<LeafRequest> {
    let id = identity();
    let mut leased = Vec::new();
    loop {
        let jobs = c.lease(&id, w, slots).unwrap();
        if jobs.is_empty() {
            c.settle().unwrap();
            if c.status().queued == 0 {
                return leased;
            }
            continue;
        }
        leased.extend(jobs.iter().map(request_of));
        c.submit(&id, w, &answer(&jobs)).unwrap();
    }
}

fn mock_results(jobs: &[Job]) -> Vec<JobResult> {
    jobs.iter().map(mock_result).collect()
}

/// A coordinator killed between two checkpoints (its results stored and durable, as before
/// every acknowledgement, its growth state not written since the last checkpoint) resumes from
/// that checkpoint: the driver re-runs with the stored results to the book it had, no stored
/// result is searched again, and the build ends with the serial book.
#[test]
fn killed_between_checkpoints_resumes_to_the_same_book_without_searching_again() {
    let cfg = ServiceConfig {
        checkpoint_interval: Duration::from_secs(3600),
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg.clone());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let mut searched = HashSet::new();
    for _ in 0..12 {
        let jobs = f.c.lease(&id, &w, 4).unwrap();
        searched.extend(jobs.iter().map(request_of));
        let r: Vec<_> = jobs.iter().map(mock_result).collect();
        f.c.submit(&id, &w, &r).unwrap();
        f.c.settle().unwrap();
    }
    let mut before = f.c.snapshot().1;
    before.sort_by_key(|p| p.board);
    // The kill: what the store holds is durable, and nothing else is written.
    f.c.0.store.flush().unwrap();
    let Fixture { dir, clock, c } = f;
    drop(c);
    {
        // The stored book is the last checkpoint's, behind the one in memory; every result is
        // stored.
        let stored = Store::open(dir.path()).unwrap().load(dir.path()).unwrap();
        assert!(
            stored.book.len() < before.len(),
            "no checkpoint since the program started: {} stored, {} in memory",
            stored.book.len(),
            before.len()
        );
        assert_eq!(stored.results.len(), searched.len());
    }
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg, clock.clone()).unwrap();
    // The restart re-ran the driver from the checkpoint: the same book, nothing searched.
    let mut after = c.snapshot().1;
    after.sort_by_key(|p| p.board);
    assert_eq!(after, before);
    assert_eq!(c.status().completed, 0);
    // The rest of the build searches only requests not searched before the kill.
    let w = c.register(&id, "t2", 2).unwrap();
    for r in answer_until_done(&c, &w, 8, mock_results) {
        assert!(searched.insert(r), "{r:?} was searched before the kill");
    }
    c.settle().unwrap();
    assert_eq!(c.status().state, State::Done);
    assert_eq!(c.stored_results(), searched.len());
    let want = serial_book(2, 10, &[operation(deviate24())]);
    assert_same_book(&c, &want);
    // A clean stop checkpoints: the store holds the finished book.
    c.flush().unwrap();
    drop(c);
    let stored = Store::open(dir.path()).unwrap().load(dir.path()).unwrap();
    assert_eq!(stored.book.len(), want.len());
}

/// A trust record changed in counts only (here the local worker's, a root) is written at most
/// once per checkpoint interval, so that a submission of results alone is one store write,
/// and completely at every flush (decisions: `trust::tests`).
#[test]
fn trust_counts_are_written_once_per_interval_and_at_a_flush() {
    let cfg = ServiceConfig {
        checkpoint_interval: Duration::from_secs(3600),
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let stored = |name: &str| {
        f.c.0
            .store
            .trust_records()
            .unwrap()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
    };
    let memory = |name: &str| f.c.jobs().trust.records.get(name).cloned();
    let root = f.c.jobs().trust.records.keys().next().cloned().unwrap();
    assert!(memory(&root).unwrap().root);
    let counted_at_register = stored(&root).unwrap().results;
    let mut accepted = 0u64;
    for _ in 0..6 {
        let jobs = f.c.lease(&id, &w, 4).unwrap();
        let r: Vec<_> = jobs.iter().map(mock_result).collect();
        let acks = f.c.submit(&id, &w, &r).unwrap();
        accepted += acks.iter().filter(|a| **a == Ack::Accepted).count() as u64;
        f.c.settle().unwrap();
    }
    assert!(accepted > 4, "{accepted} results accepted");
    assert_eq!(memory(&root).unwrap().results, accepted);
    // The first submission wrote the record (none was written in this interval); the later
    // ones waited for the interval.
    let before_flush = stored(&root).unwrap().results;
    assert!(
        before_flush > counted_at_register && before_flush < accepted,
        "stored {before_flush} of {accepted} before the flush"
    );
    f.c.flush().unwrap();
    assert_eq!(stored(&root).unwrap().results, accepted);
}

/// A worker that finds no job while other workers hold the searches the driver waits for
/// (growth idle) waits in its lease call for the growth run their results start, and gets the
/// next searches, instead of an empty reply and `retry_after` of sleep.
#[test]
fn an_idle_worker_waits_for_the_searches_in_flight() {
    let cfg = ServiceConfig {
        speculation: 0,
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    f.c.start_expansion(deviate24(), 0).unwrap();
    f.c.settle().unwrap();
    let id = identity();
    // Holders take every queued search.
    let mut held = Vec::new();
    loop {
        let h = f.c.register(&id, "holder", 8).unwrap();
        let jobs = f.c.lease(&id, &h, 8).unwrap();
        if jobs.is_empty() {
            break;
        }
        held.push((h, jobs));
    }
    assert!(!held.is_empty());
    let idle = f.c.register(&id, "idle", 1).unwrap();
    assert!(!f.c.growth_busy());
    assert!(
        f.c.lease(&id, &idle, 1).unwrap().is_empty(),
        "nothing queued"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let c = f.c.clone();
    let (jobs, delivered) = rt.block_on(async {
        let waiting = async {
            let jobs = c
                .lease_waiting(&id, &idle, 1, Duration::from_secs(20))
                .await;
            (jobs, Instant::now())
        };
        let deliver = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let at = Instant::now();
            for (h, jobs) in &held {
                c.submit(&id, h, &mock_results(jobs)).unwrap();
            }
            at
        };
        let ((jobs, returned), delivered) = tokio::join!(waiting, deliver);
        assert!(
            returned >= delivered,
            "the call returned before the results landed"
        );
        (jobs.unwrap(), delivered)
    });
    assert!(
        !jobs.is_empty(),
        "the next searches reached the waiting worker"
    );
    assert!(delivered.elapsed() < Duration::from_secs(20));
}

/// Checkpoints applied by the writer thread (here one after every growth run) reach the store
/// in the order they were taken: once the one in flight is applied, the store holds exactly the
/// book in memory, and a coordinator opened over it without a clean stop has the same book and
/// searches nothing again.
#[test]
fn background_checkpoints_reach_the_store_in_order() {
    let cfg = ServiceConfig {
        checkpoint_interval: Duration::ZERO,
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg.clone());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    for _ in 0..12 {
        let jobs = f.c.lease(&id, &w, 4).unwrap();
        f.c.submit(&id, &w, &mock_results(&jobs)).unwrap();
        f.c.settle().unwrap();
    }
    assert_stored_book_survives_a_kill(f, cfg);
}

/// Once the checkpoint in flight is applied, the store holds exactly the book in memory, and a
/// coordinator opened over it after a kill (durable is what was applied, nothing else is
/// written) has the same book and searches nothing again.
fn assert_stored_book_survives_a_kill(f: Fixture, cfg: ServiceConfig) {
    f.c.growth().settle_checkpoint();
    let mut before = f.c.snapshot().1;
    before.sort_by_key(|p| p.board);
    let mut stored: Vec<Position> =
        f.c.0
            .store
            .load(f.dir.path())
            .unwrap()
            .book
            .positions()
            .collect();
    stored.sort_by_key(|p| p.board);
    assert_eq!(stored, before, "the last checkpoint is the book in memory");
    f.c.0.store.flush().unwrap();
    let Fixture { dir, clock, c } = f;
    drop(c);
    let c = Coordinator::open(Store::open(dir.path()).unwrap(), dir.path(), cfg, clock).unwrap();
    let mut after = c.snapshot().1;
    after.sort_by_key(|p| p.board);
    assert_eq!(after, before);
    assert_eq!(c.status().completed, 0);
}

/// Checkpoints that fold the stored position chunks (every position written again as the
/// replacement of all earlier records) keep the store equal to the book in memory, and a
/// coordinator opened over it without a clean stop has the same book.
#[test]
fn folded_checkpoints_keep_the_stored_book() {
    let cfg = ServiceConfig {
        checkpoint_interval: Duration::ZERO,
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg.clone());
    // Fold as soon as the chunks hold twice what the last fold wrote (or 128 bytes).
    f.c.0.store.set_fold_min_bytes(64);
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    for _ in 0..16 {
        let jobs = f.c.lease(&id, &w, 4).unwrap();
        f.c.submit(&id, &w, &mock_results(&jobs)).unwrap();
        f.c.settle().unwrap();
    }
    f.c.growth().settle_checkpoint();
    let folds = f.c.0.store.position_replacements();
    assert!(folds >= 2, "{folds} folds");
    assert_stored_book_survives_a_kill(f, cfg);
}

/// A coordinator killed after it stored a caught worker's removals but before its growth
/// runner replayed: the stored book may still hold the dropped results' effects, so the next
/// start replays from the base book (the rollback request is stored with the removals), and
/// the build ends with the honest book.
#[test]
fn a_rollback_requested_before_a_kill_is_replayed_at_the_next_start() {
    let cfg = ServiceConfig::default();
    let f = fixture(2, 10, cfg.clone());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    // A trusted (loopback) worker tells plausible lies (the score's sign flipped and moved by
    // 2) on its first searches: they reach the book.
    let mut lies = Vec::new();
    answer_until_done(&f.c, &w, 4, |jobs| {
        let mut r = mock_results(jobs);
        if lies.len() < 6 {
            r[0].score = 2 - r[0].score;
            lies.push(request_of(&jobs[0]));
        }
        r
    });
    let want = serial_book(2, 10, &[operation(deviate24())]);
    let (_, lied) = f.c.snapshot();
    assert!(
        !crate::sim::same_positions(lied, &want),
        "the lies did not change the book"
    );
    // The kill: the finished (dishonest) book is checkpointed; then what catching the liar
    // stores (its result removed, a rollback requested) is durable, and nothing else ran.
    f.c.flush().unwrap();
    let Fixture { dir, clock, c } = f;
    drop(c);
    {
        let store = Store::open(dir.path()).unwrap();
        let mut b = Batch::default();
        for lie in &lies {
            b.remove_result(lie);
        }
        b.put_rollback_requested(1).unwrap();
        store.apply(b).unwrap();
        store.flush().unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg.clone(), clock.clone()).unwrap();
    // The start replayed: the lied requests are round work again, answered honestly this time.
    let w = c.register(&id, "t2", 1).unwrap();
    let searched = answer_until_done(&c, &w, 4, mock_results);
    c.settle().unwrap();
    for lie in &lies {
        assert!(searched.contains(lie), "{lie:?} was not searched again");
    }
    assert_eq!(c.status().state, State::Done);
    assert_same_book(&c, &want);
    // The replayed book's checkpoint covers the request: the next start does not replay.
    c.flush().unwrap();
    drop(c);
    let loaded = Store::open(dir.path()).unwrap().load(dir.path()).unwrap();
    assert_eq!(loaded.rollbacks, (1, 1));
}

#[test]
fn hostile_results_are_rejected_and_change_nothing() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "a", 1).unwrap();
    let other = f.c.register(&id, "b", 1).unwrap();
    // Get past the root until two jobs are out, one of them with an excluded move.
    let mut jobs = Vec::new();
    for _ in 0..50 {
        jobs.extend(f.c.lease(&id, &w, 8).unwrap());
        if jobs.len() >= 2 && jobs.iter().any(|j| j.excluded != 0) {
            break;
        }
        let r: Vec<_> = jobs.drain(..).map(|j| mock_result(&j)).collect();
        f.c.submit(&id, &w, &r).unwrap();
        f.c.settle().unwrap();
    }
    let job = *jobs
        .iter()
        .find(|j| j.excluded != 0)
        .expect("a job with an excluded move");
    let good = mock_result(&job);
    let other_job = jobs.iter().find(|j| j.id != job.id).expect("two jobs");
    let good2 = mock_result(other_job);
    let before = f.c.snapshot();
    let counters = f.c.counters();
    let excluded_sq = Square::new(job.excluded.trailing_zeros() as u8).unwrap();
    let illegal = (0..64u8)
        .map(|i| Square::new(i).unwrap())
        .find(|s| job.board.moves() & s.bit() == 0)
        .unwrap();
    type Check = fn(&CoordinatorError) -> bool;
    let cases: Vec<(JobResult, &Uuid, Check)> = vec![
        (
            JobResult {
                job_id: Uuid::new_v4(),
                ..good
            },
            &w,
            |e| matches!(e, CoordinatorError::UnknownJob(_)),
        ),
        (good, &other, |e| {
            matches!(e, CoordinatorError::NotLeased { .. })
        }),
        (
            JobResult {
                mv: Move::Square(illegal),
                ..good
            },
            &w,
            |e| matches!(e, CoordinatorError::IllegalMove { .. }),
        ),
        (
            JobResult {
                mv: Move::Square(excluded_sq),
                ..good
            },
            &w,
            |e| matches!(e, CoordinatorError::IllegalMove { .. }),
        ),
        (
            JobResult {
                mv: Move::Pass,
                ..good
            },
            &w,
            |e| matches!(e, CoordinatorError::IllegalMove { .. }),
        ),
        (JobResult { score: 65, ..good }, &w, |e| {
            matches!(e, CoordinatorError::ScoreOutOfRange { .. })
        }),
        (
            JobResult {
                score: -100,
                ..good
            },
            &w,
            |e| matches!(e, CoordinatorError::ScoreOutOfRange { .. }),
        ),
        (
            JobResult {
                score: 3,
                exact: true,
                ..good
            },
            &w,
            |e| matches!(e, CoordinatorError::ExactParity { .. }),
        ),
    ];
    for (r, who, check) in cases {
        // A bad result in a batch with a good one: the whole call fails.
        let e = f.c.submit(&id, who, &[good2, r]).err();
        let e = e.unwrap_or_else(|| panic!("accepted {r:?} from {who}"));
        assert!(check(&e), "{e:?} for {r:?}");
    }
    assert_eq!(f.c.snapshot(), before);
    assert_eq!(f.c.counters().completed, counters.completed);
    // Wrong protocol version.
    assert!(matches!(
        f.c.submit(&id, &w, &[good, good]),
        Err(CoordinatorError::InvalidArgument(_))
    ));
    let bad = Identity {
        protocol_version: 0,
        ..identity()
    };
    assert!(matches!(
        f.c.submit(&bad, &w, &[good]),
        Err(CoordinatorError::ProtocolVersion { .. })
    ));
    // The good one still goes through, once.
    assert_eq!(f.c.submit(&id, &w, &[good]).unwrap(), vec![Ack::Accepted]);
    assert_eq!(f.c.submit(&id, &w, &[good]).unwrap(), vec![Ack::Duplicate]);
    assert_eq!(f.c.counters().completed, counters.completed + 1);
}

#[test]
fn identity_checks() {
    let cfg = ServiceConfig {
        eval_hash: Some("abcd".into()),
        engine_version: Some(ENGINE_VERSION.into()),
        ..ServiceConfig::default()
    };
    let f = fixture(1, 6, cfg);
    let good = Identity {
        eval_hash: "abcd".into(),
        ..identity()
    };
    assert!(f.c.register(&good, "w", 1).is_ok());
    let cases = [
        (
            Identity {
                protocol_version: PROTOCOL_VERSION + 1,
                ..good.clone()
            },
            ErrorCode::FailedPrecondition,
        ),
        (
            Identity {
                engine_version: "other".into(),
                ..good.clone()
            },
            ErrorCode::FailedPrecondition,
        ),
        (
            Identity {
                eval_hash: "ffff".into(),
                ..good.clone()
            },
            ErrorCode::FailedPrecondition,
        ),
    ];
    for (id, code) in cases {
        let e = f.c.register(&id, "w", 1).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
    }
}

use bookfarm_proto::status::{ErrorCode, ServiceError};

#[test]
fn silent_worker_jobs_are_released_and_late_results_are_not_counted_twice() {
    let cfg = ServiceConfig {
        lease_timeout: Duration::from_secs(90),
        max_lease_base: Duration::from_secs(3600),
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    let id = identity();
    let a = f.c.register(&id, "a", 1).unwrap();
    let jobs = f.c.lease(&id, &a, 1).unwrap();
    assert_eq!(jobs.len(), 1, "the root search");
    let b = f.c.register(&id, "b", 1).unwrap();
    assert!(f.c.lease(&id, &b, 1).unwrap().is_empty());
    // Heartbeats keep the lease.
    f.clock.advance(Duration::from_secs(60));
    assert!(f.c.heartbeat(&id, &a, &[jobs[0].id]).unwrap().is_empty());
    f.clock.advance(Duration::from_secs(60));
    f.c.heartbeat(&id, &b, &[]).unwrap();
    assert_eq!(f.c.expire_leases(), 0);
    // Silence beyond the timeout.
    f.clock.advance(Duration::from_secs(91));
    f.c.heartbeat(&id, &b, &[]).unwrap();
    assert_eq!(f.c.expire_leases(), 1);
    assert!(matches!(
        f.c.heartbeat(&id, &a, &[jobs[0].id]),
        Err(CoordinatorError::UnknownWorker(_))
    ));
    let again = f.c.lease(&id, &b, 1).unwrap();
    assert_eq!(again[0].id, jobs[0].id);
    assert_eq!(again[0].attempt, 1);
    // A re-registered `a` cannot submit for a job leased to b; b can, once.
    let a2 = f.c.register(&id, "a", 1).unwrap();
    let r = mock_result(&again[0]);
    assert!(matches!(
        f.c.submit(&id, &a2, &[r]),
        Err(CoordinatorError::NotLeased { .. })
    ));
    assert_eq!(f.c.submit(&id, &b, &[r]).unwrap(), vec![Ack::Accepted]);
    assert_eq!(f.c.submit(&id, &b, &[r]).unwrap(), vec![Ack::Duplicate]);
    assert_eq!(f.c.counters().completed, 1);
}

fn report(c: &Coordinator, w: &Uuid, retryable: bool) -> bool {
    let id = identity();
    let jobs = c.lease(&id, w, 1).unwrap();
    assert_eq!(jobs.len(), 1);
    c.fail(
        &id,
        w,
        &Failure {
            job_id: jobs[0].id,
            reason: "boom".into(),
            retryable,
        },
    )
    .unwrap()
}

#[test]
fn failures_from_different_owners_quarantine_the_position() {
    let f = fixture(2, 10, ServiceConfig::default());
    let id = identity();
    // One owner's reports, retryable or not, never quarantine.
    let mallory = f.c.register_owned(&id, "m", 1, Some("mallory")).unwrap();
    let mallory2 = f.c.register_owned(&id, "m2", 1, Some("mallory")).unwrap();
    for w in [&mallory, &mallory2, &mallory] {
        assert!(!report(&f.c, w, false));
    }
    assert_eq!(f.c.status().queued, 1);
    // A second owner's report does.
    let alice = f.c.register_owned(&id, "a", 1, Some("alice")).unwrap();
    assert!(report(&f.c, &alice, true));
    let s = f.c.status();
    assert_eq!(s.quarantined.len(), 1);
    assert_eq!(s.queued + s.in_flight, 0);
    // The operator releases it: the search is queued again, its reports counted afresh.
    assert_eq!(f.c.release_quarantined(None).unwrap(), 1);
    assert_eq!(f.c.status().quarantined.len(), 0);
    assert_eq!(f.c.status().queued, 1);
    assert!(!report(&f.c, &alice, false));
    assert!(report(&f.c, &mallory, true));
    // Quarantine is kept in memory: a restarted coordinator gives the search another chance
    // (the growth program still needs it).
    let f = reopen(f, ServiceConfig::default());
    assert!(f.c.status().quarantined.is_empty());
    assert_eq!(f.c.status().queued, 1);
}

#[test]
fn anonymous_reports_count_one_by_one() {
    let f = fixture(2, 10, ServiceConfig::default());
    let w = f.c.register(&identity(), "w", 1).unwrap();
    assert!(!report(&f.c, &w, true));
    assert!(report(&f.c, &w, true));
    let b = f.c.status().quarantined[0].board;
    assert_eq!(f.c.release_quarantined(Some(&[b])).unwrap(), 1);
    assert_eq!(f.c.status().queued, 1);
}

#[test]
fn pause_stops_leasing_and_resume_restarts() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start_expansion(deviate24(), 0).unwrap();
    f.c.set_paused(true).unwrap();
    let id = identity();
    let w = f.c.register(&id, "w", 1).unwrap();
    assert!(f.c.lease(&id, &w, 4).unwrap().is_empty());
    assert_eq!(f.c.status().state, State::Paused);
    f.c.set_paused(false).unwrap();
    assert_eq!(f.c.lease(&id, &w, 4).unwrap().len(), 1);
}

/// Search the queued jobs one at a time until at least `n` are queued (the root's expansion
/// is one search: its four symmetric moves are linked at once; the next ones take two).
fn advance_until_queued(f: &Fixture, id: &Identity, w: &Uuid, n: u64) {
    while f.c.status().queued < n {
        let jobs = f.c.lease(id, w, 1).unwrap();
        assert_eq!(
            jobs.len(),
            1,
            "the build stopped with fewer than {n} jobs queued"
        );
        f.c.submit(id, w, &[mock_result(&jobs[0])]).unwrap();
        f.c.settle().unwrap();
    }
}

#[test]
fn leases_are_capped_at_threads_plus_lookahead() {
    // No lookahead, so that an expansion's two jobs exceed one worker's cap.
    let cfg = ServiceConfig {
        lookahead: 0,
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "w", 1).unwrap();
    advance_until_queued(&f, &id, &w, 2);
    let mut held = 0;
    for _ in 0..5 {
        held += f.c.lease(&id, &w, 256).unwrap().len();
    }
    assert_eq!(held, 1, "one thread, no lookahead");
    assert!(f.c.status().queued > 0, "the rest stays queued for others");
    let other = f.c.register(&id, "o", 1).unwrap();
    assert_eq!(f.c.lease(&id, &other, 256).unwrap().len(), 1);
    // A worker claiming a million threads is credited with max_worker_threads.
    let d = ServiceConfig::default();
    assert_eq!(lease_cap(1, &d), 1 + 2);
    assert_eq!(lease_cap(1_000_000, &d), 64 + 2);
}

#[test]
fn heartbeats_do_not_extend_a_lease_past_its_maximum() {
    let cfg = ServiceConfig {
        max_lease_base: Duration::from_secs(30),
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg.clone());
    let id = identity();
    let w = f.c.register(&id, "w", 1).unwrap();
    let jobs = f.c.lease(&id, &w, 1).unwrap();
    let held: Vec<Uuid> = jobs.iter().map(|j| j.id).collect();
    // Heartbeats every 10 s keep the worker alive (lease timeout 60 s)...
    for _ in 0..3 {
        f.clock.advance(Duration::from_secs(10));
        assert!(f.c.heartbeat(&id, &w, &held).unwrap().is_empty());
        assert_eq!(f.c.expire_leases(), 0);
    }
    // ...but past 30 s (level 2) the job goes back to the queue and the heartbeat cancels it.
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(f.c.expire_leases(), 1);
    assert_eq!(f.c.heartbeat(&id, &w, &held).unwrap(), held);
    assert_eq!(f.c.status().queued, 1);
    // The maximum scales with the level and is capped.
    let d = ServiceConfig::default();
    assert_eq!(max_lease_duration(0, &d), Duration::from_secs(60));
    assert_eq!(max_lease_duration(20, &d), Duration::from_secs(60 * 32));
    assert_eq!(max_lease_duration(60, &d), d.max_lease_cap);
}

#[test]
fn released_and_dropped_leases_go_back_to_the_queue() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "w", 1).unwrap();
    advance_until_queued(&f, &id, &w, 2);
    let jobs: Vec<Uuid> =
        f.c.lease(&id, &w, 3)
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
    let n = jobs.len() as u64;
    assert!(n >= 2, "the deviation queues more than one search");
    let queued = f.c.status().queued;
    // Release hands back only the caller's own leases.
    let other = f.c.register(&id, "o", 1).unwrap();
    assert_eq!(f.c.release_leases(&id, &other, &jobs).unwrap(), 0);
    assert_eq!(f.c.release_leases(&id, &w, &jobs[..1]).unwrap(), 1);
    assert_eq!(f.c.status().queued, queued + 1);
    // Dropping the worker re-queues the rest and forgets its id.
    assert_eq!(f.c.drop_workers(&[w]) as u64, n - 1);
    assert_eq!(f.c.status().queued, queued + n);
    assert!(matches!(
        f.c.lease(&id, &w, 1),
        Err(CoordinatorError::UnknownWorker(_))
    ));
}

#[test]
fn replay_parses_move_lists() {
    assert_eq!(replay("").unwrap(), Board::start());
    let b = replay("f5d6").unwrap();
    assert_eq!(b.empties(), 58);
    assert!(replay("f5f5").is_err());
    assert!(replay("f5d").is_err());
}

#[test]
fn workers_with_another_search_signature_are_refused_naming_the_difference() {
    let f = fixture(2, 10, ServiceConfig::default());
    let id = identity();
    // The first worker pins the book's signature.
    f.c.register(&id, "first", 1).unwrap();
    let small_tt = bookfarm_engine::search::SearchOptions {
        tt_bits: 14,
        ..bookfarm_engine::search::SearchOptions::default()
    };
    let other_options = Identity {
        search_signature: bookfarm_engine::search::SearchSignature::new(&small_tt, "00")
            .to_string(),
        ..identity()
    };
    let e =
        f.c.register(&other_options, "tt14", 1)
            .unwrap_err()
            .to_string();
    assert!(e.contains("search options: tt=14"), "{e}");
    let other_weights = Identity {
        search_signature: test_signature("77"),
        ..identity()
    };
    let e =
        f.c.register(&other_weights, "w77", 1)
            .unwrap_err()
            .to_string();
    assert!(e.contains("evaluation: 77 vs 00"), "{e}");
    let none = Identity {
        search_signature: String::new(),
        ..identity()
    };
    assert!(matches!(
        f.c.register(&none, "old", 1),
        Err(CoordinatorError::Signature(_))
    ));
    // The pin survives a restart, and a run with another signature does not open the book.
    let f = reopen(f, ServiceConfig::default());
    assert!(f.c.register(&other_weights, "w77", 1).is_err());
    let Fixture { dir, c, .. } = f;
    c.flush().unwrap();
    drop(c);
    let store = Store::open(dir.path()).unwrap();
    let cfg = ServiceConfig {
        signature: Some(test_signature("77")),
        ..ServiceConfig::default()
    };
    let e = Coordinator::open(store, dir.path(), cfg, Arc::new(ManualClock::default()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("evaluation: 77 vs 00"), "{e}");
}

#[test]
fn a_result_whose_depth_is_not_the_level_tables_is_refused() {
    let f = fixture(4, 10, ServiceConfig::default());
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let job = f.c.lease(&id, &w, 1).unwrap()[0];
    for (depth, selectivity) in [(3, 5), (4, 0), (60, 5)] {
        let r = JobResult {
            depth,
            selectivity,
            ..mock_result(&job)
        };
        assert!(matches!(
            f.c.submit(&id, &w, &[r]),
            Err(CoordinatorError::BadDepth { .. })
        ));
    }
    assert_eq!(f.c.stored_results(), 0);
    assert_eq!(
        f.c.submit(&id, &w, &[mock_result(&job)]).unwrap(),
        vec![Ack::Accepted]
    );
}

/// A round search leased far longer than its level's searches take gets a second lease on
/// an idle worker; whichever answers first is accepted, the other's answer is a duplicate,
/// and both leases end.
#[test]
fn long_round_searches_get_one_backup_lease_and_the_first_answer_wins() {
    let cfg = ServiceConfig {
        lookahead: 0,
        speculation: 0,
        backup_after: 4,
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    let id = identity();
    let a = f.c.register(&id, "a", 64).unwrap();
    // The root search takes 1 s: the level's mean search time.
    let root = f.c.lease(&id, &a, 1).unwrap();
    f.clock.advance(Duration::from_secs(1));
    f.c.submit(&id, &a, &[mock_result(&root[0])]).unwrap();
    f.c.settle().unwrap();
    f.c.start_expansion(deviate24(), 0).unwrap();
    let held = f.c.lease(&id, &a, 64).unwrap();
    assert!(!held.is_empty());
    assert_eq!(f.c.status().queued, 0, "a holds every search");
    let b = f.c.register(&id, "b", 1).unwrap();
    // Not long yet: no backup.
    f.clock.advance(Duration::from_secs(3));
    assert!(f.c.lease(&id, &b, 1).unwrap().is_empty());
    // Past 4 mean search times: b gets the first search of the pass (the one growth waits
    // for), once; a still holds it too.
    f.clock.advance(Duration::from_secs(2));
    let backup = f.c.lease(&id, &b, 1).unwrap();
    assert_eq!(backup.len(), 1);
    assert_eq!(backup[0].id, held[0].id);
    assert_eq!(backup[0].attempt, 1);
    assert_eq!(f.c.counters().backup_leased, 1);
    assert_eq!(f.c.status().in_flight as usize, held.len() + 1);
    assert!(f.c.heartbeat(&id, &a, &[held[0].id]).unwrap().is_empty());
    assert!(f.c.heartbeat(&id, &b, &[held[0].id]).unwrap().is_empty());
    // A second idle worker does not get a third lease of it.
    let c2 = f.c.register(&id, "c", 1).unwrap();
    let third = f.c.lease(&id, &c2, 1).unwrap();
    assert!(third.iter().all(|j| j.id != held[0].id));
    // b answers first: accepted; a's answer is a duplicate; no lease of it is left.
    let r = mock_result(&backup[0]);
    assert_eq!(f.c.submit(&id, &b, &[r]).unwrap(), vec![Ack::Accepted]);
    assert_eq!(f.c.submit(&id, &a, &[r]).unwrap(), vec![Ack::Duplicate]);
    assert_eq!(
        f.c.heartbeat(&id, &a, &[held[0].id]).unwrap(),
        vec![held[0].id]
    );
    assert_eq!(
        f.c.status().in_flight as usize,
        held.len() - 1 + third.len()
    );
}

/// A round search whose lessee fell silent for two heartbeat intervals (crashed, most likely)
/// gets a backup lease before any speculative work, long before the lease timeout; while the
/// lessee is heard from, idle workers get speculative work instead.
#[test]
fn a_silent_workers_round_search_is_backed_up_before_speculative_work() {
    let cfg = ServiceConfig {
        backup_after: 4,
        ..speculating()
    };
    let f = fixture(2, 10, cfg);
    f.c.set_predictor(Box::new(crate::sim::SimPredictor(
        crate::sim::Guess::Perfect,
    )));
    let id = identity();
    let a = f.c.register(&id, "a", 1).unwrap();
    let b = f.c.register(&id, "b", 2).unwrap();
    f.c.start_expansion(deviate24(), 0).unwrap();
    let round = f.c.lease(&id, &a, 1).unwrap();
    assert_eq!(round.len(), 1);
    assert_eq!(f.c.jobs().queued_round(), 0, "a holds the round's search");
    // a is heard from: b gets speculative work.
    f.clock.advance(Duration::from_secs(15));
    f.c.heartbeat(&id, &a, &[round[0].id]).unwrap();
    let first = f.c.lease(&id, &b, 1).unwrap();
    assert_eq!(first.len(), 1);
    assert_ne!(first[0].id, round[0].id);
    let class = |j: &Job| f.c.jobs().jobs.get(&j.id).map(|e| e.class);
    assert_eq!(class(&first[0]), Some(JobClass::Speculative));
    assert!(f.c.status().queued > 0, "more speculative work waits");
    // a falls silent for more than two heartbeat intervals (not yet the lease timeout): b,
    // heard from, gets a's round search before the speculative work.
    f.clock.advance(Duration::from_secs(21));
    f.c.heartbeat(&id, &b, &[first[0].id]).unwrap();
    let rescue = f.c.lease(&id, &b, 1).unwrap();
    assert_eq!(rescue.len(), 1);
    assert_eq!(rescue[0].id, round[0].id);
    assert_eq!(rescue[0].attempt, 1);
    assert_eq!(f.c.counters().backup_leased, 1);
    assert_eq!(f.c.counters().expired, 0);
    assert_eq!(
        f.c.submit(&id, &b, &[mock_result(&rescue[0])]).unwrap(),
        vec![Ack::Accepted]
    );
}

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
    let (book, asked) = crate::sim::serial_build(2, 10, &[operation(deviate24())]);
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
    let (book, _) = crate::sim::serial_build(2, 10, &[operation(deviate24())]);
    assert!(crate::sim::same_positions(f.c.snapshot().1, &book));
}

/// Speculation on (4 per thread), no lookahead, no backup leases.
fn speculating() -> ServiceConfig {
    ServiceConfig {
        lookahead: 0,
        speculation: 4,
        backup_after: 0,
        ..ServiceConfig::default()
    }
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
    c.start_expansion(deviate24(), 0).unwrap();
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
    JobResult::from_leaf(job.id, &crate::sim::fake_search(&req))
}

/// How a mock worker of the validation tests answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Honest,
    /// The sign flipped and moved by 2 on one request in `n` (chosen by the request, so that
    /// every liar of this kind tells the same lie).
    Flip(u64),
}

fn answer(job: &Job, how: Answer) -> JobResult {
    let mut r = mock_result(job);
    if let Answer::Flip(n) = how {
        let h = job.board.player.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ job.board.opponent;
        if (h >> 17).is_multiple_of(n) {
            r.score = 2 - r.score;
        }
    }
    r
}

/// Run mock workers `(id, answer)` in turns until the growth programs are done and no check
/// job is left; a worker refused (blocked) stops. Returns the workers refused.
fn drive_mixed(c: &Coordinator, workers: &[(Uuid, Answer)]) -> Vec<Uuid> {
    let id = identity();
    let mut refused = Vec::new();
    let mut idle = 0;
    for round in 0..1_000_000usize {
        let (w, how) = workers[round % workers.len()];
        if refused.contains(&w) {
            continue;
        }
        let jobs = match c.lease(&id, &w, 2) {
            Ok(j) => j,
            Err(CoordinatorError::Blocked(_)) => {
                refused.push(w);
                continue;
            }
            Err(e) => panic!("lease: {e}"),
        };
        if jobs.is_empty() {
            c.settle().unwrap();
            idle += 1;
            let s = c.status();
            if idle > 4 * workers.len() && s.state == State::Done && s.in_flight == 0 {
                break;
            }
            continue;
        }
        idle = 0;
        let results: Vec<JobResult> = jobs.iter().map(|j| answer(j, how)).collect();
        match c.submit(&id, &w, &results) {
            Ok(_) => {}
            Err(CoordinatorError::Blocked(_)) => refused.push(w),
            Err(e) => panic!("submit: {e}"),
        }
    }
    c.settle().unwrap();
    refused
}

/// A level-2, depth-10 book served under `trust`, with the coordinator's verifier registered
/// (the trust root the validation tests settle against).
fn trust_fixture(trust: TrustRules) -> (Fixture, Identity, Uuid) {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            trust,
            ..ServiceConfig::default()
        },
    );
    let id = identity();
    let verifier = f.c.register_verifier(&id, 1).unwrap();
    (f, id, verifier)
}

#[test]
fn untrusted_liars_never_reach_the_book_and_are_blocked() {
    // Every result applied on one (earned) word is spot-checked, so that a lie a liar slipped
    // in after earning trust is caught before the build is done.
    let (f, id, verifier) = trust_fixture(TrustRules {
        spot_floor: 1.0,
        ..TrustRules::default()
    });
    let alice =
        f.c.register_with(&id, "a", 1, Some("alice"), false)
            .unwrap();
    let mallory =
        f.c.register_with(&id, "m", 1, Some("mallory"), false)
            .unwrap();
    let eve = f.c.register_with(&id, "e", 1, Some("eve"), false).unwrap();
    let eve2 =
        f.c.register_with(&id, "e2", 1, Some("eve2"), false)
            .unwrap();
    f.c.start_expansion(deviate24(), 0).unwrap();
    let refused = drive_mixed(
        &f.c,
        &[
            (verifier, Answer::Honest),
            (alice, Answer::Honest),
            (mallory, Answer::Flip(1)),
            (eve, Answer::Flip(3)),
            (eve2, Answer::Flip(3)),
        ],
    );
    assert_same_book(&f.c, &serial_book(2, 10, &[operation(deviate24())]));
    let s = f.c.status();
    let v = s.validation;
    assert!(v.reached_book == 0 || v.rollbacks > 0, "{v:?}");
    assert!(
        v.applied_at_once > 0 && v.spot_checks == v.applied_at_once,
        "alice earned trust: her results below the window are applied at once, and checked: {v:?}"
    );
    assert!(v.invalid >= 3 && v.held > 0 && v.validated > 0, "{v:?}");
    let credit = |n: &str| s.credit.iter().find(|c| c.name == n).unwrap().clone();
    assert!(credit("mallory").blocked && refused.contains(&mallory));
    assert_eq!(credit("mallory").results, 0, "no credit for lies");
    assert!(!credit("alice").blocked && credit("alice").invalid == 0);
    assert!(credit("alice").results > 0);
    // A restart keeps standing and credit.
    let before = s.credit.clone();
    let f = reopen(f, ServiceConfig::default());
    assert_eq!(f.c.status().credit, before);
    assert!(
        f.c.register_with(&id, "m", 1, Some("mallory"), false)
            .is_err()
    );
}

/// The window rule (see `trust::Window`) against the rule that made every deviate request
/// critical: the same book, and an earned worker's results below the window applied at once
/// instead of replicated.
#[test]
fn earned_results_below_the_deviate_window_are_applied_at_once() {
    let run = |window_margin: Option<i32>| {
        let (f, id, verifier) = trust_fixture(TrustRules {
            window_margin,
            ..TrustRules::default()
        });
        let alice =
            f.c.register_with(&id, "a", 1, Some("alice"), false)
                .unwrap();
        let bob = f.c.register_with(&id, "b", 1, Some("bob"), false).unwrap();
        f.c.start_expansion(deviate24(), 0).unwrap();
        drive_mixed(
            &f.c,
            &[
                (verifier, Answer::Honest),
                (alice, Answer::Honest),
                (bob, Answer::Honest),
            ],
        );
        assert_same_book(&f.c, &serial_book(2, 10, &[operation(deviate24())]));
        f.c.status().validation
    };
    let all = run(None);
    let window = run(TrustRules::default().window_margin);
    assert_eq!(all.applied_at_once, 0, "every result waited: {all:?}");
    assert!(window.applied_at_once > 0, "{window:?}");
    // Less replication per node the book uses. (The runs' totals differ by a few results: the
    // verifier thread and the workers interleave differently from run to run, so only the
    // ratio is compared.)
    assert!(
        u128::from(window.replica_nodes) * u128::from(all.used_nodes)
            < u128::from(all.replica_nodes) * u128::from(window.used_nodes),
        "less replication: {window:?} vs {all:?}"
    );
    assert_eq!(window.invalid + all.invalid, 0);
}

#[test]
fn a_trusted_liar_is_caught_by_spot_checks_and_the_book_is_replayed() {
    let (f, id, verifier) = trust_fixture(TrustRules::default());
    let liar = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let honest = f.c.register_with(&id, "u", 1, Some("u"), false).unwrap();
    f.c.start_expansion(deviate24(), 0).unwrap();
    drive_mixed(
        &f.c,
        &[
            (liar, Answer::Flip(1)),
            (verifier, Answer::Honest),
            (honest, Answer::Honest),
        ],
    );
    assert_same_book(&f.c, &serial_book(2, 10, &[operation(deviate24())]));
    let s = f.c.status();
    let v = s.validation;
    // Its first result is applied at once and spot-checked (its record is empty): the lie
    // reached the book, was caught, and the book was replayed without it.
    assert!(
        v.reached_book > 0 && v.rollbacks > 0 && v.spot_checks > 0,
        "{v:?}"
    );
    let op = s.credit.iter().find(|c| c.name == "op").unwrap();
    assert!(op.blocked && op.invalid >= 3 && op.results == 0, "{op:?}");
    // The replayed book survives a restart.
    let f = reopen(f, ServiceConfig::default());
    assert_same_book(&f.c, &serial_book(2, 10, &[operation(deviate24())]));
}

fn upgrade4() -> Selector {
    Selector::Upgrade { level: 4, error: 6 }
}

/// Issue 22: `expand upgrade` and `expand audit --queue` on the coordinator, with three mock
/// workers submitting in scrambled orders, give exactly the book the book crate's serial
/// programs give (the offline `book upgrade` and `book audit --queue`), raise levels without
/// lowering any, and report what they did.
#[test]
fn upgrade_and_audit_on_the_cluster_equal_the_serial_programs() {
    // Short games in a depth-20 book: the best lines end well before the book's depth, so the
    // audit's `book add` of its contradicting games has room to add positions.
    let games: Vec<Vec<Move>> = ["f5d6c3d3c4f4", "f5f6e6f4e3c5", "c4e3f6e6f5g6", "f5d6c5f4e3"]
        .iter()
        .map(|g| bookfarm_engine::formats::transcript::parse_moves(g).unwrap())
        .collect();
    let add = Operation::AddGames { games };
    let level2 = serial_book(2, 20, std::slice::from_ref(&add));
    let upgraded = serial_book(2, 20, &[add.clone(), operation(upgrade4())]);
    let raised = level2
        .positions()
        .filter(|p| upgraded.get(&p.board).is_some_and(|q| q.level > p.level))
        .count();
    assert!(raised > 0, "the upgrade re-searched something");
    for p in level2.positions() {
        let q = upgraded.get(&p.board).expect("no position removed");
        assert!(q.level >= p.level && (q.level == p.level || q.level == 4));
    }
    // The audit on the upgraded book, serially, then its follow-up `book add`.
    let mut audited = upgraded.clone();
    let audit = Operation::Audit {
        level: 6,
        queue: true,
    };
    let mut search = mock_search;
    let mut d = bookfarm_book::driver::Driver::new(audit.clone(), None);
    d.run_with(&mut audited, &mut search);
    let lines = d.state().audit.clone();
    assert!(!lines.is_empty());
    let follow = d
        .follow_up()
        .expect("the mock search contradicts some lines");
    bookfarm_book::driver::Driver::new(follow, None).run_with(&mut audited, &mut search);
    assert!(audited.len() > upgraded.len(), "contradicting lines added");

    let f = fixture(2, 20, ServiceConfig::default());
    f.c.start(add, None).unwrap();
    drive(&f.c, 7);
    f.c.start_expansion(upgrade4(), 0).unwrap();
    drive_workers(&f.c, 3, 3, 5);
    assert_eq!(f.c.status().state, State::Done);
    assert_same_book(&f.c, &upgraded);
    assert_linked(&f.c);
    assert_matches_book_crate(&f.c);
    let report = f.c.reports().last().cloned().unwrap_or_default();
    assert_eq!(
        report,
        format!(
            "upgrade to level 4 (error 6): {raised} positions raised in {} rounds; root value {}",
            rounds(&level2),
            bookfarm_book::extract::root_value(&upgraded).unwrap_or(0)
        )
    );
    f.c.start_expansion(
        Selector::Audit {
            level: 6,
            queue: true,
        },
        0,
    )
    .unwrap();
    drive_workers(&f.c, 3, 2, 9);
    let s = f.c.status();
    assert_eq!(s.state, State::Done);
    assert_eq!(f.c.last_audit(), lines);
    // (The added games' values are left for the next negamax, as Edax's `book add` does.)
    assert_same_book(&f.c, &audited);
    // The audit's report lists the contradictions, then the `book add` that followed it.
    let n = s.reports.len();
    let bad = lines.iter().filter(|a| a.contradicts()).count();
    assert!(s.reports[n - 2].ends_with(&format!(
        "audit at level 6: {} best lines played to the end, {bad} contradict the book",
        lines.len()
    )));
    assert!(s.reports[n - 1].starts_with(&format!("added {bad} games")));
}

/// The upgrade's rounds on `book` with the mock search (serially).
fn rounds(book: &bookfarm_book::MemBook) -> u64 {
    let mut b = book.clone();
    let r = bookfarm_book::research::upgrade(
        &mut b,
        bookfarm_book::research::Upgrade { level: 4, error: 6 },
        &mut mock_search,
    );
    r.rounds as u64
}

/// An upgrade and an audit interrupted by a restart resume from the stored driver state
/// (the upgrade's marked positions and pass, the audit's phase) and finish with the serial
/// programs' book.
#[test]
fn upgrade_and_audit_resume_after_a_restart() {
    let audit = Selector::Audit {
        level: 5,
        queue: false,
    };
    let want = serial_book(
        2,
        10,
        &[
            operation(deviate24()),
            operation(upgrade4()),
            operation(audit),
        ],
    );
    let mut f = fixture(2, 10, ServiceConfig::default());
    f.c.start_expansion(deviate24(), 0).unwrap();
    drive(&f.c, 7);
    for sel in [upgrade4(), audit] {
        f.c.start_expansion(sel, 0).unwrap();
        let id = identity();
        let w = f.c.register(&id, "t", 1).unwrap();
        for _ in 0..2 {
            let jobs = f.c.lease(&id, &w, 2).unwrap();
            let r: Vec<_> = jobs.iter().map(mock_result).collect();
            f.c.submit(&id, &w, &r).unwrap();
            f.c.settle().unwrap();
        }
        assert_eq!(f.c.status().state, State::Running, "{sel} still running");
        f = reopen(f, ServiceConfig::default());
        assert_eq!(f.c.status().expansion, sel.to_string());
        drive(&f.c, 3);
        assert_eq!(f.c.status().state, State::Done);
    }
    assert_same_book(&f.c, &want);
}

/// Idle workers are told to wait longer the more of them there are, so that together they
/// poll about `IDLE_POLLS_PER_SECOND` times a second, within [retry_after, MAX_RETRY_AFTER];
/// a worker polls once for all its threads, and threads holding jobs do not count.
#[test]
fn idle_workers_are_spread_out_as_the_farm_grows() {
    let f = fixture(2, 10, ServiceConfig::default());
    let base = f.c.config().retry_after;
    assert_eq!(f.c.retry_after(), base);
    let first = f.c.register(&identity(), "w0", 2).unwrap();
    assert_eq!(
        f.c.retry_after(),
        base,
        "one idle worker polls at the base rate"
    );
    for i in 1..1_500 {
        f.c.register(&identity(), &format!("w{i}"), 2).unwrap();
    }
    // 1,500 idle workers (3,000 idle threads): 1.5 s apart each.
    assert_eq!(f.c.retry_after(), Duration::from_millis(1_500));
    // Few big workers poll as often as few small ones.
    let g = fixture(2, 10, ServiceConfig::default());
    for i in 0..16 {
        g.c.register(&identity(), &format!("big{i}"), 64).unwrap();
    }
    assert_eq!(g.c.retry_after(), base);
    f.c.start_expansion(
        Selector::Deviate {
            relative: 2,
            absolute: 4,
        },
        0,
    )
    .unwrap();
    f.c.settle().unwrap();
    let held = f.c.lease(&identity(), &first, 2).unwrap().len();
    assert!(held > 0);
    // Idle threads over the mean threads per worker (2), rounded up.
    let want = Duration::from_secs_f64((3_000 - held).div_ceil(2) as f64 / IDLE_POLLS_PER_SECOND);
    assert_eq!(f.c.retry_after(), want);
    for i in 1_500..12_000 {
        f.c.register(&identity(), &format!("w{i}"), 2).unwrap();
    }
    assert_eq!(f.c.retry_after(), MAX_RETRY_AFTER);
}
