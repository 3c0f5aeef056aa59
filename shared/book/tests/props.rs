//! Property tests: incremental negamax equals the full recompute on random books, grown books
//! are fixed points of `book link` (Edax's linking and negamax), and the book.dat reader
//! survives truncated, bit-flipped and random input without panicking.

mod common;

use bookfarm_book::driver::{Driver, Progress, run_serial};
use bookfarm_book::edax::{book_to_bytes, read_book};
use bookfarm_book::grow::{check_position, link_command};
use bookfarm_book::mem::child_board;
use bookfarm_book::negamax::{link_position, negamax, propagate, recompute_all};
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::Deviate;
use bookfarm_book::synth::{Draw, SplitMix64, SynthParams, random_book, random_leaf};
use bookfarm_book::{BAD_LINK, BookHeader, Link, MemBook, NodeId, Position, dump};
use bookfarm_engine::board::BitIter;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::{Board, Move};
use proptest::prelude::*;
use rand::SeedableRng;
use std::collections::HashMap;

/// Every computed field of every position, keyed by board (ids differ between books).
fn results(book: &MemBook) -> Vec<String> {
    let mut v: Vec<String> = book.ids().map(|id| dump::position_line(book, id)).collect();
    v.sort();
    v
}

/// One random modification of the kind the cluster applies; returns the ids to propagate from.
fn mutate(book: &mut MemBook, rng: &mut SplitMix64) -> Vec<NodeId> {
    let ids: Vec<NodeId> = book.ids().collect();
    let id = ids[rng.below(ids.len() as u64) as usize];
    match rng.below(4) {
        // A new leaf score (a re-search).
        0 => {
            let leaf = book.leaf(id);
            if leaf.mv != Move::None {
                book.set_leaf(id, Link::new(rng.score(), leaf.mv));
            }
            vec![id]
        }
        // A new level (changes the error bounds).
        1 => {
            book.set_level(id, rng.below(61) as u8);
            vec![id]
        }
        // The leaf disappears or moves to another free square.
        2 => {
            if rng.below(2) == 0 {
                book.set_leaf(id, BAD_LINK);
            } else {
                random_leaf(book, id, rng);
            }
            vec![id]
        }
        // Expansion (edax-spec §4.4): the leaf's child enters the book, the leaf becomes a link
        // and a new leaf is chosen.
        _ => {
            let leaf = book.leaf(id);
            if leaf.mv == Move::None {
                return vec![id];
            }
            let board = book.board(id);
            let child = child_board(&board, leaf.mv);
            let cid = match book.find(&child) {
                Some(c) => c,
                None => {
                    let level = book.level(id);
                    let c = book
                        .insert_new(&Position::new(child, level))
                        .expect("child is new");
                    link_position(book, c);
                    random_leaf(book, c, rng);
                    c
                }
            };
            let score = book.score(cid).value;
            book.add_link(id, Link::new((-i32::from(score)) as i8, leaf.mv));
            random_leaf(book, id, rng);
            vec![cid, id]
        }
    }
}

/// Number of cases: `default`, or `PROPTEST_CASES` when set (for long fuzzing runs).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn incremental_equals_full(seed in any::<u64>(), plies in 4u32..22, games in 1usize..40,
                               steps in 1usize..40, batch in 1usize..4) {
        let mut book = random_book(SynthParams { seed, positions: games * plies as usize / 2 + 2,
                                                 plies, level: None });
        negamax(&mut book);
        let mut rng = SplitMix64::seed_from_u64(seed ^ 0x5eed);
        for _ in 0..steps {
            let mut changed = Vec::new();
            for _ in 0..batch {
                changed.extend(mutate(&mut book, &mut rng));
            }
            propagate(&mut book, &changed);
            let mut full = book.clone();
            let stats = negamax(&mut full);
            prop_assert_eq!(stats.missing_children, 0);
            // Every position of these books is reachable from the start position.
            prop_assert_eq!(stats.positions, book.len());
            prop_assert_eq!(results(&book), results(&full));
        }
    }

    #[test]
    fn recompute_all_equals_full(seed in any::<u64>(), plies in 4u32..22, games in 1usize..40) {
        // Not negamaxed: random leaves and levels, zero counts, stale link scores.
        let book = random_book(SynthParams { seed, positions: games * plies as usize / 2 + 2,
                                             plies, level: None });
        let mut one_pass = book.clone();
        let stats = recompute_all(&mut one_pass);
        prop_assert_eq!(stats.positions, book.len());
        let mut full = book;
        negamax(&mut full);
        prop_assert_eq!(results(&one_pass), results(&full));
    }

    #[test]
    fn written_books_read_back(seed in any::<u64>(), plies in 1u32..16, games in 1usize..30) {
        let mut book = random_book(SynthParams { seed, positions: games * 8, plies, level: None });
        negamax(&mut book);
        let bytes = book_to_bytes(&book);
        let back = read_book(&bytes).expect("a written book reads back");
        prop_assert_eq!(dump::dump(&back, true), dump::dump(&book, true));
        prop_assert!(book_to_bytes(&back) == bytes);
    }

    #[test]
    fn random_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..400),
                                 count in 0i32..4) {
        let mut d = Vec::new();
        d.extend_from_slice(b"XADEKOOB\x04\x06");
        d.extend_from_slice(&[0u8; 28]);
        d.extend_from_slice(&count.to_le_bytes());
        d.extend_from_slice(&tail);
        let _ = read_book(&d);
        let _ = read_book(&tail);
    }
}

