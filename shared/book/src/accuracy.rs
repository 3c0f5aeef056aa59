//! Book accuracy grades, Egaroucid's definition (`src/engine/book_accuracy.hpp`, Egaroucid 7.x,
//! itself after Uenon's Edax book rating).
//!
//! A position's grade says how its book lines end when both sides play book moves within a
//! tolerance of the best one: A–F with a tolerance of 1 disc, and, for a position graded A, the
//! finer AA–AF with a tolerance of 2 discs. A line ends at a position without links (its value
//! comes from a search) or at a leaf taken as a move; such an end is *perfect* (an exact solve),
//! an *endgame* read (depth = empties with probcut) or a *midgame* search, read from the level
//! that searched it and the empties where the search ran.
//!
//! Per position, over the links scoring at least `best − tolerance` (best = the best **link**,
//! as in Egaroucid: the leaf does not raise it) and the leaf when it also does:
//!
//! | grade | lines found within the tolerance |
//! |---|---|
//! | A | only perfect ends |
//! | B | perfect ends and endgame ends (or children graded B/C), no midgame |
//! | C | only endgame ends |
//! | D | some perfect end and some midgame end |
//! | E | some endgame end and some midgame end, no perfect one |
//! | F | only midgame ends |
//!
//! A child contributes its own grade; a leaf within the tolerance contributes A (perfect) or C
//! (endgame), and nothing when it is a midgame search (Egaroucid's rule: a midgame leaf does not
//! spoil a grade). A position without links is A, C or F from its own level and empties.
//!
//! Adaptation to Edax's model: Edax's leaf score is the search of the position itself (not of
//! the child, as Egaroucid's leaf), so a leaf is read from `LEVEL[level][empties]` of the
//! position that holds it (edax-spec §6): depth = empties at selectivity 5 is perfect, depth =
//! empties with probcut is an endgame read, anything else midgame. A game-over position is
//! perfect; a position that must pass is graded as the position after the pass (Egaroucid
//! stores no pass positions).

use crate::explore::Budget;
use crate::mem::{MemBook, NodeId, child_board};
use bookfarm_engine::level::{NO_SELECTIVITY, level_params};
use bookfarm_engine::{Board, Move};
use std::collections::HashMap;
use std::fmt;

/// One of Egaroucid's six grades, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grade {
    /// Only perfect ends.
    A,
    /// Perfect and endgame ends.
    B,
    /// Only endgame ends.
    C,
    /// A perfect end and a midgame end.
    D,
    /// An endgame end and a midgame end, no perfect one.
    E,
    /// Only midgame ends.
    F,
}

impl Grade {
    const ALL: [Grade; 6] = [Grade::A, Grade::B, Grade::C, Grade::D, Grade::E, Grade::F];

    const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// The letter.
    pub const fn letter(self) -> char {
        match self {
            Grade::A => 'A',
            Grade::B => 'B',
            Grade::C => 'C',
            Grade::D => 'D',
            Grade::E => 'E',
            Grade::F => 'F',
        }
    }

    /// Egaroucid's combination of the grades found below a position (a bit per grade).
    fn combine(found: u32) -> Grade {
        let has = |g: Grade| found & g.bit() != 0;
        let only_below = |g: Grade| found & !(g.bit() - 1) == 0;
        if has(Grade::A) {
            if only_below(Grade::B) {
                Grade::A
            } else if only_below(Grade::D) {
                Grade::B
            } else {
                Grade::D
            }
        } else if has(Grade::B) || has(Grade::C) {
            let g = if has(Grade::B) { Grade::B } else { Grade::C };
            if only_below(Grade::D) { g } else { Grade::D }
        } else {
            // Only D, E or F: the best of them (at least one is present: the best link is
            // always within the tolerance).
            Grade::ALL[3..]
                .iter()
                .copied()
                .find(|&g| has(g))
                .unwrap_or(Grade::F)
        }
    }
}

