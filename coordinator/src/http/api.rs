//! The web UI's JSON API, version 1 (`/api/v1/…` on the HTTP address; see `super`).
//!
//! These types are the contract: fields are only ever added within a version. They are built
//! from the domain reports (`crate::service`); the status object is built from the admin RPC's
//! status message ([`StatusV1::from`]), the same conversion `status --json` uses, so the two
//! cannot drift apart.
//!
//! Everything here is safe to publish: no tokens, worker ids or network addresses. Names that
//! volunteers choose arrive escaped for control characters (`crate::text`) and are HTML-escaped
//! by the pages (they are only ever set as text, never as markup).

use crate::events::{CostRecord, EventKind, EventPage, Group, KINDS};
use crate::identity::CredentialInfo;
use crate::progress::Snapshot;
use crate::service::search::Analysis;
use crate::service::{
    BookStats, ContributorReport, CreditReport, HistoryView, PositionView, ProgramView, Standing,
    StatusReport, WorkerReport,
};
use crate::store::{CredentialState, Sample};
use bookfarm_book::explore::{GameAnalysis, MoveInfo, PositionInfo};
use bookfarm_book::openings::Opening;
use bookfarm_book::query::move_text;
use bookfarm_book::umigame::{Umigame, UmigameOptions};
use bookfarm_engine::{Board, Move};
use bookfarm_proto::pb;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The API version in the paths (`/api/v1`) and in every object's `api` field.
pub const VERSION: u32 = 1;

/// Root value meaning "not known yet".
pub const UNKNOWN_VALUE: i32 = -127;

/// `/api/v1/status`, and `status --json`: the overview's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusV1 {
    /// [`VERSION`].
    pub api: u32,
    /// `idle|running|paused|done`.
    pub state: String,
    /// The running growth program, or the last finished one.
    pub expansion: String,
    /// Positions in the book.
    pub positions: u64,
    /// Results accepted since the coordinator started.
    pub completed: u64,
    /// Searches of the current round waiting for a worker.
    pub queued: u64,
    /// Searches leased.
    pub in_flight: u64,
    /// Registered workers.
    pub workers_total: u64,
    /// Their search threads.
    pub threads: u64,
    /// Threads holding a search now.
    pub busy_threads: u64,
    /// Accepted results per second (recent window).
    pub results_per_second: f64,
    /// Nodes of the accepted searches per second (recent window).
    pub nodes_per_second: f64,
    /// Mean duration of the recently accepted searches (null: none recently).
    pub mean_search_seconds: Option<f64>,
    /// ETA of the current round: remaining searches × mean search time ÷ busy threads (null:
    /// unknown).
    pub round_eta_seconds: Option<f64>,
    /// The running program's ETA as a range ("12 min – 25 min"), or "unknown".
    pub expansion_eta: String,
    /// The running program (or the first queued one) with its progress, cost and ETA (null:
    /// none queued).
    pub program: Option<ProgramV1>,
    /// The last program ended since the coordinator started, with its cost.
    pub last_program: Option<ProgramV1>,
    /// Value of the start position (-127: unknown).
    pub root_value: i32,
    /// Quarantined searches.
    pub quarantined: u64,
    /// Speculative prefetch since the coordinator started.
    pub prefetch: PrefetchV1,
    /// Result validation since the coordinator started.
    pub validation: ValidationV1,
    /// Standing and credit of every contributor seen (credential names and owners: public).
    pub credit: Vec<CreditV1>,
}

/// The validation figures of [`StatusV1`] (see the coordinator's `service::trust`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationV1 {
    /// Results held until a trusted source agreed.
    pub held: u64,
    /// Held results validated and applied.
    pub validated: u64,
    /// Results applied on one trusted word.
    pub applied_at_once: u64,
    /// Spot checks drawn among them.
    pub spot_checks: u64,
    /// Replicas that disagreed with the settled result (lies caught).
    pub invalid: u64,
    /// Wrong results that had reached the book before they were caught.
    pub reached_book: u64,
    /// Rollbacks requested (by replay or by retraction).
    pub rollbacks: u64,
    /// Extra compute: nodes of replicas over nodes of the results the book used.
    pub replica_share: f64,
    /// Core checks issued (provisional results that stayed in the decisive core).
    pub core_checks: u64,
    /// Core checks that caught a wrong result.
    pub core_caught: u64,
    /// Results applied on earned words only (no trust root agreed yet).
    pub provisional: u64,
    /// Leaves of the last decisive core.
    pub core_size: u64,
    /// Provisional results in it (none once the build is done).
    pub core_unconfirmed: u64,
    /// Replication overhead: the share of the workers' search time spent on replicas beyond a
    /// request's first answer (validation, spot and core checks), since start.
    pub replication_overhead: f64,
    /// Search time of every accepted search since start, CPU seconds.
    pub search_cpu_seconds: f64,
    /// Check jobs queued or leased now.
    pub pending_checks: u64,
    /// How long the oldest of them has waited, seconds.
    pub oldest_check_seconds: f64,
    /// Contributors blocked now.
    pub blocked_contributors: u64,
    /// Coordinator CPU the replays took, seconds.
    pub replay_cpu_seconds: f64,
}

/// One contributor's row of [`StatusV1::credit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditV1 {
    /// Credential name, `(local)`, `(coordinator)` or `(anonymous) NAME`.
    pub name: String,
    /// Owner.
    pub owner: String,
    /// `untrusted|earned|trusted|root`.
    pub standing: String,
    /// Results validated or used by the book.
    pub results: u64,
    /// Their nodes.
    pub nodes: u64,
    /// Their search time (reported by the worker).
    pub cpu_seconds: f64,
    /// Invalid results.
    pub invalid: u64,
    /// Blocked for invalid results.
    pub blocked: bool,
    /// From its first result to earned trust (null: not earned).
    pub time_to_trust_seconds: Option<f64>,
}

