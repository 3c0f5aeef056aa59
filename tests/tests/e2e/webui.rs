//! The web UI in a real headless Chromium (Debian's `chromium`, driven over the DevTools
//! protocol) against a real coordinator process (sled store on disk) and two real worker
//! processes over gRPC: the overview's numbers change while the workers run, the workers table
//! lists both workers (one named `<script>alert(1)</script>`, shown as text), the explorer walks
//! three moves by clicking and shows what `book show` shows, and a pasted transcript lands on
//! its position. Screenshots go to `target/tmp/webui/`.
//!
//! Without Chromium the test skips with a message, unless `BOOKFARM_REQUIRE_SHARED` is set (CI,
//! whose `.ci/run` installs it), where it fails.

use bookfarm_book::explore::principal_variation;
use bookfarm_book::{MemBook, accuracy, query};
use bookfarm_engine::formats::transcript::parse_transcript;
use bookfarm_engine::{Board, Move, Square};
use bookfarm_proto::pb;
use bookfarm_tests::*;
use headless_chrome::protocol::cdp::{Emulation, Page};
use headless_chrome::{Browser, LaunchOptions, Tab};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const COORD: &str = env!("CARGO_BIN_EXE_bft-coordinator");
const WORKER: &str = env!("CARGO_BIN_EXE_bft-worker");
const LIMIT: Duration = Duration::from_secs(120);
const EVIL: &str = "<script>alert(1)</script>";

/// A headless Chromium, or `None` (skipped) where there is none and CI does not require it.
fn browser() -> Option<Browser> {
    let required = std::env::var_os("BOOKFARM_REQUIRE_SHARED").is_some();
    let exe = match headless_chrome::browser::default_executable() {
        Ok(p) => p,
        Err(e) if required => panic!("no Chromium ({e}); install Debian's chromium package"),
        Err(e) => {
            eprintln!("skipped: no Chromium to drive ({e}); `apt-get install chromium` runs it");
            return None;
        }
    };
    let opts = LaunchOptions::default_builder()
        .path(Some(exe.clone()))
        // CI runs as root, where Chromium's sandbox cannot start.
        .sandbox(false)
        .window_size(Some((1300, 1000)))
        .idle_browser_timeout(Duration::from_secs(300))
        .build()
        .expect("launch options");
    match Browser::new(opts) {
        Ok(b) => Some(b),
        Err(e) if required => panic!("Chromium {} does not start: {e}", exe.display()),
        Err(e) => {
            eprintln!("skipped: Chromium {} does not start: {e}", exe.display());
            None
        }
    }
}

/// The value of a JavaScript expression (primitives only).
fn js(tab: &Tab, expr: &str) -> serde_json::Value {
    tab.evaluate(expr, false)
        .unwrap_or_else(|e| panic!("evaluating {expr}: {e}"))
        .value
        .unwrap_or(serde_json::Value::Null)
}

fn js_str(tab: &Tab, expr: &str) -> String {
    match js(tab, expr) {
        serde_json::Value::String(s) => s,
        v => v.to_string(),
    }
}

/// Poll a JavaScript condition until it holds (panics after `limit`, with the page's URL,
/// connection state and any error it shows).
fn wait_js(tab: &Tab, cond: &str, limit: Duration) {
    let t0 = Instant::now();
    while js(tab, cond) != serde_json::Value::Bool(true) {
        if t0.elapsed() > limit {
            let state = js_str(
                tab,
                "JSON.stringify({url: location.href, \
                 conn: (document.getElementById('conn') || {}).textContent, \
                 error: (document.getElementById('error') || {}).textContent, \
                 moves: (document.getElementById('board') || {dataset: {}}).dataset.moves, \
                 legal: [...document.querySelectorAll('.cell.legal')].map(c => c.dataset.sq)})",
            );
            panic!("not reached within {limit:?}: {cond}; page: {state}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn screenshot(tab: &Tab, dir: &Path, name: &str) {
    let png = tab
        .capture_screenshot(Page::CaptureScreenshotFormatOption::Png, None, None, true)
        .expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(dir.join(name), png).expect("writing the screenshot");
}

fn open(tab: &Arc<Tab>, url: &str) {
    tab.navigate_to(url)
        .and_then(|t| t.wait_until_navigated())
        .unwrap_or_else(|e| panic!("{url} did not finish loading: {e}"));
}

/// `book show`'s facts of a position: level, best score and bounds, the book moves as
/// (move, score, leaf) in its order, and the incomplete lines.
#[derive(Debug, PartialEq)]
struct Shown {
    level: i64,
    best: Vec<i64>,
    moves: Vec<(String, i64, bool)>,
    incomplete: i64,
}

fn numbers(s: &str) -> Vec<i64> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+'))
        .filter_map(|t| t.trim_start_matches('+').parse().ok())
        .collect()
}

/// Parse `book show`'s text.
fn parse_show(text: &str) -> Shown {
    let line = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(p))
            .unwrap_or_else(|| panic!("no {p} in {text}"))
            .to_string()
    };
    let moves = line("Moves:")
        .split_whitespace()
        .map(|t| {
            let leaf = t.starts_with('<');
            let (mv, score) = t[1..t.len() - 1].split_once(':').expect("move:score");
            let mv = if mv.eq_ignore_ascii_case("pa") {
                "pass".to_string()
            } else {
                mv.to_ascii_lowercase()
            };
            (
                mv,
                score.trim_start_matches('+').parse().expect("score"),
                leaf,
            )
        })
        .collect();
    Shown {
        level: numbers(&line("Level:"))[0],
        best: numbers(&line("Best score:")),
        moves,
        incomplete: text
            .lines()
            .find(|l| l.contains("incomplete lines"))
            .map(numbers)
            .and_then(|n| n.first().copied())
            .unwrap_or_else(|| panic!("no incomplete lines in {text}")),
    }
}

