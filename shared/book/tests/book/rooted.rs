//! Programs from a root other than the start position (`--from LINE`): the root line's missing
//! positions are added first, the program's values and window are the root's (Edax's
//! `book deviate` from the current board), and nothing outside the root's subtree is added.

use crate::common;
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

/// `book diff` on two known books: a book against itself is empty; against the same book after
/// a rooted deviate, every new or changed position is on the root line, in the root's subtree,
/// or a parent that gained a link; a leaf and a level changed by hand are reported as such.
#[test]
fn book_diff_reports_what_a_rooted_program_changed() {
    use bookfarm_book::diff::diff;
    let mut before = new_book(2, 12);
    run_serial(&mut before, Program::new(deviate(1, 1)), &mut mock);
    assert!(diff(&before, &before).is_empty());
    assert_eq!(diff(&before, &before).same, before.len());
    let mut after = before.clone();
    let program = rooted(deviate(2, 4), "f5d6c3");
    let on_line: HashSet<Board> = program
        .root_boards()
        .expect("legal line")
        .iter()
        .map(|b| canonical(b).0)
        .collect();
    let root = program.root_board().expect("legal line");
    let st = run_serial(&mut after, program, &mut mock);
    let d = diff(&before, &after);
    assert!(d.only_a.is_empty(), "a program removes nothing");
    assert_eq!(d.only_b.len(), st.changes.positions);
    assert_eq!(d.same + d.changed.len(), before.len());
    let inside = subtree(&after, &root);
    for p in &d.only_b {
        assert!(inside.contains(&p.board) || on_line.contains(&p.board));
    }
    for c in &d.changed {
        let gained = c.b.links.len() > c.a.links.len();
        assert!(
            inside.contains(&c.a.board) || on_line.contains(&c.a.board) || gained || !c.leaf(),
            "{c:?}"
        );
    }
    let text = d.report(&before, &after, 3);
    assert!(text.starts_with(&d.summary()), "{text}");
    assert!(text.contains("only in B  "), "{text}");
    // One leaf and one level changed by hand.
    let mut edited = before.clone();
    let id = edited.probe(&board_after("f5")).expect("f5 is in the book");
    let leaf = edited.leaf(id);
    let score = if leaf.score < 0 {
        leaf.score + 2
    } else {
        leaf.score - 2
    };
    edited.set_leaf(id, bookfarm_book::Link { score, ..leaf });
    let level = edited.level(id);
    edited.set_level(id, level + 1);
    let d = diff(&before, &edited);
    assert_eq!((d.only_a.len(), d.only_b.len(), d.changed.len()), (0, 0, 1));
    assert!(d.changed[0].leaf() && d.changed[0].level() && !d.changed[0].value());
    assert!(
        d.summary()
            .contains("different: 1 (value 0, level 1, leaf 1)"),
        "{}",
        d.summary()
    );
    // Named by its shortest book line: one of the four first moves (they reach one position).
    let text = d.report(&before, &edited, 10).to_lowercase();
    assert!(
        ["c4", "d3", "e6", "f5"]
            .iter()
            .any(|m| text.contains(&format!("different  {m}: "))),
        "{text}"
    );
}
