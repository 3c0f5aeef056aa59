//! Exact labels from the engine's endgame solver ([`bookfarm_engine::endgame::solve`]).

use bookfarm_engine::Board;
use bookfarm_engine::endgame::{EndgameContext, solve};

/// Exact score of `board` for the side to move (perfect play, empties to the winner), using a
/// per-thread context `ctx` (its table stays valid across positions). Returns the score and the
/// nodes searched.
pub fn solve_exact(board: &Board, ctx: &mut EndgameContext) -> (i32, u64) {
    let before = ctx.nodes;
    let v = solve(board, -64, 64, ctx);
    (v, ctx.nodes - before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::formats::obf::parse_obf;
    use bookfarm_engine::testdata::shared_dir_or_skip;

    #[test]
    fn ffo_easy_positions_match_their_scores() {
        let Some(shared) = shared_dir_or_skip() else {
            return;
        };
        let text =
            std::fs::read_to_string(shared.join("data/ffo/fforum-1-19.obf")).expect("readable obf");
        let positions = parse_obf(&text).expect("valid obf");
        // FFO #1..#7 have 14 empties with best scores +18 +10 +2 0 +32 +14 +8 (edax-spec §10.2).
        let expect = [18, 10, 2, 0, 32, 14, 8];
        let mut ctx = EndgameContext::with_tt_bits(12);
        for (p, want) in positions.iter().zip(expect) {
            assert_eq!(p.best_score, Some(want), "file score of {}", p.board);
            assert_eq!(solve_exact(&p.board, &mut ctx).0, want, "{}", p.board);
        }
    }
}
