//! Calibration of the probcut error model (the procedure behind `bookfarm-worker calibrate`).
//!
//! Procedure:
//! 1. Sample positions from real games (one position per selected game, games spread evenly
//!    over the file, the number of empties cycling through `min_empties..=max_empties`).
//! 2. Search every position without selectivity at every depth `0..=max_depth`.
//! 3. For each depth `d ≥ 3` and each shallow depth actually used by probcut — `pd =
//!    probcut_depth(d)` and `pd = 0` (the static evaluation gate) — collect the differences
//!    `v(d) − v(pd)`, grouped by empties bucket (width [`EMPTIES_BUCKET`]). The measured sigma of a
//!    group is the root mean square of its differences (probcut assumes `v(d) ≈ v(pd)` with no
//!    slope or bias, so the bias is part of the error).
//! 4. Selective endgames probcut at `d = n` (every node of a selective endgame search from
//!    [`super::SearchOptions::midgame_to_endgame`] empties up), where `pd = probcut_depth(n)` is
//!    far deeper than the midgame regression reaches. Positions sampled in
//!    [`CalibrationConfig::exact_empties`] are also solved exactly, and `exact − v(pd)` is
//!    collected in groups of their own, so that the fit does not extrapolate to these depths.
//! 5. Fit Edax's model `sigma = a·s² + b·s + c`, `s = ka·n + kb·d + kc·pd` to the groups by
//!    weighted least squares (Levenberg–Marquardt, weights = group sizes, started from Edax's
//!    constants).
//!
//! The fitted model is written in the text format of [`ProbcutModel::parse`], together with the
//! measured groups as comments, so that the file documents its own origin.

use super::Searcher;
use super::probcut::{ProbcutModel, probcut_depth};
use crate::board::Board;
use crate::formats::transcript::parse_transcript;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Width of an empties bucket.
pub const EMPTIES_BUCKET: u32 = 5;

/// Settings of a calibration run.
#[derive(Debug, Clone)]
pub struct CalibrationConfig {
    /// Deepest search depth.
    pub max_depth: u32,
    /// Fewest empties of a sampled position.
    pub min_empties: u32,
    /// Most empties of a sampled position.
    pub max_empties: u32,
    /// Empties of the positions also solved exactly (step 4); `None` measures midgame depths
    /// only.
    pub exact_empties: Option<RangeInclusive<u32>>,
}

impl Default for CalibrationConfig {
    fn default() -> CalibrationConfig {
        CalibrationConfig {
            max_depth: 10,
            min_empties: 20,
            max_empties: 50,
            exact_empties: None,
        }
    }
}

/// One measured group.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Mean number of empties of the group.
    pub n: f64,
    /// Deep depth.
    pub d: u32,
    /// Shallow depth.
    pub pd: u32,
    /// Measured sigma (root mean square of `v(d) − v(pd)`).
    pub sigma: f64,
    /// Number of positions.
    pub count: usize,
}

/// The result of a calibration.
#[derive(Debug, Clone)]
pub struct Fit {
    /// The fitted model.
    pub model: ProbcutModel,
    /// The measured groups.
    pub samples: Vec<Sample>,
    /// Weighted root mean square of (model − measured) over the groups.
    pub rms_error: f64,
    /// The same for Edax's constants, for comparison.
    pub edax_rms_error: f64,
}

/// Game records that yield no position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no readable game among {lines} lines (first error: {first_error})")]
pub struct NoGames {
    /// Non-empty lines seen.
    pub lines: usize,
    /// The first parse error.
    pub first_error: String,
}

/// Sample up to `count` positions from a game file with one move list per line (the first
/// whitespace-separated token of each line, e.g. `f5d6c3…`; unreadable lines are skipped), empties
/// cycling through `config.min_empties..=config.max_empties`.
pub fn positions_from_games_with(
    text: &str,
    count: usize,
    config: &CalibrationConfig,
) -> Result<Vec<Board>, NoGames> {
    sample_games(text, count, config.min_empties..=config.max_empties, false)
}

/// Up to `count` positions for the exact measurements (step 4), empties cycling through
/// [`CalibrationConfig::exact_empties`], from other games than [`positions_from_games_with`]'s
/// (the strides start half a stride later); none when the range is `None`.
pub fn exact_positions_from_games(
    text: &str,
    count: usize,
    config: &CalibrationConfig,
) -> Result<Vec<Board>, NoGames> {
    match &config.exact_empties {
        Some(range) if count > 0 => sample_games(text, count, range.clone(), true),
        _ => Ok(Vec::new()),
    }
}

