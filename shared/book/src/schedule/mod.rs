//! The asynchronous schedule: growth without pass barriers, for farms the serial program cannot
//! keep busy (design: "Frontier selection").
//!
//! * [`frontier`]: Edax's selectors as incremental reachability, kept current from the book's
//!   change journal;
//! * [`run`]: [`AsyncGrowth`], the asynchronous program (plans, application, the needed set's
//!   changes, retract-and-repair, the termination rule).

pub mod frontier;
pub mod run;

pub use frontier::{Frontier, Selector};
pub use run::{
    AsyncGrowth, AsyncOptions, AsyncProgress, AsyncStats, NeededDelta, Order, unfinished,
};
