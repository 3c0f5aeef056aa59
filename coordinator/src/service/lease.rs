//! Leases: how many jobs a worker may hold and for how long, leasing (with the waits that keep
//! workers busy across the end of a pass), the wait suggested to idle workers, failure reports,
//! released leases, quarantine and the expiry of silent workers' leases.
//!
//! Job classes: *round* jobs are the searches the driver is blocked on, queued 4 per registered
//! thread ahead (at least 256); *speculative* jobs are the searches the next steps will
//! probably need, planned at a pass's tail on a copy of the book with guessed results (the
//! `Predictor`), within `speculation_share` of the growth thread's time. Round work is always
//! leased first, speculative work only when none is queued, and the driver never waits for it
//! (a speculative job the driver then needs becomes round work and keeps its lease). A round
//! search leased for more than `backup_after` times its level's mean search time, or whose
//! lessees have all been silent for two heartbeat intervals, gets one backup lease on an idle
//! worker whose replica could be a word of its own should an answer make the job a check (a
//! trust root, or a worker of an owner holding no lease of it: `Jobs::backup_fits`); the first
//! answer wins. A lease call that finds nothing for a worker holding nothing
//! waits while a growth run is under way or others hold searches the driver waits for, then
//! suggests `retry_after`. A search is a pure function of its request, so none of this changes
//! the book, only when its searches are done.

use super::{Coordinator, QuarantineReport, ServiceConfig, Standing};
use crate::error::{CoordinatorError, Result};
use crate::events::{EventKind, board_text, event};
use bookfarm_engine::Board;
use bookfarm_engine::search::LeafRequest;
use bookfarm_engine::symmetry::canonical;
use bookfarm_proto::MAX_LEASE_SLOTS;
use bookfarm_proto::domain::{Ack, Failure, Identity, IdleReason, Job, JobResult, LeaseAsk};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How many jobs one worker may hold at once: its declared threads (at most
/// `max_worker_threads`) plus `lookahead`. Workers lease a little ahead of their free threads;
/// anything more only hoards jobs that other workers could search.
pub fn lease_cap(threads: u32, cfg: &ServiceConfig) -> usize {
    threads.min(cfg.max_worker_threads) as usize + cfg.lookahead as usize
}

/// How long a job of `level` may stay leased, heartbeats or not: `max_lease_base` doubled every
/// `max_lease_doubling_levels` levels (a search's time grows geometrically with its depth), at
/// most `max_lease_cap`. Past it the job goes back to the queue, so a worker that heartbeats but
/// never answers cannot stall the growth program; its late result is still accepted while the
/// job exists (the first answer wins, as with a backup lease).
pub fn max_lease_duration(level: u8, cfg: &ServiceConfig) -> Duration {
    let doublings = u32::from(level) / u32::from(cfg.max_lease_doubling_levels.max(1));
    let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
    cfg.max_lease_base
        .saturating_mul(factor)
        .min(cfg.max_lease_cap)
}

/// Empty lease calls per second the idle threads of a farm may make together (see
/// [`Coordinator::retry_after`]).
pub const IDLE_POLLS_PER_SECOND: f64 = 1000.0;

/// Longest wait suggested to an idle worker (far below the session timeout).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// Most [`Coordinator::lease_waiting`] callers that wait at once for the results other workers
/// hold (growth idle, the driver blocked on searches in flight). Each growth run wakes every
/// waiter to lease again, so a farm of thousands of idle workers must not all wait: the others
/// get an empty reply and `retry_after`, as before.
const MAX_FLIGHT_WAITERS: usize = 64;

/// Counts a caller among the [`MAX_FLIGHT_WAITERS`] while it lives.
struct FlightWaiter<'a>(&'a AtomicUsize);

