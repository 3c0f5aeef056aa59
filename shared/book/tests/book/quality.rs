//! Book quality tools on Edax's golden books: accuracy grades (computed by hand on book-tiny),
//! `book line`, `.egbk3` round trips, merging by level, better leaves.

use crate::common;
use bookfarm_book::accuracy::{Grade, Grader};
use bookfarm_book::driver::run_serial;
use bookfarm_book::merge::{Newer, merge_by_level};
use bookfarm_book::model::BookHeader;
use bookfarm_book::program::Operation;
use bookfarm_book::{Link, MemBook, egbk3, grow, negamax};
use bookfarm_book::{leaves, line};
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use common::{board_after, engine, golden_book};

fn set_level(book: &mut MemBook, moves: &str, level: u8) {
    let id = book.probe(&board_after(moves)).expect("in book");
    book.set_level(id, level);
}

fn grade_of(book: &MemBook, moves: &str) -> String {
    Grader::new(book)
        .accuracy(&board_after(moves))
        .expect("in book")
        .to_string()
}

/// book-tiny around the line f5 f4 e3 f6 d3 (see `book line` below for its values):
///
/// * P1 = f5 (59 empties): links f6 +3, f4 +1, d6 +0, no leaf;
/// * P2 = f5f4 (58): link e3 −1 (to P3), leaf d3 −16;
/// * P3 = f5f4e3 (57): link f6 −7 (to P4), leaf d2 +1;
/// * P4 = f5f4e3f6 (56): links d3 +7 (to P5), e6 −3, leaf g5 −3;
/// * P5 = f5f4e3f6d3 (55): no link, leaf c3 −7.
///
/// Level 2 searches 55–60 empties at depth 2 (midgame), level 60 solves them (perfect), level 50
/// reads 57–59 empties as a depth = empties search at 73% (endgame).
#[test]
fn accuracy_grades_by_hand_on_book_tiny() {
    let Some(book) = golden_book("book-tiny.dat") else {
        return;
    };
    // As built (level 2 everywhere): every line ends in a midgame search.
    let mut g = Grader::new(&book);
    for id in book.ids().collect::<Vec<_>>() {
        assert_eq!(g.of(id).grade, Grade::F);
    }

    // P5 solved: P4's only link within 1 (and 2) disc of its best (+7) is P5 → AA. P3's best
    // link (−7, to P4) is AA; its leaf d2 (+1) is within the tolerance but a midgame search,
    // which Egaroucid's rule ignores → AA; P2 follows its only link → AA. P1's best link f6 (+3)
    // leads to midgame lines → F.
    let mut b = book.clone();
    set_level(&mut b, "f5f4e3f6d3", 60);
    assert_eq!(grade_of(&b, "f5f4e3f6d3"), "AA");
    assert_eq!(grade_of(&b, "f5f4e3f6"), "AA");
    assert_eq!(grade_of(&b, "f5f4e3"), "AA");
    assert_eq!(grade_of(&b, "f5f4"), "AA");
    assert_eq!(grade_of(&b, "f5"), "F");

    // Everything solved: every position is AA.
    let mut all = book.clone();
    for id in all.ids().collect::<Vec<_>>() {
        all.set_level(id, 60);
    }
    let mut g = Grader::new(&all);
    for id in all.ids().collect::<Vec<_>>() {
        assert_eq!(g.of(id).to_string(), "AA");
    }

    // Everything solved but P3 at level 50: P3's link to P4 is A and its leaf d2 (+1, within
    // the tolerance of the best link −7) is an endgame read → B; P2 → B. P1 at 1 disc only
    // follows f6 (+3, all perfect) → A; at 2 discs also f4 (+1) → P2 = B → AB; the root's four
    // links all lead to P1 → AB. P4 does not see P3 → AA.
    set_level(&mut all, "f5f4e3", 50);
    assert_eq!(grade_of(&all, "f5f4e3"), "B");
    assert_eq!(grade_of(&all, "f5f4"), "B");
    assert_eq!(grade_of(&all, "f5"), "AB");
    assert_eq!(grade_of(&all, ""), "AB");
    assert_eq!(grade_of(&all, "f5f4e3f6"), "AA");
}

