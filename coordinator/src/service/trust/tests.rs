//! The rules' decisions and the ledger's write schedule, on hand-made replicas.

use super::core_watch::CoreWatch;
use super::rules::{Decision, Replica, coin, decide, spot_probability};
use super::*;
use crate::store::TrustRecord;
use bookfarm_engine::Move;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::time::Duration;

fn res(score: i32) -> LeafResult {
    LeafResult {
        mv: Move::None,
        score,
        depth: 1,
        selectivity: 5,
        exact: false,
        nodes: 7,
        elapsed: Duration::ZERO,
    }
}

/// [`decide`] without a verifier.
fn decide_t(r: &[Replica], a: Option<&LeafResult>, spot: bool) -> Decision {
    decide(r, a, spot, false)
}

/// A replica; its search time depends on the contributor's name (machines differ).
fn rep(c: &str, owner: &str, s: Standing, score: i32) -> Replica {
    Replica {
        contributor: c.into(),
        owner: owner.into(),
        standing: s,
        result: LeafResult {
            elapsed: Duration::from_micros(c.len() as u64),
            ..res(score)
        },
    }
}

#[test]
fn untrusted_results_wait_for_a_trusted_source() {
    use Standing::*;
    let one = [rep("u1", "a", Untrusted, 4)];
    let d = decide_t(&one, None, true);
    assert!(d.apply.is_none());
    // A trust root validates it first (its agreement lengthens the streak that earns trust);
    // an earned worker of another owner once none took it in time (relaxable).
    let mut need = d.need.clone().unwrap();
    assert_eq!((need.min, need.kind), (Given, CheckKind::Validation));
    assert!(need.relaxable());
    assert!(need.admits(Given, "t", "op") && need.admits(Root, VERIFIER, ""));
    assert!(
        !need.admits(Earned, "e", "b"),
        "earned peers only once relaxed"
    );
    need.relax();
    assert_eq!(need.min, Earned);
    assert!(need.admits(Earned, "e", "b") && !need.admits(Earned, "e2", "a"));
    assert!(!need.admits(Untrusted, "u2", "b"), "never an untrusted one");
    // Untrusted workers of other owners never validate each other.
    let two = [rep("u1", "a", Untrusted, 4), rep("u2", "b", Untrusted, 4)];
    let d = decide_t(&two, None, false);
    assert!(d.apply.is_none() && d.need.is_some());
    assert_eq!(d.need.unwrap().owners, ["a", "b"]);
    // An earned worker of another owner validates (the result is provisional: no trust root
    // agreed, so nobody's streak grows); its word is spot-checked like its own results.
    let e = [rep("u1", "a", Untrusted, 4), rep("e", "b", Earned, 4)];
    let d = decide_t(&e, None, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert!(d.need.is_none() && d.confirmed.is_empty());
    assert_eq!(d.sources, ["u1", "e"]);
    let d = decide_t(&e, None, true);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert_eq!(d.need.unwrap().kind, CheckKind::Spot);
    // A trust root validates and confirms (streak).
    let g = [rep("u1", "a", Untrusted, 4), rep("t", "op", Given, 4)];
    let d = decide_t(&g, None, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert_eq!(d.confirmed, ["u1"]);
    // The same owner under another name adds nothing.
    let same = [rep("u1", "a", Untrusted, 4), rep("e2", "a", Earned, 4)];
    let d = decide_t(&same, None, false);
    assert!(d.apply.is_some(), "an earned replica weighs 1 on its own");
    let both_a = [rep("u1", "a", Untrusted, 4), rep("u2", "a", Untrusted, 4)];
    assert!(decide_t(&both_a, None, false).apply.is_none());
}

#[test]
fn earned_results_are_applied_at_once_whatever_the_program_and_spot_checked_by_a_trust_root() {
    use Standing::*;
    let e = [rep("e", "a", Earned, 4)];
    // No coin: applied, closed, provisional (no confirmation).
    let d = decide_t(&e, None, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert!(d.need.is_none() && d.confirmed.is_empty());
    // The coin fell: applied, and checked by a trust root (with or without a verifier); an
    // earned worker of another owner may take it once no trust root did (relaxable).
    for verifier in [false, true] {
        let d = decide(&e, None, true, verifier);
        assert_eq!(d.apply.map(|r| r.score), Some(4));
        let need = d.need.unwrap();
        assert_eq!((need.min, need.kind), (Given, CheckKind::Spot));
        assert!(need.relaxable());
        assert!(need.admits(Given, "t", "op") && need.admits(Root, VERIFIER, ""));
        assert!(
            !need.admits(Earned, "e2", "b"),
            "earned peers only once relaxed"
        );
        assert!(!need.admits(Given, "t2", "a"), "never the same owner");
    }
    // An earned peer of another owner agrees: closed, still provisional (no streak).
    let ee = [rep("e", "a", Earned, 4), rep("e2", "b", Earned, 4)];
    let d = decide_t(&ee, Some(&ee[0].result), false);
    assert!(d.apply.is_none() && d.need.is_none() && d.confirmed.is_empty());
    assert_eq!(d.sources, ["e", "e2"]);
    // It disagrees: a trust root settles.
    let ex = [rep("e", "a", Earned, 4), rep("e2", "b", Earned, 6)];
    let d = decide_t(&ex, Some(&ex[0].result), false);
    let need = d.need.unwrap();
    assert_eq!((need.min, need.kind), (Given, CheckKind::Settle));
    assert!(!need.relaxable());
    // A trust root agrees: confirmed.
    let eg = [rep("e", "a", Earned, 4), rep("t", "op", Given, 4)];
    let d = decide_t(&eg, Some(&eg[0].result), false);
    assert!(d.apply.is_none() && d.need.is_none());
    assert_eq!(d.confirmed, ["e"]);
}

#[test]
fn trusted_results_apply_at_once_and_mismatches_go_to_the_root() {
    use Standing::*;
    let t = [rep("t", "op", Given, 4)];
    let d = decide_t(&t, None, true);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert!(
        d.need.is_none(),
        "trusted workers are spot-checked by the verifier only"
    );
    let d = decide(&t, None, true, true);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    let need = d.need.unwrap();
    assert_eq!((need.min, need.kind), (Root, CheckKind::Spot));
    assert!(!need.relaxable());
    // The trusted worker settles a mismatch with an untrusted one.
    let m = [rep("u", "a", Untrusted, -6), rep("t", "op", Given, 4)];
    let d = decide_t(&m, None, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert_eq!(d.losers, vec!["u".to_string()]);
    // With a verifier, it settles instead (a broken trusted machine must not make an
    // honest worker lose).
    let d = decide(&m, None, false, true);
    assert!(d.apply.is_none() && d.losers.is_empty());
    assert_eq!(d.need.unwrap().min, Root);
    // Two trusted workers that disagree wait for the coordinator, which wins.
    let tt = [rep("t1", "op", Given, 4), rep("t2", "op2", Given, 6)];
    let d = decide_t(&tt, Some(&tt[0].result), false);
    assert_eq!(d.need.as_ref().unwrap().min, Root);
    assert!(d.apply.is_none());
    let mut ttr = tt.to_vec();
    ttr.push(rep(VERIFIER, "", Root, 6));
    let d = decide_t(&ttr, Some(&tt[0].result), false);
    assert_eq!(
        d.apply.map(|r| r.score),
        Some(6),
        "the applied result is replaced"
    );
    assert_eq!(d.losers, vec!["t1".to_string()]);
    // Earned against untrusted: the root must settle it.
    let eu = [rep("e", "a", Earned, 4), rep("u", "b", Untrusted, 6)];
    assert_eq!(decide_t(&eu, None, false).need.unwrap().min, Given);
}

#[test]
fn spot_checks_fall_with_the_record_and_catches_raise_the_bar() {
    let r = TrustRules::default();
    assert_eq!(spot_probability(0, &r), 1.0);
    assert!((spot_probability(9, &r) - 0.1).abs() < 1e-12);
    assert_eq!(spot_probability(1_000_000, &r), r.spot_floor);
    // Each catch of an owner doubles the streak its credentials need.
    let n = r.earn_after;
    assert_eq!(required_streak(&r, 0), n);
    assert_eq!(required_streak(&r, 1), 2 * n);
    assert_eq!(required_streak(&r, 3), 8 * n);
    assert_eq!(required_streak(&r, 64), n << 20, "bounded");
    let rec = TrustRecord {
        streak: 2 * n - 1,
        ..TrustRecord::default()
    };
    assert_eq!(standing(&rec, &r, 0), Standing::Earned);
    assert_eq!(standing(&rec, &r, 1), Standing::Untrusted);
    let mut records = vec![
        (
            "a1".to_string(),
            TrustRecord {
                owner: "a".into(),
                invalid: 1,
                ..TrustRecord::default()
            },
        ),
        (
            "a2".to_string(),
            TrustRecord {
                owner: "a".into(),
                invalid: 2,
                streak: 8 * n - 1,
                ..TrustRecord::default()
            },
        ),
    ];
    records.push((
        "b".to_string(),
        TrustRecord {
            owner: "b".into(),
            streak: 8 * n - 1,
            ..TrustRecord::default()
        },
    ));
    let t = TrustState::load(records, Vec::new(), std::iter::empty(), 0);
    assert_eq!(t.catches.get("a"), Some(&3));
    // a2's streak of 8N − 1 does not reach 8N: its owner's three catches count against it.
    assert_eq!(t.standing_of("a2", &r), Standing::Untrusted);
    assert_eq!(t.standing_of("b", &r), Standing::Earned);
    let need = Need {
        min: Standing::Earned,
        kind: CheckKind::Validation,
        answered: vec!["u".into()],
        owners: vec!["a".into()],
    };
    assert!(!need.admits(Standing::Earned, "e", "a"), "same owner");
    assert!(!need.admits(Standing::Untrusted, "x", "b"));
    assert!(need.admits(Standing::Earned, "e", "b"));
    assert!(need.admits(Standing::Root, VERIFIER, ""));
}

/// The spot-check coin is keyed: the same job id falls differently under another key, so a
/// worker that sees its job ids cannot tell which answers will be checked; under one key it
/// is uniform.
#[test]
fn the_spot_check_coin_is_keyed_and_uniform() {
    let ids: Vec<uuid::Uuid> = (0..4000u128).map(uuid::Uuid::from_u128).collect();
    let under = |key: u64| -> Vec<bool> { ids.iter().map(|id| coin(id, key) < 0.1).collect() };
    let (a, b) = (under(1), under(2));
    let hits = a.iter().filter(|x| **x).count();
    assert!((320..480).contains(&hits), "{hits} of 4000 below 0.1");
    let both = a.iter().zip(&b).filter(|(x, y)| **x && **y).count();
    // Independent draws: about 1 % of the ids in both, far from the 10 % of equal keys.
    assert!(both < 80, "{both} ids checked under both keys");
    assert_eq!(under(1), a, "deterministic under one key");
}

fn req(i: u64) -> LeafRequest {
    LeafRequest {
        board: bookfarm_engine::Board::start(),
        level: 2,
        excluded: 1 << i,
    }
}

/// `who`'s answer `score` to `req(i)`, under the job id `job`, taken by the ledger `t`.
fn answer_of(
    t: &mut TrustState,
    rules: &TrustRules,
    who: &str,
    (job, i): (u128, u64),
    score: i32,
) -> Taken {
    let r = bookfarm_proto::domain::JobResult {
        job_id: uuid::Uuid::from_u128(job),
        leaf: res(score),
    };
    let (mut batch, mut touched) = (crate::store::Batch::default(), Vec::new());
    t.take(
        rules,
        &mut batch,
        &mut touched,
        (&uuid::Uuid::nil(), who),
        (req(i), &r),
        1,
    )
    .unwrap()
}

fn core_of(keys: &[bookfarm_book::decisive::CoreKey]) -> bookfarm_book::decisive::CoreSet {
    bookfarm_book::decisive::CoreSet {
        value: Some(0),
        leaves: keys
            .iter()
            .map(|k| bookfarm_book::decisive::CoreLeaf {
                board: k.board,
                level: k.level,
                leaf: bookfarm_book::Link::new(k.score, Move::from_code(k.mv).unwrap()),
            })
            .collect(),
        positions: keys.len(),
    }
}

/// A provisional result in the core is checked once it stayed there while `settle` results
/// were applied, or at once when the build is done; one that left the core is not; a
/// confirmed or dropped one leaves the watch.
#[test]
fn core_checks_wait_for_results_that_stay_in_the_core() {
    use bookfarm_book::decisive::CoreKey;
    let mut w = CoreWatch::default();
    let key = |i: u64, score: i32| CoreKey::of_result(&req(i), &res(score));
    // Two provisional results of one position answering alike share a key (both checked).
    w.add(req(1), key(1, 4));
    w.add(req(2), key(2, 6));
    w.add(req(3), key(3, 6));
    assert_eq!(key(2, 6), key(3, 6));
    assert_eq!(w.provisional(), 3);
    let core = core_of(&[key(1, 4), key(2, 6)]);
    assert!(w.changed(&core, 10, false).is_empty(), "just entered");
    assert_eq!(w.unconfirmed(), 3);
    for _ in 0..9 {
        w.tick();
    }
    assert!(w.changed(&core, 10, false).is_empty(), "9 results later");
    w.tick();
    // req(1) left the core in this snapshot: it is not checked.
    let core2 = core_of(&[key(2, 6)]);
    let due = w.changed(&core2, 10, false);
    assert_eq!(due, vec![req(2), req(3)]);
    assert!(w.changed(&core2, 10, false).is_empty(), "checked once");
    assert_eq!(w.unconfirmed(), 2);
    // Back in the core: its clock starts again; when the build is done it is checked at once.
    assert!(w.changed(&core, 10, false).is_empty());
    assert_eq!(w.changed(&core, 10, true), vec![req(1)]);
    // Confirmed or dropped: out.
    w.remove(&req(1));
    w.remove(&req(2));
    w.remove(&req(3));
    assert_eq!((w.provisional(), w.unconfirmed()), (0, 0));
    assert!(w.changed(&core, 0, true).is_empty());
}

#[test]
fn decisions_are_written_at_once_and_counts_once_per_interval() {
    let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
    t.enroll("w", "alice", false, false);
    let names =
        |v: Vec<(String, TrustRecord)>| -> Vec<String> { v.into_iter().map(|(n, _)| n).collect() };
    let w = vec!["w".to_string()];
    // Never written: written at once.
    assert_eq!(names(t.records_to_write(&w, 10_000, 1_000)), ["w"]);
    // Counts: the first change is written (no count was written for an interval), the next
    // ones (counts, a longer streak) wait for the interval.
    t.records.get_mut("w").unwrap().replicas += 1;
    assert_eq!(names(t.records_to_write(&w, 10_000, 1_000)), ["w"]);
    let r = t.records.get_mut("w").unwrap();
    r.results += 1;
    r.streak += 1;
    assert!(t.records_to_write(&w, 10_500, 1_000).is_empty());
    assert!(t.unwritten.contains("w"));
    // An invalid result is a decision: written at once, with the counts.
    t.records.get_mut("w").unwrap().invalid += 1;
    let out = t.records_to_write(&w, 10_600, 1_000);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].1.results, out[0].1.invalid), (1, 1));
    assert!(t.unwritten.is_empty());
    // Counts again; a streak reset is a decision.
    t.records.get_mut("w").unwrap().nodes += 5;
    assert!(t.records_to_write(&w, 10_700, 1_000).is_empty());
    t.records.get_mut("w").unwrap().streak = 0;
    assert_eq!(names(t.records_to_write(&w, 10_800, 1_000)), ["w"]);
    // Counts of another contributor, written once the interval is over (the interval
    // started at the first count-only write, 10,000).
    t.enroll("v", "bob", true, false);
    let v = vec!["v".to_string()];
    assert_eq!(names(t.records_to_write(&v, 10_900, 1_000)), ["v"]);
    t.records.get_mut("v").unwrap().results += 1;
    assert!(t.records_to_write(&v, 10_950, 1_000).is_empty());
    assert_eq!(names(t.records_to_write(&v, 11_000, 1_000)), ["v"]);
    // A flush takes what is left.
    t.records.get_mut("v").unwrap().results += 1;
    t.records.get_mut("w").unwrap().cpu_us += 1;
    assert!(t.records_to_write(&v, 11_100, 1_000).is_empty());
    assert!(t.records_to_write(&w, 11_100, 1_000).is_empty());
    assert_eq!(names(t.take_unwritten()), ["v", "w"]);
    assert!(t.take_unwritten().is_empty());
    assert_eq!(t.written.get("v"), t.records.get("v"));
    // A zero interval writes every change at once.
    t.records.get_mut("v").unwrap().results += 1;
    assert_eq!(names(t.records_to_write(&v, 11_200, 0)), ["v"]);
}

#[test]
fn a_caught_contributor_loses_the_credit_of_what_was_dropped_on_its_word() {
    let rules = TrustRules::default();
    let mine = LeafResult {
        nodes: 40,
        elapsed: Duration::from_micros(900),
        ..res(3)
    };
    let theirs = LeafResult {
        nodes: 50,
        ..res(5)
    };
    // Two applied results: one on the word of "w" alone, one that "w" and an earned
    // contributor of another owner both vouch for.
    let results = vec![
        (req(1), vec!["w".to_string()], mine),
        (req(2), vec!["w".to_string(), "e".to_string()], theirs),
    ];
    let mut t = TrustState::load(Vec::new(), Vec::new(), results.into_iter(), 0);
    t.enroll("w", "alice", false, false);
    t.enroll("e", "bob", false, false);
    t.records.get_mut("e").unwrap().streak = rules.earn_after;
    let w = t.records.get_mut("w").unwrap();
    (w.results, w.nodes, w.cpu_us) = (2, 90, 900);
    let mut batch = crate::store::Batch::default();
    let caught = t.catch(&rules, &mut batch, &mut Vec::new(), "w").unwrap();
    assert_eq!(caught.dropped, vec![req(1)]);
    // The dropped result's credit is taken back; the one another owner still vouches for stays.
    let w = &t.records["w"];
    assert_eq!((w.results, w.nodes, w.cpu_us), (1, 50, 0));
    assert_eq!(t.sources[&req(2)].by, vec!["e".to_string()]);
}

/// Two liars of different owners tell the same lie on one request (the lying workers of the
/// end-to-end trust test do): the untrusted one's held lie is validated by the earned one, and
/// both are credited with it. Once the lie is dropped, whichever of them is caught first,
/// neither keeps that credit.
#[test]
fn a_colluded_lie_leaves_no_credit_once_it_is_dropped() {
    let rules = TrustRules::default();
    for untrusted_caught_first in [true, false] {
        let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
        t.enroll("always", "a", false, false);
        t.enroll("ten", "t", false, false);
        t.records.get_mut("ten").unwrap().streak = rules.earn_after;
        let (mut batch, mut touched) = (crate::store::Batch::default(), Vec::new());
        let worker = uuid::Uuid::nil();
        let lie = LeafResult {
            nodes: 40,
            elapsed: Duration::from_micros(900),
            ..res(-6)
        };
        for (i, who) in ["always", "ten"].into_iter().enumerate() {
            let r = bookfarm_proto::domain::JobResult {
                job_id: uuid::Uuid::from_u128(i as u128 + 1),
                leaf: lie,
            };
            t.take(
                &rules,
                &mut batch,
                &mut touched,
                (&worker, who),
                (req(1), &r),
                1,
            )
            .unwrap();
        }
        assert_eq!(t.sources[&req(1)].by, ["always", "ten"]);
        assert_eq!(
            (t.records["always"].results, t.records["ten"].results),
            (1, 1)
        );
        // Each is caught (on other requests, by a trust root), in either order.
        let order = if untrusted_caught_first {
            ["always", "ten"]
        } else {
            ["ten", "always"]
        };
        let mut dropped = Vec::new();
        for who in order {
            dropped.extend(
                t.catch(&rules, &mut batch, &mut touched, who)
                    .unwrap()
                    .dropped,
            );
        }
        assert_eq!(dropped, [req(1)], "the lie leaves the book");
        for who in ["always", "ten"] {
            let r = &t.records[who];
            assert_eq!(
                (r.results, r.nodes, r.cpu_us),
                (0, 0, 0),
                "{who} (always caught first: {untrusted_caught_first}): no credit for a \
                 dropped lie"
            );
        }
    }
}

/// A core check stays open until a trust root answers: an earned replica of another owner that
/// was already under way when the check opened agrees, and the result is still provisional.
#[test]
fn a_core_check_is_settled_by_a_trust_root_only() {
    use bookfarm_book::decisive::CoreKey;
    let rules = TrustRules::default();
    let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
    t.enroll("a", "alice", false, false);
    t.enroll("b", "bob", false, false);
    t.enroll("g", "operator", true, false);
    for c in ["a", "b"] {
        t.records.get_mut(c).unwrap().streak = rules.earn_after;
    }
    let (mut batch, mut touched) = (crate::store::Batch::default(), Vec::new());
    let worker = uuid::Uuid::nil();
    let answer = |t: &mut TrustState,
                  batch: &mut crate::store::Batch,
                  touched: &mut Vec<String>,
                  who: &str| {
        let r = bookfarm_proto::domain::JobResult {
            job_id: uuid::Uuid::now_v7(),
            leaf: res(4),
        };
        t.take(&rules, batch, touched, (&worker, who), (req(1), &r), 1)
            .unwrap()
    };
    let first = answer(&mut t, &mut batch, &mut touched, "a");
    assert!(first.apply.is_some(), "an earned result is applied at once");
    assert!(t.watch.is_provisional(&req(1)));
    // The result enters the final core: a core check opens, for a trust root.
    let core = core_of(&[CoreKey::of_result(&req(1), &res(4))]);
    let checks = t
        .core_changed(&rules, &mut batch, &core, true, |_| Some(res(4)))
        .unwrap();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].1.min, Standing::Given);
    // An earned replica agrees: still provisional, so the check stays open for a root.
    let earned = answer(&mut t, &mut batch, &mut touched, "b");
    let need = earned.need.expect("the core check stays open");
    assert_eq!(need.min, Standing::Given);
    assert!(t.watch.in_core_check(&req(1)));
    // A trust root agrees: confirmed, the case closes and the core has nothing unconfirmed.
    let root = answer(&mut t, &mut batch, &mut touched, "g");
    assert!(root.need.is_none());
    assert!(!t.watch.is_provisional(&req(1)));
    assert_eq!(t.core_unconfirmed(), 0);
}

