//! The trust ledger: standing and credit per contributor, open cases, who vouches for each
//! applied result, and what a decision of the rules (`super::rules`) changes in them and in
//! the store (a replica taken, a contributor caught, the cases reopened after a restart).

use super::rules::{
    Decision, Need, Replica, Standing, TrustRules, Window, coin, decide, spot_probability, standing,
};
use crate::error::Result;
use crate::store::{Batch, CaseRecord, ReplicaRecord, ResultRecord, TrustRecord};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_proto::domain::JobResult;
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// Replica record of a stored case.
pub(crate) fn replica_record(r: &Replica) -> ReplicaRecord {
    ReplicaRecord {
        contributor: r.contributor.clone(),
        owner: r.owner.clone(),
        standing: r.standing as u8,
        result: crate::store::ResultRecord::of(&r.result),
    }
}

/// The replica of a stored record.
pub(crate) fn replica_of(r: &ReplicaRecord) -> Replica {
    Replica {
        contributor: r.contributor.clone(),
        owner: r.owner.clone(),
        standing: match r.standing {
            0 => Standing::Untrusted,
            1 => Standing::Earned,
            2 => Standing::Given,
            _ => Standing::Root,
        },
        result: r.result.leaf,
    }
}

/// An open case: the replicas of a request still waiting for a decision.
pub(crate) fn case_record(replicas: &[Replica], applied: bool) -> CaseRecord {
    CaseRecord {
        replicas: replicas.iter().map(replica_record).collect(),
        applied,
    }
}

/// An open case in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Case {
    /// Replicas, earliest first.
    pub(crate) replicas: Vec<Replica>,
    /// The first replica's result reached the book already.
    pub(crate) applied: bool,
}

/// What validation did since start (status, benchmarks, the lying-workers test).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrustCounters {
    /// Results held until validated (untrusted or inside a window).
    pub held: u64,
    /// Held results that were then validated and applied.
    pub validated: u64,
    /// Results applied on one trusted word.
    pub applied_at_once: u64,
    /// Spot checks drawn.
    pub spot_checks: u64,
    /// Replicas that disagreed with the settled result (lies caught, or broken machines).
    pub invalid: u64,
    /// Wrong results that had reached the book before they were caught.
    pub reached_book: u64,
    /// Rollbacks by replay.
    pub rollbacks: u64,
    /// Results dropped because their only voucher was caught.
    pub dropped: u64,
    /// Nodes of results the book used (first replica of each request).
    pub used_nodes: u64,
    /// Nodes of replicas beyond the first (validation and spot checks: the extra compute).
    pub replica_nodes: u64,
}

/// The validation state: standing and credit per contributor, open cases, and who vouches for
/// each applied result. Lives in the job table's lock (leases need standings; submissions change
/// everything at once).
#[derive(Debug, Default)]
pub(crate) struct TrustState {
    pub(crate) records: HashMap<String, TrustRecord>,
    pub(crate) cases: HashMap<LeafRequest, Case>,
    /// Contributors vouching for each applied result with provenance.
    pub(crate) sources: HashMap<LeafRequest, Vec<String>>,
    pub(crate) counters: TrustCounters,
    /// Verification workers registered now (spot checks are drawn only while one is).
    pub(crate) verifiers: usize,
    /// Which results of the running program are critical (set by growth with the requests it
    /// lists).
    pub(crate) window: Window,
    /// Each contributor's record as last written (see [`TrustState::records_to_write`]).
    pub(crate) written: HashMap<String, TrustRecord>,
    /// Contributors whose record changed since it was last written, in counts only.
    pub(crate) unwritten: HashSet<String>,
    /// When the count-only changes were last written (the service clock's milliseconds).
    pub(crate) counts_written_ms: u64,
}

impl TrustState {
    /// From the store's records.
    pub(crate) fn load(
        records: Vec<(String, TrustRecord)>,
        cases: Vec<(LeafRequest, CaseRecord)>,
        sources: impl Iterator<Item = (LeafRequest, Vec<String>)>,
    ) -> TrustState {
        let records: HashMap<String, TrustRecord> = records.into_iter().collect();
        let written = records.clone();
        let root = |c: &String| records.get(c).is_some_and(|r| r.root);
        let sources = sources
            .filter(|(_, s)| !s.is_empty() && !s.iter().all(root))
            .collect();
        TrustState {
            records,
            cases: cases
                .into_iter()
                .map(|(k, c)| {
                    (
                        k,
                        Case {
                            replicas: c.replicas.iter().map(replica_of).collect(),
                            applied: c.applied,
                        },
                    )
                })
                .collect(),
            sources,
            counters: TrustCounters::default(),
            verifiers: 0,
            // Until growth lists its first requests: conservative.
            window: Window::All,
            written,
            unwritten: HashSet::new(),
            counts_written_ms: 0,
        }
    }

