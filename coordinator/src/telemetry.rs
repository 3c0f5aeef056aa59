//! The coordinator's Prometheus metrics, declared once: every name, its kind and its help text.
//!
//! Call sites use these constants, never string literals, and [`register`] describes every metric
//! and creates the counters and histograms at zero when the recorder is installed, so that
//! `/metrics` names each of them from the first scrape on (an alert on `increase(...)` then sees
//! the first increment, and the operators' kit in `deploy/` can be checked against a scrape).

/// What kind of series a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only ever increases (`_total`).
    Counter,
    /// Set to the current value (at each scrape or on change).
    Gauge,
    /// Observations in buckets (`_bucket`, `_sum`, `_count`).
    Histogram,
}

/// One metric of the registry.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The series name.
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// The `# HELP` text.
    pub help: &'static str,
    /// Label names it carries (none: one series).
    pub labels: &'static [&'static str],
}

/// Jobs leased to workers.
pub const JOBS_LEASED: &str = "bookfarm_jobs_leased_total";
/// Results accepted and stored.
pub const JOBS_COMPLETED: &str = "bookfarm_jobs_completed_total";
/// Failure reports from workers.
pub const JOBS_FAILED: &str = "bookfarm_jobs_failed_total";
/// Leases that expired (worker silent or lease past its level's maximum) and went back to the queue.
pub const JOBS_EXPIRED: &str = "bookfarm_jobs_expired_total";
/// Store operations that failed (requests answered `Internal`, growth runs that could not persist).
pub const STORE_ERRORS: &str = "bookfarm_store_errors_total";
/// Results per second over the last minute.
pub const RESULTS_PER_SECOND: &str = "bookfarm_results_per_second";
/// Jobs waiting for a worker.
pub const QUEUE_DEPTH: &str = "bookfarm_queue_depth";
/// Jobs leased and not yet answered.
pub const IN_FLIGHT: &str = "bookfarm_in_flight";
/// Positions in the book.
pub const POSITIONS: &str = "bookfarm_positions";
/// Heap bytes of the in-memory book (records, links, hash table, parent index).
pub const BOOK_BYTES: &str = "bookfarm_book_bytes";
/// Registered workers.
pub const WORKERS: &str = "bookfarm_workers";
/// Per worker: results per second.
pub const WORKER_RESULTS_PER_SECOND: &str = "bookfarm_worker_results_per_second";
/// Per worker: results accepted since it registered.
pub const WORKER_COMPLETED: &str = "bookfarm_worker_completed";
/// Per worker: jobs it holds.
pub const WORKER_IN_FLIGHT: &str = "bookfarm_worker_in_flight";
/// Seconds a `LeaseJobs` call took on the coordinator.
pub const LEASE_SECONDS: &str = "bookfarm_lease_seconds";
/// Seconds a `SubmitResults` call took on the coordinator (including the durable flush).
pub const SUBMIT_SECONDS: &str = "bookfarm_submit_seconds";
/// Leases of speculative jobs (prefetch).
pub const SPECULATIVE_LEASED: &str = "bookfarm_speculative_leased_total";
/// Backup leases of round searches that ran far longer than their level's mean.
pub const BACKUP_LEASED: &str = "bookfarm_backup_leased_total";
/// Prefetched results the growth programs used.
pub const PREFETCH_USED: &str = "bookfarm_prefetch_used";
/// Prefetched results not used (yet): wasted unless a later pass needs them.
pub const PREFETCH_UNUSED: &str = "bookfarm_prefetch_unused";

/// Events recorded since start, per kind (see `crate::events`).
pub const EVENTS: &str = "bookfarm_events_total";

/// Replication overhead: share of the search time spent on replicas beyond the first answer.
pub const REPLICATION_OVERHEAD: &str = "bookfarm_replication_overhead";
/// Check jobs queued or leased now.
pub const PENDING_CHECKS: &str = "bookfarm_pending_checks";
/// How long the oldest check job has waited.
pub const OLDEST_CHECK_AGE: &str = "bookfarm_oldest_check_age_seconds";
/// Invalid results caught since start.
pub const INVALID_RESULTS: &str = "bookfarm_invalid_results_total";
/// Rollbacks (replays or retractions) since start.
pub const REPLAYS: &str = "bookfarm_replays_total";
/// Contributors blocked now.
pub const BLOCKED_CONTRIBUTORS: &str = "bookfarm_blocked_contributors";

const WORKER: &[&str] = &["worker"];

