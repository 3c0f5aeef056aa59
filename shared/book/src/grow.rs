//! Growing the book the way Edax does, with every leaf search described as data.
//!
//! Edax runs its engine inside the book code (`position_search`). Here the search is a
//! [`LeafRequest`] (board, level, excluded link squares) computed from a position, and its
//! [`LeafResult`] is applied back by a pure function (edax-spec §4.3). Functions that need
//! searches take a callback `FnMut(&LeafRequest) -> LeafResult`, so the caller decides how they
//! run (in-process engine, threads, a test double).
//!
//! * [`leaf_request`] / [`apply_leaf`] / [`position_search`]: `position_search` on a position;
//! * [`plan_expand`] / [`finish_expand`] / [`expand`]: `position_expand` (§4.4) as independent
//!   requests (the new child's leaf, the parent's re-search with the move excluded, and the
//!   re-searches of the other book parents whose leaf the new child takes, see below);
//! * [`plan_parent_links`] / [`apply_parent_links`]: growth's transposition linking, a deliberate
//!   departure from Edax (whose deviate links a new position only to its book children and
//!   leaves the rest to `book fix`): when a position enters the book, every book position with
//!   a legal move to it links to it, and a parent whose leaf was that move (the link takes the
//!   leaf's place) is re-searched in the same step. A book grown from a linked book therefore
//!   stays linked, and its negamax values are those of its own positions;
//! * [`plan_add_board`] / [`apply_add_plan`]: growth's `book_add_board` (Edax's, then the
//!   parents linked);
//! * [`add_board`], [`add_game`], [`store_game`]: `book_add_board`, `book_add_game`, `book store`
//!   (§4.5);
//! * [`link_book`]: `book_link` (§4.2), and [`link_command`] (`book link`: link, negamax,
//!   sort); [`fill`]: `book fill` (§4.9, without Edax's dangling board pointer); [`check_position`] / [`fix`]: `position_is_ok` (§3) and `book fix` (§4.11),
//!   reporting illegal boards and removing them instead of zeroing them.
//!
//! The search engine's tables are not part of the model: Edax clears its hash before each game
//! and each expansion and otherwise lets it persist; our searches start from an empty table every
//! time (see `bookfarm_engine::search`), so only the request matters.

use crate::edax::bucket_order;
use crate::mem::{MemBook, NodeId, child_board};
use crate::model::{BAD_LINK, Link, MAX_LEVEL, Position, SCORE_INF};
use crate::negamax::{NegamaxStats, link_position, negamax, sort_links};
use crate::results::Results;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::unmove::{for_each_unmove, pass_predecessor};
use bookfarm_engine::{Board, Move};
use std::collections::{HashMap, HashSet};

/// Edax's `position_add_link` on a detached position: overwrite the score of an existing link
/// with the same move (returns `false`), or append the link, raise the value to its score and
/// clear the leaf when it had this move (returns `true`).
pub fn add_link_to(p: &mut Position, link: Link) -> bool {
    if let Some(l) = p.links.iter_mut().find(|l| l.mv == link.mv) {
        l.score = link.score;
        return false;
    }
    p.links.push(link);
    p.value = p.value.max(i16::from(link.score));
    if p.leaf.mv == link.mv {
        p.leaf = BAD_LINK;
    }
    true
}

/// Edax's `position_link` on a detached position whose board may be in any orientation: for
/// each legal move in increasing square order whose child is in `book`, add `{-child.value, x}`;
/// a position that must pass gets a PASS link when the swapped board is in the book. Returns the
/// number of links added.
pub fn link_detached(book: &MemBook, p: &mut Position) -> usize {
    let board = p.board;
    let moves = board.moves();
    let mut added = 0;
    if moves != 0 {
        for sq in bookfarm_engine::board::BitIter(moves) {
            let mv = Move::Square(sq);
            if let Some(c) = book.find(&child_board(&board, mv)) {
                let score = (-i32::from(book.score(c).value)) as i8;
                added += usize::from(add_link_to(p, Link::new(score, mv)));
            }
        }
    } else if board.pass().moves() != 0
        && let Some(c) = book.find(&canonical(&board.pass()).0)
    {
        let score = (-i32::from(book.score(c).value)) as i8;
        added += usize::from(add_link_to(p, Link::new(score, Move::Pass)));
    }
    added
}

/// The first step of Edax's `position_search`: a leaf with a move becomes a link (with the
/// leaf's score) unless a link with that move exists. Returns whether a link was added.
pub fn promote_leaf(p: &mut Position) -> bool {
    p.leaf.mv != Move::None && add_link_to(p, p.leaf)
}

