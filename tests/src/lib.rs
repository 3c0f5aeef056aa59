//! Helpers for the end-to-end tests: stores, processes, admin clients, book checks.
//!
//! The tests start the `bft-coordinator` and `bft-worker` binaries of this crate (thin wrappers
//! over the coordinator and worker libraries, the same code paths as `bookfarm-coordinator serve`
//! and `bookfarm-worker run`) as real processes on 127.0.0.1, talk to them over gRPC, and kill
//! them with SIGKILL where a test needs a crash.

pub mod deploy;

use bookfarm_book::{MemBook, Position, edax, negamax};
use bookfarm_coordinator::identity::{Identities, IdentityConfig};
use bookfarm_coordinator::service::new_book;
use bookfarm_coordinator::store::Store;
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::pb;
use bookfarm_proto::pb::admin_service_client::AdminServiceClient;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// An admin client (sending a token, or none).
pub type Admin = AdminServiceClient<InterceptedService<Channel, Bearer>>;

/// The shared evaluation file, or `None` (test skipped) without `../shared`.
pub fn eval_path() -> Option<PathBuf> {
    bookfarm_engine::testdata::shared_dir_or_skip().map(|d| d.join("golden/eval-seed1.dat"))
}

/// Fingerprint of an eval file.
pub fn eval_hash(p: &Path) -> String {
    bookfarm_proto::eval_fingerprint(&std::fs::read(p).expect("eval file"))
}

