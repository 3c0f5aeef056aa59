//! `bookfarm-worker`: engine commands (`solve`, `search`, `bench`) and the cluster worker (`run`).

use clap::{Parser, Subcommand};

mod cli_engine;
mod cli_run;

/// bookfarm worker: runs Edax-style leaf searches for a coordinator, or on OBF files.
#[derive(Debug, Parser)]
#[command(name = "bookfarm-worker", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Engine(cli_engine::EngineCommand),
    #[command(flatten)]
    Run(cli_run::RunCommand),
}

fn main() -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A refused value is one line naming the flag, the value and the allowed range.
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = e.to_string();
            eprintln!("{}", text.lines().next().unwrap_or("error: invalid value"));
            return std::process::ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
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
