//! Cluster subcommands: `serve`, `local`, `expand`, `pause`, `resume`, `export`, `status`.
//! Stores are created and read with the `book … --db` commands.

use anyhow::{Context, bail};
use bookfarm_coordinator::CoordinatorError;
use bookfarm_coordinator::config::CoordinatorFile;
use bookfarm_coordinator::export::{ExportFormat, encode};
use bookfarm_coordinator::http::api::StatusV1;
use bookfarm_coordinator::progress::{Progress, Snapshot, state_name};
use bookfarm_coordinator::server;
use bookfarm_coordinator::service::{ServiceConfig, StatusReport, new_book};
use bookfarm_coordinator::store::{Store, StoreError};
use bookfarm_engine::eval::Eval;
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::domain::Selector;
use bookfarm_proto::pb;
use bookfarm_proto::pb::admin_service_client::AdminServiceClient;
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// An admin client sending the admin token with every call.
pub(crate) type Admin = AdminServiceClient<InterceptedService<Channel, Bearer>>;

const DEFAULT_COORDINATOR: &str = "http://127.0.0.1:7700";

/// Cluster commands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Serve the book to workers over gRPC (plus /metrics, /healthz, /readyz over HTTP).
    Serve {
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
        #[arg(long, env = "BOOKFARM_EVAL", value_parser = crate::cli_args::existing_file)]
        eval: Option<PathBuf>,
        /// Seconds without heartbeat before a worker's jobs are re-queued (1..=86400).
        #[arg(long, value_parser = crate::cli_args::seconds)]
        lease_timeout: Option<u64>,
        /// TLS certificate chain (PEM) for the gRPC port.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// TLS private key (PEM).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Build a book on this machine: the coordinator's service with in-process workers on
    /// every thread, then write an Edax book.dat. Run again on the same --db to resume.
    Local {
        /// The store directory (created when new).
        #[arg(long)]
        db: PathBuf,
        /// Search threads [default: all cores].
        #[arg(long, value_parser = crate::cli_args::count)]
        workers: Option<usize>,
        /// Level of new positions (for a new book). Measured on 2 busy cores with 2 workers and
        /// deviate 2,4: level 6 depth 14 gives 2,047 positions in 15 s; level 8 depth 14 gives
        /// 1,716 positions in 122 s.
        #[arg(long, default_value_t = 6, value_parser = crate::cli_args::level)]
        level: u8,
        /// Book depth in plies (for a new book).
        #[arg(long, default_value_t = 14, value_parser = crate::cli_args::depth)]
        depth: u8,
        /// Deviate REL,ABS (Edax's defaults 2,4; -129..=129 and 0..=65).
        #[arg(long, value_parser = crate::cli_args::deviate_pair, default_value = "2,4")]
        deviate: (i32, i32),
        /// Enhance MID,END instead of deviate (each 0..=129).
        #[arg(long, value_parser = crate::cli_args::enhance_pair, conflicts_with = "deviate")]
        enhance: Option<(i32, i32)>,
        /// Output file (.dat: Edax book; .csv: Edax CSV).
        #[arg(long, value_parser = crate::cli_args::output_file)]
        out: PathBuf,
        /// Seed the book with these games (transcripts, one per line) before expanding.
        #[arg(long, value_parser = crate::cli_args::existing_file)]
        games: Option<PathBuf>,
        /// Evaluation weights [default: the embedded bookfarm weights].
        #[arg(long, env = "BOOKFARM_EVAL", value_parser = crate::cli_args::existing_file)]
        eval: Option<PathBuf>,
        /// Also serve HTTP metrics on this address.
        #[arg(long)]
        http: Option<String>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Jobs leased beyond the free threads (0..=64; more hoards the last jobs of a pass).
        #[arg(long, default_value_t = 1, value_parser = crate::cli_args::lookahead)]
        lookahead: usize,
        /// Kept for scripts; no effect: growth always runs Edax's serial program, and workers
        /// stay busy through the whole-pass lookahead instead.
        #[arg(long, hide = true)]
        continuous: bool,
    },
    /// Start (or replace) an expansion on a running coordinator.
    Expand {
        #[command(subcommand)]
        selector: ExpandSelector,
        /// Level of new positions (0 = the parent's level).
        #[arg(long, default_value_t = 0, global = true, value_parser = crate::cli_args::level)]
        level: u8,
        /// Block until the expansion is done, showing progress.
        #[arg(long, global = true)]
        wait: bool,
        #[command(flatten)]
        remote: Remote,
    },
    /// Pause the expansion (workers finish their jobs, no new leases).
    Pause {
        #[command(flatten)]
        remote: Remote,
    },
    /// Resume a paused expansion.
    Resume {
        #[command(flatten)]
        remote: Remote,
    },
    /// Write a consistent snapshot of the running coordinator's book (.dat or .csv).
    Export {
        /// Output file.
        out: PathBuf,
        #[command(flatten)]
        remote: Remote,
    },
    /// Book size, queue, workers, throughput.
    Status {
        /// Refresh every second.
        #[arg(long)]
        watch: bool,
        /// Print one JSON object.
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

/// Which selector to run.
#[derive(Debug, Subcommand)]
pub enum ExpandSelector {
    /// Edax `book deviate REL ABS`.
    Deviate {
        /// Relative error.
        #[arg(allow_negative_numbers = true)]
        rel: i32,
        /// Absolute error.
        abs: i32,
    },
    /// Edax `book enhance MID END`.
    Enhance {
        /// Midgame error.
        mid: i32,
        /// Endcut error.
        end: i32,
    },
    /// Edax `book play`.
    Play,
    /// Edax `book extend`.
    Extend,
    /// `book upgrade`: re-search at LEVEL the leaves that can still change a value inside the
    /// window of ERROR discs around the root's value, closest to the root first, until none is
    /// left; a value is never replaced by one from a lower level.
    Upgrade {
        /// The level to re-search at (1..=60).
        #[arg(id = "upgrade_level", value_name = "LEVEL", value_parser = crate::cli_args::search_level)]
        target: u8,
        /// Half-width of the window around the root's value, in discs (0..=129).
        #[arg(long, default_value_t = 4, value_parser = crate::cli_args::error_margin)]
        error: i32,
    },
    /// Line audit: play the book's best lines to the end with searches at LEVEL (both sides)
    /// and report the lines whose result (win, draw or loss) contradicts the book's value.
    Audit {
        /// The level of the searches that play the lines out (1..=60).
        #[arg(id = "audit_level", value_name = "LEVEL", value_parser = crate::cli_args::search_level)]
        target: u8,
        /// Add the contradicting lines (book line and continuation) to the book afterwards, as
        /// `book add` does (new positions at --level).
        #[arg(long)]
        queue: bool,
    },
}

/// Where the coordinator is.
#[derive(Debug, clap::Args)]
pub struct Remote {
    /// Coordinator URL.
    #[arg(long, global = true, env = "BOOKFARM_COORDINATOR", default_value = DEFAULT_COORDINATOR)]
    pub(crate) coordinator: String,
    /// Admin token.
    #[arg(
        long,
        global = true,
        env = "BOOKFARM_TOKEN",
        hide_env_values = true,
        default_value = ""
    )]
    token: String,
    /// CA certificate (PEM) of a TLS coordinator (use an https:// URL).
    #[arg(long, global = true, env = "BOOKFARM_TLS_CA")]
    tls_ca: Option<PathBuf>,
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Run one cluster command.
pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Serve {
            db,
            listen,
            http,
            config,
            admin_token,
            eval,
            lease_timeout,
            tls_cert,
            tls_key,
        } => serve(
            db,
            listen,
            http,
            config,
            admin_token,
            eval,
            lease_timeout,
            tls_cert.zip(tls_key),
        ),
        ClusterCommand::Local {
            db,
            workers,
            level,
            depth,
            deviate,
            enhance,
            out,
            games,
            eval,
            http,
            quiet,
            lookahead,
            continuous: _,
        } => {
            let selector = match enhance {
                Some((midgame, endcut)) => Selector::Enhance { midgame, endcut },
                None => Selector::Deviate {
                    relative: deviate.0,
                    absolute: deviate.1,
                },
            };
            let workers = workers
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            local(LocalArgs {
                db,
                workers,
                level,
                depth,
                selector,
                out,
                games,
                eval,
                http,
                quiet,
                lookahead,
            })
        }
        ClusterCommand::Expand {
            selector,
            level,
            wait,
            remote,
        } => {
            let sel = match selector {
                ExpandSelector::Deviate { rel, abs } => Selector::Deviate {
                    relative: rel,
                    absolute: abs,
                },
                ExpandSelector::Enhance { mid, end } => Selector::Enhance {
                    midgame: mid,
                    endcut: end,
                },
                ExpandSelector::Play => Selector::Play,
                ExpandSelector::Extend => Selector::Extend,
                ExpandSelector::Upgrade { target, error } => Selector::Upgrade {
                    level: target,
                    error,
                },
                ExpandSelector::Audit { target, queue } => Selector::Audit {
                    level: target,
                    queue,
                },
            };
            runtime()?.block_on(async {
                let mut c = admin(&remote).await?;
                let before = c
                    .get_status(pb::GetStatusRequest::default())
                    .await
                    .context("getting the status")?
                    .into_inner()
                    .programs_finished;
                let r = c
                    .start_expansion(pb::StartExpansionRequest {
                        selector: Some(sel.into()),
                        level: u32::from(level),
                    })
                    .await
                    .context("starting the expansion")?
                    .into_inner();
                println!("{sel} started: {} jobs queued", r.queued);
                if wait {
                    watch(&mut c, true).await?;
                    // What the programs finished since the start did (an audit's
                    // contradictions among them).
                    let s = c
                        .get_status(pb::GetStatusRequest::default())
                        .await
                        .context("getting the status")?
                        .into_inner();
                    let n = usize::try_from(s.programs_finished.saturating_sub(before))
                        .unwrap_or(usize::MAX)
                        .min(s.reports.len());
                    for line in &s.reports[s.reports.len() - n..] {
                        println!("{line}");
                    }
                }
                Ok(())
            })
        }
        ClusterCommand::Pause { remote } => runtime()?.block_on(async {
            admin(&remote)
                .await?
                .pause(pb::PauseRequest {})
                .await
                .context("pausing")?;
            println!("paused");
            Ok(())
        }),
        ClusterCommand::Resume { remote } => runtime()?.block_on(async {
            admin(&remote)
                .await?
                .resume(pb::ResumeRequest {})
                .await
                .context("resuming")?;
            println!("resumed");
            Ok(())
        }),
        ClusterCommand::Export { out, remote } => runtime()?.block_on(async {
            let mut c = admin(&remote).await?;
            let format = match ExportFormat::from_path(&out) {
                ExportFormat::Csv => pb::ExportFormat::Csv,
                ExportFormat::Edax => pb::ExportFormat::Edax,
            };
            let mut stream = c
                .export_book(pb::ExportBookRequest {
                    format: format as i32,
                })
                .await
                .context("exporting")?
                .into_inner();
            let mut bytes = Vec::new();
            while let Some(chunk) = stream.message().await.context("receiving the export")? {
                bytes.extend_from_slice(&chunk.data);
            }
            write_atomic(&out, &bytes)?;
            println!("wrote {} ({} bytes)", out.display(), bytes.len());
            Ok(())
        }),
        ClusterCommand::Status {
            watch: w,
            json,
            remote,
        } => runtime()?.block_on(async {
            let mut c = admin(&remote).await?;
            if w {
                return watch(&mut c, false).await;
            }
            let s = c
                .get_status(pb::GetStatusRequest::default())
                .await
                .context("getting the status")?
                .into_inner();
            if json {
                println!("{}", status_json(&s)?);
            } else {
                print_status(&s);
            }
            Ok(())
        }),
    }
}

