//! The worker process's loop: [`bookfarm_runner::Runner`] over the gRPC client, started from
//! async code and stopped by a shutdown future.

use crate::client::{Client, GrpcTransport};
use crate::config::WorkerConfig;
use crate::polite::Priority;
use bookfarm_proto::domain::Identity;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use bookfarm_runner::exec::SearcherFactory;
use bookfarm_runner::exec::ThreadInit;
use bookfarm_runner::{Runner, RunnerConfig, RunnerError, WorkerStats};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How often the worker checks its active hours and the battery.
const GATE_POLL: Duration = Duration::from_secs(5);

/// Why a worker stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Bad configuration (URL, TLS, token).
    #[error("{0}")]
    Config(String),
    /// The loop stopped: refused, unreachable, or no search threads.
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// The loop's thread died (a bug).
    #[error("worker loop: {0}")]
    Join(String),
}

/// Run a worker until `shutdown` resolves (then drain: finish leased jobs, deliver their
/// results, exit). Must be called on a multi-threaded tokio runtime: the loop runs on a
/// blocking thread and drives its gRPC calls on this runtime.
pub async fn run(
    cfg: WorkerConfig,
    make: SearcherFactory,
    shutdown: impl Future<Output = ()>,
) -> Result<WorkerStats, WorkerError> {
    let identity = Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.to_string(),
        eval_hash: cfg.eval_hash.clone(),
        search_signature: cfg.search_signature.clone(),
    };
    let client = Client::with_tls(
        &cfg.coordinator,
        &identity,
        &cfg.token,
        cfg.rpc_timeout,
        cfg.tls_ca.as_deref(),
        cfg.tls_domain.as_deref(),
    )
    .map_err(WorkerError::Config)?;
    let transport = GrpcTransport::new(client, tokio::runtime::Handle::current());
    let polite = &cfg.polite;
    let mut runner = Runner::new();
    if let Some(gate) = polite.gate() {
        runner = runner.with_gate(Box::new(gate));
    }
    let stopper = runner.stopper();
    let priority = polite.priority;
    let thread_init = (priority != Priority::Normal).then(|| {
        ThreadInit(Arc::new(move || {
            if let Err(e) = priority.apply_to_current_thread() {
                tracing::warn!(priority = priority.as_str(), error = %e, "could not lower the search thread's priority");
            }
        }))
    });
    tracing::info!(
        priority = priority.as_str(),
        cpu_share = polite.cpu_share,
        active_hours = %polite.active_hours.as_ref().map(ToString::to_string).unwrap_or_else(|| "always".into()),
        pause_on_battery = polite.pause_on_battery,
        "polite settings"
    );
    let rcfg = RunnerConfig {
        threads: cfg.threads.max(1),
        lookahead: cfg.lookahead,
        name: cfg.name.clone(),
        max_backoff: cfg.max_backoff,
        give_up_after: cfg.give_up_after,
        on_ack: cfg.on_ack.clone(),
        cpu_share: polite.cpu_share,
        pause_grace: polite.pause_grace,
        gate_poll: GATE_POLL,
        progress_every: polite.progress_every,
        thread_init,
        part_time: polite.part_time(),
    };
    let mut task = tokio::task::spawn_blocking(move || runner.run(rcfg, transport, &make));
    tokio::pin!(shutdown);
    let joined = tokio::select! {
        r = &mut task => r,
        _ = &mut shutdown => {
            stopper.stop();
            task.await
        }
    };
    Ok(joined.map_err(|e| WorkerError::Join(e.to_string()))??)
}
