//! Progress of a farm as seen from status snapshots: throughput over recent snapshots, the ETA
//! of the current round, a throughput sparkline and a one-line rendering.
//!
//! Used by `status --watch` and `expand --wait` (snapshots from the admin RPC) and meant for
//! `local` (snapshots from [`crate::service::StatusReport`]): every caller turns what it has into
//! a [`Snapshot`] and feeds it to one [`Progress`].
//!
//! The ETA covers the **current round** only: the searches the growth program waits for now
//! (queued plus in flight), at the recent mean search time, spread over the threads that are
//! busy. The number of rounds an expansion still needs is not knowable in advance (each round's
//! results decide the next), so the expansion's ETA is always "unknown" ([`ROUND_ONLY`]).

use crate::service::{State, StatusReport};
use bookfarm_proto::pb;
use std::collections::VecDeque;
use std::fmt::Write;
use std::time::Duration;

/// What the one-line rendering says about the whole expansion.
pub const ROUND_ONLY: &str = "expansion ETA unknown";

/// Snapshots kept for the throughput figures and the sparkline.
pub const HISTORY: usize = 40;

/// The figures of one status report that progress needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Expansion state (`idle|running|paused|done`).
    pub state: String,
    /// Description of the expansion.
    pub expansion: String,
    /// Positions in the book.
    pub positions: u64,
    /// Results accepted since the coordinator started.
    pub completed: u64,
    /// Searches waiting for a worker.
    pub queued: u64,
    /// Searches leased.
    pub in_flight: u64,
    /// Registered workers.
    pub workers: u64,
    /// Their search threads.
    pub threads: u64,
    /// Threads holding a search now.
    pub busy_threads: u64,
    /// Mean duration of the recently accepted searches (None: none recently).
    pub mean_search: Option<Duration>,
    /// Nodes searched per second, recent window.
    pub nodes_per_second: f64,
    /// Value of the start position (-127 when unknown).
    pub root_value: i32,
}

impl Snapshot {
    /// Searches left in the current round.
    pub fn remaining(&self) -> u64 {
        self.queued + self.in_flight
    }

    /// The ETA of the current round (see [`round_eta`]).
    pub fn round_eta(&self) -> Option<Duration> {
        round_eta(self.remaining(), self.mean_search, self.busy_threads)
    }
}

/// ETA of a round: `remaining` searches × the mean search time ÷ the busy threads. `None` when
/// it cannot be estimated (no recent search to time, or nobody searching while work remains);
/// zero when nothing remains.
pub fn round_eta(remaining: u64, mean_search: Option<Duration>, busy: u64) -> Option<Duration> {
    if remaining == 0 {
        return Some(Duration::ZERO);
    }
    let mean = mean_search?;
    if busy == 0 {
        return None;
    }
    Some(mean.mul_f64(remaining as f64 / busy as f64))
}

impl From<&StatusReport> for Snapshot {
    fn from(s: &StatusReport) -> Snapshot {
        Snapshot {
            state: s.state.as_str().to_string(),
            expansion: s.expansion.clone(),
            positions: s.positions,
            completed: s.completed,
            queued: s.queued,
            in_flight: s.in_flight,
            workers: s.workers.len() as u64,
            threads: s.threads,
            busy_threads: s.busy_threads,
            mean_search: s.mean_search,
            nodes_per_second: s.nodes_per_second,
            root_value: s.root_value,
        }
    }
}

/// The lowercase name of a wire expansion state.
pub fn state_name(state: i32) -> &'static str {
    match pb::ExpansionState::try_from(state) {
        Ok(pb::ExpansionState::Running) => State::Running.as_str(),
        Ok(pb::ExpansionState::Paused) => State::Paused.as_str(),
        Ok(pb::ExpansionState::Done) => State::Done.as_str(),
        _ => State::Idle.as_str(),
    }
}

