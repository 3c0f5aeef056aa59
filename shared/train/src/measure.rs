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
    /// Mean error, prediction − label (discs).
    pub mean: f64,
}

/// MAE and RMSE of `pred` against `label`.
pub fn errors(pairs: &[(f64, f64)]) -> Errors {
    let n = pairs.len();
    if n == 0 {
        return Errors::default();
    }
    let (a, s, m) = pairs.iter().fold((0.0, 0.0, 0.0), |(a, s, m), (p, y)| {
        (a + (p - y).abs(), s + (p - y) * (p - y), m + (p - y))
    });
    Errors {
        n,
        mae: a / n as f64,
        rmse: (s / n as f64).sqrt(),
        mean: m / n as f64,
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
/// and mean error (evaluation − label: a bias, e.g. by empties parity) of the static evaluation and of a fixed-depth search at each of `depths`.
pub fn table(w: &Eval, samples: &[Sample], depths: &[u32], bands: &[(u32, u32)]) -> String {
    let mut out = String::new();
    let mut head =
        String::from("| labels | empties | n | static MAE | static RMSE | static bias |");
    let mut sep = String::from("|---|---|---|---|---|---|");
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
            let stat = static_pairs(&rows, w);
            let e = errors(&stat);
            let _ = write!(
                out,
                "| {} | {lo}–{hi} | {} | {:.2} | {:.2} | {:+.2} |",
                kind_name(kind),
                e.n,
                e.mae,
                e.rmse,
                e.mean
            );
            for &d in depths {
                let v = search_pairs(&rows, d, w);
                let e = errors(&v);
                let _ = write!(out, " {:.2} | {:.2} |", e.mae, e.rmse);
            }
            out.push('\n');
        }
    }
    out
}

/// (static evaluation, label) of each sample.
fn static_pairs(rows: &[&Sample], w: &Eval) -> Vec<(f64, f64)> {
    rows.par_iter()
        .map(|s| (f64::from(w.eval0(&s.board)), f64::from(s.label)))
        .collect()
}

/// (depth-`d` search score, label) of each sample.
fn search_pairs(rows: &[&Sample], d: u32, w: &Eval) -> Vec<(f64, f64)> {
    rows.par_iter()
        .map(|s| (f64::from(search_score(&s.board, d, w)), f64::from(s.label)))
        .collect()
}

/// What an error breakdown ([`breakdown`]) groups the exactly labelled samples of a band by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// |label| (the exact score): are lopsided positions where the error is?
    Score,
    /// Legal moves of the side to move (random-move positions often have very few).
    Mobility,
    /// |disc difference| on the board.
    Discs,
    /// |static evaluation|: calibration. Rows of a calibrated evaluation have a signed error
    /// near 0; grouping by |label| instead selects positions whose label exceeds the
    /// evaluation, so its signed errors lean negative even for a calibrated evaluation.
    Eval,
}

impl By {
    /// Group edges (inclusive lower bounds, ascending) and the value grouped for one sample.
    fn edges(self) -> &'static [u32] {
        match self {
            By::Score | By::Eval => &[0, 10, 20, 30, 40],
            By::Mobility => &[0, 4, 7, 10, 13],
            By::Discs => &[0, 5, 10, 20, 30],
        }
    }

    fn value(self, s: &Sample, eval: i32) -> u32 {
        match self {
            By::Eval => eval.unsigned_abs(),
            By::Score => s.label.abs().round() as u32,
            By::Mobility => s.board.moves().count_ones(),
            By::Discs => (s.board.player.count_ones() as i32
                - s.board.opponent.count_ones() as i32)
                .unsigned_abs(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            By::Score => "|exact score|",
            By::Mobility => "mobility",
            By::Discs => "|disc diff|",
            By::Eval => "|static eval|",
        }
    }
}

/// Group index of `v` for ascending inclusive lower bounds `edges` (the first is 0).
fn group_of(edges: &[u32], v: u32) -> usize {
    edges.iter().rposition(|&e| v >= e).unwrap_or(0)
}