/// The leaf search Edax's `position_search` would run on `p` (after the leaf-to-link promotion
/// of [`promote_leaf`], which this function takes into account without doing it), or `None`
/// when it runs none: a search runs when fewer links than legal moves exist, or when the
/// position has no move, no link and an unknown value (a pass position without a PASS link, or
/// a finished game). The request excludes the exact link squares, at the position's own level.
pub fn leaf_request(p: &Position) -> Option<LeafRequest> {
    let mut n_link = p.links.len();
    let mut value = p.value;
    let mut excluded = 0u64;
    for l in &p.links {
        if let Move::Square(s) = l.mv {
            excluded |= s.bit();
        }
    }
    if p.leaf.mv != Move::None && p.links.iter().all(|l| l.mv != p.leaf.mv) {
        n_link += 1;
        value = value.max(i16::from(p.leaf.score));
        if let Move::Square(s) = p.leaf.mv {
            excluded |= s.bit();
        }
    }
    let mobility = p.board.moves().count_ones() as usize;
    let search = n_link < mobility || (n_link == 0 && mobility == 0 && value == -SCORE_INF);
    search.then_some(LeafRequest {
        board: p.board,
        level: p.level.min(MAX_LEVEL),
        excluded,
    })
}

/// The score byte of a search result (scores are within ±64; anything else is clamped to the
/// byte's range without wrapping).
fn score_byte(score: i32) -> i8 {
    score.clamp(-i32::from(SCORE_INF), i32::from(SCORE_INF)) as i8
}

/// Apply the result of [`leaf_request`] as Edax does: promote the leaf (if not done yet), set
/// the leaf to `{result.score, result.move}` and raise the value to the leaf score.
pub fn apply_leaf(p: &mut Position, result: &LeafResult) {
    promote_leaf(p);
    p.leaf = Link::new(score_byte(result.score), result.mv);
    p.value = p.value.max(i16::from(p.leaf.score));
}

/// What [`position_search`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SearchOutcome {
    /// The old leaf became a link.
    pub promoted: bool,
    /// A leaf search ran.
    pub searched: bool,
}

/// Edax's `position_search` on a detached position, running the search through `search`.
pub fn position_search<F>(p: &mut Position, search: &mut F) -> SearchOutcome
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let request = leaf_request(p);
    let promoted = promote_leaf(p);
    let searched = match request {
        Some(req) => {
            let r = search(&req);
            apply_leaf(p, &r);
            true
        }
        None => false,
    };
    SearchOutcome { promoted, searched }
}

/// Whether `p` has a *borrowed* leaf: a leaf score without a move on a position that still has
/// legal moves that are not links (and no PASS link). An Egaroucid book carries values without
/// Edax leaves; its import keeps each such value as the position's leaf score this way
/// ([`crate::egbk3`]). Edax's `position_is_ok` calls this leaf "nomove is wrong" and its
/// `position_search` ([`leaf_request`]) replaces it by a real leaf: growth does that when its
/// selection first marks the position ([`crate::driver`]), `book fix` in place ([`fix`]).
pub fn is_borrowed(p: &Position) -> bool {
    p.leaf.mv == Move::None
        && p.leaf.score > BAD_LINK.score
        && check_position(p) == Some(PositionProblem::BadNoMove)
}

/// [`position_search`] on the book position `id`.
pub fn search_position<F>(book: &mut MemBook, id: NodeId, search: &mut F) -> SearchOutcome
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let mut p = book.position(id);
    let out = position_search(&mut p, search);
    if out.promoted || out.searched {
        book.put_position(&p);
    }
    out
}

/// A planned expansion of a position through its leaf move (edax-spec §4.4, design "Job
/// model"): the searches are independent and can run in parallel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandPlan {
    /// The (canonical) board of the expanded position A.
    pub parent: Board,
    /// A's leaf move m, in A's coordinates.
    pub mv: Move,
    /// The new child B = A + m as Edax builds it before its search: the board as played (not
    /// normalized), A's level, and its links to positions already in the book.
    pub child: Position,
    /// Whether B is already in the book (Edax still searches it and then drops the duplicate).
    pub child_exists: bool,
    /// B's leaf search.
    pub child_request: Option<LeafRequest>,
    /// A's re-search with m excluded (m becomes a link), and A's other moves to B (a
    /// self-symmetric A) excluded too.
    pub parent_request: Option<LeafRequest>,
    /// The other links to B: every book position with a legal move to B that is not a link
    /// yet (A's other moves to B included), with the re-searches they need.
    pub parent_links: Vec<ParentLink>,
}

impl ExpandPlan {
    /// The searches the expansion needs, in order: the child's (unless the child is already in
    /// the book), A's re-search, then the other parents' re-searches.
    pub fn requests(&self) -> impl Iterator<Item = LeafRequest> + '_ {
        let child = if self.child_exists {
            None
        } else {
            self.child_request
        };
        child
            .into_iter()
            .chain(self.parent_request)
            .chain(self.parent_links.iter().filter_map(|p| p.request))
    }
}

