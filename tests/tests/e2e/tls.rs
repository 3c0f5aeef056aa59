//! TLS on the gRPC port: a worker that trusts the cluster CA builds a book over `https://`; a
//! plaintext client cannot talk to the TLS port.

use bookfarm_coordinator::server::{self, TlsIdentity};
use bookfarm_coordinator::service::ServiceConfig;
use bookfarm_tests::*;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A private CA and a leaf certificate for 127.0.0.1/localhost (webpki rejects a self-signed
/// CA:TRUE certificate as server certificate, so a CA plus a leaf is needed).
fn make_certs(dir: &Path) {
    let run = |args: &[&str]| {
        let ok = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command line tool is needed to make test certificates");
        assert!(
            ok.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=bookfarm test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_builds_a_book_over_tls() {
    let Some(eval) = eval_path() else { return };
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path());
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 1, 8);
    let c = server::open(dir.path(), ServiceConfig::default()).unwrap();
    c.start(bookfarm_book::program::Program::new(
        bookfarm_book::program::Operation::Deviate {
            params: bookfarm_book::select::Deviate::new(2, 4),
        },
    ))
    .unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let tls = TlsIdentity {
        cert_pem: std::fs::read(certs.path().join("leaf.pem")).unwrap(),
        key_pem: std::fs::read(certs.path().join("leaf.key")).unwrap(),
    };
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let srv = tokio::spawn(server::serve(
        bookfarm_coordinator::live::Live::fixed(
            c.clone(),
            bookfarm_coordinator::identity::Identities::local(),
        ),
        l,
        None,
        server::ServeOptions {
            tls: Some(tls),
            ..server::ServeOptions::default()
        },
        async {
            let _ = rx.await;
        },
    ));

    // Plaintext against the TLS port fails.
    let plain = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await;
    // A plaintext call is never answered: it fails, or (the client's HTTP/2 handshake left
    // waiting by a server that closed the connection) never completes; bounded so that the
    // test cannot hang on it.
    if let Ok(ch) = plain {
        let mut a = bookfarm_proto::pb::admin_service_client::AdminServiceClient::new(ch);
        let call = tokio::time::timeout(
            Duration::from_secs(5),
            a.get_status(bookfarm_proto::pb::GetStatusRequest::default()),
        )
        .await;
        assert!(!matches!(call, Ok(Ok(_))), "a plaintext call was answered");
    }

    let weights = Arc::new(bookfarm_engine::eval::Eval::load(&eval).unwrap());
    let cfg = bookfarm_worker::WorkerConfig {
        coordinator: format!("https://localhost:{port}"),
        tls_ca: Some(std::fs::read(certs.path().join("ca.pem")).unwrap()),
        eval_hash: eval_hash(&eval),
        search_signature: bookfarm_runner::signature(&weights, &eval_hash(&eval)),
        ..bookfarm_worker::WorkerConfig::default()
    };
    let (wstop, mut wrx) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(bookfarm_worker::run(
        cfg,
        bookfarm_runner::exec::engine_factory(weights),
        async move {
            while !*wrx.borrow() {
                if wrx.changed().await.is_err() {
                    break;
                }
            }
        },
    ));
    let t0 = std::time::Instant::now();
    while c.status().state.as_str() != "done" {
        assert!(t0.elapsed() < Duration::from_secs(120), "{:?}", c.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = wstop.send(true);
    let stats = worker.await.unwrap().unwrap();
    assert!(stats.accepted > 10, "{stats:?}");
    assert_eq!(stats.accepted, c.status().completed);
    let _ = stop.send(());
    srv.await.unwrap().unwrap();
}