/// The prefetch figures of [`StatusV1`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrefetchV1 {
    /// Leases of speculative searches.
    pub speculative_leased: u64,
    /// Prefetched results the growth programs used.
    pub used: u64,
    /// Prefetched results not used (yet).
    pub unused: u64,
    /// Backup leases of round searches that ran far longer than their level's mean.
    pub backup_leased: u64,
}

impl From<&pb::GetStatusResponse> for StatusV1 {
    fn from(s: &pb::GetStatusResponse) -> StatusV1 {
        let snap = Snapshot::from(s);
        StatusV1 {
            api: VERSION,
            state: snap.state.clone(),
            expansion: s.expansion.clone(),
            positions: s.positions,
            completed: s.completed,
            queued: s.queued,
            in_flight: s.in_flight,
            workers_total: s.workers_total,
            threads: s.threads,
            busy_threads: s.busy_threads,
            results_per_second: s.results_per_second,
            nodes_per_second: s.nodes_per_second,
            mean_search_seconds: snap.mean_search.map(|d| d.as_secs_f64()),
            round_eta_seconds: snap.round_eta().map(|d| d.as_secs_f64()),
            expansion_eta: s.program.as_ref().and_then(|p| p.eta.as_ref()).map_or_else(
                || "unknown".to_string(),
                |e| crate::progress::eta_range_text(e.low_seconds, e.high_seconds),
            ),
            program: s.program.as_ref().map(ProgramV1::from),
            last_program: s.last_program.as_ref().map(ProgramV1::from),
            root_value: s.root_value,
            quarantined: s.quarantined_total,
            prefetch: PrefetchV1 {
                speculative_leased: s.speculative_leased,
                used: s.prefetch_used,
                unused: s.prefetch_unused,
                backup_leased: s.backup_leased,
            },
            validation: {
                let v = s.validation.unwrap_or_default();
                ValidationV1 {
                    held: v.held,
                    validated: v.validated,
                    applied_at_once: v.applied_at_once,
                    spot_checks: v.spot_checks,
                    invalid: v.invalid,
                    reached_book: v.reached_book,
                    rollbacks: v.rollbacks,
                    replica_share: if v.used_nodes == 0 {
                        0.0
                    } else {
                        v.replica_nodes as f64 / v.used_nodes as f64
                    },
                    core_checks: v.core_checks,
                    core_caught: v.core_caught,
                    provisional: v.provisional,
                    core_size: v.core_size,
                    core_unconfirmed: v.core_unconfirmed,
                    replication_overhead: if v.search_cpu_us == 0 {
                        0.0
                    } else {
                        v.replica_cpu_us as f64 / v.search_cpu_us as f64
                    },
                    search_cpu_seconds: v.search_cpu_us as f64 / 1e6,
                    pending_checks: v.pending_checks,
                    oldest_check_seconds: v.oldest_check_seconds,
                    blocked_contributors: v.blocked_contributors,
                    replay_cpu_seconds: v.replay_cpu_us as f64 / 1e6,
                }
            },
            credit: s
                .credit
                .iter()
                .map(|c| CreditV1 {
                    name: c.name.clone(),
                    owner: c.owner.clone(),
                    standing: c.standing.clone(),
                    results: c.results,
                    nodes: c.nodes,
                    cpu_seconds: c.cpu_seconds,
                    invalid: c.invalid,
                    blocked: c.blocked,
                    time_to_trust_seconds: (c.time_to_trust_ms > 0)
                        .then(|| c.time_to_trust_ms as f64 / 1000.0),
                })
                .collect(),
        }
    }
}

/// One row of `/api/v1/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerV1 {
    /// The name the worker chose (or the credential's name for a row without a live worker).
    pub name: String,
    /// Its credential's owner (null: anonymous local worker).
    pub owner: Option<String>,
    /// Engine version it registered with (empty for a row without a live worker).
    pub version: String,
    /// Search threads.
    pub threads: u32,
    /// Searches it holds.
    pub in_flight: u32,
    /// Thousands of nodes per second of its accepted searches (recent window).
    pub knodes_per_second: f64,
    /// Accepted results per second (recent window).
    pub results_per_second: f64,
    /// Results accepted from it.
    pub results: u64,
    /// Failures it reported.
    pub failures: u64,
    /// Its credential is trusted (null: anonymous).
    pub trusted: Option<bool>,
    /// How far its results are trusted: `root`, `trusted` (the operator's flag, or an
    /// anonymous local worker), `earned` (agreed with the trust root N times in a row),
    /// `untrusted`, or `blocked` (a row without a live worker: blocked or revoked).
    pub standing: String,
    /// Credit: its contributor's results validated or used by the book (null: a row without a
    /// live worker).
    pub credit: Option<f64>,
    /// Its credential is blocked or revoked (such rows have no live worker).
    pub blocked: bool,
    /// Seconds since its last call (null: no live worker).
    pub last_seen_seconds: Option<f64>,
}

/// `/api/v1/workers`: live workers, then credentials that are blocked or revoked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkersV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The rows.
    pub workers: Vec<WorkerV1>,
}

