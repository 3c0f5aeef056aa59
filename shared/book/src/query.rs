//! Read-only book commands with Edax's exact text: `book show` (edax-spec §5.4), `book problem`
//! (Edax's `book_extract_positions`) and `book check` (Edax's `book_check_base`), plus the
//! helpers they share (the move list of a position seen from any orientation, `board_print`)
//! and the shortest book line to a position ([`BookLines`]).

use crate::edax::bucket_order;
use crate::mem::{Counts, MemBook, NodeId, child_board};
use bookfarm_engine::symmetry::{canonical, find_symmetry, transform_move};
use bookfarm_engine::{Board, Move};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write;

/// One book move of a position, in the query board's coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookMove {
    /// The move.
    pub mv: Move,
    /// Its score (link score, or leaf score).
    pub score: i8,
    /// Whether it is the leaf (not a link).
    pub leaf: bool,
}

/// Edax's `position_get_moves`: the links in stored order, then the leaf unless NOMOVE, mapped
/// to `board`'s orientation (first symmetry in plain order that maps the stored board onto it),
/// then stably sorted by score, best first. `None` when `board` is not in the book.
pub fn book_moves(book: &MemBook, board: &Board) -> Option<(NodeId, Vec<BookMove>)> {
    let id = book.probe(board)?;
    let s = find_symmetry(&book.board(id), board)?;
    let mut out: Vec<BookMove> = book
        .links(id)
        .map(|l| BookMove {
            mv: transform_move(l.mv, s),
            score: l.score,
            leaf: false,
        })
        .collect();
    let leaf = book.leaf(id);
    if leaf.mv != Move::None {
        out.push(BookMove {
            mv: transform_move(leaf.mv, s),
            score: leaf.score,
            leaf: true,
        });
    }
    out.sort_by_key(|m| std::cmp::Reverse(m.score));
    Some((id, out))
}

/// The shortest lines of play from the start position to the book's positions through the
/// book's moves (its links, and a leaf for the last move), found breadth first, moves tried in
/// the order [`book_moves`] gives them.
#[derive(Debug, Clone, Default)]
pub struct BookLines {
    /// Canonical board → (canonical board it was first reached from, the move as played on
    /// the board reached before); the start position maps to itself with no move.
    parent: HashMap<Board, (Board, Option<Move>)>,
}

impl BookLines {
    /// The lines of `book` (empty when the start position is not in it); `stop`, when given,
    /// ends the search as soon as that position (any orientation) is reached.
    pub fn new(book: &MemBook, stop: Option<&Board>) -> BookLines {
        let mut parent = HashMap::new();
        let start = Board::start();
        if book.probe(&start).is_none() {
            return BookLines { parent };
        }
        let stop = stop.map(|b| canonical(b).0);
        let first = canonical(&start).0;
        parent.insert(first, (first, None));
        if stop == Some(first) {
            return BookLines { parent };
        }
        let mut queue = VecDeque::from([start]);
        while let Some(board) = queue.pop_front() {
            let Some((_, moves)) = book_moves(book, &board) else {
                continue;
            };
            let from = canonical(&board).0;
            for m in moves {
                let next = board.next_unchecked(m.mv);
                let key = canonical(&next).0;
                if parent.contains_key(&key) {
                    continue;
                }
                parent.insert(key, (from, Some(m.mv)));
                if stop == Some(key) {
                    return BookLines { parent };
                }
                queue.push_back(next);
            }
        }
        BookLines { parent }
    }

    /// The shortest line reaching `board` (any orientation; passes included), if any.
    pub fn line(&self, board: &Board) -> Option<Vec<Move>> {
        let mut moves = Vec::new();
        let mut at = canonical(board).0;
        loop {
            let &(up, mv) = self.parent.get(&at)?;
            match mv {
                Some(m) => moves.push(m),
                None => break,
            }
            at = up;
        }
        moves.reverse();
        Some(moves)
    }
}

