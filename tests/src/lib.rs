//! bookfarm-tests (being built).
