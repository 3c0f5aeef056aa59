//! A farm in virtual time: the real coordinator service (selection, leases, growth, negamax,
//! the sled result store) driven by W simulated workers whose searches are a pure function of
//! their request ([`fake_search`]) and whose durations come from times recorded from real
//! searches ([`times`]). It measures what a 2-core machine cannot run: how busy a farm of
//! 1 … 10,000 workers stays, how much work speculation wastes, and whether the book still
//! equals the serial build.
//!
//! Invariants:
//! * nothing here changes what the service does: the simulation only calls its public API
//!   (register, lease, submit, settle) with the service's clock moved by hand;
//! * a search's result and its duration at speed 1 depend on its request only, so the serial
//!   build and its CPU cost are well defined and every run can be compared with them.

pub mod guesses;
pub mod times;

use crate::error::{CoordinatorError, Result};
use crate::service::{
    Coordinator, ManualClock, Predictor, PrefetchReport, ServiceConfig, State, new_book,
};
use crate::store::Store;
use bookfarm_book::MemBook;
use bookfarm_book::driver::run_serial;
use bookfarm_book::model::Position;
use bookfarm_book::program::{Operation, Program};
use bookfarm_engine::board::BitIter;
use bookfarm_engine::level::level_params;
use bookfarm_engine::search::{LeafRequest, LeafResult, SearchSignature};
use bookfarm_engine::symmetry::canonical;
use bookfarm_engine::{Board, Move};
use bookfarm_proto::domain::{Ack, Identity, Job, JobResult};
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use times::TimeTable;

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

/// How the simulated coordinator guesses results when it plans speculative searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Guess {
    /// The true result ([`fake_search`]): an upper bound on what speculation can do.
    Perfect,
    /// The true result with its move replaced by another open move in `move_error_percent` %
    /// of the requests and its score moved by up to ± `score_noise` (a shallow search's
    /// typical disagreement with a deep one).
    Noisy {
        /// Share of guesses whose move is wrong, in percent.
        move_error_percent: u32,
        /// Largest score error.
        score_noise: i32,
    },
}

/// [`Guess`] as the service's [`Predictor`].
#[derive(Debug, Clone, Copy)]
pub struct SimPredictor(pub Guess);

impl Predictor for SimPredictor {
    fn predict(&mut self, req: &LeafRequest) -> LeafResult {
        let mut r = fake_search(req);
        let Guess::Noisy {
            move_error_percent,
            score_noise,
        } = self.0
        else {
            return r;
        };
        let h = mix(request_hash(req) ^ 0x5eed);
        if (h % 100) < u64::from(move_error_percent) {
            let open: Vec<bookfarm_engine::Square> =
                BitIter(req.board.moves() & !req.excluded).collect();
            if let (Move::Square(_), false) = (r.mv, open.is_empty()) {
                r.mv = Move::Square(open[((h >> 8) as usize) % open.len()]);
            }
        }
        let span = 2 * score_noise.max(0) + 1;
        r.score += ((h >> 32) % span as u64) as i32 - score_noise.max(0);
        r
    }
}

/// One simulation's settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Simulated workers.
    pub workers: usize,
    /// Search threads per worker.
    pub threads: u32,
    /// Worker speeds spread log-uniformly over [1/s, s] (1: all equal).
    pub speed_spread: f64,
    /// Seed of the worker speeds.
    pub seed: u64,
    /// Search durations at speed 1.
    pub times: TimeTable,
    /// Level and depth of the new book.
    pub level: u8,
    /// Book depth (positions down to 61 − depth empties).
    pub depth: u8,
    /// The growth programs, run after `new`.
    pub ops: Vec<Program>,
    /// Speculative searches per thread at a round's tail (0: off).
    pub speculation: u32,
    /// Backup leases after this many mean search times (0: off).
    pub backup_after: u32,
    /// How speculation guesses.
    pub guess: Guess,
    /// Worker crashes (none: every worker lives through the build).
    pub faults: Option<Faults>,
}

/// Worker crashes: a crashed worker's searches are lost, it stops heartbeating, and the
/// service gets its leases back only when the worker has been silent for the lease timeout;
/// it comes back later as a new registration.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// Share of searches, in percent, during which the worker crashes (at a uniformly random
    /// point of the search; a pure function of the seed and the lease's sequence number).
    pub crash_percent: f64,
    /// The service's lease timeout (live workers heartbeat every sixth of it, the service's
    /// default ratio).
    pub lease_timeout: Duration,
    /// How long a crashed worker stays away before it registers again.
    pub restart_after: Duration,
}