/// The shortest line of play from the start position to `board` through the book's moves.
pub fn shortest_line(book: &MemBook, board: &Board) -> Option<Vec<Move>> {
    BookLines::new(book, Some(board)).line(board)
}

/// Edax's `move_to_string`: `A1`..`H8`, `PA`, `--`, uppercase for Black (`black`), lowercase
/// for White.
pub fn move_text(mv: Move, black: bool) -> String {
    let s = mv.to_edax_upper();
    if black { s } else { s.to_ascii_lowercase() }
}

/// Edax's `board_print` of `board` with the side to move of colour `black`: the grid with `*`
/// for Black, `O` for White, `-` empty and `.` on the legal moves, and the side panel (side to
/// move, discs and mobility of both sides, empties and ply).
pub fn board_print(board: &Board, black: bool) -> String {
    let (bk, wh) = if black {
        (board.player, board.opponent)
    } else {
        (board.opponent, board.player)
    };
    let moves = board.moves();
    let (me, you) = if black { ('*', 'O') } else { ('O', '*') };
    let mut out = String::with_capacity(400);
    out.push_str("  A B C D E F G H\n");
    for row in 0..8u32 {
        let _ = write!(out, "{} ", row + 1);
        for col in 0..8u32 {
            let bit = 1u64 << (row * 8 + col);
            let c = if bk & bit != 0 {
                '*'
            } else if wh & bit != 0 {
                'O'
            } else if moves & bit != 0 {
                '.'
            } else {
                '-'
            };
            out.push(c);
            out.push(' ');
        }
        let _ = write!(out, "{}", row + 1);
        match row {
            1 => {
                let _ = write!(out, " {me} to move");
            }
            3 => {
                let _ = write!(
                    out,
                    " {me}: discs = {:2}    moves = {:2}",
                    board.player.count_ones(),
                    moves.count_ones()
                );
            }
            4 => {
                let _ = write!(
                    out,
                    " {you}: discs = {:2}    moves = {:2}",
                    board.opponent.count_ones(),
                    board.pass().moves().count_ones()
                );
            }
            5 => {
                let discs = (board.player | board.opponent).count_ones();
                let _ = write!(
                    out,
                    "  empties = {:2}      ply = {:2}",
                    64 - discs,
                    discs as i32 - 3
                );
            }
            _ => {}
        }
        out.push('\n');
    }
    out.push_str("  A B C D E F G H\n");
    out
}

/// Edax's `book_get_game_stats`: the stored counts, or, when one of them is saturated, the sum
/// over the links of the children's recomputed counts (wins and losses swapped). Missing
/// children count zero.
pub fn game_stats(book: &MemBook, id: NodeId) -> Counts {
    fn rec(book: &MemBook, id: NodeId, memo: &mut HashMap<NodeId, [u64; 4]>) -> [u64; 4] {
        if let Some(&c) = memo.get(&id) {
            return c;
        }
        let c = book.counts(id);
        let out = if [c.n_wins, c.n_draws, c.n_losses, c.n_lines].contains(&u32::MAX) {
            let board = book.board(id);
            let mut s = [0u64; 4];
            for l in book.links(id) {
                if let Some(cid) = book.find(&child_board(&board, l.mv)) {
                    let k = rec(book, cid, memo);
                    s[0] = s[0].wrapping_add(k[2]);
                    s[1] = s[1].wrapping_add(k[1]);
                    s[2] = s[2].wrapping_add(k[0]);
                    s[3] = s[3].wrapping_add(k[3]);
                }
            }
            s
        } else {
            [
                u64::from(c.n_wins),
                u64::from(c.n_draws),
                u64::from(c.n_losses),
                u64::from(c.n_lines),
            ]
        };
        memo.insert(id, out);
        out
    }
    let s = rec(book, id, &mut HashMap::new());
    // Edax's GameStats fields are unsigned ints: the recomputed sums are truncated the same way.
    Counts {
        n_wins: s[0] as u32,
        n_draws: s[1] as u32,
        n_losses: s[2] as u32,
        n_lines: s[3] as u32,
    }
}

