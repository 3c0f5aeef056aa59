//! How good speculation's guesses are: the default [`Predictor`] ([`ShallowSearch`]) at some
//! levels against real leaf searches at a reference level, on real leaf requests (a book's
//! positions with their links excluded). The simulator's [`super::Guess::Noisy`] model is
//! calibrated with these figures: the share of guesses with another move than the reference
//! search's, and how far the guessed score lies from the reference score.

use crate::service::{Predictor, ShallowSearch};
use bookfarm_book::MemBook;
use bookfarm_engine::search::{LeafRequest, LeafResult, Searcher};
use std::sync::atomic::AtomicBool;

/// The agreement of one predictor level with the reference searches.
#[derive(Debug, Clone, PartialEq)]
pub struct GuessQuality {
    /// The predictor's level (requests of a lower level are guessed at their own level).
    pub level: u8,
    /// Requests compared.
    pub requests: usize,
    /// Guesses whose move differs from the reference search's.
    pub wrong_moves: usize,
    /// |guessed score − reference score| of every request, sorted.
    pub score_errors: Vec<u32>,
    /// CPU seconds of the guesses (the coordinator pays them).
    pub cpu_seconds: f64,
}

impl GuessQuality {
    /// Share of guesses with a wrong move, in percent.
    pub fn wrong_move_percent(&self) -> f64 {
        100.0 * self.wrong_moves as f64 / self.requests.max(1) as f64
    }

    /// Mean |score error| in discs.
    pub fn mean_score_error(&self) -> f64 {
        self.score_errors.iter().map(|e| f64::from(*e)).sum::<f64>()
            / self.score_errors.len().max(1) as f64
    }

    /// The `q` quantile (0 … 1) of |score error| in discs.
    pub fn score_error_quantile(&self, q: f64) -> u32 {
        if self.score_errors.is_empty() {
            return 0;
        }
        let i = ((self.score_errors.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        self.score_errors[i]
    }

    /// Microseconds of CPU per guess.
    pub fn micros_per_guess(&self) -> f64 {
        1e6 * self.cpu_seconds / self.requests.max(1) as f64
    }
}

/// The leaf requests of a book at `level`: each position's board with its links excluded
/// (what growth asks when it re-searches the position), in board order; positions whose every
/// move is a link, and finished games, ask nothing.
pub fn book_requests(book: &MemBook, level: u8) -> Vec<LeafRequest> {
    let mut requests: Vec<LeafRequest> = book
        .positions()
        .filter_map(|p| {
            let mut p = p;
            p.level = level;
            bookfarm_book::grow::leaf_request(&p)
        })
        .filter(|r| !r.board.is_game_over() && r.board.moves() & !r.excluded != 0)
        .collect();
    requests.sort_by_key(|r| (r.board, r.excluded));
    requests
}

/// Search every request at its own level with `reference` and guess it with a fresh
/// [`ShallowSearch`] at each of `levels`; `progress` is called after each reference search.
pub fn measure(
    reference: &mut Searcher,
    requests: &[LeafRequest],
    levels: &[u8],
    mut progress: impl FnMut(usize),
) -> Vec<GuessQuality> {
    let abort = AtomicBool::new(false);
    let truth: Vec<LeafResult> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let t = reference.leaf_search(r, &abort);
            progress(i + 1);
            t
        })
        .collect();
    levels
        .iter()
        .map(|&level| {
            let mut predictor = ShallowSearch::new(level);
            let started = cpu_time::ThreadTime::now();
            let guesses: Vec<LeafResult> = requests.iter().map(|r| predictor.predict(r)).collect();
            let cpu_seconds = started.elapsed().as_secs_f64();
            compare(level, &truth, &guesses, cpu_seconds)
        })
        .collect()
}

/// Compare guesses with the reference results, request by request.
pub fn compare(
    level: u8,
    truth: &[LeafResult],
    guesses: &[LeafResult],
    cpu_seconds: f64,
) -> GuessQuality {
    let mut score_errors: Vec<u32> = truth
        .iter()
        .zip(guesses)
        .map(|(t, g)| t.score.abs_diff(g.score))
        .collect();
    score_errors.sort_unstable();
    GuessQuality {
        level,
        requests: truth.len().min(guesses.len()),
        wrong_moves: truth
            .iter()
            .zip(guesses)
            .filter(|(t, g)| t.mv != g.mv)
            .count(),
        score_errors,
        cpu_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_engine::{Board, Move};
    use std::time::Duration;

    fn result(mv: Move, score: i32) -> LeafResult {
        LeafResult {
            mv,
            score,
            depth: 4,
            selectivity: 5,
            exact: false,
            nodes: 1,
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn comparison_counts_wrong_moves_and_score_errors() {
        let a = Move::Square(bookfarm_engine::Square::new(19).unwrap());
        let b = Move::Square(bookfarm_engine::Square::new(26).unwrap());
        let truth = [result(a, 2), result(a, -4), result(b, 0), result(b, 10)];
        let guess = [result(a, 2), result(b, -1), result(b, -6), result(a, 10)];
        let q = compare(2, &truth, &guess, 0.5);
        assert_eq!(q.requests, 4);
        assert_eq!(q.wrong_moves, 2);
        assert_eq!(q.wrong_move_percent(), 50.0);
        assert_eq!(q.score_errors, vec![0, 0, 3, 6]);
        assert_eq!(q.mean_score_error(), 2.25);
        assert_eq!(q.score_error_quantile(0.0), 0);
        assert_eq!(q.score_error_quantile(1.0), 6);
        assert_eq!(q.micros_per_guess(), 125_000.0);
    }

    /// A guess at the reference level is the reference search itself: no error at all, and a
    /// lower level disagrees somewhere on the start's openings.
    #[test]
    fn a_predictor_at_the_reference_level_makes_no_error() {
        let start = Board::start();
        let requests: Vec<LeafRequest> = [0u64, 1 << 19, (1 << 19) | (1 << 26)]
            .iter()
            .map(|&excluded| LeafRequest {
                board: start,
                level: 5,
                excluded: excluded & start.moves(),
            })
            .chain(
                bookfarm_engine::board::BitIter(start.moves())
                    .filter_map(|sq| start.play(sq).ok())
                    .map(|board| LeafRequest {
                        board,
                        level: 5,
                        excluded: 0,
                    }),
            )
            .collect();
        let eval = bookfarm_engine::eval::default_eval();
        let mut reference = Searcher::with_options(
            eval.clone(),
            bookfarm_engine::search::SearchOptions {
                tt_bits: 14,
                endgame_tt_bits: 12,
                ..bookfarm_engine::search::SearchOptions::for_eval(&eval)
            },
        );
        let mut seen = 0;
        let q = measure(&mut reference, &requests, &[5, 1], |n| seen = n);
        assert_eq!(seen, requests.len());
        assert_eq!(q[0].level, 5);
        assert_eq!(q[0].requests, requests.len());
        assert_eq!((q[0].wrong_moves, q[0].mean_score_error()), (0, 0.0));
        assert!(q[1].wrong_moves > 0 || q[1].mean_score_error() > 0.0);
    }
}