impl WorkersV1 {
    /// The table from the live workers and the credential registry.
    pub fn new(workers: &[WorkerReport], credentials: &[CredentialInfo]) -> WorkersV1 {
        let mut rows: Vec<WorkerV1> = workers
            .iter()
            .map(|w| WorkerV1 {
                name: w.name.clone(),
                owner: w.owner.clone(),
                version: w.version.clone(),
                threads: w.threads,
                in_flight: u32::try_from(w.in_flight).unwrap_or(u32::MAX),
                knodes_per_second: w.nodes_per_second / 1000.0,
                results_per_second: w.results_per_second,
                results: w.completed,
                failures: w.failed,
                trusted: w.owner.as_ref().map(|_| w.trusted),
                standing: w.standing.as_str().to_string(),
                credit: Some(w.credit_results as f64),
                blocked: false,
                last_seen_seconds: Some(w.last_seen.as_secs_f64()),
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows.extend(
            credentials
                .iter()
                .filter(|c| c.record.state != CredentialState::Active)
                .map(|c| WorkerV1 {
                    name: c.record.name.clone(),
                    owner: Some(c.record.owner.clone()),
                    version: String::new(),
                    threads: 0,
                    in_flight: 0,
                    knodes_per_second: 0.0,
                    results_per_second: 0.0,
                    results: 0,
                    failures: 0,
                    trusted: Some(c.record.trusted),
                    standing: "blocked".into(),
                    credit: None,
                    blocked: true,
                    last_seen_seconds: None,
                }),
        );
        WorkersV1 {
            api: VERSION,
            workers: rows,
        }
    }
}

/// `/api/v1/trust`: what the trust model knows, farm-wide and per contributor (the workers
/// page's trust cards).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The farm-wide figures (the same as [`StatusV1::validation`]).
    pub health: ValidationV1,
    /// One card per contributor: those with a trust record, then credentials without one.
    pub cards: Vec<TrustCardV1>,
}

/// One contributor's trust card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustCardV1 {
    /// Credential name, `(local)`, `(coordinator)` or `(anonymous) NAME`.
    pub name: String,
    /// Owner (empty for the coordinator's own).
    pub owner: String,
    /// `untrusted|earned|trusted|root`, or `blocked`.
    pub standing: String,
    /// The operator trusts its credential (null: not a credential).
    pub trusted: Option<bool>,
    /// Consecutive results that agreed with the trust root.
    pub streak: u64,
    /// Credit: its results validated or used by the book.
    pub credit: u64,
    /// Its results that checked others' work (replicas, spot and core checks) or repeated
    /// the trust root's.
    pub checks: u64,
    /// Its results caught disagreeing with the settled result (lies, or a broken machine).
    pub caught: u64,
    /// Its calls are refused: blocked for invalid results, or its credential blocked or
    /// revoked.
    pub blocked: bool,
    /// Why (empty: not blocked).
    pub reason: String,
    /// Sessions open with its credential now (null: not a credential).
    pub sessions: Option<u32>,
    /// From its first result to earned trust, seconds (null: not earned).
    pub time_to_trust_seconds: Option<f64>,
}

impl TrustV1 {
    /// The cards from the status's validation figures, the contributors' trust records and
    /// the credential registry.
    pub fn new(
        health: ValidationV1,
        credit: &[CreditReport],
        credentials: &[CredentialInfo],
    ) -> TrustV1 {
        let by_name: BTreeMap<&str, &CredentialInfo> = credentials
            .iter()
            .map(|c| (c.record.name.as_str(), c))
            .collect();
        let card = |name: &str, owner: &str, c: Option<&CreditReport>| {
            let cred = by_name.get(name).copied();
            let cred_blocked = cred.is_some_and(|c| c.record.state != CredentialState::Active);
            let trust_blocked = c.is_some_and(|c| c.blocked);
            let reason = match (cred, c) {
                (Some(k), _) if cred_blocked => {
                    let state = match k.record.state {
                        CredentialState::Revoked => "revoked",
                        _ => "blocked",
                    };
                    let why = k.record.reason.as_str();
                    // A reason that names the state already ("blocked by the coordinator: …")
                    // reads on its own.
                    if why.is_empty() {
                        state.to_string()
                    } else if why.starts_with(state) {
                        why.to_string()
                    } else {
                        format!("{state}: {why}")
                    }
                }
                (_, Some(c)) if trust_blocked => {
                    format!("blocked: {} invalid results", c.invalid)
                }
                _ => String::new(),
            };
            TrustCardV1 {
                name: name.to_string(),
                owner: owner.to_string(),
                standing: if cred_blocked || trust_blocked {
                    "blocked".into()
                } else {
                    c.map_or(Standing::Untrusted, |c| c.standing)
                        .as_str()
                        .to_string()
                },
                trusted: cred.map(|k| k.record.trusted),
                streak: c.map_or(0, |c| c.streak),
                credit: c.map_or(0, |c| c.results),
                checks: c.map_or(0, |c| c.replicas),
                caught: c.map_or(0, |c| c.invalid),
                blocked: cred_blocked || trust_blocked,
                reason,
                sessions: cred.map(|k| u32::try_from(k.live_sessions).unwrap_or(u32::MAX)),
                time_to_trust_seconds: c.and_then(|c| c.time_to_trust).map(|d| d.as_secs_f64()),
            }
        };
        let mut cards: Vec<TrustCardV1> = credit
            .iter()
            .map(|c| card(&c.name, &c.owner, Some(c)))
            .collect();
        let seen: BTreeSet<&str> = credit.iter().map(|c| c.name.as_str()).collect();
        cards.extend(
            credentials
                .iter()
                .filter(|k| !seen.contains(k.record.name.as_str()))
                .map(|k| card(&k.record.name, &k.record.owner, None)),
        );
        TrustV1 {
            api: VERSION,
            health,
            cards,
        }
    }
}

