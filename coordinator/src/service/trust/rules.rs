//! The validation rules: a contributor's [`Standing`], what an open case waits for ([`Need`]),
//! and the decision on the replicas of one request ([`decide`]). Pure functions; the state they
//! decide on is the ledger's (`super::ledger`).

use crate::store::TrustRecord;
use bookfarm_engine::search::LeafResult;
use std::collections::HashMap;

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

/// Which results lengthen a contributor's streak, and with it lower its spot-check probability
/// `max(1 / (streak + 1), spot_floor)` ([`TrustRules::streak`]). Earning is the same under
/// both: an untrusted credential's results are never applied on its word, so until it is
/// earned only results a trust root confirmed count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreakRule {
    /// Only results a trust root confirmed (a validation, spot or core check that agreed): the
    /// probability falls with the checks, so n results cost about √(2n) spot checks.
    Confirmed,
    /// Also every result applied on the contributor's own word with no check drawn (BOINC's
    /// consecutive valid results): the probability falls with the results, so n results cost
    /// about ln n spot checks before the floor.
    Results,
}

impl StreakRule {
    /// Its name on the command line and in tables (`confirmed|results`).
    pub fn as_str(self) -> &'static str {
        match self {
            StreakRule::Confirmed => "confirmed",
            StreakRule::Results => "results",
        }
    }

    /// Parse [`StreakRule::as_str`].
    pub fn parse(s: &str) -> Option<StreakRule> {
        match s.trim() {
            "confirmed" => Some(StreakRule::Confirmed),
            "results" => Some(StreakRule::Results),
            _ => None,
        }
    }
}

/// The rules' parameters (service configuration).
#[derive(Debug, Clone, Copy)]
pub struct TrustRules {
    /// N: consecutive results agreeing with the trust root that earn an untrusted credential
    /// trust (doubled for each invalid result its owner was caught with, see
    /// [`required_streak`]). Default 3: each new credential costs the farm N replicas, which
    /// a first build at 1,000 workers gives to 950 volunteers (`sim trust`, docs/benchmarks.md);
    /// what N buys is the price of a fresh credential's first word, not the root value's
    /// safety (the decisive core is confirmed whatever N; see the threat model in `super`).
    pub earn_after: u64,
    /// K: invalid results that block a credential.
    pub block_after: u64,
    /// Lowest spot-check probability of a result applied on one word.
    pub spot_floor: f64,
    /// A provisional result that has stayed in the decisive core while this many results were
    /// applied gets a core check (every one in the core gets one once the programs are done).
    /// Default 256. A longer wait skips more of the early core's churn (`sim trust`, depth 16,
    /// 100 workers: core checks took 4.8 % of the search CPU at 256, 2.7 % at 4096, 2.0 %
    /// checking the final core only), but a liar who lies on core results keeps the lies that
    /// leave the core before their check (its rows at 4096 ended with lies in the book).
    pub core_settle: u64,
    /// Share of a worker's leases that may be core and spot checks while round work is queued
    /// (checks never starve round work).
    pub check_share: f64,
    /// Which results lengthen a streak (the spot-check ramp).
    pub streak: StreakRule,
}

impl Default for TrustRules {
    fn default() -> Self {
        TrustRules {
            earn_after: 3,
            block_after: 3,
            spot_floor: 0.02,
            core_settle: 256,
            check_share: 0.25,
            streak: StreakRule::Results,
        }
    }
}

/// The streak an untrusted credential needs to be earned: N, doubled for each invalid result
/// the credential's owner (any of its credentials) was caught with.
pub fn required_streak(rules: &TrustRules, owner_catches: u64) -> u64 {
    rules
        .earn_after
        .max(1)
        .saturating_mul(1u64 << owner_catches.min(20))
}

/// How many more searches a credential still earning trust may be given: the confirmations it
/// still needs (`required` less its `streak`), at most `window`, less its `unconfirmed`
/// results (answered and waiting for a trust root, or leased and not answered yet). Every
/// result of such a credential is held until a trust root searches it again, so a search
/// beyond the confirmations it still needs costs the farm a replica and brings its trust no
/// closer; `window` ([`earning_window`]) narrows what a caught owner may hold unconfirmed.
pub(crate) fn earning_room(required: u64, streak: u64, unconfirmed: usize, window: u64) -> usize {
    let needed = required.saturating_sub(streak).min(window);
    usize::try_from(needed)
        .unwrap_or(usize::MAX)
        .saturating_sub(unconfirmed)
}

/// How many unconfirmed results a credential still earning trust may hold, its owner having
/// been caught `owner_catches` times: N, halved for each catch, at least 1. A catch doubles the
/// confirmations the owner needs ([`required_streak`]) and halves this window, so a caught
/// credential earns trust again one confirmation at a time instead of being given more room
/// to lie in: an always-lying credential is refused after `block_after` results.
pub(crate) fn earning_window(rules: &TrustRules, owner_catches: u64) -> u64 {
    (rules.earn_after.max(1) >> owner_catches.min(63)).max(1)
}

/// The standing a contributor's record gives it, its owner having been caught
/// `owner_catches` times.
pub fn standing(rec: &TrustRecord, rules: &TrustRules, owner_catches: u64) -> Standing {
    if rec.root {
        Standing::Root
    } else if rec.given {
        Standing::Given
    } else if rec.streak >= required_streak(rules, owner_catches) {
        Standing::Earned
    } else {
        Standing::Untrusted
    }
}

/// The spot-check probability of a result applied on the word of a contributor with `streak`
/// consecutive results agreeing with the trust root.
pub(crate) fn spot_probability(streak: u64, rules: &TrustRules) -> f64 {
    (1.0 / (streak as f64 + 1.0)).max(rules.spot_floor)
}

