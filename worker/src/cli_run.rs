//! `run`: the cluster worker loop.

use anyhow::Context;
use bookfarm_engine::eval::Eval;
use bookfarm_proto::domain::Identity;
use bookfarm_worker::WorkerConfig;
use bookfarm_worker::client::Client;
use bookfarm_worker::config::{RunArgs, Settings};
use bookfarm_worker::{enrol, eval_cache};
use clap::Subcommand;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Worker commands against a coordinator.
// Parsed once per process: the size of the `run` variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Enrol this machine with a coordinator: an invitation code from its operator (none when
    /// it allows open enrolment) becomes this machine's own credential, kept in
    /// ~/.config/bookfarm/credential.toml (mode 0600); `run` then needs no flag.
    Enroll {
        /// Coordinator URL (https://… for a public one).
        url: String,
        /// Invitation code (`bfi_…`) [default: open enrolment].
        code: Option<String>,
        /// Name asked for (the credential adds 4 hex digits) [default: host name].
        #[arg(long)]
        name: Option<String>,
        /// CA certificate (PEM) of a TLS coordinator.
        #[arg(long, env = "BOOKFARM_TLS_CA")]
        tls_ca: Option<PathBuf>,
        /// Replace this machine's enrolment (the credit earned with the old one stays with it).
        #[arg(long)]
        force: bool,
    },
    /// Lease and run leaf-search jobs from a coordinator until stopped (Ctrl-C/SIGTERM drains:
    /// leased jobs are finished and delivered; a second signal exits at once).
    Run(RunArgs),
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

/// `enroll`: the credential from the coordinator, kept in the configuration directory.
fn enroll(
    url: String,
    code: Option<String>,
    name: Option<String>,
    tls_ca: Option<PathBuf>,
    force: bool,
) -> anyhow::Result<()> {
    let dir = enrol::config_dir()?;
    if !force && let Some(e) = enrol::load(&dir)? {
        anyhow::bail!(
            "this machine is enrolled already as {} with {}: {}",
            e.credential,
            e.coordinator,
            enrol::EnrolmentFileError::Exists(dir.join(enrol::CREDENTIAL_FILE))
        );
    }
    let ca = match &tls_ca {
        Some(p) => Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    let name = name.unwrap_or_else(host_name);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let r = rt
        .block_on(bookfarm_worker::client::enroll(
            &url,
            code.as_deref().unwrap_or_default().trim(),
            &name,
            ca.as_deref(),
            None,
        ))
        .map_err(|s| anyhow::anyhow!("{}", s.message()))
        .with_context(|| format!("enrolling with {url}"))?;
    let e = enrol::Enrolment {
        coordinator: url,
        credential: r.credential,
        owner: r.owner,
        token: r.token,
        tls_ca,
    };
    let path = enrol::save(&dir, &e, force)?;
    tracing::info!(credential = e.credential, owner = e.owner, path = %path.display(), "enrolled: start searching with `bookfarm-worker run`");
    Ok(())
}

/// The evaluation to search with when none is given: the coordinator's (`GetSetup`), the
/// embedded default when it pins none or that one, else from the cache or downloaded.
async fn coordinator_eval(
    client: &mut Client,
    cache: Option<&std::path::Path>,
) -> anyhow::Result<(Arc<Eval>, String)> {
    let embedded = bookfarm_runner::load_eval(None)?;
    let mut wait = Duration::from_secs(1);
    let setup = loop {
        match client.setup().await {
            Ok(s) => break s,
            Err(s) if s.code() == tonic::Code::Unimplemented => {
                tracing::info!(
                    "the coordinator does not say which evaluation it uses (an older release): the embedded one"
                );
                return Ok(embedded);
            }
            Err(s)
                if matches!(
                    s.code(),
                    tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
                ) =>
            {
                anyhow::bail!("the coordinator refuses this worker: {}", s.message());
            }
            Err(s) => {
                tracing::warn!(error = %s.message(), retry_in_s = wait.as_secs(), "asking the coordinator for its setup");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    };
    if let Some(advice) = bookfarm_worker::client::release_advice(
        bookfarm_proto::RELEASE,
        &setup.worker_version,
        &setup.install_hint,
    ) {
        tracing::warn!("{advice}");
    }
    let want = setup.eval_hash;
    if want.is_empty() || want == embedded.1 {
        return Ok(embedded);
    }
    let cache = cache.context("no cache directory for the coordinator's evaluation: set BOOKFARM_CACHE_DIR or pass --eval")?;
    if let Some(e) = eval_cache::cached(cache, &want) {
        tracing::info!(eval = want, "the coordinator's evaluation, from the cache");
        return Ok((e, want));
    }
    if setup.eval_bytes == 0 {
        anyhow::bail!(
            "the coordinator searches with evaluation {want} but does not serve it: pass --eval FILE (the coordinator's eval.dat)"
        );
    }
    if setup.eval_bytes > eval_cache::MAX_EVAL_BYTES {
        anyhow::bail!(eval_cache::EvalFetchError::TooLarge(setup.eval_bytes));
    }
    tracing::info!(
        eval = want,
        bytes = setup.eval_bytes,
        "fetching the coordinator's evaluation"
    );
    let (bytes, eval) = client.fetch_eval(&want).await?;
    let path = eval_cache::store(cache, &want, &bytes)?;
    tracing::info!(eval = want, path = %path.display(), "the coordinator's evaluation fetched and cached");
    Ok((eval, want))
}

/// Run the worker command.
pub fn run(cmd: RunCommand) -> anyhow::Result<()> {
    let args = match cmd {
        RunCommand::Enroll {
            url,
            code,
            name,
            tls_ca,
            force,
        } => return enroll(url, code, name, tls_ca, force),
        RunCommand::Run(args) => args,
    };
    // The enrolment (`enroll`) and the settings file (`--config`, else worker.toml beside the
    // enrolment), under the flags and the environment.
    let dir = enrol::config_dir().ok();
    let enrolled = match &dir {
        Some(d) => enrol::load(d)?,
        None => None,
    };
    let settings = Settings::load(args.config.as_deref(), dir.as_deref())?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let resolved =
        bookfarm_worker::config::resolve(args, &settings, enrolled.as_ref(), cores, host_name)?;
    match &settings.path {
        Some(p) => {
            tracing::info!(path = %p.display(), token = resolved.token_from, "settings file")
        }
        None => tracing::info!(token = resolved.token_from, "no settings file"),
    }
    let (cfg, eval_path) = (resolved.config, resolved.eval);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (weights, eval_hash) = match &eval_path {
        Some(p) => bookfarm_runner::load_eval(Some(p))?,
        None => rt.block_on(async {
            // A long timeout: the download of a large evaluation is one call.
            let mut client = Client::with_tls(
                &cfg.coordinator,
                &Identity::default(),
                &cfg.token,
                Duration::from_secs(600),
                cfg.tls_ca.as_deref(),
                cfg.tls_domain.as_deref(),
            )
            .map_err(anyhow::Error::msg)?;
            let cache = enrol::cache_dir().ok();
            coordinator_eval(&mut client, cache.as_deref()).await
        })?,
    };
    let cfg = WorkerConfig {
        search_signature: bookfarm_runner::signature(&weights, &eval_hash),
        eval_hash,
        ..cfg
    };
    let make = bookfarm_runner::exec::engine_factory(weights);
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
