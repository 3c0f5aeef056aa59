//! Who is calling: the admin credential, per-worker credentials (BOINC-style per-host keys,
//! stored hashed and bound to an owner), worker sessions and the registration rate.
//!
//! Credentials travel in request metadata (`bookfarm_proto::auth`) and are checked by tonic
//! interceptors, which run before a request body is read: an unauthenticated upload is refused
//! after its headers. The interceptor attaches a [`Principal`] to the request; handlers then
//! bind worker ids (sessions) to it, so that a worker id is useless without the credential that
//! opened it.
//!
//! Anonymous use: while no worker credential exists and [`IdentityConfig::anonymous_workers`]
//! is set (`serve` sets it only on a loopback address), workers need no credential; while no
//! admin token is set and no worker credential exists, admin calls need none either (local use).
//! Once a worker credential exists, admin calls need the admin token and worker tokens are
//! refused on them (PermissionDenied).

use crate::events::{EventKind, EventLog, event};
use crate::store::{
    CredentialRecord, CredentialState, CredentialStore, InvitationRecord, InvitationStore,
    StoreError,
};
use bookfarm_proto::auth::bearer_token;
use bookfarm_proto::status::{ErrorCode, ServiceError, to_status};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};
use uuid::Uuid;

/// Errors of authentication and credential management.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Missing, unknown or revoked credential.
    #[error("{0}")]
    Unauthenticated(String),
    /// A valid credential without the right to do this.
    #[error("{0}")]
    PermissionDenied(String),
    /// A limit was reached (sessions, registration rate).
    #[error("{0}")]
    ResourceExhausted(String),
    /// The worker id is unknown or was opened with another credential.
    #[error("unknown worker {0} (register again)")]
    UnknownSession(Uuid),
    /// A bad credential name or owner.
    #[error("{0}")]
    InvalidArgument(String),
    /// No credential of that name.
    #[error("no worker credential named {0:?}")]
    NotFound(String),
    /// The name is taken, or the change is not possible (a revoked credential stays revoked).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store is being reopened (see [`Identities::detach`]): retry shortly.
    #[error("unavailable: the store is being reopened; retry shortly")]
    Reopening,
}

impl ServiceError for IdentityError {
    fn code(&self) -> ErrorCode {
        match self {
            IdentityError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            IdentityError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            IdentityError::ResourceExhausted(_) => ErrorCode::ResourceExhausted,
            IdentityError::UnknownSession(_) => ErrorCode::UnknownWorker,
            IdentityError::NotFound(_) => ErrorCode::NotFound,
            IdentityError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            IdentityError::FailedPrecondition(_) => ErrorCode::FailedPrecondition,
            IdentityError::Store(_) => ErrorCode::Internal,
            IdentityError::Reopening => ErrorCode::Unavailable,
        }
    }
}

type Result<T, E = IdentityError> = std::result::Result<T, E>;

/// Authentication settings and the limits kept per credential.
#[derive(Debug, Clone)]
pub struct IdentityConfig {
    /// The admin token (None: admin calls are anonymous while no worker credential exists,
    /// refused otherwise).
    pub admin_token: Option<String>,
    /// Accept workers without a credential while no worker credential exists (`serve` sets
    /// this only when bound to a loopback address).
    pub anonymous_workers: bool,
    /// Live sessions (registered workers) one untrusted credential may hold.
    pub max_sessions_untrusted: usize,
    /// Live sessions one trusted credential may hold.
    pub max_sessions_trusted: usize,
    /// Registrations accepted per minute from one network address (sustained rate).
    pub registrations_per_minute: u32,
    /// Registrations accepted at once from one address before the rate applies.
    pub registration_burst: u32,
    /// A session silent for this long no longer counts (the service's lease timeout).
    pub session_timeout: Duration,
    /// Workers may enrol without an invitation code (`serve --open-enrolment`).
    pub open_enrolment: bool,
    /// Enrolments accepted per hour from one network address (sustained rate)...
    pub enrolments_per_hour: u32,
    /// ...and at once before the rate applies.
    pub enrolment_burst: u32,
    /// Open enrolments accepted per hour on the whole coordinator.
    pub open_enrolments_per_hour: u32,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        IdentityConfig {
            admin_token: None,
            anonymous_workers: false,
            max_sessions_untrusted: 2,
            max_sessions_trusted: 64,
            registrations_per_minute: 30,
            registration_burst: 30,
            session_timeout: Duration::from_secs(60),
            open_enrolment: false,
            enrolments_per_hour: 10,
            enrolment_burst: 3,
            open_enrolments_per_hour: 60,
        }
    }
}

