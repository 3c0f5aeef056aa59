//! The job table: jobs keyed by search request, the two queues (round work first, then
//! speculative work), leases, workers and counters. RPC handlers touch only this table
//! (through [`super::Coordinator`]).
//!
//! Invariants:
//! * a search request has at most one job (`by_key`); a job may have several leases at once
//!   (a speculative lease that became round work, a backup lease of a round search that runs
//!   far longer than its level's searches do), at most one per worker and at most
//!   [`MAX_LEASES`];
//! * a job is queued (`queue_key` set) only while it has no lease;
//! * round work is leased before any speculative work, and a speculative job never holds a
//!   round open: growth waits only for the requests it listed as round work;
//! * a job id is accepted at most once (`done`, persisted), so a duplicate submission changes
//!   nothing;
//! * `in_flight` counts leases (a job with two leases counts twice);
//! * a worker holds at most [`super::lease_cap`] jobs, and a lease never outlives
//!   [`max_lease_duration`] of its level by more than one expiry pass (heartbeats do not
//!   extend it).

mod checks;
mod fit;

pub(crate) use fit::Skipped;

use super::status::RATE_WINDOW;
use super::trust::{Need, Standing, TrustRules, TrustState, another_word};
use super::{QuarantineReport, ServiceConfig, max_lease_duration};
use crate::events::CostRecord;
use bookfarm_book::driver::RequestMap;
use bookfarm_engine::search::LeafRequest;
use bookfarm_proto::domain::{IdleReason, Job};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;
use uuid::Uuid;

/// The most leases one job may have at once.
pub(crate) const MAX_LEASES: usize = 2;

/// Why a job exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobClass {
    /// Growth waits for it: it holds the current pass open.
    Round,
    /// Growth will probably need it soon (see `Growth::speculate`): leased only when no round
    /// work is queued, dropped when a later plan no longer lists it.
    Speculative,
    /// A replica of a search answered already (a validation, a settlement, a core or spot
    /// check; see `super::trust`): leased only to workers its case admits (standing,
    /// contributor and owner), in the order of the `checks` room.
    Check,
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Leases granted (every class).
    pub leased: u64,
    /// Leases of speculative jobs.
    pub speculative_leased: u64,
    /// Backup leases (a second lease of a round search that runs long).
    pub backup_leased: u64,
    /// Results accepted.
    pub completed: u64,
    /// Accepted results of searches first leased speculatively.
    pub speculative_completed: u64,
    /// Duplicate submissions (a second lessee's result of an accepted search included).
    pub duplicates: u64,
    /// Failures reported.
    pub failed: u64,
    /// Leases expired.
    pub expired: u64,
    /// Invalid results rejected.
    pub rejected: u64,
}

/// One lease of a job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    pub(crate) worker: Uuid,
    /// When it began (bounded by [`max_lease_duration`]).
    pub(crate) at: Duration,
}

#[derive(Debug)]
pub(crate) struct JobEntry {
    pub(crate) key: LeafRequest,
    pub(crate) class: JobClass,
    /// Position in growth's list of its class (lower first).
    prio: u32,
    seq: u64,
    pub(crate) attempt: u32,
    pub(crate) failures: u32,
    /// Owners whose workers reported this job as failed (see [`super::Coordinator::fail`]).
    pub(crate) failed_owners: Vec<String>,
    /// Current leases (at most one per worker, at most [`MAX_LEASES`]).
    pub(crate) leases: Vec<Lease>,
    /// Every worker that held the job (a late result from one of them is still accepted while
    /// the job exists; once it is a check job, as one more replica, which closes the check only
    /// if it adds a word: see `super::trust`).
    pub(crate) lessees: Vec<Uuid>,
    /// Leased speculatively at least once (its result counts as prefetched).
    pub(crate) prefetched: bool,
    /// Who may answer a [`JobClass::Check`] job.
    pub(crate) need: Option<Need>,
    /// When a validation or spot check becomes open to earned workers of other owners (see
    /// [`checks`]).
    relax_at: Option<Duration>,
    /// When a worker was first refused it as a long job held for fast always-on workers (see
    /// [`fit`]).
    reserved_since: Option<Duration>,
    queued: bool,
}

impl JobEntry {
    /// A job never leased, failed or checked yet; `queued` says whether it enters the lease queue
    /// now.
    fn fresh(key: LeafRequest, class: JobClass, prio: u32, seq: u64, queued: bool) -> Self {
        JobEntry {
            key,
            class,
            prio,
            seq,
            attempt: 0,
            failures: 0,
            failed_owners: Vec::new(),
            leases: Vec::new(),
            lessees: Vec::new(),
            prefetched: false,
            need: None,
            relax_at: None,
            reserved_since: None,
            queued,
        }
    }

