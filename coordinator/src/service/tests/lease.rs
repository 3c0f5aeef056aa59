//! Leases: caps, maximum durations, waits, failures and quarantine, expiry, backup leases and
//! the wait suggested to idle workers.

use super::*;

/// A worker that finds no job while other workers hold the searches the driver waits for
/// (growth idle) waits in its lease call for the growth run their results start, and gets the
/// next searches, instead of an empty reply and `retry_after` of sleep.
#[test]
fn an_idle_worker_waits_for_the_searches_in_flight() {
    let f = fixture_without_speculation();
    f.c.start(deviate24()).unwrap();
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
    let jobs = rt.block_on(async {
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
        jobs.unwrap()
    });
    // A long poll that timed out returns no jobs: these came with the results that landed.
    assert!(
        !jobs.is_empty(),
        "the next searches reached the waiting worker"
    );
}

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
    let mallory =
        f.c.register_with(&id, "m", 1, Some("mallory"), true)
            .unwrap();
    let mallory2 =
        f.c.register_with(&id, "m2", 1, Some("mallory"), true)
            .unwrap();
    for w in [&mallory, &mallory2, &mallory] {
        assert!(!report(&f.c, w, false));
    }
    assert_eq!(f.c.status().queued, 1);
    // A second owner's report does.
    let alice = f.c.register_with(&id, "a", 1, Some("alice"), true).unwrap();
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

/// Untrusted owners' reports only release their leases: any number of them, sent on every
/// job, quarantine nothing, and the build goes on; one trusted owner's report then counts as
/// one.
#[test]
fn untrusted_owners_cannot_quarantine_a_search() {
    let f = fixture(2, 10, ServiceConfig::default());
    let id = identity();
    let liars: Vec<Uuid> = ["eve", "mallory", "trudy"]
        .iter()
        .map(|o| f.c.register_owned(&id, o, 1, Some(o)).unwrap())
        .collect();
    for _ in 0..4 {
        for w in &liars {
            assert!(!report(&f.c, w, false));
        }
    }
    let s = f.c.status();
    assert!(s.quarantined.is_empty());
    assert_eq!(s.queued, 1);
    // Trusted owners still can (two owners, the default max_failures).
    let alice = f.c.register_with(&id, "a", 1, Some("alice"), true).unwrap();
    let bob = f.c.register_with(&id, "b", 1, Some("bob"), true).unwrap();
    assert!(!report(&f.c, &alice, false));
    assert!(!report(&f.c, liars.first().unwrap(), false));
    assert!(report(&f.c, &bob, false));
    assert_eq!(f.c.status().quarantined.len(), 1);
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
    f.c.start(deviate24()).unwrap();
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
    f.c.start(deviate24()).unwrap();
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

/// A round search leased far longer than its level's searches take gets a second lease on
/// an idle worker; whichever answers first is accepted, the other's answer is a duplicate,
/// and both leases end.
#[test]
fn long_round_searches_get_one_backup_lease_and_the_first_answer_wins() {
    let cfg = ServiceConfig {
        lookahead: 0,
        backup_after: 4,
        ..without_speculation()
    };
    let f = fixture(2, 10, cfg);
    let id = identity();
    let a = f.c.register(&id, "a", 64).unwrap();
    let held = hold_deviate24(&f, &id, &a);
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
    f.c.start(deviate24()).unwrap();
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
    f.c.start(deviate24()).unwrap();
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