/// Edax's `book show` for the position `board` (the game's board, any orientation): the board
/// printed with the colour guessed from the empties' parity (even: Black), the level, the best
/// score with its bounds, the book moves (`<..>` for the leaf, `[..]` for links, `%+02d`
/// scores), the full-game percentages when some full games are below, and the incomplete
/// lines. `None` when the position is not in the book (Edax prints nothing).
pub fn show(book: &MemBook, board: &Board) -> Option<String> {
    let (id, moves) = book_moves(book, board)?;
    let black = board.empties().is_multiple_of(2);
    let mut out = board_print(board, black);
    let s = book.score(id);
    let _ = write!(
        out,
        "\nLevel: {}\nBest score: {:+} [{:+}, {:+}]\nMoves:",
        book.level(id),
        s.value,
        s.lower,
        s.upper
    );
    for m in &moves {
        let t = move_text(m.mv, black);
        if m.leaf {
            let _ = write!(out, " <{t}:{:+}>", m.score);
        } else {
            let _ = write!(out, " [{t}:{:+}]", m.score);
        }
    }
    let c = game_stats(book, id);
    let games = u64::from(c.n_wins) + u64::from(c.n_draws) + u64::from(c.n_losses);
    if games > 0 {
        let pct = |x: u32| 100.0 * f64::from(x) / games as f64;
        let _ = write!(
            out,
            "\nLines: {games} full games with {:.2}% win, {:.2}% draw, {:.2}% loss",
            pct(c.n_wins),
            pct(c.n_draws),
            pct(c.n_losses)
        );
    }
    let _ = write!(
        out,
        "\n       {} incomplete lines.\n\n",
        i64::from(c.n_lines) - games as i64
    );
    Some(out)
}

/// Edax's `board_to_string`: 64 cells `X` (Black), `O` (White), `-`, a space, and the side to
/// move's letter.
pub fn board_text(board: &Board, black: bool) -> String {
    let (bk, wh) = if black {
        (board.player, board.opponent)
    } else {
        (board.opponent, board.player)
    };
    let mut s = String::with_capacity(66);
    for x in 0..64 {
        let bit = 1u64 << x;
        s.push(if bk & bit != 0 {
            'X'
        } else if wh & bit != 0 {
            'O'
        } else {
            '-'
        });
    }
    s.push(' ');
    s.push(if black { 'X' } else { 'O' });
    s
}

/// Edax's defaults of `book problem`: 24 empties, 10 positions.
pub const PROBLEM_DEFAULTS: (u32, usize) = (24, 10);

/// One problem of [`problems`]: a position whose best book move is strictly better than the
/// second best.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The stored (canonical) board.
    pub board: Board,
    /// Best move and score.
    pub best: (Move, i8),
    /// Second-best move and score.
    pub second: (Move, i8),
}

impl Problem {
    /// Edax's output line: `<board_to_string> % bm <MOVE>:<%+2d>; ba <MOVE>:<%+2d>;`, with the
    /// colour (and move case) guessed from the empties' parity.
    pub fn line(&self) -> String {
        let black = self.board.empties().is_multiple_of(2);
        format!(
            "{} % bm {}:{:+}; ba {}:{:+};",
            board_text(&self.board, black),
            move_text(self.best.0, black),
            self.best.1,
            move_text(self.second.0, black),
            self.second.1
        )
    }
}