/// A random game of at most `plies` moves from the start (forced passes are left to `book add`
/// to insert).
fn random_game(rng: &mut SplitMix64, plies: u32) -> Vec<Move> {
    let mut b = Board::start();
    let mut moves = Vec::new();
    for _ in 0..plies {
        if b.must_pass() {
            b = b.pass();
        }
        let legal = b.moves();
        if legal == 0 {
            break;
        }
        let k = rng.below(u64::from(legal.count_ones())) as usize;
        let s = BitIter(legal).nth(k).expect("k < popcount");
        b = b.play(s).expect("legal");
        moves.push(Move::Square(s));
    }
    moves
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(16)))]

    #[test]
    fn grown_books_are_fixed_points_of_book_link(seed in any::<u64>(), depth in 6i32..11,
                                                 games in 0usize..6, rel in 0i32..4,
                                                 abs in 0i32..6, level in 1i32..4) {
        let mut book = MemBook::new(BookHeader::new(level, depth));
        let mut rng = SplitMix64::seed_from_u64(seed);
        let games = (0..games).map(|_| random_game(&mut rng, 24)).collect();
        for op in [
            Operation::New,
            Operation::AddGames { games },
            Operation::Deviate { params: Deviate::new(rel, abs) },
            Operation::Extend,
        ] {
            run_serial(&mut book, op, &mut common::mock);
        }
        for p in book.positions() {
            prop_assert_eq!(check_position(&p), None);
        }
        let mut linked = book.clone();
        let r = link_command(&mut linked, &mut |r| panic!("book link searched {r:?}"));
        prop_assert!(r.is_fixed_point(), "{:?}", r);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(24)))]

    /// A program cut where a run of it was blocked (a farm cancelling its running program) is
    /// reproduced by a run stopped at that point, whatever results arrive afterwards: the
    /// replay of a cancelled program.
    #[test]
    fn a_stopped_run_applies_what_the_cut_run_applied(seed in any::<u64>(), depth in 6i32..11,
                                                      games in 0usize..4, rounds in 0usize..12,
                                                      kind in 0u8..4, level in 1i32..4) {
        let mut book = MemBook::new(BookHeader::new(level, depth));
        let mut rng = SplitMix64::seed_from_u64(seed);
        run_serial(&mut book, Operation::New, &mut common::mock);
        let games: Vec<Vec<Move>> = (0..games).map(|_| random_game(&mut rng, 24)).collect();
        run_serial(&mut book, Operation::AddGames { games: games.clone() }, &mut common::mock);
        let program = match kind {
            0 => Program::new(Operation::Deviate { params: Deviate::new(2, 4) }),
            1 => Program::new(Operation::Play),
            2 => Program::new(Operation::AddGames {
                games: (0..3).map(|_| random_game(&mut rng, 24)).collect(),
            }),
            // From a root whose line is (partly) missing from the book.
            _ => Program {
                root: random_game(&mut rng, 4),
                ..Program::new(Operation::Deviate { params: Deviate::new(2, 4) })
            },
        };
        // The cut run: results arrive for `rounds` blocked runs, then the program is cancelled.
        let mut cut = book.clone();
        let mut driver = Driver::new(program.clone());
        let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
        let mut blocked = 0;
        while let Progress::Blocked(need) = driver.run(&mut cut, &known, 3) {
            if blocked == rounds {
                break;
            }
            blocked += 1;
            // One result of the blocking step at a time (a farm's results trickle in).
            known.insert(need[0], common::mock(&need[0]));
        }
        let Some(point) = driver.state().point() else {
            // Finished before the cut: nothing to stop.
            return Ok(());
        };
        // The replay knows every result, and stops at the point.
        let mut replayed = book.clone();
        let mut all: HashMap<LeafRequest, LeafResult> = HashMap::new();
        let mut replay = Driver::new(program).stopping_at(Some(point));
        while let Progress::Blocked(need) = replay.run(&mut replayed, &all, 0) {
            for r in need {
                all.insert(r, common::mock(&r));
            }
        }
        prop_assert_eq!(results(&replayed), results(&cut));
        prop_assert_eq!(replay.state().changes, driver.state().changes);
    }
}

fn golden_small() -> Option<Vec<u8>> {
    let dir = bookfarm_engine::testdata::shared_dir_or_skip()?;
    Some(std::fs::read(dir.join("golden/book-small.dat")).expect("read golden"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn truncated_files_are_rejected(cut in 0usize..46456) {
        let Some(d) = golden_small() else { return Ok(()); };
        let cut = cut % d.len();
        let e = read_book(&d[..cut]).expect_err("a truncated book is an error");
        prop_assert!(e.offset() <= cut);
    }

    #[test]
    fn bit_flips_never_panic(bit in 0usize..(46456 * 8), bit2 in 0usize..(46456 * 8)) {
        let Some(mut d) = golden_small() else { return Ok(()); };
        for b in [bit, bit2] {
            let b = b % (d.len() * 8);
            d[b / 8] ^= 1 << (b % 8);
        }
        match read_book(&d) {
            Ok(book) => {
                // Whatever was accepted is a valid book: it writes and reads back.
                let again = read_book(&book_to_bytes(&book)).expect("re-read");
                prop_assert_eq!(again.len(), book.len());
            }
            Err(e) => prop_assert!(e.offset() <= d.len()),
        }
    }
}
