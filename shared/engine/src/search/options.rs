//! Search tunables, with Edax's values as defaults.

use super::probcut::ProbcutModel;

/// Options of a [`super::Searcher`].
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// log2 of the number of transposition-table entries (Edax: 22; default 20, 32 MB).
    pub tt_bits: u32,
    /// log2 of the number of buckets of the exact solver's table for large solves (see
    /// [`crate::endgame::EndgameContext::with_tt_bits`]).
    pub endgame_tt_bits: u32,
    /// Root depths up to this value search every root move with an exact value and the full
    /// window (Edax's `MULTIPV_DEPTH` = 10).
    pub multipv_depth: u32,
    /// Stability cutoffs in null-window nodes (Edax's `USE_STABILITY`).
    pub stability_cutoff: bool,
    /// The probcut error model.
    pub probcut: ProbcutModel,
    /// Maximum nesting of probcut searches (Edax: 2).
    pub probcut_max_nesting: u32,
    /// Below this many empties, selective endgame searches become exact solves. Edax uses 15
    /// (`DEPTH_MIDGAME_TO_ENDGAME`); the default here is 21 because our exact solver is much
    /// faster per node than the midgame routines run at depth = empties (FFO #47, 25 empties,
    /// at 73 %: 46 s with 15, 15 s with 21; the exact solve takes 7 s). Below the threshold the
    /// result is exact, i.e. at least as accurate as Edax's selective value.
    pub midgame_to_endgame: u32,
}

impl Default for SearchOptions {
    fn default() -> SearchOptions {
        SearchOptions {
            tt_bits: 20,
            endgame_tt_bits: crate::endgame::DEFAULT_TT_BITS,
            multipv_depth: 10,
            stability_cutoff: true,
            probcut: ProbcutModel::default(),
            probcut_max_nesting: 2,
            midgame_to_endgame: 21,
        }
    }
}

/// Incremented whenever an engine change alters any leaf-search result (move, score, depth,
/// selectivity, exactness or node count) for the same options and weights, and whenever the
/// embedded default weights (with their probcut model) change. Part of the [`SearchSignature`]:
/// results are compared and reused across machines only under one signature.
pub const SEARCH_REVISION: u32 = 6;

impl SearchOptions {
    /// The options a searcher uses with `eval`: the defaults, with the probcut model calibrated
    /// for bookfarm's embedded weights when `eval` is them (Edax's model otherwise).
    pub fn for_eval(eval: &std::sync::Arc<crate::eval::Eval>) -> SearchOptions {
        let mut opts = SearchOptions::default();
        if crate::eval::default::is_default_eval(eval) {
            opts.probcut = ProbcutModel::calibrated_default_weights()
                .expect("the shipped probcut file parses (checked by tests)");
        }
        opts
    }

    /// The options that change results, as `key=value` words (the signature's options part;
    /// node counts depend on the table sizes, so they are included).
    pub fn describe(&self) -> String {
        let p = &self.probcut;
        let model = [p.ka, p.kb, p.kc, p.a, p.b, p.c]
            .iter()
            .map(|v| format!("{:x}", v.to_bits()))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "tt={} ett={} mpv={} stab={} pcn={} m2e={} pc={}",
            self.tt_bits,
            self.endgame_tt_bits,
            self.multipv_depth,
            u8::from(self.stability_cutoff),
            self.probcut_max_nesting,
            self.midgame_to_endgame,
            fnv(model.as_bytes()),
        )
    }
}

fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What a leaf search's results are a pure function of, besides its request: the engine build
/// (crate version and [`SEARCH_REVISION`]), the result-changing options and the evaluation
/// weights (their fingerprint). Two searchers with equal signatures return identical results
/// for every request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SearchSignature {
    /// Engine build: `bookfarm-engine/VERSION rREVISION`.
    pub engine: String,
    /// [`SearchOptions::describe`].
    pub options: String,
    /// Fingerprint of the evaluation weights.
    pub eval: String,
}

impl SearchSignature {
    /// The signature of `opts` with the weights whose fingerprint is `eval`.
    pub fn new(opts: &SearchOptions, eval: &str) -> SearchSignature {
        SearchSignature {
            engine: format!(
                "bookfarm-engine/{} r{SEARCH_REVISION}",
                env!("CARGO_PKG_VERSION")
            ),
            options: opts.describe(),
            eval: eval.to_string(),
        }
    }

    /// A short hash of the whole signature (16 hex digits).
    pub fn hash(&self) -> String {
        fnv(self.to_string().as_bytes())
    }

    /// Parse [`SearchSignature`]'s text form (`engine=…; options=…; eval=…`).
    pub fn parse(text: &str) -> Option<SearchSignature> {
        let mut parts = text.split("; ");
        let mut field = |name: &str| {
            parts
                .next()
                .and_then(|p| p.strip_prefix(name))
                .and_then(|p| p.strip_prefix('='))
                .map(str::to_string)
        };
        let sig = SearchSignature {
            engine: field("engine")?,
            options: field("options")?,
            eval: field("eval")?,
        };
        parts.next().is_none().then_some(sig)
    }

    /// The parts in which `self` differs from `other`, as `name: ours vs theirs`.
    pub fn differences(&self, other: &SearchSignature) -> Vec<String> {
        let mut out = Vec::new();
        for (name, a, b) in [
            ("engine", &self.engine, &other.engine),
            ("search options", &self.options, &other.options),
            ("evaluation", &self.eval, &other.eval),
        ] {
            if a != b {
                out.push(format!("{name}: {a} vs {b}"));
            }
        }
        out
    }
}

impl std::fmt::Display for SearchSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "engine={}; options={}; eval={}",
            self.engine, self.options, self.eval
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_round_trips_and_names_differences() {
        let a = SearchSignature::new(&SearchOptions::default(), "00ff");
        assert_eq!(SearchSignature::parse(&a.to_string()), Some(a.clone()));
        assert_eq!(SearchSignature::parse("engine=x; options=y"), None);
        let small = SearchOptions {
            tt_bits: 14,
            ..SearchOptions::default()
        };
        let b = SearchSignature::new(&small, "00ff");
        assert_ne!(a.hash(), b.hash());
        let d = a.differences(&b);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("search options: tt=20"), "{d:?}");
        let c = SearchSignature::new(&SearchOptions::default(), "1234");
        assert_eq!(
            a.differences(&c),
            vec!["evaluation: 00ff vs 1234".to_string()]
        );
    }
}
