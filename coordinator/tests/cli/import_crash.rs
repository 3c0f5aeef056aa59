//! Crash-safe import: `book import` killed with SIGKILL at random moments always leaves the
//! store with the old book or the new one (header and date included), never neither.

use bookfarm_book::synth::{SynthParams, random_book};
use bookfarm_book::{BookDate, BookHeader, edax, negamax};
use bookfarm_coordinator::store::Store;
use rand::Rng;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_bookfarm-coordinator");

/// How many kills.
const KILLS: usize = 10;

/// A stored book, in a form that does not depend on how it was written: the header and every
/// position's board, level, leaf and links, sorted by board.
type Digest = (BookHeader, Vec<(u64, u64, u8, [u8; 2], Vec<[u8; 2]>)>);

fn digest(db: &Path) -> Digest {
    let store = Store::open_book(db).expect("the store opens with a book");
    let loaded = store.load(db).expect("the store loads");
    let mut positions: Vec<_> = loaded
        .book
        .positions()
        .map(|p| {
            (
                p.board.player,
                p.board.opponent,
                p.level,
                p.leaf.to_bytes(),
                p.links.iter().map(|l| l.to_bytes()).collect(),
            )
        })
        .collect();
    positions.sort();
    (loaded.header, positions)
}

fn import(file: &Path, db: &Path) -> std::process::Child {
    Command::new(BIN)
        .args(["book", "import"])
        .arg(file)
        .arg("--db")
        .arg(db)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning bookfarm-coordinator")
}

fn import_ok(file: &Path, db: &Path) -> Duration {
    let t0 = Instant::now();
    let status = import(file, db).wait().expect("waiting for the import");
    assert!(status.success(), "import of {} failed", file.display());
    t0.elapsed()
}

/// A synthetic book written as book.dat, with a fixed header date.
fn write_book(path: &Path, seed: u64, positions: usize, year: i16) {
    let mut book = random_book(SynthParams {
        seed,
        positions,
        plies: 20,
        level: None,
    });
    negamax::negamax(&mut book);
    book.header_mut().date = BookDate {
        year,
        month: 2,
        day: 3,
        hour: 4,
        minute: 5,
        second: 6,
        pad: 0,
    };
    std::fs::write(path, edax::book_to_bytes(&book)).expect("writing the book");
}

#[test]
fn killed_imports_leave_the_old_or_the_new_book() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let old_file = dir.path().join("old.dat");
    let new_file = dir.path().join("new.dat");
    write_book(&old_file, 1, 2_000, 2001);
    write_book(&new_file, 2, 12_000, 2002);
    import_ok(&new_file, &db);
    let new = digest(&db);
    import_ok(&old_file, &db);
    let old = digest(&db);
    assert_ne!(old, new);
    // The header is kept, date included.
    assert_eq!(old.0.date.year, 2001);
    assert_eq!(new.0.date.year, 2002);
    assert_eq!((new.0.date.month, new.0.date.second), (2, 6));
    // How long an import of the new book takes, killed or not.
    let span = import_ok(&new_file, &db);
    import_ok(&old_file, &db);
    let seed: u64 = rand::rng().random();
    eprintln!("import takes {span:?}; kill moments from seed {seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let (mut kept_old, mut got_new) = (0, 0);
    for i in 0..KILLS {
        let at = span.mul_f64(rng.random_range(0.0..1.1));
        let mut child = import(&new_file, &db);
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        let now = digest(&db);
        if now == old {
            kept_old += 1;
        } else if now == new {
            got_new += 1;
            import_ok(&old_file, &db);
        } else {
            panic!("kill {i} at {at:?} (seed {seed}) left neither the old book nor the new one");
        }
    }
    eprintln!("{kept_old} kills kept the old book, {got_new} left the new one");
    assert_eq!(kept_old + got_new, KILLS);
}