/// One row of `/api/v1/contributors`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContributorV1 {
    /// Owner, or an anonymous worker's name.
    pub name: String,
    /// An anonymous local worker (no credential).
    pub anonymous: bool,
    /// Results accepted today (UTC).
    pub results_today: u64,
    /// ...in the last 30 days.
    pub results_month: u64,
    /// ...since the coordinator's history began.
    pub results_all_time: u64,
    /// Machines connected now: the owner's registered workers (an anonymous row: its worker).
    pub machines: u32,
    /// Worker credentials of this owner.
    pub credentials: u32,
    /// ...of which trusted.
    pub trusted: u32,
    /// ...of which blocked or revoked.
    pub blocked: u32,
    /// Credit: the owner's results validated or used by the book (its credentials' trust
    /// records; null for an anonymous row whose worker has no record).
    pub credit: Option<f64>,
    /// Invalid results of the owner's credentials (lies caught, or broken machines).
    pub invalid: u64,
}

/// `/api/v1/contributors`: the leaderboard, most results first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContributorsV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The rows.
    pub contributors: Vec<ContributorV1>,
}

/// What the leaderboard joins per owner: credentials (all, trusted, blocked), machines
/// connected, and the credit and invalid results of the owner's trust records.
#[derive(Debug, Clone, Copy, Default)]
struct OwnerFigures {
    credentials: u32,
    trusted: u32,
    blocked: u32,
    machines: u32,
    credit: Option<u64>,
    invalid: u64,
}

impl ContributorsV1 {
    /// The leaderboard from the tallies, the credential registry, the live workers and the
    /// contributors' trust records (owners with credentials but no result yet are listed too).
    pub fn new(
        tallies: &[ContributorReport],
        credentials: &[CredentialInfo],
        workers: &[WorkerReport],
        credit: &[CreditReport],
    ) -> ContributorsV1 {
        // Keyed like the tallies: (anonymous, owner or an anonymous worker's name).
        let mut by: BTreeMap<(bool, &str), OwnerFigures> = BTreeMap::new();
        for c in credentials {
            let m = by.entry((false, c.record.owner.as_str())).or_default();
            m.credentials += 1;
            m.trusted += u32::from(c.record.trusted);
            m.blocked += u32::from(c.record.state != CredentialState::Active);
        }
        for w in workers {
            let key = match &w.owner {
                Some(o) => (false, o.as_str()),
                None => (true, w.name.as_str()),
            };
            by.entry(key).or_default().machines += 1;
        }
        let anonymous = format!("{} ", crate::service::trust::ANONYMOUS);
        for c in credit {
            // Credential contributors count for their owner; an anonymous worker's record is
            // `(anonymous) NAME`; the coordinator's own searches and in-process workers are no
            // one's.
            let key = match c.name.strip_prefix(anonymous.as_str()) {
                Some(name) => (true, name),
                None if c.standing == Standing::Root => continue,
                None => (false, c.owner.as_str()),
            };
            let m = by.entry(key).or_default();
            *m.credit.get_or_insert(0) += c.results;
            m.invalid += c.invalid;
        }
        let row = |name: &str, anonymous: bool, t: Option<&ContributorReport>, m: OwnerFigures| {
            ContributorV1 {
                name: name.to_string(),
                anonymous,
                results_today: t.map_or(0, |t| t.today),
                results_month: t.map_or(0, |t| t.month),
                results_all_time: t.map_or(0, |t| t.total),
                machines: m.machines,
                credentials: m.credentials,
                trusted: m.trusted,
                blocked: m.blocked,
                credit: m.credit.map(|c| c as f64),
                invalid: m.invalid,
            }
        };
        let mut rows: Vec<ContributorV1> = tallies
            .iter()
            .map(|t| {
                let m = by
                    .remove(&(t.anonymous, t.name.as_str()))
                    .unwrap_or_default();
                row(&t.name, t.anonymous, Some(t), m)
            })
            .collect();
        // Owners with credentials (or a connected worker) and no accepted result yet; an
        // anonymous name alone (a record without a live worker) is not listed.
        for ((anonymous, name), m) in by {
            if m.credentials > 0 || m.machines > 0 {
                rows.push(row(name, anonymous, None, m));
            }
        }
        ContributorsV1 {
            api: VERSION,
            contributors: rows,
        }
    }
}

/// A time series in columns (the charting library's layout): seconds since the epoch and one
/// value per point in each column.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesV1 {
    /// Time, seconds since the Unix epoch.
    pub t: Vec<f64>,
    /// Positions in the book.
    pub positions: Vec<u64>,
    /// Accepted results per second.
    pub results_per_second: Vec<f64>,
    /// Thousands of nodes per second.
    pub knodes_per_second: Vec<f64>,
    /// Value of the start position (null: unknown).
    pub root_value: Vec<Option<i32>>,
    /// Registered workers.
    pub workers: Vec<u32>,
}

impl From<&[Sample]> for SeriesV1 {
    fn from(v: &[Sample]) -> SeriesV1 {
        SeriesV1 {
            t: v.iter().map(|s| s.t_ms as f64 / 1000.0).collect(),
            positions: v.iter().map(|s| s.positions).collect(),
            results_per_second: v.iter().map(|s| s.results_per_second).collect(),
            knodes_per_second: v.iter().map(|s| s.nodes_per_second / 1000.0).collect(),
            root_value: v
                .iter()
                .map(|s| (s.root_value != UNKNOWN_VALUE).then_some(s.root_value))
                .collect(),
            workers: v.iter().map(|s| s.workers).collect(),
        }
    }
}