/// Plan Edax's `position_expand` of `id`; `None` when its leaf move is NOMOVE (nothing to
/// expand).
pub fn plan_expand(book: &MemBook, id: NodeId) -> Option<ExpandPlan> {
    plan_expand_at(book, id, None)
}

/// [`plan_expand`] with the child created at `level` instead of the parent's level (`None`:
/// the parent's, as Edax does).
pub fn plan_expand_at(book: &MemBook, id: NodeId, level: Option<u8>) -> Option<ExpandPlan> {
    let mut parent = book.position(id);
    let mv = parent.leaf.mv;
    if mv == Move::None {
        return None;
    }
    let level = level.unwrap_or(parent.level).min(MAX_LEVEL);
    let mut child = Position::new(parent.board.next_unchecked(mv), level);
    link_detached(book, &mut child);
    let child_exists = book.probe(&child.board).is_some();
    let child_request = leaf_request(&child);
    let mut parent_links = plan_parent_links(book, &child.board);
    // A's leaf move is the expansion's own link; A's other moves to B (if any) are linked
    // with it, so its re-search excludes them too. The parent's request does not depend on
    // B's result: the moves are excluded whatever B's value.
    if let Some(k) = parent_links.iter().position(|p| p.board == parent.board) {
        let own = &mut parent_links[k];
        own.moves.retain(|&m| m != mv);
        own.request = None;
        for &m in &own.moves {
            add_link_to(&mut parent, Link::new(0, m));
        }
        if own.moves.is_empty() {
            parent_links.remove(k);
        }
    }
    let parent_request = leaf_request(&parent);
    Some(ExpandPlan {
        parent: parent.board,
        mv,
        child,
        child_exists,
        child_request,
        parent_request,
        parent_links,
    })
}

/// A book position that must link to a position entering the book (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentLink {
    /// The parent's (canonical) board.
    pub board: Board,
    /// Its legal moves to the new position that are not links yet, in increasing square order
    /// (several for a self-symmetric parent; `PASS` for a forced pass).
    pub moves: Vec<Move>,
    /// The parent's leaf re-search when one of `moves` is its leaf: the link takes the leaf's
    /// place and the new leaf excludes every link (Edax's `position_search` after `add_link`).
    pub request: Option<LeafRequest>,
}

/// The book parents of `board` (a position about to enter the book, in any orientation) that
/// are not linked to it yet: the book positions among its un-moves and its pass predecessor
/// (one hash probe each), with their moves to it. In un-move order, each parent once.
pub fn plan_parent_links(book: &MemBook, board: &Board) -> Vec<ParentLink> {
    let target = canonical(board).0;
    let mut found: Vec<NodeId> = Vec::new();
    let mut note = |prev: &Board| {
        if let Some(id) = book.probe(prev)
            && !found.contains(&id)
        {
            found.push(id);
        }
    };
    for_each_unmove(board, |prev, _| note(&prev));
    if let Some(prev) = pass_predecessor(board) {
        note(&prev);
    }
    found
        .into_iter()
        .filter_map(|id| {
            let pb = book.board(id);
            let legal = pb.moves();
            let candidates: Vec<Move> = if legal == 0 {
                vec![Move::Pass]
            } else {
                bookfarm_engine::board::BitIter(legal)
                    .map(Move::Square)
                    .collect()
            };
            let moves: Vec<Move> = candidates
                .into_iter()
                .filter(|&m| child_board(&pb, m) == target && book.links(id).all(|l| l.mv != m))
                .collect();
            if moves.is_empty() {
                return None;
            }
            let mut after = book.position(id);
            let leaf = after.leaf.mv;
            for &m in &moves {
                add_link_to(&mut after, Link::new(0, m));
            }
            let request = if moves.contains(&leaf) {
                leaf_request(&after)
            } else {
                None
            };
            Some(ParentLink {
                board: pb,
                moves,
                request,
            })
        })
        .collect()
}

/// Link the parents of a position that just entered the book with value `value`: each gets
/// `{-value, move}` for its planned moves, and the planned re-searches are applied. Parents no
/// longer in the book are skipped. Fails, changing nothing, when a planned search has no
/// result.
pub fn apply_parent_links(
    book: &mut MemBook,
    links: &[ParentLink],
    value: i16,
    results: &dyn Results,
) -> Result<Changes, GrowError> {
    let mut found = Vec::with_capacity(links.len());
    for pl in links {
        let result = match pl.request {
            Some(r) => Some(
                results
                    .result(&r)
                    .ok_or(GrowError::MissingResult { board: pl.board })?,
            ),
            None => None,
        };
        found.push(result);
    }
    let mut ch = Changes::default();
    let score = (-i32::from(value)) as i8;
    for (pl, result) in links.iter().zip(found) {
        let Some(id) = book.find(&pl.board) else {
            continue;
        };
        let mut p = book.position(id);
        for &m in &pl.moves {
            ch.links += usize::from(add_link_to(&mut p, Link::new(score, m)));
        }
        if let Some(r) = result {
            apply_leaf(&mut p, &r);
            ch.searches += 1;
        }
        book.put_position(&p);
    }
    Ok(ch)
}

