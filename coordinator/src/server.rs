//! Wiring: open the store, serve gRPC (worker + admin + health) and HTTP, expire leases and
//! sessions, and shut down cleanly (stop accepting, finish in-flight requests without waiting
//! for idle connections, flush the store).

use crate::error::{CoordinatorError, Result};
use crate::identity::{Identities, IdentityConfig};
use crate::live::Live;
use crate::rpc::conn::{Admission, ConnLimits, HttpListener};
use crate::rpc::{AdminApi, EnrolmentApi, MAX_ENROL_MESSAGE_BYTES, WorkerApi};
use crate::service::{Clock, Coordinator, ServiceConfig, SystemClock};
use crate::store::Store;
use bookfarm_proto::MAX_MESSAGE_BYTES;
use bookfarm_proto::pb::admin_service_server::AdminServiceServer;
use bookfarm_proto::pb::enrolment_service_server::EnrolmentServiceServer;
use bookfarm_proto::pb::worker_service_server::WorkerServiceServer;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;

/// How often silent workers' leases are checked.
pub const REAPER_INTERVAL: Duration = Duration::from_secs(1);

/// Largest admin message (book imports travel in one message).
pub const MAX_ADMIN_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// Open the book stored at `db` ([`Store::open_book`]: refused when there is none) and the
/// service over it (with the real clock). The one way the commands open a stored book.
pub fn open(db: &Path, cfg: ServiceConfig) -> Result<Coordinator> {
    open_with_clock(db, cfg, Arc::new(SystemClock::default()))
}

/// Open the store at `db`, the service over it and the registry of the store's worker
/// credentials (`serve`).
pub fn open_with_identities(
    db: &Path,
    cfg: ServiceConfig,
    ids: IdentityConfig,
) -> Result<(Coordinator, Identities)> {
    let store = Store::open_book_with_cache(db, cfg.cache_capacity)?;
    let creds = store.credentials()?;
    let invitations = store.invitations()?;
    let c = Coordinator::open(store, db, cfg, Arc::new(SystemClock::default()))?;
    let ids = Identities::open_with(ids, Some(creds), Some(invitations))
        .map_err(|e| CoordinatorError::Internal(format!("reading worker credentials: {e}")))?;
    attach(&c, &ids);
    Ok((c, ids))
}

/// [`open_with_identities`] as the [`Live`] service `serve` takes: reopened from `db` after
/// its store failed (see [`crate::live`]).
pub fn open_live(db: &Path, cfg: ServiceConfig, ids: IdentityConfig) -> Result<Live> {
    let (c, ids) = open_with_identities(db, cfg, ids)?;
    Ok(Live::reopening(
        c,
        ids,
        db.to_path_buf(),
        Arc::new(SystemClock::default()),
    ))
}

/// Join a service and its credential registry: the registry records in the service's event
/// log, and a credential the service catches with too many invalid results is blocked.
pub(crate) fn attach(c: &Coordinator, ids: &Identities) {
    ids.set_events(c.events().clone());
    // A credential caught with too many invalid results is blocked like an operator would.
    let blocker = ids.clone();
    c.set_block_hook(Box::new(move |name| {
        let why = "blocked by the coordinator: too many invalid results";
        match blocker.block_for_invalid_results(name, why) {
            Ok((_, ended)) => ended,
            Err(e) => {
                tracing::debug!(contributor = name, error = %e, "not a credential: nothing to block");
                Vec::new()
            }
        }
    }));
}

/// Open with an injected clock.
pub fn open_with_clock(
    db: &Path,
    cfg: ServiceConfig,
    clock: Arc<dyn Clock>,
) -> Result<Coordinator> {
    let store = Store::open_book_with_cache(db, cfg.cache_capacity)?;
    let c = Coordinator::open(store, db, cfg, clock)?;
    let s = c.status();
    tracing::info!(db = %db.display(), positions = s.positions, queued = s.queued, state = s.state.as_str(), "store opened");
    Ok(c)
}