/// How the search behind a leaf score was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafKind {
    /// An exact solve (depth = empties, no probcut), or a finished game.
    Perfect,
    /// Depth = empties with probcut.
    Endgame,
    /// A midgame search.
    Midgame,
}

/// The kind of the search Edax runs at `level` on a position with `empties` empties.
pub fn leaf_kind(level: u8, empties: u32) -> LeafKind {
    let (depth, sel) = level_params(level, empties);
    if depth < empties {
        LeafKind::Midgame
    } else if sel == NO_SELECTIVITY {
        LeafKind::Perfect
    } else {
        LeafKind::Endgame
    }
}

/// A position's accuracy: the A–F grade at 1 disc, and for A the AA–AF grade at 2 discs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accuracy {
    /// Grade with a tolerance of 1 disc.
    pub grade: Grade,
    /// Grade with a tolerance of 2 discs, computed when `grade` is A.
    pub wide: Option<Grade>,
}

impl fmt::Display for Accuracy {
    /// `AA`–`AF` for a position graded A, else the letter (Egaroucid's display).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.wide {
            Some(w) => write!(f, "A{}", w.letter()),
            None => write!(f, "{}", self.grade.letter()),
        }
    }
}

/// The grades found so far on one revision of one book, per position and tolerance: a
/// [`Grader`]'s memo, kept between graders so that grading continues where a bounded call
/// stopped (the caller drops it when the book changes).
#[derive(Debug, Clone, Default)]
pub struct GradeMemo {
    memo: [HashMap<NodeId, Grade>; 2],
}

impl GradeMemo {
    /// Grades memoized (both tolerances).
    pub fn len(&self) -> usize {
        self.memo[0].len() + self.memo[1].len()
    }

    /// Nothing memoized.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Grades positions of one book, memoizing per position (both tolerances), so grading many
/// positions of the same book costs one walk of the graph below them.
#[derive(Debug)]
pub struct Grader<'a> {
    book: &'a MemBook,
    memo: GradeMemo,
}

