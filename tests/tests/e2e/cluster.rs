//! End-to-end: real coordinator and worker processes over gRPC on 127.0.0.1.

use bookfarm_proto::pb;
use bookfarm_tests::*;
use std::collections::HashSet;
use std::time::Duration;

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const WORKER: &str = env!("CARGO_BIN_EXE_bft-worker");
const LIMIT: Duration = Duration::from_secs(240);

fn coordinator(
    db: &std::path::Path,
    port: u16,
    http: Option<u16>,
    lease_timeout: u64,
    eval: &std::path::Path,
) -> Proc {
    coordinator_with(db, port, http, lease_timeout, eval, &[])
}

fn coordinator_with(
    db: &std::path::Path,
    port: u16,
    http: Option<u16>,
    lease_timeout: u64,
    eval: &std::path::Path,
    extra: &[&str],
) -> Proc {
    let mut args = serve_args(
        db,
        port,
        &[
            "--lease-timeout",
            &lease_timeout.to_string(),
            "--eval-hash",
            &eval_hash(eval),
        ],
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    if let Some(h) = http {
        args.push("--http".into());
        args.push(format!("127.0.0.1:{h}"));
    }
    Proc::spawn(COORD, &args)
}

fn worker(
    port: u16,
    name: &str,
    eval: &std::path::Path,
    ack_log: Option<&std::path::Path>,
) -> Proc {
    let mut args = worker_args(port, eval, name);
    if let Some(p) = ack_log {
        args.push("--ack-log".into());
        args.push(p.display().to_string());
    }
    Proc::spawn(WORKER, &args)
}

/// The status line and the body of `GET path`.
async fn http_get_bytes(port: u16, path: &str) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("http connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("http write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("http read");
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("http head");
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    (head, out[split + 4..].to_vec())
}

async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("http connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("http write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("http read");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_build_a_book_and_export_round_trips() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 12);
    let (port, http) = (free_port(), free_port());
    let _c = coordinator_with(dir.path(), port, Some(http), 60, &eval, &["--publish-book"]);
    let mut a = admin(port).await;
    start_deviate(&mut a, 2, 4).await;
    let _w1 = worker(port, "w1", &eval, None);
    let _w2 = worker(port, "w2", &eval, None);
    let s = wait_for(&mut a, LIMIT, done).await;
    assert!(s.positions > 100, "{s:?}");
    assert_eq!(s.queued + s.in_flight, 0);
    let workers: HashSet<_> = s.workers.iter().map(|w| w.name.clone()).collect();
    assert_eq!(workers.len(), 2, "both workers registered: {s:?}");
    assert_eq!(
        s.workers.iter().map(|w| w.completed).sum::<u64>(),
        s.completed
    );
    let exported = export(&mut a).await;
    let book = check_book(&exported);
    assert_eq!(book.len() as u64, s.positions);
    // The published book is the export (stamped with the date of its own encoding).
    let (head, published) = http_get_bytes(http, "/book.dat").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut back = bookfarm_book::BookFormat::Edax
        .read(&published)
        .unwrap()
        .book;
    back.header_mut().date = book.header().date;
    assert_eq!(bookfarm_book::BookFormat::Edax.write(&back), exported);
    // The CSV export carries one line per position.
    let text = export_as(&mut a, pb::ExportFormat::Csv).await;
    assert_eq!(
        String::from_utf8(text).unwrap().lines().count() as u64,
        s.positions
    );
    // The .egbk3 export is Egaroucid's book of the same positions and values.
    let egb = export_as(&mut a, pb::ExportFormat::Egbk3).await;
    let (head, published) = http_get_bytes(http, "/book.egbk3").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(published, egb, "the published .egbk3 is the export");
    let back = bookfarm_book::BookFormat::Egbk3.read(&egb).unwrap().book;
    let values = |b: &bookfarm_book::MemBook| {
        let mut v: Vec<_> = b.positions().map(|p| (p.board, p.value)).collect();
        v.sort();
        v
    };
    assert_eq!(values(&back), values(&book));
    // A format the coordinator does not know is refused.
    let e = a
        .export_book(pb::ExportBookRequest { format: 99 })
        .await
        .expect_err("an unknown format");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    // HTTP side.
    assert!(http_get(http, "/healthz").await.contains("200 OK"));
    assert!(http_get(http, "/readyz").await.contains("ready"));
    let m = http_get(http, "/metrics").await;
    assert!(m.contains("bookfarm_jobs_completed_total"), "{m}");
    assert!(m.contains("bookfarm_lease_seconds"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_worker_jobs_are_released_and_the_build_completes() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Level 5: searches long enough that the victim holds jobs when killed (one running, one
    // leased ahead), short enough for a quick test.
    new_store(dir.path(), 5, 10);
    let (port, http) = (free_port(), free_port());
    // Without backup leases: the survivor could otherwise answer the victim's searches before
    // the victim's leases expire, and this test is about expiry.
    let _c = coordinator_with(
        dir.path(),
        port,
        Some(http),
        2,
        &eval,
        &["--backup-after", "0"],
    );
    let mut a = admin(port).await;
    start_deviate(&mut a, 2, 4).await;
    let mut victim = worker(port, "victim", &eval, None);
    wait_for(&mut a, LIMIT, |s| {
        s.workers
            .iter()
            .any(|w| w.name == "victim" && w.in_flight > 0 && w.completed > 0)
    })
    .await;
    victim.kill9();
    let _w = worker(port, "survivor", &eval, None);
    let s = wait_for(&mut a, LIMIT, done).await;
    assert!(
        s.workers.iter().all(|w| w.name == "survivor"),
        "the victim was expired: {s:?}"
    );
    let m = http_get(http, "/metrics").await;
    let expired = m
        .lines()
        .find(|l| l.starts_with("bookfarm_jobs_expired_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(expired >= 1.0, "the victim's leases expired: {m}");
    check_book(&export(&mut a).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_coordinator_restarts_without_losing_acknowledged_results() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 14);
    let log = dir.path().join("acks.log");
    let port = free_port();
    let mut c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    start_deviate(&mut a, 2, 4).await;
    let _w1 = worker(port, "w1", &eval, Some(&log));
    let _w2 = worker(port, "w2", &eval, Some(&log));
    wait_for(&mut a, LIMIT, |s| s.completed >= 150).await;
    c.kill9();
    let acked: HashSet<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(acked.len() >= 100);
    // Every acknowledged job id is in the store (opened directly while nothing runs).
    {
        let store = bookfarm_coordinator::store::Store::open(&db).unwrap();
        let loaded = store.load(&db).unwrap();
        let done: HashSet<String> = loaded.done.iter().map(|u| u.to_string()).collect();
        let lost: Vec<_> = acked.difference(&done).collect();
        assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    }
    // Restart on the same port: the workers reconnect, re-register and finish the build.
    let _c2 = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    let s = wait_for(&mut a, LIMIT, done).await;
    assert!(s.positions > 100);
    check_book(&export(&mut a).await);
}

/// Round mode makes the book a function of the leaf results only: two worker processes and the
/// in-process `local` mode build books with the same positions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_and_worker_processes_build_the_same_book() {
    use bookfarm_coordinator::local::{LocalOptions, run};
    use bookfarm_coordinator::service::ServiceConfig;
    let Some(eval) = eval_path() else { return };
    // Processes.
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 12);
    let port = free_port();
    // No time-based throttle of speculation (a loaded machine stretches the planning's wall
    // time, and with it the pause after each plan): every pass's tail gets a plan.
    let _c = coordinator_with(
        dir.path(),
        port,
        None,
        60,
        &eval,
        &["--speculation-share", "1"],
    );
    let mut a = admin(port).await;
    start_deviate(&mut a, 2, 4).await;
    let _w1 = worker(port, "w1", &eval, None);
    let _w2 = worker(port, "w2", &eval, None);
    let finished = wait_for(&mut a, LIMIT, done).await;
    // Queued without a schedule on a farm of two threads (far below `async_threads`): the
    // coordinator chose the serial schedule, the one of the README's build.
    let listed = a
        .list_programs(pb::ListProgramsRequest { finished: true })
        .await
        .unwrap()
        .into_inner()
        .programs;
    assert!(
        listed.iter().any(|p| p.description == "deviate 2 4"),
        "{listed:?}"
    );
    // The worker processes were kept busy at the passes' tails with speculative searches.
    assert!(finished.speculative_leased > 0, "{finished:?}");
    assert!(finished.prefetch_used > 0, "{finished:?}");
    let procs = check_book(&export(&mut a).await);
    // Local mode, in process.
    let dir2 = tempfile::tempdir().unwrap();
    new_store(dir2.path(), 2, 12);
    let cfg = ServiceConfig::default();
    let c = bookfarm_coordinator::server::open(dir2.path(), cfg).unwrap();
    c.start(bookfarm_book::program::Program::new(
        bookfarm_book::program::Operation::Deviate {
            params: bookfarm_book::select::Deviate::new(2, 4),
        },
    ))
    .unwrap();
    let weights = std::sync::Arc::new(bookfarm_engine::eval::Eval::load(&eval).unwrap());
    let search_signature = bookfarm_runner::signature(&weights, &eval_hash(&eval));
    let factory = bookfarm_runner::exec::engine_factory(weights);
    let opts = LocalOptions {
        workers: 2,
        eval_hash: eval_hash(&eval),
        search_signature,
        http: None,
        lookahead: 2,
    };
    let interrupted = run(c.clone(), &opts, factory, std::future::pending(), |_| {})
        .await
        .unwrap();
    assert!(!interrupted.interrupted);
    let local = check_book(&bookfarm_book::BookFormat::Edax.write(&c.book_snapshot()));
    // Same positions, links, leaves and values, whatever searched what first.
    let mut a: Vec<_> = procs.positions().collect();
    let mut b: Vec<_> = local.positions().collect();
    a.sort_by_key(|p| p.board);
    b.sort_by_key(|p| p.board);
    assert_eq!(a.len(), b.len());
    assert!(a == b, "same book");
}

/// Every program with its number, state and description (finished ones included).
async fn programs(a: &mut Admin) -> Vec<(u64, i32, String)> {
    a.list_programs(pb::ListProgramsRequest { finished: true })
        .await
        .expect("list programs")
        .into_inner()
        .programs
        .into_iter()
        .map(|p| (p.id, p.state, p.description))
        .collect()
}

/// The program queue is acknowledged durably: programs queued and cancelled just before a
/// kill -9 are listed the same after the restart, and then run in queue order to their end
/// (the cancelled one never runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_queue_survives_a_coordinator_kill9() {
    use pb::start_expansion_request::Selector as S;
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 12);
    let port = free_port();
    // No worker yet: every program waits.
    let mut c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    let deviate = S::Deviate(pb::Deviate {
        relative_error: 2,
        absolute_error: 4,
    });
    assert_eq!(queue(&mut a, deviate, "f5d6").await, 2);
    assert_eq!(queue(&mut a, S::Play(pb::Play {}), "").await, 3);
    assert_eq!(queue(&mut a, S::Extend(pb::Extend {}), "f5f6").await, 4);
    // A root the book cannot hold is refused and queues nothing.
    let e = a
        .start_expansion(pb::StartExpansionRequest {
            selector: Some(S::Play(pb::Play {})),
            from: "f5f5".into(),
            ..Default::default()
        })
        .await
        .expect_err("an illegal root line");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    a.cancel_program(pb::CancelProgramRequest { id: 3 })
        .await
        .expect("cancel #3");
    let before = programs(&mut a).await;
    let (queued, running, ended, cancelled) = (
        pb::ProgramState::Queued as i32,
        pb::ProgramState::Running as i32,
        pb::ProgramState::Done as i32,
        pb::ProgramState::Cancelled as i32,
    );
    let states: Vec<(u64, i32)> = before.iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(
        states,
        [(1, running), (2, queued), (4, queued), (3, cancelled)],
        "{before:?}"
    );
    assert!(before[1].2.contains("from f5d6"), "{before:?}");
    c.kill9();
    let _c2 = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    assert_eq!(programs(&mut a).await, before);
    let _w = worker(port, "w1", &eval, None);
    wait_for(&mut a, LIMIT, done).await;
    let after: Vec<(u64, i32)> = programs(&mut a).await.iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(after, [(4, ended), (2, ended), (1, ended), (3, cancelled)]);
    let book = check_book(&export(&mut a).await);
    for line in ["f5d6", "f5f6"] {
        let board = bookfarm_engine::formats::transcript::board_after(line).unwrap();
        assert!(book.probe(&board).is_some(), "{line} is in the book");
    }
}

/// `expand add` runs Edax's `book add` as a cluster program: the book it grows on a farm of
/// worker processes is the book the offline `book add` of the same games grows on a copy of the
/// store (the same library path: the games queued, then searched by in-process workers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expand_add_grows_the_book_offline_book_add_grows() {
    use bookfarm_book::program::{Operation, Program};
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (db, copy) = (dir.path().join("db"), dir.path().join("copy"));
    new_store(&db, 2, 14);
    new_store(&copy, 2, 14);
    // The third game's fourth move is illegal (f5 is taken): its game ends there.
    let lines = ["f5d6c3d3c4f4f6f3e6e7", "f5f6e6f4e3c5c4", "f5d6c3f5"];
    let games: Vec<_> = lines
        .iter()
        .map(|l| bookfarm_engine::formats::transcript::parse_moves(l).unwrap())
        .collect();
    let port = free_port();
    let _c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    let _w = worker(port, "w1", &eval, None);
    // The request `expand add GAMES` sends.
    let request = pb::StartExpansionRequest::try_from(&Program::new(Operation::AddGames {
        games: games.clone(),
    }))
    .unwrap();
    let queued = a
        .start_expansion(request)
        .await
        .expect("expand add")
        .into_inner();
    assert_eq!(queued.program, 2, "{queued:?}");
    let s = wait_for(&mut a, LIMIT, done).await;
    let listed = a
        .list_programs(pb::ListProgramsRequest { finished: true })
        .await
        .expect("list programs")
        .into_inner()
        .programs;
    let add = listed
        .iter()
        .find(|p| p.id == 2)
        .expect("program #2 listed");
    assert_eq!(add.state, pb::ProgramState::Done as i32, "{listed:?}");
    assert!(add.report.contains("added 3 games"), "{listed:?}");
    // Edax's `book add` does not negamax: the book is compared as stored, not checked as a
    // negamaxed book.
    let farm = bookfarm_book::edax::read_book(&export(&mut a).await).unwrap();
    assert_eq!(farm.len() as u64, s.positions);
    // Offline `book add` on the copy: the games queued, then the searches drained.
    let (weights, hash) = bookfarm_runner::load_eval(Some(&eval)).unwrap();
    let c = bookfarm_coordinator::server::open(
        &copy,
        bookfarm_coordinator::offline::service_config(&weights, &hash),
    )
    .unwrap();
    c.add_games(&games).unwrap();
    let out = bookfarm_coordinator::offline::run_local(
        &c,
        None,
        2,
        weights,
        hash,
        std::future::pending(),
        |_| {},
    )
    .await
    .unwrap();
    assert!(!out.interrupted);
    let offline = c.book_snapshot();
    assert_eq!(sorted(&farm), sorted(&offline), "same book");
    // Every position of the games within the depth, up to the illegal move, is in the book.
    for line in ["f5d6c3d3c4f4f6f3e6e7", "f5f6e6f4e3c5c4", "f5d6c3"] {
        for n in 1..=line.len() / 2 {
            let board = bookfarm_engine::formats::transcript::board_after(&line[..2 * n]).unwrap();
            assert!(farm.probe(&board).is_some(), "{}", &line[..2 * n]);
        }
    }
}