/// `/api/v1/history?since=MS&tier=T`: points after `since` (milliseconds since the epoch) per
/// tier (only tier `T`, `fine|minutes|hours`, when given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryV1 {
    /// [`VERSION`].
    pub api: u32,
    /// One point per second, last 15 minutes (not stored).
    pub fine: SeriesV1,
    /// One point per minute, last two days (stored: survives restarts).
    pub minutes: SeriesV1,
    /// One point per hour, last 90 days (stored).
    pub hours: SeriesV1,
}

impl From<&HistoryView> for HistoryV1 {
    fn from(h: &HistoryView) -> HistoryV1 {
        HistoryV1 {
            api: VERSION,
            fine: h.fine.as_slice().into(),
            minutes: h.minutes.as_slice().into(),
            hours: h.hours.as_slice().into(),
        }
    }
}

/// One book move of the explorer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookMoveV1 {
    /// `d3`, or `pass`.
    #[serde(rename = "move")]
    pub mv: String,
    /// Its score for the side to move.
    pub score: i32,
    /// The leaf (the best move outside the book), not a link.
    pub leaf: bool,
}

/// `/api/v1/book/position?moves=f5d6c3`: the position after a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The transcript, normalised (lowercase, passes written as `pa`).
    pub moves: String,
    /// Plies played (passes included).
    pub ply: u32,
    /// 64 cells from A1 to H8: `X` black, `O` white, `-` empty.
    pub board: String,
    /// Black is to move.
    pub black_to_move: bool,
    /// The game is over.
    pub game_over: bool,
    /// Legal moves (`pass` when the side to move must pass).
    pub legal: Vec<String>,
    /// The position is in the book.
    pub in_book: bool,
    /// Its level.
    pub level: Option<u8>,
    /// Best score and bounds (`book show`'s "Best score: V [L, U]").
    pub value: Option<i32>,
    /// Lower bound.
    pub lower: Option<i32>,
    /// Upper bound.
    pub upper: Option<i32>,
    /// Book moves, best first (`book show`'s order and scores).
    pub book_moves: Vec<BookMoveV1>,
    /// Full games below won, drawn and lost by the side to move, and lines below.
    pub wins: u32,
    /// Draws.
    pub draws: u32,
    /// Losses.
    pub losses: u32,
    /// Lines.
    pub lines: u32,
    /// `queued`, `leased`, or null: a search of this position under way.
    pub searching: Option<String>,
    /// The deepest named opening of the line (null: none).
    pub opening: Option<OpeningV1>,
    /// Every legal move (the pass when forced) with what the book knows about it, in
    /// `book_moves`' order, then the moves outside the book.
    pub move_info: Vec<MoveInfoV1>,
    /// This position's accuracy grade (null: not in the book, or `grade_pending`).
    pub accuracy: Option<String>,
    /// This position's grade was not found within one request's work yet (ask again).
    pub grade_pending: bool,
    /// This position's umigame numbers (null: not in the book).
    pub umigame: Option<UmigameV1>,
    /// The options of every umigame number here.
    pub umigame_options: UmigameOptionsV1,
    /// The principal variation from here: the book's best moves (`pass` where forced), ending
    /// after the leaf or where no move has a value.
    pub pv: Vec<String>,
    /// A growth program is running: the book changes while you look.
    pub growing: bool,
    /// Its full-width searches (every move: `expand analyze`, `expand search`) whose results
    /// are confirmed, lowest level first; also when the position is not in the book.
    #[serde(default)]
    pub analysis: Vec<AnalysisV1>,
}

/// One full-width search of a position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysisV1 {
    /// The level searched.
    pub level: u8,
    /// The best move (`pass` when the side to move must pass, `none` in a finished game).
    #[serde(rename = "move")]
    pub mv: String,
    /// Its score for the side to move.
    pub score: i32,
    /// Depth searched.
    pub depth: u32,
    /// Probcut confidence in percent (100: none).
    pub selectivity: u8,
    /// The score is the exact game value.
    pub exact: bool,
    /// Nodes searched.
    pub nodes: u64,
}

impl From<&Analysis> for AnalysisV1 {
    fn from(a: &Analysis) -> AnalysisV1 {
        AnalysisV1 {
            level: a.level,
            mv: match a.mv {
                Move::None => "none".into(),
                m => mv_name(m),
            },
            score: a.score,
            depth: a.depth,
            selectivity: bookfarm_engine::level::selectivity_percent(a.selectivity),
            exact: a.exact,
            nodes: a.nodes,
        }
    }
}

/// The deepest named opening of a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpeningV1 {
    /// Its name (from the project's list or the operator's file).
    pub name: String,
    /// The ply of the line where the named position is reached.
    pub ply: u32,
}

/// Umigame numbers (Egaroucid's "minimum memorization numbers"): lines Black and White must
/// memorise; a number that is not exact is a lower bound ("≥ N": the work per request ran out;
/// asking again continues).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UmigameV1 {
    /// Black's number.
    pub black: u64,
    /// It is exact.
    pub black_exact: bool,
    /// White's number.
    pub white: u64,
    /// It is exact.
    pub white_exact: bool,
}

impl From<Umigame> for UmigameV1 {
    fn from(u: Umigame) -> UmigameV1 {
        UmigameV1 {
            black: u.black.value,
            black_exact: u.black.exact,
            white: u.white.value,
            white_exact: u.white.exact,
        }
    }
}

/// The umigame options (query parameters `umigame_min`, `umigame_max`, `umigame_loss`,
/// `umigame_depth`; Egaroucid's score range, loss budget and depth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UmigameOptionsV1 {
    /// Lowest move value counted, from Black.
    pub min: i32,
    /// Highest move value counted, from Black.
    pub max: i32,
    /// Loss budget along a line, both colours together (null: unlimited).
    pub loss: Option<u32>,
    /// Positions at this ply or deeper count as one line.
    pub depth: u32,
}

