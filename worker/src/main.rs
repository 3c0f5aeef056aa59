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
    let cli = Cli::parse();
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
