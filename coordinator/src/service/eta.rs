//! When will the running program end: a range, not a number.
//!
//! A growth program runs passes (a selector marks positions, the program expands them one by
//! one) until a pass marks nothing; how many passes and how many positions each will mark is
//! not known before they run. The estimate:
//! - **time per expansion** `τ`: the program's elapsed time (service clock, since this
//!   coordinator saw it start) over the expansions done, so it carries the farm's throughput
//!   and each expansion's search latency as they were for this program;
//! - **expansions left**: the current pass's unexpanded positions, plus the passes to come,
//!   taken as a geometric continuation of the passes so far (each pass marks `ρ` times the
//!   previous one's positions, `ρ` from the last passes, [`PRIOR_RATIO`] before there are
//!   two; an operation with one pass has none to come);
//! - the **work left** `τ × left`, turned into the stated range (see [`range`]): `[work × LOW,
//!   work × HIGH]`, whose upper bound is, for a program that runs until a pass marks nothing,
//!   at least `elapsed × PAST`; the point is the work left, for such a program at least
//!   `elapsed × MEDIAN_PAST`.
//!
//! A program on the asynchronous schedule has no passes: its frontier (the positions its
//! selection marks now) is expanded as results land, and each expansion may mark new positions.
//! The same estimate reads it as a branching process (see [`Trace::estimate_async`]):
//! - **time per expansion** `τ`: elapsed time over the expansions applied since this coordinator
//!   first saw it run;
//! - **expansions left**: the frontier `F` now and what it will mark, `F × ρ/(1 − ρ)`, `ρ` the
//!   marks each expansion made over the later half of the expansions so far (`1 + ΔF/Δapplied`;
//!   [`PRIOR_RATIO`] before there are [`MIN_ASYNC_APPLIED`] of them), at most [`MAX_RATIO`];
//! - the same [`range`].
//!
//! Calibration (`sim eta`, the table in `docs/benchmarks.md`): at 25, 50 and 75 % of a
//! simulated build the range holds the actual end in at least 80 % of the builds. The
//! work left alone underestimates open-ended programs (deviate's passes stay small for hundreds
//! of iterations, then stop; an asynchronous frontier stays a handful of positions: actual ÷
//! work has a median of 4 to 30), so their point and upper bound are elapsed-time terms, and
//! the range is wide; a reading in the first tenth of a run misses more often than not.
//!
//! Nothing here reads a clock or the book: [`Trace`] is fed by the growth runner and read by
//! the status.

use bookfarm_book::driver::{DriverState, Phase};
use bookfarm_book::program::Operation;
use std::time::Duration;

/// The passes' ratio assumed before two passes are seen.
pub const PRIOR_RATIO: f64 = 0.6;

/// The largest ratio of one pass's marks to the previous one's assumed (a book always
/// converges; a ratio of 1 would mean no end).
pub const MAX_RATIO: f64 = 0.9;

/// Lower bound of the stated range, as a factor of the point estimate.
pub const LOW: f64 = 0.5;

/// Upper bound of the stated range, as a factor of the point estimate.
pub const HIGH: f64 = 2.5;

/// Least upper bound of an open-ended program's range, as a factor of its elapsed time.
pub const PAST: f64 = 3.5;

/// Least point estimate of an open-ended program, as a factor of its elapsed time: with
/// nothing else known a program is as likely past half its run as not (Gott's median), and
/// the passes or the frontier foretell less than that (`sim eta`).
pub const MEDIAN_PAST: f64 = 1.0;

/// Expansions an asynchronous program applies before its marks per expansion are measured
/// (before: [`PRIOR_RATIO`]).
pub const MIN_ASYNC_APPLIED: u64 = 8;

/// Most frontier samples kept (thinned to every other one beyond: the estimate reads the
/// samples' halfway point and the last, so the resolution lost is at the old end).
const MAX_SAMPLES: usize = 256;

/// One observation of an asynchronous program.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    /// Expansions applied (its counter, since it started or resumed).
    applied: u64,
    /// Positions its selection marks.
    marked: u64,
}