    fn queue_key(&self, id: Uuid) -> QueueKey {
        (self.class, self.prio, self.seq, id)
    }

    /// Whether `worker` holds a lease of this job now.
    pub(crate) fn leased_to(&self, worker: &Uuid) -> bool {
        self.leases.iter().any(|l| l.worker == *worker)
    }
}

/// Queue order: round work first, then growth's order, then arrival.
type QueueKey = (JobClass, u32, u64, Uuid);

/// Insert into the queue, counting round work.
fn enqueue(queue: &mut BTreeSet<QueueKey>, round: &mut usize, k: QueueKey) {
    if queue.insert(k) && k.0 == JobClass::Round {
        *round += 1;
    }
}

/// Remove from the queue, counting round work.
fn dequeue(queue: &mut BTreeSet<QueueKey>, round: &mut usize, k: &QueueKey) {
    if queue.remove(k) && k.0 == JobClass::Round {
        *round -= 1;
    }
}

/// One accepted result, for the recent-window figures (results/s, nodes/s, mean search time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) at: Duration,
    pub(crate) nodes: u64,
    pub(crate) search_us: u64,
}

#[derive(Debug)]
pub(crate) struct WorkerEntry {
    pub(crate) name: String,
    /// Who runs the worker (its credential's owner); `None` for an anonymous local worker,
    /// whose failure reports count one by one.
    pub(crate) owner: Option<String>,
    /// Its credential is trusted by the operator.
    pub(crate) trusted: bool,
    /// Engine version it registered with.
    pub(crate) version: String,
    pub(crate) threads: u32,
    pub(crate) last_seen: Duration,
    pub(crate) jobs: HashSet<Uuid>,
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    pub(crate) recent: VecDeque<Sample>,
    /// Whose results these are (see `super::trust`): a credential name, `(local)`,
    /// `(coordinator)` or `(anonymous) NAME`.
    pub(crate) contributor: String,
    /// The coordinator's verifier: leases check jobs only.
    pub(crate) verifier: bool,
    /// Jobs leased to it since it registered.
    pub(crate) leased: u64,
    /// Core and spot checks among them (bounded by `TrustRules::check_share` while round
    /// work waits).
    pub(crate) checks: u64,
    /// It searches only part of the time (active hours, a battery it pauses on).
    pub(crate) part_time: bool,
    /// The bookfarm release it runs (empty: not told, an in-process worker).
    pub(crate) release: String,
    /// When its active hours end, on the service's clock (from its last lease call; None:
    /// no limit).
    pub(crate) available_until: Option<Duration>,
    /// Its lease-to-result times over the farm's for the same searches, an exponential mean
    /// (1: the farm's pace; None: not measured yet; see [`fit`]).
    pub(crate) slowness: Option<f64>,
}

#[derive(Debug, Default)]
pub(crate) struct Jobs {
    pub(crate) jobs: HashMap<Uuid, JobEntry>,
    /// Ids from a counter under this key instead of the clock (see
    /// `ServiceConfig::seeded_ids`): the key and the last id's number.
    pub(crate) seeded_ids: Option<(u64, u64)>,
    by_key: HashMap<LeafRequest, Uuid>,
    queue: BTreeSet<QueueKey>,
    /// Round jobs with a lease, in growth's order (candidates for a backup lease).
    leased_round: BTreeSet<(u32, u64, Uuid)>,
    seq: u64,
    pub(crate) in_flight: usize,
    pub(crate) done: HashSet<Uuid>,
    pub(crate) workers: HashMap<Uuid, WorkerEntry>,
    pub(crate) quarantined: HashMap<LeafRequest, QuarantineReport>,
    /// Requests whose results were accepted but not yet applied by growth: growth may still
    /// list them as needed, and they must not get a second job.
    pub(crate) landed: HashSet<LeafRequest>,
    /// Jobs that growth may still wait for were removed outside a sync (a caught
    /// contributor's open checks, restarted): the next growth run hands the asynchronous
    /// program's needed set over whole, since its changes alone would never list them again.
    pub(crate) resync: bool,
    pub(crate) counters: Counters,
    pub(crate) recent: VecDeque<Sample>,
    /// Search threads of `workers` (kept with it).
    threads: usize,
    /// Round jobs in `queue`.
    round_queued: usize,
    /// Mean lease-to-result time per level, measured by the coordinator (not reported by
    /// workers, who could lie about it): what "runs far longer than usual" means.
    search_time: HashMap<u8, f64>,
    /// The same per (level, empties): a job's expected duration (see [`fit`]).
    shape_time: HashMap<(u8, u8), f64>,
    /// Whether a worker preferred for long jobs is registered, and when that was computed
    /// (see [`fit`]).
    preferred_cache: Option<(Duration, bool)>,
    /// Results accepted per contributor — (anonymous, owner or an anonymous worker's name) —
    /// since the history last took them (see `super::history`).
    pub(crate) contributions: HashMap<(bool, String), u64>,
    /// Standing, credit and open validation cases.
    pub(crate) trust: TrustState,
    /// Queued validations and spot checks by when they open to earned workers of other owners
    /// (see [`checks`]).
    relax: BTreeSet<(Duration, Uuid)>,
    /// What the searches cost since the coordinator started, and since the running program
    /// started (see [`Jobs::charge`]).
    pub(crate) cost: Cost,
    /// Contributors whose block is in the event log (blocked when the store was opened, or
    /// since): a contributor caught again after its block is not reported blocked again.
    pub(crate) blocks_recorded: HashSet<String>,
    /// When each check job's request became a check (see [`Jobs::oldest_check`]).
    pub(crate) check_since: HashMap<LeafRequest, Duration>,
}

