//! Cluster subcommands: `serve`, `local`, `expand`, `status`, … (against a running coordinator).

use clap::Subcommand;

/// Cluster commands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Serve the book to workers over gRPC.
    Serve {
        /// The store directory.
        #[arg(long)]
        db: std::path::PathBuf,
    },
}

/// Run one cluster command.
pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Serve { db } => {
            anyhow::bail!("{}: serve is not implemented yet", db.display())
        }
    }
}
