//! Format version 2 → 3: the event log, a tree of its own (`events`, see `events.rs`). The
//! step creates it with its first event, the migration itself; nothing else changes
//! (credentials, trust records, results, history, the book).

use super::format::Writes;
use super::keys::{EVENTS_TREE, encode_plain};
use super::{EventKind, EventRecord, StoreError};

/// Migrate a version-2 store to version 3 (see the module docs).
pub(super) fn step(db: &sled::Db) -> Result<Writes, StoreError> {
    let mut w = Writes::default();
    let tree = db.open_tree(EVENTS_TREE)?;
    let first = EventRecord {
        t_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        kind: EventKind::StoreMigrated,
        subject: "store".into(),
        owner: String::new(),
        detail: "format version 2 to 3: the event log begins".into(),
        program: 0,
        cost: None,
    };
    w.to(&tree)
        .insert(&1u64.to_be_bytes()[..], encode_plain(&first)?);
    Ok(w)
}