/// What a simulation measured.
#[derive(Debug, Clone)]
pub struct SimReport {
    /// Simulated workers and threads.
    pub workers: usize,
    /// Search threads in all.
    pub threads: usize,
    /// Positions of the finished book.
    pub positions: usize,
    /// Searches the serial build does, and their CPU seconds at speed 1.
    pub serial_searches: usize,
    /// CPU seconds of the serial build's searches at speed 1.
    pub serial_seconds: f64,
    /// Searches done by the farm (duplicates of backup leases included).
    pub searches: usize,
    /// CPU seconds spent on searches the serial build does not need, or did twice.
    pub wasted_seconds: f64,
    /// CPU seconds spent in all.
    pub spent_seconds: f64,
    /// Virtual wall time of the build.
    pub wall_seconds: f64,
    /// Search capacity over the build: Σ speed × threads × wall.
    pub capacity_seconds: f64,
    /// `serial_seconds` ÷ `capacity_seconds`.
    pub efficiency: f64,
    /// The coordinator's CPU time (this process, simulation bookkeeping included) per
    /// accepted result.
    pub coordinator_cpu_per_result: Duration,
    /// Real time the simulation took.
    pub real_seconds: f64,
    /// Whether the book equals the serial build's.
    pub same_as_serial: bool,
    /// Prefetch figures of the service.
    pub prefetch: PrefetchReport,
    /// Speculative and backup leases granted.
    pub speculative_leases: u64,
    /// Backup leases granted.
    pub backup_leases: u64,
    /// Worker crashes.
    pub crashes: u64,
    /// Leases the service took back from silent (crashed) workers.
    pub expired: u64,
}

impl SimReport {
    /// One table row (see [`SimReport::HEADER`]).
    pub fn row(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{:.3}\t{:.3}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{}",
            self.workers,
            self.threads,
            self.positions,
            self.serial_searches,
            self.serial_seconds,
            self.wall_seconds,
            self.efficiency,
            self.wasted_seconds / self.spent_seconds.max(f64::MIN_POSITIVE),
            self.speculative_leases,
            self.prefetch.used,
            self.backup_leases,
            self.crashes,
            self.expired,
            self.coordinator_cpu_per_result.as_secs_f64() * 1e6,
            if self.same_as_serial { "yes" } else { "NO" },
        )
    }

    /// The header of [`SimReport::row`].
    pub const HEADER: &'static str = "workers\tthreads\tpositions\tserial_searches\tserial_cpu_s\twall_s\tefficiency\twasted_share\tspeculative_leases\tprefetch_used\tbackup_leases\tcrashes\texpired\tcoord_cpu_us_per_result\tsame_book";
}

/// How often (real time) long builds log their progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// The serial build: the book crate's driver answering every request with [`fake_search`];
/// returns the book and the requests it searched.
pub fn serial_build(level: u8, depth: u8, ops: &[Program]) -> (MemBook, HashSet<LeafRequest>) {
    let (h, entries) = new_book(level, depth);
    let mut book = MemBook::new(h);
    for e in entries {
        book.put_position(&e.pos);
    }
    let mut asked = HashSet::new();
    let started = Instant::now();
    let mut next_report = PROGRESS_EVERY;
    let mut search = |r: &LeafRequest| {
        asked.insert(*r);
        if started.elapsed() >= next_report {
            next_report += PROGRESS_EVERY;
            tracing::info!(searches = asked.len(), "serial build under way");
        }
        fake_search(r)
    };
    run_serial(&mut book, Operation::New, &mut search);
    for op in ops {
        run_serial(&mut book, op.clone(), &mut search);
    }
    (book, asked)
}

/// The identity simulated workers register with (the signature of the default options).
fn identity() -> Identity {
    let sig = SearchSignature::new(
        &bookfarm_engine::search::SearchOptions::default(),
        "simulated",
    );
    Identity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "simulated".into(),
        search_signature: sig.to_string(),
    }
}

/// What happens at a scheduled moment of virtual time.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A search ends on `worker` (in its life `life`: a search of an earlier life was lost
    /// in a crash).
    Done {
        worker: usize,
        job: usize,
        life: u32,
    },
    /// `worker` crashes during a search.
    Crash { worker: usize, life: u32 },
    /// A crashed `worker` registers again.
    Restart { worker: usize },
}