/// `book line` on a line of book-tiny: the values, bounds, levels, lines, leaves and links of
/// every position, in the line's orientation (the first positions agree with Edax's `book show`
/// in book-tiny.console.txt: `Best score: -3 [-5, -1]`, `Moves: [D3:-3] [C4:-3] [F5:-3]
/// [E6:-3]`, then `+3 [+1, +5]`, `[f6:+3] [f4:+1] [d6:+0]`), and a move past the book.
#[test]
fn book_line_on_a_known_line() {
    let Some(book) = golden_book("book-tiny.dat") else {
        return;
    };
    let steps = line::inspect(&book, &parse_moves("f5f4e3f6d3c3").expect("moves")).expect("legal");
    let want = "\
ply mv value [lower, upper] level, lines, accuracy, leaf, links
  0 --   -3 [  -5,   -1] level  2 lines        132 accuracy F  leaf     -- links D3:-3 C4:-3 F5:-3 E6:-3
  1 F5   +3 [  +1,   +5] level  2 lines         33 accuracy F  leaf     -- links f6:+3 f4:+1 d6:+0
  2 f4   -1 [  -4,   +0] level  2 lines          9 accuracy F  leaf D3:-16 links E3:-1
  3 E3   +1 [  +0,   +4] level  2 lines          8 accuracy F  leaf  d2:+1 links f6:-7
  4 f6   +7 [  +4,   +8] level  2 lines          7 accuracy F  leaf  G5:-3 links D3:+7 E6:-3
  5 D3   -7 [  -8,   -4] level  2 lines          1 accuracy F  leaf  c3:-7 links --
  6 c3  not in the book
";
    assert_eq!(line::render(&steps), want);
    let e = steps[4].entry.as_ref().expect("in book");
    assert_eq!((e.value, e.lower, e.upper, e.level), (7, 4, 8, 2));
    assert!(line::inspect(&book, &parse_moves("f5f5").expect("moves")).is_err());
}

/// Edax → egbk3 → Edax keeps every position with its value, bounds, level, leaf and set of
/// links; egbk3 → Edax → egbk3 is byte-exact.
#[test]
fn egbk3_round_trips_on_golden_books() {
    for name in ["book-tiny.dat", "book-small.dat"] {
        let Some(book) = golden_book(name) else {
            return;
        };
        let records = egbk3::from_book(&book);
        let bytes = egbk3::write(&records);
        assert_eq!(
            bytes.len(),
            egbk3::HEADER_LEN + egbk3::RECORD_LEN * book.len()
        );
        let read = egbk3::read(&bytes).expect("own egbk3 parses");
        let (back, report) = egbk3::to_book(&read);
        assert_eq!(
            report.dropped + report.duplicates + report.bad_leaves,
            0,
            "{name}"
        );
        assert_eq!(report.borrowed, 0, "{name}");
        assert_eq!(back.len(), book.len(), "{name}");
        for p in book.positions() {
            let q = back.get(&p.board).expect("position kept");
            assert_eq!(
                (q.value, q.lower, q.upper, q.level, q.leaf, q.n_lines),
                (p.value, p.lower, p.upper, p.level, p.leaf, p.n_lines),
                "{name} {}",
                p.board
            );
            let moves = |p: &bookfarm_book::Position| {
                let mut v: Vec<_> = p.links.iter().map(|l| (l.mv.code(), l.score)).collect();
                v.sort_unstable();
                v
            };
            assert_eq!(moves(&q), moves(&p), "{name} {}", p.board);
        }
        // Byte-exact: the egbk3 written from the re-imported book is the one read.
        assert_eq!(egbk3::write(&egbk3::from_book(&back)), bytes, "{name}");
    }
}

/// The games of book-tiny (golden/book-tiny.edax) stored in a new book at `level`.
fn tiny_games_at(level: i32, search: &mut impl FnMut(&LeafRequest) -> LeafResult) -> MemBook {
    let mut book = MemBook::new(BookHeader::new(level, 12));
    grow::add_board(&mut book, &Board::start(), search);
    for g in [
        "f5d6c3d3c4f4f6f3e6e7d7c6",
        "f5f6e6f4e3c5c4e7c6",
        "f5f4e3f6d3",
    ] {
        grow::store_game(&mut book, &parse_moves(g).expect("moves"), search);
    }
    grow::fix_command(&mut book, search);
    book
}