/// Errors of the growing functions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrowError {
    /// The expanded position is no longer in the book.
    #[error("position {board} is not in the book")]
    Missing {
        /// Its board.
        board: Board,
    },
    /// The position changed since the plan (its leaf is no longer the planned move).
    #[error("position {board} changed since the expansion was planned")]
    Stale {
        /// Its board.
        board: Board,
    },
    /// A planned search has no result.
    #[error("the expansion of {board} lacks the result of a planned search")]
    MissingResult {
        /// The parent's board.
        board: Board,
    },
}

/// What [`finish_expand`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpandOutcome {
    /// The child (new, or the existing one when it was already in the book).
    pub child: NodeId,
    /// The child was added (false: it existed and the fresh copy was dropped, as in Edax).
    pub child_added: bool,
    /// The parent's leaf became a link.
    pub link_added: bool,
    /// The other parents' links to the child and their re-searches.
    pub parents: Changes,
}

/// Apply an expansion's results, in Edax's order: B's leaf, A's leaf score = −B.value, A's
/// re-search (the leaf becomes a link), then B normalized and added (dropped if present); then
/// the other parents link to B ([`apply_parent_links`]).
///
/// `results` must hold every request of [`ExpandPlan::requests`]. When the child is already
/// in the book, the link takes the existing child's value instead of a fresh search's.
pub fn finish_expand(
    book: &mut MemBook,
    plan: &ExpandPlan,
    results: &dyn Results,
) -> Result<ExpandOutcome, GrowError> {
    let pid = book
        .find(&plan.parent)
        .ok_or(GrowError::Missing { board: plan.parent })?;
    let mut parent = book.position(pid);
    if parent.leaf.mv != plan.mv {
        return Err(GrowError::Stale { board: plan.parent });
    }
    let missing = GrowError::MissingResult { board: plan.parent };
    if plan.requests().any(|r| results.result(&r).is_none()) {
        return Err(missing);
    }
    let mut child = plan.child.clone();
    match (plan.child_request, book.probe(&child.board)) {
        (Some(_), Some(e)) => child.value = book.score(e).value,
        (Some(r), None) => apply_leaf(&mut child, &results.result(&r).ok_or(missing)?),
        (None, _) => {
            promote_leaf(&mut child);
        }
    }
    parent.leaf.score = (-i32::from(child.value)) as i8;
    let link_added = promote_leaf(&mut parent);
    if let Some(r) = plan.parent_request.and_then(|r| results.result(&r)) {
        apply_leaf(&mut parent, &r);
    }
    book.put_position(&parent);
    child.normalize();
    let (child_id, child_added) = match book.find(&child.board) {
        Some(id) => (id, false),
        None => (book.put_position(&child), true),
    };
    let parents = apply_parent_links(book, &plan.parent_links, child.value, results)?;
    Ok(ExpandOutcome {
        child: child_id,
        child_added,
        link_added,
        parents,
    })
}

/// Edax's `position_expand` of `id` with the searches run by `search` (in the order of
/// [`ExpandPlan::requests`]: child first, then the parent, as Edax orders them), plus growth's
/// transposition links. `None` when the leaf is NOMOVE.
pub fn expand<F>(book: &mut MemBook, id: NodeId, search: &mut F) -> Option<ExpandOutcome>
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let plan = plan_expand(book, id)?;
    let results: HashMap<LeafRequest, LeafResult> =
        plan.requests().map(|r| (r, search(&r))).collect();
    // The plan was made on the current book, so the position is present and unchanged.
    finish_expand(book, &plan, &results).ok()
}

/// Edax's change counters (`stats.n_nodes`, `stats.n_links`) for one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Changes {
    /// Positions added.
    pub positions: usize,
    /// Links added (by linking or by a leaf becoming a link).
    pub links: usize,
    /// Leaf searches run.
    pub searches: usize,
}

impl Changes {
    /// Whether anything was added (Edax's `n_nodes + n_links != 0`).
    pub fn changed(&self) -> bool {
        self.positions + self.links > 0
    }

    fn add(&mut self, o: SearchOutcome) {
        self.links += usize::from(o.promoted);
        self.searches += usize::from(o.searched);
    }
}

