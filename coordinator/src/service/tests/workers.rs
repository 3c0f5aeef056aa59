//! Identity checks: protocol, engine, evaluation and search signature.

use super::*;

#[test]
fn identity_checks() {
    let cfg = ServiceConfig {
        eval_hash: Some("abcd".into()),
        engine_version: Some(ENGINE_VERSION.into()),
        ..ServiceConfig::default()
    };
    let f = fixture(1, 6, cfg);
    let good = Identity {
        eval_hash: "abcd".into(),
        ..identity()
    };
    assert!(f.c.register(&good, "w", 1).is_ok());
    let cases = [
        (
            Identity {
                protocol_version: PROTOCOL_VERSION + 1,
                ..good.clone()
            },
            ErrorCode::FailedPrecondition,
        ),
        (
            Identity {
                engine_version: "other".into(),
                ..good.clone()
            },
            ErrorCode::FailedPrecondition,
        ),
        (
            Identity {
                eval_hash: "ffff".into(),
                ..good.clone()
            },
            ErrorCode::FailedPrecondition,
        ),
    ];
    for (id, code) in cases {
        let e = f.c.register(&id, "w", 1).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
    }
}

use bookfarm_proto::status::{ErrorCode, ServiceError};

#[test]
fn workers_with_another_search_signature_are_refused_naming_the_difference() {
    let f = fixture(2, 10, ServiceConfig::default());
    let id = identity();
    // The first worker pins the book's signature.
    f.c.register(&id, "first", 1).unwrap();
    let small_tt = bookfarm_engine::search::SearchOptions {
        tt_bits: 14,
        ..bookfarm_engine::search::SearchOptions::default()
    };
    let other_options = Identity {
        search_signature: bookfarm_engine::search::SearchSignature::new(&small_tt, "00")
            .to_string(),
        ..identity()
    };
    let e =
        f.c.register(&other_options, "tt14", 1)
            .unwrap_err()
            .to_string();
    assert!(e.contains("search options: tt=14"), "{e}");
    let other_weights = Identity {
        search_signature: test_signature("77"),
        ..identity()
    };
    let e =
        f.c.register(&other_weights, "w77", 1)
            .unwrap_err()
            .to_string();
    assert!(e.contains("evaluation: 77 vs 00"), "{e}");
    let none = Identity {
        search_signature: String::new(),
        ..identity()
    };
    assert!(matches!(
        f.c.register(&none, "old", 1),
        Err(CoordinatorError::Signature(_))
    ));
    // The pin survives a restart, and a run with another signature does not open the book.
    let f = reopen(f, ServiceConfig::default());
    assert!(f.c.register(&other_weights, "w77", 1).is_err());
    let Fixture { dir, c, .. } = f;
    c.flush().unwrap();
    release(std::mem::ManuallyDrop::into_inner(c));
    let store = Store::open(dir.path()).unwrap();
    let cfg = ServiceConfig {
        signature: Some(test_signature("77")),
        ..ServiceConfig::default()
    };
    let e = Coordinator::open(store, dir.path(), cfg, Arc::new(ManualClock::default()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("evaluation: 77 vs 00"), "{e}");
}

/// An untrusted first registration does not pin the book's signature (a bogus one would lock
/// out every honest worker, also after a restart): the first trusted worker's does, and the
/// untrusted worker with the other signature is refused from then on.
#[test]
fn an_untrusted_first_registration_does_not_pin_the_signature() {
    let f = fixture(2, 10, ServiceConfig::default());
    let bogus = Identity {
        search_signature: test_signature("66"),
        ..identity()
    };
    let eve = f.c.register_owned(&bogus, "eve", 1, Some("eve")).unwrap();
    let e2 = f.c.register_owned(&bogus, "eve2", 1, Some("eve")).unwrap();
    assert!(f.c.lease(&bogus, &e2, 1).is_ok());
    // A trusted worker with the honest signature is accepted and pins the book.
    let id = identity();
    f.c.register_with(&id, "alice", 1, Some("alice"), true)
        .unwrap();
    assert!(matches!(
        f.c.lease(&bogus, &eve, 1),
        Err(CoordinatorError::Signature(_))
    ));
    assert!(f.c.register_owned(&bogus, "eve3", 1, Some("eve")).is_err());
    // After a restart the pin is the trusted worker's.
    let f = reopen(f, ServiceConfig::default());
    assert!(f.c.register_owned(&id, "bob", 1, Some("bob")).is_ok());
    assert!(f.c.register_owned(&bogus, "eve4", 1, Some("eve")).is_err());
}

/// A worker's self-reported threads are shown and counted only up to `max_worker_threads`.
#[test]
fn self_reported_threads_are_clamped() {
    let f = fixture(2, 10, ServiceConfig::default());
    let w =
        f.c.register_owned(&identity(), "big", 4_000_000_002, Some("eve"))
            .unwrap();
    let s = f.c.status();
    let me = s.workers.iter().find(|x| x.id == w).unwrap();
    assert_eq!(me.threads, ServiceConfig::default().max_worker_threads);
    assert_eq!(
        s.threads,
        u64::from(ServiceConfig::default().max_worker_threads)
    );
}
