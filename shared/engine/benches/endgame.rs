//! Exact endgame benchmark on the FFO suite, side by side with Edax 4.6 (single thread).
//!
//! Run: `nice -n 10 cargo bench -p bookfarm-engine --bench endgame -- [FIRST-LAST] [--tt-bits N]`
//! (default `20-39`; `40-49` is the long classic set; N = log2 of the table's buckets), or
//! `-- flippy` to solve and check all 2,478 flippy endgame positions (13–22 empties). Prints one line per position (empties, score,
//! expected score, best move, nodes, CPU seconds) and totals, with Edax's published node counts
//! and CPU times from `../shared/golden/edax-timings.txt` for comparison. Not a timed test.

#![allow(clippy::print_stdout)]

use bookfarm_engine::endgame::{self, EndgameContext};
use bookfarm_engine::formats::obf::{parse_flippy, parse_obf};
use bookfarm_engine::testdata::shared_dir_or_skip;
use bookfarm_engine::testutil::thread_cpu_seconds;
use bookfarm_engine::{Board, Move, Square};
use std::path::Path;
use std::time::Instant;

/// (board, best score, best moves) of every line of an OBF file.
fn read_obf(path: &Path) -> Vec<(Board, i32, Vec<Square>)> {
    let text = std::fs::read_to_string(path).expect("read obf");
    parse_obf(&text)
        .expect("valid obf")
        .into_iter()
        .map(|p| {
            let best = p.best_score.expect("best score");
            let moves = p
                .best_moves()
                .into_iter()
                .filter_map(|m| match m {
                    Move::Square(s) => Some(s),
                    _ => None,
                })
                .collect();
            (p.board, best, moves)
        })
        .collect()
}

/// Solve every position of the flippy endgame sets (`flippy` argument) and check the scores
/// (raw disc differences in a few lines: see the integration test).
fn flippy(dir: &Path, ctx: &mut EndgameContext) {
    println!("set           positions exact raw-diff wrong        nodes    cpu_s");
    for file in [
        "eg_13_14.txt",
        "eg_15_16.txt",
        "eg_17_18.txt",
        "eg_19_20.txt",
        "eg_21_22.txt",
    ] {
        let text = std::fs::read_to_string(dir.join("data/ffo/flippy_endgame").join(file))
            .expect("read flippy set");
        let (mut n, mut exact, mut raw, mut wrong) = (0, 0, 0, 0);
        ctx.nodes = 0;
        let c0 = thread_cpu_seconds().unwrap_or(0.0);
        for fp in parse_flippy(&text).expect("valid flippy list") {
            let (board, s) = (fp.board, fp.score_for_mover());
            let v = endgame::solve(&board, -64, 64, ctx);
            n += 1;
            if v == s {
                exact += 1;
            } else if v.signum() == s.signum() && v.abs() > s.abs() {
                raw += 1;
            } else {
                wrong += 1;
                println!("WRONG {file}: {board} {s} -> {v}");
            }
        }
        let cpu = thread_cpu_seconds().unwrap_or(0.0) - c0;
        println!(
            "{file:<13} {n:>9} {exact:>5} {raw:>8} {wrong:>5} {:>12} {cpu:>8.2}",
            ctx.nodes
        );
    }
}

fn main() {
    let Some(dir) = shared_dir_or_skip() else {
        return;
    };
    if std::env::args().any(|a| a == "flippy") {
        let mut ctx = EndgameContext::new();
        flippy(&dir, &mut ctx);
        return;
    }
    let range = std::env::args()
        .skip(1)
        .find(|a| a.contains('-') && !a.starts_with('-'))
        .unwrap_or_else(|| "20-39".to_string());
    let (first, last) = range
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
        .expect("range FIRST-LAST");
    let mut problems = Vec::new();
    for (file, base) in [
        ("fforum-1-19.obf", 1),
        ("fforum-20-39.obf", 20),
        ("fforum-40-59.obf", 40),
        ("fforum-60-79.obf", 60),
    ] {
        for (i, p) in read_obf(&dir.join("data/ffo").join(file))
            .into_iter()
            .enumerate()
        {
            problems.push((base + i, p));
        }
    }
    // `--tt-bits N`: transposition table of 2^N buckets (default: the library default).
    let args: Vec<String> = std::env::args().collect();
    let tt_bits = args
        .iter()
        .position(|a| a == "--tt-bits")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(endgame::DEFAULT_TT_BITS);
    let mut ctx = EndgameContext::with_tt_bits(tt_bits);
    println!("#   empties score expected move ok        nodes    cpu_s   Mn/s");
    let (mut tn, mut tc, mut tw) = (0u64, 0f64, 0f64);
    let mut all_ok = true;
    for (no, (board, best, best_moves)) in problems {
        if no < first || no > last {
            continue;
        }
        ctx.clear();
        ctx.nodes = 0;
        let c0 = thread_cpu_seconds();
        let w0 = Instant::now();
        let (mv, score) = endgame::solve_root(&board, 0, &mut ctx);
        let wall = w0.elapsed().as_secs_f64();
        let cpu = match (c0, thread_cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => wall,
        };
        let ok = score == best && matches!(mv, Move::Square(s) if best_moves.contains(&s));
        all_ok &= ok;
        println!(
            "{no:<3} {:>7} {score:>+5} {best:>+8} {:>4} {:>2} {:>12} {cpu:>8.3} {:>6.1}",
            board.empties(),
            mv.to_lower_text(),
            if ok { "ok" } else { "KO" },
            ctx.nodes,
            ctx.nodes as f64 / cpu.max(1e-9) / 1e6
        );
        tn += ctx.nodes;
        tc += cpu;
        tw += wall;
    }
    println!(
        "total #{first}-#{last}: nodes {tn} cpu {tc:.2} s wall {tw:.2} s ({:.1} Mn/s){}",
        tn as f64 / tc.max(1e-9) / 1e6,
        if all_ok { "" } else { "  SOME RESULTS WRONG" }
    );
    if (first, last) == (20, 39) {
        println!(
            "edax 4.6 #20-#39: nodes 1227261336 cpu 30.74 s (quiet run); ratio cpu {:.2}x",
            tc / 30.74
        );
    } else if (first, last) == (40, 49) {
        println!(
            "edax 4.6 #40-#49: nodes 16310520579 cpu 448.4 s; ratio cpu {:.2}x",
            tc / 448.4
        );
    }
}
