//! Edax's CSV book text (edax-spec §5.1–5.2): one line per position,
//! `<64 cells> X,<level>,<leaf move>,<leaf score>`. Only board, level and leaf survive; links,
//! values and counts are rebuilt by linking and negamax after an import.
//!
//! Differences from Edax's import, on purpose: a bad line is an error naming its line number
//! (Edax silently stops there), blank lines are skipped, boards are normalized (with the leaf
//! move mapped along), and a `--` leaf keeps its score (a game-over position's exact score).

use crate::edax::bucket_order;
use crate::mem::MemBook;
use crate::model::{BAD_LINK, BookHeader, Link, MAX_LEVEL, Position};
use bookfarm_engine::{Board, Move, Square};

/// A CSV line that cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct CsvError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub problem: CsvProblem,
}

/// What is wrong with a CSV line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvProblem {
    /// A board cell that is no disc or empty mark.
    #[error("bad board character {0:?}")]
    BadCell(char),
    /// Fewer than 64 cells.
    #[error("board has only {0} cells")]
    ShortBoard(usize),
    /// No side-to-move letter after the board.
    #[error("missing side to move")]
    MissingSide,
    /// The board has an empty centre square.
    #[error("board has an empty centre square")]
    EmptyCentre,
    /// A field is missing.
    #[error("missing {0} field")]
    MissingField(&'static str),
    /// The level is not an integer in 0..=60.
    #[error("bad level {0:?} (expected 0..=60)")]
    BadLevel(String),
    /// The leaf move is not a move.
    #[error("bad leaf move {0:?}")]
    BadMove(String),
    /// The leaf move is not legal on the board.
    #[error("leaf move {mv} is illegal on board {board}")]
    IllegalMove {
        /// The move.
        mv: Move,
        /// The board (side to move = X).
        board: Board,
    },
    /// The score is not an integer in −127..=127.
    #[error("bad leaf score {0:?}")]
    BadScore(String),
}

/// One CSV line of a position (without the newline).
pub fn csv_line(p: &Position) -> String {
    format!(
        "{} X,{},{},{}",
        p.board,
        p.level,
        p.leaf.mv.to_edax_upper(),
        p.leaf.score
    )
}

/// Export `book` as CSV in Edax's file (bucket) order.
pub fn export_csv(book: &MemBook) -> String {
    let mut out = String::with_capacity(book.len() * 80);
    for id in bucket_order(book) {
        out.push_str(&csv_line(&book.position(id)));
        out.push('\n');
    }
    out
}

/// Parse one CSV line into a (normalized) position with its board, level and leaf.
pub fn parse_csv_line(text: &str) -> Result<Position, CsvProblem> {
    let mut black = 0u64;
    let mut white = 0u64;
    let mut cells = 0usize;
    let mut chars = text.trim_start().char_indices();
    for (_, ch) in chars.by_ref() {
        if ch.is_whitespace() {
            continue;
        }
        match ch.to_ascii_lowercase() {
            'b' | 'x' | '*' => black |= 1 << cells,
            'o' | 'w' => white |= 1 << cells,
            '-' | '.' => {}
            _ => return Err(CsvProblem::BadCell(ch)),
        }
        cells += 1;
        if cells == 64 {
            break;
        }
    }
    if cells < 64 {
        return Err(CsvProblem::ShortBoard(cells));
    }
    let rest: &str = chars.as_str();
    let side = rest
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .find(|c| matches!(c, 'b' | 'x' | '*' | 'o' | 'w'))
        .ok_or(CsvProblem::MissingSide)?;
    let board = if matches!(side, 'o' | 'w') {
        Board {
            player: white,
            opponent: black,
        }
    } else {
        Board {
            player: black,
            opponent: white,
        }
    };
    if (board.player | board.opponent) & 0x0000_0018_1800_0000 != 0x0000_0018_1800_0000 {
        return Err(CsvProblem::EmptyCentre);
    }
    let mut fields = rest.split(',').skip(1).map(str::trim);
    let level_text = fields.next().ok_or(CsvProblem::MissingField("level"))?;
    let level = level_text
        .parse::<u8>()
        .ok()
        .filter(|&l| l <= MAX_LEVEL)
        .ok_or_else(|| CsvProblem::BadLevel(level_text.to_string()))?;
    let mut position = Position::new(board, level);
    position.leaf = BAD_LINK;
    if let Some(mv_text) = fields.next() {
        let mv = parse_leaf_move(mv_text)?;
        let legal = match mv {
            Move::None => true,
            m => board.is_legal(m),
        };
        if !legal {
            return Err(CsvProblem::IllegalMove { mv, board });
        }
        let score_text = fields.next().ok_or(CsvProblem::MissingField("score"))?;
        let score = score_text
            .parse::<i8>()
            .ok()
            .filter(|&s| s >= -127)
            .ok_or_else(|| CsvProblem::BadScore(score_text.to_string()))?;
        position.leaf = Link::new(score, mv);
    }
    position.normalize();
    Ok(position)
}

fn parse_leaf_move(t: &str) -> Result<Move, CsvProblem> {
    let l = t.to_ascii_lowercase();
    match l.as_str() {
        "--" => Ok(Move::None),
        "pa" | "ps" | "@@" => Ok(Move::Pass),
        _ => Square::parse(&l)
            .map(Move::Square)
            .map_err(|_| CsvProblem::BadMove(t.to_string())),
    }
}

/// Import CSV text into a new book with Edax's `book_init` header (errors 2 and 1), the maximum
/// position level as book level and the minimum position empties as `n_empties`. Positions
/// already present are dropped (first wins, as Edax). The caller links and negamaxes it
/// ([`crate::negamax::link_all`], [`crate::negamax::negamax`], [`crate::negamax::sort_links`]).
pub fn import_csv(text: &str) -> Result<MemBook, CsvError> {
    let mut book = MemBook::new(BookHeader::new(0, 0));
    let mut max_level = 0u8;
    let mut min_empties = 60u32;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let p = parse_csv_line(line).map_err(|problem| CsvError {
            line: i + 1,
            problem,
        })?;
        max_level = max_level.max(p.level);
        min_empties = min_empties.min(p.board.empties());
        book.insert_new(&p);
    }
    let h = book.header_mut();
    h.level = i32::from(max_level);
    h.n_empties = min_empties as i32;
    Ok(book)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_lines() {
        let p = parse_csv_line(
            "---------------------------OX------XO--------------------------- X,2,--,-127",
        )
        .expect("start");
        assert_eq!(p.board, Board::start());
        assert_eq!(p.leaf, BAD_LINK);
        assert_eq!(
            csv_line(&p),
            "---------------------------OX------XO--------------------------- X,2,--,-127"
        );
        let line = "-------------------X-------XX-----OOO--------------------------- X,2,C6,-30";
        let p = parse_csv_line(line).expect("c6");
        assert_eq!(csv_line(&p), line);
    }

    #[test]
    fn errors_name_the_line() {
        let text = "---------------------------OX------XO--------------------------- X,2,--,-127\n\
                    ---------------------------OX------XO--------------------------- X,2,A1,3\n";
        let e = import_csv(text).expect_err("illegal a1");
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("line 2: leaf move a1 is illegal"));
        let e = import_csv("--Z\n").expect_err("bad cell");
        assert_eq!(e.problem, CsvProblem::BadCell('Z'));
        let e = import_csv(
            "---------------------------OX------XO--------------------------- X,61,--,-127",
        )
        .expect_err("level");
        assert!(matches!(e.problem, CsvProblem::BadLevel(_)));
    }
}
