use super::generations::{BASE_DIR, base_file};
use super::keys::{K, book_tree_name, encode_plain, is_book_tree};
use super::sled_repair::{SLED_CONF_FILE, SLED_DATA_FILE};
use super::*;
use bookfarm_book::MemBook;
use bookfarm_book::model::{BookHeader, Link};
use bookfarm_engine::search::LeafRequest;
use bookfarm_engine::{Board, Move, Square};
use std::path::PathBuf;
use uuid::Uuid;

fn sample_entry() -> Entry {
    let mut p = Position::new(Board::start(), 3);
    p.leaf = Link::new(-2, Move::Square(Square::parse("d3").unwrap()));
    p.links = vec![Link::new(5, Move::Square(Square::parse("f5").unwrap()))];
    p.value = 5;
    p.lower = 3;
    p.upper = 7;
    p.n_lines = 9;
    Entry::new(p)
}

#[test]
fn create_load_round_trip_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let h = BookHeader::new(2, 12);
    let e = sample_entry();
    {
        let s = Store::open(dir.path()).unwrap();
        assert!(!s.has_book().unwrap());
        s.create(&h, std::slice::from_ref(&e)).unwrap();
        let id = Uuid::new_v4();
        let mut b = Batch::default();
        b.put_done(&id, &e.pos.board).unwrap();
        s.apply(b).unwrap();
        s.flush().unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    let l = s.load(dir.path()).unwrap();
    assert_eq!(l.header, h);
    assert_eq!(l.book.header(), &h);
    assert_eq!(l.book.positions().collect::<Vec<_>>(), vec![e.pos]);
    assert_eq!(l.done.len(), 1);
}

#[test]
fn missing_book_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let e = s.load(dir.path()).unwrap_err();
    assert!(e.to_string().contains("no book here"), "{e}");
    drop(s);
    let e = Store::open_book(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("no book here") && e.contains("book new --db"),
        "{e}"
    );
    // A directory that does not exist is refused without being created.
    let missing = dir.path().join("typo");
    assert!(Store::open_book(&missing).is_err());
    assert!(!missing.exists());
}

/// Replacing the book is one batch: the old positions, results and growth state are gone, the
/// new header (date included) and positions are there, credentials and standings stay.
#[test]
fn create_replaces_everything_but_credentials_and_standings() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let mut h = BookHeader::new(8, 20);
    h.date.year = 1999;
    s.create(&h, &[sample_entry()]).unwrap();
    let mut b = Batch::default();
    b.put_signature("sig").unwrap();
    s.apply(b).unwrap();
    let cred = CredentialRecord {
        name: "host".into(),
        owner: "me".into(),
        trusted: false,
        state: CredentialState::Active,
        reason: String::new(),
        created_unix: 0,
        token_sha256: [1; 32],
    };
    assert!(s.credentials().unwrap().insert_new(&cred).unwrap());
    let earned = TrustRecord {
        owner: "me".into(),
        streak: 40,
        earned_ms: 7,
        results: 40,
        ..TrustRecord::default()
    };
    let caught = TrustRecord {
        owner: "them".into(),
        invalid: 3,
        blocked: true,
        ..TrustRecord::default()
    };
    let mut b = Batch::default();
    b.put_trust("host", &earned).unwrap();
    b.put_trust("liar", &caught).unwrap();
    s.apply(b).unwrap();
    let mut h2 = BookHeader::new(4, 10);
    h2.date.year = 2003;
    s.create(&h2, &[]).unwrap();
    let l = s.load(dir.path()).unwrap();
    assert_eq!(l.header, h2);
    assert!(l.book.is_empty() && l.signature.is_none());
    assert_eq!(s.credentials().unwrap().list().unwrap().len(), 1);
    let mut standings = s.trust_records().unwrap();
    standings.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        standings,
        vec![("host".to_string(), earned), ("liar".to_string(), caught)]
    );
    // And after reopening the store.
    drop(l);
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.trust_records().unwrap().len(), 2);
}

