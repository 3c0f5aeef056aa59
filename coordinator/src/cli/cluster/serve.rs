//! `serve`: the coordinator over gRPC and HTTP, configured by flags, environment and
//! `coordinator.toml`.

use crate::cli::io;
use anyhow::{Context, bail};
use bookfarm_book::openings::Openings;
use bookfarm_coordinator::CoordinatorError;
use bookfarm_coordinator::config::CoordinatorFile;
use bookfarm_coordinator::rpc::EvalFile;
use bookfarm_coordinator::server;
use bookfarm_coordinator::service::ServiceConfig;
use bookfarm_coordinator::store::StoreError;
use bookfarm_engine::eval::Eval;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The options of `serve` (each also read from the configuration file).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The store directory (create it with `book new` or `book import`).
    #[arg(long, env = "BOOKFARM_DB")]
    db: Option<PathBuf>,
    /// gRPC listen address [default: 127.0.0.1:7700].
    #[arg(long, env = "BOOKFARM_LISTEN")]
    listen: Option<String>,
    /// HTTP listen address [default: 127.0.0.1:7701].
    #[arg(long, env = "BOOKFARM_HTTP")]
    http: Option<String>,
    /// Configuration file (coordinator.toml).
    #[arg(long, env = "BOOKFARM_CONFIG")]
    config: Option<PathBuf>,
    /// Admin token (required unless --listen is a loopback address). Workers use their
    /// own credentials: see `workers add`.
    #[arg(long, env = "BOOKFARM_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Evaluation file whose fingerprint workers must match.
    #[arg(long, env = "BOOKFARM_EVAL", value_parser = crate::cli::args::existing_file)]
    eval: Option<PathBuf>,
    /// Opening names for the web UI's explorer: lines `MOVES NAME`, replacing the built-in
    /// list.
    #[arg(long, env = "BOOKFARM_OPENINGS", value_parser = crate::cli::args::existing_file)]
    openings: Option<PathBuf>,
    /// Publish the whole book on the HTTP port as /book.dat and /book.egbk3 (also
    /// `publish_book = true` in the configuration file).
    #[arg(long, env = "BOOKFARM_PUBLISH_BOOK")]
    publish_book: bool,
    /// Seconds without heartbeat before a worker's jobs are re-queued (1..=86400).
    #[arg(long, value_parser = crate::cli::args::seconds)]
    lease_timeout: Option<u64>,
    /// Let workers enrol without an invitation code (each gets an untrusted credential of its
    /// own; rate-limited). Default: invitations only (`invite add`).
    #[arg(long)]
    open_enrolment: bool,
    /// TLS certificate chain (PEM) for the gRPC port.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// Open the store and serve it until Ctrl-C or SIGTERM.
pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        db,
        listen,
        http,
        config,
        admin_token,
        eval,
        openings,
        publish_book,
        lease_timeout,
        tls_cert,
        tls_key,
        open_enrolment,
    } = a;
    let file = match &config {
        Some(p) => CoordinatorFile::parse(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("parsing {}", p.display()))?,
        None => CoordinatorFile::default(),
    };
    let db = db
        .or(file.db.clone())
        .context("no store directory: pass --db DIR (or db in the config file)")?;
    let listen = listen
        .or(file.listen.clone())
        .unwrap_or_else(|| "127.0.0.1:7700".into());
    let http = http
        .or(file.http.clone())
        .unwrap_or_else(|| "127.0.0.1:7701".into());
    let (mut cfg, weights, eval_file) = service_config(&file, eval.as_deref(), lease_timeout)?;
    if let Some(p) = openings.as_deref().or(file.openings.as_deref()) {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        cfg.openings = Arc::new(
            Openings::parse(&text).with_context(|| format!("opening names {}", p.display()))?,
        );
    }
    cfg.publish_book |= publish_book;
    let mut ids = file.identity(&cfg);
    if let Some(t) = admin_token.filter(|t| !t.is_empty()) {
        ids.admin_token = Some(t);
    }
    let loopback = listen
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback());
    if !loopback && ids.admin_token.is_none() {
        bail!(
            "refusing to serve on {listen} without credentials: set admin_token (--admin-token) \
             and give each worker its own credential (`workers add NAME --db {}`); only a \
             loopback address runs without them",
            db.display()
        );
    }
    if ids.admin_token.as_deref().map(str::trim)
        == Some(bookfarm_coordinator::identity::SAMPLE_ADMIN_TOKEN)
    {
        tracing::warn!(
            "admin_token is the sample configuration's {:?}: anyone who read the sample can run \
             admin commands; set a secret of your own (e.g. `openssl rand -hex 32`)",
            bookfarm_coordinator::identity::SAMPLE_ADMIN_TOKEN
        );
    }
    // Anonymous workers only on loopback, and only while no worker credential exists.
    ids.anonymous_workers = loopback;
    ids.open_enrolment = open_enrolment;
    let tls = match tls_cert
        .zip(tls_key)
        .or(file.tls_cert.clone().zip(file.tls_key.clone()))
    {
        Some((cert, key)) => Some(server::TlsIdentity {
            cert_pem: std::fs::read(&cert)
                .with_context(|| format!("reading {}", cert.display()))?,
            key_pem: std::fs::read(&key).with_context(|| format!("reading {}", key.display()))?,
        }),
        None => None,
    };
    let live = match server::open_live(&db, cfg, ids) {
        Ok(opened) => opened,
        // That message names the directory already.
        Err(e @ CoordinatorError::Store(StoreError::NoBook(_))) => return Err(e.into()),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("opening store {}", db.display())));
        }
    };
    // Not held across `serve`: a reopen after a store failure needs every handle let go.
    let served = live.get()?.config().clone();
    let opts = server::ServeOptions {
        tls,
        limits: file.limits(),
        eval: eval_file,
    };
    // The trust root's own searches, on the configured share of this machine's threads.
    let verifier = match (weights, served.verify_threads) {
        (Some(eval), n) if n > 0 => {
            let (hash, sig) = (
                served.eval_hash.clone().unwrap_or_default(),
                served.signature.clone().unwrap_or_default(),
            );
            Some(bookfarm_coordinator::local::spawn_verifier(
                live.clone(),
                n as usize,
                bookfarm_runner::exec::engine_factory(eval),
                &hash,
                &sig,
            ))
        }
        _ => None,
    };
    let _verifier = verifier;
    io::runtime()?.block_on(async move {
        let g = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("binding gRPC {listen}"))?;
        let h = tokio::net::TcpListener::bind(&http)
            .await
            .with_context(|| format!("binding HTTP {http}"))?;
        println!("serving gRPC on {listen}, HTTP on {http}");
        server::serve(live, g, Some(h), opts, io::shutdown_signal()).await?;
        Ok(())
    })
}

/// The service configuration and evaluation weights of the file, overridden by the flags.
fn service_config(
    file: &CoordinatorFile,
    eval: Option<&Path>,
    lease_timeout: Option<u64>,
) -> anyhow::Result<(ServiceConfig, Option<Arc<Eval>>, Option<EvalFile>)> {
    let mut cfg = file.service();
    let mut weights = None;
    let mut served = None;
    if let Some(p) = eval.or(file.eval.as_deref()) {
        let bytes =
            std::fs::read(p).with_context(|| format!("reading evaluation {}", p.display()))?;
        let eval = bookfarm_engine::eval::eval_from_bytes_shared(&bytes)
            .with_context(|| format!("loading evaluation {}", p.display()))?;
        let hash = bookfarm_proto::eval_fingerprint(&bytes);
        cfg.signature = Some(bookfarm_runner::signature(&eval, &hash));
        cfg.eval_hash = Some(hash);
        weights = Some(eval);
        served = Some(EvalFile(Arc::from(bytes)));
    }
    if let Some(s) = lease_timeout {
        cfg.lease_timeout = Duration::from_secs(s.max(1));
    }
    Ok((cfg, weights, served))
}
