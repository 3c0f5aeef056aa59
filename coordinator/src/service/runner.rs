//! The growth runner: one background thread at a time that applies the landed results to the
//! book through the growth programs (the book crate's driver), checkpoints, and refreshes the
//! job table with the searches the programs wait for (round work, and speculation at a pass's
//! tail); starting and pausing programs; and durability (group-commit flushes, checkpoints).

#[cfg(doc)]
use super::ShallowSearch;
use super::growth::{AutoSchedule, Growth, Landed, Needed, Recovery};
use super::programs::{MAX_QUEUED, ProgramView};
use super::{Coordinator, GrowthMode, Predictor};
use crate::error::{CoordinatorError, Result};
use crate::events::{CostRecord, EventKind, event};
use crate::store::{Batch, ProgramRecord, ProgramState};
use bookfarm_book::mem::MemBook;
use bookfarm_book::program::{Operation, Program, Schedule, check_root, resolve_root};
use bookfarm_book::schedule::run::async_selector;
use bookfarm_engine::Move;
use bookfarm_engine::search::LeafRequest;
use bookfarm_engine::symmetry::canonical;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A program just queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Its number.
    pub program: u64,
    /// Its place in the queue (1: it is the current program).
    pub position: usize,
    /// Searches queued for the workers now.
    pub jobs: u64,
    /// The programs `--replace` cancelled first.
    pub cancelled: Vec<u64>,
    /// An identical book-neutral program was queued or running already: this is it (the same
    /// command given again attaches to it).
    pub existing: bool,
}

/// The most speculative searches planned at once (a plan runs the programs on a copy of the
/// book, so its cost grows with it).
const MAX_SPECULATION: usize = 4096;

impl Coordinator {
    /// Whether the growth runner has work under way (a worker that got no job may wait for it
    /// instead of sleeping: new jobs appear when it finishes).
    pub fn growth_busy(&self) -> bool {
        self.0.running.load(Ordering::SeqCst) || self.0.pending.load(Ordering::SeqCst)
    }

    /// A receiver that changes whenever a growth run finishes.
    pub fn growth_runs(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.runs.subscribe()
    }

