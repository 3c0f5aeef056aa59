//! Validated results end to end: liars are caught and blocked, the book is replayed without
//! them, trust records are written on schedule.

use super::*;
use crate::events::EventKind;
use crate::service::trust::CheckKind;
use crate::store::ProgramState;
use bookfarm_proto::domain::{IdleReason, LeaseAsk};

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
        "alice earned trust: her results are applied at once, and checked: {v:?}"
    );
    assert!(v.invalid >= 3 && v.held > 0 && v.validated > 0, "{v:?}");
    let credit = |n: &str| s.credit.iter().find(|c| c.name == n).unwrap().clone();
    assert!(credit("mallory").blocked && refused.contains(&mallory));
    assert_eq!(
        credit("mallory").invalid,
        TrustRules::default().block_after,
        "blocked at its K-th invalid result"
    );
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
    // The operator unblocks mallory (`workers unblock`): served again, also after a restart;
    // the invalid results stay on the record.
    assert!(f.c.unblock_contributor("mallory").unwrap());
    assert!(!f.c.unblock_contributor("mallory").unwrap());
    assert!(!f.c.unblock_contributor("alice").unwrap());
    let f = reopen(f, ServiceConfig::default());
    let m =
        f.c.status()
            .credit
            .into_iter()
            .find(|c| c.name == "mallory")
            .unwrap();
    assert!(!m.blocked && m.invalid > 0, "{m:?}");
    f.c.register_with(&id, "m", 1, Some("mallory"), false)
        .unwrap();
}

/// A level-2, depth-10 book served under `trust` with no verifier: trusted workers are the only
/// trust roots (`serve` without `--eval`).
fn fixture_without_verifier(trust: TrustRules) -> (Fixture, Identity) {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            trust,
            // The spot coin is keyed by the secret and the job's id: both fixed, so a test's
            // checks fall the same way in every run.
            trust_seed: Some(7),
            seeded_ids: Some(7),
            ..ServiceConfig::default()
        },
    );
    (f, identity())
}

/// A farm without a verifier and with no spot-check floor: a trusted worker (owner `op`) and a
/// volunteer (owner `vol`) with a long record, earned and never spot-checked; returns the
/// fixture and the two workers.
fn trusted_and_earned_farm() -> (Fixture, uuid::Uuid, uuid::Uuid) {
    let (f, id) = fixture_without_verifier(TrustRules {
        spot_floor: 0.0,
        ..TrustRules::default()
    });
    let op = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let vol = f.c.register_with(&id, "v", 1, Some("vol"), false).unwrap();
    long_record(&f.c, "vol", 1 << 40);
    (f, op, vol)
}

/// Give contributor `name` a long record of results agreeing with the trust root: it is
/// earned, and its results are spot-checked at the floor rate only.
fn long_record(c: &Coordinator, name: &str, streak: u64) {
    let mut g = c.jobs();
    let t = g.trust.records.get_mut(name).expect("registered");
    t.streak = streak;
}

/// An honest earned volunteer adds throughput: with a trusted worker and no verifier, its
/// results are applied at once (not replicated), its spot checks run on the trusted worker (its
/// streak grows past N with them and with its unchecked results), the provisional results in
/// the decisive core are confirmed before the build is done, and the book is the serial
/// build's.
#[test]
fn spot_checks_run_without_a_verifier_and_earned_results_are_not_replicated() {
    let (f, id) = fixture_without_verifier(TrustRules::default());
    let op = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let vol = f.c.register_with(&id, "v", 1, Some("vol"), false).unwrap();
    f.c.start(deviate24()).unwrap();
    drive_mixed(&f.c, &[(op, Answer::Honest), (vol, Answer::Honest)]);
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
    let s = f.c.status();
    assert_eq!(s.state, State::Done);
    let v = s.validation;
    let credit = |n: &str| s.credit.iter().find(|c| c.name == n).unwrap().clone();
    let vc = credit("vol");
    assert_eq!(vc.standing, Standing::Earned, "{vc:?}");
    // N results validated by the trusted worker, then the streak grows with the spot and core
    // checks the trusted worker ran and the results applied on the volunteer's word.
    assert!(
        vc.streak > TrustRules::default().earn_after && v.spot_checks > 0,
        "{vc:?} {v:?}"
    );
    assert!(
        v.held <= 12,
        "only the new credential's first results wait: {v:?}"
    );
    assert!(v.applied_at_once > 5 * v.held, "{v:?}");
    assert_eq!((v.invalid, v.core_unconfirmed), (0, 0), "{v:?}");
    // Extra compute: the first N results, the spot checks and the core checks, a fraction of
    // the volunteer's results.
    assert!(
        v.replica_nodes * 2 < v.used_nodes,
        "replicas {} of {} nodes used: {v:?}",
        v.replica_nodes,
        v.used_nodes
    );
}

