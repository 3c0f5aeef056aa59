//! The admin commands on a running coordinator: `expand`, `pause`, `resume`, `export`,
//! `backup` and `status`.

use super::{Admin, Remote, admin, spinner};
use crate::cli::io;
use anyhow::Context;
use bookfarm_book::program::{Operation, Program, Schedule};
use bookfarm_book::research::Upgrade;
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::http::api::{ProgramV1, ProgramsV1, StatusV1};
use bookfarm_coordinator::progress::{Progress, Snapshot, figures_text, state_name};
use bookfarm_proto::pb;
use clap::Subcommand;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Commands on a running coordinator (with the admin token).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Queue a growth program on a running coordinator (programs run in queue order, one at
    /// a time), or list and cancel the queued ones.
    Expand {
        #[command(subcommand)]
        selector: ExpandSelector,
        /// Level of new positions (0 = the parent's level).
        #[arg(long, default_value_t = 0, global = true, value_parser = crate::cli::args::level)]
        level: u8,
        /// Block until the program is done (or cancelled), showing progress; then print its
        /// report.
        #[arg(long, global = true)]
        wait: bool,
        /// Cancel every queued program and the running one first (what the running one added
        /// stays in the book).
        #[arg(long, global = true)]
        replace: bool,
        /// Start from this position instead of the start position, as Edax's book commands
        /// start from the current board: a move list (f5d6c3) or an OBF board of the book. The
        /// line's positions missing from the book are added first; the program's values and
        /// window are the root's.
        #[arg(long, global = true, value_name = "LINE")]
        from: Option<String>,
        /// How the program's searches are scheduled: `serial` (Edax's program: the same book
        /// whatever the farm), `async` (no pass barriers: a finished book by Edax's rules that
        /// keeps a big farm busy, not the serial one position for position), or `auto` (the
        /// coordinator chooses when the program starts: async from `async_threads` registered
        /// search threads, default 256, else serial).
        #[arg(long, global = true, default_value = "auto", value_parser = crate::cli::args::schedule_choice)]
        schedule: Schedule,
        #[command(flatten)]
        remote: Remote,
    },
    /// Pause the expansion (workers finish their jobs, no new leases).
    Pause {
        #[command(flatten)]
        remote: Remote,
    },
    /// Resume a paused expansion.
    Resume {
        #[command(flatten)]
        remote: Remote,
    },
    /// Write a consistent snapshot of the running coordinator's book (.dat, .csv or .egbk3).
    Export {
        /// Output file (.dat, .csv or .egbk3).
        #[arg(value_parser = crate::cli::args::book_output)]
        out: PathBuf,
        #[command(flatten)]
        remote: Remote,
    },
    /// Write a backup of the running coordinator's whole store to OUT (book, results and
    /// provenance, programs, trust records, credentials, invitations, events), a consistent
    /// copy taken while the farm runs (writes wait while it is taken). OUT appears only when
    /// complete (a kill leaves no OUT or the previous one); readable by its owner only (it
    /// holds the credentials' token hashes). `restore OUT --db DIR` makes a store of it.
    Backup {
        /// Output file.
        out: PathBuf,
        #[command(flatten)]
        remote: Remote,
    },
    /// Book size, queue, workers, throughput.
    Status {
        /// Refresh every second.
        #[arg(long)]
        watch: bool,
        /// Print one JSON object.
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

/// Which selector to run.
#[derive(Debug, Subcommand)]
pub enum ExpandSelector {
    /// Edax `book deviate REL ABS`.
    Deviate {
        /// Relative error.
        #[arg(allow_negative_numbers = true)]
        rel: i32,
        /// Absolute error.
        abs: i32,
    },
    /// Edax `book enhance MID END`.
    Enhance {
        /// Midgame error.
        mid: i32,
        /// Endcut error.
        end: i32,
    },
    /// Edax `book play`.
    Play,
    /// Edax `book extend`.
    Extend,
    /// `book upgrade`: re-search at LEVEL the leaves that can still change a value inside the
    /// window of ERROR discs around the root's value, closest to the root first, until none is
    /// left; a value is never replaced by one from a lower level.
    Upgrade {
        /// The level to re-search at (1..=60).
        #[arg(id = "upgrade_level", value_name = "LEVEL", value_parser = crate::cli::args::search_level)]
        target: u8,
        /// Half-width of the window around the root's value, in discs (0..=129).
        #[arg(long, default_value_t = 4, value_parser = crate::cli::args::error_margin)]
        error: i32,
    },
    /// Line audit: play the book's best lines to the end with searches at LEVEL (both sides)
    /// and report the lines whose result (win, draw or loss) contradicts the book's value.
    Audit {
        /// The level of the searches that play the lines out (1..=60).
        #[arg(id = "audit_level", value_name = "LEVEL", value_parser = crate::cli::args::search_level)]
        target: u8,
        /// Add the contradicting lines (book line and continuation) to the book afterwards, as
        /// `book add` does (new positions at --level).
        #[arg(long)]
        queue: bool,
    },
    /// Edax `book add` / `book store` as a cluster program: add every position of the games
    /// within the book depth (new positions at --level).
    Add {
        /// Games: transcripts one per line (f5d6c3…), or a .wtb file.
        #[arg(value_parser = crate::cli::args::existing_file)]
        games: std::path::PathBuf,
    },
    /// Search every position of an OBF file at --level (full width, as `bookfarm-worker
    /// search FILE --level L`) on the farm, a program like any other (queued, resumed after a
    /// restart, its results validated); waits for its end and writes the positions with a
    /// confirmed result to --out (OBF, file order, comments kept). The same command again
    /// attaches to the program while it is queued or running.
    Search {
        /// Positions, one OBF line each.
        #[arg(value_parser = crate::cli::args::existing_file)]
        file: std::path::PathBuf,
        /// The output file.
        #[arg(long)]
        out: std::path::PathBuf,
        /// Write what is confirmed now and return (the program keeps running).
        #[arg(long)]
        flush: bool,
    },
    /// Analyse one position now: its full-width leaf search at --level, then at every deeper
    /// level up to --up-to, one level after the other; each level's result is shown by `book
    /// show`, `book line`, the API and the explorer as it lands. Queued next, after the
    /// running program, whose searches wait for the analysis's (its steps do not change; on
    /// either schedule), and charged for its own searches. The book is not changed unless
    /// --store.
    Analyze {
        /// The position: a move list from the start (f5d6c3) or an OBF board (64 cells, then
        /// the side to move).
        #[arg(allow_hyphen_values = true)]
        line: String,
        /// The last level (default: --level).
        #[arg(long, value_parser = crate::cli::args::search_level)]
        up_to: Option<u8>,
        /// Also store the deepest level in the book: right behind the analysis, the line's
        /// missing positions are added (as `book store` adds them) and the position's leaf is
        /// re-searched at --up-to with its links excluded, raising its level. Refused, with
        /// nothing queued, when the book cannot hold the position (past its depth; an OBF
        /// board not in the book).
        #[arg(long)]
        store: bool,
    },
    /// The program queue: the running program and those waiting, in run order (with --all,
    /// then the last finished and cancelled ones).
    List {
        /// Also list the last finished and cancelled programs.
        #[arg(long)]
        all: bool,
        /// Print one JSON object (the web UI's `/api/v1/programs`).
        #[arg(long)]
        json: bool,
    },
    /// Cancel a program: a queued one never runs; the running one stops before its next step
    /// (what it added stays in the book).
    Cancel {
        /// The program's number (see `expand list`).
        id: u64,
    },
}

impl ExpandSelector {
    /// The operation as given (the coordinator clamps the parameters as Edax does); `None`
    /// for the queue commands.
    fn operation(&self) -> anyhow::Result<Option<Operation>> {
        Ok(Some(match *self {
            ExpandSelector::Deviate { rel, abs } => Operation::Deviate {
                params: Deviate { rel, abs },
            },
            ExpandSelector::Enhance { mid, end } => Operation::enhance(mid, end),
            ExpandSelector::Play => Operation::Play,
            ExpandSelector::Extend => Operation::Extend,
            ExpandSelector::Upgrade { target, error } => Operation::Upgrade {
                params: Upgrade {
                    level: target,
                    error,
                },
            },
            ExpandSelector::Audit { target, queue } => Operation::Audit {
                level: target,
                queue,
            },
            ExpandSelector::Add { ref games } => Operation::AddGames {
                games: io::read_games(games)?,
            },
            ExpandSelector::List { .. }
            | ExpandSelector::Cancel { .. }
            | ExpandSelector::Search { .. }
            | ExpandSelector::Analyze { .. } => return Ok(None),
        }))
    }
}

/// Run one admin command.
pub fn run(cmd: AdminCommand) -> anyhow::Result<()> {
    match cmd {
        AdminCommand::Expand {
            selector,
            level,
            wait,
            replace,
            from,
            schedule,
            remote,
        } => match (selector.operation()?, selector) {
            (Some(operation), _) => {
                let program = Program {
                    schedule,
                    ..Program::new(operation).at_level((level > 0).then_some(level))
                };
                expand(&program, from.as_deref(), wait, replace, &remote)
            }
            (None, ExpandSelector::Search { file, out, flush }) => {
                if replace || from.is_some() {
                    anyhow::bail!("--replace and --from do not apply to a search program");
                }
                search(&file, level, &out, flush, &remote)
            }
            (None, ExpandSelector::Analyze { line, up_to, store }) => {
                if replace || from.is_some() || schedule != Schedule::Auto {
                    anyhow::bail!("--replace, --from and --schedule do not apply to an analysis");
                }
                analyze(&line, level, up_to.unwrap_or(level), store, wait, &remote)
            }
            (None, selector) => {
                if wait || replace || level > 0 || from.is_some() || schedule != Schedule::Auto {
                    anyhow::bail!(
                        "--wait, --replace, --from, --level and --schedule apply to the programs \
                         queued"
                    );
                }
                match selector {
                    ExpandSelector::Cancel { id } => cancel(id, &remote),
                    ExpandSelector::List { all, json } => list(all, json, &remote),
                    _ => unreachable!("every other selector is an operation"),
                }
            }
        },
        AdminCommand::Pause { remote } => io::runtime()?.block_on(async {
            admin(&remote)
                .await?
                .pause(pb::PauseRequest {})
                .await
                .context("pausing")?;
            println!("paused");
            Ok(())
        }),
        AdminCommand::Resume { remote } => io::runtime()?.block_on(async {
            admin(&remote)
                .await?
                .resume(pb::ResumeRequest {})
                .await
                .context("resuming")?;
            println!("resumed");
            Ok(())
        }),
        AdminCommand::Export { out, remote } => io::runtime()?.block_on(async {
            let mut c = admin(&remote).await?;
            let format = pb::ExportFormat::from(io::book_format(&out)?);
            let mut stream = c
                .export_book(pb::ExportBookRequest {
                    format: format as i32,
                })
                .await
                .context("exporting")?
                .into_inner();
            let mut bytes = Vec::new();
            while let Some(chunk) = stream.message().await.context("receiving the export")? {
                bytes.extend_from_slice(&chunk.data);
            }
            io::write_atomic(&out, &bytes)?;
            println!("wrote {} ({} bytes)", out.display(), bytes.len());
            Ok(())
        }),
        AdminCommand::Backup { out, remote } => io::runtime()?.block_on(async {
            let mut c = admin(&remote).await?;
            let mut stream = c
                .backup_store(pb::BackupStoreRequest {})
                .await
                .context("taking the backup")?
                .into_inner();
            // Written as it arrives (never held whole), into a private temporary file renamed
            // over OUT when complete.
            let mut file = io::PrivateAtomic::create(&out)?;
            let mut bytes = 0u64;
            while let Some(chunk) = stream.message().await.context("receiving the backup")? {
                file.write_all(&chunk.data)?;
                bytes += chunk.data.len() as u64;
            }
            file.commit()?;
            println!("wrote {} ({bytes} bytes)", out.display());
            Ok(())
        }),
        AdminCommand::Status {
            watch: w,
            json,
            remote,
        } => io::runtime()?.block_on(async {
            let mut c = admin(&remote).await?;
            if w {
                return watch(&mut c).await;
            }
            let s = c
                .get_status(pb::GetStatusRequest::default())
                .await
                .context("getting the status")?
                .into_inner();
            if json {
                println!("{}", status_json(&s)?);
            } else {
                print_status(&s);
            }
            Ok(())
        }),
    }
}

/// Queue `program` on the coordinator (after cancelling the queue with `replace`); with
/// `wait`, follow it to its end and print its report.
fn expand(
    program: &Program,
    from: Option<&str>,
    wait: bool,
    replace: bool,
    remote: &Remote,
) -> anyhow::Result<()> {
    let request = pb::StartExpansionRequest {
        replace,
        from: from.unwrap_or_default().to_string(),
        ..pb::StartExpansionRequest::try_from(program)?
    };
    io::runtime()?.block_on(async {
        let mut c = admin(remote).await?;
        let r = c
            .start_expansion(request)
            .await
            .context("queueing the program")?
            .into_inner();
        for id in &r.cancelled {
            println!("program #{id} cancelled");
        }
        let place = match r.position {
            1 => "runs now".to_string(),
            n => format!("{} programs before it", n - 1),
        };
        let root = from.map_or_else(String::new, |f| format!(" from {}", f.trim()));
        println!(
            "program #{} queued ({place}): {}{root}; {} jobs queued",
            r.program,
            program.describe(),
            r.queued
        );
        if wait {
            let p = wait_for_program(&mut c, r.program).await?;
            println!("{}", p.report);
        }
        Ok(())
    })
}

/// `expand search FILE --level L --out OUT [--flush]`: the file is read here first (a
/// malformed line is refused naming it, nothing is sent), then queued (or found queued), then
/// its output written when the program ends (at once with `flush`).
fn search(
    file: &std::path::Path,
    level: u8,
    out: &std::path::Path,
    flush: bool,
    remote: &Remote,
) -> anyhow::Result<()> {
    if level == 0 {
        anyhow::bail!("--level: a search program needs a level in 1..=60");
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let positions = bookfarm_book::searches::SearchSet::parse(
        &text,
        bookfarm_book::searches::DEFAULT_MAX_POSITIONS,
    )
    .with_context(|| format!("{}", file.display()))?;
    let program = Program::new(Operation::Search { positions, level });
    let request = pb::StartExpansionRequest::try_from(&program)?;
    io::runtime()?.block_on(async {
        let mut c = admin(remote).await?;
        let r = c
            .start_expansion(request)
            .await
            .context("queueing the search program")?
            .into_inner();
        let how = if r.existing { "found" } else { "queued" };
        println!(
            "program #{} {how} ({} programs before it): {}",
            r.program,
            r.position.saturating_sub(1),
            program.describe()
        );
        if !flush {
            let p = wait_for_program(&mut c, r.program).await?;
            println!("{}", p.report);
        }
        let mut stream = c
            .get_program_output(pb::ProgramOutputRequest { id: r.program })
            .await
            .context("getting the output")?
            .into_inner();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.message().await.context("receiving the output")? {
            bytes.extend_from_slice(&chunk.data);
        }
        io::write_atomic(out, &bytes)?;
        let header = String::from_utf8_lossy(&bytes);
        println!(
            "wrote {}: {}",
            out.display(),
            header.lines().next().unwrap_or_default()
        );
        Ok(())
    })
}

/// `expand analyze LINE --level L [--up-to L2] [--store] [--wait]`: the position is read here
/// (a bad line is refused, nothing is sent), then the analysis queued (with `store`, and the
/// program that stores it, the coordinator checking both first); with `wait`, their reports
/// when they end.
fn analyze(
    line: &str,
    level: u8,
    up_to: u8,
    store: bool,
    wait: bool,
    remote: &Remote,
) -> anyhow::Result<()> {
    if level == 0 {
        anyhow::bail!("--level: an analysis needs a level in 1..=60");
    }
    let board = analysed_board(line)?;
    let program = Program::new(Operation::Analyze {
        board,
        from: level,
        up_to,
    });
    let mut request = pb::StartExpansionRequest::try_from(&program)?;
    if store {
        if let Some(pb::start_expansion_request::Selector::Analyze(a)) = &mut request.selector {
            a.store = true;
        }
        request.from = line.trim().to_string();
    }
    io::runtime()?.block_on(async {
        let mut c = admin(remote).await?;
        let r = c
            .start_expansion(request)
            .await
            .context("queueing the analysis")?
            .into_inner();
        println!(
            "program #{} queued ({} programs before it): {}",
            r.program,
            r.position.saturating_sub(1),
            program.describe()
        );
        if r.store_program != 0 {
            println!(
                "program #{} queued right behind it: store the analysis at level {up_to}",
                r.store_program
            );
        }
        if wait {
            for id in [r.program, r.store_program]
                .into_iter()
                .filter(|&id| id != 0)
            {
                let p = wait_for_program(&mut c, id).await?;
                println!("{}", p.report);
            }
        }
        Ok(())
    })
}

/// The position `expand analyze` names: a move list from the start, or an OBF board.
fn analysed_board(text: &str) -> anyhow::Result<bookfarm_engine::Board> {
    use bookfarm_engine::formats::{obf, transcript};
    let text = text.trim();
    // An OBF board is 64 cells and a side: anything shorter is read as a move list.
    if transcript::parse_moves(text).is_ok() || text.chars().count() < 64 {
        return transcript::board_after(text).with_context(|| format!("{text}: a move list"));
    }
    match obf::parse_obf_line(text) {
        Ok(Some(p)) => Ok(p.board),
        Ok(None) => anyhow::bail!("no position given: a move list (f5d6c3) or an OBF board"),
        Err(e) => anyhow::bail!("{text}: neither a move list nor an OBF board ({e})"),
    }
}

/// `expand cancel ID`.
fn cancel(id: u64, remote: &Remote) -> anyhow::Result<()> {
    io::runtime()?.block_on(async {
        let p = admin(remote)
            .await?
            .cancel_program(pb::CancelProgramRequest { id })
            .await
            .with_context(|| format!("cancelling program #{id}"))?
            .into_inner()
            .program
            .context("the coordinator sent no program")?;
        println!("program #{id} ({}) {}", p.description, p.report);
        Ok(())
    })
}

/// `expand list`.
fn list(all: bool, json: bool, remote: &Remote) -> anyhow::Result<()> {
    io::runtime()?.block_on(async {
        let r = admin(remote)
            .await?
            .list_programs(pb::ListProgramsRequest { finished: all })
            .await
            .context("listing the programs")?
            .into_inner();
        let programs: Vec<ProgramV1> = r.programs.iter().map(ProgramV1::from).collect();
        if json {
            let v = ProgramsV1 {
                api: bookfarm_coordinator::http::api::VERSION,
                programs,
            };
            println!(
                "{}",
                serde_json::to_string(&v).context("encoding the programs")?
            );
            return Ok(());
        }
        if programs.is_empty() {
            println!("no program queued");
        }
        for p in &programs {
            let what = if p.state == "running" || p.state == "queued" {
                &p.progress
            } else {
                &p.report
            };
            println!("#{:<5} {:<9} {}  {}", p.id, p.state, p.program, what);
            let figures = figures_text(p);
            if !figures.is_empty() {
                println!("       {figures}");
            }
        }
        Ok(())
    })
}

/// Follow program `id` (a progress line every second) until it is done or cancelled; returns
/// it as it ended.
async fn wait_for_program(c: &mut Admin, id: u64) -> anyhow::Result<pb::ProgramInfo> {
    let bar = spinner();
    let mut progress = Progress::new();
    let t0 = Instant::now();
    loop {
        let programs = c
            .list_programs(pb::ListProgramsRequest { finished: true })
            .await
            .context("listing the programs")?
            .into_inner()
            .programs;
        let Some(p) = programs.into_iter().find(|p| p.id == id) else {
            anyhow::bail!("program #{id} is no longer listed");
        };
        let ended = p.state == pb::ProgramState::Done as i32
            || p.state == pb::ProgramState::Cancelled as i32;
        if ended {
            bar.finish_and_clear();
            return Ok(p);
        }
        let s = c
            .get_status(pb::GetStatusRequest::default())
            .await
            .context("getting the status")?
            .into_inner();
        let snap = Snapshot::from(&s);
        progress.observe(t0.elapsed(), &snap);
        let place = if p.state == pb::ProgramState::Running as i32 {
            p.progress.clone()
        } else {
            "queued".to_string()
        };
        // The program's own figures (done/total, ETA, CPU hours) when it has any.
        let figures = figures_text(&ProgramV1::from(&p));
        let figures = if figures.is_empty() {
            String::new()
        } else {
            format!(" | {figures}")
        };
        bar.set_message(format!("#{id} {place}{figures} | {}", progress.line(&snap)));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `status --json`: the web UI's `/api/v1/status` object for the same coordinator.
fn status_json(s: &pb::GetStatusResponse) -> anyhow::Result<String> {
    serde_json::to_string(&StatusV1::from(s)).context("encoding the status")
}

fn print_status(s: &pb::GetStatusResponse) {
    println!(
        "state {}  {}\npositions {}  queued {}  in flight {}  completed {}  {:.1} results/s  root value {}",
        state_name(s.state),
        s.expansion,
        s.positions,
        s.queued,
        s.in_flight,
        s.completed,
        s.results_per_second,
        s.root_value
    );
    if s.speculative_leased + s.backup_leased > 0 {
        println!(
            "prefetch: {} speculative leases, {} results used, {} not used (yet); {} backup leases",
            s.speculative_leased, s.prefetch_used, s.prefetch_unused, s.backup_leased
        );
    }
    if let Some(v) = &s.validation {
        println!("{}", trust_line(v));
    }
    for (label, p) in [("program", &s.program), ("last program", &s.last_program)] {
        if let Some(p) = p {
            let p = ProgramV1::from(p);
            println!(
                "{label}: #{} {} {}  {}",
                p.id,
                p.state,
                p.program,
                figures_text(&p)
            );
        }
    }
    for w in &s.workers {
        println!(
            "  {:<20} {:>3} threads  {:>3} in flight  {:>8} done  {:>7.1}/s  seen {:.1}s ago",
            w.name,
            w.threads,
            w.in_flight,
            w.completed,
            w.results_per_second,
            w.last_seen_ms as f64 / 1000.0
        );
    }
    if s.workers_total > s.workers.len() as u64 {
        println!(
            "  … and {} more workers",
            s.workers_total - s.workers.len() as u64
        );
    }
    for q in &s.quarantined {
        let p = q.position.unwrap_or_default();
        println!(
            "  quarantined {:016x}:{:016x} (job {}): {}",
            p.player, p.opponent, q.job_id, q.last_reason
        );
    }
}

/// The status's trust line: replication overhead, checks pending and the oldest one's age,
/// invalid results, blocked contributors, rollbacks (by replay and by retraction).
fn trust_line(v: &pb::Validation) -> String {
    let overhead = if v.search_cpu_us == 0 {
        0.0
    } else {
        100.0 * v.replica_cpu_us as f64 / v.search_cpu_us as f64
    };
    format!(
        "trust: overhead {overhead:.1} % of search time  checks pending {} (oldest {:.0} s)  invalid {}  blocked {}  rollbacks {} (replays {}, retractions {})",
        v.pending_checks,
        v.oldest_check_seconds,
        v.invalid,
        v.blocked_contributors,
        v.rollbacks,
        v.replays,
        v.retractions
    )
}

/// Refresh the one-line progress (state, throughput with its sparkline, queue, workers, round
/// ETA) every second.
async fn watch(c: &mut Admin) -> anyhow::Result<()> {
    let bar = spinner();
    let mut progress = Progress::new();
    let t0 = Instant::now();
    loop {
        let s = c
            .get_status(pb::GetStatusRequest::default())
            .await
            .context("getting the status")?
            .into_inner();
        let snap = Snapshot::from(&s);
        progress.observe(t0.elapsed(), &snap);
        bar.set_message(progress.line(&snap));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_line_shows_overhead_checks_and_catches() {
        let v = pb::Validation {
            search_cpu_us: 4_000_000,
            replica_cpu_us: 1_000_000,
            pending_checks: 3,
            oldest_check_seconds: 42.4,
            invalid: 5,
            blocked_contributors: 1,
            rollbacks: 2,
            replays: 1,
            retractions: 1,
            ..pb::Validation::default()
        };
        assert_eq!(
            trust_line(&v),
            "trust: overhead 25.0 % of search time  checks pending 3 (oldest 42 s)  invalid 5  blocked 1  rollbacks 2 (replays 1, retractions 1)"
        );
        assert!(trust_line(&pb::Validation::default()).starts_with("trust: overhead 0.0 %"));
    }
}
