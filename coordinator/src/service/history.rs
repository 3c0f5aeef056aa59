//! The farm's history for the web UI: a point per tick (about a second) for the last
//! [`FINE_KEEP`] ticks in memory, merged into per-minute and per-hour points that are stored
//! (the `history` meta record) and so survive restarts at reduced resolution; plus the results
//! accepted per contributor, per UTC day, for the contributors' leaderboard.
//!
//! The record is rewritten every [`SAVE_EVERY_MINUTES`] minutes and at shutdown.
//!
//! Time is wall-clock milliseconds passed in by the caller (charts are labelled with dates), so
//! tests drive it by hand. Invariants: points of each tier are in increasing time order; a
//! minute (hour) point is the merge of the ticks (minutes) that fell in it: mean rates, last
//! gauges.

use super::Coordinator;
use crate::error::Result;
use crate::store::{Batch, ContributorRecord, HistoryRecord, Sample};
use std::collections::{BTreeMap, VecDeque};

/// Per-tick points kept in memory (15 minutes at one tick a second).
pub const FINE_KEEP: usize = 900;
/// Per-minute points kept (two days).
pub const MINUTE_KEEP: usize = 2 * 24 * 60;
/// Per-hour points kept (about 90 days).
pub const HOUR_KEEP: usize = 90 * 24;
/// Days of per-day contributor tallies kept (the "month" column sums the last 30).
pub const DAYS_KEEP: u32 = 31;
/// The stored record (about 36 bytes a point, under 200 KB when full) is rewritten this often, and
/// at shutdown: a crash loses at most these minutes of per-minute points.
pub const SAVE_EVERY_MINUTES: u64 = 5;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 86_400_000;

/// Points accumulated for one bucket (a minute or an hour) not yet closed.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    start: u64,
    n: u32,
    results: f64,
    nodes: f64,
    last: Sample,
}

impl Bucket {
    fn new(start: u64, s: &Sample) -> Bucket {
        Bucket {
            start,
            n: 1,
            results: s.results_per_second,
            nodes: s.nodes_per_second,
            last: *s,
        }
    }

    fn add(&mut self, s: &Sample) {
        self.n += 1;
        self.results += s.results_per_second;
        self.nodes += s.nodes_per_second;
        self.last = *s;
    }

    /// The merged point: mean rates, last gauges, stamped with the bucket's start.
    fn close(&self) -> Sample {
        Sample {
            t_ms: self.start,
            results_per_second: self.results / f64::from(self.n),
            nodes_per_second: self.nodes / f64::from(self.n),
            ..self.last
        }
    }
}

/// Feed `s` to the open bucket of width `width`; returns the closed bucket's point when `s`
/// starts a new one.
fn feed(open: &mut Option<Bucket>, width: u64, s: &Sample) -> Option<Sample> {
    let start = s.t_ms - s.t_ms % width;
    match open {
        Some(b) if b.start == start => {
            b.add(s);
            None
        }
        Some(b) if start < b.start => None, // the clock went back: drop the point
        _ => {
            let closed = open.map(|b| b.close());
            *open = Some(Bucket::new(start, s));
            closed
        }
    }
}

fn push(v: &mut VecDeque<Sample>, s: Sample, keep: usize) {
    if v.back().is_some_and(|b| b.t_ms >= s.t_ms) {
        return;
    }
    v.push_back(s);
    while v.len() > keep {
        v.pop_front();
    }
}

/// The history (owned by the coordinator; see the module doc).
#[derive(Debug, Default)]
pub(crate) struct History {
    fine: VecDeque<Sample>,
    minutes: VecDeque<Sample>,
    hours: VecDeque<Sample>,
    open_minute: Option<Bucket>,
    open_hour: Option<Bucket>,
    /// By (anonymous, name).
    contributors: BTreeMap<(bool, String), ContributorRecord>,
}

impl History {
    /// The history as stored (or a new one).
    pub(crate) fn from_record(r: Option<HistoryRecord>) -> History {
        let r = r.unwrap_or_default();
        History {
            minutes: r.minutes.into_iter().collect(),
            hours: r.hours.into_iter().collect(),
            contributors: r
                .contributors
                .into_iter()
                .map(|c| ((c.anonymous, c.name.clone()), c))
                .collect(),
            ..History::default()
        }
    }

    fn record(&self) -> HistoryRecord {
        HistoryRecord {
            minutes: self.minutes.iter().copied().collect(),
            hours: self.hours.iter().copied().collect(),
            contributors: self.contributors.values().cloned().collect(),
        }
    }

