//! Umigame numbers ("minimum memorization numbers"), as Egaroucid defines them
//! (`src/engine/umigame.hpp`, Egaroucid 7.8; the score range and the loss budget since 7.8.2):
//! how many lines each colour must memorise to play from a position to the end of the book
//! while keeping to the book's best moves.
//!
//! For a position `p` with `c` to move, the candidate moves are the legal moves whose child
//! position is in the book (the *registered* moves), each valued `v(m)` from `c`'s side: minus
//! the child's book value, or the value of the position after the child's forced pass. With
//! `best` the largest `v(m)` and `r` the loss budget still left (the options' budget at the
//! start), a move is a candidate when `best − v(m) ≤ r` and its value seen from Black lies in
//! the options' score range; the child is counted with the budget `r − (best − v(m))`. So the
//! budget is spent along a line by both colours together, and with budget 0 the candidates are
//! the best moves (Egaroucid's original definition).
//!
//! Then, with `(b, w)` the numbers of Black and White:
//! * a position not in the book, or at or beyond the options' depth (ply ≥ `depth`), or without
//!   a candidate, is one line for each: `(1, 1)`;
//! * with Black to move, Black picks the cheapest candidate and White must know every one:
//!   `b = min b(child)`, `w = Σ w(child)`; with White to move, the reverse.
//!
//! **Transpositions.** The book is a graph: a position reached by several move orders is counted
//! once per line that reaches it, as in Egaroucid (the numbers count lines, not distinct
//! positions). The computation memoizes per (position up to symmetry, colour to move, budget
//! left), as Egaroucid's cache does, so its cost is the number of distinct such triples, not of
//! lines.
//!
//! **Adaptation to Edax's book.** Egaroucid stores no position where the side to move must
//! pass; an Edax book stores it with a pass link. A position that must pass is taken here as the
//! position after its pass (it is in the book when either is), so a line goes on through a pass
//! instead of ending there. The values are the book's negamax values (Edax's link scores equal
//! them); the leaf move, whose child is not in the book, is not a candidate (Egaroucid's leaf is
//! not a registered move either).
//!
//! **Bounded work.** [`UmigameMemo::of`] expands at most a [`Budget`] of positions; where the
//! budget ends, the unexplored positions count 1 (every number is at least 1), so the result is
//! a lower bound, marked inexact ("≥ N"). Only exact results are memoized, and the memo
//! outlives a call, so asking again continues where the last call stopped.

use crate::explore::Budget;
use crate::mem::MemBook;
use bookfarm_engine::board::BitIter;
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::collections::HashMap;
use std::fmt;

/// The largest loss budget that is not "unlimited" (Egaroucid's slider goes to 20).
pub const MAX_LOSS_BUDGET: u32 = 128;

/// Egaroucid's options of the umigame number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UmigameOptions {
    /// Lowest move value counted, seen from Black (−64..=64).
    pub score_min: i8,
    /// Highest move value counted, seen from Black (−64..=64, at least `score_min`).
    pub score_max: i8,
    /// Loss budget shared by both colours along a line (`None`: unlimited, every registered
    /// move in the score range is a candidate).
    pub loss: Option<u8>,
    /// Positions at this ply or beyond count as one line (1..=60; 60: the whole book).
    pub depth: u8,
}

impl Default for UmigameOptions {
    /// Egaroucid's defaults: the whole score range, no loss, depth 60.
    fn default() -> UmigameOptions {
        UmigameOptions {
            score_min: -64,
            score_max: 64,
            loss: Some(0),
            depth: 60,
        }
    }
}

/// Options outside their ranges.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("umigame options: {0}")]
pub struct OptionsError(String);

impl UmigameOptions {
    /// Checked options: scores within −64..=64 with `min ≤ max`, a loss budget of at most
    /// [`MAX_LOSS_BUDGET`] (or unlimited), a depth within 1..=60.
    pub fn new(
        score_min: i32,
        score_max: i32,
        loss: Option<u32>,
        depth: u32,
    ) -> Result<UmigameOptions, OptionsError> {
        let score = |v: i32, what: &str| {
            i8::try_from(v)
                .ok()
                .filter(|v| (-64..=64).contains(v))
                .ok_or_else(|| OptionsError(format!("{what} {v} is outside -64..=64")))
        };
        let (score_min, score_max) = (score(score_min, "min")?, score(score_max, "max")?);
        if score_min > score_max {
            return Err(OptionsError(format!(
                "min {score_min} is above max {score_max}"
            )));
        }
        let loss = match loss {
            None => None,
            Some(l) if l <= MAX_LOSS_BUDGET => Some(l as u8),
            Some(l) => {
                return Err(OptionsError(format!(
                    "loss budget {l} is above {MAX_LOSS_BUDGET} (leave it out for unlimited)"
                )));
            }
        };
        let depth = u8::try_from(depth)
            .ok()
            .filter(|d| (1..=60).contains(d))
            .ok_or_else(|| OptionsError(format!("depth {depth} is outside 1..=60")))?;
        Ok(UmigameOptions {
            score_min,
            score_max,
            loss,
            depth,
        })
    }

