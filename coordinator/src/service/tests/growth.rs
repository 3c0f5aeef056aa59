//! Growth programs on the cluster: the book they grow equals the serial build, pause and
//! resume, upgrade and audit.

use super::*;

#[test]
fn deviate_builds_a_consistent_book_to_completion() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
    let n = drive(&f.c, 7);
    let s = f.c.status();
    assert_eq!(s.state, State::Done, "{s:?}");
    assert!(s.positions > 20, "{s:?}");
    assert_eq!(s.completed, n);
    assert_matches_book_crate(&f.c);
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
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
    let ops = vec![
        Program::new(Operation::AddGames {
            games: games.clone(),
        }),
        deviate24(),
        Program::new(Operation::enhance(2, 4)),
        Program::new(Operation::Extend),
        Program::new(Operation::Play),
    ];
    let want = serial_book(2, 8, &ops);
    for (workers, slots, seed) in [(1, 1, 0), (3, 4, 2)] {
        let f = fixture(2, 8, ServiceConfig::default());
        for op in &ops {
            f.c.start(op.clone()).unwrap();
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
fn pause_stops_leasing_and_resume_restarts() {
    let f = fixture(2, 10, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
    f.c.set_paused(true).unwrap();
    let id = identity();
    let w = f.c.register(&id, "w", 1).unwrap();
    assert!(f.c.lease(&id, &w, 4).unwrap().is_empty());
    assert_eq!(f.c.status().state, State::Paused);
    f.c.set_paused(false).unwrap();
    assert_eq!(f.c.lease(&id, &w, 4).unwrap().len(), 1);
}

fn upgrade4() -> Program {
    Program::new(Operation::Upgrade {
        params: bookfarm_book::research::Upgrade { level: 4, error: 6 },
    })
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
    let add = Program::new(Operation::AddGames { games });
    let level2 = serial_book(2, 20, std::slice::from_ref(&add));
    let upgraded = serial_book(2, 20, &[add.clone(), upgrade4()]);
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
    let audit = Program::new(Operation::Audit {
        level: 6,
        queue: true,
    });
    let mut search = mock_search;
    let d = run_serial(&mut audited, audit.clone(), &mut search);
    let lines = d.audit.clone();
    assert!(!lines.is_empty());
    let follow = d
        .follow_up()
        .expect("the mock search contradicts some lines");
    run_serial(&mut audited, follow, &mut search);
    assert!(audited.len() > upgraded.len(), "contradicting lines added");

    let f = fixture(2, 20, ServiceConfig::default());
    f.c.start(add).unwrap();
    drive(&f.c, 7);
    f.c.start(upgrade4()).unwrap();
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
    f.c.start(audit).unwrap();
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
    u64::from(run_serial(&mut book.clone(), upgrade4(), &mut mock_search).iterations)
}

/// An upgrade and an audit interrupted by a restart resume from the stored driver state
/// (the upgrade's marked positions and pass, the audit's phase) and finish with the serial
/// programs' book.
#[test]
fn upgrade_and_audit_resume_after_a_restart() {
    let audit = Program::new(Operation::Audit {
        level: 5,
        queue: false,
    });
    let want = serial_book(2, 10, &[deviate24(), upgrade4(), audit.clone()]);
    let mut f = fixture(2, 10, ServiceConfig::default());
    f.c.start(deviate24()).unwrap();
    drive(&f.c, 7);
    for program in [upgrade4(), audit] {
        let name = program.describe();
        f.c.start(program).unwrap();
        let id = identity();
        let w = f.c.register(&id, "t", 1).unwrap();
        for _ in 0..2 {
            let jobs = f.c.lease(&id, &w, 2).unwrap();
            let r: Vec<_> = jobs.iter().map(mock_result).collect();
            f.c.submit(&id, &w, &r).unwrap();
            f.c.settle().unwrap();
        }
        assert_eq!(f.c.status().state, State::Running, "{name} still running");
        f = reopen(f, ServiceConfig::default());
        assert_eq!(f.c.status().expansion, name);
        drive(&f.c, 3);
        assert_eq!(f.c.status().state, State::Done);
    }
    assert_same_book(&f.c, &want);
}
