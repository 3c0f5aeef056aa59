//! Invitations: codes an operator hands to volunteers, each turned into a worker credential by
//! the worker's `enroll`. In their own sled tree (`invitations`), beside the credentials.
//!
//! | key | value (postcard) |
//! |---|---|
//! | invitation name (UTF-8) | [`InvitationRecord`] |
//!
//! Only the SHA-256 of a code is stored. Spending a use of a code and storing the credential it
//! makes are one transaction over both trees ([`InvitationStore::enrol`]), flushed before the
//! reply: a crash never spends a use without a credential, nor the reverse.

use super::credentials::CredentialRecord;
use super::keys::{CREDENTIALS_TREE, INVITATIONS_TREE, decode, encode};
use super::{Store, StoreError};
use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError};

/// One invitation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationRecord {
    /// Unique name (the key).
    pub name: String,
    /// SHA-256 of the code.
    pub code_sha256: [u8; 32],
    /// The owner of every credential it makes (None: see `Identities::enroll`).
    pub owner: Option<String>,
    /// Credentials it may make.
    pub uses: u32,
    /// Credentials it made.
    pub used: u32,
    /// Not usable from this time on, seconds since the Unix epoch.
    pub expires_unix: u64,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// Revoked by the operator.
    pub revoked: bool,
}

/// Why an enrolment was not stored.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    /// The invitation changed meanwhile (spent, revoked).
    #[error("invitation {0:?} was used up or revoked meanwhile")]
    Spent(String),
    /// A credential of that name exists.
    #[error("a worker credential named {0:?} exists already")]
    NameTaken(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The invitation tree of a store (a cheap-clone handle).
#[derive(Debug, Clone)]
pub struct InvitationStore {
    tree: sled::Tree,
    credentials: sled::Tree,
    /// After the trees: its drop may be the store's last flush.
    db: super::sled_gate::Db,
}

impl Store {
    /// The store's invitation tree.
    pub fn invitations(&self) -> Result<InvitationStore, StoreError> {
        Ok(InvitationStore {
            db: self.db.clone(),
            tree: self.db.open_tree(INVITATIONS_TREE)?,
            credentials: self.db.open_tree(CREDENTIALS_TREE)?,
        })
    }
}

fn abort<T>(e: EnrolError) -> Result<T, ConflictableTransactionError<EnrolError>> {
    Err(ConflictableTransactionError::Abort(e))
}

impl InvitationStore {
    /// Every invitation, by name.
    pub fn list(&self) -> Result<Vec<InvitationRecord>, StoreError> {
        self.tree
            .iter()
            .map(|kv| {
                let (k, v) = kv?;
                decode(&k, &v)
            })
            .collect()
    }

    /// Store a new invitation; false (and nothing written) when the name is taken.
    pub fn insert_new(&self, rec: &InvitationRecord) -> Result<bool, StoreError> {
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

    /// Replace an invitation (durable on return).
    pub fn put(&self, rec: &InvitationRecord) -> Result<(), StoreError> {
        self.tree
            .insert(rec.name.as_bytes(), encode(rec.name.as_bytes(), rec)?)?;
        super::sled_gate::flush(&self.db)?;
        Ok(())
    }

    /// Spend one use of `invitation` (as it was read: `expected`) and store `credential`, in
    /// one transaction; durable on return. `invitation` None: open enrolment, the credential
    /// alone.
    pub fn enrol(
        &self,
        invitation: Option<&InvitationRecord>,
        credential: &CredentialRecord,
    ) -> Result<(), EnrolError> {
        let cred = encode(credential.name.as_bytes(), credential)?;
        let spent = match invitation {
            Some(i) => Some((
                i.name.clone(),
                encode(i.name.as_bytes(), i)?,
                encode(
                    i.name.as_bytes(),
                    &InvitationRecord {
                        used: i.used + 1,
                        ..i.clone()
                    },
                )?,
            )),
            None => None,
        };
        let r = super::sled_gate::transaction(&(&self.tree, &self.credentials), |(inv, creds)| {
            if let Some((name, before, after)) = &spent {
                match inv.get(name.as_bytes())? {
                    Some(v) if v.as_ref() == before.as_slice() => {}
                    _ => return abort(EnrolError::Spent(name.clone())),
                }
                inv.insert(name.as_bytes(), after.as_slice())?;
            }
            if creds.get(credential.name.as_bytes())?.is_some() {
                return abort(EnrolError::NameTaken(credential.name.clone()));
            }
            creds.insert(credential.name.as_bytes(), cred.as_slice())?;
            Ok(())
        });
        match r {
            Ok(()) => {}
            Err(TransactionError::Abort(e)) => return Err(e),
            Err(TransactionError::Storage(e)) => return Err(StoreError::Sled(e).into()),
        }
        super::sled_gate::flush(&self.db).map_err(StoreError::Sled)?;
        Ok(())
    }
}
