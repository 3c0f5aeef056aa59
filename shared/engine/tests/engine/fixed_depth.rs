//! Fixed-depth, no-selectivity scores against real Edax 4.6 output (`../shared/golden`):
//! every line of `edax-fixed-depth.txt` (20 positions × depths 0–8 with `eval-seed1.dat`) must be
//! reproduced exactly, and the parent scores must be the negamax of `edax-fixed-depth-children.txt`.

use bookfarm_engine::Board;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::search::{SearchOptions, Searcher, stability_lower, stability_upper};
use bookfarm_engine::testdata::shared_dir_or_skip;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

struct Line {
    id: u32,
    board: Board,
    depth: u32,
    score: i32,
}

fn parse_board(cells: &str, side: &str) -> Board {
    Board::from_cells(cells, side == "X").expect("valid golden board")
}

fn parents(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 8, "golden line {l:?}");
            let board = parse_board(f[1], f[2]);
            assert_eq!(board.empties().to_string(), f[3]);
            Line {
                id: f[0].parse().expect("id"),
                board,
                depth: f[4].parse().expect("depth"),
                score: f[5].parse().expect("score"),
            }
        })
        .collect()
}

fn setup() -> Option<(std::path::PathBuf, Searcher)> {
    let dir = shared_dir_or_skip()?;
    let eval = Eval::load(dir.join("golden/eval-seed1.dat")).expect("eval-seed1.dat loads");
    let opts = SearchOptions {
        tt_bits: 18,
        ..SearchOptions::default()
    };
    Some((dir, Searcher::with_options(Arc::new(eval), opts)))
}

#[test]
fn edax_fixed_depth_scores() {
    let Some((dir, mut searcher)) = setup() else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("golden/edax-fixed-depth.txt")).expect("golden");
    let lines = parents(&text);
    assert_eq!(lines.len(), 180, "20 positions x depths 0-8");
    let abort = AtomicBool::new(false);
    let mut mismatches = Vec::new();
    for l in &lines {
        let r = searcher.search_depth(&l.board, l.depth, 5, 0, &abort);
        if r.score != l.score {
            mismatches.push(format!(
                "pos {} depth {}: edax {} ours {} ({})",
                l.id, l.depth, l.score, r.score, l.board
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} lines differ:\n{}",
        mismatches.len(),
        lines.len(),
        mismatches.join("\n")
    );
}

#[test]
fn edax_children_negamax() {
    let Some((dir, mut searcher)) = setup() else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("golden/edax-fixed-depth.txt")).expect("golden");
    let parent: HashMap<(u32, u32), (Board, i32)> = parents(&text)
        .into_iter()
        .map(|l| ((l.id, l.depth), (l.board, l.score)))
        .collect();
    let children =
        std::fs::read_to_string(dir.join("golden/edax-fixed-depth-children.txt")).expect("golden");
    // Negamax of the children's Edax scores, clamped to the parent's stability bounds.
    let mut best: HashMap<(u32, u32), i32> = HashMap::new();
    let abort = AtomicBool::new(false);
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for l in children
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.len(), 7, "children line {l:?}");
        let id: u32 = f[0].parse().expect("id");
        let depth: u32 = f[1].parse().expect("depth");
        let child = parse_board(f[3], f[4]);
        let child_depth: u32 = f[5].parse().expect("child depth");
        let child_score: i32 = f[6].parse().expect("child score");
        let (pboard, _) = parent[&(id, depth)];
        let v = (-child_score).clamp(stability_lower(&pboard), stability_upper(&pboard));
        let e = best.entry((id, depth)).or_insert(-127);
        *e = (*e).max(v);
        // Our search of the child at the child depth agrees with Edax, depth 0 included (a
        // child that must pass at depth 0 is scored as it stands, Edax's rule).
        let r = searcher.search_depth(&child, child_depth, 5, 0, &abort);
        checked += 1;
        if r.score != child_score {
            mismatches.push(format!("{l}: ours {}", r.score));
        }
    }
    assert!(checked > 1000, "checked {checked} child searches");
    assert!(
        mismatches.is_empty(),
        "children differ:\n{}",
        mismatches.join("\n")
    );
    assert_eq!(best.len(), 160, "20 positions x depths 1-8");
    for ((id, depth), v) in best {
        let (_, score) = parent[&(id, depth)];
        assert_eq!(v, score, "pos {id} depth {depth}: negamax of children");
    }
}
