//! Validated results: who vouches for a leaf result, when it may reach the book, and what
//! happens to a worker caught answering wrongly (BOINC's quorum and adaptive replication, with
//! a trust root).
//!
//! A leaf search is a pure function of its request, so honest replicas agree exactly (move,
//! score, depth, selectivity, exact flag, nodes); replicas are compared with `==`.
//!
//! **Standing.** Every result comes from a *contributor* (a worker credential; the coordinator's
//! own searches; the in-process workers; anonymous loopback workers) with a [`Standing`]:
//! * [`Standing::Root`]: the coordinator's verification searches and its in-process workers;
//! * [`Standing::Given`]: credentials the operator added with `--trusted`, and anonymous
//!   workers (which exist only on a loopback address while no credential does: the operator's
//!   own machines);
//! * [`Standing::Earned`]: an untrusted credential whose last [`TrustRules::earn_after`] (N)
//!   results in a row agreed with the trust root (Root or Given);
//! * [`Standing::Untrusted`]: every other credential (open enrollment included).
//!
//! **When a result is applied.** Agreeing replicas weigh, per distinct owner, 2 (Root, Given),
//! 1 (Earned) or 0 (Untrusted). A request is *established* once the replicas agreeing with the
//! first one weigh at least 1, or 2 for a *critical* result: one that can change the running
//! program's selection (`Window`: in a deviate pass every result but a re-search scoring below
//! the window's hull; every result of an enhance program). A critical earned-trust result waits for the root or another owner's
//! earned trust; any other earned-trust result is applied at once and spot-checked. So an
//! untrusted result is applied only once a trusted source agrees, and untrusted workers never
//! validate each other, however many names or owners they register.
//!
//! **Spot checks.** A result applied on its submitter's word alone (Given, or Earned and not
//! critical) is re-searched by the coordinator's verifier with probability
//! `max(1 / (streak + 1), spot_floor)`, `streak` being the submitter's consecutive results that
//! agreed with the root (BOINC's 1/CV). Spot checks exist only when a verifier runs.
//!
//! **Mismatch.** Replicas that disagree are settled by the highest standing present when it
//! is Root, or Given without disagreement among the Given replicas; otherwise the request waits
//! for the next level up (Given, then Root). Every replica that differs from the settled result
//! is *invalid*: its contributor's streak and earned trust reset, its invalid count grows, and
//! at [`TrustRules::block_after`] (K) invalid results it is blocked. Each result of the loser that
//! no other owner vouches for is dropped, and when one of them (or the wrong result itself) had
//! reached the book the growth programs are replayed from the base book (see `super::growth`).

use crate::store::{CaseRecord, ReplicaRecord, TrustRecord};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::collections::{HashMap, HashSet};

/// Contributor name of the coordinator's own verification searches.
pub const VERIFIER: &str = "(coordinator)";
/// Contributor name of the coordinator's in-process workers.
pub const LOCAL: &str = "(local)";
/// Contributor name prefix of anonymous (loopback) workers, followed by the worker's name.
pub const ANONYMOUS: &str = "(anonymous)";

/// How far a contributor's results are trusted (ordered: more trusted is greater).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Standing {
    /// Its results are applied only once a trusted source agrees.
    Untrusted,
    /// Earned by agreeing with the root N times in a row.
    Earned,
    /// Trusted by the operator.
    Given,
    /// The coordinator's own searches.
    Root,
}

impl Standing {
    /// Lowercase name (`untrusted|earned|trusted|root`).
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Untrusted => "untrusted",
            Standing::Earned => "earned",
            Standing::Given => "trusted",
            Standing::Root => "root",
        }
    }

    /// Weight of an agreeing replica (see the module comment).
    fn weight(self) -> u32 {
        match self {
            Standing::Untrusted => 0,
            Standing::Earned => 1,
            Standing::Given | Standing::Root => 2,
        }
    }
}

