//! Worker credentials, in their own sled tree (`credentials`) so that replacing the book
//! (`Store::create_book`, which starts a new book tree) never touches them.
//!
//! | key | value (postcard) |
//! |---|---|
//! | credential name (UTF-8) | [`CredentialRecord`] |
//!
//! Only the SHA-256 of a token is stored; the token itself is shown once, when it is created.
//! Every change is flushed before it is reported, like results.

use super::keys::{CREDENTIALS_TREE, decode, encode};
use super::{Store, StoreError};
use serde::{Deserialize, Serialize};

/// Whether a credential may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CredentialState {
    /// Usable.
    Active,
    /// Refused until unblocked.
    Blocked,
    /// Refused for good.
    Revoked,
}

impl CredentialState {
    /// Lowercase name (`active|blocked|revoked`).
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialState::Active => "active",
            CredentialState::Blocked => "blocked",
            CredentialState::Revoked => "revoked",
        }
    }
}

/// One worker credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRecord {
    /// Unique name (the key).
    pub name: String,
    /// Who runs the workers using it (quarantine counts failures per owner).
    pub owner: String,
    /// Set by the operator for their own machines (more sessions; later: results trusted).
    pub trusted: bool,
    /// Active, blocked or revoked.
    pub state: CredentialState,
    /// Why it was blocked or revoked.
    pub reason: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// SHA-256 of the token.
    pub token_sha256: [u8; 32],
}

/// The credential tree of a store (a cheap-clone handle).
#[derive(Debug, Clone)]
pub struct CredentialStore {
    tree: sled::Tree,
    /// After the tree: its drop may be the store's last flush.
    db: super::sled_gate::Db,
}

impl Store {
    /// The store's credential tree.
    pub fn credentials(&self) -> Result<CredentialStore, StoreError> {
        Ok(CredentialStore {
            db: self.db.clone(),
            tree: self.db.open_tree(CREDENTIALS_TREE)?,
        })
    }
}

impl CredentialStore {
    /// Every credential, by name.
    pub fn list(&self) -> Result<Vec<CredentialRecord>, StoreError> {
        self.tree
            .iter()
            .map(|kv| {
                let (k, v) = kv?;
                decode(&k, &v)
            })
            .collect()
    }

    /// One credential.
    pub fn get(&self, name: &str) -> Result<Option<CredentialRecord>, StoreError> {
        match self.tree.get(name.as_bytes())? {
            Some(v) => Ok(Some(decode(name.as_bytes(), &v)?)),
            None => Ok(None),
        }
    }

    /// Store a new credential; false (and nothing written) when the name is taken.
    pub fn insert_new(&self, rec: &CredentialRecord) -> Result<bool, StoreError> {
        let swapped = self.tree.compare_and_swap(
            rec.name.as_bytes(),
            None as Option<&[u8]>,
            Some(encode(rec.name.as_bytes(), rec)?),
        )?;
        if swapped.is_err() {
            return Ok(false);
        }
        super::sled_gate::flush(&self.db)?;
        Ok(true)
    }

    /// Replace a credential (durable on return).
    pub fn put(&self, rec: &CredentialRecord) -> Result<(), StoreError> {
        self.tree
            .insert(rec.name.as_bytes(), encode(rec.name.as_bytes(), rec)?)?;
        super::sled_gate::flush(&self.db)?;
        Ok(())
    }
}
