//! The rules' decisions and the ledger's write schedule, on hand-made replicas.

use super::rules::{Decision, Replica, decide, spot_probability};
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
fn decide_t(r: &[Replica], a: Option<&LeafResult>, critical: bool, spot: bool) -> Decision {
    decide(r, a, critical, spot, false)
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
    let d = decide_t(&one, None, false, false);
    assert!(d.apply.is_none());
    assert_eq!(d.need.as_ref().unwrap().min, Earned);
    // Untrusted workers of other owners never validate each other.
    let two = [rep("u1", "a", Untrusted, 4), rep("u2", "b", Untrusted, 4)];
    let d = decide_t(&two, None, false, false);
    assert!(d.apply.is_none() && d.need.is_some());
    // An earned-trust worker of another owner validates outside a window...
    let e = [rep("u1", "a", Untrusted, 4), rep("e", "b", Earned, 4)];
    let d = decide_t(&e, None, false, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert!(d.need.is_none());
    // ...but inside one the root or a second owner's earned trust must agree.
    let d = decide_t(&e, None, true, false);
    assert!(d.apply.is_none());
    let g = [rep("u1", "a", Untrusted, 4), rep("t", "op", Given, 4)];
    let d = decide_t(&g, None, true, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert_eq!(d.confirmed, vec!["u1".to_string()]);
    // The same owner under another name adds nothing.
    let same = [rep("e1", "a", Earned, 4), rep("e2", "a", Earned, 4)];
    assert!(decide_t(&same, None, true, false).apply.is_none());
}

#[test]
fn trusted_results_apply_at_once_and_mismatches_go_to_the_root() {
    use Standing::*;
    let t = [rep("t", "op", Given, 4)];
    let d = decide_t(&t, None, true, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert!(d.need.is_none());
    let d = decide_t(&t, None, true, true);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert_eq!(d.need.as_ref().unwrap().min, Root);
    // The trusted worker settles a mismatch with an untrusted one.
    let m = [rep("u", "a", Untrusted, -6), rep("t", "op", Given, 4)];
    let d = decide_t(&m, None, false, false);
    assert_eq!(d.apply.map(|r| r.score), Some(4));
    assert_eq!(d.losers, vec!["u".to_string()]);
    // With a verifier, it settles instead (a broken trusted machine must not make an
    // honest worker lose).
    let d = decide(&m, None, false, false, true);
    assert!(d.apply.is_none() && d.losers.is_empty());
    assert_eq!(d.need.unwrap().min, Root);
    // Two trusted workers that disagree wait for the coordinator, which wins.
    let tt = [rep("t1", "op", Given, 4), rep("t2", "op2", Given, 6)];
    let d = decide_t(&tt, Some(&tt[0].result), false, false);
    assert_eq!(d.need.as_ref().unwrap().min, Root);
    assert!(d.apply.is_none());
    let mut ttr = tt.to_vec();
    ttr.push(rep(VERIFIER, "", Root, 6));
    let d = decide_t(&ttr, Some(&tt[0].result), false, false);
    assert_eq!(
        d.apply.map(|r| r.score),
        Some(6),
        "the applied result is replaced"
    );
    assert_eq!(d.losers, vec!["t1".to_string()]);
    // Earned against untrusted: the root must settle it.
    let eu = [rep("e", "a", Earned, 4), rep("u", "b", Untrusted, 6)];
    assert_eq!(decide_t(&eu, None, false, false).need.unwrap().min, Given);
}

#[test]
fn deviate_windows_make_only_results_that_can_change_the_marking_critical() {
    use bookfarm_engine::Board;
    let req = |excluded: u64| LeafRequest {
        board: Board::start(),
        level: 2,
        excluded,
    };
    // `deviate 2 4` around a root value of -2, margin 2: the hull is |s| <= 8.
    let hull = Window::hull(-2, 4, 2);
    assert_eq!(hull, 8);
    let (research, child) = (req(1), req(2));
    let w = Window::Deviate {
        hull,
        researches: [research].into_iter().collect(),
    };
    // A re-search: only a score below the hull is left to the spot checks.
    for s in [-8, -3, 0, 8, 9, 40, 64] {
        assert!(w.critical(&research, s), "inside or above the hull: {s}");
    }
    for s in [-9, -40, -64, -127] {
        assert!(!w.critical(&research, s), "below the hull: {s}");
    }
    // A new position: the book's estimate of it lies inside the window.
    for s in [-64, -9, 0, 9, 64] {
        assert!(w.critical(&child, s));
    }
    // Requests the pass did not list (speculation) are critical.
    assert!(w.critical(&req(16), -40));
    assert!(Window::All.critical(&research, -40));
    assert!(!Window::Open.critical(&research, 0));
    // The hull covers the window seen from either side.
    assert_eq!(Window::hull(5, 4, 0), 9);
    assert_eq!(
        Window::hull(5, 4, -3),
        9,
        "a negative margin counts as none"
    );
}

#[test]
fn spot_checks_fall_with_the_record() {
    let r = TrustRules::default();
    assert_eq!(spot_probability(0, &r), 1.0);
    assert!((spot_probability(9, &r) - 0.1).abs() < 1e-12);
    assert_eq!(spot_probability(1_000_000, &r), r.spot_floor);
    let need = Need {
        min: Standing::Earned,
        answered: vec!["u".into()],
        owners: vec!["a".into()],
    };
    assert!(!need.admits(Standing::Earned, "e", "a"), "same owner");
    assert!(!need.admits(Standing::Untrusted, "x", "b"));
    assert!(need.admits(Standing::Earned, "e", "b"));
    assert!(need.admits(Standing::Root, VERIFIER, ""));
}

#[test]
fn decisions_are_written_at_once_and_counts_once_per_interval() {
    let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty());
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
