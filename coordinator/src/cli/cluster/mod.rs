//! The coordinator's own commands: `serve` ([`serve`]), `local` ([`local`]), `restore`, and the
//! admin commands on a running coordinator ([`remote`]: `expand`, `pause`, `resume`, `export`,
//! `backup`, `status`). Stores are created and read with the `book … --db` commands.

use anyhow::Context;
use bookfarm_coordinator::server;
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::pb::admin_service_client::AdminServiceClient;
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

pub mod local;
pub mod remote;
pub mod serve;

/// An admin client sending the admin token with every call.
pub(crate) type Admin = AdminServiceClient<InterceptedService<Channel, Bearer>>;

const DEFAULT_COORDINATOR: &str = "http://127.0.0.1:7700";

/// Cluster commands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Serve the book to workers over gRPC (plus /metrics, /healthz, /readyz over HTTP).
    Serve(serve::ServeArgs),
    /// Build a book on this machine: the coordinator's service with in-process workers on
    /// every thread, then write the book (Edax book.dat, CSV or .egbk3 by the --out
    /// extension). Run again on the same --db to resume.
    Local(local::LocalArgs),
    /// Make a store from a backup (`backup OUT`): DIR must not exist. The backup is checked
    /// whole first (a backup cut short or damaged is refused), the store is built beside DIR
    /// and renamed into place once every record and the base file check out.
    Restore {
        /// The backup file.
        backup: PathBuf,
        /// The new store directory.
        #[arg(long)]
        db: PathBuf,
    },
    #[command(flatten)]
    Admin(remote::AdminCommand),
}

/// Run one cluster command.
pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Serve(args) => serve::run(args),
        ClusterCommand::Local(args) => local::run(args),
        ClusterCommand::Restore { backup, db } => {
            let s = bookfarm_coordinator::store::backup::restore(&backup, &db)
                .with_context(|| format!("restoring {} into {}", backup.display(), db.display()))?;
            println!(
                "restored {} into {} ({} records, {} bytes of base file, all checked)",
                backup.display(),
                db.display(),
                s.records,
                s.base_bytes
            );
            Ok(())
        }
        ClusterCommand::Admin(cmd) => remote::run(cmd),
    }
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

/// A spinner with the elapsed time and a message.
pub(crate) fn spinner() -> ProgressBar {
    let p = ProgressBar::new_spinner();
    p.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    p.enable_steady_tick(Duration::from_millis(200));
    p
}