/// Search time and searches accepted, in all and per program.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cost {
    /// Since the coordinator started.
    pub(crate) total: CostRecord,
    /// Since the running program started (reset by the growth runner at each start).
    pub(crate) program: CostRecord,
    /// The running program's id (0: none started since the coordinator started).
    pub(crate) program_id: u64,
    /// The queued program each request searched ahead of the running program's own belongs
    /// to (a queued analysis's levels: see `Growth::ahead_owners`), as of the last growth
    /// run.
    pub(crate) ahead: RequestMap<u64>,
    /// What was charged to queued programs (searches done ahead of the running program),
    /// by program id: a program starts with it as its cost so far.
    pub(crate) queued: HashMap<u64, CostRecord>,
}

impl Jobs {
    /// A new job id: time-ordered (the store's job index then grows at its end), or the next
    /// of the seeded counter.
    pub(crate) fn new_id(&mut self) -> Uuid {
        self.seeded_id().unwrap_or_else(Uuid::now_v7)
    }

    /// The next id of the seeded counter, if ids are seeded.
    pub(crate) fn seeded_id(&mut self) -> Option<Uuid> {
        let (key, n) = self.seeded_ids.as_mut()?;
        *n += 1;
        Some(Uuid::from_u64_pair(*key, *n))
    }

    /// Charge an accepted search of `key` taking `search_us` microseconds (a `replica`: not
    /// the first answer to its request) to the farm and to the program it belongs to: the
    /// queued program it was searched ahead for, else the running program. A search that lands
    /// while no program runs (leased before its program ended) is the farm's alone: the ended
    /// program's cost was recorded with its event.
    pub(crate) fn charge(&mut self, key: &LeafRequest, search_us: u64, replica: bool) {
        let cost = &mut self.cost;
        let program = match cost.ahead.get(key) {
            Some(id) => cost.queued.entry(*id).or_default(),
            None => &mut cost.program,
        };
        for c in [&mut cost.total, program] {
            c.cpu_us = c.cpu_us.saturating_add(search_us);
            c.searches += 1;
            if replica {
                c.replica_cpu_us = c.replica_cpu_us.saturating_add(search_us);
            }
        }
    }

    /// Jobs waiting for a worker (both classes).
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Round jobs waiting for a worker.
    pub(crate) fn queued_round(&self) -> usize {
        self.round_queued
    }

    /// Search threads of the registered workers.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// The requests being searched now (leased).
    pub(crate) fn searching(&self) -> bookfarm_book::driver::RequestSet {
        self.jobs
            .values()
            .filter(|j| !j.leases.is_empty())
            .map(|j| j.key)
            .collect()
    }

    /// Register a worker.
    pub(crate) fn add_worker(&mut self, id: Uuid, w: WorkerEntry) {
        self.threads += w.threads as usize;
        self.preferred_cache = None;
        if let Some(old) = self.workers.insert(id, w) {
            self.threads -= old.threads as usize;
        }
    }

    pub(crate) fn update_gauges(&self) {
        metrics::gauge!(crate::telemetry::QUEUE_DEPTH).set(self.queue.len() as f64);
        metrics::gauge!(crate::telemetry::IN_FLIGHT).set(self.in_flight as f64);
        metrics::gauge!(crate::telemetry::WORKERS).set(self.workers.len() as f64);
    }