impl std::ops::AddAssign for Changes {
    fn add_assign(&mut self, o: Changes) {
        self.positions += o.positions;
        self.links += o.links;
        self.searches += o.searches;
    }
}

/// The level of new positions: the header's level, clamped to 0..=60.
fn book_level(book: &MemBook) -> u8 {
    book.header().level.clamp(0, i32::from(MAX_LEVEL)) as u8
}

/// Edax's `book_add_board` on a board in any orientation: nothing when it has fewer than
/// `n_empties − 1` empties; an existing position is relinked and searched if its leaf is
/// NOMOVE; a new one gets the book level, its links, its leaf search, and is normalized and
/// added.
pub fn add_board<F>(book: &mut MemBook, board: &Board, search: &mut F) -> Changes
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let result = add_board_request(book, board).map(|r| search(&r));
    apply_add_board(book, board, result.as_ref())
}

/// The leaf search [`add_board`] would run on `board` in the current book, if any.
pub fn add_board_request(book: &MemBook, board: &Board) -> Option<LeafRequest> {
    if (board.empties() as i32) < book.header().n_empties - 1 {
        return None;
    }
    match book.probe(board) {
        Some(id) => {
            let mut p = book.position(id);
            link_detached(book, &mut p);
            (p.leaf.mv == Move::None)
                .then(|| leaf_request(&p))
                .flatten()
        }
        None => {
            let mut p = Position::new(*board, book_level(book));
            link_detached(book, &mut p);
            leaf_request(&p)
        }
    }
}

/// The request [`add_board`] would make on `board` once the positions of `also` (canonical
/// boards) are in the book too: a prediction for a board added later in the same game (only the
/// link squares matter to a request, so the assumed links get a placeholder score).
pub fn add_board_request_assuming(
    book: &MemBook,
    board: &Board,
    also: &HashSet<Board>,
) -> Option<LeafRequest> {
    if (board.empties() as i32) < book.header().n_empties - 1 {
        return None;
    }
    let existing = book.probe(board);
    let mut p = match existing {
        Some(id) => book.position(id),
        None => Position::new(*board, book_level(book)),
    };
    link_detached(book, &mut p);
    if existing.is_some() && p.leaf.mv != Move::None {
        return None;
    }
    for sq in bookfarm_engine::board::BitIter(p.board.moves()) {
        let mv = Move::Square(sq);
        if also.contains(&canonical(&child_board(&p.board, mv)).0) {
            add_link_to(&mut p, Link::new(0, mv));
        }
    }
    leaf_request(&p)
}

/// [`add_board`] with the result of [`add_board_request`] given (`None` exactly when it
/// returned `None`).
pub fn apply_add_board(book: &mut MemBook, board: &Board, result: Option<&LeafResult>) -> Changes {
    let mut ch = Changes::default();
    if (board.empties() as i32) < book.header().n_empties - 1 {
        return ch;
    }
    let searched = |p: &mut Position, ch: &mut Changes| {
        ch.links += usize::from(promote_leaf(p));
        if let Some(r) = result {
            apply_leaf(p, r);
            ch.searches += 1;
        }
    };
    if let Some(id) = book.probe(board) {
        ch.links += link_position(book, id);
        if book.leaf(id).mv == Move::None {
            let mut p = book.position(id);
            let before = ch;
            searched(&mut p, &mut ch);
            if ch != before {
                book.put_position(&p);
            }
        }
    } else {
        let mut p = Position::new(*board, book_level(book));
        ch.links += link_detached(book, &mut p);
        searched(&mut p, &mut ch);
        p.normalize();
        book.put_position(&p);
        ch.positions += 1;
    }
    ch
}

/// Growth's `book_add_board` of one board: Edax's request for it, and the links its book
/// parents need if it is new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPlan {
    /// The search [`add_board`] runs on the board.
    pub request: Option<LeafRequest>,
    /// The parents that link to the board when it enters the book.
    pub parent_links: Vec<ParentLink>,
}

impl AddPlan {
    /// The searches the step needs: the board's own, then the parents' re-searches.
    pub fn requests(&self) -> impl Iterator<Item = LeafRequest> + '_ {
        self.request
            .into_iter()
            .chain(self.parent_links.iter().filter_map(|p| p.request))
    }
}

/// Plan growth's `book_add_board` of `board` (any orientation) on the current book.
pub fn plan_add_board(book: &MemBook, board: &Board) -> AddPlan {
    let enters =
        (board.empties() as i32) >= book.header().n_empties - 1 && book.probe(board).is_none();
    AddPlan {
        request: add_board_request(book, board),
        parent_links: if enters {
            plan_parent_links(book, board)
        } else {
            Vec::new()
        },
    }
}

