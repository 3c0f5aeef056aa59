//! `bookfarm-worker run` argument handling that needs no coordinator: the credential file.
//! (This file also makes `cargo test --workspace` build the `bookfarm-worker` binary, which the
//! deploy tests run for its `--help`.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-worker");

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN)
        .arg("run")
        .args(args)
        .env_remove("BOOKFARM_TOKEN")
        .env_remove("BOOKFARM_TOKEN_FILE")
        .output()
        .expect("run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_token_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-token");
    let (ok, err) = run(&["--token-file", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("no-such-token"), "{err}");
}

#[test]
fn token_and_token_file_conflict() {
    let (ok, err) = run(&["--token", "a", "--token-file", "b"]);
    assert!(!ok);
    assert!(err.contains("cannot be used with"), "{err}");
}
