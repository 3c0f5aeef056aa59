//! The rest of Edax's book commands on the golden books: `book correct`, `book upgrade`,
//! `book analyze`, `book extract` and the book's random move choice.

use bookfarm_book::model::BookHeader;
use bookfarm_book::research::{self, Upgrade};
use bookfarm_book::{Link, MemBook, edax, grow};
use bookfarm_engine::Board;
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchOptions, Searcher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn golden(name: &str) -> Option<PathBuf> {
    bookfarm_engine::testdata::shared_dir_or_skip().map(|d| d.join("golden").join(name))
}

fn golden_book(name: &str) -> Option<MemBook> {
    let bytes = std::fs::read(golden(name)?).expect("read golden book");
    Some(edax::read_book(&bytes).expect("golden book parses"))
}

fn board_after(moves: &str) -> Board {
    let mut b = Board::start();
    for mv in parse_moves(moves).expect("moves") {
        if b.must_pass() {
            b = b.pass();
        }
        b = b.play_move(mv).expect("legal");
    }
    b
}

/// A searcher on Edax's golden evaluation (eval-seed1.dat), as a leaf-search callback.
fn engine() -> Option<impl FnMut(&LeafRequest) -> LeafResult> {
    let eval = golden("eval-seed1.dat")?;
    let eval = Arc::new(bookfarm_engine::eval::Eval::load(eval).expect("eval"));
    let mut searcher = Searcher::with_options(
        eval,
        SearchOptions {
            tt_bits: 14,
            ..SearchOptions::default()
        },
    );
    let abort = AtomicBool::new(false);
    Some(move |r: &LeafRequest| searcher.leaf_search(r, &abort))
}

/// The first game of games-seed7.txt.
fn first_game() -> Option<String> {
    let text = std::fs::read_to_string(golden("games-seed7.txt")?).expect("games");
    Some(text.lines().next().expect("a game").to_string())
}

/// `book correct`: a level-60 book holding the positions at 11 and 10 empties of a game; the
/// 10-empties leaf is corrupted; correct re-solves both exact leaves, reports exactly the
/// corrupted one with its old and new leaf, and restores the solved value.
#[test]
fn correct_re_solves_exact_leaves_and_reports_the_wrong_one() {
    let (Some(game), Some(mut search)) = (first_game(), engine()) else {
        return;
    };
    let moves = parse_moves(&game).expect("game");
    let boards: Vec<Board> = bookfarm_engine::formats::Game::from_moves(moves)
        .expect("legal game")
        .replay()
        .expect("replay");
    let at = |e: u32| *boards.iter().find(|b| b.empties() == e).expect("reached");
    let mut book = MemBook::new(BookHeader::new(60, 60));
    grow::add_board(&mut book, &at(10), &mut search);
    grow::add_board(&mut book, &at(11), &mut search);
    // A midgame position (searched at level 2) is not examined.
    book.header_mut().level = 2;
    grow::add_board(&mut book, &at(40), &mut search);
    let id = book.probe(&at(10)).expect("added");
    let good = book.leaf(id);
    let bad = Link::new(good.score.wrapping_add(20), good.mv);
    book.set_leaf(id, bad);
    let (report, _) = research::correct_command(&mut book, &mut search);
    assert_eq!(report.solved, 2);
    assert_eq!(report.searches, 2);
    assert_eq!(report.corrections.len(), 1);
    let c = report.corrections[0];
    assert_eq!((c.board, c.old, c.new), (book.board(id), bad, good));
    assert_eq!(book.leaf(id), good);
}

/// `book upgrade 4 --error 4` on book-tiny (level 2): every marked leaf is re-searched at level
/// 4 closest to the root first, no level goes down, only positions inside the window change,
/// and a second upgrade has nothing left to do.
#[test]
fn upgrade_raises_levels_and_never_lowers_one() {
    let (Some(book), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let params = Upgrade { level: 4, error: 4 };
    let root = book.find(&Board::start()).expect("root");
    let first = research::upgrade_mark(&book, root, params);
    assert!(!first.is_empty());
    // Closest to the root first: the marked positions come in non-increasing empties.
    assert!(
        first
            .windows(2)
            .all(|w| book.board(w[0]).empties() >= book.board(w[1]).empties())
    );
    let mut up = book.clone();
    let mut requests = Vec::new();
    let r = research::upgrade(&mut up, params, &mut |req: &LeafRequest| {
        requests.push(*req);
        search(req)
    });
    assert!(r.raised >= first.len() && r.rounds >= 2);
    assert!(
        requests.iter().all(|q| q.level == 4),
        "searched at the upgrade level"
    );
    let mut raised = 0;
    for p in book.positions() {
        let q = up.get(&p.board).expect("no position removed");
        assert!(q.level >= p.level, "{}: level lowered", p.board);
        if q.level > p.level {
            raised += 1;
        } else {
            assert_eq!(q.leaf, p.leaf, "{}: untouched leaf", p.board);
        }
    }
    assert_eq!(raised, r.raised);
    assert_eq!(up.len(), book.len());
    let root = up.find(&Board::start()).expect("root");
    assert!(research::upgrade_mark(&up, root, params).is_empty());
    // An upgrade to a level the book already has does nothing.
    let mut same = book.clone();
    let r = research::upgrade(
        &mut same,
        Upgrade {
            level: 2,
            error: 64,
        },
        &mut search,
    );
    assert_eq!((r.raised, r.searches), (0, 0));
}
