//! Why a worker is idle: the reason every empty lease carries, and the credit every heartbeat
//! tells.

use super::*;
use crate::service::RemoteWorker;
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
            lookahead: 0,
            ..without_speculation()
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
            backup_after: 0,
            ..without_speculation()
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

/// A fixture whose level-2 searches the farm measured at 100 s each: an always-on worker
/// searched the root for 100 s on the service's clock. Leases last up to an hour, so the
/// measured times, not the lease bound, decide what fits.
fn measured_farm(cfg: ServiceConfig) -> (Fixture, Uuid) {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            speculation: 0,
            backup_after: 0,
            lookahead: 0,
            max_lease_base: Duration::from_secs(3600),
            ..cfg
        },
    );
    f.c.start(deviate24()).unwrap();
    f.c.settle().unwrap();
    let id = identity();
    let always_on = f.c.register(&id, "always-on", 1).unwrap();
    let root = f.c.lease(&id, &always_on, 1).unwrap();
    assert_eq!(root.len(), 1);
    f.clock.advance(Duration::from_secs(100));
    f.c.submit(&id, &always_on, &mock_results(&root)).unwrap();
    f.c.settle().unwrap();
    // Past the cache of "a fast always-on worker is registered".
    f.clock.advance(Duration::from_secs(1));
    assert!(f.c.status().queued > 0, "the next searches are queued");
    (f, always_on)
}

fn part_time(f: &Fixture, name: &str) -> Uuid {
    let w = RemoteWorker {
        name,
        threads: 1,
        credential: None,
        trusted: false,
        part_time: true,
        release: "",
    };
    f.c.register_remote(&identity(), &w).unwrap()
}

fn ask_for(available: Option<u64>) -> LeaseAsk {
    LeaseAsk {
        free: 1,
        available: available.map(Duration::from_secs),
    }
}

/// A worker whose active hours end before a queued search is expected to (twice the farm's
/// measured time at its pace) gets none and is told so; with more time left it gets one.
#[test]
fn a_part_time_worker_gets_only_searches_it_can_finish_in_time() {
    let (f, _) = measured_farm(ServiceConfig {
        long_job: Duration::from_secs(1000),
        ..ServiceConfig::default()
    });
    let id = identity();
    let p = part_time(&f, "evenings");
    let short = f.c.offer(&id, &p, ask_for(Some(150))).unwrap();
    assert_eq!(
        short,
        Offer {
            jobs: Vec::new(),
            idle: Some(IdleReason::NoFit)
        }
    );
    let long = f.c.offer(&id, &p, ask_for(Some(250))).unwrap();
    assert!(long.idle.is_none() && long.jobs.len() == 1, "{long:?}");
}

/// Before any search of a level was measured, a worker's remaining hours are compared with the
/// level's longest lease: nothing is known, so nothing is risked.
#[test]
fn an_unmeasured_level_fits_only_within_its_longest_lease() {
    let f = fixture(
        2,
        10,
        ServiceConfig {
            max_lease_base: Duration::from_secs(600),
            ..without_speculation()
        },
    );
    f.c.start(deviate24()).unwrap();
    f.c.settle().unwrap();
    let id = identity();
    let p = part_time(&f, "evenings");
    assert_eq!(
        f.c.offer(&id, &p, ask_for(Some(599))).unwrap().idle,
        Some(IdleReason::NoFit)
    );
    let got = f.c.offer(&id, &p, ask_for(Some(600))).unwrap();
    assert_eq!(got.jobs.len(), 1, "{got:?}");
}

/// Long searches go to fast always-on workers first: a part-time worker, and an always-on one
/// whose pace is not measured yet, are told the queued searches are reserved while the
/// measured always-on worker gets them; a reservation ends `reserve_for` after a worker was
/// first refused it.
#[test]
fn long_searches_are_reserved_for_fast_always_on_workers_for_a_while() {
    let (f, _) = measured_farm(ServiceConfig {
        long_job: Duration::from_secs(60),
        reserve_for: Duration::from_secs(30),
        ..ServiceConfig::default()
    });
    let id = identity();
    let p = part_time(&f, "evenings");
    let fresh = f.c.register(&id, "new", 1).unwrap();
    for w in [p, fresh] {
        let o = f.c.offer(&id, &w, ask_for(None)).unwrap();
        assert_eq!(o.idle, Some(IdleReason::Reserved), "{o:?}");
    }
    f.clock.advance(Duration::from_secs(29));
    assert_eq!(
        f.c.offer(&id, &p, ask_for(None)).unwrap().idle,
        Some(IdleReason::Reserved)
    );
    f.clock.advance(Duration::from_secs(1));
    let o = f.c.offer(&id, &p, ask_for(None)).unwrap();
    assert_eq!(o.jobs.len(), 1, "the reservation ended: {o:?}");
    // The fast always-on worker gets a reserved search at once.
    let (f, always_on) = measured_farm(ServiceConfig {
        long_job: Duration::from_secs(60),
        reserve_for: Duration::from_secs(30),
        ..ServiceConfig::default()
    });
    let p = part_time(&f, "evenings");
    assert_eq!(
        f.c.offer(&id, &p, ask_for(None)).unwrap().idle,
        Some(IdleReason::Reserved)
    );
    let fast = f.c.offer(&id, &always_on, ask(1)).unwrap();
    assert_eq!(fast.jobs.len(), 1, "{fast:?}");
    // Without a fast always-on worker nothing is held back.
    let (f, always_on) = measured_farm(ServiceConfig {
        long_job: Duration::from_secs(60),
        reserve_for: Duration::from_secs(30),
        ..ServiceConfig::default()
    });
    // The always-on worker answered its search: it holds no lease, and its id stops working.
    assert_eq!(f.c.drop_workers(&[always_on]), 0, "no lease to re-queue");
    assert!(f.c.offer(&id, &always_on, ask(1)).is_err(), "dropped");
    f.clock.advance(Duration::from_secs(1));
    let p = part_time(&f, "evenings");
    let o = f.c.offer(&id, &p, ask_for(None)).unwrap();
    assert_eq!(o.jobs.len(), 1, "{o:?}");
}
