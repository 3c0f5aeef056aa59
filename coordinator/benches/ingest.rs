//! Coordinator ingest capacity: many simulated workers over real gRPC (127.0.0.1) returning
//! instant, legal results; every result is validated, stored with its provenance and made
//! durable (sled flush, group commit) before it is acknowledged, then applied to the book by the
//! growth runner (Edax's serial deviate, the whole pass leased ahead).
//!
//! `cargo bench -p bookfarm-coordinator --bench ingest [-- WORKERS SLOTS SECONDS [UNTRUSTED]]`
//! (defaults 64 workers, 16 jobs per call, 20 s; a worker registers SLOTS threads and may hold
//! that many jobs, whatever the default `max_worker_threads`). Prints results/s and the latency
//! of the `LeaseJobs` calls (results of the previous call in, new jobs out) that returned jobs,
//! as the simulated workers saw it: p50, p99 and the maximum.
//!
//! Without UNTRUSTED the workers are anonymous loopback workers (trusted: every result is
//! applied at once). With it, every worker has a credential of its own owner: the first
//! UNTRUSTED are untrusted (each result is held until a trusted replica, or once they earned
//! trust another owner's earned replica, agrees: the deviate window (129, 65) makes every
//! request critical), the others are added with `--trusted`. The run then also reports what
//! validation did: results held and validated, and the replicas' share of all results (the
//! extra compute).

use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::identity::IdentityConfig;
use bookfarm_coordinator::server::{self, ServeOptions, ServerLimits};
use bookfarm_coordinator::service::{ServiceConfig, new_book};
use bookfarm_coordinator::store::Store;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::domain::Job;
use bookfarm_proto::pb;
use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A legal, deterministic instant answer: the lowest open square, scored by a hash of the child.
fn answer(job: &pb::Job) -> pb::LeafResult {
    let j = Job::try_from(job.clone()).expect("valid job");
    let b: Board = j.board;
    let open = b.moves() & !j.excluded;
    let (mv, score) = if b.is_game_over() {
        (Move::None, b.final_score())
    } else if b.moves() == 0 {
        (Move::Pass, 0)
    } else if let Some(sq) = BitIter(open).next() {
        let c = canonical(&b.play(sq).expect("legal")).0;
        let h = c.player.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c.opponent.rotate_left(17);
        (Move::Square(sq), ((h % 9) as i32 - 4) * 2)
    } else {
        (Move::None, 0)
    };
    // What the engine reports: the level table's depth, or a finished game's empties.
    let (depth, selectivity) = if b.is_game_over() {
        (b.empties(), 5)
    } else {
        bookfarm_engine::level::level_params(j.level, b.empties())
    };
    pb::LeafResult {
        job_id: job.job_id.clone(),
        r#move: u32::from(mv.code()),
        score,
        depth,
        selectivity: u32::from(selectivity),
        exact: b.is_game_over(),
        nodes: 1,
        elapsed_us: 1,
    }
}

