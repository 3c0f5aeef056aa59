//! The rest of Edax's book commands on the golden books: `book correct`, `book upgrade`,
//! `book analyze`, `book extract` and the book's random move choice.

use crate::common;
use bookfarm_book::driver::run_serial;
use bookfarm_book::model::{BAD_LINK, BookHeader, Position};
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::research::{self, Upgrade};
use bookfarm_book::{Link, MemBook, Score, extract, grow, play};
use bookfarm_engine::formats::Game;
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::search::LeafRequest;
use bookfarm_engine::{Board, Move};
use common::{board_after, engine, golden, golden_book};

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

/// `book upgrade` from the start position.
fn upgrade(params: Upgrade) -> Operation {
    Operation::Upgrade { params }
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
    let r = run_serial(&mut up, upgrade(params), &mut |req: &LeafRequest| {
        requests.push(*req);
        search(req)
    });
    // Every re-searched position is raised, and only those.
    let raised_by_driver = r.changes.searches;
    assert!(raised_by_driver >= first.len() && r.iterations >= 2);
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
    assert_eq!(raised, raised_by_driver);
    assert_eq!(up.len(), book.len());
    let root = up.find(&Board::start()).expect("root");
    assert!(research::upgrade_mark(&up, root, params).is_empty());
    // An upgrade to a level the book already has does nothing.
    let mut same = book.clone();
    let r = run_serial(
        &mut same,
        upgrade(Upgrade {
            level: 2,
            error: 64,
        }),
        &mut search,
    );
    assert_eq!(r.changes.searches, 0);
    assert!(
        book.positions()
            .all(|p| same.get(&p.board).is_some_and(|q| q.level == p.level)),
        "nothing raised"
    );
}

/// `book analyze` of book-tiny's second game, last 4 moves, in Edax's format. By hand from the
/// book (`book line f5f6e6f4e3c5c4e7c6`): after f5f6e6f4e3 White's c5 (+3) against d7 (−10);
/// Black's C4 (−3) ties B6 (−3); White's e7 (−2) is 5 below the leaf f2 (+3): "strongly";
/// Black's C6 (+2) against B5 (−16).
#[test]
fn analyze_follows_edax_format_on_book_tiny() {
    let Some(book) = golden_book("book-tiny.dat") else {
        return;
    };
    let game = parse_moves("f5f6e6f4e3c5c4e7c6").expect("moves");
    let v = play::analyze_game(&book, &game, 4).expect("legal");
    let want = "
              N     played        alternative
ply  level   alt. move  score     score   move
---+-------+-----+-----------+--+---------------
  9   book    1    C6     +2   >   -16     B5 
  8   book    1    e7     -2   <    +3     f2 <- Edax disagrees strongly
  7   book    1    C4     -3   =    -3     B6 
  6   book    1    c5     +3   >   -10     d7 
";
    assert_eq!(play::render_analysis(&v), want);
    // The whole first game: the first move has no alternative (D3, C4 and E6 reach the same
    // position as F5), White's d6 (+0) has two, the best being f6 (+3).
    let game = parse_moves("f5d6c3d3c4f4f6f3e6e7d7c6").expect("moves");
    let text = play::render_analysis(&play::analyze_game(&book, &game, 60).expect("legal"));
    assert!(text.ends_with("  1   book    0    F5     -3  \n"), "{text}");
    assert!(text.contains("\n  2   book    2    d6     +0   <    +3     f6 <- Edax disagrees\n"));
    assert_eq!(text.lines().count(), 4 + 12);
    assert_eq!(
        play::analyze_game(&book, &parse_moves("f5f5").expect("moves"), 2),
        Err(1)
    );
}

/// `book extract` on book-tiny: from F5, the best moves f6, e6, then f4 (d6 ties but reaches the
/// same position by symmetry, so it is skipped), e3, c5, where c4 and b6 tie (−3); after c4 the
/// best move is the leaf f2 (+3), which leaves the book. Two lines.
#[test]
fn extract_best_lines_of_book_tiny() {
    let Some(book) = golden_book("book-tiny.dat") else {
        return;
    };
    let lines: Vec<String> = extract::best_lines(&book)
        .iter()
        .map(|l| {
            Game::from_moves(l.iter().copied())
                .expect("legal")
                .to_transcript()
        })
        .collect();
    assert_eq!(lines, ["f5f6e6f4e3c5c4f2", "f5f6e6f4e3c5b6"]);
    assert!(extract::best_lines(&MemBook::default()).is_empty());
}