/// A credential still earning trust gets no more searches than the confirmations it still
/// needs: a volunteer with 8 threads, beside a trusted worker that takes one job every third
/// turn, holds at most N unconfirmed results (answered or leased), is told it is earning while
/// they wait, and so has exactly N results held for validation in the whole build; then it is
/// earned and gets its threads' worth again. The book is the serial build's.
#[test]
fn a_credential_still_earning_gets_no_more_work_than_the_confirmations_it_needs() {
    let rules = TrustRules::default();
    let n = rules.earn_after;
    let (f, id) = fixture_without_verifier(rules);
    let op = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let vol = f.c.register_with(&id, "v", 8, Some("vol"), false).unwrap();
    f.c.start(deviate24()).unwrap();
    let ask = |free| LeaseAsk {
        free,
        available: None,
    };
    // The trusted worker alone until a pass has more searches than N.
    for _ in 0..1_000 {
        f.c.settle().unwrap();
        if f.c.status().queued > n {
            break;
        }
        let jobs = f.c.lease(&id, &op, 1).unwrap();
        f.c.submit(&id, &op, &mock_results(&jobs)).unwrap();
    }
    assert!(f.c.status().queued > n, "a pass wider than N");
    let (mut told_earning, mut most_while_earning, mut most_after) = (false, 0u64, 0usize);
    for turn in 0..100_000usize {
        f.c.settle().unwrap();
        let earned = f.c.jobs().trust.standing_of("vol", &rules) >= Standing::Earned;
        let offer = f.c.offer(&id, &vol, ask(8)).unwrap();
        told_earning |= offer.idle == Some(IdleReason::Earning);
        assert!(
            earned || offer.idle != Some(IdleReason::Earning) || offer.jobs.is_empty(),
            "{offer:?}"
        );
        if earned {
            most_after = most_after.max(offer.jobs.len());
        } else {
            let held = f.c.status().validation.held;
            let unconfirmed = held - f.c.jobs().trust.records["vol"].streak;
            most_while_earning = most_while_earning.max(unconfirmed + offer.jobs.len() as u64);
        }
        f.c.submit(&id, &vol, &mock_results(&offer.jobs)).unwrap();
        if turn % 3 == 0 {
            let jobs = f.c.lease(&id, &op, 1).unwrap();
            f.c.submit(&id, &op, &mock_results(&jobs)).unwrap();
        }
        let s = f.c.status();
        if s.state == State::Done && s.in_flight == 0 && s.queued == 0 {
            break;
        }
    }
    f.c.settle().unwrap();
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
    let v = f.c.status().validation;
    assert!(told_earning, "the volunteer waited for its confirmations");
    assert_eq!(
        most_while_earning, n,
        "at most N unconfirmed results: {v:?}"
    );
    assert_eq!(v.held, n, "exactly N results held in the build: {v:?}");
    assert!(
        most_after > 1,
        "earned: several jobs at once ({most_after})"
    );
}

/// An earned liar with a long record lies on every result: at the floor rate no spot check
/// catches it in time, but the lies that stay in the decisive core get core checks by the
/// trusted worker, which catch it; the book is replayed without its results and ends as the
/// honest book, and the build is done only once its core holds no provisional result. The
/// same farm with the volunteer honest: the core checks confirm, and nothing is replayed.
#[test]
fn a_core_lie_no_spot_check_caught_is_removed_before_the_build_is_done() {
    for how in [Answer::Flip(1), Answer::Honest] {
        let (f, op, vol) = trusted_and_earned_farm();
        f.c.start(deviate24()).unwrap();
        drive_mixed(&f.c, &[(vol, how), (op, Answer::Honest)]);
        assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
        let s = f.c.status();
        assert_eq!(s.state, State::Done);
        let v = s.validation;
        assert_eq!(v.spot_checks, 0, "{v:?}");
        assert!(v.core_checks > 0 && v.core_size > 0, "{v:?}");
        assert_eq!(v.core_unconfirmed, 0, "{v:?}");
        let vc = s.credit.iter().find(|c| c.name == "vol").unwrap();
        if how == Answer::Honest {
            assert_eq!((v.invalid, v.rollbacks), (0, 0), "{v:?}");
            assert_eq!(vc.standing, Standing::Earned);
        } else {
            assert!(
                v.core_caught > 0 && v.reached_book > 0 && v.rollbacks > 0,
                "{v:?}"
            );
            assert!(vc.invalid > 0 && vc.blocked, "{vc:?}");
        }
    }
}

