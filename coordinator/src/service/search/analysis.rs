//! The analysis of a position: its full-width leaf searches (every move, nothing excluded) at
//! increasing levels. The requests are those of the position's canonical board, so that every
//! orientation of it (every line that reaches it) finds them; and *any* full-width search of the
//! canonical board in the result store is part of its analysis, whichever program asked for it.

use bookfarm_book::query::move_text;
use bookfarm_engine::level::selectivity_percent;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::{canonical, find_symmetry, transform_move};
use bookfarm_engine::{Board, Move};
use std::time::Duration;

/// One full-width search of a position, in the orientation it was asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Analysis {
    /// The level searched.
    pub level: u8,
    /// The best move, in the queried board's coordinates.
    pub mv: Move,
    /// Its score for the side to move.
    pub score: i32,
    /// Depth searched.
    pub depth: u32,
    /// Selectivity index (0..=5, 5 = none).
    pub selectivity: u8,
    /// The score is the exact game value.
    pub exact: bool,
    /// Nodes searched.
    pub nodes: u64,
    /// The searcher's time.
    pub elapsed: Duration,
}

/// Every full-width search of `board` that `result` knows (levels 0..=60, lowest first), with
/// moves in `board`'s orientation.
pub fn analysis_of(
    board: &Board,
    result: impl Fn(&LeafRequest) -> Option<LeafResult>,
) -> Vec<Analysis> {
    let c = canonical(board).0;
    // The first symmetry that maps the canonical board back onto the queried one.
    let back = find_symmetry(&c, board).unwrap_or(0);
    (0..=bookfarm_engine::level::MAX_LEVEL)
        .filter_map(|level| {
            let r = result(&LeafRequest {
                board: c,
                level,
                excluded: 0,
            })?;
            Some(Analysis {
                level,
                mv: transform_move(r.mv, back),
                score: r.score,
                depth: r.depth,
                selectivity: r.selectivity,
                exact: r.exact,
                nodes: r.nodes,
                elapsed: r.elapsed,
            })
        })
        .collect()
}

impl Analysis {
    /// One line of text: `level 18: C4 +2 (depth 18 @73 %, 1234567 nodes, 0.81 s)`, an exact
    /// score written `exact`, the move in the case of the side to move (`black`: uppercase, as
    /// Edax's `book show`).
    pub fn line(&self, black: bool) -> String {
        let how = if self.exact {
            format!("depth {} exact", self.depth)
        } else if self.selectivity < bookfarm_engine::level::NO_SELECTIVITY {
            format!(
                "depth {} @{} %",
                self.depth,
                selectivity_percent(self.selectivity)
            )
        } else {
            format!("depth {}", self.depth)
        };
        format!(
            "level {}: {} {:+} ({how}, {} nodes, {:.2} s)",
            self.level,
            move_text(self.mv, black),
            self.score,
            self.nodes,
            self.elapsed.as_secs_f64()
        )
    }
}

/// An analysis as `book show` prints it: a title line, then one indented line per level
/// (nothing when there is none).
pub fn render_analysis(list: &[Analysis], black: bool) -> String {
    if list.is_empty() {
        return String::new();
    }
    let mut out = String::from("Searches of this position (every move):\n");
    for a in list {
        out.push_str("  ");
        out.push_str(&a.line(black));
        out.push('\n');
    }
    out
}
