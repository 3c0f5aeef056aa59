//! The JSON API over real HTTP (the router on an ephemeral 127.0.0.1 port) against a real
//! coordinator on a sled store, driven by the mock engine of the service tests.

use super::*;
use crate::identity::{Identities, IdentityConfig};
use crate::service::tests::{identity, mock_result};
use crate::service::{Coordinator, ManualClock, ServiceConfig, new_book};
use crate::store::{CredentialState, Store};
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::Deviate;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

struct Web {
    dir: tempfile::TempDir,
    c: Coordinator,
    ids: Identities,
    addr: std::net::SocketAddr,
    _server: tokio::task::JoinHandle<()>,
}

async fn serve(
    c: Coordinator,
    ids: Identities,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let app = crate::http::router(c, ids);
    let server = tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (addr, server)
}

async fn start(level: u8, depth: u8) -> Web {
    start_with(level, depth, ServiceConfig::default()).await
}

async fn start_with(level: u8, depth: u8, cfg: ServiceConfig) -> Web {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (h, entries) = new_book(level, depth);
    store.create(&h, &entries).unwrap();
    let ids =
        Identities::open(IdentityConfig::local(), Some(store.credentials().unwrap())).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg, Arc::new(ManualClock::default())).unwrap();
    let (addr, server) = serve(c.clone(), ids.clone()).await;
    Web {
        dir,
        c,
        ids,
        addr,
        _server: server,
    }
}

/// (status code, headers, body) of one HTTP/1.1 request.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let (code, head, body) = request_raw(addr, method, path, "").await;
    (code, head, String::from_utf8(body).unwrap())
}

/// [`request`] with extra header lines, the body as bytes.
async fn request_raw(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
) -> (u16, String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(out[..split].to_vec()).unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, head.to_ascii_lowercase(), out[split + 4..].to_vec())
}

