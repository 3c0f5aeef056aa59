//! Validated results end to end: liars are caught and blocked, the book is replayed without
//! them, trust records are written on schedule.

use super::*;

/// A trust record changed in counts only (here the local worker's, a root) is written at most
/// once per checkpoint interval, so that a submission of results alone is one store write,
/// and completely at every flush (decisions: `trust::tests`).
#[test]
fn trust_counts_are_written_once_per_interval_and_at_a_flush() {
    let cfg = ServiceConfig {
        checkpoint_interval: Duration::from_secs(3600),
        ..ServiceConfig::default()
    };
    let f = fixture(2, 10, cfg);
    f.c.start(deviate24()).unwrap();
    let id = identity();
    let w = f.c.register(&id, "t", 1).unwrap();
    let stored = |name: &str| {
        f.c.0
            .store
            .trust_records()
            .unwrap()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
    };
    let memory = |name: &str| f.c.jobs().trust.records.get(name).cloned();
    let root = f.c.jobs().trust.records.keys().next().cloned().unwrap();
    assert!(memory(&root).unwrap().root);
    let counted_at_register = stored(&root).unwrap().results;
    let mut accepted = 0u64;
    for _ in 0..6 {
        let jobs = f.c.lease(&id, &w, 4).unwrap();
        let r: Vec<_> = jobs.iter().map(mock_result).collect();
        let acks = f.c.submit(&id, &w, &r).unwrap();
        accepted += acks.iter().filter(|a| **a == Ack::Accepted).count() as u64;
        f.c.settle().unwrap();
    }
    assert!(accepted > 4, "{accepted} results accepted");
    assert_eq!(memory(&root).unwrap().results, accepted);
    // The first submission wrote the record (none was written in this interval); the later
    // ones waited for the interval.
    let before_flush = stored(&root).unwrap().results;
    assert!(
        before_flush > counted_at_register && before_flush < accepted,
        "stored {before_flush} of {accepted} before the flush"
    );
    f.c.flush().unwrap();
    assert_eq!(stored(&root).unwrap().results, accepted);
}

/// How a mock worker of the validation tests answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Honest,
    /// The sign flipped and moved by 2 on one request in `n` (chosen by the request, so that
    /// every liar of this kind tells the same lie).
    Flip(u64),
}

fn answer(job: &Job, how: Answer) -> JobResult {
    let mut r = mock_result(job);
    if let Answer::Flip(n) = how {
        let h = job.board.player.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ job.board.opponent;
        if (h >> 17).is_multiple_of(n) {
            r.leaf.score = 2 - r.leaf.score;
        }
    }
    r
}

/// Run mock workers `(id, answer)` in turns until the growth programs are done and no check
/// job is left; a worker refused (blocked) stops. Returns the workers refused.
fn drive_mixed(c: &Coordinator, workers: &[(Uuid, Answer)]) -> Vec<Uuid> {
    let id = identity();
    let mut refused = Vec::new();
    let mut idle = 0;
    for round in 0..1_000_000usize {
        let (w, how) = workers[round % workers.len()];
        if refused.contains(&w) {
            continue;
        }
        let jobs = match c.lease(&id, &w, 2) {
            Ok(j) => j,
            Err(CoordinatorError::Blocked(_)) => {
                refused.push(w);
                continue;
            }
            Err(e) => panic!("lease: {e}"),
        };
        if jobs.is_empty() {
            c.settle().unwrap();
            idle += 1;
            let s = c.status();
            if idle > 4 * workers.len() && s.state == State::Done && s.in_flight == 0 {
                break;
            }
            continue;
        }
        idle = 0;
        let results: Vec<JobResult> = jobs.iter().map(|j| answer(j, how)).collect();
        match c.submit(&id, &w, &results) {
            Ok(_) => {}
            Err(CoordinatorError::Blocked(_)) => refused.push(w),
            Err(e) => panic!("submit: {e}"),
        }
    }
    c.settle().unwrap();
    refused
}

/// A level-2, depth-10 book served under `trust`, with the coordinator's verifier registered
/// (the trust root the validation tests settle against).
fn trust_fixture(trust: TrustRules) -> (Fixture, Identity, Uuid) {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            trust,
            ..ServiceConfig::default()
        },
    );
    let id = identity();
    let verifier = f.c.register_verifier(&id, 1).unwrap();
    (f, id, verifier)
}

