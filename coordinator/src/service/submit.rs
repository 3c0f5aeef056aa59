//! Submitted results: every result of a call is validated against its job's search before
//! anything changes, then stored with its provenance; the validation rules ([`super::trust`])
//! decide which results reach the book, and the ones that do are handed to the growth runner.

use super::growth::Landed;
use super::jobs::{Jobs, Sample};
use super::trust::{CheckKind, Taken};
use super::{Coordinator, now_ms};
use crate::error::{CoordinatorError, Result};
use crate::events::{EventKind, event};
use crate::store::Batch;
use bookfarm_engine::Move;
use bookfarm_engine::search::LeafRequest;
use bookfarm_proto::MAX_RESULTS_PER_CALL;
use bookfarm_proto::domain::{Ack, Identity, JobResult};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;
use uuid::Uuid;

/// What the results of one call did, gathered while their batch is built.
#[derive(Debug, Default)]
struct Intake {
    /// Results the book must use now (handed to growth).
    landed: Vec<Landed>,
    /// Contributors caught with an invalid result.
    caught: Vec<String>,
    /// Requests whose result must leave the book (growth replays or retracts them).
    rollback: Vec<LeafRequest>,
    /// Contributors whose trust record changed: written once per call, in their final state.
    touched: Vec<String>,
}

impl Coordinator {
    /// Validate and store results from a worker. Either every result is valid (then valid ones
    /// are stored with their provenance and handed to growth, duplicates ignored) or the call
    /// fails and nothing changes. The results are stored but not yet durable: callers must
    /// [`Coordinator::wait_durable`] before acknowledging.
    pub fn submit(&self, id: &Identity, worker: &Uuid, results: &[JobResult]) -> Result<Vec<Ack>> {
        self.check_identity(id)?;
        if results.len() > MAX_RESULTS_PER_CALL {
            return Err(CoordinatorError::TooMany {
                got: results.len(),
                max: MAX_RESULTS_PER_CALL,
            });
        }
        let now = self.now();
        let mut g = self.jobs();
        Self::touch(&mut g, worker, now)?;
        Self::check_blocked(&g, worker)?;
        let who = g
            .workers
            .get(worker)
            .map(|w| w.contributor.clone())
            .unwrap_or_default();
        // Pass 1: validate everything without changing anything.
        let acks = judge(&mut g, worker, &who, results)?;
        // Pass 2: store, and let the validation rules decide what reaches the book.
        let mut batch = Batch::default();
        let at = now_ms();
        let mut intake = Intake::default();
        for (r, ack) in results.iter().zip(&acks) {
            if *ack == Ack::Duplicate {
                g.counters.duplicates += 1;
                continue;
            }
            self.take(
                &mut g,
                &mut batch,
                &mut intake,
                (worker, &who),
                r,
                (now, at),
            )?;
        }
        let blocked = self.catch_losers(&mut g, &mut batch, &mut intake)?;
        self.write_trust(&mut g, &mut batch, &mut intake.touched, at)?;
        let replay = self.request_rollback(&mut g, &mut batch, intake.rollback)?;
        self.0.store.apply(batch)?;
        self.0.written.fetch_add(1, Ordering::SeqCst);
        g.trim_rates(now, Some(worker));
        g.update_gauges();
        let resync = g.resync;
        drop(g);
        self.end_blocked(blocked);
        self.hand_to_growth(intake.landed, replay || resync);
        Ok(acks)
    }

    /// [`Coordinator::submit`] for a remote worker: the acknowledgements come back once the
    /// results are durable (in-process workers do not wait, see `crate::local`).
    pub async fn submit_durable(
        &self,
        id: &Identity,
        worker: &Uuid,
        results: &[JobResult],
    ) -> Result<Vec<Ack>> {
        let acks = self.submit(id, worker, results)?;
        self.wait_durable().await?;
        Ok(acks)
    }

