//! Trust in virtual time: a farm of trusted workers, honest volunteers and liars over the real
//! trust code (standings, spot and core checks, blocks, take-backs), and what the lies did to
//! the book (`sim trust`).
//!
//! A simulated worker is a machine running [`SimConfig::threads`] search threads, as one
//! `bookfarm-worker run --threads T` is: one registration, one credential, and up to T leases
//! at once (the simulator's one lease model, see [`super`]). Every volunteer machine registers
//! under its own untrusted credential and owner; the trusted machines under credentials the
//! operator trusts (one owner). A liar answers a request with its true
//! result moved by ten discs (a well-formed answer that passes every input check), on the
//! requests its kind picks; the pick is a keyed hash of the request, so a run is a function of
//! its configuration.
//!
//! Invariants of the measurement:
//! * a lie is identified by its book key ([`CoreKey`]): a finished book's leaf is a lie when its
//!   key is one a liar submitted and no honest answer to any request gives it;
//! * the decisive core of the finished book is computed from the book alone
//!   ([`decisive_core`]), as the service computes it.

use super::{
    AnswerCtx, BlockedWorker, Credential, SimConfig, SimReport, WorkerModel, WorkerModels, mix,
    request_hash, serial_build_with, simulate_inspect,
};
use crate::error::Result;
use bookfarm_book::decisive::{CoreKey, decisive_core};
use bookfarm_book::model::BAD_LINK;
use bookfarm_engine::Board;
use bookfarm_engine::search::{LeafRequest, LeafResult};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Which requests a liar lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiarKind {
    /// Every request.
    Always,
    /// A share of its requests, in per mille (100: one in ten; 2: one in 500).
    Rate {
        /// Lies per thousand answers.
        per_mille: u32,
    },
    /// Honest for its first `honest_for` answers (enough to earn trust), then always.
    Sleeper {
        /// Honest answers before it turns.
        honest_for: u64,
    },
    /// Only on the results the honest book's decisive core uses: the results that decide the
    /// root's value (an oracle: the strongest liar a worker could be).
    Core,
}

impl LiarKind {
    /// The kinds of the trust table: always, 10 %, a sleeper turning after 20 answers (well
    /// after it earned trust), core only, one in 500.
    pub const TABLE: [LiarKind; 5] = [
        LiarKind::Always,
        LiarKind::Rate { per_mille: 100 },
        LiarKind::Sleeper { honest_for: 20 },
        LiarKind::Core,
        LiarKind::Rate { per_mille: 2 },
    ];

    /// Its name in tables and on the command line.
    pub fn name(&self) -> String {
        match self {
            LiarKind::Always => "always".into(),
            LiarKind::Rate { per_mille: 100 } => "10%".into(),
            LiarKind::Rate { per_mille: 2 } => "1/500".into(),
            LiarKind::Rate { per_mille } => format!("{per_mille}/1000"),
            LiarKind::Sleeper { honest_for } => format!("sleeper@{honest_for}"),
            LiarKind::Core => "core".into(),
        }
    }

    /// Parse a name of [`LiarKind::name`] (`sleeper` alone: after 20 answers).
    pub fn parse(s: &str) -> Option<LiarKind> {
        match s.trim() {
            "always" => Some(LiarKind::Always),
            "10%" => Some(LiarKind::Rate { per_mille: 100 }),
            "1/500" | "rare" => Some(LiarKind::Rate { per_mille: 2 }),
            "sleeper" => Some(LiarKind::Sleeper { honest_for: 20 }),
            "core" => Some(LiarKind::Core),
            t => {
                if let Some(n) = t.strip_prefix("sleeper@") {
                    return n
                        .parse()
                        .ok()
                        .map(|honest_for| LiarKind::Sleeper { honest_for });
                }
                let n: u32 = t.strip_suffix("/1000")?.parse().ok()?;
                (n <= 1000).then_some(LiarKind::Rate { per_mille: n })
            }
        }
    }
}

