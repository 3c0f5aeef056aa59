//! `bookfarm-runner`: the engine side of a worker, shared by the `bookfarm-worker` binary (over
//! gRPC) and the coordinator's in-process workers (`local` and the searching `book` commands).
//!
//! * [`domain`]: the plain job and result types of the worker protocol (no prost types);
//! * [`eval`]: loading evaluation weights, their fingerprint and the search signature;
//! * [`exec`]: the [`exec::LeafSearcher`] trait, the engine searcher, the search thread pool
//!   and [`exec::search_all`] (a list of searches on every thread);
//! * [`transport`]: the [`transport::Transport`] trait the loop talks through;
//! * [`run_loop`]: [`run_loop::Runner`], the worker loop itself;
//! * [`polite`]: what a volunteer's worker adds to it: the [`polite::Gate`] that pauses it, the
//!   CPU share cap ([`polite::Throttle`]) and the progress line;
//! * [`logging`]: how the binaries log (plain text or JSON lines on stderr).
//!
//! Like the other `shared/` crates it has no async runtime, no tonic/prost and no store: the
//! loop and the searches run on plain OS threads, and an asynchronous transport drives its own
//! futures.
#![warn(missing_docs, missing_debug_implementations)]

pub mod domain;
pub mod eval;
pub mod exec;
pub mod logging;
pub mod polite;
pub mod run_loop;
pub mod transport;

pub use eval::{eval_fingerprint, load_eval, signature};
pub use run_loop::{AckHook, Runner, RunnerConfig, RunnerError, Stopper, WorkerStats};
