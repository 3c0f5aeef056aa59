//! The store's format versions: the committed fixture of each version opens with this build
//! (through every migration step since) with its data intact, and what is not this build's
//! format is refused without a write.

use super::format::{Step, Writes, migrate, stored_version, version_value};
use super::keys::{FORMAT_KEY, encode_plain};
use super::sled_repair::open_sled;
use super::*;
use bookfarm_book::driver::{PassKind, Phase};
use bookfarm_book::model::{BookDate, BookHeader};
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::Deviate;
use bookfarm_engine::Board;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The version-1 fixture: a `book new 4 12` store grown by two remote workers (a trusted
/// credential and one that earned trust) for about 200 results, stopped with its deviate
/// program running (how it was made: the file's first lines).
const V1: &str = include_str!("fixtures/v1.txt");

/// The tokens of the fixture's credentials (the file's first lines).
const V1_TOKENS: [(&str, &str); 2] = [
    (
        "host1",
        "bfw_c19885adc3941fbd5529cbb47834cc34487f24f5e228a80c5cc121c8545bd99c",
    ),
    (
        "host2",
        "bfw_becc6557d0b3c6c2a088085ebcdba5073e8969232997cb058d2aecb43644b1f4",
    ),
];

/// The version-2 fixture: the same recipe as version 1's, with a deviate program that creates
/// its positions at level 5 (how it was made: the file's first lines).
const V2: &str = include_str!("fixtures/v2.txt");

/// The version-3 fixture: the version-2 recipe with the event log (how it was made: the
/// file's first lines).
const V3: &str = include_str!("fixtures/v3.txt");

/// The tokens of the version-3 fixture's credentials (the file's first lines).
const V3_TOKENS: [(&str, &str); 2] = [
    (
        "host1",
        "bfw_26a574f7f20cc739ee4043e25747c7972019f7ac15bf98555882bbbb53c3cd40",
    ),
    (
        "host2",
        "bfw_e2139e7fbcbcbbcfea5339aa22d0cab9740b31d551c14a67c2a1a89ab365089f",
    ),
];

/// The tokens of the version-2 fixture's credentials (the file's first lines).
const V2_TOKENS: [(&str, &str); 2] = [
    (
        "host1",
        "bfw_02c2b9b1ec18925d8a60dc4550c8885f9a995ca1fc8dfedca6bbd0f00909738b",
    ),
    (
        "host2",
        "bfw_05b6891747333fb276ed881451d00afeab5de3eee62e230e90af9006155c8d85",
    ),
];

/// A temporary store directory holding the store of `text` (a dump).
fn restored(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    dump::restore(text, dir.path()).unwrap();
    dir
}

/// `text` without its comment lines.
fn records(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The records of `text` with the record of sled's default tree under `key` (which must be
/// there) given the value `value` (`None`: removed).
fn with_default_key(text: &str, key: &[u8], value: Option<&[u8]>) -> String {
    with_key(text, b"__sled__default", key, value)
}

/// The records of `text` with the record of `tree` under `key` (which must be there) given the
/// value `value` (`None`: removed).
fn with_key(text: &str, tree: &[u8], key: &[u8], value: Option<&[u8]>) -> String {
    let prefix = format!("tree {} {} ", keys::hex(tree), keys::hex(key));
    let records = records(text);
    assert!(records.lines().any(|l| l.starts_with(&prefix)));
    records
        .lines()
        .filter_map(|l| match (l.starts_with(&prefix), value) {
            (false, _) => Some(format!("{l}\n")),
            (true, Some(v)) => Some(format!("{prefix}{}\n", keys::hex(v))),
            (true, None) => None,
        })
        .collect()
}

/// A dump of this build's format with every record's checksum checked and removed (the format
/// version as it is), to compare with the dump of a fixture written before records had one.
fn unsealed(text: &str) -> String {
    tree_records(text)
        .into_iter()
        .map(|(tree, key, value)| {
            let value = if key == FORMAT_KEY {
                value
            } else {
                keys::unseal(&key, &value).unwrap().to_vec()
            };
            let hex = keys::hex;
            format!("tree {} {} {}\n", hex(&tree), hex(&key), hex(&value))
        })
        .collect()
}

/// The (tree, key) pairs whose records differ between two dumps (added, removed or changed).
fn changed_keys(a: &str, b: &str) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    let parse = |text: &str| -> BTreeMap<(String, String), String> {
        text.lines()
            .filter_map(|l| {
                let mut f = l.strip_prefix("tree ")?.split(' ');
                Some((
                    (f.next()?.to_string(), f.next()?.to_string()),
                    f.next().unwrap_or("").to_string(),
                ))
            })
            .collect()
    };
    let (a, b) = (parse(a), parse(b));
    let unhex = |h: &str| {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    a.keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|(t, k)| (unhex(t), unhex(k)))
        .collect()
}

/// The format version stored in `dir`.
fn version_in(dir: &std::path::Path) -> Option<u32> {
    stored_version(&open_sled(dir, 1 << 20).unwrap()).unwrap()
}

/// A digest of a book's positions that does not depend on how they are stored: every
/// position's board, level, leaf and links (in their order), sorted by board.
fn positions_digest(book: &bookfarm_book::MemBook) -> String {
    let mut rows: Vec<Vec<u8>> = book
        .positions()
        .map(|p| {
            let mut r = Vec::new();
            r.extend_from_slice(&p.board.player.to_be_bytes());
            r.extend_from_slice(&p.board.opponent.to_be_bytes());
            r.push(p.level);
            r.extend_from_slice(&p.leaf.to_bytes());
            for l in &p.links {
                r.extend_from_slice(&l.to_bytes());
            }
            r
        })
        .collect();
    rows.sort();
    keys::hex(&Sha256::digest(rows.concat()))
}

/// The version-1 fixture opens with this build, every migration step since run, and its data
/// is what the version-1 build wrote (the expected values were read from the store by that
/// build): the book, the results with their provenance, the open cases, the trust records,
/// the credentials (their tokens still match), the history and the running growth program,
/// which the service resumes.
#[test]
fn a_version_1_store_opens_with_its_data() {
    let dir = restored(V1);
    // The text form is exact: the restored store dumps to the same records.
    assert_eq!(dump::dump(dir.path()).unwrap(), records(V1));
    assert_eq!(version_in(dir.path()), Some(1));

    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(stored_version(&s.db).unwrap(), Some(FORMAT_VERSION));
    // The step to version 2 rewrote the growth records, the step to version 3 began the
    // event log, the step to version 4 made the queue numbered program records, and nothing
    // else changed.
    drop(s);
    let changed = changed_keys(&records(V1), &unsealed(&dump::dump(dir.path()).unwrap()));
    let book_tree = keys::book_tree_name(1).into_bytes();
    let meta = |name: &str| (book_tree.clone(), keys::meta_key(name));
    assert_eq!(
        changed,
        BTreeSet::from([
            (b"__sled__default".to_vec(), FORMAT_KEY.to_vec()),
            meta("growth"),
            meta("growth-queue"),
            meta("growth-log"),
            (b"events".to_vec(), 1u64.to_be_bytes().to_vec()),
            meta("program-queue"),
            (book_tree.clone(), keys::program_key(1).to_vec()),
        ])
    );
    let s = Store::open_book(dir.path()).unwrap();
    let l = s.load(dir.path()).unwrap();

    // The book.
    let header = BookHeader {
        version: 4,
        release: 6,
        date: BookDate::default(),
        level: 4,
        n_empties: 49,
        midgame_error: 2,
        endcut_error: 1,
        verbosity: 0,
    };
    assert_eq!(l.header, header);
    assert_eq!(l.book.len(), 56);
    assert_eq!(
        positions_digest(&l.book),
        "1f0703a036e526703bcd29d1ac703afdcb388a93b503940a1800b00258545ad9"
    );
    let root = l.book.positions().find(|p| p.board == Board::start());
    let root = root.expect("the start position");
    assert_eq!((root.value, root.links.len(), root.level), (1, 4, 4));

    // The results, with the contributors vouching for them.
    assert_eq!(l.results.len(), 118);
    let mut sources: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for (_, r) in &l.results {
        *sources.entry(r.sources.clone()).or_default() += 1;
    }
    let vouched = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        sources,
        BTreeMap::from([
            (vouched(&["(local)"]), 1),
            (vouched(&["host1"]), 40),
            (vouched(&["host2", "host1"]), 77),
        ])
    );
    assert_eq!(
        l.results.iter().map(|(_, r)| r.leaf.nodes).sum::<u64>(),
        186_878
    );
    assert_eq!(l.done.len(), 118);
    assert_eq!(
        l.signature.as_deref(),
        Some(
            "engine=bookfarm-engine/0.1.0 r4; options=tt=20 ett=18 mpv=10 stab=1 pcn=2 m2e=21 \
             pc=50cd3899dae9fabd; eval=a060a9e6f1596975"
        )
    );
    // Six replicas of the untrusted-then-earning credential wait for validation.
    assert_eq!(l.cases.len(), 6);
    for (req, case) in &l.cases {
        assert_eq!(req.level, 4);
        assert!(!case.applied);
        let from: Vec<_> = case
            .replicas
            .iter()
            .map(|r| r.contributor.as_str())
            .collect();
        assert_eq!(from, ["host2"]);
    }
    assert_eq!(l.rollbacks, (0, 0));

    // The trust records, whole.
    let trust: BTreeMap<_, _> = l.trust.into_iter().collect();
    assert_eq!(
        trust,
        BTreeMap::from([
            (
                "(local)".to_string(),
                TrustRecord {
                    owner: String::new(),
                    root: true,
                    given: false,
                    streak: 0,
                    earned_ms: 0,
                    first_ms: 1_795_684_749_377,
                    invalid: 0,
                    blocked: false,
                    results: 1,
                    nodes: 354,
                    cpu_us: 56,
                    replicas: 0,
                }
            ),
            (
                "host1".to_string(),
                TrustRecord {
                    owner: "alice".into(),
                    root: false,
                    given: true,
                    streak: 0,
                    earned_ms: 0,
                    first_ms: 1_795_684_754_705,
                    invalid: 0,
                    blocked: false,
                    results: 117,
                    nodes: 186_524,
                    cpu_us: 14_045,
                    replicas: 0,
                }
            ),
            (
                "host2".to_string(),
                TrustRecord {
                    owner: "bob".into(),
                    root: false,
                    given: false,
                    streak: 77,
                    earned_ms: 1_795_684_776_805,
                    first_ms: 1_795_684_754_728,
                    invalid: 0,
                    blocked: false,
                    results: 77,
                    nodes: 144_491,
                    cpu_us: 11_318,
                    replicas: 0,
                }
            ),
        ])
    );

    // The credentials: the tokens handed out still match.
    let creds = s.credentials().unwrap().list().unwrap();
    let summary: Vec<_> = creds
        .iter()
        .map(|c| (c.name.as_str(), c.owner.as_str(), c.trusted, c.state))
        .collect();
    assert_eq!(
        summary,
        [
            ("host1", "alice", true, CredentialState::Active),
            ("host2", "bob", false, CredentialState::Active),
        ]
    );
    for (name, token) in V1_TOKENS {
        let c = s.credentials().unwrap().get(name).unwrap().unwrap();
        assert_eq!(
            c.token_sha256,
            <[u8; 32]>::from(Sha256::digest(token.as_bytes())),
            "{name}"
        );
    }

    // The history: a minute's point and the contributors' tallies.
    let history = l.history.expect("the history");
    assert_eq!(history.minutes.len(), 1);
    assert_eq!(
        (history.minutes[0].t_ms, history.minutes[0].positions),
        (1_795_684_740_000, 56)
    );
    assert!(history.hours.is_empty());
    let tallies: Vec<_> = history
        .contributors
        .iter()
        .map(|c| (c.name.as_str(), c.anonymous, c.total, c.days.clone()))
        .collect();
    assert_eq!(
        tallies,
        [
            ("alice", false, 117, vec![(20_783, 117)]),
            ("bob", false, 83, vec![(20_783, 83)]),
        ]
    );

    // The growth programs: `book new`'s finished, the deviate program running, mid-pass.
    // Version 1 stored them as its own records; the step to version 2 made them programs,
    // from the start position, serial, at the expanded positions' level.
    // The step to version 3 numbered the queue's programs: the deviate program is #1,
    // running (the growth record holds its state); the log's program has no number.
    let deviate = Program::new(Operation::Deviate {
        params: Deviate::new(2, 4),
    });
    assert_migrated_programs(&l.programs, &l.program_queue, &l.log, &deviate);
    let growth = l.growth.expect("the growth state");
    assert!(!growth.paused);
    assert_eq!(growth.last, "new");
    let todo = l.todo.expect("the marked boards");
    let driver = growth.driver.expect("the running program's state");
    let state = driver.state(deviate, todo.boards());
    assert_eq!((state.iterations, state.passes), (6, 14));
    assert_eq!(todo.passes, state.passes);
    match &state.phase {
        Phase::Expanding {
            pass, todo, cursor, ..
        } => assert_eq!(
            (*pass, todo.len(), *cursor),
            (PassKind::DeviateOpponent, 15, 7)
        ),
        other => panic!("the deviate program is not expanding: {other:?}"),
    }
    drop(s);

    // The service resumes the running program on it.
    use crate::service::{Coordinator, ManualClock, ServiceConfig, State};
    let store = Store::open_book(dir.path()).unwrap();
    let c = Coordinator::open(
        store,
        dir.path(),
        ServiceConfig::default(),
        std::sync::Arc::new(ManualClock::default()),
    )
    .unwrap();
    let status = c.status();
    assert_eq!(status.state, State::Running);
    assert_eq!(status.expansion, "deviate 2 4");
    assert_eq!(status.positions, 56);
}

