//! `bookfarm-engine`: the pure Othello engine shared by the coordinator and the workers.
//!
//! It holds the bitboard [`Board`], legal moves and flips, the eight symmetries and the
//! canonical form used as book key, game-record readers and the search.
//! It does no network or async IO and never sees protobuf types.
//!
//! ```
//! use bookfarm_engine::{Board, Square};
//! let b = Board::start();
//! assert_eq!(b.moves().count_ones(), 4);
//! let f5 = Square::parse("f5").unwrap();
//! let next = b.play(f5).unwrap();
//! assert_eq!(next.empties(), 59);
//! ```
#![warn(missing_docs, missing_debug_implementations)]

pub mod board;
pub mod endgame;
pub mod eval;
pub mod flip;
pub mod formats;
pub mod level;
pub mod perft;
pub mod search;
pub mod square;
pub mod stability;
pub mod symmetry;
pub mod testdata;
#[doc(hidden)]
pub mod testutil;
pub mod unmove;

pub use board::{Board, IllegalMove};
pub use square::{Move, ParseMoveError, Square};
