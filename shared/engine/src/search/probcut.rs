//! Multi-probcut (Buro): a shallow search at depth `pd` predicts the deep search at depth `d`;
//! when the prediction is outside the window by `t·sigma`, the node is cut.
//!
//! The error model is Edax's (search.c `get_sigma`, edax-spec §8.5 item 5):
//! `sigma(n, d, pd) = a·s² + b·s + c` with `s = A·n + B·d + C·pd`, where `n` is the number of empty
//! squares. [`ProbcutModel::EDAX`] holds Edax's published constants and is the default. The
//! `calibrate` tool (see [`super::calibrate`]) fits the same model on our own evaluation and writes
//! it in the text format read by [`ProbcutModel::parse`].

/// The sigma model `sigma(n, d, pd) = a·s² + b·s + c`, `s = ka·n + kb·d + kc·pd`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbcutModel {
    /// Coefficient of the empties count in `s`.
    pub ka: f64,
    /// Coefficient of the deep depth in `s`.
    pub kb: f64,
    /// Coefficient of the shallow depth in `s`.
    pub kc: f64,
    /// Quadratic coefficient.
    pub a: f64,
    /// Linear coefficient.
    pub b: f64,
    /// Constant.
    pub c: f64,
}

/// A probcut parameter text that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad probcut parameters: {0}")]
pub struct ProbcutParseError(pub String);

impl ProbcutModel {
    /// Edax 4.x's constants (search.c), fitted by its author on Edax's own evaluation.
    pub const EDAX: ProbcutModel = ProbcutModel {
        ka: -0.100_267_99,
        kb: 0.310_277_33,
        kc: -0.577_726_03,
        a: 0.075_856_21,
        b: 1.164_926_47,
        c: 5.417_169_8,
    };

    /// Standard deviation (in discs) of `deep − shallow` for `n` empties, depth `d`, shallow
    /// depth `pd` (`pd = 0` is the static evaluation).
    #[inline]
    pub fn sigma(&self, n: u32, d: u32, pd: u32) -> f64 {
        let s = self.ka * f64::from(n) + self.kb * f64::from(d) + self.kc * f64::from(pd);
        self.a * s * s + self.b * s + self.c
    }

    /// Parse `key = value` lines (`ka kb kc a b c`; `#` starts a comment).
    pub fn parse(text: &str) -> Result<ProbcutModel, ProbcutParseError> {
        let mut vals: [Option<f64>; 6] = [None; 6];
        const KEYS: [&str; 6] = ["ka", "kb", "kc", "a", "b", "c"];
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| ProbcutParseError(format!("expected key = value, got {line:?}")))?;
            let k = k.trim();
            let i = KEYS
                .iter()
                .position(|&key| key == k)
                .ok_or_else(|| ProbcutParseError(format!("unknown key {k:?}")))?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| ProbcutParseError(format!("bad number for {k}: {:?}", v.trim())))?;
            if !v.is_finite() {
                return Err(ProbcutParseError(format!("non-finite value for {k}")));
            }
            vals[i] = Some(v);
        }
        let get =
            |i: usize| vals[i].ok_or_else(|| ProbcutParseError(format!("missing {}", KEYS[i])));
        Ok(ProbcutModel {
            ka: get(0)?,
            kb: get(1)?,
            kc: get(2)?,
            a: get(3)?,
            b: get(4)?,
            c: get(5)?,
        })
    }

    /// The text form read by [`ProbcutModel::parse`].
    pub fn to_text(&self) -> String {
        format!(
            "ka = {:.8}\nkb = {:.8}\nkc = {:.8}\na = {:.8}\nb = {:.8}\nc = {:.8}\n",
            self.ka, self.kb, self.kc, self.a, self.b, self.c
        )
    }
}

/// The model fitted by `bookfarm-worker calibrate` for the `eval-seed1.dat` weights; the file
/// records the command, the games, the measured groups and the fit quality.
pub const SEED1_PARAMS: &str = include_str!("probcut-seed1.txt");

/// The model fitted by `bookfarm-worker calibrate` for bookfarm's embedded default weights
/// (bookfarm-eval 1.8.0); [`crate::search::Searcher::new`] uses it with those weights.
pub const DEFAULT_WEIGHTS_PARAMS: &str = include_str!("probcut-bookfarm-eval-1.8.0.txt");

impl ProbcutModel {
    /// The model of [`SEED1_PARAMS`].
    pub fn calibrated_seed1() -> Result<ProbcutModel, ProbcutParseError> {
        ProbcutModel::parse(SEED1_PARAMS)
    }

    /// The model of [`DEFAULT_WEIGHTS_PARAMS`].
    pub fn calibrated_default_weights() -> Result<ProbcutModel, ProbcutParseError> {
        ProbcutModel::parse(DEFAULT_WEIGHTS_PARAMS)
    }

