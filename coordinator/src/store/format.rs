//! The store's format version, and the migrations from each earlier version.
//!
//! The version is the key `format-version` of sled's default tree (a u32). Every open checks it
//! first ([`check_and_migrate`]), before anything else reads the store:
//! - a store that holds nothing (a new directory, or one whose first open was cut short) is
//!   new: it gets [`FORMAT_VERSION`];
//! - a store that holds data but no version was written before stores carried one: it is
//!   refused ([`StoreError::Unversioned`]: export the book with the build that wrote it, import
//!   it with this one), and nothing is written to it;
//! - a store of an earlier version is migrated: the steps of [`MIGRATIONS`] from its version on,
//!   each one atomic (one sled transaction over the trees it writes and the version key) and
//!   flushed before the next, so a kill leaves the store at one version or the next;
//! - a store of a newer version is refused ([`StoreError::NewerFormat`]).
//!
//! # Changing the format
//! Any change of what a record or key means or how it is encoded (a field added to a record
//! included: postcard is not self-describing) is a new version:
//! 1. Write the step from the current version N to N+1, a [`Step`]: it reads the store as
//!    version N wrote it (keep private copies of the record types as they were at N, in the
//!    step's module, when they change) and returns the [`Writes`] that make it version N+1.
//!    Append it to [`MIGRATIONS`]; [`FORMAT_VERSION`] is one more than their number.
//! 2. Add the fixture of version N+1 (`fixtures/v<N+1>.txt`): a small real store written by
//!    the new build (the recipe is at the top of `fixtures/v1.txt`; the text form is
//!    [`super::dump`]), and its test beside the others in `format_tests.rs`.
//! 3. The tests of the earlier fixtures now run the new step too: extend their checks to what
//!    it changes. Credentials, trust records and the history must survive every step.

use super::StoreError;
use super::keys::{FORMAT_KEY, corrupt_record, decode, decode_plain, encode, encode_plain};
use std::path::Path;

/// One migration step: reads a store of version N and returns the writes that make it N+1
/// (applied atomically with the version's bump; the step itself writes nothing).
pub(super) type Step = fn(&sled::Db) -> Result<Writes, StoreError>;

/// The migration steps: `MIGRATIONS[i]` migrates a store of version `i + 1` to `i + 2`.
/// - 1 → 2 ([`super::to_v2`]): growth programs stored as `bookfarm_book::program::Program`;
/// - 2 → 3 ([`super::to_v3`]): the event log's tree;
/// - 3 → 4 ([`super::to_v4`]): the programs of the queue numbered, one record each with its
///   state; the replay log records where a cancelled program was cut;
/// - 4 → 5 ([`super::to_v5`]): every record sealed with a checksum of its key and value;
/// - 5 → 6 ([`super::to_v6`]): nothing rewritten; a queued program may be
///   `Operation::StoreAnalysis`, which builds of version 5 cannot read.
pub(super) const MIGRATIONS: &[Step] = &[
    super::to_v2::step,
    super::to_v3::step,
    super::to_v4::step,
    super::to_v5::step,
    super::to_v6::step,
];

/// The store format this build writes (version 1 was the first versioned layout; the current
/// one is described in `keys.rs`).
pub const FORMAT_VERSION: u32 = 1 + MIGRATIONS.len() as u32;

/// The writes of one migration step, by tree (a step that creates a tree opens it first: an
/// empty tree left by a kill before the transaction is harmless).
#[derive(Debug, Default)]
pub(super) struct Writes {
    trees: Vec<(sled::Tree, sled::Batch)>,
}

impl Writes {
    /// The batch of writes to `tree` (sled's default tree is `&**db`).
    pub(super) fn to(&mut self, tree: &sled::Tree) -> &mut sled::Batch {
        let at = match self.trees.iter().position(|(t, _)| t.name() == tree.name()) {
            Some(at) => at,
            None => {
                self.trees.push((tree.clone(), sled::Batch::default()));
                self.trees.len() - 1
            }
        };
        &mut self.trees[at].1
    }
}

/// The first format version whose records carry checksums ([`super::keys::seal`]), the format
/// version's own included.
pub(super) const SEALED_SINCE: u32 = 5;

/// The stored form of format version `v` (sealed from [`SEALED_SINCE`] on).
pub(super) fn version_value(v: u32) -> Result<Vec<u8>, StoreError> {
    if v >= SEALED_SINCE {
        encode(FORMAT_KEY, &v)
    } else {
        encode_plain(&v)
    }
}

/// The format version stored in `db` (`None`: none).
pub(super) fn stored_version(db: &sled::Db) -> Result<Option<u32>, StoreError> {
    match db.get(FORMAT_KEY)? {
        // Versions before [`SEALED_SINCE`] stored the bare postcard u32 (one byte for them).
        Some(v) if v.len() == 1 => match decode_plain::<u32>(FORMAT_KEY, &v)? {
            old if old < SEALED_SINCE => Ok(Some(old)),
            _ => Err(corrupt_record(
                FORMAT_KEY,
                "a version of this format stored without its checksum".into(),
            )),
        },
        Some(v) => Ok(Some(decode::<u32>(FORMAT_KEY, &v)?)),
        None => Ok(None),
    }
}

/// Whether any tree of `db` (the default one included) holds a key.
fn holds_data(db: &sled::Db) -> Result<bool, StoreError> {
    for name in db.tree_names() {
        if !db.open_tree(&name)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Check the format of the store just opened in `dir` and migrate it to [`FORMAT_VERSION`]
/// (see the module docs). Durable on return.
pub(super) fn check_and_migrate(db: &sled::Db, dir: &Path) -> Result<(), StoreError> {
    migrate(db, dir, MIGRATIONS)
}

/// [`check_and_migrate`] with the migration steps `steps` (version `1 + steps.len()` is the
/// newest).
pub(super) fn migrate(db: &sled::Db, dir: &Path, steps: &[Step]) -> Result<(), StoreError> {
    let newest = 1 + steps.len() as u32;
    let Some(mut version) = stored_version(db)? else {
        if holds_data(db)? {
            return Err(StoreError::Unversioned(dir.display().to_string()));
        }
        db.insert(FORMAT_KEY, version_value(newest)?)?;
        super::sled_gate::flush(db)?;
        return Ok(());
    };
    if version == 0 {
        return Err(StoreError::Unversioned(dir.display().to_string()));
    }
    if version > newest {
        return Err(StoreError::NewerFormat {
            dir: dir.display().to_string(),
            found: version,
            known: newest,
        });
    }
    for step in &steps[version as usize - 1..] {
        let next = version + 1;
        tracing::info!(
            store = %dir.display(),
            from = version,
            to = next,
            "migrating the store's format"
        );
        let mut writes = step(db)?;
        writes.to(db).insert(FORMAT_KEY, version_value(next)?);
        let (trees, batches): (Vec<sled::Tree>, Vec<sled::Batch>) =
            writes.trees.into_iter().unzip();
        use sled::transaction::TransactionError;
        super::sled_gate::transaction(&trees[..], |tx| {
            for (tree, batch) in tx.iter().zip(&batches) {
                tree.apply_batch(batch)?;
            }
            Ok::<(), sled::transaction::ConflictableTransactionError<std::convert::Infallible>>(())
        })
        .map_err(|e| match e {
            TransactionError::Storage(e) => StoreError::Sled(e),
            TransactionError::Abort(never) => match never {},
        })?;
        super::sled_gate::flush(db)?;
        version = next;
    }
    Ok(())
}