impl From<UmigameOptions> for UmigameOptionsV1 {
    fn from(o: UmigameOptions) -> UmigameOptionsV1 {
        UmigameOptionsV1 {
            min: i32::from(o.score_min),
            max: i32::from(o.score_max),
            loss: o.loss.map(u32::from),
            depth: u32::from(o.depth),
        }
    }
}

/// One legal move of the explorer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveInfoV1 {
    /// `d3`, or `pass`.
    #[serde(rename = "move")]
    pub mv: String,
    /// Its value for the side to move (null: not in the book).
    pub value: Option<i32>,
    /// `link`, `leaf` (searched, the child is not in the book), `transposition` (the child
    /// is in the book without a link from here) or `out` (not in the book).
    pub kind: String,
    /// The level of the child (for the leaf: of the search behind it).
    pub level: Option<u8>,
    /// Lines below the child.
    pub lines: Option<u32>,
    /// The child's accuracy grade, `A`–`F` or `AA`–`AF` (null: not in the book, or
    /// `grade_pending`).
    pub accuracy: Option<String>,
    /// The child's grade was not found within one request's work yet.
    pub grade_pending: bool,
    /// The umigame numbers after this move (null: the child is not in the book).
    pub umigame: Option<UmigameV1>,
}

impl MoveInfoV1 {
    fn new(m: &MoveInfo) -> MoveInfoV1 {
        MoveInfoV1 {
            mv: mv_name(m.value.mv),
            value: m.value.value,
            kind: m.value.kind.as_str().to_string(),
            level: m.level,
            lines: m.lines,
            accuracy: m.accuracy.map(|a| a.to_string()),
            grade_pending: m.grade_pending,
            umigame: m.umigame.map(UmigameV1::from),
        }
    }
}

/// What the explorer adds to a position (see [`PositionV1`]).
#[derive(Debug, Clone)]
pub struct Explored<'a> {
    /// The explorer's view.
    pub info: &'a PositionInfo,
    /// The deepest named opening of the line.
    pub opening: Option<(usize, &'a Opening)>,
    /// The umigame options.
    pub options: UmigameOptions,
    /// A growth program is running.
    pub growing: bool,
}

fn mv_name(mv: Move) -> String {
    match mv {
        Move::Pass => "pass".into(),
        m => move_text(m, false),
    }
}

impl PositionV1 {
    /// The explorer's view of `board`, reached by `moves` from the start (every pass written,
    /// as the engine's transcript reader gives them), `black` to move.
    pub fn new(
        board: &Board,
        black: bool,
        moves: &[Move],
        view: &PositionView,
        explored: &Explored<'_>,
    ) -> PositionV1 {
        let ply = u32::try_from(moves.len()).unwrap_or(u32::MAX);
        // Passes stay written, so that the transcript leads to this very position.
        let moves = transcript(moves.iter().copied());
        let (bk, wh) = if black {
            (board.player, board.opponent)
        } else {
            (board.opponent, board.player)
        };
        let cells: String = (0..64)
            .map(|x| {
                let bit = 1u64 << x;
                if bk & bit != 0 {
                    'X'
                } else if wh & bit != 0 {
                    'O'
                } else {
                    '-'
                }
            })
            .collect();
        let mut legal: Vec<String> = board
            .legal_squares()
            .map(|s| mv_name(Move::Square(s)))
            .collect();
        if board.must_pass() {
            legal.push(mv_name(Move::Pass));
        }
        let e = view.entry.as_ref();
        PositionV1 {
            api: VERSION,
            moves,
            ply,
            board: cells,
            black_to_move: black,
            game_over: board.is_game_over(),
            legal,
            in_book: e.is_some(),
            level: e.map(|e| e.level),
            value: e.map(|e| i32::from(e.value)),
            lower: e.map(|e| i32::from(e.lower)),
            upper: e.map(|e| i32::from(e.upper)),
            book_moves: e.map_or_else(Vec::new, |e| {
                e.moves
                    .iter()
                    .map(|m| BookMoveV1 {
                        mv: mv_name(m.mv),
                        score: i32::from(m.score),
                        leaf: m.leaf,
                    })
                    .collect()
            }),
            wins: e.map_or(0, |e| e.counts.n_wins),
            draws: e.map_or(0, |e| e.counts.n_draws),
            losses: e.map_or(0, |e| e.counts.n_losses),
            lines: e.map_or(0, |e| e.counts.n_lines),
            searching: view.searching.map(|s| s.as_str().to_string()),
            opening: explored.opening.map(|(ply, o)| OpeningV1 {
                name: o.name.clone(),
                ply: u32::try_from(ply).unwrap_or(u32::MAX),
            }),
            move_info: explored.info.moves.iter().map(MoveInfoV1::new).collect(),
            accuracy: explored.info.accuracy.map(|a| a.to_string()),
            grade_pending: e.is_some() && explored.info.accuracy.is_none(),
            umigame: explored.info.umigame.map(UmigameV1::from),
            umigame_options: explored.options.into(),
            pv: explored.info.pv.iter().map(|&m| mv_name(m)).collect(),
            growing: explored.growing,
            analysis: view.analysis.iter().map(AnalysisV1::from).collect(),
        }
    }
}

/// One move of a pasted game.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GamePlyV1 {
    /// `d3`, or `pass`.
    #[serde(rename = "move")]
    pub mv: String,
    /// Black played it.
    pub black: bool,
    /// The best value among the legal moves, from the mover (null: none has a value).
    pub best: Option<i32>,
    /// The move's value, from the mover (null: not in the book).
    pub value: Option<i32>,
    /// `link`, `leaf`, `transposition` or `out` (see [`MoveInfoV1::kind`]).
    pub kind: String,
    /// What the move lost against the book's best (null: unknown).
    pub loss: Option<i32>,
    /// The score after the move, from Black (null: not in the book; after the leaf, the
    /// leaf's score).
    pub score: Option<i32>,
    /// Black's losses so far (known losses only).
    pub black_loss: i32,
    /// White's losses so far.
    pub white_loss: i32,
}

