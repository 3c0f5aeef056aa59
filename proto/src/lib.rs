//! bookfarm-proto (being built).