/// Edax's random book move: after f5 (value +3; f6 +3, f4 +1, d6 +0) randomness 0 allows f6
/// only, 2 allows f6 and f4, 3 all three; a stale value above every move gives NOMOVE.
#[test]
fn random_move_follows_edax_randomness() {
    let Some(mut book) = golden_book("book-tiny.dat") else {
        return;
    };
    let after_f5 = board_after("f5");
    let draws = |book: &MemBook, r: i32| -> Vec<String> {
        let mut k = 0u64;
        let mut next = || {
            k += 1;
            k - 1
        };
        (0..4)
            .map(|_| {
                play::random_move(book, &after_f5, r, &mut next)
                    .expect("in book")
                    .to_string()
            })
            .collect()
    };
    assert_eq!(draws(&book, 0), ["f6", "f6", "f6", "f6"]);
    assert_eq!(draws(&book, 2), ["f6", "f4", "f6", "f4"]);
    assert_eq!(draws(&book, 3), ["f6", "f4", "d6", "f6"]);
    assert!(play::random_move(&book, &board_after("f5d6c5"), 0, &mut || 0).is_none());
    let id = book.probe(&after_f5).expect("in book");
    book.set_score(
        id,
        Score {
            value: 10,
            lower: 10,
            upper: 10,
        },
    );
    assert_eq!(
        play::random_move(&book, &after_f5, 0, &mut || 0),
        Some(Move::None)
    );
}