/// `/api/v1/book/game?moves=f5d6c3…`: a pasted game as the book sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The transcript, normalised (passes written as `pa`).
    pub moves: String,
    /// The start position's score, from Black (null: not in the book).
    pub start_score: Option<i32>,
    /// The moves.
    pub plies: Vec<GamePlyV1>,
    /// Index in `plies` of the move after which the game is not in the book (null: it never
    /// left).
    pub left_book: Option<usize>,
}

impl GameV1 {
    /// The API's form of a game's analysis.
    pub fn new(a: &GameAnalysis) -> GameV1 {
        let mut losses = [0i32; 2];
        let plies = a
            .plies
            .iter()
            .map(|p| {
                losses[usize::from(!p.black)] += p.loss.unwrap_or(0);
                GamePlyV1 {
                    mv: mv_name(p.mv),
                    black: p.black,
                    best: p.best,
                    value: p.value,
                    kind: p.kind.as_str().to_string(),
                    loss: p.loss,
                    score: p.after,
                    black_loss: losses[0],
                    white_loss: losses[1],
                }
            })
            .collect();
        GameV1 {
            api: VERSION,
            moves: transcript(a.plies.iter().map(|p| p.mv)),
            start_score: a.start,
            plies,
            left_book: a.left_book,
        }
    }
}

/// A move list as the API writes transcripts: lowercase squares, passes as `pa`.
pub fn transcript(moves: impl IntoIterator<Item = Move>) -> String {
    moves
        .into_iter()
        .map(|m| match m {
            Move::Pass => "pa".to_string(),
            m => m.to_edax_upper().to_ascii_lowercase(),
        })
        .collect()
}

/// `/api/v1/book/stats`: positions per level × ply and the best-score distribution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookStatsV1 {
    /// [`VERSION`].
    pub api: u32,
    /// Positions.
    pub positions: u64,
    /// Links.
    pub links: u64,
    /// Positions with a leaf move.
    pub leaves: u64,
    /// `[level, ply, positions]` triples, ascending.
    pub by_level_ply: Vec<[u64; 3]>,
    /// `[best score, positions]` pairs, ascending.
    pub best_scores: Vec<[i64; 2]>,
}

impl From<&BookStats> for BookStatsV1 {
    fn from(s: &BookStats) -> BookStatsV1 {
        BookStatsV1 {
            api: VERSION,
            positions: s.positions,
            links: s.links,
            leaves: s.leaves,
            by_level_ply: s
                .by_level_ply
                .iter()
                .map(|&(l, p, n)| [u64::from(l), u64::from(p), n])
                .collect(),
            best_scores: s
                .best_scores
                .iter()
                .map(|&(v, n)| [i64::from(v), i64::try_from(n).unwrap_or(i64::MAX)])
                .collect(),
        }
    }
}

/// What a program cost (`/api/v1/events`, the status's programs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostV1 {
    /// Search time of every accepted search charged to it (replicas, checks and speculative
    /// searches included), in CPU hours as the workers reported it.
    pub cpu_hours: f64,
    /// Accepted searches.
    pub searches: u64,
    /// Positions the book gained.
    pub positions: u64,
    /// Searches per CPU hour (null: no CPU time yet).
    pub searches_per_cpu_hour: Option<f64>,
    /// Positions per CPU hour (null: no CPU time yet).
    pub positions_per_cpu_hour: Option<f64>,
    /// Replication overhead: the share of that CPU spent on replicas beyond a request's first
    /// answer (validation, spot and core checks).
    pub replication_overhead: f64,
    /// Wall time from start to end, seconds (0: not known, e.g. a program resumed after a
    /// restart).
    pub wall_seconds: f64,
}

impl From<&CostRecord> for CostV1 {
    fn from(c: &CostRecord) -> CostV1 {
        let hours = c.cpu_us as f64 / 3.6e9;
        let per_hour = |n: u64| (c.cpu_us > 0).then(|| n as f64 / hours);
        CostV1 {
            cpu_hours: hours,
            searches: c.searches,
            positions: c.positions,
            searches_per_cpu_hour: per_hour(c.searches),
            positions_per_cpu_hour: per_hour(c.positions),
            replication_overhead: if c.cpu_us == 0 {
                0.0
            } else {
                c.replica_cpu_us as f64 / c.cpu_us as f64
            },
            wall_seconds: c.wall_ms as f64 / 1000.0,
        }
    }
}

/// A program of the queue, in `/api/v1/programs` and `expand list --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramV1 {
    /// Its number.
    pub id: u64,
    /// What it does (`deviate 2 4 from f5d6 level 8`).
    pub program: String,
    /// `queued|running|done|cancelled`.
    pub state: String,
    /// When it was queued, started and ended (milliseconds since the Unix epoch; null: not
    /// yet, or unknown).
    pub submitted_ms: Option<u64>,
    /// See `submitted_ms`.
    pub started_ms: Option<u64>,
    /// See `submitted_ms`.
    pub finished_ms: Option<u64>,
    /// Where the running program stands (empty for the others).
    pub progress: String,
    /// What it did, once ended.
    pub report: String,
    /// Units of work done (see `unit`).
    pub done: u64,
    /// Units of work known in all (null: not known).
    pub total: Option<u64>,
    /// What `done` and `total` count (`positions` of the current pass, `games`, `searches`;
    /// empty: nothing counted now).
    pub unit: String,
    /// What it cost: the running program so far, an ended one in all (null: queued, or ended
    /// before the coordinator started; its `program_done` event keeps it).
    pub cost: Option<CostV1>,
    /// When the running program should end (null: not known).
    pub eta: Option<EtaV1>,
}

