//! Reliability (issue 40): connection floods from one address on both ports, a readiness probe
//! that says no when the gRPC port is full, and SIGTERM with a partial HTTP request open, each
//! against a real coordinator process on 127.0.0.1 (floods come from other loopback addresses,
//! 127.0.0.2 and up); and a full disk that heals without a restart (a coordinator process on a
//! small tmpfs in a mount namespace of its own, with real workers).

use bookfarm_proto::auth::Bearer;
use bookfarm_proto::pb;
use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use bookfarm_tests::*;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tonic::transport::{Channel, Endpoint};

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const WORKER: &str = env!("CARGO_BIN_EXE_bft-worker");
const ADMIN: &str = "admin-s3cret";
/// The issue's bound: an admin call answers, and a worker registers, within 5 s during a flood.
const BOUND: Duration = Duration::from_secs(5);
/// How long a wait may last before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

fn coordinator(db: &Path, port: u16, http: u16, extra: &[&str]) -> Proc {
    let mut args: Vec<String> = vec![
        "--db".into(),
        db.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--http".into(),
        format!("127.0.0.1:{http}"),
        "--admin-token".into(),
        ADMIN.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let log = db.join("coordinator.log");
    Proc::spawn_logged(
        COORD,
        &args,
        &[("RUST_LOG", "info"), ("NO_COLOR", "1")],
        &log,
    )
}

/// A coordinator process on a new level-2, depth-8 book, started with `extra` arguments and
/// answering (an admin status call went through).
struct Serving {
    dir: tempfile::TempDir,
    port: u16,
    http: u16,
    proc: Proc,
}

async fn serving(extra: &[&str]) -> Serving {
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 8);
    let (port, http) = (free_port(), free_port());
    let proc = coordinator(dir.path(), port, http, extra);
    status(&mut admin_as(port, ADMIN).await).await;
    Serving {
        dir,
        port,
        http,
        proc,
    }
}

/// A TCP connection to `127.0.0.1:port` from the loopback address `src`.
async fn tcp_from(src: IpAddr, port: u16) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(src, 0))?;
    s.connect(SocketAddr::from(([127, 0, 0, 1], port))).await
}

/// An HTTP/2 connection from `src` that completes its handshake and then answers pings but asks
/// nothing (tonic's client does both).
async fn h2_from(src: IpAddr, port: u16) -> Option<Channel> {
    let ep = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .ok()?
        .connect_timeout(Duration::from_secs(2));
    ep.connect_with_connector(tower::service_fn(
        move |_: tonic::transport::Uri| async move {
            tcp_from(src, port).await.map(hyper_util::rt::TokioIo::new)
        },
    ))
    .await
    .ok()
}

/// GET `path` from the HTTP port (from 127.0.0.1): status code and body.
async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, text))
}

fn worker_identity() -> pb::WorkerIdentity {
    pb::WorkerIdentity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: String::new(),
        search_signature: bookfarm_engine::search::SearchSignature::new(
            &bookfarm_engine::search::SearchOptions::default(),
            "",
        )
        .to_string(),
    }
}

/// A fresh connection from 127.0.0.1, a worker registration and an admin status call, each
/// within [`BOUND`].
async fn register_and_status(port: u16) -> Result<(), String> {
    let t0 = Instant::now();
    let ch = tokio::time::timeout(
        BOUND,
        Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .map_err(|e| e.to_string())?
            .connect(),
    )
    .await
    .map_err(|_| "connecting took more than 5 s".to_string())?
    .map_err(|e| format!("connecting: {e}"))?;
    let mut w = WorkerServiceClient::with_interceptor(ch.clone(), Bearer::new("").unwrap());
    let reg = tokio::time::timeout(
        BOUND,
        w.register_worker(pb::RegisterWorkerRequest {
            identity: Some(worker_identity()),
            name: "honest".into(),
            threads: 1,
            ..Default::default()
        }),
    )
    .await
    .map_err(|_| format!("registration: no answer after {:?}", t0.elapsed()))?
    .map_err(|e| format!("registration refused: {e}"))?;
    assert!(!reg.into_inner().worker_id.is_empty());
    let mut a = pb::admin_service_client::AdminServiceClient::with_interceptor(
        ch,
        Bearer::new(ADMIN).unwrap(),
    );
    tokio::time::timeout(BOUND, a.get_status(pb::GetStatusRequest::default()))
        .await
        .map_err(|_| format!("status: no answer after {:?}", t0.elapsed()))?
        .map_err(|e| format!("status refused: {e}"))?;
    Ok(())
}

