//! Edax's search levels (edax-spec §6, `search_global_init`): for a level 0..=60 and a number of
//! empty squares, the search depth and the selectivity index.
//!
//! A depth equal to the number of empties means an exact (or selective, when the selectivity is
//! below [`NO_SELECTIVITY`]) endgame search.

/// Selectivity index meaning "no probcut" (100 %).
pub const NO_SELECTIVITY: u8 = 5;

/// Highest level.
pub const MAX_LEVEL: u8 = 60;

/// Probcut confidence `t` per selectivity index 0..=5 (Edax's `selectivity_table`).
pub const SELECTIVITY_T: [f64; 6] = [1.1, 1.5, 2.0, 2.6, 3.3, 999.0];

/// Confidence in percent per selectivity index 0..=5.
pub const SELECTIVITY_PERCENT: [u8; 6] = [73, 87, 95, 98, 99, 100];

/// The selectivity index for a percentage (73, 87, 95, 98, 99 or 100), or `None`.
pub fn selectivity_from_percent(percent: u32) -> Option<u8> {
    SELECTIVITY_PERCENT
        .iter()
        .position(|&p| u32::from(p) == percent)
        .and_then(|i| u8::try_from(i).ok())
}

/// The percentage of a selectivity index (`100` for anything at or above [`NO_SELECTIVITY`]).
pub fn selectivity_percent(selectivity: u8) -> u8 {
    SELECTIVITY_PERCENT[usize::from(selectivity.min(NO_SELECTIVITY))]
}