fn ident() -> pb::WorkerIdentity {
    pb::WorkerIdentity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: String::new(),
        search_signature: bookfarm_engine::search::SearchSignature::new(
            &bookfarm_engine::search::SearchOptions::default(),
            "",
        )
        .to_string(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let n_workers: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(64);
    let slots: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16);
    let seconds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let untrusted: Option<usize> = args.get(3).and_then(|s| s.parse().ok());

    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let (h, e) = new_book(1, 24);
    store.create(&h, &e).expect("create");
    drop(store);
    // Every simulated worker may hold its SLOTS jobs (the default caps a registration at 64
    // threads, which would make 16 x 128 a 16 x 66 run).
    let cfg = ServiceConfig {
        max_worker_threads: slots.max(ServiceConfig::default().max_worker_threads),
        ..ServiceConfig::default()
    };
    let ids = IdentityConfig {
        anonymous_workers: untrusted.is_none(),
        registrations_per_minute: 1_000_000,
        registration_burst: 1_000_000,
        ..IdentityConfig::default()
    };
    let (c, ids) = server::open_with_identities(dir.path(), cfg, ids).expect("open");
    // One credential per simulated worker, each of its own owner.
    let tokens: Vec<String> = (0..n_workers)
        .map(|i| match untrusted {
            None => String::new(),
            Some(u) => {
                let name = format!("sim-{i}");
                ids.add(&name, Some(&name), i >= u).expect("credential").0
            }
        })
        .collect();
    // A wide deviation window: the whole tree up to the book depth, so the run never starves.
    c.start(Program::new(Operation::Deviate {
        params: Deviate::new(129, 65),
    }))
    .expect("start");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let accepted = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));
    // Calls that returned no job, and the time their workers then slept (`retry_after`).
    let empty = Arc::new(AtomicU64::new(0));
    let slept_ms = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::<u32>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let t_run = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let opts = ServeOptions {
            tls: None,
            limits: ServerLimits {
                max_concurrent_streams: 4096,
                ..ServerLimits::default()
            },
            eval: None,
        };
        let srv = tokio::spawn(server::serve(
            bookfarm_coordinator::live::Live::fixed(c.clone(), ids),
            l,
            None,
            opts, async {
            let _ = rx.await;
        }));
        // A few connections shared by the simulated workers (HTTP/2 multiplexing).
        let mut channels = Vec::new();
        for _ in 0..4 {
            let ch = loop {
                match tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                    .expect("url")
                    .tcp_nodelay(true)
                    .connect()
                    .await
                {
                    Ok(ch) => break ch,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            channels.push(ch);
        }
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..n_workers {
            let bearer = Bearer::new(&tokens[i]).expect("token");
            let mut w = WorkerServiceClient::with_interceptor(
                channels[i % channels.len()].clone(),
                bearer,
            );
            let (accepted, calls, stop) = (accepted.clone(), calls.clone(), stop.clone());
            let (empty, slept_ms) = (empty.clone(), slept_ms.clone());
            let latencies = latencies.clone();
            tasks.push(tokio::spawn(async move {
                let id = w
                    .register_worker(pb::RegisterWorkerRequest {
                        identity: Some(ident()),
                        name: format!("sim-{i}"),
                        threads: slots,
                        ..Default::default()
                    })
                    .await
                    .expect("register")
                    .into_inner()
                    .worker_id;
                let mut results: Vec<pb::LeafResult> = Vec::new();
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let r = w
                        .lease_jobs(pb::LeaseJobsRequest {
                            identity: Some(ident()),
                            worker_id: id.clone(),
                            free_slots: slots,
                            results: std::mem::take(&mut results),
                            ..Default::default()
                        })
                        .await
                        .expect("lease")
                        .into_inner();
                    calls.fetch_add(1, Ordering::Relaxed);
                    if !r.jobs.is_empty() {
                        mine.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
                    }
                    let ok = r
                        .acks
                        .iter()
                        .filter(|a| a.status == pb::AckStatus::Accepted as i32)
                        .count();
                    accepted.fetch_add(ok as u64, Ordering::Relaxed);
                    if r.jobs.is_empty() {
                        // What a worker does (`bookfarm_runner`: at least 10 ms).
                        let ms = u64::from(r.retry_after_ms.max(10));
                        empty.fetch_add(1, Ordering::Relaxed);
                        slept_ms.fetch_add(ms, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    results = r.jobs.iter().map(answer).collect();
                }
                latencies.lock().expect("latencies").extend(mine);
            }));
        }
        let mut last = (Instant::now(), 0u64);
        while t0.elapsed() < Duration::from_secs(seconds) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let a = accepted.load(Ordering::Relaxed);
            let now = Instant::now();
            let s = c.status();
            println!(
                "  {:>5.1}s  {:>9} results  {:>8.0}/s (last 2 s)  {:>8} positions  queued {}  in flight {}",
                t0.elapsed().as_secs_f64(),
                a,
                (a - last.1) as f64 / (now - last.0).as_secs_f64(),
                s.positions,
                s.queued,
                s.in_flight
            );
            last = (now, a);
            if s.state.as_str() == "done" {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let t = t0.elapsed();
        for t in tasks {
            let _ = t.await;
        }
        let _ = tx.send(());
        srv.await.expect("server task").expect("server");
        t
    });
    // A clean stop writes the last checkpoint: every position the run created is then stored
    // (and counted in the process's CPU time), whatever the checkpoint interval.
    let t_flush = Instant::now();
    c.flush().expect("flush");
    let t_flush = t_flush.elapsed();
    let a = accepted.load(Ordering::Relaxed);
    let s = c.status();
    println!("final checkpoint and flush: {:.2} s", t_flush.as_secs_f64());
    println!(
        "ingest: {n_workers} simulated workers x {slots} slots over gRPC: {a} results in {:.1} s = {:.0} results/s ({:.0} RPCs/s), book {} positions",
        t_run.as_secs_f64(),
        a as f64 / t_run.as_secs_f64(),
        calls.load(Ordering::Relaxed) as f64 / t_run.as_secs_f64(),
        s.positions
    );
    println!(
        "empty replies: {} of {} calls; their workers slept {:.1} s in all ({:.0} % of the workers' time)",
        empty.load(Ordering::Relaxed),
        calls.load(Ordering::Relaxed),
        slept_ms.load(Ordering::Relaxed) as f64 / 1000.0,
        100.0 * slept_ms.load(Ordering::Relaxed) as f64
            / 1000.0
            / (t_run.as_secs_f64() * n_workers as f64)
    );
    let heap = c.book_heap_bytes();
    println!(
        "in-memory book: {heap} heap bytes = {:.0} bytes/position",
        heap as f64 / s.positions.max(1) as f64
    );
    println!("result store: {} results", c.stored_results());
    if untrusted.is_some() {
        let v = s.validation;
        println!(
            "validation: {} results applied at once, {} held, {} validated, {} invalid; replicas beyond the first: {} = {:.1} % extra compute",
            v.applied_at_once,
            v.held,
            v.validated,
            v.invalid,
            v.replica_nodes,
            100.0 * v.replica_nodes as f64 / v.used_nodes.max(1) as f64
        );
    }
    let mut l = std::mem::take(&mut *latencies.lock().expect("latencies"));
    l.sort_unstable();
    if !l.is_empty() {
        let q = |p: f64| f64::from(l[((l.len() - 1) as f64 * p) as usize]) / 1000.0;
        println!(
            "LeaseJobs latency (calls that returned jobs, {} calls): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            l.len(),
            q(0.5),
            q(0.99),
            q(1.0)
        );
    }
}
