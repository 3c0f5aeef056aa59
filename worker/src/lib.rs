//! bookfarm-worker (being built).