    /// Take one accepted result: fold it into its request's case (the trust ledger), close its
    /// job or turn it into a check job, and count it.
    fn take(
        &self,
        g: &mut Jobs,
        batch: &mut Batch,
        intake: &mut Intake,
        (worker, who): (&Uuid, &str),
        r: &JobResult,
        (now, at): (Duration, u64),
    ) -> Result<()> {
        g.record_search_time(&r.job_id, worker, now);
        let Some((key, prefetched)) = g.jobs.get(&r.job_id).map(|j| (j.key, j.prefetched)) else {
            return Ok(());
        };
        let rules = self.0.cfg.trust;
        let kind = g
            .jobs
            .get(&r.job_id)
            .and_then(|j| j.need.as_ref())
            .map(|n| n.kind);
        // A replica answers a request whose case is open: validation, a spot or core check.
        let replica = g.trust.case(&key).is_some();
        let taken = g.trust.take(
            &rules,
            batch,
            &mut intake.touched,
            (worker, who),
            (key, r),
            at,
        )?;
        let Taken {
            apply,
            losers,
            reached_book,
            ..
        } = close_or_check(g, batch, (worker, now), (key, r), taken)?;
        if let Some(result) = apply {
            if prefetched {
                g.counters.speculative_completed += 1;
            }
            g.landed.insert(key);
            intake.landed.push(Landed {
                key,
                result,
                prefetched,
            });
        }
        if kind == Some(CheckKind::Core) && !losers.is_empty() {
            g.trust.counters.core_caught += 1;
        }
        intake.caught.extend(losers);
        if reached_book {
            intake.rollback.push(key);
        }
        count(g, worker, (&key, r), now, replica);
        Ok(())
    }

    /// Drop what the contributors caught in this call vouched for alone (see
    /// [`super::trust`]); returns those of them blocked now.
    fn catch_losers(
        &self,
        g: &mut Jobs,
        batch: &mut Batch,
        intake: &mut Intake,
    ) -> Result<Vec<String>> {
        let rules = self.0.cfg.trust;
        let mut blocked = Vec::new();
        for loser in std::mem::take(&mut intake.caught) {
            let caught = g.trust.catch(&rules, batch, &mut intake.touched, &loser)?;
            let (owner, invalid) = g
                .trust
                .records
                .get(&loser)
                .map_or((String::new(), 0), |t| (t.owner.clone(), t.invalid));
            // Written before the batch that stores the decision: a crash in between can log a
            // catch whose resubmission is caught again, never lose one.
            self.0.events.record(event(
                EventKind::LieCaught,
                &loser,
                &owner,
                format!(
                    "invalid result ({invalid} so far); {} results only it vouched for dropped, \
                     {} open checks restarted",
                    caught.dropped.len(),
                    caught.restarted.len()
                ),
            ));
            if caught.blocked && g.blocks_recorded.insert(loser.clone()) {
                self.0.events.record(event(
                    EventKind::ContributorBlocked,
                    &loser,
                    &owner,
                    format!(
                        "blocked by the coordinator after {invalid} invalid results (limit {})",
                        rules.block_after
                    ),
                ));
            }
            // Those searches start over as ordinary work (growth lists them again if needed).
            for k in &caught.restarted {
                if let Some(id) = g.job_of(k) {
                    g.remove(id);
                    g.resync = true;
                }
            }
            intake.rollback.extend(caught.dropped);
            if caught.blocked {
                blocked.push(loser);
            }
        }
        Ok(blocked)
    }

    /// Store the trust records this call changed that must be written now (see
    /// `TrustState::records_to_write`).
    fn write_trust(
        &self,
        g: &mut Jobs,
        batch: &mut Batch,
        touched: &mut Vec<String>,
        at: u64,
    ) -> Result<()> {
        touched.sort_unstable();
        touched.dedup();
        let interval_ms =
            u64::try_from(self.0.cfg.checkpoint_interval.as_millis()).unwrap_or(u64::MAX);
        for (name, t) in g.trust.records_to_write(touched, at, interval_ms) {
            batch.put_trust(&name, &t)?;
        }
        Ok(())
    }

    /// Request a rollback of the results in `rollback` (none: no rollback; growth's recovery
    /// replays or retracts them); returns whether one was requested.
    fn request_rollback(
        &self,
        g: &mut Jobs,
        batch: &mut Batch,
        rollback: Vec<LeafRequest>,
    ) -> Result<bool> {
        if rollback.is_empty() {
            return Ok(false);
        }
        g.trust.counters.rollbacks += 1;
        // Durable with the removals: a coordinator killed before the recovery recovers at its
        // next start (the stored book may already hold the dropped results' effects).
        let n = self.0.rollbacks_requested.fetch_add(1, Ordering::SeqCst) + 1;
        batch.put_rollback_requested(n)?;
        let mut pending = self.0.rollback.lock().unwrap_or_else(|p| p.into_inner());
        let (through, dropped) = pending.get_or_insert_with(|| (n, Vec::new()));
        *through = n;
        dropped.extend(rollback);
        Ok(true)
    }
}