/// One pass of the running program as the runner saw it start.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pass {
    /// Positions it marked.
    marked: u64,
}

/// What the estimate needs of the running program's history (kept by the growth runner).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The program's id (0: none).
    program: u64,
    /// When this coordinator first saw it run (service clock).
    started: Duration,
    /// Its passes so far, in order (from when this coordinator first saw it run).
    passes: Vec<Pass>,
    /// `DriverState::passes` at the last observation.
    seen_passes: u32,
    /// An asynchronous program's frontier as observed (first, then each change; thinned).
    samples: Vec<Sample>,
}

/// A point estimate and the stated range, from now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// `τ × expansions left`.
    pub point: Duration,
    /// The earliest end stated.
    pub low: Duration,
    /// The latest end stated.
    pub high: Duration,
}

impl Trace {
    /// Observe program `id` in state `st` at `now` (after each growth run).
    pub fn observe(&mut self, id: u64, st: &DriverState, now: Duration) {
        if id != self.program {
            *self = Trace {
                program: id,
                started: now,
                passes: Vec::new(),
                seen_passes: st.passes,
                samples: Vec::new(),
            };
            if let Phase::Expanding { todo, .. } = &st.phase {
                self.passes.push(Pass {
                    marked: todo.len() as u64,
                });
            }
            return;
        }
        if st.passes != self.seen_passes {
            self.seen_passes = st.passes;
            if let Phase::Expanding { todo, .. } = &st.phase {
                self.passes.push(Pass {
                    marked: todo.len() as u64,
                });
            }
        }
    }

    /// Observe asynchronous program `id` at `now` (after each growth run): `applied`
    /// expansions so far (its counter), `marked` positions marked now.
    pub fn observe_async(&mut self, id: u64, applied: u64, marked: u64, now: Duration) {
        if id != self.program {
            *self = Trace {
                program: id,
                started: now,
                ..Trace::default()
            };
        }
        let s = Sample { applied, marked };
        if self.samples.last() == Some(&s) {
            return;
        }
        // The counter restarts with the program's state (a resume): follow it from there.
        if self.samples.last().is_some_and(|l| l.applied > applied) {
            self.samples.clear();
            self.started = now;
        }
        self.samples.push(s);
        if self.samples.len() > MAX_SAMPLES {
            let last = self.samples.len() - 1;
            let mut i = 0;
            self.samples.retain(|_| {
                let keep = i % 2 == 0 || i == last;
                i += 1;
                keep
            });
        }
    }

    /// The estimate for asynchronous program `id` at `now`, its frontier `marked` now;
    /// `open_ended`: it runs until its selection marks nothing (None: not known yet, or not
    /// a program this trace follows).
    pub fn estimate_async(
        &self,
        id: u64,
        marked: u64,
        open_ended: bool,
        now: Duration,
    ) -> Option<Estimate> {
        if id != self.program || id == 0 {
            return None;
        }
        let (first, last) = (self.samples.first()?, self.samples.last()?);
        let done = last.applied - first.applied;
        let elapsed = now.saturating_sub(self.started).as_secs_f64();
        let more = if open_ended {
            marked as f64 * continuation(marks_per_expansion(&self.samples))
        } else {
            0.0
        };
        range(elapsed, done, marked as f64, more, open_ended)
    }

    /// The program observed (0: none).
    pub fn program(&self) -> u64 {
        self.program
    }

