//! Selector tests on the golden books: the marks of deviate and enhance equal an independent
//! brute force over every path from the start position (edax-spec §4.6–4.7).
//!
//! The brute force has no `done` memo. That gives the same set as Edax's memoized walk when no
//! path contains a pass: the deviation roles and the window then depend only on the parity of a
//! position's disc count, so every path reaching a position reaches it in the same state (the
//! test checks that the books have no PASS link).

use bookfarm_book::edax::read_book;
use bookfarm_book::select::{
    Deviate, DeviatePass, deviate_pass, enhance_mark, extend_mark, play_mark, prepare_root,
};
use bookfarm_book::{MemBook, Position};
use bookfarm_engine::level::level_params;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::collections::BTreeSet;

fn load(name: &str) -> Option<MemBook> {
    let dir = bookfarm_engine::testdata::shared_dir_or_skip()?;
    let bytes = std::fs::read(dir.join("golden").join(format!("{name}.dat"))).expect("read");
    Some(read_book(&bytes).expect("golden book"))
}

/// The child position of `p` through `mv`, played with the engine's legal-move rules.
fn child(book: &MemBook, p: &Position, mv: Move) -> Option<Position> {
    let next = p.board.play_move(mv).ok()?;
    book.get(&canonical(&next).0)
}

fn inside(book: &MemBook, p: &Position) -> bool {
    p.board.empties() as i32 >= book.header().n_empties && !p.board.is_game_over()
}

fn brute_deviate(
    book: &MemBook,
    p: &Position,
    (pdev, odev, lo, hi): (i32, i32, i32, i32),
    out: &mut BTreeSet<Board>,
) {
    let v = i32::from(p.value);
    if v < lo || v > hi || !inside(book, p) {
        return;
    }
    for l in &p.links {
        let s = i32::from(l.score);
        if v - s <= pdev && lo <= s && s <= hi {
            let c = child(book, p, l.mv).expect("link child in book");
            brute_deviate(book, &c, (odev, pdev, -hi, -lo), out);
        }
    }
    let leaf = i32::from(p.leaf.score);
    if v - leaf <= pdev && lo <= leaf && leaf <= hi {
        out.insert(p.board);
    }
}

fn leaf_bounds(book: &MemBook, p: &Position) -> Option<(i32, i32)> {
    if p.leaf.score <= -127 {
        return None;
    }
    let e = p.board.empties();
    let (d, sel) = level_params(p.level, e);
    let v = i32::from(p.leaf.score);
    let h = book.header();
    Some(if d == e && sel == 5 {
        (v, v)
    } else if d == e {
        (v - h.endcut_error, v + h.endcut_error)
    } else {
        let bias = (d % 2) as i32 - (e % 2) as i32;
        (v - h.midgame_error - bias, v + h.midgame_error - bias)
    })
}

fn brute_enhance(book: &MemBook, p: &Position, out: &mut BTreeSet<Board>) {
    if !inside(book, p) {
        return;
    }
    let (lower, upper) = (i32::from(p.lower), i32::from(p.upper));
    for l in &p.links {
        let c = child(book, p, l.mv).expect("link child in book");
        if -i32::from(c.upper) >= lower || -i32::from(c.lower) >= upper {
            brute_enhance(book, &c, out);
        }
    }
    if let Some((lo, up)) = leaf_bounds(book, p)
        && (lo >= lower || up >= upper)
    {
        out.insert(p.board);
    }
}

fn no_pass_links(book: &MemBook) -> bool {
    book.positions()
        .all(|p| p.links.iter().all(|l| l.mv != Move::Pass))
}

fn as_set(book: &MemBook, ids: &[bookfarm_book::NodeId]) -> BTreeSet<Board> {
    let set: BTreeSet<Board> = ids.iter().map(|&id| book.board(id)).collect();
    assert_eq!(set.len(), ids.len(), "a position is marked once");
    set
}