/// A new book keeps the contributors' standings, in memory and in the store (a volunteer that
/// earned trust on one book returns to the next with it), and starts with no provisional
/// result: the old book's are not the new one's to confirm.
#[test]
fn a_new_book_keeps_standings_and_starts_with_no_provisional_result() {
    let (f, op, vol) = trusted_and_earned_farm();
    f.c.start(deviate24()).unwrap();
    drive_mixed(&f.c, &[(vol, Answer::Honest), (op, Answer::Honest)]);
    let before = f.c.status().validation;
    assert!(before.provisional > 0, "{before:?}");
    let (h, entries) = new_book(2, 10);
    f.c.import(h, entries.into_iter().map(|e| e.pos).collect())
        .unwrap();
    let s = f.c.status();
    assert_eq!(s.validation.provisional, 0, "{:?}", s.validation);
    let vc = s.credit.iter().find(|c| c.name == "vol").unwrap();
    assert!(
        vc.standing == Standing::Earned && vc.streak >= 1 << 40,
        "{vc:?}"
    );
    f.c.flush().unwrap();
    let stored = f.c.0.store.trust_records().unwrap();
    assert!(
        stored
            .iter()
            .any(|(n, t)| n == "vol" && t.streak >= 1 << 40),
        "{stored:?}"
    );
}

/// A sleeper honest until it earned trust, then lying on one result in three: a lie reaches the
/// book on its earned word and growth builds on it; a spot check by the trusted worker (no
/// verifier) catches it later, and the book is replayed out of the liar's results to the honest
/// book. Each catch doubles the streak its owner's credentials need.
#[test]
fn a_liar_caught_late_is_replayed_out_of_the_book() {
    let (f, id) = fixture_without_verifier(TrustRules {
        spot_floor: 0.3,
        earn_after: 4,
        ..TrustRules::default()
    });
    let op = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let liar = f.c.register_with(&id, "z", 1, Some("zed"), false).unwrap();
    f.c.start(deviate24()).unwrap();
    // Honest until earned.
    let id2 = identity();
    let mut earned = false;
    for _ in 0..10_000 {
        for (w, how) in [(liar, Answer::Honest), (op, Answer::Honest)] {
            let jobs = f.c.lease(&id2, &w, 1).unwrap();
            let r: Vec<JobResult> = jobs.iter().map(|j| answer(j, how)).collect();
            f.c.submit(&id2, &w, &r).unwrap();
            f.c.settle().unwrap();
        }
        if f.c.jobs().trust.standing_of("zed", &f.c.config().trust) == Standing::Earned {
            earned = true;
            break;
        }
    }
    assert!(earned);
    drive_mixed(&f.c, &[(liar, Answer::Flip(3)), (op, Answer::Honest)]);
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
    let s = f.c.status();
    let v = s.validation;
    assert!(
        v.reached_book > 0 && v.rollbacks > 0 && v.dropped > 0,
        "{v:?}"
    );
    let z = s.credit.iter().find(|c| c.name == "zed").unwrap();
    assert!(z.invalid > 0, "{z:?}");
    let catches = f.c.jobs().trust.catches.get("zed").copied().unwrap_or(0);
    assert_eq!(catches, z.invalid);
    assert_eq!(
        crate::service::trust::required_streak(&f.c.config().trust, catches),
        4 << catches
    );
}

