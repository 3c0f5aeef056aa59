//! Book generations: the base file, the generation's tree, and the pointer that names it.
//!
//! The book is a **base** with the position records over it (the `k` chunks in key order): a
//! record replaces the position with its board or adds a position. Every position record is
//! growth's: replacing the book writes a new base file and starts a new tree, so reverting to
//! the base book (a replay) is removing every `k` record ([`Store::revert_to_base`]).
//! Superseded versions are dropped by a **fold** ([`Store::positions_fold_due`]): a checkpoint
//! that writes the whole book as the replacement of every position record.
//!
//! The base is an Edax `book.dat` file beside sled's files, `base/<generation>.dat` (records
//! in the book's order, so a reload keeps it), named by the `m base` record of the
//! generation's tree `book-<generation>`. Replacing the book (import, `book new`, offline
//! rewrites: [`Store::create_book`]) writes the next generation's file and syncs it, writes the
//! few records of the new generation's tree and flushes, then moves the `book-tree` pointer
//! (one insert in sled's default tree) and flushes, then drops the old tree and deletes the old
//! file: a crash before the pointer's move is durable leaves the old book, after it the new
//! one; opening the store drops every book tree but the current one and deletes every base
//! file but the current one. The switch does not depend on sled recovering a batch as large as
//! the old book (one removal per key) whole, and costs nothing per key. The base is not read
//! through sled, so it costs neither sled's page cache nor its write amplification.

use super::keys::{BOOK_TREE_KEY, T, book_tree_name, is_book_tree, meta_in, seal, unseal};
use super::{BaseRecord, Batch, Entry, HeaderRecord, Store, StoreError};
use bookfarm_book::MemBook;
use bookfarm_book::edax;
use bookfarm_book::model::BookHeader;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

/// Position chunks are folded (all positions written again as one replacement) once they
/// hold at least twice this or twice the last replacement, whichever is larger.
pub const FOLD_MIN_BYTES: u64 = 8 << 20;

/// The directory of the base book files, inside the store directory.
pub(super) const BASE_DIR: &str = "base";

/// The base file of a generation.
pub(super) fn base_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(BASE_DIR).join(format!("{generation:016x}.dat"))
}

/// The error of an IO operation on a base file (or their directory).
pub(super) fn base_io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::BaseIo {
        path: path.display().to_string(),
        source,
    }
}

/// The name of the current generation's tree, after dropping every other book tree: a
/// generation a replacement did not finish switching to (killed before the pointer moved) or
/// did not finish dropping (killed after). Neither is the book. A store that never held a book
/// has no pointer; its (empty) current tree is generation 0's.
pub(super) fn drop_unfinished_generations(db: &sled::Db) -> Result<Vec<u8>, StoreError> {
    let current = match db.get(BOOK_TREE_KEY)? {
        Some(name) => unseal(BOOK_TREE_KEY, &name)?.to_vec(),
        None => book_tree_name(0).into_bytes(),
    };
    for name in db.tree_names() {
        if is_book_tree(&name) && name != current {
            tracing::info!(
                tree = %String::from_utf8_lossy(&name),
                "dropping a book generation left by an interrupted replacement"
            );
            super::sled_gate::drop_tree(db, &name)?;
        }
    }
    Ok(current)
}

