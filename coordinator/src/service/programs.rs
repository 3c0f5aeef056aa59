//! The program queue: every program the farm was asked to run, numbered, with its state
//! (queued, running, done, cancelled), when it was queued, started and ended, and what it did.
//!
//! Programs run in queue order, one at a time: the first of the queue is the current one (the
//! growth runner drives it, see `growth.rs`). `expand` appends, `expand --replace` cancels the
//! queue first, `expand cancel ID` cancels one program. The queue is the coordinator's own
//! record of what it was asked; it knows nothing of what a program does beyond its
//! description, so a program of another kind (one that only searches, say) is queued, listed,
//! cancelled and persisted the same way.
//!
//! Persistence: one store record per program (`q` + id), written when the program changes
//! (queued, started, ended), and the ids still to run in their order (`program-queue`), all in
//! the growth checkpoint that makes the change, so the stored queue and the stored state of
//! the running program always describe the same moment. The last [`KEEP_FINISHED`] finished
//! programs stay listed; older records are removed.

use crate::events::CostRecord;
use crate::store::{Batch, ProgramRecord, ProgramState, StoreError};
use bookfarm_book::program::{Program, Schedule};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

/// Finished and cancelled programs kept in the list (older ones are forgotten).
pub const KEEP_FINISHED: usize = 100;

/// The most programs waiting in the queue at once (a submission beyond it is refused).
pub const MAX_QUEUED: usize = 1000;

/// A program as listed: its record, its description (with the level of the positions it
/// creates), and where it stands when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramView {
    /// The stored record.
    pub record: ProgramRecord,
    /// What it does (`deviate 2 4 from f5d6 level 8`).
    pub description: String,
    /// Where the running program stands (empty for the others).
    pub progress: String,
    /// Where it stands and what it cost, as figures (see [`ProgramProgress`]).
    pub figures: ProgramProgress,
}

/// Where a program stands and what it cost: for the running program so far, for an ended one
/// its final figures (the cost of a program ended before the coordinator started is in its
/// `program_done` event only).
///
/// Each program kind says how far it is (`done`, `total`, `unit`); the service adds the cost
/// (searches charged to the program) and the finish estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramProgress {
    /// Units of work done (see `unit`).
    pub done: u64,
    /// Units of work known in all (0: not known).
    pub total: u64,
    /// What `done` and `total` count (`positions` of the current pass, `games`, `steps`,
    /// `searches`); empty when the kind counts nothing now.
    pub unit: &'static str,
    /// What the program cost: search time of every accepted search of its jobs (replicas,
    /// checks and speculative searches included), searches, replica time, positions the book
    /// gained, wall time.
    pub cost: CostRecord,
    /// When it should end, from now (None: not known).
    pub eta: Option<EtaRange>,
}

/// A finish estimate: the program should end between `low` and `high` from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtaRange {
    /// The earliest expected end, from now.
    pub low: Duration,
    /// The latest expected end, from now.
    pub high: Duration,
}

/// What each program cost, by program id: the running program's so far, and the last ended
/// ones' final cost (the newest [`KEEP_FINISHED`]).
#[derive(Debug, Default)]
pub(crate) struct ProgramCosts {
    /// Final costs of ended programs.
    ended: HashMap<u64, CostRecord>,
    /// Their ids, oldest first (to forget the oldest).
    order: VecDeque<u64>,
}

impl ProgramCosts {
    /// Keep the final cost of program `id`.
    pub(crate) fn ended(&mut self, id: u64, cost: CostRecord) {
        if self.ended.insert(id, cost).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > KEEP_FINISHED {
            if let Some(old) = self.order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }

    /// The final cost of ended program `id`, if it ended since the coordinator started.
    pub(crate) fn of(&self, id: u64) -> Option<CostRecord> {
        self.ended.get(&id).copied()
    }
}

/// The program queue (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Programs {
    /// Programs still to run, in run order, the current one first.
    queue: VecDeque<ProgramRecord>,
    /// The last finished and cancelled programs, oldest first.
    finished: VecDeque<ProgramRecord>,
    /// The next program's id.
    next_id: u64,
    /// Programs whose record changed since the last checkpoint.
    dirty: BTreeSet<u64>,
    /// Records to remove (forgotten programs) at the next checkpoint.
    forgotten: BTreeSet<u64>,
    /// The run order changed since the last checkpoint.
    order_dirty: bool,
}

/// What a checkpoint wrote of the queue (put back as unwritten when the write fails).
#[derive(Debug, Default)]
pub(crate) struct ProgramsWritten {
    dirty: BTreeSet<u64>,
    forgotten: BTreeSet<u64>,
    order: bool,
}