    /// Add a tick's point and the results accepted per contributor since the last tick
    /// (`anonymous` tells which names are anonymous workers'). Returns true when a minute
    /// closed (the stored record should be rewritten).
    pub(crate) fn add(&mut self, s: Sample, contributions: Vec<(bool, String, u64)>) -> bool {
        let day = u32::try_from(s.t_ms / DAY_MS).unwrap_or(u32::MAX);
        for (anonymous, name, n) in contributions {
            let c = self
                .contributors
                .entry((anonymous, name.clone()))
                .or_insert_with(|| ContributorRecord {
                    name,
                    anonymous,
                    ..ContributorRecord::default()
                });
            c.total += n;
            match c.days.last_mut() {
                Some((d, k)) if *d == day => *k += n,
                _ => c.days.push((day, n)),
            }
            c.days.retain(|(d, _)| d + DAYS_KEEP > day);
        }
        push(&mut self.fine, s, FINE_KEEP);
        let Some(minute) = feed(&mut self.open_minute, MINUTE_MS, &s) else {
            return false;
        };
        push(&mut self.minutes, minute, MINUTE_KEEP);
        if let Some(hour) = feed(&mut self.open_hour, HOUR_MS, &minute) {
            push(&mut self.hours, hour, HOUR_KEEP);
        }
        true
    }

    /// Points after `since_ms` of every tier.
    pub(crate) fn view(&self, since_ms: u64) -> HistoryView {
        let after = |v: &VecDeque<Sample>| -> Vec<Sample> {
            let from = v.partition_point(|s| s.t_ms <= since_ms);
            v.range(from..).copied().collect()
        };
        HistoryView {
            fine: after(&self.fine),
            minutes: after(&self.minutes),
            hours: after(&self.hours),
        }
    }

    /// The leaderboard at `now_ms`, most results of all time first.
    pub(crate) fn contributors(&self, now_ms: u64) -> Vec<ContributorReport> {
        let today = u32::try_from(now_ms / DAY_MS).unwrap_or(u32::MAX);
        let mut out: Vec<ContributorReport> = self
            .contributors
            .values()
            .map(|c| ContributorReport {
                name: c.name.clone(),
                anonymous: c.anonymous,
                today: c
                    .days
                    .iter()
                    .filter(|(d, _)| *d == today)
                    .map(|(_, n)| n)
                    .sum(),
                month: c
                    .days
                    .iter()
                    .filter(|(d, _)| d + 30 > today)
                    .map(|(_, n)| n)
                    .sum(),
                total: c.total,
            })
            .collect();
        out.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        out
    }
}

/// History points after a given time, per tier, oldest first.
#[derive(Debug, Clone, Default)]
pub struct HistoryView {
    /// One point per tick (memory only: the last 15 minutes).
    pub fine: Vec<Sample>,
    /// One point per minute (stored).
    pub minutes: Vec<Sample>,
    /// One point per hour (stored).
    pub hours: Vec<Sample>,
}

/// One contributor's accepted results (credit proper is not computed yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContributorReport {
    /// Owner, or the worker's name when `anonymous`.
    pub name: String,
    /// An anonymous local worker.
    pub anonymous: bool,
    /// Results accepted today (UTC).
    pub today: u64,
    /// ...in the last 30 days.
    pub month: u64,
    /// ...since the history began.
    pub total: u64,
}

impl Coordinator {
    /// Take a history point at wall-clock time `now_ms` (the server calls this every
    /// `crate::server::REAPER_INTERVAL`); the stored history is rewritten when a minute closes
    /// on a multiple of five minutes.
    pub fn sample_history(&self, now_ms: u64) -> Result<()> {
        let s = self.status();
        let contributions: Vec<(bool, String, u64)> = self
            .jobs()
            .contributions
            .drain()
            .map(|((anonymous, name), n)| (anonymous, name, n))
            .collect();
        let point = Sample {
            t_ms: now_ms,
            positions: s.positions,
            results_per_second: s.results_per_second,
            nodes_per_second: s.nodes_per_second,
            root_value: s.root_value,
            workers: u32::try_from(s.workers.len()).unwrap_or(u32::MAX),
            threads: u32::try_from(s.threads).unwrap_or(u32::MAX),
            queued: s.queued,
            in_flight: s.in_flight,
        };
        let closed = self.history_lock().add(point, contributions);
        if closed && (now_ms / MINUTE_MS).is_multiple_of(SAVE_EVERY_MINUTES) {
            self.save_history()?;
        }
        Ok(())
    }

    /// Write the history record (every five minutes, and at shutdown).
    pub fn save_history(&self) -> Result<()> {
        let r = self.history_lock().record();
        let mut b = Batch::default();
        b.put_history(&r)?;
        self.0.store.apply(b)?;
        Ok(())
    }

    /// History points after `since_ms` (0: all).
    pub fn history(&self, since_ms: u64) -> HistoryView {
        self.history_lock().view(since_ms)
    }

