//! Property tests: symmetry and canonical form, move-generation invariants on random and
//! reachable boards (un-moves against forward moves included), backend agreement, and "never
//! panics" for every parser on arbitrary input.

use bookfarm_engine::board::{BitIter, flips_portable, moves_portable};
use bookfarm_engine::flip::Backend;
use bookfarm_engine::formats::{ggf, obf, records, transcript, wthor};
use bookfarm_engine::symmetry::{
    AVX2_ORDER, GENERIC_ORDER, canonical, canonical_with_order, inverse, transform, transform_bits,
    transform_square,
};
use bookfarm_engine::{Board, Square, unmove};
use proptest::prelude::*;

/// Arbitrary non-overlapping boards (most are unreachable, which is fine for these laws).
fn any_board() -> impl Strategy<Value = Board> {
    (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(occ, split, sparse)| {
        // Mix dense and sparse boards.
        let occ = if sparse & 1 == 0 { occ } else { occ & sparse };
        Board {
            player: occ & split,
            opponent: occ & !split,
        }
    })
}

/// Boards reached by playing `choices` (each picks among the legal moves) from the start.
fn reachable_board() -> impl Strategy<Value = Board> {
    proptest::collection::vec(any::<u8>(), 0..60).prop_map(|choices| play_choices(&choices).0)
}

/// Play from the start, each choice picking among the legal moves (a forced pass uses up a choice);
/// stops at game over. Returns the final board and the moves played, passes included.
fn play_choices(choices: &[u8]) -> (Board, Vec<bookfarm_engine::Move>) {
    let mut b = Board::start();
    let mut moves = Vec::new();
    for &c in choices {
        let m = b.moves();
        if m == 0 {
            if b.pass().moves() == 0 {
                break;
            }
            b = b.pass();
            moves.push(bookfarm_engine::Move::Pass);
            continue;
        }
        let k = usize::from(c) % m.count_ones() as usize;
        let sq = BitIter(m).nth(k).expect("k < popcount");
        b = b.play(sq).expect("legal move");
        moves.push(bookfarm_engine::Move::Square(sq));
    }
    (b, moves)
}

