//! The one definition of book growth: Edax's serial book commands (`deviate`, `enhance`, `play`,
//! `extend`, `add`, `new`) as a resumable program over the book and a table of leaf results.
//!
//! Edax grows a book serially: each expansion plans its searches on the book as the previous
//! expansions left it. A [`Driver`] runs that serial program step by step; a step that needs a
//! search result the caller does not have yet **blocks**, and the driver returns the requests it
//! needs: the blocking step's, plus (with a lookahead) those of the following steps planned on
//! the current book, which are almost always the ones those steps will need. The caller runs
//! the searches however it likes (a callback, a thread pool, workers on other machines), records
//! the results, and calls [`Driver::run`] again; the driver resumes exactly where it stopped.
//!
//! Invariants:
//! * the book after a program depends only on the program, the starting book and the results
//!   of the requests (a leaf search is a pure function of its request and the search signature):
//!   not on the lookahead, the number of searchers, their speed or the order results arrive in;
//! * a step is applied only when every result it needs is known, so a blocked step changes
//!   nothing, and the driver's state ([`DriverState`]) between steps is plain data that can be
//!   persisted and restored;
//! * expanding a position whose leaf child is already in the book takes the existing child's
//!   value instead of searching a fresh copy (Edax searches the copy, then drops it: the
//!   result only feeds a link score that the next negamax overwrites);
//! * transpositions are linked as the book grows (a deliberate departure from Edax, see
//!   [`crate::grow::plan_parent_links`]): a step that adds a position also links every book
//!   parent of it, and the re-search of a parent whose leaf the link replaced is one of the
//!   step's requests. A program started on a linked book leaves it linked (`book fix` adds no
//!   link), and the negamax that closes each iteration gives the values of the book's own
//!   positions.

use crate::edax::sort_in_bucket_order;
use crate::extract::{AuditLine, audit_known, best_lines};
use crate::grow::{
    Changes, ExpandPlan, IllegalGameMove, add_board_request_assuming, apply_add_plan, apply_leaf,
    finish_expand, is_borrowed, leaf_request, plan_add_board, plan_expand_at, replay_game,
};
use crate::mem::MemBook;
use crate::model::MAX_LEVEL;
use crate::negamax::renegamax;
use crate::program::{Operation, Program};
use crate::research::{finish_research, start_research, upgrade_mark};
use crate::searches::{analysis_levels, analysis_request};
use crate::select::{Deviate, DeviatePass, deviate_pass, enhance_mark, extend_mark, play_mark};
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use std::collections::{HashMap, HashSet};

pub use crate::results::{RequestMap, RequestSet, Results};

/// Which marking a pass of a selector program uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// Deviate's root-side pass.
    DeviateRoot,
    /// Deviate's opponent-side pass.
    DeviateOpponent,
    /// Enhance's marking.
    Enhance,
    /// Play's marking.
    Play,
    /// Extend's marking.
    Extend,
    /// The positions an [`Operation::Expand`] names.
    Given,
    /// An upgrade round: the marked positions are re-searched, not expanded.
    Upgrade,
    /// The borrowed leaves ([`crate::grow::is_borrowed`]) a pass marked: each is replaced by
    /// its leaf search instead of being expanded (a borrowed leaf has no move to expand), and
    /// the program marks its first pass again on the searched values. Every such pass removes
    /// borrowed leaves and nothing creates one, so a program still ends.
    Resolve,
}

