//! One gate for every sled write barrier in the process: batches, transactions, flushes, dropped
//! trees and the drop of a database (sled flushes when the last handle to a tree goes).
//!
//! sled 0.34's concurrency control is one lock for the whole process, not one per database:
//! once any batch or transaction has run, a batch takes it exclusively and every other operation
//! (a flush, a read, sled's own flusher thread) takes a share. A flush keeps its share while it
//! waits for the log to reach the disk, and a batch queued for the lock makes every later share
//! wait behind it, across every store of the process (the service tests; `restore`, which opens a
//! second store). Invariant: none of these operations overlap, in any store of the process, so
//! no flush holds its share while a batch waits. sled already serialises a batch against any
//! flush in progress, so the gate costs a busy store nothing; a second flush waiting behind a
//! first finds its writes on disk and returns at once.
//!
//! What the gate does not cure: the flush sled runs when a database is dropped was seen to wait
//! forever for a log position nothing would write, with no other thread in sled (gdb,
//! `TreeInner::drop` in `make_stable`; compare spacejam/sled#1412). A hung drop holds the gate, so
//! every later batch of the process waits too. The service tests therefore do not drop their
//! coordinators except to restart them (`service/tests/mod.rs`, `Fixture`).
//!
//! `clippy.toml` forbids the gated sled calls everywhere else.
#![allow(clippy::disallowed_methods)]

use parking_lot::{ReentrantMutex, ReentrantMutexGuard};

/// Reentrant: a batch applied inside a gated section, or a store dropped while one is held,
/// passes again on the same thread.
static GATE: ReentrantMutex<()> = parking_lot::const_reentrant_mutex(());

fn enter() -> ReentrantMutexGuard<'static, ()> {
    GATE.lock()
}

/// Apply `batch` to `tree` atomically.
pub(super) fn apply(tree: &sled::Tree, batch: sled::Batch) -> sled::Result<()> {
    let _gate = enter();
    tree.apply_batch(batch)
}

/// Make every write to `db` before this call durable; returns the bytes sled wrote.
pub(super) fn flush(db: &sled::Db) -> sled::Result<usize> {
    let _gate = enter();
    db.flush()
}

/// Remove the tree `name` from `db`; true if it existed.
pub(super) fn drop_tree(db: &sled::Db, name: impl AsRef<[u8]>) -> sled::Result<bool> {
    let _gate = enter();
    db.drop_tree(name.as_ref())
}

/// Run `f` as one sled transaction over `trees`.
pub(super) fn transaction<T, A, E, F>(trees: &T, f: F) -> sled::transaction::TransactionResult<A, E>
where
    T: sled::Transactional<E> + ?Sized,
    F: Fn(&T::View) -> sled::transaction::ConflictableTransactionResult<A, E>,
{
    let _gate = enter();
    trees.transaction(f)
}

/// A database handle whose drop passes the gate: when it is the last handle, sled flushes
/// every tree as it goes. Holders declare it after their tree handles, so that the trees are
/// released first and the last flush happens here.
#[derive(Debug, Clone)]
pub(super) struct Db(Option<sled::Db>);

impl Db {
    pub(super) fn new(db: sled::Db) -> Db {
        Db(Some(db))
    }
}

impl std::ops::Deref for Db {
    type Target = sled::Db;

    fn deref(&self) -> &sled::Db {
        // Taken only by `drop`.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("a gated sled handle used after drop"))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _gate = enter();
        drop(self.0.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate is reentrant: a flush inside a gated section (a batch, a store dropped while a
    /// flush is under way on this thread) does not wait on itself.
    #[test]
    fn the_gate_passes_again_on_the_same_thread() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::new(sled::Config::new().path(dir.path()).open().unwrap());
        let tree = db.open_tree("t").unwrap();
        let _outer = enter();
        let mut b = sled::Batch::default();
        b.insert(&b"k"[..], &b"v"[..]);
        apply(&tree, b).unwrap();
        flush(&db).unwrap();
        drop(tree);
        drop(db);
    }

    /// Another thread waits at the gate while it is held.
    #[test]
    fn the_gate_excludes_other_threads() {
        let held = enter();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let _g = enter();
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(100))
                .is_err(),
            "another thread passed a held gate"
        );
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        t.join().unwrap();
    }
}
