//! Coordinator configuration file (`--config FILE`, TOML).
//!
//! Precedence, documented once: command-line flag > environment (`BOOKFARM_*`, read by clap in
//! `main`) > this file > built-in default. Unknown keys are errors, so a typo cannot silently
//! fall back to a default.

use crate::identity::IdentityConfig;
use crate::server::ServerLimits;
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
    /// Failure reports from this many different owners quarantine a job (default 2).
    pub max_failures: Option<u32>,
    /// Admin token for admin commands (`--token` of `expand`, `status`, `workers`…). Required
    /// unless `listen` is a loopback address. Workers use their own credentials (`workers add`).
    pub admin_token: Option<String>,
    /// Jobs a worker may hold beyond its threads (default 2).
    pub lookahead: Option<u32>,
    /// Most threads a worker is credited with when capping its leases (default 64).
    pub max_worker_threads: Option<u32>,
    /// Longest lease of a level-0 job, seconds; doubles every 4 levels (default 60).
    pub max_lease_base_secs: Option<u64>,
    /// Longest lease at any level, seconds (default 21600).
    pub max_lease_cap_secs: Option<u64>,
    /// Live sessions per untrusted worker credential (default 2).
    pub max_sessions_untrusted: Option<usize>,
    /// Live sessions per trusted worker credential (default 64).
    pub max_sessions_trusted: Option<usize>,
    /// Registrations per minute from one address (default 30, also the burst).
    pub registrations_per_minute: Option<u32>,
    /// gRPC connections open at once (default 4096; keep LimitNOFILE well above it).
    pub max_connections: Option<usize>,
    /// Seconds a new connection has to get its first request through (TLS and HTTP/2
    /// handshakes, a partial HTTP request; default 10).
    pub handshake_timeout_secs: Option<u64>,
    /// Connections at once from one address (IPv4 address, IPv6 /64), on each port (default 128).
    pub max_connections_per_address: Option<usize>,
    /// Seconds a connection may stay open with no request in flight (default 120).
    pub idle_timeout_secs: Option<u64>,
    /// HTTP connections open at once (default 512).
    pub max_http_connections: Option<usize>,
    /// Evaluation file whose fingerprint workers must match (default: not checked).
    pub eval: Option<PathBuf>,
    /// Require workers to run exactly this coordinator's engine version (default true).
    pub check_engine_version: Option<bool>,
    /// TLS certificate chain (PEM) for the gRPC port (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// Speculative prefetch: searches planned per worker thread at a round's tail (default 2;
    /// 0 turns prefetch off). The book is the same either way.
    pub speculation: Option<u32>,
    /// Backup lease of a round search leased for more than this many times its level's mean
    /// search time (default 4; 0 turns backup leases off).
    pub backup_after: Option<u32>,
    /// A job expected to take this many seconds at the farm's pace goes to fast always-on
    /// workers first (default 120).
    pub long_job_secs: Option<u64>,
    /// Seconds a long job is held for them after a part-time or slower worker was first
    /// refused it (default 30; 0: never held).
    pub reserve_secs: Option<u64>,
    /// Search threads of the coordinator's verifier, its share of this machine's CPU for the
    /// trust root's searches (validating untrusted results, spot checks; default 1, needs
    /// `eval`; 0: none, then only `--trusted` workers validate).
    pub verify_threads: Option<u32>,
    /// N: consecutive results agreeing with the trust root that earn a credential trust
    /// (default 3).
    pub trust_after: Option<u64>,
    /// K: invalid results that block a credential (default 3).
    pub block_after: Option<u64>,
    /// Share of the growth thread's time that speculative planning may take (default 0.25;
    /// clamped to 0.01..=1, 1: no limit).
    pub speculation_share: Option<f64>,
    /// Level of speculation's guesses (default 2; at most 60). Deeper guesses waste less
    /// speculative work at high levels and cost the coordinator more CPU per guess.
    pub predictor_level: Option<u8>,
    /// Search threads from which a program queued without `--schedule` runs on the
    /// asynchronous schedule, counted when it starts (default 256; 0: always serial).
    pub async_threads: Option<usize>,
    /// The asynchronous schedule applies an expansion as soon as its child's search lands, the
    /// parents' re-searches following as repairs (default true: one search per step of a line
    /// instead of two; `docs/schedules.md`).
    pub async_early_child: Option<bool>,
    /// Bound of the store's page cache, MiB (default 64). The in-memory book is outside it:
    /// a serving coordinator holds about 60–80 bytes per position plus this cache.
    pub cache_capacity_mb: Option<u64>,
    /// Longest time between two checkpoints of the growth state while results land,
    /// milliseconds (default 5000; 0: after every growth run). Results are durable before
    /// they are acknowledged either way; a crash costs the growth work since the last
    /// checkpoint, redone from the stored results at the next start.
    pub checkpoint_interval_ms: Option<u64>,
    /// Events the event log keeps (default 100000, about 10 MB; the oldest go first).
    pub event_log_max: Option<u64>,
    /// Publish the whole book on the HTTP port as `/book.dat` and `/book.egbk3` (default
    /// false): a consistent snapshot, encoded once per change of the book, rate-limited per
    /// client address.
    pub publish_book: Option<bool>,
    /// Opening names of the web UI's explorer: a file of lines `MOVES NAME` (e.g.
    /// `f5d6c3d3c4 Tiger`) replacing the project's own list (default: that list).
    pub openings: Option<PathBuf>,
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
            lookahead: self.lookahead.unwrap_or(d.lookahead),
            max_worker_threads: self.max_worker_threads.unwrap_or(d.max_worker_threads),
            max_lease_base: self
                .max_lease_base_secs
                .map_or(d.max_lease_base, |s| Duration::from_secs(s.max(1))),
            max_lease_cap: self
                .max_lease_cap_secs
                .map_or(d.max_lease_cap, |s| Duration::from_secs(s.max(1))),
            speculation: self.speculation.unwrap_or(d.speculation),
            backup_after: self.backup_after.unwrap_or(d.backup_after),
            long_job: self.long_job_secs.map_or(d.long_job, Duration::from_secs),
            reserve_for: self.reserve_secs.map_or(d.reserve_for, Duration::from_secs),
            verify_threads: self.verify_threads.unwrap_or(1),
            trust: crate::service::TrustRules {
                earn_after: self.trust_after.unwrap_or(d.trust.earn_after).max(1),
                block_after: self.block_after.unwrap_or(d.trust.block_after).max(1),
                ..d.trust
            },
            speculation_share: self
                .speculation_share
                .filter(|s| s.is_finite())
                .map_or(d.speculation_share, |s| s.clamp(0.01, 1.0)),
            predictor_level: self
                .predictor_level
                .map_or(d.predictor_level, |l| l.min(60)),
            async_threads: self.async_threads.unwrap_or(d.async_threads),
            async_options: bookfarm_book::schedule::AsyncOptions {
                early_child: self
                    .async_early_child
                    .unwrap_or(d.async_options.early_child),
                ..d.async_options
            },
            cache_capacity: self
                .cache_capacity_mb
                .map_or(d.cache_capacity, |mb| mb.max(1) << 20),
            checkpoint_interval: self
                .checkpoint_interval_ms
                .map_or(d.checkpoint_interval, Duration::from_millis),
            event_log_max: self.event_log_max.map_or(d.event_log_max, |n| n.max(1)),
            publish_book: self.publish_book.unwrap_or(d.publish_book),
            engine_version: if self.check_engine_version.unwrap_or(true) {
                Some(bookfarm_proto::ENGINE_VERSION.to_string())
            } else {
                None
            },
            ..d
        }
    }
}