/// The rules' parameters (service configuration).
#[derive(Debug, Clone, Copy)]
pub struct TrustRules {
    /// N: consecutive results agreeing with the root that earn an untrusted credential trust.
    pub earn_after: u64,
    /// K: invalid results that block a credential.
    pub block_after: u64,
    /// Lowest spot-check probability of a trusted result.
    pub spot_floor: f64,
    /// Guard band (discs) added to a deviate window when deciding which results are
    /// critical (see the `Window` rule of the `trust` module); `None`: every request of a deviate or enhance program is
    /// critical (the conservative rule, kept for comparison).
    pub window_margin: Option<i32>,
}

impl Default for TrustRules {
    fn default() -> Self {
        TrustRules {
            earn_after: 10,
            block_after: 3,
            spot_floor: 0.02,
            window_margin: Some(2),
        }
    }
}

/// The standing a contributor's record gives it.
pub fn standing(rec: &TrustRecord, rules: &TrustRules) -> Standing {
    if rec.root {
        Standing::Root
    } else if rec.given {
        Standing::Given
    } else if rec.streak >= rules.earn_after {
        Standing::Earned
    } else {
        Standing::Untrusted
    }
}

/// The spot-check probability of a result applied on the word of a contributor with `streak`
/// consecutive results agreeing with the root.
pub(crate) fn spot_probability(streak: u64, rules: &TrustRules) -> f64 {
    (1.0 / (streak as f64 + 1.0)).max(rules.spot_floor)
}

/// Which results of the running program are *critical*: they need weight 2 (the root, a
/// trusted worker, or earned trust of two owners) before they reach the book.
///
/// The rule for a deviate pass with root value `v0` (taken when the pass was marked) and
/// window half-width `abs` (Edax's `book deviate <rel> <abs>`): let the *hull* be
/// `H = |v0| + abs + margin`. Deviate visits and marks only positions and leaves whose value,
/// seen from the root's side, lies in `[v0 − abs, v0 + abs]`; the side of a position is not
/// known here (passes swap it), so the hull covers the window seen from both sides plus a
/// guard band. A result with score `s` (from its position's side to move) is **not critical
/// exactly when its position is already in the book (a re-search) and `s < −H`**:
/// * a leaf below the hull is never marked;
/// * a re-searched position's old leaf move has just become a link (to the expanded child, or
///   to the new position it transposes into), whose value comes from the child's own result or
///   from the book, so a new leaf below the hull moves the position's value only when every
///   link lies below the hull too; and negamax maps values below the hull to values that are
///   unchanged or stay outside the hull on the same side, so every score below the hull gives
///   the same marking in this iteration (both passes use `v0`), and in later iterations as
///   long as the root value has moved by at most `margin`; a larger move can bring values
///   applied earlier on one word into the new window, where only the spot checks cover them.
///
/// Everything else is critical: a score inside the hull can be marked; a score above it can
/// lift its position's value across the window; a new position (the leaf child of a marked
/// position) sets the value of a link that deviate marked *because* its estimate lay inside
/// the window. So a lie reaches the book on one earned word only as "this move is hopeless"
/// (below the hull): it changes no marking when the truth lies below the hull too; otherwise
/// (a good move reported as hopeless) it waits for the spot checks, and replay undoes it once
/// its author is caught. Requests growth did not list for the current pass (speculative ones)
/// are critical. Enhance compares each leaf's bounds with its own position's bounds rather than
/// with one window: every request of an enhance program is critical. Outside deviate and
/// enhance nothing is.
#[derive(Debug, Clone, Default)]
pub(crate) enum Window {
    /// No selecting program runs: nothing is critical.
    #[default]
    Open,
    /// Every request is critical (enhance; or `TrustRules::window_margin` is `None`).
    All,
    /// A deviate pass.
    Deviate {
        /// `H` above.
        hull: i32,
        /// The pass's listed requests that re-search a position in the book.
        researches: HashSet<LeafRequest>,
    },
}

impl Window {
    /// Whether a result with `score` for `key` is critical (see the type's comment).
    pub(crate) fn critical(&self, key: &LeafRequest, score: i32) -> bool {
        match self {
            Window::Open => false,
            Window::All => true,
            Window::Deviate { hull, researches } => !(score < -hull && researches.contains(key)),
        }
    }

