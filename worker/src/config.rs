//! Worker configuration: the validated library [`WorkerConfig`] and the optional `worker.toml`.
//! Precedence: flag > environment (`BOOKFARM_*`, read by clap in `main`) > file > default.

use crate::polite::PoliteSettings;
pub use bookfarm_runner::AckHook;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// Settings of one worker process.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Coordinator URL (`http://host:7700`).
    pub coordinator: String,
    /// Search threads.
    pub threads: usize,
    /// Jobs leased beyond the free threads, so no thread idles between results.
    pub lookahead: usize,
    /// Name shown in the coordinator's status.
    pub name: String,
    /// Authentication token.
    pub token: String,
    /// Fingerprint of the evaluation weights (sent with every RPC).
    pub eval_hash: String,
    /// The search signature of the searchers ([`bookfarm_runner::signature`]; sent with every
    /// RPC).
    pub search_signature: String,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Per-RPC timeout.
    pub rpc_timeout: Duration,
    /// Exit instead of retrying when the coordinator cannot be reached for this long
    /// (None: retry forever).
    pub give_up_after: Option<Duration>,
    /// Called for every acknowledgement the coordinator sends (tests log acknowledged job ids).
    pub on_ack: Option<AckHook>,
    /// PEM certificate of the CA that signed the coordinator's certificate (enables TLS; the
    /// URL must then be `https://`).
    pub tls_ca: Option<Vec<u8>>,
    /// Server name to verify (default: the URL's host).
    pub tls_domain: Option<String>,
    /// Priority, CPU share, active hours, battery, progress line.
    pub polite: PoliteSettings,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            coordinator: "http://127.0.0.1:7700".into(),
            threads: 1,
            lookahead: 1,
            name: "worker".into(),
            token: String::new(),
            eval_hash: String::new(),
            search_signature: String::new(),
            max_backoff: Duration::from_secs(30),
            rpc_timeout: Duration::from_secs(30),
            give_up_after: None,
            on_ack: None,
            tls_ca: None,
            tls_domain: None,
            polite: PoliteSettings::default(),
        }
    }
}

/// The `worker.toml` file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkerFile {
    /// Coordinator URL.
    pub coordinator: Option<String>,
    /// Search threads (default: all cores).
    pub threads: Option<usize>,
    /// Extra jobs leased ahead (default 1).
    pub lookahead: Option<usize>,
    /// Worker name (default: host name).
    pub name: Option<String>,
    /// Authentication token.
    pub token: Option<String>,
    /// Evaluation weights file.
    pub eval: Option<PathBuf>,
    /// Longest reconnection backoff, seconds (default 30).
    pub max_backoff_secs: Option<u64>,
    /// CA certificate (PEM) for a TLS coordinator (`https://` URL).
    pub tls_ca: Option<PathBuf>,
    /// Server name to verify instead of the URL's host.
    pub tls_domain: Option<String>,
    /// Scheduling priority of the search threads: idle (default), low or normal.
    pub priority: Option<String>,
    /// Share of each search thread's core the searches may use, 0.01..=1 (default 1).
    pub cpu_share: Option<f64>,
    /// Hours of the day (local time) when the worker may search, e.g. "19:00-07:30"
    /// (default: always).
    pub active_hours: Option<String>,
    /// Pause while the machine runs on its battery (default true).
    pub pause_on_battery: Option<bool>,
    /// A paused worker finishes or hands back its jobs within this many seconds (default 30).
    pub pause_grace_secs: Option<u64>,
    /// Seconds between two progress lines (default 60; 0: none).
    pub progress_secs: Option<u64>,
}

impl WorkerFile {
    /// Parse TOML text.
    pub fn parse(text: &str) -> Result<WorkerFile, toml::de::Error> {
        toml::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_parses() {
        let f = WorkerFile::parse(include_str!("../../deploy/worker.toml"))
            .expect("deploy/worker.toml parses");
        assert!(f.coordinator.unwrap().starts_with("http"));
        assert!(f.eval.is_some());
        let p = f
            .priority
            .unwrap()
            .parse::<crate::polite::Priority>()
            .unwrap();
        assert_eq!(p, crate::polite::Priority::Idle);
        assert_eq!(f.active_hours, None, "the example searches at all hours");
        assert_eq!(f.pause_on_battery, Some(true));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(WorkerFile::parse("thread = 3\n").is_err());
    }
}
