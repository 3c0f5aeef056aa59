//! On-disk records (postcard). Engine and book types do not derive serde; these mirrors do.

use crate::book_index::Entry;
use bookfarm_book::model::{BAD_LINK, BookDate, BookHeader, Link, Position};
use bookfarm_engine::Board;
use bookfarm_proto::domain::Selector;
use serde::{Deserialize, Serialize};

/// A stored position: Edax's record plus the coordinator's bookkeeping flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionRecord {
    /// Canonical board, side to move.
    pub player: u64,
    /// Canonical board, other side.
    pub opponent: u64,
    /// Leaf as the two file bytes (score, move code).
    pub leaf: [u8; 2],
    /// Links as file bytes, in stored order.
    pub links: Vec<[u8; 2]>,
    /// Level 0..=60.
    pub level: u8,
    /// Derived: value, lower, upper.
    pub scores: [i16; 3],
    /// Derived: wins, draws, losses, lines.
    pub counts: [u32; 4],
    /// A leaf search is outstanding.
    pub pending: bool,
    /// Link-set version.
    pub version: u32,
    /// Quarantined after repeated failures.
    pub quarantined: bool,
}

impl PositionRecord {
    /// The record of an entry.
    pub fn from_entry(e: &Entry) -> PositionRecord {
        let p = &e.pos;
        PositionRecord {
            player: p.board.player,
            opponent: p.board.opponent,
            leaf: p.leaf.to_bytes(),
            links: p.links.iter().map(|l| l.to_bytes()).collect(),
            level: p.level,
            scores: [p.value, p.lower, p.upper],
            counts: [p.n_wins, p.n_draws, p.n_losses, p.n_lines],
            pending: e.pending,
            version: e.version,
            quarantined: e.quarantined,
        }
    }

    /// Back to an entry (unknown move codes, which a record we wrote never holds, become
    /// "no leaf" or are dropped from the links).
    pub fn into_entry(self) -> Entry {
        let board = Board {
            player: self.player,
            opponent: self.opponent,
        };
        let mut pos = Position::new(board, self.level);
        pos.leaf = Link::from_bytes(self.leaf).unwrap_or(BAD_LINK);
        pos.links = self
            .links
            .into_iter()
            .filter_map(Link::from_bytes)
            .collect();
        [pos.value, pos.lower, pos.upper] = self.scores;
        [pos.n_wins, pos.n_draws, pos.n_losses, pos.n_lines] = self.counts;
        Entry {
            pos,
            pending: self.pending,
            version: self.version,
            quarantined: self.quarantined,
        }
    }
}

/// The stored book header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRecord {
    /// version, release.
    pub version: [u8; 2],
    /// year.
    pub year: i16,
    /// month, day, hour, minute, second, pad.
    pub date: [u8; 6],
    /// level, n_empties, midgame_error, endcut_error, verbosity.
    pub options: [i32; 5],
}

impl From<&BookHeader> for HeaderRecord {
    fn from(h: &BookHeader) -> HeaderRecord {
        let d = &h.date;
        HeaderRecord {
            version: [h.version, h.release],
            year: d.year,
            date: [d.month, d.day, d.hour, d.minute, d.second, d.pad],
            options: [
                h.level,
                h.n_empties,
                h.midgame_error,
                h.endcut_error,
                h.verbosity,
            ],
        }
    }
}

impl From<HeaderRecord> for BookHeader {
    fn from(r: HeaderRecord) -> BookHeader {
        let [month, day, hour, minute, second, pad] = r.date;
        let [level, n_empties, midgame_error, endcut_error, verbosity] = r.options;
        BookHeader {
            version: r.version[0],
            release: r.version[1],
            date: BookDate {
                year: r.year,
                month,
                day,
                hour,
                minute,
                second,
                pad,
            },
            level,
            n_empties,
            midgame_error,
            endcut_error,
            verbosity,
        }
    }
}

/// State of an expansion as persisted (so a restarted coordinator resumes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpansionStateRecord {
    /// Selecting and leasing.
    Running,
    /// Paused by an operator: no new leases.
    Paused,
    /// Reached its fixed point.
    Done,
}

/// The persisted expansion request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpansionRecord {
    /// 0 deviate, 1 enhance, 2 play, 3 extend.
    pub kind: u8,
    /// First parameter (deviate relative / enhance midgame).
    pub a: i32,
    /// Second parameter (deviate absolute / enhance endcut).
    pub b: i32,
    /// Level of new positions (0 = the parent's level).
    pub level: u8,
    /// State.
    pub state: ExpansionStateRecord,
}

impl ExpansionRecord {
    /// The selector.
    pub fn selector(&self) -> Selector {
        match self.kind {
            0 => Selector::Deviate {
                relative: self.a,
                absolute: self.b,
            },
            1 => Selector::Enhance {
                midgame: self.a,
                endcut: self.b,
            },
            2 => Selector::Play,
            _ => Selector::Extend,
        }
    }

    /// A record for a selector.
    pub fn new(s: Selector, level: u8, state: ExpansionStateRecord) -> ExpansionRecord {
        let (kind, a, b) = match s {
            Selector::Deviate { relative, absolute } => (0, relative, absolute),
            Selector::Enhance { midgame, endcut } => (1, midgame, endcut),
            Selector::Play => (2, 0, 0),
            Selector::Extend => (3, 0, 0),
        };
        ExpansionRecord {
            kind,
            a,
            b,
            level,
            state,
        }
    }
}