#[test]
fn untrusted_liars_never_reach_the_book_and_are_blocked() {
    // Every result applied on one (earned) word is spot-checked, so that a lie a liar slipped
    // in after earning trust is caught before the build is done.
    let (f, id, verifier) = trust_fixture(TrustRules {
        spot_floor: 1.0,
        ..TrustRules::default()
    });
    let alice =
        f.c.register_with(&id, "a", 1, Some("alice"), false)
            .unwrap();
    let mallory =
        f.c.register_with(&id, "m", 1, Some("mallory"), false)
            .unwrap();
    let eve = f.c.register_with(&id, "e", 1, Some("eve"), false).unwrap();
    let eve2 =
        f.c.register_with(&id, "e2", 1, Some("eve2"), false)
            .unwrap();
    f.c.start(deviate24()).unwrap();
    let refused = drive_mixed(
        &f.c,
        &[
            (verifier, Answer::Honest),
            (alice, Answer::Honest),
            (mallory, Answer::Flip(1)),
            (eve, Answer::Flip(3)),
            (eve2, Answer::Flip(3)),
        ],
    );
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
    let s = f.c.status();
    let v = s.validation;
    assert!(v.reached_book == 0 || v.rollbacks > 0, "{v:?}");
    assert!(
        v.applied_at_once > 0 && v.spot_checks == v.applied_at_once,
        "alice earned trust: her results below the window are applied at once, and checked: {v:?}"
    );
    assert!(v.invalid >= 3 && v.held > 0 && v.validated > 0, "{v:?}");
    let credit = |n: &str| s.credit.iter().find(|c| c.name == n).unwrap().clone();
    assert!(credit("mallory").blocked && refused.contains(&mallory));
    assert_eq!(credit("mallory").results, 0, "no credit for lies");
    assert!(!credit("alice").blocked && credit("alice").invalid == 0);
    assert!(credit("alice").results > 0);
    // A restart keeps standing and credit.
    let before = s.credit.clone();
    let f = reopen(f, ServiceConfig::default());
    assert_eq!(f.c.status().credit, before);
    assert!(
        f.c.register_with(&id, "m", 1, Some("mallory"), false)
            .is_err()
    );
}

/// The window rule (see `trust::Window`) against the rule that made every deviate request
/// critical: the same book, and an earned worker's results below the window applied at once
/// instead of replicated.
#[test]
fn earned_results_below_the_deviate_window_are_applied_at_once() {
    let run = |window_margin: Option<i32>| {
        let (f, id, verifier) = trust_fixture(TrustRules {
            window_margin,
            ..TrustRules::default()
        });
        let alice =
            f.c.register_with(&id, "a", 1, Some("alice"), false)
                .unwrap();
        let bob = f.c.register_with(&id, "b", 1, Some("bob"), false).unwrap();
        f.c.start(deviate24()).unwrap();
        drive_mixed(
            &f.c,
            &[
                (verifier, Answer::Honest),
                (alice, Answer::Honest),
                (bob, Answer::Honest),
            ],
        );
        assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
        f.c.status().validation
    };
    let all = run(None);
    let window = run(TrustRules::default().window_margin);
    assert_eq!(all.applied_at_once, 0, "every result waited: {all:?}");
    assert!(window.applied_at_once > 0, "{window:?}");
    // Less replication per node the book uses. (The runs' totals differ by a few results: the
    // verifier thread and the workers interleave differently from run to run, so only the
    // ratio is compared.)
    assert!(
        u128::from(window.replica_nodes) * u128::from(all.used_nodes)
            < u128::from(all.replica_nodes) * u128::from(window.used_nodes),
        "less replication: {window:?} vs {all:?}"
    );
    assert_eq!(window.invalid + all.invalid, 0);
}

#[test]
fn a_trusted_liar_is_caught_by_spot_checks_and_the_book_is_replayed() {
    let (f, id, verifier) = trust_fixture(TrustRules::default());
    let liar = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let honest = f.c.register_with(&id, "u", 1, Some("u"), false).unwrap();
    f.c.start(deviate24()).unwrap();
    drive_mixed(
        &f.c,
        &[
            (liar, Answer::Flip(1)),
            (verifier, Answer::Honest),
            (honest, Answer::Honest),
        ],
    );
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
    let s = f.c.status();
    let v = s.validation;
    // Its first result is applied at once and spot-checked (its record is empty): the lie
    // reached the book, was caught, and the book was replayed without it.
    assert!(
        v.reached_book > 0 && v.rollbacks > 0 && v.spot_checks > 0,
        "{v:?}"
    );
    let op = s.credit.iter().find(|c| c.name == "op").unwrap();
    assert!(op.blocked && op.invalid >= 3 && op.results == 0, "{op:?}");
    // The replayed book survives a restart.
    let f = reopen(f, ServiceConfig::default());
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
}
