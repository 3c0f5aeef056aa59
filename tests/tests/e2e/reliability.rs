//! Reliability without a credential (issue 40): connection floods from one address on both
//! ports, a readiness probe that says no when the gRPC port is full, and SIGTERM with a partial
//! HTTP request open, each against a real coordinator process on 127.0.0.1 (floods come from
//! other loopback addresses, 127.0.0.2 and up).

use bookfarm_proto::auth::Bearer;
use bookfarm_proto::pb;
use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use bookfarm_tests::*;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tonic::transport::{Channel, Endpoint};

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const ADMIN: &str = "admin-s3cret";
/// The bound: an admin call answers, and a worker registers, within 5 s during a flood.
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
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 8);
    let (port, http) = (free_port(), free_port());
    let _c = coordinator(
        dir.path(),
        port,
        http,
        &[
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
        ],
    );
    // Up before the floods.
    status(&mut admin_as(port, ADMIN).await).await;
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
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 8);
    let (port, http) = (free_port(), free_port());
    let _c = coordinator(
        dir.path(),
        port,
        http,
        &[
            "--max-connections",
            "6",
            "--max-connections-per-address",
            "3",
            "--handshake-timeout-ms",
            "600000",
        ],
    );
    status(&mut admin_as(port, ADMIN).await).await;
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
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 8);
    let (port, http) = (free_port(), free_port());
    let mut c = coordinator(
        dir.path(),
        port,
        http,
        &["--handshake-timeout-ms", "600000"],
    );
    status(&mut admin_as(port, ADMIN).await).await;
    let mut partial = TcpStream::connect(("127.0.0.1", http)).await.unwrap();
    partial
        .write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // A complete keep-alive request before it, so the HTTP server is surely serving.
    let (code, _) = http_get(http, "/healthz").await.unwrap();
    assert_eq!(code, 200);
    let t0 = Instant::now();
    let st = c.terminate_within(HANG).await;
    assert!(st.success(), "{st:?}");
    let log = std::fs::read_to_string(dir.path().join("coordinator.log")).unwrap();
    assert!(log.contains("coordinator stopped, store flushed"), "{log}");
    eprintln!(
        "SIGTERM with a partial HTTP request: exited in {:?}",
        t0.elapsed()
    );
    drop(partial);
}
