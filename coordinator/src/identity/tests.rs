use super::*;
use bookfarm_proto::auth::{attach, bearer_value};

fn meta(token: &str) -> MetadataMap {
    let mut req = Request::new(());
    attach(&mut req, bearer_value(token).unwrap().as_ref());
    req.metadata().clone()
}

fn ids(cfg: IdentityConfig) -> (tempfile::TempDir, Identities) {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::Store::open(dir.path()).unwrap();
    let i = Identities::open(cfg, Some(store.credentials().unwrap())).unwrap();
    (dir, i)
}

fn code(e: IdentityError) -> ErrorCode {
    e.code()
}

fn code_of(e: &IdentityError) -> ErrorCode {
    e.code()
}

#[test]
fn credentials_are_checked_and_kept_hashed() {
    let cfg = IdentityConfig {
        admin_token: Some("adm".into()),
        ..IdentityConfig::default()
    };
    let (dir, i) = ids(cfg.clone());
    let (token, rec) = i.add("host1", Some("alice"), false).unwrap();
    assert_eq!(rec.token_sha256, token_sha256(&token));
    assert!(token.starts_with("bfw_") && token.len() == 68);
    let p = i.authenticate_worker(&meta(&token)).unwrap();
    assert_eq!(p.owner(), Some("alice"));
    // Wrong, missing and admin tokens on the worker service.
    assert_eq!(
        code(i.authenticate_worker(&meta("bfw_x")).unwrap_err()),
        ErrorCode::Unauthenticated
    );
    assert_eq!(
        code(i.authenticate_worker(&meta("")).unwrap_err()),
        ErrorCode::Unauthenticated
    );
    assert_eq!(
        code(i.authenticate_worker(&meta("adm")).unwrap_err()),
        ErrorCode::PermissionDenied
    );
    // Worker tokens on the admin service.
    assert!(i.authenticate_admin(&meta("adm")).is_ok());
    assert_eq!(
        code(i.authenticate_admin(&meta(&token)).unwrap_err()),
        ErrorCode::PermissionDenied
    );
    assert_eq!(
        code(i.authenticate_admin(&meta("")).unwrap_err()),
        ErrorCode::Unauthenticated
    );
    // Names are unique; the token is nowhere in the store.
    assert_eq!(
        code(i.add("host1", None, true).unwrap_err()),
        ErrorCode::FailedPrecondition
    );
    drop(i);
    let store = crate::store::Store::open(dir.path()).unwrap();
    let raw: Vec<u8> = store
        .credentials()
        .unwrap()
        .list()
        .unwrap()
        .iter()
        .flat_map(|r| postcard::to_stdvec(r).unwrap())
        .collect();
    assert!(!raw.windows(token.len()).any(|w| w == token.as_bytes()));
    // Reopened: the same token still works.
    let i = Identities::open(cfg, Some(store.credentials().unwrap())).unwrap();
    assert!(i.authenticate_worker(&meta(&token)).is_ok());
}

#[test]
fn block_unblock_revoke() {
    let (_d, i) = ids(IdentityConfig::default());
    let (token, _) = i.add("h", None, false).unwrap();
    let p = i.authenticate_worker(&meta(&token)).unwrap();
    let wid = i
        .open_session(&p, None, || Ok::<_, ()>(Uuid::new_v4()))
        .unwrap();
    let (_, ended) = i
        .set_state("h", CredentialState::Blocked, "bad\nresults")
        .unwrap();
    assert_eq!(ended, vec![wid]);
    let e = i.authenticate_worker(&meta(&token)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::PermissionDenied);
    assert!(e.to_string().contains("bad\\nresults"), "{e}");
    i.set_state("h", CredentialState::Active, "").unwrap();
    assert!(i.authenticate_worker(&meta(&token)).is_ok());
    i.set_state("h", CredentialState::Revoked, "stolen")
        .unwrap();
    assert_eq!(
        code(i.authenticate_worker(&meta(&token)).unwrap_err()),
        ErrorCode::Unauthenticated
    );
    assert!(i.set_state("h", CredentialState::Active, "").is_err());
    assert!(matches!(
        i.set_state("nope", CredentialState::Blocked, ""),
        Err(IdentityError::NotFound(_))
    ));
}