/// Merging book-tiny (level 2) with the same games stored at level 4, in both directions and
/// whichever is newer: every common position ends at level 4 with the level-4 book's leaf (or a
/// leaf re-searched at level 4 when its move became a link); positions of one book keep theirs.
#[test]
fn merge_keeps_the_higher_level_everywhere() {
    let (Some(low), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let high = tiny_games_at(4, &mut search);
    assert!(high.positions().all(|p| p.level == 4));
    for (dst, src) in [(&low, &high), (&high, &low)] {
        for newer in [Newer::Incoming, Newer::Existing] {
            let mut m = dst.clone();
            let r = merge_by_level(&mut m, src, newer);
            let common = low
                .positions()
                .filter(|p| high.get(&p.board).is_some())
                .count();
            assert_eq!(r.upgraded + r.kept + r.replaced, common);
            assert_eq!(r.replaced, 0, "no position at equal levels");
            grow::link_book(&mut m, &mut search);
            negamax::negamax(&mut m);
            for p in m.positions() {
                let (a, b) = (low.get(&p.board), high.get(&p.board));
                match (a, b) {
                    (_, Some(h)) => {
                        assert_eq!(p.level, 4, "{}", p.board);
                        if !r.need_search.contains(&p.board) {
                            assert_eq!(p.leaf, h.leaf, "{}", p.board);
                        }
                    }
                    (Some(l), None) => assert_eq!((p.level, p.leaf), (l.level, l.leaf)),
                    (None, None) => panic!("merge invented {}", p.board),
                }
            }
        }
    }
    // Equal levels: the newer book's leaf wins.
    let mut other = low.clone();
    let id = other.probe(&board_after("f5f4e3f6d3")).expect("in book");
    let changed = Link::new(5, other.leaf(id).mv);
    other.set_leaf(id, changed);
    let mut m = low.clone();
    let r = merge_by_level(&mut m, &other, Newer::Incoming);
    // Every position is at level 2 in both: all take the incoming leaf (one differs).
    assert_eq!((r.replaced, r.kept, r.added), (low.len(), 0, 0));
    assert_eq!(m.get(&other.board(id)).expect("kept").leaf, changed);
    let mut m = low.clone();
    let r = merge_by_level(&mut m, &other, Newer::Existing);
    assert_eq!((r.replaced, r.kept), (0, low.len()));
    assert_eq!(m.get(&other.board(id)).expect("kept").leaf, low.leaf(id));
}

/// Better leaves on book-tiny: f5f4e3 (leaf d2 +1 against its only link f6 −7) is one, f5f4e3f6
/// (leaf g5 −3 below its link d3 +7) is not. Expanding them with the engine turns each leaf into
/// a link to a new position, and the book grows by one position per leaf.
#[test]
fn better_leaves_are_found_and_expanded() {
    let (Some(mut book), Some(mut search)) = (golden_book("book-tiny.dat"), engine()) else {
        return;
    };
    let id = |book: &MemBook, m: &str| book.probe(&board_after(m)).expect("in book");
    let better = leaves::better_leaves(&book);
    assert!(better.contains(&id(&book, "f5f4e3")));
    assert!(!better.contains(&id(&book, "f5f4e3f6")));
    // Brute force: a leaf above the best link score (links are negamaxed in the golden book).
    let brute: Vec<_> = book
        .ids()
        .filter(|&i| {
            let leaf = book.leaf(i);
            leaf.mv != Move::None
                && book.n_link(i) > 0
                && book.links(i).all(|l| leaf.score > l.score)
        })
        .collect();
    assert_eq!(better.len(), brute.len());
    let before: Vec<(Board, Move)> = better
        .iter()
        .map(|&i| (book.board(i), book.leaf(i).mv))
        .collect();
    let n = book.len();
    let boards = before.iter().map(|&(b, _)| b).collect();
    let changes = run_serial(&mut book, Operation::Expand { boards }, &mut search).changes;
    negamax::negamax(&mut book);
    assert_eq!(changes.positions, book.len() - n);
    assert_eq!(
        book.len(),
        n + before.len(),
        "each leaf led to a new position"
    );
    for (b, mv) in before {
        let p = book.get(&b).expect("kept");
        assert!(
            p.links.iter().any(|l| l.mv == mv),
            "{b}: leaf {mv} is a link"
        );
    }
}
