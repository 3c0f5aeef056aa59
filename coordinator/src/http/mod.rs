//! The HTTP side (separate port): `/metrics` (Prometheus text), `/healthz` (process alive),
//! `/readyz` (store open and serving), and the web UI: its pages and assets ([`web`]) and
//! its read-only JSON API under `/api/v1` ([`api`]).
//!
//! The handlers are thin: they call the domain service and convert. Nothing here changes state
//! (every route is GET), so nothing needs the admin credential; state changes stay on the admin
//! gRPC service.

pub mod api;
pub mod publish;
pub mod web;

use crate::identity::Identities;
use crate::live::Live;
use crate::rpc::conn::{Admission, HttpPeer};
use crate::service::{Coordinator, SubtreeExport};
use api::BookStatsV1;
use axum::Router;
use axum::extract::{FromRef, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use bookfarm_book::BookFormat;
use bookfarm_book::umigame::UmigameOptions;
use bookfarm_engine::formats::transcript::parse_transcript;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;
use std::time::Instant;

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

async fn metrics(State(s): State<AppState>) -> (StatusCode, String) {
    // While the store is being reopened, the process's counters alone.
    if let Ok(c) = s.live.get() {
        set_gauges(&c);
    }
    match metrics_handle() {
        Some(h) => (StatusCode::OK, h.render()),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder unavailable\n".into(),
        ),
    }
}

fn set_gauges(c: &Coordinator) {
    let mut s = c.status();
    metrics::gauge!(crate::telemetry::RESULTS_PER_SECOND).set(s.results_per_second);
    metrics::gauge!(crate::telemetry::QUEUE_DEPTH).set(s.queued as f64);
    metrics::gauge!(crate::telemetry::IN_FLIGHT).set(s.in_flight as f64);
    metrics::gauge!(crate::telemetry::POSITIONS).set(s.positions as f64);
    metrics::gauge!(crate::telemetry::BOOK_BYTES).set(c.book_heap_bytes() as f64);
    metrics::gauge!(crate::telemetry::WORKERS).set(s.workers.len() as f64);
    metrics::gauge!(crate::telemetry::REPLICATION_OVERHEAD).set(s.health.overhead());
    metrics::gauge!(crate::telemetry::PENDING_CHECKS).set(s.health.pending_checks as f64);
    metrics::gauge!(crate::telemetry::OLDEST_CHECK_AGE).set(s.health.oldest_check.as_secs_f64());
    metrics::gauge!(crate::telemetry::BLOCKED_CONTRIBUTORS)
        .set(s.health.blocked_contributors as f64);
    metrics::counter!(crate::telemetry::INVALID_RESULTS).absolute(s.validation.invalid);
    metrics::counter!(crate::telemetry::REPLAYS).absolute(s.validation.rollbacks);
    s.workers.sort_by_key(|w| w.id);
    for w in s.workers.iter().take(MAX_WORKER_SERIES) {
        metrics::gauge!(crate::telemetry::WORKER_RESULTS_PER_SECOND, "worker" => w.name.clone())
            .set(w.results_per_second);
        metrics::gauge!(crate::telemetry::WORKER_COMPLETED, "worker" => w.name.clone())
            .set(w.completed as f64);
        metrics::gauge!(crate::telemetry::WORKER_IN_FLIGHT, "worker" => w.name.clone())
            .set(w.in_flight as f64);
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// A readiness answer is reused for this long (probes from anyone cost one store probe a
/// second at most).
pub const READY_MAX_AGE: Duration = Duration::from_secs(1);

/// Whether the service can serve: the store takes writes (a full disk or a store stuck on an
/// earlier write error says no, and so does a store being reopened) and the gRPC port has a
/// free connection slot.
async fn readyz(State(s): State<AppState>) -> (StatusCode, String) {
    let c = match s.live.get() {
        Ok(c) => c,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {e}\n")),
    };
    let mut last = s.ready.lock().await;
    let fresh = last
        .as_ref()
        .filter(|(at, _)| at.elapsed() < READY_MAX_AGE)
        .map(|(_, r)| r.clone());
    let store = match fresh {
        Some(r) => r,
        None => {
            let c = c.clone();
            let r = match tokio::task::spawn_blocking(move || c.probe_store()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("store probe: {e}")),
            };
            *last = Some((Instant::now(), r.clone()));
            r
        }
    };
    drop(last);
    if let Err(e) = store {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the store cannot write: {e}\n"),
        );
    }
    if let Some(g) = &s.grpc
        && g.free_slots() == 0
    {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: every gRPC connection slot is taken ({})\n",
                g.limits().max_connections
            ),
        );
    }
    let st = c.status();
    (
        StatusCode::OK,
        format!(
            "ready: {} positions, state {}\n",
            st.positions,
            st.state.as_str()
        ),
    )
}