    fn accepts(&self, value: i32, black: bool) -> bool {
        let v = if black { value } else { -value };
        (i32::from(self.score_min)..=i32::from(self.score_max)).contains(&v)
    }
}

/// A count that is exact, or a lower bound when the work budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// The count, or a lower bound of it.
    pub value: u64,
    /// `value` is the count itself.
    pub exact: bool,
}

impl Count {
    const ONE: Count = Count {
        value: 1,
        exact: true,
    };
    const AT_LEAST_ONE: Count = Count {
        value: 1,
        exact: false,
    };
}

impl fmt::Display for Count {
    /// `N`, or `≥N` for a lower bound.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exact {
            write!(f, "{}", self.value)
        } else {
            write!(f, "≥{}", self.value)
        }
    }
}

/// The umigame numbers of a position: lines Black and White must memorise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Umigame {
    /// Black's number.
    pub black: Count,
    /// White's number.
    pub white: Count,
}

impl Umigame {
    const LEAF: Umigame = Umigame {
        black: Count::ONE,
        white: Count::ONE,
    };
    const UNKNOWN: Umigame = Umigame {
        black: Count::AT_LEAST_ONE,
        white: Count::AT_LEAST_ONE,
    };

    /// Both numbers are exact.
    pub fn exact(&self) -> bool {
        self.black.exact && self.white.exact
    }
}

/// Budget left on entering a position: a loss budget, or unlimited.
type Left = u16;
const UNLIMITED: Left = Left::MAX;

/// Umigame numbers under one set of options, memoized across calls (valid for one revision of
/// one book: the caller drops it when the book changes).
#[derive(Debug, Clone)]
pub struct UmigameMemo {
    options: UmigameOptions,
    /// (canonical board, Black to move, budget left) → (Black's, White's number).
    memo: HashMap<(Board, bool, Left), (u64, u64)>,
}

impl UmigameMemo {
    /// An empty memo for `options`.
    pub fn new(options: UmigameOptions) -> UmigameMemo {
        UmigameMemo {
            options,
            memo: HashMap::new(),
        }
    }

    /// The options.
    pub fn options(&self) -> UmigameOptions {
        self.options
    }

    /// Exact results memoized.
    pub fn len(&self) -> usize {
        self.memo.len()
    }

    /// Nothing memoized yet.
    pub fn is_empty(&self) -> bool {
        self.memo.is_empty()
    }

    /// The umigame numbers of `board` (the side to move's view, any orientation; `black`: Black
    /// is to move), expanding at most `budget` positions not memoized yet.
    pub fn of(
        &mut self,
        book: &MemBook,
        board: &Board,
        black: bool,
        budget: &mut Budget,
    ) -> Umigame {
        let left = self.options.loss.map_or(UNLIMITED, Left::from);
        self.count(book, *board, black, left, budget)
    }

    fn count(
        &mut self,
        book: &MemBook,
        board: Board,
        black: bool,
        left: Left,
        budget: &mut Budget,
    ) -> Umigame {
        let ply = (board.player | board.opponent)
            .count_ones()
            .saturating_sub(4);
        if ply >= u32::from(self.options.depth) {
            return Umigame::LEAF;
        }
        // A position that must pass is the position after its pass (in the book when either
        // is).
        let passed = board.must_pass();
        let (board, black) = if passed {
            (board.pass(), !black)
        } else {
            (board, black)
        };
        let key = canonical(&board).0;
        if book.find(&key).is_none() && !(passed && book.probe(&board.pass()).is_some()) {
            return Umigame::LEAF;
        }
        if let Some(&(b, w)) = self.memo.get(&(key, black, left)) {
            return Umigame {
                black: Count {
                    value: b,
                    exact: true,
                },
                white: Count {
                    value: w,
                    exact: true,
                },
            };
        }
        if !budget.take() {
            return Umigame::UNKNOWN;
        }
        let values: Vec<(Move, i32)> = registered_values(book, &board);
        let Some(best) = values.iter().map(|&(_, v)| v).max() else {
            self.memo.insert((key, black, left), (1, 1));
            return Umigame::LEAF;
        };
        // The mover takes the cheapest candidate (min), the other side must know them all (sum).
        let mut mine: Option<Count> = None;
        // The smallest lower bound among inexact candidates (min stays exact when it is above).
        let mut mine_floor = u64::MAX;
        let mut theirs = Count {
            value: 0,
            exact: true,
        };
        let mut any = false;
        for &(mv, v) in &values {
            let loss = best - v;
            let Ok(loss) = Left::try_from(loss) else {
                continue;
            };
            if (left != UNLIMITED && loss > left) || !self.options.accepts(v, black) {
                continue;
            }
            any = true;
            let child_left = if left == UNLIMITED {
                UNLIMITED
            } else {
                left - loss
            };
            let u = self.count(book, board.next_unchecked(mv), !black, child_left, budget);
            let (m, t) = if black {
                (u.black, u.white)
            } else {
                (u.white, u.black)
            };
            if m.exact {
                if mine.is_none_or(|c| m.value < c.value) {
                    mine = Some(m);
                }
            } else {
                mine_floor = mine_floor.min(m.value);
            }
            theirs.value = theirs.value.saturating_add(t.value);
            theirs.exact &= t.exact && theirs.value != u64::MAX;
        }
        if !any {
            self.memo.insert((key, black, left), (1, 1));
            return Umigame::LEAF;
        }
        let mine = match mine {
            Some(m) if m.value <= mine_floor => m,
            // An inexact candidate could be cheaper: its bound is the bound of the minimum.
            Some(m) => Count {
                value: mine_floor.min(m.value),
                exact: false,
            },
            None => Count {
                value: mine_floor,
                exact: false,
            },
        };
        let (b, w) = if black {
            (mine, theirs)
        } else {
            (theirs, mine)
        };
        if b.exact && w.exact {
            self.memo.insert((key, black, left), (b.value, w.value));
        }
        Umigame { black: b, white: w }
    }
}