/// Connect to the coordinator's admin service with the admin token.
pub(crate) async fn admin(r: &Remote) -> anyhow::Result<Admin> {
    let mut ep = tonic::transport::Endpoint::from_shared(r.coordinator.clone())
        .with_context(|| format!("invalid coordinator url {:?}", r.coordinator))?;
    if let Some(ca) = &r.tls_ca {
        let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
        ep = ep
            .tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(pem)),
            )
            .context("tls configuration")?;
    }
    let ch = ep
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("connecting to {}", r.coordinator))?;
    let bearer = Bearer::new(&r.token).context("the admin token")?;
    Ok(AdminServiceClient::with_interceptor(ch, bearer)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(server::MAX_ADMIN_MESSAGE_BYTES))
}

/// `status --json`: the web UI's `/api/v1/status` object for the same coordinator.
fn status_json(s: &pb::GetStatusResponse) -> anyhow::Result<String> {
    serde_json::to_string(&StatusV1::from(s)).context("encoding the status")
}

fn print_status(s: &pb::GetStatusResponse) {
    println!(
        "state {}  {}\npositions {}  queued {}  in flight {}  completed {}  {:.1} results/s  root value {}",
        state_name(s.state),
        s.expansion,
        s.positions,
        s.queued,
        s.in_flight,
        s.completed,
        s.results_per_second,
        s.root_value
    );
    if s.speculative_leased + s.backup_leased > 0 {
        println!(
            "prefetch: {} speculative leases, {} results used, {} not used (yet); {} backup leases",
            s.speculative_leased, s.prefetch_used, s.prefetch_unused, s.backup_leased
        );
    }
    for w in &s.workers {
        println!(
            "  {:<20} {:>3} threads  {:>3} in flight  {:>8} done  {:>7.1}/s  seen {:.1}s ago",
            w.name,
            w.threads,
            w.in_flight,
            w.completed,
            w.results_per_second,
            w.last_seen_ms as f64 / 1000.0
        );
    }
    if s.workers_total > s.workers.len() as u64 {
        println!(
            "  … and {} more workers",
            s.workers_total - s.workers.len() as u64
        );
    }
    for q in &s.quarantined {
        let p = q.position.unwrap_or_default();
        println!(
            "  quarantined {:016x}:{:016x} (job {}): {}",
            p.player, p.opponent, q.job_id, q.last_reason
        );
    }
}

