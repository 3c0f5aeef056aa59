//! Test coordinator process: serves a store with the library's `server::run` (the code path of
//! `bookfarm-coordinator serve`), stops on SIGTERM.

use anyhow::Context;
use bookfarm_coordinator::server;
use bookfarm_coordinator::service::ServiceConfig;
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    listen: String,
    #[arg(long)]
    http: Option<String>,
    #[arg(long, default_value_t = 60)]
    lease_timeout: u64,
    #[arg(long)]
    eval_hash: Option<String>,
    #[arg(long)]
    token: Option<String>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    let cfg = ServiceConfig {
        lease_timeout: Duration::from_secs(a.lease_timeout),
        heartbeat_interval: Duration::from_millis(500),
        eval_hash: a.eval_hash,
        auth_token: a.token,
        engine_version: Some(bookfarm_proto::ENGINE_VERSION.into()),
        ..ServiceConfig::default()
    };
    let c = server::open(&a.db, cfg).context("opening the store")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let g = tokio::net::TcpListener::bind(&a.listen).await?;
        let h = match &a.http {
            Some(h) => Some(tokio::net::TcpListener::bind(h).await?),
            None => None,
        };
        let stop = async {
            if let Ok(mut t) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                t.recv().await;
            }
        };
        server::run(c, g, h, stop).await?;
        Ok(())
    })
}
