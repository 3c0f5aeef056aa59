//! `bookfarm-train`: the training pipeline of bookfarm's default evaluation.
//!
//! * [`games`] reads the game sets in `../shared/data` and replays them;
//! * [`dataset`] turns games into de-duplicated, labelled positions with a held-out test split
//!   and caches them in a compact binary file;
//! * [`features`] is Edax's 47-feature pattern layout with its symmetric packing;
//! * [`fit`] fits the packed weights per phase bucket by regularised least squares (Adam);
//! * [`weights`] reads and writes Edax `eval.dat` files (plain or gzip);
//! * [`solve`] labels positions exactly with the engine solver; [`play`] plays evaluation matches;
//! * [`measure`] reports MAE / RMSE per empties bucket.
#![warn(missing_docs, missing_debug_implementations)]

pub mod dataset;
pub mod features;
pub mod fit;
pub mod games;
pub mod measure;
pub mod play;
pub mod solve;
pub mod weights;