/// An asynchronous program finishes with an earned liar's lies in its book (the trust root
/// leased nothing yet, so no check ran); then the trust root's core checks catch the liar and
/// its results are dropped. The book is not replayed: the finished program is re-opened on the
/// current book, the leaves of the dropped results are cleared and searched again, and its
/// selection runs until it finds nothing again. The book ends with properties 1–3 (every leaf
/// from an honest result), and keeps them across a restart.
#[test]
fn a_liar_caught_after_an_asynchronous_program_finished_is_retracted_not_replayed() {
    let (f, op, vol) = trusted_and_earned_farm();
    let program = Program {
        schedule: bookfarm_book::program::Schedule::Async,
        ..deviate24()
    };
    let q = f.c.start(program.clone()).unwrap();
    let done = |c: &Coordinator| {
        c.programs(true)
            .iter()
            .any(|p| p.record.id == q.program && p.record.state == ProgramState::Done)
    };
    // Only the liar works until the program finished.
    let id = identity();
    while !done(&f.c) {
        let jobs = f.c.lease(&id, &vol, 2).unwrap();
        assert!(!jobs.is_empty(), "the liar ran out of work before the end");
        let results: Vec<JobResult> = jobs.iter().map(|j| answer(j, Answer::Flip(1))).collect();
        f.c.submit(&id, &vol, &results).unwrap();
        f.c.settle().unwrap();
    }
    let lied = unvalidated_leaves(&f.c).len();
    assert!(lied > 0, "the lies reached the finished book");
    let v = f.c.status().validation;
    assert_eq!(
        (v.invalid, v.rollbacks),
        (0, 0),
        "nothing caught yet: {v:?}"
    );
    // The trust root's core checks catch it.
    drive_mixed(&f.c, &[(vol, Answer::Flip(1)), (op, Answer::Honest)]);
    let s = f.c.status();
    assert_eq!(s.state, State::Done);
    let v = s.validation;
    assert!(
        v.core_caught > 0 && v.reached_book > 0 && v.dropped > 0,
        "{v:?}"
    );
    assert_eq!(v.replays, 0, "no replay: {v:?}");
    assert!(v.retractions > 0, "{v:?}");
    let events = f.c.events().query(&Default::default()).unwrap().events;
    let of = |k: EventKind| events.iter().filter(|(_, e)| e.kind == k).count();
    assert_eq!(of(EventKind::Replay), 0, "{events:?}");
    assert_eq!(of(EventKind::Retract) as u64, v.retractions);
    assert!(
        events
            .iter()
            .any(|(_, e)| e.kind == EventKind::Retract && e.detail.contains("re-opened")),
        "{events:?}"
    );
    // Re-opened, not finished twice: one program done, its record as it ended.
    let done_events = events
        .iter()
        .filter(|(_, e)| e.kind == EventKind::ProgramDone && e.subject.starts_with("deviate"))
        .count();
    assert_eq!(done_events, 1, "{events:?}");
    assert!(done(&f.c));
    assert!(
        s.reports
            .iter()
            .any(|r| r.contains("repaired after a late catch")),
        "{:?}",
        s.reports
    );
    assert_finished_book(&f.c, &program);
    // The repaired book survives a restart, and nothing is recovered again.
    let f = reopen(
        f,
        ServiceConfig {
            trust_seed: Some(7),
            seeded_ids: Some(7),
            ..ServiceConfig::default()
        },
    );
    f.c.settle().unwrap();
    assert_eq!(f.c.status().state, State::Done);
    assert_finished_book(&f.c, &program);
}

/// Checks never starve round work: a trusted worker with round work queued takes core and
/// spot checks in at most `check_share` of its leases; once no round work waits it takes the
/// rest. An earned worker takes a spot check only once no trust root took it in time.
#[test]
fn checks_take_a_bounded_share_of_a_trusted_workers_leases() {
    let (f, id) = fixture_without_verifier(TrustRules::default());
    let op = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let peer = f.c.register_with(&id, "p", 1, Some("peer"), false).unwrap();
    long_record(&f.c, "peer", 100);
    let now = f.c.now();
    {
        let mut g = f.c.jobs();
        let reqs: Vec<LeafRequest> = (0..40)
            .map(|i| LeafRequest {
                board: Board::start(),
                level: 2,
                excluded: 1u64 << i,
            })
            .collect();
        g.sync(&reqs[..20], Some(&[]));
        for (i, k) in reqs[20..].iter().enumerate() {
            let kind = if i % 2 == 0 {
                crate::service::trust::CheckKind::Core
            } else {
                crate::service::trust::CheckKind::Spot
            };
            let need = crate::service::trust::Need {
                min: Standing::Given,
                kind,
                answered: vec!["someone".into()],
                owners: vec!["other".into()],
            };
            g.add_check(*k, need, now);
        }
    }
    let cfg = f.c.config().clone();
    let lease_at = |w: &Uuid, ahead: Duration| {
        let mut g = f.c.jobs();
        let now = f.c.now() + ahead;
        let jobs = g.lease(w, 1, now, &cfg);
        jobs.iter()
            .map(|j| {
                let e = g.jobs.get(&j.id).unwrap();
                (e.class, e.need.as_ref().map(|n| (n.kind, n.min)))
            })
            .collect::<Vec<_>>()
    };
    let lease = |w: &Uuid| {
        lease_at(w, Duration::ZERO)
            .into_iter()
            .map(|(c, _)| c)
            .collect::<Vec<_>>()
    };
    // The earned peer: round work only (the spot checks wait for a trust root)...
    assert_eq!(lease(&peer), vec![JobClass::Round]);
    // ...until no trust root took them in time: then a spot check (never a core check).
    let relaxed = lease_at(&peer, Duration::from_secs(60));
    assert_eq!(
        relaxed,
        vec![(
            JobClass::Check,
            Some((crate::service::trust::CheckKind::Spot, Standing::Earned))
        )]
    );
    let mut classes = Vec::new();
    while let Some(c) = lease(&op).first().copied() {
        classes.push(c);
    }
    assert_eq!(
        classes.len(),
        38,
        "19 round jobs and 19 checks: {classes:?}"
    );
    // While round work waited, checks took at most a quarter of the leases (plus one).
    let last_round = classes.iter().rposition(|c| *c == JobClass::Round).unwrap();
    let early = classes[..last_round]
        .iter()
        .filter(|c| **c == JobClass::Check)
        .count();
    assert!(
        early as f64 <= 0.25 * last_round as f64 + 1.0 && early >= 3,
        "{early} checks before the last of the round work: {classes:?}"
    );
    let _ = id;
}

