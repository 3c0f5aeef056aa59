//! Format version 3 → 4: the programs of the queue get numbers and states, one record each.
//!
//! In every book tree:
//! - `m` + `growth-queue` (version 2 and 3's [`QueueV2`]: the programs still to run, the current one
//!   first) becomes one `q` + id record per program ([`ProgramRecord`]), numbered 1, 2, … in
//!   queue order, and `m` + `program-queue` (their ids in run order). The first is `Running`
//!   when the growth record holds a driver state (it started), the others `Queued`; when they
//!   were queued and started is unknown (0 and none). `m` + `growth-queue` is removed.
//! - `m` + `growth-log` (a [`QueueV2`] of the programs finished since the base book) becomes a
//!   [`LogRecord`]: each program ran to its end (no stop point), none is being replayed, and
//!   they carry no number (0: run before programs were numbered).
//!
//! Everything else is untouched (the growth record and its driver state, credentials, trust
//! records, results, history, the book).

use super::format::Writes;
use super::keys::{decode_plain, encode_plain, is_book_tree, meta_key, program_key};
use super::to_v2::QueueV2;
use super::{GrowthRecord, LogRecord, LoggedProgram, ProgramRecord, ProgramState, StoreError};

/// Migrate a version-3 store to version 4 (see the module docs).
pub(super) fn step(db: &sled::Db) -> Result<Writes, StoreError> {
    let mut w = Writes::default();
    for name in db.tree_names() {
        if !is_book_tree(&name[..]) {
            continue;
        }
        let tree = db.open_tree(&name)?;
        let growth_key = meta_key("growth");
        let started = match tree.get(&growth_key)? {
            Some(v) => decode_plain::<GrowthRecord>(&growth_key, &v)?
                .driver
                .is_some(),
            None => false,
        };
        let queue_key = meta_key("growth-queue");
        if let Some(v) = tree.get(&queue_key)? {
            let old: QueueV2 = decode_plain(&queue_key, &v)?;
            let mut ids = Vec::with_capacity(old.queue.len());
            for (i, program) in old.queue.into_iter().enumerate() {
                let id = i as u64 + 1;
                let record = ProgramRecord {
                    id,
                    program,
                    state: if i == 0 && started {
                        ProgramState::Running
                    } else {
                        ProgramState::Queued
                    },
                    submitted_ms: 0,
                    started_ms: None,
                    finished_ms: None,
                    report: String::new(),
                };
                w.to(&tree).insert(&program_key(id), encode_plain(&record)?);
                ids.push(id);
            }
            w.to(&tree)
                .insert(meta_key("program-queue"), encode_plain(&ids)?);
            w.to(&tree).remove(queue_key);
        }
        let log_key = meta_key("growth-log");
        if let Some(v) = tree.get(&log_key)? {
            let old: QueueV2 = decode_plain(&log_key, &v)?;
            let programs: Vec<LoggedProgram> = old
                .queue
                .into_iter()
                .map(|program| LoggedProgram {
                    id: 0,
                    program,
                    stop: None,
                })
                .collect();
            let log = LogRecord {
                replayed: programs.len() as u64,
                programs,
            };
            w.to(&tree).insert(log_key, encode_plain(&log)?);
        }
    }
    Ok(w)
}