    /// The hull of a deviate pass centred on `root_value` with half-width `abs`.
    pub(crate) fn hull(root_value: i32, abs: i32, margin: i32) -> i32 {
        root_value.abs() + abs + margin.max(0)
    }
}

/// What the next replica of an open case must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    /// Lowest standing that can help.
    pub(crate) min: Standing,
    /// Contributors that answered already (a contributor answers a request once).
    pub(crate) answered: Vec<String>,
    /// Owners that answered already (validation needs another owner).
    pub(crate) owners: Vec<String>,
}

impl Need {
    /// Whether a worker of `standing`, `contributor` and `owner` can serve it.
    pub(crate) fn admits(&self, standing: Standing, contributor: &str, owner: &str) -> bool {
        standing >= self.min
            && !self.answered.iter().any(|c| c == contributor)
            && (standing == Standing::Root || !self.owners.iter().any(|o| o == owner))
    }
}

/// A replica as the rules see it.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    pub(crate) contributor: String,
    pub(crate) owner: String,
    pub(crate) standing: Standing,
    pub(crate) result: LeafResult,
}

/// Whether two replicas agree: every field the search determines (move, score, depth,
/// selectivity, exact flag, nodes); the time is the machine's.
pub(crate) fn same(a: &LeafResult, b: &LeafResult) -> bool {
    (a.mv, a.score, a.depth, a.selectivity, a.exact, a.nodes)
        == (b.mv, b.score, b.depth, b.selectivity, b.exact, b.nodes)
}

/// The decision after a replica arrived.
#[derive(Debug, Clone, Default)]
pub(crate) struct Decision {
    /// The result the book must use now (None: unchanged).
    pub(crate) apply: Option<LeafResult>,
    /// Contributors vouching for the applied result.
    pub(crate) sources: Vec<String>,
    /// Contributors whose replica agreed with a result the root established (streak grows).
    pub(crate) confirmed: Vec<String>,
    /// Contributors whose replica agreed with an established result (credit).
    pub(crate) credited: Vec<String>,
    /// Contributors whose replica was wrong.
    pub(crate) losers: Vec<String>,
    /// The case stays open, waiting for this (None: closed).
    pub(crate) need: Option<Need>,
}

