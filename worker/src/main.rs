//! `bookfarm-worker`: engine commands (`solve`, `search`, `bench`) and the cluster worker (`run`).

use bookfarm_runner::logging::LogFormat;
use clap::{Parser, Subcommand};

mod cli_engine;
mod cli_run;

/// bookfarm worker: runs Edax-style leaf searches for a coordinator, or on OBF files.
#[derive(Debug, Parser)]
#[command(name = "bookfarm-worker", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines on stderr: `text` (colour codes only on a terminal) or `json` (one object
    /// per line, for log aggregators).
    #[arg(
        long,
        global = true,
        env = "BOOKFARM_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Engine(cli_engine::EngineCommand),
    #[command(flatten)]
    Run(cli_run::RunCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    bookfarm_runner::logging::init(cli.log_format);
    let result = match cli.command {
        Command::Engine(cmd) => cli_engine::run(cmd),
        Command::Run(cmd) => cli_run::run(cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