/// A held result's validation goes to a trust root first: an earned volunteer of another owner
/// takes it only once no trust root took it in time (its agreement applies the result but
/// lengthens no streak), and a trusted worker takes it before round work (its agreement is
/// what earns the new credential trust).
#[test]
fn a_held_result_is_validated_by_a_trust_root_first_and_by_an_earned_peer_only_when_none_was_free()
{
    use crate::service::trust::CheckKind;
    let rules = TrustRules::default();
    let (f, id) = fixture_without_verifier(rules);
    let op = f.c.register_with(&id, "t", 1, Some("op"), true).unwrap();
    let peer = f.c.register_with(&id, "p", 1, Some("peer"), false).unwrap();
    let vol = f.c.register_with(&id, "v", 1, Some("vol"), false).unwrap();
    long_record(&f.c, "peer", 100);
    f.c.start(deviate24()).unwrap();
    f.c.settle().unwrap();
    let checks_in = |jobs: &[Job]| -> Vec<(CheckKind, Standing)> {
        let g = f.c.jobs();
        jobs.iter()
            .filter_map(|j| g.jobs.get(&j.id).and_then(|e| e.need.as_ref()))
            .map(|n| (n.kind, n.min))
            .collect()
    };
    let hold = || {
        let jobs = f.c.lease(&id, &vol, 1).unwrap();
        assert_eq!(jobs.len(), 1, "a round search for the volunteer");
        f.c.submit(&id, &vol, &mock_results(&jobs)).unwrap();
        f.c.settle().unwrap();
        assert_eq!(f.c.status().health.pending_checks, 1, "held for validation");
    };
    let streak = || f.c.jobs().trust.records["vol"].streak;
    // Held: the earned peer is not offered its validation while a trust root may take it...
    hold();
    let jobs = f.c.lease(&id, &peer, 1).unwrap();
    assert_eq!(checks_in(&jobs), [], "round work only: {jobs:?}");
    f.c.submit(&id, &peer, &mock_results(&jobs)).unwrap();
    f.c.settle().unwrap();
    // ...until none took it in time: then the peer validates, and the volunteer's streak
    // stays where it was.
    f.clock.advance(Duration::from_secs(60));
    let jobs = f.c.lease(&id, &peer, 1).unwrap();
    assert_eq!(
        checks_in(&jobs),
        [(CheckKind::Validation, Standing::Earned)],
        "{jobs:?}"
    );
    f.c.submit(&id, &peer, &mock_results(&jobs)).unwrap();
    f.c.settle().unwrap();
    let v = f.c.status().validation;
    assert_eq!((v.held, v.validated, v.relaxed_checks), (1, 1, 1), "{v:?}");
    assert_eq!(streak(), 0, "an earned peer's agreement earns no trust");
    // Held again: the trusted worker takes the validation before round work, and its
    // agreement lengthens the volunteer's streak.
    hold();
    let jobs = f.c.lease(&id, &op, 1).unwrap();
    assert_eq!(
        checks_in(&jobs),
        [(CheckKind::Validation, Standing::Given)],
        "{jobs:?}"
    );
    f.c.submit(&id, &op, &mock_results(&jobs)).unwrap();
    f.c.settle().unwrap();
    assert_eq!(f.c.status().validation.validated, 2);
    assert_eq!(streak(), 1, "a trust root's agreement counts");
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
    assert_eq!(s.health.blocked_contributors, 1, "{:?}", s.health);
    // The event log tells the story: the workers joined, the liar was caught (each catch) and
    // blocked once, the book was replayed, and the program finished with its cost.
    let events = f.c.events().query(&Default::default()).unwrap().events;
    let of = |k: EventKind| events.iter().filter(|(_, e)| e.kind == k).count();
    assert_eq!(of(EventKind::WorkerJoined), 3);
    assert_eq!(of(EventKind::LieCaught) as u64, v.invalid);
    assert_eq!(of(EventKind::ContributorBlocked), 1);
    assert_eq!(of(EventKind::Replay) as u64, v.rollbacks);
    assert!(
        events
            .iter()
            .filter(|(_, e)| matches!(e.kind, EventKind::LieCaught | EventKind::ContributorBlocked))
            .all(|(_, e)| e.subject == "op" && e.owner == "op"),
        "{events:?}"
    );
    let done: Vec<_> = events
        .iter()
        .filter(|(_, e)| e.kind == EventKind::ProgramDone && e.subject.starts_with("deviate"))
        .collect();
    assert_eq!(
        done.len(),
        1,
        "a replayed program finishes once: {events:?}"
    );
    let cost = done[0].1.cost.expect("the program's cost");
    assert!(
        cost.searches > 0 && cost.cpu_us > 0 && cost.replica_cpu_us > 0,
        "{cost:?}"
    );
    assert_eq!(
        cost.positions,
        s.positions - 1,
        "every position but the root"
    );
    // The replayed book survives a restart.
    let f = reopen(f, ServiceConfig::default());
    assert_same_book(&f.c, &serial_book(2, 10, &[deviate24()]));
}

