//! The web UI at scale: a synthetic book of 1,000,000 positions in a sled store, 1,000
//! registered workers and a deviate expansion under way (its queue filled), served by the real
//! HTTP router on 127.0.0.1. Prints each page's weight (HTML plus the assets it loads) and the
//! latency and size of every JSON API call the pages make (with the gzip size for reference: the
//! server sends them uncompressed).
//!
//! `cargo bench -p bookfarm-coordinator --bench webapi [-- POSITIONS WORKERS CALLS]`
//! (defaults 1,000,000 positions, 1,000 workers, 50 calls per endpoint).

use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::Deviate;
use bookfarm_book::synth::{SynthParams, random_book};
use bookfarm_coordinator::identity::{Identities, IdentityConfig};
use bookfarm_coordinator::service::{Coordinator, ServiceConfig, SystemClock};
use bookfarm_coordinator::store::{Entry, Store};
use bookfarm_engine::search::{SearchOptions, SearchSignature};
use bookfarm_proto::domain::Identity;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of `data` gzipped (default level).
fn gzipped(data: &[u8]) -> usize {
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(data).expect("gzip");
    z.finish().expect("gzip").len()
}

/// One HTTP/1.1 GET; returns the body.
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

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let positions = args.first().copied().unwrap_or(1_000_000);
    let workers = args.get(1).copied().unwrap_or(1_000);
    let calls = args.get(2).copied().unwrap_or(50);

    for page in ["/", "/workers", "/explorer"] {
        let w = bookfarm_coordinator::http::web::page_weight(page).expect("page");
        let html = &bookfarm_coordinator::http::web::PAGES
            .iter()
            .find(|(p, _)| *p == page)
            .expect("page")
            .1;
        let z: usize = gzipped(html.as_bytes())
            + bookfarm_coordinator::http::web::ASSETS
                .iter()
                .filter(|a| html.contains(&format!("/assets/{}", a.name)))
                .map(|a| gzipped(a.body.as_bytes()))
                .sum::<usize>();
        println!("page {page:<10} {w:>7} bytes (HTML and assets), {z:>6} gzipped");
    }

    let t0 = Instant::now();
    let book = random_book(SynthParams {
        seed: 7,
        positions,
        plies: 40,
        level: Some(10),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let entries: Vec<Entry> = book.positions().map(Entry::new).collect();
    store.create(book.header(), &entries).expect("create");
    drop(entries);
    let cfg = ServiceConfig::default();
    let c =
        Coordinator::open(store, dir.path(), cfg, Arc::new(SystemClock::default())).expect("open");
    println!(
        "book: {} positions in {:.1}s (synthesis, store, open)",
        c.status().positions,
        t0.elapsed().as_secs_f64()
    );
    let t1 = Instant::now();
    let queued = c
        .start(Program::new(Operation::Deviate {
            params: Deviate::new(2, 4),
        }))
        .expect("expansion")
        .jobs;
    println!(
        "deviate 2 4 queued {queued} searches in {:.1}s",
        t1.elapsed().as_secs_f64()
    );
    let id = Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "00".into(),
        search_signature: SearchSignature::new(&SearchOptions::default(), "00").to_string(),
    };
    let ws: Vec<_> = (0..workers)
        .map(|i| {
            c.register_with(
                &id,
                &format!("worker-{i:04}"),
                4,
                Some(&format!("owner-{}", i % 97)),
                i % 3 == 0,
            )
            .expect("register")
        })
        .collect();
    // Half the workers hold jobs, so that the in-flight look-ups have something to scan.
    for w in ws.iter().step_by(2) {
        c.lease(&id, w, 4).expect("lease");
    }
    let t_ms = bookfarm_coordinator::http::unix_ms();
    for i in 0..900 {
        c.sample_history(t_ms - 900_000 + i * 1000)
            .expect("history");
    }
    let s = c.status();
    println!(
        "{} workers, {} threads, {} queued, {} in flight",
        s.workers.len(),
        s.threads,
        s.queued,
        s.in_flight
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
        // What the pages poll: the overview's status every second and its newest history
        // points every two; the workers page's tables; the explorer's position and statistics
        // (recomputed at most every 30 s: the first call pays the scan).
        let recent = format!("/api/v1/history?tier=fine&since={}", t_ms - 2_000);
        for path in [
            "/api/v1/status",
            "/api/v1/history?tier=fine",
            recent.as_str(),
            "/api/v1/workers",
            "/api/v1/contributors",
            "/api/v1/book/position?moves=f5d6c3",
            "/api/v1/book/stats",
        ] {
            let mut times = Vec::with_capacity(calls);
            let mut body = Vec::new();
            for _ in 0..calls {
                let t = Instant::now();
                body = get(addr, path).await;
                times.push(t.elapsed());
            }
            let (bytes, z) = (body.len(), gzipped(&body));
            times.sort();
            let q = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            println!(
                "{path:<40} median {:>7.2} ms  p90 {:>7.2} ms  max {:>7.2} ms  {bytes:>8} bytes ({z} gzipped)",
                ms(q(0.5)),
                ms(q(0.9)),
                ms(q(1.0))
            );
        }
    });
}
