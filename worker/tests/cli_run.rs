//! `bookfarm-worker run` argument handling that needs no coordinator: the credential file and
//! the settings file.
//! (This file also makes `cargo test --workspace` build the `bookfarm-worker` binary, which the
//! deploy tests run for its `--help`.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-worker");

fn run(args: &[&str]) -> (bool, String) {
    run_env(args, &[])
}

fn run_env(args: &[&str], env: &[(&str, &std::path::Path)]) -> (bool, String) {
    let out = Command::new(BIN)
        .arg("run")
        .args(args)
        .env_remove("BOOKFARM_TOKEN")
        .env_remove("BOOKFARM_TOKEN_FILE")
        .env_remove("BOOKFARM_WORKER_CONFIG")
        .env_remove("BOOKFARM_THREADS")
        .envs(env.iter().copied())
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

/// `worker.toml` in the configuration directory is read without `--config`, and a bad value in
/// it stops the worker with an error naming the key and the file, even when a flag overrides it.
#[test]
fn the_settings_file_is_found_and_a_bad_value_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("worker.toml");
    std::fs::write(&file, "threads = 0\n").unwrap();
    for args in [&[][..], &["--threads", "2"][..]] {
        let (ok, err) = run_env(args, &[("BOOKFARM_CONFIG_DIR", dir.path())]);
        assert!(!ok, "{err}");
        let want = format!("{}: threads: 0 is out of range", file.display());
        assert!(err.contains(&want), "{args:?}: {err}");
    }
}
