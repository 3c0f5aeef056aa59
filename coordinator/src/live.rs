//! The coordinator the ports serve, and its reopening, in this process, after its store failed.
//!
//! sled 0.34 keeps a write error (a full disk) for good: every later write of that database
//! fails, also once space is back. [`Live::watch`] (run by `serve` every
//! [`WATCH_INTERVAL`]) flushes the store; when the flush fails and the store's disk takes
//! writes again ([`Store::probe_dir`]), it lets go of the failed store and opens the service
//! again from the directory, as a restart would: the book, results, trust, programs and
//! credentials as last made durable. Nothing acknowledged is lost: a result is acknowledged
//! only after the flush that stored it, and the failed store is never written again. The ports
//! stay open; until the service is back, calls answer "unavailable, retry" ([`Live::get`]) and
//! `/readyz` says no. Workers register again (the new service knows no sessions' workers) and
//! a result of a lease the old service handed out is searched again, as after a restart.
//!
//! sled's file lock is held until the last handle of the failed database is gone. The handles
//! held here and by the credential registry ([`Identities::detach`]) are dropped on a thread of
//! their own that nothing joins (a drop flushes, and sled 0.34's drop-time flush was seen to hang,
//! see `store/sled_gate.rs`); calls in flight drop theirs when they end. Until the lock is
//! free, every watch tries the open again.

use crate::error::{CoordinatorError, Result};
use crate::identity::Identities;
use crate::service::{Clock, Coordinator, ServiceConfig};
use crate::store::Store;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How often `serve` checks its store ([`Live::watch`]).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How to open the service again.
struct Reopen {
    db: PathBuf,
    cfg: ServiceConfig,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Reopen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reopen").field("db", &self.db).finish()
    }
}

#[derive(Debug)]
struct Inner {
    /// None while the store is being reopened.
    current: RwLock<Option<Coordinator>>,
    ids: Identities,
    /// None: a service that is never reopened (in memory, tests, `local`).
    reopen: Option<Reopen>,
    /// Why the store failed, while it is failed or being reopened.
    failed: Mutex<Option<String>>,
    /// Reopens that succeeded.
    reopens: AtomicU64,
}

/// The coordinator the transports serve (a cheap-clone handle).
#[derive(Debug, Clone)]
pub struct Live(Arc<Inner>);

impl Live {
    /// A service that is never reopened.
    pub fn fixed(c: Coordinator, ids: Identities) -> Live {
        Live(Arc::new(Inner {
            current: RwLock::new(Some(c)),
            ids,
            reopen: None,
            failed: Mutex::new(None),
            reopens: AtomicU64::new(0),
        }))
    }

    /// A service over the store in `db`, opened again from it (with `c`'s configuration and
    /// `clock`) after the store failed.
    pub fn reopening(c: Coordinator, ids: Identities, db: PathBuf, clock: Arc<dyn Clock>) -> Live {
        let cfg = c.config().clone();
        Live(Arc::new(Inner {
            current: RwLock::new(Some(c)),
            ids,
            reopen: Some(Reopen { db, cfg, clock }),
            failed: Mutex::new(None),
            reopens: AtomicU64::new(0),
        }))
    }

    /// The service, or [`CoordinatorError::Unavailable`] while its store is being reopened.
    pub fn get(&self) -> Result<Coordinator> {
        self.0
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                CoordinatorError::Unavailable(format!(
                    "the store is being reopened after it failed ({})",
                    self.failure().unwrap_or_default()
                ))
            })
    }

    /// The credential registry.
    pub fn ids(&self) -> &Identities {
        &self.0.ids
    }

    /// Why the store failed, while it is failed (and not reopened yet).
    pub fn failure(&self) -> Option<String> {
        self.0
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Times the store was reopened since start.
    pub fn reopens(&self) -> u64 {
        self.0.reopens.load(Ordering::SeqCst)
    }

    fn set_failure(&self, why: Option<String>) {
        *self.0.failed.lock().unwrap_or_else(|p| p.into_inner()) = why;
    }

    /// One check of the store (blocking; see the module doc): flush it; if that fails and the
    /// disk takes writes, let go of it and open the service again; while it is let go, try
    /// the open again.
    pub fn watch(&self) {
        let Some(reopen) = &self.0.reopen else { return };
        let current = self
            .0
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(c) = current {
            let Err(e) = c.flush_store() else {
                return;
            };
            if self.failure().is_none() {
                metrics::counter!(crate::telemetry::STORE_ERRORS).increment(1);
                tracing::error!(error = %e, "the store failed; it is reopened once its disk takes writes again");
            }
            self.set_failure(Some(e.to_string()));
            if let Err(e) = Store::probe_dir(&reopen.db) {
                tracing::debug!(error = %e, "the store's disk takes no writes yet");
                return;
            }
            // Let go of every handle of the failed store held here.
            let taken = self
                .0
                .current
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let detached = self.0.ids.detach();
            drop(c);
            let released = std::thread::Builder::new()
                .name("store-release".into())
                .spawn(move || drop((taken, detached)));
            if let Err(e) = released {
                tracing::error!(error = %e, "no thread to release the failed store on");
            }
            tracing::warn!(db = %reopen.db.display(), "the disk takes writes again: reopening the store");
        }
        match self.open(reopen) {
            Ok(c) => {
                *self.0.current.write().unwrap_or_else(|p| p.into_inner()) = Some(c);
                self.set_failure(None);
                let n = self.0.reopens.fetch_add(1, Ordering::SeqCst) + 1;
                tracing::info!(db = %reopen.db.display(), reopens = n, "store reopened: serving again");
            }
            Err(e) => {
                tracing::warn!(error = %e, "the store could not be reopened yet; trying again");
            }
        }
    }

    /// The service opened again from the store, as a start opens it; the credential registry
    /// reads the store's credentials again.
    fn open(&self, reopen: &Reopen) -> Result<Coordinator> {
        let store = Store::open_book_with_cache(&reopen.db, reopen.cfg.cache_capacity)?;
        let creds = store.credentials()?;
        let invitations = store.invitations()?;
        let c = Coordinator::open(store, &reopen.db, reopen.cfg.clone(), reopen.clock.clone())?;
        self.0
            .ids
            .reattach(creds, invitations, c.events().clone())
            .map_err(|e| CoordinatorError::Internal(format!("reading worker credentials: {e}")))?;
        crate::server::attach(&c, &self.0.ids);
        Ok(c)
    }
}
