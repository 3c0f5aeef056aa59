//! A volunteer's worker (issue 37): the real `bookfarm-worker run` against the real
//! `bookfarm-coordinator serve` on 127.0.0.1. It says why it is idle, and a setting that pauses
//! it (here the battery, read from a fake power-supply directory) hands its leases back.

use bookfarm_proto::pb;
use bookfarm_tests::deploy::binary;
use bookfarm_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A coordinator serving a new book (`book new LEVEL DEPTH`), killed on drop.
struct Served {
    dir: tempfile::TempDir,
    url: String,
    port: u16,
    _serve: Proc,
}

fn coordinator_bin() -> PathBuf {
    binary("bookfarm-coordinator")
}

fn serve(level: u8, depth: u8) -> Served {
    let coord = coordinator_bin();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    let out = Command::new(&coord)
        .args(["book", "new", &level.to_string(), &depth.to_string()])
        .args(["--db", &db])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (port, http) = (free_port(), free_port());
    let serve = Proc::spawn(
        coord.to_str().unwrap(),
        &[
            "serve".into(),
            "--db".into(),
            db,
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--http".into(),
            format!("127.0.0.1:{http}"),
        ],
    );
    Served {
        dir,
        url: format!("http://127.0.0.1:{port}"),
        port,
        _serve: serve,
    }
}

/// A fake power-supply class directory: a laptop's charger (`AC`, online or not) and battery.
fn power_supply(dir: &Path, on_mains: bool) {
    for (name, kind) in [("AC", "Mains"), ("BAT0", "Battery")] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("type"), format!("{kind}\n")).unwrap();
    }
    let (online, status) = if on_mains {
        ("1\n", "Charging\n")
    } else {
        ("0\n", "Discharging\n")
    };
    std::fs::write(dir.join("AC/online"), online).unwrap();
    std::fs::write(dir.join("BAT0/status"), status).unwrap();
}

/// `bookfarm-worker run` with one thread, a progress line every second, the battery read from
/// `power`; its log (info level) goes to `log`.
fn worker(s: &Served, power: &Path, extra: &[&str], log: &Path) -> Proc {
    let mut args: Vec<String> = [
        "run",
        "--coordinator",
        &s.url,
        "--threads",
        "1",
        "--name",
        "laptop",
        "--progress-secs",
        "1",
        "--power-supply-dir",
        power.to_str().unwrap(),
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    args.extend(extra.iter().map(|x| x.to_string()));
    Proc::spawn_logged(
        binary("bookfarm-worker").to_str().unwrap(),
        &args,
        &[("RUST_LOG", "info")],
        log,
    )
}

/// Wait until the log holds `text` (a hang guard, not a timing assertion).
fn log_shows(log: &Path, text: &str, limit: Duration) -> String {
    let t0 = Instant::now();
    loop {
        let s = std::fs::read_to_string(log).unwrap_or_default();
        if s.contains(text) {
            return s;
        }
        assert!(
            t0.elapsed() < limit,
            "the worker never logged {text:?}; its log:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn admin_cmd(s: &Served, args: &[&str]) {
    let out = Command::new(coordinator_bin())
        .args(args)
        .args(["--coordinator", &s.url])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_idle_worker_logs_why_it_is_idle() {
    let s = serve(2, 8);
    let power = s.dir.path().join("power");
    power_supply(&power, true);
    let log = s.dir.path().join("worker.log");
    let _w = worker(&s, &power, &[], &log);
    // No program was started: the coordinator says so with every empty lease, and the worker
    // logs it once idleness lasts, and in its progress line.
    let text = log_shows(
        &log,
        "idle: the build is done: no growth program is running",
        Duration::from_secs(60),
    );
    assert!(text.contains("polite settings"), "{text}");
    log_shows(
        &log,
        "; idle: the build is done: no growth program is running",
        Duration::from_secs(60),
    );
    // A program started and paused by the operator: a new reason, logged at once.
    admin_cmd(&s, &["expand", "deviate", "2", "4"]);
    admin_cmd(&s, &["pause"]);
    log_shows(
        &log,
        "idle: the operator paused the build",
        Duration::from_secs(60),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_battery_holds_no_lease_and_searches_again_on_mains() {
    let s = serve(4, 14);
    let power = s.dir.path().join("power");
    power_supply(&power, false);
    let log = s.dir.path().join("worker.log");
    let _w = worker(&s, &power, &["--pause-grace", "0"], &log);
    let mut a = admin(s.port).await;
    log_shows(
        &log,
        "paused: unstarted jobs go back now",
        Duration::from_secs(60),
    );
    start_deviate(&mut a, 2, 4).await;
    // Unplugged from the start: the build waits, no job is leased.
    let running = |st: &pb::GetStatusResponse| {
        st.state == pb::ExpansionState::Running as i32 && st.queued > 0
    };
    let st = wait_for(&mut a, Duration::from_secs(60), running).await;
    assert_eq!(st.in_flight, 0, "{st:?}");
    log_shows(&log, "; paused: on battery", Duration::from_secs(60));
    let st = status(&mut a).await;
    assert_eq!(
        st.in_flight, 0,
        "a worker on battery leases nothing: {st:?}"
    );
    // On mains it searches.
    power_supply(&power, true);
    wait_for(&mut a, Duration::from_secs(60), |st| st.in_flight > 0).await;
    log_shows(&log, "resuming: searching again", Duration::from_secs(60));
    // Unplugged again while it holds jobs: with no grace, they are handed back at the next
    // look at the battery, and the coordinator's queue holds them again.
    let before = std::fs::read_to_string(&log).unwrap();
    let pauses = before.matches("paused: unstarted jobs go back now").count();
    power_supply(&power, false);
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.matches("paused: unstarted jobs go back now").count() > pauses {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = wait_for(&mut a, Duration::from_secs(60), |st| {
        st.in_flight == 0 && st.queued > 0
    })
    .await;
    assert_eq!(st.state, pb::ExpansionState::Running as i32, "{st:?}");
    // Back on mains it searches again.
    power_supply(&power, true);
    wait_for(&mut a, Duration::from_secs(60), |st| st.in_flight > 0).await;
}
