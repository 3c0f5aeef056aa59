//! Calibrating the program ETA (`crate::service::eta`): simulated builds of one program each,
//! the stated range read as an operator would (after every event), and how often it held the
//! actual end at 25, 50 and 75 % of the program's run.

use super::{SimConfig, SimReport, simulate_observed};
use crate::error::Result;
use std::path::Path;
use std::time::Duration;

/// One reading of the estimate during a build.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Virtual time, seconds.
    pub t: f64,
    /// The estimate then (None: "unknown").
    pub estimate: Option<Stated>,
}

/// A stated estimate of the time left, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stated {
    /// The point estimate.
    pub point: f64,
    /// The stated range's lower bound.
    pub low: f64,
    /// Its upper bound.
    pub high: f64,
}

/// One build's readings of its program (the one after `new`).
#[derive(Debug, Clone)]
pub struct EtaRun {
    /// When the program was first seen running, seconds.
    pub start: f64,
    /// When it ended (the build's end), seconds.
    pub end: f64,
    /// The readings, in time order (one per distinct time).
    pub readings: Vec<Reading>,
    /// The build's report.
    pub report: SimReport,
}

impl EtaRun {
    /// The last reading at or before `fraction` of the program's run (None: none yet).
    pub fn at(&self, fraction: f64) -> Option<Reading> {
        let t = self.start + fraction * (self.end - self.start);
        self.readings.iter().rev().find(|r| r.t <= t).copied()
    }

    /// Whether the reading at `fraction` held the actual end, actual ÷ point and the range's
    /// width ÷ actual there (None: the program had not started then; ratios of NaN: the
    /// estimate was "unknown", which holds nothing).
    pub fn check(&self, fraction: f64) -> Option<(bool, f64, f64)> {
        let r = self.at(fraction)?;
        let Some(e) = r.estimate else {
            return Some((false, f64::NAN, f64::NAN));
        };
        let left = self.end - r.t;
        // Within a millisecond of a bound counts as inside (durations are rounded).
        let held = left >= e.low - 1e-3 && left <= e.high + 1e-3;
        Some((
            held,
            left / e.point.max(1e-9),
            (e.high - e.low) / left.max(1e-9),
        ))
    }
}

/// The farm `sim eta` calibrates on: `workers` one-thread workers whose speeds spread over
/// [1/`spread`, `spread`], level-4 books of `depth` plies growing by `program` over hash results
/// on `program`'s schedule, with speculation (serial schedule only: the asynchronous one makes no
/// guesses) and backup leases as the service's defaults, coordinator CPU free.
pub fn eta_config(
    program: bookfarm_book::program::Program,
    workers: usize,
    depth: u8,
    seed: u64,
    spread: f64,
    times: super::TimeTable,
) -> SimConfig {
    let speculation = match program.schedule {
        bookfarm_book::program::Schedule::Async => 0,
        _ => 2,
    };
    SimConfig {
        workers,
        threads: 1,
        speed_spread: spread,
        seed,
        times,
        level: 4,
        depth,
        ops: vec![program],
        speculation,
        backup_after: 4,
        guess: super::Guess::Noisy {
            move_error_percent: 40,
            score_noise: 4,
        },
        faults: None,
        coordinator: super::CoordinatorModel::free(),
        models: super::WorkerModels::honest(),
        truth: super::Truth::Hash,
        async_options: bookfarm_book::schedule::AsyncOptions::default(),
        trust: crate::service::TrustRules::default(),
        warmup_builds: 0,
    }
}

/// Simulate `cfg` (its `ops` should hold one program) and read the estimate after every event.
pub fn eta_run(cfg: &SimConfig, dir: &Path) -> Result<EtaRun> {
    let mut readings: Vec<Reading> = Vec::new();
    let mut start: Option<f64> = None;
    // Program #1 is the new book's own; the simulated program is the next.
    let mut observe = |now: Duration, c: &crate::service::Coordinator| {
        let Some((id, e)) = c.program_eta() else {
            return;
        };
        if id < 2 {
            return;
        }
        let t = now.as_secs_f64();
        start.get_or_insert(t);
        let r = Reading {
            t,
            estimate: e.map(|e| Stated {
                point: e.point.as_secs_f64(),
                low: e.low.as_secs_f64(),
                high: e.high.as_secs_f64(),
            }),
        };
        match readings.last_mut() {
            Some(last) if last.t == t => *last = r,
            _ => readings.push(r),
        }
    };
    let report = simulate_observed(cfg, dir, &mut observe)?;
    let end = report.wall_seconds;
    Ok(EtaRun {
        start: start.unwrap_or(end),
        end,
        readings,
        report,
    })
}

