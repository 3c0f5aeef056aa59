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
//!
//! Rooms: `rules` (standings, the window, the decision on a request's replicas) and
//! `ledger` (the validation state: records, open cases, who vouches for each applied result,
//! and the updates a decision makes to them and to the store).

mod ledger;
mod rules;
#[cfg(test)]
mod tests;

pub use ledger::TrustCounters;
pub(crate) use ledger::{Taken, TrustState};
pub(crate) use rules::{Need, Window};
pub use rules::{Standing, TrustRules, standing};

/// Contributor name of the coordinator's own verification searches.
pub const VERIFIER: &str = "(coordinator)";
/// Contributor name of the coordinator's in-process workers.
pub const LOCAL: &str = "(local)";
/// Contributor name prefix of anonymous (loopback) workers, followed by the worker's name.
pub const ANONYMOUS: &str = "(anonymous)";