/// Where a program stands; plain data (boards, counters), so that it can be persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Not started.
    Start,
    /// Expanding the positions marked by a pass, in Edax's file order; `cursor` expansions are
    /// done.
    Expanding {
        /// The marking.
        pass: PassKind,
        /// The root value the iteration's window is centred on (deviate).
        root_value: i32,
        /// The marked positions (canonical boards) in expansion order.
        todo: Vec<Board>,
        /// Expansions done.
        cursor: usize,
        /// Changes of the current iteration so far.
        iteration: Changes,
    },
    /// Playing the best lines out ([`Operation::Audit`]); how far each line is follows from the
    /// known results, so there is nothing to remember.
    Auditing,
    /// Searching the positions of a book-neutral program ([`Operation::Search`],
    /// [`Operation::Analyze`]); which are done follows from the known results, so there is
    /// nothing to remember.
    Searching,
    /// Adding the positions of the program's root line that are missing, from the root back
    /// to the start position, as `book store` adds a game's positions (each new position with
    /// its leaf search, linked to its book children and parents); `cursor` boards are done.
    /// Positions already in the book are left as they are.
    Rooting {
        /// Boards of the line done (deepest first).
        cursor: usize,
    },
    /// Adding the boards of game `game`, deepest first; `cursor` boards are done.
    Adding {
        /// Index of the game.
        game: usize,
        /// Boards done in this game.
        cursor: usize,
    },
    /// Finished.
    Done,
}

/// The persistent state of a [`Driver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverState {
    /// The program (its level clamped to 0..=60).
    pub program: Program,
    /// Where it stands.
    pub phase: Phase,
    /// Iterations (selector passes) completed.
    pub iterations: u32,
    /// Passes marked so far: changes exactly when the marked list (`Phase::Expanding::todo`)
    /// is replaced, so a persister can write that list only then.
    pub passes: u32,
    /// Total changes so far (Edax's counters).
    pub changes: Changes,
    /// Games whose replay stopped at an illegal move (game index, move).
    pub illegal: Vec<(usize, IllegalGameMove)>,
    /// The audited lines, set by the step that finishes an [`Operation::Audit`] (empty
    /// before; not part of the persisted state, since a finished program is not resumed).
    pub audit: Vec<AuditLine>,
    /// A book-neutral program's distinct searches with a known result and in all, as far as
    /// its last run looked (not persisted: a resumed program counts again).
    pub searched: (usize, usize),
}

impl DriverState {
    /// The program to run after this one, when it asks for one: an audit with `queue` adds its
    /// contradicting games (book line and continuation) to the book (Egaroucid's draw
    /// verification feeds the book this way).
    pub fn follow_up(&self) -> Option<Program> {
        let Operation::Audit { queue: true, .. } = self.program.operation else {
            return None;
        };
        let games: Vec<Vec<Move>> = self
            .audit
            .iter()
            .filter(|a| a.contradicts())
            .map(|a| a.line.iter().chain(&a.continuation).copied().collect())
            .collect();
        (self.phase == Phase::Done && !games.is_empty()).then(|| Program {
            operation: Operation::AddGames { games },
            ..self.program.clone()
        })
    }
}

/// Where a program stands, as a point that only moves forward while it runs: `major` is the
/// pass (the number of markings so far, [`DriverState::passes`]) of a selector or upgrade
/// program and the game of an adding one; `minor` is the step within it. A program stopped
/// ([`Driver::stopping_at`]) at the point where another run of it was blocked applies exactly
/// the steps that run applied: a growth program cancelled on a farm is replayed that way.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct StepPoint {
    /// The pass, or the game.
    pub major: u64,
    /// The step within it.
    pub minor: u64,
}

impl StepPoint {
    fn new(major: impl TryInto<u64>, minor: usize) -> StepPoint {
        StepPoint {
            major: major.try_into().unwrap_or(u64::MAX),
            minor: u64::try_from(minor).unwrap_or(u64::MAX),
        }
    }
}

impl DriverState {
    /// The point of the step the program is blocked on or about to take (`None` before it
    /// started, while it audits, and once it is done).
    pub fn point(&self) -> Option<StepPoint> {
        match &self.phase {
            Phase::Expanding { cursor, .. } => Some(StepPoint::new(self.passes, *cursor)),
            Phase::Adding { game, cursor } => Some(StepPoint::new(*game, *cursor)),
            Phase::Rooting { cursor } => Some(StepPoint::new(0u32, *cursor)),
            Phase::Start | Phase::Auditing | Phase::Searching | Phase::Done => None,
        }
    }
}

/// What [`Driver::run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The program is finished.
    Done,
    /// A step needs results that are not known: the blocking step's requests first, then the
    /// lookahead's (deduplicated).
    Blocked(Vec<LeafRequest>),
}

