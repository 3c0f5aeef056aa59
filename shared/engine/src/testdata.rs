//! Locating the reference folder `../shared` (beside the checkout) for tests, benches and tools.
//!
//! Tests that need it call [`shared_dir_or_skip`]: on a machine without the folder they print
//! `skipped: ../shared not found` and return `None`; when `BOOKFARM_REQUIRE_SHARED=1` (as in CI)
//! they panic instead, so a missing folder cannot turn into a silently green run.

use std::path::{Path, PathBuf};

/// Environment variable that turns a missing `../shared` into a test failure.
pub const REQUIRE_ENV: &str = "BOOKFARM_REQUIRE_SHARED";

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // This crate lives at <root>/shared/engine.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared` beside the checkout, or `BOOKFARM_SHARED` when set; `None` when it does not exist.
pub fn shared_dir() -> Option<PathBuf> {
    let p = match std::env::var_os("BOOKFARM_SHARED") {
        Some(v) => PathBuf::from(v),
        None => workspace_root().join("../shared"),
    };
    if p.join("golden").is_dir() {
        Some(p)
    } else {
        None
    }
}

/// The reference folder, or `None` after printing the skip line. Panics when the folder is
/// missing and [`REQUIRE_ENV`] is `1`.
#[allow(clippy::print_stderr)]
pub fn shared_dir_or_skip() -> Option<PathBuf> {
    match shared_dir() {
        Some(p) => Some(p),
        None => {
            if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") {
                panic!("../shared not found and {REQUIRE_ENV}=1: the reference data is required");
            }
            eprintln!("skipped: ../shared not found");
            None
        }
    }
}