impl<'a> FlightWaiter<'a> {
    fn enter(count: &'a AtomicUsize) -> Option<FlightWaiter<'a>> {
        if count.fetch_add(1, Ordering::SeqCst) >= MAX_FLIGHT_WAITERS {
            count.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(FlightWaiter(count))
    }
}

impl Drop for FlightWaiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A remote worker's lease call answered: the acknowledgements of the results it carried,
/// the jobs leased, and how long to wait before the next call when it got none (zero
/// otherwise), and why it got none.
#[derive(Debug, Clone)]
pub struct LeaseReply {
    /// One per result carried, in order.
    pub acks: Vec<Ack>,
    /// The jobs leased.
    pub jobs: Vec<Job>,
    /// [`Coordinator::retry_after`] when no job was leased, else zero.
    pub retry_after: Duration,
    /// Why no job was leased for the free slots asked for (None: jobs were leased, or none
    /// was asked for).
    pub idle: Option<IdleReason>,
}

/// What one lease gave a worker: jobs, or why none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offer {
    /// The jobs leased.
    pub jobs: Vec<Job>,
    /// Why none was leased for the slots asked for (None: jobs were leased, or no slot was
    /// asked for).
    pub idle: Option<IdleReason>,
}

impl Coordinator {
    /// A remote worker's lease call, which carries the results of its last searches: submit
    /// them ([`Coordinator::submit`]), lease up to `slots` jobs ([`Coordinator::lease_waiting`],
    /// waiting up to `wait`), and reply once the results are durable.
    pub async fn submit_and_lease(
        &self,
        id: &Identity,
        worker: &Uuid,
        results: &[JobResult],
        ask: LeaseAsk,
        wait: Duration,
    ) -> Result<LeaseReply> {
        let acks = if results.is_empty() {
            Vec::new()
        } else {
            self.submit(id, worker, results)?
        };
        let offer = self.offer_waiting(id, worker, ask, wait).await?;
        if !results.is_empty() {
            // Acknowledge only what is durable.
            self.wait_durable().await?;
        }
        let retry_after = if offer.jobs.is_empty() {
            self.retry_after()
        } else {
            Duration::ZERO
        };
        Ok(LeaseReply {
            acks,
            jobs: offer.jobs,
            retry_after,
            idle: offer.idle,
        })
    }

    /// [`Coordinator::fail`] for a remote worker: the reply comes once every store write before
    /// it is durable.
    pub async fn fail_durable(&self, id: &Identity, worker: &Uuid, f: &Failure) -> Result<bool> {
        let quarantined = self.fail(id, worker, f)?;
        self.wait_durable().await?;
        Ok(quarantined)
    }

    /// Lease up to `slots` jobs to a worker (none while paused).
    pub fn lease(&self, id: &Identity, worker: &Uuid, slots: u32) -> Result<Vec<Job>> {
        let ask = LeaseAsk {
            free: slots,
            available: None,
        };
        Ok(self.offer(id, worker, ask)?.jobs)
    }

    /// Lease up to `ask.free` jobs to a worker (none while paused), and say why there are none
    /// when there are none.
    pub fn offer(&self, id: &Identity, worker: &Uuid, ask: LeaseAsk) -> Result<Offer> {
        self.check_identity(id)?;
        let paused = self.0.paused.load(Ordering::SeqCst);
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        Self::check_blocked(&g, worker)?;
        let asked = ask.free > 0;
        let idle = |r: IdleReason| Offer {
            jobs: Vec::new(),
            idle: asked.then_some(r),
        };
        let room = match g.workers.get_mut(worker) {
            Some(w) => {
                w.available_until = ask.available.map(|a| now.saturating_add(a));
                lease_cap(w.threads, &self.0.cfg).saturating_sub(w.jobs.len())
            }
            None => 0,
        };
        if paused {
            return Ok(idle(IdleReason::Paused));
        }
        let slots = (ask.free.min(MAX_LEASE_SLOTS) as usize).min(room);
        let (jobs, skipped) = g.lease_fitting(worker, slots, now, &self.0.cfg);
        if !jobs.is_empty() || !asked {
            return Ok(Offer { jobs, idle: None });
        }
        if room == 0 {
            return Ok(idle(IdleReason::RateLimited));
        }
        // Jobs are queued but none fits this worker: say which rule held them back (a
        // reservation ends after a while; what is left of the active hours does not grow).
        if skipped.reserved {
            return Ok(idle(IdleReason::Reserved));
        }
        if skipped.no_fit {
            return Ok(idle(IdleReason::NoFit));
        }
        let known = g.idle_reason(worker, &self.0.cfg);
        drop(g);
        Ok(idle(known.unwrap_or_else(|| self.idle_without_work())))
    }

