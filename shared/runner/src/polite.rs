//! What a polite worker loop needs besides leasing: a gate that pauses it (active hours,
//! battery: decided by the worker process, see `bookfarm-worker`'s `polite` module), a CPU
//! share cap, and the once-a-minute progress line. Pure types with explicit times, so that tests
//! need no clock.

use std::time::{Duration, Instant};

/// Whether the loop may search now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateState {
    /// Searching is allowed; `available` is how long it stays allowed (None: no limit), sent
    /// to the coordinator so that it leases only jobs that end in time.
    Run {
        /// Time left before the gate closes.
        available: Option<Duration>,
    },
    /// Paused, for this reason (shown in the log).
    Pause(String),
}

/// Decides when the loop may search (polled every few seconds).
pub trait Gate: Send + std::fmt::Debug {
    /// The state now.
    fn state(&mut self) -> GateState;
}

/// The CPU share cap: each search slot rests `t · (1 − s) / s` after a search of `t`, so a
/// slot is busy at most a share `s` of the time. The loop leases only for slots that are not
/// resting, so no leased job waits out a rest.
#[derive(Debug, Clone)]
pub struct Throttle {
    share: f64,
    resting: Vec<Instant>,
}

impl Throttle {
    /// A cap of `share` (clamped to 0.01..=1; 1: no cap).
    pub fn new(share: f64) -> Throttle {
        let share = if share.is_finite() {
            share.clamp(0.01, 1.0)
        } else {
            1.0
        };
        Throttle {
            share,
            resting: Vec::new(),
        }
    }

    /// Whether the cap is on.
    pub fn capped(&self) -> bool {
        self.share < 1.0
    }

    /// The rest after a search of `elapsed`.
    pub fn rest_after(&self, elapsed: Duration) -> Duration {
        if self.capped() {
            elapsed.mul_f64((1.0 - self.share) / self.share)
        } else {
            Duration::ZERO
        }
    }

    /// A search of `elapsed` finished at `now`: its slot rests.
    pub fn finished(&mut self, now: Instant, elapsed: Duration) {
        let rest = self.rest_after(elapsed);
        if !rest.is_zero() {
            self.resting.push(now + rest);
        }
    }

    /// Slots resting at `now`.
    pub fn resting(&mut self, now: Instant) -> usize {
        self.resting.retain(|t| *t > now);
        self.resting.len()
    }

    /// When the next resting slot wakes.
    pub fn next_wake(&self) -> Option<Instant> {
        self.resting.iter().min().copied()
    }
}

/// The figures of one progress line.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Length of the period the line covers.
    pub period: Duration,
    /// Searches finished in the period.
    pub searches: u64,
    /// Searches finished since start.
    pub searches_total: u64,
    /// Nodes searched in the period.
    pub nodes: u64,
    /// Results the coordinator accepted since start.
    pub accepted: u64,
    /// The coordinator's credit for this worker's contributor: standing, credited results.
    pub credit: Option<(String, u64)>,
    /// The oldest job held: level, empties, age.
    pub current: Option<(u8, u32, Duration)>,
    /// Why the worker has no job (when it has none).
    pub idle: Option<String>,
    /// Why the worker is paused.
    pub paused: Option<String>,
}

/// `1m12s`, `45s`, `2h03m`.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Progress {
    /// The line.
    pub fn render(&self) -> String {
        let secs = self.period.as_secs_f64().max(1e-3);
        let mut s = format!(
            "{} searches in the last {} ({} in all), {:.0} knodes/s, {} accepted",
            self.searches,
            short_duration(self.period),
            self.searches_total,
            self.nodes as f64 / secs / 1000.0,
            self.accepted,
        );
        if let Some((standing, results)) = &self.credit {
            s += &format!(", credit {results} results ({standing})");
        }
        match (&self.paused, &self.current, &self.idle) {
            (Some(why), _, _) => s += &format!("; paused: {why}"),
            (None, Some((level, empties, age)), _) => {
                s += &format!(
                    "; searching level {level} at {empties} empties for {}",
                    short_duration(*age)
                )
            }
            (None, None, Some(why)) => s += &format!("; idle: {why}"),
            (None, None, None) => {}
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_slot_rests_in_proportion_to_its_search() {
        let t0 = Instant::now();
        let mut t = Throttle::new(0.25);
        assert!(t.capped());
        assert_eq!(t.rest_after(Duration::from_secs(2)), Duration::from_secs(6));
        t.finished(t0, Duration::from_secs(2));
        t.finished(t0 + Duration::from_secs(1), Duration::from_secs(1));
        assert_eq!(t.resting(t0), 2);
        assert_eq!(t.next_wake(), Some(t0 + Duration::from_secs(4)));
        // The second slot (rest 3 s from 1 s) wakes first, the first at 6 s.
        assert_eq!(t.resting(t0 + Duration::from_secs(4)), 1);
        assert_eq!(t.resting(t0 + Duration::from_secs(6)), 0);
        assert_eq!(t.next_wake(), None);
        // Over a long run a slot is busy a quarter of the time: 1 s searching, 3 s resting.
        let busy = Duration::from_secs(1);
        let cycle = busy + t.rest_after(busy);
        assert_eq!(busy.as_secs_f64() / cycle.as_secs_f64(), 0.25);
    }

    #[test]
    fn no_cap_means_no_rest() {
        let t0 = Instant::now();
        for share in [1.0, 7.0, f64::NAN] {
            let mut t = Throttle::new(share);
            assert!(!t.capped(), "{share}");
            t.finished(t0, Duration::from_secs(60));
            assert_eq!(t.resting(t0), 0);
        }
        // A share below the floor is clamped, not refused.
        assert_eq!(
            Throttle::new(0.0).rest_after(Duration::from_secs(1)),
            Duration::from_secs(99)
        );
    }

    #[test]
    fn progress_lines_say_what_the_worker_does() {
        let mut p = Progress {
            period: Duration::from_secs(60),
            searches: 37,
            searches_total: 412,
            nodes: 74_040_000,
            accepted: 405,
            credit: Some(("earned".into(), 380)),
            current: Some((18, 40, Duration::from_secs(72))),
            idle: None,
            paused: None,
        };
        assert_eq!(
            p.render(),
            "37 searches in the last 1m00s (412 in all), 1234 knodes/s, 405 accepted, \
             credit 380 results (earned); searching level 18 at 40 empties for 1m12s"
        );
        p.current = None;
        p.idle = Some("the build is done".into());
        assert!(
            p.render().ends_with("; idle: the build is done"),
            "{}",
            p.render()
        );
        p.paused = Some("on battery".into());
        assert!(
            p.render().ends_with("; paused: on battery"),
            "{}",
            p.render()
        );
        assert_eq!(short_duration(Duration::from_secs(7384)), "2h03m");
        assert_eq!(short_duration(Duration::from_secs(9)), "9s");
    }
}
