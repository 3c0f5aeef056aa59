//! `run`: the cluster worker loop.

use anyhow::Context;
use bookfarm_engine::eval::Eval;
use bookfarm_proto::domain::Identity;
use bookfarm_worker::WorkerConfig;
use bookfarm_worker::client::Client;
use bookfarm_worker::config::WorkerFile;
use bookfarm_worker::polite::{ActiveHours, PoliteSettings, Priority};
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
        #[command(flatten)]
        polite: PoliteArgs,
    },
}

/// The polite settings on the command line (over `worker.toml`).
#[derive(Debug, Clone, clap::Args)]
pub struct PoliteArgs {
    /// Scheduling priority of the search threads: idle (SCHED_IDLE: only when nothing else
    /// wants the CPU), low (nice 19) or normal [default: idle].
    #[arg(long, env = "BOOKFARM_PRIORITY")]
    priority: Option<Priority>,
    /// Share of each search thread's core the searches may use, 0.01..=1 [default: 1].
    #[arg(long, env = "BOOKFARM_CPU_SHARE", value_parser = cpu_share)]
    cpu_share: Option<f64>,
    /// Local hours when the worker may search, e.g. 19:00-07:30 or 00:00-08:00,12:00-13:00
    /// [default: always].
    #[arg(long, env = "BOOKFARM_ACTIVE_HOURS")]
    active_hours: Option<ActiveHours>,
    /// Pause while the machine runs on its battery [default: true].
    #[arg(long, env = "BOOKFARM_PAUSE_ON_BATTERY")]
    pause_on_battery: Option<bool>,
    /// A paused worker finishes or hands back its jobs within this many seconds [default: 30].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pause_grace: Option<u64>,
    /// Seconds between two progress lines (0: none) [default: 60].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    progress_secs: Option<u64>,
    /// The power-supply class directory watched for the battery.
    #[arg(long, env = "BOOKFARM_POWER_SUPPLY_DIR", hide = true)]
    power_supply_dir: Option<PathBuf>,
}

fn cpu_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.01..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?}: expected a share between 0.01 and 1")),
    }
}

impl PoliteArgs {
    /// The settings: these flags over the file's over the volunteer defaults.
    fn settings(self, file: &WorkerFile) -> anyhow::Result<PoliteSettings> {
        let d = PoliteSettings::volunteer();
        let priority = match (self.priority, &file.priority) {
            (Some(p), _) => p,
            (None, Some(p)) => p.parse().context("priority in the config file")?,
            (None, None) => d.priority,
        };
        let active_hours = match (self.active_hours, &file.active_hours) {
            (Some(h), _) => Some(h),
            (None, Some(h)) => Some(h.parse().context("active_hours in the config file")?),
            (None, None) => None,
        };
        let cpu_share = match self.cpu_share.or(file.cpu_share) {
            Some(x) => cpu_share(&x.to_string())
                .map_err(anyhow::Error::msg)
                .context("cpu_share")?,
            None => d.cpu_share,
        };
        let secs = |s: Option<u64>| s.map(Duration::from_secs);
        Ok(PoliteSettings {
            priority,
            cpu_share,
            active_hours,
            pause_on_battery: self
                .pause_on_battery
                .or(file.pause_on_battery)
                .unwrap_or(d.pause_on_battery),
            pause_grace: secs(self.pause_grace.or(file.pause_grace_secs)).unwrap_or(d.pause_grace),
            power_supply: self.power_supply_dir.unwrap_or(d.power_supply),
            progress_every: match self.progress_secs.or(file.progress_secs) {
                Some(0) => None,
                Some(s) => Some(Duration::from_secs(s)),
                None => d.progress_every,
            },
        })
    }
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
    if let RunCommand::Enroll {
        url,
        code,
        name,
        tls_ca,
        force,
    } = cmd
    {
        return enroll(url, code, name, tls_ca, force);
    }
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
        polite,
    } = cmd
    else {
        unreachable!("enroll returned above");
    };
    // The enrolment (`enroll`), under the flags, the environment and the file.
    let enrolled = match enrol::config_dir() {
        Ok(d) => enrol::load(&d)?,
        Err(_) => None,
    };
    let file = match &config {
        Some(p) => WorkerFile::parse(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("parsing {}", p.display()))?,
        None => WorkerFile::default(),
    };
    let polite = polite.settings(&file)?;
    let eval_path = eval.or(file.eval.clone());
    let tls_ca = match tls_ca
        .or(file.tls_ca.clone())
        .or(enrolled.as_ref().and_then(|e| e.tls_ca.clone()))
    {
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
    let coordinator = coordinator
        .or(file.coordinator)
        .or(enrolled.as_ref().map(|e| e.coordinator.clone()))
        .unwrap_or(d.coordinator);
    // The enrolled token is for its own coordinator only: never sent to another.
    let enrolled = enrolled.filter(|e| e.coordinator == coordinator);
    let cfg = WorkerConfig {
        coordinator,
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
        token: token
            .or(file.token)
            .or(enrolled.as_ref().map(|e| e.token.clone()))
            .unwrap_or_default(),
        max_backoff: file
            .max_backoff_secs
            .map_or(d.max_backoff, Duration::from_secs),
        tls_ca,
        tls_domain: tls_domain.or(file.tls_domain.clone()),
        polite,
        ..d
    };
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
