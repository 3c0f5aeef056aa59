//! The job table: jobs keyed by search request, the priority queue, leases, workers and
//! counters. RPC handlers touch only this table (through [`super::Coordinator`]).
//!
//! Invariants:
//! * a search request has at most one job (`by_key`);
//! * a job id is accepted at most once (`done`, persisted), so a duplicate submission changes
//!   nothing;
//! * `in_flight` counts the jobs whose `lease` is set;
//! * a worker holds at most [`super::lease_cap`] jobs, and a lease never outlives
//!   [`max_lease_duration`] of its level by more than one expiry pass (heartbeats do not
//!   extend it).

use super::{QuarantineReport, RATE_WINDOW, ServiceConfig, max_lease_duration};
use bookfarm_engine::search::LeafRequest;
use bookfarm_proto::domain::Job;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;
use uuid::Uuid;

/// Counters since start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Jobs leased.
    pub leased: u64,
    /// Results accepted.
    pub completed: u64,
    /// Duplicate submissions.
    pub duplicates: u64,
    /// Stale results (results of jobs the book no longer needs are still accepted and stored;
    /// kept for the protocol's acknowledgement codes).
    pub stale: u64,
    /// Failures reported.
    pub failed: u64,
    /// Leases expired.
    pub expired: u64,
    /// Invalid results rejected.
    pub rejected: u64,
}

#[derive(Debug)]
pub(crate) struct JobEntry {
    pub(crate) key: LeafRequest,
    pub(crate) attempt: u32,
    pub(crate) failures: u32,
    /// Owners whose workers reported this job as failed (see [`super::Coordinator::fail`]).
    pub(crate) failed_owners: Vec<String>,
    /// Current lessee.
    pub(crate) lease: Option<Uuid>,
    /// When the current lease began (bounded by [`max_lease_duration`]).
    pub(crate) leased_at: Duration,
    /// Every worker that held the job (a late result from one of them is still accepted while
    /// the job is not leased to someone else).
    pub(crate) lessees: Vec<Uuid>,
    queue_key: Option<(u32, u64)>,
}

/// One accepted result, for the recent-window figures (results/s, nodes/s, mean search time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Landed {
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
    pub(crate) recent: VecDeque<Landed>,
}

#[derive(Debug, Default)]
pub(crate) struct Jobs {
    pub(crate) jobs: HashMap<Uuid, JobEntry>,
    by_key: HashMap<LeafRequest, Uuid>,
    queue: BTreeSet<(u32, u64, Uuid)>,
    seq: u64,
    pub(crate) in_flight: usize,
    pub(crate) done: HashSet<Uuid>,
    pub(crate) workers: HashMap<Uuid, WorkerEntry>,
    pub(crate) quarantined: HashMap<LeafRequest, QuarantineReport>,
    /// Requests whose results were accepted but not yet applied by growth: growth may still
    /// list them as needed, and they must not get a second job.
    pub(crate) landed: HashSet<LeafRequest>,
    pub(crate) counters: Counters,
    pub(crate) recent: VecDeque<Landed>,
    /// Results accepted per contributor — (anonymous, owner or an anonymous worker's name) —
    /// since the history last took them (see `super::history`).
    pub(crate) contributions: HashMap<(bool, String), u64>,
}

impl Jobs {
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn update_gauges(&self) {
        metrics::gauge!("bookfarm_queue_depth").set(self.queue.len() as f64);
        metrics::gauge!("bookfarm_in_flight").set(self.in_flight as f64);
        metrics::gauge!("bookfarm_workers").set(self.workers.len() as f64);
    }

    pub(crate) fn trim_rates(&mut self, now: Duration) {
        let cut = now.saturating_sub(RATE_WINDOW);
        while self.recent.front().is_some_and(|l| l.at < cut) {
            self.recent.pop_front();
        }
        for w in self.workers.values_mut() {
            while w.recent.front().is_some_and(|l| l.at < cut) {
                w.recent.pop_front();
            }
        }
    }