/// The lie a liar tells: the true result with its score moved by ten discs (toward the middle
/// of the range when ten more would leave it), parity kept, so it passes every input check.
pub fn lie(truth: LeafResult) -> LeafResult {
    let mut r = truth;
    r.score = if r.score + 10 <= 64 {
        r.score + 10
    } else {
        r.score - 10
    };
    r
}

/// What the simulated workers answered, for finding lies in a finished book.
#[derive(Debug, Default)]
struct Answers {
    /// Book keys of every true result answered.
    honest: HashSet<CoreKey>,
    /// Book keys of the lies told.
    lies: HashSet<CoreKey>,
    /// Lies told (answers, not distinct keys).
    told: u64,
}

/// A volunteer or trusted worker of the trust farm; a liar when `kind` is set.
struct Member {
    credential: Credential,
    kind: Option<LiarKind>,
    salt: u64,
    answered: u64,
    /// The keys of the honest book's decisive core (what a [`LiarKind::Core`] liar lies on).
    core: Arc<HashSet<CoreKey>>,
    answers: Arc<Mutex<Answers>>,
}

impl Member {
    fn lies_on(&self, req: &LeafRequest, truth: &LeafResult) -> bool {
        let coin = || mix(request_hash(req) ^ self.salt) % 1000;
        match self.kind {
            None => false,
            Some(LiarKind::Always) => true,
            Some(LiarKind::Rate { per_mille }) => coin() < u64::from(per_mille),
            Some(LiarKind::Sleeper { honest_for }) => self.answered > honest_for,
            Some(LiarKind::Core) => self.core.contains(&CoreKey::of_result(req, truth)),
        }
    }
}

impl WorkerModel for Member {
    fn answer(&mut self, req: &LeafRequest, truth: LeafResult, _ctx: &AnswerCtx) -> LeafResult {
        self.answered += 1;
        let lying = self.lies_on(req, &truth);
        let answer = if lying { lie(truth) } else { truth };
        if let Ok(mut a) = self.answers.lock() {
            a.honest.insert(CoreKey::of_result(req, &truth));
            if lying {
                a.lies.insert(CoreKey::of_result(req, &answer));
                a.told += 1;
            }
        }
        answer
    }

    fn credential(&self) -> Option<&Credential> {
        Some(&self.credential)
    }
}

/// The machines that run `threads` search threads in all, `per_machine` each: the quotient
/// rounded up (the last machine's spare threads are searched with; the report counts them).
pub fn machines(threads: usize, per_machine: usize) -> usize {
    threads.div_ceil(per_machine.max(1)).max(1)
}

/// Who the workers (machines) of a trust farm are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    /// Trusted machines (the first ones).
    pub trusted: usize,
    /// Liars (the last machines; none without a kind).
    pub liars: usize,
    /// What the liars lie on (`None`: every volunteer honest).
    pub kind: Option<LiarKind>,
}

impl Mix {
    /// `trusted_percent` % trusted machines (at least one) and `liar_percent` % liars (at least
    /// one when `kind` is set) among `workers` machines.
    pub fn of(
        workers: usize,
        trusted_percent: f64,
        liar_percent: f64,
        kind: Option<LiarKind>,
    ) -> Mix {
        let share = |p: f64| ((workers as f64 * p / 100.0).round() as usize).max(1);
        let trusted = share(trusted_percent).min(workers);
        let liars = if kind.is_some() {
            share(liar_percent).min(workers - trusted)
        } else {
            0
        };
        Mix {
            trusted,
            liars,
            kind,
        }
    }
}

/// One row of the trust table.
#[derive(Debug, Clone)]
pub struct TrustRow {
    /// Who the workers were.
    pub mix: Mix,
    /// The simulation's report (efficiency, validation counters, blocks, root and best line).
    pub report: SimReport,
    /// Lies told (answers).
    pub lies_told: u64,
    /// Leaves of the finished book that are lies.
    pub lies_in_book: usize,
    /// Leaves of the finished book's decisive core that are lies.
    pub lies_in_core: usize,
    /// Leaves in the finished book's decisive core, and leaves in the book.
    pub core_leaves: usize,
    /// Leaves in the finished book.
    pub book_leaves: usize,
}

