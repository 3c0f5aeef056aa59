//! `bookfarm-book`: the Edax-compatible opening book.
//!
//! * [`model`]: [`Position`], [`Link`], [`BookHeader`] with Edax's sentinels;
//! * [`mem`]: [`MemBook`], the compact in-memory book the algorithms run on;
//! * [`edax`]: the `book.dat` reader (strict, never panics) and writer (Edax 4.6 bucket order);
//! * [`csv`], [`dump`], [`info`]: Edax's CSV, the canonical text dump, `book info`;
//! * [`egbk3`]: Egaroucid's `.egbk3` book format and its mapping to the Edax model;
//! * [`format`](mod@format): [`BookFormat`], the one way a whole book file is read and
//!   written, chosen by its extension (`.dat`, `.csv`, `.egbk3`);
//! * [`negamax`]: Edax's negamax, full and incremental, link ordering and linking.
//! * [`select`]: the selectors deviate, enhance, play and extend as pure marking functions;
//! * [`maintain`]: prune and subtree;
//! * [`merge`]: merging by level (higher level wins, equal level → the newer book);
//! * [`program`]: [`program::Program`], the one description of a growth program (operation,
//!   root line, level, schedule), with its stored (serde) form;
//! * [`driver`]: the one definition of book growth, a resumable serial program whose searches
//!   are requests answered by the caller (offline, threads or a cluster), and
//!   [`driver::run_serial`], its serial form with a search callback;
//! * [`results`]: known leaf results, which the growth steps and the audit read;
//! * [`decisive`]: the decisive core, the leaf results the root's value depends on (the two
//!   proof trees of its bounds), and the key that ties a book leaf to the result behind it;
//! * [`grow`]: leaf searches as requests and results, expansion, adding games, `book store`,
//!   link, fill and fix, with searches run by a caller-supplied callback;
//! * [`leaves`]: better leaves (a leaf scoring above every link), found and expanded;
//! * [`extract`]: `book extract` (best-play lines) and the line audit;
//! * [`play`]: the book during play: the random book move and `book analyze`;
//! * [`query`]: `book show`, `book problem` and `book check` with Edax's text;
//! * [`research`]: re-searching leaves in place: `book correct` and `book upgrade`;
//! * [`synth`]: deterministic synthetic books for tests and benchmarks;
//! * [`accuracy`]: Egaroucid's accuracy grades (A–F, AA–AF);
//! * [`line`](mod@line): `book line`, every position of a line as the book holds it;
//! * [`umigame`]: Egaroucid's umigame numbers (lines each colour must memorise), bounded and
//!   memoized;
//! * [`openings`]: opening names by position (the project's list, or a user's);
//! * [`explore`]: the explorer's reads: every legal move with its value, grade, level, lines
//!   and umigame numbers, the principal variation, a game's losses, the lines below a position.
//!
//! The crate does no IO beyond what callers hand it (byte slices and strings) and has no
//! async or logging dependency.
//!
//! ```
//! use bookfarm_book::{MemBook, Position, BookHeader, edax, negamax};
//! use bookfarm_engine::Board;
//! let mut book = MemBook::new(BookHeader::new(2, 12));
//! let mut p = Position::new(Board::start(), 2);
//! p.leaf = bookfarm_book::Link::new(0, bookfarm_engine::Move::Square(
//!     bookfarm_engine::Square::parse("f5").unwrap()));
//! book.insert_new(&p);
//! negamax::negamax(&mut book);
//! let bytes = edax::book_to_bytes(&book);
//! let back = edax::read_book(&bytes).unwrap();
//! assert_eq!(back.get(&Board::start()).unwrap().value, 0);
//! ```
#![warn(missing_docs, missing_debug_implementations)]

pub mod accuracy;
pub mod csv;
pub mod decisive;
pub mod diff;
pub mod driver;
pub mod dump;
pub mod edax;
pub mod egbk3;
pub mod explore;
pub mod extract;
pub mod format;
pub mod grow;
pub mod info;
pub mod leaves;
pub mod line;
pub mod maintain;
pub mod mem;
pub mod merge;
pub mod model;
pub mod negamax;
pub mod openings;
pub mod play;
pub mod program;
pub mod query;
pub mod research;
pub mod results;
pub mod schedule;
pub mod searches;
pub mod select;
pub mod synth;
pub mod umigame;

pub use format::{BookFormat, FormatError};
pub use mem::{Counts, MemBook, NodeId, Revision, Score};
pub use model::{BAD_LINK, BookDate, BookHeader, Link, Position, SCORE_INF};