/// Under [`StreakRule::Results`] a result applied on an earned contributor's own word with no
/// check drawn lengthens its streak (BOINC's consecutive valid results), so its spot checks fall
/// with its results (about ln n in n) rather than with its checks (about √(2n)); a check still
/// counts once, when a trust root confirms it, and earning is unchanged (only confirmed results
/// count while a credential is untrusted).
#[test]
fn the_results_streak_rule_lowers_spot_checks_with_every_unchecked_result() {
    let run = |streak: StreakRule| -> (u64, u64) {
        let rules = TrustRules {
            spot_floor: 0.0,
            streak,
            ..TrustRules::default()
        };
        let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
        t.enroll("e", "alice", false, false);
        t.enroll("g", "operator", true, false);
        t.records.get_mut("e").unwrap().streak = rules.earn_after;
        let (mut batch, mut touched) = (crate::store::Batch::default(), Vec::new());
        let worker = uuid::Uuid::nil();
        let mut checks = 0;
        for i in 0..300u64 {
            let key = LeafRequest {
                board: bookfarm_engine::Board::start(),
                level: 2,
                excluded: i,
            };
            let r = bookfarm_proto::domain::JobResult {
                job_id: uuid::Uuid::from_u128(u128::from(i) + 1),
                leaf: res(4),
            };
            let before = t.records["e"].streak;
            let taken = t
                .take(
                    &rules,
                    &mut batch,
                    &mut touched,
                    (&worker, "e"),
                    (key, &r),
                    1,
                )
                .unwrap();
            assert!(taken.apply.is_some(), "earned: applied at once");
            if taken.need.is_none() {
                let grew = t.records["e"].streak - before;
                assert_eq!(grew, u64::from(streak == StreakRule::Results));
                continue;
            }
            // Drawn: the streak waits for the trust root, which confirms it once.
            assert_eq!(t.records["e"].streak, before);
            checks += 1;
            let check = bookfarm_proto::domain::JobResult {
                job_id: uuid::Uuid::from_u128((1 << 64) + u128::from(i)),
                leaf: res(4),
            };
            let done = t
                .take(
                    &rules,
                    &mut batch,
                    &mut touched,
                    (&worker, "g"),
                    (key, &check),
                    1,
                )
                .unwrap();
            assert!(done.need.is_none());
            assert_eq!(t.records["e"].streak, before + 1);
        }
        (checks, t.records["e"].streak)
    };
    let n = TrustRules::default().earn_after;
    let (confirmed, streak_c) = run(StreakRule::Confirmed);
    let (results, streak_r) = run(StreakRule::Results);
    // From an earned streak of N = 3: √(2·300 + 3²) − 3 ≈ 22 checks against ln(304 / 4) ≈ 4.
    assert!((12..=36).contains(&confirmed), "{confirmed} checks");
    assert!(results <= 10, "{results} checks");
    assert!(
        3 * results < confirmed,
        "{results} against {confirmed} checks"
    );
    assert_eq!(streak_c, n + confirmed);
    assert_eq!(streak_r, n + 300);
}

