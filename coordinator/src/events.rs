//! The farm's event log: programs queued, started, finished and cancelled; credentials added,
//! blocked, unblocked and revoked, and enrolments; lies caught, blocks, replays and
//! quarantines; workers joining and leaving. Durable (the store's `events` tree, written as
//! things happen and flushed with the store) and bounded (the newest
//! [`crate::config`]`::event_log_max` events are kept, 100,000 by default: about 10 MB).
//!
//! Served read-only as `/api/v1/events` and the web UI's events page; each event kind is also
//! counted since start in `bookfarm_events_total{kind}` (what the alert rules watch).
//!
//! Nothing secret goes into an event: names and owners (public on the workers page already),
//! reasons, counts, positions. No tokens, worker ids or network addresses.

pub use crate::store::{CostRecord, EventKind, EventRecord};
use crate::store::{EventStore, Store, StoreError};
use std::collections::BTreeSet;

/// Events kept unless configured otherwise.
pub const DEFAULT_MAX_EVENTS: u64 = 100_000;

/// Most events one query returns.
pub const MAX_PAGE: usize = 500;

/// Most records one query reads (a filter that matches rarely pages on from there).
pub const MAX_SCAN: usize = 20_000;

/// The groups of kinds the events page filters by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// Growth and search programs.
    Programs,
    /// Worker credentials and enrolment.
    Credentials,
    /// Validation: lies caught, blocks, replays, quarantines.
    Trust,
    /// Workers joining and leaving.
    Workers,
    /// The store itself.
    Store,
}

impl Group {
    /// Every group, in the page's order.
    pub const ALL: [Group; 5] = [
        Group::Programs,
        Group::Credentials,
        Group::Trust,
        Group::Workers,
        Group::Store,
    ];

    /// Its name in the API (`programs`, `credentials`, `trust`, `workers`, `store`).
    pub fn name(self) -> &'static str {
        match self {
            Group::Programs => "programs",
            Group::Credentials => "credentials",
            Group::Trust => "trust",
            Group::Workers => "workers",
            Group::Store => "store",
        }
    }
}

/// Every kind, in declaration order.
pub const KINDS: [EventKind; 17] = [
    EventKind::StoreMigrated,
    EventKind::ProgramQueued,
    EventKind::ProgramStarted,
    EventKind::ProgramDone,
    EventKind::ProgramCancelled,
    EventKind::CredentialAdded,
    EventKind::CredentialBlocked,
    EventKind::CredentialUnblocked,
    EventKind::CredentialRevoked,
    EventKind::Enrolled,
    EventKind::LieCaught,
    EventKind::ContributorBlocked,
    EventKind::Replay,
    EventKind::Quarantined,
    EventKind::WorkerJoined,
    EventKind::WorkerLeft,
    EventKind::Retract,
];

impl EventKind {
    /// Its name in the API and the metric's `kind` label (`lie_caught`, …).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::StoreMigrated => "store_migrated",
            EventKind::ProgramQueued => "program_queued",
            EventKind::ProgramStarted => "program_started",
            EventKind::ProgramDone => "program_done",
            EventKind::ProgramCancelled => "program_cancelled",
            EventKind::CredentialAdded => "credential_added",
            EventKind::CredentialBlocked => "credential_blocked",
            EventKind::CredentialUnblocked => "credential_unblocked",
            EventKind::CredentialRevoked => "credential_revoked",
            EventKind::Enrolled => "enrolled",
            EventKind::LieCaught => "lie_caught",
            EventKind::ContributorBlocked => "contributor_blocked",
            EventKind::Replay => "replay",
            EventKind::Quarantined => "quarantined",
            EventKind::WorkerJoined => "worker_joined",
            EventKind::WorkerLeft => "worker_left",
            EventKind::Retract => "retract",
        }
    }

    /// The kind of an API name.
    pub fn of_name(name: &str) -> Option<EventKind> {
        KINDS.into_iter().find(|k| k.name() == name)
    }

    /// Its group.
    pub fn group(self) -> Group {
        match self {
            EventKind::StoreMigrated => Group::Store,
            EventKind::ProgramQueued
            | EventKind::ProgramStarted
            | EventKind::ProgramDone
            | EventKind::ProgramCancelled => Group::Programs,
            EventKind::CredentialAdded
            | EventKind::CredentialBlocked
            | EventKind::CredentialUnblocked
            | EventKind::CredentialRevoked
            | EventKind::Enrolled => Group::Credentials,
            EventKind::LieCaught
            | EventKind::ContributorBlocked
            | EventKind::Replay
            | EventKind::Retract
            | EventKind::Quarantined => Group::Trust,
            EventKind::WorkerJoined | EventKind::WorkerLeft => Group::Workers,
        }
    }
}

