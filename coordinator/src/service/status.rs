//! The status report operators see (`status`, the admin RPC, the web UI and `/metrics`): the
//! expansion state, the queue, every worker's figures, quarantine, validation and credit.

use super::jobs::{Counters, Sample};
use super::trust::{self, Standing, TrustCounters, TrustRules};
use super::{Coordinator, PrefetchReport};
use crate::store::TrustRecord;
use bookfarm_engine::Board;
use bookfarm_engine::symmetry::canonical;
use std::collections::VecDeque;
use std::time::Duration;
use uuid::Uuid;

/// The expansion state shown to operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No expansion requested.
    Idle,
    /// Selecting and leasing.
    Running,
    /// Paused: no new leases.
    Paused,
    /// The expansion reached its fixed point.
    Done,
}

impl State {
    /// Lowercase name (`idle|running|paused|done`).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Running => "running",
            State::Paused => "paused",
            State::Done => "done",
        }
    }
}

/// Per-worker figures for the status report.
#[derive(Debug, Clone)]
pub struct WorkerReport {
    /// Worker id.
    pub id: Uuid,
    /// Name given at registration.
    pub name: String,
    /// Its credential's owner (None: anonymous local worker).
    pub owner: Option<String>,
    /// Its credential is trusted by the operator.
    pub trusted: bool,
    /// Engine version it registered with.
    pub version: String,
    /// Search threads.
    pub threads: u32,
    /// Jobs leased now.
    pub in_flight: usize,
    /// Results accepted.
    pub completed: u64,
    /// Failures reported.
    pub failed: u64,
    /// Accepted results per second over the last window.
    pub results_per_second: f64,
    /// Nodes of its accepted searches per second over the last window.
    pub nodes_per_second: f64,
    /// Time since the worker's last call.
    pub last_seen: Duration,
    /// Standing of its results (see [`trust`]).
    pub standing: Standing,
    /// Its contributor's results validated or used by the book.
    pub credit_results: u64,
    /// Its contributor's invalid results.
    pub invalid: u64,
}

/// A quarantined search.
#[derive(Debug, Clone)]
pub struct QuarantineReport {
    /// The last job id.
    pub job_id: Uuid,
    /// The position searched.
    pub board: Board,
    /// The last failure reason.
    pub reason: String,
}

/// The status report.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// Positions in the book.
    pub positions: u64,
    /// Jobs waiting for a worker.
    pub queued: u64,
    /// Jobs leased.
    pub in_flight: u64,
    /// Registered workers.
    pub workers: Vec<WorkerReport>,
    /// Accepted results per second (recent window).
    pub results_per_second: f64,
    /// Nodes of the accepted searches per second (recent window).
    pub nodes_per_second: f64,
    /// Mean duration of the searches accepted in the recent window (None: none).
    pub mean_search: Option<Duration>,
    /// Search threads of all registered workers.
    pub threads: u64,
    /// Threads holding a search now (per worker, the fewer of its threads and its leases).
    pub busy_threads: u64,
    /// Expansion state.
    pub state: State,
    /// Description of the expansion.
    pub expansion: String,
    /// Results accepted since start.
    pub completed: u64,
    /// Quarantined positions.
    pub quarantined: Vec<QuarantineReport>,
    /// Value of the root position (-127 when unknown).
    pub root_value: i32,
    /// How speculative prefetch served.
    pub prefetch: PrefetchReport,
    /// Leases of speculative jobs since start.
    pub speculative_leased: u64,
    /// Backup leases since start.
    pub backup_leased: u64,
    /// What the last growth programs did (at most [`STATUS_REPORTS`], oldest first).
    pub reports: Vec<String>,
    /// Growth programs finished since start.
    pub programs_finished: u64,
    /// What validation did since start.
    pub validation: TrustCounters,
    /// What trust costs and what it waits for now (see [`TrustHealth`]).
    pub health: TrustHealth,
    /// Standing and credit of every contributor seen.
    pub credit: Vec<CreditReport>,
    /// The running program (or the first queued one), with its figures.
    pub program: Option<super::ProgramView>,
    /// The last program ended (since the coordinator started: with its cost).
    pub last_program: Option<super::ProgramView>,
}

