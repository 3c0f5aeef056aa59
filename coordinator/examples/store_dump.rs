//! Print a store directory as text (`bookfarm_coordinator::store::dump`): how the format
//! fixtures of the store's migration tests are made.
//!
//! `cargo run -p bookfarm-coordinator --example store_dump -- DIR > FILE`

use anyhow::Context;
use std::io::Write;

fn main() -> anyhow::Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .context("usage: store_dump DIR (a store directory nothing else holds open)")?;
    let text = bookfarm_coordinator::store::dump::dump(std::path::Path::new(&dir))
        .with_context(|| format!("dumping {}", dir.to_string_lossy()))?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
