//! Format version 5 → 6: a program of the queue may be `Operation::StoreAnalysis` (the program
//! `expand analyze --store` queues behind its analysis), a variant builds of version 5 cannot
//! decode. No record changes: the step only records the version, so that such a build refuses
//! the store by its version ([`super::StoreError::NewerFormat`]) rather than failing on the
//! program's record.

use super::StoreError;
use super::format::Writes;

/// Migrate a version-5 store to version 6 (see the module docs): nothing to rewrite.
pub(super) fn step(_: &sled::Db) -> Result<Writes, StoreError> {
    Ok(Writes::default())
}
