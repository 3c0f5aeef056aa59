//! The asynchronous schedule in the service: the schedule `serve` chooses for a program queued
//! without one, the job table kept equal to the program's needed set by deltas, and the
//! finished book (the serial selection finds nothing, `book link` is a fixed point).

use super::*;
use crate::service::growth::AutoSchedule;
use crate::service::jobs::JobClass;
use crate::store::ProgramState;
use bookfarm_book::program::Schedule;

fn auto(p: Program) -> Program {
    Program {
        schedule: Schedule::Auto,
        ..p
    }
}

fn asynchronous(p: Program) -> Program {
    Program {
        schedule: Schedule::Async,
        ..p
    }
}

/// The finished program `id` as recorded (the schedule it ran on included).
fn recorded(c: &Coordinator, id: u64) -> Program {
    c.programs(true)
        .into_iter()
        .find(|p| p.record.id == id)
        .map(|p| p.record.program)
        .unwrap()
}

/// The serial selection of `program` finds nothing on the coordinator's book (property 1 of
/// an asynchronous book), and `book link` changes nothing.
fn assert_finished(c: &Coordinator, program: &Program) {
    let mut book = c.book_snapshot();
    let left = bookfarm_book::schedule::unfinished(&mut book, program);
    assert!(left.is_empty(), "the serial selection still marks {left:?}");
    assert_linked(c);
}

#[test]
fn the_schedule_is_chosen_from_the_threads_registered_when_the_program_starts() {
    let rule = |threads, async_threads| AutoSchedule {
        threads,
        async_threads,
        options: Default::default(),
    };
    let deviate = auto(deviate24());
    assert_eq!(rule(255, 256).choose(&deviate), Schedule::Serial);
    assert_eq!(rule(256, 256).choose(&deviate), Schedule::Async);
    assert_eq!(
        rule(10_000, 0).choose(&deviate),
        Schedule::Serial,
        "0: never"
    );
    // A program's own schedule stands; programs without passes have no asynchronous form.
    assert_eq!(
        rule(0, 256).choose(&asynchronous(deviate24())),
        Schedule::Async
    );
    assert_eq!(rule(1_000, 1).choose(&deviate24()), Schedule::Serial);
    for op in [
        Operation::New,
        Operation::AddGames { games: vec![] },
        Operation::Audit {
            level: 4,
            queue: false,
        },
    ] {
        assert_eq!(
            rule(1_000, 1).choose(&auto(Program::new(op))),
            Schedule::Serial
        );
    }
    for op in [Operation::Play, Operation::Extend] {
        assert_eq!(
            rule(1_000, 1).choose(&auto(Program::new(op))),
            Schedule::Async
        );
    }
}

#[test]
fn a_program_queued_without_a_schedule_runs_async_on_a_big_farm_and_serial_on_a_small_one() {
    let cfg = ServiceConfig {
        async_threads: 8,
        ..ServiceConfig::default()
    };
    // Small farm: one thread when the program starts. Serial: the serial build's book.
    let f = fixture(2, 10, cfg.clone());
    let q = f.c.start(auto(deviate24())).unwrap();
    drive(&f.c, 2);
    assert_eq!(recorded(&f.c, q.program).schedule, Schedule::Serial);
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
    // Big farm: 8 threads registered (a worker that never leases, and the driving one).
    let f = fixture(2, 10, cfg.clone());
    f.c.register(&identity(), "big", 7).unwrap();
    let q = f.c.start(auto(deviate24())).unwrap();
    drive(&f.c, 2);
    let p = recorded(&f.c, q.program);
    assert_eq!(p.schedule, Schedule::Async);
    let listed = f.c.programs(true);
    let view = listed.iter().find(|v| v.record.id == q.program).unwrap();
    assert!(view.record.report.contains("(asynchronous)"), "{view:?}");
    assert_finished(&f.c, &p);
    // The choice is recorded: a restart keeps it.
    let f = reopen(f, cfg);
    assert_eq!(recorded(&f.c, q.program).schedule, Schedule::Async);
}

#[test]
fn an_explicit_async_schedule_is_refused_for_programs_without_passes() {
    let f = fixture(2, 10, ServiceConfig::default());
    let err =
        f.c.start(asynchronous(Program::new(Operation::AddGames {
            games: vec![vec![Move::Square(Square::parse("f5").unwrap())]],
        })))
        .unwrap_err();
    assert!(
        matches!(err, CoordinatorError::InvalidArgument(_)),
        "{err:?}"
    );
}

/// Round work in the job table: every round job's request (queued or leased).
fn round_work(c: &Coordinator) -> HashSet<LeafRequest> {
    c.jobs()
        .jobs
        .values()
        .filter(|j| j.class == JobClass::Round)
        .map(|j| j.key)
        .collect()
}