    /// Why a worker is idle when no job is queued, leased or held anywhere: the build is done
    /// unless a growth program runs (then its next searches are on their way). Never waits
    /// for the growth lock: a run under way means more work is coming.
    fn idle_without_work(&self) -> IdleReason {
        if self.growth_busy() {
            return IdleReason::QueueEmpty;
        }
        match self.0.growth.try_lock() {
            Ok(g) if !g.is_running() => IdleReason::BuildDone,
            _ => IdleReason::QueueEmpty,
        }
    }

    /// [`Coordinator::lease`]; when it finds no job while a growth run is under way (results
    /// just landed) or other workers hold searches the driver waits for, wait up to `wait` in
    /// all for the runs to queue the next searches, leasing again after each, so that workers
    /// do not sleep through the end of every pass.
    pub async fn lease_waiting(
        &self,
        id: &Identity,
        worker: &Uuid,
        slots: u32,
        wait: Duration,
    ) -> Result<Vec<Job>> {
        let ask = LeaseAsk {
            free: slots,
            available: None,
        };
        Ok(self.offer_waiting(id, worker, ask, wait).await?.jobs)
    }

    /// [`Coordinator::lease_waiting`] for an [`Offer`].
    pub async fn offer_waiting(
        &self,
        id: &Identity,
        worker: &Uuid,
        ask: LeaseAsk,
        wait: Duration,
    ) -> Result<Offer> {
        let slots = ask.free;
        let deadline = tokio::time::Instant::now() + wait;
        let mut waiter = None;
        loop {
            let mut runs = self.growth_runs();
            let offer = self.offer(id, worker, ask)?;
            // A worker still holding jobs never waits: its threads are busy, and the call would
            // hold back the results and leases it makes next. Otherwise it waits while growth
            // runs are under way, leasing again after each (a run that applied results may
            // queue nothing; the next one queues the next pass), up to `wait` in all.
            if !offer.jobs.is_empty() || slots == 0 {
                return Ok(offer);
            }
            let (holds, in_flight) = {
                let g = self.jobs();
                let holds = g.workers.get(worker).is_some_and(|w| !w.jobs.is_empty());
                (holds, g.in_flight)
            };
            if holds {
                return Ok(offer);
            }
            if !(self.growth_busy() || runs.has_changed().unwrap_or(false)) {
                // Growth is idle, blocked on searches other workers hold: their results start
                // the next run, which queues what comes next. Waiting for it (a few callers at
                // a time) instead of sleeping `retry_after` (200 ms and more) keeps the farm's
                // threads busy across the tail of every pass.
                if in_flight == 0 {
                    return Ok(offer);
                }
                if waiter.is_none() {
                    waiter = FlightWaiter::enter(&self.0.flight_waiters);
                    if waiter.is_none() {
                        return Ok(offer);
                    }
                }
            }
            if tokio::time::timeout_at(deadline, runs.changed())
                .await
                .is_err()
            {
                return self.offer(id, worker, ask);
            }
        }
    }

    /// [`Coordinator::lease`] for a caller on a plain thread (an in-process worker): when it
    /// finds no job for a worker that holds none while growth runs are under way (results just
    /// landed), wait for them, up to `wait` in all, and lease again after each, so that the
    /// searches the runs queue (the next pass) are leased at once. A worker still holding jobs
    /// never waits: its caller would stop delivering their results meanwhile.
    pub fn lease_blocking(
        &self,
        id: &Identity,
        worker: &Uuid,
        slots: u32,
        wait: Duration,
    ) -> Result<Vec<Job>> {
        let ask = LeaseAsk {
            free: slots,
            available: None,
        };
        Ok(self.offer_blocking(id, worker, ask, wait)?.jobs)
    }