/// The asynchronous schedule with real worker processes and two coordinator kill -9s: no
/// acknowledged result is lost, and the build ends in a finished book by Edax's rules (the
/// serial selection finds nothing; `book fix` and `book link` change nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_coordinator_during_an_async_program_ends_with_a_finished_book() {
    use bookfarm_book::program::{Operation, Program, Schedule};
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 14);
    let log = dir.path().join("acks.log");
    let port = free_port();
    let mut c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    let program = Program {
        schedule: Schedule::Async,
        ..Program::new(Operation::Deviate {
            params: bookfarm_book::select::Deviate::new(2, 4),
        })
    };
    a.start_expansion(pb::StartExpansionRequest::try_from(&program).unwrap())
        .await
        .expect("start expansion");
    let _w1 = worker(port, "w1", &eval, Some(&log));
    let _w2 = worker(port, "w2", &eval, Some(&log));
    // Two crashes while the program runs (completed counts since each start).
    for kill in 0..2 {
        let s = wait_for(&mut a, LIMIT, |s| s.completed >= 60 || done(s)).await;
        assert!(!done(&s), "killed while the program runs: {s:?}");
        c.kill9();
        let acked: HashSet<String> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert!(
            acked.len() >= 60 * (kill + 1),
            "{} acknowledged",
            acked.len()
        );
        // Every acknowledged job id is in the store (opened directly while nothing runs).
        {
            let store = bookfarm_coordinator::store::Store::open(&db).unwrap();
            let loaded = store.load(&db).unwrap();
            let done: HashSet<String> = loaded.done.iter().map(|u| u.to_string()).collect();
            let lost: Vec<_> = acked.difference(&done).collect();
            assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
        }
        c = coordinator(&db, port, None, 60, &eval);
        a = admin(port).await;
    }
    let s = wait_for(&mut a, LIMIT, done).await;
    assert!(s.positions > 100, "{s:?}");
    // It ran (and was resumed) asynchronously.
    let listed = a
        .list_programs(pb::ListProgramsRequest { finished: true })
        .await
        .unwrap()
        .into_inner()
        .programs;
    assert!(
        listed
            .iter()
            .any(|p| p.description.starts_with("deviate 2 4")
                && p.description.ends_with("(async)")
                && p.state == pb::ProgramState::Done as i32),
        "{listed:?}"
    );
    // Properties 1 and 2 of a finished asynchronous book, on the exported book.
    let book = check_book(&export(&mut a).await);
    let mut negamaxed = book.clone();
    let left = bookfarm_book::schedule::unfinished(&mut negamaxed, &program);
    assert!(left.is_empty(), "the serial selection still marks {left:?}");
    let mut fixed = book.clone();
    let report =
        bookfarm_book::grow::fix_command(&mut fixed, &mut |r| panic!("book fix searched {r:?}"));
    assert!(
        report.problems.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.changes, Default::default(), "{report:?}");
    // Nothing but the order of links (Edax's link sort, which only `book fix` runs) changed.
    let by_move = |b: &bookfarm_book::MemBook| {
        let mut v = sorted(b);
        for p in &mut v {
            p.links.sort_by_key(|l| l.mv.code());
        }
        v
    };
    let (before, after) = (by_move(&book), by_move(&fixed));
    assert_eq!(before.len(), after.len());
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(a, b, "book fix changed a position");
    }
}

