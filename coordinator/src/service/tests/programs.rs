//! The program queue: numbers and states, cancelling (a queued program, the running one),
//! `--replace`, restarts, and the replay of a program cancelled while it ran.

use super::*;
use crate::store::ProgramState;

fn states(c: &Coordinator, finished: bool) -> Vec<(u64, ProgramState)> {
    c.programs(finished)
        .iter()
        .map(|p| (p.record.id, p.record.state))
        .collect()
}

/// Program number `id`, finished or not.
fn program(c: &Coordinator, id: u64) -> ProgramView {
    c.programs(true)
        .into_iter()
        .find(|p| p.record.id == id)
        .unwrap_or_else(|| panic!("no program #{id}"))
}

fn play() -> Program {
    Program::new(Operation::Play)
}

fn extend() -> Program {
    Program::new(Operation::Extend)
}

/// Lease and answer `rounds` times (at most `slots` jobs each) with the mock engine, for a
/// worker registered as `name`.
fn answer_rounds(c: &Coordinator, name: &str, rounds: usize, slots: u32) {
    let id = identity();
    let w = c.register(&id, name, 1).unwrap();
    for _ in 0..rounds {
        let jobs = c.lease(&id, &w, slots).unwrap();
        if jobs.is_empty() {
            break;
        }
        c.submit(&id, &w, &mock_results(&jobs)).unwrap();
        c.settle().unwrap();
    }
}

/// The book depth of the queue tests: deviate 2 4, then extend, each still adds positions (1 ->
/// 112 -> 1,564 in the serial book); at depth 10 extend adds 63,926 and these tests took 30-96 s
/// each on 2 shared cores without telling more about the queue.
const QUEUE_DEPTH: u8 = 7;

#[test]
fn programs_run_in_queue_order_and_a_queued_one_can_be_cancelled() {
    let f = fixture(2, QUEUE_DEPTH, ServiceConfig::default());
    // Opening a new book queued its `book new` as program #1.
    assert_eq!(states(&f.c, true), [(1, ProgramState::Running)]);
    let q = f.c.start(deviate24()).unwrap();
    assert_eq!((q.program, q.position), (2, 2));
    assert!(q.cancelled.is_empty());
    assert_eq!(f.c.start(play()).unwrap().program, 3);
    assert_eq!(f.c.start(extend()).unwrap().program, 4);
    assert_eq!(
        states(&f.c, false),
        [
            (1, ProgramState::Running),
            (2, ProgramState::Queued),
            (3, ProgramState::Queued),
            (4, ProgramState::Queued)
        ]
    );
    let cancelled = f.c.cancel(3).unwrap();
    assert_eq!(cancelled.state, ProgramState::Cancelled);
    assert_eq!(cancelled.report, "cancelled before it started");
    assert!(matches!(
        f.c.cancel(3),
        Err(CoordinatorError::FailedPrecondition(_))
    ));
    assert!(matches!(
        f.c.cancel(99),
        Err(CoordinatorError::UnknownProgram(99))
    ));
    drive(&f.c, 4);
    assert_eq!(f.c.status().state, State::Done);
    // The queue is empty; the finished programs are listed, the last ended first (#3 was
    // cancelled before #1 ended).
    assert!(f.c.programs(false).is_empty());
    assert_eq!(
        states(&f.c, true),
        [
            (4, ProgramState::Done),
            (2, ProgramState::Done),
            (1, ProgramState::Done),
            (3, ProgramState::Cancelled)
        ]
    );
    let deviate = program(&f.c, 2);
    assert!(
        deviate.record.report.starts_with("deviate 2 4: "),
        "{deviate:?}"
    );
    assert!(deviate.record.started_ms.is_some() && deviate.record.finished_ms.is_some());
    // The cancelled program never ran: the book is the serial book of the others.
    assert_same_book(&f.c, &serial_book(2, QUEUE_DEPTH, &[deviate24(), extend()]));
}