/// What the step to version 3 made of a version-1 or version-2 fixture's programs: the
/// running `deviate` is program #1 (times unknown), the only one queued; the log holds `book
/// new`, run to its end, unnumbered, and no replay runs.
fn assert_migrated_programs(
    programs: &[ProgramRecord],
    order: &[u64],
    log: &Option<LogRecord>,
    deviate: &Program,
) {
    assert_eq!(
        programs,
        [ProgramRecord {
            id: 1,
            program: deviate.clone(),
            state: ProgramState::Running,
            submitted_ms: 0,
            started_ms: None,
            finished_ms: None,
            report: String::new(),
        }]
    );
    assert_eq!(order, [1]);
    assert_eq!(
        *log,
        Some(LogRecord {
            programs: vec![LoggedProgram {
                id: 0,
                program: Program::new(Operation::New),
                stop: None,
            }],
            replayed: 1,
        })
    );
}

/// The version-2 fixture opens with this build (every migration step after version 2 run),
/// and its data is what the version-2 build wrote (the expected values were read from the
/// store by that build): the book, the results with their provenance, the open cases, the
/// trust records, the credentials, the history, and the running growth program, a `Program`
/// with its level, which the service resumes.
#[test]
fn a_version_2_store_opens_with_its_data() {
    let dir = restored(V2);
    assert_eq!(dump::dump(dir.path()).unwrap(), records(V2));
    assert_eq!(version_in(dir.path()), Some(2));

    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(stored_version(&s.db).unwrap(), Some(FORMAT_VERSION));
    // The step to version 3 began the event log with the migration's event, the step to
    // version 4 turned the queue into numbered program records and rewrote the log; nothing
    // else changed.
    drop(s);
    let changed = changed_keys(&records(V2), &unsealed(&dump::dump(dir.path()).unwrap()));
    let book_tree = keys::book_tree_name(1).into_bytes();
    let meta = |name: &str| (book_tree.clone(), keys::meta_key(name));
    assert_eq!(
        changed,
        BTreeSet::from([
            (b"__sled__default".to_vec(), FORMAT_KEY.to_vec()),
            (b"events".to_vec(), 1u64.to_be_bytes().to_vec()),
            meta("growth-queue"),
            meta("growth-log"),
            meta("program-queue"),
            (book_tree.clone(), keys::program_key(1).to_vec()),
        ])
    );
    let s = Store::open_book(dir.path()).unwrap();
    let (events, _) = s
        .events(crate::events::DEFAULT_MAX_EVENTS)
        .unwrap()
        .newest(0, u64::MAX, 10, 10, |_| true)
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].0, events[0].1.kind),
        (1, super::EventKind::StoreMigrated)
    );
    let l = s.load(dir.path()).unwrap();

    // The book.
    assert_eq!(
        (l.header.level, l.header.n_empties, l.header.date),
        (4, 49, BookDate::default())
    );
    assert_eq!(l.book.len(), 31);
    assert_eq!(
        positions_digest(&l.book),
        "82138c8b1601979d6b6f886b6ded042e902d682ca510cc8924958395988317f5"
    );
    let root = l.book.positions().find(|p| p.board == Board::start());
    let root = root.expect("the start position");
    assert_eq!((root.value, root.links.len(), root.level), (2, 4, 4));

    // The results, with the contributors vouching for them, and the open cases.
    assert_eq!((l.results.len(), l.done.len()), (59, 59));
    let mut sources: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for (_, r) in &l.results {
        *sources.entry(r.sources.clone()).or_default() += 1;
    }
    let vouched = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        sources,
        BTreeMap::from([
            (vouched(&["(local)"]), 1),
            (vouched(&["host1"]), 21),
            (vouched(&["host2", "host1"]), 37),
        ])
    );
    assert_eq!(
        l.results.iter().map(|(_, r)| r.leaf.nodes).sum::<u64>(),
        122_047
    );
    assert_eq!(l.cases.len(), 10);
    for (req, case) in &l.cases {
        // The deviate program's new positions are searched at its level, 5.
        assert_eq!((req.level, case.applied), (5, false));
        let from: Vec<_> = case.replicas.iter().map(|r| &r.contributor).collect();
        assert_eq!(from, ["host2"]);
    }
    assert_eq!(l.rollbacks, (0, 0));

    // The trust records.
    let trust: BTreeMap<_, _> = l.trust.into_iter().collect();
    let standing: Vec<_> = trust
        .iter()
        .map(|(n, t)| {
            (
                n.as_str(),
                t.owner.as_str(),
                t.root,
                t.given,
                t.streak,
                t.results,
            )
        })
        .collect();
    assert_eq!(
        standing,
        [
            ("(local)", "", true, false, 0, 1),
            ("host1", "alice", false, true, 0, 58),
            ("host2", "bob", false, false, 37, 37),
        ]
    );
    assert_eq!(trust["host2"].earned_ms, 1_795_690_650_492);

    // The credentials: the tokens handed out still match.
    let creds = s.credentials().unwrap().list().unwrap();
    let summary: Vec<_> = creds
        .iter()
        .map(|c| (c.name.as_str(), c.owner.as_str(), c.trusted, c.state))
        .collect();
    assert_eq!(
        summary,
        [
            ("host1", "alice", true, CredentialState::Active),
            ("host2", "bob", false, CredentialState::Active),
        ]
    );
    for (name, token) in V2_TOKENS {
        let c = s.credentials().unwrap().get(name).unwrap().unwrap();
        assert_eq!(
            c.token_sha256,
            <[u8; 32]>::from(Sha256::digest(token.as_bytes())),
            "{name}"
        );
    }

    // The history: a minute's point and the contributors' tallies.
    let history = l.history.expect("the history");
    let minutes: Vec<_> = history
        .minutes
        .iter()
        .map(|m| (m.t_ms, m.positions))
        .collect();
    assert_eq!(minutes, [(1_795_690_620_000, 31)]);
    let tallies: Vec<_> = history
        .contributors
        .iter()
        .map(|c| (c.name.as_str(), c.total))
        .collect();
    assert_eq!(tallies, [("alice", 58), ("bob", 47)]);

    // The growth programs, stored as programs: `book new`'s finished, the deviate program
    // running at level 5, mid-pass.
    let deviate = Program::new(Operation::Deviate {
        params: Deviate::new(2, 4),
    })
    .at_level(Some(5));
    assert_migrated_programs(&l.programs, &l.program_queue, &l.log, &deviate);
    let growth = l.growth.expect("the growth state");
    assert_eq!((growth.paused, growth.last.as_str()), (false, "new"));
    let todo = l.todo.expect("the marked boards");
    let driver = growth.driver.expect("the running program's state");
    let state = driver.state(deviate, todo.boards());
    assert_eq!((state.iterations, state.passes, todo.passes), (4, 9, 9));
    match &state.phase {
        Phase::Expanding {
            pass, todo, cursor, ..
        } => assert_eq!((*pass, todo.len(), *cursor), (PassKind::DeviateRoot, 13, 5)),
        other => panic!("the deviate program is not expanding: {other:?}"),
    }
    drop(s);

    // The service resumes the running program on it.
    use crate::service::{Coordinator, ManualClock, ServiceConfig, State};
    let store = Store::open_book(dir.path()).unwrap();
    let c = Coordinator::open(
        store,
        dir.path(),
        ServiceConfig::default(),
        std::sync::Arc::new(ManualClock::default()),
    )
    .unwrap();
    let status = c.status();
    assert_eq!(status.state, State::Running);
    assert_eq!(status.expansion, "deviate 2 4 level 5");
    assert_eq!(status.positions, 31);
}