impl IdentityConfig {
    /// Local use: anonymous workers and admin, no limit a single machine could reach.
    pub fn local() -> IdentityConfig {
        IdentityConfig {
            anonymous_workers: true,
            registrations_per_minute: 60_000,
            registration_burst: 10_000,
            ..IdentityConfig::default()
        }
    }
}

/// Wrong admin tokens one address may send per [`ADMIN_GUESS_WINDOW`] before its admin calls
/// are refused for the rest of the window.
pub const ADMIN_GUESSES: u32 = 30;

/// The window of [`ADMIN_GUESSES`].
pub const ADMIN_GUESS_WINDOW: Duration = Duration::from_secs(60);

/// Addresses remembered for guessing before the expired ones are dropped.
const MAX_GUESSING_ADDRESSES: usize = 10_000;

/// The sample configuration's admin token, warned about at start.
pub const SAMPLE_ADMIN_TOKEN: &str = "change-me";

/// An authenticated worker credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCredential {
    /// Credential name.
    pub name: String,
    /// Its owner.
    pub owner: String,
    /// Whether the operator trusts it.
    pub trusted: bool,
}

/// Who sent a worker request (attached to the request by the interceptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// No credential (anonymous mode).
    Anonymous,
    /// A worker credential.
    Worker(Arc<WorkerCredential>),
}

impl Principal {
    /// The credential name (None: anonymous).
    pub fn credential(&self) -> Option<&str> {
        match self {
            Principal::Anonymous => None,
            Principal::Worker(w) => Some(&w.name),
        }
    }

    /// The owner whose failure reports count together (None: anonymous).
    pub fn owner(&self) -> Option<&str> {
        match self {
            Principal::Anonymous => None,
            Principal::Worker(w) => Some(&w.owner),
        }
    }

    /// Whether the operator trusts its credential (anonymous: no).
    pub fn trusted(&self) -> bool {
        match self {
            Principal::Anonymous => false,
            Principal::Worker(w) => w.trusted,
        }
    }

    /// The principal attached to a request by the worker interceptor.
    pub fn of<T>(req: &Request<T>) -> Result<Principal, Status> {
        req.extensions()
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| Status::internal("request reached a handler without authentication"))
    }
}

/// A credential as listed to operators.
#[derive(Debug, Clone)]
pub struct CredentialInfo {
    /// The stored record.
    pub record: CredentialRecord,
    /// Sessions open with it now.
    pub live_sessions: usize,
}

#[derive(Debug)]
struct Session {
    credential: Option<String>,
    last_seen: Instant,
}

#[derive(Debug, Default)]
struct State {
    records: BTreeMap<String, CredentialRecord>,
    by_hash: HashMap<[u8; 32], String>,
    sessions: HashMap<Uuid, Session>,
    invitations: BTreeMap<String, InvitationRecord>,
    /// The store's credential tree (None: in memory).
    store: Option<CredentialStore>,
    /// The store's invitation tree (None: in memory).
    invitation_store: Option<InvitationStore>,
    /// Between [`Identities::detach`] and [`Identities::reattach`]: every change is refused.
    detached: bool,
}

impl State {
    /// Refused while the store is detached (a change made then would live in memory only).
    fn writable(&self) -> Result<()> {
        if self.detached {
            return Err(IdentityError::Reopening);
        }
        Ok(())
    }

    /// Read the credentials and invitations of the stores (replacing those in memory).
    fn load(
        &mut self,
        store: Option<CredentialStore>,
        invitations: Option<InvitationStore>,
    ) -> Result<()> {
        let mut records = BTreeMap::new();
        let mut by_hash = HashMap::new();
        let mut invited = BTreeMap::new();
        if let Some(s) = &invitations {
            for i in s.list()? {
                invited.insert(i.name.clone(), i);
            }
        }
        if let Some(s) = &store {
            for r in s.list()? {
                if r.state != CredentialState::Revoked {
                    by_hash.insert(r.token_sha256, r.name.clone());
                }
                records.insert(r.name.clone(), r);
            }
        }
        self.records = records;
        self.by_hash = by_hash;
        self.invitations = invited;
        self.store = store;
        self.invitation_store = invitations;
        self.detached = false;
        Ok(())
    }
}

