//! `workers add|list|revoke|block|unblock` (worker credentials) and `quarantine release`, on a
//! store offline (`--db`, coordinator stopped) or on a running coordinator (`--coordinator URL`
//! with the admin token).

use crate::cli::cluster::{Remote, admin};
use crate::cli::io::{runtime, write_secret};
use anyhow::{Context, bail};
use bookfarm_coordinator::identity::{Identities, IdentityConfig};
use bookfarm_coordinator::rpc::credential;
use bookfarm_coordinator::service::trust::catches_by_owner;
use bookfarm_coordinator::service::{CreditReport, TrustRules, credit_report};
use bookfarm_coordinator::store::{CredentialState, Store};
use bookfarm_proto::pb;
use clap::Subcommand;
use std::path::PathBuf;

/// Worker credential commands.
#[derive(Debug, Subcommand)]
pub enum WorkersCommand {
    /// Create a credential; prints its token once (the last line of the output).
    Add {
        /// Credential name (letters, digits, - _ . @).
        name: String,
        /// Who runs the worker (failures count per owner) [default: the name].
        #[arg(long)]
        owner: Option<String>,
        /// The operator's own machine (more live sessions).
        #[arg(long)]
        trusted: bool,
        /// Write the token to this new file (mode 0600) instead of printing it, for
        /// deployments that hand it to workers as a file (`bookfarm-worker run --token-file`).
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[command(flatten)]
        target: Target,
    },
    /// List credentials (never their tokens).
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Revoke a credential for good; its workers are refused from their next call.
    Revoke {
        /// Credential name.
        name: String,
        /// Why (shown in `workers list`).
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        target: Target,
    },
    /// Block a credential until unblocked; its workers are refused from their next call.
    Block {
        /// Credential name.
        name: String,
        /// Why (told to the worker and shown in `workers list`).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        target: Target,
    },
    /// Unblock a blocked credential.
    Unblock {
        /// Credential name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Quarantine commands.
#[derive(Debug, Subcommand)]
pub enum QuarantineCommand {
    /// Put quarantined positions back in the queue (as listed by `status`:
    /// PLAYER:OPPONENT in hex), or all of them.
    Release {
        /// Positions (PLAYER:OPPONENT, 16 hex digits each).
        positions: Vec<String>,
        /// Release every quarantined position.
        #[arg(long, conflicts_with = "positions")]
        all: bool,
        #[command(flatten)]
        remote: Remote,
    },
}

/// A store (offline) or a running coordinator.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Store directory of a stopped coordinator (instead of --coordinator).
    #[arg(long)]
    pub(crate) db: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

fn state_name(s: i32) -> &'static str {
    match pb::CredentialState::try_from(s) {
        Ok(pb::CredentialState::Active) => "active",
        Ok(pb::CredentialState::Blocked) => "blocked",
        Ok(pb::CredentialState::Revoked) => "revoked",
        _ => "?",
    }
}

fn print_list(cs: &[pb::Credential]) {
    println!(
        "{:<24} {:<20} {:<7} {:<8} {:>8} {:<9} {:>8} {:>12} {:>9} {:>7}  reason",
        "name",
        "owner",
        "trusted",
        "state",
        "sessions",
        "standing",
        "results",
        "nodes",
        "cpu_s",
        "invalid"
    );
    for c in cs {
        let credit = c.credit.clone().unwrap_or_default();
        println!(
            "{:<24} {:<20} {:<7} {:<8} {:>8} {:<9} {:>8} {:>12} {:>9.1} {:>7}  {}",
            c.name,
            c.owner,
            if c.trusted { "yes" } else { "no" },
            state_name(c.state),
            c.live_sessions,
            if credit.standing.is_empty() {
                "-"
            } else {
                &credit.standing
            },
            credit.results,
            credit.nodes,
            credit.cpu_seconds,
            credit.invalid,
            c.reason
        );
    }
}

/// The credentials of a stopped coordinator's store, and its contributors' credit (under the
/// default rules: a configured N only changes which standing is shown).
fn offline(db: &std::path::Path) -> anyhow::Result<(Identities, Vec<CreditReport>, Store)> {
    let store = Store::open(db).with_context(|| {
        format!(
            "opening store {} (stop the coordinator first, or use --coordinator)",
            db.display()
        )
    })?;
    let rules = TrustRules::default();
    let records = store.trust_records()?;
    let catches = catches_by_owner(records.iter().map(|(_, t)| t));
    let credit = records
        .iter()
        .map(|(name, t)| credit_report(name, t, &rules, &catches))
        .collect();
    let ids = Identities::open(IdentityConfig::default(), Some(store.credentials()?))?;
    ids.set_events(bookfarm_coordinator::events::EventLog::open(
        &store,
        bookfarm_coordinator::events::DEFAULT_MAX_EVENTS,
    )?);
    Ok((ids, credit, store))
}

/// What a `workers` command does, on either target.
enum Op {
    Add {
        name: String,
        owner: Option<String>,
        trusted: bool,
        token_file: Option<PathBuf>,
    },
    List,
    Set {
        name: String,
        state: CredentialState,
        reason: String,
    },
}

fn pb_state(s: CredentialState) -> pb::CredentialState {
    match s {
        CredentialState::Active => pb::CredentialState::Active,
        CredentialState::Blocked => pb::CredentialState::Blocked,
        CredentialState::Revoked => pb::CredentialState::Revoked,
    }
}

/// Run one `workers` command.
pub fn run(cmd: WorkersCommand) -> anyhow::Result<()> {
    let set = |name, state, reason| Op::Set {
        name,
        state,
        reason,
    };
    let (op, target) = match cmd {
        WorkersCommand::Add {
            name,
            owner,
            trusted,
            token_file,
            target,
        } => {
            // Refuse before the credential exists, so a failed write leaves nothing behind.
            if let Some(f) = token_file.as_ref().filter(|f| f.exists()) {
                bail!("{} exists; the token file must be new", f.display());
            }
            (
                Op::Add {
                    name,
                    owner,
                    trusted,
                    token_file,
                },
                target,
            )
        }
        WorkersCommand::List { target } => (Op::List, target),
        WorkersCommand::Revoke {
            name,
            reason,
            target,
        } => (set(name, CredentialState::Revoked, reason), target),
        WorkersCommand::Block {
            name,
            reason,
            target,
        } => (set(name, CredentialState::Blocked, reason), target),
        WorkersCommand::Unblock { name, target } => {
            (set(name, CredentialState::Active, String::new()), target)
        }
    };
    match &target.db {
        Some(db) => {
            let (ids, credit, store) = offline(db)?;
            match op {
                Op::Add {
                    name,
                    owner,
                    trusted,
                    token_file,
                } => {
                    let (token, rec) = ids.add(&name, owner.as_deref(), trusted)?;
                    print_added(&token, &credential(&rec, 0, None), token_file.as_deref())?;
                }
                Op::List => {
                    let cs: Vec<pb::Credential> = ids
                        .list()
                        .iter()
                        .map(|c| {
                            let mine = credit.iter().find(|x| x.name == c.record.name);
                            credential(&c.record, c.live_sessions, mine)
                        })
                        .collect();
                    print_list(&cs);
                }
                Op::Set {
                    name,
                    state,
                    reason,
                } => {
                    let (rec, _) = ids.set_state(&name, state, &reason)?;
                    // Unblocking also lifts a block for invalid results (the trust ledger's).
                    if state == CredentialState::Active && store.unblock_trust(&rec.name)? {
                        println!("{}: block for invalid results lifted", rec.name);
                    }
                    println!("{}: {}", rec.name, rec.state.as_str());
                }
            }
            Ok(())
        }
        None => runtime()?.block_on(async {
            let mut c = admin(&target.remote).await?;
            match op {
                Op::Add {
                    name,
                    owner,
                    trusted,
                    token_file,
                } => {
                    let r = c
                        .add_credential(pb::AddCredentialRequest {
                            name,
                            owner: owner.unwrap_or_default(),
                            trusted,
                        })
                        .await
                        .context("adding the credential")?
                        .into_inner();
                    print_added(
                        &r.token,
                        &r.credential.unwrap_or_default(),
                        token_file.as_deref(),
                    )?;
                }
                Op::List => {
                    let r = c
                        .list_credentials(pb::ListCredentialsRequest {})
                        .await
                        .context("listing credentials")?
                        .into_inner();
                    print_list(&r.credentials);
                }
                Op::Set {
                    name,
                    state,
                    reason,
                } => {
                    let r = c
                        .set_credential_state(pb::SetCredentialStateRequest {
                            name,
                            state: pb_state(state) as i32,
                            reason,
                        })
                        .await
                        .context("changing the credential")?
                        .into_inner()
                        .credential
                        .unwrap_or_default();
                    println!("{}: {}", r.name, state_name(r.state));
                }
            }
            Ok(())
        }),
    }
}

fn print_added(
    token: &str,
    c: &pb::Credential,
    token_file: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let what = format!(
        "added worker credential {} (owner {}, {})",
        c.name,
        c.owner,
        if c.trusted { "trusted" } else { "untrusted" }
    );
    match token_file {
        Some(f) => {
            write_secret(f, token)?;
            println!("{what}; its token is in {}", f.display());
        }
        None => {
            println!("{what}; its token, shown only now:");
            println!("{token}");
        }
    }
    Ok(())
}

fn parse_position(s: &str) -> anyhow::Result<pb::Position> {
    let (p, o) = s
        .split_once(':')
        .with_context(|| format!("position {s:?}: expected PLAYER:OPPONENT in hex"))?;
    let hex = |x: &str| u64::from_str_radix(x, 16).with_context(|| format!("{x:?} is not hex"));
    Ok(pb::Position {
        player: hex(p)?,
        opponent: hex(o)?,
    })
}

/// Run one `quarantine` command.
pub fn quarantine(cmd: QuarantineCommand) -> anyhow::Result<()> {
    match cmd {
        QuarantineCommand::Release {
            positions,
            all,
            remote,
        } => {
            if !all && positions.is_empty() {
                bail!("name the positions to release, or pass --all");
            }
            let positions = positions
                .iter()
                .map(|p| parse_position(p))
                .collect::<anyhow::Result<Vec<_>>>()?;
            runtime()?.block_on(async {
                let r = admin(&remote)
                    .await?
                    .release_quarantine(pb::ReleaseQuarantineRequest { all, positions })
                    .await
                    .context("releasing quarantined positions")?
                    .into_inner();
                println!("released {} positions", r.released);
                Ok(())
            })
        }
    }
}