#[test]
fn deviate_matches_brute_force() {
    for name in ["book-tiny", "book-small"] {
        let Some(mut book) = load(name) else {
            return;
        };
        assert!(no_pass_links(&book));
        let (root, s) = prepare_root(&mut book, &Board::start()).expect("start in book");
        let start = book.position(root);
        let mut total = 0;
        for (rel, abs) in [
            (2, 4),
            (0, 0),
            (1, 3),
            (4, 8),
            (129, 65),
            (-2, 4),
            (3, 1),
            (8, 2),
        ] {
            let params = Deviate::new(rel, abs);
            for (pass, pdev, odev) in [
                (DeviatePass::RootSide, params.rel, 0),
                (DeviatePass::OpponentSide, 0, params.rel),
            ] {
                let got = as_set(&book, &deviate_pass(&book, root, params, s, pass));
                let mut want = BTreeSet::new();
                brute_deviate(
                    &book,
                    &start,
                    (pdev, odev, s - params.abs, s + params.abs),
                    &mut want,
                );
                assert_eq!(got, want, "{name} deviate {rel} {abs} {pass:?}");
                total += got.len();
            }
        }
        assert!(total > 0, "{name}: the parameter sets select something");
    }
}

#[test]
fn enhance_matches_brute_force() {
    for name in ["book-tiny", "book-small"] {
        let Some(mut book) = load(name) else {
            return;
        };
        let mut total = 0;
        let depth_limit = book.header().n_empties;
        // With the book's own depth limit the bound-defining leaves lie beyond it and nothing is
        // selected (as in the golden Edax run); with no limit the deep leaves are candidates.
        for ((mid, end), n_empties) in [(2, 4), (0, 0), (1, 1), (4, 2), (8, 8)]
            .into_iter()
            .flat_map(|e| [(e, depth_limit), (e, 0)])
        {
            let h = book.header_mut();
            h.midgame_error = mid;
            h.endcut_error = end;
            h.n_empties = n_empties;
            let (root, _) = prepare_root(&mut book, &Board::start()).expect("start in book");
            let got = as_set(&book, &enhance_mark(&book, root));
            let mut want = BTreeSet::new();
            brute_enhance(&book, &book.position(root), &mut want);
            assert_eq!(
                got, want,
                "{name} enhance {mid} {end} n_empties {n_empties}"
            );
            total += got.len();
        }
        assert!(total > 0, "{name}: something is selected");
    }
}

#[test]
fn play_and_extend_marks() {
    let Some(mut book) = load("book-small") else {
        return;
    };
    let (root, _) = prepare_root(&mut book, &Board::start()).expect("start");
    let play = as_set(&book, &play_mark(&book, root));
    let extend = as_set(&book, &extend_mark(&book, root));
    let reachable: Vec<Position> = book.positions().filter(|p| inside(&book, p)).collect();
    // Every golden position is reachable from the start, so the marks are plain filters.
    let want_play: BTreeSet<Board> = reachable
        .iter()
        .filter(|p| p.links.is_empty())
        .map(|p| p.board)
        .collect();
    let want_extend: BTreeSet<Board> = reachable
        .iter()
        .filter(|p| i16::from(p.leaf.score) >= p.value)
        .map(|p| p.board)
        .collect();
    assert_eq!(play, want_play);
    assert_eq!(extend, want_extend);
    assert!(!play.is_empty() && !extend.is_empty());
}

mod random_books {
    use super::*;
    use bookfarm_book::negamax::negamax;
    use bookfarm_book::synth::{SynthParams, random_book};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn selectors_match_brute_force(seed in any::<u64>(), plies in 2u32..14, games in 1usize..30,
                                       rel in -3i32..6, abs in 0i32..12, mid in 0i32..5,
                                       end in 0i32..5, limit in 0i32..60) {
            let mut book = random_book(SynthParams { seed, positions: games * plies as usize,
                                                     plies, level: None });
            prop_assume!(no_pass_links(&book));
            let h = book.header_mut();
            h.midgame_error = mid;
            h.endcut_error = end;
            h.n_empties = limit;
            negamax(&mut book);
            let (root, s) = prepare_root(&mut book, &Board::start()).expect("start");
            let start = book.position(root);
            let params = Deviate::new(rel, abs);
            for (pass, pdev, odev) in [
                (DeviatePass::RootSide, params.rel, 0),
                (DeviatePass::OpponentSide, 0, params.rel),
            ] {
                let got = as_set(&book, &deviate_pass(&book, root, params, s, pass));
                let mut want = BTreeSet::new();
                brute_deviate(&book, &start, (pdev, odev, s - params.abs, s + params.abs), &mut want);
                prop_assert_eq!(got, want);
            }
            let got = as_set(&book, &enhance_mark(&book, root));
            let mut want = BTreeSet::new();
            brute_enhance(&book, &start, &mut want);
            prop_assert_eq!(got, want);
        }
    }
}
