//! Coordinator configuration file (`--config FILE`, TOML).
//!
//! Precedence, documented once: command-line flag > environment (`BOOKFARM_*`, read by clap in
//! `main`) > this file > built-in default. Unknown keys are errors, so a typo cannot silently
//! fall back to a default.

use crate::service::ServiceConfig;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The `coordinator.toml` file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorFile {
    /// Store directory.
    pub db: Option<PathBuf>,
    /// gRPC listen address (default 127.0.0.1:7700).
    pub listen: Option<String>,
    /// HTTP (metrics, health) listen address (default 127.0.0.1:7701).
    pub http: Option<String>,
    /// Seconds without a heartbeat after which a worker's jobs are re-queued (default 60).
    pub lease_timeout_secs: Option<u64>,
    /// Heartbeat period suggested to workers, seconds (default 10).
    pub heartbeat_interval_secs: Option<u64>,
    /// Failures after which a job is quarantined (default 3).
    pub max_failures: Option<u32>,
    /// Shared token workers and admin clients must present (default: none).
    pub auth_token: Option<String>,
    /// Evaluation file whose fingerprint workers must match (default: not checked).
    pub eval: Option<PathBuf>,
    /// Require workers to run exactly this coordinator's engine version (default true).
    pub check_engine_version: Option<bool>,
    /// TLS certificate chain (PEM) for the gRPC port (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    pub tls_key: Option<PathBuf>,
}

impl CoordinatorFile {
    /// Parse TOML text.
    pub fn parse(text: &str) -> Result<CoordinatorFile, toml::de::Error> {
        toml::from_str(text)
    }

    /// The service settings this file asks for, over the defaults (the eval fingerprint is
    /// filled in by the caller, which reads the file).
    pub fn service(&self) -> ServiceConfig {
        let d = ServiceConfig::default();
        ServiceConfig {
            lease_timeout: self
                .lease_timeout_secs
                .map_or(d.lease_timeout, Duration::from_secs),
            heartbeat_interval: self
                .heartbeat_interval_secs
                .map_or(d.heartbeat_interval, Duration::from_secs),
            max_failures: self.max_failures.unwrap_or(d.max_failures).max(1),
            auth_token: self.auth_token.clone().filter(|t| !t.is_empty()),
            engine_version: if self.check_engine_version.unwrap_or(true) {
                Some(bookfarm_proto::ENGINE_VERSION.to_string())
            } else {
                None
            },
            ..d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_parses() {
        let text = include_str!("../../deploy/coordinator.toml");
        let f = CoordinatorFile::parse(text).expect("deploy/coordinator.toml parses");
        let s = f.service();
        assert_eq!(s.lease_timeout, Duration::from_secs(90));
        assert!(f.db.is_some());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let e = CoordinatorFile::parse("lease_timeout = 3\n").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