/// Book statistics are recomputed (one pass over the book) at most this often.
pub const STATS_MAX_AGE: Duration = Duration::from_secs(30);

/// The last book statistics and when they were computed (an async lock: held while they are
/// computed, so that simultaneous first requests compute them once).
type StatsCache = Arc<tokio::sync::Mutex<Option<(Instant, Arc<BookStatsV1>)>>>;

/// The last readiness probe of the store and when it ran.
type ReadyCache = Arc<tokio::sync::Mutex<Option<(Instant, Result<(), String>)>>>;

/// What the HTTP handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    live: Live,
    ids: Identities,
    stats: StatsCache,
    ready: ReadyCache,
    grpc: Option<Admission>,
    stats_computed: Arc<std::sync::atomic::AtomicU64>,
    published: Arc<publish::Published>,
}

impl FromRef<AppState> for publish::PublishState {
    fn from_ref(s: &AppState) -> publish::PublishState {
        publish::PublishState {
            live: s.live.clone(),
            published: s.published.clone(),
        }
    }
}

/// The service serving now: a handler's extractor, which answers 503 while the store is being
/// reopened (see [`crate::live`]).
struct Svc(Coordinator);

impl axum::extract::FromRequestParts<AppState> for Svc {
    type Rejection = Response;

    async fn from_request_parts(
        _: &mut axum::http::request::Parts,
        s: &AppState,
    ) -> Result<Svc, Response> {
        s.live.get().map(Svc).map_err(|e| unavailable(&e))
    }
}