    pub(super) fn growth_run_count(&self) -> u64 {
        *self.0.runs_done.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hand the results a submission let through to the growth runner, apply them on this
    /// thread, or keep them for [`Coordinator::settle`] ([`super::ServiceConfig::growth`]).
    /// `run`: a growth run is due even without results (a rollback was requested, or the job
    /// table needs the asynchronous program's needed set whole).
    pub(super) fn hand_to_growth(&self, landed: Vec<Landed>, run: bool) {
        if landed.is_empty() && !run {
            return;
        }
        metrics::counter!(crate::telemetry::JOBS_COMPLETED).increment(landed.len() as u64);
        self.0
            .inbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(landed);
        match self.0.cfg.growth {
            GrowthMode::Inline => {
                if let Err(e) = self.run_growth() {
                    tracing::error!(error = %e, "growth run failed");
                }
            }
            GrowthMode::Thread => self.kick(),
            GrowthMode::Deferred => {}
        }
    }

    /// Have the growth runner apply what landed (one runner thread at a time; a kick while it
    /// runs makes it run once more).
    fn kick(&self) {
        self.0.pending.store(true, Ordering::SeqCst);
        if self.0.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("growth".into())
            .spawn(move || {
                loop {
                    me.0.pending.store(false, Ordering::SeqCst);
                    if let Err(e) = me.run_growth() {
                        if matches!(e, CoordinatorError::Store(_)) {
                            metrics::counter!(crate::telemetry::STORE_ERRORS).increment(1);
                        }
                        tracing::error!(error = %e, "growth run failed");
                    }
                    me.0.running.store(false, Ordering::SeqCst);
                    if !me.0.pending.load(Ordering::SeqCst)
                        || me.0.running.swap(true, Ordering::SeqCst)
                    {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            // The results stay in the inbox; the next kick tries again.
            self.0.running.store(false, Ordering::SeqCst);
            tracing::error!(error = %e, "could not start the growth runner");
        }
    }

    /// One growth run: apply the landed results, advance the programs, persist, and refresh the
    /// job table with what they wait for.
    pub(super) fn run_growth(&self) -> Result<()> {
        let landed = std::mem::take(&mut *self.0.inbox.lock().unwrap_or_else(|p| p.into_inner()));
        let applied: Vec<LeafRequest> = landed.iter().map(|l| l.key).collect();
        let rollback = self
            .0
            .rollback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut growth = self.growth();
        growth.land(landed);
        let threads = self.jobs().threads();
        let auto = AutoSchedule {
            threads,
            async_threads: self.0.cfg.async_threads,
            options: self.0.cfg.async_options,
        };
        // A rollback's cost (a replay: putting the base book back and running every program
        // again over the stored results; a retraction: clearing leaves and the repair's first
        // run) is this growth run's CPU.
        let replay_cpu = rollback.is_some().then(cpu_time::ThreadTime::now);
        if let Some((through, dropped)) = rollback {
            let recovery = growth.recover(&self.0.store, &dropped, through, auto)?;
            let (kind, detail) = match &recovery {
                Recovery::Replayed { programs } => (
                    EventKind::Replay,
                    format!(
                        "replaying {programs} programs from the base book without {} results of \
                         caught contributors (rollback {through})",
                        dropped.len()
                    ),
                ),
                Recovery::Retracted { program, cleared } => (
                    EventKind::Retract,
                    format!(
                        "{cleared} leaves from {} dropped results of caught contributors cleared \
                         and searched again by the running {program} (rollback {through})",
                        dropped.len()
                    ),
                ),
                Recovery::Reopened { program, cleared } => (
                    EventKind::Retract,
                    format!(
                        "{program} re-opened after it finished: {cleared} leaves from {} dropped \
                         results of caught contributors cleared and searched again (rollback \
                         {through})",
                        dropped.len()
                    ),
                ),
            };
            {
                let counters = &mut self.jobs().trust.counters;
                match recovery {
                    Recovery::Replayed { .. } => counters.replays += 1,
                    _ => counters.retractions += 1,
                }
            }
            self.0.events.record(event(kind, "book", "", detail));
        }
        // Round work queued ahead: enough for every registered thread to hold a few jobs; more
        // would only cost the growth run look-ups (a pass can hold many thousands of steps).
        let lookahead = threads.saturating_mul(4).max(256);
        growth.advance(
            &self.0.store,
            lookahead,
            self.0.cfg.checkpoint_interval,
            auto,
        )?;
        growth.observe_eta(self.now());
        if let Some(t) = replay_cpu {
            let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.jobs().trust.counters.replay_cpu_us += us;
        }
        self.hand_core_to_trust(&growth)?;
        self.record_program_events(growth.take_events());
        let positions = growth.book.len();
        // Taken only here, after everything that can fail: a change of the asynchronous
        // program's needed set waits in the program until the table gets it.
        if std::mem::take(&mut self.jobs().resync) {
            growth.resync_needed();
        }
        let needed = growth.take_needed();
        let ahead = growth.ahead_owners();
        // Speculate only at a round's tail: when fewer round searches wait than the workers
        // have threads (before that, every idle thread gets round work anyway); plan again
        // when the speculative searches planned run low too, or the program moved to another
        // pass (the old plan guessed it).
        let tail_threads = {
            let mut jobs = self.jobs();
            for k in &applied {
                jobs.landed.remove(k);
            }
            jobs.cost.ahead = ahead;
            match &needed {
                Needed::List(list) => jobs.sync(list, None),
                // The previous program's speculation goes: this one makes no guesses.
                Needed::Whole(list) => jobs.sync_ranked(list, Some(&[])),
                Needed::Delta(d) => jobs.round_delta(&d.added, &d.removed),
            }
            let threads = jobs.threads();
            // A big farm drains any plan at once: plan again after a share of it landed
            // rather than after every result.
            let low =
                jobs.queued() < threads && growth.landed_since_plan >= (threads / 16).clamp(1, 64);
            (jobs.queued_round() < threads && (low || growth.plan_is_stale()))
                .then(|| (threads, jobs.searching()))
        };
        let speculative = match tail_threads {
            // The asynchronous program makes no guesses: nothing to speculate on.
            _ if !matches!(needed, Needed::List(_)) => None,
            _ if self.0.cfg.speculation == 0 || !growth.is_running() => Some(Vec::new()),
            Some(_) if growth.next_plan_at.is_some_and(|t| Instant::now() < t) => None,
            Some((threads, searching)) => {
                let budget = threads.saturating_mul(self.0.cfg.speculation as usize);
                let started = Instant::now();
                let list = growth.speculate(
                    budget.min(MAX_SPECULATION),
                    &searching,
                    self.0.cfg.predictor_level,
                );
                let share = self.0.cfg.speculation_share;
                growth.next_plan_at = (share < 1.0)
                    .then(|| started + started.elapsed().mul_f64(1.0 / share.max(0.01)));
                Some(list)
            }
            None => None,
        };
        if let (Some(list), Needed::List(needed)) = (speculative, &needed) {
            self.jobs().sync(needed, Some(&list));
        }
        let prefetch = growth.prefetch_report();
        drop(growth);
        metrics::gauge!(crate::telemetry::POSITIONS).set(positions as f64);
        metrics::gauge!(crate::telemetry::PREFETCH_USED).set(prefetch.used as f64);
        metrics::gauge!(crate::telemetry::PREFETCH_UNUSED).set(prefetch.unused as f64);
        self.0.runs.send_modify(|n| *n += 1);
        let (count, cv) = &self.0.runs_done;
        *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        cv.notify_all();
        Ok(())
    }

    /// After a negamax of the programs (or when they are done): hand the book's decisive core
    /// to the trust ledger, which opens a core check for every provisional result that stayed
    /// in it (see `super::trust`). The walk costs O(core); it runs once per negamax (a serial
    /// iteration, a finished program, a replay) or core snapshot of the asynchronous program,
    /// and once more when the programs are done.
    fn hand_core_to_trust(&self, growth: &Growth) -> Result<()> {
        let last = !growth.is_running();
        let epoch = (growth.negamaxes + growth.async_cores).saturating_mul(2) + u64::from(last);
        if self.0.core_epoch.swap(epoch, Ordering::SeqCst) == epoch {
            return Ok(());
        }
        let core = growth.decisive_core();
        let now = self.now();
        let mut batch = Batch::default();
        let mut jobs = self.jobs();
        let rules = self.0.cfg.trust;
        let checks = jobs
            .trust
            .core_changed(&rules, &mut batch, &core, last, |k| {
                growth.results.get(k).copied()
            })?;
        for (key, need) in checks {
            jobs.add_check(key, need, now);
        }
        if batch.len > 0 {
            self.0.store.apply(batch)?;
            self.0.written.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Record the events of programs that started or finished in a growth run; a finished
    /// program's event carries its cost (the searches charged to it since it started).
    fn record_program_events(&self, events: Vec<crate::events::EventRecord>) {
        if events.is_empty() {
            return;
        }
        let mut g = self.jobs();
        for mut e in events {
            match e.kind {
                // A program starts with what was searched ahead for it while it waited.
                EventKind::ProgramStarted => {
                    g.cost.program = g.cost.queued.remove(&e.program).unwrap_or_default();
                    g.cost.program_id = e.program;
                    g.cost.ahead.retain(|_, id| *id != e.program);
                }
                // A program that ends: what was charged to it is its cost (a queued one's: what
                // was searched ahead for it).
                EventKind::ProgramDone | EventKind::ProgramCancelled
                    if e.cost.is_some() || g.cost.queued.contains_key(&e.program) =>
                {
                    let spent = if e.cost.is_some() {
                        g.cost.program_id = 0;
                        std::mem::take(&mut g.cost.program)
                    } else {
                        g.cost.ahead.retain(|_, id| *id != e.program);
                        g.cost.queued.remove(&e.program).unwrap_or_default()
                    };
                    let c = e.cost.get_or_insert_with(Default::default);
                    c.cpu_us = spent.cpu_us;
                    c.searches = spent.searches;
                    c.replica_cpu_us = spent.replica_cpu_us;
                    self.0
                        .costs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .ended(e.program, *c);
                }
                _ => {}
            }
            self.0.events.record(e);
        }
    }

    /// Wait until every result handed to growth so far is applied (tests, commands that read
    /// the book right after their searches).
    pub fn settle(&self) -> Result<()> {
        while self.growth_busy() {
            std::thread::sleep(Duration::from_micros(20));
        }
        let rollback = self
            .0
            .rollback
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if rollback || self.landed_pending() > 0 {
            self.run_growth()?;
        }
        Ok(())
    }

    /// Results handed to growth and not applied yet.
    pub fn landed_pending(&self) -> usize {
        self.0.inbox.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Wait until every store write applied before this call is durable (group commit: one
    /// fsync serves every caller waiting at that moment).
    pub async fn wait_durable(&self) -> Result<()> {
        let ticket = self.0.written.fetch_add(1, Ordering::SeqCst) + 1;
        let _g = self.0.flush_lock.lock().await;
        if self.0.flushed.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        let target = self.0.written.load(Ordering::SeqCst);
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.0.store.flush())
            .await
            .map_err(|e| CoordinatorError::Internal(format!("flush task: {e}")))??;
        self.0.flushed.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    /// Make sled's writes so far durable (blocking): an error means the store failed, and
    /// sled keeps a write error for good (see `crate::live`).
    pub fn flush_store(&self) -> Result<()> {
        Ok(self.0.store.flush()?)
    }

    /// Whether the store can take writes now (blocking; see `Store::probe_writable`): the
    /// readiness probe.
    pub fn probe_store(&self) -> Result<()> {
        Ok(self.0.store.probe_writable()?)
    }

    /// Checkpoint the growth state and make every store write durable (blocking; clean
    /// shutdown, commands that end, tests). A coordinator stopped without it loses nothing:
    /// the next one re-runs growth from the last checkpoint with the stored results.
    pub fn flush(&self) -> Result<()> {
        self.growth().persist(&self.0.store)?;
        let mut g = self.jobs();
        // Count-only trust changes not written yet (see `TrustState::records_to_write`).
        let counts = g.trust.take_unwritten();
        if !counts.is_empty() {
            let mut b = Batch::default();
            for (name, t) in &counts {
                b.put_trust(name, t)?;
            }
            if let Err(e) = self.0.store.apply(b) {
                g.trust.unwritten.extend(counts.into_iter().map(|(n, _)| n));
                return Err(e.into());
            }
        }
        drop(g);
        Ok(self.0.store.flush()?)
    }

    /// Queue a growth program (run after the programs already queued; the first starts at
    /// once). Durable on return: a restart runs it.
    pub fn start(&self, program: Program) -> Result<Queued> {
        self.queue_program(program, false)
    }

    /// Cancel every queued program and the running one, then queue `program` (`expand
    /// --replace`). Durable on return.
    pub fn replace(&self, program: Program) -> Result<Queued> {
        self.queue_program(program, true)
    }

    /// Queue `program` as a start request names it: `from` (a move list or an OBF board; empty:
    /// the program's own root) is its root, or with `store` (an analysis only) the line whose
    /// position stores the analysis's deepest level ([`Coordinator::start_analysis`]);
    /// `replace` cancels every queued and running program first ([`Coordinator::replace`]).
    /// Returns the program queued and the store program. Durable on return.
    pub fn start_request(
        &self,
        mut program: Program,
        from: &str,
        replace: bool,
        store: bool,
    ) -> Result<(Queued, Option<Queued>)> {
        if store {
            if replace {
                return Err(CoordinatorError::InvalidArgument(
                    "--replace does not apply to an analysis".into(),
                ));
            }
            return self.start_analysis(program, Some(from));
        }
        if !from.trim().is_empty() {
            program.root = self.resolve_root(from)?;
        }
        let queued = if replace {
            self.replace(program)?
        } else {
            self.start(program)?
        };
        Ok((queued, None))
    }

    /// Queue the analysis `analysis` (an [`Operation::Analyze`], top priority), and with
    /// `store_from` (the position's move list, or its OBF board in the book) the program that
    /// stores its deepest level in the book right behind it ([`Operation::StoreAnalysis`]: the
    /// line's missing positions added, the position's leaf re-searched at that level). Both
    /// are checked before either is queued: a position the book cannot hold (past its depth,
    /// an OBF board not in it) or a line to another position queues nothing. Returns the
    /// analysis and the store program. Durable on return.
    pub fn start_analysis(
        &self,
        analysis: Program,
        store_from: Option<&str>,
    ) -> Result<(Queued, Option<Queued>)> {
        let Operation::Analyze { board, up_to, .. } = &analysis.operation else {
            return Err(CoordinatorError::InvalidArgument(format!(
                "{} is not an analysis",
                analysis.describe()
            )));
        };
        let store = match store_from {
            None => None,
            Some(text) => {
                // The line is the store program's root: say which option it came from.
                let root = self.resolve_root(text).map_err(|e| match e {
                    CoordinatorError::InvalidArgument(m) => CoordinatorError::InvalidArgument(
                        format!("--store: {}", m.trim_start_matches("--from: ")),
                    ),
                    e => e,
                })?;
                let store = Program {
                    root,
                    ..Program::new(Operation::StoreAnalysis { level: *up_to })
                };
                let same = store
                    .root_board()
                    .is_some_and(|b| canonical(&b).0 == canonical(board).0);
                if !same {
                    return Err(CoordinatorError::InvalidArgument(format!(
                        "--store: {text:?} does not reach the analysed position"
                    )));
                }
                let growth = self.growth();
                check_program(&analysis, &growth.book, &self.0.cfg)?;
                check_program(&store, &growth.book, &self.0.cfg)?;
                Some(store)
            }
        };
        let queued = self.start(analysis)?;
        let stored = store.map(|p| self.start(p)).transpose()?;
        Ok((queued, stored))
    }

    fn queue_program(&self, program: Program, replace: bool) -> Result<Queued> {
        let mut growth = self.growth();
        check_program(&program, &growth.book, &self.0.cfg)?;
        if !replace
            && program.operation.is_book_neutral()
            && let Some((at, r)) = growth
                .programs
                .queued()
                .enumerate()
                .find(|(_, r)| r.program == program)
        {
            return Ok(Queued {
                program: r.id,
                position: at + 1,
                jobs: self.jobs().queued() as u64,
                cancelled: Vec::new(),
                existing: true,
            });
        }
        let cancelled = if replace {
            growth.cancel_all()?
        } else {
            Vec::new()
        };
        if growth.programs.len() >= MAX_QUEUED {
            return Err(CoordinatorError::FailedPrecondition(format!(
                "the queue holds {MAX_QUEUED} programs already (cancel some: `expand cancel ID`)"
            )));
        }
        tracing::info!(program = %program.describe(), level = ?program.level, "growth program queued");
        self.0.events.record(event(
            EventKind::ProgramQueued,
            &super::growth::describe(&program),
            "",
            String::new(),
        ));
        // An analysis and the store of one run next (top priority; the running program is
        // not interrupted, but an analysis's searches go before its own: see
        // `Growth::take_needed`).
        let (id, position) = if program.operation.is_top_priority() {
            growth.programs.push_next(program, super::now_ms())
        } else {
            (growth.push(program), growth.programs.len())
        };
        drop(growth);
        self.run_growth()?;
        self.growth().persist(&self.0.store)?;
        self.0.store.flush()?;
        Ok(Queued {
            program: id,
            position,
            jobs: self.jobs().queued() as u64,
            cancelled,
            existing: false,
        })
    }

    /// The root line `text` names (`--from`): a move list, or an OBF board in the book (then
    /// the shortest book line to it); checked against the book (legal, within its depth).
    pub fn resolve_root(&self, text: &str) -> Result<Vec<Move>> {
        resolve_root(text, &self.growth().book)
            .map_err(|e| CoordinatorError::InvalidArgument(e.to_string()))
    }

    /// Cancel program `id` (`expand cancel`): a queued one never runs; the running one stops
    /// before its next step, and what it added stays in the book. Durable on return; returns
    /// the program as it was cancelled.
    pub fn cancel(&self, id: u64) -> Result<ProgramRecord> {
        let record = self.growth().cancel(id)?;
        self.run_growth()?;
        self.growth().persist(&self.0.store)?;
        self.0.store.flush()?;
        Ok(record)
    }

    /// The programs of the queue in run order (the running one first), then, with
    /// `finished`, the last finished and cancelled ones, most recent first.
    pub fn programs(&self, finished: bool) -> Vec<ProgramView> {
        let (mut list, eta) = {
            let g = self.growth();
            (g.list(finished), g.eta_at(self.now()))
        };
        self.add_costs(&mut list);
        add_eta(&mut list, eta);
        list
    }

    /// The running program's id and its finish estimate now (see [`super::eta`]; None: no
    /// program runs, an estimate of None: not known yet).
    pub fn program_eta(&self) -> Option<(u64, Option<super::eta::Estimate>)> {
        self.growth().eta_at(self.now())
    }

    /// The running program (or the queue's first) and the last one ended, with their costs.
    pub fn current_programs(&self) -> (Option<ProgramView>, Option<ProgramView>) {
        let ((mut current, mut last), eta) = {
            let g = self.growth();
            (g.current_and_last(), g.eta_at(self.now()))
        };
        for p in [&mut current, &mut last].into_iter().flatten() {
            self.add_costs(std::slice::from_mut(p));
            add_eta(std::slice::from_mut(p), eta);
        }
        (current, last)
    }

    /// Fill the cost figures of listed programs (see [`super::ProgramProgress::cost`]).
    fn add_costs(&self, list: &mut [ProgramView]) {
        let (running, queued) = {
            let g = self.jobs();
            let queued: Vec<(u64, CostRecord)> = list
                .iter()
                .filter_map(|p| Some((p.record.id, *g.cost.queued.get(&p.record.id)?)))
                .collect();
            ((g.cost.program_id, g.cost.program), queued)
        };
        let costs = self.0.costs.lock().unwrap_or_else(|p| p.into_inner());
        for p in list.iter_mut() {
            let r = &p.record;
            let cost = &mut p.figures.cost;
            match r.state {
                ProgramState::Running => {
                    // Positions come from the program; searches from the job table, which
                    // counts since this coordinator started the program.
                    if running.0 == r.id {
                        cost.cpu_us = running.1.cpu_us;
                        cost.searches = running.1.searches;
                        cost.replica_cpu_us = running.1.replica_cpu_us;
                    }
                }
                ProgramState::Done | ProgramState::Cancelled => {
                    if let Some(c) = costs.of(r.id) {
                        *cost = c;
                    }
                }
                // Searched ahead of the running program (an analysis's levels).
                ProgramState::Queued => {
                    if let Some((_, c)) = queued.iter().find(|(id, _)| *id == r.id) {
                        cost.cpu_us = c.cpu_us;
                        cost.searches = c.searches;
                        cost.replica_cpu_us = c.replica_cpu_us;
                    }
                }
            }
        }
    }

    /// Queue `book add` of games (move lists from the start position).
    pub fn add_games(&self, games: &[Vec<Move>]) -> Result<Queued> {
        self.start(Program::new(Operation::AddGames {
            games: games.to_vec(),
        }))
    }

    /// Pause (true) or resume (false) the growth programs.
    pub fn set_paused(&self, paused: bool) -> Result<()> {
        let mut g = self.growth();
        if !g.is_running() {
            return Err(CoordinatorError::FailedPrecondition(
                "no expansion to pause or resume".into(),
            ));
        }
        g.paused = paused;
        self.0.paused.store(paused, Ordering::SeqCst);
        g.persist(&self.0.store)?;
        drop(g);
        self.0.store.flush()?;
        Ok(())
    }

    /// Replace how speculation guesses results (simulations, tests; the default is
    /// [`ShallowSearch`] at level 2).
    pub fn set_predictor(&self, predictor: Box<dyn Predictor>) {
        self.growth().set_predictor(predictor);
    }
}

/// Whether `program` may be queued on `book`: a root line only for the programs that start
/// from one, and legal within the book's depth; the asynchronous schedule only for the
/// selectors and upgrade; the bounds of each kind ([`check_bounds`]).
fn check_program(program: &Program, book: &MemBook, cfg: &super::ServiceConfig) -> Result<()> {
    if !program.root.is_empty() && !program.operation.has_root() {
        return Err(CoordinatorError::InvalidArgument(format!(
            "--from applies to deviate, enhance, play, extend and upgrade, not to {}",
            program.describe()
        )));
    }
    if program.schedule == Schedule::Async && async_selector(program).is_none() {
        return Err(CoordinatorError::InvalidArgument(format!(
            "the asynchronous schedule applies to deviate, enhance, play, extend and \
             upgrade, not to {}",
            program.describe()
        )));
    }
    if !program.root.is_empty() {
        check_root(&program.root, book)
            .map_err(|e| CoordinatorError::InvalidArgument(e.to_string()))?;
    }
    check_bounds(program, cfg)
}

/// The bounds of a program's own figures: a search program holds 1..=`search_max_positions`
/// positions searched at a level in 1..=60; an analysis's levels are in 1..=60, `up_to` not
/// below `from`; an analysis is stored at a level in 1..=60.
fn check_bounds(program: &Program, cfg: &super::ServiceConfig) -> Result<()> {
    let bad = |m: String| Err(CoordinatorError::InvalidArgument(m));
    match &program.operation {
        Operation::Search { positions, level } => {
            if !(1..=60).contains(level) {
                return bad(format!("search level {level}: expected 1..=60"));
            }
            if positions.is_empty() {
                return bad("a search program needs at least one position".into());
            }
            if positions.len() > cfg.search_max_positions {
                return bad(format!(
                    "{} positions, more than the {} a search program may hold: split the file",
                    positions.len(),
                    cfg.search_max_positions
                ));
            }
        }
        Operation::Analyze { from, up_to, .. }
            if !(1..=60).contains(from) || !(1..=60).contains(up_to) || up_to < from =>
        {
            return bad(format!(
                "analyze levels {from}..{up_to}: expected 1 <= level <= up-to <= 60"
            ));
        }
        Operation::StoreAnalysis { level } if !(1..=60).contains(level) => {
            return bad(format!("store level {level}: expected 1..=60"));
        }
        _ => {}
    }
    Ok(())
}

/// Put the running program's finish estimate into its listing.
fn add_eta(list: &mut [ProgramView], eta: Option<(u64, Option<super::eta::Estimate>)>) {
    let Some((id, Some(e))) = eta else { return };
    for p in list.iter_mut() {
        if p.record.id == id && p.record.state == ProgramState::Running {
            p.figures.eta = Some(super::EtaRange {
                low: e.low,
                high: e.high,
            });
        }
    }
}
