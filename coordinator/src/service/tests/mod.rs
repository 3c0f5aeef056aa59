//! The service over a real sled store, driven by the mock engine; one file per room.

use super::*;
use crate::store::{Batch, Store};
use bookfarm_book::driver::run_serial;
use bookfarm_book::model::Position;
use bookfarm_book::program::{Operation, Program};
use bookfarm_engine::Square;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use bookfarm_proto::ENGINE_VERSION;
use bookfarm_proto::PROTOCOL_VERSION;
use bookfarm_proto::domain::{Ack, Failure, Identity, Job, JobResult};
use std::collections::HashMap;
use std::collections::HashSet;
use std::time::Instant;
use uuid::Uuid;

mod book;
mod growth;
mod idle;
mod lease;
mod programs;
mod restart;
mod schedule;
mod speculation;
mod submit;
mod trust;
mod workers;

/// A deterministic stand-in for the engine: the lowest open square, scored by a hash of the
/// resulting board (so transpositions agree), even and within [-20, 20]; a finished game is
/// scored by its discs.
pub(crate) fn mock_result(job: &Job) -> JobResult {
    let b = job.board;
    let open = b.moves() & !job.excluded;
    let (mv, score) = if b.is_game_over() {
        (Move::None, b.final_score())
    } else if b.moves() == 0 {
        (Move::Pass, 0)
    } else if let Some(x) = BitIter(open).next() {
        let sq = x;
        let child = canonical(&b.play(sq).unwrap()).0;
        let h = child.player.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ child.opponent.rotate_left(17);
        (Move::Square(sq), ((h % 21) as i32 - 10) * 2)
    } else {
        (Move::None, 0)
    };
    JobResult {
        job_id: job.id,
        leaf: LeafResult {
            mv,
            score,
            depth: expected(job).0,
            selectivity: expected(job).1,
            exact: false,
            nodes: 1,
            elapsed: Duration::from_micros(1),
        },
    }
}

/// `r` with its search result changed by `change`.
pub(crate) fn changed(mut r: JobResult, change: impl FnOnce(&mut LeafResult)) -> JobResult {
    change(&mut r.leaf);
    r
}

/// The depth and selectivity a search of `job` reports (the level table's).
pub(crate) fn expected(job: &Job) -> (u32, u8) {
    if job.board.is_game_over() {
        (job.board.empties(), 5)
    } else {
        bookfarm_engine::level::level_params(job.level, job.board.empties())
    }
}

pub(crate) fn identity() -> Identity {
    Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "00".into(),
        search_signature: test_signature("00"),
    }
}

pub(crate) fn test_signature(eval: &str) -> String {
    bookfarm_engine::search::SearchSignature::new(
        &bookfarm_engine::search::SearchOptions::default(),
        eval,
    )
    .to_string()
}

/// A coordinator over a store in a temporary directory. The coordinator is not dropped when
/// the test ends: sled 0.34's drop of a database flushes in a loop, and that flush was seen to
/// wait forever for a log position nothing would write (gdb: `TreeInner::drop` in
/// `make_stable`, no other thread in sled), which then stops every other test at the next
/// batch. Tests that restart drop it explicitly ([`close`], [`release`]); the rest leave it to
/// the process's exit.
struct Fixture {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    c: std::mem::ManuallyDrop<Coordinator>,
}

fn fixture(level: u8, depth: u8, cfg: ServiceConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (h, entries) = new_book(level, depth);
    store.create(&h, &entries).unwrap();
    let clock = Arc::new(ManualClock::default());
    let c = Coordinator::open(store, dir.path(), cfg, clock.clone()).unwrap();
    Fixture {
        dir,
        clock,
        c: std::mem::ManuallyDrop::new(c),
    }
}

fn reopen(f: Fixture, cfg: ServiceConfig) -> Fixture {
    let Fixture { dir, clock, c } = f;
    close(std::mem::ManuallyDrop::into_inner(c));
    let store = Store::open(dir.path()).unwrap();
    let c = Coordinator::open(store, dir.path(), cfg, clock.clone()).unwrap();
    Fixture {
        dir,
        clock,
        c: std::mem::ManuallyDrop::new(c),
    }
}

/// Flush and drop `c`, and wait until its store is closed: a growth runner thread that has just
/// finished may still hold the last handle, and two stores open on one directory at once
/// can deadlock inside sled.
fn close(c: Coordinator) {
    c.flush().unwrap();
    release(c);
}

