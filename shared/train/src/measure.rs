//! Accuracy of an evaluation against labelled samples, per empties bucket and label kind.

use crate::dataset::{LabelKind, Sample};
use crate::play::search_score;
use bookfarm_engine::eval::Eval;
use rayon::prelude::*;
use std::fmt::Write;

/// Empties buckets reported (inclusive ranges).
pub const BUCKETS: [(u32, u32); 11] = [
    (0, 13),
    (14, 16),
    (17, 17),
    (18, 20),
    (21, 21),
    (22, 24),
    (25, 30),
    (31, 36),
    (37, 44),
    (45, 52),
    (53, 60),
];

/// Error statistics of one row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Errors {
    /// Number of samples.
    pub n: usize,
    /// Mean absolute error (discs).
    pub mae: f64,
    /// Root mean squared error (discs).
    pub rmse: f64,
}

/// MAE and RMSE of `pred` against `label`.
pub fn errors(pairs: &[(f64, f64)]) -> Errors {
    let n = pairs.len();
    if n == 0 {
        return Errors::default();
    }
    let (a, s) = pairs.iter().fold((0.0, 0.0), |(a, s), (p, y)| {
        (a + (p - y).abs(), s + (p - y) * (p - y))
    });
    Errors {
        n,
        mae: a / n as f64,
        rmse: (s / n as f64).sqrt(),
    }
}

fn kind_name(k: LabelKind) -> &'static str {
    match k {
        LabelKind::GameResult => "game result",
        LabelKind::Theoretical => "wthor theoretical",
        LabelKind::Exact => "exact",
        LabelKind::Search => "search",
    }
}

/// A markdown table: label kind, empties band (inclusive; bands may overlap), n, then MAE / RMSE
/// of the static evaluation and of a fixed-depth search at each of `depths`.
pub fn table(w: &Eval, samples: &[Sample], depths: &[u32], bands: &[(u32, u32)]) -> String {
    let mut out = String::new();
    let mut head = String::from("| labels | empties | n | static MAE | static RMSE |");
    let mut sep = String::from("|---|---|---|---|---|");
    for d in depths {
        let _ = write!(head, " depth {d} MAE | depth {d} RMSE |");
        sep.push_str("---|---|");
    }
    let _ = writeln!(out, "{head}\n{sep}");
    for kind in [
        LabelKind::Exact,
        LabelKind::Search,
        LabelKind::Theoretical,
        LabelKind::GameResult,
    ] {
        for &(lo, hi) in bands {
            let rows: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.kind == kind && (lo..=hi).contains(&s.board.empties()))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let stat: Vec<(f64, f64)> = rows
                .par_iter()
                .map(|s| (f64::from(w.eval0(&s.board)), f64::from(s.label)))
                .collect();
            let e = errors(&stat);
            let _ = write!(
                out,
                "| {} | {lo}–{hi} | {} | {:.2} | {:.2} |",
                kind_name(kind),
                e.n,
                e.mae,
                e.rmse
            );
            for &d in depths {
                let v: Vec<(f64, f64)> = rows
                    .par_iter()
                    .map(|s| (f64::from(search_score(&s.board, d, w)), f64::from(s.label)))
                    .collect();
                let e = errors(&v);
                let _ = write!(out, " {:.2} | {:.2} |", e.mae, e.rmse);
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_computed_exactly() {
        let e = errors(&[(1.0, 4.0), (-2.0, -2.0), (0.0, 4.0)]);
        assert_eq!(e.n, 3);
        assert!((e.mae - 7.0 / 3.0).abs() < 1e-12);
        assert!((e.rmse - (25.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(errors(&[]), Errors::default());
    }
}