    /// The records to store with a batch that changed the records of `touched` at `now_ms`.
    /// A change that decides anything (standing, owner, earned trust, invalid results, a block,
    /// a streak reset) is written with the results that caused it. A change of counts only
    /// (results, nodes, search time, replicas, first result, a longer streak) is written at
    /// most once per `interval_ms`, and by [`TrustState::take_unwritten`] at every flush, so
    /// that most submissions are their result group alone (one store write). A crash loses at
    /// most that interval of counts: never a result, and never a decision against a
    /// contributor (a lost streak increment only delays earned trust).
    pub(crate) fn records_to_write(
        &mut self,
        touched: &[String],
        now_ms: u64,
        interval_ms: u64,
    ) -> Vec<(String, TrustRecord)> {
        let mut out = Vec::new();
        for name in touched {
            let Some(t) = self.records.get(name) else {
                continue;
            };
            if self.written.get(name).is_none_or(|w| decides(w, t)) {
                self.unwritten.remove(name);
                self.written.insert(name.clone(), t.clone());
                out.push((name.clone(), t.clone()));
            } else {
                self.unwritten.insert(name.clone());
            }
        }
        if !self.unwritten.is_empty()
            && now_ms >= self.counts_written_ms.saturating_add(interval_ms)
        {
            out.extend(self.take_unwritten());
            self.counts_written_ms = now_ms;
        }
        out
    }

    /// The records with count changes not written yet (they count as written from now on).
    pub(crate) fn take_unwritten(&mut self) -> Vec<(String, TrustRecord)> {
        let mut names: Vec<String> = self.unwritten.drain().collect();
        names.sort_unstable();
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            if let Some(t) = self.records.get(&n) {
                self.written.insert(n.clone(), t.clone());
                out.push((n, t.clone()));
            }
        }
        out
    }

    /// The standing of a contributor (unknown: untrusted).
    pub(crate) fn standing_of(&self, contributor: &str, rules: &TrustRules) -> Standing {
        self.records
            .get(contributor)
            .map_or(Standing::Untrusted, |r| standing(r, rules))
    }

    /// Whether a contributor is blocked.
    pub(crate) fn blocked(&self, contributor: &str) -> bool {
        self.records.get(contributor).is_some_and(|r| r.blocked)
    }

    /// A contributor's record, created on first use with the standing the operator gave it.
    pub(crate) fn enroll(&mut self, contributor: &str, owner: &str, given: bool, root: bool) {
        let r = self.records.entry(contributor.to_string()).or_default();
        r.owner = owner.to_string();
        r.given = given;
        r.root = root;
    }
}

/// Whether going from record `was` (as written) to `now` changes a decision, which must be
/// stored with the results that caused it (see [`TrustState::records_to_write`]).
fn decides(was: &TrustRecord, now: &TrustRecord) -> bool {
    (
        &was.owner,
        was.root,
        was.given,
        was.earned_ms,
        was.invalid,
        was.blocked,
    ) != (
        &now.owner,
        now.root,
        now.given,
        now.earned_ms,
        now.invalid,
        now.blocked,
    ) || now.streak < was.streak
}

/// What the ledger did with one replica (see [`TrustState::take`]).
#[derive(Debug)]
pub(crate) struct Taken {
    /// The result the book must use now.
    pub(crate) apply: Option<LeafResult>,
    /// Contributors caught with an invalid result.
    pub(crate) losers: Vec<String>,
    /// A wrong result had reached the book (replay).
    pub(crate) reached_book: bool,
    /// The case stays open, waiting for this (its job becomes a check job); None: closed.
    pub(crate) need: Option<Need>,
    /// The batch stores a result record naming the replica's job (which also records the job
    /// as accepted, see `Store::load`).
    pub(crate) names_job: bool,
}