#[test]
fn sessions_are_bound_and_capped() {
    let (_d, i) = ids(IdentityConfig::default());
    let (ta, _) = i.add("a", None, false).unwrap();
    let (tb, _) = i.add("b", None, true).unwrap();
    let a = i.authenticate_worker(&meta(&ta)).unwrap();
    let b = i.authenticate_worker(&meta(&tb)).unwrap();
    let w = i
        .open_session(&a, None, || Ok::<_, ()>(Uuid::new_v4()))
        .unwrap();
    assert!(i.check_session(&a, &w).is_ok());
    // Another credential cannot use a's session id.
    assert!(matches!(
        i.check_session(&b, &w),
        Err(IdentityError::UnknownSession(_))
    ));
    assert!(i.check_session(&Principal::Anonymous, &w).is_err());
    // Untrusted: 2 sessions; trusted: more.
    i.open_session(&a, None, || Ok::<_, ()>(Uuid::new_v4()))
        .unwrap();
    assert!(matches!(
        i.open_session(&a, None, || Ok::<_, ()>(Uuid::new_v4())),
        Err(SessionError::Identity(IdentityError::ResourceExhausted(_)))
    ));
    for _ in 0..3 {
        i.open_session(&b, None, || Ok::<_, ()>(Uuid::new_v4()))
            .unwrap();
    }
    assert_eq!(
        i.list().iter().map(|c| c.live_sessions).collect::<Vec<_>>(),
        vec![2, 3]
    );
}

#[test]
fn registrations_are_rate_limited_per_address() {
    let i = Identities::open(
        IdentityConfig {
            anonymous_workers: true,
            registration_burst: 5,
            registrations_per_minute: 1,
            ..IdentityConfig::default()
        },
        None,
    )
    .unwrap();
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    let ok = (0..50)
        .filter(|_| {
            i.open_session(&Principal::Anonymous, Some(ip), || {
                Ok::<_, ()>(Uuid::new_v4())
            })
            .is_ok()
        })
        .count();
    assert_eq!(ok, 5);
    let other: IpAddr = "10.0.0.2".parse().unwrap();
    assert!(
        i.open_session(&Principal::Anonymous, Some(other), || Ok::<_, ()>(
            Uuid::new_v4()
        ))
        .is_ok()
    );
}

#[test]
fn anonymous_mode_ends_with_the_first_credential() {
    let i = Identities::local();
    assert_eq!(
        i.authenticate_worker(&meta("")).unwrap(),
        Principal::Anonymous
    );
    assert!(i.authenticate_admin(&meta("")).is_ok());
    let (t, _) = i.add("w", None, false).unwrap();
    assert!(i.authenticate_worker(&meta("")).is_err());
    assert_eq!(
        code(i.authenticate_admin(&meta("")).unwrap_err()),
        ErrorCode::PermissionDenied
    );
    assert_eq!(
        code(i.authenticate_admin(&meta(&t)).unwrap_err()),
        ErrorCode::PermissionDenied
    );
}

/// The registry over a store's credentials and invitations, and the store's directory.
fn ids_inv(cfg: IdentityConfig) -> (tempfile::TempDir, Identities) {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::Store::open(dir.path()).unwrap();
    let i = Identities::open_with(
        cfg,
        Some(store.credentials().unwrap()),
        Some(store.invitations().unwrap()),
    )
    .unwrap();
    (dir, i)
}

fn reopen_inv(dir: &tempfile::TempDir, cfg: IdentityConfig) -> Identities {
    let store = crate::store::Store::open(dir.path()).unwrap();
    Identities::open_with(
        cfg,
        Some(store.credentials().unwrap()),
        Some(store.invitations().unwrap()),
    )
    .unwrap()
}