impl TrustRow {
    /// The header of [`TrustRow::row`]. `workers` counts machines (each one credential),
    /// `threads` their search threads in all. `overhead` is the search CPU the serial build does not
    /// use over all search CPU; `over_*` split it by cause ([`super::WasteByCause`]: earning
    /// replicas, spot checks, core checks, settlements, the rest) and sum to it; `lies_applied`:
    /// lies the service applied on a liar's word (caught later or not); `rollbacks` requested,
    /// handled by `replays` from the base book or `retractions` (asynchronous); `finished`: the
    /// serial selection of the program finds nothing on the finished book.
    pub const HEADER: &'static str = "workers\tthreads\ttrusted\tliar\tliars\tefficiency\toverhead\tover_earning\tover_spot\tover_core\tover_settle\tover_other\treplica_share\tlies_told\tlies_applied\tliars_blocked\tresults_to_block_median\tresults_to_block_max\tinvalid\treached_book\tlies_in_book\tlies_in_core\trollbacks\treplays\tretractions\treplay_cpu_s\tcoord_cpu_us_per_result\troot\thonest_root\tsame_best_line\tsame_book\tfinished\tcore_share";

    /// One tab-separated row.
    pub fn row(&self) -> String {
        let r = &self.report;
        let liars: Vec<&BlockedWorker> = r
            .blocked
            .iter()
            .filter(|b| b.worker >= r.workers - self.mix.liars)
            .collect();
        let mut counts: Vec<u64> = liars.iter().map(|b| b.results).collect();
        counts.sort_unstable();
        let median = counts
            .get(counts.len() / 2)
            .map_or_else(|| "-".into(), u64::to_string);
        let max = counts.last().map_or_else(|| "-".into(), u64::to_string);
        let opt = |v: Option<i32>| v.map_or_else(|| "-".into(), |v| v.to_string());
        let yes = |b: bool| if b { "yes" } else { "NO" };
        let share = |secs: f64| secs / r.spent_seconds.max(f64::MIN_POSITIVE);
        format!(
            "{}\t{}\t{}\t{}\t{}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{}\t{}\t{}/{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.2}\t{:.1}\t{}\t{}\t{}\t{}\t{}\t{:.3}",
            r.workers,
            r.threads,
            self.mix.trusted,
            self.mix.kind.map_or_else(|| "honest".into(), |k| k.name()),
            self.mix.liars,
            r.efficiency,
            share(r.wasted_seconds),
            share(r.waste.earning),
            share(r.waste.spot),
            share(r.waste.core),
            share(r.waste.settle),
            share(r.waste.other),
            r.replica_share,
            self.lies_told,
            r.breakdown.lies_applied,
            liars.len(),
            self.mix.liars,
            median,
            max,
            r.validation.invalid,
            r.validation.reached_book,
            self.lies_in_book,
            self.lies_in_core,
            r.validation.rollbacks,
            r.validation.replays,
            r.validation.retractions,
            r.validation.replay_cpu_us as f64 / 1e6,
            r.coordinator_cpu_per_result.as_secs_f64() * 1e6,
            opt(r.root_value),
            opt(r.serial_root_value),
            yes(r.same_best_line),
            yes(r.same_as_serial),
            yes(r.finished),
            self.core_leaves as f64 / self.book_leaves.max(1) as f64,
        )
    }
}