/// The registered moves of `board` with their values from the side to move (Egaroucid's
/// `get_registered_moves_with_value`): the legal moves whose child is in the book, valued minus
/// the child's value, or, when the child must pass or the game is over and the child is not
/// stored, the value of the position after the pass.
pub fn registered_values(book: &MemBook, board: &Board) -> Vec<(Move, i32)> {
    BitIter(board.moves())
        .map(Move::Square)
        .filter_map(|mv| Some((mv, registered_value(book, &board.next_unchecked(mv))?)))
        .collect()
}

/// The value of reaching `child` (the opponent to move), from the side that moved.
fn registered_value(book: &MemBook, child: &Board) -> Option<i32> {
    let value = |b: &Board| book.probe(b).map(|id| i32::from(book.score(id).value));
    if child.is_game_over() {
        value(child).map(|v| -v).or_else(|| value(&child.pass()))
    } else if child.moves() == 0 {
        // Egaroucid looks the position after the pass up; an Edax book may hold the position
        // before it (with its pass link) instead.
        value(&child.pass()).or_else(|| value(child).map(|v| -v))
    } else {
        value(child).map(|v| -v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{SynthParams, random_book};
    use bookfarm_engine::symmetry::transform;

    /// A small book whose leaves score −2..=2, so that many moves tie for best and budgets
    /// matter (random levels; negamaxed).
    pub(crate) fn tied_book(seed: u64, positions: usize, plies: u32) -> MemBook {
        let mut b = random_book(SynthParams {
            seed,
            positions,
            plies,
            level: None,
        });
        let ids: Vec<_> = b.ids().collect();
        for id in ids {
            let mut leaf = b.leaf(id);
            if leaf.mv != Move::None {
                leaf.score = leaf.score.rem_euclid(5) - 2;
                b.set_leaf(id, leaf);
            }
        }
        crate::negamax::negamax(&mut b);
        b
    }

    /// The definition, written out without memo, budget or symmetry.
    fn brute(
        book: &MemBook,
        board: Board,
        black: bool,
        left: Option<i32>,
        o: &UmigameOptions,
    ) -> (u64, u64) {
        if (board.player | board.opponent).count_ones() as i32 - 4 >= i32::from(o.depth) {
            return (1, 1);
        }
        let passed = board.must_pass();
        let (board, black) = if passed {
            (board.pass(), !black)
        } else {
            (board, black)
        };
        if book.probe(&board).is_none() && !(passed && book.probe(&board.pass()).is_some()) {
            return (1, 1);
        }
        let mut vals = Vec::new();
        for s in board.legal_squares() {
            let child = board.next_unchecked(Move::Square(s));
            let v = if child.is_game_over() {
                book.probe(&child)
                    .map(|id| -i32::from(book.score(id).value))
                    .or_else(|| {
                        book.probe(&child.pass())
                            .map(|id| i32::from(book.score(id).value))
                    })
            } else if child.moves() == 0 {
                book.probe(&child.pass())
                    .map(|id| i32::from(book.score(id).value))
                    .or_else(|| {
                        book.probe(&child)
                            .map(|id| -i32::from(book.score(id).value))
                    })
            } else {
                book.probe(&child)
                    .map(|id| -i32::from(book.score(id).value))
            };
            if let Some(v) = v {
                vals.push((child, v));
            }
        }
        let Some(best) = vals.iter().map(|x| x.1).max() else {
            return (1, 1);
        };
        let mut kids = Vec::new();
        for (child, v) in vals {
            let black_view = if black { v } else { -v };
            if left.is_some_and(|l| best - v > l)
                || black_view < i32::from(o.score_min)
                || black_view > i32::from(o.score_max)
            {
                continue;
            }
            kids.push(brute(book, child, !black, left.map(|l| l - (best - v)), o));
        }
        if kids.is_empty() {
            return (1, 1);
        }
        if black {
            (
                kids.iter().map(|k| k.0).min().unwrap_or(1),
                kids.iter().map(|k| k.1).sum(),
            )
        } else {
            (
                kids.iter().map(|k| k.0).sum(),
                kids.iter().map(|k| k.1).min().unwrap_or(1),
            )
        }
    }

    fn options() -> Vec<UmigameOptions> {
        vec![
            UmigameOptions::default(),
            UmigameOptions::new(-64, 64, Some(1), 60).expect("valid"),
            UmigameOptions::new(-64, 64, Some(3), 60).expect("valid"),
            UmigameOptions::new(-1, 2, Some(2), 60).expect("valid"),
            UmigameOptions::new(-64, 64, None, 60).expect("valid"),
            UmigameOptions::new(-2, 64, None, 6).expect("valid"),
        ]
    }

    #[test]
    fn equals_the_definition_on_every_position() {
        let book = tied_book(3, 400, 9);
        let ids: Vec<_> = book.ids().collect();
        let mut nontrivial = 0;
        for o in options() {
            let mut memo = UmigameMemo::new(o);
            for &id in &ids {
                let board = book.board(id);
                // Colour from the disc parity is not needed: both colours are asked.
                for black in [true, false] {
                    let got = memo.of(&book, &board, black, &mut Budget::unlimited());
                    let want = brute(&book, board, black, o.loss.map(i32::from), &o);
                    assert!(got.exact(), "{o:?}");
                    assert_eq!(
                        (got.black.value, got.white.value),
                        want,
                        "{o:?} {board:?} black {black}"
                    );
                    nontrivial += usize::from(want.0 > 1 && want.1 > 1);
                }
            }
        }
        assert!(
            nontrivial > 30,
            "the book exercises min and sum: {nontrivial}"
        );
    }

    #[test]
    fn budgets_give_lower_bounds_that_reach_the_number() {
        let book = tied_book(11, 2_000, 12);
        let o = UmigameOptions::new(-64, 64, Some(2), 60).expect("valid");
        let start = Board::start();
        let want = brute(&book, start, true, Some(2), &o);
        assert!(want.0 > 1 && want.1 > 1, "{want:?}");
        let mut memo = UmigameMemo::new(o);
        let mut calls = 0;
        loop {
            calls += 1;
            let mut budget = Budget::new(20);
            let got = memo.of(&book, &start, true, &mut budget);
            assert!(
                got.black.value <= want.0 && got.white.value <= want.1,
                "{got:?} {want:?}"
            );
            if got.black.exact {
                assert_eq!(got.black.value, want.0);
            }
            if got.white.exact {
                assert_eq!(got.white.value, want.1);
            }
            if got.exact() {
                break;
            }
            assert!(calls < 10_000, "no progress");
        }
        assert!(calls > 1, "the budget was too large to test anything");
    }

    #[test]
    fn orientation_and_memo_do_not_change_the_numbers() {
        let book = tied_book(5, 400, 9);
        let o = UmigameOptions::new(-64, 64, Some(2), 60).expect("valid");
        let start = Board::start();
        let first = UmigameMemo::new(o).of(&book, &start, true, &mut Budget::unlimited());
        let mut memo = UmigameMemo::new(o);
        for s in 0..8 {
            let b = transform(&start, s);
            assert_eq!(memo.of(&book, &b, true, &mut Budget::unlimited()), first);
        }
        assert!(!memo.is_empty());
    }

    #[test]
    fn options_are_checked() {
        assert!(UmigameOptions::new(-65, 0, Some(0), 60).is_err());
        assert!(UmigameOptions::new(3, 2, Some(0), 60).is_err());
        assert!(UmigameOptions::new(0, 2, Some(129), 60).is_err());
        assert!(UmigameOptions::new(0, 2, Some(0), 0).is_err());
        assert!(UmigameOptions::new(0, 2, Some(0), 61).is_err());
        assert_eq!(
            UmigameOptions::new(-64, 64, Some(0), 60),
            Ok(UmigameOptions::default())
        );
    }

    #[test]
    fn counts_display_bounds() {
        assert_eq!(
            Count {
                value: 3,
                exact: true
            }
            .to_string(),
            "3"
        );
        assert_eq!(
            Count {
                value: 3,
                exact: false
            }
            .to_string(),
            "≥3"
        );
    }
}
