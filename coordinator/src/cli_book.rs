//! `book …` subcommands.

use clap::Subcommand;

/// Offline book commands.
#[derive(Debug, Subcommand)]
pub enum BookCommand {
    /// Print the canonical dump of an Edax book.dat.
    Dump {
        /// The book file.
        file: std::path::PathBuf,
    },
}

/// Run one offline book command.
pub fn run(cmd: BookCommand) -> anyhow::Result<()> {
    match cmd {
        BookCommand::Dump { file } => {
            anyhow::bail!("{}: book dump is not implemented yet", file.display())
        }
    }
}