/// `count` positions of deterministic pseudo-random games (6 to 25 plies), as OBF lines with
/// their index as comment.
fn search_positions(count: usize) -> String {
    use bookfarm_engine::formats::obf::ObfPosition;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = String::new();
    for i in 0..count {
        let plies = 6 + (next() % 20) as usize;
        let (mut b, mut black) = (bookfarm_engine::Board::start(), true);
        for _ in 0..plies {
            if b.is_game_over() {
                break;
            }
            if b.must_pass() {
                b = b.pass();
            } else {
                let m = b.moves();
                let k = next() % u64::from(m.count_ones());
                let mut bits = m;
                for _ in 0..k {
                    bits &= bits - 1;
                }
                let sq = bookfarm_engine::Square::new(bits.trailing_zeros() as u8).unwrap();
                b = b.play(sq).unwrap();
            }
            black = !black;
        }
        let line = ObfPosition {
            board: b,
            black_to_move: black,
            scores: Vec::new(),
            best_score: None,
            comment: Some(format!("position {i}")),
        };
        out.push_str(&line.to_obf_line());
        out.push('\n');
    }
    out
}

/// Queue the search program `expand search` sends for `text` at `level`; returns its number.
async fn queue_search(a: &mut Admin, text: &str, level: u8) -> pb::StartExpansionResponse {
    use bookfarm_book::program::{Operation, Program};
    let positions = bookfarm_book::searches::SearchSet::parse(text, 1000).expect("positions parse");
    let request =
        pb::StartExpansionRequest::try_from(&Program::new(Operation::Search { positions, level }))
            .unwrap();
    a.start_expansion(request)
        .await
        .expect("expand search")
        .into_inner()
}

