//! The book crate's integration tests in one test binary (one link of the crate and the engine
//! instead of one per file). `props.rs` stays a binary of its own.

#[path = "../common/mod.rs"]
mod common;

mod commands;
mod decisive;
mod egaroucid;
mod golden;
mod grow;
mod quality;
mod rooted;
mod schedule;
mod select;