/// Mean of `(pred − label) · sign(label)` over samples with a non-zero label: negative when the
/// evaluation underestimates how lopsided positions are (shrinks towards 0), positive when it
/// overestimates them.
pub fn signed_towards_label(pairs: &[(f64, f64)]) -> f64 {
    signed_towards(pairs, |_, y| y)
}

/// Mean of `(pred − label) · sign(pred)` over samples with a non-zero prediction: negative when
/// the labels are more lopsided than the evaluation says (it should be scaled up).
pub fn signed_towards_eval(pairs: &[(f64, f64)]) -> f64 {
    signed_towards(pairs, |p, _| p)
}

fn signed_towards(pairs: &[(f64, f64)], reference: impl Fn(f64, f64) -> f64) -> f64 {
    let v: Vec<f64> = pairs
        .iter()
        .filter(|&&(p, y)| reference(p, y) != 0.0)
        .map(|&(p, y)| (p - y) * reference(p, y).signum())
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Error analysis: for the exactly labelled samples of each band, a markdown row per group of
/// `by` with n, static MAE, the static error towards the label's sign
/// ([`signed_towards_label`]; towards the evaluation's sign, [`signed_towards_eval`], for
/// [`By::Eval`]) and the MAE of a fixed-depth search at each of `depths`.
pub fn breakdown(
    w: &Eval,
    samples: &[Sample],
    depths: &[u32],
    bands: &[(u32, u32)],
    by: By,
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "| empties | {} | n | static MAE | static error towards the sign of the {} |",
        by.name(),
        if by == By::Eval { "eval" } else { "label" }
    );
    let mut sep = String::from("|---|---|---|---|---|");
    for d in depths {
        let _ = write!(out, " depth {d} MAE |");
        sep.push_str("---|");
    }
    let _ = writeln!(out, "\n{sep}");
    let edges = by.edges();
    for &(lo, hi) in bands {
        for (g, &e) in edges.iter().enumerate() {
            let rows: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.kind == LabelKind::Exact && (lo..=hi).contains(&s.board.empties()))
                .filter(|s| group_of(edges, by.value(s, w.eval0(&s.board))) == g)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let stat = static_pairs(&rows, w);
            let err = errors(&stat);
            let group = edges
                .get(g + 1)
                .map_or_else(|| format!("≥ {e}"), |next| format!("{e}–{}", next - 1));
            let _ = write!(
                out,
                "| {lo}–{hi} | {group} | {} | {:.2} | {:+.2} |",
                err.n,
                err.mae,
                if by == By::Eval {
                    signed_towards_eval(&stat)
                } else {
                    signed_towards_label(&stat)
                }
            );
            for &d in depths {
                let v = search_pairs(&rows, d, w);
                let _ = write!(out, " {:.2} |", errors(&v).mae);
            }
            out.push('\n');
        }
    }
    out
}

