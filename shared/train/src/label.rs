//! Search labels with the engine's own [`Searcher`], resumable from a checkpointed cache.
//!
//! A label is the score of `Searcher::search_depth` at a fixed depth and selectivity: exact (and
//! marked [`LabelKind::Exact`]) when the depth reaches the empties with no selectivity, otherwise a
//! [`LabelKind::Search`] label whose quality is that of the evaluation at the leaves plus the
//! search. Labelling earlier phases with a search whose leaves lie in phases already trained on
//! exact labels is the bootstrap of docs/training.md.
//!
//! The output cache is rewritten (temporary file, then rename) after every chunk, in input
//! order, so an interrupted run resumes where it stopped: the records already in the cache must
//! be the first positions of the input (otherwise the cache belongs to other parameters and the
//! run refuses to continue).

use crate::dataset::{self, DatasetError, LabelKind, Sample};
use bookfarm_engine::Board;
use bookfarm_engine::eval::Eval;
use bookfarm_engine::level::NO_SELECTIVITY;
use bookfarm_engine::search::Searcher;
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use tracing::info;

/// How positions are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelSpec {
    /// Search depth; at or above a position's empties the search is an endgame search.
    pub depth: u32,
    /// Selectivity index 0..=5 (5 = none: exact endgames, no probcut).
    pub selectivity: u8,
}

impl LabelSpec {
    /// Exact solves (depth 60, no selectivity).
    pub const EXACT: LabelSpec = LabelSpec {
        depth: 60,
        selectivity: NO_SELECTIVITY,
    };

    /// The kind of label this spec gives a position with `empties` empties.
    pub fn kind(&self, empties: u32) -> LabelKind {
        if self.depth >= empties && self.selectivity >= NO_SELECTIVITY {
            LabelKind::Exact
        } else {
            LabelKind::Search
        }
    }
}

/// Label one position (which must have a legal move) with `searcher`.
pub fn label_one(searcher: &mut Searcher, board: &Board, spec: LabelSpec) -> Sample {
    let never = AtomicBool::new(false);
    let depth = spec.depth.min(board.empties());
    let r = searcher.search_depth(board, depth, spec.selectivity, 0, &never);
    Sample {
        board: *board,
        label: r.score as f32,
        count: 1,
        kind: spec.kind(board.empties()),
    }
}

/// Errors of a resumable labelling run.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// Reading or writing the cache failed.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The existing cache does not start with the requested positions.
    #[error(
        "{path}: the cache holds {have} records that are not the first positions of this run (other parameters?); delete it or pick another --out"
    )]
    Mismatch {
        /// The cache file.
        path: String,
        /// Records in it.
        have: usize,
    },
}

/// Label `boards` in order with `spec` and `eval`, `chunk` positions at a time in parallel,
/// resuming from and checkpointing to `out`. Calls `progress(done, total)` after every chunk.
/// Returns every labelled sample (the cache's content).
pub fn label_resumable(
    boards: &[Board],
    spec: LabelSpec,
    eval: &Arc<Eval>,
    out: &Path,
    chunk: usize,
    progress: impl Fn(usize, usize),
) -> Result<Vec<Sample>, LabelError> {
    let mut done: Vec<Sample> = if out.exists() {
        dataset::read_samples(out)?
    } else {
        Vec::new()
    };
    if done.len() > boards.len() || done.iter().zip(boards).any(|(s, b)| s.board != *b) {
        return Err(LabelError::Mismatch {
            path: out.display().to_string(),
            have: done.len(),
        });
    }
    if !done.is_empty() {
        info!(file = %out.display(), done = done.len(), total = boards.len(), "resuming labels");
    }
    let t = Instant::now();
    let resumed = done.len();
    let tmp = out.with_extension("tmp");
    for part in boards[done.len()..].chunks(chunk.max(1)) {
        let labelled: Vec<Sample> = part
            .par_iter()
            .map_init(
                || Searcher::new(Arc::clone(eval)),
                |s, b| label_one(s, b, spec),
            )
            .collect();
        done.extend(labelled);
        dataset::write_samples(&tmp, &done)?;
        std::fs::rename(&tmp, out).map_err(DatasetError::Io)?;
        let rate = (done.len() - resumed) as f64 / t.elapsed().as_secs_f64().max(1e-9);
        info!(
            file = %out.display(),
            done = done.len(),
            total = boards.len(),
            per_sec = format!("{rate:.2}"),
            eta_s = ((boards.len() - done.len()) as f64 / rate.max(1e-9)).round(),
            "labels checkpointed"
        );
        progress(done.len(), boards.len());
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::positions::random_continuations;
    use crate::solve::solve_exact;
    use bookfarm_engine::endgame::EndgameContext;
    use bookfarm_engine::eval::default_eval;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn exact_labels_match_the_solver_and_an_interrupted_run_resumes() {
        let boards = random_continuations(&[Board::start()], 10..=12, 12, 5, &HashSet::new());
        let eval = default_eval();
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("labels.bin");
        // A first run over the first 5 positions stands for an interrupted run.
        let first = label_resumable(&boards[..5], LabelSpec::EXACT, &eval, &out, 2, |_, _| {})
            .expect("first run");
        assert_eq!(first.len(), 5);
        let calls = AtomicUsize::new(0);
        let all = label_resumable(&boards, LabelSpec::EXACT, &eval, &out, 2, |_, _| {
            calls.fetch_add(1, Ordering::Relaxed);
        })
        .expect("resumed run");
        assert_eq!(
            calls.load(Ordering::Relaxed),
            4,
            "7 remaining positions in chunks of 2"
        );
        assert_eq!(all.len(), boards.len());
        assert_eq!(dataset::read_samples(&out).expect("cache"), all);
        let mut ctx = EndgameContext::with_tt_bits(12);
        for s in &all {
            assert_eq!(s.kind, LabelKind::Exact);
            assert_eq!(
                s.label as i32,
                solve_exact(&s.board, &mut ctx).0,
                "{}",
                s.board
            );
        }
        // A cache of other positions is refused.
        let other = random_continuations(&[Board::start()], 10..=12, 3, 6, &HashSet::new());
        assert!(matches!(
            label_resumable(&other, LabelSpec::EXACT, &eval, &out, 2, |_, _| {}),
            Err(LabelError::Mismatch { .. })
        ));
    }

    #[test]
    fn shallow_labels_are_search_labels() {
        let spec = LabelSpec {
            depth: 2,
            selectivity: NO_SELECTIVITY,
        };
        assert_eq!(spec.kind(20), LabelKind::Search);
        assert_eq!(spec.kind(2), LabelKind::Exact);
        let b = random_continuations(&[Board::start()], 30..=30, 1, 1, &HashSet::new())[0];
        let mut s = Searcher::new(default_eval());
        let l = label_one(&mut s, &b, spec);
        assert_eq!(l.kind, LabelKind::Search);
        let never = AtomicBool::new(false);
        assert_eq!(
            l.label as i32,
            Searcher::new(default_eval())
                .search_depth(&b, 2, NO_SELECTIVITY, 0, &never)
                .score
        );
    }
}