/// Milliseconds since the Unix epoch (events carry wall-clock time).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An event of `kind` now, about `subject` (of `owner`), with `detail`.
pub fn event(kind: EventKind, subject: &str, owner: &str, detail: String) -> EventRecord {
    EventRecord {
        t_ms: unix_ms(),
        kind,
        subject: subject.to_string(),
        owner: owner.to_string(),
        detail,
        program: 0,
        cost: None,
    }
}

/// A position as an OBF line with the side to move as X (the subject of an event about a
/// search: requests carry no colour).
pub fn board_text(board: &bookfarm_engine::Board) -> String {
    bookfarm_engine::formats::obf::ObfPosition {
        board: *board,
        black_to_move: true,
        scores: Vec::new(),
        best_score: None,
        comment: None,
    }
    .to_obf_line()
}

/// The event log of a store (a cheap-clone handle), or none (services without a store).
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    store: Option<EventStore>,
}

/// Which events a query returns.
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    /// Only these kinds (empty: every kind).
    pub kinds: BTreeSet<EventKind>,
    /// Only events whose subject, owner or detail contains this text (case-insensitive;
    /// empty: every event).
    pub text: String,
    /// Only events after this sequence number (0: from the oldest kept).
    pub after: u64,
    /// Only events before this sequence number (0: up to the newest).
    pub before: u64,
    /// At most this many (capped at [`MAX_PAGE`]; 0: [`MAX_PAGE`]).
    pub limit: usize,
}

/// A page of events, newest first.
#[derive(Debug, Clone, Default)]
pub struct EventPage {
    /// (sequence number, event).
    pub events: Vec<(u64, EventRecord)>,
    /// Older events may match: query again with `before` = [`EventPage::next_before`].
    pub more: bool,
    /// The lowest sequence number read (where the next older page starts).
    pub next_before: u64,
}

impl EventLog {
    /// The log in `store`'s `events` tree, keeping at most `max` events (each kind's counter
    /// is created at zero with the recorder, by [`crate::telemetry::register`]).
    pub fn open(store: &Store, max: u64) -> Result<EventLog, StoreError> {
        Ok(EventLog {
            store: Some(store.events(max)?),
        })
    }

    /// Record an event (durable at the store's next flush). A store that fails is logged and
    /// counted as a store error: the change the event reports has happened and stands.
    pub fn record(&self, e: EventRecord) {
        self.write(e, false);
    }

    /// Record an event and flush (an operator's change, durable on return).
    pub fn record_durable(&self, e: EventRecord) {
        self.write(e, true);
    }

    fn write(&self, e: EventRecord, durable: bool) {
        metrics::counter!(crate::telemetry::EVENTS, "kind" => e.kind.name()).increment(1);
        tracing::debug!(kind = e.kind.name(), subject = %e.subject, detail = %e.detail, "event");
        let Some(s) = &self.store else {
            return;
        };
        let r = if durable {
            s.append_durable(&e)
        } else {
            s.append(&e)
        };
        if let Err(err) = r {
            metrics::counter!(crate::telemetry::STORE_ERRORS).increment(1);
            tracing::warn!(error = %err, kind = e.kind.name(), "event not stored");
        }
    }

