//! bookfarm-coordinator (being built).
