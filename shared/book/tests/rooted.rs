//! Programs from a root other than the start position (`--from LINE`): the root line's missing
//! positions are added first, the program's values and window are the root's (Edax's
//! `book deviate` from the current board), and nothing outside the root's subtree is added.

mod common;
use bookfarm_book::driver::run_serial;
use bookfarm_book::grow::link_command;
use bookfarm_book::mem::child_board;
use bookfarm_book::model::BookHeader;
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::{Deviate, DeviatePass, deviate_pass, prepare_root};
use bookfarm_book::{MemBook, Position};
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use common::{board_after, mock};
use std::collections::{HashMap, HashSet};

fn rooted(operation: Operation, line: &str) -> Program {
    Program {
        root: parse_moves(line).expect("moves"),
        ..Program::new(operation)
    }
}

fn deviate(rel: i32, abs: i32) -> Operation {
    Operation::Deviate {
        params: Deviate::new(rel, abs),
    }
}

/// `book new LEVEL DEPTH`.
fn new_book(level: i32, depth: i32) -> MemBook {
    let mut book = MemBook::new(BookHeader::new(level, depth));
    run_serial(&mut book, Operation::New, &mut mock);
    book
}

/// How many positions Edax's deviate marks from `root` (both passes, on the root's negamaxed
/// value): the project's Edax-literal selection.
fn deviate_todo(book: &MemBook, root: &Board, params: Deviate) -> usize {
    let mut book = book.clone();
    let Some((id, value)) = prepare_root(&mut book, root) else {
        return 0;
    };
    [DeviatePass::RootSide, DeviatePass::OpponentSide]
        .into_iter()
        .map(|pass| deviate_pass(&book, id, params, value, pass).len())
        .sum()
}

/// The positions reachable from `root` through the book's links (canonical boards).
fn subtree(book: &MemBook, root: &Board) -> HashSet<Board> {
    let mut seen = HashSet::new();
    let mut stack = vec![canonical(root).0];
    while let Some(b) = stack.pop() {
        let Some(id) = book.find(&b) else { continue };
        if !seen.insert(b) {
            continue;
        }
        for l in book.links(id) {
            stack.push(canonical(&child_board(&b, l.mv)).0);
        }
    }
    seen
}

/// `book new 4 20`, then `book deviate 1 2` from f5f6e6: Edax's selection from that root finds
/// nothing left to do (Edax run on the exported book, after `play f5f6e6`, says "0 todo"),
/// while from the start position it does.
#[test]
fn a_rooted_deviate_leaves_nothing_to_do_from_its_root_only() {
    let mut book = new_book(4, 20);
    let params = Deviate::new(1, 2);
    let root = board_after("f5f6e6");
    let before = book.len();
    let st = run_serial(&mut book, rooted(deviate(1, 2), "f5f6e6"), &mut mock);
    assert!(st.changes.positions > 3, "{:?}", st.changes);
    assert_eq!(book.len(), before + st.changes.positions);
    // The line's positions were added (the start was there).
    for line in ["f5", "f5f6", "f5f6e6"] {
        assert!(book.probe(&board_after(line)).is_some(), "{line}");
    }
    assert_eq!(deviate_todo(&book, &root, params), 0);
    assert!(deviate_todo(&book, &Board::start(), params) > 0);
    // A grown book stays linked, and it is negamaxed from the start position: Edax's `book
    // link` plus negamax changes nothing.
    let mut linked = book.clone();
    let r = link_command(&mut linked, &mut |r| panic!("book link searched {r:?}"));
    assert!(r.is_fixed_point(), "{r:?}");
}

/// Grown from a book with positions around the root: every new position is on the root line or
/// in the root's subtree, and every position outside the subtree keeps its leaf unless it
/// gained a link to a new position (its leaf is then searched again with the link excluded).
#[test]
fn a_rooted_program_adds_nothing_outside_its_subtree() {
    for (line, operation) in [
        ("f5d6c3d3c4", deviate(2, 4)),
        ("f5f6", deviate(3, 6)),
        ("f5d6c5f4e3", Operation::Play),
        ("f5d6c3", Operation::Extend),
        ("f5d6", Operation::enhance(2, 4)),
    ] {
        let mut book = new_book(2, 12);
        let games: Vec<Vec<Move>> = ["f5d6c3d3c4f4", "f5f6e6f4", "f5d6c5f4e3f6d3"]
            .iter()
            .map(|g| parse_moves(g).expect("moves"))
            .collect();
        run_serial(&mut book, Operation::AddGames { games }, &mut mock);
        run_serial(&mut book, Program::new(deviate(1, 1)), &mut mock);
        let before: HashMap<Board, Position> = book.positions().map(|p| (p.board, p)).collect();
        let program = rooted(operation.clone(), line);
        let on_line: HashSet<Board> = program
            .root_boards()
            .expect("legal line")
            .iter()
            .map(|b| canonical(b).0)
            .collect();
        let root = program.root_board().expect("legal line");
        run_serial(&mut book, program, &mut mock);
        let inside = subtree(&book, &root);
        assert!(inside.len() > 1, "{line}: the root has no subtree");
        let mut added = 0;
        for p in book.positions() {
            match before.get(&p.board) {
                None => {
                    added += 1;
                    assert!(
                        inside.contains(&p.board) || on_line.contains(&p.board),
                        "{line} {}: a position outside the root's subtree was added",
                        operation.describe()
                    );
                }
                Some(old) if !inside.contains(&p.board) => {
                    let gained = old
                        .links
                        .iter()
                        .all(|l| p.links.iter().any(|k| k.mv == l.mv))
                        && p.links.len() > old.links.len();
                    assert!(
                        p.leaf == old.leaf || gained,
                        "{line} {}: leaf of a position outside the subtree changed without a new link",
                        operation.describe()
                    );
                    assert_eq!(p.level, old.level);
                }
                Some(_) => {}
            }
        }
        assert!(added > 0, "{line} {}: nothing added", operation.describe());
    }
}

/// A root line beyond the book depth adds nothing and the program does nothing.
#[test]
fn a_root_past_the_book_depth_changes_nothing() {
    let mut book = new_book(2, 4);
    run_serial(&mut book, Program::new(deviate(2, 4)), &mut mock);
    let before: Vec<Position> = book.positions().collect();
    let st = run_serial(&mut book, rooted(deviate(2, 4), "f5d6c3d3c4f4"), &mut mock);
    assert_eq!(st.changes.positions, 0);
    let after: Vec<Position> = book.positions().collect();
    assert_eq!(after, before);
}