/// Trust made visible: an untrusted worker's results wait for a trust root as check jobs,
/// whose number and age the status reports; once the verifier settled them none is pending,
/// and the replicas' search time is the replication overhead.
#[test]
fn pending_checks_their_age_and_the_overhead_are_reported() {
    let (f, id, verifier) = trust_fixture(TrustRules::default());
    let untrusted = f.c.register_with(&id, "u", 1, Some("u"), false).unwrap();
    f.c.start(deviate24()).unwrap();
    let jobs = f.c.lease(&id, &untrusted, 2).unwrap();
    assert!(!jobs.is_empty());
    let results: Vec<JobResult> = jobs.iter().map(|j| answer(j, Answer::Honest)).collect();
    f.c.submit(&id, &untrusted, &results).unwrap();
    f.c.settle().unwrap();
    let before = f.c.status().health;
    assert!(
        before.pending_checks > 0,
        "held results wait as checks: {before:?}"
    );
    assert_eq!(before.replica_cpu_us, 0, "{before:?}");
    f.clock.advance(Duration::from_secs(120));
    let waited = f.c.status().health;
    assert_eq!(waited.pending_checks, before.pending_checks);
    assert!(
        waited.oldest_check >= Duration::from_secs(120),
        "{waited:?}"
    );
    drive_mixed(
        &f.c,
        &[(verifier, Answer::Honest), (untrusted, Answer::Honest)],
    );
    let done = f.c.status().health;
    assert_eq!(
        (
            done.pending_checks,
            done.oldest_check,
            done.blocked_contributors
        ),
        (0, Duration::ZERO, 0),
        "{done:?}"
    );
    assert!(
        done.replica_cpu_us > 0 && done.overhead() > 0.0 && done.overhead() < 1.0,
        "{done:?}"
    );
}

/// A fixture whose slow round searches get a backup lease after 4 mean search times, with
/// spot checks drawn at probability `spot_floor`, and an earned volunteer `vol` (owner "vol")
/// that answered the root search in 1 s and holds deviate 2 4's searches.
fn volunteer_holding_deviate24(spot_floor: f64) -> (Fixture, Identity, Uuid, Vec<Job>) {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            trust: TrustRules {
                spot_floor,
                ..TrustRules::default()
            },
            trust_seed: Some(7),
            seeded_ids: Some(7),
            lookahead: 0,
            backup_after: 4,
            ..without_speculation()
        },
    );
    let id = identity();
    let vol = f.c.register_with(&id, "v", 64, Some("vol"), false).unwrap();
    long_record(&f.c, "vol", 1 << 40);
    let held = hold_deviate24(&f, &id, &vol);
    (f, id, vol, held)
}