/// What catching a contributor did (see [`TrustState::catch`]).
#[derive(Debug)]
pub(crate) struct Caught {
    /// Applied results no one else vouches for, removed from the store (the book must be
    /// replayed without them).
    pub(crate) dropped: Vec<LeafRequest>,
    /// Open cases left without a replica: their searches start over as ordinary work.
    pub(crate) restarted: Vec<LeafRequest>,
    /// The contributor is blocked now.
    pub(crate) blocked: bool,
}

impl TrustState {
    /// Fold one accepted replica of `worker` (contributor `who`) into its request's case:
    /// decide (see [`decide`]), count, credit, store the result the book uses with who vouches
    /// for it, and store or close the case. The contributors whose trust record changed are
    /// added to `touched` (the caller writes them once per call).
    pub(crate) fn take(
        &mut self,
        rules: &TrustRules,
        batch: &mut Batch,
        touched: &mut Vec<String>,
        (worker, who): (&Uuid, &str),
        (key, r): (LeafRequest, &JobResult),
        at: u64,
    ) -> Result<Taken> {
        let standing = self.standing_of(who, rules);
        let owner = self
            .records
            .get(who)
            .map(|t| t.owner.clone())
            .unwrap_or_default();
        let mut case = self.cases.remove(&key).unwrap_or_default();
        let first = case.replicas.is_empty();
        let was_applied = case.applied;
        case.replicas.push(Replica {
            contributor: who.to_string(),
            owner,
            standing,
            result: r.leaf,
        });
        let applied = was_applied.then(|| case.replicas[0].result);
        // Judged on the first replica's score: the result the book would use.
        let critical = self.window.critical(&key, case.replicas[0].result.score);
        let streak = self.records.get(who).map_or(0, |t| t.streak);
        let spot = self.verifiers > 0 && coin(&r.job_id) < spot_probability(streak, rules);
        let d = decide(
            &case.replicas,
            applied.as_ref(),
            critical,
            spot,
            self.verifiers > 0,
        );
        let reached_book = was_applied && d.losers.contains(&case.replicas[0].contributor);
        self.count(&d, r.leaf.nodes, first, was_applied, reached_book);
        self.credit(rules, touched, who, &case, &d, at);
        for name in &d.losers {
            tracing::warn!(contributor = %name, request = ?key, "invalid result caught");
        }
        // The stored result and who vouches for it.
        let chosen = d.apply.or(applied.filter(|_| d.need.is_none()));
        if let Some(res) = chosen {
            let mut rec = ResultRecord::of(&res);
            rec.worker = *worker.as_bytes();
            rec.job = *r.job_id.as_bytes();
            rec.accepted_ms = at;
            rec.sources.clone_from(&d.sources);
            batch.put_result(&key, &rec)?;
            // The coordinator's own results are never dropped: only others' are tracked (a
            // local build keeps no such map).
            if d.sources
                .iter()
                .all(|c| self.standing_of(c, rules) == Standing::Root)
            {
                self.sources.remove(&key);
            } else {
                self.sources.insert(key, d.sources);
            }
        }
        match &d.need {
            Some(_) => {
                case.applied |= d.apply.is_some();
                batch.put_case(&key, Some(&case_record(&case.replicas, case.applied)))?;
                self.cases.insert(key, case);
            }
            None => {
                if !first {
                    batch.put_case(&key, None)?;
                }
            }
        }
        Ok(Taken {
            apply: d.apply,
            losers: d.losers,
            reached_book,
            need: d.need,
            names_job: chosen.is_some(),
        })
    }

    /// Count a decision in the validation figures.
    fn count(
        &mut self,
        d: &Decision,
        nodes: u64,
        first: bool,
        was_applied: bool,
        reached_book: bool,
    ) {
        let c = &mut self.counters;
        if first {
            c.used_nodes += nodes;
            match (&d.apply, &d.need) {
                (None, _) => c.held += 1,
                (Some(_), need) => {
                    c.applied_at_once += 1;
                    c.spot_checks += u64::from(need.is_some());
                }
            }
        } else {
            c.replica_nodes += nodes;
            if d.apply.is_some() && !was_applied {
                c.validated += 1;
            }
        }
        c.invalid += d.losers.len() as u64;
        c.reached_book += u64::from(reached_book);
    }