/// Trust made visible: what validation costs and what it waits for (status, `/metrics`, the
/// workers page).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrustHealth {
    /// Search time of every accepted search since start, as the workers reported it (µs).
    pub search_cpu_us: u64,
    /// ...of which replicas beyond a request's first answer: validation, spot and core checks.
    pub replica_cpu_us: u64,
    /// Check jobs (validation, spot, core, settlement) queued or leased now.
    pub pending_checks: u64,
    /// How long the oldest of them has waited (zero: none).
    pub oldest_check: Duration,
    /// Contributors blocked now.
    pub blocked_contributors: u64,
}

impl TrustHealth {
    /// Replication overhead: the share of the search time spent on replicas beyond a request's
    /// first answer (0 before any search).
    pub fn overhead(&self) -> f64 {
        if self.search_cpu_us == 0 {
            0.0
        } else {
            self.replica_cpu_us as f64 / self.search_cpu_us as f64
        }
    }
}

/// One contributor's standing and credit (a credential, the coordinator's own searches, the
/// in-process workers or an anonymous worker).
#[derive(Debug, Clone, PartialEq)]
pub struct CreditReport {
    /// Contributor name (credential name, `(local)`, `(coordinator)`, `(anonymous) NAME`).
    pub name: String,
    /// Owner (empty for the coordinator's own).
    pub owner: String,
    /// Standing now.
    pub standing: Standing,
    /// Consecutive results that agreed with the trust root.
    pub streak: u64,
    /// Results validated or used by the book.
    pub results: u64,
    /// Nodes of those results.
    pub nodes: u64,
    /// Search time of those results (reported by the worker).
    pub cpu: Duration,
    /// Invalid results.
    pub invalid: u64,
    /// Results it sent beyond those credited: replicas that checked others' work (validation,
    /// spot and core checks) and repeats of the trust root's.
    pub replicas: u64,
    /// Blocked for invalid results.
    pub blocked: bool,
    /// Time from its first result to earned trust (None: not earned).
    pub time_to_trust: Option<Duration>,
}

/// How many program reports the status carries.
pub const STATUS_REPORTS: usize = 20;

/// Window for results-per-second figures.
pub(super) const RATE_WINDOW: Duration = Duration::from_secs(10);

/// The report of a contributor's record; `catches`: invalid results per owner (see
/// [`trust::catches_by_owner`]).
pub fn credit_report(
    name: &str,
    t: &TrustRecord,
    rules: &TrustRules,
    catches: &std::collections::HashMap<String, u64>,
) -> CreditReport {
    CreditReport {
        name: name.to_string(),
        owner: t.owner.clone(),
        standing: trust::standing(t, rules, catches.get(&t.owner).copied().unwrap_or(0)),
        streak: t.streak,
        results: t.results,
        nodes: t.nodes,
        cpu: Duration::from_micros(t.cpu_us),
        invalid: t.invalid,
        replicas: t.replicas,
        blocked: t.blocked,
        time_to_trust: (t.earned_ms > 0)
            .then(|| Duration::from_millis(t.earned_ms.saturating_sub(t.first_ms))),
    }
}

