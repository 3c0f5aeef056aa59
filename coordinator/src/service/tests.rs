use super::*;
use bookfarm_engine::Square;
use bookfarm_engine::board::BitIter;
use bookfarm_proto::ENGINE_VERSION;

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
        depth: u32::from(job.level),
        selectivity: 5,
        exact: false,
        nodes: 1,
        elapsed: Duration::from_micros(1),
    }
}

pub(crate) fn identity() -> Identity {
    Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "00".into(),
    }
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

/// Run the mock engine until the expansion is done; returns the number of accepted results.
fn drive(c: &Coordinator, slots: u32) -> u64 {
    let id = identity();
    let w = c.register(&id, "t", 1).unwrap();
    let mut accepted = 0;
    for _ in 0..100_000 {
        let jobs = c.lease(&id, &w, slots).unwrap();
        if jobs.is_empty() {
            let s = c.status();
            assert_eq!(s.in_flight, 0);
            if s.queued == 0 {
                break;
            }
            continue;
        }
        let results: Vec<JobResult> = jobs.iter().map(mock_result).collect();
        let acks = c.submit(&id, &w, &results).unwrap();
        accepted += acks.iter().filter(|a| **a == Ack::Accepted).count() as u64;
    }
    accepted
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
    assert!(f.c.verify_negamax());
    assert_matches_book_crate(&f.c);
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
    // The fixed point: selecting again finds nothing to expand.
    let g = f.c.lock();
    let todo = select(&g.index, &g.root, deviate24());
    assert!(todo.is_empty(), "{todo:?}");
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
    assert!(f.c.verify_negamax());
    // Accepted ids are still known: resubmitting one is a harmless duplicate.
    let w2 = f.c.register(&id, "t2", 1).unwrap();
    let dup = JobResult {
        job_id: done_ids[0],
        mv: Move::None,
        score: 0,
        depth: 0,
        selectivity: 5,
        exact: false,
        nodes: 0,
        elapsed: Duration::ZERO,
    };
    assert_eq!(f.c.submit(&id, &w2, &[dup]).unwrap(), vec![Ack::Duplicate]);
    // The old lease of the crashed run is unknown now.
    let stale = mock_result(&leased[0]);
    assert!(matches!(
        f.c.submit(&id, &w2, &[stale]),
        Err(CoordinatorError::UnknownJob(_))
    ));
    drive(&f.c, 5);
    assert_eq!(f.c.status().state, State::Done);
    assert!(f.c.verify_negamax());
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
    // Quarantine survives a restart...
    let f = reopen(f, ServiceConfig::default());
    assert_eq!(f.c.status().quarantined.len(), 1);
    assert_eq!(f.c.status().queued, 0);
    // ...until the operator releases it.
    assert_eq!(f.c.release_quarantined(None).unwrap(), 1);
    assert_eq!(f.c.status().quarantined.len(), 0);
    assert_eq!(f.c.status().queued, 1);
    let f = reopen(f, ServiceConfig::default());
    assert_eq!(f.c.status().quarantined.len(), 0);
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

#[test]
fn leases_are_capped_at_threads_plus_lookahead() {
    // No lookahead, so that the root's expansion (two jobs) exceeds one worker's cap.
    let cfg = ServiceConfig {
        lookahead: 0,
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    f.c.start_expansion(deviate24(), 0).unwrap();
    let id = identity();
    let w = f.c.register(&id, "w", 1).unwrap();
    let root = f.c.lease(&id, &w, 256).unwrap();
    f.c.submit(&id, &w, &[mock_result(&root[0])]).unwrap();
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
    let root = f.c.lease(&id, &w, 1).unwrap();
    f.c.submit(&id, &w, &[mock_result(&root[0])]).unwrap();
    let jobs: Vec<Uuid> =
        f.c.lease(&id, &w, 3)
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
    let n = jobs.len() as u64;
    assert!(
        n >= 2,
        "the root's expansion queues its child and its re-search"
    );
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