/// A resumable growth program (see the module docs).
#[derive(Debug, Clone)]
pub struct Driver {
    state: DriverState,
    /// The lookahead's predicted requests of the current pass's steps, by index into its
    /// list, each computed once (on the book as it was then): a blocked run costs the
    /// lookahead's length in look-ups, not in plans. Advisory only (a stale prediction costs a
    /// search or a wait, never a different book), so not part of the state.
    predicted: Predicted,
    /// The program ends before taking a step at this point or past it (see [`StepPoint`]).
    stop: Option<StepPoint>,
    /// A book-neutral program's distinct requests in order, and how many of the first ones
    /// have a known result. Advisory (rebuilt from the program and the results), so not
    /// part of the state; a result is never taken back while the driver lives (a rollback
    /// starts a new one).
    searching: Option<(Vec<LeafRequest>, usize)>,
}

/// See [`Driver::predicted`].
#[derive(Debug, Clone, Default)]
struct Predicted {
    /// [`DriverState::passes`] of the pass the predictions belong to.
    passes: u32,
    by_step: HashMap<usize, Vec<LeafRequest>>,
}

/// Drivers are equal when their states are (the prediction cache is advisory).
impl PartialEq for Driver {
    fn eq(&self, other: &Driver) -> bool {
        self.state == other.state
    }
}

impl Eq for Driver {}

/// One step's needs: its requests, and which of them are missing.
enum Step {
    Applied,
    Missing(Vec<LeafRequest>),
}

impl Driver {
    /// A new program.
    pub fn new(mut program: Program) -> Driver {
        program.level = program.level.map(|l| l.min(MAX_LEVEL));
        Driver {
            state: DriverState {
                program,
                phase: Phase::Start,
                iterations: 0,
                passes: 0,
                changes: Changes::default(),
                illegal: Vec::new(),
                audit: Vec::new(),
                searched: (0, 0),
            },
            predicted: Predicted::default(),
            stop: None,
            searching: None,
        }
    }

    /// Resume a program from a persisted state.
    pub fn from_state(state: DriverState) -> Driver {
        Driver {
            state,
            predicted: Predicted::default(),
            stop: None,
            searching: None,
        }
    }

    /// The program ending before it takes a step at `stop` or past it (`None`: running to
    /// its end): what a run cut at `stop` applied, and nothing more.
    pub fn stopping_at(mut self, stop: Option<StepPoint>) -> Driver {
        self.stop = stop;
        self
    }

    /// Whether the step at (`major`, `minor`) is past the stop; if so the program is done.
    fn stops_before(&mut self, major: impl TryInto<u64>, minor: usize) -> bool {
        let stop = self.stop.is_some_and(|s| StepPoint::new(major, minor) >= s);
        if stop {
            self.state.phase = Phase::Done;
        }
        stop
    }

    /// The state (to persist, or to report progress).
    pub fn state(&self) -> &DriverState {
        &self.state
    }

    /// Whether the program is finished.
    pub fn is_done(&self) -> bool {
        self.state.phase == Phase::Done
    }

