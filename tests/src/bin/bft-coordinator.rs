//! Test coordinator process: serves a store with the library's `server::serve` (the code path
//! of `bookfarm-coordinator serve`), stops on SIGTERM. Anonymous workers are accepted while the
//! store holds no worker credential (it listens on 127.0.0.1); limits default to the library's
//! and can be lowered or raised for a test.

use anyhow::Context;
use bookfarm_coordinator::identity::IdentityConfig;
use bookfarm_coordinator::server::{self, ServeOptions, ServerLimits};
use bookfarm_coordinator::service::{ServiceConfig, TrustRules};
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
    /// Admin token.
    #[arg(long)]
    admin_token: Option<String>,
    /// Registrations per minute (and burst) from one address.
    #[arg(long, default_value_t = 10_000)]
    registrations_per_minute: u32,
    /// Longest lease of a level-0 job, milliseconds.
    #[arg(long)]
    max_lease_base_ms: Option<u64>,
    /// Connections at once.
    #[arg(long)]
    max_connections: Option<usize>,
    /// Handshake timeout, milliseconds.
    #[arg(long)]
    handshake_timeout_ms: Option<u64>,
    /// Idle timeout, milliseconds.
    #[arg(long)]
    idle_timeout_ms: Option<u64>,
    /// Connections at once from one address (each port).
    #[arg(long)]
    max_connections_per_address: Option<usize>,
    /// HTTP connections at once.
    #[arg(long)]
    max_http_connections: Option<usize>,
    /// Backup leases after this many mean search times (0: off).
    #[arg(long)]
    backup_after: Option<u32>,
    /// Evaluation file of the coordinator's verifier (with `--verify-threads`).
    #[arg(long)]
    eval: Option<PathBuf>,
    /// Search threads of the coordinator's verifier (0: none).
    #[arg(long, default_value_t = 0)]
    verify_threads: u32,
    /// N: consecutive results agreeing with the root that earn trust.
    #[arg(long)]
    trust_after: Option<u64>,
    /// Lowest spot-check probability of a result applied on one word.
    #[arg(long)]
    spot_floor: Option<f64>,
    /// Share of the growth runner's time speculation may take (default: the service's).
    #[arg(long)]
    speculation_share: Option<f64>,
    /// Publish the book as /book.dat and /book.egbk3 on the HTTP port.
    #[arg(long)]
    publish_book: bool,
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
        engine_version: Some(bookfarm_proto::ENGINE_VERSION.into()),
        max_lease_base: a.max_lease_base_ms.map_or(
            ServiceConfig::default().max_lease_base,
            Duration::from_millis,
        ),
        backup_after: a
            .backup_after
            .unwrap_or(ServiceConfig::default().backup_after),
        verify_threads: a.verify_threads,
        speculation_share: a
            .speculation_share
            .unwrap_or(ServiceConfig::default().speculation_share),
        publish_book: a.publish_book,
        trust: TrustRules {
            earn_after: a.trust_after.unwrap_or(TrustRules::default().earn_after),
            spot_floor: a.spot_floor.unwrap_or(TrustRules::default().spot_floor),
            ..TrustRules::default()
        },
        ..ServiceConfig::default()
    };
    let ids = IdentityConfig {
        admin_token: a.admin_token.clone(),
        anonymous_workers: true,
        registrations_per_minute: a.registrations_per_minute,
        registration_burst: a.registrations_per_minute,
        session_timeout: cfg.lease_timeout,
        ..IdentityConfig::default()
    };
    let d = ServerLimits::default();
    let opts = ServeOptions {
        tls: None,
        eval: None,
        limits: ServerLimits {
            max_connections: a.max_connections.unwrap_or(d.max_connections),
            handshake_timeout: a
                .handshake_timeout_ms
                .map_or(d.handshake_timeout, Duration::from_millis),
            idle_timeout: a
                .idle_timeout_ms
                .map_or(d.idle_timeout, Duration::from_millis),
            max_connections_per_address: a
                .max_connections_per_address
                .unwrap_or(d.max_connections_per_address),
            max_http_connections: a.max_http_connections.unwrap_or(d.max_http_connections),
            ..d
        },
    };
    let live = server::open_live(&a.db, cfg, ids).context("opening the store")?;
    // The verifier: the coordinator's own searches (the code path of `serve --eval`).
    let _verifier = match &a.eval {
        Some(p) if a.verify_threads > 0 => {
            let (eval, hash) = bookfarm_runner::load_eval(Some(p))?;
            let sig = bookfarm_runner::signature(&eval, &hash);
            Some(bookfarm_coordinator::local::spawn_verifier(
                live.clone(),
                a.verify_threads as usize,
                bookfarm_runner::exec::engine_factory(eval),
                &hash,
                &sig,
            ))
        }
        _ => None,
    };
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
        server::serve(live, g, h, opts, stop).await?;
        Ok(())
    })
}