    /// The contributors' leaderboard at wall-clock time `now_ms`.
    pub fn contributors(&self, now_ms: u64) -> Vec<ContributorReport> {
        self.history_lock().contributors(now_ms)
    }

    fn history_lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.0.history.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_ms: u64, rate: f64, positions: u64) -> Sample {
        Sample {
            t_ms,
            positions,
            results_per_second: rate,
            ..Sample::default()
        }
    }

    #[test]
    fn minutes_merge_ticks_and_hours_merge_minutes() {
        let mut h = History::default();
        let b = 10 * HOUR_MS; // an hour boundary
        // Two minutes of ticks at 1 and 3 results/s, then one tick that closes the second.
        let mut closed = 0;
        for i in 0..60 {
            closed += usize::from(h.add(point(b + i * 1000, 1.0, i), vec![]));
        }
        for i in 60..120 {
            closed += usize::from(h.add(point(b + i * 1000, 3.0, i), vec![]));
        }
        assert_eq!(closed, 1, "the first minute closed at the 61st tick");
        assert!(h.add(point(b + 120_000, 0.0, 120), vec![]));
        let v = h.view(0);
        assert_eq!(v.fine.len(), 121);
        assert_eq!(
            v.minutes,
            vec![point(b, 1.0, 59), point(b + 60_000, 3.0, 119)],
            "mean rate, last gauge, bucket start"
        );
        assert!(v.hours.is_empty(), "the first hour is still open");
        // An hour later the first hour closes with the mean of its minutes.
        assert!(h.add(point(b + HOUR_MS, 0.0, 200), vec![]));
        assert!(h.add(point(b + HOUR_MS + MINUTE_MS, 0.0, 200), vec![]));
        let hours = h.view(0).hours;
        assert_eq!(hours.len(), 1);
        assert_eq!(hours[0].t_ms, b);
        assert!((hours[0].results_per_second - 4.0 / 3.0).abs() < 1e-9);
        // Incremental reads return only newer points.
        assert_eq!(h.view(b + 60_000).minutes.len(), 2);
        assert_eq!(h.view(b + 119_000).fine.len(), 3);
    }

    #[test]
    fn a_full_record_stays_small() {
        let big = |t_ms| Sample {
            t_ms,
            positions: 1_000_000,
            results_per_second: 1234.5,
            nodes_per_second: 9.9e9,
            root_value: -3,
            workers: 1000,
            threads: 4000,
            queued: 100_000,
            in_flight: 4000,
        };
        let t = 1_800_000_000_000;
        let h = History {
            minutes: (0..MINUTE_KEEP as u64)
                .map(|i| big(t + i * MINUTE_MS))
                .collect(),
            hours: (0..HOUR_KEEP as u64)
                .map(|i| big(t + i * HOUR_MS))
                .collect(),
            ..History::default()
        };
        let bytes = postcard::to_stdvec(&h.record()).unwrap().len();
        assert!(bytes < 200_000, "{bytes} bytes");
    }

    #[test]
    fn the_clock_going_back_drops_points() {
        let mut h = History::default();
        h.add(point(120_000, 1.0, 1), vec![]);
        h.add(point(60_000, 1.0, 1), vec![]);
        h.add(point(190_000, 1.0, 1), vec![]);
        let v = h.view(0);
        assert_eq!(
            v.fine.iter().map(|s| s.t_ms).collect::<Vec<_>>(),
            [120_000, 190_000]
        );
        assert_eq!(v.minutes.len(), 1);
    }

    #[test]
    fn contributors_count_per_day_month_and_all_time() {
        let mut h = History::default();
        let day = |d: u64| d * DAY_MS;
        h.add(point(day(100), 0.0, 0), vec![(false, "alice".into(), 5)]);
        h.add(point(day(120), 0.0, 0), vec![(false, "alice".into(), 7)]);
        h.add(
            point(day(140), 0.0, 0),
            vec![(false, "alice".into(), 1), (true, "laptop".into(), 30)],
        );
        let board = h.contributors(day(140) + 5);
        assert_eq!(
            board,
            vec![
                ContributorReport {
                    name: "laptop".into(),
                    anonymous: true,
                    today: 30,
                    month: 30,
                    total: 30
                },
                ContributorReport {
                    name: "alice".into(),
                    anonymous: false,
                    today: 1,
                    month: 8,
                    total: 13
                },
            ]
        );
        // Old days are dropped, the all-time count is kept.
        let alice = &h.contributors[&(false, "alice".to_string())];
        assert_eq!(alice.days, vec![(120, 7), (140, 1)]);
        // The record round-trips.
        let again = History::from_record(Some(h.record()));
        assert_eq!(again.contributors(day(141)), h.contributors(day(141)));
    }
}