    /// Drop rate samples older than the window: the farm's and `worker`'s, or every
    /// worker's when `None` (status reports; per call it would cost O(workers)).
    pub(crate) fn trim_rates(&mut self, now: Duration, worker: Option<&Uuid>) {
        let cut = now.saturating_sub(RATE_WINDOW);
        let trim = |v: &mut VecDeque<Sample>| {
            while v.front().is_some_and(|l| l.at < cut) {
                v.pop_front();
            }
        };
        trim(&mut self.recent);
        match worker {
            Some(id) => {
                if let Some(w) = self.workers.get_mut(id) {
                    trim(&mut w.recent);
                }
            }
            None => self.workers.values_mut().for_each(|w| trim(&mut w.recent)),
        }
    }

    /// Make the table hold exactly the searches growth wants, in its order: `needed` is round
    /// work (the first request blocks the serial program, so it goes first), `speculative`
    /// (when given; `None` keeps the current speculative jobs) what it will probably need
    /// next. New requests get jobs, jobs change class and priority as listed, unleased jobs
    /// listed nowhere are dropped. Leased jobs are never dropped (their results are still
    /// stored when they come); a leased job no longer needed becomes speculative. Quarantined
    /// requests and requests whose results landed but are not applied yet are skipped.
    pub(crate) fn sync(&mut self, needed: &[LeafRequest], speculative: Option<&[LeafRequest]>) {
        let ranked: Vec<(LeafRequest, u32)> = needed
            .iter()
            .enumerate()
            .map(|(i, k)| (*k, u32::try_from(i).unwrap_or(u32::MAX)))
            .collect();
        self.sync_ranked(&ranked, speculative);
    }

    /// [`Jobs::sync`] with growth's own priorities for the round work (lower first; equal
    /// priorities in the list's order): the asynchronous program's whole needed set, at its
    /// start, before [`Jobs::round_delta`] keeps it up to date.
    pub(crate) fn sync_ranked(
        &mut self,
        needed: &[(LeafRequest, u32)],
        speculative: Option<&[LeafRequest]>,
    ) {
        // Cost: O(needed + round jobs), plus O(jobs) when a new speculative plan is given; a
        // big farm holds thousands of speculative leases, which a sync without a plan never
        // walks.
        let mut round: HashMap<LeafRequest, u32> = HashMap::with_capacity(needed.len());
        for &(k, p) in needed {
            round.entry(k).and_modify(|q| *q = (*q).min(p)).or_insert(p);
        }
        let plan = speculative.map(|list| {
            let mut m: HashMap<LeafRequest, u32> = HashMap::with_capacity(list.len());
            for (i, k) in list.iter().enumerate() {
                if !round.contains_key(k) {
                    m.entry(*k).or_insert(u32::try_from(i).unwrap_or(u32::MAX));
                }
            }
            m
        });
        // Round jobs no longer needed: speculative if planned, dropped if unleased, otherwise
        // kept (their results are still stored when they come) as unplanned speculation.
        let current_round: Vec<Uuid> = self
            .queue
            .iter()
            .take_while(|k| k.0 == JobClass::Round)
            .map(|k| k.3)
            .chain(self.leased_round.iter().map(|k| k.2))
            .collect();
        for id in current_round {
            let Some(j) = self.jobs.get(&id) else {
                continue;
            };
            if round.contains_key(&j.key) {
                continue;
            }
            match plan.as_ref().and_then(|p| p.get(&j.key)) {
                Some(p) => self.place(id, JobClass::Speculative, *p),
                None if j.leases.is_empty() => {
                    self.remove(id);
                }
                None => self.place(id, JobClass::Speculative, u32::MAX),
            }
        }
        // A new plan replaces the old one: unleased speculation it drops goes.
        if let Some(plan) = &plan {
            let dropped: Vec<Uuid> = self
                .jobs
                .iter()
                .filter(|(_, j)| {
                    j.class == JobClass::Speculative
                        && j.leases.is_empty()
                        && !plan.contains_key(&j.key)
                        && !round.contains_key(&j.key)
                })
                .map(|(id, _)| *id)
                .collect();
            for id in dropped {
                self.remove(id);
            }
        }
        // In request order: new jobs of equal priority are queued (numbered) in this order,
        // which must not depend on a hash map's per-process order.
        let mut wanted: Vec<(LeafRequest, JobClass, u32)> = round
            .iter()
            .map(|(k, p)| (*k, JobClass::Round, *p))
            .chain(
                plan.iter()
                    .flatten()
                    .map(|(k, p)| (*k, JobClass::Speculative, *p)),
            )
            .collect();
        wanted.sort_unstable_by_key(|(k, c, p)| {
            (
                *c,
                *p,
                k.board.player,
                k.board.opponent,
                k.excluded,
                k.level,
            )
        });
        let mut new = Vec::new();
        for (key, class, prio) in wanted {
            if self.quarantined.contains_key(&key) || self.landed.contains(&key) {
                continue;
            }
            match self.by_key.get(&key).copied() {
                Some(id) => new.push((id, class, prio, false)),
                // Time-ordered ids: the store's job index (one entry per result) then grows at
                // its end instead of splitting nodes all over the tree. A job id grants
                // nothing by itself (results are taken only from a worker holding its lease),
                // so predictability does not matter.
                None => new.push((self.new_id(), class, prio, true)),
            }
            if let Some((id, _, _, true)) = new.last().copied() {
                self.by_key.insert(key, id);
                self.seq += 1;
                self.jobs
                    .insert(id, JobEntry::fresh(key, class, prio, self.seq, true));
            }
        }
        for (id, class, prio, created) in new {
            if created {
                if let Some(j) = self.jobs.get(&id) {
                    let k = j.queue_key(id);
                    enqueue(&mut self.queue, &mut self.round_queued, k);
                }
            } else {
                self.place(id, class, prio);
            }
        }
        self.update_gauges();
    }