    /// Run as many steps as the known results allow. `lookahead` is how many of the following
    /// steps of the current pass (or game list) have their requests predicted when blocked
    /// (`usize::MAX`: the whole pass).
    pub fn run(&mut self, book: &mut MemBook, results: &dyn Results, lookahead: usize) -> Progress {
        loop {
            match std::mem::replace(&mut self.state.phase, Phase::Done) {
                Phase::Done => return Progress::Done,
                Phase::Start => self.start(book),
                Phase::Expanding {
                    pass,
                    root_value,
                    todo,
                    mut cursor,
                    mut iteration,
                } => {
                    if self.predicted.passes != self.state.passes {
                        self.predicted = Predicted {
                            passes: self.state.passes,
                            by_step: HashMap::new(),
                        };
                    }
                    while cursor < todo.len() {
                        if self.stops_before(self.state.passes, cursor) {
                            return Progress::Done;
                        }
                        let step = match pass {
                            PassKind::Upgrade => {
                                self.research_step(book, &todo[cursor], results, &mut iteration)
                            }
                            PassKind::Resolve => {
                                resolve_step(book, &todo[cursor], results, &mut iteration)
                            }
                            _ => self.expand_step(book, &todo[cursor], results, &mut iteration),
                        };
                        match step {
                            Step::Applied => {
                                self.predicted.by_step.remove(&cursor);
                                cursor += 1;
                            }
                            Step::Missing(mut need) => {
                                let end = todo.len().min(cursor + 1 + lookahead.min(todo.len()));
                                for (i, b) in todo.iter().enumerate().take(end).skip(cursor + 1) {
                                    if !self.predicted.by_step.contains_key(&i) {
                                        let r = self.step_requests(book, pass, b);
                                        self.predicted.by_step.insert(i, r);
                                    }
                                    need.extend_from_slice(&self.predicted.by_step[&i]);
                                }
                                self.state.phase = Phase::Expanding {
                                    pass,
                                    root_value,
                                    todo,
                                    cursor,
                                    iteration,
                                };
                                return Progress::Blocked(dedup_missing(need, results));
                            }
                        }
                    }
                    let marked = todo.len();
                    self.end_pass(book, pass, root_value, iteration, marked);
                }
                Phase::Auditing => {
                    let level = match &self.state.program.operation {
                        Operation::Audit { level, .. } => *level,
                        _ => continue, // phase stays Done
                    };
                    match audit_known(book, &best_lines(book), level, results) {
                        Ok(audit) => {
                            self.state.changes.searches = audit
                                .iter()
                                .flat_map(|a| &a.continuation)
                                .filter(|m| **m != Move::Pass)
                                .count();
                            self.state.iterations = 1;
                            self.state.audit = audit;
                        }
                        Err(need) => {
                            self.state.phase = Phase::Auditing;
                            return Progress::Blocked(dedup_missing(need, results));
                        }
                    }
                }
                Phase::Searching => {
                    if let Some(need) = self.search_step(results, lookahead) {
                        self.state.phase = Phase::Searching;
                        return Progress::Blocked(need);
                    }
                }
                Phase::Rooting { mut cursor } => {
                    let boards = self.root_line_boards();
                    while cursor < boards.len() {
                        if self.stops_before(0u32, cursor) {
                            return Progress::Done;
                        }
                        let b = boards[cursor];
                        if !enters_book(book, &b) {
                            cursor += 1;
                            continue;
                        }
                        let plan = plan_add_board(book, &b);
                        let mut need: Vec<LeafRequest> = plan
                            .requests()
                            .filter(|r| results.result(r).is_none())
                            .collect();
                        if !need.is_empty() {
                            // Each later board links to the boards before it (its children).
                            let end = boards.len().min(cursor + 1 + lookahead.min(boards.len()));
                            let mut also: HashSet<Board> =
                                std::iter::once(canonical(&b).0).collect();
                            for later in &boards[cursor + 1..end] {
                                if enters_book(book, later) {
                                    need.extend(add_board_request_assuming(book, later, &also));
                                }
                                also.insert(canonical(later).0);
                            }
                            self.state.phase = Phase::Rooting { cursor };
                            return Progress::Blocked(dedup_missing(need, results));
                        }
                        if let Ok(ch) = apply_add_plan(book, &b, &plan, results) {
                            self.state.changes += ch;
                        }
                        cursor += 1;
                    }
                    self.begin(book);
                }
                Phase::Adding { game, mut cursor } => {
                    let Some((boards, illegal)) = self.game_boards(book, game) else {
                        continue; // phase stays Done
                    };
                    while cursor < boards.len() {
                        if self.stops_before(game, cursor) {
                            return Progress::Done;
                        }
                        let b = boards[cursor];
                        let plan = plan_add_board(book, &b);
                        let mut need: Vec<LeafRequest> = plan
                            .requests()
                            .filter(|r| results.result(r).is_none())
                            .collect();
                        if !need.is_empty() {
                            let end = boards.len().min(cursor + 1 + lookahead.min(boards.len()));
                            // Predict each later board's request with the boards before it in
                            // the game added (each links to its child there).
                            let mut also: HashSet<Board> =
                                std::iter::once(canonical(&b).0).collect();
                            for later in &boards[cursor + 1..end] {
                                need.extend(add_board_request_assuming(book, later, &also));
                                also.insert(canonical(later).0);
                            }
                            self.state.phase = Phase::Adding { game, cursor };
                            return Progress::Blocked(dedup_missing(need, results));
                        }
                        if let Ok(ch) = apply_add_plan(book, &b, &plan, results) {
                            self.state.changes += ch;
                        }
                        cursor += 1;
                    }
                    if let Some(ill) = illegal {
                        self.state.illegal.push((game, ill));
                    }
                    self.state.phase = Phase::Adding {
                        game: game + 1,
                        cursor: 0,
                    };
                }
            }
        }
    }