/// The version-3 fixture opens with this build (every migration step after version 3 run),
/// and its data is what the version-3 build wrote: the event log (the book's creation, the
/// credentials, the program queued and started, the workers joining), the credentials, the
/// trust records, the history and the running program, which the service resumes; new events
/// are numbered after the stored ones.
#[test]
fn a_version_3_store_opens_with_its_data() {
    let dir = restored(V3);
    assert_eq!(dump::dump(dir.path()).unwrap(), records(V3));
    assert_eq!(version_in(dir.path()), Some(3));

    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(stored_version(&s.db).unwrap(), Some(FORMAT_VERSION));
    let (events, _) = s
        .events(crate::events::DEFAULT_MAX_EVENTS)
        .unwrap()
        .newest(0, u64::MAX, 100, 100, |_| true)
        .unwrap();
    let story: Vec<_> = events
        .iter()
        .rev()
        .map(|(seq, e)| (*seq, e.kind, e.subject.as_str(), e.owner.as_str()))
        .collect();
    use crate::events::EventKind as K;
    assert_eq!(
        story,
        [
            (1, K::ProgramStarted, "new", ""),
            (2, K::WorkerJoined, "local", ""),
            (3, K::ProgramDone, "new", ""),
            (4, K::CredentialAdded, "host1", "alice"),
            (5, K::CredentialAdded, "host2", "bob"),
            (6, K::ProgramQueued, "deviate 2 4 level 5", ""),
            (7, K::ProgramStarted, "deviate 2 4 level 5", ""),
            (8, K::WorkerJoined, "host2", "bob"),
            (9, K::WorkerJoined, "host1", "alice"),
        ]
    );
    let cost = events.iter().find_map(|(_, e)| e.cost).expect("new's cost");
    assert_eq!((cost.searches, cost.positions), (1, 0));
    let l = s.load(dir.path()).unwrap();
    let trust: BTreeMap<_, _> = l.trust.into_iter().collect();
    let standing: Vec<_> = trust
        .iter()
        .map(|(n, t)| (n.as_str(), t.owner.as_str(), t.root, t.given, t.results))
        .collect();
    assert_eq!(
        standing,
        [
            ("(local)", "", true, false, 1),
            ("host1", "alice", false, true, 84),
            ("host2", "bob", false, false, 63),
        ]
    );
    assert_eq!((l.book.len(), l.results.len()), (44, 85));
    for (name, token) in V3_TOKENS {
        let c = s.credentials().unwrap().get(name).unwrap().unwrap();
        assert_eq!(
            c.token_sha256,
            <[u8; 32]>::from(Sha256::digest(token.as_bytes())),
            "{name}"
        );
    }
    let history = l.history.expect("the history");
    let tallies: Vec<_> = history
        .contributors
        .iter()
        .map(|c| (c.name.as_str(), c.total))
        .collect();
    assert_eq!(tallies, [("alice", 84), ("bob", 65)]);
    assert_eq!(history.minutes.len(), 1);
    let deviate = Program::new(Operation::Deviate {
        params: Deviate::new(2, 4),
    })
    .at_level(Some(5));
    // The step to version 4 numbered the queue's programs: the deviate program is #1.
    assert_migrated_programs(&l.programs, &l.program_queue, &l.log, &deviate);
    drop(s);

    // The service resumes the running program on it, and the log goes on.
    use crate::service::{Coordinator, ManualClock, ServiceConfig, State};
    let store = Store::open_book(dir.path()).unwrap();
    let c = Coordinator::open(
        store,
        dir.path(),
        ServiceConfig::default(),
        std::sync::Arc::new(ManualClock::default()),
    )
    .unwrap();
    let status = c.status();
    assert_eq!(status.state, State::Running);
    assert_eq!(status.expansion, "deviate 2 4 level 5");
    c.events().record(crate::events::event(
        K::WorkerJoined,
        "again",
        "",
        String::new(),
    ));
    let newest = c.events().query(&Default::default()).unwrap().events;
    assert_eq!((newest[0].0, newest[0].1.subject.as_str()), (10, "again"));
}

