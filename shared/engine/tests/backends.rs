//! Identical results on every CPU (issue 19): volunteers run all kinds of machines and their leaf
//! searches are compared exactly, so every flip/mobility backend (reference, portable, BMI2, AVX2,
//! AVX-512, as far as this CPU has them), each with the exact solver's baseline and x86-64-v3
//! code generation, must give the same move, score, depth, selectivity and node count.
//!
//! The backend choice is process-wide ([`flip::set_active`]), which is why this test lives in its
//! own test binary: no other test runs in this process while it switches backends.

use bookfarm_engine::eval::Eval;
use bookfarm_engine::flip::{self, Backend, Kernels};
use bookfarm_engine::formats::obf::parse_obf;
use bookfarm_engine::level::level_params;
use bookfarm_engine::search::{LeafResult, SearchOptions, Searcher};
use bookfarm_engine::testdata::shared_dir_or_skip;
use bookfarm_engine::testutil::{XorShift, random_board};
use bookfarm_engine::{Board, Move};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The boards of an OBF file under `../shared`.
fn obf_boards(dir: &Path, rel: &str) -> Vec<Board> {
    let text = std::fs::read_to_string(dir.join(rel)).expect("obf readable");
    parse_obf(&text)
        .expect("valid obf")
        .into_iter()
        .map(|p| p.board)
        .collect()
}

/// Edax's threshold rather than the default, so that a cheap selective endgame runs the midgame
/// routines.
const MIDGAME_TO_ENDGAME: u32 = 15;

/// One search: a board, a depth and a selectivity index.
type Job = (Board, u32, u8);

/// Searches covering every search path: book positions at level 12 (iterative deepening,
/// aspiration, probcut), a midgame search whose PV nodes are solved exactly (PV extension), a
/// selective endgame (midgame routines above the exact solver), exact solves through both solver
/// contexts, and a root that must pass (at depths 0 and 4).
fn jobs(dir: &Path) -> Vec<Job> {
    let level = |board: Board, level: u8| -> Job {
        let (depth, sel) = level_params(level, board.empties());
        (board, depth, sel)
    };
    let book = obf_boards(dir, "golden/levels-positions.obf");
    // The two cheapest of the 24 at level 12 (Edax: 1.8 M and 1.7 M nodes).
    let mut out = vec![level(book[1], 12), level(book[17], 12)];
    let mut rng = XorShift(0x0019_bac0_e11d);
    let mut at = |empties: u32| loop {
        let b = random_board(&mut rng, 60 - empties);
        if b.empties() == empties && b.moves() != 0 {
            break b;
        }
    };
    // Depth 11 at 20 empties with probcut: PV nodes with at most 10 empties are solved.
    out.push((at(20), 11, 0));
    // Depth = empties at 73 %: probcut in the midgame routines down to the exact solver (below
    // `MIDGAME_TO_ENDGAME` empties).
    out.push((at(MIDGAME_TO_ENDGAME + 3), MIDGAME_TO_ENDGAME + 3, 0));
    // Exact solves: 19 empties (the large solver context) and FFO #1, 14 empties (the small one).
    out.push(level(at(19), 60));
    out.push(level(obf_boards(dir, "data/ffo/fforum-1-19.obf")[0], 60));
    let mut rng = XorShift(0x0019_0a55);
    let pass_root = loop {
        let b = random_board(&mut rng, 30);
        if b.must_pass() {
            break b;
        }
    };
    out.push((pass_root, 0, 5));
    out.push((pass_root, 4, 5));
    out
}

/// One kernel configuration per available backend (flips and mobility from the same backend), each
/// with the exact solver's baseline and (where the CPU has it) x86-64-v3 code generation.
fn configurations() -> Vec<(Kernels, bool)> {
    let mut out = Vec::new();
    for b in Backend::available() {
        let k = Kernels::new(b, b).expect("available backend");
        out.push((k, true));
        out.push((k, false));
    }
    out
}

/// The results that must not depend on the CPU (wall time excluded).
fn key(r: &LeafResult) -> (Move, i32, u32, u8, bool, u64) {
    (r.mv, r.score, r.depth, r.selectivity, r.exact, r.nodes)
}

/// What must be identical across backends: move, score, depth, selectivity, exactness, nodes.
type Outcome = (Move, i32, u32, u8, bool, u64);

#[test]
fn every_backend_gives_identical_leaf_searches() {
    let Some(dir) = shared_dir_or_skip() else {
        return;
    };
    let eval = Arc::new(Eval::load(dir.join("golden/eval-seed1.dat")).expect("eval-seed1.dat"));
    let jobs = jobs(&dir);
    let abort = AtomicBool::new(false);
    let saved = flip::active();
    let mut reference: Option<Vec<Outcome>> = None;
    let configs = configurations();
    assert!(configs.len() >= 4, "at least reference and portable, twice");
    for (kernels, portable_codegen) in configs {
        flip::set_active(kernels);
        let mut searcher = Searcher::with_options(
            Arc::clone(&eval),
            SearchOptions {
                tt_bits: 18,
                midgame_to_endgame: MIDGAME_TO_ENDGAME,
                ..SearchOptions::default()
            },
        );
        searcher.set_portable_codegen(portable_codegen);
        let results: Vec<_> = jobs
            .iter()
            .map(|&(b, depth, sel)| key(&searcher.search_depth(&b, depth, sel, 0, &abort)))
            .collect();
        match &reference {
            None => reference = Some(results),
            Some(want) => {
                for (i, (got, want)) in results.iter().zip(want).enumerate() {
                    assert_eq!(
                        got,
                        want,
                        "search {i} with flips {} / moves {} / portable code generation {portable_codegen}",
                        kernels.flips_backend(),
                        kernels.moves_backend()
                    );
                }
            }
        }
    }
    flip::set_active(saved);
}
