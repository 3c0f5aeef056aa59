//! The finish estimate of a running book-neutral program (a search program, an analysis): its
//! work is a known number of searches, so what is left is `total - done` and the only unknown
//! is the pace. The pace is measured on the program itself, from the first step this
//! coordinator ran (a resumed program's results found in the store do not count as pace), over
//! two spans: the whole run and the last minute or so. The range is what the slower and the
//! faster of the two paces give: a farm that grew or shrank, or positions that got harder,
//! widen it.

use super::super::programs::EtaRange;
use std::time::Duration;

/// Results landed before the pace counts (fewer: no estimate).
pub(crate) const MIN_LANDED: u64 = 8;

/// The span of the recent pace.
const RECENT_MS: u64 = 60_000;

/// A sample: wall-clock milliseconds, searches done.
type Sample = (u64, u64);

/// Samples of the running book-neutral program's progress.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pace {
    /// The program sampled (0: none).
    program: u64,
    /// The first sample of this run.
    first: Sample,
    /// The start of the recent span (a sample at least [`RECENT_MS`] before `mid`, or `first`).
    recent: Sample,
    /// A sample between `recent` and `last`, that becomes `recent` once `last` is
    /// [`RECENT_MS`] past it.
    mid: Sample,
    /// The last sample.
    last: Sample,
}

impl Pace {
    /// Program `program` has `done` searches with a result at `now_ms`. A new program starts
    /// over.
    pub(crate) fn observe(&mut self, program: u64, now_ms: u64, done: u64) {
        if program != self.program || done < self.last.1 || now_ms < self.last.0 {
            // A new program, or a rollback that took results back: measure again.
            *self = Pace {
                program,
                first: (now_ms, done),
                recent: (now_ms, done),
                mid: (now_ms, done),
                last: (now_ms, done),
            };
            return;
        }
        self.last = (now_ms, done);
        if now_ms.saturating_sub(self.mid.0) >= RECENT_MS {
            self.recent = self.mid;
            self.mid = self.last;
        }
    }

    /// When program `program`, `done` of `total` searches now, should end from `now_ms`: the
    /// searches left at the slower and at the faster of the whole run's and the recent span's
    /// pace, counted from the last sample. None before [`MIN_LANDED`] results of this run, for
    /// another program, or when nothing is left.
    pub(crate) fn eta(&self, program: u64, done: u64, total: u64, now_ms: u64) -> Option<EtaRange> {
        if program != self.program || done >= total {
            return None;
        }
        let rate = |from: Sample| {
            let (dt, dn) = (self.last.0.saturating_sub(from.0), self.last.1 - from.1);
            (dt > 0 && dn > 0).then(|| dn as f64 / dt as f64)
        };
        if self.last.1 - self.first.1 < MIN_LANDED {
            return None;
        }
        let whole = rate(self.first)?;
        let recent = rate(self.recent).unwrap_or(whole);
        let left = (total - done) as f64;
        let since = now_ms.saturating_sub(self.last.0) as f64;
        let at = |per_ms: f64| Duration::from_secs_f64(((left / per_ms) - since).max(0.0) / 1000.0);
        Some(EtaRange {
            low: at(whole.max(recent)),
            high: at(whole.min(recent)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_spans_the_whole_runs_and_the_recent_pace() {
        let mut p = Pace::default();
        // Resumed with 100 done: they do not count as pace.
        p.observe(7, 1_000, 100);
        assert_eq!(p.eta(7, 100, 1_100, 1_000), None);
        p.observe(7, 2_000, 100 + MIN_LANDED - 1);
        assert_eq!(p.eta(7, 107, 1_100, 2_000), None, "too few landed");
        // 10 a second for two minutes.
        for s in 1..=120u64 {
            p.observe(7, 1_000 + s * 1_000, 100 + 10 * s);
        }
        let e = p.eta(7, 1_300, 2_300, 121_000).unwrap();
        assert_eq!((e.low.as_secs(), e.high.as_secs()), (100, 100));
        // Then 5 a second for two minutes: the recent span says 5, the whole run 7.5.
        for s in 1..=120u64 {
            p.observe(7, 121_000 + s * 1_000, 1_300 + 5 * s);
        }
        let e = p.eta(7, 1_900, 2_900, 241_000).unwrap();
        let (low, high) = (e.low.as_secs_f64(), e.high.as_secs_f64());
        assert!((133.0..134.0).contains(&low), "{low}");
        assert!((195.0..=200.0).contains(&high), "{high}");
        // Time since the last sample counts down.
        let later = p.eta(7, 1_900, 2_900, 251_000).unwrap();
        assert_eq!(later.high, e.high - Duration::from_secs(10));
        // Another program, or nothing left: no estimate; a new program starts over.
        assert_eq!(p.eta(8, 1_900, 2_900, 241_000), None);
        assert_eq!(p.eta(7, 2_900, 2_900, 241_000), None);
        p.observe(8, 250_000, 0);
        assert_eq!(p.eta(8, 0, 10, 250_000), None);
    }
}