/// Apply an [`AddPlan`] of `board` with `results` holding every request of
/// [`AddPlan::requests`]: Edax's `book_add_board`, then the parents' links.
pub fn apply_add_plan(
    book: &mut MemBook,
    board: &Board,
    plan: &AddPlan,
    results: &dyn Results,
) -> Result<Changes, GrowError> {
    let missing = GrowError::MissingResult { board: *board };
    if plan.requests().any(|r| results.result(&r).is_none()) {
        return Err(missing);
    }
    let result = plan.request.and_then(|r| results.result(&r));
    let mut ch = apply_add_board(book, board, result.as_ref());
    if !plan.parent_links.is_empty() {
        let id = book.probe(board).ok_or(missing)?;
        ch += apply_parent_links(book, &plan.parent_links, book.score(id).value, results)?;
    }
    Ok(ch)
}

/// A game move that could not be replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IllegalGameMove {
    /// Index of the move in the given move list.
    pub index: usize,
    /// The move.
    pub mv: Move,
}

/// What [`add_game`] or [`store_game`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GameReport {
    /// Moves replayed, inserted passes included.
    pub replayed: usize,
    /// The first illegal move, where the replay stopped (Edax's "illegal move in game" warning).
    pub illegal: Option<IllegalGameMove>,
    /// Positions and links added, searches run.
    pub changes: Changes,
}

/// Replay `moves` from the start position as Edax's `book_add_game` does: at most `limit` game
/// moves (passes not counted), a pass inserted whenever the side to move has none, stop at the
/// first illegal move. An explicit pass in `moves` is accepted where forced (it is the pass Edax
/// inserts) and does not count. Returns the boards (start first) and the report.
fn replay(moves: &[Move], limit: usize) -> (Vec<Board>, GameReport) {
    let mut boards = vec![Board::start()];
    let mut report = GameReport::default();
    let mut b = Board::start();
    let mut counted = 0;
    for (index, &mv) in moves.iter().enumerate() {
        if counted >= limit {
            break;
        }
        if mv == Move::Pass && b.must_pass() {
            b = b.pass();
            boards.push(b);
            continue;
        }
        if b.moves() == 0 {
            b = b.pass();
            boards.push(b);
        }
        match mv {
            Move::Square(s) if b.moves() & s.bit() != 0 => {
                b = b.play_flips(s.index(), b.flips(s));
                boards.push(b);
                counted += 1;
            }
            _ => {
                report.illegal = Some(IllegalGameMove { index, mv });
                break;
            }
        }
    }
    report.replayed = boards.len() - 1;
    (boards, report)
}

/// The boards Edax's `book_add_game` adds for `moves`, in the order it adds them (deepest
/// first, the start position excepted), and the replay report (without changes).
pub fn replay_game(book: &MemBook, moves: &[Move]) -> (Vec<Board>, GameReport) {
    let limit = usize::try_from(60 - book.header().n_empties).unwrap_or(0);
    let (boards, report) = replay(moves, limit);
    (boards[1..].iter().rev().copied().collect(), report)
}

/// Edax's `book_add_game` for a game from the standard start position (`book add`): replay at
/// most `60 − n_empties` moves (passes inserted where forced, explicit forced passes accepted
/// and not counted, stop at the first illegal move), then add the reached boards deepest first,
/// the start position excepted, with [`add_board`] (so each new position links to its already
/// added child). Values are not negamaxed (Edax's `book add` never does).
pub fn add_game<F>(book: &mut MemBook, moves: &[Move], search: &mut F) -> GameReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let (boards, mut report) = replay_game(book, moves);
    for b in &boards {
        report.changes += add_board(book, b, search);
    }
    report
}

/// Edax's `book store` of a game from the start position: replay the legal moves (passes
/// inserted where forced), add every reached board from the last one back to, and including,
/// the start position ([`add_board`]'s empties filter applies); if anything changed, run
/// [`link_book`] and negamax from the start position.
pub fn store_game<F>(book: &mut MemBook, moves: &[Move], search: &mut F) -> GameReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let (boards, mut report) = replay(moves, usize::MAX);
    for b in boards.iter().rev() {
        report.changes += add_board(book, b, search);
    }
    if report.changes.changed() {
        report.changes += link_book(book, search);
        negamax(book);
    }
    report
}

/// Edax's `book_link`: for every position (in Edax's file order), `position_link`, then
/// `position_search` when its leaf is NOMOVE.
pub fn link_book<F>(book: &mut MemBook, search: &mut F) -> Changes
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let mut ch = Changes::default();
    for id in bucket_order(book) {
        ch.links += link_position(book, id);
        if book.leaf(id).mv == Move::None {
            ch.add(search_position(book, id, search));
        }
    }
    ch
}