/// Refresh the one-line progress (state, throughput with its sparkline, queue, workers, round
/// ETA) every second; with `until_done`, return when the expansion is done.
async fn watch(c: &mut Admin, until_done: bool) -> anyhow::Result<()> {
    let bar = spinner();
    let mut progress = Progress::new();
    let t0 = Instant::now();
    loop {
        let s = c
            .get_status(pb::GetStatusRequest::default())
            .await
            .context("getting the status")?
            .into_inner();
        let snap = Snapshot::from(&s);
        progress.observe(t0.elapsed(), &snap);
        bar.set_message(progress.line(&snap));
        if until_done && s.state == pb::ExpansionState::Done as i32 {
            bar.finish();
            println!("done: {} positions", s.positions);
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn spinner() -> ProgressBar {
    let p = ProgressBar::new_spinner();
    p.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    p.enable_steady_tick(Duration::from_millis(200));
    p
}

/// Write through a temporary file and rename, so a reader never sees half a book.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

fn service_config(
    file: &CoordinatorFile,
    eval: Option<&Path>,
    lease_timeout: Option<u64>,
) -> anyhow::Result<(ServiceConfig, Option<Arc<Eval>>)> {
    let mut cfg = file.service();
    let mut weights = None;
    if let Some(p) = eval.or(file.eval.as_deref()) {
        let bytes =
            std::fs::read(p).with_context(|| format!("reading evaluation {}", p.display()))?;
        let eval = Arc::new(
            Eval::from_bytes(&bytes)
                .with_context(|| format!("loading evaluation {}", p.display()))?,
        );
        let hash = bookfarm_proto::eval_fingerprint(&bytes);
        cfg.signature = Some(bookfarm_runner::signature(&eval, &hash));
        cfg.eval_hash = Some(hash);
        weights = Some(eval);
    }
    if let Some(s) = lease_timeout {
        cfg.lease_timeout = Duration::from_secs(s.max(1));
    }
    Ok((cfg, weights))
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[allow(clippy::too_many_arguments)]
fn serve(
    db: Option<PathBuf>,
    listen: Option<String>,
    http: Option<String>,
    config: Option<PathBuf>,
    admin_token: Option<String>,
    eval: Option<PathBuf>,
    lease_timeout: Option<u64>,
    tls: Option<(PathBuf, PathBuf)>,
) -> anyhow::Result<()> {
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
    let (cfg, weights) = service_config(&file, eval.as_deref(), lease_timeout)?;
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
    // Anonymous workers only on loopback, and only while no worker credential exists.
    ids.anonymous_workers = loopback;
    let tls = match tls.or(file.tls_cert.clone().zip(file.tls_key.clone())) {
        Some((cert, key)) => Some(server::TlsIdentity {
            cert_pem: std::fs::read(&cert)
                .with_context(|| format!("reading {}", cert.display()))?,
            key_pem: std::fs::read(&key).with_context(|| format!("reading {}", key.display()))?,
        }),
        None => None,
    };
    let (c, ids) = match server::open_with_identities(&db, cfg, ids) {
        Ok(opened) => opened,
        // That message names the directory already.
        Err(e @ CoordinatorError::Store(StoreError::NoBook(_))) => return Err(e.into()),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("opening store {}", db.display())));
        }
    };
    let opts = server::ServeOptions {
        tls,
        limits: file.limits(),
    };
    // The trust root's own searches, on the configured share of this machine's threads.
    let verifier = match (weights, c.config().verify_threads) {
        (Some(eval), n) if n > 0 => {
            let (hash, sig) = (
                c.config().eval_hash.clone().unwrap_or_default(),
                c.config().signature.clone().unwrap_or_default(),
            );
            Some(bookfarm_coordinator::local::spawn_verifier(
                c.clone(),
                n as usize,
                bookfarm_runner::exec::engine_factory(eval),
                &hash,
                &sig,
            ))
        }
        _ => None,
    };
    let _verifier = verifier;
    runtime()?.block_on(async move {
        let g = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("binding gRPC {listen}"))?;
        let h = tokio::net::TcpListener::bind(&http)
            .await
            .with_context(|| format!("binding HTTP {http}"))?;
        println!("serving gRPC on {listen}, HTTP on {http}");
        server::serve(c, ids, g, Some(h), opts, shutdown_signal()).await?;
        Ok(())
    })
}

