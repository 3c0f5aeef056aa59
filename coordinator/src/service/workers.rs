//! Workers: software checks (protocol, engine, evaluation, search signature), registration and
//! its contributor (see [`super::trust`]), heartbeats, and workers that leave: dropped by the
//! operator or blocked for invalid results.

use super::jobs::{Jobs, WorkerEntry};
use super::{Coordinator, trust};
use crate::error::{CoordinatorError, Result};
use crate::events::{EventKind, event};
use crate::store::Batch;
use bookfarm_engine::search::SearchSignature;
use bookfarm_proto::PROTOCOL_VERSION;
use bookfarm_proto::domain::{CreditNote, Identity};
use std::collections::{HashSet, VecDeque};
use std::time::Duration;
use uuid::Uuid;

/// Called with a contributor's name when it is blocked for invalid results: the server blocks
/// the credential and returns the worker ids of its sessions, which the service then forgets
/// (their leases go back to the queue).
pub type BlockHook = Box<dyn Fn(&str) -> Vec<Uuid> + Send + Sync>;

/// The block hook's slot (Debug without the closure).
#[derive(Default)]
pub(super) struct HookSlot(pub(super) Option<BlockHook>);

impl std::fmt::Debug for HookSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "HookSlot(set)"
        } else {
            "HookSlot(none)"
        })
    }
}

/// A remote worker as it registers (see [`Coordinator::register_remote`]).
#[derive(Debug, Clone, Copy)]
pub struct RemoteWorker<'a> {
    /// Its name (cut to 128 characters).
    pub name: &'a str,
    /// Its search threads.
    pub threads: u32,
    /// Its credential's (name, owner); `None`: anonymous.
    pub credential: Option<(&'a str, &'a str)>,
    /// The operator trusts the credential.
    pub trusted: bool,
    /// It searches only part of the time.
    pub part_time: bool,
    /// The bookfarm release it runs (empty: not told).
    pub release: &'a str,
}

impl Coordinator {
    /// Check a worker's software: protocol, engine, evaluation and search signature.
    /// Credentials are checked before a request reaches the service (`crate::identity`).
    pub fn check_identity(&self, id: &Identity) -> Result<()> {
        self.check_identity_pinning(id, false)
    }

    /// [`Coordinator::check_identity`]; `may_pin`: the caller is trusted (given, earned or
    /// root standing), so its signature pins a book that has none. An untrusted caller's
    /// signature never pins: until a trusted one does, its calls pass the signature check.
    fn check_identity_pinning(&self, id: &Identity, may_pin: bool) -> Result<()> {
        let cfg = &self.0.cfg;
        if id.protocol_version != PROTOCOL_VERSION {
            return Err(CoordinatorError::ProtocolVersion {
                got: id.protocol_version,
                want: PROTOCOL_VERSION,
                install: self.install_advice(),
            });
        }
        if let Some(v) = &cfg.engine_version
            && *v != id.engine_version
        {
            return Err(CoordinatorError::EngineVersion {
                got: id.engine_version.clone(),
                want: v.clone(),
                install: self.install_advice(),
            });
        }
        if let Some(h) = &cfg.eval_hash
            && *h != id.eval_hash
        {
            return Err(CoordinatorError::EvalHash {
                got: id.eval_hash.clone(),
                want: h.clone(),
            });
        }
        self.check_signature(&id.search_signature, may_pin)
    }

    /// What a worker of another release should install: the release this coordinator expects,
    /// and where from (the operator's `worker_install_hint`).
    pub fn install_advice(&self) -> String {
        let hint = &self.0.cfg.worker_install_hint;
        if hint.is_empty() {
            format!("install bookfarm-worker {}", bookfarm_proto::RELEASE)
        } else {
            format!(
                "install bookfarm-worker {} ({hint})",
                bookfarm_proto::RELEASE
            )
        }
    }

    /// A worker's search signature must be the book's; the first one a trusted caller sends
    /// (`may_pin`) pins the book when nothing did before.
    fn check_signature(&self, text: &str, may_pin: bool) -> Result<()> {
        let Some(theirs) = SearchSignature::parse(text) else {
            return Err(CoordinatorError::Signature(if text.is_empty() {
                "the worker sent none (upgrade the worker)".into()
            } else {
                format!("cannot parse {text:?}")
            }));
        };
        let mut pinned = self.0.signature.lock().unwrap_or_else(|p| p.into_inner());
        match &*pinned {
            Some(ours) if *ours != theirs => Err(CoordinatorError::Signature(format!(
                "the worker's differs from the book's: {} (worker vs book)",
                theirs.differences(ours).join("; ")
            ))),
            Some(_) => Ok(()),
            None if !may_pin => Ok(()),
            None => {
                let mut b = Batch::default();
                b.put_signature(&theirs.to_string())?;
                self.0.store.apply(b)?;
                self.0.store.flush()?;
                tracing::info!(signature = %theirs, "book pinned to the first worker's search signature");
                *pinned = Some(theirs);
                Ok(())
            }
        }
    }

