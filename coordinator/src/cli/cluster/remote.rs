//! The admin commands on a running coordinator: `expand`, `pause`, `resume`, `export` and
//! `status`.

use super::{Admin, Remote, admin, spinner};
use crate::cli::io;
use anyhow::Context;
use bookfarm_book::program::{Operation, Program};
use bookfarm_book::research::Upgrade;
use bookfarm_book::select::Deviate;
use bookfarm_coordinator::http::api::StatusV1;
use bookfarm_coordinator::progress::{Progress, Snapshot, state_name};
use bookfarm_proto::pb;
use clap::Subcommand;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Commands on a running coordinator (with the admin token).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Start (or replace) an expansion on a running coordinator.
    Expand {
        #[command(subcommand)]
        selector: ExpandSelector,
        /// Level of new positions (0 = the parent's level).
        #[arg(long, default_value_t = 0, global = true, value_parser = crate::cli::args::level)]
        level: u8,
        /// Block until the expansion is done, showing progress.
        #[arg(long, global = true)]
        wait: bool,
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
}

impl From<ExpandSelector> for Operation {
    /// The operation as given (the coordinator clamps the parameters as Edax does).
    fn from(s: ExpandSelector) -> Operation {
        match s {
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
        }
    }
}

/// Run one admin command.
pub fn run(cmd: AdminCommand) -> anyhow::Result<()> {
    match cmd {
        AdminCommand::Expand {
            selector,
            level,
            wait,
            remote,
        } => {
            let program = Program::new(selector.into()).at_level((level > 0).then_some(level));
            expand(&program, wait, &remote)
        }
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
        AdminCommand::Status {
            watch: w,
            json,
            remote,
        } => io::runtime()?.block_on(async {
            let mut c = admin(&remote).await?;
            if w {
                return watch(&mut c, false).await;
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

/// Start `program` on the coordinator; with `wait`, follow it to the end and print what the
/// programs finished meanwhile reported.
fn expand(program: &Program, wait: bool, remote: &Remote) -> anyhow::Result<()> {
    let request = pb::StartExpansionRequest::try_from(program)?;
    io::runtime()?.block_on(async {
        let mut c = admin(remote).await?;
        let before = c
            .get_status(pb::GetStatusRequest::default())
            .await
            .context("getting the status")?
            .into_inner()
            .programs_finished;
        let r = c
            .start_expansion(request)
            .await
            .context("starting the expansion")?
            .into_inner();
        println!("{} started: {} jobs queued", program.describe(), r.queued);
        if wait {
            watch(&mut c, true).await?;
            // What the programs finished since the start did (an audit's
            // contradictions among them).
            let s = c
                .get_status(pb::GetStatusRequest::default())
                .await
                .context("getting the status")?
                .into_inner();
            let n = usize::try_from(s.programs_finished.saturating_sub(before))
                .unwrap_or(usize::MAX)
                .min(s.reports.len());
            for line in &s.reports[s.reports.len() - n..] {
                println!("{line}");
            }
        }
        Ok(())
    })
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

/// Refresh the one-line progress (state, throughput with its sparkline, queue, workers, round
/// ETA) every second; with `until_done`, return when the expansion is done.
async fn watch(c: &mut Admin, until_done: bool) -> anyhow::Result<()> {
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
        if until_done && s.state == pb::ExpansionState::Done as i32 {
            bar.finish();
            println!("done: {} positions", s.positions);
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