#[test]
fn replace_cancels_the_queue_and_the_running_program() {
    let f = fixture(2, QUEUE_DEPTH, ServiceConfig::default());
    drive(&f.c, 4);
    f.c.start(deviate24()).unwrap();
    f.c.start(play()).unwrap();
    answer_rounds(&f.c, "t", 3, 2);
    let running = f.c.programs(false);
    assert_eq!(running[0].record.state, ProgramState::Running);
    assert!(!running[0].progress.is_empty());
    let q = f.c.replace(extend()).unwrap();
    assert_eq!(q.cancelled, [2, 3]);
    assert_eq!((q.program, q.position), (4, 1));
    let listed = states(&f.c, true);
    assert_eq!(
        &listed[..3],
        [
            (4, ProgramState::Running),
            (3, ProgramState::Cancelled),
            (2, ProgramState::Cancelled)
        ]
    );
    let deviate = program(&f.c, 2);
    assert!(
        deviate.record.report.starts_with("cancelled after "),
        "{:?}",
        deviate.record.report
    );
    drive(&f.c, 4);
    assert_eq!(f.c.status().state, State::Done);
}

#[test]
fn a_start_request_roots_replaces_or_stores_as_it_names() {
    let f = fixture(2, QUEUE_DEPTH, ServiceConfig::default());
    drive(&f.c, 4);
    // `from` is the program's root.
    let (q, stored) = f.c.start_request(play(), "f5d6", false, false).unwrap();
    assert!(stored.is_none());
    let p = program(&f.c, q.program);
    assert_eq!(p.record.program.root.len(), 2, "{:?}", p.record.program);
    // A line that is not legal queues nothing.
    let before = states(&f.c, true).len();
    let e = f.c.start_request(play(), "f5f5", false, false).unwrap_err();
    assert!(matches!(e, CoordinatorError::InvalidArgument(_)), "{e}");
    // `--replace` never applies to an analysis's store, and such a request queues nothing.
    let board = bookfarm_engine::formats::transcript::board_after("f5d6").unwrap();
    let analysis = Program::new(Operation::Analyze {
        board,
        from: 2,
        up_to: 4,
    });
    let e =
        f.c.start_request(analysis.clone(), "f5d6", true, true)
            .unwrap_err();
    assert!(
        e.to_string()
            .contains("--replace does not apply to an analysis"),
        "{e}"
    );
    assert_eq!(states(&f.c, true).len(), before);
    // With `store` the analysis is queued with its store program; `replace` cancels the queue.
    let (a, stored) = f.c.start_request(analysis, "f5d6", false, true).unwrap();
    assert_eq!(stored.map(|s| s.program), Some(a.program + 1));
    let r = f.c.start_request(extend(), "", true, false).unwrap().0;
    assert!(r.cancelled.contains(&q.program), "{:?}", r.cancelled);
}