/// A 503 naming why.
fn unavailable(e: &crate::error::CoordinatorError) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A JSON reply the browser must not cache or sniff.
fn json<T: serde::Serialize>(v: &T) -> Response {
    let mut r = Json(v).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn bad_request(msg: String) -> Response {
    let mut r = json(&serde_json::json!({ "api": api::VERSION, "error": msg }));
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

async fn api_status(Svc(c): Svc) -> Response {
    json(&api::status_of(c.status()))
}

async fn api_programs(Svc(c): Svc) -> Response {
    json(&api::ProgramsV1::new(&c.programs(true)))
}

async fn api_workers(Svc(c): Svc, State(s): State<AppState>) -> Response {
    json(&api::WorkersV1::new(&c.status().workers, &s.ids.list()))
}

async fn api_contributors(Svc(c): Svc, State(s): State<AppState>) -> Response {
    let status = c.status();
    json(&api::ContributorsV1::new(
        &c.contributors(unix_ms()),
        &s.ids.list(),
        &status.workers,
        &status.credit,
    ))
}

async fn api_trust(Svc(c): Svc, State(s): State<AppState>) -> Response {
    let status = c.status();
    let credit = status.credit.clone();
    let health = api::status_of(status).validation;
    json(&api::TrustV1::new(health, &credit, &s.ids.list()))
}

#[derive(Debug, serde::Deserialize)]
struct Since {
    /// Only points after this time (milliseconds since the epoch).
    #[serde(default)]
    since: u64,
    /// Only this tier (`fine`, `minutes` or `hours`; the others come back empty).
    tier: Option<String>,
}

async fn api_history(Svc(c): Svc, Query(q): Query<Since>) -> Response {
    let mut h = c.history(q.since);
    match q.tier.as_deref() {
        None => {}
        Some("fine") => (h.minutes, h.hours) = (Vec::new(), Vec::new()),
        Some("minutes") => (h.fine, h.hours) = (Vec::new(), Vec::new()),
        Some("hours") => (h.fine, h.minutes) = (Vec::new(), Vec::new()),
        Some(t) => return bad_request(format!("unknown tier {t:?} (fine, minutes or hours)")),
    }
    json(&api::HistoryV1::from(&h))
}

#[derive(Debug, serde::Deserialize)]
struct EventParams {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    after: u64,
    #[serde(default)]
    before: u64,
    #[serde(default)]
    limit: usize,
}

async fn api_events(Svc(c): Svc, Query(p): Query<EventParams>) -> Response {
    let kinds = match api::kinds_of(&p.kind) {
        Ok(k) => k,
        Err(e) => return bad_request(e),
    };
    if p.q.len() > 200 {
        return bad_request("search text longer than 200 bytes".into());
    }
    let q = crate::events::EventQuery {
        kinds,
        text: p.q,
        after: p.after,
        before: p.before,
        limit: p.limit,
    };
    let log = c.events().clone();
    match tokio::task::spawn_blocking(move || log.query(&q)).await {
        Ok(Ok(page)) => json(&api::EventsV1::from(&page)),
        Ok(Err(e)) => server_error(e.to_string()),
        Err(e) => server_error(e.to_string()),
    }
}

fn server_error(msg: String) -> Response {
    let mut r = json(&serde_json::json!({ "api": api::VERSION, "error": msg }));
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

#[derive(Debug, serde::Deserialize)]
struct Moves {
    #[serde(default)]
    moves: String,
}

/// `?moves=…` and the umigame options of `/api/v1/book/position`.
#[derive(Debug, serde::Deserialize)]
struct PositionQuery {
    #[serde(default)]
    moves: String,
    umigame_min: Option<i32>,
    umigame_max: Option<i32>,
    /// A number of discs, or `inf` (unlimited).
    umigame_loss: Option<String>,
    umigame_depth: Option<u32>,
}

impl PositionQuery {
    fn options(&self) -> Result<UmigameOptions, String> {
        let d = UmigameOptions::default();
        let loss = match self.umigame_loss.as_deref() {
            None => d.loss.map(u32::from),
            Some("inf") => None,
            Some(t) => Some(
                t.parse::<u32>()
                    .map_err(|_| format!("umigame_loss {t:?} is not a number of discs or inf"))?,
            ),
        };
        UmigameOptions::new(
            self.umigame_min.unwrap_or(i32::from(d.score_min)),
            self.umigame_max.unwrap_or(i32::from(d.score_max)),
            loss,
            self.umigame_depth.unwrap_or(u32::from(d.depth)),
        )
        .map_err(|e| e.to_string())
    }
}

/// Longest move list accepted (a game with every pass written is shorter).
const MAX_MOVES_TEXT: usize = 400;

/// The game of a `moves` parameter (the engine's transcript reader: passes inferred where
/// forced, written ones accepted), or why not.
fn game_of(moves: &str) -> Result<bookfarm_engine::formats::Game, String> {
    if moves.len() > MAX_MOVES_TEXT {
        return Err("move list longer than a game".into());
    }
    parse_transcript(moves).map_err(|e| e.to_string())
}

/// Run a read of the book off the async threads (it holds the growth lock for a bounded time).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        let mut r = json(&serde_json::json!({ "api": api::VERSION, "error": e.to_string() }));
        *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

async fn api_position(Svc(c): Svc, Query(q): Query<PositionQuery>) -> Response {
    let options = match q.options() {
        Ok(o) => o,
        Err(e) => return bad_request(e),
    };
    let game = match game_of(&q.moves) {
        Ok(g) => g,
        Err(e) => return bad_request(e),
    };
    let (board, black) = match game.final_position() {
        Ok(p) => p,
        Err(e) => return bad_request(e.to_string()),
    };
    let c = c.clone();
    let r = blocking(move || {
        let view = c.position_view(&board);
        let info = c.explore(&board, black, options);
        let mut line = Vec::with_capacity(game.moves.len() + 1);
        let (mut b, mut bl) = (bookfarm_engine::Board::start(), true);
        line.push((b, bl));
        for &m in &game.moves {
            b = b.next_unchecked(m);
            bl = !bl;
            line.push((b, bl));
        }
        let openings = c.config().openings.clone();
        let explored = api::Explored {
            info: &info,
            opening: openings.deepest(line),
            options,
            growing: c.growing(),
        };
        api::PositionV1::new(&board, black, &game.moves, &view, &explored)
    })
    .await;
    match r {
        Ok(p) => json(&p),
        Err(r) => r,
    }
}

async fn api_game(Svc(c): Svc, Query(q): Query<Moves>) -> Response {
    let game = match game_of(&q.moves) {
        Ok(g) => g,
        Err(e) => return bad_request(e),
    };
    match blocking(move || c.analyze_game(&game.moves)).await {
        Ok(Ok(a)) => json(&api::GameV1::new(&a)),
        Ok(Err(e)) => bad_request(e.to_string()),
        Err(r) => r,
    }
}

/// `?moves=…&format=dat|egbk3|lines` of `/api/v1/book/export`.
#[derive(Debug, serde::Deserialize)]
struct ExportQuery {
    #[serde(default)]
    moves: String,
    format: String,
}

async fn api_export(Svc(c): Svc, Query(q): Query<ExportQuery>) -> Response {
    let what = match q.format.as_str() {
        "lines" => SubtreeExport::Lines,
        f => match BookFormat::from_extension(f).filter(|f| *f != BookFormat::Csv) {
            Some(f) => SubtreeExport::Book(f),
            None => return bad_request(format!("unknown format {f:?} (dat, egbk3 or lines)")),
        },
    };
    let game = match game_of(&q.moves) {
        Ok(g) => g,
        Err(e) => return bad_request(e),
    };
    let (board, _) = match game.final_position() {
        Ok(p) => p,
        Err(e) => return bad_request(e.to_string()),
    };
    let name = if game.moves.is_empty() {
        "start".to_string()
    } else {
        api::transcript(game.moves.iter().copied())
    };
    let bytes = match blocking(move || c.export_subtree(&board, &game.moves, what)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return bad_request(e.to_string()),
        Err(r) => return r,
    };
    let (content_type, ext) = match what {
        SubtreeExport::Lines => ("text/plain; charset=utf-8", "txt"),
        SubtreeExport::Book(f) => ("application/octet-stream", f.extension()),
    };
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The name holds only move letters, digits and a dot.
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"subtree-{name}.{ext}\""))
    {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    r
}

async fn api_book_stats(State(s): State<AppState>) -> Response {
    let c = match s.live.get() {
        Ok(c) => c,
        Err(e) => return unavailable(&e),
    };
    // Held across the computation: the requests that arrive meanwhile wait and reuse it.
    let mut g = s.stats.lock().await;
    let cached = g
        .as_ref()
        .filter(|(at, _)| at.elapsed() < STATS_MAX_AGE)
        .map(|(_, v)| v.clone());
    let stats = match cached {
        Some(v) => v,
        None => {
            let c = c.clone();
            s.stats_computed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let fresh = match tokio::task::spawn_blocking(move || c.book_stats()).await {
                Ok(st) => Arc::new(BookStatsV1::from(&st)),
                Err(e) => {
                    let mut r = json(&serde_json::json!({ "error": e.to_string() }));
                    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    return r;
                }
            };
            *g = Some((Instant::now(), fresh.clone()));
            fresh
        }
    };
    drop(g);
    json(&*stats)
}

/// Marks each request on its connection (which is then neither in its handshake nor idle,
/// see [`crate::rpc::conn`]) and bounds its time.
async fn on_connection(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let _busy = req
        .extensions()
        .get::<axum::extract::ConnectInfo<HttpPeer>>()
        .map(|p| p.0.begin());
    match tokio::time::timeout(HTTP_REQUEST_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "request timed out\n").into_response(),
    }
}

/// Longest HTTP request (a whole-book export included).
pub const HTTP_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The HTTP router: metrics and health, the web UI's pages and assets, and its JSON API.
pub fn router(c: Coordinator, ids: Identities) -> Router {
    router_with(Live::fixed(c, ids), None)
}

/// [`router`], with `/readyz` also saying no while the gRPC port (`grpc`) has no free
/// connection slot.
pub fn router_with(live: Live, grpc: Option<Admission>) -> Router {
    let state = AppState {
        ids: live.ids().clone(),
        live,
        stats: Arc::new(tokio::sync::Mutex::new(None)),
        ready: Arc::new(tokio::sync::Mutex::new(None)),
        grpc,
        stats_computed: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        published: Arc::new(publish::Published::default()),
    };
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/status", get(api_status))
        .route("/api/v1/programs", get(api_programs))
        .route("/api/v1/workers", get(api_workers))
        .route("/api/v1/contributors", get(api_contributors))
        .route("/api/v1/trust", get(api_trust))
        .route("/api/v1/history", get(api_history))
        .route("/api/v1/events", get(api_events))
        .route("/api/v1/book/position", get(api_position))
        .route("/api/v1/book/stats", get(api_book_stats))
        .route("/api/v1/book/game", get(api_game))
        .route("/api/v1/book/export", get(api_export))
        .route("/book.dat", get(publish::book_dat))
        .route("/book.egbk3", get(publish::book_egbk3))
        .merge(web::routes())
        .with_state(state)
        .layer(axum::middleware::from_fn(on_connection))
        // gzip for clients that ask (the worker table of a big farm shrinks about 20 times).
        .layer(tower_http::compression::CompressionLayer::new())
}
