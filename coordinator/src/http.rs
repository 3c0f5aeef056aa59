//! The HTTP side (separate port): `/metrics` (Prometheus text), `/healthz` (process alive) and
//! `/readyz` (store open and serving).

use crate::service::Coordinator;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use std::sync::OnceLock;
use std::time::Duration;

/// A gauge not set for this long disappears from `/metrics`: the per-worker series of a worker
/// that left (every gauge still alive is set at each scrape or more often).
pub const GAUGE_IDLE: Duration = Duration::from_secs(120);

/// Workers exported with their own series (the first by id; the others only count in totals),
/// so that many registrations cannot blow up the scrape.
pub const MAX_WORKER_SERIES: usize = 256;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the process-wide Prometheus recorder once (later calls reuse it; `None` when another
/// recorder was installed first).
pub fn metrics_handle() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let h = PrometheusBuilder::new()
                .set_buckets(&[
                    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                ])
                .ok()?
                .idle_timeout(MetricKindMask::GAUGE, Some(GAUGE_IDLE))
                .install_recorder()
                .ok()?;
            crate::telemetry::register();
            Some(h)
        })
        .clone()
}

async fn metrics(State(c): State<Coordinator>) -> (StatusCode, String) {
    let mut s = c.status();
    metrics::gauge!(crate::telemetry::RESULTS_PER_SECOND).set(s.results_per_second);
    metrics::gauge!(crate::telemetry::QUEUE_DEPTH).set(s.queued as f64);
    metrics::gauge!(crate::telemetry::IN_FLIGHT).set(s.in_flight as f64);
    metrics::gauge!(crate::telemetry::POSITIONS).set(s.positions as f64);
    metrics::gauge!(crate::telemetry::WORKERS).set(s.workers.len() as f64);
    s.workers.sort_by_key(|w| w.id);
    for w in s.workers.iter().take(MAX_WORKER_SERIES) {
        metrics::gauge!(crate::telemetry::WORKER_RESULTS_PER_SECOND, "worker" => w.name.clone())
            .set(w.results_per_second);
        metrics::gauge!(crate::telemetry::WORKER_COMPLETED, "worker" => w.name.clone())
            .set(w.completed as f64);
        metrics::gauge!(crate::telemetry::WORKER_IN_FLIGHT, "worker" => w.name.clone())
            .set(w.in_flight as f64);
    }
    match metrics_handle() {
        Some(h) => (StatusCode::OK, h.render()),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder unavailable\n".into(),
        ),
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(c): State<Coordinator>) -> (StatusCode, String) {
    let s = c.status();
    (
        StatusCode::OK,
        format!(
            "ready: {} positions, state {}\n",
            s.positions,
            s.state.as_str()
        ),
    )
}

/// The HTTP router.
pub fn router(c: Coordinator) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(c)
}