/// Label quality: for every sample of `labels` whose position `reference` labels exactly, the
/// pair (label, exact score); a markdown table per band (inclusive, may overlap) of n, MAE,
/// RMSE and the mean signed error (label − exact). Positions without an exact reference label
/// are skipped, so a search-labelled cache can be compared with the exact cache it was drawn
/// like (same seed and parameters, hence the same positions).
pub fn label_errors(reference: &[Sample], labels: &[Sample], bands: &[(u32, u32)]) -> String {
    let mut exact: Vec<&Sample> = reference
        .iter()
        .filter(|s| s.kind == LabelKind::Exact)
        .collect();
    exact.sort_unstable_by_key(|s| (s.board.player, s.board.opponent));
    let pairs: Vec<(u32, f64, f64)> = labels
        .iter()
        .filter_map(|s| {
            let i = exact
                .binary_search_by_key(&(s.board.player, s.board.opponent), |r| {
                    (r.board.player, r.board.opponent)
                })
                .ok()?;
            Some((
                s.board.empties(),
                f64::from(s.label),
                f64::from(exact[i].label),
            ))
        })
        .collect();
    let mut out = String::from(
        "| empties | n | MAE vs exact | RMSE | mean signed error |\n|---|---|---|---|---|\n",
    );
    for &(lo, hi) in bands {
        let band: Vec<(f64, f64)> = pairs
            .iter()
            .filter(|(e, _, _)| (lo..=hi).contains(e))
            .map(|&(_, l, y)| (l, y))
            .collect();
        if band.is_empty() {
            continue;
        }
        let e = errors(&band);
        let signed = band.iter().map(|(l, y)| l - y).sum::<f64>() / band.len() as f64;
        let _ = writeln!(
            out,
            "| {lo}–{hi} | {} | {:.2} | {:.2} | {:+.2} |",
            e.n, e.mae, e.rmse, signed
        );
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
        assert!((e.mean - (-3.0 + 0.0 - 4.0) / 3.0).abs() < 1e-12);
        assert_eq!(errors(&[]), Errors::default());
    }

    #[test]
    fn signed_error_measures_shrinkage_towards_zero() {
        // Underestimating |label| on both sides is negative; a zero label has no sign.
        let pairs = [(10.0, 20.0), (-16.0, -20.0), (5.0, 0.0)];
        assert!((signed_towards_label(&pairs) - (-10.0 - 4.0) / 2.0).abs() < 1e-12);
        assert_eq!(signed_towards_label(&[(25.0, 20.0)]), 5.0);
        assert_eq!(signed_towards_label(&[]), 0.0);
        // Towards the evaluation's sign: labels beyond the evaluation are negative.
        assert_eq!(
            signed_towards_eval(&[(10.0, 20.0), (-10.0, -14.0), (0.0, 9.0)]),
            -7.0
        );
    }

    #[test]
    fn breakdown_groups_exact_samples_by_score() {
        use bookfarm_engine::Board;
        use bookfarm_engine::eval::default_eval;
        let b = Board::start();
        let sample = |label: f32, kind| Sample {
            board: b,
            label,
            count: 1,
            kind,
        };
        let w = default_eval();
        let e0 = w.eval0(&b) as f32;
        let samples = [
            sample(e0 + 3.0, LabelKind::Exact),
            sample(e0 + 35.0, LabelKind::Exact),
            sample(e0 - 35.0, LabelKind::Exact),
            // Search labels are never analysed.
            sample(e0, LabelKind::Search),
        ];
        let t = breakdown(&w, &samples, &[], &[(60, 60)], By::Score);
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(rows[0].contains("| 1 | 3.00 |"), "{t}");
        // |e0 ± 35| fall in one group only when e0 is small, which the start position's is.
        assert!(rows[1].contains("| 2 | 35.00 | -35.00 |"), "{t}");
        assert_eq!(group_of(By::Score.edges(), 9), 0);
        assert_eq!(group_of(By::Score.edges(), 10), 1);
        assert_eq!(group_of(By::Score.edges(), 64), 4);
    }

    #[test]
    fn label_errors_pair_labels_with_exact_scores_of_the_same_position() {
        use bookfarm_engine::Board;
        let a = Board::start();
        let b = a.pass();
        let sample = |board, label: f32, kind| Sample {
            board,
            label,
            count: 1,
            kind,
        };
        let reference = [
            sample(a, 10.0, LabelKind::Exact),
            // A search label in the reference is no exact score: b is skipped.
            sample(b, 0.0, LabelKind::Search),
        ];
        let labels = [
            sample(a, 4.0, LabelKind::Search),
            sample(b, 30.0, LabelKind::Search),
        ];
        let t = label_errors(&reference, &labels, &[(60, 60), (0, 10)]);
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert_eq!(rows, ["| 60–60 | 1 | 6.00 | 6.00 | -6.00 |"], "{t}");
    }
}