/// The base keeps the book's order; position records written later replace a base position in place
/// or add positions after the base; a replacement leaves only the new base file.
#[test]
fn base_file_and_position_records_over_it() {
    use bookfarm_book::synth::{SynthParams, random_book};
    let dir = tempfile::tempdir().unwrap();
    let mut book = random_book(SynthParams {
        seed: 17,
        positions: 3_000,
        plies: 30,
        level: None,
    });
    bookfarm_book::negamax::negamax(&mut book);
    // A position the base does not hold, for growth to add below.
    let last = book.ids().last().unwrap();
    let added = Entry::new(book.remove(&book.board(last)).unwrap());
    let s = Store::open(dir.path()).unwrap();
    s.create(&BookHeader::new(2, 12), &[sample_entry()])
        .unwrap();
    s.create_book(&book).unwrap();
    let base: BaseRecord = s.meta("base").unwrap().unwrap();
    assert_eq!((base.generation, base.positions), (2, book.len() as u64));
    let files: Vec<_> = std::fs::read_dir(dir.path().join(BASE_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files, vec![base_file(dir.path(), 2)]);
    // Growth rewrites a base position and adds one that is not in the book.
    let first = book.ids().next().unwrap();
    let mut changed = book.position(first);
    changed.level = (changed.level + 1) % 61;
    let mut b = Batch::default();
    b.put_position(&changed).unwrap();
    b.put_entry(&added).unwrap();
    s.apply(b).unwrap();
    drop(s);
    let s = Store::open_book(dir.path()).unwrap();
    let loaded = s.load(dir.path()).unwrap().book;
    let mut want: Vec<Position> = book.positions().collect();
    want[0] = changed;
    want.push(added.pos.clone());
    assert_eq!(loaded.positions().collect::<Vec<_>>(), want);
    // The base book a replay starts from ignores the position records; reverting to it (in a
    // replay's checkpoint) removes them all, and positions written after the reversion in the
    // same batch stay.
    let base: Vec<Position> = book.positions().collect();
    let replayed = s.base_book().unwrap();
    assert_eq!(replayed.positions().collect::<Vec<_>>(), base);
    let mut b = Batch::default();
    s.revert_to_base(&mut b);
    b.put_entry(&added).unwrap();
    s.apply(b).unwrap();
    let mut want = base;
    want.push(added.pos);
    let loaded = s.load(dir.path()).unwrap().book;
    assert_eq!(loaded.positions().collect::<Vec<_>>(), want);
}

/// A borrowed record encodes to the bytes of the owned one, whichever way it was built.
#[test]
fn borrowed_position_records_encode_like_owned_ones() {
    use bookfarm_book::synth::{SynthParams, random_book};
    let mut book = random_book(SynthParams {
        seed: 5,
        positions: 300,
        plies: 20,
        level: None,
    });
    bookfarm_book::negamax::negamax(&mut book);
    assert!(book.ids().any(|id| book.n_link(id) > 1));
    for id in book.ids() {
        let owned =
            encode_plain(&PositionRecord::from_entry(&Entry::new(book.position(id)))).unwrap();
        let mut by_position = Batch::default();
        by_position.put_position(&book.position(id)).unwrap();
        let mut by_id = Batch::default();
        by_id.put_book_position(&book, id).unwrap();
        assert_eq!(by_position.chunks, vec![owned.clone()]);
        assert_eq!(by_id.chunks, vec![owned]);
    }
}

/// A result record holding a [`LeafResult`] is stored as the record of its fields was (the
/// layout the version-1 fixture's results are in): move code, score, depth, selectivity,
/// exact, nodes, search time in microseconds, then the provenance.
#[test]
fn result_records_keep_the_layout_of_their_fields() {
    use bookfarm_engine::search::LeafResult;
    #[derive(serde::Serialize)]
    struct Fields {
        mv: u8,
        score: i32,
        depth: u32,
        selectivity: u8,
        exact: bool,
        nodes: u64,
        elapsed_us: u64,
        worker: [u8; 16],
        job: [u8; 16],
        accepted_ms: u64,
        sources: Vec<String>,
    }
    let mut r = ResultRecord::of(&LeafResult {
        mv: Move::Square(Square::parse("f5").unwrap()),
        score: -12,
        depth: 21,
        selectivity: 3,
        exact: true,
        nodes: 1 << 40,
        elapsed: std::time::Duration::from_micros(123_456),
    });
    r.worker = [7; 16];
    r.job = [9; 16];
    r.accepted_ms = 1_795_684_749_377;
    r.sources = vec!["host2".into(), "host1".into()];
    let flat = Fields {
        mv: r.leaf.mv.code(),
        score: -12,
        depth: 21,
        selectivity: 3,
        exact: true,
        nodes: 1 << 40,
        elapsed_us: 123_456,
        worker: [7; 16],
        job: [9; 16],
        accepted_ms: 1_795_684_749_377,
        sources: r.sources.clone(),
    };
    let bytes = encode_plain(&r).unwrap();
    assert_eq!(bytes, encode_plain(&flat).unwrap());
    assert_eq!(keys::decode_plain::<ResultRecord>(b"k", &bytes).unwrap(), r);
    let sealed = keys::encode(b"k", &r).unwrap();
    assert_eq!(sealed[..bytes.len()], bytes[..]);
    assert_eq!(keys::decode::<ResultRecord>(b"k", &sealed).unwrap(), r);
}

fn keys_with_prefix(s: &Store, prefix: u8) -> usize {
    s.tree().scan_prefix([prefix]).count()
}

/// Position records are written in chunks under the writing batch's sequence number; a later
/// batch's version of a position wins over an earlier one; a replacement removes every earlier
/// record; all of it survives a reopen, which also restores the chunk counters.
#[test]
fn position_chunks_override_older_records_and_a_replacement_removes_them() {
    use bookfarm_book::synth::{SynthParams, random_book};
    let dir = tempfile::tempdir().unwrap();
    let mut book = random_book(SynthParams {
        seed: 23,
        positions: 2_500,
        plies: 30,
        level: None,
    });
    bookfarm_book::negamax::negamax(&mut book);
    let s = Store::open(dir.path()).unwrap();
    s.create_book(&book).unwrap();
    assert!(!s.positions_fold_due());
    let ids: Vec<_> = book.ids().collect();
    let bump = |p: &mut Position| p.level = (p.level + 1) % 61;
    // Two checkpoints: every position (three chunks, the first ten changed), then the first
    // five again.
    let mut b = Batch::default();
    for &id in &ids {
        let mut p = book.position(id);
        if ids[..10].contains(&id) {
            bump(&mut p);
        }
        b.put_position(&p).unwrap();
        book.put_position(&p);
    }
    assert_eq!(b.chunks.len(), ids.len().div_ceil(CHUNK_POSITIONS));
    s.apply(b).unwrap();
    let mut b = Batch::default();
    for &id in &ids[..5] {
        let mut p = book.position(id);
        bump(&mut p);
        b.put_position(&p).unwrap();
        book.put_position(&p);
    }
    s.apply(b).unwrap();
    let want: Vec<Position> = book.positions().collect();
    assert_eq!(
        s.load(dir.path())
            .unwrap()
            .book
            .positions()
            .collect::<Vec<_>>(),
        want
    );
    assert_eq!(keys_with_prefix(&s, K), 3 + 1);
    let before = s.chunk_bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        before,
        s.tree()
            .scan_prefix([K])
            .map(|kv| kv.unwrap().1.len() as u64)
            .sum::<u64>()
    );
    drop(s);
    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(
        s.chunk_bytes.load(std::sync::atomic::Ordering::Relaxed),
        before
    );
    assert_eq!(
        s.load(dir.path())
            .unwrap()
            .book
            .positions()
            .collect::<Vec<_>>(),
        want
    );
    // A replacement writes the book once more and leaves only its own chunks.
    let mut b = Batch::default();
    b.replace_positions();
    for id in book.ids() {
        b.put_book_position(&book, id).unwrap();
    }
    s.apply(b).unwrap();
    assert_eq!(keys_with_prefix(&s, K), 3);
    let after = s.chunk_bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(after < before);
    assert_eq!(
        s.replaced_bytes.load(std::sync::atomic::Ordering::Relaxed),
        after
    );
    drop(s);
    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(
        s.load(dir.path())
            .unwrap()
            .book
            .positions()
            .collect::<Vec<_>>(),
        want
    );
    assert_eq!(
        s.replaced_bytes.load(std::sync::atomic::Ordering::Relaxed),
        after
    );
    assert_eq!(
        s.chunk_bytes.load(std::sync::atomic::Ordering::Relaxed),
        after
    );
}