    /// [`Coordinator::lease_blocking`] for an [`Offer`].
    pub fn offer_blocking(
        &self,
        id: &Identity,
        worker: &Uuid,
        ask: LeaseAsk,
        wait: Duration,
    ) -> Result<Offer> {
        let deadline = Instant::now() + wait;
        loop {
            let seen = self.growth_run_count();
            let offer = self.offer(id, worker, ask)?;
            if !offer.jobs.is_empty() || ask.free == 0 {
                return Ok(offer);
            }
            if self.holds_jobs(worker) || !(self.growth_busy() || self.growth_run_count() != seen) {
                return Ok(offer);
            }
            let (count, cv) = &self.0.runs_done;
            let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
            while *n == seen {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    return Ok(offer);
                };
                n = cv
                    .wait_timeout(n, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }

    /// How long a worker that got no job should wait before asking again: the configured
    /// `retry_after`, stretched so that the farm's idle workers together poll at most
    /// [`IDLE_POLLS_PER_SECOND`] times a second (10,000 idle workers would otherwise flood the
    /// coordinator with 50,000 empty calls a second), and never beyond [`MAX_RETRY_AFTER`].
    /// A worker makes one call for all its free threads, so the idle workers are estimated as
    /// the idle threads over the mean threads per worker (counting threads instead would make
    /// a farm of few big workers sleep through the end of every pass with work queued).
    pub fn retry_after(&self) -> Duration {
        let idle = {
            let g = self.jobs();
            let threads = g.threads();
            let idle_threads = threads.saturating_sub(g.in_flight);
            if threads == 0 {
                0
            } else {
                idle_threads
                    .saturating_mul(g.workers.len())
                    .div_ceil(threads)
            }
        };
        let spread = Duration::from_secs_f64(idle as f64 / IDLE_POLLS_PER_SECOND);
        self.0.cfg.retry_after.max(spread).min(MAX_RETRY_AFTER)
    }

    /// Whether `worker` holds a lease now.
    fn holds_jobs(&self, worker: &Uuid) -> bool {
        self.jobs()
            .workers
            .get(worker)
            .is_some_and(|w| !w.jobs.is_empty())
    }

    /// A worker reports that a job failed. The search is quarantined only once trusted workers
    /// (given, earned or root standing) of `max_failures` different owners reported it (a
    /// report from an anonymous local worker counts as its own owner); until then the job goes
    /// back to the queue, whatever `retryable` says, so that neither one client nor any number
    /// of untrusted ones can take a search out of the growth program (an untrusted report only
    /// releases the lease). Quarantine lives in memory: a restart gives the search another
    /// chance. Returns true when quarantined.
    pub fn fail(&self, id: &Identity, worker: &Uuid, f: &Failure) -> Result<bool> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        let owner = g.workers.get(worker).and_then(|w| w.owner.clone());
        let counts = g.workers.get(worker).is_some_and(|w| {
            g.trust.standing_of(&w.contributor, &self.0.cfg.trust) != Standing::Untrusted
        });
        let Some(j) = g.jobs.get_mut(&f.job_id) else {
            if g.done.contains(&f.job_id) {
                return Ok(false);
            }
            return Err(CoordinatorError::UnknownJob(f.job_id));
        };
        if !j.leased_to(worker) {
            return Err(CoordinatorError::NotLeased {
                job: f.job_id,
                worker: *worker,
            });
        }
        j.failures += 1;
        let owner = owner.unwrap_or_else(|| format!("anonymous report {}", j.failures));
        if counts && !j.failed_owners.contains(&owner) {
            j.failed_owners.push(owner);
        }
        let quarantine = j.failed_owners.len() >= self.0.cfg.max_failures.max(1) as usize;
        g.counters.failed += 1;
        metrics::counter!(crate::telemetry::JOBS_FAILED).increment(1);
        if let Some(w) = g.workers.get_mut(worker) {
            w.failed += 1;
        }
        tracing::warn!(job_id = %f.job_id, worker_id = %worker, reason = %f.reason, quarantine, "job failed");
        if quarantine {
            if let Some(j) = g.remove(f.job_id) {
                self.0.events.record(event(
                    EventKind::Quarantined,
                    &board_text(&j.key.board),
                    "",
                    format!(
                        "level {}: failed for {} owners; last reason: {}",
                        j.key.level,
                        j.failed_owners.len(),
                        f.reason
                    ),
                ));
                g.quarantined.insert(
                    j.key,
                    QuarantineReport {
                        job_id: f.job_id,
                        board: j.key.board,
                        reason: f.reason.clone(),
                    },
                );
            }
        } else {
            g.release(f.job_id, worker);
        }
        g.update_gauges();
        Ok(quarantine)
    }

    /// A worker hands back jobs it will not search (it is draining): each of them still leased
    /// to it goes back to the queue at once. Returns how many.
    pub fn release_leases(&self, id: &Identity, worker: &Uuid, jobs: &[Uuid]) -> Result<u32> {
        self.check_identity(id)?;
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        let mut n = 0;
        for jid in jobs {
            if g.jobs.get(jid).is_some_and(|j| j.leased_to(worker)) {
                g.release(*jid, worker);
                n += 1;
            }
        }
        g.update_gauges();
        Ok(n)
    }

    /// Put quarantined searches back in the queue (all of them, or those of `boards`, in any
    /// orientation) if the growth programs still wait for them; returns how many were released.
    /// The operator's answer to a quarantine that was wrong.
    pub fn release_quarantined(&self, boards: Option<&[Board]>) -> Result<u64> {
        let growth = self.growth();
        let mut g = self.jobs();
        let wanted: Option<HashSet<Board>> =
            boards.map(|bs| bs.iter().map(|b| canonical(b).0).collect());
        let chosen: Vec<LeafRequest> = g
            .quarantined
            .keys()
            .filter(|k| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(&canonical(&k.board).0))
            })
            .copied()
            .collect();
        for k in &chosen {
            g.quarantined.remove(k);
        }
        match growth.async_needed() {
            // Puts the released requests back (the others are round work already).
            Some(needed) => g.round_delta(&needed, &[]),
            None => g.sync(&growth.needed, None),
        }
        drop(g);
        drop(growth);
        tracing::info!(released = chosen.len(), "quarantined searches released");
        Ok(chosen.len() as u64)
    }