/// A credential still earning trust may hold no more unconfirmed results (answered and waiting
/// for a trust root, or leased) than the confirmations it still needs: each one is searched
/// again, so more would cost replicas without bringing its trust closer. Confirmations open
/// room again, a catch (streak reset, required streak doubled, window halved) sets the need
/// anew, and an earned, trusted or unknown contributor has no such bound.
#[test]
fn a_credential_still_earning_holds_no_more_unconfirmed_results_than_it_needs() {
    // The pure rule.
    assert_eq!(rules::earning_room(3, 0, 0, 3), 3);
    assert_eq!(rules::earning_room(3, 1, 1, 3), 1);
    assert_eq!(rules::earning_room(3, 0, 3, 3), 0);
    assert_eq!(rules::earning_room(3, 2, 5, 3), 0, "never below zero");
    assert_eq!(
        rules::earning_room(6, 0, 0, 1),
        1,
        "after a catch: one at a time"
    );
    assert_eq!(
        rules::earning_room(6, 0, 2, 1),
        0,
        "after a catch: held ones first"
    );
    let r3 = TrustRules {
        earn_after: 3,
        ..TrustRules::default()
    };
    let windows: Vec<u64> = (0..4).map(|c| rules::earning_window(&r3, c)).collect();
    assert_eq!(windows, [3, 1, 1, 1], "N, halved per catch, at least 1");
    let r8 = TrustRules {
        earn_after: 8,
        ..TrustRules::default()
    };
    assert_eq!(rules::earning_window(&r8, 2), 2);
    assert_eq!(rules::earning_window(&r8, 64), 1, "bounded");
    // The ledger: answered results count while their cases are open, leases as told.
    let rules = TrustRules::default();
    let n = usize::try_from(rules.earn_after).unwrap();
    let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
    t.enroll("u", "alice", false, false);
    t.enroll("g", "operator", true, false);
    assert_eq!(t.earning_room("u", &rules, || 0), Some(n));
    assert_eq!(
        t.earning_room("u", &rules, || 1),
        Some(n - 1),
        "a lease counts"
    );
    assert_eq!(t.earning_room("g", &rules, || 0), None, "trusted: no bound");
    assert_eq!(
        t.earning_room("nobody", &rules, || 0),
        None,
        "unknown: no bound"
    );
    // One job id per request and answerer (the spot coin is keyed by it).
    let answer = |t: &mut TrustState, who: &str, i: u64, score: i32| {
        let job = u128::from(i) + (u128::from(who.as_bytes()[0]) << 64);
        answer_of(t, &rules, who, (job, i), score)
    };
    for i in 0..3 {
        let held = answer(&mut t, "u", i, 4);
        assert!(held.apply.is_none(), "untrusted: held");
    }
    assert_eq!(
        t.earning_room("u", &rules, || 0),
        Some(0),
        "3 held of 3 needed"
    );
    // A trust root confirms one: the need and the held results both fall by one.
    assert!(answer(&mut t, "g", 0, 4).apply.is_some());
    assert_eq!(t.records["u"].streak, 1);
    assert_eq!(
        t.earning_room("u", &rules, || 0),
        Some(0),
        "2 held, 2 needed"
    );
    assert!(answer(&mut t, "g", 1, 4).apply.is_some());
    assert_eq!(
        t.earning_room("u", &rules, || 0),
        Some(0),
        "1 held, 1 needed"
    );
    // A wrong answer, caught by the root: the streak resets and the owner's catch doubles N;
    // the catch restarts its other held result (req(2)) as ordinary work.
    assert!(answer(&mut t, "u", 3, 9).apply.is_none());
    assert_eq!(
        t.earning_room("u", &rules, || 0),
        Some(0),
        "2 held, 1 needed"
    );
    let settled = answer(&mut t, "g", 3, 4);
    assert_eq!(settled.losers, ["u"]);
    let caught = t
        .catch(
            &rules,
            &mut crate::store::Batch::default(),
            &mut Vec::new(),
            "u",
        )
        .unwrap();
    assert_eq!(caught.restarted, [req(2)]);
    assert_eq!(t.records["u"].streak, 0);
    assert_eq!(
        t.earning_room("u", &rules, || 0),
        Some(usize::try_from(rules::earning_window(&rules, 1)).unwrap()),
        "needs 2N now, within the halved window"
    );
    // 2N confirmed results later: earned, and unbounded.
    for i in 10..(10 + 2 * n as u64) {
        assert!(answer(&mut t, "u", i, 4).apply.is_none());
        assert!(answer(&mut t, "g", i, 4).apply.is_some());
    }
    assert_eq!(t.standing_of("u", &rules), Standing::Earned);
    assert_eq!(t.earning_room("u", &rules, || 100), None);
    // The count follows the cases: none is left open.
    assert!(t.cases().next().is_none());
    assert!(t.open_replicas.is_empty());
}

