use super::*;
use bookfarm_book::model::Link;
use bookfarm_engine::{Move, Square};
use bookfarm_proto::domain::Selector;

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
        let x = ExpansionRecord::new(
            Selector::Deviate {
                relative: 2,
                absolute: 4,
            },
            0,
            record::ExpansionStateRecord::Running,
        );
        b.put_expansion(Some(&x)).unwrap();
        s.apply(b).unwrap();
        s.flush().unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    let l = s.load(dir.path()).unwrap();
    assert_eq!(l.header, h);
    assert_eq!(l.book.header(), &h);
    assert_eq!(l.book.positions().collect::<Vec<_>>(), vec![e.pos]);
    assert_eq!(l.done.len(), 1);
    assert_eq!(
        l.expansion.unwrap().selector(),
        Selector::Deviate {
            relative: 2,
            absolute: 4
        }
    );
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
/// new header (date included) and positions are there, credentials stay.
#[test]
fn create_replaces_everything_but_credentials() {
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
    let mut h2 = BookHeader::new(4, 10);
    h2.date.year = 2003;
    s.create(&h2, &[]).unwrap();
    let l = s.load(dir.path()).unwrap();
    assert_eq!(l.header, h2);
    assert!(l.book.is_empty() && l.signature.is_none());
    assert_eq!(s.credentials().unwrap().list().unwrap().len(), 1);
}

/// The base keeps the book's order; `p` records written later replace a base position in place
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
    // The base book a replay starts from ignores the `p` records; reverting to it (in a
    // replay's checkpoint) removes them all, and positions written after the reversion in the
    // same batch stay.
    let base: Vec<Position> = book.positions().collect();
    let replayed = s.base_book().unwrap().unwrap();
    assert_eq!(replayed.positions().collect::<Vec<_>>(), base);
    let mut b = Batch::default();
    s.revert_to_base(&mut b).unwrap();
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
        let owned = encode(&PositionRecord::from_entry(&Entry::new(book.position(id)))).unwrap();
        let mut by_position = Batch::default();
        by_position.put_position(&book.position(id)).unwrap();
        let mut by_id = Batch::default();
        by_id.put_book_position(&book, id).unwrap();
        assert_eq!(by_position.chunks, vec![owned.clone()]);
        assert_eq!(by_id.chunks, vec![owned]);
    }
}

fn keys_with_prefix(s: &Store, prefix: u8) -> usize {
    s.tree.scan_prefix([prefix]).count()
}

/// Position records are written in chunks under the writing batch's sequence number; a later
/// batch's version of a position wins over an earlier one and over the `p` records of the
/// layout before chunks; a replacement removes every earlier record; all of it survives a
/// reopen, which also restores the chunk counters.
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
    // A store written before chunks: `p` records for the first ten positions.
    for &id in &ids[..10] {
        let mut p = book.position(id);
        bump(&mut p);
        let rec = PositionRecord::from_entry(&Entry::new(p.clone()));
        s.tree
            .insert(&pos_key(&p.board)[..], encode(&rec).unwrap())
            .unwrap();
        book.put_position(&p);
    }
    // Two checkpoints: every position (three chunks), then the first five again.
    let mut b = Batch::default();
    for &id in &ids {
        let mut p = book.position(id);
        if ids[5..10].contains(&id) {
            // Chunks are newer than any `p` record: this version must win.
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
    assert_eq!(keys_with_prefix(&s, P), 10);
    assert_eq!(keys_with_prefix(&s, K), 3 + 1);
    let before = s.chunk_bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        before,
        s.tree
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
    assert_eq!(keys_with_prefix(&s, P), 0);
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
    let s = Store::open_book(dir.path()).unwrap();
    assert!(!stray.exists());
    let l = s.load(dir.path()).unwrap();
    assert_eq!(l.header, h);
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
    assert!(e.contains("store base") && e.contains(".dat"), "{e}");
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
/// after it), legacy `r` records are still read, and the sequence continues after a reopen.
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
            .map(|(k, r)| (k.excluded, r.score))
            .collect();
        r.sort_unstable();
        r
    };
    {
        let s = Store::open(dir.path()).unwrap();
        s.create(&BookHeader::new(2, 12), &[sample_entry()])
            .unwrap();
        // A store written by an earlier version: one result record per request.
        s.tree
            .insert(&result_key(&req(9))[..], encode(&rec(18)).unwrap())
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
        b.remove_result(&req(9));
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
