//! A volunteer from nothing: the real `bookfarm-coordinator` and `bookfarm-worker` binaries, a
//! home directory with nothing in it. The operator invites; the volunteer types
//! `bookfarm-worker enroll URL CODE` and `bookfarm-worker run`; the worker gets its credential,
//! fetches the coordinator's (non-default) evaluation, and its results are accepted. Or the
//! operator allows open enrolment (`serve --open-enrolment`) and the volunteer enrols without a
//! code; without that flag the same command is refused.

use bookfarm_proto::pb;
use bookfarm_tests::deploy::binary;
use bookfarm_tests::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Run a command to its end; its stdout, or a panic with its stderr.
fn ok(cmd: &mut Command) -> String {
    let out = cmd.env("RUST_LOG", "warn").output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A home directory with nothing in it, as the worker sees it.
fn home_env(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env_remove("BOOKFARM_CONFIG_DIR")
        .env_remove("BOOKFARM_CACHE_DIR")
        .env_remove("BOOKFARM_TOKEN")
        .env_remove("BOOKFARM_COORDINATOR")
        .env_remove("BOOKFARM_EVAL");
}

/// The environment of `bookfarm-worker run` in the home directory `home`: one search thread,
/// info logs.
fn run_env(home: &Path) -> [(&'static str, String); 5] {
    [
        ("HOME", home.display().to_string()),
        (
            "XDG_CONFIG_HOME",
            home.join(".config").display().to_string(),
        ),
        ("XDG_CACHE_HOME", home.join(".cache").display().to_string()),
        ("BOOKFARM_THREADS", "1".into()),
        ("RUST_LOG", "info".into()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volunteer_enrols_with_a_code_fetches_the_evaluation_and_searches() {
    let Some(eval) = eval_path() else { return };
    let want = eval_hash(&eval);
    let default = bookfarm_runner::load_eval(None).unwrap().1;
    assert_ne!(
        want, default,
        "the coordinator's evaluation is not the default"
    );
    let coord = binary("bookfarm-coordinator");
    let worker = binary("bookfarm-worker");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.display().to_string();
    // The operator: a book, the coordinator serving its evaluation, an invitation.
    let eval_s = eval.display().to_string();
    ok(Command::new(&coord).args(["book", "new", "2", "8", "--db", &db_s, "--eval", &eval_s]));
    let port = free_port();
    let _serve = serve(&coord, &db_s, port, &["--eval", &eval_s]);
    let url = format!("http://127.0.0.1:{port}");
    let mut invite = Command::new(&coord);
    invite.args([
        "invite",
        "add",
        "alice",
        "--coordinator",
        &url,
        "--token",
        "adm",
    ]);
    // The coordinator may still be starting.
    let mut tries = 0;
    let out = loop {
        let out = invite.env("RUST_LOG", "warn").output().unwrap();
        if out.status.success() {
            break String::from_utf8(out.stdout).unwrap();
        }
        // A hang guard (the machine may be loaded), not a timing assertion.
        tries += 1;
        assert!(tries < 600, "{}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(200));
    };
    let code = out.lines().last().unwrap().trim().to_string();
    assert!(code.starts_with("bfi_"), "{out}");
    let listed =
        ok(Command::new(&coord).args(["invite", "list", "--coordinator", &url, "--token", "adm"]));
    assert!(
        listed.contains("alice") && listed.contains("open") && !listed.contains(&code),
        "{listed}"
    );
    // The volunteer, from nothing. A wrong code is refused and leaves nothing behind.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut wrong = Command::new(&worker);
    wrong.args(["enroll", &url, "bfi_0123456789abcdef0123456789abcdef"]);
    home_env(&mut wrong, &home);
    let out = wrong.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown invitation code"), "{err}");
    assert!(!home.join(".config/bookfarm").exists(), "nothing written");
    // One command to enrol...
    let mut enrol = Command::new(&worker);
    enrol.args(["enroll", &url, &code, "--name", "alice-laptop"]);
    home_env(&mut enrol, &home);
    ok(&mut enrol);
    let cred = home.join(".config/bookfarm/credential.toml");
    let text = std::fs::read_to_string(&cred).unwrap();
    assert!(text.contains("bfw_") && text.contains(&url), "{text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cred).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // The code was for one machine.
    let mut again = Command::new(&worker);
    again.args(["enroll", &url, &code, "--force"]);
    home_env(&mut again, &home);
    let out = again.output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("used up"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ...and one to run: no flag, no token, no evaluation file.
    let log = dir.path().join("worker.log");
    let run_env = run_env(&home);
    let env: Vec<(&str, &str)> = run_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut w = Proc::spawn_logged(worker.to_str().unwrap(), &["run".into()], &env, &log);
    let mut a = admin_as(port, "adm").await;
    start_deviate(&mut a, 2, 4).await;
    wait_for(&mut a, Duration::from_secs(120), |s| {
        s.state == pb::ExpansionState::Done as i32
    })
    .await;
    // It searched with the coordinator's evaluation, fetched into the cache under its
    // fingerprint, as its enrolled credential.
    let cached = home.join(format!(".cache/bookfarm/eval/{want}.dat"));
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(&eval).unwrap()
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("the coordinator's evaluation fetched and cached"),
        "{logged}"
    );
    let creds = credentials(&mut a).await;
    assert_eq!(creds.len(), 1, "{creds:?}");
    let c = &creds[0];
    assert!(c.name.starts_with("alice-laptop-"), "{c:?}");
    assert!(!c.trusted, "a new credential starts untrusted");
    let credit = c.credit.clone().unwrap_or_default();
    assert!(credit.results > 0, "its results were validated: {c:?}");
    assert_eq!(credit.invalid, 0, "{c:?}");
    // Next time the cached evaluation is used: nothing is fetched again.
    assert!(
        w.terminate().success(),
        "the worker drains and exits cleanly"
    );
    let log2 = dir.path().join("worker2.log");
    let _w2 = Proc::spawn_logged(worker.to_str().unwrap(), &["run".into()], &env, &log2);
    let guard = std::time::Instant::now();
    let logged = loop {
        let text = std::fs::read_to_string(&log2).unwrap_or_default();
        if text.contains("registered") || text.contains("idle") {
            break text;
        }
        // A hang guard, not a timing assertion.
        assert!(guard.elapsed() < Duration::from_secs(120), "{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        logged.contains("the coordinator's evaluation, from the cache"),
        "{logged}"
    );
    assert!(
        !logged.contains("fetching the coordinator's evaluation"),
        "{logged}"
    );
}

/// The coordinator's `serve` on `db`, on 127.0.0.1:`port`, admin token `adm`.
fn serve(coord: &Path, db: &str, port: u16, extra: &[&str]) -> Proc {
    let mut args = vec![
        "serve".to_string(),
        "--db".into(),
        db.into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--http".into(),
        format!("127.0.0.1:{}", free_port()),
        "--admin-token".into(),
        "adm".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(coord.to_str().unwrap(), &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_enrolment_only_when_the_operator_allows_it() {
    let coord = binary("bookfarm-coordinator");
    let worker = binary("bookfarm-worker");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    ok(Command::new(&coord).args(["book", "new", "2", "8", "--db", &db]));
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let enrol = || {
        let mut c = Command::new(&worker);
        c.args(["enroll", &url, "--name", "bob-pc"]);
        home_env(&mut c, &home);
        c.env("RUST_LOG", "warn");
        c
    };
    // Invitations only (the default): enrolling without a code is refused, nothing written.
    let mut closed = serve(&coord, &db, port, &[]);
    let mut a = admin_as(port, "adm").await;
    status(&mut a).await;
    let out = enrol().output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("enrols workers with an invitation code only"),
        "{err}"
    );
    assert!(!home.join(".config/bookfarm").exists(), "nothing written");
    drop(a);
    assert!(
        closed
            .terminate_within(Duration::from_secs(60))
            .await
            .success(),
        "the coordinator stops cleanly"
    );
    // The operator opens enrolment: the same command gets an untrusted credential of its own.
    let _open = serve(&coord, &db, port, &["--open-enrolment"]);
    let mut a = admin_as(port, "adm").await;
    ok(&mut enrol());
    let text = std::fs::read_to_string(home.join(".config/bookfarm/credential.toml")).unwrap();
    assert!(text.contains("bfw_") && text.contains(&url), "{text}");
    let creds = credentials(&mut a).await;
    assert_eq!(creds.len(), 1, "{creds:?}");
    let c = &creds[0];
    assert!(c.name.starts_with("bob-pc-"), "{c:?}");
    assert!(!c.trusted, "an open enrolment is untrusted: {c:?}");
    assert_eq!(c.owner, c.name, "it owns itself: {c:?}");
    // It runs with no flag, and gets work or says why it has none.
    start_deviate(&mut a, 2, 4).await;
    let log = dir.path().join("worker.log");
    let run_env = run_env(&home);
    let env: Vec<(&str, &str)> = run_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let _w = Proc::spawn_logged(worker.to_str().unwrap(), &["run".into()], &env, &log);
    let guard = std::time::Instant::now();
    let (me, logged) = loop {
        let s = status(&mut a).await;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let me = s.workers.into_iter().find(|w| w.owner == c.name);
        if let Some(w) = me
            && (w.completed > 0 || text.contains("idle: "))
        {
            break (w, text);
        }
        // A hang guard, not a timing assertion.
        assert!(guard.elapsed() < Duration::from_secs(120), "{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        logged.contains("token=\"enrolment\""),
        "the enrolled credential was used: {logged}"
    );
    // Nothing here can vouch for it (no trusted worker, no verifier without `serve --eval`): it
    // stays untrusted.
    assert!(
        !me.trusted && me.standing == "untrusted",
        "an open enrolment is untrusted: {me:?}"
    );
    // Work, or a reason the coordinator gave (not "no reason").
    if me.completed == 0 {
        assert!(
            bookfarm_runner::domain::IdleReason::ALL
                .iter()
                .any(|r| logged.contains(&format!("idle: {}", r.explain()))),
            "{logged}"
        );
    }
}
