//! Format version 4 → 5: every record carries a checksum. Each value of every tree (the book
//! generations, `credentials`, `invitations`, `events`, sled's default tree) gets the
//! CRC-32C of its key and value appended ([`super::keys::seal`]); the format version itself is
//! stored sealed from now on (`format.rs`). Nothing else changes (credentials, trust records, results, history, the book).

use super::StoreError;
use super::format::Writes;
use super::keys::{FORMAT_KEY, seal};

/// Migrate a version-4 store to version 5 (see the module docs).
pub(super) fn step(db: &sled::Db) -> Result<Writes, StoreError> {
    let mut w = Writes::default();
    for name in db.tree_names() {
        let tree = db.open_tree(&name)?;
        for kv in tree.iter() {
            let (k, v) = kv?;
            if &k[..] == FORMAT_KEY && name == db.name() {
                continue;
            }
            w.to(&tree).insert(k.clone(), seal(&k, &v));
        }
    }
    Ok(w)
}
