//! Exact endgame values for the search, through the project's endgame solver
//! ([`crate::endgame`]).
//!
//! The searcher keeps two solver contexts: a small one for positions with few empties (cheap to
//! clear) and a large one. A context is cleared before each search that may use it, so that the
//! node counts of a search never depend on what was searched before.

use crate::board::Board;
use crate::endgame::{self, EndgameContext};
use std::sync::atomic::AtomicBool;

/// Positions with at most this many empties use the small context.
pub const SMALL_CONTEXT_MAX_EMPTIES: u32 = 18;

/// The solver contexts of one searcher.
#[derive(Debug)]
pub struct ExactSolvers {
    small: EndgameContext,
    large: EndgameContext,
    large_bits: u32,
    large_allocated: bool,
    large_dirty: bool,
    small_dirty: bool,
    portable_only: bool,
}

impl ExactSolvers {
    /// Contexts with a `2^large_bits`-bucket table for large solves (allocated at the first
    /// large solve).
    pub fn new(large_bits: u32) -> ExactSolvers {
        ExactSolvers {
            small: EndgameContext::with_tt_bits(12),
            large: EndgameContext::with_tt_bits(4),
            large_bits,
            large_allocated: false,
            large_dirty: false,
            small_dirty: false,
            portable_only: false,
        }
    }

    /// Run the solver's baseline code generation even where the CPU supports x86-64-v3 (see
    /// [`EndgameContext::set_portable_only`]); results never change, only speed.
    pub fn set_portable_only(&mut self, on: bool) {
        self.portable_only = on;
        self.small.set_portable_only(on);
        self.large.set_portable_only(on);
    }

    /// Start a search from empty tables: clears the contexts used since the last call (cheap
    /// when nothing was solved).
    pub fn prepare(&mut self) {
        if self.small_dirty {
            self.small.clear();
            self.small_dirty = false;
        }
        if self.large_dirty {
            self.large.clear();
            self.large_dirty = false;
        }
    }

    /// Full clear.
    pub fn clear(&mut self) {
        self.small.clear();
        self.large.clear();
        self.small_dirty = false;
        self.large_dirty = false;
    }

    fn context(&mut self, empties: u32) -> &mut EndgameContext {
        if empties <= SMALL_CONTEXT_MAX_EMPTIES {
            self.small_dirty = true;
            &mut self.small
        } else {
            if !self.large_allocated {
                self.large = EndgameContext::with_tt_bits(self.large_bits);
                self.large.set_portable_only(self.portable_only);
                self.large_allocated = true;
            }
            self.large_dirty = true;
            &mut self.large
        }
    }

    /// Exact fail-soft value of `board` within `(alpha, beta)`; adds the visited nodes to `nodes`.
    /// Meaningless when `abort` was set during the solve.
    pub fn solve(
        &mut self,
        board: &Board,
        alpha: i32,
        beta: i32,
        nodes: &mut u64,
        abort: &AtomicBool,
    ) -> i32 {
        let ctx = self.context(board.empties());
        let before = ctx.nodes;
        let v = endgame::solve_with_abort(board, alpha, beta, ctx, abort);
        *nodes += ctx.nodes - before;
        v
    }
}

impl ExactSolvers {
    /// Best move and exact score among the legal moves not in `excluded` (see
    /// [`endgame::solve_root`]); adds the visited nodes to `nodes`.
    pub fn solve_root(
        &mut self,
        board: &Board,
        excluded: u64,
        nodes: &mut u64,
        abort: &AtomicBool,
    ) -> (crate::Move, i32) {
        let ctx = self.context(board.empties());
        let before = ctx.nodes;
        let r = endgame::solve_root_with_abort(board, excluded, ctx, abort);
        *nodes += ctx.nodes - before;
        r
    }
}