/// Limits of the gRPC port. Defaults suit a public coordinator; tests with many simulated
/// workers on one address raise them.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// gRPC connections open at once (at the cap new clients wait in the listen backlog).
    pub max_connections: usize,
    /// HTTP connections open at once.
    pub max_http_connections: usize,
    /// Connections open at once from one address (IPv4 address, IPv6 /64), on each port.
    pub max_connections_per_address: usize,
    /// A connection must get its first request to the service within this long (TLS and
    /// HTTP/2 handshakes, a partial HTTP request).
    pub handshake_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 keep-alive ping period on quiet connections...
    pub keepalive_interval: Duration,
    /// ...and how long the peer has to answer before the connection is closed.
    pub keepalive_timeout: Duration,
    /// Connections are closed gracefully after this age (clients reconnect at once), so that
    /// nobody holds a slot forever.
    pub max_connection_age: Duration,
    /// Longest request (a whole book import included).
    pub request_timeout: Duration,
    /// Concurrent requests (HTTP/2 streams) per connection.
    pub max_concurrent_streams: u32,
    /// Largest request header block.
    pub max_header_list_bytes: u32,
    /// On shutdown, how long in-flight requests may take to finish; idle connections are never
    /// waited for.
    pub shutdown_grace: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 4096,
            max_http_connections: 512,
            max_connections_per_address: 128,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            keepalive_interval: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(20),
            max_connection_age: Duration::from_secs(3600),
            request_timeout: Duration::from_secs(300),
            max_concurrent_streams: 64,
            max_header_list_bytes: 16 * 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// How to serve: TLS and limits.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// TLS identity of the gRPC port (None: plain HTTP/2).
    pub tls: Option<TlsIdentity>,
    /// Connection limits and timeouts.
    pub limits: ServerLimits,
    /// The evaluation file served to workers that lack it (None: none served).
    pub eval: Option<crate::rpc::EvalFile>,
}

/// Serve until `shutdown` resolves, for local use: anonymous workers and admin calls, default
/// limits. See [`serve`].
pub async fn run(
    c: Coordinator,
    grpc: TcpListener,
    http: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    serve(
        Live::fixed(c, Identities::local()),
        grpc,
        http,
        ServeOptions::default(),
        shutdown,
    )
    .await
}

/// A PEM certificate chain and private key for the gRPC port.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// Certificate chain (PEM).
    pub cert_pem: Vec<u8>,
    /// Private key (PEM).
    pub key_pem: Vec<u8>,
}

impl ServerLimits {
    /// The admission limits of the gRPC port.
    pub fn grpc(&self) -> ConnLimits {
        ConnLimits {
            max_connections: self.max_connections,
            max_per_address: self.max_connections_per_address,
            handshake_timeout: self.handshake_timeout,
            idle_timeout: self.idle_timeout,
        }
    }

    /// The admission limits of the HTTP port.
    pub fn http(&self) -> ConnLimits {
        ConnLimits {
            max_connections: self.max_http_connections,
            ..self.grpc()
        }
    }
}

/// Counts requests being handled (a tower layer over the gRPC routes), so that shutdown can
/// wait for them and not for idle connections, and marks each on its connection (which is
/// then neither in its handshake nor idle).
#[derive(Debug, Clone)]
struct InFlight<S> {
    inner: S,
    count: Arc<AtomicUsize>,
    admission: Admission,
}

/// Decrements the in-flight count when a request's future ends (or is dropped).
struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<S, B> tower::Service<axum::http::Request<B>> for InFlight<S>
where
    S: tower::Service<axum::http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        self.count.fetch_add(1, Ordering::SeqCst);
        let busy = Busy(self.count.clone());
        let on_conn = crate::rpc::conn::grpc_remote(&req).and_then(|a| self.admission.begin(a));
        let f = self.inner.call(req);
        Box::pin(async move {
            let r = f.await;
            drop(busy);
            drop(on_conn);
            r
        })
    }
}

