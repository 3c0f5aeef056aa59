//! How far the root value moves between deviate iterations (issue 14: the window rule's guard
//! band). Builds a level-2, depth-12 `deviate 2 4` book serially from the start position with the
//! real engine and the embedded weights, and prints the root value each pass is marked with.
//!
//! `cargo run --release -p bookfarm-coordinator --example root_drift`
use bookfarm_book::driver::{Driver, Phase, Progress, Results};
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::select::Deviate;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchOptions, Searcher};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

struct Known(HashMap<LeafRequest, LeafResult>);
impl Results for Known {
    fn result(&self, r: &LeafRequest) -> Option<LeafResult> {
        self.0.get(r).copied()
    }
}

fn main() {
    let mut book = bookfarm_coordinator::service::new_mem_book(2, 12);
    let eval = bookfarm_engine::eval::default_eval();
    let opts = SearchOptions::for_eval(&eval);
    let mut s = Searcher::with_options(eval, opts);
    let mut known = Known(HashMap::new());
    for op in [
        Operation::New,
        Operation::Deviate {
            params: Deviate::new(2, 4),
        },
    ] {
        let mut d = Driver::new(Program::new(op));
        let mut last = None;
        loop {
            match d.run(&mut book, &known, 0) {
                Progress::Done => break,
                Progress::Blocked(need) => {
                    if let Phase::Expanding {
                        root_value, pass, ..
                    } = &d.state().phase
                        && last != Some((*root_value, d.state().iterations))
                    {
                        println!(
                            "iteration {} pass {:?} root value {}",
                            d.state().iterations,
                            pass,
                            root_value
                        );
                        last = Some((*root_value, d.state().iterations));
                    }
                    for r in need {
                        let res = s.leaf_search(&r, &AtomicBool::new(false));
                        known.0.insert(r, res);
                    }
                }
            }
        }
    }
    println!("positions {}", book.len());
}