    /// The boards step `game` of an adding program adds, in order, and the replay's illegal
    /// move; `None` past the last game. `new` adds the start position alone.
    fn game_boards(
        &self,
        book: &MemBook,
        game: usize,
    ) -> Option<(Vec<Board>, Option<IllegalGameMove>)> {
        match &self.state.program.operation {
            Operation::New => (game == 0).then(|| (vec![Board::start()], None)),
            Operation::AddGames { games } => games.get(game).map(|moves| {
                let (boards, report) = replay_game(book, moves);
                (boards, report.illegal)
            }),
            _ => None,
        }
    }

    /// The position the selectors and `upgrade` start from.
    fn root(&self) -> Option<Board> {
        if self.state.program.operation.has_root() {
            self.state.program.root_board()
        } else {
            None
        }
    }

    fn first_pass(&self) -> Option<PassKind> {
        match &self.state.program.operation {
            Operation::Deviate { .. } => Some(PassKind::DeviateRoot),
            Operation::Enhance { .. } => Some(PassKind::Enhance),
            Operation::Play => Some(PassKind::Play),
            Operation::Extend => Some(PassKind::Extend),
            Operation::Expand { .. } => Some(PassKind::Given),
            Operation::Upgrade { .. } | Operation::StoreAnalysis { .. } => Some(PassKind::Upgrade),
            Operation::New
            | Operation::AddGames { .. }
            | Operation::Audit { .. }
            | Operation::Search { .. }
            | Operation::Analyze { .. } => None,
        }
    }

    /// Start the program: add the missing positions of its root line first (a program from
    /// the start position has none), then [`Driver::begin`].
    fn start(&mut self, book: &mut MemBook) {
        if !self.adds_root_line() {
            self.begin(book);
        } else if self
            .root()
            .is_some_and(|r| (r.empties() as i32) >= book.header().n_empties)
        {
            self.state.phase = Phase::Rooting { cursor: 0 };
        } else {
            // A root past the book depth (or an illegal line) has nothing to grow: the program
            // adds nothing, not even the line's positions within the depth.
            self.state.phase = Phase::Done;
        }
    }

    /// Whether the program adds the missing positions of its root line before it begins: the
    /// programs that grow the book from their root (a selector or `upgrade` from a position
    /// other than the start).
    fn adds_root_line(&self) -> bool {
        let program = &self.state.program;
        program.operation.has_root()
            && !matches!(program.operation, Operation::Audit { .. })
            && !program.root.is_empty()
    }

    /// The boards of the root line, deepest (the root) first, the start position last.
    fn root_line_boards(&self) -> Vec<Board> {
        let mut boards = self.state.program.root_boards().unwrap_or_default();
        boards.reverse();
        boards
    }