async fn get_json(addr: std::net::SocketAddr, path: &str) -> Value {
    let (code, head, body) = request(addr, "GET", path).await;
    assert_eq!(code, 200, "{path}: {body}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    serde_json::from_str(&body).unwrap()
}

/// Lease and answer up to `n` jobs as `worker`; returns how many were answered.
fn answer(c: &Coordinator, worker: &Uuid, n: u32) -> usize {
    let id = identity();
    let jobs = c.lease(&id, worker, n).unwrap();
    let results: Vec<_> = jobs
        .iter()
        .map(|j| {
            let mut r = mock_result(j);
            r.leaf.elapsed = Duration::from_millis(4);
            r.leaf.nodes = 1000;
            r
        })
        .collect();
    c.submit(&id, worker, &results).unwrap();
    c.settle().unwrap();
    results.len()
}

fn deviate(c: &Coordinator) {
    c.start(Program::new(Operation::Deviate {
        params: Deviate::new(2, 4),
    }))
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_the_admin_status_and_has_the_round_eta() {
    let w = start(2, 8).await;
    deviate(&w.c);
    let id = identity();
    let a = w.c.register(&id, "a", 2).unwrap();
    let b = w.c.register(&id, "b", 1).unwrap();
    let done = answer(&w.c, &a, 2) as u64;
    // Leave leases out so that threads are busy: a holds 2 (both threads), b holds 1.
    w.c.lease(&id, &a, 2).unwrap();
    w.c.lease(&id, &b, 1).unwrap();
    let v = get_json(w.addr, "/api/v1/status").await;
    let s: StatusV1 = serde_json::from_value(v.clone()).unwrap();
    // The same object `status --json` prints (built from the admin RPC's message; the manual
    // clock keeps the rates still).
    assert_eq!(
        s,
        StatusV1::from(&crate::rpc::status_response(w.c.status(), 0, 0))
    );
    assert_eq!(s.api, 1);
    assert_eq!(s.state, "running");
    assert_eq!(s.completed, done);
    // Busy threads: per worker, the fewer of its threads and its leases.
    let busy: u64 =
        w.c.status()
            .workers
            .iter()
            .map(|r| u64::from(r.threads).min(r.in_flight as u64))
            .sum();
    assert!(busy > 0);
    assert_eq!((s.workers_total, s.threads, s.busy_threads), (2, 3, busy));
    assert_eq!(s.mean_search_seconds, Some(0.004));
    let remaining = (s.queued + s.in_flight) as f64;
    let eta = s.round_eta_seconds.unwrap();
    assert!(
        (eta - remaining * 0.004 / busy as f64).abs() < 1e-9,
        "{eta}"
    );
    assert_eq!(s.expansion_eta, "unknown");
    for key in ["state", "positions", "completed"] {
        assert!(v.get(key).is_some(), "status keeps {key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_list_live_workers_then_blocked_credentials() {
    let w = start(2, 8).await;
    deviate(&w.c);
    w.ids.add("m1", Some("alice"), true).unwrap();
    w.ids.add("m2", Some("bob"), false).unwrap();
    w.ids
        .set_state("m2", CredentialState::Blocked, "bad results")
        .unwrap();
    let id = identity();
    let evil = "<script>alert(1)</script>";
    let a =
        w.c.register_with(&id, evil, 2, Some("alice"), true)
            .unwrap();
    let anon = w.c.register(&id, "laptop", 1).unwrap();
    let from_alice = answer(&w.c, &a, 2) as u64;
    let from_laptop = answer(&w.c, &anon, 1) as u64;
    assert!(from_alice > 0 && from_laptop > 0);
    let v: WorkersV1 = serde_json::from_value(get_json(w.addr, "/api/v1/workers").await).unwrap();
    let names: Vec<&str> = v.workers.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, [evil, "laptop", "m2"]);
    let alice = &v.workers[0];
    assert_eq!(alice.owner.as_deref(), Some("alice"));
    assert_eq!(alice.trusted, Some(true));
    assert_eq!(alice.standing, "trusted");
    assert_eq!(alice.results, from_alice);
    assert_eq!(alice.version, bookfarm_proto::ENGINE_VERSION);
    assert_eq!(
        alice.credit,
        Some(from_alice as f64),
        "a trusted worker's results are used at once, and credited"
    );
    assert!(!alice.blocked);
    assert_eq!(v.workers[1].owner, None);
    assert_eq!(v.workers[1].trusted, None);
    assert_eq!(v.workers[1].standing, "root", "an in-process worker");
    let m2 = &v.workers[2];
    assert!(m2.blocked && m2.last_seen_seconds.is_none());
    assert_eq!(m2.standing, "blocked");
    // Nothing secret: no worker ids, no token hashes.
    let body = request(w.addr, "GET", "/api/v1/workers").await.2;
    assert!(!body.contains(&a.to_string()));
    assert!(!body.contains("token"));

    // Contributors: results per owner once the history took them; machines are the workers
    // connected now (the anonymous laptop's included), credit the owner's validated results.
    w.c.sample_history(1_000_000).unwrap();
    let c: ContributorsV1 =
        serde_json::from_value(get_json(w.addr, "/api/v1/contributors").await).unwrap();
    // (name, anonymous, all time, machines, credentials, blocked, credit)
    type Row<'a> = (&'a str, bool, u64, u32, u32, u32, Option<f64>);
    let rows: Vec<Row> = c
        .contributors
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.anonymous,
                r.results_all_time,
                r.machines,
                r.credentials,
                r.blocked,
                r.credit,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("alice", false, from_alice, 1, 1, 0, Some(from_alice as f64)),
            ("laptop", true, from_laptop, 1, 0, 0, None),
            ("bob", false, 0, 0, 1, 1, None),
        ]
    );
    // The worker leaves: its machine no longer counts, its results and credit stay.
    w.c.drop_workers(&[a]);
    let c: ContributorsV1 =
        serde_json::from_value(get_json(w.addr, "/api/v1/contributors").await).unwrap();
    let alice = &c.contributors[0];
    assert_eq!((alice.machines, alice.credentials), (0, 1));
    assert_eq!(alice.credit, Some(from_alice as f64));
}