/// The step to version 2 refuses a version-1 growth program whose root is not the start
/// position (no version-1 build wrote one, and version 2 stores a root as a move line): the
/// store is left at version 1, unchanged.
#[test]
fn a_version_1_program_from_another_root_is_refused_and_the_store_left_as_it_was() {
    use super::to_v2::{OperationV1, QueueV1};
    let after_f5 = Board::start()
        .play_move(bookfarm_engine::Move::Square(
            bookfarm_engine::Square::parse("f5").unwrap(),
        ))
        .unwrap();
    let queue = QueueV1 {
        queue: vec![(
            OperationV1 {
                kind: 0,
                root: (after_f5.player, after_f5.opponent),
                a: 2,
                b: 4,
                until_stable: false,
                games: Vec::new(),
                boards: Vec::new(),
            },
            None,
        )],
    };
    let text = with_key(
        V1,
        &keys::book_tree_name(1).into_bytes(),
        &keys::meta_key("growth-queue"),
        Some(&encode_plain(&queue).unwrap()),
    );
    let dir = restored(&text);
    let e = Store::open_book(dir.path()).unwrap_err();
    assert!(
        matches!(&e, StoreError::Migration { from: 1, .. })
            && e.to_string().contains("deviate 2 4 starts from"),
        "{e}"
    );
    assert_eq!(version_in(dir.path()), Some(1));
    assert_eq!(dump::dump(dir.path()).unwrap(), records(&text));
}