impl Programs {
    /// The queue as stored: the records and the ids still to run, in order. A record in the
    /// order that is missing is skipped; a record still to run that the order lacks (none
    /// is written so) runs after the others, by id.
    pub(crate) fn load(mut records: Vec<ProgramRecord>, order: &[u64]) -> Programs {
        records.sort_by_key(|r| r.id);
        let next_id = records.last().map_or(1, |r| r.id + 1);
        let mut queue = VecDeque::new();
        for id in order {
            if let Some(at) = records
                .iter()
                .position(|r| r.id == *id && !r.state.is_final())
            {
                queue.push_back(records.remove(at));
            }
        }
        let (mut rest, mut finished): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|r| !r.state.is_final());
        queue.extend(rest.drain(..));
        finished.sort_by_key(|r| (r.finished_ms, r.id));
        Programs {
            queue,
            finished: finished.into(),
            next_id,
            ..Programs::default()
        }
    }

    /// Queue `program` at the end (`front`: before every other, the current one included if
    /// it has not started); returns its id.
    pub(crate) fn push(&mut self, program: Program, now_ms: u64, front: bool) -> u64 {
        let id = self.next_id.max(1);
        self.next_id = id + 1;
        let record = ProgramRecord {
            id,
            program,
            state: ProgramState::Queued,
            submitted_ms: now_ms,
            started_ms: None,
            finished_ms: None,
            report: String::new(),
        };
        if front {
            self.queue.push_front(record);
        } else {
            self.queue.push_back(record);
        }
        self.dirty.insert(id);
        self.order_dirty = true;
        id
    }

    /// Queue `program` next: after the current program (which keeps running) and the
    /// programs right behind it that were queued next before (`expand analyze` and its
    /// `--store`: top priority, first come first served). Returns its id and its place in the queue (1: it runs now).
    pub(crate) fn push_next(&mut self, program: Program, now_ms: u64) -> (u64, usize) {
        let at = match self.queue.len() {
            0 => 0,
            _ => {
                1 + self
                    .queue
                    .iter()
                    .skip(1)
                    .take_while(|r| r.program.operation.is_top_priority())
                    .count()
            }
        };
        let id = self.push(program, now_ms, false);
        if let Some(record) = self.queue.pop_back() {
            self.queue.insert(at, record);
        }
        (id, at + 1)
    }

    /// The current program (the first of the queue).
    pub(crate) fn front(&self) -> Option<&ProgramRecord> {
        self.queue.front()
    }

    /// The programs still to run, the current one first.
    pub(crate) fn queued(&self) -> impl Iterator<Item = &ProgramRecord> {
        self.queue.iter()
    }

    /// The program that ended last.
    pub(crate) fn last_ended(&self) -> Option<&ProgramRecord> {
        self.finished.back()
    }

    /// Whether no program is left to run.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Programs still to run.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Mark the current program started (once).
    pub(crate) fn start_front(&mut self, now_ms: u64) {
        if let Some(r) = self.queue.front_mut()
            && r.state == ProgramState::Queued
        {
            r.state = ProgramState::Running;
            r.started_ms = Some(now_ms);
            self.dirty.insert(r.id);
        }
    }

    /// Record the schedule the current program runs on (chosen when it starts, for a program
    /// queued without one).
    pub(crate) fn set_front_schedule(&mut self, schedule: Schedule) {
        if let Some(r) = self.queue.front_mut()
            && r.program.schedule != schedule
        {
            r.program.schedule = schedule;
            self.dirty.insert(r.id);
        }
    }

    /// End the current program (done, or cancelled) with its report; returns it.
    pub(crate) fn end_front(
        &mut self,
        state: ProgramState,
        report: String,
        now_ms: u64,
    ) -> Option<ProgramRecord> {
        let r = self.queue.pop_front()?;
        self.order_dirty = true;
        Some(self.end(r, state, report, now_ms))
    }

    /// Remove program `id` from the queue (not the current one): `None` when it is not
    /// waiting there.
    pub(crate) fn take_waiting(&mut self, id: u64) -> Option<ProgramRecord> {
        let at = self.queue.iter().position(|r| r.id == id)?;
        if at == 0 {
            return None;
        }
        self.order_dirty = true;
        self.queue.remove(at)
    }

    /// Record `r` as ended (`state`) and keep it among the finished programs.
    pub(crate) fn end(
        &mut self,
        mut r: ProgramRecord,
        state: ProgramState,
        report: String,
        now_ms: u64,
    ) -> ProgramRecord {
        r.state = state;
        // End times strictly increase in the order programs end, so the order a restart
        // loads (by end time) is the order they ended even within one millisecond.
        let after_last = self
            .finished
            .back()
            .and_then(|l| l.finished_ms)
            .map_or(0, |ms| ms + 1);
        r.finished_ms = Some(now_ms.max(after_last));
        r.report = report;
        self.dirty.insert(r.id);
        self.finished.push_back(r.clone());
        // The highest number given is never forgotten: a restart numbers on from it.
        let highest = self.next_id.saturating_sub(1);
        while self.finished.len() > KEEP_FINISHED {
            let at = usize::from(self.finished.front().is_some_and(|r| r.id == highest));
            if let Some(old) = self.finished.remove(at) {
                self.dirty.remove(&old.id);
                self.forgotten.insert(old.id);
            }
        }
        r
    }

    /// Program `id`, wherever it is (queued, running or among the last finished).
    pub(crate) fn get(&self, id: u64) -> Option<&ProgramRecord> {
        self.queue
            .iter()
            .chain(self.finished.iter())
            .find(|r| r.id == id)
    }

    /// Every program listed: the queue in run order, then (with `finished`) the last finished
    /// ones, most recent first.
    pub(crate) fn list(&self, finished: bool) -> Vec<ProgramRecord> {
        let mut out: Vec<ProgramRecord> = self.queue.iter().cloned().collect();
        if finished {
            out.extend(self.finished.iter().rev().cloned());
        }
        out
    }

    /// Whether something changed since the last checkpoint.
    pub(crate) fn is_dirty(&self) -> bool {
        !self.dirty.is_empty() || !self.forgotten.is_empty() || self.order_dirty
    }

    /// Add what changed since the last checkpoint to `batch`.
    pub(crate) fn write(&mut self, batch: &mut Batch) -> Result<ProgramsWritten, StoreError> {
        for id in &self.dirty {
            if let Some(r) = self.get(*id) {
                batch.put_program(r)?;
            }
        }
        for id in &self.forgotten {
            batch.remove_program(*id);
        }
        if self.order_dirty {
            let ids: Vec<u64> = self.queue.iter().map(|r| r.id).collect();
            batch.put_program_queue(&ids)?;
        }
        Ok(ProgramsWritten {
            dirty: std::mem::take(&mut self.dirty),
            forgotten: std::mem::take(&mut self.forgotten),
            order: std::mem::take(&mut self.order_dirty),
        })
    }

    /// What a checkpoint that was not applied wrote is unwritten again.
    pub(crate) fn unwrite(&mut self, w: ProgramsWritten) {
        self.dirty.extend(w.dirty);
        self.forgotten.extend(w.forgotten);
        self.order_dirty |= w.order;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bookfarm_book::program::Operation;

    fn deviate(rel: i32) -> Program {
        Program::new(Operation::Deviate {
            params: bookfarm_book::select::Deviate::new(rel, 4),
        })
    }

    fn ids(p: &Programs) -> Vec<u64> {
        p.queued().map(|r| r.id).collect()
    }

    #[test]
    fn programs_are_numbered_and_run_in_queue_order() {
        let mut p = Programs::default();
        assert_eq!(p.push(deviate(1), 10, false), 1);
        assert_eq!(p.push(deviate(2), 11, false), 2);
        assert_eq!(p.push(deviate(3), 12, true), 3);
        assert_eq!(ids(&p), [3, 1, 2]);
        p.start_front(20);
        assert_eq!(
            p.front().map(|r| (r.state, r.started_ms)),
            Some((ProgramState::Running, Some(20)))
        );
        // A second start keeps the first time.
        p.start_front(21);
        assert_eq!(p.front().and_then(|r| r.started_ms), Some(20));
        let done = p
            .end_front(ProgramState::Done, "did it".into(), 30)
            .unwrap();
        assert_eq!(
            (done.id, done.state, done.finished_ms),
            (3, ProgramState::Done, Some(30))
        );
        // The current program cannot be taken out as a waiting one.
        assert!(p.take_waiting(1).is_none());
        let two = p.take_waiting(2).unwrap();
        p.end(two, ProgramState::Cancelled, "cancelled".into(), 31);
        assert_eq!(ids(&p), [1]);
        let listed: Vec<_> = p.list(true).iter().map(|r| (r.id, r.state)).collect();
        assert_eq!(
            listed,
            [
                (1, ProgramState::Queued),
                (2, ProgramState::Cancelled),
                (3, ProgramState::Done)
            ]
        );
        assert_eq!(p.list(false).len(), 1);
    }

    #[test]
    fn an_analysis_is_queued_next_after_the_analyses_before_it() {
        let analyze = |up_to: u8| {
            Program::new(Operation::Analyze {
                board: bookfarm_engine::Board::start(),
                from: 1,
                up_to,
            })
        };
        let mut p = Programs::default();
        // Alone: it runs now.
        assert_eq!(p.push_next(analyze(2), 1), (1, 1));
        p.end_front(ProgramState::Done, "done".into(), 2);
        p.push(deviate(1), 3, false);
        p.start_front(4);
        p.push(deviate(2), 5, false);
        assert_eq!(p.push_next(analyze(3), 6), (4, 2));
        assert_eq!(p.push_next(analyze(4), 7), (5, 3));
        assert_eq!(ids(&p), [2, 4, 5, 3]);
        // The order is stored.
        let order: Vec<u64> = p.queued().map(|r| r.id).collect();
        let back = Programs::load(p.list(true), &order);
        assert_eq!(ids(&back), [2, 4, 5, 3]);
    }

    #[test]
    fn the_stored_queue_loads_in_its_order_and_numbers_go_on() {
        let mut p = Programs::default();
        for rel in 0..5 {
            p.push(deviate(rel), 1, false);
        }
        p.start_front(2);
        p.end_front(ProgramState::Done, "one".into(), 3);
        let mut records = p.list(true);
        records.reverse();
        let order: Vec<u64> = p.queued().map(|r| r.id).collect();
        let back = Programs::load(records, &order);
        assert_eq!(ids(&back), [2, 3, 4, 5]);
        assert_eq!(back.list(true).last().map(|r| r.id), Some(1));
        let mut back = back;
        assert_eq!(back.push(deviate(9), 4, false), 6);
    }

    /// Two programs that end within one millisecond are listed in the order they ended, before
    /// and after a restart.
    #[test]
    fn programs_ended_in_one_millisecond_keep_their_order_across_a_restart() {
        let mut p = Programs::default();
        for rel in 0..3 {
            p.push(deviate(rel), 1, false);
        }
        p.start_front(2);
        let three = p.take_waiting(3).unwrap();
        p.end(three, ProgramState::Cancelled, "cancelled".into(), 5);
        p.end_front(ProgramState::Done, "done".into(), 5);
        let listed = |p: &Programs| -> Vec<u64> { p.list(true).iter().map(|r| r.id).collect() };
        assert_eq!(listed(&p), [2, 1, 3]);
        let mut records = p.list(true);
        records.reverse();
        let order: Vec<u64> = p.queued().map(|r| r.id).collect();
        let back = Programs::load(records, &order);
        assert_eq!(listed(&back), [2, 1, 3]);
        let ends: Vec<Option<u64>> = back.list(true).iter().map(|r| r.finished_ms).collect();
        assert_eq!(ends, [None, Some(6), Some(5)]);
    }

    #[test]
    fn only_the_last_finished_programs_are_kept() {
        let mut p = Programs::default();
        for i in 0..(KEEP_FINISHED as u64 + 3) {
            p.push(deviate(1), i, false);
            p.end_front(ProgramState::Done, String::new(), i);
        }
        assert_eq!(p.list(true).len(), KEEP_FINISHED);
        assert_eq!(p.list(true).last().map(|r| r.id), Some(4));
        let mut batch = Batch::default();
        let w = p.write(&mut batch).unwrap();
        assert_eq!(w.forgotten, BTreeSet::from([1, 2, 3]));
        assert!(!w.dirty.contains(&1));
        assert!(!p.is_dirty());
        p.unwrite(w);
        assert!(p.is_dirty());
    }

    #[test]
    fn the_highest_number_is_kept_so_numbers_are_never_reused() {
        let mut p = Programs::default();
        for i in 0..(KEEP_FINISHED as u64 + 2) {
            p.push(deviate(1), i, false);
        }
        // The last queued is cancelled first, then every other runs to its end.
        let last = p.take_waiting(KEEP_FINISHED as u64 + 2).unwrap();
        p.end(last, ProgramState::Cancelled, String::new(), 0);
        while p.end_front(ProgramState::Done, String::new(), 1).is_some() {}
        let records = p.list(true);
        assert_eq!(records.len(), KEEP_FINISHED);
        assert!(records.iter().any(|r| r.id == KEEP_FINISHED as u64 + 2));
        let mut back = Programs::load(records, &[]);
        assert_eq!(back.push(deviate(1), 2, false), KEEP_FINISHED as u64 + 3);
    }
}