    /// The estimate for program `id` in state `st` at `now` (None: not known yet, or not a
    /// program this trace follows).
    pub fn estimate(&self, id: u64, st: &DriverState, now: Duration) -> Option<Estimate> {
        if id != self.program || id == 0 {
            return None;
        }
        let elapsed = now.saturating_sub(self.started).as_secs_f64();
        let (done, certain, more, open_ended) = match &st.phase {
            Phase::Expanding { todo, cursor, .. } => {
                let before: u64 = self.passes.iter().rev().skip(1).map(|p| p.marked).sum();
                let current = todo.len() as u64;
                let one_pass = one_pass(&st.program.operation);
                let more = if one_pass {
                    0.0
                } else {
                    current as f64 * continuation(ratio(&self.passes))
                };
                (
                    before + *cursor as u64,
                    current.saturating_sub(*cursor as u64) as f64,
                    more,
                    !one_pass,
                )
            }
            Phase::Adding { game, .. } => match &st.program.operation {
                Operation::AddGames { games } => (
                    *game as u64,
                    games.len().saturating_sub(*game) as f64,
                    0.0,
                    false,
                ),
                _ => return None,
            },
            Phase::Done => {
                return Some(Estimate {
                    point: Duration::ZERO,
                    low: Duration::ZERO,
                    high: Duration::ZERO,
                });
            }
            Phase::Start | Phase::Auditing | Phase::Searching | Phase::Rooting { .. } => {
                return None;
            }
        };
        range(elapsed, done, certain, more, open_ended)
    }
}

/// An operation of one pass (Edax's expand, and enhance without `until_stable`): nothing
/// follows its marked positions.
pub(crate) fn one_pass(op: &Operation) -> bool {
    matches!(
        op,
        Operation::Expand { .. }
            | Operation::Enhance {
                until_stable: false,
                ..
            }
    )
}

/// Expansions expected after a pass of `n` marks, per mark, when each pass marks `rho` times
/// the previous one's positions: `rho + rho² + …`.
fn continuation(rho: f64) -> f64 {
    rho / (1.0 - rho)
}

/// The stated range after `elapsed` seconds of a program that did `done` units of work and
/// has `certain` units left for sure and `more` projected; `open_ended`: how many passes are
/// to come is not known (a program that runs until a pass marks nothing).
///
/// - work = τ × (certain + more), τ = elapsed ÷ done (the program's own rate so far);
/// - point = work, and for an open-ended program at least elapsed × [`MEDIAN_PAST`] (the work
///   term alone was 4 to 30 times too short in `sim eta`);
/// - low = work × [`LOW`];
/// - high = work × [`HIGH`], and for an open-ended program at least elapsed × [`PAST`]: the
///   size of the passes to come is not predictable from the passes so far (deviate's passes
///   stay small for hundreds of iterations, then stop), so the upper bound also scales with
///   how long the program has run, as Gott's Δt argument does (a program past a quarter of its
///   run has at most three times its elapsed time left).
///
/// None: no work done yet, or no time elapsed.
pub fn range(
    elapsed: f64,
    done: u64,
    certain: f64,
    more: f64,
    open_ended: bool,
) -> Option<Estimate> {
    if done == 0 || elapsed.is_nan() || elapsed <= 0.0 {
        return None;
    }
    let work = elapsed / done as f64 * (certain + more);
    let (mut point, mut high) = (work, work * HIGH);
    if open_ended {
        point = point.max(elapsed * MEDIAN_PAST);
        high = high.max(elapsed * PAST);
    }
    let secs = |s: f64| {
        Duration::from_secs_f64(if s.is_finite() {
            s.clamp(0.0, 1e9)
        } else {
            1e9
        })
    };
    Some(Estimate {
        point: secs(point),
        low: secs(work * LOW),
        high: secs(high),
    })
}

/// Positions an asynchronous program's expansions marked, per expansion, over the later half
/// of its expansions so far: `1 + ΔF/Δapplied` (each expansion takes its position off the
/// frontier `F`), clamped to `[0, MAX_RATIO]`; [`PRIOR_RATIO`] before [`MIN_ASYNC_APPLIED`]
/// expansions.
fn marks_per_expansion(samples: &[Sample]) -> f64 {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return PRIOR_RATIO;
    };
    if last.applied.saturating_sub(first.applied) < MIN_ASYNC_APPLIED {
        return PRIOR_RATIO;
    }
    let half = first.applied + (last.applied - first.applied) / 2;
    let from = samples
        .iter()
        .rev()
        .find(|s| s.applied <= half)
        .unwrap_or(first);
    let applied = (last.applied - from.applied) as f64;
    let m = 1.0 + (last.marked as f64 - from.marked as f64) / applied.max(1.0);
    if m.is_finite() {
        m.clamp(0.0, MAX_RATIO)
    } else {
        PRIOR_RATIO
    }
}