/// Keeps `n` connections from `src` open, opening new ones as the coordinator closes them:
/// `kind` "h2" (handshake done, pings answered, no request), "tls" (a TLS hello cut short) or
/// "http" (a partial HTTP/1 request).
fn flood(
    kind: &'static str,
    src: IpAddr,
    port: u16,
    n: usize,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut h2: Vec<Channel> = Vec::new();
        let mut raw: Vec<TcpStream> = Vec::new();
        let mut round = 0u32;
        while !stop.load(Ordering::SeqCst) {
            // Drop the connections the coordinator closed.
            raw.retain(|s| {
                let mut b = [0u8; 1];
                matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            });
            // A channel does not reconnect until used: replace them all every 2 s (after the
            // coordinator's handshake timeout, so that it is the one to close them).
            round += 1;
            if round.is_multiple_of(10) {
                h2.clear();
            }
            while h2.len() + raw.len() < n && !stop.load(Ordering::SeqCst) {
                match kind {
                    "h2" => match h2_from(src, port).await {
                        Some(c) => h2.push(c),
                        None => break,
                    },
                    _ => {
                        let Ok(mut s) = tcp_from(src, port).await else {
                            break;
                        };
                        let bytes: Vec<u8> = if kind == "tls" {
                            // A TLS record header and the start of a ClientHello.
                            let mut b = vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc];
                            b.extend([0x03, 0x03]);
                            b.extend([0x5a; 60]);
                            b
                        } else {
                            b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: ".to_vec()
                        };
                        if s.write_all(&bytes).await.is_err() {
                            break;
                        }
                        raw.push(s);
                    }
                }
                opened.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// The floods of the audit, from one address each, while a worker registers and an admin call
/// answers: HTTP/2 clients that answer pings, unfinished TLS handshakes, partial HTTP requests.
/// Each flood asks for more connections than the whole gRPC cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_from_one_address_lock_nobody_out() {
    // Up before the floods.
    let c = serving(&[
        "--max-connections",
        "300",
        "--max-http-connections",
        "100",
        "--max-connections-per-address",
        "40",
        "--handshake-timeout-ms",
        "1500",
        "--idle-timeout-ms",
        "3000",
    ])
    .await;
    let (port, http) = (c.port, c.http);
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let floods = [
        flood(
            "h2",
            [127, 0, 0, 2].into(),
            port,
            400,
            stop.clone(),
            opened.clone(),
        ),
        flood(
            "tls",
            [127, 0, 0, 3].into(),
            port,
            400,
            stop.clone(),
            opened.clone(),
        ),
        flood(
            "http",
            [127, 0, 0, 4].into(),
            http,
            300,
            stop.clone(),
            opened.clone(),
        ),
    ];
    // Let the floods fill what they can, then check for longer than the handshake and idle
    // timeouts (the floods keep refilling).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t0 = Instant::now();
    let mut rounds = 0;
    while t0.elapsed() < Duration::from_secs(8) {
        register_and_status(port)
            .await
            .unwrap_or_else(|e| panic!("round {rounds} during the floods: {e}"));
        let (code, body) = tokio::time::timeout(BOUND, http_get(http, "/readyz"))
            .await
            .expect("/readyz answers within 5 s")
            .expect("/readyz");
        assert_eq!(code, 200, "{body}");
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for f in floods {
        f.await.unwrap();
    }
    eprintln!(
        "{rounds} rounds (register + status + /readyz) answered during floods of {} connection attempts",
        opened.load(Ordering::SeqCst)
    );
    assert!(rounds >= 3);
}

/// `/readyz` says no while every gRPC slot is taken, and yes again when they free up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_no_while_the_grpc_port_is_full() {
    let c = serving(&[
        "--max-connections",
        "6",
        "--max-connections-per-address",
        "3",
        "--handshake-timeout-ms",
        "600000",
    ])
    .await;
    let (port, http) = (c.port, c.http);
    let (code, body) = http_get(http, "/readyz").await.unwrap();
    assert_eq!(code, 200, "{body}");
    // Three addresses, three connections each: more than the 6 slots.
    let mut held = Vec::new();
    for a in 2..5u8 {
        for _ in 0..3 {
            if let Ok(s) = tcp_from([127, 0, 0, a].into(), port).await {
                held.push(s);
            }
        }
    }
    let t0 = Instant::now();
    let body = loop {
        let (code, body) = http_get(http, "/readyz").await.unwrap();
        if code == 503 {
            break body;
        }
        assert!(
            t0.elapsed() < HANG,
            "still ready with every slot taken: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(body.contains("gRPC connection slot"), "{body}");
    drop(held);
    let t0 = Instant::now();
    loop {
        let (code, body) = http_get(http, "/readyz").await.unwrap();
        if code == 200 {
            break;
        }
        assert!(t0.elapsed() < HANG, "not ready again: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SIGTERM stops a coordinator that has a partial HTTP request open (with a handshake timeout
/// far beyond the test, only the shutdown's own bound can end that connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_partial_http_request_open() {
    let mut c = serving(&["--handshake-timeout-ms", "600000"]).await;
    let http = c.http;
    let mut partial = TcpStream::connect(("127.0.0.1", http)).await.unwrap();
    partial
        .write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // A complete keep-alive request before it, so the HTTP server is surely serving.
    let (code, _) = http_get(http, "/healthz").await.unwrap();
    assert_eq!(code, 200);
    let t0 = Instant::now();
    let st = c.proc.terminate_within(HANG).await;
    assert!(st.success(), "{st:?}");
    let log = std::fs::read_to_string(c.dir.path().join("coordinator.log")).unwrap();
    assert!(log.contains("coordinator stopped, store flushed"), "{log}");
    eprintln!(
        "SIGTERM with a partial HTTP request: exited in {:?}",
        t0.elapsed()
    );
    drop(partial);
}

/// The book of the full-disk test: level, depth, and the deviate window. sled writes its log
/// into the pages it holds already, also on a full disk, so the store fails only once the log
/// needs a new segment (512 KiB; the first is written whole when the store is created): this
/// build's store grows to about 5.7 MB, and its log leaves the first segment at about 1,900 of
/// its results, well before the end.
const DISK_BOOK: (u8, u8, i32, i32) = (1, 18, 2, 4);
/// Size of the coordinator's tmpfs (the store of [`DISK_BOOK`] takes about 0.5 MB of it when
/// it is filled).
const DISK_SIZE: &str = "32m";
/// Results acknowledged before the disk is filled.
const DISK_FILL_AFTER: u64 = 20;

/// Runs `"$@"` (the coordinator) with the store `$2` copied onto a tmpfs of [`DISK_SIZE`]
/// mounted at `$1` (visible only in this mount namespace), forwards SIGTERM to it, and once it
/// has exited copies the store to `$3` (the tmpfs goes with the namespace).
const ON_TMPFS: &str = r#"mnt=$1; src=$2; out=$3; shift 3
mount -t tmpfs -o size=$SIZE tmpfs "$mnt" || exit 101
cp -a "$src"/. "$mnt"/ || exit 102
"$@" &
pid=$!
trap 'kill -TERM $pid' TERM
wait $pid
rc=$?
if kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; fi
cp -a "$mnt"/. "$out"/ || exit 103
exit $rc"#;

/// Whether a process may mount a tmpfs in a mount namespace of its own here (`unshare -rm`, no
/// root needed where user namespaces are allowed), and `setpriv` ties a child to its parent.
fn tmpfs_namespace() -> Result<(), String> {
    let d = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = std::process::Command::new("unshare")
        .args(["-rm", "setpriv", "--pdeathsig", "KILL", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=1m tmpfs "$0" && touch "$0/x""#)
        .arg(d.path())
        .output()
        .map_err(|e| format!("unshare: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`unshare -rm` + `mount -t tmpfs`: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Fill the file system of `path` with zeros until it is full; the bytes written.
fn fill(path: &Path) -> u64 {
    use std::io::Write;
    let mut f = std::fs::File::create(path).expect("filler file");
    let chunk = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(k) => n += k as u64,
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // A partial page may still fit.
    while let Ok(k) = f.write(&[0u8; 512]) {
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    n
}

/// Wait until `GET /readyz` answers `code`; its body.
async fn readyz_is(http: u16, code: u16) -> String {
    let t0 = Instant::now();
    loop {
        if let Ok((c, body)) = http_get(http, "/readyz").await
            && c == code
        {
            return body;
        }
        assert!(t0.elapsed() < HANG, "/readyz never answered {code}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait until the log at `log` holds `text`.
async fn logged(log: &Path, text: &str) {
    let t0 = Instant::now();
    while !std::fs::read_to_string(log).is_ok_and(|l| l.contains(text)) {
        assert!(
            t0.elapsed() < HANG,
            "the coordinator never logged {text:?}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The job ids the workers were told were stored (their `--ack-log`).
fn acked(log: &Path) -> std::collections::HashSet<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A full disk heals without a restart: a coordinator process whose store is on a small tmpfs
/// builds with two worker processes; the tmpfs is filled until the store fails (results are
/// refused, `/readyz` says 503); the filler is removed, and the same process reopens its store
/// by itself: `/readyz` 200 again, the workers' results accepted again, the build finished to
/// the book of an undisturbed build, and every result acknowledged to a worker in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_heals_without_a_restart() {
    let Some(eval) = eval_path() else { return };
    if let Err(why) = tmpfs_namespace() {
        assert!(
            std::env::var_os(bookfarm_engine::testdata::REQUIRE_ENV).is_none(),
            "the full-disk test cannot run: it needs a tmpfs in a mount namespace of its own \
             ({why})"
        );
        eprintln!("skipped: the full-disk test needs a tmpfs in a mount namespace ({why})");
        return;
    }
    let (level, depth, rel, abs) = DISK_BOOK;
    let hash = eval_hash(&eval);
    let dir = tempfile::tempdir().unwrap();
    // The undisturbed build.
    let reference = {
        let db = dir.path().join("reference");
        new_store(&db, level, depth);
        let port = free_port();
        let mut c = Proc::spawn(COORD, &serve_args(&db, port, &["--eval-hash", &hash]));
        let mut a = admin(port).await;
        start_deviate(&mut a, rel, abs).await;
        let _w = Proc::spawn(WORKER, &worker_args(port, &eval, "r1"));
        wait_for(&mut a, HANG, done).await;
        let book = check_book(&export(&mut a).await);
        assert!(c.terminate_within(HANG).await.success());
        book
    };
    // The same build on a tmpfs.
    let src = dir.path().join("src");
    new_store(&src, level, depth);
    let (mnt, after) = (dir.path().join("mnt"), dir.path().join("after"));
    std::fs::create_dir(&mnt).unwrap();
    std::fs::create_dir(&after).unwrap();
    let (port, http) = (free_port(), free_port());
    let mut args: Vec<String> = ["-rm", "sh", "-c", ON_TMPFS, "sh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for p in [&mnt, &src, &after] {
        args.push(p.display().to_string());
    }
    // The coordinator dies with the shell (a test that fails leaves no process behind).
    args.extend(["setpriv", "--pdeathsig", "KILL", COORD].map(String::from));
    args.extend(serve_args(
        &mnt,
        port,
        &["--eval-hash", &hash, "--http", &format!("127.0.0.1:{http}")],
    ));
    let log = dir.path().join("coordinator.log");
    let mut c = Proc::spawn_logged(
        "unshare",
        &args,
        &[("RUST_LOG", "info"), ("NO_COLOR", "1"), ("SIZE", DISK_SIZE)],
        &log,
    );
    // The store as the coordinator's mount namespace sees it.
    let store = PathBuf::from(format!("/proc/{}/root{}", c.0.id(), mnt.display()));
    let mut a = admin(port).await;
    start_deviate(&mut a, rel, abs).await;
    let acks = dir.path().join("acks.log");
    let worker = |name: &str| {
        let mut args = worker_args(port, &eval, name);
        args.extend(["--ack-log".to_string(), acks.display().to_string()]);
        Proc::spawn(WORKER, &args)
    };
    let (_w1, _w2) = (worker("w1"), worker("w2"));
    wait_for(&mut a, HANG, |s| s.completed >= DISK_FILL_AFTER).await;
    // The disk fills up: the store fails, results are refused.
    let filler = store.join("filler");
    let filled = fill(&filler);
    logged(&log, "the store failed").await;
    let body = readyz_is(http, 503).await;
    let before = acked(&acks).len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let full = acked(&acks).len();
    assert_eq!(
        before, full,
        "results were acknowledged while the store had failed"
    );
    assert!(
        !done(&status(&mut a).await),
        "the build was meant to be unfinished"
    );
    // Space comes back: the same process reopens its store and goes on.
    std::fs::remove_file(&filler).unwrap();
    readyz_is(http, 200).await;
    logged(&log, "store reopened").await;
    let mut a = admin(port).await;
    wait_for(&mut a, HANG, done).await;
    let healed = check_book(&export(&mut a).await);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        log_text.matches("grpc listening").count(),
        1,
        "the coordinator was restarted: {log_text}"
    );
    assert!(
        acked(&acks).len() > full,
        "no result was accepted after the heal"
    );
    assert_eq!(sorted(&reference).len(), sorted(&healed).len());
    assert!(
        sorted(&reference) == sorted(&healed),
        "the healed build's book differs from the undisturbed one"
    );
    // Every acknowledged result is in the store (copied out once the coordinator stopped).
    assert!(c.terminate_within(HANG).await.success(), "{log_text}");
    let acked = acked(&acks);
    {
        let s = bookfarm_coordinator::store::Store::open(&after).unwrap();
        let loaded = s.load(&after).unwrap();
        let stored: std::collections::HashSet<String> =
            loaded.done.iter().map(|u| u.to_string()).collect();
        let lost: Vec<_> = acked.difference(&stored).collect();
        assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    }
    eprintln!(
        "full disk: {filled} filler bytes; {full} results acknowledged before, {} in all; \
         while full /readyz said {body:?}",
        acked.len()
    );
}