    /// The model a command-line `spec` names for a search with `eval`: `auto` (the calibrated
    /// model with bookfarm's embedded default weights, Edax's constants with any other, as
    /// [`crate::search::SearchOptions::for_eval`]), `edax`, `bookfarm` (the default weights'
    /// model), `seed1` (the synthetic seed-1 evaluation's), or else a model file written by
    /// `bookfarm-worker calibrate`.
    pub fn from_spec(
        spec: &str,
        eval: &std::sync::Arc<crate::eval::Eval>,
    ) -> Result<ProbcutModel, ProbcutSpecError> {
        let parsed = |r: Result<ProbcutModel, ProbcutParseError>| {
            r.map_err(|source| ProbcutSpecError::Parse {
                spec: spec.to_string(),
                source,
            })
        };
        match spec {
            "auto" if crate::eval::is_default_eval(eval) => {
                parsed(ProbcutModel::calibrated_default_weights())
            }
            "auto" | "edax" => Ok(ProbcutModel::EDAX),
            "bookfarm" => parsed(ProbcutModel::calibrated_default_weights()),
            "seed1" => parsed(ProbcutModel::calibrated_seed1()),
            path => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ProbcutSpecError::Read {
                        path: path.to_string(),
                        source,
                    })?;
                parsed(ProbcutModel::parse(&text))
            }
        }
    }
}

/// A probcut model named on a command line that cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ProbcutSpecError {
    /// The model file cannot be read.
    #[error("cannot read probcut model {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The model text is not a model.
    #[error("probcut model {spec}: {source}")]
    Parse {
        /// The spec or file.
        spec: String,
        /// Why.
        #[source]
        source: ProbcutParseError,
    },
}

impl Default for ProbcutModel {
    /// Edax's published model.
    fn default() -> ProbcutModel {
        ProbcutModel::EDAX
    }
}

/// Edax's shallow depth for a probcut at depth `d`: `2·floor(d/4) + (d & 1)`, or `d − 2` when that
/// is 0 (with `probcut_d` = 0.25).
#[inline]
pub fn probcut_depth(d: u32) -> u32 {
    let pd = 2 * (d / 4) + (d & 1);
    if pd == 0 { d.saturating_sub(2) } else { pd }
}

/// `(perr, eerr)`: the margins of the shallow search and of the static evaluation gate.
#[inline]
pub fn margins(model: &ProbcutModel, t: f64, n: u32, d: u32, pd: u32) -> (i32, i32) {
    let perr = (t * model.sigma(n, d, pd) + 0.5) as i32;
    let eerr = (t * 0.5 * (model.sigma(n, d, 0) + model.sigma(n, d, pd)) + 0.5) as i32;
    (perr, eerr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probcut_models() {
        let default = crate::eval::default_eval();
        let other = std::sync::Arc::new(crate::eval::Eval::default_weights());
        let probcut_model = ProbcutModel::from_spec;
        assert_eq!(
            probcut_model("edax", &default).ok(),
            Some(ProbcutModel::EDAX)
        );
        assert_eq!(probcut_model("auto", &other).ok(), Some(ProbcutModel::EDAX));
        let calibrated = ProbcutModel::calibrated_default_weights().ok();
        assert_eq!(probcut_model("auto", &default).ok(), calibrated);
        assert_eq!(probcut_model("bookfarm", &other).ok(), calibrated);
        assert!(probcut_model("seed1", &default).is_ok());
        assert!(probcut_model("/nonexistent/params.txt", &default).is_err());
    }

    #[test]
    fn depths() {
        assert_eq!(probcut_depth(4), 2);
        assert_eq!(probcut_depth(5), 3);
        assert_eq!(probcut_depth(8), 4);
        assert_eq!(probcut_depth(2), 0);
        assert_eq!(probcut_depth(21), 11);
    }

    #[test]
    fn edax_sigma_values() {
        let m = ProbcutModel::EDAX;
        // s = -0.10026799*40 + 0.31027733*21 - 0.57772603*11 = -3.83…; sigma is a few discs.
        let s = m.sigma(40, 21, 11);
        assert!((s - 2.1).abs() < 0.5, "sigma {s}");
        let (perr, eerr) = margins(&m, 1.1, 40, 21, 11);
        assert!(perr >= 1 && eerr >= perr);
    }

    #[test]
    fn shipped_calibration_parses() {
        let m = ProbcutModel::calibrated_seed1().expect("shipped file parses");
        let d = ProbcutModel::calibrated_default_weights().expect("shipped file parses");
        assert_ne!(d, m, "the default weights have their own calibration");
        // A fitted sigma is a positive number of discs over the calibrated range.
        for (n, d, pd) in [(20, 4, 2), (40, 8, 4), (50, 10, 4), (30, 6, 0)] {
            let s = m.sigma(n, d, pd);
            assert!(s > 0.0 && s < 30.0, "sigma({n}, {d}, {pd}) = {s}");
        }
    }

    #[test]
    fn parse_round_trip() {
        let m = ProbcutModel::EDAX;
        let back = ProbcutModel::parse(&m.to_text()).expect("parses");
        assert!((back.c - m.c).abs() < 1e-7);
        assert!(ProbcutModel::parse("ka = 1").is_err());
        assert!(ProbcutModel::parse("zz = 1").is_err());
        assert!(ProbcutModel::parse("ka = x").is_err());
    }
}
