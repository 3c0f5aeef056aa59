//! `bookfarm-train`: the training pipeline of bookfarm's default evaluation.
//!
//! Everything Edax-defined comes from `bookfarm-engine`: game readers ([`bookfarm_engine::formats`]),
//! the 47 features, their symmetric packing, the `eval.dat` reader/writer and the evaluation
//! itself ([`bookfarm_engine::eval`]). This crate adds only what is specific to training:
//!
//! * [`games`] tags the engine-read game sets of `../shared/data` with source and labels;
//! * [`dataset`] turns games into de-duplicated, labelled positions with a held-out test split
//!   and caches them in a compact binary file;
//! * [`features`] maps a position to its 47 *packed* weight offsets (what the fitter learns);
//! * [`fit`] fits the packed weights per phase bucket by regularised least squares (Adam);
//! * [`weights`] turns fitted packed weights into an engine [`bookfarm_engine::eval::Eval`] and
//!   loads/writes plain or gzip `eval.dat` files;
//! * [`positions`] draws positions to label (real openings followed by random moves, samples);
//! * [`label`] labels them with the engine's searcher (exact or fixed depth), resumably;
//! * [`labels`] is the committed, append-only label store (`shared/train/labels`) and its
//!   resumable labelling runs;
//! * [`solve`] labels positions exactly with the engine solver; [`play`] plays evaluation matches
//!   (the trainer's alpha-beta, or the engine's searcher at an Edax level);
//! * [`measure`] reports MAE / RMSE per empties bucket.
#![warn(missing_docs, missing_debug_implementations)]

pub mod dataset;
pub mod features;
pub mod fit;
pub mod games;
pub mod label;
pub mod labels;
pub mod measure;
pub mod play;
pub mod positions;
pub mod solve;
pub mod weights;