const DAY: Duration = Duration::from_secs(86_400);

#[test]
fn an_invitation_becomes_an_untrusted_credential_once() {
    let (dir, i) = ids_inv(IdentityConfig::default());
    let (code, inv) = i.invite(Some("alice-laptop"), 1, DAY, None).unwrap();
    assert!(code.starts_with("bfi_") && code.len() == 36, "{code}");
    assert_eq!(
        inv.code_sha256,
        token_sha256(&code),
        "only the hash is kept"
    );
    let e = i.enroll(&code, "my laptop!", None).unwrap();
    assert!(e.record.name.starts_with("my-laptop-"), "{}", e.record.name);
    assert!(!e.record.trusted, "a new credential starts untrusted");
    assert_eq!(e.record.owner, e.record.name, "single use: its own owner");
    assert_eq!(e.invitation.as_deref(), Some("alice-laptop"));
    let p = i.authenticate_worker(&meta(&e.token)).unwrap();
    assert_eq!(p.credential(), Some(e.record.name.as_str()));
    // Spent: refused, and nothing changes.
    let again = i.enroll(&code, "other", None).unwrap_err();
    assert_eq!(code_of(&again), ErrorCode::PermissionDenied, "{again}");
    assert!(again.to_string().contains("used up"), "{again}");
    assert_eq!(i.list().len(), 1);
    // A wrong code.
    let wrong = i.enroll("bfi_00", "x", None).unwrap_err();
    assert_eq!(code_of(&wrong), ErrorCode::Unauthenticated, "{wrong}");
    // Durable: the credential and the spent use survive a restart.
    drop(i);
    let i = reopen_inv(&dir, IdentityConfig::default());
    assert!(i.authenticate_worker(&meta(&e.token)).is_ok());
    assert_eq!(i.invitations()[0].used, 1);
    assert!(i.enroll(&code, "x", None).is_err());
}

#[test]
fn capped_expired_and_revoked_invitations() {
    let (_dir, i) = ids_inv(IdentityConfig::default());
    // Three uses: three credentials, one owner for them all.
    let (class, _) = i.invite(Some("class"), 3, DAY, None).unwrap();
    let owners: Vec<String> = (0..3)
        .map(|_| i.enroll(&class, "pc", None).unwrap().record.owner)
        .collect();
    assert!(owners.iter().all(|o| o == "class@invitation"), "{owners:?}");
    assert!(i.enroll(&class, "pc", None).is_err(), "capped at 3");
    // An owner named by the operator.
    let (named, _) = i.invite(Some("bob"), 2, DAY, Some("bob")).unwrap();
    assert_eq!(i.enroll(&named, "pc", None).unwrap().record.owner, "bob");
    // Expired: refused at its expiry time.
    let (old, rec) = i.invite(Some("old"), 1, DAY, None).unwrap();
    let e = i.enroll_at(&old, "pc", None, rec.expires_unix).unwrap_err();
    assert!(e.to_string().contains("expired"), "{e}");
    assert!(i.enroll_at(&old, "pc", None, rec.expires_unix - 1).is_ok());
    // Revoked.
    let (gone, _) = i.invite(Some("gone"), 5, DAY, None).unwrap();
    i.revoke_invitation("gone").unwrap();
    let e = i.enroll(&gone, "pc", None).unwrap_err();
    assert!(e.to_string().contains("revoked"), "{e}");
    // Bad invitations.
    assert!(i.invite(Some("class"), 1, DAY, None).is_err(), "name taken");
    assert!(i.invite(Some("a b"), 1, DAY, None).is_err());
    assert!(i.invite(None, 0, DAY, None).is_err());
}

