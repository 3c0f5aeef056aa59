//! The event log's tree (`events`): what happened to the farm, one [`EventRecord`] per event
//! under its sequence number (8 bytes, big-endian: the keys sort in time order), kept apart
//! from the book trees so that replacing the book never touches it (like the credentials).
//!
//! Bounded: [`EventStore::append`] removes the records more than the store's bound behind
//! the newest, in the same write, so the tree never holds more than the bound (plus what a
//! crash between the two inserts leaves, which the next append removes).

use super::keys::{EVENTS_TREE, be_u64, decode, encode};
use super::{EventRecord, Store, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The event tree of a store (a cheap-clone handle; appends from several threads get distinct
/// sequence numbers).
#[derive(Debug, Clone)]
pub struct EventStore {
    tree: sled::Tree,
    /// The sequence number of the next event (numbers start at 1).
    next: Arc<AtomicU64>,
    /// Most records kept.
    max: u64,
    /// After the tree: its drop may be the store's last flush.
    db: super::sled_gate::Db,
}

impl Store {
    /// The store's event tree, keeping at most `max` events (at least 1).
    pub fn events(&self, max: u64) -> Result<EventStore, StoreError> {
        let tree = self.db.open_tree(EVENTS_TREE)?;
        let next = match tree.iter().keys().next_back() {
            Some(k) => be_u64(&k?, 0).map_or(1, |s| s + 1),
            None => 1,
        };
        let s = EventStore {
            db: self.db.clone(),
            tree,
            next: Arc::new(AtomicU64::new(next)),
            max: max.max(1),
        };
        // A bound lowered since the last run takes effect at once.
        s.prune(next.saturating_sub(1))?;
        Ok(s)
    }
}

impl EventStore {
    /// Append an event; returns its sequence number. Durable at the store's next flush (the
    /// service flushes at least every second, and before it acknowledges anything).
    pub fn append(&self, e: &EventRecord) -> Result<u64, StoreError> {
        let seq = self.next.fetch_add(1, Ordering::SeqCst);
        let k = seq.to_be_bytes();
        self.tree.insert(k, encode(&k, e)?)?;
        if seq > self.max {
            self.tree.remove((seq - self.max).to_be_bytes())?;
        }
        Ok(seq)
    }

    /// Append an event and flush (an operator's change, durable on return).
    pub fn append_durable(&self, e: &EventRecord) -> Result<u64, StoreError> {
        let seq = self.append(e)?;
        super::sled_gate::flush(&self.db)?;
        Ok(seq)
    }

    /// Remove every record more than the bound behind `newest`.
    fn prune(&self, newest: u64) -> Result<(), StoreError> {
        let Some(first_kept) = newest.checked_sub(self.max - 1).filter(|&f| f > 1) else {
            return Ok(());
        };
        let mut b = sled::Batch::default();
        for k in self.tree.range(..first_kept.to_be_bytes()).keys() {
            b.remove(k?);
        }
        super::sled_gate::apply(&self.tree, b)?;
        Ok(())
    }

    /// Events with sequence numbers in `(after, before)`, newest first, at most `limit` of
    /// those `keep` accepts, reading at most `scan` records (a filter that matches rarely
    /// stops there; the caller pages on from the last sequence number read). Returns the
    /// events and the lowest sequence number read (0: none).
    pub fn newest(
        &self,
        after: u64,
        before: u64,
        limit: usize,
        scan: usize,
        keep: impl Fn(&EventRecord) -> bool,
    ) -> Result<(Vec<(u64, EventRecord)>, u64), StoreError> {
        let mut out = Vec::new();
        let mut lowest = 0;
        let lo = after.saturating_add(1).to_be_bytes();
        let hi = before.to_be_bytes();
        if after.saturating_add(1) >= before {
            return Ok((out, lowest));
        }
        for kv in self.tree.range(lo..hi).rev().take(scan) {
            let (k, v) = kv?;
            let seq = be_u64(&k, 0).unwrap_or(0);
            lowest = seq;
            let e: EventRecord = decode(&k, &v)?;
            if keep(&e) {
                out.push((seq, e));
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok((out, lowest))
    }

    /// Events held now.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }
}
