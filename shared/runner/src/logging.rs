//! How the binaries log: `tracing` events on stderr, as plain text or as one JSON object per
//! line (for log aggregators), filtered by `RUST_LOG` (default `info`).
//!
//! Colour codes are written only when stderr is a terminal (and `NO_COLOR` is unset): a log
//! that goes to a file, a pipe, journald or `kubectl logs` is plain text.

use std::io::IsTerminal;
use std::str::FromStr;

/// The format of the log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (`2025-… INFO target: message key=value`).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (the message
    /// included) and the span context.
    Json,
}

impl LogFormat {
    /// The values `--log-format` accepts.
    pub const NAMES: [&'static str; 2] = ["text", "json"];
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<LogFormat, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("unknown log format {s:?} (text or json)")),
        }
    }
}

/// Whether text lines carry colour codes: only on a terminal, and never with `NO_COLOR` set
/// (<https://no-color.org>).
pub fn use_colour(stderr_is_terminal: bool, no_color: bool) -> bool {
    stderr_is_terminal && !no_color
}

/// Install the process's log subscriber (once, before anything logs).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(use_colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            ))
            .init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_by_name_and_nothing_else() {
        assert_eq!("text".parse(), Ok(LogFormat::Text));
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        for bad in ["", "JSON", "plain", "text "] {
            assert!(bad.parse::<LogFormat>().is_err(), "{bad:?}");
        }
        for name in LogFormat::NAMES {
            assert!(name.parse::<LogFormat>().is_ok());
        }
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, false));
        assert!(!use_colour(false, false));
        assert!(!use_colour(true, true));
        assert!(!use_colour(false, true));
    }
}
