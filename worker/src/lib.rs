//! bookfarm-worker library: the worker process over gRPC.
//!
//! A worker is stateless: it registers, leases jobs a little ahead of its free threads, runs
//! each leaf search on its own OS thread (never on the async runtime), and returns results with
//! its next lease call, keeping them until the coordinator acknowledges them. Connection loss is
//! retried with jittered exponential backoff; a shutdown signal stops leasing, finishes the
//! leased jobs, delivers their results and exits. The loop and the searches are
//! `bookfarm-runner`'s; this crate adds the transport.
//!
//! * [`client`]: the gRPC client wrapper (identity, message limits, timeouts) and
//!   [`client::GrpcTransport`], the runner's transport over it;
//! * [`pull_loop`]: [`pull_loop::run`], the worker itself;
//! * [`config`]: [`config::WorkerConfig`] and the `worker.toml` file;
//! * [`polite`]: a volunteer's settings: search-thread priority, active hours, pause on battery.

pub mod client;
pub mod config;
pub mod enrol;
pub mod eval_cache;
pub mod polite;
pub mod pull_loop;

pub use bookfarm_runner::WorkerStats;
pub use config::WorkerConfig;
pub use pull_loop::{WorkerError, run};