/// `(depth, selectivity)` of Edax's `LEVEL[level][empties]`.
///
/// Levels above 60 are treated as 60 and empties above 60 as 60. When the returned depth equals
/// `empties`, the search is an endgame search (exact when the selectivity is 5).
///
/// ```
/// use bookfarm_engine::level::level_params;
/// assert_eq!(level_params(21, 36), (21, 0));
/// assert_eq!(level_params(21, 30), (30, 1));
/// assert_eq!(level_params(21, 24), (24, 5));
/// assert_eq!(level_params(10, 40), (10, 5));
/// ```
pub fn level_params(level: u8, empties: u32) -> (u32, u8) {
    let level = level.min(MAX_LEVEL);
    let e = empties.min(60);
    let l = u32::from(level);
    let exact = |sel: u8| (e, sel);
    let mid = (l, 0u8);
    // Each band lists (max empties, selectivity) of its exact rows, in increasing empties.
    let rows: &[(u32, u8)] = match level {
        0 => return (0, NO_SELECTIVITY),
        1..=10 => {
            return if e <= 2 * l {
                exact(NO_SELECTIVITY)
            } else {
                (l, NO_SELECTIVITY)
            };
        }
        11 | 12 => &[(21, 5), (24, 3)],
        13..=18 => &[(21, 5), (24, 3), (27, 1)],
        19..=21 => &[(24, 5), (27, 3), (30, 1)],
        22..=24 => &[(24, 5), (27, 4), (30, 2), (33, 0)],
        25..=27 => &[(27, 5), (30, 3), (33, 1)],
        28 | 29 => &[(27, 5), (30, 4), (33, 2), (36, 0)],
        30 | 31 => &[(30, 5), (33, 3), (36, 1)],
        32 | 33 => &[(30, 5), (33, 4), (36, 2), (39, 0)],
        34 | 35 => &[(30, 5), (33, 4), (36, 3), (39, 1)],
        36..=59 => {
            return if e <= l - 6 {
                exact(5)
            } else if e <= l - 3 {
                exact(4)
            } else if e <= l {
                exact(3)
            } else if e <= l + 3 {
                exact(2)
            } else if e <= l + 6 {
                exact(1)
            } else if e <= l + 9 {
                exact(0)
            } else {
                mid
            };
        }
        _ => return exact(NO_SELECTIVITY),
    };
    rows.iter()
        .find(|&&(max, _)| e <= max)
        .map_or(mid, |&(_, sel)| exact(sel))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One band of the expanded table of edax-spec §6: `lo..=hi` empties → `(depth, percent)`,
    /// where depth `None` means "exact" (depth = empties).
    type Band = (u32, u32, Option<u32>, u8);

    /// The expanded table of edax-spec §6, written independently of the rules in `level_params`.
    fn expanded(level: u32) -> Vec<Band> {
        let l = level;
        let x = None;
        let d = Some(l);
        match level {
            0 => vec![(0, 0, x, 100), (1, 60, Some(0), 100)],
            1..=10 => vec![(0, 2 * l, x, 100), (2 * l + 1, 60, d, 100)],
            11 | 12 => vec![(0, 21, x, 100), (22, 24, x, 98), (25, 60, d, 73)],
            13..=18 => vec![
                (0, 21, x, 100),
                (22, 24, x, 98),
                (25, 27, x, 87),
                (28, 60, d, 73),
            ],
            19..=21 => vec![
                (0, 24, x, 100),
                (25, 27, x, 98),
                (28, 30, x, 87),
                (31, 60, d, 73),
            ],
            22..=24 => vec![
                (0, 24, x, 100),
                (25, 27, x, 99),
                (28, 30, x, 95),
                (31, 33, x, 73),
                (34, 60, d, 73),
            ],
            25..=27 => vec![
                (0, 27, x, 100),
                (28, 30, x, 98),
                (31, 33, x, 87),
                (34, 60, d, 73),
            ],
            28 | 29 => vec![
                (0, 27, x, 100),
                (28, 30, x, 99),
                (31, 33, x, 95),
                (34, 36, x, 73),
                (37, 60, d, 73),
            ],
            30 | 31 => vec![
                (0, 30, x, 100),
                (31, 33, x, 98),
                (34, 36, x, 87),
                (37, 60, d, 73),
            ],
            32 | 33 => vec![
                (0, 30, x, 100),
                (31, 33, x, 99),
                (34, 36, x, 95),
                (37, 39, x, 73),
                (40, 60, d, 73),
            ],
            34 | 35 => vec![
                (0, 30, x, 100),
                (31, 33, x, 99),
                (34, 36, x, 98),
                (37, 39, x, 87),
                (40, 60, d, 73),
            ],
            36 => vec![
                (0, 30, x, 100),
                (31, 33, x, 99),
                (34, 36, x, 98),
                (37, 39, x, 95),
                (40, 42, x, 87),
                (43, 45, x, 73),
                (46, 60, d, 73),
            ],
            37..=59 => {
                let clip = |v: u32| v.min(60);
                let mut v = vec![
                    (0, l - 6, x, 100),
                    (l - 5, l - 3, x, 99),
                    (l - 2, l, x, 98),
                    (l + 1, clip(l + 3), x, 95),
                    (l + 4, clip(l + 6), x, 87),
                    (l + 7, clip(l + 9), x, 73),
                    (l + 10, 60, d, 73),
                ];
                v.retain(|&(lo, hi, _, _)| lo <= hi && lo <= 60);
                v
            }
            _ => vec![(0, 60, x, 100)],
        }
    }

    #[test]
    fn matches_expanded_table() {
        for level in 0..=60u8 {
            let bands = expanded(u32::from(level));
            for e in 0..=60u32 {
                let band = bands
                    .iter()
                    .find(|&&(lo, hi, _, _)| lo <= e && e <= hi)
                    .unwrap_or_else(|| panic!("level {level} empties {e} not covered"));
                let want_depth = band.2.unwrap_or(e);
                let want_sel = selectivity_from_percent(u32::from(band.3)).expect("valid percent");
                assert_eq!(
                    level_params(level, e),
                    (want_depth, want_sel),
                    "level {level} empties {e}"
                );
            }
        }
    }

    #[test]
    fn spec_examples() {
        assert_eq!(level_params(21, 36), (21, 0));
        assert_eq!(level_params(21, 30), (30, 1));
        assert_eq!(level_params(21, 24), (24, 5));
        assert_eq!(level_params(10, 40), (10, 5));
        assert_eq!(level_params(0, 30), (0, 5));
        assert_eq!(level_params(60, 45), (45, 5));
        // Out-of-range inputs are clamped rather than panicking.
        assert_eq!(level_params(200, 70), (60, 5));
    }

    #[test]
    fn percent_mapping() {
        for (i, p) in SELECTIVITY_PERCENT.iter().enumerate() {
            assert_eq!(selectivity_from_percent(u32::from(*p)), Some(i as u8));
            assert_eq!(selectivity_percent(i as u8), *p);
        }
        assert_eq!(selectivity_from_percent(50), None);
    }
}
