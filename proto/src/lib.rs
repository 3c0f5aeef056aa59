//! `bookfarm-proto`: the bookfarm wire protocol (package `bookfarm.v1`).
//!
//! * [`pb`]: the prost/tonic code generated at build time from `proto/bookfarm/v1/coordinator.proto`
//!   (compiled with protox, so no `protoc` binary is needed);
//! * [`domain`]: plain Rust job and result types used by the coordinator and worker libraries, so that
//!   prost types stay at the edge;
//! * [`convert`]: validating `TryFrom`/`From` conversions between the two;
//! * [`status`]: the single place where domain errors become `tonic::Status`;
//! * [`auth`]: credentials in request metadata (`authorization: Bearer <token>`).
//!
//! Invariant: the engine never sees prost types; conversion happens here.
#![warn(missing_docs, missing_debug_implementations)]

pub mod auth;
pub mod convert;
pub mod domain;
pub mod status;

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
pub const PROTOCOL_VERSION: u32 = 2;

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

/// The engine version string workers and coordinators compare (the engine crate's version).
pub const ENGINE_VERSION: &str = concat!("bookfarm-engine/", env!("CARGO_PKG_VERSION"));

/// A stable fingerprint of evaluation weights: 64-bit FNV-1a of the bytes, as 16 hex digits.
///
/// Workers send it with every RPC; a coordinator configured with an evaluation refuses workers
/// whose weights differ, since their scores would not be comparable.
pub fn eval_fingerprint(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_fnv1a() {
        // Known FNV-1a 64 test vectors.
        assert_eq!(eval_fingerprint(b""), "cbf29ce484222325");
        assert_eq!(eval_fingerprint(b"a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn descriptor_set_names_the_services() {
        let s = String::from_utf8_lossy(FILE_DESCRIPTOR_SET);
        assert!(s.contains("WorkerService"));
        assert!(s.contains("AdminService"));
    }
}
