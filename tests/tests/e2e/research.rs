//! Issue 22 on a cluster: `expand upgrade` and the line audit (`expand audit`) run by real
//! coordinator and worker processes over gRPC on 127.0.0.1, checked against the book crate's
//! serial programs (what the offline `book upgrade` and `book audit` compute).

use bookfarm_book::driver::run_serial;
use bookfarm_book::program::Operation;
use bookfarm_book::{MemBook, edax, extract, negamax, research};
use bookfarm_coordinator::store::{Entry, Store};
use bookfarm_engine::search::LeafRequest;
use bookfarm_proto::pb;
use bookfarm_tests::*;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const WORKER: &str = env!("CARGO_BIN_EXE_bft-worker");
const LIMIT: Duration = Duration::from_secs(240);
/// book-small.dat is a level-4 book: upgrade its window to 6, audit its best lines at 7.
const UPGRADE: u32 = 6;
const ERROR: i32 = 2;
const AUDIT: u32 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_and_audit_with_worker_processes_equal_the_serial_programs() {
    let Some(eval) = eval_path() else { return };
    let small = eval.with_file_name("book-small.dat");
    let book = edax::read_book(&std::fs::read(&small).expect("book-small.dat")).expect("read");
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).expect("open store");
        let entries: Vec<Entry> = book.positions().map(Entry::new).collect();
        store.create(book.header(), &entries).expect("create");
    }
    let port = free_port();
    let _c = Proc::spawn(
        COORD,
        &serve_args(dir.path(), port, &["--eval-hash", &eval_hash(&eval)]),
    );
    let mut a = admin(port).await;
    let _w1 = Proc::spawn(WORKER, &worker_args(port, &eval, "w1"));
    let _w2 = Proc::spawn(WORKER, &worker_args(port, &eval, "w2"));

    // The serial reference: the same searches, one at a time, in this process.
    let weights = Arc::new(bookfarm_engine::eval::Eval::load(&eval).expect("eval"));
    let make = bookfarm_runner::exec::engine_factory(weights);
    let mut searcher = make();
    let abort = AtomicBool::new(false);
    let mut search = |r: &LeafRequest| searcher.search(r, &abort);
    let mut want = book.clone();
    let params = research::Upgrade {
        level: UPGRADE as u8,
        error: ERROR,
    };
    let below = |b: &MemBook| b.ids().filter(|&id| b.level(id) < params.level).count();
    let upgrade = Operation::Upgrade { params };
    let rounds = run_serial(&mut want, upgrade, &mut search).iterations;
    let raised = below(&book) - below(&want);
    assert!(
        raised > 0 && rounds >= 2,
        "{raised} raised in {rounds} rounds"
    );
    negamax::negamax(&mut want);

    queue(
        &mut a,
        pb::start_expansion_request::Selector::Upgrade(pb::Upgrade {
            level: UPGRADE,
            error: ERROR,
        }),
        "",
    )
    .await;
    let s = wait_for(&mut a, LIMIT, done).await;
    let upgraded = check_book(&export(&mut a).await);
    assert!(
        sorted(&upgraded) == sorted(&want),
        "the serial upgrade's book"
    );
    let report = s.reports.last().expect("upgrade report");
    assert!(
        report.starts_with(&format!(
            "upgrade to level {UPGRADE} (error {ERROR}): {} positions raised in {} rounds",
            raised, rounds
        )),
        "{report}"
    );
    // No level went down; the raised positions are at the upgrade level.
    for p in book.positions() {
        let q = upgraded.get(&p.board).expect("no position removed");
        assert!(
            q.level == p.level || q.level == UPGRADE as u8,
            "{}",
            p.board
        );
    }

    // The line audit: the same lines, results and contradictions as the serial audit.
    let lines = extract::best_lines(&want);
    let audit = run_serial(
        &mut want.clone(),
        Operation::Audit {
            level: AUDIT as u8,
            queue: false,
        },
        &mut search,
    )
    .audit;
    assert_eq!(audit.len(), lines.len());
    queue(
        &mut a,
        pb::start_expansion_request::Selector::Audit(pb::Audit {
            level: AUDIT,
            queue: false,
        }),
        "",
    )
    .await;
    let s = wait_for(&mut a, LIMIT, |s| {
        done(s)
            && s.reports
                .last()
                .is_some_and(|r| r.contains("audit at level"))
    })
    .await;
    let report = s.reports.last().expect("audit report");
    let bad: Vec<_> = audit.iter().filter(|a| a.contradicts()).collect();
    let mut expected = String::new();
    for a in &bad {
        expected.push_str(&format!("contradiction: {a}\n"));
    }
    expected.push_str(&format!(
        "audit at level {AUDIT}: {} best lines played to the end, {} contradict the book",
        audit.len(),
        bad.len()
    ));
    assert_eq!(report, &expected);
    // The audit changed nothing in the book.
    assert!(sorted(&check_book(&export(&mut a).await)) == sorted(&upgraded));
    // Both worker processes searched.
    assert!(
        s.workers.iter().filter(|w| w.completed > 0).count() == 2,
        "{s:?}"
    );
}