/// A store with data and no format version (any store written before versions existed) is
/// refused with the one message that says what to do, and left as it was.
#[test]
fn a_store_without_a_format_version_is_refused_and_left_as_it_was() {
    let text = with_default_key(V1, FORMAT_KEY, None);
    let dir = restored(&text);
    let at = dir.path().display().to_string();
    for e in [
        Store::open(dir.path()).unwrap_err(),
        Store::open_book(dir.path()).unwrap_err(),
        Store::dir_has_book(dir.path()).unwrap_err(),
    ] {
        assert!(matches!(&e, StoreError::Unversioned(d) if *d == at), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("earlier build")
                && e.contains(&format!("book export book.dat --db {at}"))
                && e.contains("book import book.dat --db NEW_DIR"),
            "{e}"
        );
    }
    assert_eq!(dump::dump(dir.path()).unwrap(), records(&text));
    // Credentials alone (added before any book) are data too.
    let creds_only: String = records(&text)
        .lines()
        .filter(|l| l.starts_with(&format!("tree {} ", keys::hex(b"credentials"))))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!creds_only.is_empty());
    let dir = restored(&creds_only);
    assert!(matches!(
        Store::open(dir.path()),
        Err(StoreError::Unversioned(_))
    ));
}

/// An empty directory, or a store that holds nothing (a first open cut short, or a store an
/// earlier build opened and never wrote), is a new store: it gets this build's version.
#[test]
fn an_empty_store_is_new_and_gets_this_builds_version() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    assert_eq!(version_in(dir.path()), Some(FORMAT_VERSION));
    // Empty trees of any name hold nothing.
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        db.open_tree("book").unwrap();
        db.open_tree("credentials").unwrap();
        super::sled_gate::flush(&db).unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    assert!(!s.has_book().unwrap());
    drop(s);
    assert_eq!(version_in(dir.path()), Some(FORMAT_VERSION));
}

