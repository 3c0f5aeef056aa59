//! The book's reads: `show` takes move lists as the engine's transcript reader does.

use super::*;

#[test]
fn show_reads_move_lists_as_the_engine_does() {
    let f = fixture(1, 10, ServiceConfig::default());
    let game = bookfarm_engine::formats::transcript::parse_moves("f5d6").unwrap();
    f.c.add_games(&[game]).unwrap();
    drive(&f.c, 4);
    let start = f.c.show("").unwrap().expect("the start position");
    assert_eq!(start.board, canonical(&Board::start()).0);
    let b = f.c.show("f5d6").unwrap().expect("in the book");
    assert_eq!(b.board.empties(), 58);
    assert_eq!(
        f.c.show(" F5 D6\n").unwrap().map(|p| p.board),
        Some(b.board)
    );
    for bad in ["f5f5", "f5d", "f5pa", "f5é"] {
        assert!(
            matches!(f.c.show(bad), Err(CoordinatorError::InvalidArgument(_))),
            "{bad:?}"
        );
    }
}