    /// Begin the program: negamax from the root and mark the first pass; `new` and `add` start
    /// adding boards.
    fn begin(&mut self, book: &mut MemBook) {
        match &self.state.program.operation {
            Operation::New | Operation::AddGames { .. } => {
                self.state.phase = Phase::Adding { game: 0, cursor: 0 };
                return;
            }
            Operation::Audit { .. } => {
                self.state.phase = Phase::Auditing;
                return;
            }
            Operation::Search { .. } | Operation::Analyze { .. } => {
                self.state.phase = Phase::Searching;
                return;
            }
            Operation::Expand { boards } => {
                self.state.passes += 1;
                self.state.phase = Phase::Expanding {
                    pass: PassKind::Given,
                    root_value: 0,
                    todo: boards.clone(),
                    cursor: 0,
                    iteration: Changes::default(),
                };
                return;
            }
            Operation::Enhance {
                midgame_error,
                endcut_error,
                ..
            } => {
                let h = book.header_mut();
                h.midgame_error = (*midgame_error).clamp(0, 129);
                h.endcut_error = (*endcut_error).clamp(0, 129);
            }
            _ => {}
        }
        let (Some(root), Some(pass)) = (self.root(), self.first_pass()) else {
            self.state.phase = Phase::Done;
            return;
        };
        match book.probe(&root) {
            Some(id) => {
                renegamax(book, id);
                self.mark(book, pass, None);
            }
            None => self.state.phase = Phase::Done,
        }
    }

    /// Mark a pass from the root; the root value is taken now unless given (deviate's second
    /// pass reuses the first's).
    fn mark(&mut self, book: &MemBook, pass: PassKind, root_value: Option<i32>) {
        let Some(root) = self.root().and_then(|b| book.probe(&b)) else {
            self.state.phase = Phase::Done;
            return;
        };
        let s = root_value.unwrap_or_else(|| i32::from(book.score(root).value));
        let params = match &self.state.program.operation {
            Operation::Deviate { params } => *params,
            _ => Deviate::default(),
        };
        let marked = match pass {
            PassKind::Given | PassKind::Resolve => {
                // Given positions are expanded once, never re-marked; a resolve pass is made
                // by a marking (below), it marks nothing itself.
                self.state.phase = Phase::Done;
                return;
            }
            PassKind::Upgrade => match &self.state.program.operation {
                Operation::Upgrade { params } => upgrade_mark(book, root, params.clamped()),
                // The root alone, when its level is below the stored level and it has a leaf.
                Operation::StoreAnalysis { level } => {
                    let raise = book.level(root) < (*level).min(MAX_LEVEL)
                        && book.leaf(root).mv != Move::None;
                    raise.then_some(root).into_iter().collect()
                }
                _ => Vec::new(),
            },
            PassKind::DeviateRoot => deviate_pass(book, root, params, s, DeviatePass::RootSide),
            PassKind::DeviateOpponent => {
                deviate_pass(book, root, params, s, DeviatePass::OpponentSide)
            }
            PassKind::Enhance => enhance_mark(book, root),
            PassKind::Play => play_mark(book, root),
            PassKind::Extend => extend_mark(book, root),
        };
        // Borrowed leaves are searched first, alone: the pass's other positions are marked
        // again on the searched values.
        let (pass, marked) = if pass == PassKind::Upgrade {
            (pass, marked)
        } else {
            let borrowed: Vec<_> = marked
                .iter()
                .copied()
                .filter(|&id| is_borrowed(&book.position(id)))
                .collect();
            if borrowed.is_empty() {
                (pass, marked)
            } else {
                (PassKind::Resolve, borrowed)
            }
        };
        let todo: Vec<Board> = if pass == PassKind::Upgrade {
            // Re-searched in marking order (closest to the root first).
            marked.into_iter().map(|id| book.board(id)).collect()
        } else {
            // Edax's `book_expand` visits marked positions in file (bucket) order.
            sort_in_bucket_order(book, marked)
                .into_iter()
                .map(|id| book.board(id))
                .collect()
        };
        self.state.passes += 1;
        self.state.phase = Phase::Expanding {
            pass,
            root_value: s,
            todo,
            cursor: 0,
            iteration: Changes::default(),
        };
    }

