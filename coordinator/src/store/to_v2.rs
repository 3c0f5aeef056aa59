//! Format version 1 → 2: growth programs are stored in their one form,
//! [`bookfarm_book::program::Program`] (serde), instead of version 1's hand-rolled union.
//!
//! In every book tree:
//! - `m` + `growth-queue` and `m` + `growth-log` ([`QueueV2`]): version 1 stored each program
//!   as an `OperationRecord` (kind, root board, two parameters, …) paired with the level of the
//!   positions it creates; version 2 stores the [`Program`] (operation, root line, level,
//!   schedule). Version 1 programs all started from the start position (the only root any
//!   version-1 command gave) and ran serially: the root line is empty, the schedule serial.
//! - `m` + `growth` ([`GrowthRecord`]): the running program's [`DriverRecord`] loses its level,
//!   which the program carries.
//!
//! Everything else is untouched (credentials, trust records, results, history, the book).

use super::format::Writes;
use super::keys::{decode_plain, encode_plain, is_book_tree, meta_key};
use super::{DriverRecord, GrowthRecord, StoreError};
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::research::Upgrade;
use bookfarm_book::select::Deviate;
use bookfarm_engine::{Board, Move};
use serde::{Deserialize, Serialize};

/// Migrate a version-1 store to version 2 (see the module docs).
pub(super) fn step(db: &sled::Db) -> Result<Writes, StoreError> {
    let mut w = Writes::default();
    for name in db.tree_names() {
        if !is_book_tree(&name[..]) {
            continue;
        }
        let tree = db.open_tree(&name)?;
        for log in ["growth-queue", "growth-log"] {
            let key = meta_key(log);
            if let Some(v) = tree.get(&key)? {
                let old: QueueV1 = decode_plain(&key, &v)?;
                let queue = old
                    .queue
                    .into_iter()
                    .map(|(op, level)| op.program(level))
                    .collect::<Result<Vec<_>, _>>()?;
                w.to(&tree).insert(key, encode_plain(&QueueV2 { queue })?);
            }
        }
        let key = meta_key("growth");
        if let Some(v) = tree.get(&key)? {
            let old: GrowthV1 = decode_plain(&key, &v)?;
            let growth = GrowthRecord {
                driver: old.driver.map(DriverV1::record),
                paused: old.paused,
                last: old.last,
            };
            w.to(&tree).insert(key, encode_plain(&growth)?);
        }
    }
    Ok(w)
}

/// Version 2's `QueueRecord` (`m growth-queue`: the programs still to run, the current one
/// first; `m growth-log`: those finished since the base book, oldest first), which version 3
/// replaced (see `to_v3.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub(super) struct QueueV2 {
    /// The programs.
    pub(super) queue: Vec<Program>,
}

/// Version 1's `QueueRecord`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct QueueV1 {
    pub(super) queue: Vec<(OperationV1, Option<u8>)>,
}

/// Version 1's `OperationRecord`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct OperationV1 {
    /// 0 deviate, 1 enhance, 2 play, 3 extend, 4 add games, 5 new, 6 expand, 7 upgrade,
    /// 8 audit.
    pub(super) kind: u8,
    pub(super) root: (u64, u64),
    pub(super) a: i32,
    pub(super) b: i32,
    pub(super) until_stable: bool,
    pub(super) games: Vec<Vec<u8>>,
    pub(super) boards: Vec<(u64, u64)>,
}

impl OperationV1 {
    /// The program version 1 stored as this record and `level`, as version 1 read it back.
    fn program(self, level: Option<u8>) -> Result<Program, StoreError> {
        let root = Board {
            player: self.root.0,
            opponent: self.root.1,
        };
        let level_of = |v: i32| u8::try_from(v.clamp(0, 60)).unwrap_or(0);
        let move_of = |c: u8| Move::from_code(c).unwrap_or(Move::None);
        let operation = match self.kind {
            0 => Operation::Deviate {
                params: Deviate::new(self.a, self.b),
            },
            1 => Operation::Enhance {
                midgame_error: self.a,
                endcut_error: self.b,
                until_stable: self.until_stable,
            },
            2 => Operation::Play,
            3 => Operation::Extend,
            4 => Operation::AddGames {
                games: self
                    .games
                    .iter()
                    .map(|g| g.iter().map(|&c| move_of(c)).collect())
                    .collect(),
            },
            6 => Operation::Expand {
                boards: self
                    .boards
                    .iter()
                    .map(|&(player, opponent)| Board { player, opponent })
                    .collect(),
            },
            7 => Operation::Upgrade {
                params: Upgrade {
                    level: level_of(self.a),
                    error: self.b,
                },
            },
            8 => Operation::Audit {
                level: level_of(self.a),
                queue: self.b != 0,
            },
            _ => Operation::New,
        };
        if operation.has_root() && root != Board::start() {
            return Err(StoreError::Migration {
                from: 1,
                reason: format!(
                    "the growth program {} starts from {root}, not the start position, which \
                     no version-1 build wrote",
                    operation.describe()
                ),
            });
        }
        Ok(Program {
            operation,
            root: Vec::new(),
            level,
            schedule: Schedule::Serial,
        })
    }
}

/// Version 1's `GrowthRecord`.
#[derive(Deserialize)]
struct GrowthV1 {
    driver: Option<DriverV1>,
    paused: bool,
    last: String,
}

/// Version 1's `DriverRecord`: version 2's with the level first.
#[derive(Deserialize)]
struct DriverV1 {
    _level: Option<u8>,
    phase: u8,
    pass: u8,
    root_value: i32,
    passes: u32,
    cursor: u64,
    game: u64,
    iteration: [u64; 3],
    iterations: u32,
    changes: [u64; 3],
    illegal: Vec<(u64, u64, u8)>,
}

impl DriverV1 {
    fn record(self) -> DriverRecord {
        DriverRecord {
            phase: self.phase,
            pass: self.pass,
            root_value: self.root_value,
            passes: self.passes,
            cursor: self.cursor,
            game: self.game,
            iteration: self.iteration,
            iterations: self.iterations,
            changes: self.changes,
            illegal: self.illegal,
        }
    }
}