/// Fold the replicas of one request (the first is the earliest) into a decision. `applied`:
/// the result the book uses now, if any; `critical`: the request can move a value inside the
/// running window; `spot`: draw a spot check of a result applied on one word (the caller's
/// coin, tossed with the submitter's probability; false when no verifier runs); `verifier`:
/// the coordinator's verifier runs (then it settles every mismatch: a trusted machine that went
/// wrong must not make an honest worker lose).
pub(crate) fn decide(
    replicas: &[Replica],
    applied: Option<&LeafResult>,
    critical: bool,
    spot: bool,
    verifier: bool,
) -> Decision {
    let mut d = Decision::default();
    let answered = || Need {
        min: Standing::Untrusted,
        answered: replicas.iter().map(|r| r.contributor.clone()).collect(),
        owners: replicas.iter().map(|r| r.owner.clone()).collect(),
    };
    let Some(first) = replicas.first() else {
        return d;
    };
    let agree = replicas.iter().all(|r| same(&r.result, &first.result));
    let top = replicas
        .iter()
        .map(|r| r.standing)
        .max()
        .unwrap_or(Standing::Untrusted);
    let settle = |truth: LeafResult, d: &mut Decision| {
        for (i, r) in replicas.iter().enumerate() {
            if same(&r.result, &truth) {
                d.credited.push(r.contributor.clone());
                // Its streak grows when another root-level replica agreed with it.
                let rooted = replicas.iter().enumerate().any(|(j, o)| {
                    j != i && o.standing >= Standing::Given && same(&o.result, &truth)
                });
                if rooted && r.standing < Standing::Root {
                    d.confirmed.push(r.contributor.clone());
                }
            } else {
                d.losers.push(r.contributor.clone());
            }
        }
        d.sources = replicas
            .iter()
            .filter(|r| same(&r.result, &truth))
            .map(|r| r.contributor.clone())
            .collect();
        if !applied.is_some_and(|a| same(a, &truth)) {
            d.apply = Some(truth);
        }
    };
    if !agree {
        // The highest standing settles when it is the root, or trusted workers that agree
        // while no verifier runs; otherwise the next level up decides (Given, then Root).
        let tops: Vec<&Replica> = replicas.iter().filter(|r| r.standing == top).collect();
        let top_agree = tops.iter().all(|r| same(&r.result, &tops[0].result));
        if top == Standing::Root || (top == Standing::Given && top_agree && !verifier) {
            settle(tops[0].result, &mut d);
        } else {
            d.need = Some(Need {
                min: if top >= Standing::Given {
                    Standing::Root
                } else {
                    Standing::Given
                },
                ..answered()
            });
        }
        return d;
    }
    // All agree: weigh them per owner.
    let mut by_owner: HashMap<&str, u32> = HashMap::new();
    for r in replicas {
        let w = by_owner.entry(r.owner.as_str()).or_default();
        *w = (*w).max(r.standing.weight());
    }
    let weight: u32 = by_owner.values().sum();
    let needed = if critical { 2 } else { 1 };
    let rooted = top >= Standing::Given;
    if replicas.len() > 1 && rooted {
        // A second opinion from the root confirmed it (a validation or a spot check).
        settle(first.result, &mut d);
        return d;
    }
    if weight >= needed {
        if replicas.len() == 1 && spot && top < Standing::Root {
            // Applied on one word; the verifier searches it again.
            settle(first.result, &mut d);
            d.need = Some(Need {
                min: Standing::Root,
                ..answered()
            });
            return d;
        }
        settle(first.result, &mut d);
        return d;
    }
    // Not enough weight: wait for someone who adds some (Earned from another owner, or the
    // root). A result the book already uses (applied on one word before its request became
    // critical) stays until a replica disagrees.
    d.need = Some(Need {
        min: Standing::Earned,
        ..answered()
    });
    d
}

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
        result: r.result.result(),
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