impl TrustRow {
    /// Where the replicas went (`sim trust --breakdown`), as `#` comment lines: first answers
    /// per volunteer (a machine: one credential), checks by kind (count, share of all search
    /// CPU, per volunteer, and how many searched a result that is a leaf of the finished book
    /// and of its decisive core), the spot checks drawn at each streak against the first answers
    /// whose coin was tossed, and the threads that waited because their credential was still
    /// earning trust.
    pub fn breakdown(&self) -> Vec<String> {
        let r = &self.report;
        let b = &r.breakdown;
        let volunteers: Vec<usize> = (self.mix.trusted..r.workers).collect();
        let mut answers: Vec<u64> = volunteers.iter().map(|&w| b.answers[w]).collect();
        answers.sort_unstable();
        let n = answers.len().max(1) as f64;
        let trusted: u64 = b.answers[..self.mix.trusted.min(b.answers.len())]
            .iter()
            .sum();
        let mut out = vec![format!(
            "# first answers: volunteers {} (mean {:.1}, min {}, median {}, max {}), trusted {} ({:.1} each)",
            answers.iter().sum::<u64>(),
            answers.iter().sum::<u64>() as f64 / n,
            answers.first().copied().unwrap_or(0),
            answers.get(answers.len() / 2).copied().unwrap_or(0),
            answers.last().copied().unwrap_or(0),
            trusted,
            trusted as f64 / self.mix.trusted.max(1) as f64,
        )];
        for (i, name) in super::TrustBreakdown::KINDS.iter().enumerate() {
            let c = &b.runs[i];
            let of_volunteers: u64 = volunteers.iter().map(|&w| b.checked[w][i]).sum();
            out.push(format!(
                "# {name} checks: {} ({:.1} % of search CPU), {:.2} per volunteer, {} of a leaf of the finished book, {} of its decisive core",
                c.count,
                100.0 * c.seconds / r.spent_seconds.max(f64::MIN_POSITIVE),
                of_volunteers as f64 / n,
                c.in_book,
                c.in_core,
            ));
        }
        let mut line = String::from("# spot checks drawn / coins tossed by streak:");
        for (s, tossed) in &b.tossed_by_streak {
            let drawn = b.spot_by_streak.get(s).copied().unwrap_or(0);
            line.push_str(&format!(" {s}:{drawn}/{tossed}"));
        }
        out.push(line);
        let capacity = |secs: f64| 100.0 * secs / r.capacity_seconds.max(f64::MIN_POSITIVE);
        out.push(format!(
            "# threads waiting while earning: {:.0} thread-s ({:.2} % of capacity), {:.0} thread-s ({:.2} %) of it with round work queued",
            r.earning_idle_seconds,
            capacity(r.earning_idle_seconds),
            r.earning_idle_queued_seconds,
            capacity(r.earning_idle_queued_seconds),
        ));
        out
    }
}

/// The worker models of a trust farm of `workers` machines: the first `who.trusted` under
/// credentials the operator trusts (owner "operator"), every other one under its own
/// credential and owner, the last `who.liars` lying as `who.kind` says; `core` is what a core
/// liar lies on, `answers` collects every answer's book key.
fn members(
    workers: usize,
    who: Mix,
    core: Arc<HashSet<CoreKey>>,
    answers: Arc<Mutex<Answers>>,
) -> WorkerModels {
    WorkerModels(Arc::new(move |w| {
        let trusted = w < who.trusted;
        let liar = w >= workers.saturating_sub(who.liars);
        Box::new(Member {
            credential: if trusted {
                Credential {
                    name: format!("trusted-{w}"),
                    owner: "operator".into(),
                    trusted: true,
                }
            } else {
                Credential {
                    name: format!("volunteer-{w}"),
                    owner: format!("owner-{w}"),
                    trusted: false,
                }
            },
            kind: if liar { who.kind } else { None },
            salt: mix(0x1a7e ^ w as u64),
            answered: 0,
            core: core.clone(),
            answers: answers.clone(),
        }) as Box<dyn WorkerModel>
    }))
}