impl From<&pb::GetStatusResponse> for Snapshot {
    fn from(s: &pb::GetStatusResponse) -> Snapshot {
        Snapshot {
            state: state_name(s.state).to_string(),
            expansion: s.expansion.clone(),
            positions: s.positions,
            completed: s.completed,
            queued: s.queued,
            in_flight: s.in_flight,
            workers: s.workers_total,
            threads: s.threads,
            busy_threads: s.busy_threads,
            mean_search: (s.mean_search_us > 0).then(|| Duration::from_micros(s.mean_search_us)),
            nodes_per_second: s.nodes_per_second,
            root_value: s.root_value,
        }
    }
}

/// Throughput tracking over the last [`HISTORY`] snapshots.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// (time of the snapshot, results completed then).
    seen: VecDeque<(Duration, u64)>,
}

impl Progress {
    /// No snapshot yet.
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Record a snapshot taken at `at` (any monotonic origin). A coordinator restart (its
    /// completed count going down) starts the series again.
    pub fn observe(&mut self, at: Duration, s: &Snapshot) {
        if self
            .seen
            .back()
            .is_some_and(|&(t, c)| c > s.completed || t > at)
        {
            self.seen.clear();
        }
        self.seen.push_back((at, s.completed));
        while self.seen.len() > HISTORY + 1 {
            self.seen.pop_front();
        }
    }

    /// Results per second between consecutive snapshots, oldest first.
    pub fn rates(&self) -> Vec<f64> {
        self.seen
            .iter()
            .zip(self.seen.iter().skip(1))
            .map(|(&(t0, c0), &(t1, c1))| {
                let dt = (t1 - t0).as_secs_f64();
                if dt > 0.0 { (c1 - c0) as f64 / dt } else { 0.0 }
            })
            .collect()
    }

    /// Results per second over every snapshot kept (None before two snapshots).
    pub fn rate(&self) -> Option<f64> {
        let (&(t0, c0), &(t1, c1)) = (self.seen.front()?, self.seen.back()?);
        let dt = (t1 - t0).as_secs_f64();
        (dt > 0.0).then(|| (c1 - c0) as f64 / dt)
    }

    /// The throughput of the last `width` intervals as block characters scaled to the largest.
    pub fn sparkline(&self, width: usize) -> String {
        let rates = self.rates();
        let tail = &rates[rates.len().saturating_sub(width)..];
        sparkline(tail)
    }

    /// One line: state, book size, throughput with its sparkline, queue, workers, the round's
    /// ETA, and that the expansion's is unknown.
    pub fn line(&self, s: &Snapshot) -> String {
        let mut out = format!("{} | {} positions", s.state, s.positions);
        let rate = self.rate().unwrap_or(0.0);
        let _ = write!(
            out,
            " | {rate:.1} results/s {} | {:.0} knodes/s",
            self.sparkline(20),
            s.nodes_per_second / 1000.0
        );
        let _ = write!(
            out,
            " | queued {} in flight {} | {} workers {} threads",
            s.queued, s.in_flight, s.workers, s.threads
        );
        if s.state == State::Running.as_str() || s.state == State::Paused.as_str() {
            match s.round_eta() {
                Some(d) => {
                    let _ = write!(out, " | round ETA {}", format_duration(d));
                }
                None => out.push_str(" | round ETA unknown"),
            }
            let _ = write!(out, ", {ROUND_ONLY}");
        }
        out
    }
}

/// Block characters from ▁ to █, one per value, scaled to the largest (all ▁ when every value is
/// zero).
pub fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    values
        .iter()
        .map(|&v| {
            if max <= 0.0 || !v.is_finite() {
                BARS[0]
            } else {
                let i = (v.max(0.0) / max * (BARS.len() - 1) as f64).round() as usize;
                BARS[i.min(BARS.len() - 1)]
            }
        })
        .collect()
}

/// A program's figures in one line: `412/1000 positions · ETA 12m 00s – 25m 30s · 0.31 CPU h,
/// 1520 positions and 3110 searches per CPU h, overhead 9.1 %` (parts not known are left out).
pub fn figures_text(p: &crate::http::api::ProgramV1) -> String {
    let mut parts = Vec::new();
    if let Some(total) = p.total {
        parts.push(format!("{}/{} {}", p.done, total, p.unit));
    }
    if let Some(e) = &p.eta {
        parts.push(format!(
            "ETA {}",
            eta_range_text(e.low_seconds, e.high_seconds)
        ));
    }
    if let Some(c) = &p.cost {
        let mut cost = format!("{:.2} CPU h, {} searches", c.cpu_hours, c.searches);
        if let (Some(pos), Some(se)) = (c.positions_per_cpu_hour, c.searches_per_cpu_hour) {
            let _ = write!(cost, ", {pos:.0} positions and {se:.0} searches per CPU h");
        }
        let _ = write!(cost, ", overhead {:.1} %", 100.0 * c.replication_overhead);
        parts.push(cost);
    }
    parts.join(" · ")
}

