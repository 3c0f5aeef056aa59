//! The explorer's API on a big book: a synthetic book (`book synth`'s, default 10,000,000
//! positions over 40 plies) in a store, opened by the service and served by the real HTTP router
//! on 127.0.0.1, with nothing growing. Prints the latency percentiles of each request class.
//!
//! The request mix: `LINES` random book lines (from the start, a random link at each ply, to a
//! depth drawn uniformly from 0..=30, ending early where the links end), each asked as
//! * `position, cold`: `/api/v1/book/position?moves=LINE` right after the explorer's memo was
//!   dropped (every grade and umigame number computed afresh, within the per-request work
//!   bound: near the root of a big book they come back pending or as "≥ N");
//! * `position, warm`: the same request again (the memo kept from the first);
//! * `position, loss 2, cold`: with `umigame_loss=2`, memo dropped first;
//! * `game`: `/api/v1/book/game?moves=LINE` (the line as a pasted game).
//!
//! One client, sequential requests (what one explorer user does); the machine's other load shows
//! in the tails.
//!
//! `cargo bench -p bookfarm-coordinator --bench explorer [-- POSITIONS LINES]`

use bookfarm_book::MemBook;
use bookfarm_book::synth::synth_book;
use bookfarm_coordinator::identity::{Identities, IdentityConfig};
use bookfarm_coordinator::service::{Coordinator, ServiceConfig, SystemClock};
use bookfarm_coordinator::store::Store;
use bookfarm_engine::{Board, Move};
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One HTTP/1.1 GET; returns the body (panics on anything but 200).
async fn get(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{path}: {}",
        &text[..text.len().min(200)]
    );
    text.split_once("\r\n\r\n")
        .map_or_else(Vec::new, |(_, b)| b.as_bytes().to_vec())
}

/// A random line of book moves from the start (a legal move whose child is in the book, each
/// equally likely), `depth` plies at most.
fn random_line(book: &MemBook, rng: &mut impl Rng, depth: usize) -> String {
    let mut board = Board::start();
    let mut line = String::new();
    for _ in 0..depth {
        let moves: Vec<Move> = if board.must_pass() {
            vec![Move::Pass]
        } else {
            board.legal_squares().map(Move::Square).collect()
        };
        let in_book: Vec<Move> = moves
            .into_iter()
            .filter(|&m| book.probe(&board.next_unchecked(m)).is_some())
            .collect();
        if in_book.is_empty() {
            break;
        }
        let mv = in_book[rng.random_range(0..in_book.len())];
        line.push_str(&match mv {
            Move::Pass => "pa".to_string(),
            m => m.to_string().to_ascii_lowercase(),
        });
        board = board.next_unchecked(mv);
    }
    line
}

fn percentiles(name: &str, mut times: Vec<Duration>, note: &str) {
    times.sort();
    let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<26} n {:>5}  p50 {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  {note}",
        times.len(),
        ms(q(0.5)),
        ms(q(0.9)),
        ms(q(0.99)),
        ms(q(1.0))
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let positions = args.first().copied().unwrap_or(10_000_000);
    let lines = args.get(1).copied().unwrap_or(1_000);

    let t0 = Instant::now();
    let book = synth_book(7, positions, 40);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    store.create_book(&book).expect("create");
    let c = Coordinator::open(
        store,
        dir.path(),
        ServiceConfig::default(),
        Arc::new(SystemClock::default()),
    )
    .expect("open");
    println!(
        "book: {} positions in {:.1}s (synthesis, store, open)",
        c.status().positions,
        t0.elapsed().as_secs_f64()
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mix: Vec<String> = (0..lines)
        .map(|_| {
            let depth = rng.random_range(0..=30);
            random_line(&book, &mut rng, depth)
        })
        .collect();
    drop(book);
    let plies: usize = mix.iter().map(|l| l.len() / 2).sum();
    println!(
        "{} lines, mean depth {:.1} plies",
        mix.len(),
        plies as f64 / mix.len() as f64
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let ids = Identities::open(IdentityConfig::default(), None).expect("identities");
        let app = bookfarm_coordinator::http::router(c.clone(), ids);
        tokio::spawn(async move { axum::serve(l, app).await });

        let (mut cold, mut warm, mut loss, mut game) = (vec![], vec![], vec![], vec![]);
        let (mut inexact_cold, mut inexact_warm) = (0, 0);
        let inexact = |body: &[u8]| {
            let v: serde_json::Value = serde_json::from_slice(body).expect("json");
            v["grade_pending"] == true
                || v["umigame"]["black_exact"] == false
                || v["umigame"]["white_exact"] == false
        };
        for line in &mix {
            let path = format!("/api/v1/book/position?moves={line}");
            c.drop_explorer_memo();
            let t = Instant::now();
            let body = get(addr, &path).await;
            cold.push(t.elapsed());
            inexact_cold += usize::from(inexact(&body));
            let t = Instant::now();
            let body = get(addr, &path).await;
            warm.push(t.elapsed());
            inexact_warm += usize::from(inexact(&body));
            c.drop_explorer_memo();
            let t = Instant::now();
            get(addr, &format!("{path}&umigame_loss=2")).await;
            loss.push(t.elapsed());
            let t = Instant::now();
            get(addr, &format!("/api/v1/book/game?moves={line}")).await;
            game.push(t.elapsed());
        }
        let n = mix.len();
        percentiles(
            "position, cold",
            cold,
            &format!("({inexact_cold} of {n} with a pending grade or a '>= N')"),
        );
        percentiles(
            "position, warm",
            warm,
            &format!("({inexact_warm} of {n} still pending)"),
        );
        percentiles("position, loss 2, cold", loss, "");
        percentiles("game", game, "");
    });
}