/// Arguments of `local`.
#[derive(Debug)]
struct LocalArgs {
    db: PathBuf,
    workers: usize,
    level: u8,
    depth: u8,
    selector: Selector,
    out: PathBuf,
    games: Option<PathBuf>,
    eval: Option<PathBuf>,
    http: Option<String>,
    quiet: bool,
    lookahead: usize,
}

/// Create the store when it holds no book yet; returns true when created.
fn ensure_book(db: &Path, level: u8, depth: u8) -> anyhow::Result<bool> {
    if Store::dir_has_book(db).with_context(|| format!("opening store {}", db.display()))? {
        return Ok(false);
    }
    let store = Store::open(db).with_context(|| format!("opening store {}", db.display()))?;
    let (h, entries) = new_book(level, depth);
    store.create(&h, &entries)?;
    Ok(true)
}

fn local(a: LocalArgs) -> anyhow::Result<()> {
    // Catch Ctrl-C before anything touches the store.
    let (flag, rt) = crate::cli_book::interrupt_flag()?;
    let (weights, hash) = bookfarm_runner::load_eval(a.eval.as_deref())?;
    let created = ensure_book(&a.db, a.level, a.depth)?;
    let search_signature = bookfarm_runner::signature(&weights, &hash);
    let cfg = ServiceConfig {
        eval_hash: Some(hash.clone()),
        signature: Some(search_signature.clone()),
        engine_version: Some(bookfarm_proto::ENGINE_VERSION.to_string()),
        lookahead: u32::try_from(a.lookahead).unwrap_or(u32::MAX),
        ..ServiceConfig::default()
    };
    let c = crate::cli_book::open_db(&a.db, cfg)?;
    let (h, _, _, _) = c.info();
    if created {
        println!(
            "new book: level {}, depth {} in {}",
            h.level,
            h.depth(),
            a.db.display()
        );
    } else {
        println!(
            "resuming book in {}: level {}, depth {}, {} positions",
            a.db.display(),
            h.level,
            h.depth(),
            c.status().positions
        );
    }
    if let Some(g) = &a.games {
        let text =
            std::fs::read_to_string(g).with_context(|| format!("reading games {}", g.display()))?;
        let mut games = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            games.push(
                bookfarm_engine::formats::transcript::parse_moves(line)
                    .with_context(|| format!("{}:{}", g.display(), i + 1))?,
            );
        }
        c.add_games(&games)?;
    }
    c.start_expansion(a.selector, 0)?;
    let t0 = Instant::now();
    let opts = bookfarm_coordinator::local::LocalOptions {
        workers: a.workers,
        eval_hash: hash,
        search_signature,
        http: a.http.clone(),
        lookahead: a.lookahead,
    };
    let quiet = a.quiet;
    let terminal = !quiet && std::io::stderr().is_terminal();
    let bar = if terminal {
        spinner()
    } else {
        ProgressBar::hidden()
    };
    let mut progress = Progress::new();
    let mut next_log = Duration::ZERO;
    let outcome = rt.block_on(bookfarm_coordinator::local::run(
        c.clone(),
        &opts,
        bookfarm_runner::exec::engine_factory(weights),
        crate::cli_book::flag_set(flag),
        |s: &StatusReport| {
            // One line on a terminal, refreshed; a log line every 10 s otherwise.
            let snap = Snapshot::from(s);
            let at = t0.elapsed();
            progress.observe(at, &snap);
            let line = progress.line(&snap);
            if terminal {
                bar.set_message(line);
            } else if !quiet && at >= next_log {
                tracing::info!(progress = %line, "local build");
                next_log = at + Duration::from_secs(10);
            }
        },
    ))?;
    bar.finish_and_clear();
    for line in c.reports() {
        println!("{line}");
    }
    let s = c.status();
    let (h, positions) = c.snapshot();
    let format = ExportFormat::from_path(&a.out);
    write_atomic(&a.out, &encode(h, &positions, format))?;
    println!(
        "{}: {} positions, {} results in {:.1}s; wrote {}",
        if outcome.interrupted {
            "interrupted (run again to resume)"
        } else {
            "done"
        },
        s.positions,
        s.completed,
        t0.elapsed().as_secs_f64(),
        a.out.display()
    );
    for w in &outcome.workers {
        println!(
            "workers: {} threads, {:.2}s searching ({} nodes), {:.2}s idle ({:.1}% of thread time; \
             {:.2}s with no job at all), {:.2}s in service calls",
            a.workers,
            w.search_time.as_secs_f64(),
            w.nodes,
            w.idle_time.as_secs_f64(),
            100.0 * outcome.idle_share(a.workers),
            w.starved_time.as_secs_f64(),
            w.rpc_time.as_secs_f64()
        );
    }
    Ok(())
}
