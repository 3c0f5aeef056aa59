//! Book-neutral programs on the farm: a batch of leaf searches over a position file (`expand
//! search`, `book search`) and the analysis of one position level by level (`expand analyze`).
//! The book crate owns what they search (`bookfarm_book::searches`, run by the driver like any
//! program); this room owns what the service shows of them:
//!
//! * [`Coordinator::search_output`]: a search program's output, built from the results the
//!   trust rules confirmed at the moment it is asked for (at the program's end, or on
//!   `--flush`), never streamed, so a liar caught before that leaves nothing in it;
//! * `analysis`: every confirmed full-width search of a position the result store holds (shown
//!   by `book show`, `book line`, the API and the explorer).

mod analysis;
pub(crate) mod pace;
#[cfg(test)]
mod tests;

pub use analysis::{Analysis, analysis_of, render_analysis};

use super::Coordinator;
use crate::error::{CoordinatorError, Result};
use crate::store::ProgramState;
use bookfarm_book::program::Operation;
use bookfarm_book::searches::SearchOutput;
use bookfarm_engine::Board;
use std::cell::Cell;

/// A search program's output and where the program stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramOutput {
    /// The output (see `bookfarm_book::searches::SearchSet::output`).
    pub output: SearchOutput,
    /// The program's state when it was built.
    pub state: ProgramState,
}

impl Coordinator {
    /// The output of search program `id` now: every position whose result the trust rules
    /// confirmed (a provisional result, applied on the word of earned workers only, is left
    /// out and counted as `unconfirmed`). NotFound for an unknown program (or one forgotten),
    /// FailedPrecondition for a program of another kind.
    pub fn search_output(&self, id: u64) -> Result<ProgramOutput> {
        let g = self.growth();
        let record = g
            .programs
            .get(id)
            .ok_or(CoordinatorError::UnknownProgram(id))?;
        let Operation::Search { positions, level } = &record.program.operation else {
            return Err(CoordinatorError::FailedPrecondition(format!(
                "program #{id} ({}) is not a search program",
                record.program.describe()
            )));
        };
        let jobs = self.jobs();
        let unconfirmed = Cell::new(0u64);
        let seconds = Cell::new(0f64);
        let mut output = positions.output(*level, "", |r| {
            let found = g.results.get(r).copied()?;
            if jobs.trust.provisional(r) {
                unconfirmed.set(unconfirmed.get() + 1);
                return None;
            }
            seconds.set(seconds.get() + found.elapsed.as_secs_f64());
            Some(found)
        });
        // The header's fields after the counts: the program, its state, the searches left out
        // as unconfirmed, the searchers' time of the results written, the search signature.
        let first_end = output.text.find('\n').unwrap_or(output.text.len());
        let mut extra = format!(
            " program={id} state={} unconfirmed={} search-seconds={:.3}",
            record.state.name(),
            unconfirmed.get(),
            seconds.get()
        );
        if let Some(sig) = &self.0.cfg.signature {
            extra.push_str(&format!(
                " signature={}",
                sig.replace(char::is_whitespace, "_")
            ));
        }
        output.text.insert_str(first_end, &extra);
        Ok(ProgramOutput {
            output,
            state: record.state,
        })
    }

    /// Every full-width search of `board` (any orientation) whose result the trust rules
    /// confirmed, lowest level first, moves in `board`'s orientation (see `analysis`).
    pub fn analysis(&self, board: &Board) -> Vec<Analysis> {
        let g = self.growth();
        let jobs = self.jobs();
        analysis_of(board, |r| {
            g.results
                .get(r)
                .copied()
                .filter(|_| !jobs.trust.provisional(r))
        })
    }
}
