//! What a simulated search answers: a pure function of the request ([`Truth`]).
//!
//! * [`Truth::Hash`] ([`fake_search`]): the open move whose resulting position hashes highest,
//!   scored by that hash. Cheap, but a position's value has nothing to do with its children's,
//!   so deviate's window holds a handful of positions at a time and a build is a long chain of
//!   tiny passes (the serial 138k-position build: 38,766 passes of 7 searches on average).
//! * [`Truth::Engine`]: the project's engine with the embedded weights at a low level, so values
//!   are correlated along lines as in a real book; results are cached (process-wide), since every
//!   simulation of a table asks the same requests. The result reports the depth and selectivity
//!   the request's own level has (what the coordinator validates); only the search is shallower.
//!
//! Durations come from [`super::times`] in both cases.

use bookfarm_engine::board::BitIter;
use bookfarm_engine::level::level_params;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchOptions, Searcher};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// A 64-bit mix (splitmix64's finaliser): the simulation's only source of randomness, so
/// that every figure is a function of the configuration.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash of a request (board as searched, excluded moves, level).
pub fn request_hash(req: &LeafRequest) -> u64 {
    mix(req.board.player ^ mix(req.board.opponent ^ mix(req.excluded ^ u64::from(req.level))))
}

fn board_hash(b: &Board) -> u64 {
    let c = canonical(b).0;
    mix(c.player ^ mix(c.opponent))
}

/// The depth and selectivity a search of `req` reports (the level table's; a finished game
/// is searched to its end).
pub fn reported_depth(req: &LeafRequest) -> (u32, u8) {
    if req.board.is_game_over() {
        (req.board.empties(), 5)
    } else {
        level_params(req.level, req.board.empties())
    }
}

/// A stand-in for a leaf search, a pure function of the request: the open move whose
/// resulting position hashes highest, scored by that position's hash (even, −20 … 20), so
/// that transpositions agree and books grow in every direction; a pass when the side to move
/// must pass, the final score when the game is over. Depth and selectivity are the level
/// table's, as the coordinator requires.
pub fn fake_search(req: &LeafRequest) -> LeafResult {
    let b = req.board;
    let open = b.moves() & !req.excluded;
    let (mv, score) = if b.is_game_over() {
        (Move::None, b.final_score())
    } else if b.must_pass() {
        (Move::Pass, (board_hash(&b.pass()) % 21) as i32 * 2 - 20)
    } else {
        let best = BitIter(open)
            .filter_map(|sq| b.play(sq).ok().map(|child| (board_hash(&child), sq)))
            .max();
        match best {
            Some((h, sq)) => (Move::Square(sq), ((h % 21) as i32 - 10) * 2),
            None => (Move::None, -127),
        }
    };
    let (depth, selectivity) = reported_depth(req);
    LeafResult {
        mv,
        score,
        depth,
        selectivity,
        exact: false,
        nodes: 1,
        elapsed: Duration::from_micros(1),
    }
}

/// What simulated searches answer (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Truth {
    /// [`fake_search`].
    #[default]
    Hash,
    /// The engine (embedded weights) searching at this level (at most the request's).
    Engine {
        /// The level searched.
        level: u8,
    },
}

impl Truth {
    /// The result of `req`.
    pub fn search(self, req: &LeafRequest) -> LeafResult {
        match self {
            Truth::Hash => fake_search(req),
            Truth::Engine { level } => engine_search(req, level),
        }
    }

    /// A short name for reports (`hash`, `engine-2`).
    pub fn describe(self) -> String {
        match self {
            Truth::Hash => "hash".into(),
            Truth::Engine { level } => format!("engine-{level}"),
        }
    }
}

/// The engine and its results so far, shared by every simulation of the process.
struct EngineTruth {
    searcher: Searcher,
    known: HashMap<(LeafRequest, u8), LeafResult>,
}

fn engine() -> &'static Mutex<Option<EngineTruth>> {
    static ENGINE: OnceLock<Mutex<Option<EngineTruth>>> = OnceLock::new();
    ENGINE.get_or_init(|| Mutex::new(None))
}

/// The engine's answer at `level` (at most the request's), reported at the request's level.
fn engine_search(req: &LeafRequest, level: u8) -> LeafResult {
    let level = level.min(req.level);
    let mut guard = engine().lock().unwrap_or_else(|p| p.into_inner());
    let e = guard.get_or_insert_with(|| {
        let eval = bookfarm_engine::eval::default_eval();
        let opts = SearchOptions {
            tt_bits: 16,
            endgame_tt_bits: 14,
            ..SearchOptions::for_eval(&eval)
        };
        EngineTruth {
            searcher: Searcher::with_options(eval, opts),
            known: HashMap::new(),
        }
    });
    if let Some(r) = e.known.get(&(*req, level)) {
        return *r;
    }
    let shallow = LeafRequest { level, ..*req };
    let mut r = e.searcher.leaf_search(&shallow, &AtomicBool::new(false));
    (r.depth, r.selectivity) = reported_depth(req);
    // The score of a shallower search is not an exact solve of the request's level.
    r.exact = false;
    r.nodes = r.nodes.max(1);
    r.elapsed = Duration::from_micros(1);
    e.known.insert((*req, level), r);
    r
}
