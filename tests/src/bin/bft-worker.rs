//! Test worker process: the library pull loop with the real engine (the code path of
//! `bookfarm-worker run`). Optionally appends every acknowledged job id to a log file, and
//! optionally lies (`--lie`, see [`Lie`]): a plausible wrong result that passes every check the
//! coordinator can make without searching (legal move, score range and parity, depth).

use anyhow::Context;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_proto::domain::Ack;
use bookfarm_runner::exec::{LeafSearcher, SearcherFactory};
use bookfarm_worker::config::AckHook;
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    coordinator: String,
    #[arg(long)]
    eval: PathBuf,
    #[arg(long, default_value = "w")]
    name: String,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long)]
    ack_log: Option<PathBuf>,
    #[arg(long, default_value = "")]
    token: String,
    /// Lie: `always`, `rate:P` (P % of the requests, the same ones for every liar), `subtle:P`
    /// (score moved by 2 on P % of the requests), `sleeper:N` (honest for N results, then
    /// always).
    #[arg(long)]
    lie: Option<String>,
    /// Append one line per lie told: the request's board (player, opponent, hex), the true and
    /// the told score, the request's excluded moves (hex) and level, and the move's code.
    #[arg(long)]
    lie_log: Option<PathBuf>,
}

/// How a lying worker lies.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// Sign flipped and moved by 2 (legal move kept), on P % of the requests.
    Flip(u64),
    /// Moved by 2, on P % of the requests.
    Subtle(u64),
    /// Honest for N results, then `Flip(100)`.
    Sleeper(u64),
}

impl Lie {
    fn parse(s: &str) -> anyhow::Result<Lie> {
        let (kind, n) = s.split_once(':').unwrap_or((s, "100"));
        let n: u64 = n.parse().context("--lie: a number after ':'")?;
        Ok(match kind {
            "always" => Lie::Flip(100),
            "rate" => Lie::Flip(n),
            "subtle" => Lie::Subtle(n),
            "sleeper" => Lie::Sleeper(n),
            _ => anyhow::bail!("--lie: unknown mode {kind:?}"),
        })
    }
}

/// Which requests a liar lies on: a hash of the request, so that colluding liars tell the same
/// lie on the same requests.
fn percent(req: &LeafRequest) -> u64 {
    let h = req
        .board
        .player
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(21)
        ^ req.board.opponent.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ req.excluded.rotate_left(7)
        ^ u64::from(req.level);
    (h ^ (h >> 29)) % 100
}

/// The engine's result with the lie applied when the rule says so.
struct Liar {
    inner: Box<dyn LeafSearcher>,
    lie: Lie,
    /// Results given so far by this process (the sleeper's clock).
    given: Arc<AtomicU64>,
    log: Option<Arc<Mutex<std::fs::File>>>,
}

impl LeafSearcher for Liar {
    fn search(&mut self, req: &LeafRequest, abort: &AtomicBool) -> LeafResult {
        let mut r = self.inner.search(req, abort);
        let n = self.given.fetch_add(1, Ordering::SeqCst);
        let lie = match self.lie {
            Lie::Flip(p) | Lie::Subtle(p) => percent(req) < p,
            Lie::Sleeper(honest) => n >= honest,
        };
        if !lie || abort.load(Ordering::SeqCst) {
            return r;
        }
        let told = match self.lie {
            Lie::Subtle(_) => {
                if r.score <= 62 {
                    r.score + 2
                } else {
                    r.score - 2
                }
            }
            _ => {
                let flipped = (2 - r.score).clamp(-64, 64);
                if flipped == r.score {
                    r.score - 2
                } else {
                    flipped
                }
            }
        };
        if let Some(f) = &self.log {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            let _ = f.write_all(
                format!(
                    "{:016x} {:016x} {} {} {:016x} {} {}\n",
                    req.board.player,
                    req.board.opponent,
                    r.score,
                    told,
                    req.excluded,
                    req.level,
                    r.mv.code()
                )
                .as_bytes(),
            );
        }
        r.score = told;
        r
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    let bytes = std::fs::read(&a.eval).context("reading eval")?;
    let eval = Arc::new(Eval::from_bytes(&bytes)?);
    let on_ack = match &a.ack_log {
        Some(p) => {
            let f = Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            );
            Some(AckHook(Arc::new(move |id, ack| {
                if ack == Ack::Accepted {
                    let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                    // One write per line, so a kill leaves whole lines only.
                    let _ = f.write_all(format!("{id}\n").as_bytes());
                }
            })))
        }
        None => None,
    };
    let cfg = bookfarm_worker::WorkerConfig {
        coordinator: a.coordinator,
        threads: a.threads,
        name: a.name,
        eval_hash: bookfarm_proto::eval_fingerprint(&bytes),
        search_signature: bookfarm_runner::signature(
            &eval,
            &bookfarm_proto::eval_fingerprint(&bytes),
        ),
        token: a.token,
        max_backoff: std::time::Duration::from_millis(500),
        on_ack,
        ..bookfarm_worker::WorkerConfig::default()
    };
    let honest = bookfarm_runner::exec::engine_factory(eval);
    let make: SearcherFactory = match &a.lie {
        None => honest,
        Some(mode) => {
            let lie = Lie::parse(mode)?;
            let given = Arc::new(AtomicU64::new(0));
            let log = match &a.lie_log {
                Some(p) => Some(Arc::new(Mutex::new(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)?,
                ))),
                None => None,
            };
            Arc::new(move || -> Box<dyn LeafSearcher> {
                Box::new(Liar {
                    inner: honest(),
                    lie,
                    given: given.clone(),
                    log: log.clone(),
                })
            })
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let stop = async {
            if let Ok(mut t) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                t.recv().await;
            }
        };
        bookfarm_worker::run(cfg, make, stop).await?;
        Ok(())
    })
}
