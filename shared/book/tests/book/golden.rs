//! Checks against real Edax 4.6 output in `../shared/golden` (books built by Edax, their dumps
//! by `edax_book_dump.py --header`, CSV exports and console transcripts).

use bookfarm_book::edax::{book_to_bytes, read_book};
use bookfarm_book::{MemBook, Score, csv, dump, info, negamax};
use std::collections::BTreeSet;
use std::path::PathBuf;

const BOOKS: [&str; 2] = ["book-tiny", "book-small"];

fn golden(name: &str) -> Option<PathBuf> {
    bookfarm_engine::testdata::shared_dir_or_skip().map(|d| d.join("golden").join(name))
}

fn load(name: &str) -> Option<(Vec<u8>, MemBook, String)> {
    let dat = std::fs::read(golden(&format!("{name}.dat"))?).expect("read golden dat");
    let want = std::fs::read_to_string(golden(&format!("{name}.dump.txt"))?).expect("read dump");
    let book = read_book(&dat).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some((dat, book, want))
}

#[test]
fn dump_matches_golden() {
    for name in BOOKS {
        let Some((_, book, want)) = load(name) else {
            return;
        };
        assert_eq!(dump::dump(&book, true), want, "{name}");
    }
}

#[test]
fn write_is_byte_identical_and_rereads() {
    for name in BOOKS {
        let Some((dat, book, want)) = load(name) else {
            return;
        };
        let bytes = book_to_bytes(&book);
        assert_eq!(bytes.len(), dat.len(), "{name}: size");
        assert!(
            bytes == dat,
            "{name}: written bytes differ from the Edax file"
        );
        let again = read_book(&bytes).expect("re-read");
        assert_eq!(dump::dump(&again, true), want, "{name}");
    }
}

#[test]
fn csv_export_matches_golden_lines() {
    for name in BOOKS {
        let Some((_, book, _)) = load(name) else {
            return;
        };
        let Some(path) = golden(&format!("{name}.csv")) else {
            return;
        };
        let want = std::fs::read_to_string(path).expect("read csv");
        let ours = csv::export_csv(&book);
        let a: BTreeSet<&str> = ours.lines().collect();
        let b: BTreeSet<&str> = want.lines().collect();
        assert_eq!(a, b, "{name}");
        // Same order too: Edax exports in bucket order, as we do.
        assert_eq!(ours, want, "{name}: order");
    }
}

#[test]
fn csv_import_roundtrip_restores_board_level_leaf() {
    for name in BOOKS {
        let Some((_, book, _)) = load(name) else {
            return;
        };
        let text = csv::export_csv(&book);
        let back = csv::import_csv(&text).expect("import");
        assert_eq!(back.len(), book.len());
        for id in book.ids() {
            let p = book.position(id);
            let q = back.get(&p.board).expect("position imported");
            assert_eq!((q.level, q.leaf), (p.level, p.leaf));
        }
        assert_eq!(back.header().level, book.header().level);
    }
}

/// Zero every computed field, recompute with Edax's negamax and sort: the dump must be the
/// golden one (the golden books were last negamaxed and sorted by Edax).
#[test]
fn negamax_recomputes_golden_values() {
    for name in BOOKS {
        let Some((_, mut book, want)) = load(name) else {
            return;
        };
        let ids: Vec<_> = book.ids().collect();
        for &id in &ids {
            book.set_score(
                id,
                Score {
                    value: 0,
                    lower: 0,
                    upper: 0,
                },
            );
            book.set_counts(id, Default::default());
            for i in 0..book.n_link(id) {
                book.set_link_score(id, i, 0);
            }
        }
        let stats = negamax::negamax(&mut book);
        negamax::sort_links(&mut book);
        assert_eq!(stats.missing_children, 0);
        assert_eq!(
            stats.positions,
            book.len(),
            "{name}: every position reachable"
        );
        assert_eq!(dump::dump(&book, true), want, "{name}");
    }
}

#[test]
fn info_matches_edax_console() {
    let Some((_, book, _)) = load("book-small") else {
        return;
    };
    let text = info::BookInfo::of(&book).to_string();
    assert_eq!(
        text,
        "Edax Book 4.6; 2026-11-22 5:38:21;\n\
         Positions: 1054 (moves = 1073 links + 1035 leaves);\n\
         Level 4 : 1054 nodes\n\
         Depth: 14\n\
         Memory occupation: 1118178\n\
         Hash balance: 0 < 0 < 3\n"
    );
    let Some(console) = golden("book-small.console.txt") else {
        return;
    };
    let console = std::fs::read_to_string(console).expect("console");
    for line in text.lines() {
        assert!(
            console.contains(line),
            "{line:?} not in the Edax transcript"
        );
    }
    let Some((_, tiny, _)) = load("book-tiny") else {
        return;
    };
    let t = info::BookInfo::of(&tiny);
    assert_eq!(
        (t.positions, t.links, t.leaves, t.memory),
        (25, 29, 22, 1050234)
    );
}

/// `book stats` against the Edax transcripts (which drop blank lines): the block after
/// "Book statistics:" up to the next prompt.
#[test]
fn stats_match_edax_console() {
    for name in BOOKS {
        let Some((_, book, _)) = load(name) else {
            return;
        };
        let Some(console) = golden(&format!("{name}.console.txt")) else {
            return;
        };
        let console = std::fs::read_to_string(console).expect("console");
        let start = console
            .find("Book statistics:")
            .expect("stats in transcript");
        let block: Vec<&str> = console[start..]
            .lines()
            .take_while(|l| !l.starts_with('>'))
            .collect();
        let ours = info::BookStats::of(&book).to_string();
        let ours: Vec<&str> = ours.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(ours, block, "{name}");
    }
}
