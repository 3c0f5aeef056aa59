//! bookfarm-coordinator library: the book store, scheduler, leases and gRPC service.
