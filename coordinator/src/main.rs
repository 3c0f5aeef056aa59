//! `bookfarm-coordinator`: offline book commands (`book …`) and the cluster coordinator.

use clap::Parser;

mod cli;

fn main() -> std::process::ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // A refused value is one line naming the flag, the value and the allowed range.
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = e.to_string();
            eprintln!("{}", text.lines().next().unwrap_or("error: invalid value"));
            return std::process::ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    bookfarm_runner::logging::init(cli.log_format);
    match cli.run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line on stderr: the error and its causes.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