/// A spot check of an earned result is done only when another word agrees: a trust root, or an
/// earned worker of another owner. A replica that adds none (an untrusted credential, or another
/// credential of the checked owner: either may still hold a lease of the job from before it
/// became a check, such as a backup lease) leaves the check open and the result unconfirmed; on
/// a result in a core check, the check stays a core check.
#[test]
fn a_check_is_not_closed_by_a_replica_that_adds_no_word() {
    use Standing::*;
    // The rule: an earned result applied already, and an agreeing replica of no weight or of
    // its own owner.
    for second in [
        rep("u", "mallory", Untrusted, 4),
        rep("e2", "alice", Earned, 4),
    ] {
        let r = [rep("e", "alice", Earned, 4), second];
        let d = decide_t(&r, Some(&r[0].result), false);
        let need = d.need.expect("the spot check stays open");
        assert_eq!((need.min, need.kind), (Given, CheckKind::Spot));
        assert!(d.apply.is_none() && d.losers.is_empty() && d.confirmed.is_empty());
    }
    // The ledger, the check drawn for sure.
    let rules = TrustRules {
        spot_floor: 1.0,
        ..TrustRules::default()
    };
    let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
    for (c, owner) in [
        ("e", "alice"),
        ("e2", "alice"),
        ("u", "mallory"),
        ("p", "bob"),
    ] {
        t.enroll(c, owner, false, false);
    }
    for c in ["e", "e2", "p"] {
        t.records.get_mut(c).unwrap().streak = rules.earn_after;
    }
    // Every answer to a request under its one job (replicas of one job's leases).
    let answer =
        |t: &mut TrustState, who: &str, i: u64| answer_of(t, &rules, who, (u128::from(i), i), 4);
    let first = answer(&mut t, "e", 1);
    assert!(first.apply.is_some());
    assert_eq!(first.need.map(|n| n.kind), Some(CheckKind::Spot));
    for who in ["u", "e2"] {
        let taken = answer(&mut t, who, 1);
        assert_eq!(
            taken.need.map(|n| (n.min, n.kind)),
            Some((Given, CheckKind::Spot)),
            "{who} closed the spot check of alice's result"
        );
    }
    assert_eq!(t.sources[&req(1)].by, ["e"]);
    assert!(t.provisional(&req(1)));
    // An earned worker of another owner closes it.
    assert!(answer(&mut t, "p", 1).need.is_none());
    assert!(t.case(&req(1)).is_none());
    // A result in a core check: the replica leaves it a core check, for a trust root.
    assert!(answer(&mut t, "e", 2).apply.is_some());
    let core = core_of(&[bookfarm_book::decisive::CoreKey::of_result(
        &req(2),
        &res(4),
    )]);
    let mut b = crate::store::Batch::default();
    let checks = t
        .core_changed(&rules, &mut b, &core, true, |_| Some(res(4)))
        .unwrap();
    assert!(checks.iter().any(|(k, _)| *k == req(2)));
    // The open cases' needs (a restart's check jobs): two core checks (req(1), closed by p,
    // is provisional in the same core leaf).
    let needs: Vec<(LeafRequest, (Standing, CheckKind))> = t
        .open_needs()
        .into_iter()
        .map(|(k, n)| (k, (n.min, n.kind)))
        .collect();
    let core = (Given, CheckKind::Core);
    assert_eq!(needs, [(req(1), core), (req(2), core)]);
    let taken = answer(&mut t, "u", 2);
    assert_eq!(
        taken.need.map(|n| (n.min, n.kind)),
        Some((Given, CheckKind::Core))
    );
}