/// An event and when it happens (ties in scheduling order).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Scheduled {
    at: Duration,
    seq: u64,
    event: Event,
}

/// A leased search: its job, when it started and its CPU seconds at the worker's speed.
struct Leased {
    job: Job,
    started: Duration,
    secs: f64,
}

/// Run one simulated build in store directory `dir` (which must be empty).
pub fn simulate(cfg: &SimConfig, dir: &Path) -> Result<SimReport> {
    if cfg.workers == 0 || cfg.threads == 0 {
        return Err(CoordinatorError::InvalidArgument(
            "a simulation needs at least one worker and one thread".into(),
        ));
    }
    let real = Instant::now();
    let cpu0 = cpu_time::ProcessTime::now();
    let (serial, asked) = serial_build(cfg.level, cfg.depth, &cfg.ops);
    let serial_seconds: f64 = asked.iter().map(|r| cfg.times.seconds(r)).sum();

    let store = Store::open(dir)?;
    let (h, entries) = new_book(cfg.level, cfg.depth);
    store.create(&h, &entries)?;
    let clock = Arc::new(ManualClock::default());
    let service = ServiceConfig {
        speculation: cfg.speculation,
        backup_after: cfg.backup_after,
        // Virtual time does not count the coordinator's CPU (reported apart): no throttle.
        speculation_share: 1.0,
        max_worker_threads: cfg.threads.max(1),
        // Virtual time runs as long as the build needs: no lease may expire.
        max_lease_base: Duration::from_secs(u64::MAX / 4),
        max_lease_cap: Duration::from_secs(u64::MAX / 4),
        // Only a crashed worker falls silent: the timeout is the faults' (none without).
        lease_timeout: cfg
            .faults
            .map_or(Duration::from_secs(u64::MAX / 4), |f| f.lease_timeout),
        // Live workers heartbeat at the service's default ratio (10 s for 60 s).
        heartbeat_interval: cfg
            .faults
            .map_or(ServiceConfig::default().heartbeat_interval, |f| {
                (f.lease_timeout / 6).max(Duration::from_millis(1))
            }),
        signature: Some(identity().search_signature),
        inline_growth: true,
        ..ServiceConfig::default()
    };
    let c = Coordinator::open(store, dir, service, clock.clone())?;
    c.set_predictor(Box::new(SimPredictor(cfg.guess)));
    for op in &cfg.ops {
        c.start(op.clone())?;
    }
    let id = identity();
    let ln_spread = cfg.speed_spread.max(1.0).ln();
    let mut speeds = Vec::with_capacity(cfg.workers);
    let mut ids = Vec::with_capacity(cfg.workers);
    for w in 0..cfg.workers {
        ids.push(c.register(&id, &format!("sim-{w}"), cfg.threads)?);
        let u = (mix(cfg.seed ^ mix(w as u64)) >> 11) as f64 / (1u64 << 53) as f64;
        speeds.push((ln_spread * (2.0 * u - 1.0)).exp());
    }
    let mut idle: VecDeque<usize> = (0..cfg.threads)
        .flat_map(|_| 0..cfg.workers)
        .collect::<Vec<_>>()
        .into();
    let mut events: BinaryHeap<Reverse<Scheduled>> = BinaryHeap::new();
    let mut leased: Vec<Option<Leased>> = Vec::new();
    let mut free_slots: Vec<usize> = Vec::new();
    // Per worker: its life (bumped by a crash), whether it is up, its leased slots.
    let mut lives = vec![0u32; cfg.workers];
    let mut up = vec![true; cfg.workers];
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); cfg.workers];
    let (mut seq, mut searches, mut spent, mut wasted) = (0u64, 0usize, 0f64, 0f64);
    let (mut crashes, mut expired) = (0u64, 0u64);
    let heartbeat = cfg
        .faults
        .map(|f| (f.lease_timeout / 6).max(Duration::from_millis(1)));
    let mut next_heartbeat = heartbeat;
    let mut accepted_keys: HashSet<LeafRequest> = HashSet::new();
    let mut next_report = real.elapsed() + PROGRESS_EVERY;
    loop {
        let now = clock_now(&clock);
        if real.elapsed() >= next_report {
            next_report += PROGRESS_EVERY;
            tracing::info!(
                workers = cfg.workers,
                searches,
                serial_searches = asked.len(),
                virtual_seconds = now.as_secs_f64(),
                crashes,
                "simulation under way"
            );
        }
        // Hand work to idle threads until the service has none.
        let mut tries = idle.len();
        while tries > 0 {
            tries -= 1;
            let Some(w) = idle.pop_front() else { break };
            let got = c.lease(&id, &ids[w], 1)?;
            let Some(job) = got.into_iter().next() else {
                idle.push_front(w);
                break;
            };
            let req = job_request(&job);
            let secs = cfg.times.seconds(&req) / speeds[w];
            seq += 1;
            let slot = match free_slots.pop() {
                Some(s) => s,
                None => {
                    leased.push(None);
                    leased.len() - 1
                }
            };
            leased[slot] = Some(Leased {
                job,
                started: now,
                secs,
            });
            held[w].push(slot);
            let draw =
                |salt: u64| (mix(cfg.seed ^ mix(seq ^ salt)) >> 11) as f64 / (1u64 << 53) as f64;
            let crash = cfg
                .faults
                .is_some_and(|f| draw(0xc4a5) * 100.0 < f.crash_percent);
            let (at, event) = if crash {
                (
                    now + Duration::from_secs_f64(secs * draw(0x7e11)),
                    Event::Crash {
                        worker: w,
                        life: lives[w],
                    },
                )
            } else {
                (
                    now + Duration::from_secs_f64(secs),
                    Event::Done {
                        worker: w,
                        job: slot,
                        life: lives[w],
                    },
                )
            };
            events.push(Reverse(Scheduled { at, seq, event }));
        }
        let next_event = events.peek().map(|Reverse(e)| e.at);
        // Live workers heartbeat and the service takes back silent workers' leases, as the
        // server's periodic expiry does (only with faults: otherwise no lease may expire).
        if let (Some(period), Some(t)) = (heartbeat, next_heartbeat)
            && next_event.is_none_or(|e| t <= e)
        {
            c.settle()?;
            let s = c.status();
            let done = s.queued == 0 && matches!(s.state, State::Done | State::Idle);
            // A finished build waits for no expiry (the searches still under way end it), and
            // one with nothing scheduled, queued or in flight is stalled (below).
            if !done && (next_event.is_some() || s.queued > 0 || s.in_flight > 0) {
                clock.advance_to(t);
                for w in (0..cfg.workers).filter(|&w| up[w]) {
                    let jobs: Vec<uuid::Uuid> = held[w]
                        .iter()
                        .filter_map(|&s| leased[s].as_ref().map(|l| l.job.id))
                        .collect();
                    c.heartbeat(&id, &ids[w], &jobs)?;
                }
                expired += c.expire_leases() as u64;
                c.settle()?;
                next_heartbeat = Some(t + period);
                continue;
            }
        }
        let Some(Reverse(next)) = events.pop() else {
            c.settle()?;
            let s = c.status();
            if s.queued > 0 {
                continue;
            }
            if matches!(s.state, State::Done | State::Idle) {
                break;
            }
            return Err(CoordinatorError::Internal(format!(
                "simulation stalled: state {}, {} queued, {} in flight",
                s.state.as_str(),
                s.queued,
                s.in_flight
            )));
        };
        if matches!(next.event, Event::Restart { .. }) {
            // A worker coming back after the build ended does not make it longer.
            c.settle()?;
            let s = c.status();
            if s.queued == 0 && matches!(s.state, State::Done | State::Idle) {
                continue;
            }
        }
        clock.advance_to(next.at);
        let now = next.at;
        match next.event {
            Event::Done { worker, job, life } => {
                if life != lives[worker] {
                    continue;
                }
                let Some(l) = leased[job].take() else {
                    continue;
                };
                free_slots.push(job);
                held[worker].retain(|&s| s != job);
                let req = job_request(&l.job);
                searches += 1;
                spent += l.secs * speeds[worker];
                let result = JobResult {
                    job_id: l.job.id,
                    leaf: fake_search(&req),
                };
                let acks = c.submit(&id, &ids[worker], &[result])?;
                let fresh = acks.first() == Some(&Ack::Accepted) && accepted_keys.insert(req);
                if !fresh || !asked.contains(&req) {
                    wasted += l.secs * speeds[worker];
                }
                c.settle()?;
                idle.push_back(worker);
            }
            Event::Crash { worker, life } => {
                if life != lives[worker] {
                    continue;
                }
                // Every search the worker had under way is lost, partly done.
                crashes += 1;
                lives[worker] += 1;
                up[worker] = false;
                for slot in std::mem::take(&mut held[worker]) {
                    if let Some(l) = leased[slot].take() {
                        let done = now.saturating_sub(l.started).as_secs_f64().min(l.secs);
                        spent += done * speeds[worker];
                        wasted += done * speeds[worker];
                        free_slots.push(slot);
                    }
                }
                idle.retain(|&w| w != worker);
                let back = cfg.faults.map_or(Duration::ZERO, |f| f.restart_after);
                seq += 1;
                events.push(Reverse(Scheduled {
                    at: now + back,
                    seq,
                    event: Event::Restart { worker },
                }));
            }
            Event::Restart { worker } => {
                ids[worker] = c.register(&id, &format!("sim-{worker}"), cfg.threads)?;
                up[worker] = true;
                idle.extend(std::iter::repeat_n(worker, cfg.threads as usize));
            }
        }
    }
    c.flush()?;
    let wall = clock_now(&clock).as_secs_f64();
    let capacity: f64 = speeds.iter().sum::<f64>() * f64::from(cfg.threads) * wall;
    let (_, positions) = c.snapshot();
    let same = same_positions(positions.clone(), &serial);
    let status = c.status();
    let counters = c.counters();
    let cpu = cpu0.elapsed();
    Ok(SimReport {
        workers: cfg.workers,
        threads: cfg.workers * cfg.threads as usize,
        positions: positions.len(),
        serial_searches: asked.len(),
        serial_seconds,
        searches,
        wasted_seconds: wasted,
        spent_seconds: spent,
        wall_seconds: wall,
        capacity_seconds: capacity,
        efficiency: if capacity > 0.0 {
            serial_seconds / capacity
        } else {
            0.0
        },
        coordinator_cpu_per_result: cpu / u32::try_from(searches.max(1)).unwrap_or(u32::MAX),
        real_seconds: real.elapsed().as_secs_f64(),
        same_as_serial: same,
        prefetch: status.prefetch,
        speculative_leases: counters.speculative_leased,
        backup_leases: counters.backup_leased,
        crashes,
        expired,
    })
}