/// Every metric the coordinator exports.
pub const METRICS: &[Metric] = &[
    Metric {
        name: JOBS_LEASED,
        kind: Kind::Counter,
        help: "Jobs leased to workers.",
        labels: &[],
    },
    Metric {
        name: JOBS_COMPLETED,
        kind: Kind::Counter,
        help: "Results accepted and stored.",
        labels: &[],
    },
    Metric {
        name: JOBS_FAILED,
        kind: Kind::Counter,
        help: "Failure reports from workers.",
        labels: &[],
    },
    Metric {
        name: JOBS_EXPIRED,
        kind: Kind::Counter,
        help: "Leases that expired and went back to the queue.",
        labels: &[],
    },
    Metric {
        name: STORE_ERRORS,
        kind: Kind::Counter,
        help: "Store operations that failed.",
        labels: &[],
    },
    Metric {
        name: RESULTS_PER_SECOND,
        kind: Kind::Gauge,
        help: "Results per second over the last minute.",
        labels: &[],
    },
    Metric {
        name: QUEUE_DEPTH,
        kind: Kind::Gauge,
        help: "Jobs waiting for a worker.",
        labels: &[],
    },
    Metric {
        name: IN_FLIGHT,
        kind: Kind::Gauge,
        help: "Jobs leased and not yet answered.",
        labels: &[],
    },
    Metric {
        name: BOOK_BYTES,
        kind: Kind::Gauge,
        help: "Heap bytes of the in-memory book (records, links, hash table, parent index).",
        labels: &[],
    },
    Metric {
        name: POSITIONS,
        kind: Kind::Gauge,
        help: "Positions in the book.",
        labels: &[],
    },
    Metric {
        name: WORKERS,
        kind: Kind::Gauge,
        help: "Registered workers.",
        labels: &[],
    },
    Metric {
        name: WORKER_RESULTS_PER_SECOND,
        kind: Kind::Gauge,
        help: "Results per second of one worker.",
        labels: WORKER,
    },
    Metric {
        name: WORKER_COMPLETED,
        kind: Kind::Gauge,
        help: "Results accepted from one worker since it registered.",
        labels: WORKER,
    },
    Metric {
        name: WORKER_IN_FLIGHT,
        kind: Kind::Gauge,
        help: "Jobs one worker holds.",
        labels: WORKER,
    },
    Metric {
        name: LEASE_SECONDS,
        kind: Kind::Histogram,
        help: "Seconds a LeaseJobs call took.",
        labels: &[],
    },
    Metric {
        name: SUBMIT_SECONDS,
        kind: Kind::Histogram,
        help: "Seconds a SubmitResults call took, durable flush included.",
        labels: &[],
    },
    Metric {
        name: SPECULATIVE_LEASED,
        kind: Kind::Counter,
        help: "Leases of speculative jobs (prefetch of searches the next passes will probably need).",
        labels: &[],
    },
    Metric {
        name: BACKUP_LEASED,
        kind: Kind::Counter,
        help: "Backup leases of round searches leased far longer than their level's mean search time.",
        labels: &[],
    },
    Metric {
        name: PREFETCH_USED,
        kind: Kind::Gauge,
        help: "Prefetched results the growth programs used since start.",
        labels: &[],
    },
    Metric {
        name: PREFETCH_UNUSED,
        kind: Kind::Gauge,
        help: "Prefetched results not used (yet) since start.",
        labels: &[],
    },
    Metric {
        name: REPLICATION_OVERHEAD,
        kind: Kind::Gauge,
        help: "Share of the workers' search time since start spent on replicas beyond a request's first answer (validation, spot and core checks).",
        labels: &[],
    },
    Metric {
        name: PENDING_CHECKS,
        kind: Kind::Gauge,
        help: "Check jobs (validation, spot, core, settlement) queued or leased now.",
        labels: &[],
    },
    Metric {
        name: OLDEST_CHECK_AGE,
        kind: Kind::Gauge,
        help: "How long the oldest check job has waited, seconds (0: none).",
        labels: &[],
    },
    Metric {
        name: INVALID_RESULTS,
        kind: Kind::Counter,
        help: "Replicas that disagreed with the settled result since start (lies caught, or broken machines).",
        labels: &[],
    },
    Metric {
        name: REPLAYS,
        kind: Kind::Counter,
        help: "Rollbacks since start: a caught contributor's results dropped (replayed or retracted).",
        labels: &[],
    },
    Metric {
        name: BLOCKED_CONTRIBUTORS,
        kind: Kind::Gauge,
        help: "Contributors blocked now (too many invalid results, or by the operator).",
        labels: &[],
    },
    Metric {
        name: EVENTS,
        kind: Kind::Counter,
        help: "Events recorded in the event log since start, per kind (lie_caught, contributor_blocked, replay, worker_joined, ...).",
        labels: &["kind"],
    },
];

/// Describe every metric to the installed recorder and create the unlabelled counters and
/// histograms at zero, and [`EVENTS`] at zero for every event kind (gauges are set at every
/// scrape; the per-worker series appear with their worker). Only what exists when the recorder
/// is installed is created: a counter's first increment is invisible to `increase()` unless a
/// zero was scraped before it.
pub fn register() {
    for k in crate::events::KINDS {
        metrics::counter!(EVENTS, "kind" => k.name()).increment(0);
    }
    for m in METRICS {
        match m.kind {
            Kind::Counter => {
                metrics::describe_counter!(m.name, m.help);
                if m.labels.is_empty() {
                    metrics::counter!(m.name).increment(0);
                }
            }
            Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
            Kind::Histogram => {
                metrics::describe_histogram!(m.name, m.help);
                if m.labels.is_empty() {
                    // A handle with no sample renders as empty buckets.
                    let _ = metrics::histogram!(m.name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// What a first scrape shows: every unlabelled counter, and every event kind's counter, at
    /// zero (an alert on `increase()` misses the first event of a series born at 1).
    #[test]
    fn registration_creates_the_counters_at_zero() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        metrics::with_local_recorder(&recorder, register);
        let text = recorder.handle().render();
        for k in crate::events::KINDS {
            let line = format!("{EVENTS}{{kind=\"{}\"}} 0", k.name());
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        for m in METRICS
            .iter()
            .filter(|m| m.kind == Kind::Counter && m.labels.is_empty())
        {
            let line = format!("{} 0", m.name);
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn names_are_unique_and_follow_prometheus_conventions() {
        let mut seen = HashSet::new();
        for m in METRICS {
            assert!(seen.insert(m.name), "{} listed twice", m.name);
            assert!(m.name.starts_with("bookfarm_"), "{}", m.name);
            assert_eq!(
                m.kind == Kind::Counter,
                m.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                m.name
            );
        }
    }
}