/// A store of a version newer than this build's is refused and left as it was.
#[test]
fn a_store_of_a_newer_version_is_refused() {
    let newer = FORMAT_VERSION + 1;
    let text = with_default_key(V1, FORMAT_KEY, Some(&version_value(newer).unwrap()));
    let dir = restored(&text);
    let e = Store::open_book(dir.path()).unwrap_err();
    assert!(
        matches!(e, StoreError::NewerFormat { found, known, .. }
            if found == newer && known == FORMAT_VERSION),
        "{e}"
    );
    assert!(e.to_string().contains("newer than this build's"), "{e}");
    assert_eq!(dump::dump(dir.path()).unwrap(), records(&text));
}

/// A test step: a trust record `migrated-<n>` (in the current book tree) and a credential-tree
/// key, `n` the number of the step's target version.
fn mark(db: &sled::Db, n: u8) -> Result<Writes, StoreError> {
    let name = db.get(keys::BOOK_TREE_KEY)?.expect("a book");
    let mut w = Writes::default();
    w.to(&db.open_tree(name)?).insert(
        keys::trust_key(&format!("migrated-{n}")),
        encode_plain(&TrustRecord::default())?,
    );
    w.to(&db.open_tree(keys::CREDENTIALS_TREE)?)
        .insert(format!("step-{n}").as_bytes(), &[n][..]);
    Ok(w)
}

fn to_2(db: &sled::Db) -> Result<Writes, StoreError> {
    mark(db, 2)
}

fn to_3(db: &sled::Db) -> Result<Writes, StoreError> {
    mark(db, 3)
}

/// A step that fails after reading (its writes are never applied).
fn failing(_: &sled::Db) -> Result<Writes, StoreError> {
    Err(StoreError::Dump {
        line: 0,
        reason: "this step fails".into(),
    })
}

/// The migration runner: the steps from the stored version on run in order, each applied with
/// its version's bump; a failing step leaves the store at the version before it, unchanged.
#[test]
fn migration_steps_run_in_order_from_the_stored_version() {
    let steps: [Step; 2] = [to_2, to_3];
    let trust_names = |db: &sled::Db| -> Vec<String> {
        let name = db.get(keys::BOOK_TREE_KEY).unwrap().unwrap();
        db.open_tree(name)
            .unwrap()
            .scan_prefix([keys::T])
            .map(|kv| String::from_utf8_lossy(&kv.unwrap().0[1..]).into_owned())
            .filter(|n| n.starts_with("migrated-"))
            .collect()
    };
    let dir = restored(V1);
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        migrate(&db, dir.path(), &steps).unwrap();
        assert_eq!(stored_version(&db).unwrap(), Some(3));
        assert_eq!(trust_names(&db), ["migrated-2", "migrated-3"]);
        let creds = db.open_tree(keys::CREDENTIALS_TREE).unwrap();
        assert_eq!(creds.get("step-3").unwrap().as_deref(), Some(&[3u8][..]));
        // Nothing runs twice.
        db.open_tree(keys::CREDENTIALS_TREE)
            .unwrap()
            .remove("step-2")
            .unwrap();
        migrate(&db, dir.path(), &steps).unwrap();
        assert_eq!(creds.get("step-2").unwrap(), None);
    }
    // From version 2, only the second step runs.
    let text = with_default_key(V1, FORMAT_KEY, Some(&encode_plain(&2u32).unwrap()));
    let dir = restored(&text);
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        migrate(&db, dir.path(), &steps).unwrap();
        assert_eq!(trust_names(&db), ["migrated-3"]);
    }
    // A failing step: the first step's migration stays, the store is at version 2.
    let dir = restored(V1);
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        let e = migrate(&db, dir.path(), &[to_2, failing]).unwrap_err();
        assert!(e.to_string().contains("this step fails"), "{e}");
        assert_eq!(stored_version(&db).unwrap(), Some(2));
        assert_eq!(trust_names(&db), ["migrated-2"]);
    }
}

/// The lines `tree NAME KEY VALUE` of a dump, as bytes, in order.
fn tree_records(text: &str) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let unhex = |h: &str| {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("tree ")?.split(' ');
            Some((unhex(f.next()?), unhex(f.next()?), unhex(f.next()?)))
        })
        .collect()
}

/// The step to version 5 seals every record of every tree with the checksum of its key and
/// value and changes nothing else: the version-4 store (the version-3 fixture migrated one
/// step) and the version-5 one hold the same keys, each value the version-4 one sealed, the
/// format version sealed, the base files as they were.
#[test]
fn the_step_to_version_5_seals_every_record_and_changes_nothing_else() {
    let dir = restored(V3);
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        migrate(&db, dir.path(), &super::format::MIGRATIONS[..3]).unwrap();
        assert_eq!(stored_version(&db).unwrap(), Some(4));
    }
    let v4 = dump::dump(dir.path()).unwrap();
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        migrate(&db, dir.path(), &super::format::MIGRATIONS[..4]).unwrap();
        assert_eq!(stored_version(&db).unwrap(), Some(5));
    }
    let v5 = dump::dump(dir.path()).unwrap();
    let (a, b) = (tree_records(&v4), tree_records(&v5));
    assert!(a.len() > 90, "{}", a.len());
    assert_eq!(a.len(), b.len());
    for ((ta, ka, va), (tb, kb, vb)) in a.iter().zip(&b) {
        assert_eq!((ta, ka), (tb, kb));
        if &ka[..] == FORMAT_KEY {
            assert_eq!(vb, &keys::encode(FORMAT_KEY, &5u32).unwrap());
        } else {
            assert_eq!(vb, &keys::seal(ka, va), "{}", keys::key_text(ka));
            assert_eq!(keys::unseal(kb, vb).unwrap(), &va[..]);
        }
    }
    let files = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("file "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(files(&v4), files(&v5));
    assert!(!files(&v5).is_empty());
}