#[derive(Debug)]
struct Inner {
    cfg: IdentityConfig,
    admin_sha256: Option<[u8; 32]>,
    state: Mutex<State>,
    registrations: DefaultKeyedRateLimiter<IpAddr>,
    enrolments: DefaultKeyedRateLimiter<IpAddr>,
    open_enrolments: DefaultDirectRateLimiter,
    /// Wrong admin tokens per address in the current window (see [`ADMIN_GUESSES`]).
    admin_guesses: Mutex<HashMap<IpAddr, (Instant, u32)>>,
    /// Where the operator's changes are recorded (see [`Identities::set_events`]).
    events: Mutex<Option<EventLog>>,
}

/// The credential registry and session table: a cheap-clone handle.
#[derive(Debug, Clone)]
pub struct Identities(Arc<Inner>);

/// SHA-256 of a token (what the store keeps).
pub fn token_sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A new worker token: `bfw_` and 32 random bytes in hex (256 bits: a fast hash is enough to
/// store it, unlike a password).
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("bfw_{hex}")
}

fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn valid_label(what: &str, s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(format!(
            "{what} {:?} must be 1 to 64 characters among letters, digits and - _ . @",
            crate::text::clean(s, 80)
        )))
    }
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n.max(1)).expect("at least 1")
}

impl Identities {
    /// The registry over a store's credentials (None: in memory, for local use and tests).
    pub fn open(cfg: IdentityConfig, store: Option<CredentialStore>) -> Result<Identities> {
        Identities::open_with(cfg, store, None)
    }

    /// [`Identities::open`] with the store's invitations (enrolment; None: in memory).
    pub fn open_with(
        cfg: IdentityConfig,
        store: Option<CredentialStore>,
        invitations: Option<InvitationStore>,
    ) -> Result<Identities> {
        let mut state = State::default();
        state.load(store, invitations)?;
        let quota = Quota::per_minute(nz(cfg.registrations_per_minute))
            .allow_burst(nz(cfg.registration_burst));
        let enrolments =
            Quota::per_hour(nz(cfg.enrolments_per_hour)).allow_burst(nz(cfg.enrolment_burst));
        // Farm-wide, open enrolments may come ten minutes' worth at once.
        let open_enrolments =
            Quota::per_hour(nz(cfg.open_enrolments_per_hour)).allow_burst(nz(cfg
                .open_enrolments_per_hour
                .div_ceil(6)
                .max(cfg.enrolment_burst)));
        Ok(Identities(Arc::new(Inner {
            admin_sha256: cfg.admin_token.as_deref().map(token_sha256),
            registrations: DefaultKeyedRateLimiter::keyed(quota),
            enrolments: DefaultKeyedRateLimiter::keyed(enrolments),
            open_enrolments: DefaultDirectRateLimiter::direct(open_enrolments),
            admin_guesses: Mutex::new(HashMap::new()),
            cfg,
            state: Mutex::new(state),
            events: Mutex::new(None),
        })))
    }

    /// Record credential changes in `log` from now on (added, blocked, unblocked and revoked
    /// by the operator; blocks for invalid results are the service's events).
    pub fn set_events(&self, log: EventLog) {
        *self.0.events.lock().unwrap_or_else(|p| p.into_inner()) = Some(log);
    }

    fn record(&self, e: crate::events::EventRecord) {
        let log = self
            .0
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(log) = log {
            log.record_durable(e);
        }
    }

    /// Let go of the store's handles (credentials, invitations, the event log), returned so
    /// that the caller decides where they are dropped; until [`Identities::reattach`], every
    /// change is refused ([`IdentityError::Reopening`]) and authentication goes on from memory.
    pub fn detach(
        &self,
    ) -> (
        Option<CredentialStore>,
        Option<InvitationStore>,
        Option<EventLog>,
    ) {
        let mut st = self.lock();
        st.detached = true;
        let taken = (st.store.take(), st.invitation_store.take());
        drop(st);
        let events = self
            .0
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        (taken.0, taken.1, events)
    }