/// A spot check of an earned result stays open until a word other than the checked owner's
/// agrees. A worker that still holds a lease of the job from before it became a check (here a
/// backup lease, on a new credential of another owner, untrusted) answers alike after the check
/// was drawn: its answer is taken, and the check is still waiting for a trust root.
#[test]
fn a_backup_lessees_answer_does_not_close_a_spot_check() {
    let (f, id, vol, held) = volunteer_holding_deviate24(1.0);
    let u =
        f.c.register_with(&id, "u", 1, Some("mallory"), false)
            .unwrap();
    f.clock.advance(Duration::from_secs(5));
    let backup = f.c.lease(&id, &u, 1).unwrap();
    assert_eq!(backup.len(), 1);
    let job = backup[0].id;
    let mine = held
        .iter()
        .find(|j| j.id == job)
        .expect("a backup of vol's search");
    let need = |f: &Fixture| {
        f.c.jobs()
            .jobs
            .get(&job)
            .and_then(|j| j.need.as_ref().map(|n| (n.min, n.kind)))
    };
    // The volunteer answers: applied at once, and the coin (floor 1) draws a spot check.
    let r = mock_result(mine);
    assert_eq!(f.c.submit(&id, &vol, &[r]).unwrap(), vec![Ack::Accepted]);
    assert_eq!(need(&f), Some((Standing::Given, CheckKind::Spot)));
    // The backup lessee answers alike: taken, and the check still waits.
    assert_eq!(f.c.submit(&id, &u, &[r]).unwrap(), vec![Ack::Accepted]);
    assert_eq!(
        need(&f),
        Some((Standing::Given, CheckKind::Spot)),
        "an untrusted credential closed the spot check of an earned result"
    );
}

/// A check of a result the book uses keeps a finished build running only while a registered
/// worker may take it, as leasing decides (`Need::admits`: the checked owner is one voice, so
/// its own trusted credential may not check it): a spot check of an earned volunteer's result,
/// with no trust root registered but one of the volunteer's own, is not pending; a trusted
/// worker of another owner registering makes it pending again.
#[test]
fn a_check_only_the_checked_owners_workers_could_take_is_not_pending() {
    let rules = TrustRules {
        spot_floor: 1.0,
        ..TrustRules::default()
    };
    let (f, id) = fixture_without_verifier(rules);
    let vol = f.c.register_with(&id, "v", 1, Some("vol"), false).unwrap();
    long_record(&f.c, "vol", 1 << 40);
    // The volunteer's other credential, trusted by the operator: a trust root of its owner.
    let own =
        f.c.register_as(&id, "t", 1, Some(("t", "vol")), true)
            .unwrap();
    // The volunteer's answer to a search, applied at once; the coin (floor 1) draws a spot
    // check, whose job waits in the queue (no growth program runs: no decisive core).
    let key = LeafRequest {
        board: Board::start(),
        level: 2,
        excluded: 1,
    };
    let job = Job {
        id: Uuid::from_u128(1),
        board: key.board,
        excluded: key.excluded,
        level: key.level,
        attempt: 0,
    };
    let job_id = {
        let mut g = f.c.jobs();
        let (mut batch, mut touched) = (Batch::default(), Vec::new());
        let taken = g
            .trust
            .take(
                &rules,
                &mut batch,
                &mut touched,
                (&vol, "vol"),
                (key, &mock_result(&job)),
                1,
            )
            .unwrap();
        assert!(taken.apply.is_some(), "an earned result is applied at once");
        let need = taken.need.expect("the coin (floor 1) drew a spot check");
        assert_eq!((need.min, need.kind), (Standing::Given, CheckKind::Spot));
        assert!(
            !need.admits(g.trust.standing_of("t", &rules), "t", "vol"),
            "one owner, one voice"
        );
        g.add_check(key, need, f.c.now());
        assert_eq!(g.trust.core_unconfirmed(), 0);
        assert!(
            !g.checks_pending(&rules),
            "no registered worker may take the spot check of vol's result"
        );
        g.job_of(&key).expect("the check's job")
    };
    // The check is not leased to the volunteer's trusted credential either.
    let taken = f.c.lease(&id, &own, 1).unwrap();
    assert!(taken.iter().all(|j| j.id != job_id), "{taken:?}");
    // A trust root of another owner registers: the check is pending again, and it takes it.
    let op = f.c.register_with(&id, "op", 1, Some("op"), true).unwrap();
    assert!(f.c.jobs().checks_pending(&rules));
    let leased = f.c.lease(&id, &op, 1).unwrap();
    assert_eq!(leased.iter().map(|j| j.id).collect::<Vec<_>>(), [job_id]);
}