/// Simulate `cfg` (its worker models replaced) with the workers of `mix`, in store directory
/// `dir`, and count the lies in the finished book and in its decisive core.
pub fn simulate_trust(cfg: &SimConfig, who: Mix, dir: &Path) -> Result<TrustRow> {
    let core = if who.kind == Some(LiarKind::Core) {
        let (honest, _) = serial_build_with(cfg.truth, cfg.level, cfg.depth, &cfg.ops);
        decisive_core(&honest, &Board::start())
            .leaves
            .iter()
            .map(|l| l.key())
            .collect()
    } else {
        HashSet::new()
    };
    let core = Arc::new(core);
    let answers = Arc::new(Mutex::new(Answers::default()));
    let cfg = SimConfig {
        models: members(cfg.workers, who, core, answers.clone()),
        ..cfg.clone()
    };
    let (report, (book_leaves, lies_in_book, core_leaves, lies_in_core)) =
        simulate_inspect(&cfg, dir, |book, _serial| {
            let a = answers.lock().map(|a| (a.honest.clone(), a.lies.clone()));
            let (honest, lies) = a.unwrap_or_default();
            let is_lie = |k: &CoreKey| lies.contains(k) && !honest.contains(k);
            let leaves: Vec<CoreKey> = book
                .positions()
                .filter(|p| p.leaf != BAD_LINK)
                .map(|p| CoreKey::of_leaf(&p.board, p.level, p.leaf))
                .collect();
            let core = decisive_core(book, &Board::start());
            let core_keys: Vec<CoreKey> = core.leaves.iter().map(|l| l.key()).collect();
            (
                leaves.len(),
                leaves.iter().filter(|k| is_lie(k)).count(),
                core_keys.len(),
                core_keys.iter().filter(|k| is_lie(k)).count(),
            )
        })?;
    let lies_told = answers.lock().map_or(0, |a| a.told);
    Ok(TrustRow {
        mix: who,
        report,
        lies_told,
        lies_in_book,
        lies_in_core,
        core_leaves,
        book_leaves,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Charge, CoordinatorModel, TimeTable, Truth};
    use super::*;
    use crate::service::TrustCounters;
    use bookfarm_book::program::{Operation, Program};
    use std::time::Duration;

    /// A small deviate build over hash results with fixed coordinator costs.
    fn small_config(workers: usize) -> SimConfig {
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
            speculation: 0,
            backup_after: 0,
            guess: super::super::Guess::Perfect,
            faults: None,
            coordinator: CoordinatorModel {
                rpc_cores: 2,
                charge: Charge::Fixed {
                    per_call: Duration::from_micros(50),
                    per_run: Duration::from_micros(200),
                    per_result: Duration::from_micros(100),
                },
            },
            models: WorkerModels::honest(),
            async_options: Default::default(),
            truth: Truth::Hash,
            trust: crate::service::TrustRules::default(),
            warmup_builds: 0,
        }
    }

    #[test]
    fn liar_kinds_parse_their_names() {
        for k in LiarKind::TABLE {
            assert_eq!(LiarKind::parse(&k.name()), Some(k));
        }
        assert_eq!(
            LiarKind::parse("sleeper"),
            Some(LiarKind::Sleeper { honest_for: 20 })
        );
        assert_eq!(
            LiarKind::parse("7/1000"),
            Some(LiarKind::Rate { per_mille: 7 })
        );
        assert_eq!(LiarKind::parse("2000/1000"), None);
        assert_eq!(LiarKind::parse("sometimes"), None);
    }

    #[test]
    fn a_lie_is_well_formed_and_differs() {
        let req = LeafRequest {
            board: Board::start(),
            excluded: 0,
            level: 4,
        };
        for score in [-64, -10, 0, 53, 54, 64] {
            let t = LeafResult {
                score,
                ..Truth::Hash.search(&req)
            };
            let l = lie(t);
            assert_ne!(l.score, t.score);
            assert!((-64..=64).contains(&l.score));
            assert_eq!((l.score - t.score).rem_euclid(2), 0);
        }
    }

    #[test]
    fn mix_shares_round_and_keep_one_of_each() {
        let m = Mix::of(100, 5.0, 5.0, Some(LiarKind::Always));
        assert_eq!((m.trusted, m.liars), (5, 5));
        let m = Mix::of(10, 5.0, 5.0, Some(LiarKind::Always));
        assert_eq!((m.trusted, m.liars), (1, 1));
        let m = Mix::of(10, 5.0, 5.0, None);
        assert_eq!(m.liars, 0);
    }

    #[test]
    fn machines_round_up_and_the_shares_are_of_machines() {
        assert_eq!(machines(1000, 1), 1000);
        assert_eq!(machines(1000, 8), 125);
        assert_eq!(machines(1000, 16), 63);
        assert_eq!(machines(100, 8), 13);
        assert_eq!(machines(5, 8), 1);
        let m = Mix::of(machines(1000, 8), 5.0, 5.0, Some(LiarKind::Always));
        assert_eq!((m.trusted, m.liars), (6, 6));
        let m = Mix::of(machines(1000, 16), 5.0, 5.0, Some(LiarKind::Always));
        assert_eq!((m.trusted, m.liars), (3, 3));
        let m = Mix::of(machines(100, 8), 5.0, 5.0, Some(LiarKind::Always));
        assert_eq!((m.trusted, m.liars), (1, 1));
    }

    /// A machine of T threads is one credential: it registers once, earns trust with N trust-
    /// root replicas however many threads it runs (its searches while earning are bounded for
    /// the credential, not per thread, so N = 3 < T = 4 leaves a thread waiting, and the report
    /// counts that wait), and once earned it holds T leases at once. The same machines with
    /// one thread each pay the same N replicas.
    #[test]
    fn a_machine_of_t_threads_earns_once_then_holds_t_leases() {
        use std::collections::HashMap;
        let dir = || tempfile::tempdir().unwrap();
        let machines = 2;
        let who = Mix::of(machines, 50.0, 0.0, None);
        assert_eq!(who.trusted, 1);
        let volunteers = (machines - who.trusted) as u64;
        let n = crate::service::TrustRules::default().earn_after;
        let run = |threads: u32| {
            let answers = Arc::new(Mutex::new(Answers::default()));
            let cfg = SimConfig {
                threads,
                models: members(machines, who, Arc::new(HashSet::new()), answers),
                ..small_config(machines)
            };
            // Per registered volunteer: the most leases it held at once.
            let mut most: HashMap<String, usize> = HashMap::new();
            let mut registered = 0;
            let r = super::super::simulate_observed(&cfg, dir().path(), &mut |_, c| {
                let s = c.status();
                registered = registered.max(s.workers.len());
                for w in s.workers.iter().filter(|w| !w.trusted) {
                    let m = most.entry(w.name.clone()).or_default();
                    *m = (*m).max(w.in_flight);
                }
            })
            .unwrap();
            (r, most, registered)
        };
        let (r, most, registered) = run(4);
        assert!(r.same_as_serial, "{}", r.row());
        assert_eq!((r.workers, r.threads, registered), (2, 8, 2));
        assert_eq!(most.len(), volunteers as usize);
        assert!(
            most.values().all(|&m| m == 4),
            "an earned machine searches on all its threads, never more: {most:?}"
        );
        // Each volunteer machine earned once: N replicas each, not N per thread.
        assert_eq!(
            r.breakdown.runs[0].count,
            n * volunteers,
            "{:?}",
            r.breakdown
        );
        assert!(
            r.earning_idle_seconds > 0.0,
            "a thread beyond the N searches of an earning machine waits"
        );
        assert!(r.earning_idle_queued_seconds <= r.earning_idle_seconds);
        let (one, _, _) = run(1);
        assert_eq!(one.threads, 2);
        assert_eq!(
            one.breakdown.runs[0].count,
            n * volunteers,
            "{:?}",
            one.breakdown
        );
    }

    /// Honest volunteers with a few trusted workers build the serial book; liars that lie on
    /// every answer are blocked, and neither the root's value nor its best line moves.
    #[test]
    fn liars_are_blocked_and_leave_the_root_and_best_line_alone() {
        let dir = || tempfile::tempdir().unwrap();
        let cfg = small_config(20);
        let honest = simulate_trust(&cfg, Mix::of(20, 10.0, 0.0, None), dir().path()).unwrap();
        assert!(honest.report.same_as_serial, "{}", honest.row());
        assert_eq!(honest.lies_told, 0);
        assert_eq!(honest.lies_in_book, 0);
        assert!(honest.report.blocked.is_empty(), "{}", honest.row());
        assert!(
            honest.report.validation.applied_at_once > 0,
            "volunteers earned trust: {}",
            honest.row()
        );

        let liars = Mix::of(20, 10.0, 10.0, Some(LiarKind::Always));
        let r = simulate_trust(&cfg, liars, dir().path()).unwrap();
        assert!(r.lies_told > 0, "{}", r.row());
        assert_eq!(r.report.blocked.len(), liars.liars, "{}", r.row());
        assert!(r.report.validation.invalid > 0, "{}", r.row());
        // They never earn trust, so no lie of theirs is applied on their word.
        assert_eq!(r.report.breakdown.lies_applied, 0, "{}", r.row());
        assert_eq!(r.lies_in_core, 0, "{}", r.row());
        assert_eq!(
            r.report.root_value,
            r.report.serial_root_value,
            "{}",
            r.row()
        );
        assert!(r.report.same_best_line, "{}", r.row());
    }

    /// Volunteers that return for a second build keep the standing they earned in the first
    /// (the service keeps it when the book is replaced): the measured build holds no result of
    /// theirs for validation, spends less on earning and checks than a first build, and still
    /// builds the serial book; its figures are its own (the warm-up's searches not counted).
    #[test]
    fn returning_volunteers_keep_their_standing() {
        let dir = || tempfile::tempdir().unwrap();
        let cfg = small_config(20);
        let who = Mix::of(20, 10.0, 0.0, None);
        let first = simulate_trust(&cfg, who, dir().path()).unwrap();
        let warm = SimConfig {
            warmup_builds: 1,
            ..cfg.clone()
        };
        let second = simulate_trust(&warm, who, dir().path()).unwrap();
        for r in [&first, &second] {
            assert!(r.report.same_as_serial, "{}", r.row());
            assert_eq!(r.report.serial_searches, first.report.serial_searches);
        }
        assert!(first.report.validation.held > 0, "{}", first.row());
        // The breakdown counts what the service counted: one earning replica per held result
        // (honest volunteers: the first agreeing one validates it), every spot check drawn.
        let b = &first.report.breakdown;
        let v = &first.report.validation;
        assert_eq!(b.runs[0].count, v.held, "{:?}", b);
        assert_eq!(
            b.spot_by_streak.values().sum::<u64>(),
            v.spot_checks,
            "{b:?}"
        );
        assert!(v.spot_checks > 0, "{}", first.row());
        let checked: u64 = b.checked.iter().map(|c| c[0]).sum();
        assert_eq!(
            checked, v.held,
            "each earning replica names the volunteer it checked"
        );
        assert_eq!(second.report.validation.held, 0, "{}", second.row());
        assert_eq!(second.report.waste.earning, 0.0, "{}", second.row());
        assert!(
            second.report.wasted_seconds < first.report.wasted_seconds,
            "first {} returning {}",
            first.row(),
            second.row()
        );
        // One build's searches: the serial build's and the checks, not two builds' worth.
        assert!(
            second.report.searches < 2 * first.report.serial_searches,
            "{}",
            second.row()
        );
        let answers: u64 = second.report.breakdown.answers.iter().sum();
        assert_eq!(answers as usize, first.report.serial_searches);
    }

    /// With fixed coordinator charges a trust run is a function of its configuration: the same
    /// farm of liars twice gives the same row (the spot coin's key and job ids follow the
    /// seed, new jobs are numbered in request order).
    #[test]
    fn a_trust_run_with_fixed_charges_repeats() {
        let dir = || tempfile::tempdir().unwrap();
        let cfg = small_config(20);
        let liars = Mix::of(20, 10.0, 10.0, Some(LiarKind::Rate { per_mille: 100 }));
        let a = simulate_trust(&cfg, liars, dir().path()).unwrap();
        let b = simulate_trust(&cfg, liars, dir().path()).unwrap();
        assert!(a.lies_told > 0, "{}", a.row());
        assert_eq!(a.row(), b.row());
        // Every count repeats; the replays' CPU is measured by the service itself.
        let counts = |r: &TrustRow| TrustCounters {
            replay_cpu_us: 0,
            ..r.report.validation
        };
        assert_eq!(counts(&a), counts(&b));
        assert_eq!(a.report.blocked, b.report.blocked);
    }

    /// `sim trust --workers W --depth D --schedule async --coordinator-cost fixed --seed 1`:
    /// equal speeds, the engine's level-2 results, leases that expire, fixed charges.
    fn async_cli_config(workers: usize, depth: u8) -> SimConfig {
        SimConfig {
            speed_spread: 1.0,
            seed: 1,
            depth,
            truth: Truth::Engine { level: 2 },
            ops: vec![Program {
                schedule: bookfarm_book::program::Schedule::Async,
                ..Program::new(Operation::Deviate {
                    params: bookfarm_book::select::Deviate::new(2, 4),
                })
            }],
            async_options: bookfarm_book::schedule::AsyncOptions {
                early_child: true,
                ..Default::default()
            },
            faults: Some(super::super::Faults {
                crash_percent: 0.0,
                lease_timeout: Duration::from_secs(60),
                restart_after: Duration::from_secs(120),
            }),
            coordinator: CoordinatorModel {
                rpc_cores: 4,
                charge: Charge::Fixed {
                    per_call: Duration::from_micros(30),
                    per_run: Duration::from_millis(1),
                    per_result: Duration::from_micros(50),
                },
            },
            ..small_config(workers)
        }
    }

    /// The asynchronous schedule with liars: a caught liar's open checks restart as ordinary
    /// work that the program's needed set lists again, its dropped results are retracted and
    /// searched again, a leaf whose result a check overturned is retracted and repaired with
    /// the check's result, and the build finishes with no lie in its decisive core. With fixed
    /// charges the run repeats: a caught liar's dropped results are needed again, and queued,
    /// in request order (not a hash map's per-process order).
    #[test]
    fn async_build_with_liars_repeats_and_keeps_lies_out_of_the_core() {
        let dir = || tempfile::tempdir().unwrap();
        let cfg = async_cli_config(100, 12);
        let liars = Mix::of(100, 5.0, 5.0, Some(LiarKind::Core));
        let a = simulate_trust(&cfg, liars, dir().path()).unwrap();
        let b = simulate_trust(&cfg, liars, dir().path()).unwrap();
        // The replays' CPU is measured by the service itself.
        let repeatable = |r: &TrustRow| {
            let mut r = r.clone();
            r.report.validation.replay_cpu_us = 0;
            (r.row(), r.report.wall_seconds, r.report.blocked)
        };
        assert_eq!(repeatable(&a), repeatable(&b));
        assert!(a.lies_told > 0, "{}", a.row());
        // A liar was caught (a caught credential earns again one confirmation at a time, so
        // in a build this small it need not reach its block), and what it alone vouched for was
        // retracted, not replayed.
        assert!(a.report.validation.invalid > 0, "{}", a.row());
        assert!(a.report.validation.retractions > 0, "{}", a.row());
        assert_eq!(a.report.validation.replays, 0, "{}", a.row());
        assert!(
            a.report.validation.dropped > 1,
            "dropped {}: {}",
            a.report.validation.dropped,
            a.row()
        );
        assert!(a.report.validation.reached_book > 0, "{}", a.row());
        assert!(
            a.report.breakdown.lies_applied >= a.report.validation.reached_book,
            "every lie caught in the book was applied on its word: {}",
            a.row()
        );
        assert!(a.report.finished, "{}", a.row());
        assert_eq!(a.lies_in_core, 0, "{}", a.row());
    }
}
