//! Domain reports as wire messages: the status report (paged), the programs, credentials and
//! credit. The
//! web UI's JSON API and `status --json` are built from these same messages.

use crate::service::{CreditReport, ProgramView, State, StatusReport, TrustCounters, TrustHealth};
use crate::store::{CredentialRecord, CredentialState, InvitationRecord, ProgramState};
use bookfarm_proto::pb;

/// Workers listed in one status reply unless the caller asks for fewer.
pub const STATUS_PAGE: usize = 100;
/// Most workers one status reply lists.
pub const STATUS_PAGE_MAX: usize = 1000;
/// Most quarantined positions one status reply lists.
pub const STATUS_QUARANTINED_MAX: usize = 100;

fn credential_state(s: CredentialState) -> pb::CredentialState {
    match s {
        CredentialState::Active => pb::CredentialState::Active,
        CredentialState::Blocked => pb::CredentialState::Blocked,
        CredentialState::Revoked => pb::CredentialState::Revoked,
    }
}

/// The wire form of an invitation (never its code).
pub fn invitation(r: &InvitationRecord) -> pb::Invitation {
    pb::Invitation {
        name: r.name.clone(),
        owner: r.owner.clone().unwrap_or_default(),
        uses: r.uses,
        used: r.used,
        expires_unix: r.expires_unix,
        created_unix: r.created_unix,
        revoked: r.revoked,
    }
}

/// The wire form of a credential.
pub fn credential(
    r: &CredentialRecord,
    live_sessions: usize,
    credit: Option<&CreditReport>,
) -> pb::Credential {
    pb::Credential {
        credit: credit.map(credit_pb),
        name: r.name.clone(),
        owner: r.owner.clone(),
        trusted: r.trusted,
        state: credential_state(r.state) as i32,
        reason: r.reason.clone(),
        created_unix: r.created_unix,
        live_sessions: u32::try_from(live_sessions).unwrap_or(u32::MAX),
    }
}