/// A backup lease of a long round search goes to a worker whose replica could be a word of its
/// own should an answer turn the job into a check: never to another credential (below a trust
/// root) of an owner holding a lease of it, whose agreement closes no spot check of its
/// owner's answer and validates none. A trusted credential of that owner (its agreement
/// settles) and an earned worker of another owner get one.
#[test]
fn a_long_search_gets_no_backup_lease_on_its_owners_other_credential() {
    let (f, id, vol, held) = volunteer_holding_deviate24(0.0);
    let sibling =
        f.c.register_as(&id, "v2", 1, Some(("v2", "vol")), false)
            .unwrap();
    long_record(&f.c, "v2", 1 << 40);
    // Past 4 mean search times (1 s), vol still heard from: a slow search, not a silent one.
    f.clock.advance(Duration::from_secs(5));
    let ids: Vec<Uuid> = held.iter().map(|j| j.id).collect();
    f.c.heartbeat(&id, &vol, &ids).unwrap();
    assert_eq!(
        f.c.lease(&id, &sibling, 1).unwrap(),
        [],
        "a backup of vol's search on vol's other credential"
    );
    assert_eq!(f.c.counters().backup_leased, 0);
    let trusted =
        f.c.register_as(&id, "t", 1, Some(("t", "vol")), true)
            .unwrap();
    let peer = f.c.register_with(&id, "p", 1, Some("peer"), false).unwrap();
    long_record(&f.c, "peer", 1 << 40);
    // The pass has one search (the start position's moves are one up to symmetry): the
    // trusted credential takes the backup lease and hands it back, then the peer takes it.
    assert_eq!(ids.len(), 1);
    for w in [trusted, peer] {
        let backup = f.c.lease(&id, &w, 1).unwrap();
        assert_eq!(backup.len(), 1);
        assert_eq!(backup[0].id, ids[0]);
        assert_eq!(f.c.release_leases(&id, &w, &ids).unwrap(), 1);
    }
    assert_eq!(f.c.counters().backup_leased, 2);
}

/// The same for a round search whose lessee fell silent (it outranks speculative work): a
/// credential of the silent lessee's owner gets speculative work instead, a worker of another
/// owner the backup lease.
#[test]
fn a_silent_lessees_search_gets_no_backup_lease_on_its_owners_other_credential() {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            backup_after: 4,
            ..speculating()
        },
    );
    f.c.set_predictor(Box::new(crate::sim::SimPredictor(
        crate::sim::Guess::Perfect,
    )));
    let id = identity();
    let vol = f.c.register_with(&id, "v", 1, Some("vol"), false).unwrap();
    long_record(&f.c, "vol", 1 << 40);
    let sibling =
        f.c.register_as(&id, "v2", 2, Some(("v2", "vol")), false)
            .unwrap();
    long_record(&f.c, "v2", 1 << 40);
    let peer = f.c.register_with(&id, "p", 1, Some("peer"), false).unwrap();
    long_record(&f.c, "peer", 1 << 40);
    f.c.start(deviate24()).unwrap();
    let round = f.c.lease(&id, &vol, 1).unwrap();
    assert_eq!(round.len(), 1);
    assert_eq!(f.c.jobs().queued_round(), 0, "vol holds the round's search");
    // vol falls silent for more than two heartbeat intervals; the others are heard from.
    f.clock.advance(Duration::from_secs(36));
    let first = f.c.lease(&id, &sibling, 1).unwrap();
    assert_eq!(first.len(), 1);
    assert_ne!(
        first[0].id, round[0].id,
        "a backup of vol's search on vol's other credential"
    );
    let class = f.c.jobs().jobs.get(&first[0].id).map(|e| e.class);
    assert_eq!(class, Some(JobClass::Speculative));
    let rescue = f.c.lease(&id, &peer, 1).unwrap();
    assert_eq!(rescue.len(), 1);
    assert_eq!((rescue[0].id, rescue[0].attempt), (round[0].id, 1));
    assert_eq!(f.c.counters().backup_leased, 1);
}
