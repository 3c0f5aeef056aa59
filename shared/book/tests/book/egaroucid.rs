//! Egaroucid books keep their values: `.egbk3` files laid out as Egaroucid saves them (values,
//! no leaves) import with Egaroucid's value of every position, grow, and are fixed, through
//! borrowed leaves (`bookfarm_book::egbk3`'s module docs).

use crate::common;
use bookfarm_book::driver::run_serial;
use bookfarm_book::egbk3::{self, LEVEL_UNDEFINED, MOVE_UNDEFINED, Record, SCORE_UNDEFINED};
use bookfarm_book::grow::{self, PositionProblem, check_position, is_borrowed};
use bookfarm_book::mem::child_board;
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::schedule::run::{AsyncGrowth, AsyncProgress};
use bookfarm_book::select::{Deviate, DeviatePass, deviate_pass, prepare_root};
use bookfarm_book::{BookFormat, MemBook, NodeId, edax};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use common::{engine, golden_book};
use std::collections::HashMap;

/// The board a link of `board` leads to (canonical).
fn link_child(board: &Board, mv: Move) -> Board {
    match mv {
        Move::Pass => canonical(&board.pass()).0,
        m => child_board(board, m),
    }
}

/// Egaroucid's value of the position `id`: the negamax of its book children only (its leaf is
/// not counted), and at a book end its own search (our leaf score; a finished game's score).
fn egaroucid_value(book: &MemBook, id: NodeId, memo: &mut HashMap<NodeId, i32>) -> i32 {
    if let Some(&v) = memo.get(&id) {
        return v;
    }
    let board = book.board(id);
    let children: Vec<NodeId> = book
        .links(id)
        .filter_map(|l| book.find(&link_child(&board, l.mv)))
        .collect();
    let v = if children.is_empty() {
        i32::from(book.leaf(id).score)
    } else {
        children
            .into_iter()
            .map(|c| -egaroucid_value(book, c, memo))
            .max()
            .unwrap_or(-127)
    };
    memo.insert(id, v);
    v
}

/// One record as Egaroucid's `save_egbk3` writes a position without a leaf.
fn record(board: &Board, value: i32, level: u8) -> Record {
    let (player, opponent, _) = egbk3::representative(board);
    Record {
        player,
        opponent,
        value: value as i8,
        level: level as i8,
        n_lines: 0,
        leaf_value: SCORE_UNDEFINED,
        leaf_move: MOVE_UNDEFINED,
        leaf_level: LEVEL_UNDEFINED,
    }
}

/// `book` as Egaroucid saves its own book (our writer of its layout): every position but the
/// pass positions, under its least symmetric board in Egaroucid's bit order, with Egaroucid's
/// value ([`egaroucid_value`]) and no leaf. Returns the file and the expected values.
fn egaroucid_saved(book: &MemBook) -> (Vec<u8>, HashMap<Board, i32>) {
    let mut memo = HashMap::new();
    let mut records = Vec::new();
    let mut want = HashMap::new();
    for id in book.ids() {
        let b = book.board(id);
        if b.must_pass() {
            continue;
        }
        let v = egaroucid_value(book, id, &mut memo);
        records.push(record(&b, v, book.level(id)));
        want.insert(b, v);
    }
    (egbk3::write(&records), want)
}

/// `book` as Egaroucid's import of an Edax book saves it: every position with its Edax value,
/// and every leaf turned into a child position valued by the leaf's score (no leaves at all).
/// Returns the file and the expected values.
fn egaroucid_imported_from_edax(book: &MemBook) -> (Vec<u8>, HashMap<Board, i32>) {
    let mut records = Vec::new();
    let mut want = HashMap::new();
    for id in book.ids() {
        let b = book.board(id);
        if b.must_pass() {
            continue;
        }
        let v = i32::from(book.score(id).value);
        records.push(record(&b, v, book.level(id)));
        want.insert(b, v);
        let leaf = book.leaf(id);
        if let Move::Square(_) = leaf.mv {
            let mut child = b.next_unchecked(leaf.mv);
            let mut v = -i32::from(leaf.score);
            if child.must_pass() && !child.is_game_over() {
                child = child.pass();
                v = -v;
            }
            let c = canonical(&child).0;
            if book.find(&c).is_none() && !want.contains_key(&c) {
                records.push(record(&c, v, book.level(id)));
                want.insert(c, v);
            }
        }
    }
    (egbk3::write(&records), want)
}

fn borrowed(book: &MemBook) -> usize {
    book.positions().filter(is_borrowed).count()
}

