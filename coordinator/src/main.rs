//! `bookfarm-coordinator`: offline book commands (`book …`) and the cluster coordinator.

use clap::{Parser, Subcommand};

mod cli_args;
mod cli_book;
mod cli_cluster;
mod cli_probe;
mod cli_sim;
mod cli_workers;

/// bookfarm coordinator: builds Edax-compatible opening books on many machines.
#[derive(Debug, Parser)]
#[command(name = "bookfarm-coordinator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Offline book commands on book files and stores (Edax's command set).
    #[command(subcommand)]
    Book(cli_book::BookCommand),
    #[command(flatten)]
    Cluster(cli_cluster::ClusterCommand),
    /// Worker credentials: add, list, revoke, block, unblock (offline with --db, or on a
    /// running coordinator with the admin token).
    #[command(subcommand)]
    Workers(cli_workers::WorkersCommand),
    /// Quarantined positions on a running coordinator.
    #[command(subcommand)]
    Quarantine(cli_workers::QuarantineCommand),
    /// The farm simulator: builds in virtual time with 1 … 10,000 simulated workers.
    #[command(subcommand)]
    Sim(cli_sim::SimCommand),
    /// Exit 0 when an HTTP URL answers 2xx (the container health check: no shell, no curl).
    Probe(cli_probe::ProbeArgs),
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
        Command::Book(cmd) => cli_book::run(cmd),
        Command::Cluster(cmd) => cli_cluster::run(cmd),
        Command::Workers(cmd) => cli_workers::run(cmd),
        Command::Quarantine(cmd) => cli_workers::quarantine(cmd),
        Command::Sim(cmd) => cli_sim::run(cmd),
        Command::Probe(args) => cli_probe::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line on stderr: the error and its causes.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