    /// Register one of the coordinator's in-process workers (its own searches: the trust
    /// root); returns its id.
    pub fn register(&self, id: &Identity, name: &str, threads: u32) -> Result<Uuid> {
        let who = (trust::LOCAL.to_string(), String::new(), false, true);
        self.enroll(id, name, threads, None, who, false)
    }

    /// Register a worker run by `owner` (its credential's owner; `None`: anonymous local
    /// worker); returns its id.
    pub fn register_owned(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        owner: Option<&str>,
    ) -> Result<Uuid> {
        self.register_with(id, name, threads, owner, false)
    }

    /// [`Coordinator::register_owned`] with the trust the operator gave the credential (the
    /// owner stands for the credential's name: tests, benches).
    pub fn register_with(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        owner: Option<&str>,
        trusted: bool,
    ) -> Result<Uuid> {
        self.register_as(id, name, threads, owner.map(|o| (o, o)), trusted)
    }

    /// Register a remote worker: `credential` is its (credential name, owner), `None` for an
    /// anonymous worker (loopback only, while no credential exists: the operator's own, whose
    /// results count as trusted); `trusted` the operator's trust in the credential. The
    /// worker's results are credited to, and trusted as, the credential (see [`trust`]).
    pub fn register_as(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        credential: Option<(&str, &str)>,
        trusted: bool,
    ) -> Result<Uuid> {
        let w = RemoteWorker {
            name,
            threads,
            credential,
            trusted,
            part_time: false,
            release: "",
        };
        self.register_remote(id, &w)
    }

    /// [`Coordinator::register_as`] with what the worker tells of itself: whether it searches
    /// part-time, and its release.
    pub fn register_remote(&self, id: &Identity, w: &RemoteWorker<'_>) -> Result<Uuid> {
        let RemoteWorker {
            name,
            threads,
            credential,
            trusted,
            part_time,
            release,
        } = *w;
        let name: String = name.chars().take(128).collect();
        let (contributor, owner, given) = match credential {
            Some((c, o)) => (c.to_string(), o.to_string(), trusted),
            None => (
                format!("{} {name}", trust::ANONYMOUS),
                trust::ANONYMOUS.to_string(),
                true,
            ),
        };
        let wid = self.enroll(
            id,
            &name,
            threads,
            credential.map(|(_, o)| o),
            (contributor, owner, given, false),
            false,
        )?;
        if let Some(e) = self.jobs().workers.get_mut(&wid) {
            e.part_time = part_time;
            e.release = release.chars().take(32).collect();
        }
        if !release.is_empty() && release != bookfarm_proto::RELEASE {
            tracing::info!(worker_id = %wid, name, release, expected = bookfarm_proto::RELEASE, "worker of another release registered");
        }
        Ok(wid)
    }

    /// Register the coordinator's verifier (its own searches: the trust root).
    pub fn register_verifier(&self, id: &Identity, threads: u32) -> Result<Uuid> {
        let who = (trust::VERIFIER.to_string(), String::new(), false, true);
        self.enroll(id, "verifier", threads, None, who, true)
    }

    /// Register a worker as `contributor` = (name, owner, given trust, root).
    fn enroll(
        &self,
        id: &Identity,
        name: &str,
        threads: u32,
        owner: Option<&str>,
        contributor: (String, String, bool, bool),
        verifier: bool,
    ) -> Result<Uuid> {
        let (who, who_owner, given, root) = contributor;
        let trusted = given || root;
        let standing = self.jobs().trust.standing_of(&who, &self.0.cfg.trust);
        self.check_identity_pinning(id, trusted || standing != trust::Standing::Untrusted)?;
        let wid = self.jobs().seeded_id().unwrap_or_else(Uuid::new_v4);
        let now = self.now();
        let mut g = self.jobs();
        if g.trust.blocked(&who) {
            return Err(CoordinatorError::Blocked(who));
        }
        let before = g.trust.records.get(&who).cloned();
        g.trust.enroll(&who, &who_owner, given, root);
        if g.trust.records.get(&who) != before.as_ref()
            && let Some(r) = g.trust.records.get(&who)
        {
            let mut b = Batch::default();
            b.put_trust(&who, r)?;
            let r = r.clone();
            self.0.store.apply(b)?;
            g.trust.unwritten.remove(&who);
            g.trust.written.insert(who.clone(), r);
        }
        g.trust.verifiers += usize::from(verifier);
        g.add_worker(
            wid,
            WorkerEntry {
                name: name.chars().take(128).collect(),
                owner: owner.map(str::to_string),
                trusted,
                version: id.engine_version.chars().take(64).collect(),
                // Self-reported: credited (and shown) up to the configured maximum only.
                threads: threads.min(self.0.cfg.max_worker_threads.max(1)),
                last_seen: now,
                jobs: HashSet::new(),
                completed: 0,
                failed: 0,
                recent: VecDeque::new(),
                contributor: who.clone(),
                verifier,
                leased: 0,
                checks: 0,
                part_time: false,
                release: String::new(),
                available_until: None,
                slowness: None,
            },
        );
        g.update_gauges();
        tracing::info!(worker_id = %wid, name, threads, contributor = %who, "worker registered");
        let standing = g.trust.standing_of(&who, &self.0.cfg.trust);
        self.0.events.record(event(
            EventKind::WorkerJoined,
            name,
            owner.unwrap_or(""),
            format!(
                "{threads} threads, contributor {who} ({})",
                standing.as_str()
            ),
        ));
        Ok(wid)
    }