fn boards() -> impl Strategy<Value = Board> {
    prop_oneof![any_board(), reachable_board()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn canonical_is_invariant(b in boards()) {
        let (c, s) = canonical(&b);
        prop_assert_eq!(transform(&b, s), c);
        for t in 0..8 {
            let tb = transform(&b, t);
            prop_assert_eq!(canonical(&tb).0, c);
            prop_assert_eq!(canonical_with_order(&tb, &GENERIC_ORDER).0, c);
            prop_assert_eq!(canonical_with_order(&tb, &AVX2_ORDER).0, c);
            prop_assert_eq!(transform(&tb, inverse(t)), b);
        }
    }

    #[test]
    fn transform_square_matches_one_bit_boards(x in 0u8..64, s in 0u8..8) {
        let sq = Square::new(x).expect("x < 64");
        prop_assert_eq!(transform_bits(sq.bit(), s), transform_square(sq, s).bit());
    }

    #[test]
    fn moves_and_flips_laws(b in boards()) {
        let moves = b.moves();
        prop_assert_eq!(moves & (b.player | b.opponent), 0);
        prop_assert_eq!(moves, moves_portable(b.player, b.opponent));
        for x in 0..64u8 {
            let sq = Square::new(x).expect("x < 64");
            let f = b.flips(sq);
            prop_assert_eq!(f, flips_portable(b.player, b.opponent, x));
            prop_assert_eq!(f & !b.opponent, 0, "flips must be opponent discs");
            let is_move = moves & sq.bit() != 0;
            prop_assert_eq!(is_move, f != 0 && b.empty() & sq.bit() != 0);
            if is_move {
                let n = b.play(sq).expect("legal");
                // The mover (now `opponent`) gains the new disc and the flipped ones.
                prop_assert_eq!(n.opponent.count_ones(), b.player.count_ones() + 1 + f.count_ones());
                prop_assert_eq!(n.player.count_ones(), b.opponent.count_ones() - f.count_ones());
                prop_assert_eq!(n.empties() + 1, b.empties());
                prop_assert_eq!(n.player & n.opponent, 0);
            } else {
                prop_assert!(b.play(sq).is_err());
            }
        }
    }

    #[test]
    fn moves_and_flips_commute_with_symmetries(b in boards(), s in 0u8..8) {
        let t = transform(&b, s);
        prop_assert_eq!(t.moves(), transform_bits(b.moves(), s));
        for sq in Square::all() {
            prop_assert_eq!(t.flips(transform_square(sq, s)), transform_bits(b.flips(sq), s));
        }
    }

    #[test]
    fn every_unmove_plays_forward_to_the_board(b in boards()) {
        let mut seen = std::collections::HashSet::new();
        for (p, sq) in unmove::unmoves(&b) {
            prop_assert_eq!(p.player & p.opponent, 0);
            prop_assert!(p.moves() & sq.bit() != 0, "{} is not legal on {}", sq, p);
            prop_assert_eq!(p.play(sq).expect("legal"), b);
            prop_assert!(seen.insert((p, sq)), "un-move reported twice");
        }
        if let Some(p) = unmove::pass_predecessor(&b) {
            prop_assert_eq!(p.play_move(bookfarm_engine::Move::Pass).expect("forced pass"), b);
        }
    }

    #[test]
    fn every_forward_move_is_an_unmove(b in boards()) {
        for sq in b.legal_squares() {
            let next = b.play(sq).expect("legal");
            prop_assert!(unmove::unmoves(&next).contains(&(b, sq)), "{} {} missing", b, sq);
        }
        if b.must_pass() {
            prop_assert_eq!(unmove::pass_predecessor(&b.pass()), Some(b));
        }
    }

    #[test]
    fn every_backend_agrees(b in boards()) {
        for backend in Backend::available() {
            let k = backend.kernels().expect("available");
            prop_assert_eq!(k.moves(b.player, b.opponent), moves_portable(b.player, b.opponent));
            for x in 0..64u8 {
                prop_assert_eq!(k.flips(b.player, b.opponent, x), flips_portable(b.player, b.opponent, x), "{}", backend);
            }
        }
    }

    #[test]
    fn text_parsers_never_panic(s in "\\PC*") {
        let _ = obf::parse_obf(&s);
        let _ = obf::parse_flippy(&s);
        let _ = transcript::parse_transcript(&s);
        let _ = ggf::parse_ggf(&s);
        let _ = records::read_logistello(&s);
        let _ = records::read_egaroucid(&s);
        let _ = records::read_eothello(&s);
    }

    #[test]
    fn structured_text_never_panics(
        cells in "[XOxo.*bw\\- ]{0,70}",
        side in "[XOBW* ]{0,2}",
        fields in proptest::collection::vec("[A-Ha-hPp][1-8Aa]?:?[+-]?[0-9]{0,3}", 0..6),
        moves in "([a-hA-H][1-8]|pa| ){0,70}",
    ) {
        let line = format!("{cells} {side}; {};", fields.join("; "));
        let _ = obf::parse_obf(&line);
        let _ = obf::parse_flippy(&format!("{cells} Black {} {}", fields.len(), side.len()));
        let _ = transcript::parse_transcript(&moves);
        let _ = ggf::parse_ggf(&format!("(;GM[Othello]TY[8]BO[8 {cells} *]B[{moves}]W[{side}];)"));
        let _ = records::read_logistello(&format!("+{moves}: {}", fields.len()));
        let _ = records::read_eothello(&format!("{}\n1,1,{moves}", records::EOTHELLO_HEADER));
    }

    #[test]
    fn wthor_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = wthor::read_wtb(&bytes);
        let _ = wthor::read_names(&bytes, wthor::PLAYER_NAME_LEN);
        let _ = wthor::read_names(&bytes, 0);
    }

    #[test]
    fn wthor_mutated_records(
        games in proptest::collection::vec(reachable_game(), 1..4),
        mutations in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
    ) {
        // Valid files from real games round-trip; the same files with a few bytes changed must
        // either parse (and then replay) or fail cleanly.
        let header = wthor::WthorHeader { depth: 24, ..Default::default() };
        let records: Vec<wthor::WthorGame> = games
            .into_iter()
            .map(|game| wthor::WthorGame {
                tournament: 1,
                black_player: 2,
                white_player: 3,
                black_score: 32,
                theoretical_black_score: 32,
                game,
            })
            .collect();
        let bytes = wthor::write_wtb(&header, &records);
        let (_, read) = wthor::read_wtb(&bytes).expect("valid file");
        prop_assert_eq!(&read, &records);
        let mut bad = bytes;
        for (at, v) in mutations {
            let n = bad.len();
            bad[at % n] = v;
        }
        if let Ok((_, read)) = wthor::read_wtb(&bad) {
            for g in &read {
                prop_assert!(g.game.replay().is_ok());
            }
        }
    }

    #[test]
    fn transcripts_round_trip(b in reachable_game()) {
        let text = b.to_transcript();
        prop_assert_eq!(transcript::parse_transcript(&text), Ok(b.clone()));
        prop_assert_eq!(transcript::parse_transcript(&text.to_uppercase()), Ok(b));
    }
}

/// Games from random legal move choices (passes included where forced).
fn reachable_game() -> impl Strategy<Value = bookfarm_engine::formats::Game> {
    proptest::collection::vec(any::<u8>(), 0..70).prop_map(|choices| {
        let (_, mut moves) = play_choices(&choices);
        // A trailing pass with nothing after it is dropped by the transcript writer and not
        // re-inserted by the reader (a pass is inferred only before a move).
        if moves.last() == Some(&bookfarm_engine::Move::Pass) {
            moves.pop();
        }
        bookfarm_engine::formats::Game { moves }
    })
}