impl<'a> Grader<'a> {
    /// A grader over `book` (values must be negamaxed: link values are the children's).
    pub fn new(book: &'a MemBook) -> Grader<'a> {
        Grader::with_memo(book, GradeMemo::default())
    }

    /// A grader over `book` that starts from the grades of `memo` (found on this very book).
    pub fn with_memo(book: &'a MemBook, memo: GradeMemo) -> Grader<'a> {
        Grader { book, memo }
    }

    /// The grades found, to start a later grader from.
    pub fn into_memo(self) -> GradeMemo {
        self.memo
    }

    /// The accuracy of the position `board` (any orientation), `None` when it is not in the
    /// book.
    pub fn accuracy(&mut self, board: &Board) -> Option<Accuracy> {
        let id = self.book.probe(board)?;
        Some(self.of(id))
    }

    /// The accuracy of the book position `id`.
    pub fn of(&mut self, id: NodeId) -> Accuracy {
        let mut unlimited = Budget::unlimited();
        self.of_within(id, &mut unlimited)
            .expect("an unlimited budget does not run out")
    }

    /// The accuracy of the book position `id`, grading at most `budget` positions not graded
    /// yet; `None` when that was not enough (the grades found so far are kept, so a later call
    /// goes on from there).
    pub fn of_within(&mut self, id: NodeId, budget: &mut Budget) -> Option<Accuracy> {
        let grade = self.grade(id, 1, budget)?;
        let wide = match grade {
            Grade::A => Some(self.grade(id, 2, budget)?),
            _ => None,
        };
        Some(Accuracy { grade, wide })
    }

    fn grade(&mut self, id: NodeId, tolerance: i32, budget: &mut Budget) -> Option<Grade> {
        let slot = usize::from(tolerance == 2);
        if let Some(&g) = self.memo.memo[slot].get(&id) {
            return Some(g);
        }
        if !budget.take() {
            return None;
        }
        let g = self.compute(id, tolerance, budget)?;
        self.memo.memo[slot].insert(id, g);
        Some(g)
    }

    fn compute(&mut self, id: NodeId, tolerance: i32, budget: &mut Budget) -> Option<Grade> {
        let book = self.book;
        let board = book.board(id);
        if board.is_game_over() {
            return Some(Grade::A);
        }
        // The children in the book with their values from this side (Egaroucid's
        // `get_all_moves_with_value`); a PASS link makes the position transparent.
        let mut children: Vec<(i32, NodeId)> = Vec::with_capacity(book.n_link(id));
        for l in book.links(id) {
            if let Some(c) = book.find(&child_board(&board, l.mv)) {
                if l.mv == Move::Pass {
                    return self.grade(c, tolerance, budget);
                }
                children.push((-i32::from(book.score(c).value), c));
            }
        }
        let level = book.level(id);
        let empties = board.empties();
        let Some(best) = children.iter().map(|&(v, _)| v).max() else {
            return Some(match leaf_kind(level, empties) {
                LeafKind::Perfect => Grade::A,
                LeafKind::Endgame => Grade::C,
                LeafKind::Midgame => Grade::F,
            });
        };
        let mut found = 0u32;
        let mut complete = true;
        for &(v, c) in &children {
            if v >= best - tolerance {
                // Every child within the tolerance is visited even after one ran out of
                // budget: their grades are memoized for the next call.
                match self.grade(c, tolerance, budget) {
                    Some(g) => found |= g.bit(),
                    None => complete = false,
                }
            }
        }
        if !complete {
            return None;
        }
        let leaf = book.leaf(id);
        if leaf.mv != Move::None && i32::from(leaf.score) >= best - tolerance {
            found |= match leaf_kind(level, empties) {
                LeafKind::Perfect => Grade::A.bit(),
                LeafKind::Endgame => Grade::C.bit(),
                LeafKind::Midgame => 0,
            };
        }
        Some(Grade::combine(found))
    }
}

/// The accuracy of `board` in `book` (one-off; use a [`Grader`] for many positions).
pub fn accuracy(book: &MemBook, board: &Board) -> Option<Accuracy> {
    Grader::new(book).accuracy(board)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(grades: &[Grade]) -> u32 {
        grades.iter().fold(0, |a, g| a | g.bit())
    }

    #[test]
    fn combine_follows_egaroucid_table() {
        use Grade::*;
        let cases: &[(&[Grade], Grade)] = &[
            (&[A], A),
            (&[A, B], B),
            (&[A, C], B),
            (&[A, B, C], B),
            (&[A, D], D),
            (&[A, F], D),
            (&[A, C, E], D),
            (&[B], B),
            (&[B, C], B),
            (&[B, F], D),
            (&[C], C),
            (&[C, E], D),
            (&[D], D),
            (&[E, F], E),
            (&[F], F),
            (&[D, F], D),
        ];
        for &(found, want) in cases {
            assert_eq!(Grade::combine(set(found)), want, "{found:?}");
        }
    }

    #[test]
    fn leaf_kinds_from_edax_levels() {
        assert_eq!(leaf_kind(21, 24), LeafKind::Perfect);
        assert_eq!(leaf_kind(21, 25), LeafKind::Endgame);
        assert_eq!(leaf_kind(21, 30), LeafKind::Endgame);
        assert_eq!(leaf_kind(21, 31), LeafKind::Midgame);
        assert_eq!(leaf_kind(10, 20), LeafKind::Perfect);
        assert_eq!(leaf_kind(10, 21), LeafKind::Midgame);
        assert_eq!(leaf_kind(60, 60), LeafKind::Perfect);
    }

    #[test]
    fn display() {
        let a = Accuracy {
            grade: Grade::A,
            wide: Some(Grade::C),
        };
        assert_eq!(a.to_string(), "AC");
        let d = Accuracy {
            grade: Grade::D,
            wide: None,
        };
        assert_eq!(d.to_string(), "D");
    }
}
