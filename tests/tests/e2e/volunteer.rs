//! A coordinator open to volunteers (issue 13): each probe of the issue against a real
//! coordinator process on 127.0.0.1, with real worker processes where a build is needed.

use bookfarm_coordinator::server;
use bookfarm_coordinator::service::ServiceConfig;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::{Board, Move};
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::pb;
use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use bookfarm_tests::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const WORKER: &str = env!("CARGO_BIN_EXE_bft-worker");
const ADMIN: &str = "admin-s3cret";
/// How long a wait may last before the test calls it a hang (not a speed limit: timings are
/// printed, and measured by benchmarks).
const HANG: Duration = Duration::from_secs(60);

/// A hand-driven worker: a client sending one credential, and the identity it claims.
struct Worker {
    c: WorkerServiceClient<InterceptedService<Channel, Bearer>>,
    ident: pb::WorkerIdentity,
}

fn coordinator(db: &Path, port: u16, eval: Option<&Path>, extra: &[&str]) -> Proc {
    let mut args = serve_args(db, port, &["--admin-token", ADMIN]);
    if let Some(e) = eval {
        args.extend(["--eval-hash".into(), eval_hash(e)]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(COORD, &args)
}

fn worker_proc(port: u16, eval: &Path, name: &str, token: &str) -> Proc {
    let mut args = worker_args(port, eval, name);
    args.extend(["--token".into(), token.into()]);
    Proc::spawn(WORKER, &args)
}

/// Seed the book with `n` short games (many positions pending a search), so that the queue
/// holds more jobs than one worker may lease. The new book's start position is answered first
/// (its search blocks the programs after it), by a stand-in worker with the default search
/// signature (the one [`client`] sends), which pins the book.
fn seed(db: &Path, n: usize) {
    let c = server::open(db, ServiceConfig::default()).unwrap();
    let ident = bookfarm_proto::domain::Identity::from(identity(None));
    let w = c.register(&ident, "seed", 1).unwrap();
    let job = c.lease(&ident, &w, 1).unwrap().remove(0);
    let (depth, selectivity) = bookfarm_engine::level::level_params(job.level, job.board.empties());
    let answer = bookfarm_proto::domain::JobResult {
        job_id: job.id,
        leaf: bookfarm_engine::search::LeafResult {
            mv: Move::Square(BitIter(job.board.moves()).next().unwrap()),
            score: 0,
            depth,
            selectivity,
            exact: false,
            nodes: 1,
            elapsed: Duration::from_millis(1),
        },
    };
    c.submit(&ident, &w, &[answer]).unwrap();
    c.settle().unwrap();
    let games: Vec<Vec<Move>> = (0..n)
        .map(|g| {
            let mut b = Board::start();
            let mut moves = Vec::new();
            for ply in 0..8 {
                let legal: Vec<_> = BitIter(b.moves()).collect();
                if legal.is_empty() {
                    break;
                }
                let mv = Move::Square(legal[(g * 7 + ply * 3 + g / 3) % legal.len()]);
                b = b.play_move(mv).unwrap();
                moves.push(mv);
            }
            moves
        })
        .collect();
    c.add_games(&games).unwrap();
    c.flush().unwrap();
}

async fn client(port: u16, token: &str) -> Worker {
    client_with(port, token, None).await
}

/// The identity of a worker loading `eval`: its fingerprint and the search signature a
/// `bft-worker` loading it sends (the first signature a coordinator sees pins its book); with
/// none, no fingerprint and the default search signature.
fn identity(eval: Option<&Path>) -> pb::WorkerIdentity {
    let (eval_hash, search_signature) = match eval {
        Some(p) => (eval_hash(p), eval_signature(p)),
        None => (
            String::new(),
            bookfarm_engine::search::SearchSignature::new(
                &bookfarm_engine::search::SearchOptions::default(),
                "",
            )
            .to_string(),
        ),
    };
    pb::WorkerIdentity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash,
        search_signature,
    }
}

/// A client claiming the evaluation of `eval` (see [`identity`]).
async fn client_with(port: u16, token: &str, eval: Option<&Path>) -> Worker {
    Worker {
        c: WorkerServiceClient::with_interceptor(channel(port).await, Bearer::new(token).unwrap())
            .max_encoding_message_size(usize::MAX),
        ident: identity(eval),
    }
}

async fn register(w: &mut Worker, name: &str, threads: u32) -> Result<String, tonic::Status> {
    w.c.register_worker(pb::RegisterWorkerRequest {
        identity: Some(w.ident.clone()),
        name: name.into(),
        threads,
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().worker_id)
}

async fn lease(w: &mut Worker, id: &str, slots: u32) -> Result<Vec<pb::Job>, tonic::Status> {
    w.c.lease_jobs(pb::LeaseJobsRequest {
        identity: Some(w.ident.clone()),
        worker_id: id.into(),
        free_slots: slots,
        results: vec![],
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().jobs)
}

async fn heartbeat(
    w: &mut Worker,
    id: &str,
    jobs: &[String],
) -> Result<Vec<String>, tonic::Status> {
    w.c.heartbeat(pb::HeartbeatRequest {
        identity: Some(w.ident.clone()),
        worker_id: id.into(),
        job_ids: jobs.to_vec(),
    })
    .await
    .map(|r| r.into_inner().cancelled_job_ids)
}

async fn fail(w: &mut Worker, id: &str, job: &str, reason: &str) -> Result<bool, tonic::Status> {
    w.c.report_failure(pb::ReportFailureRequest {
        identity: Some(w.ident.clone()),
        worker_id: id.into(),
        job_id: job.into(),
        reason: reason.into(),
        retryable: false,
    })
    .await
    .map(|r| r.into_inner().quarantined)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_credentials_are_refused_on_every_admin_rpc() {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 10);
    let token = add_credential(dir.path(), "vol", "mallory", false);
    let port = free_port();
    let _c = coordinator(dir.path(), port, None, &[]);
    let mut a = admin_as(port, ADMIN).await;
    start_deviate(&mut a, 2, 4).await;
    let before = (status(&mut a).await, export(&mut a).await);
    let creds = credentials(&mut a).await;

    let mut w = admin_as(port, &token).await;
    // Refused before decoding: a valid book or not makes no difference.
    let one_position = vec![0u8; 4096];
    let codes = vec![
        (
            "GetStatus",
            w.get_status(pb::GetStatusRequest::default()).await.err(),
        ),
        (
            "StartExpansion",
            w.start_expansion(pb::StartExpansionRequest {
                selector: Some(pb::start_expansion_request::Selector::Play(pb::Play {})),
                level: 60,
                ..Default::default()
            })
            .await
            .err(),
        ),
        ("Pause", w.pause(pb::PauseRequest {}).await.err()),
        ("Resume", w.resume(pb::ResumeRequest {}).await.err()),
        (
            "ExportBook",
            w.export_book(pb::ExportBookRequest { format: 1 })
                .await
                .err(),
        ),
        (
            "ImportBook",
            w.import_book(pb::ImportBookRequest { data: one_position })
                .await
                .err(),
        ),
        ("BookInfo", w.book_info(pb::BookInfoRequest {}).await.err()),
        (
            "ShowPosition",
            w.show_position(pb::ShowPositionRequest { moves: "".into() })
                .await
                .err(),
        ),
        (
            "AddCredential",
            w.add_credential(pb::AddCredentialRequest {
                name: "mine".into(),
                owner: String::new(),
                trusted: true,
            })
            .await
            .err(),
        ),
        (
            "ListCredentials",
            w.list_credentials(pb::ListCredentialsRequest {})
                .await
                .err(),
        ),
        (
            "SetCredentialState",
            w.set_credential_state(pb::SetCredentialStateRequest {
                name: "vol".into(),
                state: pb::CredentialState::Active as i32,
                reason: String::new(),
            })
            .await
            .err(),
        ),
        (
            "ReleaseQuarantine",
            w.release_quarantine(pb::ReleaseQuarantineRequest {
                all: true,
                positions: vec![],
            })
            .await
            .err(),
        ),
        (
            "CreateInvitation",
            w.create_invitation(pb::CreateInvitationRequest {
                uses: 100,
                ..Default::default()
            })
            .await
            .err(),
        ),
        (
            "ListInvitations",
            w.list_invitations(pb::ListInvitationsRequest {})
                .await
                .err(),
        ),
        (
            "RevokeInvitation",
            w.revoke_invitation(pb::RevokeInvitationRequest { name: "x".into() })
                .await
                .err(),
        ),
    ];
    assert_eq!(codes.len(), 15, "every admin RPC");
    for (rpc, e) in codes {
        let e = e.unwrap_or_else(|| panic!("{rpc} accepted a worker credential"));
        assert_eq!(e.code(), Code::PermissionDenied, "{rpc}: {e}");
    }
    // No token at all: unauthenticated; the admin token on the worker service: refused.
    let e = admin(port)
        .await
        .pause(pb::PauseRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let e = register(&mut client(port, ADMIN).await, "x", 1)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    // Nothing changed.
    let after = (status(&mut a).await, export(&mut a).await);
    assert_eq!(before.0.positions, after.0.positions);
    assert_eq!(before.0.state, after.0.state);
    assert_eq!(before.0.expansion, after.0.expansion);
    // Exports stamp the current time in the header's date (bytes 10..18): compare the rest.
    let undated = |b: &[u8]| [&b[..10], &b[18..]].concat();
    assert_eq!(undated(&before.1), undated(&after.1), "same book");
    let creds2 = credentials(&mut a).await;
    assert_eq!(creds, creds2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_and_revoked_credentials_are_refused_within_one_heartbeat() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 4, 14);
    let t1 = add_credential(dir.path(), "w1", "alice", false);
    let t2 = add_credential(dir.path(), "w2", "bob", false);
    let port = free_port();
    // The verifier validates the untrusted workers' results (otherwise none reaches the book).
    let e = eval.display().to_string();
    let _c = coordinator(
        dir.path(),
        port,
        Some(&eval),
        &["--eval", &e, "--verify-threads", "1"],
    );
    let mut a = admin_as(port, ADMIN).await;
    start_deviate(&mut a, 2, 4).await;
    let mut w1 = worker_proc(port, &eval, "w1", &t1);
    let mut w2 = worker_proc(port, &eval, "w2", &t2);
    wait_for(&mut a, Duration::from_secs(60), |s| {
        // The two workers and the coordinator's verifier.
        s.workers_total == 3 && s.completed > 5
    })
    .await;
    // A raw session of w1's credential, to see the refusal itself.
    let mut raw = client_with(port, &t1, Some(&eval)).await;
    let raw_id = register(&mut raw, "raw", 1).await.unwrap();

    for (name, p, what) in [
        ("w1", &mut w1, pb::CredentialState::Blocked),
        ("w2", &mut w2, pb::CredentialState::Revoked),
    ] {
        let t0 = Instant::now();
        a.set_credential_state(pb::SetCredentialStateRequest {
            name: name.into(),
            state: what as i32,
            reason: "probe".into(),
        })
        .await
        .unwrap();
        // The worker's next call (a heartbeat at the latest) is refused and it exits with an
        // error. How soon is the heartbeat interval's business; the limit only stops a hang.
        loop {
            if let Some(st) = p.exited() {
                assert!(!st.success(), "{name} exits with an error");
                eprintln!(
                    "{name}: {what:?}; worker process refused and exited after {:?}",
                    t0.elapsed()
                );
                break;
            }
            assert!(
                t0.elapsed() < HANG,
                "{name} still running {:?} after {what:?}",
                t0.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // The very next call of a session of the blocked credential is refused.
    let e = heartbeat(&mut raw, &raw_id, &[]).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(e.message().contains("blocked: probe"), "{e}");
    let e = register(&mut client_with(port, &t2, Some(&eval)).await, "again", 1)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    // Their sessions ended with the change: no worker left but the coordinator's verifier.
    let s = status(&mut a).await;
    let names: Vec<&str> = s.workers.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["verifier"], "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_hoarding_is_capped_and_leases_end_despite_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 12);
    seed(dir.path(), 30);
    let hoarder_token = add_credential(dir.path(), "h", "mallory", false);
    let honest_token = add_credential(dir.path(), "o", "alice", false);
    let port = free_port();
    let _c = coordinator(dir.path(), port, None, &["--max-lease-base-ms", "1500"]);
    let mut a = admin_as(port, ADMIN).await;
    let queued = status(&mut a).await.queued;
    // More than two workers' caps (the serial growth program queues one step of `book add`).
    assert!(queued > 6, "seeded queue: {queued}");

    // 5 x 256 slots with 1 declared thread: threads + lookahead (2) jobs, no more.
    let mut h = client(port, &hoarder_token).await;
    let hid = register(&mut h, "h", 1).await.unwrap();
    let mut held = Vec::new();
    for _ in 0..5 {
        held.extend(lease(&mut h, &hid, 256).await.unwrap());
    }
    assert_eq!(held.len(), 3, "lease cap 1 + 2");
    let mut o = client(port, &honest_token).await;
    let oid = register(&mut o, "o", 1).await.unwrap();
    assert_eq!(lease(&mut o, &oid, 256).await.unwrap().len(), 3);
    // Session ids are bound to their credential.
    let e = lease(&mut o, &hid, 1).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");

    // Heartbeats keep the worker alive, but not its leases past their maximum (1.5 s at
    // level 2): the jobs come back as cancelled and go to other workers.
    let ids: Vec<String> = held.iter().map(|j| j.job_id.clone()).collect();
    let t0 = Instant::now();
    let cancelled = loop {
        let c = heartbeat(&mut h, &hid, &ids).await.unwrap();
        if c.len() == ids.len() {
            break c;
        }
        assert!(t0.elapsed() < HANG, "leases never ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(cancelled.len(), 3);
    eprintln!(
        "hoarder: {} of {queued} queued jobs for 5 x 256 slots; leases ended {:?} into heartbeats (maximum 1.5 s)",
        held.len(),
        t0.elapsed()
    );
    let s = status(&mut a).await;
    assert_eq!(s.workers_total, 2, "the hoarder is still registered");
    // Release hands jobs back at once.
    let mine: Vec<String> = lease(&mut h, &hid, 3)
        .await
        .unwrap()
        .iter()
        .map(|j| j.job_id.clone())
        .collect();
    assert_eq!(mine.len(), 3);
    let in_flight = status(&mut a).await.in_flight;
    let r =
        h.c.release(pb::ReleaseRequest {
            identity: Some(h.ident.clone()),
            worker_id: hid.clone(),
            job_ids: mine,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.released, 3);
    assert_eq!(status(&mut a).await.in_flight, in_flight - 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_flood_is_limited() {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 10);
    let port = free_port();
    // Anonymous (loopback, no credentials), 20 registrations a minute per address.
    let _c = coordinator(
        dir.path(),
        port,
        None,
        &["--registrations-per-minute", "20"],
    );
    let mut w = client(port, "").await;
    let (mut ok, mut limited) = (0, 0);
    let long = "n".repeat(1000);
    for _ in 0..2000 {
        match register(&mut w, &long, 1).await {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
                limited += 1;
            }
        }
    }
    // The burst, plus one every 3 s while the flood lasts.
    assert!((20..=25).contains(&ok), "accepted {ok}");
    assert_eq!(ok + limited, 2000);
    eprintln!("registration flood: {ok} of 2000 accepted, {limited} refused (ResourceExhausted)");
    // The status stays small: one page of workers, names cut.
    let mut a = admin_as(port, ADMIN).await;
    let s = status(&mut a).await;
    assert_eq!(s.workers_total, ok as u64);
    assert!(s.workers.iter().all(|w| w.name.chars().count() <= 65));
    let page = a
        .get_status(pb::GetStatusRequest {
            worker_offset: 5,
            worker_limit: 3,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.workers.len(), 3);
    assert_eq!(page.workers[0].worker_id, s.workers[5].worker_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_unauthenticated_upload_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 10);
    let port = free_port();
    let c = coordinator(dir.path(), port, None, &[]);
    let mut a = admin_as(port, ADMIN).await;
    status(&mut a).await;
    let rss0 = c.status_kb("VmRSS");
    // Two 250 MB imports at once, with no token and with a wrong one.
    let data = vec![0u8; 250 << 20];
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for token in ["", "wrong"] {
        let data = data.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = admin_as(port, token)
                .await
                .max_encoding_message_size(usize::MAX);
            c.import_book(pb::ImportBookRequest { data }).await
        }));
    }
    for t in tasks {
        let e = t.await.unwrap().unwrap_err();
        assert!(
            matches!(
                e.code(),
                Code::Unauthenticated | Code::Cancelled | Code::Unknown
            ),
            "{e}"
        );
    }
    let elapsed = t0.elapsed();
    let peak = c.status_kb("VmHWM");
    assert!(
        peak < rss0 + 64 * 1024,
        "coordinator peak RSS {peak} kB vs {rss0} kB before the uploads"
    );
    // Still serving; the book is untouched.
    assert_eq!(status(&mut a).await.positions, 1);
    eprintln!(
        "2 x 250 MB unauthenticated imports refused in {elapsed:?}; coordinator RSS {rss0} kB before, peak {peak} kB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_lock_out_a_worker() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 8);
    let port = free_port();
    // The file limit of the systemd unit that was locked out (1,024), a connection cap below
    // it and a short handshake timeout: 2,000 idle connections fill every slot, and the
    // timeout has to free them.
    let mut args: Vec<String> = [
        "-c",
        "ulimit -n 1024 && exec \"$0\" \"$@\"",
        COORD,
        "--db",
        &dir.path().display().to_string(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--admin-token",
        ADMIN,
        "--max-connections",
        "900",
        "--handshake-timeout-ms",
        "2000",
        "--eval-hash",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(eval_hash(&eval));
    let log = dir.path().join("coordinator.log");
    let env = [("RUST_LOG", "info"), ("NO_COLOR", "1")];
    let mut c = Proc::spawn_logged("sh", &args, &env, &log);
    let mut a = admin_as(port, ADMIN).await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", c.0.id())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains(" 1024 ")),
        "{limits}"
    );
    start_deviate(&mut a, 2, 4).await;
    let mut idle = Vec::new();
    for _ in 0..2000 {
        idle.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap(),
        );
    }
    let t0 = Instant::now();
    let _w = worker_proc(port, &eval, "honest", "");
    let s = wait_for(
        &mut admin_as(port, ADMIN).await,
        Duration::from_secs(60),
        done,
    )
    .await;
    assert!(s.positions > 10, "{s:?}");
    eprintln!(
        "2000 idle connections (1024 files, cap 900): worker built {} positions in {:?}",
        s.positions,
        t0.elapsed()
    );
    drop(idle);

    // SIGTERM does not wait for idle connections (HTTP/2 clients that keep theirs open).
    let mut clients = Vec::new();
    for _ in 0..50 {
        let mut a = admin_as(port, ADMIN).await;
        status(&mut a).await;
        clients.push(a);
    }
    // The clients stay connected until the test ends: a coordinator that waited for them
    // would never exit (the limit only stops that hang). It exits cleanly, its store flushed.
    let t0 = Instant::now();
    let st = c.terminate_within(HANG).await;
    assert!(st.success(), "{st:?}");
    eprintln!(
        "SIGTERM with 50 idle HTTP/2 clients: exited in {:?}",
        t0.elapsed()
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("coordinator stopped, store flushed"),
        "no clean stop logged: {text}"
    );
    drop(clients);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_strings_cannot_forge_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 10);
    let port = free_port();
    let log = dir.path().join("coordinator.log");
    let args = serve_args(dir.path(), port, &["--admin-token", ADMIN]);
    let env = [("RUST_LOG", "info"), ("NO_COLOR", "1")];
    let _c = Proc::spawn_logged(COORD, &args, &env, &log);
    let forged = "2030-01-01T00:00:00Z  INFO forged: admin granted";
    let mut w = client(port, "").await;
    let name = format!("evil\n{forged}\n{}", "x".repeat(3 << 20));
    let id = register(&mut w, &name, 1).await.unwrap();
    let job = lease(&mut w, &id, 1).await.unwrap().remove(0);
    let reason = format!("boom\r\n{forged}\u{1b}[2J");
    fail(&mut w, &id, &job.job_id, &reason).await.unwrap();
    let mut a = admin_as(port, ADMIN).await;
    let s = status(&mut a).await;
    assert!(
        s.workers[0].name.starts_with("evil\\n2030"),
        "{:?}",
        s.workers[0].name
    );
    assert!(s.workers[0].name.chars().count() <= 65);
    // Give the log a moment to reach the file.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let text = std::fs::read_to_string(&log).unwrap();
    // The forged text stays inside the lines that log the name and the reason.
    for event in ["worker registered", "job failed"] {
        let line = text
            .lines()
            .find(|l| l.contains(event))
            .unwrap_or_else(|| panic!("{event} is logged: {text}"));
        assert!(line.contains("forged: admin granted"), "{line}");
    }
    for line in text.lines() {
        assert!(!line.starts_with("2030-01-01"), "forged line: {line}");
        assert!(!line.contains("\u{1b}[2J"), "raw escape sequence: {line:?}");
        assert!(line.len() < 2000, "line of {} bytes", line.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failure_report_does_not_quarantine() {
    let Some(eval) = eval_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 10);
    // Only trusted owners' reports count toward quarantine (untrusted ones only release
    // their lease): mallory and bob are trusted here, eve is not.
    let m = add_credential(dir.path(), "m", "mallory", true);
    let m2 = add_credential(dir.path(), "m2", "mallory", true);
    let b = add_credential(dir.path(), "b", "bob", true);
    let e = add_credential(dir.path(), "e", "eve", false);
    let honest = add_credential(dir.path(), "honest", "alice", true);
    let port = free_port();
    let _c = coordinator(dir.path(), port, Some(&eval), &[]);
    let mut a = admin_as(port, ADMIN).await;
    start_deviate(&mut a, 2, 4).await;
    // Two credentials of one owner report the root search as failed (not retryable).
    let mut root = String::new();
    for t in [&m, &m2] {
        let mut w = client_with(port, t, Some(&eval)).await;
        let id = register(&mut w, "m", 1).await.unwrap();
        let job = lease(&mut w, &id, 1).await.unwrap().remove(0);
        root = job.job_id.clone();
        assert!(!fail(&mut w, &id, &job.job_id, "nope").await.unwrap());
    }
    let s = status(&mut a).await;
    assert_eq!((s.quarantined_total, s.queued), (0, 1), "{s:?}");
    // An untrusted second owner's report does not.
    let mut w = client_with(port, &e, Some(&eval)).await;
    let id = register(&mut w, "e", 1).await.unwrap();
    let job = lease(&mut w, &id, 1).await.unwrap().remove(0);
    assert_eq!(job.job_id, root);
    assert!(!fail(&mut w, &id, &job.job_id, "nope").await.unwrap());
    let s = status(&mut a).await;
    assert_eq!((s.quarantined_total, s.queued), (0, 1), "{s:?}");
    // A trusted second owner's report does quarantine; the admin releases it.
    let mut w = client_with(port, &b, Some(&eval)).await;
    let id = register(&mut w, "b", 1).await.unwrap();
    let job = lease(&mut w, &id, 1).await.unwrap().remove(0);
    assert_eq!(job.job_id, root);
    assert!(fail(&mut w, &id, &job.job_id, "crash").await.unwrap());
    assert_eq!(status(&mut a).await.quarantined_total, 1);
    let r = a
        .release_quarantine(pb::ReleaseQuarantineRequest {
            all: true,
            positions: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.released, 1);
    // The honest worker builds the whole book.
    let _w = worker_proc(port, &eval, "honest", &honest);
    let s = wait_for(&mut a, Duration::from_secs(120), done).await;
    assert!(s.positions > 20, "{s:?}");
    assert_eq!(s.quarantined_total, 0);
    eprintln!(
        "after one owner's failure reports: book done with {} positions",
        s.positions
    );
    check_book(&export(&mut a).await);
}
