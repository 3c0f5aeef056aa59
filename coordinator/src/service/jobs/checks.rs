//! Check jobs: replicas of searches answered already (see `super::super::trust`), and who may
//! take them.
//!
//! A check job sits in the job queue's [`JobClass::Check`] range, in a *lane* (its priority):
//! twice its [`CheckKind`]'s rank (settlements, then core checks, then validations, then spot
//! checks), plus one when an earned worker of another owner may take it. So a trust root (the
//! verifier, a trusted worker) walks the lanes in order, and an earned worker walks only the odd
//! lanes: neither walks checks it may not take (except the few its own answers wait in).
//!
//! Dispatch:
//! * the verifier takes every check first; a trusted worker takes settlements and validations
//!   first (the program waits for them), and core and spot checks only within
//!   `TrustRules::check_share` of its leases while round work is queued (checks never starve
//!   round work), else after it;
//! * a validation of a held result and a spot check of an earned result go to a trust root (its
//!   agreement is what lengthens the checked contributor's streak); when none took one within
//!   twice its level's mean search time, at least a second (the verifier and the trusted workers
//!   were not free), it opens to earned workers of other owners (a spot check within the same
//!   share); a disagreement is then settled by the root (`decide`);
//! * a core check is for trust roots only.

use super::{JobClass, JobEntry, Jobs, QueueKey, dequeue, enqueue};
use crate::service::trust::{CheckKind, Need, Standing, TrustRules};
use bookfarm_engine::search::LeafRequest;
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

/// The shortest wait of a validation or spot check for a trust root before earned workers of
/// other owners may take it (checks by earned peers do not lengthen the checked worker's
/// streak, so they stand in for trust roots only when those are busy for a while).
const RELAX_MIN: Duration = Duration::from_secs(1);

/// The queue lane of a check job waiting for `need` (see the module docs).
fn lane(need: &Need, relaxed: bool) -> u32 {
    let peer = need.min <= Standing::Earned || (relaxed && need.relaxable());
    (need.kind as u32) * 2 + u32::from(peer)
}

/// Whether checks of `kind` count against a worker's share (core and spot checks: nothing
/// waits for them but the end of the build).
pub(super) fn limited(kind: CheckKind) -> bool {
    matches!(kind, CheckKind::Core | CheckKind::Spot)
}

/// The lanes in queue order.
const LANES: u32 = 8;

impl Jobs {
    /// The first queued check job a worker of `standing`, contributor `who` and `owner` may
    /// take now; `limited`: its share of core and spot checks is used up while round work
    /// waits.
    pub(super) fn check_for(
        &self,
        standing: Standing,
        who: &str,
        owner: &str,
        limited: bool,
    ) -> Option<QueueKey> {
        let kind_of = |lane: u32| match lane / 2 {
            0 => CheckKind::Settle,
            1 => CheckKind::Core,
            2 => CheckKind::Validation,
            _ => CheckKind::Spot,
        };
        (0..LANES)
            .filter(|&l| standing >= Standing::Given || l % 2 == 1)
            .filter(|&l| !(limited && self::limited(kind_of(l))))
            .find_map(|l| {
                let from = (JobClass::Check, l, 0, Uuid::nil());
                let to = (JobClass::Check, l + 1, 0, Uuid::nil());
                self.queue.range(from..to).copied().find(|k| {
                    self.jobs
                        .get(&k.3)
                        .and_then(|j| j.need.as_ref())
                        .is_some_and(|n| n.admits(standing, who, owner))
                })
            })
    }

    /// Whether a check a finished build must wait for is pending: a provisional result in the
    /// decisive core, or a check of a result the book uses that a registered worker may take,
    /// as leasing decides ([`Need::admits`]: a check of an owner's result waits in vain for its
    /// owner's workers; a trusted worker's spot check waits for a verifier, which may never
    /// come). It answers for the workers registered now: one that registers later and may take
    /// such a check makes it pending again.
    pub(crate) fn checks_pending(&self, rules: &TrustRules) -> bool {
        if self.trust.core_unconfirmed() > 0 {
            return true;
        }
        // Each credential once: its workers share its standing and owner.
        let voices: HashSet<(Standing, &str, &str)> = self
            .workers
            .values()
            .map(|w| {
                let (standing, owner) = self.voice_of(&w.contributor, rules);
                (standing, w.contributor.as_str(), owner)
            })
            .collect();
        self.trust.cases().any(|(k, c)| {
            c.applied
                && self
                    .by_key
                    .get(k)
                    .and_then(|id| self.jobs.get(id))
                    .and_then(|j| j.need.as_ref())
                    .is_some_and(|n| {
                        voices
                            .iter()
                            .any(|&(standing, who, owner)| n.admits(standing, who, owner))
                    })
        })
    }