    /// Make the queue hold exactly the searches growth waits for, in its order (the first one
    /// blocks the serial program, so it goes first): new requests get jobs, queued jobs are
    /// re-prioritised, queued jobs no longer needed are dropped. Leased jobs are left alone
    /// (their results are still stored when they come). Quarantined requests and requests whose
    /// results landed but are not applied yet are skipped.
    pub(crate) fn sync(&mut self, needed: &[LeafRequest]) {
        let wanted: HashSet<&LeafRequest> = needed.iter().collect();
        let obsolete: Vec<Uuid> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.lease.is_none() && !wanted.contains(&j.key))
            .map(|(id, _)| *id)
            .collect();
        for id in obsolete {
            self.remove(id);
        }
        for (i, key) in needed.iter().enumerate() {
            if self.quarantined.contains_key(key) || self.landed.contains(key) {
                continue;
            }
            let prio = u32::try_from(i).unwrap_or(u32::MAX);
            match self.by_key.get(key).copied() {
                Some(id) => {
                    let Some(j) = self.jobs.get_mut(&id) else {
                        continue;
                    };
                    if let Some(k) = j.queue_key
                        && k.0 != prio
                    {
                        self.queue.remove(&(k.0, k.1, id));
                        let nk = (prio, k.1);
                        j.queue_key = Some(nk);
                        self.queue.insert((nk.0, nk.1, id));
                    }
                }
                None => {
                    let id = Uuid::new_v4();
                    self.seq += 1;
                    let k = (prio, self.seq);
                    self.jobs.insert(
                        id,
                        JobEntry {
                            key: *key,
                            attempt: 0,
                            failures: 0,
                            failed_owners: Vec::new(),
                            lease: None,
                            leased_at: Duration::ZERO,
                            lessees: Vec::new(),
                            queue_key: Some(k),
                        },
                    );
                    self.queue.insert((k.0, k.1, id));
                    self.by_key.insert(*key, id);
                }
            }
        }
        self.update_gauges();
    }

    /// Lease up to `slots` queued jobs to `worker` at time `now`.
    pub(crate) fn lease(&mut self, worker: &Uuid, slots: usize, now: Duration) -> Vec<Job> {
        let mut out = Vec::new();
        while out.len() < slots {
            let Some(key) = self.queue.pop_first() else {
                break;
            };
            let id = key.2;
            let Some(j) = self.jobs.get_mut(&id) else {
                continue;
            };
            j.queue_key = None;
            j.lease = Some(*worker);
            j.leased_at = now;
            if !j.lessees.contains(worker) {
                j.lessees.push(*worker);
            }
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
            }
        }
        self.counters.leased += out.len() as u64;
        metrics::counter!("bookfarm_jobs_leased_total").increment(out.len() as u64);
        self.update_gauges();
        out
    }

    /// Put a leased job back in the queue (at the front of its priority: it was leased first).
    pub(crate) fn release(&mut self, id: Uuid) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if let Some(w) = j.lease.take() {
            self.in_flight -= 1;
            if let Some(w) = self.workers.get_mut(&w) {
                w.jobs.remove(&id);
            }
        }
        if j.queue_key.is_none() {
            let k = (0, 0);
            j.queue_key = Some(k);
            self.queue.insert((k.0, k.1, id));
        }
    }

    /// Remove a worker and put the jobs leased to it back in the queue; returns its name and
    /// how many jobs went back (None when unknown).
    pub(crate) fn remove_worker(&mut self, wid: Uuid) -> Option<(String, usize)> {
        let w = self.workers.remove(&wid)?;
        let mut n = 0;
        for jid in w.jobs {
            if self.jobs.get(&jid).is_some_and(|j| j.lease == Some(wid)) {
                self.release(jid);
                n += 1;
            }
        }
        Some((w.name, n))
    }

    /// Re-queue jobs leased for longer than [`max_lease_duration`] of their level (the lessee
    /// learns it from its next heartbeat); returns how many.
    pub(crate) fn expire_overdue(&mut self, now: Duration, cfg: &ServiceConfig) -> usize {
        let overdue: Vec<(Uuid, Option<Uuid>)> = self
            .jobs
            .iter()
            .filter(|(_, j)| {
                j.lease.is_some()
                    && now.saturating_sub(j.leased_at) > max_lease_duration(j.key.level, cfg)
            })
            .map(|(id, j)| (*id, j.lease))
            .collect();
        for (jid, w) in &overdue {
            tracing::warn!(job_id = %jid, worker_id = ?w, "lease past its maximum duration: job re-queued");
            self.release(*jid);
        }
        overdue.len()
    }

    /// Remove a job entirely (accepted, quarantined or no longer needed).
    pub(crate) fn remove(&mut self, id: Uuid) -> Option<JobEntry> {
        let j = self.jobs.remove(&id)?;
        if let Some(k) = j.queue_key {
            self.queue.remove(&(k.0, k.1, id));
        }
        if let Some(w) = j.lease {
            self.in_flight -= 1;
            if let Some(w) = self.workers.get_mut(&w) {
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
        self.in_flight = 0;
        self.quarantined.clear();
        self.landed.clear();
        for w in self.workers.values_mut() {
            w.jobs.clear();
        }
    }
}
