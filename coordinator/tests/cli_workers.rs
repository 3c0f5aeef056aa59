//! `bookfarm-coordinator workers …` on a store offline (`--db`): add prints the token once as
//! its last line, list never shows it, block/unblock/revoke change the state.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-coordinator");

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn workers_commands_on_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().display().to_string();
    let (ok, out, err) = run(&["workers", "add", "host-1", "--owner", "alice", "--db", &db]);
    assert!(ok, "{err}");
    let token = out.lines().last().unwrap().to_string();
    assert!(token.starts_with("bfw_") && token.len() == 68, "{out}");
    let (ok, _, err) = run(&["workers", "add", "host-1", "--db", &db]);
    assert!(!ok && err.contains("exists already"), "{err}");
    let (ok, _, err) = run(&["workers", "add", "bad\nname", "--db", &db]);
    assert!(!ok && err.contains("must be"), "{err}");
    let (ok, out, _) = run(&["workers", "add", "mine", "--trusted", "--db", &db]);
    assert!(ok, "{out}");

    let (ok, out, _) = run(&["workers", "list", "--db", &db]);
    assert!(ok);
    assert!(!out.contains(&token), "list never shows tokens");
    let row = |out: &str, name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(row(&out, "host-1")[1..4], ["alice", "no", "active"]);
    assert_eq!(row(&out, "mine")[1..4], ["mine", "yes", "active"]);

    let (ok, _, err) = run(&[
        "workers",
        "block",
        "host-1",
        "--reason",
        "bad results",
        "--db",
        &db,
    ]);
    assert!(ok, "{err}");
    let (_, out, _) = run(&["workers", "list", "--db", &db]);
    assert_eq!(row(&out, "host-1")[3], "blocked");
    assert!(out.contains("bad results"));
    assert!(run(&["workers", "unblock", "host-1", "--db", &db]).0);
    let (_, out, _) = run(&["workers", "list", "--db", &db]);
    assert_eq!(row(&out, "host-1")[3], "active");
    assert!(run(&["workers", "revoke", "host-1", "--db", &db]).0);
    let (ok, _, err) = run(&["workers", "unblock", "host-1", "--db", &db]);
    assert!(!ok && err.contains("revoked for good"), "{err}");
    let (_, out, _) = run(&["workers", "list", "--db", &db]);
    assert_eq!(row(&out, "host-1")[3], "revoked");
    let (ok, _, err) = run(&["workers", "block", "nobody", "--reason", "x", "--db", &db]);
    assert!(!ok && err.contains("no worker credential"), "{err}");
}

#[test]
fn serve_refuses_a_public_address_without_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().display().to_string();
    assert!(run(&["book", "new", "2", "10", "--db", &db]).0);
    let (ok, _, err) = run(&[
        "serve",
        "--db",
        &db,
        "--listen",
        "0.0.0.0:0",
        "--http",
        "127.0.0.1:0",
    ]);
    assert!(!ok, "served without credentials");
    assert!(err.contains("refusing to serve"), "{err}");
}
