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

#[test]
fn add_writes_the_token_to_a_new_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    let file = dir.path().join("token");
    let f = file.display().to_string();
    let (ok, out, err) = run(&[
        "workers",
        "add",
        "pool",
        "--trusted",
        "--token-file",
        &f,
        "--db",
        &db,
    ]);
    assert!(ok, "{err}");
    let token = std::fs::read_to_string(&file).unwrap();
    let token = token.trim_end();
    assert!(token.starts_with("bfw_") && token.len() == 68, "{token}");
    assert!(!out.contains(token), "the token is not printed: {out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // An existing file is never overwritten, and no credential is created then.
    let (ok, _, err) = run(&["workers", "add", "other", "--token-file", &f, "--db", &db]);
    assert!(!ok && err.contains("must be new"), "{err}");
    let (_, out, _) = run(&["workers", "list", "--db", &db]);
    assert!(!out.contains("other"), "{out}");
}