    /// The events `q` selects, newest first.
    pub fn query(&self, q: &EventQuery) -> Result<EventPage, StoreError> {
        let Some(s) = &self.store else {
            return Ok(EventPage::default());
        };
        let limit = match q.limit {
            0 => MAX_PAGE,
            n => n.min(MAX_PAGE),
        };
        let text = q.text.to_lowercase();
        let keep = |e: &EventRecord| {
            (q.kinds.is_empty() || q.kinds.contains(&e.kind))
                && (text.is_empty()
                    || [&e.subject, &e.owner, &e.detail]
                        .iter()
                        .any(|f| f.to_lowercase().contains(&text)))
        };
        let before = if q.before == 0 { u64::MAX } else { q.before };
        let (events, lowest) = s.newest(q.after, before, limit, MAX_SCAN, keep)?;
        // More when the scan stopped early (page full, or the scan bound) above the oldest
        // record that `after` allows.
        let more = lowest > q.after.saturating_add(1) && {
            let (older, _) = s.newest(q.after, lowest, 1, 1, |_| true)?;
            !older.is_empty()
        };
        Ok(EventPage {
            events,
            more,
            next_before: lowest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(max: u64) -> (tempfile::TempDir, Store, EventLog) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = EventLog::open(&store, max).unwrap();
        (dir, store, log)
    }

    #[test]
    fn kinds_have_unique_names_and_a_group() {
        let names: BTreeSet<&str> = KINDS.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), KINDS.len());
        for k in KINDS {
            assert_eq!(EventKind::of_name(k.name()), Some(k));
            assert!(Group::ALL.contains(&k.group()));
        }
        assert_eq!(EventKind::of_name("nope"), None);
    }

    #[test]
    fn the_log_keeps_the_newest_events_and_survives_a_reopen() {
        let (dir, store, log) = log(5);
        for i in 0..12 {
            let kind = if i % 3 == 0 {
                EventKind::LieCaught
            } else {
                EventKind::WorkerJoined
            };
            log.record(event(kind, &format!("w{i}"), "alice", format!("n={i}")));
        }
        let all = log.query(&EventQuery::default()).unwrap();
        let subjects: Vec<&str> = all.events.iter().map(|(_, e)| e.subject.as_str()).collect();
        assert_eq!(subjects, ["w11", "w10", "w9", "w8", "w7"]);
        assert!(!all.more);
        let seqs: Vec<u64> = all.events.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [12, 11, 10, 9, 8]);
        drop(log);
        store.flush().unwrap();
        drop(store);
        // Reopened with a smaller bound: numbering goes on, the bound applies at once.
        let store = Store::open(dir.path()).unwrap();
        let log = EventLog::open(&store, 3).unwrap();
        log.record(event(EventKind::Replay, "book", "", "after".into()));
        let all = log.query(&EventQuery::default()).unwrap();
        let seqs: Vec<u64> = all.events.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [13, 12, 11]);
    }

    #[test]
    fn queries_filter_by_kind_and_text_and_page_back() {
        let (_dir, _store, log) = log(100);
        for i in 0..30 {
            let kind = if i % 10 == 0 {
                EventKind::LieCaught
            } else {
                EventKind::WorkerJoined
            };
            let owner = if i % 2 == 0 { "Alice" } else { "bob" };
            log.record(event(kind, &format!("w{i}"), owner, String::new()));
        }
        let lies = log
            .query(&EventQuery {
                kinds: BTreeSet::from([EventKind::LieCaught]),
                ..EventQuery::default()
            })
            .unwrap();
        let subjects: Vec<&str> = lies
            .events
            .iter()
            .map(|(_, e)| e.subject.as_str())
            .collect();
        assert_eq!(subjects, ["w20", "w10", "w0"]);
        // Text matches the owner, case-insensitively; pages of 4 walk back to the oldest.
        let mut seen = Vec::new();
        let mut before = 0;
        loop {
            let p = log
                .query(&EventQuery {
                    text: "alice".into(),
                    before,
                    limit: 4,
                    ..EventQuery::default()
                })
                .unwrap();
            assert!(p.events.iter().all(|(_, e)| e.owner == "Alice"));
            seen.extend(p.events.iter().map(|(s, _)| *s));
            if !p.more {
                break;
            }
            before = p.next_before;
        }
        assert_eq!(seen, (1..=29).rev().step_by(2).collect::<Vec<u64>>());
        // Only what came after a sequence number (the page's live updates).
        let newer = log
            .query(&EventQuery {
                after: 27,
                ..EventQuery::default()
            })
            .unwrap();
        let seqs: Vec<u64> = newer.events.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [30, 29, 28]);
        assert!(!newer.more);
    }
}