#[test]
fn the_job_table_follows_the_asynchronous_programs_needed_set_by_deltas() {
    let f = fixture(2, 10, ServiceConfig::default());
    drive(&f.c, 1);
    let q = f.c.start(asynchronous(deviate24())).unwrap();
    let id = identity();
    let ws: Vec<Uuid> = (0..3)
        .map(|i| f.c.register(&id, &format!("t{i}"), 1).unwrap())
        .collect();
    let mut held: Vec<Vec<Job>> = vec![Vec::new(); ws.len()];
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let (mut checked, mut with_eta) = (0, 0);
    for round in 0..100_000usize {
        let k = round % ws.len();
        held[k].extend(f.c.lease(&id, &ws[k], 3).unwrap());
        f.c.settle().unwrap();
        // After a growth run, round work is exactly what the program waits for.
        let needed: Option<HashSet<LeafRequest>> =
            f.c.growth()
                .async_needed()
                .map(|n| n.into_iter().map(|(r, _)| r).collect());
        if let Some(needed) = needed {
            assert_eq!(round_work(&f.c), needed, "after {round} rounds");
            checked += 1;
            // Status says where the program stands, and from its first expansion when it ends.
            let (running, _) = f.c.current_programs();
            let running = running.expect("the running program");
            assert!(
                running.progress.starts_with("asynchronous: "),
                "{}",
                running.progress
            );
            let fig = running.figures;
            assert_eq!(fig.unit, "expansions");
            assert!(fig.done <= fig.total, "{fig:?}");
            if fig.done > 0 {
                let eta = fig.eta.expect("an estimate after the first expansion");
                assert!(eta.low <= eta.high, "{eta:?}");
                with_eta += 1;
            }
        }
        if held.iter().all(Vec::is_empty) {
            if f.c.status().queued == 0 {
                break;
            }
            continue;
        }
        if held[k].is_empty() {
            continue;
        }
        // Answer a part of what this worker holds, of a scrambled size.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = 1 + (rng as usize) % held[k].len();
        let take: Vec<Job> = held[k].drain(..n).collect();
        let results: Vec<JobResult> = take.iter().map(mock_result).collect();
        f.c.submit(&id, &ws[k], &results).unwrap();
        // The estimate's time per expansion is on the service clock.
        f.clock.advance(Duration::from_millis(100));
    }
    f.c.settle().unwrap();
    assert!(
        checked > 10 && with_eta > 0,
        "the program ran asynchronously ({checked} checks, {with_eta} with an estimate)"
    );
    assert!(
        f.c.growth().async_needed().is_none(),
        "the program finished"
    );
    assert!(round_work(&f.c).is_empty());
    assert_finished(&f.c, &recorded(&f.c, q.program));
}

/// An analysis queued while an asynchronous program runs is searched at once, as on the
/// serial schedule: its levels are leased before the program's own searches (first come,
/// first served among analyses), each shows as it lands and is charged to its analysis; then
/// the round work is the program's needed set again, and the program goes on to its finished
/// book.
#[test]
fn an_analysis_goes_ahead_of_an_asynchronous_programs_searches() {
    use bookfarm_book::searches::{analysis_levels, analysis_request};
    let f = fixture_without_speculation();
    drive(&f.c, 1);
    let searches_before = f.c.counters().completed;
    let q = f.c.start(asynchronous(deviate24())).unwrap();
    let id = identity();
    let w = f.c.register(&id, "one", 1).unwrap();
    let answer = |jobs: &[Job]| {
        f.c.submit(&id, &w, &jobs.iter().map(mock_result).collect::<Vec<_>>())
            .unwrap();
        f.c.settle().unwrap();
    };
    for _ in 0..3 {
        answer(&f.c.lease(&id, &w, 1).unwrap());
    }
    assert!(
        f.c.growth().async_needed().is_some(),
        "running asynchronously"
    );
    let board = bookfarm_engine::formats::transcript::board_after("f5d6c3d3").unwrap();
    let levels = analysis_levels(&board, 3, 6);
    let analysis =
        f.c.start(Program::new(Operation::Analyze {
            board,
            from: 3,
            up_to: 6,
        }))
        .unwrap();
    assert_eq!(analysis.position, 2, "queued behind the running program");
    let other = bookfarm_engine::formats::transcript::board_after("f5f6e6").unwrap();
    let second =
        f.c.start(Program::new(Operation::Analyze {
            board: other,
            from: 3,
            up_to: 3,
        }))
        .unwrap();
    let mut expected: Vec<(Board, u8)> = levels
        .iter()
        .map(|&l| (analysis_request(&board, l).board, l))
        .collect();
    expected.push((analysis_request(&other, 3).board, 3));
    for (i, want) in expected.iter().enumerate() {
        let jobs = f.c.lease(&id, &w, 1).unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.board, j.level)).collect::<Vec<_>>(),
            [*want],
            "search {i}: the analyses' levels first, in queue order"
        );
        answer(&jobs);
        if i < levels.len() {
            let shown: Vec<u8> = f.c.analysis(&board).iter().map(|a| a.level).collect();
            assert_eq!(shown, levels[..=i]);
        }
    }
    // Both still queued behind the running program, charged for their searches; the round
    // work is the program's own again.
    let listed = f.c.programs(false);
    assert_eq!(
        listed
            .iter()
            .map(|p| (p.record.id, p.record.state, p.figures.cost.searches))
            .collect::<Vec<_>>(),
        [
            (q.program, ProgramState::Running, 3),
            (analysis.program, ProgramState::Queued, levels.len() as u64),
            (second.program, ProgramState::Queued, 1),
        ]
    );
    let needed: HashSet<LeafRequest> =
        f.c.growth()
            .async_needed()
            .expect("still running")
            .into_iter()
            .map(|(r, _)| r)
            .collect();
    assert_eq!(round_work(&f.c), needed);
    drive(&f.c, 2);
    let ended = f.c.programs(true);
    let cost = |id: u64| {
        let p = ended.iter().find(|p| p.record.id == id).unwrap();
        assert_eq!(p.record.state, ProgramState::Done, "#{id}");
        p.figures.cost.searches
    };
    let all = f.c.counters().completed - searches_before;
    assert_eq!(cost(analysis.program), levels.len() as u64);
    assert_eq!(cost(second.program), 1);
    assert_eq!(cost(q.program), all - levels.len() as u64 - 1);
    assert_finished(&f.c, &recorded(&f.c, q.program));
}