    /// How long a validation or spot check of `level` waits for a trust root (see the module
    /// docs).
    fn relax_after(&self, level: u8) -> Duration {
        self.search_time
            .get(&level)
            .map_or(RELAX_MIN, |mean| Duration::from_secs_f64(2.0 * mean))
            .max(RELAX_MIN)
    }

    /// Check jobs queued or leased now.
    pub(crate) fn check_jobs(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| j.class == JobClass::Check)
            .count()
    }

    /// How long the oldest check job now has waited since it became one (zero: none); forgets
    /// the start of checks that are gone.
    pub(crate) fn oldest_check(&mut self, now: Duration) -> Duration {
        let open: HashSet<LeafRequest> = self
            .jobs
            .values()
            .filter(|j| j.class == JobClass::Check)
            .map(|j| j.key)
            .collect();
        self.check_since.retain(|k, _| open.contains(k));
        self.check_since
            .values()
            .map(|&t| now.saturating_sub(t))
            .max()
            .unwrap_or_default()
    }

    /// Give job `id` the check `need` at `now`: its lane, and when a validation or spot check
    /// opens to earned workers. The caller unindexed it; it is queued again when nobody holds it.
    fn set_check(&mut self, id: Uuid, need: Need, now: Duration) {
        let relax = need
            .relaxable()
            .then(|| now + self.relax_after(self.jobs.get(&id).map_or(0, |j| j.key.level)));
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if let Some(t) = j.relax_at.take() {
            self.relax.remove(&(t, id));
        }
        j.class = JobClass::Check;
        self.check_since.entry(j.key).or_insert(now);
        j.prio = lane(&need, false);
        j.need = Some(need);
        j.relax_at = relax;
        j.queued = j.leases.is_empty();
        if j.queued {
            let k = j.queue_key(id);
            enqueue(&mut self.queue, &mut self.round_queued, k);
        }
        if let Some(t) = relax {
            self.relax.insert((t, id));
        }
    }

    /// Turn job `id` into a check job waiting for `need`, ending `worker`'s lease (its answer
    /// arrived): it goes back to the queue when nobody else holds it.
    pub(crate) fn make_check(&mut self, id: Uuid, worker: &Uuid, need: Need, now: Duration) {
        self.unindex(id);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let before = j.leases.len();
        j.leases.retain(|l| l.worker != *worker);
        if j.leases.len() < before {
            self.in_flight -= 1;
        }
        if let Some(w) = self.workers.get_mut(worker) {
            w.jobs.remove(&id);
        }
        self.set_check(id, need, now);
    }

    /// A check of `key`, whose case is open (its job exists: its need changes) or was opened
    /// now without a job (a core check of a result accepted earlier: a new job).
    pub(crate) fn add_check(&mut self, key: LeafRequest, need: Need, now: Duration) {
        let id = match self.by_key.get(&key) {
            Some(&id) => {
                self.unindex(id);
                id
            }
            None => {
                let id = self.new_id();
                self.by_key.insert(key, id);
                self.seq += 1;
                self.jobs.insert(
                    id,
                    JobEntry::fresh(key, JobClass::Check, 0, self.seq, false),
                );
                id
            }
        };
        self.set_check(id, need, now);
    }

    /// Open the validations and spot checks whose wait for a trust root is over to earned
    /// workers of other owners (they move to their kind's odd lane).
    pub(super) fn relax_due(&mut self, now: Duration) {
        while let Some(&(t, id)) = self.relax.first() {
            if t > now {
                break;
            }
            self.relax.remove(&(t, id));
            let queued = match self.jobs.get_mut(&id) {
                Some(j) => {
                    j.relax_at = None;
                    j.queued
                }
                None => continue,
            };
            if queued {
                let Some(k) = self.jobs.get(&id).map(|j| j.queue_key(id)) else {
                    continue;
                };
                dequeue(&mut self.queue, &mut self.round_queued, &k);
            }
            let Some(j) = self.jobs.get_mut(&id) else {
                continue;
            };
            if let Some(n) = j.need.as_mut() {
                n.relax();
                j.prio = lane(n, true);
            }
            if queued {
                let k = j.queue_key(id);
                enqueue(&mut self.queue, &mut self.round_queued, k);
            }
            self.trust.counters.relaxed_checks += 1;
        }
    }
}
