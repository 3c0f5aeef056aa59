use super::*;
use bookfarm_engine::formats::obf::parse_obf;
use bookfarm_engine::formats::transcript::board_after;
use std::collections::HashMap;
use std::time::Duration;

/// Three positions, the second a duplicate of the first with another comment; White to move in
/// the third.
fn sample() -> String {
    let a = ObfPosition {
        board: board_after("f5d6c3").unwrap(),
        black_to_move: false,
        scores: Vec::new(),
        best_score: None,
        comment: Some("set 1".into()),
    };
    let b = ObfPosition {
        comment: Some("set 2 % with a percent".into()),
        ..a.clone()
    };
    let c = ObfPosition {
        board: board_after("f5").unwrap(),
        black_to_move: false,
        scores: Vec::new(),
        best_score: None,
        comment: None,
    };
    format!(
        "% a comment line\n{}\n\n{}\n{}\n",
        a.to_obf_line(),
        b.to_obf_line(),
        c.to_obf_line()
    )
}

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
fn an_input_keeps_every_position_and_searches_each_board_once() {
    let text = sample();
    let input = SearchSet::parse(&text, 10).unwrap();
    assert_eq!(input.len(), 3);
    assert_eq!(input.positions()[2].comment, None);
    assert_eq!(
        input.positions()[1].comment.as_deref(),
        Some("set 2 % with a percent")
    );
    let want: Vec<LeafRequest> = ["f5d6c3", "f5"]
        .iter()
        .map(|m| LeafRequest {
            board: board_after(m).unwrap(),
            level: 4,
            excluded: 0,
        })
        .collect();
    assert_eq!(input.requests(4), want);
    // The stored form gives the same positions back.
    let bytes = postcard::to_stdvec(&input).unwrap();
    assert_eq!(postcard::from_bytes::<SearchSet>(&bytes).unwrap(), input);
}

#[test]
fn a_malformed_input_is_refused_naming_the_line() {
    let mut lines: Vec<String> = sample().lines().map(str::to_string).collect();
    // Line 4 (the duplicate) gets a cell that is no disc.
    lines[3] = lines[3].replacen('-', "Z", 1);
    let e = SearchSet::parse(&lines.join("\n"), 10).unwrap_err();
    assert_eq!(e.to_string(), "line 4: bad board character 'Z'");
    let mut lines: Vec<String> = sample().lines().map(str::to_string).collect();
    lines[1] = lines[1].replacen(" O;", " Q;", 1);
    let e = SearchSet::parse(&lines.join("\n"), 10).unwrap_err();
    assert!(
        e.to_string().starts_with("line 2: bad or missing side"),
        "{e}"
    );
    assert_eq!(
        SearchSet::parse("% nothing\n\n", 10),
        Err(SearchInputError::Empty)
    );
    assert_eq!(
        SearchSet::parse(&sample(), 2),
        Err(SearchInputError::TooMany { n: 3, max: 2 })
    );
}

#[test]
fn an_output_holds_the_results_known_in_file_order_and_reads_back() {
    let input = SearchSet::parse(&sample(), 10).unwrap();
    let first = input.requests(4)[0];
    let d3 = Move::Square(bookfarm_engine::Square::parse("d3").unwrap());
    let known: HashMap<LeafRequest, LeafResult> = HashMap::from([(first, result(d3, -6))]);
    let out = input.output(4, "program=7", |r| known.get(r).copied());
    assert_eq!(
        out.counts,
        OutputCounts {
            positions: 3,
            results: 2,
            missing: 1
        }
    );
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(
        lines[0],
        "% bookfarm search level=4 positions=3 results=2 missing=1 program=7"
    );
    let back = parse_obf(&out.text).unwrap();
    assert_eq!(back.len(), 2);
    for (p, comment) in back.iter().zip(["set 1", "set 2 % with a percent"]) {
        assert_eq!(p.board, first.board);
        assert!(!p.black_to_move);
        assert_eq!(p.best_score, Some(-6));
        assert_eq!(
            p.best_moves(),
            vec![Move::Square(bookfarm_engine::Square::parse("d3").unwrap())]
        );
        assert_eq!(p.comment.as_deref(), Some(comment));
    }
}

