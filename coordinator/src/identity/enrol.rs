//! Enrolment: a volunteer's worker turns an invitation code (or, when the operator allows it,
//! nothing) into its own worker credential, always untrusted: the trust rules decide what its
//! results are worth. Invitations are created by the operator (`invite add`), single-use or
//! capped, with an expiry and an optional owner. Enrolments are rate-limited per network address
//! (and open enrolment farm-wide) and logged.

use super::{Identities, IdentityError, Result, State, new_token, token_sha256, valid_label};
use crate::events::{EventKind, event};
use crate::store::{CredentialRecord, CredentialState, EnrolError, InvitationRecord};
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Longest name a worker may ask for (the credential adds `-` and 4 hex digits).
const MAX_REQUESTED_NAME: usize = 48;

/// Attempts at a free credential name (4 random hex digits each).
const NAME_ATTEMPTS: usize = 8;

/// A new invitation code: `bfi_` and 16 random bytes in hex (128 bits).
pub fn new_code() -> String {
    let bytes: [u8; 16] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("bfi_{hex}")
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A credential name from what a worker asked for: letters, digits and `-_.` kept, anything
/// else `-`, cut short; `volunteer` when nothing is left.
fn base_name(requested: &str) -> String {
    let s: String = requested
        .chars()
        .take(MAX_REQUESTED_NAME)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches('-');
    if s.is_empty() {
        "volunteer".into()
    } else {
        s.to_string()
    }
}

/// What an enrolment made.
#[derive(Debug, Clone)]
pub struct Enrolled {
    /// The new credential's token (shown once, to the worker).
    pub token: String,
    /// The new credential.
    pub record: CredentialRecord,
    /// The invitation it used (None: open enrolment).
    pub invitation: Option<String>,
}

/// Why an invitation cannot be used.
fn unusable(i: &InvitationRecord, now: u64) -> Option<&'static str> {
    if i.revoked {
        Some("revoked")
    } else if now >= i.expires_unix {
        Some("expired")
    } else if i.used >= i.uses {
        Some("used up")
    } else {
        None
    }
}

impl Identities {
    /// Create an invitation: `uses` credentials at most, usable for `valid_for`, their owner
    /// `owner` (None: see [`Identities::enroll`]). Returns its code (shown once: only its hash
    /// is kept) and record.
    pub fn invite(
        &self,
        name: Option<&str>,
        uses: u32,
        valid_for: Duration,
        owner: Option<&str>,
    ) -> Result<(String, InvitationRecord)> {
        let name = match name {
            Some(n) => n.to_string(),
            None => format!("invite-{:06x}", rand::random::<u32>() & 0xff_ffff),
        };
        valid_label("invitation name", &name)?;
        if let Some(o) = owner {
            valid_label("owner", o)?;
        }
        if uses == 0 {
            return Err(IdentityError::InvalidArgument(
                "an invitation must allow at least one use".into(),
            ));
        }
        let code = new_code();
        let now = now_unix();
        let rec = InvitationRecord {
            name: name.clone(),
            code_sha256: token_sha256(&code),
            owner: owner.map(str::to_string),
            uses,
            used: 0,
            expires_unix: now.saturating_add(valid_for.as_secs()),
            created_unix: now,
            revoked: false,
        };
        let mut st = self.lock();
        st.writable()?;
        let taken = match &st.invitation_store {
            Some(s) => !s.insert_new(&rec)?,
            None => st.invitations.contains_key(&name),
        };
        if taken {
            return Err(IdentityError::FailedPrecondition(format!(
                "an invitation named {name:?} exists already"
            )));
        }
        st.invitations.insert(name.clone(), rec.clone());
        tracing::info!(invitation = name, uses, valid_s = valid_for.as_secs(), owner = ?owner, "invitation created");
        Ok((code, rec))
    }

    /// Every invitation.
    pub fn invitations(&self) -> Vec<InvitationRecord> {
        self.lock().invitations.values().cloned().collect()
    }

    /// Revoke an invitation (its credentials stay: revoke them with `workers revoke`).
    pub fn revoke_invitation(&self, name: &str) -> Result<InvitationRecord> {
        let mut st = self.lock();
        let Some(mut rec) = st.invitations.get(name).cloned() else {
            return Err(IdentityError::NotFound(format!("invitation {name}")));
        };
        st.writable()?;
        rec.revoked = true;
        if let Some(s) = &st.invitation_store {
            s.put(&rec)?;
        }
        st.invitations.insert(name.to_string(), rec.clone());
        tracing::info!(invitation = name, "invitation revoked");
        Ok(rec)
    }