/// Serve until `shutdown` resolves: gRPC on `grpc` (credentials checked by the service's
/// registry before a request body is read), HTTP on `http` (if any). Every
/// [`crate::live::WATCH_INTERVAL`] the store is checked and, once failed, reopened
/// ([`Live::watch`]). On shutdown, requests in flight get up to `shutdown_grace` to finish,
/// idle connections are not waited for, and the store is flushed before returning.
pub async fn serve(
    live: Live,
    grpc: TcpListener,
    http: Option<TcpListener>,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let limits = opts.limits.clone();
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

    let ids = live.ids().clone();
    let reaper = {
        let live = live.clone();
        let stop = wait_stop(stop_rx.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(REAPER_INTERVAL);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tick.tick() => {
                        live.ids().expire_sessions();
                        if let Ok(c) = live.get() {
                            c.expire_leases();
                            if let Err(e) = c.sample_history(crate::http::unix_ms()) {
                                tracing::warn!(error = %e, "history not stored");
                            }
                        }
                    }
                }
            }
        })
    };
    let watcher = {
        let live = live.clone();
        let stop = wait_stop(stop_rx.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(crate::live::WATCH_INTERVAL);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tick.tick() => {
                        let live = live.clone();
                        let _ = tokio::task::spawn_blocking(move || live.watch()).await;
                    }
                }
            }
        })
    };

    let grpc_admission = Admission::new(limits.grpc());
    let http_task = match http {
        Some(l) => {
            let _ = crate::http::metrics_handle();
            let adm = Admission::new(limits.http());
            let app = crate::http::router_with(live.clone(), Some(grpc_admission.clone()));
            let stop = wait_stop(stop_rx.clone());
            tracing::info!(addr = %l.local_addr().map(|a| a.to_string()).unwrap_or_default(), "http listening");
            Some(tokio::spawn(async move {
                axum::serve(
                    HttpListener::new(l, adm),
                    app.into_make_service_with_connect_info::<crate::rpc::conn::HttpPeer>(),
                )
                .with_graceful_shutdown(stop)
                .await
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

    // Interceptors see the metadata before the body is decoded: an unauthenticated request is
    // refused without reading it, whatever its size.
    let worker = InterceptedService::new(
        WorkerServiceServer::new(WorkerApi::new(live.clone()).with_eval(opts.eval))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        ids.worker_interceptor(),
    );
    // No interceptor: enrolment is how a worker gets its credential.
    let enrolment = EnrolmentServiceServer::new(EnrolmentApi::new(ids.clone()))
        .max_decoding_message_size(MAX_ENROL_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_ENROL_MESSAGE_BYTES);
    let admin = InterceptedService::new(
        AdminServiceServer::new(AdminApi::new(live.clone()))
            .max_decoding_message_size(MAX_ADMIN_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        ids.admin_interceptor(),
    );
    tracing::info!(addr = %grpc.local_addr().map(|a| a.to_string()).unwrap_or_default(), "grpc listening");
    let in_flight = Arc::new(AtomicUsize::new(0));
    let counter = in_flight.clone();
    let mut builder = tonic::transport::Server::builder();
    if let Some(t) = opts.tls {
        builder = builder
            .tls_config(
                tonic::transport::ServerTlsConfig::new()
                    .identity(tonic::transport::Identity::from_pem(t.cert_pem, t.key_pem)),
            )
            .map_err(|e| CoordinatorError::Internal(format!("tls configuration: {e}")))?;
    }
    let served = builder
        .http2_keepalive_interval(Some(limits.keepalive_interval))
        .http2_keepalive_timeout(Some(limits.keepalive_timeout))
        .max_connection_age(limits.max_connection_age)
        .timeout(limits.request_timeout)
        .max_concurrent_streams(limits.max_concurrent_streams)
        .http2_max_header_list_size(limits.max_header_list_bytes)
        .layer(tower::layer::layer_fn({
            let admission = grpc_admission.clone();
            move |inner| InFlight {
                inner,
                count: counter.clone(),
                admission: admission.clone(),
            }
        }))
        .add_service(health_service)
        .add_service(worker)
        .add_service(admin)
        .add_service(enrolment)
        .serve_with_incoming_shutdown(
            crate::rpc::conn::incoming(grpc, grpc_admission.clone()),
            wait_stop(stop_rx.clone()),
        );
    let drained = async {
        wait_stop(stop_rx.clone()).await;
        let t0 = tokio::time::Instant::now();
        while in_flight.load(Ordering::SeqCst) > 0 && t0.elapsed() < limits.shutdown_grace {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let served = tokio::select! {
        r = served => r,
        _ = drained => {
            tracing::info!("requests in flight finished; not waiting for idle connections");
            Ok(())
        }
    };
    reaper.abort();
    watcher.abort();
    if let Some(mut t) = http_task {
        // Requests in flight get the grace period; a connection that holds a partial request
        // (or will not close) is not waited for beyond it.
        if tokio::time::timeout(limits.shutdown_grace, &mut t)
            .await
            .is_err()
        {
            tracing::info!("http connections still open after the grace period; closing them");
            t.abort();
        }
    }
    let c = live.get()?;
    if let Err(e) = c.save_history() {
        tracing::warn!(error = %e, "history not stored at shutdown");
    }
    tokio::task::spawn_blocking(move || c.flush())
        .await
        .map_err(|e| CoordinatorError::Internal(format!("flush task: {e}")))??;
    tracing::info!("coordinator stopped, store flushed");
    served.map_err(|e| CoordinatorError::Internal(format!("grpc server: {e}")))
}
