//! Validated results: who vouches for a leaf result, when it may reach the book, and what
//! happens to a worker caught answering wrongly (BOINC's quorum and adaptive replication, with
//! a trust root and a verified decisive core).
//!
//! A leaf search is a pure function of its request, so honest replicas agree exactly (move,
//! score, depth, selectivity, exact flag, nodes); replicas are compared with `==`.
//!
//! **Standing.** Every result comes from a *contributor* (a worker credential; the coordinator's
//! own searches; the in-process workers; anonymous loopback workers) with a [`Standing`]:
//! * [`Standing::Root`]: the coordinator's verification searches and its in-process workers;
//! * [`Standing::Given`]: credentials the operator added with `--trusted`, and anonymous
//!   workers (which exist only on a loopback address while no credential does: the operator's
//!   own machines); Root and Given are the *trust roots*;
//! * [`Standing::Earned`]: an untrusted credential whose last N results in a row agreed with a
//!   trust root, N = [`TrustRules::earn_after`] doubled for every invalid result its owner (any
//!   of its credentials) was caught with ([`required_streak`]);
//! * [`Standing::Untrusted`]: every other credential.
//!
//! A standing belongs to its credential, not to a book: a new book keeps every contributor's
//! record (streak, earned trust, invalid results, block; the store carries them into the new
//! book's tree), so a volunteer pays the earning and the first spot checks once, and a caught
//! owner's catches outlive the book it lied on.
//!
//! **When a result is applied** (per result: the rule knows nothing of programs or passes).
//! Agreeing replicas weigh, per distinct owner, 2 (Root, Given), 1 (Earned) or 0 (Untrusted).
//! Weight 0 is *held* until a trust root or an earned worker of another owner agrees, so
//! untrusted workers never validate each other, however many names or owners they register, and
//! a new credential is fully replicated until it earns trust. Its validation goes to a trust
//! root first, and to earned workers of other owners only when none took it in time (as a spot
//! check does, see `super::jobs`' `checks` room): only a trust root's agreement lengthens the
//! streak a credential earns trust with. Any other weight is applied at once. A result applied on the word of earned contributors only is **provisional**.
//!
//! **Earning.** A credential still earning trust is given no more searches than the
//! confirmations it still needs (its required streak less its streak; after its owner's k-th
//! catch, which doubles the required streak, at most N / 2^k, at least 1), counting its results
//! waiting in open cases and the searches its workers hold (`TrustState::earning_room`, applied
//! at every lease); beyond them it is told it is earning (`IdleReason::Earning`) until a trust
//! root confirms some. Every result of such a credential is searched again by a trust root, so
//! a search beyond the confirmations it needs would cost a replica and bring its trust no
//! closer. (A held result an earned worker of another owner validated, when no trust root was
//! free in time, is applied but lengthens no streak: then a credential needs more than N
//! replicated results.) The bound only withholds work from an untrusted credential: which
//! results reach the book, and who vouches for them, is unchanged.
//!
//! **Spot checks.** A result applied on one word is searched again with probability
//! `max(1 / (streak + 1), spot_floor)` (BOINC's adaptive replication), `streak` being its
//! contributor's consecutive results not found wrong: with [`StreakRule::Results`] (the
//! default, BOINC's consecutive valid results) those a trust root confirmed and those applied
//! on its own word with no check drawn, so n results cost about ln n checks before the floor;
//! with [`StreakRule::Confirmed`] only the confirmed ones (about √(2n) checks). An earned
//! result is checked by a trust root (the verifier, else a trusted worker; an earned worker of
//! another owner when none of them took it in time, the root settling any disagreement), a
//! trusted one by the verifier when one runs. A check is done only when another word agrees: a
//! replica that adds none (an untrusted credential's, or another credential's of the same
//! owner, from a lease of the job older than the check) leaves it open. The coin is keyed with a secret of the coordinator's (`coin`), so a worker cannot tell
//! which of its answers will be checked. Who takes which check, and that checks never starve
//! round work: `super::jobs`' `checks` room.
//!
//! **The decisive core** (`bookfarm_book::decisive`): the leaf results the two proof trees of
//! the root's value use; no other leaf can move it. Growth hands it over after its negamaxes (the
//! asynchronous program, whose values change with every result: every 256 applied results), and
//! a provisional result that stays in it gets a **core check** by a trust root (`core_watch`); a build
//! is done only when no provisional result is left in the core of its final book.
//!
//! **Mismatch.** Replicas that disagree are settled by the highest standing present when it is
//! Root, or Given without disagreement among the Given replicas while no verifier runs;
//! otherwise the request waits for the next level up (Given, then Root). Every replica that
//! differs from the settled result is *invalid*: its contributor's streak resets, its invalid
//! count (and its owner's catches) grows, and at [`TrustRules::block_after`] (K) invalid
//! results it is blocked. Each result of the loser that no other owner vouches for is dropped,
//! and when one of them (or the wrong result itself) had reached the book growth takes them
//! back (`super::growth`'s `Growth::recover`): a serial book replays its programs from the base
//! book; an asynchronous one retracts their leaves and searches them again.
//!
//! # Threat model
//!
//! *Who gets a credential:* only the operator issues credentials (`workers add`, and whatever
//! enrolment the operator opens); each starts untrusted, and the owner is what the operator
//! records. The trust roots are the coordinator's own searches and the machines the operator
//! marks `--trusted`. Anyone who can obtain many credentials under many owners is a Sybil the
//! coordinator cannot tell apart: the rules give each owner one voice and each new credential
//! no voice until it has done N fully replicated honest searches.
//!
//! *A patient liar cannot:* put a result in the book while untrusted; validate its own or
//! another untrusted credential's results; know which answers will be spot-checked; move the
//! root value or the best line of a finished build (every result of the final decisive core is
//! confirmed by a trust root, and results outside it cannot move the root value); keep a lie in
//! the book once caught (its unconfirmed results are dropped and growth takes them back); be
//! caught more than K times per credential; or return to earned standing cheaply: each catch of
//! an owner doubles the streak of trust-root-confirmed results all its credentials need, so an
//! owner forces O(log n) take-backs over n results it submits.
//!
//! *Why the defaults (N = 3, streak counts results, floor 2 %, core settle 256) are safe:*
//! the root value's guarantee depends on none of them: every provisional result of the final
//! decisive core is confirmed by a trust root before a build is done, whatever N, the streak
//! rule or the settle. N prices a fresh credential's first word (N honest searches, each
//! replicated by a trust root, before its word counts at all, and no more than N held at once);
//! a new credential is still fully replicated until it earns trust. The ramp bounds what one
//! earned credential gets away with: lying on every result from the moment it is earned, its
//! first k lies all escape with probability ∏ (1 − 1/(s + 1)) over its streak
//! s = N, …, N + k − 1, that is N / (N + k) until the floor, so it tells about 12 lies on
//! average up to the first catch, that one included; each catch resets its streak, doubles the
//! streak all of its owner's credentials need, and K catches block it. Those lies outside the core change the book's shape until the catch takes them back;
//! `sim trust` measures each liar kind under the defaults (docs/benchmarks.md). A provisional
//! result waits in the core up to `core_settle` applied results before its check (at once
//! when the programs are done), so a core lie can steer selection that long and costs a larger
//! take-back when caught.
//!
//! *A patient liar can:* after earning trust, lie outside the decisive core; each such lie is
//! checked with probability at least `spot_floor` (2 %), so a liar telling one lie in 500
//! results keeps most of them until caught. Such lies change which positions a selector expands
//! (the book's shape, the searches spent, values off the core), not the root's value; a lie in
//! the core stays at most until it has been there `core_settle` results. Two colluding earned
//! owners can pass each other's spot checks, and an earned colluder can validate the held
//! results of an untrusted one (without earning it trust), when no trust root was free for them
//! in time (never a core check). A liar costs the farm the trust roots' replicas while it earns, and the take-backs
//! its caught lies force (bounded above); it keeps the credit of its confirmed honest results.
//!
//! Rooms: `rules` (standings, what a case needs, the decision on a request's replicas),
//! `ledger` (the validation state: records, open cases, who vouches for each applied result,
//! and the updates a decision makes to them and to the store) and `core_watch` (the provisional
//! results in the decisive core).

mod core_watch;
mod ledger;
mod rules;
#[cfg(test)]
mod tests;

pub(crate) use ledger::{Taken, TrustState};
pub use ledger::{TrustCounters, catches_by_owner};
pub(crate) use rules::{CheckKind, Need, another_word};
pub use rules::{Standing, StreakRule, TrustRules, required_streak, standing};

/// Contributor name of the coordinator's own verification searches.
pub const VERIFIER: &str = "(coordinator)";
/// Contributor name of the coordinator's in-process workers.
pub const LOCAL: &str = "(local)";
/// Contributor name prefix of anonymous (loopback) workers, followed by the worker's name.
pub const ANONYMOUS: &str = "(anonymous)";