fn clock_now(clock: &ManualClock) -> Duration {
    crate::service::Clock::now(clock)
}

fn job_request(job: &Job) -> LeafRequest {
    LeafRequest {
        board: job.board,
        level: job.level,
        excluded: job.excluded,
    }
}

/// Whether `positions` are exactly the book's positions (any order).
pub fn same_positions(mut positions: Vec<Position>, book: &MemBook) -> bool {
    let mut theirs: Vec<Position> = book.positions().collect();
    positions.sort_by_key(|p| p.board);
    theirs.sort_by_key(|p| p.board);
    positions == theirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(workers: usize, prefetch: bool) -> SimConfig {
        SimConfig {
            workers,
            threads: 1,
            speed_spread: 3.0,
            seed: 7,
            times: TimeTable::recorded(16).expect("recorded level-16 times"),
            level: 4,
            depth: 10,
            ops: vec![Program::new(Operation::Deviate {
                params: bookfarm_book::select::Deviate::new(2, 4),
            })],
            speculation: if prefetch { 2 } else { 0 },
            backup_after: if prefetch { 2 } else { 0 },
            guess: Guess::Noisy {
                move_error_percent: 40,
                score_noise: 4,
            },
            faults: None,
        }
    }

    /// Prefetch and backup leases change which searches are done when, never the book: with
    /// workers of random speeds (results landing in any order), the book equals the serial
    /// build, and prefetched results serve the rounds.
    #[test]
    fn prefetching_farms_of_random_speeds_build_the_serial_book() {
        for workers in [1, 3, 8] {
            let round =
                simulate(&config(workers, false), tempfile::tempdir().unwrap().path()).unwrap();
            let pre =
                simulate(&config(workers, true), tempfile::tempdir().unwrap().path()).unwrap();
            for r in [&round, &pre] {
                assert!(r.same_as_serial, "{workers} workers: {}", r.row());
                assert!(r.positions > 100, "{}", r.row());
                assert_eq!(r.serial_searches, round.serial_searches);
            }
            assert_eq!(round.speculative_leases + round.backup_leases, 0);
            assert_eq!(round.wasted_seconds, 0.0, "{}", round.row());
            if workers > 1 {
                assert!(pre.speculative_leases > 0, "{}", pre.row());
                assert!(pre.prefetch.used > 0, "{}", pre.row());
                assert!(
                    pre.efficiency > round.efficiency,
                    "prefetch {} vs round {}",
                    pre.row(),
                    round.row()
                );
            }
        }
    }

    /// Workers that crash mid-search (their searches lost, their leases held until the service
    /// finds them silent, back later as new registrations) slow the farm down and never change
    /// the book.
    #[test]
    fn crashing_workers_lose_time_but_not_the_book() {
        let calm = simulate(&config(6, true), tempfile::tempdir().unwrap().path()).unwrap();
        let cfg = SimConfig {
            faults: Some(Faults {
                crash_percent: 5.0,
                lease_timeout: Duration::from_secs(30),
                restart_after: Duration::from_secs(60),
            }),
            ..config(6, true)
        };
        let r = simulate(&cfg, tempfile::tempdir().unwrap().path()).unwrap();
        assert!(r.same_as_serial, "{}", r.row());
        assert_eq!(r.serial_searches, calm.serial_searches);
        assert!(r.crashes > 0 && r.expired > 0, "{}", r.row());
        assert_eq!((calm.crashes, calm.expired), (0, 0), "{}", calm.row());
        assert!(
            r.efficiency < calm.efficiency,
            "{} vs {}",
            r.row(),
            calm.row()
        );
    }

    /// [`fake_search`] as a worker's searcher.
    struct FakeSearcher;

    impl bookfarm_runner::exec::LeafSearcher for FakeSearcher {
        fn search(
            &mut self,
            req: &LeafRequest,
            _abort: &std::sync::atomic::AtomicBool,
        ) -> LeafResult {
            fake_search(req)
        }
    }

    /// The simulator's reference (the serial build) is the book a real `local` build grows
    /// with the same search: the in-process worker loop, 2 threads, prefetch on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_serial_build_is_what_a_real_local_build_grows_with_the_same_search() {
        let dir = tempfile::tempdir().unwrap();
        let (h, entries) = new_book(4, 12);
        Store::open(dir.path())
            .unwrap()
            .create(&h, &entries)
            .unwrap();
        let sig = identity().search_signature;
        let cfg = ServiceConfig {
            signature: Some(sig.clone()),
            ..ServiceConfig::default()
        };
        let c = crate::server::open(dir.path(), cfg).unwrap();
        c.set_predictor(Box::new(SimPredictor(Guess::Noisy {
            move_error_percent: 40,
            score_noise: 4,
        })));
        let ops = vec![Program::new(Operation::Deviate {
            params: bookfarm_book::select::Deviate::new(2, 4),
        })];
        for op in &ops {
            c.start(op.clone()).unwrap();
        }
        let opts = crate::local::LocalOptions {
            workers: 2,
            eval_hash: "simulated".into(),
            search_signature: sig,
            http: None,
            lookahead: 2,
        };
        let factory: bookfarm_runner::exec::SearcherFactory =
            Arc::new(|| -> Box<dyn bookfarm_runner::exec::LeafSearcher> { Box::new(FakeSearcher) });
        let out = crate::local::run(c.clone(), &opts, factory, std::future::pending(), |_| {})
            .await
            .unwrap();
        assert!(!out.interrupted);
        let (serial, asked) = serial_build(4, 12, &ops);
        assert!(serial.len() > 100);
        assert!(same_positions(c.snapshot().1, &serial));
        // Every search the serial build needs was done, plus what prefetch wasted.
        assert!(c.stored_results() >= asked.len());
    }

    #[test]
    fn fake_search_is_pure_and_reports_the_level_tables_depth() {
        let req = LeafRequest {
            board: Board::start(),
            level: 8,
            excluded: 0,
        };
        assert_eq!(fake_search(&req), fake_search(&req));
        let r = fake_search(&req);
        assert!(matches!(r.mv, Move::Square(_)));
        assert_eq!((r.depth, r.selectivity), level_params(8, 60));
        let all = LeafRequest {
            excluded: Board::start().moves(),
            ..req
        };
        assert_eq!(fake_search(&all).mv, Move::None);
        // A finished game is scored, not played.
        let over = LeafRequest {
            board: Board {
                player: !0 >> 4,
                opponent: 0,
            },
            level: 8,
            excluded: 0,
        };
        let end = fake_search(&over);
        assert_eq!((end.mv, end.score), (Move::None, over.board.final_score()));
        assert_eq!((end.depth, end.selectivity), (4, 5));
        let mut p = SimPredictor(Guess::Perfect);
        assert_eq!(p.predict(&req), r);
    }
}
