//! `book diff A B`: how two books differ, position by position (by canonical board): the
//! positions only in A, only in B, and those in both whose value, level or leaf differ. A book
//! builder checks every merge, upgrade and rooted program with it.

use crate::mem::MemBook;
use crate::model::Position;
use crate::query::BookLines;
use bookfarm_engine::Board;
use bookfarm_engine::symmetry::canonical;
use std::collections::HashMap;

/// A position in both books that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The position in A.
    pub a: Position,
    /// The position in B.
    pub b: Position,
}

impl Changed {
    /// The values differ.
    pub fn value(&self) -> bool {
        self.a.value != self.b.value
    }

    /// The levels differ.
    pub fn level(&self) -> bool {
        self.a.level != self.b.level
    }

    /// The leaves differ (score or move).
    pub fn leaf(&self) -> bool {
        self.a.leaf != self.b.leaf
    }
}

/// How two books differ (each list in board order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BookDiff {
    /// Positions only in A.
    pub only_a: Vec<Position>,
    /// Positions only in B.
    pub only_b: Vec<Position>,
    /// Positions in both with a different value, level or leaf.
    pub changed: Vec<Changed>,
    /// Positions in both with the same value, level and leaf.
    pub same: usize,
}

impl BookDiff {
    /// Whether the books hold the same positions with the same values, levels and leaves.
    pub fn is_empty(&self) -> bool {
        self.only_a.is_empty() && self.only_b.is_empty() && self.changed.is_empty()
    }

    /// The summary line: `only in A: 3, only in B: 12, different: 5 (value 4, level 1, leaf
    /// 2), same: 40`.
    pub fn summary(&self) -> String {
        let count = |f: fn(&Changed) -> bool| self.changed.iter().filter(|c| f(c)).count();
        format!(
            "only in A: {}, only in B: {}, different: {} (value {}, level {}, leaf {}), same: {}",
            self.only_a.len(),
            self.only_b.len(),
            self.changed.len(),
            count(Changed::value),
            count(Changed::level),
            count(Changed::leaf),
            self.same
        )
    }

    /// The summary, then at most `limit` positions of each kind, each named by its shortest
    /// line through the book that holds it (its board when no book line reaches it), with its
    /// value, level and leaf in each book.
    pub fn report(&self, a: &MemBook, b: &MemBook, limit: usize) -> String {
        let (lines_a, lines_b) = (BookLines::new(a, None), BookLines::new(b, None));
        let name = |p: &Position, lines: &BookLines| match lines.line(&p.board) {
            Some(line) if line.is_empty() => "start".to_string(),
            Some(line) => line.iter().map(ToString::to_string).collect(),
            None => format!("{:?}", p.board),
        };
        let facts = |p: &Position| {
            format!(
                "value {:+} level {} leaf {} {:+}",
                p.value, p.level, p.leaf.mv, p.leaf.score
            )
        };
        let mut out = self.summary();
        out.push('\n');
        for p in self.only_a.iter().take(limit) {
            out.push_str(&format!("only in A  {}: {}\n", name(p, &lines_a), facts(p)));
        }
        for p in self.only_b.iter().take(limit) {
            out.push_str(&format!("only in B  {}: {}\n", name(p, &lines_b), facts(p)));
        }
        for c in self.changed.iter().take(limit) {
            out.push_str(&format!(
                "different  {}: A {} | B {}\n",
                name(&c.a, &lines_a),
                facts(&c.a),
                facts(&c.b)
            ));
        }
        let hidden = self.only_a.len().saturating_sub(limit)
            + self.only_b.len().saturating_sub(limit)
            + self.changed.len().saturating_sub(limit);
        if hidden > 0 {
            out.push_str(&format!("… {hidden} more (raise --limit)\n"));
        }
        out
    }
}

/// Compare `a` and `b` position by position (see the module docs).
pub fn diff(a: &MemBook, b: &MemBook) -> BookDiff {
    let key = |p: &Position| canonical(&p.board).0;
    let mut in_b: HashMap<Board, Position> = b.positions().map(|p| (key(&p), p)).collect();
    let mut d = BookDiff::default();
    for pa in a.positions() {
        match in_b.remove(&key(&pa)) {
            None => d.only_a.push(pa),
            Some(pb) => {
                let c = Changed { a: pa, b: pb };
                if c.value() || c.level() || c.leaf() {
                    d.changed.push(c);
                } else {
                    d.same += 1;
                }
            }
        }
    }
    d.only_b = in_b.into_values().collect();
    d.only_a.sort_by_key(|p| p.board);
    d.only_b.sort_by_key(|p| p.board);
    d.changed.sort_by_key(|c| c.a.board);
    d
}