/// A fold is due once the chunks hold twice the last replacement, and never below twice
/// the minimum.
#[test]
fn position_chunks_fold_at_twice_the_last_replacement() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    for (chunks, replaced, due) in [
        (0, 0, false),
        (2 * FOLD_MIN_BYTES - 1, 0, false),
        (2 * FOLD_MIN_BYTES, 0, true),
        (2 * FOLD_MIN_BYTES, FOLD_MIN_BYTES + 1, false),
        (6 * FOLD_MIN_BYTES, 3 * FOLD_MIN_BYTES, true),
    ] {
        s.chunk_bytes.store(chunks, Relaxed);
        s.replaced_bytes.store(replaced, Relaxed);
        assert_eq!(s.positions_fold_due(), due, "{chunks} {replaced}");
    }
}

/// A replacement killed after writing its base file but before its batch: the store holds the
/// old book, and opening it deletes the unreferenced file.
#[test]
fn unreferenced_base_is_removed_and_the_old_book_kept() {
    let dir = tempfile::tempdir().unwrap();
    let h = BookHeader::new(2, 12);
    {
        let s = Store::open(dir.path()).unwrap();
        s.create(&h, &[sample_entry()]).unwrap();
    }
    let stray = base_file(dir.path(), 2);
    std::fs::write(&stray, b"half a book").unwrap();
    assert_reopens_with_the_sample(dir.path(), &h, &stray);
}

