//! bookfarm-coordinator library: the book store, scheduler, leases and gRPC service.
//!
//! * [`store`]: the sled store (source of truth; atomic batches, explicit flushes);
//! * [`service`]: the domain service (register, lease, submit, fail, expiry, expansions);
//! * [`identity`]: admin and per-worker credentials, sessions, registration rate;
//! * [`grpc`]: thin tonic handlers; [`http`]: `/metrics`, `/healthz`, `/readyz`;
//! * [`telemetry`]: every Prometheus metric's name, kind and help, declared once;
//! * [`grpc`]: thin tonic handlers; [`http`]: `/metrics`, `/healthz`, `/readyz` and the web UI
//!   ([`web`]: pages and embedded assets; [`api`]: its versioned JSON API);
//! * [`progress`]: throughput, round ETA and the one-line progress of status snapshots;
//! * [`server`]: wiring everything into [`server::serve`]; [`conn`]: connection limits;
//! * [`text`]: worker-supplied strings made safe for logs and replies;
//! * [`local`]: coordinator plus in-process workers on one machine;
//! * [`offline`]: the offline book commands on a store directory.

pub mod api;
pub mod config;
pub mod conn;
pub mod error;
pub mod export;
pub mod grpc;
pub mod http;
pub mod identity;
pub mod local;
pub mod offline;
pub mod progress;
pub mod server;
pub mod service;
pub mod sim;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod web;

pub use error::{CoordinatorError, Result};
pub use service::Coordinator;