/// A finish estimate: the program should end between `low_seconds` and `high_seconds` from
/// now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EtaV1 {
    /// The earliest expected end, seconds from now.
    pub low_seconds: f64,
    /// The latest expected end, seconds from now.
    pub high_seconds: f64,
}

impl From<&pb::ProgramInfo> for ProgramV1 {
    fn from(p: &pb::ProgramInfo) -> ProgramV1 {
        let state = match pb::ProgramState::try_from(p.state) {
            Ok(pb::ProgramState::Queued) => "queued",
            Ok(pb::ProgramState::Running) => "running",
            Ok(pb::ProgramState::Done) => "done",
            Ok(pb::ProgramState::Cancelled) => "cancelled",
            _ => "unknown",
        };
        let ms = |v: u64| (v > 0).then_some(v);
        ProgramV1 {
            id: p.id,
            program: p.description.clone(),
            state: state.into(),
            submitted_ms: ms(p.submitted_unix_ms),
            started_ms: ms(p.started_unix_ms),
            finished_ms: ms(p.finished_unix_ms),
            progress: p.progress.clone(),
            report: p.report.clone(),
            done: p.done,
            total: (p.total > 0).then_some(p.total),
            unit: p.unit.clone(),
            cost: p.cost.as_ref().map(|c| {
                CostV1::from(&CostRecord {
                    cpu_us: c.cpu_us,
                    searches: c.searches,
                    replica_cpu_us: c.replica_cpu_us,
                    positions: c.positions,
                    wall_ms: c.wall_ms,
                })
            }),
            eta: p.eta.as_ref().map(|e| EtaV1 {
                low_seconds: e.low_seconds,
                high_seconds: e.high_seconds,
            }),
        }
    }
}

/// One row of `/api/v1/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventV1 {
    /// Sequence number (increasing; `after`/`before` page by it).
    pub seq: u64,
    /// When, seconds since the Unix epoch.
    pub t: f64,
    /// Kind (`lie_caught`, `contributor_blocked`, `replay`, `worker_joined`, …).
    pub kind: String,
    /// Its group (`programs`, `credentials`, `trust`, `workers`, `store`).
    pub group: String,
    /// What it is about: a credential, contributor or worker name, a program, a position.
    pub subject: String,
    /// The subject's owner (empty: none).
    pub owner: String,
    /// Details.
    pub detail: String,
    /// A finished program's cost.
    pub cost: Option<CostV1>,
}

/// `/api/v1/events?kind=K,G&q=TEXT&after=SEQ&before=SEQ&limit=N`: the event log, newest first
/// (kinds or groups comma-separated; `q` matched case-insensitively on subject, owner and
/// detail; `after`/`before` exclusive; at most 500).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The events, newest first.
    pub events: Vec<EventV1>,
    /// Older events may match: ask again with `before` = [`EventsV1::next_before`].
    pub more: bool,
    /// Where the next older page starts.
    pub next_before: u64,
}

impl From<&EventPage> for EventsV1 {
    fn from(p: &EventPage) -> EventsV1 {
        EventsV1 {
            api: VERSION,
            events: p
                .events
                .iter()
                .map(|(seq, e)| EventV1 {
                    seq: *seq,
                    t: e.t_ms as f64 / 1000.0,
                    kind: e.kind.name().to_string(),
                    group: e.kind.group().name().to_string(),
                    subject: e.subject.clone(),
                    owner: e.owner.clone(),
                    detail: e.detail.clone(),
                    cost: e.cost.as_ref().map(CostV1::from),
                })
                .collect(),
            more: p.more,
            next_before: p.next_before,
        }
    }
}

/// `/api/v1/programs`: the program queue in run order (the running program first), then the
/// last finished and cancelled programs, most recent first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramsV1 {
    /// [`VERSION`].
    pub api: u32,
    /// The programs.
    pub programs: Vec<ProgramV1>,
}

impl ProgramsV1 {
    /// The list of the domain's programs, through the admin RPC's message (what `expand list
    /// --json` prints for the same coordinator).
    pub fn new(programs: &[ProgramView]) -> ProgramsV1 {
        ProgramsV1 {
            api: VERSION,
            programs: programs
                .iter()
                .map(|p| ProgramV1::from(&crate::rpc::program_info(p)))
                .collect(),
        }
    }
}

/// The kinds a `kind` parameter names: kind names and group names, comma-separated (empty:
/// every kind); an unknown name is an error naming it.
pub fn kinds_of(param: &str) -> Result<BTreeSet<EventKind>, String> {
    let mut out = BTreeSet::new();
    for name in param.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if let Some(k) = EventKind::of_name(name) {
            out.insert(k);
        } else if let Some(g) = Group::ALL.into_iter().find(|g| g.name() == name) {
            out.extend(KINDS.into_iter().filter(|k| k.group() == g));
        } else {
            return Err(format!(
                "unknown event kind or group {:?}",
                crate::text::clean(name, 40)
            ));
        }
    }
    Ok(out)
}

/// The status object of a domain report, through the admin RPC's message (what `status
/// --json` prints for the same coordinator; the message's worker page is left empty).
pub fn status_of(report: StatusReport) -> StatusV1 {
    StatusV1::from(&crate::rpc::status_response(report, usize::MAX, 0))
}

#[cfg(test)]
mod tests;