/// Coverage at one fraction of the runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coverage {
    /// The fraction of the program's run.
    pub fraction: f64,
    /// Runs with a reading there.
    pub runs: usize,
    /// Of which the stated range held the actual end.
    pub held: usize,
    /// Quantiles 10, 50, 90 % of actual ÷ point.
    pub ratio: [f64; 3],
    /// Median width of the range (high − low) ÷ the actual time left.
    pub width: f64,
}

/// The coverage of `runs` at each of `fractions`.
pub fn coverage(runs: &[EtaRun], fractions: &[f64]) -> Vec<Coverage> {
    fractions
        .iter()
        .map(|&f| {
            let checks: Vec<(bool, f64, f64)> = runs.iter().filter_map(|r| r.check(f)).collect();
            let q = |pick: fn(&(bool, f64, f64)) -> f64, p: f64| {
                let mut v: Vec<f64> = checks.iter().map(pick).filter(|x| x.is_finite()).collect();
                v.sort_by(f64::total_cmp);
                if v.is_empty() {
                    f64::NAN
                } else {
                    v[((v.len() - 1) as f64 * p).round() as usize]
                }
            };
            Coverage {
                fraction: f,
                runs: checks.len(),
                held: checks.iter().filter(|c| c.0).count(),
                ratio: [q(|c| c.1, 0.1), q(|c| c.1, 0.5), q(|c| c.1, 0.9)],
                width: q(|c| c.2, 0.5),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::TimeTable;
    use bookfarm_book::program::{Operation, Program, Schedule};

    /// A tiny deviate build on each schedule, read after every event: the estimate appears
    /// once the program has expanded a position, every stated range is ordered, and the checks
    /// at each fraction follow from the readings (the calibration itself is `sim eta`'s table).
    #[test]
    fn a_simulated_build_is_read_after_every_event() {
        for schedule in [Schedule::Serial, Schedule::Async] {
            let cfg = eta_config(
                Program {
                    schedule,
                    ..Program::new(Operation::Deviate {
                        params: bookfarm_book::select::Deviate::new(2, 4),
                    })
                },
                4,
                10,
                1,
                4.0,
                TimeTable::recorded(4).unwrap(),
            );
            let dir = tempfile::tempdir().unwrap();
            let run = eta_run(&cfg, dir.path()).unwrap();
            assert_eq!(run.report.schedule, schedule);
            assert!(run.report.finished, "{}", run.report.row());
            assert!(run.report.positions > 1);
            assert!(run.start < run.end, "{} .. {}", run.start, run.end);
            assert!(run.readings.windows(2).all(|w| w[0].t < w[1].t));
            let stated: Vec<Stated> = run.readings.iter().filter_map(|r| r.estimate).collect();
            assert!(!stated.is_empty(), "{schedule:?}: never an estimate");
            assert!(stated.iter().all(|e| e.low <= e.point && e.point <= e.high));
            for f in [0.25, 0.5, 0.75] {
                let (held, ratio, _) = run.check(f).unwrap();
                let r = run.at(f).unwrap();
                let e = r
                    .estimate
                    .unwrap_or_else(|| panic!("{schedule:?}: unknown at {f}"));
                let left = run.end - r.t;
                assert_eq!(held, left >= e.low - 1e-3 && left <= e.high + 1e-3);
                assert!((ratio - left / e.point.max(1e-9)).abs() < 1e-9);
            }
            let c = coverage(std::slice::from_ref(&run), &[0.5]);
            assert_eq!(c[0].runs, 1);
            assert_eq!(c[0].held, usize::from(run.check(0.5).unwrap().0));
        }
    }
}
