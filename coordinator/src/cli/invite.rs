//! `invite add|list|revoke`: the invitations volunteers enrol with (`bookfarm-worker enroll
//! URL CODE`), on a running coordinator (`--coordinator URL` with the admin token) or on a
//! stopped coordinator's store (`--db`).

use crate::cli::cluster::admin;
use crate::cli::io::runtime;
use crate::cli::workers::Target;
use anyhow::Context;
use bookfarm_coordinator::identity::{Identities, IdentityConfig};
use bookfarm_coordinator::rpc::invitation;
use bookfarm_coordinator::store::Store;
use bookfarm_proto::pb;
use clap::Subcommand;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Invitation commands.
#[derive(Debug, Subcommand)]
pub enum InviteCommand {
    /// Create an invitation; prints its code once (the last line of the output). Each use
    /// makes one untrusted worker credential.
    Add {
        /// Invitation name (letters, digits, - _ . @) [default: invite-XXXXXX].
        name: Option<String>,
        /// Credentials it may make (a classroom's machines share one code).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        uses: u32,
        /// Days it stays usable.
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=3650))]
        valid_days: u32,
        /// Owner of every credential it makes [default: each credential its own, or, for a
        /// code of several uses, one owner NAME@invitation for them all].
        #[arg(long)]
        owner: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// List invitations (never their codes).
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Revoke an invitation (the credentials it made stay; revoke them with `workers revoke`).
    Revoke {
        /// Invitation name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
}

fn offline(db: &Path) -> anyhow::Result<Identities> {
    let store = Store::open(db).with_context(|| {
        format!(
            "opening store {} (stop the coordinator first, or use --coordinator)",
            db.display()
        )
    })?;
    Ok(Identities::open_with(
        IdentityConfig::default(),
        Some(store.credentials()?),
        Some(store.invitations()?),
    )?)
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An invitation's state at `now`.
fn state(i: &pb::Invitation, now: u64) -> &'static str {
    if i.revoked {
        "revoked"
    } else if now >= i.expires_unix {
        "expired"
    } else if i.used >= i.uses {
        "used up"
    } else {
        "open"
    }
}

fn print_list(list: &[pb::Invitation]) {
    let now = now_unix();
    println!(
        "{:<24} {:<20} {:>5} {:>5} {:>10}  state",
        "name", "owner", "used", "uses", "days_left"
    );
    for i in list {
        println!(
            "{:<24} {:<20} {:>5} {:>5} {:>10.1}  {}",
            i.name,
            if i.owner.is_empty() { "-" } else { &i.owner },
            i.used,
            i.uses,
            i.expires_unix.saturating_sub(now) as f64 / 86_400.0,
            state(i, now)
        );
    }
}

fn print_added(code: &str, i: &pb::Invitation) {
    println!(
        "invitation {} for {} worker(s), valid {:.0} days; a volunteer runs: bookfarm-worker enroll URL CODE",
        i.name,
        i.uses,
        i.expires_unix.saturating_sub(i.created_unix) as f64 / 86_400.0
    );
    println!("{code}");
}

/// What an `invite` command does, on either target.
enum Op {
    Add {
        name: Option<String>,
        uses: u32,
        valid_days: u32,
        owner: Option<String>,
    },
    List,
    Revoke(String),
}

/// Run one `invite` command.
pub fn run(cmd: InviteCommand) -> anyhow::Result<()> {
    let (op, target) = match cmd {
        InviteCommand::Add {
            name,
            uses,
            valid_days,
            owner,
            target,
        } => (
            Op::Add {
                name,
                uses,
                valid_days,
                owner,
            },
            target,
        ),
        InviteCommand::List { target } => (Op::List, target),
        InviteCommand::Revoke { name, target } => (Op::Revoke(name), target),
    };
    if let Some(db) = &target.db {
        let ids = offline(db)?;
        match op {
            Op::Add {
                name,
                uses,
                valid_days,
                owner,
            } => {
                let (code, rec) = ids.invite(
                    name.as_deref(),
                    uses,
                    Duration::from_secs(u64::from(valid_days) * 86_400),
                    owner.as_deref(),
                )?;
                print_added(&code, &invitation(&rec));
            }
            Op::List => {
                let list: Vec<pb::Invitation> = ids.invitations().iter().map(invitation).collect();
                print_list(&list);
            }
            Op::Revoke(name) => {
                let rec = ids.revoke_invitation(&name)?;
                println!("invitation {} revoked ({} used)", rec.name, rec.used);
            }
        }
        return Ok(());
    }
    runtime()?.block_on(async {
        let mut c = admin(&target.remote).await?;
        match op {
            Op::Add {
                name,
                uses,
                valid_days,
                owner,
            } => {
                let r = c
                    .create_invitation(pb::CreateInvitationRequest {
                        name: name.unwrap_or_default(),
                        uses,
                        valid_days,
                        owner: owner.unwrap_or_default(),
                    })
                    .await
                    .context("creating the invitation")?
                    .into_inner();
                print_added(&r.code, &r.invitation.unwrap_or_default());
            }
            Op::List => {
                let r = c
                    .list_invitations(pb::ListInvitationsRequest {})
                    .await
                    .context("listing invitations")?
                    .into_inner();
                print_list(&r.invitations);
            }
            Op::Revoke(name) => {
                let i = c
                    .revoke_invitation(pb::RevokeInvitationRequest { name })
                    .await
                    .context("revoking the invitation")?
                    .into_inner()
                    .invitation
                    .unwrap_or_default();
                println!("invitation {} revoked ({} used)", i.name, i.used);
            }
        }
        Ok(())
    })
}