    /// A pass is expanded: go on to deviate's second pass, or close the iteration (negamax from
    /// the root) and start the next one unless it added nothing (an upgrade: unless it marked
    /// nothing).
    fn end_pass(
        &mut self,
        book: &mut MemBook,
        pass: PassKind,
        root_value: i32,
        it: Changes,
        marked: usize,
    ) {
        if pass == PassKind::DeviateRoot {
            self.mark(book, PassKind::DeviateOpponent, Some(root_value));
            if let Phase::Expanding { iteration, .. } = &mut self.state.phase {
                *iteration = it;
            }
            return;
        }
        self.state.changes += it;
        self.state.iterations += 1;
        let Some(root) = self.root().and_then(|b| book.probe(&b)) else {
            self.state.phase = Phase::Done;
            return;
        };
        renegamax(book, root);
        if pass == PassKind::Given {
            self.state.phase = Phase::Done;
            return;
        }
        let again = pass == PassKind::Resolve
            || match &self.state.program.operation {
                Operation::Enhance { until_stable, .. } => *until_stable && it.changed(),
                Operation::Upgrade { .. } => marked > 0,
                Operation::StoreAnalysis { .. } => false,
                _ => it.changed(),
            };
        match (again, self.first_pass()) {
            (true, Some(first)) => self.mark(book, first, None),
            _ => {
                self.state.phase = Phase::Done;
                // A program from another root negamaxed only its root's subtree (as Edax's
                // do): the book at rest is negamaxed from the start position, so that its
                // values (the start's included) are the book's own.
                if let Some(start) = book.find(&Board::start())
                    && start != root
                {
                    renegamax(book, start);
                }
            }
        }
    }

    fn plan(&self, book: &MemBook, board: &Board) -> Option<ExpandPlan> {
        let id = book.find(board)?;
        plan_expand_at(book, id, self.state.program.level)
    }

    /// The requests the step of `pass` on `board` needs on the current book.
    fn step_requests(&self, book: &MemBook, pass: PassKind, board: &Board) -> Vec<LeafRequest> {
        if pass == PassKind::Upgrade {
            return self
                .upgrade_level()
                .and_then(|level| start_research(book, book.find(board)?, level).1)
                .into_iter()
                .collect();
        }
        if pass == PassKind::Resolve {
            return resolve_request(book, board).into_iter().collect();
        }
        self.plan(book, board)
            .map(|p| p.requests().collect())
            .unwrap_or_default()
    }

    /// The level an upgrade program (or the store of an analysis) re-searches at.
    fn upgrade_level(&self) -> Option<u8> {
        match &self.state.program.operation {
            Operation::Upgrade { params } => Some(params.clamped().level),
            Operation::StoreAnalysis { level } => Some((*level).min(MAX_LEVEL)),
            _ => None,
        }
    }

    /// Re-search the leaf of `board` at the upgrade level if its result is known (the step of
    /// an upgrade round; [`crate::research`] owns what a re-search is).
    fn research_step(
        &mut self,
        book: &mut MemBook,
        board: &Board,
        results: &dyn Results,
        ch: &mut Changes,
    ) -> Step {
        let (Some(level), Some(id)) = (self.upgrade_level(), book.find(board)) else {
            return Step::Applied;
        };
        let (p, request) = start_research(book, id, level);
        let result = match request {
            Some(req) => match results.result(&req) {
                Some(r) => Some(r),
                None => return Step::Missing(vec![req]),
            },
            None => None,
        };
        // Counted as a search even when every move is a link (the position is raised without
        // one), so that an upgrade's searches are the positions it raised.
        ch.searches += 1;
        finish_research(book, p, result.as_ref());
        Step::Applied
    }

