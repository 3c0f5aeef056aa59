//! Local mode: a coordinator and N in-process workers on one machine, talking through the same
//! gRPC code path on 127.0.0.1 (`bookfarm-coordinator local`).

use crate::error::{CoordinatorError, Result};
use crate::server;
use crate::service::{Coordinator, State, StatusReport};
use bookfarm_worker::WorkerConfig;
use bookfarm_worker::pull_loop::SearcherFactory;
use std::future::Future;
use std::time::Duration;

/// How often progress is reported.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Options of a local run.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Number of in-process workers (one search thread each).
    pub workers: usize,
    /// Fingerprint of the evaluation the workers load.
    pub eval_hash: String,
    /// The workers' search signature.
    pub search_signature: String,
    /// Optional HTTP listener address for metrics.
    pub http: Option<String>,
    /// Jobs each worker leases beyond its free thread (hides the result round trip; more
    /// hoards jobs at the end of a round).
    pub lookahead: usize,
}

/// What a local run did.
#[derive(Debug, Clone, Default)]
pub struct LocalOutcome {
    /// Stopped by the interrupt rather than by reaching the fixed point.
    pub interrupted: bool,
    /// Per-worker figures (search time, RPC time, results).
    pub workers: Vec<bookfarm_worker::WorkerStats>,
}

impl LocalOutcome {
    /// Share of worker time spent in RPCs rather than searching.
    pub fn rpc_share(&self) -> f64 {
        let rpc: f64 = self.workers.iter().map(|w| w.rpc_time.as_secs_f64()).sum();
        let search: f64 = self
            .workers
            .iter()
            .map(|w| w.search_time.as_secs_f64())
            .sum();
        if rpc + search > 0.0 {
            rpc / (rpc + search)
        } else {
            0.0
        }
    }
}

/// Serve `c` on an ephemeral 127.0.0.1 port, run the workers until the expansion is done (or
/// `interrupt` resolves), then stop the workers (drain) and the server (flush). `progress` is
/// called every [`PROGRESS_INTERVAL`].
pub async fn run(
    c: Coordinator,
    opts: &LocalOptions,
    factory: SearcherFactory,
    interrupt: impl Future<Output = ()>,
    mut progress: impl FnMut(&StatusReport),
) -> Result<LocalOutcome> {
    let io = |e: std::io::Error| CoordinatorError::Internal(format!("local listener: {e}"));
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io)?;
    let addr = grpc.local_addr().map_err(io)?;
    let http = match &opts.http {
        Some(h) => Some(tokio::net::TcpListener::bind(h).await.map_err(io)?),
        None => None,
    };
    let (stop_server, server_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::run(c.clone(), grpc, http, async {
        let _ = server_stop_rx.await;
    }));
    let (stop_workers, workers_rx) = tokio::sync::watch::channel(false);
    let mut handles = Vec::new();
    for i in 0..opts.workers.max(1) {
        let cfg = WorkerConfig {
            coordinator: format!("http://{addr}"),
            threads: 1,
            lookahead: opts.lookahead,
            name: format!("local-{i}"),
            eval_hash: opts.eval_hash.clone(),
            search_signature: opts.search_signature.clone(),
            ..WorkerConfig::default()
        };
        let mut rx = workers_rx.clone();
        handles.push(tokio::spawn(bookfarm_worker::run(
            cfg,
            factory.clone(),
            async move {
                while !*rx.borrow() {
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            },
        )));
    }
    tokio::pin!(interrupt);
    let mut interrupted = false;
    loop {
        let s = c.status();
        progress(&s);
        if s.state == State::Done {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(PROGRESS_INTERVAL) => {}
            _ = &mut interrupt => { interrupted = true; break; }
        }
    }
    let _ = stop_workers.send(true);
    let mut workers = Vec::new();
    for h in handles {
        match h.await {
            Ok(Ok(st)) => workers.push(st),
            Ok(Err(e)) => tracing::warn!(error = %e, "worker stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "worker task failed"),
        }
    }
    let _ = stop_server.send(());
    server
        .await
        .map_err(|e| CoordinatorError::Internal(format!("server task: {e}")))??;
    Ok(LocalOutcome {
        interrupted,
        workers,
    })
}
