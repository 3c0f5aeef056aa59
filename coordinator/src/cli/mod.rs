//! The command line: one module per group of commands, over [`io`] (files, signals, runtime)
//! and [`args`] (value parsers with the project's ranges).
//!
//! * [`book`]: `book …`, Edax's book commands on book files and stores;
//! * [`cluster`]: `serve`, `local`, and the admin commands on a running coordinator;
//! * [`workers`]: `workers …` and `quarantine …`;
//! * [`sim`]: the farm simulator; [`probe`]: the container health check.

use clap::{Parser, Subcommand};

pub mod args;
pub mod book;
pub mod cluster;
pub mod invite;
pub mod io;
pub mod probe;
pub mod sim;
pub mod workers;

/// bookfarm coordinator: builds Edax-compatible opening books on many machines.
#[derive(Debug, Parser)]
#[command(name = "bookfarm-coordinator", version, about)]
pub struct Cli {
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
    pub log_format: bookfarm_runner::logging::LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Offline book commands on book files and stores (Edax's command set).
    #[command(subcommand)]
    Book(book::BookCommand),
    #[command(flatten)]
    Cluster(cluster::ClusterCommand),
    /// Worker credentials: add, list, revoke, block, unblock (offline with --db, or on a
    /// running coordinator with the admin token).
    #[command(subcommand)]
    Workers(workers::WorkersCommand),
    /// Invitations volunteers enrol with (`bookfarm-worker enroll URL CODE`), on a stopped
    /// coordinator's store.
    #[command(subcommand)]
    Invite(invite::InviteCommand),
    /// Quarantined positions on a running coordinator.
    #[command(subcommand)]
    Quarantine(workers::QuarantineCommand),
    /// The farm simulator: builds in virtual time with 1 … 10,000 simulated workers.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Exit 0 when an HTTP URL answers 2xx (the container health check: no shell, no curl).
    Probe(probe::ProbeArgs),
}

impl Cli {
    /// Run the command.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Book(cmd) => book::run(cmd),
            Command::Cluster(cmd) => cluster::run(cmd),
            Command::Workers(cmd) => workers::run(cmd),
            Command::Quarantine(cmd) => workers::quarantine(cmd),
            Command::Invite(cmd) => invite::run(cmd),
            Command::Sim(cmd) => sim::run(cmd),
            Command::Probe(args) => probe::run(args),
        }
    }
}