/// Many credentials of one owner count as one, in a catch too: a result that only the caught
/// credential and another credential of its owner vouch for is dropped, however long that
/// one's record; another owner's earned word, or a trust root's, keeps it.
#[test]
fn a_caught_owners_other_credential_does_not_keep_its_results() {
    let rules = TrustRules::default();
    for (keeper, kept) in [("b", false), ("p", true), ("g", true)] {
        let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty(), 0);
        t.enroll("u", "mallory", false, false);
        t.enroll("b", "mallory", false, false);
        t.enroll("p", "bob", false, false);
        t.enroll("g", "operator", true, false);
        for c in ["b", "p"] {
            t.records.get_mut(c).unwrap().streak = 1 << 40;
        }
        for (i, who) in ["u", keeper].into_iter().enumerate() {
            answer_of(&mut t, &rules, who, (i as u128 + 1, 1), 4);
        }
        assert_eq!(t.sources.get(&req(1)).map(|v| v.by.len()), Some(2));
        // u is caught (on another request).
        let (mut batch, mut touched) = (crate::store::Batch::default(), Vec::new());
        let caught = t.catch(&rules, &mut batch, &mut touched, "u").unwrap();
        assert_eq!(
            caught.dropped.is_empty(),
            kept,
            "vouched for by u and {keeper}"
        );
        assert_eq!(t.sources.contains_key(&req(1)), kept);
    }
}

/// A stored replica's standing is read back as written, and a byte that names no standing
/// reads as the least trusted one, never as the root.
#[test]
fn a_stored_replicas_unknown_standing_reads_as_untrusted() {
    use super::ledger::{replica_of, replica_record};
    for s in [
        Standing::Untrusted,
        Standing::Earned,
        Standing::Given,
        Standing::Root,
    ] {
        let r = rep("c", "o", s, 4);
        assert_eq!(replica_of(&replica_record(&r)).standing, s);
    }
    let mut rec = replica_record(&rep("c", "o", Standing::Root, 4));
    rec.standing = 9;
    assert_eq!(replica_of(&rec).standing, Standing::Untrusted);
}
