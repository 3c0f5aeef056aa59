//! Engine subcommands: `solve`, `search`, `bench`.

use clap::Subcommand;

/// Engine commands on OBF files.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Exact solve of every position of an OBF file.
    Solve {
        /// The OBF file.
        file: std::path::PathBuf,
    },
}

/// Run one engine command.
pub fn run(cmd: EngineCommand) -> anyhow::Result<()> {
    match cmd {
        EngineCommand::Solve { file } => {
            anyhow::bail!("{}: solve is not implemented yet", file.display())
        }
    }
}
