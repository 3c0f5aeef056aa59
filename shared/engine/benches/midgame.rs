//! Fixed-depth midgame benchmark on the 20 positions of `../shared/golden/edax-fixed-depth.txt`
//! (eval-seed1.dat, no selectivity, single thread), side by side with Edax 4.6.
//!
//! Run: `nice -n 10 cargo bench -p bookfarm-engine --bench midgame -- [MAX_DEPTH]` (default 8).
//! For each depth it prints our total nodes and thread CPU seconds next to Edax's node total for
//! the same positions (the `edax_nodes` column of the golden file), and checks every score
//! against Edax's. Edax's own speed on this machine class is in `edax-timings.txt` (≈ 20–22 M
//! nodes/s at depth 8). Node counts are not comparable one to one (the engines count
//! differently); CPU time is. Not a timed test.

#![allow(clippy::print_stdout)]

use bookfarm_engine::Board;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::Searcher;
use bookfarm_engine::testdata::shared_dir_or_skip;
use bookfarm_engine::testutil::thread_cpu_seconds;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

fn main() {
    let Some(dir) = shared_dir_or_skip() else {
        return;
    };
    let max_depth: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(8);
    let eval = Arc::new(Eval::load(dir.join("golden/eval-seed1.dat")).expect("eval-seed1.dat"));
    let text = std::fs::read_to_string(dir.join("golden/edax-fixed-depth.txt")).expect("golden");
    // (board, depth, edax score, edax nodes)
    let lines: Vec<(Board, u32, i32, u64)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                Board::from_cells(f[1], f[2] == "X").expect("board"),
                f[4].parse().expect("depth"),
                f[5].parse().expect("score"),
                f[7].parse().expect("nodes"),
            )
        })
        .collect();
    let mut searcher = Searcher::new(eval);
    let abort = AtomicBool::new(false);
    println!(
        "depth\tpositions\tnodes\tedax_nodes\tcpu_s\twall_s\tnodes_per_cpu_s\tscore_mismatches"
    );
    for depth in 0..=max_depth {
        let set: Vec<&(Board, u32, i32, u64)> = lines.iter().filter(|l| l.1 == depth).collect();
        let edax_nodes: u64 = set.iter().map(|l| l.3).sum();
        let (cpu0, t0) = (thread_cpu_seconds(), Instant::now());
        let mut nodes = 0u64;
        let mut mismatches = 0;
        for (board, d, score, _) in &set {
            let r = searcher.search_depth(board, *d, 5, 0, &abort);
            nodes += r.nodes;
            if r.score != *score {
                mismatches += 1;
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let cpu = match (cpu0, thread_cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => wall,
        };
        // Below 10 ms of CPU the rate is meaningless.
        let rate = if cpu >= 0.01 {
            format!("{:.0}", nodes as f64 / cpu)
        } else {
            "-".to_string()
        };
        println!(
            "{depth}\t{}\t{nodes}\t{edax_nodes}\t{cpu:.3}\t{wall:.3}\t{rate}\t{mismatches}",
            set.len()
        );
    }
}
