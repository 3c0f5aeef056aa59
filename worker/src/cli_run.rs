//! `run`: the cluster worker loop.

use clap::Subcommand;

/// Worker commands against a coordinator.
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Lease and run leaf-search jobs from a coordinator until stopped.
    Run {
        /// Coordinator URL.
        #[arg(long, default_value = "http://127.0.0.1:7700")]
        coordinator: String,
    },
}

/// Run the worker command.
pub fn run(cmd: RunCommand) -> anyhow::Result<()> {
    match cmd {
        RunCommand::Run { coordinator } => {
            anyhow::bail!("{coordinator}: run is not implemented yet")
        }
    }
}
