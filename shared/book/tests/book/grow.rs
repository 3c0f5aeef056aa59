//! Growing and querying the book: leaf requests and results, expansion, `book add`/`store`,
//! fix, fill, `book show` against Edax's console transcripts, `book check`, `book problem`,
//! and the golden tiny book rebuilt with the real engine.

use crate::common;
use bookfarm_book::driver::run_serial;
use bookfarm_book::grow::{
    self, Changes, PositionProblem, add_game, apply_leaf, check_position, expand, finish_expand,
    leaf_request, plan_expand, store_game,
};
use bookfarm_book::model::BookHeader;
use bookfarm_book::program::Operation;
use bookfarm_book::query::{self, check_games, problems, show};
use bookfarm_book::{BAD_LINK, Link, MemBook, Position, dump, edax, negamax};
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move, Square};
use common::{board_after, golden, mock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;

fn sq(s: &str) -> Move {
    Move::Square(Square::parse(s).expect("square"))
}

#[test]
fn leaf_request_follows_position_search() {
    // A fresh position: every legal move open.
    let mut p = Position::new(Board::start(), 7);
    let r = leaf_request(&p).expect("search");
    assert_eq!((r.board, r.level, r.excluded), (Board::start(), 7, 0));
    // A leaf move is promoted to a link before the search and excluded.
    p.leaf = Link::new(3, sq("f5"));
    let r = leaf_request(&p).expect("search");
    assert_eq!(
        r.excluded,
        sq("f5").code().checked_shl(0).map_or(0, |c| 1u64 << c)
    );
    apply_leaf(&mut p, &mock(&r));
    assert_eq!(p.links, vec![Link::new(3, sq("f5"))]);
    assert_ne!(p.leaf.mv, sq("f5"));
    assert!(p.value >= 3);
    // Every legal move linked: no search, the leaf stays BAD_LINK.
    let mut all = Position::new(Board::start(), 7);
    for s in ["d3", "c4", "f5", "e6"] {
        all.links.push(Link::new(0, sq(s)));
    }
    assert_eq!(leaf_request(&all), None);
    // A finished game is searched once for its exact score with NOMOVE.
    let over = Board::new(u64::MAX >> 1, 1 << 63).expect("board");
    assert!(over.is_game_over());
    let mut op = Position::new(over, 3);
    let r = leaf_request(&op).expect("game over search");
    apply_leaf(&mut op, &mock(&r));
    assert_eq!(op.leaf, Link::new(over.final_score() as i8, Move::None));
    assert_eq!(i32::from(op.value), over.final_score());
    assert_eq!(leaf_request(&op), None);
}

#[test]
fn expansion_is_independent_requests() {
    let mut book = MemBook::new(BookHeader::new(5, 20));
    let a = board_after("f5d6");
    grow::add_board(&mut book, &a, &mut mock);
    let root = book.probe(&a).expect("A");
    let m = book.leaf(root).mv;
    let plan = plan_expand(&book, root).expect("plan");
    assert_eq!(plan.mv, m);
    assert!(!plan.child_exists);
    // No other book position reaches the child: the two searches of Edax's expansion.
    assert!(plan.parent_links.is_empty());
    let child_req = plan.child_request.expect("child search");
    let parent_req = plan.parent_request.expect("parent search");
    assert_eq!(plan.requests().collect::<Vec<_>>(), [child_req, parent_req]);
    assert_eq!(child_req.board, book.board(root).next_unchecked(m));
    assert_eq!(child_req.level, 5);
    let Move::Square(ms) = m else {
        panic!("square leaf")
    };
    assert_eq!(parent_req.excluded, ms.bit());
    // Results applied in either order of arrival give the same book.
    let (c, p) = (mock(&child_req), mock(&parent_req));
    let mut a = book.clone();
    let results: HashMap<LeafRequest, LeafResult> = [(parent_req, p), (child_req, c)].into();
    let out = finish_expand(&mut a, &plan, &results).expect("finish");
    assert!(out.child_added && out.link_added);
    assert_eq!(out.parents, Changes::default());
    let mut b = book.clone();
    expand(&mut b, root, &mut mock).expect("expand");
    assert_eq!(dump::dump(&a, false), dump::dump(&b, false));
    let link = a.links(root).next().expect("link");
    assert_eq!(link.mv, m);
    let child = a.probe(&child_req.board).expect("child");
    assert_eq!(i32::from(link.score), -i32::from(a.score(child).value));
    assert_eq!(a.leaf(root).mv, p.mv);
    // A stale plan is refused, and so is a plan without its results.
    assert!(finish_expand(&mut a, &plan, &results).is_err());
    let mut c = book.clone();
    let partial: HashMap<LeafRequest, LeafResult> = [(child_req, mock(&child_req))].into();
    assert!(finish_expand(&mut c, &plan, &partial).is_err());
    assert_eq!(dump::dump(&c, false), dump::dump(&book, false));
}

#[test]
fn root_expansion_links_the_four_symmetric_moves() {
    // Edax needs four expansions of the start position (the last three search a copy of the
    // child and drop it); growth links the four symmetric moves at once and searches nothing
    // more at the root, whose moves are all links.
    let mut book = MemBook::new(BookHeader::new(5, 20));
    grow::add_board(&mut book, &Board::start(), &mut mock);
    let root = book.find(&Board::start()).expect("root");
    let m = book.leaf(root).mv;
    let plan = plan_expand(&book, root).expect("plan");
    assert_eq!(plan.parent_request, None);
    assert_eq!(plan.parent_links.len(), 1);
    assert_eq!(plan.parent_links[0].board, Board::start());
    assert_eq!(plan.parent_links[0].moves.len(), 3);
    assert!(!plan.parent_links[0].moves.contains(&m));
    let out = expand(&mut book, root, &mut mock).expect("expand");
    assert_eq!(out.parents.links, 3);
    negamax::negamax(&mut book);
    let mut moves: Vec<Move> = book.links(root).map(|l| l.mv).collect();
    moves.sort_by_key(|m| m.code());
    assert_eq!(moves, [sq("d3"), sq("c4"), sq("f5"), sq("e6")]);
    assert_eq!(book.leaf(root), BAD_LINK);
    assert!(grow::link_command(&mut book, &mut |r| panic!("no search: {r:?}")).is_fixed_point());
}

/// Two positions four plies from the start with a common child, and their moves to it.
fn transposition() -> ((Board, Move), (Board, Move)) {
    let mut seen: HashMap<Board, (Board, Move)> = HashMap::new();
    let mut frontier = vec![Board::start()];
    for _ in 0..4 {
        frontier = frontier
            .iter()
            .flat_map(|b| {
                b.legal_squares()
                    .map(move |s| canonical(&b.play(s).expect("legal")).0)
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
    }
    for p in frontier {
        for s in p.legal_squares() {
            let c = canonical(&p.play(s).expect("legal")).0;
            match seen.get(&c) {
                Some(&(q, m)) if q != p => return ((q, m), (p, Move::Square(s))),
                Some(_) => {}
                None => {
                    seen.insert(c, (p, Move::Square(s)));
                }
            }
        }
    }
    panic!("no transposition at ply 5")
}

#[test]
fn a_new_position_links_its_book_parents() {
    let ((p1, m1), (p2, m2)) = transposition();
    let mut book = MemBook::new(BookHeader::new(5, 40));
    grow::add_board(&mut book, &p1, &mut mock);
    grow::add_board(&mut book, &p2, &mut mock);
    let (id1, id2) = (book.find(&p1).expect("p1"), book.find(&p2).expect("p2"));
    // Both parents have their move to the common child C as their leaf.
    book.set_leaf(id1, Link::new(1, m1));
    book.set_leaf(id2, Link::new(2, m2));
    let plan = plan_expand(&book, id1).expect("plan");
    assert_eq!(plan.parent_links.len(), 1);
    let other = &plan.parent_links[0];
    assert_eq!((other.board, other.moves.clone()), (p2, vec![m2]));
    // p2's leaf is taken by the link: its re-search is part of the expansion.
    let Move::Square(s2) = m2 else {
        panic!("square move")
    };
    let req = other.request.expect("p2 re-search");
    assert_eq!((req.board, req.excluded), (p2, s2.bit()));
    assert!(plan.requests().any(|r| r == req));
    let out = expand(&mut book, id1, &mut mock).expect("expand");
    assert!(out.child_added);
    assert_eq!((out.parents.links, out.parents.searches), (1, 1));
    let c = book.score(out.child).value;
    for (id, m) in [(id1, m1), (id2, m2)] {
        let l = book.links(id).find(|l| l.mv == m).expect("linked");
        assert_eq!(i32::from(l.score), -i32::from(c));
        assert_ne!(book.leaf(id).mv, m);
        assert_eq!(check_position(&book.position(id)), None);
    }
    assert_eq!(
        book.leaf(id2),
        Link::new(mock(&req).score as i8, mock(&req).mv)
    );
    // Edax's `book_link` finds nothing left to link.
    assert!(grow::link_command(&mut book, &mut |r| panic!("no search: {r:?}")).is_fixed_point());
}

#[test]
fn book_link_repairs_what_edax_style_additions_leave_unlinked() {
    let ((p1, m1), (p2, _)) = transposition();
    let c = p1.next_unchecked(m1);
    let mut edax_style = MemBook::new(BookHeader::new(5, 40));
    grow::add_board(&mut edax_style, &p1, &mut mock);
    grow::add_board(&mut edax_style, &p2, &mut mock);
    let mut growth = edax_style.clone();
    // Edax's `book_add_board`: the new position links to its children, not its parents to it.
    grow::add_board(&mut edax_style, &c, &mut mock);
    let r = grow::link_command(&mut edax_style, &mut mock);
    assert_eq!(r.changes.links, 2);
    assert!(!r.is_fixed_point());
    assert!(grow::link_command(&mut edax_style, &mut mock).is_fixed_point());
    // Growth's addition links both parents (re-searching a parent whose leaf it takes).
    let plan = grow::plan_add_board(&growth, &c);
    assert_eq!(plan.parent_links.len(), 2);
    let results: HashMap<LeafRequest, LeafResult> =
        plan.requests().map(|r| (r, mock(&r))).collect();
    let ch = grow::apply_add_plan(&mut growth, &c, &plan, &results).expect("add");
    assert_eq!((ch.positions, ch.links), (1, 2));
    assert!(grow::link_command(&mut growth, &mut |r| panic!("no search: {r:?}")).is_fixed_point());
    assert_eq!(dump::dump(&growth, false), dump::dump(&edax_style, false));
}

#[test]
fn add_game_replays_edax_style() {
    let mut book = MemBook::new(BookHeader::new(3, 10));
    let moves = parse_moves("f5d6c3d3c4f4f6f3e6e7d7c6").expect("moves");
    let r = add_game(&mut book, &moves, &mut mock);
    // 60 − n_empties = 9 moves replayed; boards after moves 1..=9 added, not the start.
    assert_eq!(r.replayed, 9);
    assert_eq!(r.illegal, None);
    assert_eq!(book.len(), 9);
    assert!(book.probe(&Board::start()).is_none());
    assert_eq!(r.changes.positions, 9);
    // Deepest first: each position links to its child (8 links), every position is OK.
    assert_eq!(book.n_links(), 8);
    for p in book.positions() {
        assert_eq!(check_position(&p), None, "{}", p.board);
    }
    // An illegal move stops the replay with a warning; the prefix is added.
    let mut book2 = MemBook::new(BookHeader::new(3, 10));
    let bad = parse_moves("f5d6a1c3").expect("moves");
    let r = add_game(&mut book2, &bad, &mut mock);
    assert_eq!(r.replayed, 2);
    assert_eq!(r.illegal.map(|i| (i.index, i.mv)), Some((2, sq("a1"))));
    assert_eq!(book2.len(), 2);
    // Adding the same game again changes nothing and searches nothing.
    let again = add_game(&mut book, &moves, &mut mock);
    assert_eq!(again.changes, Changes::default());
}

#[test]
fn games_with_passes_insert_them() {
    // A full random game with a forced pass, from the golden game list.
    let Some(path) = golden("games-seed7.txt") else {
        return;
    };
    let text = std::fs::read_to_string(path).expect("games");
    let mut book = MemBook::new(BookHeader::new(1, 61));
    let mut with_pass = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let moves = parse_moves(line).expect("moves");
        let r = add_game(&mut book, &moves, &mut mock);
        assert_eq!(r.illegal, None);
        if r.replayed > moves.len() {
            with_pass += 1;
        }
    }
    for p in book.positions() {
        assert_eq!(check_position(&p), None, "{}", p.board);
    }
    assert_eq!(with_pass, 4, "games of games-seed7.txt with a forced pass");
    // Each pass position got a PASS link to the swapped board (added first, deepest first).
    let pass_positions: Vec<Position> = book.positions().filter(|p| p.board.must_pass()).collect();
    assert!(!pass_positions.is_empty());
    for p in &pass_positions {
        assert_eq!(
            p.links.iter().map(|l| l.mv).collect::<Vec<_>>(),
            vec![Move::Pass]
        );
        assert_eq!(p.leaf, BAD_LINK);
    }
    negamax::negamax(&mut book);
    assert!(book.positions().all(|p| p.value > -127));
    // Without its PASS link, a pass position is searched while its value is unknown, and the
    // result is a PASS leaf; once the value is known no search runs (the PASS leaf first
    // becomes a link).
    let mut pp = Position::new(pass_positions[0].board, 3);
    let r = leaf_request(&pp).expect("pass search");
    assert_eq!(r.excluded, 0);
    apply_leaf(&mut pp, &mock(&r));
    assert_eq!(pp.leaf.mv, Move::Pass);
    assert_eq!(leaf_request(&pp), None);
    let mut known = Position::new(pass_positions[0].board, 3);
    known.value = 5;
    assert_eq!(leaf_request(&known), None);
}

#[test]
fn fix_reports_and_repairs() {
    let mut book = MemBook::new(BookHeader::new(3, 10));
    let moves = parse_moves("f5d6c3d3c4").expect("moves");
    store_game(&mut book, &moves, &mut mock);
    let clean = dump::dump(&book, false);
    // Break one position: a leaf on a linked move, and insert an illegal board.
    let id = book.find(&Board::start()).expect("start");
    let link = book.link(id, 0);
    book.set_leaf(id, Link::new(5, link.mv));
    let illegal = Board {
        player: 0x0000_0008_1000_0000,
        opponent: 0x0000_0010_0000_0000,
    };
    book.put_position(&Position::new(illegal, 3));
    let report = grow::fix_command(&mut book, &mut mock);
    let problems: BTreeMap<_, _> = report.problems.iter().copied().collect();
    assert_eq!(problems.get(&illegal), Some(&PositionProblem::EmptyCentre));
    assert!(matches!(
        problems.get(&Board::start()),
        Some(PositionProblem::Duplicate(_))
    ));
    assert_eq!(report.removed, vec![illegal]);
    assert!(book.find(&illegal).is_none());
    for p in book.positions() {
        assert_eq!(check_position(&p), None);
    }
    // The repaired start position has the same links as before (relinked), a fresh leaf.
    let mut a = bookfarm_book::edax::read_book(&edax::book_to_bytes(&book)).expect("re-read");
    negamax::negamax(&mut a);
    assert_eq!(a.len(), clean.lines().count() - 1);
}

#[test]
fn fill_connects_positions_at_distance_two() {
    // Two positions two plies apart with the intermediate board missing.
    let mut book = MemBook::new(BookHeader::new(2, 20));
    let a = board_after("f5");
    let c = board_after("f5d6c3");
    grow::add_board(&mut book, &c, &mut mock);
    grow::add_board(&mut book, &a, &mut mock);
    assert_eq!(book.len(), 2);
    let r = grow::fill(&mut book, 2, &mut mock);
    assert!(r.changes.positions >= 1);
    let mid = board_after("f5d6");
    let mid_id = book.probe(&mid).expect("intermediate added");
    // The intermediate links to c (relinked when added); a itself is not relinked (Edax).
    let cb = canonical(&c).0;
    let mb = book.board(mid_id);
    assert!(
        book.links(mid_id)
            .any(|l| canonical(&mb.next_unchecked(l.mv)).0 == cb)
    );
    let r2 = grow::fill(&mut book, 2, &mut mock);
    assert_eq!(r2.passes, 1);
}

/// The `book show` outputs of an Edax console transcript (blank lines dropped), and the move sequences of the
/// script's `init`/`play` lines before each `book show`.
fn show_cases(script: &str, console: &str) -> Vec<(String, String)> {
    let mut seqs = Vec::new();
    let mut cur = String::new();
    for line in script.lines() {
        let l = line.trim();
        if l == "init" {
            cur.clear();
        } else if let Some(m) = l.strip_prefix("play ") {
            cur.push_str(m.trim());
        } else if l == "book show" {
            seqs.push(cur.clone());
        }
    }
    let mut outs = Vec::new();
    let mut rest = console;
    while let Some(start) = rest.find("  A B C D E F G H\n1 ") {
        let tail = &rest[start..];
        let end = tail.find("incomplete lines.\n").expect("end of show") + 18;
        outs.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    assert_eq!(seqs.len(), outs.len());
    seqs.into_iter().zip(outs).collect()
}

#[test]
fn show_matches_edax_transcripts() {
    for name in ["book-tiny", "book-small"] {
        let Some(dat) = golden(&format!("{name}.dat")) else {
            return;
        };
        let book = edax::read_book(&std::fs::read(dat).expect("dat")).expect("book");
        let script = std::fs::read_to_string(golden(&format!("{name}.edax")).expect("script"))
            .expect("script");
        let console =
            std::fs::read_to_string(golden(&format!("{name}.console.txt")).expect("console"))
                .expect("console");
        let cases = show_cases(&script, &console);
        assert!(cases.len() >= 5, "{name}");
        for (moves, want) in cases {
            let got = show(&book, &board_after(&moves)).expect("in book");
            // The transcripts were captured with blank lines removed: Edax prints a blank
            // line before `Level:` and after the last line, as `show` does.
            assert!(got.contains("H\n\nLevel: ") && got.ends_with("lines.\n\n"));
            let squeezed: String = got.split_inclusive('\n').filter(|l| *l != "\n").collect();
            assert_eq!(squeezed, want, "{name} after {moves:?}");
        }
    }
}

#[test]
fn show_prints_full_game_percentages() {
    let mut book = MemBook::new(BookHeader::new(60, 60));
    let mut p = Position::new(Board::start(), 60);
    p.leaf = Link::new(2, sq("f5"));
    p.n_wins = 1;
    p.n_draws = 1;
    p.n_losses = 2;
    p.n_lines = 10;
    p.value = 2;
    p.lower = -10;
    p.upper = 4;
    book.insert_new(&p);
    let s = show(&book, &Board::start()).expect("shown");
    assert!(s.ends_with(
        "Best score: +2 [-10, +4]\nMoves: <F5:+2>\nLines: 4 full games with 25.00% win, \
         25.00% draw, 50.00% loss\n       6 incomplete lines.\n\n"
    ));
    assert!(show(&book, &board_after("f5")).is_none());
}

#[test]
fn check_and_problem_on_the_small_book() {
    let (Some(dat), Some(games)) = (golden("book-small.dat"), golden("games-seed7.txt")) else {
        return;
    };
    let book = edax::read_book(&std::fs::read(dat).expect("dat")).expect("book");
    let text = std::fs::read_to_string(games).expect("games");
    let games: Vec<Vec<Move>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| parse_moves(l).expect("moves"))
        .collect();
    let report = check_games(&book, games.iter().map(Vec::as_slice));
    // The book was built from these games (book add), so every position of their first
    // 61 − n_empties plies is in the book except past the depth.
    assert!(report.illegal.is_empty());
    assert!(report.good + report.bad > 0);
    assert!(report.summary().starts_with("Positions : "));
    // Every bad move really scores below the best book move.
    for &(board, mv, score, best) in &report.bad_moves {
        let (_, list) = query::book_moves(&book, &board).expect("in book");
        assert_eq!(list[0].score, best);
        assert!(
            list.iter()
                .any(|m| m.mv == mv && m.score == score && score < best)
        );
    }
    // Problems: each has a unique best move by the book, at the requested empties.
    for n in [52, 54, 56] {
        let ps = problems(&book, n, 3);
        assert!(ps.len() <= 3);
        for p in &ps {
            assert_eq!(p.board.empties(), n);
            assert!(p.best.1 > p.second.1);
            // `<66-char board> % bm XX:+n; ba YY:+m;`, moves in the parity's case.
            let line = p.line();
            let black = n % 2 == 0;
            assert_eq!(&line[..66], query::board_text(&p.board, black));
            let want = format!(
                " % bm {}:{:+}; ba {}:{:+};",
                query::move_text(p.best.0, black),
                p.best.1,
                query::move_text(p.second.0, black),
                p.second.1
            );
            assert_eq!(&line[66..], want);
            assert_eq!(line[72..74].chars().all(|c| !c.is_ascii_lowercase()), black);
        }
    }
    let all = problems(&book, 54, usize::MAX);
    let brute = book
        .positions()
        .filter(|p| p.board.empties() == 54)
        .filter(|p| {
            let (_, l) = query::book_moves(&book, &p.board).expect("in book");
            l.len() >= 2 && l[0].score > l[1].score
        })
        .count();
    assert!(!all.is_empty());
    assert_eq!(all.len(), brute);
}

/// Rebuild golden/book-tiny.dat with Edax's script (`book new 2 12`, three `book store`,
/// `book fix`, `book negamax`) using the real engine at level 2 on eval-seed1.dat.
#[test]
fn tiny_book_rebuilt_with_the_engine() {
    let (Some(_), Some(dat)) = (golden("eval-seed1.dat"), golden("book-tiny.dat")) else {
        return;
    };
    let mut searcher = common::searcher().expect("eval");
    let abort = AtomicBool::new(false);
    let mut search = |r: &LeafRequest| searcher.leaf_search(r, &abort);
    let mut book = MemBook::new(BookHeader::new(2, 12));
    grow::add_board(&mut book, &Board::start(), &mut search);
    for g in [
        "f5d6c3d3c4f4f6f3e6e7d7c6",
        "f5f6e6f4e3c5c4e7c6d6",
        "f5f4e3f6d3",
    ] {
        let moves = parse_moves(g).expect("moves");
        // The second game's last move (d6) is illegal: Edax's `play` stopped before it.
        store_game(&mut book, &moves, &mut search);
    }
    let fixed = grow::fix_command(&mut book, &mut search);
    assert!(fixed.problems.is_empty());
    negamax::negamax(&mut book);
    negamax::sort_links(&mut book);

    let want = edax::read_book(&std::fs::read(dat).expect("dat")).expect("golden");
    let ours: BTreeMap<Board, Position> = book.positions().map(|p| (p.board, p)).collect();
    let theirs: BTreeMap<Board, Position> = want.positions().map(|p| (p.board, p)).collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "same positions"
    );
    let (mut same_leaf, mut same_value) = (0, 0);
    for (b, p) in &ours {
        let q = &theirs[b];
        let mut a: Vec<Move> = p.links.iter().map(|l| l.mv).collect();
        let mut c: Vec<Move> = q.links.iter().map(|l| l.mv).collect();
        a.sort_by_key(|m| m.code());
        c.sort_by_key(|m| m.code());
        assert_eq!(a, c, "links of {b}");
        same_leaf += usize::from(p.leaf == q.leaf);
        same_value += usize::from(p.value == q.value);
    }
    println!(
        "tiny book rebuilt: {} positions, {same_leaf} identical leaves, {same_value} identical values",
        ours.len()
    );
    assert_eq!(book.header().n_empties, want.header().n_empties);
    // The whole dump (values, bounds, counts, links with scores, leaves) is Edax's.
    assert_eq!(dump::dump(&book, false), dump::dump(&want, false));
    assert_eq!(same_leaf, ours.len());
}

/// Rebuild golden/book-small.dat with Edax's script (`book new 4 14`, `book add` of
/// games-seed7.txt, `book deviate 2 4`, `book enhance 2 4`, `book fix`, `book negamax`) using
/// the real engine on eval-seed1.dat.
#[test]
fn small_book_rebuilt_with_the_engine() {
    let (Some(_), Some(dat), Some(games)) = (
        golden("eval-seed1.dat"),
        golden("book-small.dat"),
        golden("games-seed7.txt"),
    ) else {
        return;
    };
    let mut searcher = common::searcher().expect("eval");
    let abort = AtomicBool::new(false);
    let mut searches = 0usize;
    let mut search = |r: &LeafRequest| {
        searches += 1;
        searcher.leaf_search(r, &abort)
    };
    let mut book = MemBook::new(BookHeader::new(4, 14));
    grow::add_board(&mut book, &Board::start(), &mut search);
    let text = std::fs::read_to_string(games).expect("games");
    // Edax reads the trailing blank line as a 13th, empty game.
    let games: Vec<Vec<Move>> = text
        .split('\n')
        .take(13)
        .map(|l| parse_moves(l).expect("moves"))
        .collect();
    let info = |b: &MemBook| {
        (
            b.len(),
            b.n_links(),
            b.ids().filter(|&id| b.leaf(id).mv != Move::None).count(),
        )
    };
    // Edax's `book_add_game` literally: "Adding games...13/13 done: 134 positions, 134 links",
    // and `book info`: 135 positions, 134 links, 134 leaves.
    let mut edax_style = book.clone();
    let mut literal = Changes::default();
    for g in &games {
        literal += add_game(&mut edax_style, g, &mut search).changes;
    }
    assert_eq!((literal.positions, literal.links), (134, 134));
    assert_eq!(info(&edax_style), (135, 134, 134));
    // Growth's `book add` also links the parents of each new position: the 4 transpositions
    // Edax leaves to `book fix`, which then finds nothing more to link.
    assert_eq!(games.len(), 13);
    let added = run_serial(
        &mut book,
        Operation::AddGames {
            games: games.clone(),
        },
        &mut search,
    );
    assert!(added.illegal.is_empty());
    assert_eq!((added.changes.positions, added.changes.links), (134, 138));
    let repaired = grow::link_command(&mut edax_style, &mut search);
    assert_eq!(repaired.changes.links, 4);
    let mut relinked = book.clone();
    let again = grow::link_command(&mut relinked, &mut search);
    assert_eq!(again.changes, Changes::default());
    assert_eq!(dump::dump(&relinked, false), dump::dump(&edax_style, false));
    let deviate = Operation::Deviate {
        params: bookfarm_book::select::Deviate::new(2, 4),
    };
    run_serial(&mut book, deviate, &mut search);
    println!("after deviate: {:?} (Edax (1054, 1062, 1038))", info(&book));
    let enhance = Operation::Enhance {
        midgame_error: 2,
        endcut_error: 4,
        until_stable: false,
    };
    run_serial(&mut book, enhance, &mut search);
    println!("after enhance: {:?}", info(&book));
    let fixed = grow::fix_command(&mut book, &mut search);
    assert!(fixed.problems.is_empty());
    negamax::negamax(&mut book);
    negamax::sort_links(&mut book);

    let want = edax::read_book(&std::fs::read(dat).expect("dat")).expect("golden");
    let ours: BTreeMap<Board, Position> = book.positions().map(|p| (p.board, p)).collect();
    let theirs: BTreeMap<Board, Position> = want.positions().map(|p| (p.board, p)).collect();
    let common = ours.keys().filter(|b| theirs.contains_key(b)).count();
    let same = ours
        .iter()
        .filter(|(b, p)| theirs.get(b).is_some_and(|q| q == *p))
        .count();
    println!(
        "small book rebuilt: {} positions (Edax {}), {common} in common, {same} identical; {searches} searches",
        ours.len(),
        theirs.len()
    );
    assert_eq!(book.header().midgame_error, want.header().midgame_error);
    assert_eq!(book.header().endcut_error, want.header().endcut_error);
    // Deviate diverges from Edax's run (1327 positions instead of 1054; 1278 before growth
    // linked transpositions), although a fresh search reproduces every leaf score of the
    // golden book (next test). The likely cause (not proven): Edax's searches share one hash
    // table (cleared only per game and before each expanded child), so the parent's re-search
    // after an expansion reuses the child's deeper entries, while our searches start from an
    // empty table; any differing intermediate leaf changes the subtree that the 143 deviate
    // iterations grow. Linking departs from Edax on purpose (its values are the negamax of the
    // book's own positions). The `book add` stage is exact (Edax's primitives, above).
    for p in book.positions() {
        assert_eq!(check_position(&p), None);
    }
    assert!(
        common * 10 >= theirs.len() * 8,
        "most of Edax's positions are rebuilt"
    );
}

/// The engine's leaf searches against the leaves Edax stored in book-small.dat (level 4): each
/// leaf was searched with a subset of the final links excluded, so searching with all of them
/// excluded must give the same move and score whenever the leaf is not beaten by a later link.
#[test]
fn engine_reproduces_the_small_book_leaves() {
    let (Some(_), Some(dat)) = (golden("eval-seed1.dat"), golden("book-small.dat")) else {
        return;
    };
    let mut searcher = common::searcher().expect("eval");
    let abort = AtomicBool::new(false);
    let book = edax::read_book(&std::fs::read(dat).expect("dat")).expect("golden");
    let (mut n, mut same_score, mut same) = (0, 0, 0);
    for p in book.positions() {
        let Some(req) = leaf_request(&Position {
            leaf: BAD_LINK,
            value: -127,
            ..p.clone()
        }) else {
            continue;
        };
        if p.leaf.mv == Move::None {
            continue;
        }
        let r = searcher.leaf_search(&req, &abort);
        n += 1;
        same_score += usize::from(i32::from(p.leaf.score) == r.score);
        same += usize::from(i32::from(p.leaf.score) == r.score && p.leaf.mv == r.mv);
        if i32::from(p.leaf.score) != r.score {
            println!(
                "{} level {} leaf {}:{} ours {}:{}",
                p.board, p.level, p.leaf.mv, p.leaf.score, r.mv, r.score
            );
        }
    }
    println!(
        "small book leaves: {n} searched, {same_score} same score, {same} same move and score"
    );
    assert_eq!(n, 1035);
    assert_eq!(same_score, n, "every leaf score is Edax's");
    assert!(same + 10 >= n, "moves differ only on a few ties");
}