fn sample_games(
    text: &str,
    count: usize,
    empties: RangeInclusive<u32>,
    offset: bool,
) -> Result<Vec<Board>, NoGames> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('%'))
        .collect();
    let stride = (lines.len() / count.max(1)).max(1);
    let (min_empties, max_empties) = (*empties.start(), *empties.end());
    let span = max_empties.saturating_sub(min_empties) + 1;
    let skip = if offset { stride / 2 } else { 0 };
    let mut out = Vec::new();
    let mut first_error = None;
    for (k, line) in lines.iter().skip(skip).step_by(stride).enumerate() {
        if out.len() >= count {
            break;
        }
        let token = line.split_whitespace().next().unwrap_or("");
        let boards = match parse_transcript(token).map(|g| g.replay()) {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                first_error.get_or_insert_with(|| e.to_string());
                continue;
            }
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                continue;
            }
        };
        let target = max_empties - (k as u32 * 7) % span;
        if let Some(b) = boards
            .iter()
            .find(|b| b.empties() <= target && b.moves() != 0)
        {
            out.push(*b);
        }
    }
    if out.is_empty() {
        return Err(NoGames {
            lines: lines.len(),
            first_error: first_error.unwrap_or_else(|| "no line".into()),
        });
    }
    Ok(out)
}

/// Measure the groups (steps 2–4 of the procedure).
pub fn measure(
    searcher: &mut Searcher,
    boards: &[Board],
    config: &CalibrationConfig,
) -> Vec<Sample> {
    let abort = AtomicBool::new(false);
    // (bucket, d, pd) -> (sum n, sum r², count)
    let mut groups: BTreeMap<(u32, u32, u32), (f64, f64, usize)> = BTreeMap::new();
    for b in boards {
        let n = b.empties();
        let max_d = config.max_depth.min(n.saturating_sub(1));
        let mut value = |d: u32| searcher.search_depth(b, d, 5, 0, &abort).score;
        let values: Vec<i32> = (0..=max_d).map(&mut value).collect();
        let mut add = |d: u32, pd: u32, r: i32| {
            let g = groups
                .entry((n / EMPTIES_BUCKET, d, pd))
                .or_insert((0.0, 0.0, 0));
            g.0 += f64::from(n);
            g.1 += f64::from(r) * f64::from(r);
            g.2 += 1;
        };
        for d in 3..=max_d {
            for pd in [probcut_depth(d), 0] {
                if pd < d {
                    add(d, pd, values[d as usize] - values[pd as usize]);
                }
            }
        }
        if config
            .exact_empties
            .as_ref()
            .is_some_and(|r| r.contains(&n))
        {
            let exact = value(n);
            for pd in [probcut_depth(n), 0] {
                let shallow = match values.get(pd as usize) {
                    Some(&v) => v,
                    None => value(pd),
                };
                add(n, pd, exact - shallow);
            }
        }
    }
    groups
        .into_iter()
        .filter(|(_, g)| g.2 >= 2)
        .map(|((_, d, pd), (sn, sr2, k))| Sample {
            n: sn / k as f64,
            d,
            pd,
            sigma: (sr2 / k as f64).sqrt(),
            count: k,
        })
        .collect()
}

fn params(m: &ProbcutModel) -> [f64; 6] {
    [m.ka, m.kb, m.kc, m.a, m.b, m.c]
}

fn model(p: &[f64; 6]) -> ProbcutModel {
    ProbcutModel {
        ka: p[0],
        kb: p[1],
        kc: p[2],
        a: p[3],
        b: p[4],
        c: p[5],
    }
}

fn predict(p: &[f64; 6], s: &Sample) -> f64 {
    let x = p[0] * s.n + p[1] * f64::from(s.d) + p[2] * f64::from(s.pd);
    p[3] * x * x + p[4] * x + p[5]
}

/// Weighted root mean square error of a model on the samples.
pub fn rms_error(m: &ProbcutModel, samples: &[Sample]) -> f64 {
    let p = params(m);
    let (mut se, mut w) = (0.0, 0.0);
    for s in samples {
        let e = predict(&p, s) - s.sigma;
        se += s.count as f64 * e * e;
        w += s.count as f64;
    }
    if w > 0.0 { (se / w).sqrt() } else { 0.0 }
}