/// Reopen the store in `dir` as a book and check that it holds exactly [`sample_entry`] under
/// `header`, and that the reopening removed `leftover` (a stray file an interrupted writer left).
fn assert_reopens_with_the_sample(
    dir: &std::path::Path,
    header: &BookHeader,
    leftover: &std::path::Path,
) {
    let s = Store::open_book(dir).unwrap();
    assert!(!leftover.exists(), "{} was not removed", leftover.display());
    let l = s.load(dir).unwrap();
    assert_eq!(&l.header, header);
    assert_eq!(
        l.book.positions().collect::<Vec<_>>(),
        vec![sample_entry().pos]
    );
}

/// A damaged base file is an error naming it, not a panic.
#[test]
fn corrupt_base_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    s.create(&BookHeader::new(2, 12), &[sample_entry()])
        .unwrap();
    let path = base_file(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&path, bytes).unwrap();
    let e = s.load(dir.path()).unwrap_err().to_string();
    // The checksums find it first, naming the file and where it differs.
    assert!(
        e.contains(".dat") && e.contains("corrupt at byte offset 83"),
        "{e}"
    );
}

#[test]
fn reopen_right_after_drop_waits_for_the_lock_and_a_held_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20u8 {
        let s = Store::open(dir.path()).unwrap_or_else(|e| panic!("reopen {i}: {e}"));
        let mut b = Batch::default();
        b.put_entry(&sample_entry()).unwrap();
        s.apply(b).unwrap();
        s.flush().unwrap();
    }
    let held = Store::open(dir.path()).unwrap();
    let e = Store::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("lock"), "{e}");
    drop(held);
}