    /// The step of a book-neutral program: `None` when every search has its result (the
    /// program is done), else the missing searches to list. A search program lists its first
    /// `lookahead` missing requests (at least one) in file order, an analysis its first
    /// `lookahead` levels without a result (at least one), lowest first: they do not depend on
    /// each other's results, so a worker with several free threads searches several levels at
    /// once, the lowest first, and each lands on its own.
    fn search_step(&mut self, results: &dyn Results, lookahead: usize) -> Option<Vec<LeafRequest>> {
        let (requests, cursor) = self.searching.get_or_insert_with(|| {
            let requests = match &self.state.program.operation {
                Operation::Search { positions, level } => positions.requests(*level),
                Operation::Analyze { board, from, up_to } => analysis_levels(board, *from, *up_to)
                    .into_iter()
                    .map(|level| analysis_request(board, level))
                    .collect(),
                _ => Vec::new(),
            };
            (requests, 0)
        });
        while *cursor < requests.len() && results.result(&requests[*cursor]).is_some() {
            *cursor += 1;
        }
        let total = requests.len();
        if *cursor == total {
            self.state.searched = (total, total);
            self.state.changes.searches = total;
            self.state.iterations = 1;
            return None;
        }
        let want = lookahead.max(1);
        let mut need = Vec::with_capacity(want.min(total - *cursor));
        let mut known = *cursor;
        for r in &requests[*cursor..] {
            if need.len() >= want {
                break;
            }
            if results.result(r).is_some() {
                known += 1;
            } else {
                need.push(*r);
            }
        }
        self.state.searched = (known, total);
        Some(need)
    }

    /// Expand `board` if every result it needs is known (Edax's `position_expand`, counted as
    /// Edax's `book_expand` counts).
    fn expand_step(
        &mut self,
        book: &mut MemBook,
        board: &Board,
        results: &dyn Results,
        ch: &mut Changes,
    ) -> Step {
        let Some(plan) = self.plan(book, board) else {
            return Step::Applied;
        };
        let missing: Vec<LeafRequest> = plan
            .requests()
            .filter(|r| results.result(r).is_none())
            .collect();
        if !missing.is_empty() {
            return Step::Missing(missing);
        }
        if let Ok(out) = finish_expand(book, &plan, results) {
            ch.searches += plan.requests().count();
            ch.links += plan.child.links.len() + usize::from(out.link_added) + out.parents.links;
            ch.positions += usize::from(out.child_added);
        }
        Step::Applied
    }
}

/// The leaf search that replaces the borrowed leaf of `board`, if it still has one.
fn resolve_request(book: &MemBook, board: &Board) -> Option<LeafRequest> {
    let p = book.position(book.find(board)?);
    if is_borrowed(&p) {
        leaf_request(&p)
    } else {
        None
    }
}

/// Replace the borrowed leaf of `board` by its leaf search (Edax's `position_search`: links
/// excluded, at the position's own level) if the result is known.
fn resolve_step(
    book: &mut MemBook,
    board: &Board,
    results: &dyn Results,
    ch: &mut Changes,
) -> Step {
    let Some(req) = resolve_request(book, board) else {
        return Step::Applied;
    };
    let Some(r) = results.result(&req) else {
        return Step::Missing(vec![req]);
    };
    if let Some(id) = book.find(board) {
        let mut p = book.position(id);
        apply_leaf(&mut p, &r);
        book.put_position(&p);
        ch.searches += 1;
    }
    Step::Applied
}

/// Whether `board` is a position a root line adds: missing from the book and within the book
/// depth (`book store`'s filter: at least `n_empties − 1` empties).
fn enters_book(book: &MemBook, board: &Board) -> bool {
    (board.empties() as i32) >= book.header().n_empties - 1 && book.probe(board).is_none()
}

/// Keep the first occurrence of each request that has no known result.
fn dedup_missing(need: Vec<LeafRequest>, results: &dyn Results) -> Vec<LeafRequest> {
    let mut seen = RequestSet::default();
    need.into_iter()
        .filter(|r| results.result(r).is_none() && seen.insert(*r))
        .collect()
}

/// Run `program` on `book` to its end, answering its requests with `search` one at a time and
/// without lookahead (nothing is searched that the serial program does not need; a request is
/// searched once). The serial form of every growth program: Edax's book commands offline, and
/// the reference a cluster's book is compared with. Returns the finished program's state.
pub fn run_serial<F>(book: &mut MemBook, program: impl Into<Program>, search: &mut F) -> DriverState
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let mut driver = Driver::new(program.into());
    let mut known: HashMap<LeafRequest, LeafResult> = HashMap::new();
    while let Progress::Blocked(need) = driver.run(book, &known, 0) {
        for r in need {
            let res = search(&r);
            known.insert(r, res);
        }
    }
    driver.state
}