/// Solve the 6×6 system `a·x = b` by Gaussian elimination with partial pivoting.
#[allow(clippy::needless_range_loop)] // index arithmetic mirrors the textbook algorithm
fn solve6(mut a: [[f64; 6]; 6], mut b: [f64; 6]) -> Option<[f64; 6]> {
    for col in 0..6 {
        let piv = (col..6).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for row in col + 1..6 {
            let f = a[row][col] / a[col][col];
            for k in col..6 {
                a[row][k] -= f * a[col][k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 6];
    for row in (0..6).rev() {
        let mut s = b[row];
        for k in row + 1..6 {
            s -= a[row][k] * x[k];
        }
        x[row] = s / a[row][row];
    }
    Some(x)
}

/// Fit the model to the samples (step 5), starting from `start`.
#[allow(clippy::needless_range_loop)] // 6×6 normal equations indexed as in the textbook
pub fn fit(samples: &[Sample], start: &ProbcutModel) -> ProbcutModel {
    let mut p = params(start);
    let cost = |p: &[f64; 6]| -> f64 {
        samples
            .iter()
            .map(|s| {
                let e = predict(p, s) - s.sigma;
                s.count as f64 * e * e
            })
            .sum()
    };
    let mut lambda = 1e-3;
    let mut current = cost(&p);
    for _ in 0..500 {
        let mut jtj = [[0.0; 6]; 6];
        let mut jtr = [0.0; 6];
        for s in samples {
            let x = p[0] * s.n + p[1] * f64::from(s.d) + p[2] * f64::from(s.pd);
            let g = 2.0 * p[3] * x + p[4];
            let j = [
                g * s.n,
                g * f64::from(s.d),
                g * f64::from(s.pd),
                x * x,
                x,
                1.0,
            ];
            let r = predict(&p, s) - s.sigma;
            let w = s.count as f64;
            for a in 0..6 {
                jtr[a] += w * j[a] * r;
                for b in 0..6 {
                    jtj[a][b] += w * j[a] * j[b];
                }
            }
        }
        let mut improved = false;
        for _ in 0..20 {
            let mut m = jtj;
            for (a, row) in m.iter_mut().enumerate() {
                row[a] += lambda * (jtj[a][a] + 1e-12);
            }
            let rhs = jtr.map(|v| -v);
            let Some(delta) = solve6(m, rhs) else {
                lambda *= 10.0;
                continue;
            };
            let mut q = p;
            for a in 0..6 {
                q[a] += delta[a];
            }
            let c = cost(&q);
            if c.is_finite() && c < current {
                p = q;
                current = c;
                lambda = (lambda / 3.0).max(1e-12);
                improved = true;
                break;
            }
            lambda *= 10.0;
        }
        if !improved {
            break;
        }
    }
    model(&p)
}

/// Run the whole procedure.
pub fn calibrate(searcher: &mut Searcher, boards: &[Board], config: &CalibrationConfig) -> Fit {
    let samples = measure(searcher, boards, config);
    let model = fit(&samples, &ProbcutModel::EDAX);
    Fit {
        rms_error: rms_error(&model, &samples),
        edax_rms_error: rms_error(&ProbcutModel::EDAX, &samples),
        model,
        samples,
    }
}

/// The parameter file: the model plus its provenance and measurements as comments.
pub fn report(fit: &Fit, positions: &usize, games: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# probcut sigma model fitted by `bookfarm-worker calibrate`"
    );
    let _ = writeln!(
        s,
        "# games: {} ({positions} positions); weighted rms error {:.3} (edax constants: {:.3})",
        games.file_name().map_or_else(
            || games.display().to_string(),
            |f| f.to_string_lossy().into_owned()
        ),
        fit.rms_error,
        fit.edax_rms_error
    );
    let _ = writeln!(
        s,
        "# sigma(n, d, pd) = a*s^2 + b*s + c, s = ka*n + kb*d + kc*pd"
    );
    s.push_str(&fit.model.to_text());
    let _ = writeln!(s, "# measured groups: n d pd sigma count fitted");
    for x in &fit.samples {
        let _ = writeln!(
            s,
            "# {:.1} {} {} {:.3} {} {:.3}",
            x.n,
            x.d,
            x.pd,
            x.sigma,
            x.count,
            fit.model.sigma_f(x.n, x.d, x.pd)
        );
    }
    s
}

impl ProbcutModel {
    /// [`ProbcutModel::sigma`] for a fractional empties count.
    pub fn sigma_f(&self, n: f64, d: u32, pd: u32) -> f64 {
        let s = self.ka * n + self.kb * f64::from(d) + self.kc * f64::from(pd);
        self.a * s * s + self.b * s + self.c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_known_model() {
        let truth = ProbcutModel {
            ka: -0.08,
            kb: 0.25,
            kc: -0.5,
            a: 0.05,
            b: 1.0,
            c: 4.0,
        };
        let mut samples = Vec::new();
        for n in [20.0, 25.0, 30.0, 35.0, 40.0, 45.0] {
            for d in 3..=12u32 {
                for pd in [probcut_depth(d), 0] {
                    samples.push(Sample {
                        n,
                        d,
                        pd,
                        sigma: truth.sigma_f(n, d, pd),
                        count: 10,
                    });
                }
            }
        }
        let m = fit(&samples, &ProbcutModel::EDAX);
        assert!(
            rms_error(&m, &samples) < 0.01,
            "rms {}",
            rms_error(&m, &samples)
        );
        assert!(rms_error(&ProbcutModel::EDAX, &samples) > 0.1);
    }

    #[test]
    fn sampling_from_games() {
        let games =
            "f5d6c3d3c4f4f6f3e6e7d7c6 0\n\nnot-a-game 3\nf5f4e3f6g5f2c3e6f3g4g6e2g3h2f1 -10\n";
        let config = CalibrationConfig {
            max_depth: 3,
            min_empties: 48,
            max_empties: 56,
            exact_empties: Some(45..=47),
        };
        let b = positions_from_games_with(games, 10, &config).expect("two games");
        assert_eq!(b.len(), 2);
        assert!(b.iter().all(|b| (48..=56).contains(&b.empties())));
        let x = exact_positions_from_games(games, 10, &config).expect("a game");
        assert!(!x.is_empty() && x.iter().all(|b| (45..=47).contains(&b.empties())));
        let none = CalibrationConfig {
            exact_empties: None,
            ..config
        };
        assert!(
            exact_positions_from_games(games, 10, &none)
                .expect("no sampling")
                .is_empty()
        );
        assert!(positions_from_games_with("zz\n", 5, &CalibrationConfig::default()).is_err());
    }

    #[test]
    fn exact_groups_measure_the_selective_endgame() {
        // A game whose positions at 14 empties are sampled; the exact groups are at d = n.
        let games = "f5f4e3f6g5f2c3e6f3g4g6e2g3h2f1h5d3d1e1g1h6h4h3h7d6d2e7c4c5e8f7f8g7c6d8d7c8c7c2b8b6a6b7a8a7a5b5b1c1g2h1h8g8a4a1b4a3a2b3b2 -10\n";
        let config = CalibrationConfig {
            max_depth: 4,
            min_empties: 14,
            max_empties: 14,
            exact_empties: Some(14..=14),
        };
        let boards = positions_from_games_with(games, 1, &config).expect("one game");
        assert_eq!(boards.len(), 1);
        let n = boards[0].empties();
        assert_eq!(n, 14);
        // Two copies make groups of two (groups of one are dropped).
        let boards = [boards[0], boards[0]];
        let mut searcher = Searcher::new(crate::eval::default_eval());
        let samples = measure(&mut searcher, &boards, &config);
        let abort = AtomicBool::new(false);
        let exact = searcher.search_depth(&boards[0], n, 5, 0, &abort).score;
        for pd in [probcut_depth(n), 0] {
            let shallow = searcher.search_depth(&boards[0], pd, 5, 0, &abort).score;
            let g = samples
                .iter()
                .find(|s| s.d == n && s.pd == pd)
                .expect("an exact group");
            assert_eq!(g.count, 2);
            assert!((g.sigma - f64::from((exact - shallow).abs())).abs() < 1e-9);
        }
        // Midgame groups stop at max_depth; without the exact range there is no d = n group.
        assert!(samples.iter().all(|s| s.d <= 4 || s.d == n));
        let midgame_only = CalibrationConfig {
            exact_empties: None,
            ..config
        };
        let samples = measure(&mut searcher, &boards, &midgame_only);
        assert!(!samples.is_empty() && samples.iter().all(|s| s.d <= 4));
    }

    #[test]
    fn solve6_identity() {
        let mut a = [[0.0; 6]; 6];
        for (i, row) in a.iter_mut().enumerate() {
            row[i] = 2.0;
        }
        let x = solve6(a, [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]).expect("regular");
        assert_eq!(x, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
}