/// A uniform number in [0, 1) drawn from a random id (job ids are random v4 UUIDs; the bits
/// are mixed so that the fixed version and variant bits do not bias it).
pub(crate) fn coin(id: &uuid::Uuid) -> f64 {
    let v = id.as_u128();
    let mut z = (v as u64) ^ ((v >> 64) as u64).rotate_left(29);
    // splitmix64's finaliser.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
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

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::Move;
    use std::time::Duration;

    fn res(score: i32) -> LeafResult {
        LeafResult {
            mv: Move::None,
            score,
            depth: 1,
            selectivity: 5,
            exact: false,
            nodes: 7,
            elapsed: Duration::ZERO,
        }
    }

    /// [`decide`] without a verifier.
    fn decide_t(r: &[Replica], a: Option<&LeafResult>, critical: bool, spot: bool) -> Decision {
        decide(r, a, critical, spot, false)
    }

    /// A replica; its search time depends on the contributor's name (machines differ).
    fn rep(c: &str, owner: &str, s: Standing, score: i32) -> Replica {
        Replica {
            contributor: c.into(),
            owner: owner.into(),
            standing: s,
            result: LeafResult {
                elapsed: Duration::from_micros(c.len() as u64),
                ..res(score)
            },
        }
    }

    #[test]
    fn untrusted_results_wait_for_a_trusted_source() {
        use Standing::*;
        let one = [rep("u1", "a", Untrusted, 4)];
        let d = decide_t(&one, None, false, false);
        assert!(d.apply.is_none());
        assert_eq!(d.need.as_ref().unwrap().min, Earned);
        // Untrusted workers of other owners never validate each other.
        let two = [rep("u1", "a", Untrusted, 4), rep("u2", "b", Untrusted, 4)];
        let d = decide_t(&two, None, false, false);
        assert!(d.apply.is_none() && d.need.is_some());
        // An earned-trust worker of another owner validates outside a window...
        let e = [rep("u1", "a", Untrusted, 4), rep("e", "b", Earned, 4)];
        let d = decide_t(&e, None, false, false);
        assert_eq!(d.apply.map(|r| r.score), Some(4));
        assert!(d.need.is_none());
        // ...but inside one the root or a second owner's earned trust must agree.
        let d = decide_t(&e, None, true, false);
        assert!(d.apply.is_none());
        let g = [rep("u1", "a", Untrusted, 4), rep("t", "op", Given, 4)];
        let d = decide_t(&g, None, true, false);
        assert_eq!(d.apply.map(|r| r.score), Some(4));
        assert_eq!(d.confirmed, vec!["u1".to_string()]);
        // The same owner under another name adds nothing.
        let same = [rep("e1", "a", Earned, 4), rep("e2", "a", Earned, 4)];
        assert!(decide_t(&same, None, true, false).apply.is_none());
    }

    #[test]
    fn trusted_results_apply_at_once_and_mismatches_go_to_the_root() {
        use Standing::*;
        let t = [rep("t", "op", Given, 4)];
        let d = decide_t(&t, None, true, false);
        assert_eq!(d.apply.map(|r| r.score), Some(4));
        assert!(d.need.is_none());
        let d = decide_t(&t, None, true, true);
        assert_eq!(d.apply.map(|r| r.score), Some(4));
        assert_eq!(d.need.as_ref().unwrap().min, Root);
        // The trusted worker settles a mismatch with an untrusted one.
        let m = [rep("u", "a", Untrusted, -6), rep("t", "op", Given, 4)];
        let d = decide_t(&m, None, false, false);
        assert_eq!(d.apply.map(|r| r.score), Some(4));
        assert_eq!(d.losers, vec!["u".to_string()]);
        // With a verifier, it settles instead (a broken trusted machine must not make an
        // honest worker lose).
        let d = decide(&m, None, false, false, true);
        assert!(d.apply.is_none() && d.losers.is_empty());
        assert_eq!(d.need.unwrap().min, Root);
        // Two trusted workers that disagree wait for the coordinator, which wins.
        let tt = [rep("t1", "op", Given, 4), rep("t2", "op2", Given, 6)];
        let d = decide_t(&tt, Some(&tt[0].result), false, false);
        assert_eq!(d.need.as_ref().unwrap().min, Root);
        assert!(d.apply.is_none());
        let mut ttr = tt.to_vec();
        ttr.push(rep(VERIFIER, "", Root, 6));
        let d = decide_t(&ttr, Some(&tt[0].result), false, false);
        assert_eq!(
            d.apply.map(|r| r.score),
            Some(6),
            "the applied result is replaced"
        );
        assert_eq!(d.losers, vec!["t1".to_string()]);
        // Earned against untrusted: the root must settle it.
        let eu = [rep("e", "a", Earned, 4), rep("u", "b", Untrusted, 6)];
        assert_eq!(decide_t(&eu, None, false, false).need.unwrap().min, Given);
    }

    #[test]
    fn deviate_windows_make_only_results_that_can_change_the_marking_critical() {
        use bookfarm_engine::Board;
        let req = |excluded: u64| LeafRequest {
            board: Board::start(),
            level: 2,
            excluded,
        };
        // `deviate 2 4` around a root value of -2, margin 2: the hull is |s| <= 8.
        let hull = Window::hull(-2, 4, 2);
        assert_eq!(hull, 8);
        let (research, child) = (req(1), req(2));
        let w = Window::Deviate {
            hull,
            researches: [research].into_iter().collect(),
        };
        // A re-search: only a score below the hull is left to the spot checks.
        for s in [-8, -3, 0, 8, 9, 40, 64] {
            assert!(w.critical(&research, s), "inside or above the hull: {s}");
        }
        for s in [-9, -40, -64, -127] {
            assert!(!w.critical(&research, s), "below the hull: {s}");
        }
        // A new position: the book's estimate of it lies inside the window.
        for s in [-64, -9, 0, 9, 64] {
            assert!(w.critical(&child, s));
        }
        // Requests the pass did not list (speculation) are critical.
        assert!(w.critical(&req(16), -40));
        assert!(Window::All.critical(&research, -40));
        assert!(!Window::Open.critical(&research, 0));
        // The hull covers the window seen from either side.
        assert_eq!(Window::hull(5, 4, 0), 9);
        assert_eq!(
            Window::hull(5, 4, -3),
            9,
            "a negative margin counts as none"
        );
    }

    #[test]
    fn spot_checks_fall_with_the_record() {
        let r = TrustRules::default();
        assert_eq!(spot_probability(0, &r), 1.0);
        assert!((spot_probability(9, &r) - 0.1).abs() < 1e-12);
        assert_eq!(spot_probability(1_000_000, &r), r.spot_floor);
        let need = Need {
            min: Standing::Earned,
            answered: vec!["u".into()],
            owners: vec!["a".into()],
        };
        assert!(!need.admits(Standing::Earned, "e", "a"), "same owner");
        assert!(!need.admits(Standing::Untrusted, "x", "b"));
        assert!(need.admits(Standing::Earned, "e", "b"));
        assert!(need.admits(Standing::Root, VERIFIER, ""));
    }

    #[test]
    fn decisions_are_written_at_once_and_counts_once_per_interval() {
        let mut t = TrustState::load(Vec::new(), Vec::new(), std::iter::empty());
        t.enroll("w", "alice", false, false);
        let names = |v: Vec<(String, TrustRecord)>| -> Vec<String> {
            v.into_iter().map(|(n, _)| n).collect()
        };
        let w = vec!["w".to_string()];
        // Never written: written at once.
        assert_eq!(names(t.records_to_write(&w, 10_000, 1_000)), ["w"]);
        // Counts: the first change is written (no count was written for an interval), the next
        // ones (counts, a longer streak) wait for the interval.
        t.records.get_mut("w").unwrap().replicas += 1;
        assert_eq!(names(t.records_to_write(&w, 10_000, 1_000)), ["w"]);
        let r = t.records.get_mut("w").unwrap();
        r.results += 1;
        r.streak += 1;
        assert!(t.records_to_write(&w, 10_500, 1_000).is_empty());
        assert!(t.unwritten.contains("w"));
        // An invalid result is a decision: written at once, with the counts.
        t.records.get_mut("w").unwrap().invalid += 1;
        let out = t.records_to_write(&w, 10_600, 1_000);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].1.results, out[0].1.invalid), (1, 1));
        assert!(t.unwritten.is_empty());
        // Counts again; a streak reset is a decision.
        t.records.get_mut("w").unwrap().nodes += 5;
        assert!(t.records_to_write(&w, 10_700, 1_000).is_empty());
        t.records.get_mut("w").unwrap().streak = 0;
        assert_eq!(names(t.records_to_write(&w, 10_800, 1_000)), ["w"]);
        // Counts of another contributor, written once the interval is over (the interval
        // started at the first count-only write, 10,000).
        t.enroll("v", "bob", true, false);
        let v = vec!["v".to_string()];
        assert_eq!(names(t.records_to_write(&v, 10_900, 1_000)), ["v"]);
        t.records.get_mut("v").unwrap().results += 1;
        assert!(t.records_to_write(&v, 10_950, 1_000).is_empty());
        assert_eq!(names(t.records_to_write(&v, 11_000, 1_000)), ["v"]);
        // A flush takes what is left.
        t.records.get_mut("v").unwrap().results += 1;
        t.records.get_mut("w").unwrap().cpu_us += 1;
        assert!(t.records_to_write(&v, 11_100, 1_000).is_empty());
        assert!(t.records_to_write(&w, 11_100, 1_000).is_empty());
        assert_eq!(names(t.take_unwritten()), ["v", "w"]);
        assert!(t.take_unwritten().is_empty());
        assert_eq!(t.written.get("v"), t.records.get("v"));
        // A zero interval writes every change at once.
        t.records.get_mut("v").unwrap().results += 1;
        assert_eq!(names(t.records_to_write(&v, 11_200, 0)), ["v"]);
    }
}
