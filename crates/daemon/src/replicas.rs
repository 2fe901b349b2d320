//! One replica among several on one etcd (`serve --store etcd://…`): its turn every
//! third of the lease's TTL renews the lease (or joins again after it expired), claims
//! and lets go of clusters so the live replicas share them evenly, and tells the fleet
//! what it holds now. The guarantees rest on `flightdeck-etcd`: a commit compares the
//! cluster's claim revision in the same transaction, and a replica past its lease
//! deadline on its own monotonic clock neither commits nor acts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flightdeck_etcd::{Claimed, KEEP_REVISIONS, Replica};
use flightdeck_store::{Store, StoreError};
use tokio::sync::watch;

use crate::claims::{Claims, Member, ReplicaOptions};
use crate::fleet::Fleet;

/// The shortest turn, whatever the TTL.
const TURN_MIN: Duration = Duration::from_millis(500);

/// How often a replica compacts etcd's history (each does; a compaction another
/// already made is a no-op).
const COMPACT_EVERY: Duration = Duration::from_secs(300);

/// This replica: what it holds (read without etcd) and its lease (renewed by its turns).
pub struct Membership {
    name: String,
    ttl: Duration,
    claimed: Claimed,
    replica: Mutex<Option<Replica>>,
    /// When this replica last compacted etcd's history.
    compacted: Mutex<Option<Instant>>,
}

impl Membership {
    /// Joins as `options.name`, whose API answers at `address`: returns the store its
    /// claims fence, with the membership.
    pub fn join(
        options: &ReplicaOptions,
        address: &str,
    ) -> Result<(Store, Arc<Membership>), StoreError> {
        let (store, replica) = Replica::join(
            &options.etcd,
            &options.name,
            address,
            options.ttl,
            Arc::new(Instant::now),
        )?;
        let m = Membership {
            name: options.name.clone(),
            ttl: options.ttl,
            claimed: replica.claimed(),
            replica: Mutex::new(Some(replica)),
            compacted: Mutex::new(None),
        };
        Ok((store, Arc::new(m)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Replica>> {
        self.replica.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One turn (it blocks on etcd): renew the lease, or join again if it expired; then
    /// claim and let go so the live replicas share `store`'s clusters. Failures are
    /// logged: the fence closes by itself when the lease deadline passes.
    fn turn(&self, store: &Store) {
        let mut guard = self.lock();
        let Some(replica) = guard.as_mut() else {
            return;
        };
        match replica.keep_alive() {
            Ok(()) => {}
            Err(StoreError::Fenced { message, .. }) => {
                tracing::warn!(replica = %self.name, %message, "lease lost: every claim is gone; joining again");
                if let Err(e) = replica.rejoin() {
                    tracing::warn!(replica = %self.name, error = %e, "cannot join again; trying at the next turn");
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(replica = %self.name, error = %e, "cannot renew the lease; the replica stops acting at its deadline unless a renewal gets through");
                return;
            }
        }
        let clusters = match store.keys("spec") {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(replica = %self.name, error = %e, "cannot list the clusters");
                return;
            }
        };
        match replica.balance(&clusters) {
            Ok(b) if !b.claimed.is_empty() || !b.released.is_empty() => {
                tracing::info!(replica = %self.name, claimed = ?b.claimed, released = ?b.released, held = b.held.len(), waiting = b.waiting.len(), "claims changed");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(replica = %self.name, error = %e, "cannot balance the claims"),
        }
        self.compact_if_due(replica);
    }

    fn compact_if_due(&self, replica: &Replica) {
        let mut last = self.compacted.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < COMPACT_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        match replica.compact(KEEP_REVISIONS) {
            Ok(Some(to)) => {
                tracing::info!(replica = %self.name, revision = to, "etcd's history compacted")
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(replica = %self.name, error = %e, "cannot compact etcd's history")
            }
        }
    }
}

impl Claims for Membership {
    fn holds(&self, cluster: &str) -> bool {
        self.claimed.token(cluster).is_some()
    }

    fn held(&self) -> BTreeMap<String, i64> {
        self.claimed.tokens()
    }

    fn caller(&self, cluster: &str) -> Option<String> {
        self.claimed
            .token(cluster)
            .map(|t| format!("replica={} claim={t}", self.name))
    }

    fn holder(&self, cluster: &str) -> String {
        // The turn holds the lock while it waits on etcd: do not wait behind it.
        let Ok(guard) = self.replica.try_lock() else {
            return "another replica".into();
        };
        match guard.as_ref().map(|r| r.holder(cluster)) {
            Some(Ok(Some((name, address)))) => format!("replica {name} ({address})"),
            Some(Ok(None)) => "no replica yet (it is claimed within a few seconds)".into(),
            Some(Err(e)) => format!("another replica (cannot ask etcd which: {e})"),
            None => "another replica".into(),
        }
    }
}

impl Member for Membership {
    fn start(
        self: Arc<Self>,
        store: Arc<Store>,
        fleet: Arc<Fleet>,
        mut stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let every = (self.ttl / 3).max(TURN_MIN);
        tokio::spawn(async move {
            loop {
                let (me, s) = (self.clone(), store.clone());
                if let Err(e) = tokio::task::spawn_blocking(move || me.turn(&s)).await {
                    tracing::warn!(replica = %self.name, error = %e, "the replica's turn failed");
                }
                if let Err(f) = fleet.sync_claims(&self.claimed.tokens()).await {
                    tracing::warn!(replica = %self.name, error = %f.message, "cannot hand the claims to the backends");
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => return,
                }
            }
        })
    }

    /// The lease is revoked, so the other replicas take the clusters over at once
    /// instead of after the TTL.
    fn leave(&self) {
        let Some(replica) = self.lock().take() else {
            return;
        };
        match replica.leave() {
            Ok(()) => {
                tracing::info!(replica = %self.name, "left: its clusters go to the other replicas now")
            }
            Err(e) => {
                tracing::warn!(replica = %self.name, error = %e, "cannot revoke the lease; the other replicas take over when it expires")
            }
        }
    }
}