/// Drop `c` without a checkpoint (a kill: the store keeps what it holds), and wait until its
/// store is closed (see [`close`]).
fn release(c: Coordinator) {
    let shared = c.0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Arc::strong_count(&shared) > 1 {
        assert!(
            Instant::now() < deadline,
            "another thread still holds the coordinator after 120 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(shared);
}

/// Run the mock engine until the growth programs are done; returns the number of accepted
/// results.
fn drive(c: &Coordinator, slots: u32) -> u64 {
    drive_workers(c, 1, slots, 0)
}

/// Run `workers` mock workers leasing `slots` jobs each, in turns, until the growth programs
/// are done. Each submits its results in an order scrambled by `seed`, so that results land
/// in a different order from the serial program's.
fn drive_workers(c: &Coordinator, workers: usize, slots: u32, seed: u64) -> u64 {
    let id = identity();
    let ws: Vec<Uuid> = (0..workers)
        .map(|i| c.register(&id, &format!("t{i}"), 1).unwrap())
        .collect();
    let mut held: Vec<Vec<Job>> = vec![Vec::new(); workers];
    let mut accepted = 0;
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for round in 0..1_000_000usize {
        let k = round % workers;
        held[k].extend(c.lease(&id, &ws[k], slots).unwrap());
        if held[k].is_empty() {
            c.settle().unwrap();
            if held.iter().all(Vec::is_empty) {
                let s = c.status();
                if s.queued == 0 {
                    assert_eq!(s.in_flight, 0);
                    break;
                }
            }
            continue;
        }
        // Submit a scrambled part of what this worker holds.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = 1 + (rng as usize) % held[k].len();
        let take: Vec<Job> = if rng & 1 == 0 {
            held[k].drain(..n).collect()
        } else {
            let at = held[k].len() - n;
            held[k].drain(at..).rev().collect()
        };
        let results: Vec<JobResult> = take.iter().map(mock_result).collect();
        let acks = c.submit(&id, &ws[k], &results).unwrap();
        accepted += acks.iter().filter(|a| **a == Ack::Accepted).count() as u64;
    }
    c.settle().unwrap();
    accepted
}

/// [`mock_result`] as a leaf search (the book crate's driver).
fn mock_search(r: &LeafRequest) -> LeafResult {
    let j = Job {
        id: Uuid::nil(),
        board: r.board,
        excluded: r.excluded,
        level: r.level,
        attempt: 0,
    };
    mock_result(&j).leaf
}

/// The book the book crate's driver grows serially from a new book with the same searches.
fn serial_book(level: u8, depth: u8, ops: &[Program]) -> bookfarm_book::MemBook {
    let mut book = new_mem_book(level, depth);
    let mut search = mock_search;
    run_serial(&mut book, Operation::New, &mut search);
    for op in ops {
        run_serial(&mut book, op.clone(), &mut search);
    }
    book
}

/// The coordinator's book equals `want` exactly: positions, links, leaves, levels, values.
fn assert_same_book(c: &Coordinator, want: &bookfarm_book::MemBook) {
    let (_, mut ours) = c.snapshot();
    let mut theirs: Vec<Position> = want.positions().collect();
    ours.sort_by_key(|p| p.board);
    theirs.sort_by_key(|p| p.board);
    assert_eq!(ours.len(), theirs.len(), "positions");
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
}

/// The coordinator's book is a fixed point of Edax's linking and negamax (`book link`).
fn assert_linked(c: &Coordinator) {
    let mut book = c.book_snapshot();
    let r = bookfarm_book::grow::link_command(&mut book, &mut |r| {
        panic!("book link searched {r:?}: a transposition was left unlinked")
    });
    assert!(r.is_fixed_point(), "book link changed the book: {r:?}");
}

/// Properties 1–3 of a finished asynchronous book, on the coordinator's book: (1) the serial
/// selection of `program` finds nothing; (2) `book fix` changes nothing but the order of links
/// (and `book link` nothing at all): negamax is a fixed point and every leaf was searched with
/// its position's links excluded; (3) every leaf came from a known result, and that result is
/// the mock engine's answer (no dropped or wrong result is left in the book).
fn assert_finished_book(c: &Coordinator, program: &Program) {
    let book = c.book_snapshot();
    let mut negamaxed = book.clone();
    let left = bookfarm_book::schedule::unfinished(&mut negamaxed, program);
    assert!(left.is_empty(), "the serial selection still marks {left:?}");
    assert_linked(c);
    let mut fixed = book.clone();
    let report =
        bookfarm_book::grow::fix_command(&mut fixed, &mut |r| panic!("book fix searched {r:?}"));
    assert!(
        report.problems.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.changes, Default::default(), "{report:?}");
    let by_move = |b: &bookfarm_book::MemBook| {
        let mut v: Vec<Position> = b.positions().collect();
        v.sort_by_key(|p| p.board);
        for p in &mut v {
            p.links.sort_by_key(|l| l.mv.code());
        }
        v
    };
    assert!(
        by_move(&book) == by_move(&fixed),
        "book fix changed a position"
    );
    let wrong = unvalidated_leaves(c);
    assert!(wrong.is_empty(), "leaves without a valid result: {wrong:?}");
}

/// The positions of the coordinator's book whose leaf no known result gives, or only one that
/// is not the mock engine's answer (a lie).
fn unvalidated_leaves(c: &Coordinator) -> Vec<Board> {
    let book = c.book_snapshot();
    let g = c.growth();
    let mut by_position: HashMap<(Board, u8), Vec<(LeafRequest, LeafResult)>> = HashMap::new();
    for (q, r) in g.results.iter() {
        by_position
            .entry((canonical(&q.board).0, q.level))
            .or_default()
            .push((*q, *r));
    }
    book.ids()
        .filter(|&id| book.leaf(id).mv != Move::None)
        .filter(|&id| {
            !by_position
                .get(&(book.board(id), book.level(id)))
                .is_some_and(|v| {
                    v.iter().any(|(q, r)| {
                        let honest = mock_search(q);
                        bookfarm_book::schedule::run::leaf_came_from(&book, id, q, r)
                            && (honest.mv, honest.score) == (r.mv, r.score)
                    })
                })
        })
        .map(|id| book.board(id))
        .collect()
}

/// `w` answers the root search in 1 s (the level's mean search time from then on), deviate 2 4
/// starts, and `w` leases up to 64 of its searches, which it holds.
fn hold_deviate24(f: &Fixture, id: &Identity, w: &Uuid) -> Vec<Job> {
    let root = f.c.lease(id, w, 1).unwrap();
    f.clock.advance(Duration::from_secs(1));
    f.c.submit(id, w, &[mock_result(&root[0])]).unwrap();
    f.c.settle().unwrap();
    f.c.start(deviate24()).unwrap();
    let held = f.c.lease(id, w, 64).unwrap();
    assert!(!held.is_empty());
    held
}

fn deviate24() -> Program {
    Program::new(Operation::Deviate {
        params: bookfarm_book::select::Deviate::new(2, 4),
    })
}

/// The book crate's full Edax negamax (from the start position) agrees with ours.
fn assert_matches_book_crate(c: &Coordinator) {
    let mut book = c.book_snapshot();
    let positions: Vec<Position> = book.positions().collect();
    bookfarm_book::negamax::negamax(&mut book);
    for p in &positions {
        let q = book.get(&p.board).unwrap();
        assert_eq!(
            (
                p.value, p.lower, p.upper, p.n_wins, p.n_draws, p.n_losses, p.n_lines
            ),
            (
                q.value, q.lower, q.upper, q.n_wins, q.n_draws, q.n_losses, q.n_lines
            ),
            "{}",
            p.board
        );
    }
}

/// The search request of a job.
fn request_of(j: &Job) -> LeafRequest {
    LeafRequest {
        board: j.board,
        excluded: j.excluded,
        level: j.level,
    }
}

/// Lease up to `slots` jobs at a time for worker `w` and submit `answer`'s results for them
/// (the mock engine's, or altered ones) until no work is queued; returns every request leased.
fn answer_until_done(
    c: &Coordinator,
    w: &Uuid,
    slots: u32,
    mut answer: impl FnMut(&[Job]) -> Vec<JobResult>,
) -> Vec<LeafRequest> {
    let id = identity();
    let mut leased = Vec::new();
    loop {
        let jobs = c.lease(&id, w, slots).unwrap();
        if jobs.is_empty() {
            c.settle().unwrap();
            if c.status().queued == 0 {
                return leased;
            }
            continue;
        }
        leased.extend(jobs.iter().map(request_of));
        c.submit(&id, w, &answer(&jobs)).unwrap();
    }
}

fn mock_results(jobs: &[Job]) -> Vec<JobResult> {
    jobs.iter().map(mock_result).collect()
}

/// Speculation off: the tests that count the round's searches and leases exactly.
fn without_speculation() -> ServiceConfig {
    ServiceConfig {
        speculation: 0,
        ..ServiceConfig::default()
    }
}

/// A level-2, depth-10 book, speculation off.
fn fixture_without_speculation() -> Fixture {
    fixture(2, 10, without_speculation())
}

/// Speculation on (4 per thread), no lookahead, no backup leases.
fn speculating() -> ServiceConfig {
    ServiceConfig {
        lookahead: 0,
        speculation: 4,
        backup_after: 0,
        ..ServiceConfig::default()
    }
}
