//! `bookfarm-coordinator book search FILE.obf --level L`: the real binary, its in-process
//! workers and a real sled work store; the output is compared with the engine's own leaf
//! searches of the same positions.

use bookfarm_engine::formats::obf::{ObfPosition, parse_obf};
use bookfarm_engine::formats::transcript::board_after;
use bookfarm_engine::search::LeafRequest;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-coordinator");

fn book(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("book")
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("BOOKFARM_DB")
        .env_remove("BOOKFARM_EVAL")
        .output()
        .expect("running bookfarm-coordinator")
}

/// Positions of a few openings (one of them twice, with another comment), both sides to move.
fn positions() -> String {
    let lines = [
        ("f5d6c3", "set 1"),
        ("f5d6c3d3c4", "set 2"),
        ("f5f6e6f4", "set 3"),
        ("f5d6c3", "set 4 (a duplicate)"),
        ("c4e3f6e6f5", "set 5"),
    ];
    lines
        .iter()
        .map(|(moves, comment)| {
            let board = board_after(moves).expect("line");
            ObfPosition {
                board,
                black_to_move: moves.len() / 2 % 2 == 0,
                scores: Vec::new(),
                best_score: None,
                comment: Some((*comment).into()),
            }
            .to_obf_line()
                + "\n"
        })
        .collect()
}

#[test]
fn book_search_gives_the_engines_results_in_file_order_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("todo.obf");
    let text = format!("% positions to label\n{}", positions());
    std::fs::write(&input, &text).expect("write");
    let out = dir.path().join("labels.obf");
    let run = book(&[
        "search",
        input.to_str().expect("path"),
        "--level",
        "4",
        "--out",
        out.to_str().expect("path"),
        "--threads",
        "2",
        "--quiet",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The work store is gone once the output is written.
    assert!(!dir.path().join("labels.obf.store").exists());
    let written = std::fs::read_to_string(&out).expect("output");
    let header = written.lines().next().expect("header");
    assert!(
        header.starts_with(
            "% bookfarm search level=4 positions=5 results=5 missing=0 program=1 state=done unconfirmed=0"
        ),
        "{header}"
    );
    let got = parse_obf(&written).expect("the output reads back");
    let given = parse_obf(&text).expect("input");
    assert_eq!(got.len(), given.len());
    let (eval, _) = bookfarm_runner::load_eval(None).expect("eval");
    let mut searcher = bookfarm_runner::exec::engine_factory(eval)();
    let abort = std::sync::atomic::AtomicBool::new(false);
    for (g, p) in got.iter().zip(&given) {
        assert_eq!((g.board, g.black_to_move), (p.board, p.black_to_move));
        assert_eq!(g.comment, p.comment);
        let want = searcher.search(
            &LeafRequest {
                board: p.board,
                level: 4,
                excluded: 0,
            },
            &abort,
        );
        assert_eq!(g.best_score, Some(want.score), "{:?}", p.comment);
        assert_eq!(g.scores, vec![(want.mv, want.score)], "{:?}", p.comment);
    }
    // With a kept work store, a second run (a new program) searches nothing again and writes
    // the same lines.
    let db = dir.path().join("work");
    let again = dir.path().join("again.obf");
    for (id, searches) in [(1, 4), (2, 0)] {
        let run = book(&[
            "search",
            input.to_str().expect("path"),
            "--level",
            "4",
            "--out",
            again.to_str().expect("path"),
            "--db",
            db.to_str().expect("path"),
            "--threads",
            "1",
            "--quiet",
        ]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            stdout.contains(&format!("search program #{id}: 5 positions, 5 results")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("{searches} searches in")),
            "{stdout}"
        );
    }
    let body = |t: &str| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        body(&std::fs::read_to_string(&again).expect("again")),
        body(&written)
    );
}

#[test]
fn a_malformed_file_is_refused_naming_the_line_and_nothing_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("bad.obf");
    let mut lines: Vec<String> = positions().lines().map(str::to_string).collect();
    lines[2] = lines[2].replacen('-', "Z", 1);
    std::fs::write(&input, lines.join("\n")).expect("write");
    let out = dir.path().join("out.obf");
    let run = book(&[
        "search",
        input.to_str().expect("path"),
        "--level",
        "4",
        "--out",
        out.to_str().expect("path"),
    ]);
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("bad.obf") && err.contains("line 3: bad board character 'Z'"),
        "{err}"
    );
    assert!(!out.exists());
    assert!(!dir.path().join("out.obf.store").exists());
}
