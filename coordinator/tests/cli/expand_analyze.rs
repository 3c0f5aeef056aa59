//! `bookfarm-coordinator expand analyze` against a real `serve` process: a bad position or bad
//! levels are refused naming them and nothing is queued; a good one is queued and listed by
//! `expand list` with its searches (done/total), then cancelled. With `--store`, a position the
//! book cannot hold is refused with nothing queued, and a good one (the start position
//! included) queues the analysis and the program that stores it right behind it.

use std::process::{Child, Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-coordinator");
const TOKEN: &str = "analyze-test-admin-secret";

/// The `serve` process, killed when the test ends (also on a failed assertion).
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cli(url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--coordinator", url])
        .env("BOOKFARM_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .env_remove("BOOKFARM_DB")
        .output()
        .expect("running bookfarm-coordinator")
}

fn text(o: &Output) -> (bool, String, String) {
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn expand_analyze_refuses_bad_input_before_sending_and_lists_its_searches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let db = db.to_str().expect("path");
    let new = Command::new(BIN)
        .args(["book", "new", "2", "10", "--db", db])
        .env("RUST_LOG", "warn")
        .env_remove("BOOKFARM_EVAL")
        .output()
        .expect("book new");
    assert!(
        new.status.success(),
        "{}",
        String::from_utf8_lossy(&new.stderr)
    );
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://{listen}");
    let _serve = Serve(
        Command::new(BIN)
            .args(["serve", "--db", db, "--listen", &listen])
            .env("BOOKFARM_ADMIN_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .env_remove("BOOKFARM_EVAL")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve"),
    );
    // Up once it answers (each try is a process start: a bounded number of them).
    let listed = (0..600)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            text(&cli(&url, &["expand", "list"]))
        })
        .find(|(ok, _, _)| *ok);
    let (_, before, _) = listed.expect("serve answers");

    // Refused before anything is sent or queued, naming what is wrong.
    for (args, says) in [
        (&["f5f5", "--level", "2"][..], "f5f5"),
        (&["f5d6c3", "--level", "0"][..], "1..=60"),
        (&["f5d6c3", "--level", "4", "--up-to", "3"][..], "up"),
        (&["f5d6c3", "--level", "61"][..], "61"),
    ] {
        let args: Vec<&str> = ["expand", "analyze"].iter().chain(args).copied().collect();
        let (ok, out, err) = text(&cli(&url, &args));
        assert!(!ok, "{args:?} accepted: {out}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (ok, after, err) = text(&cli(&url, &["expand", "list", "--all"]));
    assert!(ok, "{err}");
    assert!(!after.contains("analyze"), "queued: {after}");

    // Queued (nothing runs before it), listed running with its searches.
    let (ok, out, err) = text(&cli(
        &url,
        &[
            "expand", "analyze", "f5d6c3", "--level", "2", "--up-to", "4",
        ],
    ));
    assert!(ok, "{err}");
    assert!(
        out.contains("queued (0 programs before it): analyze levels 2..4"),
        "{out}"
    );
    let id: u64 = out
        .split_once('#')
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("program id in {out}"));
    let board = bookfarm_engine::formats::transcript::board_after("f5d6c3").expect("line");
    let levels = bookfarm_book::searches::analysis_levels(&board, 2, 4).len();
    let (ok, list, err) = text(&cli(&url, &["expand", "list"]));
    assert!(ok, "{err}");
    let row = list
        .lines()
        .position(|l| l.starts_with(&format!("#{id} ")))
        .unwrap_or_else(|| panic!("#{id} in {list} (before: {before})"));
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[row].contains("running") && lines[row].contains("analyze levels 2..4"),
        "{list}"
    );
    assert!(
        lines
            .get(row + 1)
            .is_some_and(|l| l.contains(&format!("0/{levels} searches"))),
        "{list}"
    );

    // Cancelled: listed as such, no longer running.
    let (ok, _, err) = text(&cli(&url, &["expand", "cancel", &id.to_string()]));
    assert!(ok, "{err}");
    let (ok, list, err) = text(&cli(&url, &["expand", "list", "--all"]));
    assert!(ok, "{err}");
    assert!(
        list.lines()
            .any(|l| l.starts_with(&format!("#{id} ")) && l.contains("cancelled")),
        "{list}"
    );

    // --store of a position the book cannot hold: refused, nothing queued.
    let past = line_of(12); // the book holds 10 plies
    let not_in_book = bookfarm_engine::formats::obf::ObfPosition {
        board: bookfarm_engine::formats::transcript::board_after(&past).expect("line"),
        black_to_move: true,
        scores: Vec::new(),
        best_score: None,
        comment: None,
    }
    .to_obf_line();
    for (line, says) in [
        (past.as_str(), "depth"),
        (not_in_book.as_str(), "not in the book"),
    ] {
        let args = ["expand", "analyze", line, "--level", "2", "--store"];
        let (ok, out, err) = text(&cli(&url, &args));
        assert!(!ok, "{args:?} accepted: {out}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (ok, now, err) = text(&cli(&url, &["expand", "list"]));
    assert!(ok, "{err}");
    assert!(!now.contains("analyze"), "queued: {now}");

    // A good one: the analysis, then the store right behind it.
    let (ok, out, err) = text(&cli(
        &url,
        &[
            "expand", "analyze", "f5d6c3", "--level", "2", "--up-to", "4", "--store",
        ],
    ));
    assert!(ok, "{err}");
    let ids: Vec<u64> = out
        .lines()
        .filter_map(|l| l.split_once('#'))
        .filter_map(|(_, r)| r.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(ids.len(), 2, "{out}");
    assert!(
        out.contains(&format!(
            "program #{} queued right behind it: store the analysis at level 4",
            ids[1]
        )),
        "{out}"
    );
    let (ok, list, err) = text(&cli(&url, &["expand", "list"]));
    assert!(ok, "{err}");
    let rows: Vec<&str> = list.lines().filter(|l| l.starts_with('#')).collect();
    let at = |id: u64| {
        rows.iter()
            .position(|l| l.starts_with(&format!("#{id} ")))
            .unwrap_or_else(|| panic!("#{id} in {list}"))
    };
    assert_eq!(at(ids[1]), at(ids[0]) + 1, "{list}");
    assert!(
        rows[at(ids[1])].contains("store the analysis at level 4 from f5d6c3"),
        "{list}"
    );
    for id in ids {
        let (ok, _, err) = text(&cli(&url, &["expand", "cancel", &id.to_string()]));
        assert!(ok, "{err}");
    }

    // From the start position: the empty line, or the start's OBF board (in the book).
    let start = bookfarm_engine::formats::obf::ObfPosition {
        board: bookfarm_engine::Board::start(),
        black_to_move: true,
        scores: Vec::new(),
        best_score: None,
        comment: None,
    }
    .to_obf_line();
    for line in ["", start.as_str()] {
        let args = [
            "expand", "analyze", line, "--level", "2", "--up-to", "3", "--store",
        ];
        let (ok, out, err) = text(&cli(&url, &args));
        assert!(ok, "{line:?}: {err}");
        let ids: Vec<u64> = out
            .lines()
            .filter_map(|l| l.split_once('#'))
            .filter_map(|(_, r)| r.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(ids.len(), 2, "{line:?}: {out}");
        assert!(
            out.contains("queued right behind it: store the analysis at level 3"),
            "{line:?}: {out}"
        );
        let (ok, list, err) = text(&cli(&url, &["expand", "list"]));
        assert!(ok, "{err}");
        let row = list
            .lines()
            .find(|l| l.starts_with(&format!("#{} ", ids[1])))
            .unwrap_or_else(|| panic!("#{} in {list}", ids[1]));
        assert!(
            row.contains("store the analysis at level 3") && !row.contains(" from "),
            "from the start: {list}"
        );
        for id in ids {
            let (ok, _, err) = text(&cli(&url, &["expand", "cancel", &id.to_string()]));
            assert!(ok, "{err}");
        }
    }
}

/// A legal line of `plies` moves from the start (each the lowest legal square).
fn line_of(plies: usize) -> String {
    use bookfarm_engine::{Board, Move, Square};
    let mut b = Board::start();
    let mut line = String::new();
    for _ in 0..plies {
        let sq = b.moves().trailing_zeros() as u8;
        let mv = Move::Square(Square::new(sq).expect("a legal square"));
        line.push_str(&mv.to_string());
        b = b.play_move(mv).expect("legal");
    }
    line
}
