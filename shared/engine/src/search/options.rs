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
