//! Helpers shared by the book crate's integration tests: Edax's golden files, replaying moves,
//! and the engine on Edax's golden evaluation.
// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use bookfarm_book::{MemBook, edax};
use bookfarm_engine::formats::transcript::parse_moves;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchOptions, Searcher};
use bookfarm_engine::{Board, Move, Square};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A file of `../shared/golden`, or `None` (test skipped) without `../shared`.
pub fn golden(name: &str) -> Option<PathBuf> {
    bookfarm_engine::testdata::shared_dir_or_skip().map(|d| d.join("golden").join(name))
}

/// A golden book.dat, read.
pub fn golden_book(name: &str) -> Option<MemBook> {
    let bytes = std::fs::read(golden(name)?).expect("read golden book");
    Some(edax::read_book(&bytes).expect("golden book parses"))
}

/// The board after `moves` from the start position (passes inserted where forced).
pub fn board_after(moves: &str) -> Board {
    let mut b = Board::start();
    for mv in parse_moves(moves).expect("moves") {
        if b.must_pass() {
            b = b.pass();
        }
        b = b.play_move(mv).expect("legal");
    }
    b
}

/// The engine on Edax's golden evaluation (eval-seed1.dat) with a small table.
pub fn searcher() -> Option<Searcher> {
    let eval = golden("eval-seed1.dat")?;
    let eval = Arc::new(bookfarm_engine::eval::Eval::load(eval).expect("eval"));
    Some(Searcher::with_options(
        eval,
        SearchOptions {
            tt_bits: 14,
            ..SearchOptions::default()
        },
    ))
}

/// [`searcher`] as a leaf-search callback.
pub fn engine() -> Option<impl FnMut(&LeafRequest) -> LeafResult> {
    let mut searcher = searcher()?;
    let abort = AtomicBool::new(false);
    Some(move |r: &LeafRequest| searcher.leaf_search(r, &abort))
}

/// A deterministic stand-in for the engine: the lowest non-excluded legal square, scored by a
/// hash of the board; Edax's conventions for passes and finished games.
pub fn mock(req: &LeafRequest) -> LeafResult {
    let b = req.board;
    let (mv, score) = if b.moves() == 0 {
        if b.pass().moves() != 0 {
            let h = (b.player.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59) as i32;
            (Move::Pass, h - 16)
        } else {
            (Move::None, b.final_score())
        }
    } else {
        let open = b.moves() & !req.excluded;
        if open == 0 {
            (Move::None, -127)
        } else {
            let x = open.trailing_zeros() as u8;
            let nb = b.play_flips(x, b.flips(Square::new(x).expect("square")));
            let h = ((nb.player ^ nb.opponent.rotate_left(7)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                >> 58) as i32;
            (Move::from_code(x).expect("move"), h - 32)
        }
    };
    LeafResult {
        mv,
        score,
        depth: 0,
        selectivity: 5,
        exact: false,
        nodes: 1,
        elapsed: Duration::ZERO,
    }
}