/// A contributor's standing and credit on the wire.
pub fn credit_pb(c: &CreditReport) -> pb::Credit {
    pb::Credit {
        name: c.name.clone(),
        owner: c.owner.clone(),
        standing: c.standing.as_str().into(),
        streak: c.streak,
        results: c.results,
        nodes: c.nodes,
        cpu_seconds: c.cpu.as_secs_f64(),
        invalid: c.invalid,
        blocked: c.blocked,
        time_to_trust_ms: c
            .time_to_trust
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

fn validation_pb(v: &TrustCounters, h: &TrustHealth) -> pb::Validation {
    pb::Validation {
        held: v.held,
        validated: v.validated,
        applied_at_once: v.applied_at_once,
        spot_checks: v.spot_checks,
        invalid: v.invalid,
        reached_book: v.reached_book,
        rollbacks: v.rollbacks,
        dropped: v.dropped,
        used_nodes: v.used_nodes,
        replica_nodes: v.replica_nodes,
        relaxed_checks: v.relaxed_checks,
        core_checks: v.core_checks,
        core_caught: v.core_caught,
        provisional: v.provisional,
        core_size: v.core_size,
        core_unconfirmed: v.core_unconfirmed,
        replay_cpu_us: v.replay_cpu_us,
        search_cpu_us: h.search_cpu_us,
        replica_cpu_us: h.replica_cpu_us,
        pending_checks: h.pending_checks,
        oldest_check_seconds: h.oldest_check.as_secs_f64(),
        blocked_contributors: h.blocked_contributors,
        replays: v.replays,
        retractions: v.retractions,
    }
}

/// The wire form of a listed program.
pub fn program_info(p: &ProgramView) -> pb::ProgramInfo {
    let r = &p.record;
    pb::ProgramInfo {
        id: r.id,
        description: p.description.clone(),
        state: match r.state {
            ProgramState::Queued => pb::ProgramState::Queued,
            ProgramState::Running => pb::ProgramState::Running,
            ProgramState::Done => pb::ProgramState::Done,
            ProgramState::Cancelled => pb::ProgramState::Cancelled,
        } as i32,
        submitted_unix_ms: r.submitted_ms,
        started_unix_ms: r.started_ms.unwrap_or(0),
        finished_unix_ms: r.finished_ms.unwrap_or(0),
        report: r.report.clone(),
        progress: p.progress.clone(),
        done: p.figures.done,
        total: p.figures.total,
        unit: p.figures.unit.to_string(),
        cost: (r.state != ProgramState::Queued).then(|| {
            let c = &p.figures.cost;
            pb::ProgramCost {
                cpu_us: c.cpu_us,
                searches: c.searches,
                replica_cpu_us: c.replica_cpu_us,
                positions: c.positions,
                wall_ms: c.wall_ms,
            }
        }),
        eta: p.figures.eta.map(|e| pb::EtaRange {
            low_seconds: e.low.as_secs_f64(),
            high_seconds: e.high.as_secs_f64(),
        }),
    }
}

fn state(s: State) -> pb::ExpansionState {
    match s {
        State::Idle => pb::ExpansionState::Idle,
        State::Running => pb::ExpansionState::Running,
        State::Paused => pb::ExpansionState::Paused,
        State::Done => pb::ExpansionState::Done,
    }
}

/// The wire form of a status report, with one page of the workers (ordered by id; `limit` 0:
/// [`STATUS_PAGE`], at most [`STATUS_PAGE_MAX`]). The web UI's `/api/v1/status` is built from
/// this same message, so that `status --json` and the API say the same thing.
pub fn status_response(s: StatusReport, offset: usize, limit: usize) -> pb::GetStatusResponse {
    let mut workers = s.workers;
    workers.sort_by_key(|w| w.id);
    let limit = match limit {
        0 => STATUS_PAGE,
        n => n.min(STATUS_PAGE_MAX),
    };
    pb::GetStatusResponse {
        positions: s.positions,
        queued: s.queued,
        in_flight: s.in_flight,
        workers_total: workers.len() as u64,
        quarantined_total: s.quarantined.len() as u64,
        workers: workers
            .iter()
            .skip(offset)
            .take(limit)
            .map(|w| pb::WorkerStatus {
                worker_id: w.id.to_string(),
                name: w.name.clone(),
                threads: w.threads,
                in_flight: u32::try_from(w.in_flight).unwrap_or(u32::MAX),
                completed: w.completed,
                failed: w.failed,
                results_per_second: w.results_per_second,
                last_seen_ms: u64::try_from(w.last_seen.as_millis()).unwrap_or(u64::MAX),
                owner: w.owner.clone().unwrap_or_default(),
                engine_version: w.version.clone(),
                nodes_per_second: w.nodes_per_second,
                trusted: w.trusted,
                standing: w.standing.as_str().into(),
                credit_results: w.credit_results,
                invalid: w.invalid,
            })
            .collect(),
        results_per_second: s.results_per_second,
        state: state(s.state) as i32,
        expansion: s.expansion,
        completed: s.completed,
        quarantined: s
            .quarantined
            .iter()
            .take(STATUS_QUARANTINED_MAX)
            .map(|q| pb::QuarantinedJob {
                job_id: q.job_id.to_string(),
                position: Some((&q.board).into()),
                last_reason: q.reason.clone(),
            })
            .collect(),
        root_value: s.root_value,
        nodes_per_second: s.nodes_per_second,
        threads: s.threads,
        busy_threads: s.busy_threads,
        validation: Some(validation_pb(&s.validation, &s.health)),
        credit: s.credit.iter().map(credit_pb).collect(),
        mean_search_us: s.mean_search.map_or(0, |d| {
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
        }),
        speculative_leased: s.speculative_leased,
        prefetch_used: s.prefetch.used,
        prefetch_unused: s.prefetch.unused,
        backup_leased: s.backup_leased,
        reports: s.reports,
        programs_finished: s.programs_finished,
        program: s.program.as_ref().map(program_info),
        last_program: s.last_program.as_ref().map(program_info),
    }
}
