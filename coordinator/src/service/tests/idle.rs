//! Why a worker is idle: the reason every empty lease carries, and the credit every heartbeat
//! tells.

use super::*;
use bookfarm_proto::domain::{IdleReason, LeaseAsk};

fn ask(free: u32) -> LeaseAsk {
    LeaseAsk {
        free,
        available: None,
    }
}

/// One reason for each state of the farm a worker can find, from the same worker's point of
/// view; a lease that asks for nothing gets no reason.
#[test]
fn every_empty_lease_says_why() {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            speculation: 0,
            lookahead: 0,
            ..ServiceConfig::default()
        },
    );
    let id = identity();
    // The new book's start position is searched first, without a program.
    drive(&f.c, 4);
    let w = f.c.register(&id, "w", 1).unwrap();
    let offer = |w: &Uuid, slots: u32| f.c.offer(&id, w, ask(slots)).unwrap();
    // No program running: nothing to do.
    assert_eq!(offer(&w, 1).idle, Some(IdleReason::BuildDone));
    assert_eq!(offer(&w, 0).idle, None, "no slot asked for, no reason");
    f.c.start(deviate24()).unwrap();
    f.c.settle().unwrap();
    // Paused by the operator.
    f.c.set_paused(true).unwrap();
    assert_eq!(
        offer(&w, 1),
        Offer {
            jobs: Vec::new(),
            idle: Some(IdleReason::Paused)
        }
    );
    f.c.set_paused(false).unwrap();
    // At its lease cap (one thread, no lookahead) the worker is told it may hold no more.
    let mine = offer(&w, 1);
    assert!(mine.idle.is_none() && mine.jobs.len() == 1, "{mine:?}");
    let mine = mine.jobs;
    assert_eq!(offer(&w, 1).idle, Some(IdleReason::RateLimited));
    // Another worker takes every other queued search: the queue is empty for a third one.
    let other = f.c.register(&id, "other", 64).unwrap();
    let mut held = Vec::new();
    loop {
        let got = f.c.lease(&id, &other, 64).unwrap();
        if got.is_empty() {
            break;
        }
        held.extend(got);
    }
    let third = f.c.register(&id, "third", 1).unwrap();
    assert_eq!(offer(&third, 1).idle, Some(IdleReason::QueueEmpty));
    // Every search answered until the programs finish: the build is done.
    f.c.submit(&id, &w, &mock_results(&mine)).unwrap();
    f.c.submit(&id, &other, &mock_results(&held)).unwrap();
    f.c.settle().unwrap();
    drive(&f.c, 4);
    assert_eq!(f.c.status().state, State::Done);
    assert_eq!(offer(&third, 1).idle, Some(IdleReason::BuildDone));
}

/// An untrusted credential's result is held until a trusted worker searched it again: the
/// replica is queued for trusted workers only, so another untrusted worker is not eligible,
/// and once the trusted worker holds it, the untrusted one waits for the validation.
#[test]
fn untrusted_workers_are_told_they_wait_for_validation_or_are_not_eligible() {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            speculation: 0,
            backup_after: 0,
            ..ServiceConfig::default()
        },
    );
    f.c.start(deviate24()).unwrap();
    f.c.settle().unwrap();
    let id = identity();
    let alice =
        f.c.register_with(&id, "a", 1, Some("alice"), false)
            .unwrap();
    let bob = f.c.register_with(&id, "b", 1, Some("bob"), false).unwrap();
    let root = f.c.lease(&id, &alice, 1).unwrap();
    assert_eq!(root.len(), 1, "the root's search");
    f.c.submit(&id, &alice, &mock_results(&root)).unwrap();
    f.c.settle().unwrap();
    let held = f.c.offer(&id, &bob, ask(1)).unwrap();
    assert_eq!(held.idle, Some(IdleReason::NotEligible), "{held:?}");
    let (_, credit) = f.c.heartbeat_credit(&id, &bob, &[]).unwrap();
    assert_eq!(credit.standing, "untrusted");
    // A trusted worker takes the replica; the untrusted ones wait for its answer.
    let trusted =
        f.c.register_with(&id, "t", 1, Some("operator"), true)
            .unwrap();
    let check = f.c.lease(&id, &trusted, 1).unwrap();
    assert_eq!(check.len(), 1);
    assert_eq!(
        check[0].board, root[0].board,
        "the replica of the held result"
    );
    for w in [alice, bob] {
        let o = f.c.offer(&id, &w, ask(1)).unwrap();
        assert_eq!(o.idle, Some(IdleReason::WaitingForValidation), "{o:?}");
    }
    // Validated: alice's result is credited to her credential, and work flows again.
    f.c.submit(&id, &trusted, &mock_results(&check)).unwrap();
    f.c.settle().unwrap();
    let (_, credit) = f.c.heartbeat_credit(&id, &alice, &[]).unwrap();
    assert_eq!((credit.standing.as_str(), credit.results), ("untrusted", 1));
    let next = f.c.offer(&id, &bob, ask(1)).unwrap();
    assert!(next.idle.is_none() && !next.jobs.is_empty(), "{next:?}");
}