/// A finish estimate as text: `12m 00s – 25m 30s`.
pub fn eta_range_text(low_seconds: f64, high_seconds: f64) -> String {
    let d = |s: f64| {
        Duration::from_secs_f64(if s.is_finite() {
            s.clamp(0.0, 1e9)
        } else {
            0.0
        })
    };
    format!(
        "{} – {}",
        format_duration(d(low_seconds)),
        format_duration(d(high_seconds))
    )
}

/// A duration as `1h 02m`, `3m 05s` or `42s`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(completed: u64, queued: u64, in_flight: u64) -> Snapshot {
        Snapshot {
            state: "running".into(),
            completed,
            queued,
            in_flight,
            busy_threads: 2,
            threads: 2,
            mean_search: Some(Duration::from_millis(500)),
            ..Snapshot::default()
        }
    }

    #[test]
    fn round_eta_is_remaining_times_mean_over_busy_threads() {
        // 10 searches of 0.5 s on 2 threads: 2.5 s.
        assert_eq!(
            round_eta(10, Some(Duration::from_millis(500)), 2),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(round_eta(0, None, 0), Some(Duration::ZERO));
        assert_eq!(round_eta(5, None, 2), None, "nothing timed yet");
        assert_eq!(
            round_eta(5, Some(Duration::from_secs(1)), 0),
            None,
            "nobody searching"
        );
        assert_eq!(snap(0, 6, 2).round_eta(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn rates_follow_completed_and_restart_resets() {
        let mut p = Progress::new();
        p.observe(Duration::from_secs(0), &snap(0, 4, 2));
        assert_eq!(p.rate(), None);
        p.observe(Duration::from_secs(1), &snap(10, 4, 2));
        p.observe(Duration::from_secs(3), &snap(14, 4, 2));
        assert_eq!(p.rates(), vec![10.0, 2.0]);
        assert_eq!(p.rate(), Some(14.0 / 3.0));
        // A restarted coordinator counts from zero again.
        p.observe(Duration::from_secs(4), &snap(1, 4, 2));
        assert_eq!(p.rate(), None);
        for i in 0..100 {
            p.observe(Duration::from_secs(5 + i), &snap(2 + i, 4, 2));
        }
        assert_eq!(p.rates().len(), HISTORY);
    }

    #[test]
    fn sparkline_scales_to_the_largest() {
        assert_eq!(sparkline(&[0.0, 1.0, 2.0, 4.0]), "▁▃▅█");
        assert_eq!(sparkline(&[0.0, 0.0]), "▁▁");
        assert_eq!(sparkline(&[]), "");
    }

    #[test]
    fn line_shows_round_eta_and_unknown_expansion_eta() {
        let mut p = Progress::new();
        p.observe(Duration::from_secs(0), &snap(0, 6, 2));
        p.observe(Duration::from_secs(2), &snap(8, 6, 2));
        let l = p.line(&snap(8, 6, 2));
        assert!(l.contains("4.0 results/s █"), "{l}");
        assert!(l.contains("round ETA 2s"), "{l}");
        assert!(l.contains(ROUND_ONLY), "{l}");
        let mut idle = snap(8, 6, 2);
        idle.state = "done".into();
        assert!(!p.line(&idle).contains("ETA"));
        let mut stuck = snap(8, 6, 0);
        stuck.busy_threads = 0;
        assert!(p.line(&stuck).contains("round ETA unknown"));
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_secs(42)), "42s");
        assert_eq!(format_duration(Duration::from_secs(185)), "3m 05s");
        assert_eq!(format_duration(Duration::from_secs(3720)), "1h 02m");
    }
}