/// Why a case waits for another replica; the order is the check queue's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum CheckKind {
    /// Replicas disagree: a trust root (or the coordinator) settles.
    Settle,
    /// A provisional result in the decisive core: a trust root confirms it.
    Core,
    /// An untrusted result held until validated: the program waits for it.
    Validation,
    /// A spot check of a result applied on one word.
    Spot,
}

/// What the next replica of an open case must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    /// Lowest standing that can help.
    pub(crate) min: Standing,
    /// Why.
    pub(crate) kind: CheckKind,
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

    /// Whether an earned worker of another owner may take it once no trust root took it for a
    /// while (the verifier and the trusted workers were not free): the validation of a held
    /// result, or a spot check of an earned one. A trust root's agreement is what lengthens the
    /// checked contributor's streak, so these go to trust roots first; an earned peer's
    /// agreement only applies (or keeps) the result, and the root settles any disagreement.
    pub(crate) fn relaxable(&self) -> bool {
        matches!(self.kind, CheckKind::Validation | CheckKind::Spot) && self.min == Standing::Given
    }

    /// Open a relaxable check to earned workers (of another owner: [`Need::admits`] keeps
    /// the owners out that answered already).
    pub(crate) fn relax(&mut self) {
        if self.relaxable() {
            self.min = Standing::Earned;
        }
    }
}

/// Whether a replica by a worker of `standing` and `owner` can be a word of its own beside
/// replicas by `owners`, should the job they answer become a check of one of them: a trust
/// root's agreement settles whatever its owner ([`decide`]); anyone else's counts once per
/// owner (one owner is one voice: its agreement closes no spot check of its owner's answer,
/// and [`Need::admits`] gives it no check of it).
pub(crate) fn another_word<'a>(
    standing: Standing,
    owner: &str,
    mut owners: impl Iterator<Item = &'a str>,
) -> bool {
    standing >= Standing::Given || !owners.any(|o| o == owner)
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
/// the result the book uses now, if any; `spot`: draw a spot check of a result applied on one
/// word (the caller's coin, tossed with the submitter's probability); `verifier`: the
/// coordinator's verifier runs (then it spot-checks trusted workers, and settles every
/// mismatch: a trusted machine that went wrong must not make an honest worker lose).
///
/// The rule knows nothing of programs or passes: agreeing replicas weigh, per owner, 0
/// (untrusted), 1 (earned) or 2 (trusted, root). Weight 0 waits for validation; any other
/// weight is applied at once. A single earned replica's result is *provisional* (no trust root
/// agreed): spot-checked when `spot`, and confirmed by a trust root if it enters the decisive
/// core (the ledger's business).
pub(crate) fn decide(
    replicas: &[Replica],
    applied: Option<&LeafResult>,
    spot: bool,
    verifier: bool,
) -> Decision {
    let mut d = Decision::default();
    let need = |min: Standing, kind: CheckKind| Need {
        min,
        kind,
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
            let min = if top >= Standing::Given {
                Standing::Root
            } else {
                Standing::Given
            };
            d.need = Some(need(min, CheckKind::Settle));
        }
        return d;
    }
    let rooted = top >= Standing::Given;
    if (replicas.len() > 1 && rooted) || top == Standing::Root {
        // The root agreed (a validation, a spot or core check), or it is the root's own.
        settle(first.result, &mut d);
        return d;
    }
    // All agree: weigh them per owner.
    let mut by_owner: HashMap<&str, u32> = HashMap::new();
    for r in replicas {
        let w = by_owner.entry(r.owner.as_str()).or_default();
        *w = (*w).max(r.standing.weight());
    }
    if by_owner.values().sum::<u32>() == 0 {
        // Untrusted only, however many names and owners: wait for someone who adds weight. A
        // trust root first (its agreement lengthens the streak a credential earns trust with);
        // an earned worker of another owner once none took it in time (relaxable).
        d.need = Some(need(Standing::Given, CheckKind::Validation));
        return d;
    }
    settle(first.result, &mut d);
    // Applied on one word (a trusted worker's result, an earned worker's own, or an untrusted
    // one it validated): spot-checked by a trust root (the verifier only for a trusted
    // worker's result), or by an earned worker of another owner when no trust root was free
    // for it. Two earned owners agreeing is a check already. A replica of a result the book
    // uses that adds no word (an untrusted one, or another credential of the same owner: a
    // lessee of the job from before it became a check) leaves its check open.
    let one_word = by_owner.values().filter(|w| **w > 0).count() == 1;
    let rechecked = applied.is_some_and(|a| same(a, &first.result));
    if one_word && (spot || rechecked) {
        d.need = match top {
            Standing::Given if verifier => Some(need(Standing::Root, CheckKind::Spot)),
            Standing::Earned => Some(need(Standing::Given, CheckKind::Spot)),
            _ => None,
        };
    }
    d
}

/// A uniform number in [0, 1) drawn from a job id and the coordinator's secret `key`: the
/// worker knows the id before it answers, so without the key it could tell which answers will
/// be spot-checked and lie only in the others. The bits are mixed so that the fixed version and
/// variant bits of the id do not bias it.
pub(crate) fn coin(id: &uuid::Uuid, key: u64) -> f64 {
    let v = id.as_u128();
    let mut z = (v as u64) ^ ((v >> 64) as u64).rotate_left(29) ^ key;
    // splitmix64's finaliser, twice (the key must not cancel out in a simple xor).
    for _ in 0..2 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        z ^= key.rotate_left(17);
    }
    (z >> 11) as f64 / (1u64 << 53) as f64
}