/// What the explorer page shows now, in the same terms.
fn explorer_shows(tab: &Tab) -> Shown {
    // The book moves are the links and the leaf (the other legal moves follow them).
    let rows = js_str(
        tab,
        "JSON.stringify([...document.querySelectorAll('#moves tbody tr')]\
         .filter(r => r.dataset.kind === 'link' || r.dataset.kind === 'leaf').map(r => \
         [r.dataset.move, Number(r.dataset.value), r.dataset.kind === 'leaf']))",
    );
    let moves: Vec<(String, i64, bool)> = serde_json::from_str(&rows).expect("rows");
    let wdl = numbers(&js_str(tab, "document.getElementById('wdl').textContent"));
    let lines = numbers(&js_str(tab, "document.getElementById('lines').textContent"))[0];
    Shown {
        level: numbers(&js_str(tab, "document.getElementById('level').textContent"))[0],
        best: numbers(&js_str(tab, "document.getElementById('best').textContent")),
        moves,
        incomplete: lines - wdl.iter().sum::<i64>(),
    }
}

/// Umigame numbers (Black's, White's) of `board` with `black` to move under Egaroucid's default
/// options (the best moves only, the whole book), written out as the plain recursion: a
/// position outside the book, or without a book move, is one line for each; the side to move
/// takes its cheapest best move, the other side must know them all. A position that must pass
/// is the position after its pass.
fn umigame_brute(book: &MemBook, board: Board, black: bool) -> (u64, u64) {
    let in_book = |b: &Board| book.probe(b).is_some();
    let passed = board.must_pass();
    if !(in_book(&board) || (passed && in_book(&board.pass()))) {
        return (1, 1);
    }
    let (board, black) = if passed {
        (board.pass(), !black)
    } else {
        (board, black)
    };
    let value = |b: &Board| book.probe(b).map(|id| i32::from(book.score(id).value));
    let mut children = Vec::new();
    for s in board.legal_squares() {
        let child = board.next_unchecked(Move::Square(s));
        // The child's value from the mover: minus the child's, or the value after its pass.
        let v = if child.moves() == 0 && !child.is_game_over() {
            value(&child.pass()).or_else(|| value(&child).map(|v| -v))
        } else {
            value(&child).map(|v| -v).or_else(|| value(&child.pass()))
        };
        if let Some(v) = v {
            children.push((child, v));
        }
    }
    let Some(best) = children.iter().map(|c| c.1).max() else {
        return (1, 1);
    };
    let counts: Vec<(u64, u64)> = children
        .iter()
        .filter(|c| c.1 == best)
        .map(|c| umigame_brute(book, c.0, !black))
        .collect();
    let min = |f: fn(&(u64, u64)) -> u64| counts.iter().map(f).min().expect("a best move");
    let sum = |f: fn(&(u64, u64)) -> u64| counts.iter().map(f).sum::<u64>();
    if black {
        (min(|c| c.0), sum(|c| c.1))
    } else {
        (sum(|c| c.0), min(|c| c.1))
    }
}

/// The explorer's rows: (move, value, kind, grade, Black's umigame, White's umigame).
fn explorer_rows(tab: &Tab) -> Vec<(String, Option<i64>, String, String, String, String)> {
    let rows = js_str(
        tab,
        "JSON.stringify([...document.querySelectorAll('#moves tbody tr')].map(r => \
         [r.dataset.move, r.dataset.value === '' ? null : Number(r.dataset.value), r.dataset.kind, \
          r.dataset.accuracy, r.dataset.umiBlack, r.dataset.umiWhite]))",
    );
    serde_json::from_str(&rows).expect("rows")
}

