//! Wiring: open the store, serve gRPC (worker + admin + health) and HTTP, expire leases, and
//! shut down cleanly (stop accepting, flush the store).

use crate::error::{CoordinatorError, Result};
use crate::grpc::{AdminApi, WorkerApi};
use crate::service::{Clock, Coordinator, ServiceConfig, SystemClock};
use crate::store::Store;
use bookfarm_proto::MAX_MESSAGE_BYTES;
use bookfarm_proto::pb::admin_service_server::AdminServiceServer;
use bookfarm_proto::pb::worker_service_server::WorkerServiceServer;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// How often silent workers' leases are checked.
pub const REAPER_INTERVAL: Duration = Duration::from_secs(1);

/// Largest admin message (book imports travel in one message).
pub const MAX_ADMIN_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// Open the store at `db` and the service over it (with the real clock).
pub fn open(db: &Path, cfg: ServiceConfig) -> Result<Coordinator> {
    open_with_clock(db, cfg, Arc::new(SystemClock::default()))
}

/// Open with an injected clock.
pub fn open_with_clock(
    db: &Path,
    cfg: ServiceConfig,
    clock: Arc<dyn Clock>,
) -> Result<Coordinator> {
    let store = Store::open(db)?;
    let c = Coordinator::open(store, db, cfg, clock)?;
    let s = c.status();
    tracing::info!(db = %db.display(), positions = s.positions, queued = s.queued, state = s.state.as_str(), "store opened");
    Ok(c)
}

/// Serve until `shutdown` resolves: gRPC on `grpc`, HTTP on `http` (if any). In-flight RPCs
/// finish; the store is flushed before returning.
pub async fn run(
    c: Coordinator,
    grpc: TcpListener,
    http: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    run_with_tls(c, grpc, http, None, shutdown).await
}

/// A PEM certificate chain and private key for the gRPC port.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// Certificate chain (PEM).
    pub cert_pem: Vec<u8>,
    /// Private key (PEM).
    pub key_pem: Vec<u8>,
}

/// [`run`] with optional TLS (rustls) on the gRPC port; HTTP stays plain (keep it internal).
pub async fn run_with_tls(
    c: Coordinator,
    grpc: TcpListener,
    http: Option<TcpListener>,
    tls: Option<TlsIdentity>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let wait_stop = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        while !*rx.borrow() {
            if rx.changed().await.is_err() {
                break;
            }
        }
    };

    let reaper = {
        let c = c.clone();
        let stop = wait_stop(stop_rx.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(REAPER_INTERVAL);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tick.tick() => { c.expire_leases(); }
                }
            }
        })
    };

    let http_task = match http {
        Some(l) => {
            let _ = crate::http::metrics_handle();
            let app = crate::http::router(c.clone());
            let stop = wait_stop(stop_rx.clone());
            tracing::info!(addr = %l.local_addr().map(|a| a.to_string()).unwrap_or_default(), "http listening");
            Some(tokio::spawn(async move {
                axum::serve(l, app).with_graceful_shutdown(stop).await
            }))
        }
        None => None,
    };

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<WorkerServiceServer<WorkerApi>>()
        .await;
    health_reporter
        .set_serving::<AdminServiceServer<AdminApi>>()
        .await;

    let worker = WorkerServiceServer::new(WorkerApi(c.clone()))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let admin = AdminServiceServer::new(AdminApi(c.clone()))
        .max_decoding_message_size(MAX_ADMIN_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    tracing::info!(addr = %grpc.local_addr().map(|a| a.to_string()).unwrap_or_default(), "grpc listening");
    let mut builder = tonic::transport::Server::builder();
    if let Some(t) = tls {
        builder = builder
            .tls_config(
                tonic::transport::ServerTlsConfig::new()
                    .identity(tonic::transport::Identity::from_pem(t.cert_pem, t.key_pem)),
            )
            .map_err(|e| CoordinatorError::Internal(format!("tls configuration: {e}")))?;
    }
    let served = builder
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        .add_service(health_service)
        .add_service(worker)
        .add_service(admin)
        .serve_with_incoming_shutdown(TcpListenerStream::new(grpc), wait_stop(stop_rx.clone()))
        .await;
    reaper.abort();
    if let Some(t) = http_task {
        let _ = t.await;
    }
    let c2 = c.clone();
    tokio::task::spawn_blocking(move || c2.flush())
        .await
        .map_err(|e| CoordinatorError::Internal(format!("flush task: {e}")))??;
    tracing::info!("coordinator stopped, store flushed");
    served.map_err(|e| CoordinatorError::Internal(format!("grpc server: {e}")))
}