    /// Re-queue the jobs of workers silent for longer than the lease timeout; returns how many
    /// jobs went back to the queue. Called periodically by the server.
    pub fn expire_leases(&self) -> usize {
        let now = self.now();
        let timeout = self.0.cfg.lease_timeout;
        let mut g = self.jobs();
        let silent: Vec<Uuid> = g
            .workers
            .iter()
            .filter(|(_, w)| now.saturating_sub(w.last_seen) > timeout)
            .map(|(id, _)| *id)
            .collect();
        let mut n = 0;
        for wid in silent {
            let owner = g.workers.get(&wid).and_then(|w| w.owner.clone());
            if let Some((name, k)) = g.remove_worker(wid) {
                n += k;
                tracing::warn!(worker_id = %wid, name = %name, "worker silent: leases expired");
                self.0.events.record(event(
                    EventKind::WorkerLeft,
                    &name,
                    owner.as_deref().unwrap_or(""),
                    format!(
                        "silent for more than {} s: {k} leases back in the queue",
                        timeout.as_secs()
                    ),
                ));
            }
        }
        n += g.expire_overdue(now, &self.0.cfg);
        g.counters.expired += n as u64;
        metrics::counter!(crate::telemetry::JOBS_EXPIRED).increment(n as u64);
        g.update_gauges();
        n
    }
}