/// The line audit on book-tiny's best lines at level 6: every line is played to the end of the
/// game, the result is the replayed final score, and a contradiction is a different outcome.
#[test]
fn audit_plays_best_lines_to_the_end() {
    let (Some(book), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let lines = extract::best_lines(&book);
    let audit = run_serial(
        &mut book.clone(),
        Operation::Audit {
            level: 6,
            queue: false,
        },
        &mut search,
    )
    .audit;
    assert_eq!(audit.len(), lines.len());
    for a in &audit {
        assert_eq!(a.book_value, -3);
        let all: Vec<Move> = a.line.iter().chain(&a.continuation).copied().collect();
        let (end, black) = Game::from_moves(all)
            .expect("legal")
            .final_position()
            .expect("replay");
        assert!(end.is_game_over());
        let score = end.final_score();
        assert_eq!(a.result, if black { score } else { -score });
        assert_eq!(a.contradicts(), a.result.signum() != -1);
    }
}

/// `expand analyze --store` on book-tiny (level 2): storing the analysis of a book position at
/// level 4 re-searches its leaf alone at level 4 with its links excluded and raises its level,
/// changing no other position; storing it again searches nothing; storing a position one move
/// past the book adds it (as `book store` adds a game's positions) before raising it.
#[test]
fn store_analysis_raises_one_leaf_and_adds_a_missing_line() {
    let (Some(book), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let store = |line: &str, level: u8| Program {
        root: parse_moves(line).expect("line"),
        ..Program::new(Operation::StoreAnalysis { level })
    };
    let line = "f5f6e6f4e3";
    let id = book.probe(&board_after(line)).expect("in book-tiny");
    let before = book.position(id);
    assert!(before.level < 4 && before.leaf.mv != Move::None);
    let mut up = book.clone();
    let mut requests = Vec::new();
    let st = run_serial(&mut up, store(line, 4), &mut |r: &LeafRequest| {
        requests.push(*r);
        search(r)
    });
    let expected = grow::leaf_request(&Position {
        leaf: BAD_LINK,
        level: 4,
        ..before.clone()
    })
    .expect("a move is not linked");
    assert_eq!(
        requests,
        vec![expected],
        "the position's leaf alone, at level 4"
    );
    let after = up.get(&before.board).expect("kept");
    assert_eq!(after.level, 4);
    assert_eq!(after.leaf.mv, search(&expected).mv);
    assert_eq!(i32::from(after.leaf.score), search(&expected).score);
    assert_eq!(st.changes.searches, 1);
    assert_eq!(up.len(), book.len());
    for p in book.positions().filter(|p| p.board != before.board) {
        let q = up.get(&p.board).expect("no position removed");
        assert_eq!(
            (q.level, q.leaf),
            (p.level, p.leaf),
            "{}: untouched",
            p.board
        );
    }
    // Negamaxed from the start: a second negamax changes no value.
    let mut again = up.clone();
    let start = again.find(&Board::start()).expect("start");
    bookfarm_book::negamax::renegamax(&mut again, start);
    assert!(
        up.positions()
            .all(|p| again.get(&p.board).map(|q| q.value) == Some(p.value))
    );

    // Stored already: nothing to search, nothing changed.
    let mut same = up.clone();
    let st = run_serial(&mut same, store(line, 4), &mut |r: &LeafRequest| {
        panic!("searched {r:?}")
    });
    assert_eq!(st.changes.searches, 0);
    assert!(
        up.positions()
            .all(|p| same.get(&p.board) == Some(p.clone()))
    );

    // One move past the book (the position's leaf move): added at the book's level, linked,
    // then raised to level 4.
    let past = format!("{line}{}", {
        let b = board_after(line);
        let sym = bookfarm_engine::symmetry::find_symmetry(&before.board, &b).expect("symmetric");
        bookfarm_engine::symmetry::transform_move(before.leaf.mv, sym).to_string()
    });
    assert!(book.probe(&board_after(&past)).is_none());
    let mut grown = book.clone();
    let st = run_serial(&mut grown, store(&past, 4), &mut search);
    let new = grown.probe(&board_after(&past)).expect("added");
    assert_eq!(grown.len(), book.len() + 1);
    assert_eq!(grown.level(new), 4);
    assert_eq!(st.changes.positions, 1);
    let parent = grown.probe(&board_after(line)).expect("parent");
    assert_eq!(
        grown.level(parent),
        before.level,
        "the parent is not raised"
    );
}

/// `expand analyze --store` from the start position (the empty line: nothing to add before
/// it): in a book of the start alone (as `book new` makes it) the start's leaf is re-searched
/// at level 4 and its level raised, as for any position. In book-tiny every move of the start
/// is linked (its children are one position by symmetry), so it has no leaf to store: nothing
/// is searched or changed.
#[test]
fn store_analysis_from_the_start_position() {
    let (Some(tiny), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let store = Program {
        root: Vec::new(),
        ..Program::new(Operation::StoreAnalysis { level: 4 })
    };
    let mut book = MemBook::new(BookHeader::new(2, 10));
    grow::add_board(&mut book, &Board::start(), &mut search);
    let before = book.get(&Board::start()).expect("the start");
    assert!(
        before.level < 4 && before.leaf.mv != Move::None,
        "{before:?}"
    );
    let mut requests = Vec::new();
    let st = run_serial(&mut book, store.clone(), &mut |r: &LeafRequest| {
        requests.push(*r);
        search(r)
    });
    let expected = grow::leaf_request(&Position {
        leaf: BAD_LINK,
        level: 4,
        ..before.clone()
    })
    .expect("a move to search");
    assert_eq!(
        requests,
        vec![expected],
        "the start's leaf alone, at level 4"
    );
    let after = book.get(&Board::start()).expect("kept");
    assert_eq!(after.level, 4);
    assert_eq!(after.leaf.mv, search(&expected).mv);
    assert_eq!(i32::from(after.leaf.score), search(&expected).score);
    assert_eq!((book.len(), st.changes.searches), (1, 1));

    let start = tiny.get(&Board::start()).expect("the start");
    assert_eq!(start.leaf.mv, Move::None, "every move linked");
    let mut same = tiny.clone();
    let st = run_serial(&mut same, store, &mut |r: &LeafRequest| {
        panic!("searched {r:?}")
    });
    assert_eq!((st.changes.searches, st.changes.positions), (0, 0));
    assert!(
        tiny.positions()
            .all(|p| same.get(&p.board) == Some(p.clone()))
    );
}