#[test]
fn the_queue_survives_a_restart() {
    let f = fixture(2, QUEUE_DEPTH, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
    f.c.start(play()).unwrap();
    f.c.start(extend()).unwrap();
    f.c.cancel(3).unwrap();
    answer_rounds(&f.c, "t", 2, 2);
    let before = f.c.programs(true);
    let f = reopen(f, ServiceConfig::default());
    let after = f.c.programs(true);
    let records = |v: &[ProgramView]| v.iter().map(|p| p.record.clone()).collect::<Vec<_>>();
    assert_eq!(records(&after), records(&before));
    // Numbers go on after the restart.
    assert_eq!(f.c.start(play()).unwrap().program, 5);
    drive(&f.c, 4);
    assert_same_book(
        &f.c,
        &serial_book(2, QUEUE_DEPTH, &[deviate24(), extend(), play()]),
    );
}

/// A program cancelled while it ran keeps what it added, and a replay (a caught liar's results
/// dropped) cuts it at the same point: the replayed book equals the book before the replay.
#[test]
fn a_program_cancelled_while_it_ran_is_replayed_as_it_was_cut() {
    let cfg = ServiceConfig::default();
    let f = fixture(2, 10, cfg.clone());
    drive(&f.c, 4);
    let start = f.c.status().positions;
    f.c.start(deviate24()).unwrap();
    answer_rounds(&f.c, "t", 12, 3);
    let cut = f.c.cancel(2).unwrap();
    assert_eq!(cut.state, ProgramState::Cancelled);
    let kept = f.c.status().positions;
    assert!(
        kept > start,
        "the cut deviate added nothing ({start} positions)"
    );
    f.c.start(play()).unwrap();
    drive(&f.c, 4);
    assert_eq!(f.c.status().state, State::Done);
    let (_, want) = f.c.snapshot();
    assert!(want.len() as u64 > kept);
    // A rollback requested (as catching a liar stores it) and a restart: the start replays
    // every logged program from the base book.
    let Fixture { dir, clock, c } = f;
    close(std::mem::ManuallyDrop::into_inner(c));
    {
        let store = Store::open(dir.path()).unwrap();
        let mut b = Batch::default();
        b.put_rollback_requested(1).unwrap();
        store.apply(b).unwrap();
        store.flush().unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg, clock).unwrap();
    drive(&c, 4);
    assert_eq!(c.status().state, State::Done);
    let (_, replayed) = c.snapshot();
    assert!(crate::sim::same_positions(replayed, &positions_book(&want)));
    // The programs' records are untouched by the replay.
    assert_eq!(
        states(&c, true),
        [
            (3, ProgramState::Done),
            (2, ProgramState::Cancelled),
            (1, ProgramState::Done)
        ]
    );
}

/// A book holding `positions`.
fn positions_book(positions: &[Position]) -> bookfarm_book::MemBook {
    let mut book = bookfarm_book::MemBook::new(bookfarm_book::BookHeader::new(2, 10));
    for p in positions {
        book.put_position(p);
    }
    book
}

#[test]
fn a_program_lists_its_progress_and_cost_and_keeps_its_cost_when_it_ends() {
    let f = fixture(2, 10, ServiceConfig::default());
    drive(&f.c, 4);
    let before = f.c.status().positions;
    let searches_before = f.c.counters().completed;
    assert_eq!(f.c.start(deviate24()).unwrap().program, 2);
    answer_rounds(&f.c, "t", 2, 2);
    // Running: the current pass's positions, and what was charged to it so far (the mock
    // engine reports 1 µs per search).
    let running = f.c.programs(false).remove(0);
    assert_eq!(running.record.state, ProgramState::Running);
    let fig = running.figures;
    assert_eq!(fig.unit, "positions");
    assert!(fig.total > 0 && fig.done <= fig.total, "{fig:?}");
    assert!(fig.cost.searches > 0, "{fig:?}");
    assert_eq!(fig.cost.cpu_us, fig.cost.searches);
    let status = f.c.status();
    assert_eq!(status.program.as_ref().map(|p| p.record.id), Some(2));
    assert_eq!(status.last_program.as_ref().map(|p| p.record.id), Some(1));
    // To its end, answering every lease before the next growth run: a search that lands after
    // its program ended (leased before, e.g. speculation) counts in the farm's figures and in
    // no program's cost, so a worker that still held leases then would not add up below.
    answer_rounds(&f.c, "t", usize::MAX, 4);
    // Ended: its cost in all, the same as its program_done event's.
    let done = program(&f.c, 2);
    assert_eq!(done.record.state, ProgramState::Done);
    let cost = done.figures.cost;
    assert_eq!(cost.searches, f.c.counters().completed - searches_before);
    assert_eq!(cost.positions, f.c.status().positions - before);
    assert!(cost.searches > fig.cost.searches, "{cost:?}");
    let page =
        f.c.events()
            .query(&crate::events::EventQuery {
                kinds: [crate::events::EventKind::ProgramDone].into(),
                text: String::new(),
                after: 0,
                before: 0,
                limit: 0,
            })
            .unwrap();
    let (_, e) = &page.events[0];
    assert_eq!(e.program, 2);
    assert_eq!(e.cost, Some(cost));
    let status = f.c.status();
    assert!(status.program.is_none());
    assert_eq!(
        status.last_program.map(|p| (p.record.id, p.figures.cost)),
        Some((2, cost))
    );
}

/// An OBF file of the `n` first distinct positions two plies or more from the start (breadth
/// first), Black or White to move as the plies say.
fn search_file(n: usize) -> String {
    use bookfarm_engine::formats::obf::ObfPosition;
    let mut seen = HashSet::new();
    let mut level = vec![(Board::start(), true)];
    let mut lines = Vec::new();
    for ply in 0.. {
        let mut next = Vec::new();
        for (b, black) in &level {
            for sq in BitIter(b.moves()) {
                let child = b.play(sq).unwrap();
                if seen.insert(child) {
                    next.push((child, !black));
                }
            }
        }
        level = next;
        if ply < 1 {
            continue;
        }
        for (board, black) in &level {
            if lines.len() == n {
                return lines.concat();
            }
            let p = ObfPosition {
                board: *board,
                black_to_move: *black,
                scores: Vec::new(),
                best_score: None,
                comment: None,
            };
            lines.push(p.to_obf_line() + "\n");
        }
    }
    unreachable!()
}

#[test]
fn search_and_analysis_programs_list_their_searches_and_cost() {
    use bookfarm_book::searches::{SearchSet, analysis_levels};
    let f = fixture(2, 10, ServiceConfig::default());
    drive(&f.c, 4);
    let positions = SearchSet::parse(&search_file(40), 1000).unwrap();
    let total = positions.requests(5).len() as u64;
    assert_eq!(total, 40);
    let searches_before = f.c.counters().completed;
    assert_eq!(
        f.c.start(Program::new(Operation::Search {
            positions,
            level: 5
        }))
        .unwrap()
        .program,
        2
    );
    for _ in 0..3 {
        // The finish estimate is a pace on the wall clock: let it move between results.
        std::thread::sleep(Duration::from_millis(2));
        answer_rounds(&f.c, "t", 1, 4);
    }
    // Running: the searches with a result of all it asks, what was charged to it so far, and
    // a finish estimate from its pace (12 results landed, more than the 8 it needs).
    let running = f.c.programs(false).remove(0);
    assert_eq!(running.record.state, ProgramState::Running);
    let fig = running.figures;
    assert_eq!((fig.unit, fig.total), ("searches", total), "{fig:?}");
    assert!(fig.done >= 4 && fig.done < total, "{fig:?}");
    assert_eq!(fig.cost.searches, fig.done, "{fig:?}");
    assert_eq!(fig.cost.cpu_us, fig.cost.searches);
    let eta = fig.eta.expect("an estimate");
    assert!(eta.low <= eta.high, "{eta:?}");
    let status = f.c.status();
    assert_eq!(
        status
            .program
            .as_ref()
            .map(|p| (p.record.id, p.figures.done)),
        Some((2, fig.done))
    );
    drive(&f.c, 4);
    let done = program(&f.c, 2);
    assert_eq!(done.record.state, ProgramState::Done);
    assert_eq!(done.figures.cost.searches, total);
    assert_eq!(
        f.c.counters().completed - searches_before,
        total,
        "each position searched once"
    );
    assert_eq!(done.figures.cost.positions, 0, "the book is unchanged");

    // An analysis: one search per distinct level, the lowest first (a worker with one free
    // thread takes them one at a time).
    let board = bookfarm_engine::formats::transcript::board_after("f5d6c3d3").unwrap();
    let levels = analysis_levels(&board, 2, 6).len() as u64;
    assert!(levels > 2);
    assert_eq!(
        f.c.start(Program::new(Operation::Analyze {
            board,
            from: 2,
            up_to: 6
        }))
        .unwrap()
        .program,
        3
    );
    let id = identity();
    let w = f.c.register(&id, "a", 1).unwrap();
    for landed in 1..levels {
        let jobs = f.c.lease(&id, &w, 1).unwrap();
        f.c.submit(&id, &w, &mock_results(&jobs)).unwrap();
        f.c.settle().unwrap();
        let fig = f.c.programs(false).remove(0).figures;
        assert_eq!(
            (fig.unit, fig.done, fig.total, fig.cost.searches),
            ("searches", landed, levels, landed)
        );
        assert_eq!(fig.eta, None, "too few landed for a pace");
    }
    drive(&f.c, 4);
    let done = program(&f.c, 3);
    assert_eq!(
        (done.record.state, done.figures.cost.searches),
        (ProgramState::Done, levels)
    );
}

/// An analysis's levels are round work, lowest first, not one at a time: a worker with four
/// free threads leases the four lowest levels in one lease (searched side by side), a
/// one-thread worker then the next; each level shows as it lands, whatever the order. With
/// speculation off, so that the lease owes nothing to guesses.
#[test]
fn a_multi_slot_worker_leases_several_levels_of_an_analysis_at_once() {
    use bookfarm_book::searches::{analysis_levels, analysis_request};
    let f = fixture_without_speculation();
    drive(&f.c, 4);
    let board = bookfarm_engine::formats::transcript::board_after("f5d6c3d3").unwrap();
    let levels = analysis_levels(&board, 2, 10);
    assert!(levels.len() >= 6, "{levels:?}");
    let queued =
        f.c.start(Program::new(Operation::Analyze {
            board,
            from: 2,
            up_to: 10,
        }))
        .unwrap();
    let id = identity();
    let four = f.c.register(&id, "four", 4).unwrap();
    let one = f.c.register(&id, "one", 1).unwrap();
    let jobs = f.c.lease(&id, &four, 4).unwrap();
    let target = analysis_request(&board, 2).board;
    assert!(
        jobs.iter().all(|j| j.board == target && j.excluded == 0),
        "{jobs:?}"
    );
    let leased: Vec<u8> = jobs.iter().map(|j| j.level).collect();
    assert_eq!(leased, levels[..4]);
    let next = f.c.lease(&id, &one, 1).unwrap();
    assert_eq!(
        next.iter().map(|j| j.level).collect::<Vec<_>>(),
        levels[4..5]
    );
    // The second level lands first: it shows alone.
    f.c.submit(&id, &four, &mock_results(&jobs[1..2])).unwrap();
    f.c.settle().unwrap();
    let shown: Vec<u8> = f.c.analysis(&board).iter().map(|a| a.level).collect();
    assert_eq!(shown, levels[1..2]);
    f.c.submit(&id, &four, &mock_results(&jobs[..1])).unwrap();
    f.c.submit(&id, &four, &mock_results(&jobs[2..])).unwrap();
    f.c.submit(&id, &one, &mock_results(&next)).unwrap();
    f.c.settle().unwrap();
    let shown: Vec<u8> = f.c.analysis(&board).iter().map(|a| a.level).collect();
    assert_eq!(shown, levels[..5]);
    drive(&f.c, 4);
    let done = program(&f.c, queued.program);
    assert_eq!(
        (done.record.state, done.figures.cost.searches),
        (ProgramState::Done, levels.len() as u64),
        "each level searched once"
    );
}

/// An analysis queued while a long program runs is searched at once: its levels are leased
/// before the running program's searches (which wait; the program keeps running), each shows
/// as it lands, and the analysis ends as soon as the program does. The book is the serial
/// book of the program alone.
#[test]
fn an_analysis_is_searched_before_the_running_programs_searches() {
    use bookfarm_book::searches::{analysis_levels, analysis_request};
    let f = fixture_without_speculation();
    drive(&f.c, 4);
    let searches_before = f.c.counters().completed;
    let deviate = f.c.start(deviate24()).unwrap();
    let id = identity();
    let w = f.c.register(&id, "one", 1).unwrap();
    // The deviate runs: answer a few of its searches.
    for _ in 0..3 {
        let jobs = f.c.lease(&id, &w, 1).unwrap();
        f.c.submit(&id, &w, &mock_results(&jobs)).unwrap();
        f.c.settle().unwrap();
    }
    let deviate_cost = f.c.programs(false)[0].figures.cost;
    assert_eq!(deviate_cost.searches, 3);
    let board = bookfarm_engine::formats::transcript::board_after("f5d6c3d3").unwrap();
    let levels = analysis_levels(&board, 3, 6);
    let target = analysis_request(&board, 3).board;
    let analysis =
        f.c.start(Program::new(Operation::Analyze {
            board,
            from: 3,
            up_to: 6,
        }))
        .unwrap();
    assert_eq!(analysis.position, 2, "queued behind the running program");
    for (i, level) in levels.iter().enumerate() {
        let jobs = f.c.lease(&id, &w, 1).unwrap();
        assert_eq!(
            jobs.iter()
                .map(|j| (j.board, j.excluded, j.level))
                .collect::<Vec<_>>(),
            [(target, 0, *level)],
            "the analysis's next level first"
        );
        f.c.submit(&id, &w, &mock_results(&jobs)).unwrap();
        f.c.settle().unwrap();
        let shown: Vec<u8> = f.c.analysis(&board).iter().map(|a| a.level).collect();
        assert_eq!(shown, levels[..=i]);
        // Listed queued, with the levels searched so far, and charged for them (the mock
        // engine reports 1 µs per search); the running deviate is not.
        let list = f.c.programs(false);
        let fig = list[1].figures;
        assert_eq!(
            (fig.unit, fig.done, fig.total),
            ("searches", i as u64 + 1, levels.len() as u64)
        );
        assert_eq!(
            (fig.cost.searches, fig.cost.cpu_us),
            (i as u64 + 1, i as u64 + 1)
        );
        assert_eq!(list[0].figures.cost, deviate_cost);
        assert_eq!(
            states(&f.c, false)[..2],
            [
                (deviate.program, ProgramState::Running),
                (analysis.program, ProgramState::Queued)
            ]
        );
    }
    // A second analysis queued behind the first goes before the deviate too.
    let other = bookfarm_engine::formats::transcript::board_after("f5f6e6").unwrap();
    f.c.start(Program::new(Operation::Analyze {
        board: other,
        from: 3,
        up_to: 3,
    }))
    .unwrap();
    let jobs = f.c.lease(&id, &w, 1).unwrap();
    assert_eq!(
        jobs.iter().map(|j| (j.board, j.level)).collect::<Vec<_>>(),
        [(analysis_request(&other, 3).board, 3)]
    );
    f.c.submit(&id, &w, &mock_results(&jobs)).unwrap();
    // Then the deviate's searches again; both end, the analysis searching nothing more.
    let before = f.c.counters().completed;
    drive(&f.c, 4);
    assert_eq!(states(&f.c, false), []);
    let ended = f.c.programs(true);
    let cost = |id: u64| {
        let p = ended.iter().find(|p| p.record.id == id).unwrap();
        assert_eq!(p.record.state, ProgramState::Done);
        p.figures.cost.searches
    };
    assert!(f.c.counters().completed > before, "the deviate went on");
    // Each search is charged to the program it was searched for.
    let all = f.c.counters().completed - searches_before;
    assert_eq!(cost(analysis.program), levels.len() as u64);
    assert_eq!(cost(analysis.program + 1), 1);
    assert_eq!(cost(deviate.program), all - levels.len() as u64 - 1);
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
}

#[test]
fn a_search_program_resumed_after_a_restart_counts_its_stored_results_and_is_charged() {
    use bookfarm_book::searches::SearchSet;
    let f = fixture(2, 10, ServiceConfig::default());
    drive(&f.c, 4);
    let positions = SearchSet::parse(&search_file(40), 1000).unwrap();
    let id =
        f.c.start(Program::new(Operation::Search {
            positions,
            level: 5,
        }))
        .unwrap()
        .program;
    answer_rounds(&f.c, "t", 2, 4);
    let before = f.c.programs(false).remove(0).figures;
    assert!(
        before.done > 0 && before.cost.searches == before.done,
        "{before:?}"
    );
    let f = reopen(f, ServiceConfig::default());
    answer_rounds(&f.c, "t", 1, 4);
    let running = f.c.programs(false).remove(0);
    assert_eq!(
        (running.record.id, running.record.state),
        (id, ProgramState::Running)
    );
    let fig = running.figures;
    // The results searched before the restart count as done; the program is charged the
    // searches after it.
    assert!(fig.cost.searches > 0, "{fig:?}");
    assert_eq!(
        (fig.done, fig.total),
        (before.done + fig.cost.searches, 40),
        "{fig:?}"
    );
}
