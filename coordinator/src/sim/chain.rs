//! The serial build's chains of dependent searches: how long the serial book takes with
//! unlimited threads when no search starts before the results it depends on are known (no
//! guesses), with the search durations of a [`TimeTable`].
//!
//! The serial driver runs the program one step at a time without lookahead, as
//! [`run_serial`](bookfarm_book::driver::run_serial) does, so the searches are exactly the
//! serial build's. Each search gets a finish time under two rules:
//! * **line chain**: an expansion's searches start when the search that gave the expanded
//!   position its leaf (the last search of that position) has finished: a position's leaf
//!   move is what its expansion plays. Every other dependency (the marking of a pass, which
//!   reads the negamaxed book; the links a step adds) is ignored, so no schedule that builds
//!   this book without guessing finishes sooner;
//! * **pass chain**: the same, and a pass starts only when every search of the passes before
//!   it has finished (each pass is marked on the book the previous one left, as the serial
//!   schedule without speculation waits for it).
//!
//! A chain is the latest finish time. The highest efficiency a schedule bounded by a chain
//! can reach on `W` threads is `seconds ÷ (W × max(chain, seconds ÷ W))`
//! ([`Chain::efficiency_bound`]). Guessing (speculative prefetch) is not bounded by either:
//! with guesses that are always right every search could start at once.

use super::Truth;
use super::times::TimeTable;
use crate::service::new_mem_book;
use bookfarm_book::MemBook;
use bookfarm_book::driver::{Driver, PassKind, Phase, Progress};
use bookfarm_book::program::{Operation, Program};
use bookfarm_engine::Board;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use std::collections::HashMap;

/// The serial build's searches and its two chains (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chain {
    /// Searches of the serial build.
    pub searches: usize,
    /// Their seconds.
    pub seconds: f64,
    /// Passes: markings of the programs' selectors, and each adding program's games as one.
    pub passes: usize,
    /// Latest finish under the line rule, in seconds.
    pub line_seconds: f64,
    /// Latest finish under the pass rule, in seconds.
    pub pass_seconds: f64,
}

impl Chain {
    /// The highest efficiency (the serial build's seconds ÷ (threads × wall)) a schedule whose
    /// wall is at least `chain` can reach on `threads` threads.
    pub fn efficiency_bound(&self, threads: usize, chain: f64) -> f64 {
        let w = threads.max(1) as f64;
        let wall = chain.max(self.seconds / w);
        if wall > 0.0 {
            self.seconds / (w * wall)
        } else {
            1.0
        }
    }
}

/// The chains of the serial build `sim run` simulates: `new` on a new book at `level` and
/// `depth`, then `ops`, searches answered by `truth` and lasting `times` (at speed 1).
pub fn serial_chains(
    truth: Truth,
    times: &TimeTable,
    level: u8,
    depth: u8,
    ops: &[Program],
) -> Chain {
    let mut book = new_mem_book(level, depth);
    let programs: Vec<Program> = std::iter::once(Program::new(Operation::New))
        .chain(ops.iter().cloned())
        .collect();
    chains(&mut book, &programs, &mut |r| truth.search(r), &|r| {
        times.seconds(r)
    })
}