/// Wait until program `id` is done; returns its output (`expand search`'s download).
async fn search_output(a: &mut Admin, id: u64) -> String {
    let t0 = std::time::Instant::now();
    loop {
        let listed = programs(a).await;
        if listed
            .iter()
            .any(|(p, state, _)| *p == id && *state == pb::ProgramState::Done as i32)
        {
            break;
        }
        assert!(t0.elapsed() < LIMIT, "program #{id} not done: {listed:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut stream = a
        .get_program_output(pb::ProgramOutputRequest { id })
        .await
        .expect("output")
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.message().await.expect("output chunk") {
        bytes.extend_from_slice(&chunk.data);
    }
    String::from_utf8(bytes).expect("utf-8 output")
}

/// The output holds every position of `text`, in order, with the engine's own leaf search of
/// it at `level` (move and score) and its comment.
fn assert_local_results(output: &str, text: &str, level: u8, eval: &std::path::Path) {
    let got = bookfarm_engine::formats::obf::parse_obf(output).expect("output reads back");
    let given = bookfarm_engine::formats::obf::parse_obf(text).unwrap();
    assert_eq!(
        got.len(),
        given.len(),
        "{}",
        output.lines().next().unwrap_or("")
    );
    let (weights, _) = bookfarm_runner::load_eval(Some(eval)).unwrap();
    let mut searcher = bookfarm_runner::exec::engine_factory(weights)();
    let abort = std::sync::atomic::AtomicBool::new(false);
    for (g, p) in got.iter().zip(&given) {
        assert_eq!((g.board, g.black_to_move), (p.board, p.black_to_move));
        assert_eq!(g.comment, p.comment);
        let want = searcher.search(
            &bookfarm_engine::search::LeafRequest {
                board: p.board,
                level,
                excluded: 0,
            },
            &abort,
        );
        assert_eq!(g.best_score, Some(want.score), "{:?}", p.comment);
        let moves: Vec<_> = g.scores.iter().map(|(m, _)| *m).collect();
        match want.mv {
            bookfarm_engine::Move::None => assert!(moves.is_empty()),
            m => assert_eq!(moves, vec![m], "{:?}", p.comment),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_program_on_worker_processes_equals_local_searches_and_survives_a_kill9() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 14);
    let text = search_positions(150);
    let port = free_port();
    let mut c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    let queued = queue_search(&mut a, &text, 5).await;
    assert!(!queued.existing);
    // The same program again is the same program.
    let again = queue_search(&mut a, &text, 5).await;
    assert_eq!((again.program, again.existing), (queued.program, true));
    let w1 = worker(port, "w1", &eval, None);
    wait_for(&mut a, LIMIT, |s| s.completed >= 10).await;
    c.kill9();
    drop(w1);
    // Restarted on the same store: the program is still there and runs to its end.
    let _c2 = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    let _w1 = worker(port, "w1", &eval, None);
    let _w2 = worker(port, "w2", &eval, None);
    let output = search_output(&mut a, queued.program).await;
    assert!(
        output.starts_with("% bookfarm search level=5 positions=150 results=150 missing=0"),
        "{}",
        output.lines().next().unwrap_or("")
    );
    assert_local_results(&output, &text, 5, &eval);
    // A malformed line is refused naming it, and nothing is queued.
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[6] = lines[6].replacen(['-', 'X', 'O'], "Z", 1);
    let bad = pb::StartExpansionRequest {
        selector: Some(pb::start_expansion_request::Selector::Search(
            pb::SearchFile {
                obf: lines.join("\n"),
                level: 5,
            },
        )),
        ..Default::default()
    };
    let before = programs(&mut a).await.len();
    let e = a.start_expansion(bad).await.expect_err("refused");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("line 7: bad board character 'Z'"),
        "{e:?}"
    );
    assert_eq!(programs(&mut a).await.len(), before);
}

/// A volunteer lying on every search of a search program (an untrusted credential) beside a
/// trusted honest worker: its results are never confirmed by its word alone, its lies are
/// caught, and the output holds only the engine's own results (the trust rules of the book).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_liars_results_never_reach_a_search_programs_output() {
    const ADMIN: &str = "admin-secret";
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 14);
    let honest = add_credential(&db, "honest", "operator", true);
    let liar = add_credential(&db, "liar", "mallory", false);
    let lies = dir.path().join("lies.log");
    let text = search_positions(60);
    let port = free_port();
    let _c = coordinator_with(&db, port, None, 60, &eval, &["--admin-token", ADMIN]);
    let mut a = admin_as(port, ADMIN).await;
    let queued = queue_search(&mut a, &text, 4).await;
    let with_token = |name: &str, token: &str, lie: bool| {
        let mut args = worker_args(port, &eval, name);
        args.extend(["--token".into(), token.into()]);
        if lie {
            args.extend([
                "--lie".into(),
                "always".into(),
                "--lie-log".into(),
                lies.display().to_string(),
            ]);
        }
        Proc::spawn(WORKER, &args)
    };
    // The liar alone first: an untrusted word confirms nothing, so the program cannot end on
    // its results; it has lied once its log has a line.
    let _l = with_token("liar", &liar, true);
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&lies).is_ok_and(|l| !l.is_empty()) {
        assert!(t0.elapsed() < LIMIT, "the liar told no lie");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !programs(&mut a)
            .await
            .iter()
            .any(|(p, state, _)| *p == queued.program && *state == pb::ProgramState::Done as i32),
        "the program ended on the liar's word"
    );
    let _h = with_token("honest", &honest, false);
    let output = search_output(&mut a, queued.program).await;
    assert!(
        output.starts_with("% bookfarm search level=4 positions=60 results=60 missing=0"),
        "{}",
        output.lines().next().unwrap_or("")
    );
    // Every result is the engine's own: no lie is in the output.
    assert_local_results(&output, &text, 4, &eval);
    let told = std::fs::read_to_string(&lies).unwrap().lines().count();
    assert!(told > 0);
    // The lies earned nothing; the honest worker's searches count as its credit.
    let s = status(&mut a).await;
    let credit = |name: &str| {
        s.credit
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no credit row for {name}: {:?}", s.credit))
            .clone()
    };
    assert_eq!(credit("liar").results, 0, "{:?}", credit("liar"));
    assert!(credit("honest").results > 0, "{:?}", credit("honest"));
}