impl CoordinatorFile {
    /// The authentication settings this file asks for; `session_timeout` follows the lease
    /// timeout and anonymous workers are for the caller to allow (loopback only).
    pub fn identity(&self, service: &ServiceConfig) -> IdentityConfig {
        let d = IdentityConfig::default();
        let rate = self
            .registrations_per_minute
            .unwrap_or(d.registrations_per_minute);
        IdentityConfig {
            admin_token: self.admin_token.clone().filter(|t| !t.is_empty()),
            max_sessions_untrusted: self
                .max_sessions_untrusted
                .unwrap_or(d.max_sessions_untrusted),
            max_sessions_trusted: self.max_sessions_trusted.unwrap_or(d.max_sessions_trusted),
            registrations_per_minute: rate,
            registration_burst: rate,
            session_timeout: service.lease_timeout,
            ..d
        }
    }

    /// The connection limits this file asks for.
    pub fn limits(&self) -> ServerLimits {
        let d = ServerLimits::default();
        ServerLimits {
            max_connections: self.max_connections.unwrap_or(d.max_connections),
            handshake_timeout: self
                .handshake_timeout_secs
                .map_or(d.handshake_timeout, |s| Duration::from_secs(s.max(1))),
            max_connections_per_address: self
                .max_connections_per_address
                .unwrap_or(d.max_connections_per_address),
            idle_timeout: self
                .idle_timeout_secs
                .map_or(d.idle_timeout, |s| Duration::from_secs(s.max(1))),
            max_http_connections: self.max_http_connections.unwrap_or(d.max_http_connections),
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
        let i = f.identity(&s);
        assert!(i.admin_token.is_some());
        assert_eq!(i.session_timeout, s.lease_timeout);
        assert_eq!(f.limits().max_connections, 4096);
        assert_eq!(s.cache_capacity, 64 << 20);
        assert_eq!((s.speculation, s.predictor_level), (2, 2));
        let deep = CoordinatorFile::parse("predictor_level = 99\n").unwrap();
        assert_eq!(deep.service().predictor_level, 60);
        assert_eq!(s.checkpoint_interval, Duration::from_secs(5));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let e = CoordinatorFile::parse("lease_timeout = 3\n").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