/// The board and side to move after a transcript.
fn after(line: &str) -> (Board, bool) {
    parse_transcript(line)
        .and_then(|g| g.final_position().map_err(Into::into))
        .expect("legal line")
}

fn click(tab: &Tab, selector: &str) {
    tab.find_element(selector)
        .and_then(|c| c.click().map(|_| ()))
        .unwrap_or_else(|e| panic!("clicking {selector}: {e}"));
}

fn wait_moves(tab: &Tab, line: &str) {
    wait_js(
        tab,
        &format!("document.getElementById('board').dataset.moves === '{line}'"),
        LIMIT,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_ui_in_headless_chromium() {
    let Some(eval) = eval_path() else { return };
    let Some(browser) = browser() else { return };
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("webui");
    std::fs::create_dir_all(&shots).expect("screenshot folder");
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 4, 14);
    let (port, http) = (free_port(), free_port());
    let _c = Proc::spawn(
        COORD,
        &serve_args(
            dir.path(),
            port,
            &[
                "--http",
                &format!("127.0.0.1:{http}"),
                "--eval-hash",
                &eval_hash(&eval),
            ],
        ),
    );
    let mut a = admin(port).await;
    let base = format!("http://127.0.0.1:{http}");
    let tab = browser.new_tab().expect("tab");
    tab.set_default_timeout(Duration::from_secs(30));
    // Count alert() calls in every page (an injected script would call it).
    tab.call_method(Page::AddScriptToEvaluateOnNewDocument {
        source: "window.__alerts = 0; window.alert = () => { window.__alerts += 1; }; \
                 window.__fetches = 0; const f = window.fetch; \
                 window.fetch = (...a) => { window.__fetches += 1; return f(...a); };"
            .into(),
        world_name: None,
        include_command_line_api: None,
        run_immediately: None,
    })
    .expect("alert counter");

    // Overview, opened before the workers start: its numbers change while they run.
    open(&tab, &base);
    wait_js(
        &tab,
        "document.getElementById('positions').dataset.value === '1'",
        LIMIT,
    );
    start_deviate(&mut a, 2, 4).await;
    let _w1 = Proc::spawn(WORKER, &worker_args(port, &eval, "w1"));
    let _w2 = Proc::spawn(WORKER, &worker_args(port, &eval, EVIL));
    let mut seen = BTreeSet::new();
    let mut running = false;
    let t0 = Instant::now();
    // Two different counts while the state is "running": the page follows the farm live (a
    // third was asked before, but the build now ends within a few of the page's refreshes).
    while seen.len() < 2 {
        assert!(
            t0.elapsed() < LIMIT,
            "the overview's numbers did not move: {seen:?}"
        );
        let completed = js_str(&tab, "document.getElementById('completed').dataset.value");
        let state = js_str(&tab, "document.getElementById('state').dataset.value");
        if state == "running" && completed != "0" && completed != "undefined" {
            running = true;
            seen.insert(completed.parse::<u64>().expect("a count"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(running);
    wait_js(
        &tab,
        "document.getElementById('workers').textContent.startsWith('2 ')",
        LIMIT,
    );
    screenshot(&tab, &shots, "overview.png");

    // Workers: both listed, the hostile name as text (no element, no alert), sortable, filtered.
    open(&tab, &format!("{base}/workers"));
    wait_js(
        &tab,
        "document.querySelectorAll('#workers tbody tr').length === 2",
        LIMIT,
    );
    let names = "JSON.stringify([...document.querySelectorAll('#workers tbody td[data-key=name]')]\
                 .map(td => td.textContent))";
    let listed: Vec<String> = serde_json::from_str(&js_str(&tab, names)).unwrap();
    assert_eq!(listed, [EVIL, "w1"], "sorted by name");
    let standings = "JSON.stringify([...document.querySelectorAll('#workers tbody td[data-key=standing]')]\
                     .map(td => td.textContent))";
    let shown: Vec<String> = serde_json::from_str(&js_str(&tab, standings)).unwrap();
    assert_eq!(
        shown,
        ["trusted", "trusted"],
        "each worker's standing beside its credit (anonymous loopback workers are trusted)"
    );
    assert_eq!(
        js(&tab, "document.querySelectorAll('#workers script').length"),
        0
    );
    assert!(
        js_str(&tab, "document.querySelector('#workers tbody').innerHTML")
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;")
    );
    tab.find_element("#workers th[data-key=name]")
        .and_then(|th| th.click().map(|_| ()))
        .expect("sorting by name");
    wait_js(
        &tab,
        "document.querySelector('#workers tbody td[data-key=name]').textContent === 'w1'",
        LIMIT,
    );
    tab.find_element("#filter")
        .and_then(|f| f.click().map(|_| ()))
        .expect("filter");
    tab.type_str("script").expect("typing a filter");
    wait_js(
        &tab,
        "document.querySelectorAll('#workers tbody tr').length === 1",
        LIMIT,
    );
    wait_js(
        &tab,
        "document.querySelectorAll('#contributors tbody tr').length === 2",
        LIMIT,
    );
    screenshot(&tab, &shots, "workers.png");
    assert_eq!(js(&tab, "window.__alerts"), 0, "no script ran");

    // Explorer, once the book is built: three clicked moves show what `book show` shows.
    wait_for(&mut a, LIMIT, |s| {
        s.state == pb::ExpansionState::Done as i32
    })
    .await;
    let book = check_book(&export(&mut a).await);
    open(&tab, &format!("{base}/explorer"));
    wait_js(
        &tab,
        "document.getElementById('board').dataset.moves === ''",
        LIMIT,
    );
    let mut line = String::new();
    for mv in ["f5", "d6", "c3"] {
        tab.find_element(&format!(".cell[data-sq={mv}]"))
            .and_then(|c| c.click().map(|_| ()))
            .unwrap_or_else(|e| panic!("clicking {mv}: {e}"));
        line.push_str(mv);
        wait_js(
            &tab,
            &format!("document.getElementById('board').dataset.moves === '{line}'"),
            LIMIT,
        );
        let (board, _) = parse_transcript(&line)
            .and_then(|g| g.final_position().map_err(Into::into))
            .expect("legal line");
        let text = query::show(&book, &board).expect("the line is in the book");
        assert_eq!(explorer_shows(&tab), parse_show(&text), "after {line}");
    }
    screenshot(&tab, &shots, "explorer.png");

    // A pasted transcript lands on its position.
    let pasted = "f5d6c3d3c4f4";
    tab.find_element("#transcript")
        .and_then(|t| t.click().map(|_| ()))
        .expect("transcript box");
    tab.type_str(pasted).expect("typing the transcript");
    tab.press_key("Enter").expect("submitting");
    wait_js(
        &tab,
        &format!("document.getElementById('board').dataset.moves === '{pasted}'"),
        LIMIT,
    );
    let (board, black) = parse_transcript(pasted)
        .expect("legal")
        .final_position()
        .expect("legal");
    let want = &query::board_text(&board, black)[..64];
    assert_eq!(
        js_str(&tab, "document.getElementById('board').dataset.board"),
        want
    );
    assert_eq!(
        js_str(&tab, "document.getElementById('ply').dataset.value"),
        "6"
    );
    assert_eq!(
        js_str(&tab, "document.getElementById('to_move').textContent"),
        if black { "Black" } else { "White" }
    );
    screenshot(&tab, &shots, "explorer-pasted.png");

    // Per-move values: every legal move with its value or "not in book", its grade (the
    // book crate's `book accuracy`) and its umigame numbers, which a plain recursion over the
    // exported book computes again here.
    for line in ["", "f5", "f5d6"] {
        open(&tab, &format!("{base}/explorer?line={line}"));
        wait_moves(&tab, line);
        let (board, black) = after(line);
        let rows = explorer_rows(&tab);
        assert_eq!(rows.len(), board.moves().count_ones() as usize, "{line}");
        let mut counted = 0;
        for (mv, value, kind, grade, umi_b, umi_w) in rows {
            let child = board.next_unchecked(Move::Square(Square::parse(&mv).expect("square")));
            if kind == "link" {
                let id = book.probe(&child).expect("a linked child is in the book");
                assert_eq!(value, Some(-i64::from(book.score(id).value)), "{line} {mv}");
                let (b, w) = umigame_brute(&book, child, !black);
                assert_eq!(
                    (umi_b, umi_w),
                    (b.to_string(), w.to_string()),
                    "{line} {mv}"
                );
                let want = accuracy::accuracy(&book, &child).expect("graded");
                assert_eq!(grade, want.to_string(), "{line} {mv}");
                counted += usize::from(b > 1 || w > 1);
            } else if kind == "out" {
                assert_eq!(value, None, "{line} {mv}");
                assert!(book.probe(&child).is_none(), "{line} {mv}");
                assert_eq!((umi_b.as_str(), umi_w.as_str()), ("–", "–"));
            }
        }
        if line.is_empty() {
            assert!(
                counted > 0,
                "the book is deep enough for umigame numbers above 1"
            );
            let (b, w) = umigame_brute(&book, board, black);
            assert_eq!(
                js_str(&tab, "document.getElementById('umigame').textContent"),
                format!("{b} / {w}")
            );
        }
    }

    // The best line: written, numbered on the board, stepped with the keyboard.
    open(&tab, &format!("{base}/explorer?line=f5"));
    wait_moves(&tab, "f5");
    let (board, _) = after("f5");
    let pv = principal_variation(&book, &board);
    assert!(!pv.is_empty());
    let pv_text: String = pv.iter().map(|&m| transcript_move(m)).collect();
    assert_eq!(
        js_str(&tab, "document.getElementById('pv').dataset.moves"),
        pv_text
    );
    let first = transcript_move(pv[0]);
    if first != "pa" {
        assert_eq!(
            js_str(
                &tab,
                &format!("document.querySelector('.cell[data-sq={first}] .pvn').textContent")
            ),
            "1"
        );
    }
    tab.press_key("ArrowRight").expect("a key");
    wait_moves(&tab, &format!("f5{first}"));
    tab.press_key("ArrowLeft").expect("a key");
    wait_moves(&tab, "f5");
    tab.press_key("End").expect("a key");
    wait_moves(&tab, &format!("f5{pv_text}"));
    tab.press_key("Home").expect("a key");
    wait_moves(&tab, "");

    // A pasted game that follows the best line, then leaves the book: its graph and the move
    // where it left.
    let start_pv = principal_variation(&book, &Board::start());
    let mut game = String::new();
    let mut board = Board::start();
    let mut left = None;
    for (i, &mv) in start_pv.iter().enumerate() {
        // A move outside the book that is not its leaf either (`book show`'s moves): no value.
        let shown: Vec<Move> = query::book_moves(&book, &board)
            .map(|(_, m)| m.into_iter().map(|m| m.mv).collect())
            .unwrap_or_default();
        let out = board
            .legal_squares()
            .map(|s| (board.next_unchecked(Move::Square(s)), s))
            .find(|(c, s)| {
                book.probe(c).is_none()
                    && book.probe(&c.pass()).is_none()
                    && !shown.contains(&Move::Square(*s))
            });
        if let (Some((_, s)), true) = (out, i > 0) {
            game.push_str(&s.to_string().to_ascii_lowercase());
            left = Some(i);
            break;
        }
        game.push_str(&transcript_move(mv));
        board = board.next_unchecked(mv);
    }
    let left = left.expect("a move out of the book along the best line");
    click(&tab, "#transcript");
    tab.type_str(&game).expect("typing the game");
    tab.press_key("Enter").expect("submitting");
    wait_moves(&tab, &game);
    wait_js(
        &tab,
        "!document.getElementById('game').hidden && \
         document.querySelectorAll('#game-plies tbody tr').length > 0",
        LIMIT,
    );
    assert_eq!(
        js_str(
            &tab,
            "document.getElementById('game-summary').dataset.leftBook"
        ),
        left.to_string()
    );
    assert_eq!(
        js(
            &tab,
            "document.querySelectorAll('#game-plies tbody tr').length"
        ),
        left as u64 + 1
    );
    assert_eq!(
        js_str(
            &tab,
            "document.querySelector('#game-plies tr.left').dataset.index"
        ),
        left.to_string()
    );
    let losses: Vec<String> = serde_json::from_str(&js_str(
        &tab,
        "JSON.stringify([...document.querySelectorAll('#game-plies tbody tr')].map(r => r.dataset.loss))",
    ))
    .unwrap();
    assert!(
        losses[..left].iter().all(|l| l == "0"),
        "the best line loses nothing: {losses:?}"
    );
    assert_eq!(
        losses[left], "",
        "the move out of the book has no known loss"
    );
    assert!(
        js(
            &tab,
            "document.querySelectorAll('#chart-game canvas').length"
        )
        .as_u64()
        .is_some_and(|n| n >= 1),
        "the graph is drawn"
    );
    js(&tab, "document.getElementById('game').scrollIntoView()");
    screenshot(&tab, &shots, "explorer-game.png");

    // The URL round trip: a shared link opens its line, each step is a history entry.
    open(&tab, &format!("{base}/explorer?line=f5d6"));
    wait_moves(&tab, "f5d6");
    let third = after("f5d6")
        .0
        .legal_squares()
        .next()
        .expect("a legal move")
        .to_string()
        .to_ascii_lowercase();
    click(&tab, &format!(".cell[data-sq={third}]"));
    wait_moves(&tab, &format!("f5d6{third}"));
    assert_eq!(
        js_str(&tab, "location.search"),
        format!("?line=f5d6{third}")
    );
    js(&tab, "history.back()");
    wait_moves(&tab, "f5d6");
    assert_eq!(js_str(&tab, "location.search"), "?line=f5d6");
    js(&tab, "history.forward()");
    wait_moves(&tab, &format!("f5d6{third}"));

    // Settled (the book is done, every number exact): no request for several poll periods.
    let settled = "(() => { const n = window.__fetches; return new Promise(r => \
                   setTimeout(() => r(window.__fetches - n), 4500)); })()";
    let idle = tab
        .evaluate(settled, true)
        .expect("counting requests")
        .value
        .expect("a count");
    assert_eq!(idle, 0, "no polling while nothing changes");

    // Phone width: the board fits, nothing scrolls sideways.
    open(&tab, &format!("{base}/explorer?line=f5d6c3"));
    wait_moves(&tab, "f5d6c3");
    screenshot(&tab, &shots, "explorer-desktop.png");
    tab.call_method(Emulation::SetDeviceMetricsOverride {
        width: 390,
        height: 844,
        device_scale_factor: 2.0,
        mobile: true,
        scale: None,
        screen_width: None,
        screen_height: None,
        position_x: None,
        position_y: None,
        dont_set_visible_size: None,
        screen_orientation: None,
        viewport: None,
        display_feature: None,
        device_posture: None,
    })
    .expect("phone width");
    open(&tab, &format!("{base}/explorer?line=f5d6c3"));
    wait_moves(&tab, "f5d6c3");
    assert_eq!(
        js(
            &tab,
            "document.documentElement.scrollWidth <= window.innerWidth && \
             document.getElementById('board').getBoundingClientRect().right <= window.innerWidth"
        ),
        true,
        "the page fits a phone's width"
    );
    screenshot(&tab, &shots, "explorer-phone.png");
    assert_eq!(js(&tab, "window.__alerts"), 0, "no script ran");
}

/// The events page during a run with a liar (a real coordinator with a verifier, a trusted
/// honest worker and a trusted worker that always lies, over gRPC): the lie caught, the liar
/// blocked and the book replayed appear as rows, as text; the group checkboxes and the text
/// filter narrow the rows (and the URL keeps them); the workers page shows the liar's invalid
/// results and its blocked credential. Screenshots: `target/tmp/webui/events-liar.png`,
/// `events-trust-filtered.png`, `workers-liar.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_page_shows_a_liar_caught_blocked_and_replayed() {
    const ADMIN: &str = "admin-secret";
    let Some(eval) = eval_path() else { return };
    let Some(browser) = browser() else { return };
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("webui");
    std::fs::create_dir_all(&shots).expect("screenshot folder");
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 12);
    let honest = add_credential(dir.path(), "op1", "op", true);
    let liar = add_credential(dir.path(), "mallory", "mallory", true);
    let (port, http) = (free_port(), free_port());
    let args: Vec<String> = [
        "--db",
        &dir.path().display().to_string(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--http",
        &format!("127.0.0.1:{http}"),
        "--admin-token",
        ADMIN,
        "--eval-hash",
        &eval_hash(&eval),
        "--eval",
        &eval.display().to_string(),
        "--verify-threads",
        "1",
        // Every result applied on one trusted word is spot-checked: the first lie is caught.
        "--spot-floor",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _c = Proc::spawn(COORD, &args);
    let mut a = admin_as(port, ADMIN).await;
    let base = format!("http://127.0.0.1:{http}");
    start_deviate(&mut a, 2, 4).await;
    let mut w = worker_args(port, &eval, "op1-host");
    w.extend(["--token".into(), honest]);
    let _honest = Proc::spawn(WORKER, &w);
    let mut w = worker_args(port, &eval, "mallory-host");
    w.extend(["--token".into(), liar, "--lie".into(), "always".into()]);
    let _liar = Proc::spawn(WORKER, &w);

    let tab = browser.new_tab().expect("tab");
    tab.set_default_timeout(Duration::from_secs(30));
    tab.call_method(Page::AddScriptToEvaluateOnNewDocument {
        source: "window.__alerts = 0; window.alert = () => { window.__alerts += 1; };".into(),
        world_name: None,
        include_command_line_api: None,
        run_immediately: None,
    })
    .expect("alert counter");
    open(&tab, &format!("{base}/events"));
    // The page follows the log live: the catch, the block and the replay arrive as rows.
    for kind in [
        "lie_caught",
        "contributor_blocked",
        "replay",
        "worker_joined",
    ] {
        wait_js(
            &tab,
            &format!("document.querySelector('#events tbody tr[data-kind={kind}]') !== null"),
            LIMIT,
        );
    }
    let row = |kind: &str, key: &str| {
        js_str(
            &tab,
            &format!(
                "document.querySelector('#events tbody tr[data-kind={kind}] td[data-key={key}]').textContent"
            ),
        )
    };
    assert_eq!(row("lie_caught", "subject"), "mallory");
    assert_eq!(row("contributor_blocked", "subject"), "mallory");
    assert!(row("contributor_blocked", "detail").contains("invalid results"));
    assert!(row("replay", "detail").contains("without"));
    screenshot(&tab, &shots, "events-liar.png");

    // Only the trust group, then only what names the honest worker's owner.
    for group in ["programs", "credentials", "workers", "store"] {
        tab.find_element(&format!("#event-filters input[value={group}]"))
            .and_then(|b| b.click().map(|_| ()))
            .unwrap_or_else(|e| panic!("unchecking {group}: {e}"));
    }
    let only_trust = "[...document.querySelectorAll('#events tbody tr')].length > 0 && \
                      [...document.querySelectorAll('#events tbody tr')].every(tr => \
                      ['lie_caught', 'contributor_blocked', 'replay', 'quarantined'].includes(tr.dataset.kind))";
    wait_js(&tab, only_trust, LIMIT);
    assert!(js_str(&tab, "location.search").contains("kind=trust"));
    screenshot(&tab, &shots, "events-trust-filtered.png");
    tab.find_element("#event-q")
        .and_then(|q| q.click().map(|_| ()))
        .expect("search box");
    tab.type_str("mallory").expect("typing a filter");
    wait_js(
        &tab,
        "[...document.querySelectorAll('#events tbody tr')].every(tr => \
         tr.textContent.toLowerCase().includes('mallory')) && location.search.includes('q=mallory')",
        LIMIT,
    );
    tab.find_element("#event-q")
        .and_then(|q| q.click().map(|_| ()))
        .expect("search box");
    tab.type_str("-nobody").expect("typing a filter");
    wait_js(
        &tab,
        "document.querySelectorAll('#events tbody tr').length === 0",
        LIMIT,
    );
    // Reopened from its URL, the filter holds.
    open(&tab, &format!("{base}/events?kind=workers&q=op1"));
    wait_js(
        &tab,
        "document.querySelectorAll('#events tbody tr').length > 0 && \
         [...document.querySelectorAll('#events tbody tr')].every(tr => tr.dataset.kind.startsWith('worker_'))",
        LIMIT,
    );
    assert_eq!(
        js(
            &tab,
            "document.querySelector('#event-filters input[value=trust]').checked"
        ),
        false
    );

    // The workers page: the liar's owner with invalid results and a blocked credential; the
    // honest owner's machine connected.
    open(&tab, &format!("{base}/workers"));
    let cell = |name: &str, key: &str| {
        format!(
            "[...document.querySelectorAll('#contributors tbody tr')].find(tr => \
             tr.children[1].textContent === '{name}')?.querySelector('td[data-key={key}]')?.textContent"
        )
    };
    wait_js(
        &tab,
        &format!("{} === '1'", cell("mallory", "blocked")),
        LIMIT,
    );
    wait_js(
        &tab,
        &format!("Number({}) > 0", cell("mallory", "invalid")),
        LIMIT,
    );
    wait_js(&tab, &format!("{} === '1'", cell("op", "machines")), LIMIT);
    // The trust cards: the liar's says blocked, why, and what was caught; the honest
    // credential's is trusted, credited and not blocked; the farm's figures count the lies.
    let card = |name: &str, key: &str| {
        format!(
            "document.querySelector('#trust-cards .trust-card[data-name=\"{name}\"] \
             [data-key={key}]')?.textContent"
        )
    };
    wait_js(
        &tab,
        &format!("{} === 'blocked'", card("mallory", "standing")),
        LIMIT,
    );
    let figures = js_str(&tab, &card("mallory", "figures"));
    let caught = figures
        .split(" · ")
        .find_map(|f| f.strip_prefix("caught "))
        .and_then(|n| n.replace(',', "").parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no caught count in {figures:?}"));
    assert!(
        caught > 0,
        "the liar's card counts its caught lies: {figures:?}"
    );
    let reason = js_str(&tab, &card("mallory", "reason"));
    assert!(
        reason.starts_with("blocked") && reason.len() > "blocked: ".len(),
        "the liar's card says why it is blocked: {reason:?}"
    );
    assert_eq!(
        reason.matches("blocked").count(),
        1,
        "the reason says blocked once: {reason:?}"
    );
    wait_js(
        &tab,
        &format!("{}?.startsWith('trusted')", card("op1", "standing")),
        LIMIT,
    );
    assert_eq!(
        js(&tab, &format!("{} === undefined", card("op1", "reason"))),
        true,
        "the honest credential is not blocked"
    );
    assert!(
        numbers(&js_str(
            &tab,
            "document.getElementById('trust-invalid').textContent"
        ))[0]
            > 0,
        "the farm's card counts the lies caught"
    );
    screenshot(&tab, &shots, "workers-liar.png");
    assert_eq!(js(&tab, "window.__alerts"), 0, "no script ran");
}

/// A move as the explorer's URLs write it.
fn transcript_move(m: Move) -> String {
    match m {
        Move::Pass => "pa".to_string(),
        m => m.to_string().to_ascii_lowercase(),
    }
}

/// The overview's Programs table in headless Chromium: the queue in run order (the running
/// program first, then the queued ones, then the ended ones, most recent first), each program's
/// state and root, and a cancel shown within the page's refresh, without reloading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_table_shows_the_queue_and_a_cancel() {
    use pb::start_expansion_request::Selector as S;
    let Some(eval) = eval_path() else { return };
    let Some(browser) = browser() else { return };
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("webui");
    std::fs::create_dir_all(&shots).expect("screenshot folder");
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path(), 2, 12);
    let (port, http) = (free_port(), free_port());
    // No worker: `book new`'s program (#1) keeps running and the others wait behind it.
    let _c = Proc::spawn(
        COORD,
        &serve_args(
            dir.path(),
            port,
            &[
                "--http",
                &format!("127.0.0.1:{http}"),
                "--eval-hash",
                &eval_hash(&eval),
            ],
        ),
    );
    let mut a = admin(port).await;
    let deviate = S::Deviate(pb::Deviate {
        relative_error: 2,
        absolute_error: 4,
    });
    assert_eq!(queue(&mut a, deviate, "").await, 2);
    assert_eq!(queue(&mut a, S::Play(pb::Play {}), "f5d6").await, 3);
    assert_eq!(queue(&mut a, S::Extend(pb::Extend {}), "f5f6").await, 4);
    a.cancel_program(pb::CancelProgramRequest { id: 3 })
        .await
        .expect("cancel #3");

    let tab = browser.new_tab().expect("tab");
    tab.set_default_timeout(Duration::from_secs(30));
    open(&tab, &format!("http://127.0.0.1:{http}"));
    let rows = "JSON.stringify([...document.querySelectorAll('#programs tbody tr.program')]\
                .map(tr => [Number(tr.dataset.id), tr.cells[2].textContent, tr.cells[1].textContent]))";
    let table = |tab: &Tab| -> Vec<(u64, String, String)> {
        serde_json::from_str(&js_str(tab, rows)).expect("rows")
    };
    wait_js(
        &tab,
        "document.querySelectorAll('#programs tbody tr.program').length === 4",
        LIMIT,
    );
    let shown = table(&tab);
    let order: Vec<(u64, &str)> = shown.iter().map(|r| (r.0, r.1.as_str())).collect();
    assert_eq!(
        order,
        [
            (1, "running"),
            (2, "queued"),
            (4, "queued"),
            (3, "cancelled")
        ],
        "{shown:?}"
    );
    assert!(shown[1].2.starts_with("deviate"), "{shown:?}");
    assert!(shown[2].2.contains("from f5f6"), "{shown:?}");
    assert!(shown[3].2.contains("from f5d6"), "{shown:?}");
    // The state is also the row's class (what the stylesheet colours).
    assert_eq!(
        js_str(
            &tab,
            "document.querySelector('#programs tr.program[data-id=\"3\"]').className"
        ),
        "program cancelled"
    );
    screenshot(&tab, &shots, "programs.png");

    // A cancel while the page is open: the next refresh moves #2 to the ended programs.
    a.cancel_program(pb::CancelProgramRequest { id: 2 })
        .await
        .expect("cancel #2");
    wait_js(
        &tab,
        "document.querySelector('#programs tr.program[data-id=\"2\"]')?.cells[2].textContent \
         === 'cancelled'",
        LIMIT,
    );
    let order: Vec<(u64, String)> = table(&tab).into_iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        order,
        [
            (1, "running".to_string()),
            (4, "queued".to_string()),
            (2, "cancelled".to_string()),
            (3, "cancelled".to_string())
        ]
    );
    screenshot(&tab, &shots, "programs-cancelled.png");
}
