//! Opening sled: the files a killed sled left unfinished are removed before it opens, and its
//! file lock is waited for.
//!
//! sled 0.34.7 can leave a store it cannot open when killed while writing the snapshot it takes
//! at every open, or the configuration file it writes at a store's first open; such files are
//! deleted before opening (see [`remove_unfinished_sled_files`]).

use super::{LOCK_WAIT, StoreError};
use std::path::Path;

/// sled's data file, whose `flock` marks the directory as open.
pub(super) const SLED_DATA_FILE: &str = "db";

/// sled's configuration file (segment size, compression, version), written at the first open.
pub(super) const SLED_CONF_FILE: &str = "conf";

/// Delete the files sled began and never finished: its snapshots (`snap.<lsn>.generating`),
/// unless another process holds the store, and the configuration of a store whose first open
/// was cut short.
///
/// sled 0.34.7 writes a snapshot of its page table at every open, after recovering its log:
/// into `snap.<lsn>.generating`, synced, then renamed to `snap.<lsn>`; older snapshots are
/// removed only after the rename. But its search for the newest snapshot skips only names
/// ending in `.in___motion` (an older suffix), so a `.generating` file is read as the newest
/// snapshot, and one cut short by a kill fails its checksum: every later open returns
/// `Corruption { at: None }` (spacejam/sled#1527, #1533). Deleting it is what the rename would
/// have made unnecessary: the previous snapshot (or none) is still there, and so is the log the
/// new one was built from (recovery only zeroed what lies past the log's end), so recovery runs
/// again from there, as after a kill just before the snapshot was begun.
///
/// The files are only deleted under the lock sled takes on its data file (an `flock`, which
/// conflicts between open files even in one process): a process holding the store may be
/// writing its own snapshot. The lock is released before sled opens the store.
///
/// Likewise sled writes its configuration file `conf` at a store's first open without
/// syncing it, in two writes (the lines, then their checksum), and only then creates its data
/// file; a `conf` cut short between them makes every later open fail (`Corruption`). A `conf`
/// without a data file is such a first open's, and the store never held anything: it is
/// deleted and sled writes it again. (If another process is between those two steps of its own
/// first open, it has read its configuration already and goes on; the next open rewrites the
/// same lines.)
fn remove_unfinished_sled_files(dir: &Path) -> Result<(), StoreError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StoreError::Io { path, source }
    };
    let data = dir.join(SLED_DATA_FILE);
    let file = match std::fs::File::open(&data) {
        Ok(f) => f,
        // A new store: sled has written no snapshot yet, and perhaps part of its configuration.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let conf = dir.join(SLED_CONF_FILE);
            return match std::fs::remove_file(&conf) {
                Ok(()) => {
                    tracing::warn!(path = %conf.display(), "removing the configuration of a store sled did not finish creating");
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(&conf)(e)),
            };
        }
        Err(e) => return Err(io(&data)(e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        // Open elsewhere (or still closing here, sled#1234): sled's own lock fails and is retried.
        Err(std::fs::TryLockError::WouldBlock) => return Ok(()),
        Err(std::fs::TryLockError::Error(e)) => return Err(io(&data)(e)),
    }
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        let unfinished = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("snap.") && n.ends_with(".generating"));
        if unfinished {
            tracing::warn!(path = %path.display(), "removing a snapshot sled did not finish writing");
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    // Dropping `file` releases the lock.
    Ok(())
}

/// Open sled in `dir` (creating the store if there is none), its page cache bounded to
/// `cache_bytes` (sled flushes in the background every second; durability points are explicit
/// flushes), after removing the files an earlier sled left unfinished.
///
/// sled 0.34 releases a dropped database's file lock asynchronously (its flusher thread
/// holds it for a moment, spacejam/sled#1234), so a reopen right after a drop in the same
/// process can find the lock taken: the lock is retried for up to [`LOCK_WAIT`]. Another
/// process holding the store still fails, after that wait.
pub(super) fn open_sled(dir: &Path, cache_bytes: u64) -> Result<super::sled_gate::Db, StoreError> {
    let config = sled::Config::new()
        .path(dir)
        .cache_capacity(cache_bytes)
        .flush_every_ms(Some(1000));
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        remove_unfinished_sled_files(dir)?;
        match config.open() {
            // sled reports the failed flock as ErrorKind::Other with this message.
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::Other
                    && e.to_string().starts_with("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return Ok(super::sled_gate::Db::new(r?)),
        }
    }
}