/// Results are stored in groups, one per batch: a later group's result of a request replaces
/// an earlier one, a removal drops the request's results stored before it (not one stored
/// after it), and the sequence continues after a reopen.
#[test]
fn result_groups_replace_older_results_and_removals_drop_them() {
    use bookfarm_engine::search::LeafResult;
    let dir = tempfile::tempdir().unwrap();
    let req = |i: u64| LeafRequest {
        board: Board::start(),
        excluded: i,
        level: 4,
    };
    let rec = |score: i32| {
        let mut r = ResultRecord::of(&LeafResult {
            mv: Move::Pass,
            score,
            depth: 4,
            selectivity: 5,
            exact: false,
            nodes: 7,
            elapsed: std::time::Duration::from_micros(3),
        });
        r.sources = vec!["w".into()];
        r
    };
    let loaded = |s: &Store| {
        let mut r: Vec<(u64, i32)> = s
            .results()
            .unwrap()
            .into_iter()
            .map(|(k, r)| (k.excluded, r.leaf.score))
            .collect();
        r.sort_unstable();
        r
    };
    {
        let s = Store::open(dir.path()).unwrap();
        s.create(&BookHeader::new(2, 12), &[sample_entry()])
            .unwrap();
        let mut b = Batch::default();
        for i in 0..3 {
            b.put_result(&req(i), &rec(2 * i as i32)).unwrap();
        }
        s.apply(b).unwrap();
        // Removed and stored again in later batches; removed in the batch that stored it.
        let mut b = Batch::default();
        b.put_result(&req(1), &rec(10)).unwrap();
        b.remove_result(&req(2));
        s.apply(b).unwrap();
        let mut b = Batch::default();
        b.put_result(&req(2), &rec(12)).unwrap();
        b.put_result(&req(3), &rec(14)).unwrap();
        b.remove_result(&req(3));
        s.apply(b).unwrap();
        assert_eq!(loaded(&s), vec![(0, 0), (1, 10), (2, 12)]);
        s.flush().unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(loaded(&s), vec![(0, 0), (1, 10), (2, 12)]);
    let mut b = Batch::default();
    b.remove_result(&req(0));
    s.apply(b).unwrap();
    let mut b = Batch::default();
    b.put_result(&req(4), &rec(-2)).unwrap();
    s.apply(b).unwrap();
    assert_eq!(loaded(&s), vec![(1, 10), (2, 12), (4, -2)]);
    assert_eq!(s.load(dir.path()).unwrap().results.len(), 3);
    // A batch that only removes is the last before a restart: the restarted store must not
    // hand its sequence number out again, or the request stored again under it would read as
    // removed at the next start.
    let mut b = Batch::default();
    b.remove_result(&req(4));
    s.apply(b).unwrap();
    s.flush().unwrap();
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    let mut b = Batch::default();
    b.put_result(&req(4), &rec(6)).unwrap();
    s.apply(b).unwrap();
    s.flush().unwrap();
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(loaded(&s), vec![(1, 10), (2, 12), (4, 6)]);
}

/// sled's open with its lock retried as [`Store::open_with_cache`] does (the dropped store's
/// flusher may still hold it).
fn raw_sled_open(dir: &std::path::Path) -> sled::Result<super::sled_gate::Db> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match sled::Config::new().path(dir).open() {
            Err(sled::Error::Io(e)) if std::time::Instant::now() < deadline => {
                assert!(e.to_string().contains("lock"), "{e}");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r.map(super::sled_gate::Db::new),
        }
    }
}

/// A kill while sled writes the snapshot it takes at every open leaves `snap.<lsn>.generating`
/// cut short, which sled 0.34.7 then reads as its newest snapshot: every later open fails with
/// `Corruption { at: None }` (the import_crash failure). The store deletes such files before
/// sled opens, and the book is intact.
#[test]
fn a_snapshot_cut_short_by_a_kill_does_not_make_the_store_unopenable() {
    let dir = tempfile::tempdir().unwrap();
    let h = BookHeader::new(2, 12);
    {
        let s = Store::open(dir.path()).unwrap();
        s.create(&h, &[sample_entry()]).unwrap();
    }
    // The second open recovers the log and writes a snapshot.
    drop(Store::open_book(dir.path()).unwrap());
    for part in [0.0, 0.5, 0.99] {
        // The newest snapshot (the last open may have written another).
        let snap = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("snap.") && !n.ends_with(".generating"))
            .max()
            .expect("sled wrote a snapshot");
        let lsn = u64::from_str_radix(&snap["snap.".len()..], 16).unwrap();
        let bytes = std::fs::read(dir.path().join(&snap)).unwrap();
        let cut = (bytes.len() as f64 * part) as usize;
        // What the kill leaves: the next snapshot's file, created and partly written.
        let unfinished = dir.path().join(format!("snap.{:016X}.generating", lsn + 1));
        std::fs::write(&unfinished, &bytes[..cut]).unwrap();
        match raw_sled_open(dir.path()) {
            Err(sled::Error::Corruption { at: None, .. }) => {}
            other => panic!("sled opened a store with a cut snapshot ({cut} bytes): {other:?}"),
        }
        assert_reopens_with_the_sample(dir.path(), &h, &unfinished);
    }
}

/// A store held by another opener keeps its snapshot files: the opener may be writing one.
#[test]
fn snapshot_files_of_a_held_store_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let held = Store::open(dir.path()).unwrap();
    let file = dir.path().join("snap.00000000000000FF.generating");
    std::fs::write(&file, b"being written").unwrap();
    let e = Store::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("lock"), "{e}");
    assert!(file.exists());
    drop(held);
    drop(Store::open(dir.path()).unwrap());
    assert!(!file.exists());
}