    /// The operator unblocked contributor `contributor`'s credential: its block for invalid
    /// results ends too (durable on return), so that its workers are served again. Its other
    /// counts stay (its invalid results included: one more caught blocks it again). Returns
    /// whether it was blocked.
    pub fn unblock_contributor(&self, contributor: &str) -> Result<bool> {
        let mut g = self.jobs();
        let Some(r) = g.trust.records.get_mut(contributor) else {
            return Ok(false);
        };
        if !r.blocked {
            return Ok(false);
        }
        r.blocked = false;
        let r = r.clone();
        let mut b = Batch::default();
        b.put_trust(contributor, &r)?;
        self.0.store.apply(b)?;
        self.0.store.flush()?;
        g.trust.unwritten.remove(contributor);
        g.trust.written.insert(contributor.to_string(), r);
        tracing::info!(
            contributor,
            "block for invalid results lifted by the operator"
        );
        Ok(true)
    }

    /// Refuse a worker whose contributor was blocked for invalid results.
    pub(super) fn check_blocked(g: &Jobs, worker: &Uuid) -> Result<()> {
        match g.workers.get(worker) {
            Some(w) if g.trust.blocked(&w.contributor) => {
                Err(CoordinatorError::Blocked(w.contributor.clone()))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn touch(g: &mut Jobs, worker: &Uuid, now: Duration) -> Result<()> {
        match g.workers.get_mut(worker) {
            Some(w) => {
                w.last_seen = now;
                Ok(())
            }
            None => Err(CoordinatorError::UnknownWorker(worker.to_string())),
        }
    }

    /// Heartbeat: extends the worker's leases; returns the listed jobs it no longer holds.
    pub fn heartbeat(&self, id: &Identity, worker: &Uuid, held: &[Uuid]) -> Result<Vec<Uuid>> {
        Ok(self.heartbeat_credit(id, worker, held)?.0)
    }

    /// [`Coordinator::heartbeat`], with what the worker's contributor is credited with (told
    /// to the worker, which shows it in its progress line).
    pub fn heartbeat_credit(
        &self,
        id: &Identity,
        worker: &Uuid,
        held: &[Uuid],
    ) -> Result<(Vec<Uuid>, CreditNote)> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        let cancelled = held
            .iter()
            .filter(|j| g.jobs.get(j).is_none_or(|e| !e.leased_to(worker)))
            .copied()
            .collect();
        let who = g
            .workers
            .get(worker)
            .map(|w| w.contributor.clone())
            .unwrap_or_default();
        let record = g.trust.records.get(&who);
        let credit = CreditNote {
            standing: g.trust.standing_of(&who, &self.0.cfg.trust).as_str().into(),
            results: record.map_or(0, |r| r.results),
            invalid: record.map_or(0, |r| r.invalid),
        };
        Ok((cancelled, credit))
    }

    /// Forget workers at once (their credential was revoked or blocked): their leases go back
    /// to the queue and their ids stop working. Returns how many jobs were re-queued.
    pub fn drop_workers(&self, workers: &[Uuid]) -> usize {
        let mut g = self.jobs();
        let mut n = 0;
        for w in workers {
            let owner = g.workers.get(w).and_then(|e| e.owner.clone());
            if let Some((name, k)) = g.remove_worker(*w) {
                n += k;
                self.0.events.record(event(
                    EventKind::WorkerLeft,
                    &name,
                    owner.as_deref().unwrap_or(""),
                    format!("session ended (credential blocked or revoked): {k} leases back in the queue"),
                ));
            }
        }
        g.update_gauges();
        n
    }

    /// Call `hook` with a contributor's name when it is blocked for invalid results.
    pub fn set_block_hook(&self, hook: BlockHook) {
        self.0.on_block.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(hook);
    }

    /// End the sessions of contributors just blocked for invalid results (see [`BlockHook`]).
    pub(super) fn end_blocked(&self, blocked: Vec<String>) {
        for b in blocked {
            tracing::warn!(contributor = %b, "blocked: too many invalid results");
            let ended = match &self.0.on_block.lock().unwrap_or_else(|p| p.into_inner()).0 {
                Some(hook) => hook(&b),
                None => Vec::new(),
            };
            self.drop_workers(&ended);
        }
    }
}
