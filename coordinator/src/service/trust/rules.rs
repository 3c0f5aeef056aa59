//! The validation rules: a contributor's [`Standing`], which results are critical
//! ([`Window`]), and the decision on the replicas of one request ([`decide`]). Pure functions;
//! the state they decide on is the ledger's (`super::ledger`).

use crate::store::TrustRecord;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::collections::{HashMap, HashSet};

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
