//! Which provisional results the decisive core holds, and when each needs a core check.
//!
//! A result is *provisional* while it was applied on the word of earned contributors only (no
//! trust root agreed). Growth hands over the decisive core (`bookfarm_book::decisive`) after
//! its negamaxes (the asynchronous program's every 256 applied results); a provisional result
//! in it gets a **core check** by a trust root once it has stayed in the core while
//! [`super::TrustRules::core_settle`] results were applied, and at once when the programs are
//! done. A core check closes only when a trust root answers (an earned replica that agrees
//! leaves the result provisional). So no provisional result is in the core of a finished build,
//! and the checks skip the early core's churn: measured with the real engine on the README
//! build, 25 % of all results pass through the core at some negamax, 5.8 % stay for two, and
//! 2.9 % are in it at the end.

use bookfarm_book::decisive::{CoreKey, CoreSet};
use bookfarm_book::driver::{RequestMap, RequestSet};
use bookfarm_engine::search::LeafRequest;
use std::collections::HashMap;

/// The provisional results (applied on the word of earned contributors only) and their place in
/// the decisive core. A provisional result that has stayed in every core snapshot while
/// `settle` results were applied gets a core check; when the snapshot is final (the programs
/// are done) every provisional result in it does.
#[derive(Debug, Default)]
pub(crate) struct CoreWatch {
    /// Provisional requests by the book-leaf key of their result.
    by_key: HashMap<CoreKey, Vec<LeafRequest>>,
    /// The key of each provisional request.
    key_of: RequestMap<CoreKey>,
    /// Provisional requests in the last core, with the applied count when they entered it.
    members: RequestMap<u64>,
    /// Provisional requests whose core check is under way.
    checking: RequestSet,
    /// Results applied so far (the clock of `settle`).
    applied: u64,
    /// Leaves of the last core.
    size: usize,
}

impl CoreWatch {
    /// `request`'s result, whose book-leaf key is `key`, is provisional.
    pub(crate) fn add(&mut self, request: LeafRequest, key: CoreKey) {
        if let Some(old) = self.key_of.insert(request, key) {
            if old == key {
                return;
            }
            self.unindex(&request, &old);
        }
        self.by_key.entry(key).or_default().push(request);
    }

    fn unindex(&mut self, request: &LeafRequest, key: &CoreKey) {
        if let Some(v) = self.by_key.get_mut(key) {
            v.retain(|r| r != request);
            if v.is_empty() {
                self.by_key.remove(key);
            }
        }
    }

    /// `request` is no longer provisional (a trust root confirmed it, or it was dropped).
    pub(crate) fn remove(&mut self, request: &LeafRequest) {
        if let Some(key) = self.key_of.remove(request) {
            self.unindex(request, &key);
        }
        self.members.remove(request);
        self.checking.remove(request);
    }

    /// Whether the result of `request` is provisional.
    pub(crate) fn is_provisional(&self, request: &LeafRequest) -> bool {
        self.key_of.contains_key(request)
    }

    /// Whether `request`'s result is provisional and its core check was opened.
    pub(crate) fn in_core_check(&self, request: &LeafRequest) -> bool {
        self.checking.contains(request) && self.key_of.contains_key(request)
    }

    /// Provisional results.
    pub(crate) fn provisional(&self) -> usize {
        self.key_of.len()
    }

    /// One result was applied.
    pub(crate) fn tick(&mut self) {
        self.applied += 1;
    }

    /// A new core snapshot; returns the provisional requests that need a core check now.
    pub(crate) fn changed(&mut self, core: &CoreSet, settle: u64, last: bool) -> Vec<LeafRequest> {
        self.size = core.leaves.len();
        let mut members = RequestMap::default();
        for l in &core.leaves {
            if let Some(rs) = self.by_key.get(&l.key()) {
                for r in rs {
                    let since = self.members.get(r).copied().unwrap_or(self.applied);
                    members.insert(*r, since);
                }
            }
        }
        self.members = members;
        let mut due: Vec<LeafRequest> = self
            .members
            .iter()
            .filter(|(r, since)| {
                (last || self.applied.saturating_sub(**since) >= settle)
                    && !self.checking.contains(*r)
            })
            .map(|(r, _)| *r)
            .collect();
        due.sort_unstable_by_key(|r| (r.board.player, r.board.opponent, r.excluded, r.level));
        self.checking.extend(due.iter().copied());
        due
    }

    /// Provisional results in the last core (confirmed ones leave the set).
    pub(crate) fn unconfirmed(&self) -> usize {
        self.members.len()
    }

    /// Leaves of the last core.
    pub(crate) fn size(&self) -> usize {
        self.size
    }
}