impl Store {
    /// Delete the base files the store does not reference (left by a replacement that crashed
    /// before its pointer moved, or whose old file was not deleted yet).
    pub(super) fn remove_stale_bases(&self) -> Result<(), StoreError> {
        let keep = self
            .meta::<BaseRecord>("base")?
            .map(|b| base_file(&self.dir, b.generation));
        let dir = self.dir.join(BASE_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(base_io(&dir)(e)),
        };
        for entry in entries {
            let path = entry.map_err(base_io(&dir))?.path();
            if Some(&path) != keep.as_ref() {
                std::fs::remove_file(&path).map_err(base_io(&path))?;
            }
        }
        // The checksum files of the bases removed.
        let keep = self
            .meta::<BaseRecord>("base")?
            .map(|b| super::sums::sums_file(&self.dir, b.generation));
        let dir = self.dir.join(super::sums::SUMS_DIR);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries {
                let path = entry.map_err(base_io(&dir))?.path();
                if Some(&path) != keep.as_ref() {
                    std::fs::remove_file(&path).map_err(base_io(&path))?;
                }
            }
        }
        Ok(())
    }

    /// Write and sync the checksum file of the base file of `generation` (its `bytes`).
    pub(super) fn write_base_sums(&self, generation: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let dir = self.dir.join(super::sums::SUMS_DIR);
        std::fs::create_dir_all(&dir).map_err(base_io(&dir))?;
        let path = super::sums::sums_file(&self.dir, generation);
        let tmp = path.with_extension("sum.tmp");
        let mut f = std::fs::File::create(&tmp).map_err(base_io(&tmp))?;
        std::io::Write::write_all(&mut f, &super::sums::encode(bytes)).map_err(base_io(&tmp))?;
        f.sync_all().map_err(base_io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(base_io(&path))?;
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(base_io(&dir))
    }

    /// Check the base file of `generation` (`bytes`, read from `path`) against its checksums.
    /// A base written before checksums existed has none: its checksums are written now (it is
    /// trusted as read, once).
    pub(super) fn check_base_sums(
        &self,
        generation: u64,
        path: &Path,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let sums = super::sums::sums_file(&self.dir, generation);
        match std::fs::read(&sums) {
            Ok(s) => super::sums::verify(path, bytes, &sums, &s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(file = %path.display(), "base file without checksums: writing them");
                self.write_base_sums(generation, bytes)
            }
            Err(e) => Err(base_io(&sums)(e)),
        }
    }

    /// Read and check the base file against its checksums (`book verify`): the number of
    /// bytes checked.
    pub fn verify_base(&self) -> Result<u64, StoreError> {
        let Some(base) = self.meta::<BaseRecord>("base")? else {
            return Ok(0);
        };
        let path = base_file(&self.dir, base.generation);
        let bytes = std::fs::read(&path).map_err(base_io(&path))?;
        let sums = super::sums::sums_file(&self.dir, base.generation);
        let s = std::fs::read(&sums).map_err(base_io(&sums))?;
        super::sums::verify(&path, &bytes, &sums, &s)?;
        Ok(bytes.len() as u64)
    }

    /// Whether the next checkpoint should write every position again as a replacement of the
    /// stored ones ([`Batch::replace_positions`]): once the chunks hold twice what the last
    /// replacement wrote (at least twice [`FOLD_MIN_BYTES`]), so a grown book's store holds
    /// at most about three times its positions, and each change is written about twice.
    pub fn positions_fold_due(&self) -> bool {
        let floor = self.fold_min_bytes.load(Relaxed);
        let replaced = self.replaced_bytes.load(Relaxed).max(floor);
        self.chunk_bytes.load(Relaxed) >= 2 * replaced
    }

    /// Replacements of the position records ([`Batch::replace_positions`]) applied since the
    /// store was opened.
    pub fn position_replacements(&self) -> u64 {
        self.replacements.load(Relaxed)
    }

    /// Set the floor of [`Store::positions_fold_due`] (default [`FOLD_MIN_BYTES`]; tests set
    /// a small one to fold small books).
    pub fn set_fold_min_bytes(&self, bytes: u64) {
        self.fold_min_bytes.store(bytes, Relaxed);
    }

    /// The base book a replay starts from: the base file under the base header (see
    /// [`Store::revert_to_base`], which makes the stored book this one). Writes nothing.
    pub fn base_book(&self) -> Result<MemBook, StoreError> {
        let Some(header) = self.meta::<HeaderRecord>("replay-base")? else {
            return Err(StoreError::NoBook(self.dir.display().to_string()));
        };
        let mut book = self.load_base(BookHeader::from(header))?;
        book.shrink_to_fit();
        Ok(book)
    }

    /// Queue in `batch` what turns the stored book back into [`Store::base_book`]: every `k`
    /// record removed (all are growth's). Positions written to `batch` afterwards override
    /// these (they come later in the chunks), so a checkpoint can revert and write the
    /// replayed book in one batch.
    pub fn revert_to_base(&self, batch: &mut Batch) {
        batch.replace_positions();
    }

    /// Replace everything the book tree holds by `header` and `entries` (see
    /// [`Store::create_book`]).
    pub fn create(&self, header: &BookHeader, entries: &[Entry]) -> Result<(), StoreError> {
        let mut book = MemBook::with_capacity(*header, entries.len(), entries.len());
        for e in entries {
            book.put_position(&e.pos);
        }
        self.create_book(&book)
    }

    /// Replace the book (positions, results, growth state, header: everything but the worker
    /// credentials and the contributors' standings) by `book` as the new base (its positions in its order, all pending a leaf
    /// search unless they already carry one).
    ///
    /// Crash-safe, durable on return: the new base file is written and synced, the new
    /// generation's tree (base record, header, replay base: a few keys) is written and flushed,
    /// then the pointer to it is moved by one sled insert and flushed: a kill at any moment
    /// leaves the old book (the pointer not moved: opening the store drops the new tree and
    /// deletes its file) or the new one (opening drops the old tree if this did not finish).
    /// Nothing is written per position but the file's bytes, and nothing per key of the old
    /// book: its tree is dropped whole.
    pub fn create_book(&self, book: &MemBook) -> Result<(), StoreError> {
        // One replacement at a time (two would write the same generation).
        let _one = self
            .replacing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let new = self.write_generation(&self.tree(), book)?;
        let old = {
            // Writers wait for the switch (see `Store::apply`); a batch applied to the old
            // generation before it is dropped with that generation, as the old book's.
            let mut current = self
                .tree
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let old = self.switch_generation(&mut current, new)?;
            // The new generation holds no position chunks.
            self.chunk_bytes.store(0, Relaxed);
            self.replaced_bytes.store(0, Relaxed);
            old
        };
        self.drop_generation(&old)
    }

    /// Write `book` as the generation after `current`'s: its base file (synced) and its tree
    /// (flushed), which the pointer does not name yet.
    pub(super) fn write_generation(
        &self,
        current: &sled::Tree,
        book: &MemBook,
    ) -> Result<sled::Tree, StoreError> {
        let generation = meta_in::<BaseRecord>(current, "base")?.map_or(1, |b| b.generation + 1);
        let dir = self.dir.join(BASE_DIR);
        std::fs::create_dir_all(&dir).map_err(base_io(&dir))?;
        let path = base_file(&self.dir, generation);
        let file = std::fs::File::create(&path).map_err(base_io(&path))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        edax::write_book_in_order(book, &mut w).map_err(base_io(&path))?;
        let file = w.into_inner().map_err(|e| base_io(&path)(e.into_error()))?;
        file.sync_all().map_err(base_io(&path))?;
        drop(file);
        let bytes = std::fs::read(&path).map_err(base_io(&path))?;
        self.write_base_sums(generation, &bytes)?;
        // The file's directory entry must be durable before the record naming it is.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(base_io(&dir))?;
        let name = book_tree_name(generation);
        // A tree of that name is an earlier attempt's that failed before its switch.
        if self.db.tree_names().iter().any(|n| n == name.as_bytes()) {
            super::sled_gate::drop_tree(&self.db, &name)?;
        }
        let tree = self.db.open_tree(&name)?;
        let mut b = Batch::default();
        b.put_meta(
            "base",
            &BaseRecord {
                generation,
                positions: book.len() as u64,
            },
        )?;
        b.put_header(book.header())?;
        // The new base is the book replays start from.
        b.put_meta("replay-base", &HeaderRecord::from(book.header()))?;
        // Standings belong to credentials, not to a book: every contributor's trust record
        // (streak, earned trust, invalid results, block) is carried into the new generation, so
        // a volunteer keeps the trust it earned, and a caught one its catches, from book to book.
        for kv in current.scan_prefix([T]) {
            let (k, v) = kv?;
            b.batch.insert(k, v);
        }
        super::sled_gate::apply(&tree, b.batch)?;
        self.flush()?;
        Ok(tree)
    }

    /// Make `new` the book: move the pointer to it (one insert, flushed: the commit point of a
    /// replacement) and hand it to the store's readers and writers. Returns the old generation.
    pub(super) fn switch_generation(
        &self,
        current: &mut sled::Tree,
        new: sled::Tree,
    ) -> Result<sled::Tree, StoreError> {
        self.db
            .insert(BOOK_TREE_KEY, seal(BOOK_TREE_KEY, &new.name()))?;
        self.flush()?;
        Ok(std::mem::replace(current, new))
    }

    /// Drop a generation the pointer no longer names, and its base file (a kill before this
    /// ends leaves them to the next open, which drops them).
    fn drop_generation(&self, old: &sled::Tree) -> Result<(), StoreError> {
        super::sled_gate::drop_tree(&self.db, old.name())?;
        self.remove_stale_bases()
    }
}