    /// The records after decision `d` on `case` (as it was before the decision): credit once
    /// per replica, streaks (and earned trust), invalid results (and blocks); a wrong result
    /// the book used loses its credit.
    fn credit(
        &mut self,
        rules: &TrustRules,
        touched: &mut Vec<String>,
        who: &str,
        case: &Case,
        d: &Decision,
        at: u64,
    ) {
        let first_replica = &case.replicas[0];
        let reached_book = case.applied && d.losers.contains(&first_replica.contributor);
        if touched.last().is_none_or(|t| t != who) {
            touched.push(who.to_string());
        }
        if let Some(t) = self.records.get_mut(who)
            && t.first_ms == 0
        {
            t.first_ms = at;
        }
        for (i, x) in case.replicas.iter().enumerate() {
            if !d.credited.contains(&x.contributor) || (i == 0 && case.applied) {
                continue;
            }
            if let Some(t) = self.records.get_mut(&x.contributor) {
                t.results += 1;
                t.nodes += x.result.nodes;
                t.cpu_us += u64::try_from(x.result.elapsed.as_micros()).unwrap_or(u64::MAX);
                touched.push(x.contributor.clone());
            }
        }
        for name in &d.confirmed {
            if let Some(t) = self.records.get_mut(name) {
                t.streak += 1;
                if t.streak == rules.earn_after && !t.given && !t.root {
                    t.earned_ms = at;
                    tracing::info!(contributor = %name, "trust earned");
                }
                touched.push(name.clone());
            }
        }
        for name in &d.losers {
            if let Some(t) = self.records.get_mut(name) {
                if reached_book && *name == first_replica.contributor {
                    // Its credit for the result the book used is taken back.
                    let r = &first_replica.result;
                    t.results = t.results.saturating_sub(1);
                    t.nodes = t.nodes.saturating_sub(r.nodes);
                    t.cpu_us = t
                        .cpu_us
                        .saturating_sub(u64::try_from(r.elapsed.as_micros()).unwrap_or(0));
                }
                t.streak = 0;
                t.invalid += 1;
                if t.invalid >= rules.block_after && !t.root {
                    t.blocked = true;
                }
                touched.push(name.clone());
            }
        }
    }

    /// A contributor was caught with an invalid result: drop every applied result no one else
    /// vouches for (trusted, or earned from another owner) and its replicas in open cases.
    pub(crate) fn catch(
        &mut self,
        rules: &TrustRules,
        batch: &mut Batch,
        loser: &str,
    ) -> Result<Caught> {
        let mut dropped = Vec::new();
        let keys: Vec<LeafRequest> = self
            .sources
            .iter()
            .filter(|(_, s)| s.iter().any(|c| c == loser))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            let Some(mut srcs) = self.sources.remove(&k) else {
                continue;
            };
            srcs.retain(|c| c != loser);
            if srcs
                .iter()
                .any(|c| self.standing_of(c, rules) >= Standing::Earned)
            {
                self.sources.insert(k, srcs);
            } else {
                batch.remove_result(&k);
                dropped.push(k);
            }
        }
        self.counters.dropped += dropped.len() as u64;
        let open: Vec<LeafRequest> = self
            .cases
            .iter()
            .filter(|(_, c)| c.replicas.iter().any(|x| x.contributor == loser))
            .map(|(k, _)| *k)
            .collect();
        let mut restarted = Vec::new();
        for k in open {
            let Some(mut case) = self.cases.remove(&k) else {
                continue;
            };
            if case
                .replicas
                .first()
                .is_some_and(|x| x.contributor == loser)
            {
                case.applied = false;
            }
            case.replicas.retain(|x| x.contributor != loser);
            if case.replicas.is_empty() {
                batch.put_case(&k, None)?;
                restarted.push(k);
            } else {
                batch.put_case(&k, Some(&case_record(&case.replicas, case.applied)))?;
                self.cases.insert(k, case);
            }
        }
        let blocked = self.blocked(loser);
        tracing::warn!(contributor = %loser, dropped = dropped.len(), blocked, "results of a caught contributor dropped");
        Ok(Caught {
            dropped,
            restarted,
            blocked,
        })
    }

    /// What the open cases wait for (after a restart, their jobs are check jobs again).
    pub(crate) fn open_needs(&self) -> Vec<(LeafRequest, Need)> {
        self.cases
            .iter()
            .filter_map(|(k, case)| {
                let applied = case.applied.then(|| case.replicas[0].result);
                let d = decide(&case.replicas, applied.as_ref(), true, false, false);
                d.need.map(|need| (*k, need))
            })
            .collect()
    }
}