#[test]
fn finished_games_and_passes_are_written_so_that_they_read_back() {
    // A finished game: every square taken.
    let over = Board {
        player: 0xffff_ffff_0000_0000,
        opponent: 0x0000_0000_ffff_ffff,
    };
    // The side to move must pass: the first such position of deterministic random playouts.
    let pass = (1u64..)
        .find_map(|seed| {
            let mut x = Board::start();
            let mut state = seed;
            while !x.is_game_over() {
                if x.must_pass() {
                    return Some(x);
                }
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let m = x.moves();
                let mut bits = m;
                for _ in 0..(state >> 33) % u64::from(m.count_ones()) {
                    bits &= bits - 1;
                }
                let sq = bookfarm_engine::Square::new(bits.trailing_zeros() as u8).unwrap();
                x = x.play(sq).unwrap();
            }
            None
        })
        .unwrap();
    let text = format!(
        "{}\n{}\n",
        ObfPosition {
            board: over,
            black_to_move: true,
            scores: Vec::new(),
            best_score: None,
            comment: None
        }
        .to_obf_line(),
        ObfPosition {
            board: pass,
            black_to_move: true,
            scores: Vec::new(),
            best_score: None,
            comment: None
        }
        .to_obf_line()
    );
    let input = SearchSet::parse(&text, 10).unwrap();
    let out = input.output(3, "", |r| {
        Some(if r.board == over {
            result(Move::None, 0)
        } else if r.board.must_pass() {
            result(Move::Pass, -4)
        } else {
            result(Move::None, r.board.final_score())
        })
    });
    let back = parse_obf(&out.text).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].best_score, Some(0));
    assert!(back[0].scores.is_empty());
    assert_eq!(back[1].scores, vec![(Move::Pass, -4)]);
    assert_eq!(out.counts.results, 2);
}

#[test]
fn analysis_levels_skip_levels_that_search_the_same() {
    let b = board_after("f5d6c3").unwrap();
    // Choose boards by their empties: the level table decides.
    let at = |empties: u32| {
        let mut x = Board::start();
        let mut moves = 0;
        while x.empties() > empties {
            let m = x.moves();
            let sq = bookfarm_engine::Square::new(m.trailing_zeros() as u8).unwrap();
            x = x.play(sq).unwrap();
            if x.moves() == 0 {
                x = x.pass();
            }
            moves += 1;
            assert!(moves < 60);
        }
        x
    };
    let b20 = at(20);
    assert_eq!(b20.empties(), 20);
    // At 20 empties, levels 10 to 30 are one exact solve.
    assert_eq!(analysis_levels(&b20, 10, 30), vec![10]);
    let b30 = at(30);
    assert_eq!(
        analysis_levels(&b30, 16, 32),
        vec![16, 17, 18, 19, 22, 25, 28, 30]
    );
    assert_eq!(analysis_levels(&b, 4, 4), vec![4]);
    assert_eq!(analysis_levels(&b, 6, 4), vec![6]);
}

#[test]
fn the_driver_searches_each_request_once_and_an_analysis_level_by_level() {
    use crate::driver::{Driver, Progress, run_serial};
    use crate::program::{Operation, Program};
    let input = SearchSet::parse(&sample(), 10).unwrap();
    let mut book = crate::MemBook::new(crate::BookHeader::new(0, 36));
    let mut asked = Vec::new();
    let st = run_serial(
        &mut book,
        Operation::Search {
            positions: input.clone(),
            level: 4,
        },
        &mut |r: &LeafRequest| {
            asked.push(*r);
            result(Move::Pass, 0)
        },
    );
    assert_eq!(asked, input.requests(4));
    assert_eq!(st.searched, (2, 2));
    assert!(book.is_empty());
    // An analysis asks for its missing levels lowest first, as many as the lookahead allows
    // (at least one), whatever landed before them.
    let b = board_after("f5d6c3").unwrap();
    let mut d = Driver::new(Program::new(Operation::Analyze {
        board: b,
        from: 1,
        up_to: 3,
    }));
    let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
    let level = |l: u8| analysis_request(&b, l);
    assert_eq!(
        d.run(&mut book, &known, 0),
        Progress::Blocked(vec![level(1)])
    );
    assert_eq!(
        d.run(&mut book, &known, 100),
        Progress::Blocked(vec![level(1), level(2), level(3)])
    );
    known.insert(level(2), result(Move::Pass, 2));
    assert_eq!(
        d.run(&mut book, &known, 100),
        Progress::Blocked(vec![level(1), level(3)])
    );
    assert_eq!(d.state().searched, (1, 3));
    known.insert(level(1), result(Move::Pass, 1));
    known.insert(level(3), result(Move::Pass, 3));
    assert_eq!(d.run(&mut book, &known, 100), Progress::Done);
    assert_eq!(d.state().searched, (3, 3));
}
