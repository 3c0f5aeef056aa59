//! Edax's level table `LEVEL[level][empties] = (depth, selectivity)` (edax-spec §6), needed by
//! the negamax error bounds. Kept private to the book crate; the engine has its own copy for
//! searching, and a test cross-checks the examples of the spec.

/// Selectivity index meaning "no probcut".
pub(crate) const NO_SELECTIVITY: u8 = 5;

/// `(depth, selectivity)` for `level` (clamped to 60) and `empties` (clamped to 60).
pub(crate) fn level_params(level: u8, empties: u32) -> (u32, u8) {
    let l = u32::from(level.min(60));
    let e = empties.min(60);
    // Exact bands: (max empties, selectivity), increasing; past the last band: midgame depth L @ 0.
    let bands: &[(u32, u8)] = match l {
        0 => return (0, NO_SELECTIVITY),
        1..=10 => {
            return if e <= 2 * l {
                (e, NO_SELECTIVITY)
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
            let rows = [
                (l - 6, 5u8),
                (l - 3, 4),
                (l, 3),
                (l + 3, 2),
                (l + 6, 1),
                (l + 9, 0),
            ];
            return match rows.iter().find(|&&(max, _)| e <= max) {
                Some(&(_, sel)) => (e, sel),
                None => (l, 0),
            };
        }
        _ => return (e, NO_SELECTIVITY),
    };
    match bands.iter().find(|&&(max, _)| e <= max) {
        Some(&(_, sel)) => (e, sel),
        None => (l, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_examples() {
        assert_eq!(level_params(21, 36), (21, 0));
        assert_eq!(level_params(21, 30), (30, 1));
        assert_eq!(level_params(21, 24), (24, 5));
        assert_eq!(level_params(10, 40), (10, 5));
        assert_eq!(level_params(0, 30), (0, 5));
        assert_eq!(level_params(0, 0), (0, 5));
        assert_eq!(level_params(60, 60), (60, 5));
        assert_eq!(level_params(2, 4), (4, 5));
        assert_eq!(level_params(2, 5), (2, 5));
        // L36: 40-42 exact@87% (sel 1), 46-60 d36@73%.
        assert_eq!(level_params(36, 41), (41, 1));
        assert_eq!(level_params(36, 46), (36, 0));
        // L37..59, ranges clipped at 60.
        assert_eq!(level_params(55, 60), (60, 1));
        assert_eq!(level_params(55, 58), (58, 2));
        assert_eq!(level_params(40, 31), (31, 5));
        assert_eq!(level_params(40, 36), (36, 4));
        assert_eq!(level_params(40, 50), (40, 0));
    }
}