/// The ratio of one pass's marks to the previous one's, from the last passes: the last two
/// passes over the two before (deviate alternates its two sides), or the last over the one
/// before, clamped to `[0, MAX_RATIO]`; [`PRIOR_RATIO`] with fewer than two passes.
fn ratio(passes: &[Pass]) -> f64 {
    let m: Vec<f64> = passes.iter().map(|p| p.marked as f64).collect();
    let r = match m.len() {
        0 | 1 => PRIOR_RATIO,
        2 | 3 => m[m.len() - 1] / m[m.len() - 2].max(1.0),
        n => (m[n - 1] + m[n - 2]) / (m[n - 3] + m[n - 4]).max(1.0),
    };
    // Two steps of the pairs' ratio are one step of a pass: its square root.
    let r = if m.len() >= 4 { r.sqrt() } else { r };
    if r.is_finite() {
        r.clamp(0.0, MAX_RATIO)
    } else {
        PRIOR_RATIO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passes(m: &[u64]) -> Vec<Pass> {
        m.iter().map(|&marked| Pass { marked }).collect()
    }

    #[test]
    fn the_ratio_follows_the_last_passes_and_stays_below_one() {
        assert_eq!(ratio(&passes(&[])), PRIOR_RATIO);
        assert_eq!(ratio(&passes(&[10])), PRIOR_RATIO);
        assert_eq!(ratio(&passes(&[10, 5])), 0.5);
        assert_eq!(ratio(&passes(&[10, 50])), MAX_RATIO);
        // Pairs: (4 + 4) / (16 + 16) = 1/4 over two passes: 1/2 a pass.
        assert!((ratio(&passes(&[16, 16, 4, 4])) - 0.5).abs() < 1e-12);
        assert_eq!(ratio(&passes(&[10, 10, 0, 0])), 0.0);
    }

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    fn samples(s: &[(u64, u64)]) -> Vec<Sample> {
        s.iter()
            .map(|&(applied, marked)| Sample { applied, marked })
            .collect()
    }

    #[test]
    fn marks_per_expansion_follow_the_frontier_over_the_later_half() {
        assert_eq!(marks_per_expansion(&[]), PRIOR_RATIO);
        // Too few expansions to measure.
        assert_eq!(
            marks_per_expansion(&samples(&[(0, 10), (3, 12)])),
            PRIOR_RATIO
        );
        // The frontier shrinks by 1 every 2 expansions over the later half: 0.5 marks each.
        // (The first half, growing, is not read.)
        let s = samples(&[(0, 10), (10, 40), (20, 35)]);
        assert!((marks_per_expansion(&s) - 0.5).abs() < 1e-12);
        // A steady frontier: one mark per expansion, no end in sight: at most MAX_RATIO.
        assert_eq!(marks_per_expansion(&samples(&[(0, 5), (40, 5)])), MAX_RATIO);
        // A frontier emptying as fast as it is expanded: nothing more.
        assert_eq!(marks_per_expansion(&samples(&[(0, 20), (20, 0)])), 0.0);
    }

    #[test]
    fn an_asynchronous_program_is_read_from_its_frontier() {
        let at = Duration::from_secs;
        let mut t = Trace::default();
        t.observe_async(3, 0, 40, at(100));
        // No expansion yet: unknown.
        assert_eq!(t.estimate_async(3, 40, true, at(110)), None);
        t.observe_async(3, 10, 40, at(120));
        t.observe_async(3, 20, 30, at(140));
        // 20 expansions in 40 s: 2 s each. Over the later half (10 → 20) the frontier lost
        // 10: 0 marks per expansion, so the 30 marked are all: 60 s.
        let e = t.estimate_async(3, 30, true, at(140)).unwrap();
        assert!((secs(e.point) - 60.0).abs() < 1e-9, "{e:?}");
        assert!((secs(e.high) - (60.0 * HIGH).max(40.0 * PAST)).abs() < 1e-9);
        // Another program's estimate is not this trace's; a new program starts over.
        assert_eq!(t.estimate_async(4, 30, true, at(140)), None);
        t.observe_async(4, 0, 5, at(150));
        assert_eq!(t.estimate_async(4, 5, true, at(160)), None);
        // A counter that restarts (the program resumed) is followed from there.
        t.observe_async(4, 10, 5, at(170));
        t.observe_async(4, 2, 5, at(200));
        t.observe_async(4, 12, 5, at(210));
        let e = t.estimate_async(4, 5, false, at(210)).unwrap();
        // 10 expansions in 10 s; a one-pass program: the 5 marked only.
        assert!((secs(e.point) - 5.0).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn the_frontier_samples_stay_bounded() {
        let mut t = Trace::default();
        for i in 0..10_000u64 {
            t.observe_async(1, i, 10_000 - i, Duration::from_secs(i));
        }
        assert!(t.samples.len() <= MAX_SAMPLES, "{}", t.samples.len());
        assert_eq!(t.samples.first().map(|s| s.applied), Some(0));
        assert_eq!(t.samples.last().map(|s| s.applied), Some(9_999));
        // Each expansion took one position off: 0 marks per expansion.
        assert_eq!(marks_per_expansion(&t.samples), 0.0);
    }

    #[test]
    fn a_geometric_continuation_sums_the_passes_to_come() {
        assert_eq!(continuation(0.0), 0.0);
        assert!((continuation(0.5) - 1.0).abs() < 1e-12);
        assert!((continuation(MAX_RATIO) - 9.0).abs() < 1e-9);
    }

    #[test]
    fn the_range_scales_the_rate_so_far_and_nothing_before_work_is_done() {
        assert_eq!(range(10.0, 0, 5.0, 0.0, true), None);
        assert_eq!(range(0.0, 4, 5.0, 0.0, true), None);
        assert_eq!(range(f64::NAN, 4, 5.0, 0.0, true), None);
        // 4 expansions in 8 s: 2 s each; 3 certain + 2 projected left: 10 s.
        let e = range(8.0, 4, 3.0, 2.0, false).unwrap();
        assert!((secs(e.point) - 10.0).abs() < 1e-9);
        assert!((secs(e.low) - 10.0 * LOW).abs() < 1e-9);
        assert!((secs(e.high) - 10.0 * HIGH).abs() < 1e-9);
        assert!(e.low <= e.point && e.point <= e.high);
    }

    #[test]
    fn an_open_ended_program_states_at_least_its_elapsed_time_times_past() {
        // The work left says 1 s after 100 s: the passes to come are not known, so the
        // point and the upper bound are the elapsed terms; the lower bound stays the work's.
        let e = range(100.0, 100, 1.0, 0.0, true).unwrap();
        assert!((secs(e.point) - 100.0 * MEDIAN_PAST).abs() < 1e-9);
        assert!((secs(e.high) - 100.0 * PAST).abs() < 1e-9);
        assert!((secs(e.low) - LOW).abs() < 1e-9);
        // A one-pass program keeps the point's range.
        let e = range(100.0, 100, 1.0, 0.0, false).unwrap();
        assert!((secs(e.high) - HIGH).abs() < 1e-9);
        // The point's range wins when it is the larger.
        let e = range(1.0, 1, 1000.0, 0.0, true).unwrap();
        assert!((secs(e.high) - 1000.0 * HIGH).abs() < 1e-6);
        // Absurd inputs saturate instead of panicking.
        let e = range(1e300, 1, 1e300, 1e300, true).unwrap();
        assert_eq!(secs(e.high), 1e9);
    }
}
