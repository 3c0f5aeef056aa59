//! Known leaf results, as the algorithms that consume searches read them: a growth step, a
//! line audit or a play-out looks each of its requests up and, when one is missing, reports it
//! instead of searching (the caller runs the search however it likes and asks again).

use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::collections::{HashMap, HashSet};

/// A map keyed by leaf request, hashed with foldhash (seeded per process): requests are
/// hashed on every step of a program, and SipHash cost the coordinator's growth thread more
/// than the look-ups themselves. Keys are positions of the book, not chosen by a client.
pub type RequestMap<V> = HashMap<LeafRequest, V, foldhash::fast::RandomState>;

/// A set of leaf requests hashed like [`RequestMap`].
pub type RequestSet = HashSet<LeafRequest, foldhash::fast::RandomState>;

/// Known leaf results, looked up by request.
pub trait Results {
    /// The result of `request`, if known.
    fn result(&self, request: &LeafRequest) -> Option<LeafResult>;
}

impl<S: std::hash::BuildHasher> Results for HashMap<LeafRequest, LeafResult, S> {
    fn result(&self, request: &LeafRequest) -> Option<LeafResult> {
        self.get(request).copied()
    }
}
