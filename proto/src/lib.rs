//! `bookfarm-proto`: the bookfarm wire protocol (package `bookfarm.v1`).
//!
//! * [`pb`]: the prost/tonic code generated at build time from `proto/bookfarm/v1/coordinator.proto`
//!   (compiled with protox, so no `protoc` binary is needed);
//! * [`domain`]: the plain Rust job and result types (defined in `bookfarm-runner`, re-exported
//!   here), so that prost types stay at the edge;
//! * [`convert`]: validating `TryFrom`/`From` conversions between the two;
//! * [`status`]: the single place where domain errors become `tonic::Status`;
//! * [`auth`]: credentials in request metadata (`authorization: Bearer <token>`).
//!
//! Invariant: the engine never sees prost types; conversion happens here.
#![warn(missing_docs, missing_debug_implementations)]

pub mod auth;
pub mod convert;
pub mod status;

pub use bookfarm_runner::domain;
pub use bookfarm_runner::eval_fingerprint;

/// Generated protobuf and gRPC code for `bookfarm.v1`.
#[allow(missing_docs, missing_debug_implementations, clippy::all)]
pub mod pb {
    tonic::include_proto!("bookfarm.v1");
}

/// The wire protocol version carried by every worker RPC. 0 means "unset" and is always rejected.
///
/// Bump it on any change that an older peer would misinterpret (field meaning, job semantics).
///
/// Version 2: credentials moved from messages to request metadata; workers send their search
/// signature; `Release`, credential management and paged status were added.
///
/// Version 3: an unknown worker id is signalled by the status metadata `bookfarm-error:
/// unknown-worker` (see [`status::ERROR_CODE_KEY`]), which workers act on instead of the
/// message; `ACK_STATUS_STALE` (never sent) is reserved.
pub const PROTOCOL_VERSION: u32 = 3;

/// Largest gRPC message either side accepts or sends (bytes). Set explicitly on every server and
/// client so that an oversize message is refused with `OutOfRange`/`ResourceExhausted` rather than
/// silently depending on tonic's default.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Maximum number of results a single `SubmitResults`/`LeaseJobs` call may carry.
pub const MAX_RESULTS_PER_CALL: usize = 1024;

/// Maximum number of jobs a worker may ask for in one `LeaseJobs` call.
pub const MAX_LEASE_SLOTS: u32 = 256;

/// Encoded `FileDescriptorSet` of the protocol (for reflection tools).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/bookfarm_descriptor.bin"));

/// The bookfarm release this build is (the workspace's version): what a coordinator tells
/// workers to run, and what a worker compares with it.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The engine version string workers and coordinators compare (the engine crate's version).
pub const ENGINE_VERSION: &str = concat!("bookfarm-engine/", env!("CARGO_PKG_VERSION"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_set_names_the_services() {
        let s = String::from_utf8_lossy(FILE_DESCRIPTOR_SET);
        assert!(s.contains("WorkerService"));
        assert!(s.contains("AdminService"));
    }
}
