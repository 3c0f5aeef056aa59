//! Frontier selection: Edax's deviate, enhance, play and extend rules (edax-spec §4.6–4.8) as
//! pure functions over the in-memory book. They return the positions whose leaf should be
//! expanded, in depth-first order; the scheduler skips positions whose leaf search is in flight
//! and re-runs selection as results land (design.md "Frontier selection").

use crate::book_index::{BookIndex, child_board, leaf_bounds};
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::Selector;
use std::collections::HashSet;

/// Positions to expand under `selector`, walking from `root` (a canonical board).
///
/// Deviate runs Edax's two passes (the root side deviating, then the opponent) and returns their
/// union, first pass first. Positions without a leaf move are never returned.
pub fn select(index: &BookIndex, root: &Board, selector: Selector) -> Vec<Board> {
    let Some(r) = index.get(root) else {
        return Vec::new();
    };
    let n_empties = u32::try_from(index.header.n_empties.max(0)).unwrap_or(0);
    let mut out = Vec::new();
    let mut seen_out = HashSet::new();
    match selector {
        Selector::Deviate { relative, absolute } => {
            let s = i32::from(r.pos.value);
            for (pdev, odev) in [(relative, 0), (0, relative)] {
                let mut w = Walk {
                    index,
                    n_empties,
                    done: HashSet::new(),
                    todo: Vec::new(),
                };
                w.deviate(root, pdev, odev, s - absolute, s + absolute);
                for b in w.todo {
                    if seen_out.insert(b) {
                        out.push(b);
                    }
                }
            }
        }
        Selector::Enhance { .. } => {
            let mut w = Walk {
                index,
                n_empties,
                done: HashSet::new(),
                todo: Vec::new(),
            };
            w.enhance(root);
            out = w.todo;
        }
        Selector::Play | Selector::Extend => {
            let mut w = Walk {
                index,
                n_empties,
                done: HashSet::new(),
                todo: Vec::new(),
            };
            w.mark_all(root, selector == Selector::Play);
            out = w.todo;
        }
    }
    out.retain(|b| index.get(b).is_some_and(|e| e.pos.leaf.mv != Move::None));
    out
}

struct Walk<'a> {
    index: &'a BookIndex,
    n_empties: u32,
    done: HashSet<Board>,
    todo: Vec<Board>,
}

impl Walk<'_> {
    /// Edax's `deviate(p, pdev, odev, lo, hi)`.
    fn deviate(&mut self, b: &Board, pdev: i32, odev: i32, lo: i32, hi: i32) {
        let Some(e) = self.index.get(b) else { return };
        let p = &e.pos;
        let value = i32::from(p.value);
        if self.done.contains(b)
            || !(lo <= value && value <= hi)
            || b.empties() < self.n_empties
            || b.is_game_over()
        {
            return;
        }
        self.done.insert(*b);
        for l in &p.links {
            let ls = i32::from(l.score);
            if value - ls <= pdev && lo <= ls && ls <= hi {
                self.deviate(&child_board(b, l.mv), odev, pdev, -hi, -lo);
            }
        }
        let leaf = i32::from(p.leaf.score);
        if value - leaf <= pdev && lo <= leaf && leaf <= hi {
            self.todo.push(*b);
        }
    }

    /// Edax's `enhance(p)`.
    fn enhance(&mut self, b: &Board) {
        let Some(e) = self.index.get(b) else { return };
        let p = &e.pos;
        if self.done.contains(b) || b.empties() < self.n_empties || b.is_game_over() {
            return;
        }
        self.done.insert(*b);
        let (plo, pup) = (i32::from(p.lower), i32::from(p.upper));
        for l in &p.links {
            let cb = child_board(b, l.mv);
            if let Some(c) = self.index.get(&cb)
                && (-i32::from(c.pos.upper) >= plo || -i32::from(c.pos.lower) >= pup)
            {
                self.enhance(&cb);
            }
        }
        if p.leaf.score > -127 {
            let (lo, up) = leaf_bounds(&self.index.header, b, p.level, i32::from(p.leaf.score));
            if lo >= plo || up >= pup {
                self.todo.push(*b);
            }
        }
    }

    /// Edax's play/extend marking: all links, no score filter.
    fn mark_all(&mut self, b: &Board, play: bool) {
        let Some(e) = self.index.get(b) else { return };
        let p = &e.pos;
        if self.done.contains(b) || b.empties() < self.n_empties || b.is_game_over() {
            return;
        }
        self.done.insert(*b);
        for l in &p.links {
            self.mark_all(&child_board(b, l.mv), play);
        }
        let marked = if play {
            p.links.is_empty()
        } else {
            i16::from(p.leaf.score) >= p.value
        };
        if marked {
            self.todo.push(*b);
        }
    }
}
