//! Search durations for the simulator: per level, the CPU seconds of real leaf searches on
//! book positions, recorded by `bookfarm-coordinator sim record` and kept in `times.tsv`.
//!
//! A simulated search of a request lasts the table's quantile at a point given by the
//! request's hash, so durations follow the recorded distribution (heavy tail included) while
//! staying a pure function of the request.

use super::request_hash;
use crate::error::{CoordinatorError, Result};
use bookfarm_engine::Board;
use bookfarm_engine::search::{LeafRequest, Searcher};
use std::sync::atomic::AtomicBool;

/// The recorded tables (see the module docs).
const RECORDED: &str = include_str!("times.tsv");

/// The CPU seconds of searches at one level, sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeTable {
    /// The level searched.
    pub level: u8,
    /// Sorted CPU seconds, at least one.
    pub seconds: Vec<f64>,
}

impl TimeTable {
    /// The recorded table of `level`, if there is one.
    pub fn recorded(level: u8) -> Option<TimeTable> {
        parse(RECORDED).ok()?.into_iter().find(|t| t.level == level)
    }

    /// Levels with a recorded table.
    pub fn recorded_levels() -> Vec<u8> {
        parse(RECORDED)
            .map(|ts| ts.iter().map(|t| t.level).collect())
            .unwrap_or_default()
    }

    /// The duration of a search of `req` at speed 1: the distribution's quantile at the
    /// request's hash (linear between recorded values).
    pub fn seconds(&self, req: &LeafRequest) -> f64 {
        let n = self.seconds.len();
        if n == 1 {
            return self.seconds[0];
        }
        let u = (request_hash(req) >> 11) as f64 / (1u64 << 53) as f64;
        let x = u * (n - 1) as f64;
        let i = (x.floor() as usize).min(n - 2);
        let f = x - i as f64;
        self.seconds[i] * (1.0 - f) + self.seconds[i + 1] * f
    }

    /// The mean of the distribution.
    pub fn mean(&self) -> f64 {
        self.seconds.iter().sum::<f64>() / self.seconds.len() as f64
    }
}

/// Parse tables: one line per level, `level<TAB>s1<TAB>s2…`; `#` starts a comment line.
pub fn parse(text: &str) -> Result<Vec<TimeTable>> {
    let bad = |n: usize, what: &str| {
        CoordinatorError::InvalidArgument(format!("time table line {}: {what}", n + 1))
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split('\t');
        let level: u8 = fields
            .next()
            .and_then(|f| f.parse().ok())
            .filter(|l| *l <= 60)
            .ok_or_else(|| bad(n, "expected a level 0..=60 first"))?;
        let mut seconds = fields
            .map(|f| f.parse::<f64>().ok().filter(|s| s.is_finite() && *s > 0.0))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| bad(n, "expected positive seconds"))?;
        if seconds.is_empty() {
            return Err(bad(n, "no seconds"));
        }
        seconds.sort_by(f64::total_cmp);
        out.push(TimeTable { level, seconds });
    }
    Ok(out)
}

/// Time real leaf searches of `boards` at `level` with `searcher`: CPU seconds of the calling
/// thread per search, sorted.
pub fn record(searcher: &mut Searcher, level: u8, boards: &[Board]) -> TimeTable {
    let abort = AtomicBool::new(false);
    let mut seconds: Vec<f64> = boards
        .iter()
        .map(|b| {
            let t = cpu_time::ThreadTime::now();
            searcher.leaf_search(
                &LeafRequest {
                    board: *b,
                    level,
                    excluded: 0,
                },
                &abort,
            );
            t.elapsed().as_secs_f64().max(1e-7)
        })
        .collect();
    seconds.sort_by(f64::total_cmp);
    TimeTable { level, seconds }
}

/// A table as one line of `times.tsv`.
pub fn format(t: &TimeTable) -> String {
    let mut s = t.level.to_string();
    for x in &t.seconds {
        s.push('\t');
        s.push_str(&format!("{x:.6}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_tables_parse_and_durations_are_pure_and_in_range() {
        let levels = TimeTable::recorded_levels();
        assert_eq!(levels, vec![4, 8, 12, 16]);
        for l in levels {
            let t = TimeTable::recorded(l).unwrap();
            let req = LeafRequest {
                board: Board::start(),
                level: l,
                excluded: 0,
            };
            let s = t.seconds(&req);
            assert_eq!(s, t.seconds(&req));
            assert!(s >= t.seconds[0] && s <= *t.seconds.last().unwrap());
        }
        // Deeper levels take longer on average.
        let means: Vec<f64> = [4, 8, 12, 16]
            .iter()
            .map(|l| TimeTable::recorded(*l).unwrap().mean())
            .collect();
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
    }

    #[test]
    fn bad_tables_are_refused_with_the_line() {
        assert!(parse("# c\n4\t0.1\t0.2\n").is_ok());
        for bad in ["x\t1", "61\t1", "4", "4\t-1", "4\tnan"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("line 1"), "{bad}: {e}");
        }
    }
}