/// Edax's recursive `board_fill`: whether `board` is in the book or was just connected to it
/// through a path of at most `depth` moves; every intermediate board on such a path is added.
fn board_fill<F>(
    book: &mut MemBook,
    board: &Board,
    depth: u32,
    ch: &mut Changes,
    search: &mut F,
) -> bool
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    if depth == 0 {
        return book.probe(board).is_some();
    }
    let moves = board.moves();
    let mut filled = false;
    if moves == 0 {
        let next = board.pass();
        if next.moves() != 0 && board_fill(book, &next, depth - 1, ch, search) {
            *ch += add_board(book, &next, search);
            filled = true;
        }
    } else {
        for sq in bookfarm_engine::board::BitIter(moves) {
            let next = board.play_flips(sq.index(), board.flips(sq));
            if board_fill(book, &next, depth - 1, ch, search) {
                *ch += add_board(book, &next, search);
                filled = true;
            }
        }
    }
    filled
}

/// What [`fill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FillReport {
    /// Passes over the book (the last one adds nothing).
    pub passes: usize,
    /// Total changes.
    pub changes: Changes,
}

/// Edax's `book fill [d]` (d clamped to 1..=61): repeat passes until one adds nothing; a pass
/// runs Edax's recursive `board_fill` from every position with at least `n_empties` empties, positions added
/// during the pass included (visited in insertion order; Edax visits bucket by bucket), then
/// negamaxes from the start position if it changed something. The board is copied before the
/// walk, unlike Edax's pointer into a bucket that an insertion may reallocate.
pub fn fill<F>(book: &mut MemBook, depth: u32, search: &mut F) -> FillReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let depth = depth.clamp(1, 61);
    let mut report = FillReport::default();
    loop {
        report.passes += 1;
        let mut ch = Changes::default();
        let mut k = 0;
        while k < book.id_bound() {
            let id = NodeId(k as u32);
            k += 1;
            if !book.is_live(id) {
                continue;
            }
            let board = book.board(id);
            if board.empties() as i32 >= book.header().n_empties {
                board_fill(book, &board, depth, &mut ch, search);
            }
        }
        report.changes += ch;
        if !ch.changed() {
            break;
        }
        negamax(book);
    }
    report
}

/// Why a position fails Edax's `position_is_ok` (edax-spec §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionProblem {
    /// A square holds discs of both sides.
    Overlap,
    /// A centre square is empty.
    EmptyCentre,
    /// The board is not in canonical form.
    NotCanonical,
    /// A link's move is not legal (or a PASS link where no pass is forced, or beside others).
    BadLink(Move),
    /// The leaf's move is not legal (or a PASS leaf where no pass is forced, or beside links).
    BadLeaf(Move),
    /// The leaf is NOMOVE although some legal moves are neither links nor a PASS link.
    BadNoMove,
    /// Two links share a move, or the leaf's move is also a link.
    Duplicate(Move),
}

impl PositionProblem {
    /// Whether the board itself is impossible (then `fix` removes the position).
    pub fn is_illegal_board(self) -> bool {
        matches!(
            self,
            PositionProblem::Overlap | PositionProblem::EmptyCentre
        )
    }
}

impl std::fmt::Display for PositionProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PositionProblem::Overlap => {
                f.write_str("board is illegal: two discs on the same square")
            }
            PositionProblem::EmptyCentre => f.write_str("board is illegal: empty centre"),
            PositionProblem::NotCanonical => f.write_str("board is not unique"),
            PositionProblem::BadLink(Move::Pass) => f.write_str("passing link is wrong"),
            PositionProblem::BadLink(m) => write!(f, "link {m} is wrong"),
            PositionProblem::BadLeaf(Move::Pass) => f.write_str("passing leaf is wrong"),
            PositionProblem::BadLeaf(m) => write!(f, "leaf {m} is wrong"),
            PositionProblem::BadNoMove => f.write_str("nomove is wrong"),
            PositionProblem::Duplicate(m) => write!(f, "move {m} appears twice"),
        }
    }
}

const CENTRE: u64 = 0x0000_0018_1800_0000;