/// Imported values are Egaroucid's, position by position (none ±127), in both layouts.
#[test]
fn an_egaroucid_book_without_leaves_imports_with_its_values() {
    let Some(source) = golden_book("book-small.dat") else {
        return;
    };
    for (layout, (bytes, want)) in [
        ("Egaroucid's own book", egaroucid_saved(&source)),
        (
            "Egaroucid's import of an Edax book",
            egaroucid_imported_from_edax(&source),
        ),
    ] {
        let read = BookFormat::Egbk3.read(&bytes).expect("reads");
        let report = read.egbk3.expect("an egbk3 report");
        let book = read.book;
        assert_eq!(report.dropped + report.bad_leaves, 0, "{layout}");
        assert!(report.borrowed > 100, "{layout}: {report:?}");
        assert_eq!(report.borrowed, borrowed(&book), "{layout}");
        let mut transposed = 0;
        for (board, v) in &want {
            let p = book.get(board).expect("imported");
            assert!(p.value.abs() <= 64, "{layout}: {board}");
            assert!(p.n_lines > 0, "{layout}: {board}");
            if is_borrowed(&p) {
                assert_eq!(i32::from(p.leaf.score), *v, "{layout}: {board}");
            }
            // A leaf turned into a position can be a transposition of another line: linked
            // there too, it can raise that parent's value (or get a book child itself).
            let written = match source.get(board) {
                Some(s) => s.links.len() + usize::from(matches!(s.leaf.mv, Move::Square(_))),
                None => 0,
            };
            if p.links.len() == written || layout.contains("own") {
                assert_eq!(i32::from(p.value), *v, "{layout}: {board} {p:?}");
            } else {
                transposed += 1;
            }
        }
        assert!(transposed * 50 < want.len(), "{layout}: {transposed}");
        // Egaroucid's import of an Edax book keeps the Edax values: the start position's too.
        let start = book.get(&Board::start()).expect("start");
        let source_start = source.get(&Board::start()).expect("start");
        if layout.contains("Edax") {
            assert_eq!(start.value, source_start.value);
        }
        // Every book end that is not a finished game holds its value in a borrowed leaf;
        // nothing else is borrowed.
        for p in book.positions() {
            let open = check_position(&p) == Some(PositionProblem::BadNoMove);
            assert_eq!(is_borrowed(&p), open, "{layout}: {}", p.board);
        }
    }
}

/// A borrowed leaf survives the `.egbk3` and `.dat` writers: read back, the same leaf (score,
/// no move) and value.
#[test]
fn borrowed_leaves_round_trip_through_egbk3_and_edax() {
    let Some(source) = golden_book("book-small.dat") else {
        return;
    };
    let (bytes, _) = egaroucid_saved(&source);
    let book = BookFormat::Egbk3.read(&bytes).expect("reads").book;
    let leaves = |b: &MemBook| {
        let mut v: Vec<_> = b.positions().map(|p| (p.board, p.leaf, p.value)).collect();
        v.sort_by_key(|x| x.0);
        v
    };
    let again = BookFormat::Egbk3
        .read(&BookFormat::Egbk3.write(&book))
        .expect("reads")
        .book;
    assert_eq!(leaves(&again), leaves(&book));
    assert_eq!(borrowed(&again), borrowed(&book));
    let dat = edax::read_book(&edax::book_to_bytes(&book)).expect("reads");
    assert_eq!(leaves(&dat), leaves(&book));
}

/// Growth from an imported Egaroucid book is not stuck: a deviate adds positions, searching the
/// borrowed leaves it marks first, and ends with no borrowed leaf left in its selection (the
/// serial program and the asynchronous schedule).
/// `book fix` on the import searches every borrowed leaf in place.
#[test]
fn an_imported_egaroucid_book_grows_and_fixes() {
    let (Some(source), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let (bytes, _) = egaroucid_saved(&source);
    let mut book = BookFormat::Egbk3.read(&bytes).expect("reads").book;
    let before = borrowed(&book);
    let n = book.len();
    let imported = book.clone();
    assert!(before > 0);
    let params = Deviate::new(2, 4);
    let st = run_serial(&mut book, Operation::Deviate { params }, &mut search);
    assert!(book.len() > n, "deviate added positions: {st:?}");
    let after = borrowed(&book);
    assert!(
        after < before,
        "borrowed leaves searched: {before} -> {after}"
    );
    // The serial selection marks no borrowed leaf any more.
    let (root, s) = prepare_root(&mut book, &Board::start()).expect("start");
    for pass in [DeviatePass::RootSide, DeviatePass::OpponentSide] {
        for id in deviate_pass(&book, root, params, s, pass) {
            assert!(!is_borrowed(&book.position(id)), "{}", book.board(id));
        }
    }
    // The asynchronous schedule: the same, without passes.
    let mut book = imported.clone();
    let mut g = AsyncGrowth::new(Program::new(Operation::Deviate { params })).expect("async");
    let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
    let mut landed: Vec<LeafRequest> = Vec::new();
    while g.run(&mut book, &known, &landed) != AsyncProgress::Done {
        g.take_delta();
        landed = g
            .needed()
            .into_iter()
            .map(|(r, _)| r)
            .filter(|r| !known.contains_key(r))
            .collect();
        assert!(!landed.is_empty(), "waits for nothing: {}", g.summary());
        for r in &landed {
            known.insert(*r, search(r));
        }
    }
    assert!(book.len() > n, "async deviate added positions");
    assert!(borrowed(&book) < before);
    let (root, s) = prepare_root(&mut book, &Board::start()).expect("start");
    for pass in [DeviatePass::RootSide, DeviatePass::OpponentSide] {
        for id in deviate_pass(&book, root, params, s, pass) {
            assert!(!is_borrowed(&book.position(id)), "{}", book.board(id));
        }
    }
    // `book fix` on the import: each borrowed leaf searched in place, at its own level.
    let mut book = imported;
    let fixed = grow::fix_command(&mut book, &mut search);
    assert_eq!(fixed.problems.len(), before, "{fixed:?}");
    assert_eq!(fixed.changes.searches, before, "{fixed:?}");
    assert_eq!(borrowed(&book), 0);
    assert_eq!(book.len(), n);
    for p in book.positions() {
        assert!(check_position(&p).is_none(), "{}", p.board);
        assert_eq!(Some(p.level), source.get(&p.board).map(|s| s.level));
    }
}
