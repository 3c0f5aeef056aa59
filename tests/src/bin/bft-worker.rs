//! Test worker process: the library pull loop with the real engine (the code path of
//! `bookfarm-worker run`). Optionally appends every acknowledged job id to a log file.

use anyhow::Context;
use bookfarm_engine::eval::Eval;
use bookfarm_proto::domain::Ack;
use bookfarm_worker::config::AckHook;
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    coordinator: String,
    #[arg(long)]
    eval: PathBuf,
    #[arg(long, default_value = "w")]
    name: String,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long)]
    ack_log: Option<PathBuf>,
    #[arg(long, default_value = "")]
    token: String,
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
    let bytes = std::fs::read(&a.eval).context("reading eval")?;
    let eval = Arc::new(Eval::from_bytes(&bytes)?);
    let on_ack = match &a.ack_log {
        Some(p) => {
            let f = Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            );
            Some(AckHook(Arc::new(move |id, ack| {
                if ack == Ack::Accepted {
                    let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                    // One write per line, so a kill leaves whole lines only.
                    let _ = f.write_all(format!("{id}\n").as_bytes());
                }
            })))
        }
        None => None,
    };
    let cfg = bookfarm_worker::WorkerConfig {
        coordinator: a.coordinator,
        threads: a.threads,
        name: a.name,
        eval_hash: bookfarm_proto::eval_fingerprint(&bytes),
        search_signature: bookfarm_runner::signature(
            &eval,
            &bookfarm_proto::eval_fingerprint(&bytes),
        ),
        token: a.token,
        max_backoff: std::time::Duration::from_millis(500),
        on_ack,
        ..bookfarm_worker::WorkerConfig::default()
    };
    let make = bookfarm_runner::exec::engine_factory(eval);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let stop = async {
            if let Ok(mut t) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                t.recv().await;
            }
        };
        bookfarm_worker::run(cfg, make, stop).await?;
        Ok(())
    })
}
