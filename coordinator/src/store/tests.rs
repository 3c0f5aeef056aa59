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