/// Edax's `position_is_ok`, in its order of checks: the first problem found, or `None`.
pub fn check_position(p: &Position) -> Option<PositionProblem> {
    let b = &p.board;
    if b.player & b.opponent != 0 {
        return Some(PositionProblem::Overlap);
    }
    if (b.player | b.opponent) & CENTRE != CENTRE {
        return Some(PositionProblem::EmptyCentre);
    }
    if canonical(b).0 != *b {
        return Some(PositionProblem::NotCanonical);
    }
    let moves = b.moves();
    let pass_ok = moves == 0 && b.pass().moves() != 0;
    let legal = |m: Move| matches!(m, Move::Square(s) if moves & s.bit() != 0);
    for l in &p.links {
        let ok = match l.mv {
            Move::Pass => p.links.len() == 1 && pass_ok,
            m => legal(m),
        };
        if !ok {
            return Some(PositionProblem::BadLink(l.mv));
        }
    }
    match p.leaf.mv {
        Move::Pass => {
            if !p.links.is_empty() || !pass_ok {
                return Some(PositionProblem::BadLeaf(Move::Pass));
            }
        }
        Move::None => {
            let pass_link = p.links.len() == 1 && p.links[0].mv == Move::Pass;
            if moves.count_ones() as usize != p.links.len() && !pass_link {
                return Some(PositionProblem::BadNoMove);
            }
        }
        m => {
            if !legal(m) {
                return Some(PositionProblem::BadLeaf(m));
            }
        }
    }
    for (i, l) in p.links.iter().enumerate() {
        if p.links[i + 1..].iter().any(|k| k.mv == l.mv) || p.leaf.mv == l.mv {
            return Some(PositionProblem::Duplicate(l.mv));
        }
    }
    None
}

/// What [`fix`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FixReport {
    /// Every position that failed [`check_position`], with the problem.
    pub problems: Vec<(Board, PositionProblem)>,
    /// Boards removed because they are illegal (Edax would keep an all-zero position instead).
    pub removed: Vec<Board>,
    /// Changes made by rebuilding the other positions.
    pub changes: Changes,
}

/// Edax's `book_fix`: every position failing [`check_position`] is rebuilt from its board:
/// normalized, everything discarded, level = book level, linked and searched; a borrowed leaf
/// ([`is_borrowed`]) is searched in place instead. Unlike Edax,
/// an illegal board (overlapping discs, empty centre) is removed and reported instead of
/// being turned into an all-zero position, and a non-canonical board is re-keyed under its
/// canonical form (dropped if that position already exists) instead of staying unfindable.
/// The `book fix` command then runs [`link_book`], negamax and the link sort
/// ([`fix_command`]).
pub fn fix<F>(book: &mut MemBook, search: &mut F) -> FixReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let mut report = FixReport::default();
    let bad: Vec<(Board, PositionProblem)> = book
        .ids()
        .filter_map(|id| check_position(&book.position(id)).map(|pb| (book.board(id), pb)))
        .collect();
    for &(board, problem) in &bad {
        if problem.is_illegal_board() {
            book.remove(&board);
            report.removed.push(board);
            continue;
        }
        let (c, _) = canonical(&board);
        // A borrowed leaf is searched in place, at its own level with its links kept: its
        // level is that of the value it borrowed, while Edax's rebuild would search at the
        // book level (an Egaroucid import's highest level, up to a perfect solve).
        if let Some(id) = book.find(&board)
            && problem == PositionProblem::BadNoMove
            && c == board
            && is_borrowed(&book.position(id))
        {
            report.changes.add(search_position(book, id, search));
            continue;
        }
        if c != board {
            book.remove(&board);
            if book.find(&c).is_some() {
                continue;
            }
        }
        let mut p = Position::new(c, book_level(book));
        report.changes.links += link_detached(book, &mut p);
        let out = position_search(&mut p, search);
        report.changes.add(out);
        book.put_position(&p);
    }
    report.problems = bad;
    report
}

/// The `book fix` command: [`fix`], [`link_book`], negamax from the start position, and the
/// link sort.
pub fn fix_command<F>(book: &mut MemBook, search: &mut F) -> FixReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let mut report = fix(book, search);
    report.changes += link_book(book, search);
    negamax(book);
    sort_links(book);
    report
}

/// What [`link_command`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkReport {
    /// Links added and leaves searched again by Edax's `book_link`.
    pub changes: Changes,
    /// What the negamax that followed changed (values, bounds, counts, link scores).
    pub negamax: NegamaxStats,
}

impl LinkReport {
    /// Whether the book was already linked and negamaxed: no link added, no search, no value,
    /// bound, count or link score changed.
    pub fn is_fixed_point(&self) -> bool {
        self.changes == Changes::default()
            && self.negamax.changed == 0
            && self.negamax.link_updates == 0
    }
}

/// The `book link` command, an explicit repair for imported books: Edax's `book_link`
/// ([`link_book`]: every position links to its book children, and a position whose leaf a link
/// replaced is searched again), then negamax from the start position and the link sort. A book grown by
/// this crate's driver is a fixed point of it ([`LinkReport::is_fixed_point`]).
pub fn link_command<F>(book: &mut MemBook, search: &mut F) -> LinkReport
where
    F: FnMut(&LeafRequest) -> LeafResult,
{
    let changes = link_book(book, search);
    let negamax = negamax(book);
    sort_links(book);
    LinkReport { changes, negamax }
}
