//! The trust ledger: standing and credit per contributor, open cases, who vouches for each
//! applied result, and what a decision of the rules (`super::rules`) changes in them and in
//! the store (a replica taken, a contributor caught, the cases reopened after a restart).

use super::core_watch::CoreWatch;
use super::rules::{
    CheckKind, Decision, Need, Replica, Standing, StreakRule, TrustRules, coin, decide,
    earning_room, earning_window, required_streak, spot_probability, standing,
};
use crate::error::Result;
use crate::store::{Batch, CaseRecord, ReplicaRecord, ResultRecord, TrustRecord};
use bookfarm_book::decisive::{CoreKey, CoreSet};
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

/// The replica of a stored record (a standing byte [`replica_record`] never writes reads as
/// the least trusted standing, never as a trust root).
pub(crate) fn replica_of(r: &ReplicaRecord) -> Replica {
    Replica {
        contributor: r.contributor.clone(),
        owner: r.owner.clone(),
        standing: match r.standing {
            1 => Standing::Earned,
            2 => Standing::Given,
            3 => Standing::Root,
            _ => Standing::Untrusted,
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
    /// Results held until validated (untrusted contributors).
    pub held: u64,
    /// Held results that were then validated and applied.
    pub validated: u64,
    /// Results applied on one word (trusted or earned).
    pub applied_at_once: u64,
    /// Spot checks drawn.
    pub spot_checks: u64,
    /// Validations and spot checks opened to earned workers of other owners (no trust root took
    /// them in time).
    pub relaxed_checks: u64,
    /// Core checks issued: provisional results that stayed in the decisive core.
    pub core_checks: u64,
    /// Core checks that caught a wrong result.
    pub core_caught: u64,
    /// Provisional results now (applied on earned words only; see `TrustState::figures`).
    pub provisional: u64,
    /// Leaves of the last decisive core growth handed over.
    pub core_size: u64,
    /// Provisional results in that core (a finished build has none).
    pub core_unconfirmed: u64,
    /// Coordinator CPU the rollbacks took (the growth runs that replayed or retracted),
    /// microseconds.
    pub replay_cpu_us: u64,
    /// Replicas that disagreed with the settled result (lies caught, or broken machines).
    pub invalid: u64,
    /// Wrong results that had reached the book before they were caught.
    pub reached_book: u64,
    /// Rollbacks requested (a caught contributor's results dropped): each is handled by a
    /// replay or a retraction, several requests between two growth runs by one.
    pub rollbacks: u64,
    /// Rollbacks handled by replaying the programs from the base book (a serial book).
    pub replays: u64,
    /// Rollbacks handled by retract-and-repair (an asynchronous book: in its running program,
    /// or in the last one re-opened).
    pub retractions: u64,
    /// Results dropped because their only voucher was caught.
    pub dropped: u64,
    /// Nodes of results the book used (first replica of each request).
    pub used_nodes: u64,
    /// Nodes of replicas beyond the first (validation and spot checks: the extra compute).
    pub replica_nodes: u64,
}

impl TrustCounters {
    /// What was counted since `earlier` (a reading of the same service): every count less its
    /// earlier value; the figures of now (provisional results, the core) as they are.
    pub fn since(&self, earlier: &TrustCounters) -> TrustCounters {
        // Every field named: a new one must be sorted into counts or figures here.
        let TrustCounters {
            held,
            validated,
            applied_at_once,
            spot_checks,
            relaxed_checks,
            core_checks,
            core_caught,
            provisional,
            core_size,
            core_unconfirmed,
            replay_cpu_us,
            invalid,
            reached_book,
            rollbacks,
            replays,
            retractions,
            dropped,
            used_nodes,
            replica_nodes,
        } = *self;
        let e = earlier;
        TrustCounters {
            held: held.saturating_sub(e.held),
            validated: validated.saturating_sub(e.validated),
            applied_at_once: applied_at_once.saturating_sub(e.applied_at_once),
            spot_checks: spot_checks.saturating_sub(e.spot_checks),
            relaxed_checks: relaxed_checks.saturating_sub(e.relaxed_checks),
            core_checks: core_checks.saturating_sub(e.core_checks),
            core_caught: core_caught.saturating_sub(e.core_caught),
            provisional,
            core_size,
            core_unconfirmed,
            replay_cpu_us: replay_cpu_us.saturating_sub(e.replay_cpu_us),
            invalid: invalid.saturating_sub(e.invalid),
            reached_book: reached_book.saturating_sub(e.reached_book),
            rollbacks: rollbacks.saturating_sub(e.rollbacks),
            replays: replays.saturating_sub(e.replays),
            retractions: retractions.saturating_sub(e.retractions),
            dropped: dropped.saturating_sub(e.dropped),
            used_nodes: used_nodes.saturating_sub(e.used_nodes),
            replica_nodes: replica_nodes.saturating_sub(e.replica_nodes),
        }
    }
}

/// The validation state: standing and credit per contributor, open cases, who vouches for
/// each applied result, and which results are provisional (see `super::core_watch`). Lives in the
/// job table's lock (leases need standings; submissions change everything at once).
#[derive(Debug, Default)]
pub(crate) struct TrustState {
    pub(crate) records: HashMap<String, TrustRecord>,
    /// Open cases; private, changed only through [`TrustState::open_case`],
    /// [`TrustState::close_case`] and [`TrustState::clear_cases`], which keep `open_replicas` in
    /// step (read through [`TrustState::case`] and [`TrustState::cases`]).
    cases: HashMap<LeafRequest, Case>,
    /// Replicas in open cases per contributor: a credential still earning trust counts its
    /// unconfirmed results with them (see [`TrustState::earning_room`]).
    pub(super) open_replicas: HashMap<String, usize>,
    /// Contributors vouching for each applied result with provenance.
    pub(crate) sources: HashMap<LeafRequest, Vouch>,
    pub(crate) counters: TrustCounters,
    /// Verification workers registered now (they spot-check trusted workers' results).
    pub(crate) verifiers: usize,
    /// Invalid results per owner, over all its credentials (each doubles the streak its
    /// credentials need, see [`required_streak`]).
    pub(crate) catches: HashMap<String, u64>,
    /// The provisional results and the decisive core.
    pub(crate) watch: CoreWatch,
    /// The key of the spot-check coin (see [`coin`]): secret, so that a worker cannot tell
    /// which of its answers will be checked.
    pub(crate) coin_key: u64,
    /// Each contributor's record as last written (see [`TrustState::records_to_write`]).
    pub(crate) written: HashMap<String, TrustRecord>,
    /// Contributors whose record changed since it was last written, in counts only.
    pub(crate) unwritten: HashSet<String>,
    /// When the count-only changes were last written (the service clock's milliseconds).
    pub(crate) counts_written_ms: u64,
}

/// Who vouches for an applied result, and the result. Each of them was credited with it once,
/// and keeps that credit while the result stands, even once caught (others still vouch for
/// it); when it is dropped, every one of them loses that credit with it.
#[derive(Debug, Clone)]
pub(crate) struct Vouch {
    /// Vouching now: those not caught since.
    pub(crate) by: Vec<String>,
    /// Credited with the result: every contributor that vouched for it.
    pub(crate) credited: Vec<String>,
    pub(crate) result: LeafResult,
}

impl TrustState {
    /// From the store's records: contributors, open cases, and the stored results with who
    /// vouches for them; `coin_key`: the spot-check coin's secret.
    pub(crate) fn load(
        records: Vec<(String, TrustRecord)>,
        cases: Vec<(LeafRequest, CaseRecord)>,
        results: impl Iterator<Item = (LeafRequest, Vec<String>, LeafResult)>,
        coin_key: u64,
    ) -> TrustState {
        let records: HashMap<String, TrustRecord> = records.into_iter().collect();
        let written = records.clone();
        let mut t = TrustState {
            catches: catches_by_owner(records.values()),
            records,
            coin_key,
            written,
            ..TrustState::default()
        };
        for (k, c) in cases {
            let case = Case {
                replicas: c.replicas.iter().map(replica_of).collect(),
                applied: c.applied,
            };
            t.open_case(k, case);
        }
        for (k, sources, result) in results {
            t.vouched(k, sources, &result);
        }
        t
    }

    /// Open (or replace) the case of `key`.
    pub(crate) fn open_case(&mut self, key: LeafRequest, case: Case) {
        for r in &case.replicas {
            *self.open_replicas.entry(r.contributor.clone()).or_default() += 1;
        }
        if let Some(old) = self.cases.insert(key, case) {
            self.uncount(&old);
        }
    }

    /// Close the case of `key`, returning it.
    pub(crate) fn close_case(&mut self, key: &LeafRequest) -> Option<Case> {
        let case = self.cases.remove(key)?;
        self.uncount(&case);
        Some(case)
    }

    /// The open case of `key`, if any.
    pub(crate) fn case(&self, key: &LeafRequest) -> Option<&Case> {
        self.cases.get(key)
    }

    /// The open cases, in no particular order.
    pub(crate) fn cases(&self) -> impl Iterator<Item = (&LeafRequest, &Case)> {
        self.cases.iter()
    }

    /// Close every case (a new book).
    pub(crate) fn clear_cases(&mut self) {
        self.cases.clear();
        self.open_replicas.clear();
    }

    fn uncount(&mut self, case: &Case) {
        for r in &case.replicas {
            if let Some(n) = self.open_replicas.get_mut(&r.contributor) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.open_replicas.remove(&r.contributor);
                }
            }
        }
    }

    /// How many more searches `contributor` may be given while it earns trust (see
    /// [`earning_room`]): `None` when it is no credential still earning (earned, trusted, the
    /// coordinator's own, or unknown), else the confirmations it still needs (at most its
    /// owner's [`earning_window`]) less its replicas in open cases and the `leased` searches
    /// its workers hold now (asked only then: it walks the workers). The rule knows nothing of
    /// programs or passes.
    pub(crate) fn earning_room(
        &self,
        contributor: &str,
        rules: &TrustRules,
        leased: impl FnOnce() -> usize,
    ) -> Option<usize> {
        let r = self.records.get(contributor)?;
        let catches = self.catches.get(&r.owner).copied().unwrap_or(0);
        if standing(r, rules, catches) >= Standing::Earned {
            return None;
        }
        let open = self.open_replicas.get(contributor).copied().unwrap_or(0);
        Some(earning_room(
            required_streak(rules, catches),
            r.streak,
            open.saturating_add(leased()),
            earning_window(rules, catches),
        ))
    }

    /// Whether `contributor` is a trust root (the coordinator's own, or trusted by the
    /// operator): its agreement makes a result final.
    fn rooted(&self, contributor: &str) -> bool {
        self.records
            .get(contributor)
            .is_some_and(|r| r.root || r.given)
    }

    /// The applied result of `key` is vouched for by `sources`: track who (the coordinator's
    /// own results are never dropped, so they are not tracked) and whether it is provisional.
    fn vouched(&mut self, key: LeafRequest, sources: Vec<String>, result: &LeafResult) {
        let root = |c: &String| self.records.get(c).is_some_and(|r| r.root);
        if sources.is_empty() || sources.iter().all(root) {
            self.sources.remove(&key);
            self.watch.remove(&key);
        } else {
            if sources.iter().any(|c| self.rooted(c)) {
                self.watch.remove(&key);
            } else {
                self.watch.add(key, CoreKey::of_result(&key, result));
            }
            self.sources.insert(
                key,
                Vouch {
                    credited: sources.clone(),
                    by: sources,
                    result: *result,
                },
            );
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
            .map_or(Standing::Untrusted, |r| {
                standing(r, rules, self.catches.get(&r.owner).copied().unwrap_or(0))
            })
    }

    /// Whether the applied result of `key` is provisional: applied on the word of earned
    /// contributors only, no trust root agreeing. Every other applied result is confirmed.
    pub(crate) fn provisional(&self, key: &LeafRequest) -> bool {
        self.watch.is_provisional(key)
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

/// Invalid results per owner over all its credentials.
pub fn catches_by_owner<'a>(
    records: impl Iterator<Item = &'a TrustRecord>,
) -> HashMap<String, u64> {
    let mut m: HashMap<String, u64> = HashMap::new();
    for r in records {
        if r.invalid > 0 {
            *m.entry(r.owner.clone()).or_default() += r.invalid;
        }
    }
    m
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
        let mut case = self.close_case(&key).unwrap_or_default();
        let first = case.replicas.is_empty();
        let was_applied = case.applied;
        case.replicas.push(Replica {
            contributor: who.to_string(),
            owner,
            standing,
            result: r.leaf,
        });
        let applied = was_applied.then(|| case.replicas[0].result);
        let streak = self.records.get(who).map_or(0, |t| t.streak);
        let spot = coin(&r.job_id, self.coin_key) < spot_probability(streak, rules);
        let d = decide(&case.replicas, applied.as_ref(), spot, self.verifiers > 0);
        let reached_book = was_applied && d.losers.contains(&case.replicas[0].contributor);
        self.count(&d, r.leaf.nodes, first, was_applied, reached_book);
        self.credit(rules, touched, who, &case, &d, at);
        if rules.streak == StreakRule::Results
            && first
            && d.apply.is_some()
            && d.need.is_none()
            && matches!(standing, Standing::Earned | Standing::Given)
        {
            // Applied on its own word with no check drawn: a result not found wrong.
            if let Some(t) = self.records.get_mut(who) {
                t.streak += 1;
            }
        }
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
            self.vouched(key, d.sources.clone(), &res);
        }
        if d.apply.is_some() {
            self.watch.tick();
        }
        let need = self.need_of(&key, &case.replicas, d.need.clone());
        match &need {
            Some(_) => {
                case.applied |= d.apply.is_some();
                batch.put_case(&key, Some(&case_record(&case.replicas, case.applied)))?;
                self.open_case(key, case);
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
            need,
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
            c.used_nodes = c.used_nodes.saturating_add(nodes);
            match (&d.apply, &d.need) {
                (None, _) => c.held += 1,
                (Some(_), need) => {
                    c.applied_at_once += 1;
                    c.spot_checks += u64::from(need.is_some());
                }
            }
        } else {
            c.replica_nodes = c.replica_nodes.saturating_add(nodes);
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
                add_credit(t, &x.result);
                touched.push(x.contributor.clone());
            }
        }
        for name in &d.confirmed {
            if let Some(t) = self.records.get_mut(name) {
                t.streak += 1;
                let needed =
                    required_streak(rules, self.catches.get(&t.owner).copied().unwrap_or(0));
                if t.streak == needed && !t.given && !t.root {
                    t.earned_ms = at;
                    tracing::info!(contributor = %name, streak = needed, "trust earned");
                }
                touched.push(name.clone());
            }
        }
        for name in &d.losers {
            if let Some(t) = self.records.get_mut(name) {
                if reached_book && *name == first_replica.contributor {
                    // Its credit for the result the book used is taken back.
                    take_credit(t, &first_replica.result);
                }
                t.streak = 0;
                t.invalid += 1;
                if t.invalid >= rules.block_after && !t.root {
                    t.blocked = true;
                }
                *self.catches.entry(t.owner.clone()).or_default() += 1;
                touched.push(name.clone());
            }
        }
    }

    /// A contributor was caught with an invalid result: drop every applied result no one else
    /// vouches for (trusted, or earned from another owner) and its replicas in open cases.
    /// The contributors whose credit changed are added to `touched`.
    pub(crate) fn catch(
        &mut self,
        rules: &TrustRules,
        batch: &mut Batch,
        touched: &mut Vec<String>,
        loser: &str,
    ) -> Result<Caught> {
        let mut dropped = Vec::new();
        let owner = self.records.get(loser).map(|t| t.owner.clone());
        // In request order, not the maps' per-process order: the asynchronous program needs
        // the dropped requests again in this order, and the job table queues them so.
        let mut keys: Vec<LeafRequest> = self
            .sources
            .iter()
            .filter(|(_, s)| s.by.iter().any(|c| c == loser))
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable_by_key(request_order);
        for k in keys {
            let Some(mut srcs) = self.sources.remove(&k) else {
                continue;
            };
            srcs.by.retain(|c| c != loser);
            // Another credential of the loser's owner is the same word (unless a trust root).
            let vouches = |c: &String| {
                self.rooted(c)
                    || (self.standing_of(c, rules) >= Standing::Earned
                        && self.records.get(c).map(|t| &t.owner) != owner.as_ref())
            };
            if srcs.by.iter().any(vouches) {
                // Still vouched for: provisional unless a trust root is among them (its key
                // is unchanged).
                if srcs.by.iter().any(|c| self.rooted(c)) {
                    self.watch.remove(&k);
                }
                self.sources.insert(k, srcs);
            } else {
                // Dropped on its word: the credit each voucher was given for the result goes
                // with it (those caught before it too, and those not caught: their word alone
                // does not validate it).
                for c in &srcs.credited {
                    if let Some(t) = self.records.get_mut(c) {
                        take_credit(t, &srcs.result);
                        touched.push(c.clone());
                    }
                }
                batch.remove_result(&k);
                self.watch.remove(&k);
                dropped.push(k);
            }
        }
        self.counters.dropped += dropped.len() as u64;
        let mut open: Vec<LeafRequest> = self
            .cases
            .iter()
            .filter(|(_, c)| c.replicas.iter().any(|x| x.contributor == loser))
            .map(|(k, _)| *k)
            .collect();
        open.sort_unstable_by_key(request_order);
        let mut restarted = Vec::new();
        for k in open {
            let Some(mut case) = self.close_case(&k) else {
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
                self.open_case(k, case);
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

    /// What the case of `key` with `replicas` waits for, the rules asking for `rules_need`. A
    /// core check stays open until a trust root answers: a replica that was under way when it
    /// opened (an earning replica, a spot check) may agree and leave the result provisional,
    /// which settles nothing the core check asked (and leaves it a core check, not the spot
    /// check the rules would ask for).
    fn need_of(
        &self,
        key: &LeafRequest,
        replicas: &[Replica],
        rules_need: Option<Need>,
    ) -> Option<Need> {
        match rules_need {
            Some(n) if n.kind != CheckKind::Spot => Some(n),
            _ if self.watch.in_core_check(key) => Some(core_need(replicas, Standing::Given)),
            n => n,
        }
    }

    /// What the open cases wait for (after a restart, their jobs are check jobs again). A case
    /// whose result the book uses and that the rules would close waits for a trust root.
    pub(crate) fn open_needs(&self) -> Vec<(LeafRequest, Need)> {
        let mut needs: Vec<(LeafRequest, Need)> = self
            .cases
            .iter()
            .filter_map(|(k, case)| {
                let applied = case.applied.then(|| case.replicas[0].result);
                let d = decide(&case.replicas, applied.as_ref(), true, true);
                let need = self.need_of(k, &case.replicas, d.need).or_else(|| {
                    case.applied
                        .then(|| core_need(&case.replicas, Standing::Given))
                });
                need.map(|need| (*k, need))
            })
            .collect();
        // Their check jobs are numbered in this order.
        needs.sort_unstable_by_key(|(k, _)| request_order(k));
        needs
    }

    /// A new decisive core (see `super::core_watch`): `last` when the programs are done. Returns the
    /// core checks to issue now, each with its case (opened here, stored in `batch`, when the
    /// request has none: `result_of` gives the result the book uses) and what it waits for.
    pub(crate) fn core_changed(
        &mut self,
        rules: &TrustRules,
        batch: &mut Batch,
        core: &CoreSet,
        last: bool,
        result_of: impl Fn(&LeafRequest) -> Option<LeafResult>,
    ) -> Result<Vec<(LeafRequest, Need)>> {
        let due = self.watch.changed(core, rules.core_settle, last);
        let mut out = Vec::with_capacity(due.len());
        for key in due {
            let need = match self.cases.get(&key) {
                // A settlement under way decides it anyway.
                Some(case)
                    if case
                        .replicas
                        .iter()
                        .any(|r| !super::rules::same(&r.result, &case.replicas[0].result)) =>
                {
                    continue;
                }
                Some(case) => core_need(&case.replicas, Standing::Given),
                None => {
                    let (Some(sources), Some(result)) =
                        (self.sources.get(&key).map(|v| &v.by), result_of(&key))
                    else {
                        // Not applied any more (dropped meanwhile): nothing to confirm.
                        self.watch.remove(&key);
                        continue;
                    };
                    let replicas: Vec<Replica> = sources
                        .iter()
                        .map(|c| Replica {
                            contributor: c.clone(),
                            owner: self
                                .records
                                .get(c)
                                .map(|r| r.owner.clone())
                                .unwrap_or_default(),
                            standing: self.standing_of(c, rules),
                            result,
                        })
                        .collect();
                    let need = core_need(&replicas, Standing::Given);
                    batch.put_case(&key, Some(&case_record(&replicas, true)))?;
                    self.open_case(
                        key,
                        Case {
                            replicas,
                            applied: true,
                        },
                    );
                    need
                }
            };
            self.counters.core_checks += 1;
            out.push((key, need));
        }
        Ok(out)
    }

    /// The validation figures, with the provisional results and the core's as they are now.
    pub(crate) fn figures(&self) -> TrustCounters {
        TrustCounters {
            provisional: self.watch.provisional() as u64,
            core_size: self.watch.size() as u64,
            core_unconfirmed: self.watch.unconfirmed() as u64,
            ..self.counters
        }
    }

    /// Provisional results in the last decisive core (a build is done only when none is left).
    pub(crate) fn core_unconfirmed(&self) -> usize {
        self.watch.unconfirmed()
    }
}

/// Credit a contributor's record with result `r`: one result, its nodes and its search time
/// (the worker's word: any u64 may arrive, so the sums saturate).
fn add_credit(t: &mut TrustRecord, r: &LeafResult) {
    t.results = t.results.saturating_add(1);
    t.nodes = t.nodes.saturating_add(r.nodes);
    t.cpu_us = t.cpu_us.saturating_add(micros(r));
}

/// Take back what [`add_credit`] gave for `r` (a dropped or wrong result).
fn take_credit(t: &mut TrustRecord, r: &LeafResult) {
    t.results = t.results.saturating_sub(1);
    t.nodes = t.nodes.saturating_sub(r.nodes);
    t.cpu_us = t.cpu_us.saturating_sub(micros(r));
}

/// A result's search time in microseconds.
fn micros(r: &LeafResult) -> u64 {
    u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX)
}

/// A core check of `replicas`: a replica of standing `min` or more that is not theirs.
fn core_need(replicas: &[Replica], min: Standing) -> Need {
    Need {
        min,
        kind: CheckKind::Core,
        answered: replicas.iter().map(|r| r.contributor.clone()).collect(),
        owners: replicas.iter().map(|r| r.owner.clone()).collect(),
    }
}

/// A request's place in the orders the ledger hands out (what a caught contributor dropped,
/// the open cases): a function of the request, not of a hash map's per-process order.
fn request_order(r: &LeafRequest) -> (u64, u64, u64, u8) {
    (r.board.player, r.board.opponent, r.excluded, r.level)
}
