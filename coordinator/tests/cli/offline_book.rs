//! `bookfarm-coordinator book … --db DIR`: the real binary on real sled stores in temporary
//! directories, with Edax's golden books and games.

use bookfarm_book::BookFormat;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-coordinator");

fn golden(name: &str) -> Option<PathBuf> {
    bookfarm_engine::testdata::shared_dir_or_skip().map(|d| d.join("golden").join(name))
}

/// Run the binary with `args`; returns its output.
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

/// Run and require success; returns stdout.
fn ok(args: &[&str]) -> String {
    let out = book(args);
    assert!(
        out.status.success(),
        "book {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Run and require failure with a one-line `error: …` message; returns that line.
fn fails(args: &[&str]) -> String {
    let out = book(args);
    assert!(
        !out.status.success(),
        "book {args:?} unexpectedly succeeded"
    );
    let err = String::from_utf8(out.stderr).expect("utf-8 stderr");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "book {args:?}: {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "book {args:?}: more than one line: {err}"
    );
    lines[0].to_string()
}

/// [`ok`] with the engine options appended.
fn ok_with(args: &[&str], engine: &[&str]) -> String {
    let mut a = args.to_vec();
    a.extend_from_slice(engine);
    ok(&a)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The dump of the store's book without its `# {…}` header line (the date changes).
fn store_dump(db: &Path, dir: &Path) -> String {
    let out = dir.join("dump-tmp.dat");
    ok(&["export", "--db", s(db), s(&out)]);
    let text = ok(&["dump", s(&out)]);
    std::fs::remove_file(&out).expect("remove temporary export");
    without_date(&text)
}

fn without_date(dump: &str) -> String {
    dump.lines()
        .filter(|l| !l.starts_with("# {"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn golden_book_import_negamax_export_is_identical() {
    let (Some(dat), Some(dump)) = (golden("book-small.dat"), golden("book-small.dump.txt")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = ok(&["import", s(&dat), "--db", s(&db)]);
    assert!(out.contains("imported 1054 positions"), "{out}");
    ok(&["negamax", "--db", s(&db)]);
    let golden_dump = std::fs::read_to_string(dump).expect("golden dump");
    assert_eq!(store_dump(&db, dir.path()), without_date(&golden_dump));
    // The store's info and stats equal the file's.
    assert_eq!(
        ok(&["info", "--db", s(&db)])
            .lines()
            .skip(1)
            .collect::<Vec<_>>(),
        ok(&["info", s(&dat)]).lines().skip(1).collect::<Vec<_>>()
    );
    assert_eq!(ok(&["stats", "--db", s(&db)]), ok(&["stats", s(&dat)]));
    // CSV export of the store: the golden CSV's lines (the order within a hash bucket follows
    // insertion order, which the store does not keep).
    if let Some(csv) = golden("book-small.csv") {
        let out = dir.path().join("x.csv");
        ok(&["export", "--db", s(&db), s(&out)]);
        let sorted = |p: &Path| {
            let text = std::fs::read_to_string(p).expect("read csv");
            let mut v: Vec<String> = text.lines().map(str::to_string).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&out), sorted(&csv));
    }
    // show: Edax's text for the position after f5d6.
    let show = ok(&["show", "--db", s(&db), "--moves", "f5d6"]);
    assert!(show.contains("Moves: [C5:+7]"), "{show}");
}

#[test]
fn real_run_new_add_deviate_survives_export_and_reimport() {
    let (Some(games), Some(eval)) = (golden("games-seed7.txt"), golden("eval-seed1.dat")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let engine = ["--eval", s(&eval), "--threads", "2", "--quiet"];
    let with = |args: &[&str]| ok_with(args, &engine);
    let out = with(&["new", "4", "14", "--db", s(&db)]);
    assert!(out.contains("done: 1 positions, 1 searches"), "{out}");
    let out = with(&["add", s(&games), "--db", s(&db)]);
    assert!(out.contains("added 12 games: 134 new positions"), "{out}");
    let dry = ok(&["deviate", "2", "4", "--db", s(&db), "--dry-run"]);
    assert!(dry.starts_with("deviate 2 4: "), "{dry}");
    let before = store_dump(&db, dir.path());
    assert_eq!(
        store_dump(&db, dir.path()),
        before,
        "a dry run changes nothing"
    );
    with(&["deviate", "2", "4", "--db", s(&db)]);
    let info = ok(&["info", "--db", s(&db)]);
    let positions: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("Positions: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("positions line");
    // Deviate grew the book beyond the 135 positions of the games (Edax 4.6 reaches 1054 from
    // the same games and parameters with its own engine: book-small.dat).
    assert!(positions > 135 + 100, "{info}");
    // Transpositions were linked as the book grew: Edax's linking finds nothing to do.
    let linked = with(&["link", "--db", s(&db)]);
    assert!(
        linked.starts_with(
            "link: 0 links added, 0 searches, 0 positions and 0 link scores changed by negamax"
        ),
        "{linked}"
    );
    // At the fixed point, deviate selects nothing more.
    let dry = ok(&["deviate", "--db", s(&db), "--dry-run"]);
    assert_eq!(
        dry.trim(),
        "deviate 2 4: 0 positions would be expanded in the first pass"
    );
    // Export, re-import into a second store, negamax: values unchanged.
    let dat = dir.path().join("built.dat");
    ok(&["export", "--db", s(&db), s(&dat)]);
    let db2 = dir.path().join("db2");
    ok(&["import", s(&dat), "--db", s(&db2)]);
    ok(&["negamax", "--db", s(&db2)]);
    let a = store_dump(&db, dir.path());
    assert_eq!(store_dump(&db2, dir.path()), a);
    assert!(
        a.contains(&format!("# {positions} positions; level 4;")),
        "{a}"
    );
    // book check of the games the book was built from: none missing.
    let check = ok(&["check", s(&games), "--db", s(&db)]);
    assert!(check.contains("Positions : 0 missing"), "{check}");
}

#[test]
fn bad_input_fails_in_one_line_and_leaves_the_store_untouched() {
    let Some(dat) = golden("book-small.dat") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    ok(&["import", s(&dat), "--db", s(&db)]);
    let before = store_dump(&db, dir.path());

    let truncated = dir.path().join("t.dat");
    let bytes = std::fs::read(&dat).expect("read golden");
    std::fs::write(&truncated, &bytes[..1000]).expect("write");
    let e = fails(&["import", s(&truncated), "--db", s(&db)]);
    assert!(e.contains("at byte 994: truncated record"), "{e}");

    let bad_games = dir.path().join("g.txt");
    std::fs::write(&bad_games, "f5d6c3\nf5z9\n").expect("write");
    let e = fails(&["add", s(&bad_games), "--db", s(&db), "--quiet"]);
    assert!(e.contains("g.txt: line 2"), "{e}");
    let e = fails(&["check", s(&bad_games), "--db", s(&db)]);
    assert!(e.contains("g.txt: line 2"), "{e}");

    let e = fails(&["show", "--db", s(&db), "--moves", "f5f5"]);
    assert!(e.contains("f5f5"), "{e}");
    let e = fails(&["subtree", "--db", s(&db), "--moves", "a1"]);
    assert!(e.contains("a1"), "{e}");
    let e = fails(&["new", "4", "14", "--db", s(&db)]);
    assert!(e.contains("already holds a book"), "{e}");
    // A container's first-start step: an existing book is kept, and that is a success.
    let out = ok(&["new", "4", "14", "--db", s(&db), "--if-missing"]);
    assert!(out.contains("already holds a book; kept"), "{out}");
    let e = fails(&["new", "61", "14", "--db", s(&db), "--force"]);
    assert!(e.contains("expected a level from 0 to 60"), "{e}");
    let e = fails(&["export", "--db", s(&db), s(&dir.path().join("x.txt"))]);
    assert!(e.contains("unknown book format"), "{e}");
    let e = fails(&[
        "fix",
        "--db",
        s(&db),
        "--eval",
        s(&dir.path().join("missing.eval")),
    ]);
    assert!(e.contains("missing.eval"), "{e}");
    let e = fails(&["merge", s(&truncated), "--db", s(&db)]);
    assert!(e.contains("truncated record"), "{e}");

    assert_eq!(store_dump(&db, dir.path()), before);

    // A mistyped --db neither succeeds nor creates a directory.
    let nowhere = dir.path().join("nowhere");
    for cmd in ["negamax", "info", "deviate", "problem", "show"] {
        let e = fails(&[cmd, "--db", s(&nowhere)]);
        assert!(e.contains("no book here"), "{cmd}: {e}");
    }
    assert!(!nowhere.exists());
}

#[test]
fn maintenance_commands_on_the_golden_book() {
    let (Some(dat), Some(tiny)) = (golden("book-small.dat"), golden("book-tiny.dat")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    ok(&["import", s(&dat), "--db", s(&db)]);
    // Edax's book problem on the golden book (depth 14: positions with 46 to 60 empties).
    let problems = ok(&["problem", "50", "3", "--db", s(&db)]);
    assert_eq!(problems.lines().count(), 3, "{problems}");
    assert!(
        problems
            .lines()
            .all(|l| l.contains(" X % bm ") || l.contains(" O % bm ")),
        "{problems}"
    );
    assert!(
        ok(&["problem", "--db", s(&db)]).is_empty(),
        "no position has 24 empties"
    );
    // Merging a book into itself adds nothing.
    let out = ok(&["merge", s(&dat), "--db", s(&db)]);
    assert!(
        out.starts_with("merge (") && out.contains(": 0 positions added"),
        "{out}"
    );
    let out = ok(&["merge", s(&tiny), "--db", s(&db)]);
    assert!(out.contains("positions stored"), "{out}");
    let merged: usize = out
        .rsplit("; ")
        .next()
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("count");
    assert!(merged >= 1054, "{out}");
    let out = ok(&["prune", "--db", s(&db)]);
    assert!(out.starts_with("prune: "), "{out}");
    // Pruning again removes nothing: the kept set is closed.
    let out = ok(&["prune", "--db", s(&db)]);
    assert!(out.starts_with("prune: 0 positions removed"), "{out}");
    let out = ok(&["subtree", "--db", s(&db), "--moves", "f5d6"]);
    assert!(out.starts_with("subtree: "), "{out}");
    let show = ok(&["show", "--db", s(&db), "--moves", "f5d6"]);
    assert!(show.contains("Moves: [C5:"), "{show}");
}

#[test]
fn wthor_games_are_added_and_checked_by_extension() {
    let (Some(shared), Some(eval)) = (
        bookfarm_engine::testdata::shared_dir_or_skip(),
        golden("eval-seed1.dat"),
    ) else {
        return;
    };
    let wtb = shared.join("data/wthor/WTH_1977.wtb");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let engine = ["--eval", s(&eval), "--threads", "1", "--quiet"];
    let mut a = vec!["new", "1", "4", "--db", s(&db)];
    a.extend_from_slice(&engine);
    ok(&a);
    let mut a = vec!["add", s(&wtb), "--db", s(&db)];
    a.extend_from_slice(&engine);
    let out = ok(&a);
    assert!(out.starts_with("added "), "{out}");
    // Depth 4: every position of the first four plies of those games is now in the book.
    let check = ok(&["check", s(&wtb), "--db", s(&db)]);
    assert!(check.contains("Positions : 0 missing"), "{check}");
    // A transcript file named .wtb is not a WTHOR file: a clear error, the store untouched.
    let before = store_dump(&db, dir.path());
    let fake = dir.path().join("fake.wtb");
    std::fs::write(&fake, "f5d6c3\n").expect("write");
    let e = fails(&["add", s(&fake), "--db", s(&db), "--quiet"]);
    assert!(e.contains("fake.wtb"), "{e}");
    assert_eq!(store_dump(&db, dir.path()), before);
}

/// Ctrl-C during an expansion: the command stops with one `error: interrupted` line (or
/// finishes first), the store stays consistent, and running it again reaches the fixed point.
#[cfg(unix)]
#[test]
fn interrupted_deviate_resumes() {
    let (Some(games), Some(eval)) = (golden("games-seed7.txt"), golden("eval-seed1.dat")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let engine = ["--eval", s(&eval), "--threads", "2", "--quiet"];
    // `book ARGS --db DB --eval … --threads 2 --quiet`.
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(&["--db", s(&db)])
            .chain(&engine)
            .map(|x| x.to_string())
            .collect()
    };
    let run = |args: Vec<String>| ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    run(with(&["new", "4", "14"]));
    run(with(&["add", s(&games)]));
    let deviate = with(&["deviate", "2", "4"]);
    let child = Command::new(BIN)
        .arg("book")
        .args(&deviate)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn deviate");
    // Interrupt it early (whether it is still running then does not matter for what follows).
    std::thread::sleep(std::time::Duration::from_millis(400));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().expect("wait deviate");
    // A SIGINT that arrives before the command installed its handler (a slow start on a loaded
    // machine: the handler comes after loading the evaluation and opening the store) ends the
    // process the default way, silently; what follows checks that the store is still usable.
    let killed_early = std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(2);
    if !out.status.success() && !killed_early {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim(), "error: interrupted", "{err}");
    }
    let done = run(deviate);
    assert!(
        done.lines().last().is_some_and(|l| l.starts_with("done: ")),
        "{done}"
    );
    let dry = ok(&["deviate", "--db", s(&db), "--dry-run"]);
    assert!(dry.contains(": 0 positions would be expanded"), "{dry}");
    let dat = dir.path().join("b.dat");
    ok(&["export", "--db", s(&db), s(&dat)]);
    let db2 = dir.path().join("db2");
    ok(&["import", s(&dat), "--db", s(&db2)]);
    ok(&["negamax", "--db", s(&db2)]);
    assert_eq!(store_dump(&db2, dir.path()), store_dump(&db, dir.path()));
}

/// Issue 21's tools on book-tiny: `book line`, `book accuracy`, the grade in `book show`, the
/// better leaves of `book check` and their expansion by `book fix`, and `.egbk3` export and
/// import through a store.
#[test]
fn quality_tools_on_the_golden_tiny_book() {
    let (Some(dat), Some(eval)) = (golden("book-tiny.dat"), golden("eval-seed1.dat")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    ok(&["import", s(&dat), "--db", s(&db)]);
    let line = ok(&["line", "f5f4e3", "--db", s(&db)]);
    assert!(
        line.contains(
            "  3 E3   +1 [  +0,   +4] level  2 lines          8 accuracy F  leaf  d2:+1 links f6:-7"
        ),
        "{line}"
    );
    assert_eq!(line, ok(&["line", "f5f4e3", "--file", s(&dat)]));
    let acc = ok(&["accuracy", "f5", "--db", s(&db)]);
    assert!(acc.starts_with("accuracy: F\n"), "{acc}");
    let show = ok(&["show", "--db", s(&db), "--moves", "f5"]);
    assert!(
        show.ends_with("incomplete lines.\n\nAccuracy: F\n"),
        "{show}"
    );
    let check = ok(&["check", "--db", s(&db)]);
    let better: usize = check
        .strip_prefix("Better leaves: ")
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("better leaves line");
    assert!(better > 0, "{check}");
    // egbk3 out of the store and into another: the same book.
    let egb = dir.path().join("tiny.egbk3");
    ok(&["export", "--db", s(&db), s(&egb)]);
    let db2 = dir.path().join("db2");
    ok(&["import", s(&egb), "--db", s(&db2)]);
    let strip_header = |t: String| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        strip_header(ok(&["info", "--db", s(&db2)]))[..2],
        strip_header(ok(&["info", "--db", s(&db)]))[..2]
    );
    assert_eq!(store_dump(&db2, dir.path()).lines().count(), 25 + 1);
    // fix expands the better leaves once.
    let fix = ok(&["fix", "--db", s(&db), "--eval", s(&eval), "--threads", "1"]);
    assert!(
        fix.contains(&format!(
            "{better} better leaves expanded ({better} positions added)"
        )),
        "{fix}"
    );
}

/// Issue 22's offline commands on book-tiny: analyze, extract in the three formats, the random
/// book move, deepen (a no-op), depth, store, correct, upgrade and the line audit.
#[test]
fn remaining_edax_commands_on_the_golden_tiny_book() {
    let (Some(dat), Some(eval)) = (golden("book-tiny.dat"), golden("eval-seed1.dat")) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let engine = ["--eval", s(&eval), "--threads", "1", "--quiet"];
    let with = |args: &[&str]| ok_with(args, &engine);
    ok(&["import", s(&dat), "--db", s(&db)]);
    let before = store_dump(&db, dir.path());

    let a = ok(&["analyze", "f5f6e6f4e3c5c4e7c6", "4", "--db", s(&db)]);
    assert!(
        a.contains("  8   book    1    e7     -2   <    +3     f2 <- Edax disagrees strongly\n"),
        "{a}"
    );
    assert_eq!(a.lines().count(), 4 + 4);

    let txt = dir.path().join("lines.txt");
    ok(&["extract", s(&txt), "--db", s(&db)]);
    assert_eq!(
        std::fs::read_to_string(&txt).expect("lines"),
        "f5f6e6f4e3c5c4f2\nf5f6e6f4e3c5b6\n"
    );
    let ggf = dir.path().join("lines.ggf");
    ok(&["extract", s(&ggf), "--db", s(&db)]);
    let games =
        bookfarm_engine::formats::ggf::parse_ggf(&std::fs::read_to_string(&ggf).expect("ggf"))
            .expect("our GGF parses");
    assert_eq!(games.len(), 2);
    assert_eq!(games[1].game.to_transcript(), "f5f6e6f4e3c5b6");
    let wtb = dir.path().join("lines.wtb");
    ok(&["extract", s(&wtb), "--db", s(&db)]);
    let (_, games) =
        bookfarm_engine::formats::wthor::read_wtb(&std::fs::read(&wtb).expect("wtb")).expect("wtb");
    assert_eq!(games[0].game.to_transcript(), "f5f6e6f4e3c5c4f2");
    // The root value −3 for Black: 30.5 → 30 discs.
    assert_eq!(games[0].theoretical_black_score, 30);

    // Randomness 0 after f5 (f6 +3, f4 +1, d6 +0): always f6; 3: any of them.
    for seed in ["1", "2", "3"] {
        assert_eq!(ok(&["move", "f5", "--db", s(&db), "--seed", seed]), "f6\n");
    }
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let seed = seed.to_string();
        let args = [
            "move",
            "f5",
            "--file",
            s(&dat),
            "--randomness",
            "3",
            "--seed",
            &seed,
        ];
        seen.insert(ok(&args));
    }
    assert_eq!(seen.len(), 3, "{seen:?}");

    let d = ok(&["deepen", "--db", s(&db)]);
    assert!(d.starts_with("deepen: nothing to do"), "{d}");
    assert_eq!(
        store_dump(&db, dir.path()),
        before,
        "deepen changes nothing"
    );

    ok(&["depth", "20", "--db", s(&db)]);
    assert!(ok(&["info", "--db", s(&db)]).contains("Depth: 20\n"));
    let e = fails(&["depth", "0", "--db", s(&db)]);
    assert!(e.contains("from 1 to 60"), "{e}");

    let st = with(&["store", "f5d6c5f4e3", "--db", s(&db)]);
    assert!(
        st.starts_with("store: 5 moves replayed, 3 positions"),
        "{st}"
    );
    let show = ok(&["show", "--db", s(&db), "--moves", "f5d6c5f4"]);
    assert!(show.contains("Level: 2"), "{show}");

    let c = with(&["correct", "--db", s(&db)]);
    assert!(c.starts_with("correct: 0 solved positions"), "{c}");

    let up = with(&["upgrade", "4", "--error", "4", "--db", s(&db)]);
    assert!(up.starts_with("upgrade to level 4 (error 4): "), "{up}");
    let info = ok(&["info", "--db", s(&db)]);
    assert!(info.contains("Level 4 : "), "{info}");
    let again = with(&["upgrade", "4", "--error", "4", "--db", s(&db)]);
    assert!(
        again.contains(": 0 positions raised in 1 rounds"),
        "{again}"
    );

    let bad = dir.path().join("bad.txt");
    let au = with(&["audit", "6", "--db", s(&db), "--contradictions", s(&bad)]);
    assert!(au.contains("best lines played to the end"), "{au}");
    let n_bad = au
        .lines()
        .filter(|l| l.starts_with("contradiction: "))
        .count();
    assert_eq!(
        std::fs::read_to_string(&bad)
            .expect("contradictions")
            .lines()
            .count(),
        n_bad
    );
}

/// A `local` build (in-process workers over gRPC) is a fixed point of `book link`; the same
/// book with one link dropped (as Edax's deviate leaves transpositions) is repaired by it.
#[test]
fn local_build_is_a_fixed_point_of_book_link() {
    let Some(eval) = golden("eval-seed1.dat") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = dir.path().join("b.dat");
    let o = Command::new(BIN)
        .args(["local", "--db", s(&db), "--out", s(&out), "--quiet"])
        .args([
            "--level",
            "2",
            "--depth",
            "12",
            "--deviate",
            "2,4",
            "--workers",
            "2",
        ])
        .args(["--eval", s(&eval)])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run local");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let engine = ["--eval", s(&eval), "--quiet"];
    let linked = ok_with(&["link", "--db", s(&db)], &engine);
    assert!(
        linked.starts_with(
            "link: 0 links added, 0 searches, 0 positions and 0 link scores changed by negamax"
        ),
        "{linked}"
    );
    // Drop the last link of the first position that has two, import that book: `book link`
    // adds the link back.
    let mut book = bookfarm_book::edax::read_book(&std::fs::read(&out).expect("read export"))
        .expect("exported book");
    let id = book
        .ids()
        .find(|&id| book.n_link(id) >= 2)
        .expect("a position with two links");
    let mut links: Vec<_> = book.links(id).collect();
    links.pop();
    book.set_links(id, &links);
    let broken = dir.path().join("broken.dat");
    std::fs::write(&broken, bookfarm_book::edax::book_to_bytes(&book)).expect("write");
    let db2 = dir.path().join("db2");
    ok(&["import", s(&broken), "--db", s(&db2)]);
    let repaired = ok_with(&["link", "--db", s(&db2)], &engine);
    assert!(
        repaired.starts_with("link: 1 links added, 0 searches"),
        "{repaired}"
    );
}

/// `local --out` writes the format its extension names: a `.egbk3` out of `local` is a real
/// Egaroucid book that reads back as the stored book (through the same mapping as `book convert`
/// of the stored book.dat), and imports into a store as the same book.
#[test]
fn local_writes_an_egbk3_that_reads_back_as_the_same_book() {
    let Some(eval) = golden("eval-seed1.dat") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let egb = dir.path().join("b.egbk3");
    let o = Command::new(BIN)
        .args(["local", "--db", s(&db), "--out", s(&egb), "--quiet"])
        .args(["--level", "2", "--depth", "10", "--workers", "2"])
        .args(["--eval", s(&eval)])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run local");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&egb).expect("read the egbk3");
    assert!(bytes.starts_with(b"DICUORAGE\x03"), "an Egaroucid book");
    let read = |format: BookFormat, bytes: &[u8]| {
        let mut v: Vec<_> = format
            .read(bytes)
            .expect("reads")
            .book
            .positions()
            .collect();
        v.sort_by_key(|p| p.board);
        v
    };
    // The stored book, exported as book.dat and converted to .egbk3 by `book convert`.
    let dat = dir.path().join("b.dat");
    ok(&["export", "--db", s(&db), s(&dat)]);
    let converted = dir.path().join("c.egbk3");
    ok(&["convert", s(&dat), s(&converted)]);
    let stored = read(BookFormat::Edax, &std::fs::read(&dat).expect("read dat"));
    let back = read(BookFormat::Egbk3, &bytes);
    assert_eq!(back.len(), stored.len(), "every position written");
    assert_eq!(
        back,
        read(
            BookFormat::Egbk3,
            &std::fs::read(&converted).expect("read converted")
        )
    );
    assert_eq!(
        back.iter().map(|p| (p.board, p.value)).collect::<Vec<_>>(),
        stored
            .iter()
            .map(|p| (p.board, p.value))
            .collect::<Vec<_>>(),
        "the same positions and values"
    );
    // Imported into another store: the same book.
    let db2 = dir.path().join("db2");
    ok(&["import", s(&egb), "--db", s(&db2)]);
    let info = |db: &Path| {
        ok(&["info", "--db", s(db)])
            .lines()
            .skip(1)
            .take(2)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(info(&db2), info(&db));
}

/// An Egaroucid book without leaves (book-tiny in Egaroucid's layout with every leaf field
/// undefined, as Egaroucid saves most positions) keeps its values through `book convert` and
/// `book import` (borrowed leaves, not ±127), grows with `book deviate`, and `book fix` searches
/// every borrowed leaf.
#[test]
fn an_egaroucid_book_without_leaves_keeps_its_values_and_grows() {
    use bookfarm_book::egbk3;
    use bookfarm_book::grow::is_borrowed;
    let (Some(tiny), Some(eval)) = (golden("book-tiny.dat"), golden("eval-seed1.dat")) else {
        return;
    };
    let source = BookFormat::Edax
        .read(&std::fs::read(&tiny).expect("read book-tiny"))
        .expect("reads")
        .book;
    let records: Vec<egbk3::Record> = egbk3::from_book(&source)
        .into_iter()
        .map(|r| egbk3::Record {
            leaf_value: egbk3::SCORE_UNDEFINED,
            leaf_move: egbk3::MOVE_UNDEFINED,
            leaf_level: egbk3::LEVEL_UNDEFINED,
            ..r
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let egb = dir.path().join("leafless.egbk3");
    std::fs::write(&egb, egbk3::write(&records)).expect("write egbk3");
    let read_dat = |p: &Path| {
        BookFormat::Edax
            .read(&std::fs::read(p).expect("read dat"))
            .expect("reads")
            .book
    };
    // convert: every value is the Edax book's (the egbk3 carries them), none ±127.
    let dat = dir.path().join("converted.dat");
    ok(&["convert", s(&egb), s(&dat)]);
    let converted = read_dat(&dat);
    assert_eq!(converted.len(), source.len());
    for p in source.positions() {
        let q = converted.get(&p.board).expect("converted");
        assert_eq!(q.value, p.value, "{}", p.board);
        assert!(q.n_lines > 0, "{}", p.board);
    }
    let borrowed = |b: &bookfarm_book::MemBook| b.positions().filter(is_borrowed).count();
    let before = borrowed(&converted);
    assert!(before > 0);
    // import, then deviate: the book grows and the leaves deviate marked were searched.
    let engine = ["--eval", s(&eval), "--threads", "1", "--quiet"];
    let db = dir.path().join("db");
    ok(&["import", s(&egb), "--db", s(&db)]);
    ok_with(&["deviate", "2", "4", "--db", s(&db)], &engine);
    let grown = dir.path().join("grown.dat");
    ok(&["export", "--db", s(&db), s(&grown)]);
    let grown = read_dat(&grown);
    assert!(grown.len() > source.len(), "{}", grown.len());
    assert!(borrowed(&grown) < before);
    // import again, then fix: no borrowed leaf left, no position added.
    let db2 = dir.path().join("db2");
    ok(&["import", s(&egb), "--db", s(&db2)]);
    ok_with(&["fix", "--db", s(&db2)], &engine);
    let fixed = dir.path().join("fixed.dat");
    ok(&["export", "--db", s(&db2), s(&fixed)]);
    let fixed = read_dat(&fixed);
    assert_eq!(borrowed(&fixed), 0);
    assert!(fixed.len() >= source.len());
}

/// A book file name whose extension is not `.dat`, `.csv` or `.egbk3` is refused by every
/// command that reads or writes one, before anything runs: nothing is written, no store is
/// created.
#[test]
fn unknown_book_extensions_are_refused_by_every_entry_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = dir.path().join("out.txt");
    let txt = dir.path().join("book.txt");
    std::fs::write(&txt, "x").expect("write");
    let dat = dir.path().join("in.dat");
    std::fs::write(&dat, "x").expect("write");
    let unknown = "unknown book format (expected a .dat, .csv or .egbk3 extension)";
    for args in [
        vec!["convert", s(&dat), s(&out)],
        vec!["convert", s(&txt), s(&out)],
        vec!["synth", "--positions", "10", s(&out)],
        vec!["export", "--db", s(&db), s(&out)],
        vec!["dump", s(&txt)],
        vec!["info", s(&txt)],
        vec!["stats", s(&txt)],
        vec!["import", s(&txt), "--db", s(&db)],
        vec!["merge", s(&txt), "--db", s(&db)],
        vec!["line", "f5", "--file", s(&txt)],
        vec!["accuracy", "f5", "--file", s(&txt)],
        vec!["move", "--file", s(&txt)],
    ] {
        let err = fails(&args);
        assert!(err.contains(unknown), "{args:?}: {err}");
    }
    let run = |args: &[&str]| {
        let o = Command::new(BIN)
            .args(args)
            .env("RUST_LOG", "warn")
            .env_remove("BOOKFARM_DB")
            .output()
            .expect("run");
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&["local", "--db", s(&db), "--out", s(&out), "--quiet"]);
    assert!(err.contains("--out") && err.contains(unknown), "{err}");
    // The cluster's export is refused before it connects (nothing listens on port 1).
    let err = run(&["export", s(&out), "--coordinator", "http://127.0.0.1:1"]);
    assert!(
        err.contains(unknown) && !err.contains("connecting"),
        "{err}"
    );
    assert!(!out.exists() && !db.exists(), "nothing was written");
}

/// Out-of-range arguments are refused before anything runs, naming the flag and the range
/// (`local --level 99` once started a perfect-play search of the start position).
#[test]
fn out_of_range_arguments_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = dir.path().join("b.dat");
    for (args, flag, range) in [
        (vec!["--level", "99"], "--level", "from 0 to 60"),
        (vec!["--workers", "0"], "--workers", "from 1 to 4096"),
        (vec!["--depth", "61"], "--depth", "from 1 to 60"),
        (vec!["--deviate", "2,99"], "--deviate", "from 0 to 65"),
        (vec!["--enhance=-1,4"], "--enhance", "from 0 to 129"),
        (vec!["--lookahead", "100"], "--lookahead", "from 0 to 64"),
        (
            vec!["--games", "/no/such/games.txt"],
            "--games",
            "no such file",
        ),
        (
            vec!["--eval", "/no/such/eval.dat"],
            "--eval",
            "no such file",
        ),
    ] {
        let o = Command::new(BIN)
            .args(["local", "--db", s(&db), "--out", s(&out), "--quiet"])
            .args(&args)
            .output()
            .expect("run local");
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(flag) && err.contains(range), "{err}");
        assert!(!db.exists() && !out.exists(), "nothing was created");
    }
    let o = Command::new(BIN)
        .args([
            "local",
            "--db",
            s(&db),
            "--quiet",
            "--out",
            "/no/such/dir/b.dat",
        ])
        .output()
        .expect("run local");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--out") && err.contains("no such directory"));
    assert_eq!(err.lines().count(), 1, "{err}");
    for (args, range) in [
        (vec!["new", "4", "0"], "from 1 to 60"),
        (vec!["deviate", "2", "66"], "from 0 to 65"),
        (vec!["enhance", "2", "130"], "from 0 to 129"),
        (vec!["fill", "0"], "from 1 to 61"),
        (vec!["depth", "0"], "from 1 to 60"),
        (vec!["upgrade", "0"], "from 1 to 60"),
        (vec!["upgrade", "8", "--error=-1"], "from 0 to 129"),
        (vec!["fix", "--threads", "0"], "from 1 to 4096"),
        (vec!["import", "/no/such/book.dat"], "no such file"),
    ] {
        let mut a = args.clone();
        a.extend(["--db", s(&db)]);
        let err = fails(&a);
        assert!(err.contains(range), "{args:?}: {err}");
    }
    assert!(!db.exists());
    // A missing book is one error naming the directory and how to create a book there.
    let err = fails(&["info", "--db", s(&db)]);
    assert!(
        err.contains(s(&db)) && err.contains("no book here") && err.contains("book new --db"),
        "{err}"
    );
    assert!(!db.exists(), "a mistyped --db leaves nothing behind");
}

/// `book synth` is deterministic for a seed and size, and its book survives import (the base
/// file) and export unchanged.
#[test]
fn synthetic_books_are_deterministic_and_round_trip_through_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (
        dir.path().join("a.dat"),
        dir.path().join("b.dat"),
        dir.path().join("c.dat"),
    );
    let synth = |seed: &str, out: &Path| {
        ok(&[
            "synth",
            "--positions",
            "2000",
            "--plies",
            "20",
            "--seed",
            seed,
            s(out),
        ])
    };
    let said = synth("5", &a);
    assert!(said.starts_with("wrote 20"), "{said}");
    synth("5", &b);
    synth("6", &c);
    let dump = |p: &Path| without_date(&ok(&["dump", s(p)]));
    assert_eq!(dump(&a), dump(&b));
    assert_ne!(dump(&a), dump(&c));
    let db = dir.path().join("db");
    ok(&["import", s(&a), "--db", s(&db)]);
    assert_eq!(store_dump(&db, dir.path()), dump(&a));
}