/// The search signature a `bft-worker` process loading the eval file `p` sends.
pub fn eval_signature(p: &Path) -> String {
    let (weights, hash) = bookfarm_runner::load_eval(Some(p)).expect("eval file");
    bookfarm_runner::signature(&weights, &hash)
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Arguments of a `bft-coordinator` process serving the store `db` on 127.0.0.1:`port`,
/// followed by `extra`.
pub fn serve_args(db: &Path, port: u16, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--db".to_string(),
        db.display().to_string(),
        "--listen".to_string(),
        format!("127.0.0.1:{port}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Arguments of a `bft-worker` process named `name` against the coordinator on `port`.
pub fn worker_args(port: u16, eval: &Path, name: &str) -> Vec<String> {
    vec![
        "--coordinator".into(),
        format!("http://127.0.0.1:{port}"),
        "--eval".into(),
        eval.display().to_string(),
        "--name".into(),
        name.into(),
    ]
}

/// Create a new book (`book new LEVEL DEPTH`) in `dir`.
pub fn new_store(dir: &Path, level: u8, depth: u8) {
    let s = Store::open(dir).expect("open store");
    let (h, e) = new_book(level, depth);
    s.create(&h, &e).expect("create book");
}

/// Add a worker credential to a stopped coordinator's store (the `workers add --db` path);
/// returns its token.
pub fn add_credential(db: &Path, name: &str, owner: &str, trusted: bool) -> String {
    let store = Store::open(db).expect("open store");
    let ids = Identities::open(
        IdentityConfig::default(),
        Some(store.credentials().expect("credential tree")),
    )
    .expect("credentials");
    ids.add(name, Some(owner), trusted)
        .expect("add credential")
        .0
}

/// A child process killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Proc(pub Child);

impl Proc {
    /// Start `bin` with `args` (stderr inherited for diagnostics).
    pub fn spawn(bin: &str, args: &[String]) -> Proc {
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {bin}: {e}"));
        Proc(child)
    }

    /// Start `bin` with `args` and `env`, its stderr written to `log`.
    pub fn spawn_logged(bin: &str, args: &[String], env: &[(&str, &str)], log: &Path) -> Proc {
        let f = std::fs::File::create(log).expect("log file");
        let child = Command::new(bin)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {bin}: {e}"));
        Proc(child)
    }

    /// The exit status if the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().expect("try_wait")
    }

    /// A line of `/proc/PID/status` in kB (e.g. `VmRSS`, `VmHWM`).
    pub fn status_kb(&self, field: &str) -> u64 {
        let s =
            std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).expect("/proc status");
        s.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc status"))
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// SIGTERM and wait for the exit status (graceful stop).
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        self.0.wait().expect("wait")
    }

    /// SIGTERM, then wait (polling, without blocking the async runtime) for the exit status;
    /// fails the test if the process is still running after `limit` (a hang guard).
    pub async fn terminate_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        assert!(
            Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status()
                .expect("kill")
                .success()
        );
        loop {
            if let Some(st) = self.exited() {
                return st;
            }
            assert!(
                t0.elapsed() < limit,
                "no exit {:?} after SIGTERM",
                t0.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Anonymous admin client, retrying the connection for up to 20 s (the process may still be
/// starting).
pub async fn admin(port: u16) -> Admin {
    admin_as(port, "").await
}

/// A channel to `127.0.0.1:port`, retrying the connection for up to 20 s. HTTP/2 keep-alive
/// pings find a dead connection, so that the channel reconnects instead of a call waiting on
/// it forever.
pub async fn channel(port: u16) -> Channel {
    let url = format!("http://127.0.0.1:{port}");
    let t0 = Instant::now();
    loop {
        match tonic::transport::Endpoint::from_shared(url.clone())
            .expect("url")
            .connect_timeout(Duration::from_secs(5))
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .connect()
            .await
        {
            Ok(ch) => return ch,
            Err(e) if t0.elapsed() < Duration::from_secs(20) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("coordinator on {url} unreachable: {e}"),
        }
    }
}

/// Admin client sending `token`.
pub async fn admin_as(port: u16, token: &str) -> Admin {
    AdminServiceClient::with_interceptor(channel(port).await, Bearer::new(token).expect("token"))
        .max_decoding_message_size(usize::MAX)
}

/// The status.
pub async fn status(c: &mut Admin) -> pb::GetStatusResponse {
    c.get_status(pb::GetStatusRequest::default())
        .await
        .expect("status")
        .into_inner()
}

/// The worker credentials the coordinator lists.
pub async fn credentials(c: &mut Admin) -> Vec<pb::Credential> {
    c.list_credentials(pb::ListCredentialsRequest::default())
        .await
        .expect("list credentials")
        .into_inner()
        .credentials
}

/// Whether the status reports the expansion done.
pub fn done(s: &pb::GetStatusResponse) -> bool {
    s.state == pb::ExpansionState::Done as i32
}

/// A book's positions sorted by board, for comparing books.
pub fn sorted(book: &MemBook) -> Vec<Position> {
    let mut v: Vec<Position> = book.positions().collect();
    v.sort_by_key(|p| p.board);
    v
}

/// Poll the status until `pred` holds (panics after `limit`: a hang is a failure, not a skip;
/// a status call that does not answer within 10 s counts as unreachable).
pub async fn wait_for(
    c: &mut Admin,
    limit: Duration,
    pred: impl Fn(&pb::GetStatusResponse) -> bool,
) -> pb::GetStatusResponse {
    let t0 = Instant::now();
    loop {
        let call = c.get_status(pb::GetStatusRequest::default());
        if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(10), call).await {
            let s = r.into_inner();
            if pred(&s) {
                return s;
            }
            assert!(
                t0.elapsed() < limit,
                "condition not reached within {limit:?}: {s:?}"
            );
        } else {
            assert!(
                t0.elapsed() < limit,
                "coordinator unreachable for {limit:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Start a deviate expansion.
pub async fn start_deviate(c: &mut Admin, rel: i32, abs: i32) {
    c.start_expansion(pb::StartExpansionRequest {
        selector: Some(pb::start_expansion_request::Selector::Deviate(
            pb::Deviate {
                relative_error: rel,
                absolute_error: abs,
            },
        )),
        level: 0,
        ..Default::default()
    })
    .await
    .expect("start expansion");
}

/// Queue the program `selector` from the root line `from` (`""`: the start position, at the
/// book's level); returns the program's number.
pub async fn queue(
    c: &mut Admin,
    selector: pb::start_expansion_request::Selector,
    from: &str,
) -> u64 {
    c.start_expansion(pb::StartExpansionRequest {
        selector: Some(selector),
        from: from.into(),
        ..Default::default()
    })
    .await
    .expect("queue a program")
    .into_inner()
    .program
}

/// Export the running book as book.dat bytes.
pub async fn export(c: &mut Admin) -> Vec<u8> {
    export_as(c, pb::ExportFormat::Edax).await
}

/// The coordinator's book in `format`.
pub async fn export_as(c: &mut Admin, format: pb::ExportFormat) -> Vec<u8> {
    let mut s = c
        .export_book(pb::ExportBookRequest {
            format: format as i32,
        })
        .await
        .expect("export")
        .into_inner();
    let mut out = Vec::new();
    while let Some(chunk) = s.message().await.expect("export chunk") {
        out.extend_from_slice(&chunk.data);
    }
    out
}

/// Check an exported book: it reads back, re-encodes to the same bytes, a full negamax
/// recompute (the book crate's, from the start position) equals every stored value, bound,
/// count and link score, and it is a fixed point of Edax's linking (`book link`: no link to
/// add, no leaf to search again, no value to change). Returns the book.
pub fn check_book(bytes: &[u8]) -> MemBook {
    let book = edax::read_book(bytes).expect("exported book reads back");
    assert_eq!(edax::book_to_bytes(&book), bytes, "write(read(x)) == x");
    let mut full = book.clone();
    negamax::negamax(&mut full);
    for p in book.positions() {
        let q = full.get(&p.board).expect("same positions");
        assert_eq!(p, q, "stored (incremental) state == full recompute");
    }
    let mut linked = book.clone();
    let r = bookfarm_book::grow::link_command(&mut linked, &mut |r| {
        panic!("book link searched {r:?}: a transposition was left unlinked")
    });
    assert!(r.is_fixed_point(), "book link changed the book: {r:?}");
    book
}