/// The analysis levels `/api/v1/book/position?moves=MOVES` lists, with their scores.
async fn api_analysis(http: u16, moves: &str) -> Vec<(u8, i32)> {
    let reply = http_get(http, &format!("/api/v1/book/position?moves={moves}")).await;
    let (head, body) = reply.split_once("\r\n\r\n").expect("http reply");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let v: serde_json::Value = serde_json::from_str(body).expect("json position");
    v["analysis"]
        .as_array()
        .expect("analysis array")
        .iter()
        .map(|a| {
            (
                a["level"].as_u64().expect("level") as u8,
                a["score"].as_i64().expect("score") as i32,
            )
        })
        .collect()
}

/// `expand analyze` of f5d6c3 at levels 2 to 4 with one manual worker searching one job at a
/// time: the analysis is queued next (after the running program, the new book's first search,
/// and before the two search programs waiting), its levels are leased lowest first and before
/// that program's search, and after each level lands the position's API page lists exactly the
/// levels landed so far, with the engine's scores; the analysis ends once that program has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_runs_next_and_each_level_shows_in_the_api_as_it_lands() {
    use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 14);
    let (port, http) = (free_port(), free_port());
    let _c = coordinator(&db, port, Some(http), 60, &eval);
    let mut a = admin(port).await;
    // The new book's program runs (no worker yet); two search programs wait.
    let text = search_positions(3);
    let searched: HashSet<bookfarm_engine::Board> = bookfarm_engine::formats::obf::parse_obf(&text)
        .unwrap()
        .iter()
        .map(|p| p.board)
        .collect();
    let first = queue_search(&mut a, &text, 1).await;
    let second = queue_search(&mut a, &text, 3).await;
    let moves = "f5d6c3";
    let board = bookfarm_engine::formats::transcript::board_after(moves).unwrap();
    let queued = a
        .start_expansion(pb::StartExpansionRequest {
            selector: Some(pb::start_expansion_request::Selector::Analyze(
                pb::AnalyzePosition {
                    position: Some((&board).into()),
                    level: 2,
                    up_to: 4,
                    store: false,
                },
            )),
            ..Default::default()
        })
        .await
        .expect("expand analyze")
        .into_inner();
    assert_eq!(queued.position, 2, "queued next");
    let listed = programs(&mut a).await;
    let order: Vec<&str> = listed.iter().map(|p| p.2.as_str()).collect();
    assert_eq!(order[0], "new", "{listed:?}");
    let ids: Vec<u64> = listed[1..].iter().map(|p| p.0).collect();
    assert_eq!(
        ids,
        [queued.program, first.program, second.program],
        "{listed:?}"
    );
    assert!(api_analysis(http, moves).await.is_empty());
    let levels = bookfarm_book::searches::analysis_levels(&board, 2, 4);
    assert_eq!(levels, [2, 3, 4]);
    let target = bookfarm_book::searches::analysis_request(&board, 2).board;
    // One manual worker, one job at a time, honest results from the engine.
    let identity = pb::WorkerIdentity {
        protocol_version: bookfarm_proto::PROTOCOL_VERSION,
        engine_version: bookfarm_proto::ENGINE_VERSION.into(),
        eval_hash: eval_hash(&eval),
        search_signature: eval_signature(&eval),
    };
    let mut w = WorkerServiceClient::new(channel(port).await);
    let worker_id = w
        .register_worker(pb::RegisterWorkerRequest {
            identity: Some(identity.clone()),
            name: "manual".into(),
            threads: 1,
            ..Default::default()
        })
        .await
        .expect("register")
        .into_inner()
        .worker_id;
    let (weights, _) = bookfarm_runner::load_eval(Some(&eval)).unwrap();
    let mut searcher = bookfarm_runner::exec::engine_factory(weights)();
    let mut landed: Vec<(u8, i32)> = Vec::new();
    let mut levels_seen = Vec::new();
    let t0 = std::time::Instant::now();
    while landed.len() < levels.len() {
        assert!(t0.elapsed() < LIMIT, "analysis not done: {landed:?}");
        let Some((job, b)) = lease_one(&mut w, &identity, &worker_id).await else {
            continue;
        };
        let analysis = b == target && job.excluded == 0;
        // The running program's search waits for the analysis's levels.
        assert!(analysis, "{job:?} leased before the analysis's levels");
        // The search programs queued before it wait for the analysis.
        assert!(
            !searched.contains(&b),
            "{job:?} leased before the analysis ended"
        );
        let leaf = answer(&mut w, &identity, &worker_id, searcher.as_mut(), &job, b).await;
        if analysis {
            levels_seen.push(job.level as u8);
            landed.push((job.level as u8, leaf.score));
        }
        // The API lists exactly the levels landed so far (each as it lands).
        let t1 = std::time::Instant::now();
        loop {
            let shown = api_analysis(http, moves).await;
            if shown == landed {
                break;
            }
            assert!(
                t1.elapsed() < Duration::from_secs(30),
                "shown {shown:?}, landed {landed:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Level by level, lowest first, all while the new book's program still ran.
    assert_eq!(levels_seen, levels);
    // The analysis ends once that program has (its search is answered now).
    let t1 = std::time::Instant::now();
    loop {
        let listed = programs(&mut a).await;
        if listed
            .iter()
            .any(|(p, state, _)| *p == queued.program && *state == pb::ProgramState::Done as i32)
        {
            break;
        }
        assert!(t1.elapsed() < LIMIT, "analysis not done: {listed:?}");
        let Some((job, b)) = lease_one(&mut w, &identity, &worker_id).await else {
            continue;
        };
        answer(&mut w, &identity, &worker_id, searcher.as_mut(), &job, b).await;
    }
}

/// `expand analyze f5d6c3 --level 2 --up-to 4 --store` on a new book (the start position
/// alone) with one worker process: the analysis, then the store program right behind it, which
/// adds the line's missing positions at the book's level and re-searches the analysed
/// position's leaf at level 4 (links excluded): the exported book holds the line, the position
/// at level 4 with the engine's leaf, and the API still lists the analysis's three levels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_analysis_stored_with_a_worker_raises_its_position_in_the_book() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 14);
    let (port, http) = (free_port(), free_port());
    let _c = coordinator(&db, port, Some(http), 60, &eval);
    let mut a = admin(port).await;
    let moves = "f5d6c3";
    let board = bookfarm_engine::formats::transcript::board_after(moves).unwrap();
    let queued = a
        .start_expansion(pb::StartExpansionRequest {
            selector: Some(pb::start_expansion_request::Selector::Analyze(
                pb::AnalyzePosition {
                    position: Some((&board).into()),
                    level: 2,
                    up_to: 4,
                    store: true,
                },
            )),
            from: moves.into(),
            ..Default::default()
        })
        .await
        .expect("expand analyze --store")
        .into_inner();
    assert!(queued.store_program > queued.program, "{queued:?}");
    let _w = Proc::spawn(WORKER, &worker_args(port, &eval, "w1"));
    let t0 = std::time::Instant::now();
    loop {
        let listed = programs(&mut a).await;
        let done = |id: u64| {
            listed
                .iter()
                .any(|(p, state, _)| *p == id && *state == pb::ProgramState::Done as i32)
        };
        if done(queued.program) && done(queued.store_program) {
            break;
        }
        assert!(t0.elapsed() < LIMIT, "not done: {listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let book = check_book(&export(&mut a).await);
    let (weights, _) = bookfarm_runner::load_eval(Some(&eval)).unwrap();
    let mut searcher = bookfarm_runner::exec::engine_factory(weights)();
    let abort = std::sync::atomic::AtomicBool::new(false);
    for line in ["f5", "f5d6"] {
        let b = bookfarm_engine::formats::transcript::board_after(line).unwrap();
        let id = book.probe(&b).unwrap_or_else(|| panic!("{line} added"));
        assert_eq!(book.level(id), 2, "{line}: the book's level");
    }
    let p = book.position(book.probe(&board).expect("the analysed position added"));
    assert_eq!(p.level, 4);
    let request = bookfarm_book::grow::leaf_request(&bookfarm_book::model::Position {
        leaf: bookfarm_book::model::BAD_LINK,
        ..p.clone()
    })
    .expect("a move to search");
    assert_eq!(request.level, 4);
    let leaf = searcher.search(&request, &abort);
    assert_eq!((p.leaf.mv, i32::from(p.leaf.score)), (leaf.mv, leaf.score));
    let levels: Vec<u8> = api_analysis(http, moves)
        .await
        .iter()
        .map(|(l, _)| *l)
        .collect();
    assert_eq!(levels, [2, 3, 4]);
}

/// Lease one job as `worker_id`, with its board; `None` after a short pause when none is
/// leasable yet.
async fn lease_one(
    w: &mut bookfarm_proto::pb::worker_service_client::WorkerServiceClient<
        tonic::transport::Channel,
    >,
    identity: &pb::WorkerIdentity,
    worker_id: &str,
) -> Option<(pb::Job, bookfarm_engine::Board)> {
    let lease = w
        .lease_jobs(pb::LeaseJobsRequest {
            identity: Some(identity.clone()),
            worker_id: worker_id.to_string(),
            free_slots: 1,
            ..Default::default()
        })
        .await
        .expect("lease")
        .into_inner();
    let Some(job) = lease.jobs.into_iter().next() else {
        tokio::time::sleep(Duration::from_millis(100)).await;
        return None;
    };
    let b = bookfarm_engine::Board::try_from(job.position.expect("job position")).unwrap();
    Some((job, b))
}

/// Search `job` (on `board`) with the engine and submit the result as `worker_id`; returns it.
async fn answer(
    w: &mut bookfarm_proto::pb::worker_service_client::WorkerServiceClient<
        tonic::transport::Channel,
    >,
    identity: &pb::WorkerIdentity,
    worker_id: &str,
    searcher: &mut dyn bookfarm_runner::exec::LeafSearcher,
    job: &pb::Job,
    board: bookfarm_engine::Board,
) -> bookfarm_engine::search::LeafResult {
    let abort = std::sync::atomic::AtomicBool::new(false);
    let leaf = searcher.search(
        &bookfarm_engine::search::LeafRequest {
            board,
            excluded: job.excluded,
            level: job.level as u8,
        },
        &abort,
    );
    w.submit_results(pb::SubmitResultsRequest {
        identity: Some(identity.clone()),
        worker_id: worker_id.to_string(),
        results: vec![pb::LeafResult {
            job_id: job.job_id.clone(),
            r#move: u32::from(leaf.mv.code()),
            score: leaf.score,
            depth: leaf.depth,
            selectivity: u32::from(leaf.selectivity),
            exact: leaf.exact,
            nodes: leaf.nodes,
            elapsed_us: leaf.elapsed.as_micros() as u64,
        }],
    })
    .await
    .expect("submit");
    leaf
}

/// The operator's command-line tool (`bookfarm-coordinator`, built by the workspace).
fn cli() -> String {
    bookfarm_tests::deploy::binary("bookfarm-coordinator")
        .display()
        .to_string()
}

/// `bookfarm-coordinator ARGS` run to its end: (success, stdout + stderr).
fn run_coordinator_command(args: &[String]) -> (bool, String) {
    let out = std::process::Command::new(cli())
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Backups while a farm builds (issue 40): `backup` taken from a running coordinator with two
/// worker processes mid-build, restored with `restore` into a new store, which a new coordinator
/// with new workers finishes to the book the original farm finishes (same positions, links,
/// leaves, values). A `backup` command killed (-9) at various moments leaves no file or a
/// complete one (each one found restores); a coordinator killed (-9) while a backup is taken
/// restarts on its store and finishes the build; a backup cut short or with a flipped byte is
/// refused by `restore`, which then leaves no store behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_during_a_build_restores_and_finishes_to_the_same_book() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    new_store(&db, 2, 12);
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    start_deviate(&mut a, 2, 4).await;
    let _w1 = worker(port, "w1", &eval, None);
    let _w2 = worker(port, "w2", &eval, None);
    wait_for(&mut a, LIMIT, |s| s.completed >= 40).await;
    let backup_args = |out: &std::path::Path| -> Vec<String> {
        vec![
            "backup".into(),
            out.display().to_string(),
            "--coordinator".into(),
            url.clone(),
        ]
    };
    let restore_args = |backup: &std::path::Path, to: &std::path::Path| -> Vec<String> {
        vec![
            "restore".into(),
            backup.display().to_string(),
            "--db".into(),
            to.display().to_string(),
        ]
    };
    // The backup command killed at different moments of its run.
    let (mut absent, mut complete) = (0, 0);
    for i in 0..6u64 {
        let out = dir.path().join(format!("killed-{i}.bak"));
        let mut p = Proc::spawn(&cli(), &backup_args(&out));
        tokio::time::sleep(Duration::from_millis(20 * i)).await;
        p.kill9();
        if out.exists() {
            let (ok, text) =
                run_coordinator_command(&restore_args(&out, &dir.path().join(format!("r{i}"))));
            assert!(
                ok,
                "a backup file left by a killed backup does not restore: {text}"
            );
            complete += 1;
        } else {
            absent += 1;
        }
    }
    eprintln!("killed backups: {absent} left no file, {complete} a complete one");
    // One backup mid-build.
    let bak = dir.path().join("mid.bak");
    let (ok, text) = run_coordinator_command(&backup_args(&bak));
    assert!(ok, "{text}");
    let mid = status(&mut a).await;
    assert!(
        !done(&mid),
        "the backup was meant to be taken mid-build: {mid:?}"
    );
    // A backup cut short, or with one byte flipped, is refused and leaves no store.
    let bytes = std::fs::read(&bak).unwrap();
    let cut = dir.path().join("cut.bak");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let flipped = dir.path().join("flipped.bak");
    let mut f = bytes.clone();
    let at = f.len() / 2;
    f[at] = if f[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(&flipped, &f).unwrap();
    for (bad, why) in [(&cut, "incomplete"), (&flipped, "damaged")] {
        let to = dir.path().join("refused");
        let (ok, text) = run_coordinator_command(&restore_args(bad, &to));
        assert!(!ok && text.contains(why), "{text}");
        assert!(!to.exists());
    }
    // The coordinator killed while a backup is being taken: it restarts on its store.
    let mut p = Proc::spawn(&cli(), &backup_args(&dir.path().join("during-kill.bak")));
    tokio::time::sleep(Duration::from_millis(30)).await;
    c.kill9();
    let _ = p.0.wait();
    let _c = coordinator(&db, port, None, 60, &eval);
    let mut a = admin(port).await;
    wait_for(&mut a, LIMIT, done).await;
    let original = check_book(&export(&mut a).await);
    // The restored store, finished by another coordinator and other workers.
    let restored = dir.path().join("restored");
    let (ok, text) = run_coordinator_command(&restore_args(&bak, &restored));
    assert!(ok && text.contains("all checked"), "{text}");
    let port2 = free_port();
    let _c2 = coordinator(&restored, port2, None, 60, &eval);
    let mut a2 = admin(port2).await;
    let _w3 = worker(port2, "w3", &eval, None);
    let _w4 = worker(port2, "w4", &eval, None);
    wait_for(&mut a2, LIMIT, done).await;
    let again = check_book(&export(&mut a2).await);
    assert_eq!(sorted(&original).len(), sorted(&again).len());
    assert!(sorted(&original) == sorted(&again), "same book");
}
