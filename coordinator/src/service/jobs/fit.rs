//! Jobs that fit the worker: a part-time worker (active hours) gets no job it is not expected to
//! finish before its hours end, and long jobs go to fast, always-on workers first.
//!
//! * **Duration.** The coordinator measures every result's lease-to-result time on its own
//!   clock (never the worker's claim): a mean per (level, empties) and, per level, over all
//!   empties ([`Jobs::record_search_time`]). A worker's *slowness* is the exponential mean of
//!   its times over the shape's mean at the time (1: the farm's pace; unmeasured: 1). A job's
//!   expected duration for a worker is the shape's mean (else the level's) times its slowness.
//! * **Fit.** A worker that says how long it may still search (`LeaseAsk::available`) gets a
//!   job only when [`SAFETY`] times its expected duration, at most the level's
//!   [`max_lease_duration`] (the lease ends there anyway), is within what is left. A level never
//!   measured is bounded by its `max_lease_duration`: nothing is known, so nothing is risked.
//! * **Reservation.** A *long* job (expected at the farm's pace to take `cfg.long_job` or more;
//!   unmeasured jobs are not long) goes to a *preferred* worker (always-on, measured at the
//!   farm's pace or faster) when one is registered; another worker gets it once it was held
//!   back `cfg.reserve_for` since a worker was first refused it.
//!
//! A constrained worker scans at most [`SCAN`] queued jobs past the front for one that fits;
//! an unconstrained one (preferred, or no long job can be held from it, and no limit of time)
//! takes the front as before. Which worker searches what never changes the book.

use super::{JobClass, JobEntry, Jobs, QueueKey, WorkerEntry};
use crate::service::{ServiceConfig, max_lease_duration};
use std::time::Duration;
use uuid::Uuid;

/// A part-time worker's expected duration is multiplied by this before it is compared with
/// what is left of its active hours (searches vary, and so does a volunteer's machine).
pub const SAFETY: f64 = 2.0;

/// Queued jobs a constrained worker's lease scans for one that fits.
pub const SCAN: usize = 256;

/// A worker is preferred for long jobs when its slowness is at most this (the farm's pace).
const FAST: f64 = 1.0;

/// How long the "a preferred worker is registered" answer is reused (it costs O(workers)).
const PREFERRED_TTL: Duration = Duration::from_secs(1);

/// What a lease skipped for the worker (why it may get nothing although jobs are queued).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// A queued job would not end before the worker's active hours do.
    pub(crate) no_fit: bool,
    /// A queued long job is held for fast always-on workers.
    pub(crate) reserved: bool,
}

/// What the lease of one worker must respect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fit {
    /// Seconds the worker may still search (None: no limit).
    left: Option<f64>,
    /// Its slowness (1: the farm's pace).
    slowness: f64,
    /// Long jobs are held from it (it is not preferred, and a preferred worker is registered).
    held: bool,
}

impl Fit {
    /// Whether the front of the queue serves this worker as it is.
    pub(crate) fn unconstrained(&self) -> bool {
        self.left.is_none() && !self.held
    }
}

/// Whether `w` gets long jobs first.
fn preferred(w: &WorkerEntry) -> bool {
    !w.part_time && !w.verifier && w.slowness.is_some_and(|s| s <= FAST)
}

impl Jobs {
    /// Expected seconds of a search of `j` at the farm's pace (None: its level was never
    /// measured).
    fn expected_secs(&self, j: &JobEntry) -> Option<f64> {
        let empties = u8::try_from(j.key.board.empties()).unwrap_or(u8::MAX);
        self.shape_time
            .get(&(j.key.level, empties))
            .or_else(|| self.search_time.get(&j.key.level))
            .copied()
    }

    /// Whether some registered worker is preferred for long jobs (cached for
    /// [`PREFERRED_TTL`]; registrations and departures refresh it).
    fn preferred_registered(&mut self, now: Duration) -> bool {
        if let Some((at, v)) = self.preferred_cache
            && now.saturating_sub(at) < PREFERRED_TTL
        {
            return v;
        }
        let v = self.workers.values().any(preferred);
        self.preferred_cache = Some((now, v));
        v
    }

    /// The constraints of `worker`'s lease at `now`.
    pub(crate) fn fit_of(&mut self, worker: &Uuid, now: Duration) -> Fit {
        let Some(w) = self.workers.get(worker) else {
            return Fit {
                left: None,
                slowness: 1.0,
                held: false,
            };
        };
        let left = w
            .available_until
            .map(|u| u.saturating_sub(now).as_secs_f64());
        let slowness = w.slowness.unwrap_or(1.0);
        let is_preferred = preferred(w) || w.verifier;
        let held = !is_preferred && self.preferred_registered(now);
        Fit {
            left,
            slowness,
            held,
        }
    }

    /// Whether a worker of `fit` is expected to finish `j` in time.
    pub(crate) fn fits(&self, fit: &Fit, j: &JobEntry, cfg: &ServiceConfig) -> bool {
        let Some(left) = fit.left else {
            return true;
        };
        let bound = max_lease_duration(j.key.level, cfg).as_secs_f64();
        let need = self
            .expected_secs(j)
            .map_or(bound, |e| (e * fit.slowness * SAFETY).min(bound));
        need <= left
    }

    /// Whether `j` is a long job held back from a worker of `fit` at `now`.
    fn held_back(&self, fit: &Fit, j: &JobEntry, now: Duration, cfg: &ServiceConfig) -> bool {
        fit.held
            && self
                .expected_secs(j)
                .is_some_and(|e| e >= cfg.long_job.as_secs_f64())
            && j.reserved_since
                .is_none_or(|t| now.saturating_sub(t) < cfg.reserve_for)
    }

    /// The first queued (non-check) job a worker of `fit` may take at `now`, scanning at most
    /// [`SCAN`] jobs; what it skipped goes to `skipped`. A long job first refused to a worker
    /// starts its reservation's clock.
    pub(crate) fn next_fitting(
        &mut self,
        fit: &Fit,
        now: Duration,
        cfg: &ServiceConfig,
        skipped: &mut Skipped,
    ) -> Option<QueueKey> {
        let mut found = None;
        let mut start = Vec::new();
        for k in self
            .queue
            .iter()
            .take_while(|k| k.0 != JobClass::Check)
            .take(SCAN)
        {
            let Some(j) = self.jobs.get(&k.3) else {
                continue;
            };
            if self.held_back(fit, j, now, cfg) {
                skipped.reserved = true;
                if j.reserved_since.is_none() {
                    start.push(k.3);
                }
                continue;
            }
            if !self.fits(fit, j, cfg) {
                skipped.no_fit = true;
                continue;
            }
            found = Some(*k);
            break;
        }
        for id in start {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.reserved_since = Some(now);
            }
        }
        found
    }

    /// Fold a lease-to-result time of `t` seconds for a job of `level` at `empties` by
    /// `worker` into the means (per level, per shape) and the worker's slowness.
    pub(super) fn measure(&mut self, worker: &Uuid, level: u8, empties: u8, t: f64) {
        let shape = self.shape_time.entry((level, empties)).or_insert(t);
        let before = *shape;
        // Exponential means over roughly the last 32 results of the level or shape (the
        // worker's over its last 8).
        *shape += (t - *shape) / 32.0;
        let mean = self.search_time.entry(level).or_insert(t);
        *mean += (t - *mean) / 32.0;
        if before > 0.0
            && let Some(w) = self.workers.get_mut(worker)
        {
            let r = (t / before).clamp(0.01, 100.0);
            w.slowness = Some(w.slowness.map_or(r, |s| s + (r - s) / 8.0));
        }
    }
}
