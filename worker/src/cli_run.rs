//! `run`: the cluster worker loop.

use anyhow::Context;
use bookfarm_worker::WorkerConfig;
use bookfarm_worker::config::WorkerFile;
use clap::Subcommand;
use std::path::PathBuf;
use std::time::Duration;

/// Worker commands against a coordinator.
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Lease and run leaf-search jobs from a coordinator until stopped (Ctrl-C/SIGTERM drains:
    /// leased jobs are finished and delivered; a second signal exits at once).
    Run {
        /// Coordinator URL.
        #[arg(long, env = "BOOKFARM_COORDINATOR")]
        coordinator: Option<String>,
        /// Search threads, 1..=4096 (default: all cores).
        #[arg(long, env = "BOOKFARM_THREADS", value_parser = clap::value_parser!(u16).range(1..=4096))]
        threads: Option<u16>,
        /// Worker name shown by the coordinator (default: host name).
        #[arg(long, env = "BOOKFARM_NAME")]
        name: Option<String>,
        /// Evaluation weights (Edax eval.dat format; default: the embedded bookfarm weights);
        /// must match the coordinator's.
        #[arg(long, env = "BOOKFARM_EVAL")]
        eval: Option<PathBuf>,
        /// This worker's credential (`bookfarm-coordinator workers add NAME` prints it); empty
        /// for a coordinator on a loopback address without credentials.
        #[arg(long, env = "BOOKFARM_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Read the credential from this file (first line), as container secrets and systemd
        /// credentials (`LoadCredential=`) hand it over.
        #[arg(long, env = "BOOKFARM_TOKEN_FILE", conflicts_with = "token")]
        token_file: Option<PathBuf>,
        /// Jobs leased beyond the free threads, 0..=64.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=64))]
        lookahead: Option<u8>,
        /// CA certificate (PEM) of a TLS coordinator (use an https:// URL).
        #[arg(long, env = "BOOKFARM_TLS_CA")]
        tls_ca: Option<PathBuf>,
        /// Server name to verify instead of the URL's host.
        #[arg(long)]
        tls_domain: Option<String>,
        /// Configuration file (worker.toml).
        #[arg(long, env = "BOOKFARM_WORKER_CONFIG")]
        config: Option<PathBuf>,
    },
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "worker".into())
}

/// Resolves on the first Ctrl-C or SIGTERM; a second one exits the process.
async fn shutdown_signal() {
    wait_signal().await;
    tracing::info!("signal received: draining (send again to exit now)");
    tokio::spawn(async {
        wait_signal().await;
        tracing::warn!("second signal: exiting without draining");
        std::process::exit(130);
    });
}

async fn wait_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Run the worker command.
pub fn run(cmd: RunCommand) -> anyhow::Result<()> {
    let RunCommand::Run {
        coordinator,
        threads,
        name,
        eval,
        token,
        token_file,
        lookahead,
        tls_ca,
        tls_domain,
        config,
    } = cmd;
    let file = match &config {
        Some(p) => WorkerFile::parse(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("parsing {}", p.display()))?,
        None => WorkerFile::default(),
    };
    let eval_path = eval.or(file.eval.clone());
    let (weights, eval_hash) = bookfarm_runner::load_eval(eval_path.as_deref())?;
    let tls_ca = match tls_ca.or(file.tls_ca.clone()) {
        Some(p) => Some(std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    let token = match token_file {
        Some(p) => Some(
            std::fs::read_to_string(&p)
                .with_context(|| format!("reading {}", p.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        ),
        None => token,
    };
    let d = WorkerConfig::default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cfg = WorkerConfig {
        coordinator: coordinator.or(file.coordinator).unwrap_or(d.coordinator),
        threads: threads
            .map(usize::from)
            .or(file.threads)
            .unwrap_or(cores)
            .max(1),
        lookahead: lookahead
            .map(usize::from)
            .or(file.lookahead)
            .unwrap_or(d.lookahead),
        name: name.or(file.name).unwrap_or_else(host_name),
        token: token.or(file.token).unwrap_or_default(),
        search_signature: bookfarm_runner::signature(&weights, &eval_hash),
        eval_hash,
        max_backoff: file
            .max_backoff_secs
            .map_or(d.max_backoff, Duration::from_secs),
        tls_ca,
        tls_domain: tls_domain.or(file.tls_domain.clone()),
        ..d
    };
    let make = bookfarm_runner::exec::engine_factory(weights);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let stats = rt.block_on(bookfarm_worker::run(cfg, make, shutdown_signal()))?;
    tracing::info!(
        accepted = stats.accepted,
        nodes = stats.nodes,
        search_s = stats.search_time.as_secs_f64(),
        rpc_s = stats.rpc_time.as_secs_f64(),
        "done"
    );
    Ok(())
}