/// Format 6 marks the stores whose queue may hold a program builds of format 5 cannot read
/// (`Operation::StoreAnalysis`, queued by `expand analyze --store`): a version-5 store holding
/// one (as the build before format 6 wrote it) opens with this build, migrated, its program
/// intact; a build of format 5 (its migration steps) then refuses the store by its version,
/// with its usual message, instead of failing on the program's record, and writes nothing.
#[test]
fn a_store_that_may_hold_a_store_analysis_program_is_refused_by_format_5_builds() {
    let v5_steps = &super::format::MIGRATIONS[..4];
    let store = ProgramRecord {
        id: 7,
        program: Program {
            root: bookfarm_engine::formats::transcript::parse_moves("f5d6c3").unwrap(),
            ..Program::new(Operation::StoreAnalysis { level: 6 })
        },
        state: ProgramState::Queued,
        submitted_ms: 1_700_000_000_000,
        started_ms: None,
        finished_ms: None,
        report: String::new(),
    };
    let dir = restored(V3);
    {
        let db = open_sled(dir.path(), 1 << 20).unwrap();
        migrate(&db, dir.path(), v5_steps).unwrap();
        assert_eq!(stored_version(&db).unwrap(), Some(5));
        let sealed = db.get(keys::BOOK_TREE_KEY).unwrap().unwrap();
        let book = db
            .open_tree(keys::unseal(keys::BOOK_TREE_KEY, &sealed).unwrap())
            .unwrap();
        let k = keys::program_key(store.id);
        book.insert(k, keys::encode(&k, &store).unwrap()).unwrap();
        super::sled_gate::flush(&db).unwrap();
    }
    let s = Store::open_book(dir.path()).unwrap();
    assert_eq!(stored_version(&s.db).unwrap(), Some(6));
    assert_eq!(FORMAT_VERSION, 6);
    let loaded = s.load(dir.path()).unwrap();
    assert!(loaded.programs.contains(&store), "{:?}", loaded.programs);
    drop(s);
    let db = open_sled(dir.path(), 1 << 20).unwrap();
    let e = migrate(&db, dir.path(), v5_steps).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::NewerFormat {
                found: 6,
                known: 5,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("format version 6, newer than this build's 5"),
        "{e}"
    );
    assert_eq!(stored_version(&db).unwrap(), Some(6), "nothing written");
}

/// A record damaged on disk is never served: for every record of a real store (the version-3
/// fixture at this build's version: book, results, trust, programs, history, credentials, event
/// log, sled's default tree), one random bit of its value, or of its key, flipped in a copy of
/// the store: opening and loading it stops with [`StoreError::CorruptRecord`] naming the
/// record's key as found, and says what to do (a flipped key of the format version leaves a
/// store without one, refused as such).
#[test]
fn every_damaged_record_is_refused_naming_its_key() {
    use rand::{Rng, SeedableRng};
    let dir = restored(V3);
    drop(Store::open_book(dir.path()).unwrap());
    let text = dump::dump(dir.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(40);
    let mut trials = 0;
    for (i, (tree, key, value)) in tree_records(&text).into_iter().enumerate() {
        for flip_key in [false, true] {
            let (mut k, mut v) = (key.clone(), value.clone());
            let target = if flip_key { &mut k } else { &mut v };
            let bit = rng.random_range(0..target.len() * 8);
            target[bit / 8] ^= 1 << (bit % 8);
            let damaged = format!(
                "tree {} {} {}",
                keys::hex(&tree),
                keys::hex(&k),
                keys::hex(&v)
            );
            // The dump lists the tree records first, in order; the damaged one goes last, so
            // that a flipped key equal to another record's replaces that record.
            let mut text: String = lines
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, l)| format!("{l}\n"))
                .collect();
            text.push_str(&format!("{damaged}\n"));
            let copy = restored(&text);
            let e = Store::open_book(copy.path())
                .and_then(|s| s.load(copy.path()).map(|_| ()))
                .expect_err(&format!(
                    "record {i} ({}, key flipped: {flip_key}) served after a flip",
                    keys::key_text(&key)
                ));
            trials += 1;
            if flip_key && key == FORMAT_KEY {
                // The version's key gone: a store without a version, refused as such.
                assert!(matches!(e, StoreError::Unversioned(_)), "{e}");
                continue;
            }
            let StoreError::CorruptRecord { key: named, .. } = &e else {
                panic!("record {i} ({}): {e}", keys::key_text(&key));
            };
            assert_eq!(*named, keys::key_text(&k), "record {i}");
            assert!(e.to_string().contains("restore"), "{e}");
        }
    }
    assert!(trials >= 200, "{trials}");
}

/// What flipping one byte of a store's files did.
#[derive(Debug, Default)]
struct FlipOutcomes {
    /// The open or the load refused, with an error: how many, by kind of error.
    refused: usize,
    /// The refusals by kind of error.
    errors: BTreeMap<&'static str, usize>,
    /// The store opened and read back exactly as it was written.
    unchanged: usize,
    /// sled panicked (the process would stop; nothing served).
    panicked: usize,
    /// The store opened and read back something else: (file, offset, what differed).
    served_wrong: Vec<(String, u64, String)>,
}