/// Pass 1 of a submission: check every result of the call (each job once, leased to the
/// caller, a valid answer to its search) without changing anything but the rejection count.
/// Returns each result's acknowledgement: a job accepted before, or a request this contributor
/// answered already, is a duplicate.
fn judge(g: &mut Jobs, worker: &Uuid, who: &str, results: &[JobResult]) -> Result<Vec<Ack>> {
    let mut acks = Vec::with_capacity(results.len());
    let mut seen = HashSet::new();
    for r in results {
        if !seen.insert(r.job_id) {
            g.counters.rejected += 1;
            return Err(CoordinatorError::InvalidArgument(format!(
                "job {} appears twice in one call",
                r.job_id
            )));
        }
        if g.done.contains(&r.job_id) {
            acks.push(Ack::Duplicate);
            continue;
        }
        let Some(j) = g.jobs.get(&r.job_id) else {
            g.counters.rejected += 1;
            return Err(CoordinatorError::UnknownJob(r.job_id));
        };
        if !j.lessees.contains(worker) {
            g.counters.rejected += 1;
            return Err(CoordinatorError::NotLeased {
                job: r.job_id,
                worker: *worker,
            });
        }
        if let Err(e) = validate(&j.key, r) {
            g.counters.rejected += 1;
            return Err(e);
        }
        // A contributor answers a request once (another session of the same credential
        // adds nothing to a case).
        let answered = g
            .trust
            .case(&j.key)
            .is_some_and(|c| c.replicas.iter().any(|x| x.contributor == who));
        acks.push(if answered {
            Ack::Duplicate
        } else {
            Ack::Accepted
        });
    }
    Ok(acks)
}

/// After the ledger took a result: its job becomes a check job while its case stays open,
/// otherwise it is closed (and recorded as accepted, unless the batch's result record names it).
fn close_or_check(
    g: &mut Jobs,
    batch: &mut Batch,
    (worker, now): (&Uuid, Duration),
    (key, r): (LeafRequest, &JobResult),
    mut taken: Taken,
) -> Result<Taken> {
    let job = g.job_of(&key);
    match taken.need.take() {
        Some(need) => {
            if let Some(id) = job {
                g.make_check(id, worker, need, now);
            }
        }
        None => {
            if let Some(id) = job {
                g.remove(id);
            }
            g.done.insert(r.job_id);
            if !taken.names_job {
                batch.put_done(&r.job_id, &key.board)?;
            }
        }
    }
    Ok(taken)
}

/// Count an accepted result in the farm's and its worker's figures.
fn count(
    g: &mut Jobs,
    worker: &Uuid,
    (key, r): (&LeafRequest, &JobResult),
    now: Duration,
    replica: bool,
) {
    g.counters.completed += 1;
    let l = Sample {
        at: now,
        nodes: r.leaf.nodes,
        search_us: u64::try_from(r.leaf.elapsed.as_micros()).unwrap_or(u64::MAX),
    };
    g.charge(key, l.search_us, replica);
    g.recent.push_back(l);
    if let Some(w) = g.workers.get_mut(worker) {
        w.completed += 1;
        w.recent.push_back(l);
        let who = match &w.owner {
            Some(o) => (false, o.clone()),
            None => (true, w.name.clone()),
        };
        *g.contributions.entry(who).or_default() += 1;
    }
}

/// Validate one result against its search: the move must be legal and not excluded (a pass only
/// when forced; "no move" only when nothing is left to search), the score within [-64, 64], an
/// exact score even (Edax's final scores give the empties to the winner), and the depth and
/// selectivity those of the level table for the position (a finished game reports its empties
/// at full selectivity). Workers never submit aborted searches, so a completed search always
/// reports the level table's depth and selectivity.
fn validate(key: &LeafRequest, r: &JobResult) -> Result<()> {
    let (job, l) = (r.job_id, &r.leaf);
    let b = &key.board;
    let open = b.moves() & !key.excluded;
    let ok = match l.mv {
        Move::Square(s) => open & s.bit() != 0,
        Move::Pass => b.must_pass(),
        Move::None => open == 0 && !b.must_pass(),
    };
    if !ok {
        return Err(CoordinatorError::IllegalMove { job, mv: l.mv });
    }
    if !(-64..=64).contains(&l.score) {
        return Err(CoordinatorError::ScoreOutOfRange {
            job,
            score: l.score,
        });
    }
    if l.exact && l.score % 2 != 0 {
        return Err(CoordinatorError::ExactParity {
            job,
            score: l.score,
        });
    }
    // A finished game is scored, not searched: every empty is "searched", at full selectivity.
    let empties = b.empties();
    let want = if b.is_game_over() {
        (empties, bookfarm_engine::level::NO_SELECTIVITY)
    } else {
        bookfarm_engine::level::level_params(key.level, empties)
    };
    if (l.depth, l.selectivity) != want {
        return Err(CoordinatorError::BadDepth {
            job,
            depth: l.depth,
            selectivity: l.selectivity,
            level: key.level,
            empties,
        });
    }
    Ok(())
}