impl Coordinator {
    /// The status report.
    pub fn status(&self) -> StatusReport {
        let (program, last_program) = self.current_programs();
        let (positions, state, expansion, root_value, prefetch, reports, programs_finished) = {
            let g = self.growth();
            let state = match (g.is_running(), g.paused, g.is_done()) {
                (true, true, _) => State::Paused,
                (true, false, _) => State::Running,
                (false, _, true) => State::Done,
                _ => State::Idle,
            };
            let root = canonical(&Board::start()).0;
            let root_value = g
                .book
                .find(&root)
                .map_or(-127, |id| i32::from(g.book.score(id).value));
            let skip = g.reports.len().saturating_sub(STATUS_REPORTS);
            (
                g.book.len() as u64,
                state,
                g.describe(),
                root_value,
                g.prefetch_report(),
                g.reports[skip..].to_vec(),
                g.finished as u64,
            )
        };
        let now = self.now();
        let mut g = self.jobs();
        // A build is done once its programs finished, no provisional result is left in its
        // decisive core, no check of a result the book uses is pending that a registered
        // worker can run, and no replay is pending: a caught lie still changes the book until
        // then.
        let rolling_back = self
            .0
            .rollback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        let checking =
            state == State::Done && (rolling_back || g.checks_pending(&self.0.cfg.trust));
        let state = if state == State::Done && checking {
            State::Running
        } else {
            state
        };
        g.trim_rates(now, None);
        let window = RATE_WINDOW.as_secs_f64().min(now.as_secs_f64().max(1.0));
        let rate = |v: &VecDeque<Sample>| v.len() as f64 / window;
        // A fold from +0.0: an empty f64 sum is -0.0.
        let nodes = |v: &VecDeque<Sample>| v.iter().fold(0.0, |a, l| a + l.nodes as f64) / window;
        let workers: Vec<WorkerReport> = g
            .workers
            .iter()
            .map(|(id, w)| WorkerReport {
                id: *id,
                name: w.name.clone(),
                owner: w.owner.clone(),
                trusted: w.trusted,
                version: w.version.clone(),
                threads: w.threads,
                in_flight: w.jobs.len(),
                completed: w.completed,
                failed: w.failed,
                results_per_second: rate(&w.recent),
                nodes_per_second: nodes(&w.recent),
                last_seen: now.saturating_sub(w.last_seen),
                standing: g.trust.standing_of(&w.contributor, &self.0.cfg.trust),
                credit_results: g.trust.records.get(&w.contributor).map_or(0, |t| t.results),
                invalid: g.trust.records.get(&w.contributor).map_or(0, |t| t.invalid),
            })
            .collect();
        let rules = self.0.cfg.trust;
        let mut credit: Vec<CreditReport> = g
            .trust
            .records
            .iter()
            .map(|(name, t)| credit_report(name, t, &rules, &g.trust.catches))
            .collect();
        credit.sort_by(|a, b| a.name.cmp(&b.name));
        let health = TrustHealth {
            search_cpu_us: g.cost.total.cpu_us,
            replica_cpu_us: g.cost.total.replica_cpu_us,
            pending_checks: g.check_jobs() as u64,
            oldest_check: g.oldest_check(now),
            blocked_contributors: credit.iter().filter(|c| c.blocked).count() as u64,
        };
        // Search times are the workers' word: any u64 may arrive.
        let searched = g
            .recent
            .iter()
            .fold(0u64, |a, l| a.saturating_add(l.search_us));
        let mean_search =
            (!g.recent.is_empty()).then(|| Duration::from_micros(searched / g.recent.len() as u64));
        StatusReport {
            positions,
            queued: g.queued() as u64,
            in_flight: g.in_flight as u64,
            threads: workers.iter().map(|w| u64::from(w.threads)).sum(),
            busy_threads: workers
                .iter()
                .map(|w| u64::from(w.threads).min(w.in_flight as u64))
                .sum(),
            workers,
            results_per_second: rate(&g.recent),
            nodes_per_second: nodes(&g.recent),
            mean_search,
            state,
            expansion,
            completed: g.counters.completed,
            quarantined: g.quarantined.values().cloned().collect(),
            root_value,
            prefetch,
            speculative_leased: g.counters.speculative_leased,
            backup_leased: g.counters.backup_leased,
            validation: g.trust.figures(),
            health,
            credit,
            reports,
            programs_finished,
            program,
            last_program,
        }
    }

    /// Counters since start.
    pub fn counters(&self) -> Counters {
        self.jobs().counters
    }

    /// What each growth program finished since the service opened added, one line each.
    pub fn reports(&self) -> Vec<String> {
        self.growth().reports.clone()
    }

    /// The lines of the last line audit finished since start (every line, contradicting or
    /// not).
    pub fn last_audit(&self) -> Vec<bookfarm_book::extract::AuditLine> {
        self.growth().last_audit.clone()
    }
}