    /// Serve from a reopened store: its credentials and invitations replace those in memory
    /// (sessions stay), and changes are recorded in it and in `events` again.
    pub fn reattach(
        &self,
        store: CredentialStore,
        invitations: InvitationStore,
        events: EventLog,
    ) -> Result<()> {
        self.lock().load(Some(store), Some(invitations))?;
        self.set_events(events);
        Ok(())
    }

    /// Local use: anonymous, in memory.
    pub fn local() -> Identities {
        Identities::open(IdentityConfig::local(), None).expect("no store to read")
    }

    /// The settings.
    pub fn config(&self) -> &IdentityConfig {
        &self.0.cfg
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The worker credential of a request (before its body is read).
    pub fn authenticate_worker(&self, meta: &MetadataMap) -> Result<Principal> {
        let st = self.lock();
        let Some(token) = bearer_token(meta) else {
            if self.0.cfg.anonymous_workers && st.records.is_empty() {
                return Ok(Principal::Anonymous);
            }
            return Err(IdentityError::Unauthenticated(
                "this coordinator requires a worker credential (--token)".into(),
            ));
        };
        let h = token_sha256(token);
        if let Some(r) = st.by_hash.get(&h).and_then(|n| st.records.get(n)) {
            return match r.state {
                CredentialState::Active => Ok(Principal::Worker(Arc::new(WorkerCredential {
                    name: r.name.clone(),
                    owner: r.owner.clone(),
                    trusted: r.trusted,
                }))),
                CredentialState::Blocked => Err(IdentityError::PermissionDenied(format!(
                    "worker credential {} is blocked: {}",
                    r.name, r.reason
                ))),
                CredentialState::Revoked => Err(IdentityError::Unauthenticated(
                    "worker credential revoked".into(),
                )),
            };
        }
        if self.0.admin_sha256.is_some_and(|a| ct_eq(&a, &h)) {
            return Err(IdentityError::PermissionDenied(
                "the admin credential cannot be used by workers".into(),
            ));
        }
        Err(IdentityError::Unauthenticated(
            "unknown or revoked worker credential".into(),
        ))
    }

    /// [`Identities::authenticate_admin`] of a request from `peer`: an address that sent
    /// [`ADMIN_GUESSES`] wrong admin tokens within [`ADMIN_GUESS_WINDOW`] is refused, right
    /// token or not, until its window ends (guessing runs at a few tries a minute).
    pub fn authenticate_admin_from(&self, meta: &MetadataMap, peer: Option<IpAddr>) -> Result<()> {
        let key = peer.map(crate::rpc::conn::address_key);
        let now = Instant::now();
        if let Some(ip) = key {
            let g = self
                .0
                .admin_guesses
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some((start, n)) = g.get(&ip)
                && now.duration_since(*start) < ADMIN_GUESS_WINDOW
                && *n >= ADMIN_GUESSES
            {
                let wait = ADMIN_GUESS_WINDOW.saturating_sub(now.duration_since(*start));
                return Err(IdentityError::ResourceExhausted(format!(
                    "too many wrong admin tokens from {ip}; try again in {} s",
                    wait.as_secs() + 1
                )));
            }
        }
        let r = self.authenticate_admin(meta);
        if let (Err(IdentityError::Unauthenticated(_)), Some(ip)) = (&r, key) {
            let mut g = self
                .0
                .admin_guesses
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if g.len() >= MAX_GUESSING_ADDRESSES {
                g.retain(|_, (start, _)| now.duration_since(*start) < ADMIN_GUESS_WINDOW);
            }
            let e = g.entry(ip).or_insert((now, 0));
            if now.duration_since(e.0) >= ADMIN_GUESS_WINDOW {
                *e = (now, 0);
            }
            e.1 += 1;
            if e.1 == ADMIN_GUESSES {
                tracing::warn!(peer = %ip, "admin token guessing: calls from this address refused for a minute");
            }
        }
        r
    }

    /// Check that a request carries the admin credential (before its body is read).
    pub fn authenticate_admin(&self, meta: &MetadataMap) -> Result<()> {
        let token = bearer_token(meta);
        let st = self.lock();
        if let Some(t) = token
            && st.by_hash.contains_key(&token_sha256(t))
        {
            return Err(IdentityError::PermissionDenied(
                "worker credentials cannot call admin RPCs".into(),
            ));
        }
        match (self.0.admin_sha256, token) {
            (Some(a), Some(t)) if ct_eq(&a, &token_sha256(t)) => Ok(()),
            (Some(_), _) => Err(IdentityError::Unauthenticated(
                "admin RPCs require the admin token".into(),
            )),
            (None, _) if st.records.is_empty() => Ok(()),
            (None, _) => Err(IdentityError::PermissionDenied(
                "worker credentials exist: admin RPCs need an admin token (set admin_token)".into(),
            )),
        }
    }

    /// The interceptor of the worker service: authenticates and attaches the [`Principal`].
    pub fn worker_interceptor(
        &self,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone + Send + Sync + 'static
    {
        let ids = self.clone();
        move |mut req: Request<()>| {
            let p = ids.authenticate_worker(req.metadata()).map_err(|e| {
                tracing::debug!(peer = ?req.remote_addr(), error = %e, "worker call refused");
                to_status(&e)
            })?;
            req.extensions_mut().insert(p);
            Ok(req)
        }
    }

    /// The interceptor of the admin service.
    pub fn admin_interceptor(
        &self,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone + Send + Sync + 'static
    {
        let ids = self.clone();
        move |req: Request<()>| {
            let peer = req.remote_addr().map(|a| a.ip());
            ids.authenticate_admin_from(req.metadata(), peer)
                .map_err(|e| {
                    tracing::debug!(peer = ?req.remote_addr(), error = %e, "admin call refused");
                    to_status(&e)
                })?;
            Ok(req)
        }
    }

    fn live_sessions(&self, st: &State, credential: &str, now: Instant) -> usize {
        st.sessions
            .values()
            .filter(|s| {
                s.credential.as_deref() == Some(credential)
                    && now.duration_since(s.last_seen) <= self.0.cfg.session_timeout
            })
            .count()
    }

    /// Open a session: check the registration rate of `peer` and the session cap of the
    /// credential, then run `register` (the service's registration) and bind the worker id it
    /// returns to the credential.
    pub fn open_session<E>(
        &self,
        p: &Principal,
        peer: Option<IpAddr>,
        register: impl FnOnce() -> std::result::Result<Uuid, E>,
    ) -> std::result::Result<Uuid, SessionError<E>> {
        if let Some(ip) = peer
            && self.0.registrations.check_key(&ip).is_err()
        {
            return Err(SessionError::Identity(IdentityError::ResourceExhausted(
                format!(
                    "too many registrations from {ip} (at most {} per minute); try again later",
                    self.0.cfg.registrations_per_minute
                ),
            )));
        }
        let now = Instant::now();
        let mut st = self.lock();
        if let Principal::Worker(w) = p {
            let cap = if w.trusted {
                self.0.cfg.max_sessions_trusted
            } else {
                self.0.cfg.max_sessions_untrusted
            };
            if self.live_sessions(&st, &w.name, now) >= cap {
                return Err(SessionError::Identity(IdentityError::ResourceExhausted(
                    format!(
                        "worker credential {} already has {cap} live sessions (stop one, or wait for it to time out)",
                        w.name
                    ),
                )));
            }
        }
        let wid = register().map_err(SessionError::Register)?;
        st.sessions.insert(
            wid,
            Session {
                credential: p.credential().map(str::to_string),
                last_seen: now,
            },
        );
        Ok(wid)
    }

    /// Check that worker id `wid` was opened with the caller's credential (and note the call).
    pub fn check_session(&self, p: &Principal, wid: &Uuid) -> Result<()> {
        let mut st = self.lock();
        match st.sessions.get_mut(wid) {
            Some(s) if s.credential.as_deref() == p.credential() => {
                s.last_seen = Instant::now();
                Ok(())
            }
            _ => Err(IdentityError::UnknownSession(*wid)),
        }
    }

    /// Forget sessions silent for longer than the session timeout and idle rate-limiter
    /// entries (called periodically by the server).
    pub fn expire_sessions(&self) {
        let now = Instant::now();
        let timeout = self.0.cfg.session_timeout;
        self.lock()
            .sessions
            .retain(|_, s| now.duration_since(s.last_seen) <= timeout);
        self.0.registrations.retain_recent();
        self.0.enrolments.retain_recent();
    }

    /// Create a worker credential; returns its token (shown once: only its hash is kept).
    pub fn add(
        &self,
        name: &str,
        owner: Option<&str>,
        trusted: bool,
    ) -> Result<(String, CredentialRecord)> {
        valid_label("credential name", name)?;
        let owner = owner.unwrap_or(name);
        valid_label("owner", owner)?;
        let token = new_token();
        let rec = CredentialRecord {
            name: name.to_string(),
            owner: owner.to_string(),
            trusted,
            state: CredentialState::Active,
            reason: String::new(),
            created_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            token_sha256: token_sha256(&token),
        };
        let mut st = self.lock();
        st.writable()?;
        let taken = match &st.store {
            Some(s) => !s.insert_new(&rec)?,
            None => st.records.contains_key(name),
        };
        if taken {
            return Err(IdentityError::FailedPrecondition(format!(
                "a worker credential named {name:?} exists already"
            )));
        }
        st.by_hash.insert(rec.token_sha256, rec.name.clone());
        st.records.insert(rec.name.clone(), rec.clone());
        tracing::info!(name, owner, trusted, "worker credential added");
        drop(st);
        self.record(event(
            EventKind::CredentialAdded,
            name,
            owner,
            if trusted { "trusted" } else { "untrusted" }.into(),
        ));
        Ok((token, rec))
    }

    /// Every credential with its live session count.
    pub fn list(&self) -> Vec<CredentialInfo> {
        let now = Instant::now();
        let st = self.lock();
        st.records
            .values()
            .map(|r| CredentialInfo {
                record: r.clone(),
                live_sessions: self.live_sessions(&st, &r.name, now),
            })
            .collect()
    }

    /// Block, unblock (state `Active`) or revoke a credential. Returns the record and the
    /// worker ids of its sessions, which end at once (the caller drops them from the service
    /// so that their leases go back to the queue).
    pub fn set_state(
        &self,
        name: &str,
        state: CredentialState,
        reason: &str,
    ) -> Result<(CredentialRecord, Vec<Uuid>)> {
        let (rec, ended) = self.change_state(name, state, reason)?;
        let kind = match state {
            CredentialState::Active => EventKind::CredentialUnblocked,
            CredentialState::Blocked => EventKind::CredentialBlocked,
            CredentialState::Revoked => EventKind::CredentialRevoked,
        };
        self.record(event(kind, name, &rec.owner, rec.reason.clone()));
        Ok((rec, ended))
    }

    /// Block a credential the service caught with too many invalid results (the service
    /// records that event itself); returns the sessions ended, as [`Identities::set_state`].
    pub fn block_for_invalid_results(
        &self,
        name: &str,
        reason: &str,
    ) -> Result<(CredentialRecord, Vec<Uuid>)> {
        self.change_state(name, CredentialState::Blocked, reason)
    }

    fn change_state(
        &self,
        name: &str,
        state: CredentialState,
        reason: &str,
    ) -> Result<(CredentialRecord, Vec<Uuid>)> {
        let mut st = self.lock();
        st.writable()?;
        let Some(mut rec) = st.records.get(name).cloned() else {
            return Err(IdentityError::NotFound(name.to_string()));
        };
        if rec.state == CredentialState::Revoked && state != CredentialState::Revoked {
            return Err(IdentityError::FailedPrecondition(format!(
                "worker credential {name} is revoked for good; add a new one"
            )));
        }
        rec.state = state;
        rec.reason = crate::text::clean(reason, crate::text::MAX_REASON_CHARS);
        if let Some(s) = &st.store {
            s.put(&rec)?;
        }
        if state == CredentialState::Revoked {
            st.by_hash.remove(&rec.token_sha256);
        }
        st.records.insert(rec.name.clone(), rec.clone());
        let mut ended = Vec::new();
        if state != CredentialState::Active {
            st.sessions.retain(|id, s| {
                let mine = s.credential.as_deref() == Some(name);
                if mine {
                    ended.push(*id);
                }
                !mine
            });
        }
        tracing::info!(name, state = state.as_str(), reason = %rec.reason, sessions_ended = ended.len(), "worker credential changed");
        Ok((rec, ended))
    }
}

/// Why [`Identities::open_session`] failed: a limit, or the service's registration.
#[derive(Debug)]
pub enum SessionError<E> {
    /// Rate or session limit.
    Identity(IdentityError),
    /// The service refused the registration.
    Register(E),
}

mod enrol;
pub use enrol::{Enrolled, new_code};

#[cfg(test)]
mod tests;