/// Edax's `book problem [n=24] [k=10]` (`book_extract_positions`): in Edax's file order, the
/// first `k` positions with exactly `n` empties that have at least two book moves (links and
/// leaf) and whose best move's score is strictly greater than the second best's: test
/// positions with a unique best answer according to the book.
pub fn problems(book: &MemBook, empties: u32, count: usize) -> Vec<Problem> {
    let mut out = Vec::new();
    for id in bucket_order(book) {
        if out.len() == count {
            break;
        }
        let board = book.board(id);
        if board.empties() != empties {
            continue;
        }
        let Some((_, moves)) = book_moves(book, &board) else {
            continue;
        };
        if let [best, second, ..] = moves[..]
            && best.score > second.score
        {
            out.push(Problem {
                board,
                best: (best.mv, best.score),
                second: (second.mv, second.score),
            });
        }
    }
    out
}

/// Result of [`check_games`] (Edax's `book check`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    /// Distinct (position, move) pairs of the games whose position is not in the book.
    pub missing: u64,
    /// Pairs whose move is a book move with the best score.
    pub good: u64,
    /// Pairs whose move is a book move scored below the best one.
    pub bad: u64,
    /// Pairs whose position is in the book but whose move is not among its book moves (Edax
    /// counts them nowhere).
    pub unknown: u64,
    /// Games not replayed to the end of the book depth because of an illegal move (game index,
    /// move index).
    pub illegal: Vec<(usize, usize)>,
    /// The bad pairs: the board before the move (as played), the move, its score, the best
    /// score.
    pub bad_moves: Vec<(Board, Move, i8, i8)>,
}

impl CheckReport {
    /// Edax's summary line: `Positions : M missing, G good, B bad (P% bad)`.
    pub fn summary(&self) -> String {
        let pct = 100.0 * self.bad as f64 / (self.bad + self.good) as f64;
        format!(
            "Positions : {} missing, {} good, {} bad ({:.2}% bad)",
            self.missing, self.good, self.bad, pct
        )
    }
}

/// Edax's `book check` of games (move lists from the start position) against the book: replay
/// each game for at most `61 − n_empties` moves (passes inserted where forced, stop at the first
/// illegal move), then, for each (board, move) pair not seen before in any game (the board as
/// played, so symmetric transpositions count separately, as in Edax's move hash), look the
/// board up: missing when absent, else good when the move has the best book score, bad when
/// its score is lower (a move outside the book moves is counted in `unknown`).
pub fn check_games<'a, I>(book: &MemBook, games: I) -> CheckReport
where
    I: IntoIterator<Item = &'a [Move]>,
{
    let mut report = CheckReport::default();
    let mut seen: HashSet<(Board, Move)> = HashSet::new();
    let limit = usize::try_from(61 - book.header().n_empties).unwrap_or(0);
    for (g, moves) in games.into_iter().enumerate() {
        let mut b = Board::start();
        let mut pairs: Vec<(Board, Move)> = Vec::new();
        let mut counted = 0;
        for (i, &mv) in moves.iter().enumerate() {
            if counted >= limit {
                break;
            }
            if mv == Move::Pass && b.must_pass() {
                pairs.push((b, Move::Pass));
                b = b.pass();
                continue;
            }
            if b.moves() == 0 {
                pairs.push((b, Move::Pass));
                b = b.pass();
            }
            match mv {
                Move::Square(s) if b.moves() & s.bit() != 0 => {
                    pairs.push((b, mv));
                    b = b.play_flips(s.index(), b.flips(s));
                    counted += 1;
                }
                _ => {
                    report.illegal.push((g, i));
                    break;
                }
            }
        }
        for &(board, mv) in pairs.iter().rev() {
            if !seen.insert((board, mv)) {
                continue;
            }
            match book_moves(book, &board) {
                None => report.missing += 1,
                Some((_, list)) => {
                    let best = list.first().map_or(i8::MIN, |m| m.score);
                    match list.iter().find(|m| m.mv == mv) {
                        Some(m) if m.score < best => {
                            report.bad += 1;
                            report.bad_moves.push((board, mv, m.score, best));
                        }
                        Some(_) => report.good += 1,
                        None => report.unknown += 1,
                    }
                }
            }
        }
    }
    report
}