    /// Change the round work by what growth's asynchronous program changed since the last
    /// call (`AsyncGrowth::take_delta`), at a cost of O(delta) instead of a whole
    /// [`Jobs::sync`]: `removed` requests are no longer round work (an unleased job is dropped,
    /// a leased one is kept as unplanned speculation: its result is still stored), `added`
    /// become round work at their priority (lower first, then first added first). The table
    /// must hold the program's needed set already ([`Jobs::sync_ranked`] at its start).
    /// Quarantined requests and requests whose results landed but are not applied yet are
    /// skipped, as in a sync.
    pub(crate) fn round_delta(&mut self, added: &[(LeafRequest, u32)], removed: &[LeafRequest]) {
        for k in removed {
            let Some(id) = self.by_key.get(k).copied() else {
                continue;
            };
            match self.jobs.get(&id) {
                Some(j) if j.class == JobClass::Round && j.leases.is_empty() => {
                    self.remove(id);
                }
                Some(j) if j.class == JobClass::Round => {
                    self.place(id, JobClass::Speculative, u32::MAX);
                }
                _ => {}
            }
        }
        for &(key, prio) in added {
            if self.quarantined.contains_key(&key) || self.landed.contains(&key) {
                continue;
            }
            match self.by_key.get(&key).copied() {
                Some(id) => self.place(id, JobClass::Round, prio),
                None => {
                    let id = self.new_id();
                    self.by_key.insert(key, id);
                    self.seq += 1;
                    let j = JobEntry::fresh(key, JobClass::Round, prio, self.seq, true);
                    let k = j.queue_key(id);
                    self.jobs.insert(id, j);
                    enqueue(&mut self.queue, &mut self.round_queued, k);
                }
            }
        }
        self.update_gauges();
    }