/// Run `programs` serially on `book`, answering with `search`, each search lasting
/// `seconds`, and measure the chains (see the module docs).
pub fn chains(
    book: &mut MemBook,
    programs: &[Program],
    search: &mut dyn FnMut(&LeafRequest) -> LeafResult,
    seconds: &dyn Fn(&LeafRequest) -> f64,
) -> Chain {
    let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
    // Per canonical board: the finish times (line, pass) of its last search.
    let mut last: HashMap<Board, (f64, f64)> = HashMap::new();
    let mut out = Chain {
        searches: 0,
        seconds: 0.0,
        passes: 0,
        line_seconds: 0.0,
        pass_seconds: 0.0,
    };
    // The pass the driver is in (program index, the driver's pass count), and when it
    // started under the pass rule.
    let mut pass: Option<(usize, u32)> = None;
    let mut pass_start = 0.0f64;
    for (i, program) in programs.iter().enumerate() {
        let mut driver = Driver::new(program.clone());
        while let Progress::Blocked(need) = driver.run(book, &known, 0) {
            let state = driver.state();
            if pass != Some((i, state.passes)) {
                pass = Some((i, state.passes));
                pass_start = out.pass_seconds;
                out.passes += 1;
            }
            // The position whose leaf move the blocked step plays.
            let expanded = match &state.phase {
                Phase::Expanding {
                    pass, todo, cursor, ..
                } if !matches!(pass, PassKind::Upgrade | PassKind::Resolve) => {
                    todo.get(*cursor).copied()
                }
                _ => None,
            };
            let (line, by_pass) = expanded
                .and_then(|b| last.get(&b).copied())
                .unwrap_or((0.0, 0.0));
            let ready = (line, by_pass.max(pass_start));
            for r in need {
                let t = seconds(&r);
                let finish = (ready.0 + t, ready.1 + t);
                last.insert(canonical(&r.board).0, finish);
                out.searches += 1;
                out.seconds += t;
                out.line_seconds = out.line_seconds.max(finish.0);
                out.pass_seconds = out.pass_seconds.max(finish.1);
                known.insert(r, search(&r));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{fake_search, serial_build_with};
    use bookfarm_book::driver::run_serial;
    use bookfarm_book::select::Deviate;

    /// A new book's start position, searched by `new`.
    fn new_searched() -> MemBook {
        let mut book = new_mem_book(4, 20);
        run_serial(&mut book, Operation::New, &mut fake_search);
        book
    }

    /// The canonical board of the leaf child of `board` in `book`.
    fn leaf_child(book: &MemBook, board: &Board) -> Board {
        let id = book.find(board).expect("in the book");
        let mv = book.position(id).leaf.mv;
        canonical(&board.next_unchecked(mv)).0
    }

    fn expand(boards: Vec<Board>) -> Program {
        Program::new(Operation::Expand { boards })
    }

    /// A hand-made build: `new`, then one `expand` program per line below, each a pass.
    /// Every search lasts 1 s except the re-search of B (the first move's position) when its
    /// leaf is expanded, which lasts 10 s.
    ///
    /// | program | searches (line rule: start → finish) | pass rule |
    /// |---|---|---|
    /// | new | start 0 → 1 | 0 → 1 |
    /// | expand start | B 1 → 2 (start's other moves transpose to B: linked, no re-search) | 1 → 2 |
    /// | expand B | C 2 → 3, B again 2 → 12 | 2 → 3, 2 → 12 |
    /// | expand C | D 3 → 4, C again 3 → 4 | 12 → 13, 12 → 13 |
    /// | expand D | E 4 → 5, D again 4 → 5 | 13 → 14, 13 → 14 |
    ///
    /// Line chain 12 s (B's long re-search), pass chain 14 s, 8 searches, 17 s.
    #[test]
    fn chains_of_a_hand_made_build() {
        let start = canonical(&Board::start()).0;
        // The boards each expansion reaches, read off the serial build step by step.
        let mut book = new_searched();
        let mut lines = vec![start];
        for _ in 0..3 {
            let b = *lines.last().expect("a board");
            let child = leaf_child(&book, &b);
            run_serial(&mut book, expand(vec![b]), &mut fake_search);
            lines.push(child);
        }
        let b = lines[1];
        let programs: Vec<Program> = std::iter::once(Program::new(Operation::New))
            .chain(lines.iter().map(|&x| expand(vec![x])))
            .collect();
        let mut fresh = new_mem_book(4, 20);
        let mut asked = Vec::new();
        let chain = chains(
            &mut fresh,
            &programs,
            &mut |r| {
                asked.push(*r);
                fake_search(r)
            },
            &|r| {
                if canonical(&r.board).0 == b && r.excluded != 0 {
                    10.0
                } else {
                    1.0
                }
            },
        );
        assert_eq!(asked.len(), 8, "{asked:?}");
        assert_eq!(
            asked
                .iter()
                .filter(|r| canonical(&r.board).0 == start)
                .count(),
            1,
            "the start is searched once: {asked:?}"
        );
        assert_eq!(
            chain,
            Chain {
                searches: 8,
                seconds: 17.0,
                passes: 5,
                line_seconds: 12.0,
                pass_seconds: 14.0,
            }
        );
        assert_eq!(fresh.len(), 5, "start, B, C, D and E");
        assert!(
            (chain.efficiency_bound(4, chain.pass_seconds) - 17.0 / 56.0).abs() < 1e-12,
            "wall bounded by the chain"
        );
        assert!(
            (chain.efficiency_bound(1, chain.pass_seconds) - 1.0).abs() < 1e-12,
            "one thread: wall bounded by the work"
        );
    }

    /// On a deviate build the chains search exactly the serial build's requests, and the
    /// pass rule is never shorter than the line rule.
    #[test]
    fn chains_search_the_serial_build() {
        let times = TimeTable::recorded(16).expect("recorded level-16 times");
        let ops = vec![Program::new(Operation::Deviate {
            params: Deviate::new(2, 4),
        })];
        let chain = serial_chains(Truth::Hash, &times, 4, 10, &ops);
        let (_, asked) = serial_build_with(Truth::Hash, 4, 10, &ops);
        let serial: f64 = asked.iter().map(|r| times.seconds(r)).sum();
        assert_eq!(chain.searches, asked.len());
        assert!((chain.seconds - serial).abs() < 1e-6 * serial);
        assert!(chain.passes > 2, "{chain:?}");
        assert!(chain.line_seconds <= chain.pass_seconds, "{chain:?}");
        assert!(chain.pass_seconds < chain.seconds, "{chain:?}");
    }
}
