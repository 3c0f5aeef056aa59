use super::*;
use bookfarm_book::searches::analysis_request;
use bookfarm_engine::Move;
use bookfarm_engine::formats::transcript::board_after;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::{canonical, find_symmetry, transform, transform_move};
use std::collections::HashMap;
use std::time::Duration;

fn result(mv: Move, score: i32) -> LeafResult {
    LeafResult {
        mv,
        score,
        depth: 4,
        selectivity: 5,
        exact: false,
        nodes: 100,
        elapsed: Duration::from_millis(1),
    }
}

#[test]
fn an_analysis_is_found_from_every_orientation() {
    let b = board_after("f5d6c3").unwrap();
    let c = canonical(&b).0;
    let d3 = Move::Square(bookfarm_engine::Square::parse("d3").unwrap());
    // The result as the canonical board's searcher gives it.
    let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
    for level in [4, 6] {
        // The canonical board's move that is d3 on `b`.
        let back = find_symmetry(&b, &c).unwrap();
        known.insert(
            analysis_request(&b, level),
            result(transform_move(d3, back), level as i32),
        );
    }
    // A search of another request (excluded moves) is not an analysis.
    known.insert(
        LeafRequest {
            board: c,
            level: 8,
            excluded: 1,
        },
        result(d3, 0),
    );
    let seen = analysis_of(&b, |r| known.get(r).copied());
    assert_eq!(seen.iter().map(|a| a.level).collect::<Vec<_>>(), vec![4, 6]);
    assert!(seen.iter().all(|a| a.mv == d3), "{seen:?}");
    // From another orientation of the same position, the move follows the board.
    for s in 0..8 {
        let t = transform(&b, s);
        let seen = analysis_of(&t, |r| known.get(r).copied());
        assert_eq!(seen.len(), 2);
        let mv = seen[0].mv;
        let Move::Square(sq) = mv else {
            panic!("{mv:?}")
        };
        // The move is legal on the transformed board and leads where d3 leads.
        assert!(t.moves() & sq.bit() != 0, "symmetry {s}: {mv:?}");
        let Move::Square(want) = transform_move(d3, s) else {
            unreachable!()
        };
        assert_eq!(
            canonical(&t.play(sq).unwrap()).0,
            canonical(&t.play(want).unwrap()).0,
            "symmetry {s}"
        );
    }
}