    /// Turn an invitation `code` (empty: open enrolment) into a new untrusted worker
    /// credential named after `requested` (cleaned, with 4 random hex digits added). Its owner
    /// is the invitation's owner when it names one; else, for an invitation of several uses,
    /// `NAME@invitation` (its credentials count as one owner, so that one code cannot mint
    /// owners); else the credential itself. `peer` is rate-limited first.
    pub fn enroll(&self, code: &str, requested: &str, peer: Option<IpAddr>) -> Result<Enrolled> {
        self.enroll_at(code, requested, peer, now_unix())
    }

    pub(super) fn enroll_at(
        &self,
        code: &str,
        requested: &str,
        peer: Option<IpAddr>,
        now: u64,
    ) -> Result<Enrolled> {
        let cfg = &self.0.cfg;
        if let Some(ip) = peer
            && self.0.enrolments.check_key(&ip).is_err()
        {
            return Err(IdentityError::ResourceExhausted(format!(
                "too many enrolments from {ip} (at most {} per hour); try again later",
                cfg.enrolments_per_hour
            )));
        }
        let mut st = self.lock();
        let invitation = if code.is_empty() {
            if !cfg.open_enrolment {
                return Err(IdentityError::PermissionDenied(
                    "this coordinator enrols workers with an invitation code only (ask its operator for one)"
                        .into(),
                ));
            }
            if self.0.open_enrolments.check().is_err() {
                return Err(IdentityError::ResourceExhausted(
                    "too many open enrolments on this coordinator; try again later".into(),
                ));
            }
            None
        } else {
            let h = token_sha256(code);
            let Some(i) = st
                .invitations
                .values()
                .find(|i| super::ct_eq(&i.code_sha256, &h))
                .cloned()
            else {
                tracing::warn!(peer = ?peer, "enrolment refused: unknown invitation code");
                return Err(IdentityError::Unauthenticated(
                    "unknown invitation code".into(),
                ));
            };
            if let Some(why) = unusable(&i, now) {
                tracing::warn!(peer = ?peer, invitation = i.name, why, "enrolment refused");
                return Err(IdentityError::PermissionDenied(format!(
                    "invitation {} is {why}",
                    i.name
                )));
            }
            Some(i)
        };
        let token = new_token();
        let base = base_name(requested);
        let mut last = None;
        for _ in 0..NAME_ATTEMPTS {
            let name = format!("{base}-{:04x}", rand::random::<u16>());
            let owner = match &invitation {
                Some(InvitationRecord { owner: Some(o), .. }) => o.clone(),
                Some(i) if i.uses > 1 => format!("{}@invitation", i.name),
                _ => name.clone(),
            };
            let record = CredentialRecord {
                name: name.clone(),
                owner,
                trusted: false,
                state: CredentialState::Active,
                reason: String::new(),
                created_unix: now,
                token_sha256: token_sha256(&token),
            };
            if st.records.contains_key(&name) {
                continue;
            }
            st.writable()?;
            let stored = match &st.invitation_store {
                Some(s) => s.enrol(invitation.as_ref(), &record),
                None => Ok(()),
            };
            match stored {
                Ok(()) => {}
                Err(EnrolError::NameTaken(n)) => {
                    last = Some(n);
                    continue;
                }
                Err(EnrolError::Spent(n)) => {
                    return Err(IdentityError::PermissionDenied(format!(
                        "invitation {n} is used up"
                    )));
                }
                Err(EnrolError::Store(e)) => return Err(e.into()),
            }
            let e = self.enrolled(&mut st, token, record, invitation, peer);
            drop(st);
            let how = match &e.invitation {
                Some(i) => format!("untrusted, invitation {i}"),
                None => "untrusted, open enrolment".into(),
            };
            self.record(event(
                EventKind::Enrolled,
                &e.record.name,
                &e.record.owner,
                how,
            ));
            return Ok(e);
        }
        Err(IdentityError::FailedPrecondition(format!(
            "no free credential name for {base:?} (last tried {last:?}); ask for another name"
        )))
    }

    /// Note a stored enrolment in memory.
    fn enrolled(
        &self,
        st: &mut State,
        token: String,
        record: CredentialRecord,
        invitation: Option<InvitationRecord>,
        peer: Option<IpAddr>,
    ) -> Enrolled {
        let name = invitation.as_ref().map(|i| i.name.clone());
        if let Some(mut i) = invitation {
            i.used += 1;
            st.invitations.insert(i.name.clone(), i);
        }
        st.by_hash.insert(record.token_sha256, record.name.clone());
        st.records.insert(record.name.clone(), record.clone());
        tracing::info!(credential = record.name, owner = record.owner, invitation = ?name, peer = ?peer, "worker enrolled");
        Enrolled {
            token,
            record,
            invitation: name,
        }
    }
}
