//! Validated results end to end (issue 14): real coordinator and worker processes on
//! 127.0.0.1, some of them lying, and a book identical to an honest build.

use bookfarm_book::MemBook;
use bookfarm_book::model::Position;
use bookfarm_proto::pb;
use bookfarm_tests::*;
use std::path::Path;
use std::time::{Duration, Instant};

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const WORKER: &str = env!("CARGO_BIN_EXE_bft-worker");
const LIMIT: Duration = Duration::from_secs(300);
const ADMIN: &str = "admin-secret";
/// N: results agreeing with the root that earn trust (small, so that the sleeper wakes within
/// a small build).
const TRUST_AFTER: u64 = 5;

/// A coordinator with a one-thread verifier and `extra` arguments.
fn coordinator(db: &Path, port: u16, eval: &Path, extra: &[&str]) -> Proc {
    let mut args: Vec<String> = [
        "--db",
        &db.display().to_string(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--admin-token",
        ADMIN,
        "--eval-hash",
        &eval_hash(eval),
        "--eval",
        &eval.display().to_string(),
        "--verify-threads",
        "1",
        "--trust-after",
        &TRUST_AFTER.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(COORD, &args)
}

/// A worker process with a credential, lying as `lie` says (see `bft-worker --lie`), its lies
/// logged to `log`.
fn worker(port: u16, eval: &Path, name: &str, token: &str, lie: Option<(&str, &Path)>) -> Proc {
    let mut args = worker_args(port, eval, name);
    args.extend(["--token".into(), token.into()]);
    if let Some((mode, log)) = lie {
        args.extend([
            "--lie".into(),
            mode.into(),
            "--lie-log".into(),
            log.display().to_string(),
        ]);
    }
    Proc::spawn(WORKER, &args)
}

fn done(s: &pb::GetStatusResponse) -> bool {
    s.state == pb::ExpansionState::Done as i32
}

fn sorted(book: &MemBook) -> Vec<Position> {
    let mut v: Vec<Position> = book.positions().collect();
    v.sort_by_key(|p| p.board);
    v
}

fn credit<'a>(s: &'a pb::GetStatusResponse, name: &str) -> &'a pb::Credit {
    s.credit
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no credit row for {name}: {:?}", s.credit))
}

