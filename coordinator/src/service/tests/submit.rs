//! Submitted results: hostile ones are refused and change nothing.

use super::*;

#[test]
fn hostile_results_are_rejected_and_change_nothing() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
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
        (changed(good, |l| l.mv = Move::Square(illegal)), &w, |e| {
            matches!(e, CoordinatorError::IllegalMove { .. })
        }),
        (
            changed(good, |l| l.mv = Move::Square(excluded_sq)),
            &w,
            |e| matches!(e, CoordinatorError::IllegalMove { .. }),
        ),
        (changed(good, |l| l.mv = Move::Pass), &w, |e| {
            matches!(e, CoordinatorError::IllegalMove { .. })
        }),
        (changed(good, |l| l.score = 65), &w, |e| {
            matches!(e, CoordinatorError::ScoreOutOfRange { .. })
        }),
        (changed(good, |l| l.score = -100), &w, |e| {
            matches!(e, CoordinatorError::ScoreOutOfRange { .. })
        }),
        (changed(good, |l| (l.score, l.exact) = (3, true)), &w, |e| {
            matches!(e, CoordinatorError::ExactParity { .. })
        }),
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
fn a_result_whose_depth_is_not_the_level_tables_is_refused() {
    let f = fixture(4, 10, ServiceConfig::default());
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let job = f.c.lease(&id, &w, 1).unwrap()[0];
    for (depth, selectivity) in [(3, 5), (4, 0), (60, 5)] {
        let r = changed(mock_result(&job), |l| {
            (l.depth, l.selectivity) = (depth, selectivity)
        });
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

/// Node counts and search times are the worker's word (a result is checked by its move, score,
/// depth and selectivity, and by its replicas): the largest ones the protocol carries are
/// taken without overflowing the validation figures, the contributor's credit or the status.
#[test]
fn the_largest_node_counts_and_search_times_overflow_no_figure() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let mut accepted = 0;
    while accepted < 3 {
        let jobs = f.c.lease(&id, &w, 1).unwrap();
        assert!(!jobs.is_empty(), "the build needs more than 3 searches");
        let r: Vec<JobResult> = jobs
            .iter()
            .map(|j| {
                changed(mock_result(j), |l| {
                    (l.nodes, l.elapsed) = (u64::MAX, Duration::from_micros(u64::MAX));
                })
            })
            .collect();
        accepted += f.c.submit(&id, &w, &r).unwrap().len();
        f.c.settle().unwrap();
    }
    let s = f.c.status();
    assert_eq!(s.validation.used_nodes, u64::MAX);
    let local = s
        .credit
        .iter()
        .find(|c| c.name == crate::service::trust::LOCAL)
        .expect("the local worker's credit");
    assert_eq!(
        (local.nodes, local.cpu),
        (u64::MAX, Duration::from_micros(u64::MAX))
    );
    assert!(s.mean_search.is_some());
}