/// A store's contents that a replacement must keep or replace whole: the header, the book, the
/// results and trust records (sorted), and the worker credentials.
type Snapshot = (
    BookHeader,
    Vec<Position>,
    Vec<(u64, i32)>,
    Vec<String>,
    Vec<String>,
);

fn snapshot(dir: &std::path::Path) -> Snapshot {
    let s = Store::open_book(dir).unwrap();
    let l = s.load(dir).unwrap();
    let mut results: Vec<_> = l
        .results
        .iter()
        .map(|(k, r)| (k.excluded, r.leaf.score))
        .collect();
    results.sort_unstable();
    let trust = l.trust.into_iter().map(|(n, _)| n).collect();
    let creds = s
        .credentials()
        .unwrap()
        .list()
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    (
        l.header,
        l.book.positions().collect(),
        results,
        trust,
        creds,
    )
}

/// The book trees and base files a store directory holds.
fn generations(dir: &std::path::Path) -> (Vec<String>, Vec<PathBuf>) {
    let db = raw_sled_open(dir).unwrap();
    let mut trees: Vec<_> = db
        .tree_names()
        .into_iter()
        .filter(|n| is_book_tree(n))
        .map(|n| String::from_utf8_lossy(&n).into_owned())
        .collect();
    trees.sort();
    let mut files: Vec<_> = std::fs::read_dir(dir.join(BASE_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    (trees, files)
}

fn credential(name: &str) -> CredentialRecord {
    CredentialRecord {
        name: name.into(),
        owner: "me".into(),
        trusted: false,
        state: CredentialState::Active,
        reason: String::new(),
        created_unix: 0,
        token_sha256: [1; 32],
    }
}

fn synthetic(seed: u64, positions: usize, year: i16) -> MemBook {
    use bookfarm_book::synth::{SynthParams, random_book};
    let mut book = random_book(SynthParams {
        seed,
        positions,
        plies: 20,
        level: None,
    });
    bookfarm_book::negamax::negamax(&mut book);
    book.header_mut().date.year = year;
    book
}

/// Growth's records over the base: a changed position, a result group, a trust record.
fn grow(s: &Store, book: &MemBook) {
    use bookfarm_engine::search::LeafResult;
    let mut changed = book.position(book.ids().next().unwrap());
    changed.level = (changed.level + 1) % 61;
    let mut b = Batch::default();
    b.put_position(&changed).unwrap();
    let r = ResultRecord::of(&LeafResult {
        mv: Move::Pass,
        score: 6,
        depth: 4,
        selectivity: 5,
        exact: false,
        nodes: 7,
        elapsed: std::time::Duration::from_micros(3),
    });
    let req = LeafRequest {
        board: Board::start(),
        excluded: 3,
        level: 4,
    };
    b.put_result(&req, &r).unwrap();
    b.put_trust("w", &TrustRecord::default()).unwrap();
    s.apply(b).unwrap();
    s.flush().unwrap();
}

/// A replacement killed between its steps (the store dropped without finishing it): before the
/// pointer moves the store reopens to the old book, after it to the new one; either way the
/// next open drops the other generation's tree and file, and the standings and credentials
/// stay.
#[test]
fn a_replacement_cut_short_between_its_steps_leaves_the_old_or_the_new_book() {
    let dir = tempfile::tempdir().unwrap();
    let (old_book, new_book) = (synthetic(5, 400, 2001), synthetic(6, 700, 2002));
    {
        let s = Store::open(dir.path()).unwrap();
        s.create_book(&old_book).unwrap();
        grow(&s, &old_book);
        assert!(
            s.credentials()
                .unwrap()
                .insert_new(&credential("host"))
                .unwrap()
        );
    }
    let old = snapshot(dir.path());
    assert_eq!((old.2.len(), old.3.len(), old.4.len()), (1, 1, 1));
    let one = (vec![book_tree_name(1)], vec![base_file(dir.path(), 1)]);
    assert_eq!(generations(dir.path()), one);

    // Killed after the new generation is written, before the pointer moves.
    {
        let s = Store::open_book(dir.path()).unwrap();
        let current = s.tree();
        s.write_generation(&current, &new_book).unwrap();
    }
    assert_eq!(snapshot(dir.path()), old);
    assert_eq!(generations(dir.path()), one);

    // Killed after the pointer moves, before the old generation is dropped.
    {
        let s = Store::open_book(dir.path()).unwrap();
        let mut current = s.tree.write().unwrap();
        let new = s.write_generation(&current, &new_book).unwrap();
        s.switch_generation(&mut current, new).unwrap();
    }
    let new = snapshot(dir.path());
    assert_eq!(new.0.date.year, 2002);
    assert_eq!(new.1, new_book.positions().collect::<Vec<_>>());
    // Growth's records went with the old book; the standings and the credentials did not.
    assert_eq!((new.2.len(), &new.3, new.4.len()), (0, &old.3, 1));
    assert_eq!(
        generations(dir.path()),
        (vec![book_tree_name(2)], vec![base_file(dir.path(), 2)],)
    );

    // Uninterrupted: the old generation is gone on return, and the book stays replaceable.
    let s = Store::open_book(dir.path()).unwrap();
    s.create_book(&old_book).unwrap();
    drop(s);
    let back = snapshot(dir.path());
    assert_eq!(
        (back.0, &back.1, &back.4),
        (old.0, &old_book.positions().collect::<Vec<_>>(), &old.4)
    );
    assert_eq!(
        generations(dir.path()),
        (vec![book_tree_name(3)], vec![base_file(dir.path(), 3)],)
    );
}

/// A kill in a new store's first open, between sled's two writes of its configuration (the
/// lines, then their checksum; the data file comes after), leaves a directory sled refuses to
/// open. It held nothing: the store deletes that `conf`, opens, and takes a book.
#[test]
fn a_first_open_cut_short_in_sled_configuration_leaves_a_store_that_opens() {
    let complete = tempfile::tempdir().unwrap();
    drop(Store::open(complete.path()).unwrap());
    let conf = std::fs::read(complete.path().join(SLED_CONF_FILE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SLED_CONF_FILE), &conf[..conf.len() - 4]).unwrap();
    match raw_sled_open(dir.path()) {
        Err(sled::Error::Corruption { at: None, .. }) => {}
        other => panic!("sled opened a store with a cut configuration: {other:?}"),
    }
    assert!(!dir.path().join(SLED_DATA_FILE).exists());
    {
        let s = Store::open(dir.path()).unwrap();
        s.create(&BookHeader::new(2, 12), &[sample_entry()])
            .unwrap();
    }
    let l = Store::open_book(dir.path())
        .unwrap()
        .load(dir.path())
        .unwrap();
    assert_eq!(
        l.book.positions().collect::<Vec<_>>(),
        vec![sample_entry().pos]
    );
}

/// Byte flips in the base file are never served: each of 120 single-bit flips at random
/// offsets makes the open fail with the file and the block's offset named, and the restored
/// file opens to the same book.
#[test]
fn a_flipped_base_byte_stops_the_open_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let book = synthetic(7, 3000, 2003);
    {
        let s = Store::open(dir.path()).unwrap();
        s.create_book(&book).unwrap();
        s.flush().unwrap();
    }
    let path = base_file(dir.path(), 1);
    let good = std::fs::read(&path).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for trial in 0..120 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % good.len() as u64) as usize;
        let mut bad = good.clone();
        bad[at] ^= 1 << (x >> 61);
        std::fs::write(&path, &bad).unwrap();
        let r = Store::open_book(dir.path()).and_then(|s| s.load(dir.path()).map(|l| l.book));
        match r {
            Err(StoreError::Corrupt {
                path: p, offset, ..
            }) => {
                assert_eq!(p, path.display().to_string(), "trial {trial}");
                assert_eq!(
                    offset,
                    (at / super::sums::BLOCK * super::sums::BLOCK) as u64
                );
            }
            Err(e) => panic!("trial {trial}: flip at {at}: another error: {e}"),
            Ok(_) => panic!("trial {trial}: flip at {at} was served"),
        }
    }
    std::fs::write(&path, &good).unwrap();
    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(s.verify_base().unwrap(), good.len() as u64);
    assert_eq!(
        s.load(dir.path())
            .unwrap()
            .book
            .positions()
            .collect::<Vec<_>>(),
        book.positions().collect::<Vec<_>>()
    );
}