/// Build a level-2 deviate book with the given workers (credential name, owner, trusted, lie)
/// and the coordinator's `extra` arguments; returns the final status, the book and the lies
/// told per worker.
async fn build(
    eval: &Path,
    fleet: &[(&str, &str, bool, Option<&str>)],
    extra: &[&str],
) -> (
    pb::GetStatusResponse,
    MemBook,
    Vec<(String, usize)>,
    Duration,
) {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 12);
    let tokens: Vec<String> = fleet
        .iter()
        .map(|(name, owner, trusted, _)| add_credential(dir.path(), name, owner, *trusted))
        .collect();
    let port = free_port();
    let _c = coordinator(dir.path(), port, eval, extra);
    let mut a = admin_as(port, ADMIN).await;
    start_deviate(&mut a, 2, 4).await;
    let t0 = Instant::now();
    let logs: Vec<_> = fleet
        .iter()
        .map(|(name, ..)| dir.path().join(format!("{name}.lies")))
        .collect();
    let _workers: Vec<Proc> = fleet
        .iter()
        .zip(&tokens)
        .zip(&logs)
        .map(|(((name, _, _, lie), token), log)| {
            worker(port, eval, name, token, lie.map(|m| (m, log.as_path())))
        })
        .collect();
    let s = wait_for(&mut a, LIMIT, done).await;
    let took = t0.elapsed();
    let book = check_book(&export(&mut a).await);
    let told = fleet
        .iter()
        .zip(&logs)
        .map(|((name, ..), log)| {
            let n = std::fs::read_to_string(log).map_or(0, |t| t.lines().count());
            (name.to_string(), n)
        })
        .collect();
    (s, book, told, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_workers_leave_the_book_identical_to_an_honest_build() {
    let Some(eval) = eval_path() else { return };
    // The honest build: two trusted workers (applied at once, spot-checked by the verifier).
    let (honest, reference, _, took) = build(
        &eval,
        &[("op1", "op", true, None), ("op2", "op", true, None)],
        &[],
    )
    .await;
    let v = honest.validation.unwrap_or_default();
    let extra = v.replica_nodes as f64 / v.used_nodes.max(1) as f64;
    eprintln!(
        "honest trusted build: {} positions in {took:?}; spot checks {} of {} results, extra compute {:.1} % of the nodes",
        reference.len(),
        v.spot_checks,
        v.applied_at_once,
        100.0 * extra
    );
    assert_eq!(
        v.invalid, 0,
        "honest workers agree with the verifier: {v:?}"
    );
    assert!(v.spot_checks > 0 && v.held == 0, "{v:?}");
    assert!(reference.len() > 100, "{}", reference.len());

    // The same build with liars: untrusted liars of every kind, colluders of different owners
    // telling the same lie, a sleeper honest until trusted, and one honest untrusted worker.
    let fleet = [
        ("op1", "op", true, None),
        ("honest", "h", false, None),
        ("always", "a", false, Some("always")),
        ("five", "f", false, Some("rate:5")),
        ("subtle", "s", false, Some("subtle:30")),
        ("c1", "c1", false, Some("rate:40")),
        ("c2", "c2", false, Some("rate:40")),
        ("c3", "c3", false, Some("rate:40")),
        ("sleeper", "z", false, Some("sleeper:12")),
    ];
    // Every result applied on one word is checked (spot-check floor 1), so that each lie an
    // earned liar slips in outside the window is caught before the build is done: the test
    // shows that such lies are undone by replay; how often they would be caught with the
    // default floor is the spot checks' business.
    let (s, book, told, took) = build(&eval, &fleet, &["--spot-floor", "1"]).await;
    assert_eq!(
        sorted(&book),
        sorted(&reference),
        "the book built with liars is the honest book"
    );
    let v = s.validation.unwrap_or_default();
    let lies: usize = told.iter().map(|(_, n)| n).sum();
    eprintln!(
        "build with liars: {} positions in {took:?}; lies told {lies} ({told:?}), caught {}, reached the book {}, rollbacks {}; held {}, validated {}, extra compute {:.1} % of the nodes",
        book.len(),
        v.invalid,
        v.reached_book,
        v.rollbacks,
        v.held,
        v.validated,
        100.0 * v.replica_nodes as f64 / v.used_nodes.max(1) as f64
    );
    for c in &s.credit {
        eprintln!(
            "  {:<14} {:<9} results {:>5} invalid {:>3} blocked {:<5} time to trust {} ms",
            c.name, c.standing, c.results, c.invalid, c.blocked, c.time_to_trust_ms
        );
    }
    assert!(lies > 0 && v.invalid > 0, "{v:?}");
    // Lies outside the window may reach the book on earned trust; each one did only until
    // its author was caught, and the book was replayed without it.
    assert!(v.reached_book == 0 || v.rollbacks > 0, "{v:?}");
    // The liars that lied often enough are blocked; honest workers never lose.
    assert!(credit(&s, "always").blocked, "{:?}", s.credit);
    assert_eq!(credit(&s, "always").results, 0, "no credit for lies");
    for name in ["op1", "honest"] {
        let c = credit(&s, name);
        assert!(c.invalid == 0 && !c.blocked && c.results > 0, "{c:?}");
    }
    // The sleeper earned trust, then was caught.
    let z = credit(&s, "sleeper");
    assert!(z.time_to_trust_ms > 0 && z.invalid > 0, "{z:?}");
}

/// Earned trust saves replication once criticality follows the deviate window: three honest
/// untrusted workers of different owners earn trust from the coordinator's verifier (the only
/// trust root: every result applied at once is an earned one), and the same build runs with
/// every deviate request critical (the rule before windows) and with the window rule; both
/// books are the honest book.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earned_trust_saves_replication_outside_the_window() {
    let Some(eval) = eval_path() else { return };
    let fleet = [
        ("h1", "h1", false, None),
        ("h2", "h2", false, None),
        ("h3", "h3", false, None),
    ];
    let (all, book_all, _, took_all) = build(&eval, &fleet, &["--all-critical"]).await;
    let (win, book_win, _, took_win) = build(&eval, &fleet, &[]).await;
    let (tight, book_tight, _, took_tight) = build(&eval, &fleet, &["--window-margin", "0"]).await;
    assert_eq!(
        sorted(&book_all),
        sorted(&book_win),
        "the window rule changes nothing in the book"
    );
    assert_eq!(sorted(&book_all), sorted(&book_tight));
    let report = |name: &str, s: &pb::GetStatusResponse, took: Duration| {
        let v = s.validation.unwrap_or_default();
        let earned: Vec<String> = s
            .credit
            .iter()
            .filter(|c| c.time_to_trust_ms > 0)
            .map(|c| format!("{} after {} ms", c.name, c.time_to_trust_ms))
            .collect();
        eprintln!(
            "{name}: {} positions in {took:?}; applied at once {}, held {} (validated {}), spot checks {}, invalid {}; extra compute {:.1} % of the nodes; earned: {earned:?}",
            book_all.len(),
            v.applied_at_once,
            v.held,
            v.validated,
            v.spot_checks,
            v.invalid,
            100.0 * v.replica_nodes as f64 / v.used_nodes.max(1) as f64
        );
        v
    };
    let va = report("every deviate request critical", &all, took_all);
    let vw = report("window rule (margin 2)", &win, took_win);
    let vt = report("window rule, no guard band", &tight, took_tight);
    for v in [&va, &vw, &vt] {
        assert_eq!(v.invalid, 0, "honest workers agree: {v:?}");
    }
    assert_eq!(va.applied_at_once, 0, "every result waited: {va:?}");
    assert!(
        vw.applied_at_once > 0,
        "earned results below the window are applied at once: {vw:?}"
    );
}