#[test]
fn open_enrolment_is_off_unless_allowed_and_enrolments_are_rate_limited() {
    let (_dir, i) = ids_inv(IdentityConfig::default());
    let e = i.enroll("", "pc", None).unwrap_err();
    assert_eq!(code_of(&e), ErrorCode::PermissionDenied, "{e}");
    assert!(i.list().is_empty());
    let (_dir2, open) = ids_inv(IdentityConfig {
        open_enrolment: true,
        enrolments_per_hour: 2,
        enrolment_burst: 2,
        ..IdentityConfig::default()
    });
    let ip: IpAddr = "192.0.2.7".parse().unwrap();
    let a = open.enroll("", "pc", Some(ip)).unwrap();
    assert_eq!(a.record.owner, a.record.name);
    assert!(a.invitation.is_none());
    open.enroll("", "pc", Some(ip)).unwrap();
    // The third from the same address within the hour is refused; another address may.
    let e = open.enroll("", "pc", Some(ip)).unwrap_err();
    assert_eq!(code_of(&e), ErrorCode::ResourceExhausted, "{e}");
    open.enroll("", "pc", Some("192.0.2.8".parse().unwrap()))
        .unwrap();
    assert_eq!(open.list().len(), 3);
}

/// Wrong admin tokens from one address are throttled: after [`ADMIN_GUESSES`] in a window, its
/// admin calls are refused (the right token too) while other addresses are not affected.
#[test]
fn admin_token_guesses_are_throttled_per_address() {
    let cfg = IdentityConfig {
        admin_token: Some("adm".into()),
        ..IdentityConfig::default()
    };
    let (_dir, i) = ids(cfg);
    let guesser: IpAddr = "192.0.2.7".parse().unwrap();
    let other: IpAddr = "192.0.2.8".parse().unwrap();
    for n in 0..ADMIN_GUESSES {
        assert_eq!(
            code(
                i.authenticate_admin_from(&meta(&format!("guess{n}")), Some(guesser))
                    .unwrap_err()
            ),
            ErrorCode::Unauthenticated
        );
    }
    assert_eq!(
        code(
            i.authenticate_admin_from(&meta("guess-more"), Some(guesser))
                .unwrap_err()
        ),
        ErrorCode::ResourceExhausted
    );
    assert_eq!(
        code(
            i.authenticate_admin_from(&meta("adm"), Some(guesser))
                .unwrap_err()
        ),
        ErrorCode::ResourceExhausted
    );
    assert!(i.authenticate_admin_from(&meta("adm"), Some(other)).is_ok());
}

/// While detached from its store (the store is being reopened) the registry refuses every
/// change and still authenticates from memory; reattached, it reads the store again.
#[test]
fn a_detached_registry_refuses_changes_until_reattached() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::Store::open(dir.path()).unwrap();
    let open = || {
        Identities::open(
            IdentityConfig::default(),
            Some(store.credentials().unwrap()),
        )
        .unwrap()
    };
    let i = open();
    let (token, _) = i.add("a", Some("o"), false).unwrap();
    let (creds, _, _) = i.detach();
    assert!(creds.is_some());
    assert_eq!(
        code(i.add("b", None, false).unwrap_err()),
        ErrorCode::Unavailable
    );
    assert_eq!(
        code(i.set_state("a", CredentialState::Blocked, "x").unwrap_err()),
        ErrorCode::Unavailable
    );
    assert_eq!(
        code(
            i.invite(Some("i"), 1, Duration::from_secs(60), None)
                .unwrap_err()
        ),
        ErrorCode::Unavailable
    );
    assert!(i.authenticate_worker(&meta(&token)).is_ok());
    // Written to the store meanwhile: the reattached registry reads it.
    open().add("c", None, true).unwrap();
    i.reattach(
        store.credentials().unwrap(),
        store.invitations().unwrap(),
        EventLog::open(&store, 100).unwrap(),
    )
    .unwrap();
    assert!(i.list().iter().any(|c| c.record.name == "c"));
    i.add("b", None, false).unwrap();
    assert!(open().list().iter().any(|c| c.record.name == "b"));
}