    /// Take job `id` out of the queue and the leased-round index (before its class or priority
    /// changes; the caller puts it back).
    fn unindex(&mut self, id: Uuid) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        if j.queued {
            let k = j.queue_key(id);
            dequeue(&mut self.queue, &mut self.round_queued, &k);
        }
        if j.class == JobClass::Round && !j.leases.is_empty() {
            self.leased_round.remove(&(j.prio, j.seq, id));
        }
    }

    /// Give job `id` its class and priority, keeping the queue and the leased-round index in
    /// step.
    fn place(&mut self, id: Uuid, class: JobClass, prio: u32) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        // A check job keeps its class until its case closes.
        if (j.class == class && j.prio == prio) || j.class == JobClass::Check {
            return;
        }
        self.unindex(id);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.class = class;
        j.prio = prio;
        if j.queued {
            let k = j.queue_key(id);
            enqueue(&mut self.queue, &mut self.round_queued, k);
        }
        if j.class == JobClass::Round && !j.leases.is_empty() {
            self.leased_round.insert((j.prio, j.seq, id));
        }
    }

    /// Lease up to `slots` jobs to `worker` at time `now`: queued round work, then queued
    /// speculative work, then backup leases of round searches that run far longer than their
    /// level's mean (`cfg.backup_after`; the search is a pure function of its request, so
    /// whichever lease answers first serves, and the other's result is a duplicate).
    #[cfg(test)]
    pub(crate) fn lease(
        &mut self,
        worker: &Uuid,
        slots: usize,
        now: Duration,
        cfg: &ServiceConfig,
    ) -> Vec<Job> {
        self.lease_fitting(worker, slots, now, cfg).0
    }

    /// [`Jobs::lease`] of the jobs that fit the worker (see [`fit`]): a worker with a limit of
    /// time gets only jobs expected to end within it, and long jobs are held for fast always-on
    /// workers for a while; also says what was skipped for these reasons.
    pub(crate) fn lease_fitting(
        &mut self,
        worker: &Uuid,
        slots: usize,
        now: Duration,
        cfg: &ServiceConfig,
    ) -> (Vec<Job>, Skipped) {
        let mut out = Vec::new();
        let mut skipped = Skipped::default();
        let fit = self.fit_of(worker, now);
        let (who, verifier) = self
            .workers
            .get(worker)
            .map(|w| (w.contributor.clone(), w.verifier))
            .unwrap_or_default();
        let (standing, owner) = self.voice_of(&who, &cfg.trust);
        let owner = owner.to_string();
        // A credential still earning trust gets no more searches than the confirmations it
        // still needs (every result of it is searched again by a trust root).
        let slots = self
            .trust
            .earning_room(&who, &cfg.trust, || self.leases_of(&who))
            .map_or(slots, |room| slots.min(room));
        self.relax_due(now);
        let me = (worker, standing, owner.as_str());
        while out.len() < slots {
            // Checks first for those who can serve them (a held result blocks its round), core
            // and spot checks within the worker's share while round work waits; the verifier
            // serves checks only, and all of them.
            let limited = !verifier && self.round_queued > 0 && {
                let (leased, checks) = self
                    .workers
                    .get(worker)
                    .map_or((0, 0), |w| (w.leased, w.checks));
                checks as f64 > cfg.trust.check_share * leased as f64
            };
            let check = (standing >= Standing::Earned)
                .then(|| self.check_for(standing, &who, &owner, limited))
                .flatten();
            let next = match check {
                Some(k) => Some(k),
                None if verifier => None,
                None if fit.unconstrained() => self
                    .queue
                    .first()
                    .copied()
                    .filter(|k| k.0 != JobClass::Check),
                None => self.next_fitting(&fit, now, cfg, &mut skipped),
            };
            // A round search whose lessees all fell silent (crashed, most likely) outranks
            // speculative work: the program waits for it, and the lease timeout is long.
            let rescue = match next {
                Some(k) if k.0 == JobClass::Round => None,
                _ if verifier => None,
                _ => self.silent_backup_candidate(me, &fit, now, cfg),
            };
            let id = match (rescue, next) {
                (Some(id), _) => {
                    self.counters.backup_leased += 1;
                    metrics::counter!(crate::telemetry::BACKUP_LEASED).increment(1);
                    id
                }
                (None, Some(k)) => {
                    dequeue(&mut self.queue, &mut self.round_queued, &k);
                    k.3
                }
                (None, None) if verifier => break,
                (None, None) => match self.backup_candidate(me, &fit, now, cfg) {
                    Some(id) => {
                        self.counters.backup_leased += 1;
                        metrics::counter!(crate::telemetry::BACKUP_LEASED).increment(1);
                        id
                    }
                    None => break,
                },
            };
            let Some(j) = self.jobs.get_mut(&id) else {
                continue;
            };
            j.queued = false;
            if j.class == JobClass::Speculative {
                j.prefetched = true;
                self.counters.speculative_leased += 1;
                metrics::counter!(crate::telemetry::SPECULATIVE_LEASED).increment(1);
            }
            if j.class == JobClass::Round && j.leases.is_empty() {
                self.leased_round.insert((j.prio, j.seq, id));
            }
            j.leases.push(Lease {
                worker: *worker,
                at: now,
            });
            if !j.lessees.contains(worker) {
                j.lessees.push(*worker);
            }
            let counted_check = j.class == JobClass::Check
                && j.need.as_ref().is_some_and(|n| checks::limited(n.kind));
            out.push(Job {
                id,
                board: j.key.board,
                excluded: j.key.excluded,
                level: j.key.level,
                attempt: j.attempt,
            });
            j.attempt += 1;
            self.in_flight += 1;
            if let Some(w) = self.workers.get_mut(worker) {
                w.jobs.insert(id);
                w.leased += 1;
                w.checks += u64::from(counted_check);
            }
        }
        self.counters.leased += out.len() as u64;
        metrics::counter!(crate::telemetry::JOBS_LEASED).increment(out.len() as u64);
        self.update_gauges();
        (out, skipped)
    }

    /// Why [`Jobs::lease`] gave `worker` nothing, as far as the job table tells: `None` when
    /// nothing is queued, leased or held for validation anywhere (then only the growth
    /// programs know whether the build is done).
    pub(crate) fn idle_reason(&self, worker: &Uuid, cfg: &ServiceConfig) -> Option<IdleReason> {
        let held_for_validation = || self.trust.cases().any(|(_, c)| !c.applied);
        let who = self
            .workers
            .get(worker)
            .map(|w| w.contributor.as_str())
            .unwrap_or_default();
        if self
            .trust
            .earning_room(who, &cfg.trust, || self.leases_of(who))
            == Some(0)
        {
            return Some(IdleReason::Earning);
        }
        match self.queue.first() {
            None if self.in_flight == 0 && !held_for_validation() => None,
            None if held_for_validation() => Some(IdleReason::WaitingForValidation),
            None => Some(IdleReason::QueueEmpty),
            // Only replicas of answered searches are queued (check jobs sort last).
            Some(k) if k.0 == JobClass::Check => {
                if self.trust.standing_of(who, &cfg.trust) < Standing::Earned {
                    Some(IdleReason::NotEligible)
                } else {
                    Some(IdleReason::WaitingForValidation)
                }
            }
            // Work is queued that this worker may not take (the verifier serves checks only).
            Some(_) => Some(IdleReason::NotEligible),
        }
    }

    /// The standing and owner of `contributor` as the trust rules weigh its word (the owner of
    /// its record; empty without one): what leasing and [`Jobs::checks_pending`] ask
    /// [`Need::admits`] about.
    fn voice_of(&self, contributor: &str, rules: &TrustRules) -> (Standing, &str) {
        let owner = self
            .trust
            .records
            .get(contributor)
            .map_or("", |r| r.owner.as_str());
        (self.trust.standing_of(contributor, rules), owner)
    }

    /// Leases held now by the workers of `contributor` (a credential may run several).
    fn leases_of(&self, contributor: &str) -> usize {
        self.workers
            .values()
            .filter(|w| w.contributor == contributor)
            .map(|w| w.jobs.len())
            .sum()
    }

    /// The job of a request, if any.
    pub(crate) fn job_of(&self, key: &LeafRequest) -> Option<Uuid> {
        self.by_key.get(key).copied()
    }

    /// Whether job `j` may get a backup lease on `worker` of `standing` and `owner`: it holds
    /// no lease of it, and its replica could be a word of its own beside its lessees' should
    /// one of their answers turn the job into a check ([`another_word`]: not another
    /// credential, below a trust root, of an owner holding a lease of it). The first answer
    /// serves the round whoever gives it, but a lessee's answer held for validation or drawn
    /// for a spot check waits for another word, and while a lease of its owner runs on, the
    /// check stays out of the queue for a replica that cannot close it.
    fn backup_fits(
        &self,
        j: &JobEntry,
        (worker, standing, owner): (&Uuid, Standing, &str),
        rules: &TrustRules,
    ) -> bool {
        let lessees = j
            .leases
            .iter()
            .filter_map(|l| self.workers.get(&l.worker))
            .map(|w| self.voice_of(&w.contributor, rules).1);
        !j.leased_to(worker) && another_word(standing, owner, lessees)
    }

    /// The first round search (in growth's order) whose every lessee has been silent for more
    /// than two heartbeat intervals (it crashed or lost its network, most likely: a live
    /// worker heartbeats while it searches), fewer than [`MAX_LEASES`] leases, that may get a
    /// backup lease on `worker` ([`Jobs::backup_fits`]): worth one before any speculative work.
    fn silent_backup_candidate(
        &self,
        worker: (&Uuid, Standing, &str),
        fit: &fit::Fit,
        now: Duration,
        cfg: &ServiceConfig,
    ) -> Option<Uuid> {
        if cfg.backup_after == 0 {
            return None;
        }
        let silent_after = cfg.heartbeat_interval.saturating_mul(2);
        let silent = |w: &Uuid| {
            self.workers
                .get(w)
                .is_none_or(|e| now.saturating_sub(e.last_seen) > silent_after)
        };
        self.leased_round.iter().take(64).map(|k| k.2).find(|id| {
            self.jobs.get(id).is_some_and(|j| {
                j.leases.len() < MAX_LEASES
                    && self.backup_fits(j, worker, &cfg.trust)
                    && j.leases.iter().all(|l| silent(&l.worker))
                    && self.fits(fit, j, cfg)
            })
        })
    }

    /// The first round search (in growth's order) worth a backup lease for `worker`: fewer
    /// than [`MAX_LEASES`] leases, its oldest lease older than `cfg.backup_after` times its
    /// level's mean search time, and a backup lease on `worker` fits it
    /// ([`Jobs::backup_fits`]).
    fn backup_candidate(
        &self,
        worker: (&Uuid, Standing, &str),
        fit: &fit::Fit,
        now: Duration,
        cfg: &ServiceConfig,
    ) -> Option<Uuid> {
        if cfg.backup_after == 0 {
            return None;
        }
        // Only the first round searches: they block the program; a later one gets its turn.
        self.leased_round.iter().take(64).map(|k| k.2).find(|id| {
            self.jobs.get(id).is_some_and(|j| {
                let Some(mean) = self.search_time.get(&j.key.level) else {
                    return false;
                };
                let oldest = j.leases.iter().map(|l| l.at).min().unwrap_or(now);
                j.leases.len() < MAX_LEASES
                    && self.backup_fits(j, worker, &cfg.trust)
                    && now.saturating_sub(oldest).as_secs_f64() > mean * f64::from(cfg.backup_after)
                    && self.fits(fit, j, cfg)
            })
        })
    }

    /// Record how long `worker`'s lease of job `id` took to answer (the coordinator's clock).
    pub(crate) fn record_search_time(&mut self, id: &Uuid, worker: &Uuid, now: Duration) {
        let Some(j) = self.jobs.get(id) else {
            return;
        };
        let Some(l) = j.leases.iter().find(|l| l.worker == *worker) else {
            return;
        };
        let t = now.saturating_sub(l.at).as_secs_f64();
        let (level, empties) = (
            j.key.level,
            u8::try_from(j.key.board.empties()).unwrap_or(u8::MAX),
        );
        self.measure(worker, level, empties, t);
    }

    /// End `worker`'s lease of job `id`; a job left without lease goes back to the front of
    /// its class's queue (it was leased first).
    pub(crate) fn release(&mut self, id: Uuid, worker: &Uuid) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        let before = j.leases.len();
        j.leases.retain(|l| l.worker != *worker);
        if j.leases.len() == before {
            return;
        }
        self.in_flight -= 1;
        if let Some(w) = self.workers.get_mut(worker) {
            w.jobs.remove(&id);
        }
        if j.leases.is_empty() {
            if j.class == JobClass::Round {
                self.leased_round.remove(&(j.prio, j.seq, id));
            }
            // A check job keeps its lane (see `checks`); the others go to their class's front.
            if j.class != JobClass::Check {
                j.prio = 0;
            }
            j.seq = 0;
            j.queued = true;
            let k = j.queue_key(id);
            enqueue(&mut self.queue, &mut self.round_queued, k);
        }
    }

    /// Remove a worker and end its leases (jobs left without lease go back to the queue);
    /// returns its name and how many leases ended (None when unknown).
    pub(crate) fn remove_worker(&mut self, wid: Uuid) -> Option<(String, usize)> {
        let jobs: Vec<Uuid> = self.workers.get(&wid)?.jobs.iter().copied().collect();
        let mut n = 0;
        for jid in jobs {
            if self.jobs.get(&jid).is_some_and(|j| j.leased_to(&wid)) {
                self.release(jid, &wid);
                n += 1;
            }
        }
        let w = self.workers.remove(&wid)?;
        self.preferred_cache = None;
        self.threads -= w.threads as usize;
        self.trust.verifiers -= usize::from(w.verifier);
        Some((w.name, n))
    }

    /// End leases older than [`max_lease_duration`] of their level (the lessee learns it from
    /// its next heartbeat); returns how many.
    pub(crate) fn expire_overdue(&mut self, now: Duration, cfg: &ServiceConfig) -> usize {
        let overdue: Vec<(Uuid, Uuid)> = self
            .jobs
            .iter()
            .flat_map(|(id, j)| {
                let limit = max_lease_duration(j.key.level, cfg);
                j.leases
                    .iter()
                    .filter(move |l| now.saturating_sub(l.at) > limit)
                    .map(move |l| (*id, l.worker))
            })
            .collect();
        for (jid, w) in &overdue {
            tracing::warn!(job_id = %jid, worker_id = %w, "lease past its maximum duration: lease ended");
            self.release(*jid, w);
        }
        overdue.len()
    }

    /// Remove a job entirely (accepted, quarantined or no longer needed).
    pub(crate) fn remove(&mut self, id: Uuid) -> Option<JobEntry> {
        let j = self.jobs.remove(&id)?;
        if j.queued {
            let k = j.queue_key(id);
            dequeue(&mut self.queue, &mut self.round_queued, &k);
        }
        if j.class == JobClass::Round && !j.leases.is_empty() {
            self.leased_round.remove(&(j.prio, j.seq, id));
        }
        if let Some(t) = j.relax_at {
            self.relax.remove(&(t, id));
        }
        for l in &j.leases {
            self.in_flight -= 1;
            if let Some(w) = self.workers.get_mut(&l.worker) {
                w.jobs.remove(&id);
            }
        }
        self.by_key.remove(&j.key);
        Some(j)
    }

    /// Forget every job (import).
    pub(crate) fn clear_jobs(&mut self) {
        self.jobs.clear();
        self.by_key.clear();
        self.queue.clear();
        self.round_queued = 0;
        self.leased_round.clear();
        self.relax.clear();
        self.in_flight = 0;
        self.quarantined.clear();
        self.landed.clear();
        for w in self.workers.values_mut() {
            w.jobs.clear();
        }
    }
}
