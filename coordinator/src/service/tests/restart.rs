//! Kills, restarts and checkpoints: nothing acknowledged is lost, nothing is searched twice.

use super::*;

#[test]
fn restart_requeues_in_flight_and_keeps_accepted_results() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
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
            leaf: LeafResult {
                mv: Move::None,
                score: 0,
                depth: 0,
                selectivity: 5,
                exact: false,
                nodes: 0,
                elapsed: Duration::ZERO,
            },
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
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
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
    f.c.start(deviate24()).unwrap();
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
    release(std::mem::ManuallyDrop::into_inner(c));
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
    let want = serial_book(2, 10, &[deviate24()]);
    assert_same_book(&c, &want);
    // A clean stop checkpoints: the store holds the finished book.
    c.flush().unwrap();
    release(c);
    let stored = Store::open(dir.path()).unwrap().load(dir.path()).unwrap();
    assert_eq!(stored.book.len(), want.len());
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
    f.c.start(deviate24()).unwrap();
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
    release(std::mem::ManuallyDrop::into_inner(c));
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
    f.c.start(deviate24()).unwrap();
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
    f.c.start(deviate24()).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    // A trusted (loopback) worker tells plausible lies (the score's sign flipped and moved by
    // 2) on its first searches: they reach the book.
    let mut lies = Vec::new();
    answer_until_done(&f.c, &w, 4, |jobs| {
        let mut r = mock_results(jobs);
        if lies.len() < 6 {
            r[0].leaf.score = 2 - r[0].leaf.score;
            lies.push(request_of(&jobs[0]));
        }
        r
    });
    let want = serial_book(2, 10, &[deviate24()]);
    let (_, lied) = f.c.snapshot();
    assert!(
        !crate::sim::same_positions(lied, &want),
        "the lies did not change the book"
    );
    // The kill: the finished (dishonest) book is checkpointed; then what catching the liar
    // stores (its result removed, a rollback requested) is durable, and nothing else ran.
    f.c.flush().unwrap();
    let Fixture { dir, clock, c } = f;
    release(std::mem::ManuallyDrop::into_inner(c));
    store_a_rollback(dir.path(), &lies);
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
    release(c);
    let loaded = Store::open(dir.path()).unwrap().load(dir.path()).unwrap();
    assert_eq!(loaded.rollbacks, (1, 1));
}

/// The same kill after an asynchronous program finished: the dropped requests are not kept in
/// memory across the restart, but the store's tombstones name them with their results, so the
/// next start retracts their leaves in the re-opened program instead of replaying. A second
/// kill in the repair leaves cleared leaves in the stored book and the request uncovered: the
/// next start re-opens the program again, which repairs them first. The build ends with
/// properties 1–3, and the repair's checkpoint covers the request.
#[test]
fn a_rollback_requested_before_a_kill_after_an_asynchronous_program_is_retracted_at_the_next_start()
{
    let cfg = ServiceConfig::default();
    let f = fixture(2, 10, cfg.clone());
    let program = Program {
        schedule: bookfarm_book::program::Schedule::Async,
        ..deviate24()
    };
    f.c.start(program.clone()).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let mut lies = Vec::new();
    answer_until_done(&f.c, &w, 4, |jobs| {
        let mut r = mock_results(jobs);
        if lies.len() < 6 {
            r[0].leaf.score = 2 - r[0].leaf.score;
            lies.push(request_of(&jobs[0]));
        }
        r
    });
    assert_eq!(f.c.status().state, State::Done);
    assert!(
        !unvalidated_leaves(&f.c).is_empty(),
        "the lies did not reach the book"
    );
    f.c.flush().unwrap();
    let Fixture { dir, clock, c } = f;
    release(std::mem::ManuallyDrop::into_inner(c));
    store_a_rollback(dir.path(), &lies);
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg.clone(), clock.clone()).unwrap();
    c.settle().unwrap();
    // Killed again in the repair: its cleared leaves are checkpointed, its plans are not, and
    // the rollback is not covered yet. The next start repairs the holes.
    let holes = |c: &Coordinator| {
        let book = c.book_snapshot();
        book.ids()
            .filter(|&id| {
                book.leaf(id) == bookfarm_book::model::BAD_LINK
                    && bookfarm_book::grow::leaf_request(&book.position(id)).is_some()
            })
            .count()
    };
    assert!(holes(&c) > 0, "the retraction cleared leaves");
    assert_eq!(c.status().validation.retractions, 1);
    c.flush().unwrap();
    release(c);
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg.clone(), clock.clone()).unwrap();
    let w = c.register(&id, "t2", 1).unwrap();
    answer_until_done(&c, &w, 4, mock_results);
    c.settle().unwrap();
    let s = c.status();
    assert_eq!(s.state, State::Done);
    assert_eq!(holes(&c), 0);
    assert_eq!(
        (s.validation.replays, s.validation.retractions),
        (0, 1),
        "{:?}",
        s.validation
    );
    let events = c.events().query(&Default::default()).unwrap().events;
    assert!(
        !events
            .iter()
            .any(|(_, e)| e.kind == crate::events::EventKind::Replay),
        "{events:?}"
    );
    assert_finished_book(&c, &program);
    c.flush().unwrap();
    release(c);
    let loaded = Store::open(dir.path()).unwrap().load(dir.path()).unwrap();
    assert_eq!(loaded.rollbacks, (1, 1));
}

/// What catching a liar stores, written on a stopped coordinator's store: its results removed
/// and rollback 1 requested, durable before the next start.
fn store_a_rollback(dir: &std::path::Path, lies: &[LeafRequest]) {
    let store = Store::open(dir).unwrap();
    let mut b = Batch::default();
    for lie in lies {
        b.remove_result(lie);
    }
    b.put_rollback_requested(1).unwrap();
    store.apply(b).unwrap();
    store.flush().unwrap();
}
