//! bookfarm-coordinator library: the book store, scheduler, leases and gRPC service.
//!
//! * [`store`]: the sled store (source of truth; atomic batches, explicit flushes);
//! * [`service`]: the domain service (register, lease, submit, fail, expiry, growth, trust);
//! * [`identity`]: admin and per-worker credentials, sessions, registration rate;
//! * [`events`]: the farm's event log (durable, bounded), served to the web UI;
//! * [`rpc`]: the gRPC transport: thin tonic handlers ([`rpc::WorkerApi`], [`rpc::AdminApi`])
//!   and the port's connection limits ([`rpc::conn`]);
//! * [`http`]: `/metrics`, `/healthz`, `/readyz` and the web UI ([`http::web`]: pages and
//!   embedded assets; [`http::api`]: its versioned JSON API);
//! * [`telemetry`]: every Prometheus metric's name, kind and help, declared once;
//! * [`progress`]: throughput, round ETA and the one-line progress of status snapshots;
//! * [`live`]: the service the ports serve, reopened in-process after its store failed;
//! * [`server`]: wiring everything into [`server::serve`] (store, both transports, the lease
//!   reaper, shutdown);
//! * [`text`]: worker-supplied strings made safe for logs and replies;
//! * [`local`]: coordinator plus in-process workers on one machine;
//! * [`offline`]: the offline book commands on a store directory;
//! * [`config`], [`error`], [`sim`]: the configuration file, the error type, the farm
//!   simulator.

pub mod config;
pub mod error;
pub mod events;
pub mod http;
pub mod identity;
pub mod live;
pub mod local;
pub mod offline;
pub mod progress;
pub mod rpc;
pub mod server;
pub mod service;
pub mod sim;
pub mod store;
pub mod telemetry;
pub mod text;

pub use error::{CoordinatorError, Result};
pub use service::Coordinator;