/// Byte flips in the files of a real store on disk — sled's data file, its configuration and
/// snapshot files, the base book and its checksums — never serve a wrong store: for each
/// trial a copy of the store (the version-3 fixture at this build's version: book, results,
/// trust, programs, credentials, event log) gets one random byte of one of its files (chosen
/// with equal chance; the offset uniform over the file's bytes that are not zero, where its
/// data is) replaced by a different value, and is then opened and loaded. Each trial either
/// fails with an error, or reads back every record and base file exactly as they were (a flip
/// in bytes sled no longer uses). The counts are printed (`--nocapture`) for
/// docs/reliability.md.
#[test]
fn byte_flips_in_the_store_files_are_refused_or_read_back_unchanged() {
    use rand::{Rng, SeedableRng};
    const TRIALS: usize = 150;
    let dir = restored(V3);
    {
        // The first load writes the base file's checksums (a dump carries none).
        let s = Store::open_book(dir.path()).unwrap();
        s.load(dir.path()).unwrap();
    }
    let want = dump::dump(dir.path()).unwrap();
    let mut files = Vec::new();
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::metadata(&p).unwrap().len() > 0 {
                files.push(p.strip_prefix(dir.path()).unwrap().to_path_buf());
            }
        }
    }
    files.sort();
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    assert!(names.iter().any(|n| n == "db"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("base/")), "{names:?}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(4040);
    let mut by_file: BTreeMap<String, FlipOutcomes> = BTreeMap::new();
    for _ in 0..TRIALS {
        let copy = tempfile::tempdir().unwrap();
        for f in &files {
            let to = copy.path().join(f);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(dir.path().join(f), &to).unwrap();
        }
        let f = &files[rng.random_range(0..files.len())];
        let path = copy.path().join(f);
        let mut bytes = std::fs::read(&path).unwrap();
        let used: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
        let at = if used.is_empty() {
            rng.random_range(0..bytes.len())
        } else {
            used[rng.random_range(0..used.len())]
        };
        bytes[at] ^= rng.random_range(1..=255u8);
        std::fs::write(&path, &bytes).unwrap();
        let outcome = by_file.entry(f.display().to_string()).or_default();
        let p = copy.path().to_path_buf();
        let opened = std::panic::catch_unwind(move || {
            Store::open_book(&p).and_then(|s| s.load(&p).map(|l| (s, l)))
        });
        match opened {
            Err(_) => outcome.panicked += 1,
            Ok(Err(e)) => {
                outcome.refused += 1;
                let kind = match e {
                    StoreError::CorruptRecord { .. } => "record checksum",
                    StoreError::Corrupt { .. } => "base checksum",
                    StoreError::Sled(sled::Error::Corruption { .. }) => "sled corruption",
                    StoreError::Sled(_) => "sled other",
                    _ => "other",
                };
                *outcome.errors.entry(kind).or_default() += 1;
            }
            Ok(Ok((s, _))) => {
                drop(s);
                let got = dump::dump(copy.path()).unwrap();
                if got == want {
                    outcome.unchanged += 1;
                } else {
                    let what = changed_keys(&want, &got)
                        .iter()
                        .map(|(t, k)| format!("{}/{}", keys::key_text(t), keys::key_text(k)))
                        .collect::<Vec<_>>()
                        .join(", ");
                    outcome
                        .served_wrong
                        .push((f.display().to_string(), at as u64, what));
                }
            }
        }
    }
    for (file, o) in &by_file {
        println!(
            "{file}: {} trials: {} refused {:?}, {} unchanged, {} panicked, {} served wrong",
            o.refused + o.unchanged + o.panicked + o.served_wrong.len(),
            o.refused,
            o.errors,
            o.unchanged,
            o.panicked,
            o.served_wrong.len()
        );
    }
    let wrong: Vec<_> = by_file.values().flat_map(|o| &o.served_wrong).collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// A backup of a store that serves (the version-3 fixture at this build's version, held open)
/// restores into a store holding the same records and base file; restoring refuses an existing
/// directory, a backup cut short anywhere and one with a changed byte, leaving no store; a
/// restore cut short (its `.restoring` directory left behind) does not stop the next.
#[test]
fn a_backup_restores_to_the_same_store_and_a_cut_or_damaged_one_is_refused() {
    use super::backup::restore;
    let dir = restored(V3);
    let s = Store::open_book(dir.path()).unwrap();
    s.load(dir.path()).unwrap();
    let mut bytes = Vec::new();
    let summary = s.backup_to(&mut bytes).unwrap();
    // The file the service streams holds the same backup.
    let (mut file, len, same) = s.backup_file().unwrap();
    let mut copy = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut copy).unwrap();
    assert_eq!((copy.len() as u64, same), (len, summary));
    assert_eq!(copy, bytes);
    assert!(
        summary.records > 90 && summary.base_bytes > 0,
        "{summary:?}"
    );
    drop(s);
    let want = dump::dump(dir.path()).unwrap();
    let to = tempfile::tempdir().unwrap();
    let new = to.path().join("restored");
    let file = to.path().join("backup");
    let restore = |bytes: &[u8], dir: &std::path::Path| {
        std::fs::write(&file, bytes).unwrap();
        restore(&file, dir)
    };
    // A restore killed earlier left its directory: it is replaced.
    std::fs::create_dir_all(to.path().join("restored.restoring/junk")).unwrap();
    let got = restore(&bytes, &new).unwrap();
    assert_eq!(got, summary);
    assert_eq!(dump::dump(&new).unwrap(), want);
    assert!(!to.path().join("restored.restoring").exists());
    let e = restore(&bytes, &new).unwrap_err();
    assert!(e.to_string().contains("exists"), "{e}");
    let refused = to.path().join("refused");
    for cut in [0, 10, bytes.len() / 3, bytes.len() - 70, bytes.len() - 2] {
        let e = restore(&bytes[..cut], &refused).unwrap_err().to_string();
        assert!(
            e.contains("incomplete") || e.contains("damaged") || e.contains("not a"),
            "{cut}: {e}"
        );
        assert!(!refused.exists());
    }
    for at in [40, bytes.len() / 2, bytes.len() - 80] {
        let mut b = bytes.clone();
        b[at] = if b[at] == b'0' { b'1' } else { b'0' };
        let e = restore(&b, &refused).unwrap_err().to_string();
        assert!(e.contains("damaged") || e.contains("not a"), "{at}: {e}");
        assert!(!refused.exists());
    }
}
