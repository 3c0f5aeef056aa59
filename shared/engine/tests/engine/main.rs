//! The engine's integration tests in one test binary (one link of the engine instead of one per
//! file). `backends.rs` and `perft.rs` stay binaries of their own: they switch the process-wide
//! flip backend (`flip::set_active`), so no other test may run in their process.

mod endgame;
mod fixed_depth;
mod formats_data;
mod symmetry_props;