/// `/api/v1/events`: what the operator did and what the farm did, newest first, filtered by
/// kind or group and by text, paged by sequence number; a bad filter is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_listed_newest_first_and_filtered() {
    let w = start(2, 8).await;
    w.ids.set_events(w.c.events().clone());
    w.ids.add("m1", Some("alice"), true).unwrap();
    w.ids.add("m2", Some("bob"), false).unwrap();
    w.ids
        .set_state("m2", CredentialState::Blocked, "bad <b>results</b>")
        .unwrap();
    deviate(&w.c);
    let id = identity();
    let a =
        w.c.register_with(&id, "host-a", 2, Some("alice"), true)
            .unwrap();
    assert!(answer(&w.c, &a, 2) > 0);
    let all: EventsV1 = serde_json::from_value(get_json(w.addr, "/api/v1/events").await).unwrap();
    let kinds: Vec<&str> = all.events.iter().map(|e| e.kind.as_str()).collect();
    // A new store starts at the current version with an empty log (no migration event). The
    // start position's search ("new", queued when the store opened) waits for the worker.
    assert_eq!(
        kinds,
        [
            "program_started",
            "program_done",
            "worker_joined",
            "program_queued",
            "credential_blocked",
            "credential_added",
            "credential_added",
            "program_started",
        ],
        "{all:?}"
    );
    let seqs: Vec<u64> = all.events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|p| p[0] > p[1]), "{seqs:?}");
    let blocked = &all.events[4];
    assert_eq!(
        (blocked.subject.as_str(), blocked.owner.as_str()),
        ("m2", "bob")
    );
    assert_eq!(blocked.group, "credentials");
    assert_eq!(
        blocked.detail, "bad <b>results</b>",
        "stored as text, escaped by the page"
    );
    let joined = &all.events[2];
    assert_eq!(
        (joined.subject.as_str(), joined.owner.as_str()),
        ("host-a", "alice")
    );
    // The start position's search finished with its cost.
    let new = &all.events[1];
    assert_eq!(new.subject, "new");
    assert!(new.cost.is_some());

    // By group and kind, by text (owner, case-insensitive), and newer than a sequence number.
    let get = |q: &'static str| async move {
        let v: EventsV1 = serde_json::from_value(get_json(w.addr, q).await).unwrap();
        v.events.iter().map(|e| e.kind.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        get("/api/v1/events?kind=credentials").await,
        ["credential_blocked", "credential_added", "credential_added"]
    );
    assert_eq!(
        get("/api/v1/events?kind=worker_joined,credential_blocked").await,
        ["worker_joined", "credential_blocked"]
    );
    assert_eq!(
        get("/api/v1/events?q=ALICE").await,
        ["worker_joined", "credential_added"]
    );
    let after = format!("/api/v1/events?after={}", seqs[2]);
    let v: EventsV1 = serde_json::from_value(get_json(w.addr, &after).await).unwrap();
    assert_eq!(v.events.len(), 2);
    // Pages of two walk back to the oldest.
    let mut before = 0;
    let mut seen = Vec::new();
    loop {
        let path = format!("/api/v1/events?limit=2&before={before}");
        let v: EventsV1 = serde_json::from_value(get_json(w.addr, &path).await).unwrap();
        seen.extend(v.events.iter().map(|e| e.seq));
        if !v.more {
            break;
        }
        before = v.next_before;
    }
    assert_eq!(seen, seqs);
    // An unknown kind names itself; nothing secret is listed.
    let (code, _, body) = request(w.addr, "GET", "/api/v1/events?kind=trust,nope").await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("nope"), "{body}");
    let body = request(w.addr, "GET", "/api/v1/events").await.2;
    assert!(
        !body.contains(&a.to_string()) && !body.contains("bfw_"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_shows_what_book_show_shows() {
    let w = start(1, 6).await;
    deviate(&w.c);
    let id = identity();
    let a = w.c.register(&id, "a", 4).unwrap();
    while w.c.status().state != crate::service::State::Done {
        answer(&w.c, &a, 8);
    }
    let book = w.c.book_snapshot();
    for (moves, text, ply, black) in [
        ("", "", 0, true),
        ("f5", "f5", 1, false),
        ("f5d6", "f5d6", 2, true),
        ("F5 D6 C3", "f5d6c3", 3, false),
    ] {
        let p: PositionV1 = serde_json::from_value(
            get_json(
                w.addr,
                &format!("/api/v1/book/position?moves={}", moves.replace(' ', "%20")),
            )
            .await,
        )
        .unwrap();
        let board = bookfarm_engine::formats::transcript::board_after(moves).unwrap();
        assert_eq!(p.moves, text);
        assert_eq!(p.ply, ply);
        assert_eq!(p.black_to_move, black);
        let (nid, want) = bookfarm_book::query::book_moves(&book, &board).expect("in the book");
        assert!(p.in_book);
        let got: Vec<(String, i32, bool)> = p
            .book_moves
            .iter()
            .map(|m| (m.mv.clone(), m.score, m.leaf))
            .collect();
        let want: Vec<(String, i32, bool)> = want
            .iter()
            .map(|m| (mv_name(m.mv), i32::from(m.score), m.leaf))
            .collect();
        assert_eq!(got, want, "after {moves:?}");
        let s = book.score(nid);
        assert_eq!(
            (p.value, p.lower, p.upper, p.level),
            (
                Some(i32::from(s.value)),
                Some(i32::from(s.lower)),
                Some(i32::from(s.upper)),
                Some(book.level(nid))
            )
        );
        assert_eq!(p.searching, None, "nothing is searched once done");
    }
    let start: PositionV1 =
        serde_json::from_value(get_json(w.addr, "/api/v1/book/position").await).unwrap();
    assert_eq!(
        start.board,
        format!("{}{}{}", "-".repeat(27), "OX------XO", "-".repeat(27))
    );
    assert_eq!(start.legal, ["d3", "c4", "f5", "e6"]);
    for bad in ["f5z9", "f5a1", "f5d"] {
        let (code, _, body) =
            request(w.addr, "GET", &format!("/api/v1/book/position?moves={bad}")).await;
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(body.contains("\"error\""), "{body}");
    }
    // Book statistics add up to the book.
    let st: BookStatsV1 =
        serde_json::from_value(get_json(w.addr, "/api/v1/book/stats").await).unwrap();
    assert_eq!(st.positions, book.len() as u64);
    assert_eq!(
        st.by_level_ply.iter().map(|x| x[2]).sum::<u64>(),
        st.positions
    );
    assert_eq!(
        st.best_scores.iter().map(|x| x[1]).sum::<i64>(),
        st.positions as i64
    );
    assert!(st.by_level_ply.iter().any(|x| x == &[1, 0, 1]), "the root");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explorer_moves_pv_game_and_exports() {
    use bookfarm_book::explore::{Budget, principal_variation};
    use bookfarm_book::umigame::{UmigameMemo, UmigameOptions};
    let w = start(1, 8).await;
    deviate(&w.c);
    let a = w.c.register(&identity(), "a", 4).unwrap();
    while w.c.status().state != crate::service::State::Done {
        answer(&w.c, &a, 8);
    }
    let book = w.c.book_snapshot();
    let board = bookfarm_engine::formats::transcript::board_after("f5").unwrap();
    let p: PositionV1 = serde_json::from_value(
        get_json(w.addr, "/api/v1/book/position?moves=f5&umigame_loss=2").await,
    )
    .unwrap();
    // Every legal move, the book moves first with `book show`'s scores.
    assert_eq!(p.move_info.len(), p.legal.len());
    for (m, b) in p.move_info.iter().zip(&p.book_moves) {
        assert_eq!((&m.mv, m.value), (&b.mv, Some(b.score)));
    }
    let o = UmigameOptions::new(-64, 64, Some(2), 60).unwrap();
    assert_eq!(p.umigame_options, o.into());
    let mut memo = UmigameMemo::new(o);
    let want = memo.of(&book, &board, false, &mut Budget::unlimited());
    assert_eq!(p.umigame, Some(want.into()));
    for m in p.move_info.iter().filter(|m| m.kind == "link") {
        let sq = bookfarm_engine::Square::parse(&m.mv).unwrap();
        let child = board.next_unchecked(bookfarm_engine::Move::Square(sq));
        let want = memo.of(&book, &child, true, &mut Budget::unlimited());
        assert_eq!(m.umigame, Some(want.into()), "{}", m.mv);
        assert!(m.accuracy.is_some() && m.level.is_some() && m.lines.is_some());
    }
    let pv: Vec<String> = principal_variation(&book, &board)
        .into_iter()
        .map(mv_name)
        .collect();
    assert!(!pv.is_empty());
    assert_eq!(p.pv, pv);
    assert_eq!(
        p.opening.map(|o| (o.name, o.ply)),
        None,
        "one move names nothing"
    );
    assert!(!p.growing, "the build is done");
    let named: PositionV1 =
        serde_json::from_value(get_json(w.addr, "/api/v1/book/position?moves=f5d6c3").await)
            .unwrap();
    assert_eq!(
        named.opening.map(|o| (o.name, o.ply)),
        Some(("Perpendicular opening".into(), 2))
    );
    for bad in [
        "umigame_min=5&umigame_max=4",
        "umigame_loss=x",
        "umigame_depth=0",
    ] {
        let (code, _, body) = request(w.addr, "GET", &format!("/api/v1/book/position?{bad}")).await;
        assert_eq!(code, 400, "{bad}: {body}");
    }

    // A game along the PV, then out of the book.
    let mut line = format!("f5{}", pv.concat());
    let mut b = board;
    for m in &pv {
        b = b.next_unchecked(if m == "pass" {
            bookfarm_engine::Move::Pass
        } else {
            bookfarm_engine::Move::Square(bookfarm_engine::Square::parse(m).unwrap())
        });
    }
    let out = b
        .legal_squares()
        .map(|s| s.to_string().to_ascii_lowercase())
        .next();
    if let Some(sq) = &out {
        line.push_str(sq);
    }
    let g: GameV1 =
        serde_json::from_value(get_json(w.addr, &format!("/api/v1/book/game?moves={line}")).await)
            .unwrap();
    assert_eq!(g.moves, line);
    assert_eq!(g.plies.len(), pv.len() + 1 + usize::from(out.is_some()));
    assert!(g.plies[1..=pv.len()].iter().all(|p| p.loss == Some(0)));
    let left = g.left_book.expect("the game leaves the book");
    assert!(left >= pv.len(), "not before the PV's leaf: {left}");
    assert_eq!(
        (
            g.plies.last().unwrap().black_loss,
            g.plies.last().unwrap().white_loss
        ),
        (
            g.plies
                .iter()
                .filter(|p| p.black)
                .filter_map(|p| p.loss)
                .sum(),
            g.plies
                .iter()
                .filter(|p| !p.black)
                .filter_map(|p| p.loss)
                .sum()
        )
    );
    let (code, _, _) = request(w.addr, "GET", "/api/v1/book/game?moves=f5f5").await;
    assert_eq!(code, 400);

    // Exports of the subtree below f5.
    let want = bookfarm_book::maintain::subtree_copy(&book, &board, usize::MAX).unwrap();
    let (code, head, body) =
        request_raw(w.addr, "GET", "/api/v1/book/export?moves=f5&format=dat", "").await;
    assert_eq!(code, 200);
    assert!(
        head.contains("attachment; filename=\"subtree-f5.dat\""),
        "{head}"
    );
    let got = bookfarm_book::BookFormat::Edax.read(&body).unwrap().book;
    let boards = |b: &bookfarm_book::MemBook| {
        let mut v: Vec<_> = b.positions().collect();
        v.sort_by_key(|p| p.board);
        v
    };
    assert_eq!(boards(&got), boards(&want));
    let (code, _, body) = request_raw(
        w.addr,
        "GET",
        "/api/v1/book/export?moves=f5&format=egbk3",
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert!(
        bookfarm_book::BookFormat::Egbk3.write(&want) == body,
        "the same format owner"
    );
    let (code, _, text) = request(w.addr, "GET", "/api/v1/book/export?moves=f5&format=lines").await;
    assert_eq!(code, 200);
    assert!(text.lines().count() >= 1);
    for l in text.lines() {
        assert!(l.starts_with("f5"), "{l}");
        bookfarm_engine::formats::transcript::parse_transcript(l).unwrap();
    }
    for bad in [
        "format=csv",
        "format=zip",
        "moves=f5d6c3d3c4f4f6f3e6e7&format=dat",
    ] {
        let (code, _, body) = request(w.addr, "GET", &format!("/api/v1/book/export?{bad}")).await;
        assert_eq!(code, 400, "{bad}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_survives_a_restart_at_minute_resolution() {
    let w = start(2, 8).await;
    // Five minutes and a second of ticks from a five-minute boundary: the fifth minute's close
    // saves the record.
    let t0 = 1_700_000_000_000 - 1_700_000_000_000 % 300_000;
    for i in 0..=300 {
        w.c.sample_history(t0 + i * 1000).unwrap();
    }
    let h: HistoryV1 = serde_json::from_value(get_json(w.addr, "/api/v1/history").await).unwrap();
    assert_eq!(h.fine.t.len(), 301);
    let minutes: Vec<f64> = (0..5).map(|k| (t0 + k * 60_000) as f64 / 1000.0).collect();
    assert_eq!(h.minutes.t, minutes);
    assert_eq!(h.minutes.positions, [1; 5]);
    assert_eq!(h.minutes.root_value, [None; 5], "-127 is unknown");
    let newer: HistoryV1 = serde_json::from_value(
        get_json(w.addr, &format!("/api/v1/history?since={}", t0 + 296_000)).await,
    )
    .unwrap();
    assert_eq!(newer.fine.t.len(), 4);
    let only: HistoryV1 =
        serde_json::from_value(get_json(w.addr, "/api/v1/history?tier=minutes").await).unwrap();
    assert!(only.fine.t.is_empty() && only.hours.t.is_empty());
    assert_eq!(only.minutes, h.minutes);
    assert_eq!(
        request(w.addr, "GET", "/api/v1/history?tier=days").await.0,
        400
    );
    // Restart (the store, as a crash leaves it, reopened by a new coordinator in a new server):
    // the per-minute points are back, the per-second ones are gone.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    w.c.flush().unwrap();
    copy_dir(w.dir.path(), &copy);
    let store = Store::open(&copy).unwrap();
    let c = Coordinator::open(
        store,
        &copy,
        ServiceConfig::default(),
        Arc::new(ManualClock::default()),
    )
    .unwrap();
    let (addr, _server) = serve(c, Identities::open(IdentityConfig::local(), None).unwrap()).await;
    let again: HistoryV1 = serde_json::from_value(get_json(addr, "/api/v1/history").await).unwrap();
    assert!(again.fine.t.is_empty());
    assert_eq!(again.minutes, h.minutes);
}

/// Copy a flushed store directory (what a restarted process finds on disk).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_and_assets_are_served_and_nothing_changes_state() {
    let w = start(2, 8).await;
    for page in ["/", "/workers", "/explorer"] {
        let (code, head, body) = request(w.addr, "GET", page).await;
        assert_eq!(code, 200);
        assert!(head.contains("content-type: text/html"), "{head}");
        assert!(head.contains("content-security-policy: default-src 'self'"));
        assert!(body.contains("/assets/common.js"));
    }
    let (code, head, body) = request(w.addr, "GET", "/assets/uPlot.iife.min.js").await;
    assert_eq!(code, 200);
    assert!(head.contains("content-type: text/javascript"));
    assert!(body.starts_with("/*! https://github.com/leeoniya/uPlot (v1.6.32) */"));
    assert_eq!(request(w.addr, "GET", "/assets/nope.js").await.0, 404);
    // Every route is read-only.
    for path in ["/api/v1/status", "/api/v1/workers", "/api/v1/book/position"] {
        assert_eq!(request(w.addr, "POST", path).await.0, 405, "{path}");
    }
    // /metrics stays where it was.
    assert_eq!(request(w.addr, "GET", "/healthz").await.0, 200);
    // Clients that accept gzip get it.
    let (code, head, body) = request_raw(
        w.addr,
        "GET",
        "/assets/uPlot.iife.min.js",
        "Accept-Encoding: gzip\r\n",
    )
    .await;
    assert_eq!(code, 200);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(body.len() < 40_000, "{} bytes", body.len());
}

/// Simultaneous first requests for the book statistics compute them once (the others wait for
/// that computation and reuse it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn book_stats_are_computed_once_for_simultaneous_requests() {
    let w = start(2, 6).await;
    use crate::http::{AppState, api_book_stats};
    use axum::extract::State;
    use axum::http::StatusCode;
    let state = AppState {
        live: crate::live::Live::fixed(w.c.clone(), w.ids.clone()),
        ids: w.ids.clone(),
        stats: Arc::new(tokio::sync::Mutex::new(None)),
        ready: Arc::new(tokio::sync::Mutex::new(None)),
        grpc: None,
        stats_computed: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        published: Arc::new(crate::http::publish::Published::default()),
    };
    let calls = (0..16).map(|_| {
        let s = state.clone();
        tokio::spawn(async move { api_book_stats(State(s)).await.status() })
    });
    for r in futures::future::join_all(calls).await {
        assert_eq!(r.unwrap(), StatusCode::OK);
    }
    assert_eq!(
        state
            .stats_computed
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_carry_their_progress_and_cost() {
    let w = start(2, 8).await;
    let id = identity();
    let a = w.c.register(&id, "a", 2).unwrap();
    while answer(&w.c, &a, 8) > 0 {}
    deviate(&w.c);
    answer(&w.c, &a, 2);
    let v = get_json(w.addr, "/api/v1/programs").await;
    let p: ProgramsV1 = serde_json::from_value(v).unwrap();
    assert_eq!(p, ProgramsV1::new(&w.c.programs(true)));
    let (running, first) = (&p.programs[0], &p.programs[1]);
    assert_eq!((running.id, running.state.as_str()), (2, "running"));
    assert_eq!(running.unit, "positions");
    assert!(
        running.total.is_some_and(|t| running.done <= t),
        "{running:?}"
    );
    // Two answers of 4 ms each so far.
    let cost = running.cost.unwrap();
    assert_eq!(cost.searches, 2);
    assert!((cost.cpu_hours - 0.008 / 3600.0).abs() < 1e-12, "{cost:?}");
    assert!(cost.searches_per_cpu_hour.is_some());
    // The book's first program ended with its cost; the status shows both.
    assert_eq!((first.id, first.state.as_str()), (1, "done"));
    assert!(first.cost.is_some_and(|c| c.searches == 1), "{first:?}");
    let s: StatusV1 = serde_json::from_value(get_json(w.addr, "/api/v1/status").await).unwrap();
    assert_eq!(s.program.as_ref(), Some(running));
    assert_eq!(s.last_program.as_ref(), Some(first));
}

/// The book in `format` as `export` writes it, with the date of `like`'s header.
fn exported(c: &Coordinator, format: bookfarm_book::BookFormat, like: &[u8]) -> Vec<u8> {
    let mut book = c.book_snapshot();
    let published = format.read(like).unwrap().book;
    book.header_mut().date = published.header().date;
    format.write(&book)
}

fn etag(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_book_is_the_export_cached_until_the_book_changes() {
    use bookfarm_book::BookFormat;
    // Off by default.
    let off = start(2, 8).await;
    assert_eq!(request(off.addr, "GET", "/book.dat").await.0, 404);
    let w = start_with(
        2,
        8,
        ServiceConfig {
            publish_book: true,
            ..ServiceConfig::default()
        },
    )
    .await;
    let id = identity();
    let a = w.c.register(&id, "a", 2).unwrap();
    answer(&w.c, &a, 8);
    let (code, head, dat) = request_raw(w.addr, "GET", "/book.dat", "").await;
    assert_eq!(code, 200, "{head}");
    assert!(head.contains("content-disposition: attachment; filename=\"book.dat\""));
    assert_eq!(dat, exported(&w.c, BookFormat::Edax, &dat));
    let tag = etag(&head);
    // Unchanged book: the same file, and 304 for a client that has it.
    let (code, head2, _) = request_raw(
        w.addr,
        "GET",
        "/book.dat",
        &format!("If-None-Match: {tag}\r\n"),
    )
    .await;
    assert_eq!((code, etag(&head2)), (304, tag.clone()));
    // The book grows: a new file, though the client had the old one.
    deviate(&w.c);
    while answer(&w.c, &a, 8) > 0 {}
    let (code, head3, dat3) = request_raw(
        w.addr,
        "GET",
        "/book.dat",
        &format!("If-None-Match: {tag}\r\n"),
    )
    .await;
    assert_eq!(code, 200, "{head3}");
    assert_ne!(etag(&head3), tag);
    assert!(dat3.len() > dat.len());
    assert_eq!(dat3, exported(&w.c, BookFormat::Edax, &dat3));
    // The limit: three downloads at once, then 429 with a time to come back.
    let (code, head4, _) = request_raw(w.addr, "GET", "/book.dat", "").await;
    assert_eq!(code, 429, "{head4}");
    assert!(head4.contains("retry-after: "), "{head4}");
    // Egaroucid's format, from another coordinator (its own limit).
    let w2 = start_with(
        2,
        8,
        ServiceConfig {
            publish_book: true,
            ..ServiceConfig::default()
        },
    )
    .await;
    let a2 = w2.c.register(&id, "a", 2).unwrap();
    deviate(&w2.c);
    while answer(&w2.c, &a2, 8) > 0 {}
    let (code, head, egb) = request_raw(w2.addr, "GET", "/book.egbk3", "").await;
    assert_eq!(code, 200, "{head}");
    assert!(head.contains("filename=\"book.egbk3\""), "{head}");
    assert_eq!(egb, exported(&w2.c, BookFormat::Egbk3, &egb));
}

/// The trust cards join the contributors' trust records with the credential registry: a
/// contributor blocked for invalid results, a credential the operator blocked (its reason), a
/// credential without results yet, and the coordinator's own searches.
#[test]
fn trust_cards_say_who_is_trusted_what_was_caught_and_why_a_contributor_is_blocked() {
    let report = |name: &str, owner: &str, standing, invalid, blocked| CreditReport {
        name: name.into(),
        owner: owner.into(),
        standing,
        streak: 7,
        results: 40,
        nodes: 1000,
        cpu: Duration::from_secs(2),
        invalid,
        replicas: 5,
        blocked,
        time_to_trust: None,
    };
    let cred = |name: &str, trusted, state, reason: &str, live_sessions| CredentialInfo {
        record: crate::store::CredentialRecord {
            name: name.into(),
            owner: format!("{name}-owner"),
            trusted,
            state,
            reason: reason.into(),
            created_unix: 0,
            token_sha256: [0; 32],
        },
        live_sessions,
    };
    let credit = [
        report("(coordinator)", "", Standing::Root, 0, false),
        report("liar", "liar-owner", Standing::Untrusted, 3, true),
        report("rude", "rude-owner", Standing::Earned, 0, false),
        report("op", "op-owner", Standing::Given, 0, false),
    ];
    let creds = [
        cred("liar", false, CredentialState::Blocked, "", 0),
        cred("rude", false, CredentialState::Revoked, "spam", 0),
        cred("op", true, CredentialState::Active, "", 2),
        cred("new", false, CredentialState::Active, "", 1),
    ];
    let health = ValidationV1 {
        invalid: 3,
        blocked_contributors: 2,
        ..ValidationV1::default()
    };
    let t = TrustV1::new(health, &credit, &creds);
    let names: Vec<&str> = t.cards.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["(coordinator)", "liar", "rude", "op", "new"]);
    assert_eq!(t.health.invalid, 3);
    let by = |n: &str| t.cards.iter().find(|c| c.name == n).unwrap();
    let root = by("(coordinator)");
    assert_eq!(
        (
            root.standing.as_str(),
            root.trusted,
            root.blocked,
            root.sessions
        ),
        ("root", None, false, None)
    );
    let liar = by("liar");
    assert_eq!(
        (
            liar.standing.as_str(),
            liar.caught,
            liar.blocked,
            liar.reason.as_str()
        ),
        ("blocked", 3, true, "blocked")
    );
    let rude = by("rude");
    assert_eq!(
        (rude.standing.as_str(), rude.blocked, rude.reason.as_str()),
        ("blocked", true, "revoked: spam")
    );
    let op = by("op");
    assert_eq!(
        (
            op.standing.as_str(),
            op.trusted,
            op.credit,
            op.checks,
            op.streak,
            op.sessions,
            op.blocked,
            op.reason.as_str()
        ),
        ("trusted", Some(true), 40, 5, 7, Some(2), false, "")
    );
    let new = by("new");
    assert_eq!(
        (new.standing.as_str(), new.credit, new.caught, new.sessions),
        ("untrusted", 0, 0, Some(1))
    );
    // A record blocked by the trust rules whose credential is still active says why.
    let t = TrustV1::new(
        t.health,
        &[report("x", "x-owner", Standing::Untrusted, 4, true)],
        &[],
    );
    assert_eq!(t.cards[0].reason, "blocked: 4 invalid results");
    assert_eq!(t.cards[0].standing, "blocked");
}
