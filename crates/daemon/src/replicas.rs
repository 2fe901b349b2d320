//! One replica among several on one etcd (`serve --store etcd://…`). Two loops, each
//! every third of the lease's TTL: the renewals keep the lease (or join again after it
//! expired), on an OS thread of their own so that nothing else can hold one back; the
//! turns claim and
//! let go of clusters so the live replicas share them evenly, and tell the fleet what
//! this replica holds now. The guarantees rest on `flightdeck-etcd`: a commit compares
//! the cluster's claim revision in the same transaction, and a replica past its lease
//! deadline on its own monotonic clock neither commits nor acts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
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

/// This replica: what it holds (read without etcd) and its lease (renewed on its own).
pub struct Membership {
    name: String,
    ttl: Duration,
    claimed: Claimed,
    /// Read by the renewals and the turns, side by side; written only to join again
    /// and to leave.
    replica: RwLock<Option<Replica>>,
    /// When this replica last compacted etcd's history.
    compacted: Mutex<Option<Instant>>,
    /// Renewals that failed since the last that got through.
    failed_renewals: AtomicU32,
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
            replica: RwLock::new(Some(replica)),
            compacted: Mutex::new(None),
            failed_renewals: AtomicU32::new(0),
        };
        Ok((store, Arc::new(m)))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Replica>> {
        self.replica.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Renews the lease once, or joins again if it expired (it blocks on etcd). Runs on
    /// its own: nothing else a replica does (balancing, handing claims to the
    /// backends, compaction) can hold a renewal back, so a slow turn never closes the
    /// fence of a replica whose etcd answers.
    fn renew(&self) {
        let lost = {
            let guard = self.read();
            let Some(replica) = guard.as_ref() else {
                return;
            };
            let started = Instant::now();
            match replica.keep_alive() {
                Ok(()) => {
                    let failed = self.failed_renewals.swap(0, Ordering::Relaxed);
                    if failed > 0 {
                        tracing::info!(replica = %self.name, failed, took_ms = started.elapsed().as_millis() as u64, "lease renewed again: the replica acts again");
                    }
                    return;
                }
                Err(StoreError::Fenced { message, .. }) => message,
                Err(e) => {
                    let failed = self.failed_renewals.fetch_add(1, Ordering::Relaxed) + 1;
                    tracing::warn!(replica = %self.name, failed, took_ms = started.elapsed().as_millis() as u64, error = %e, "cannot renew the lease; the replica stops acting at its deadline unless a renewal gets through");
                    return;
                }
            }
        };
        tracing::warn!(replica = %self.name, message = %lost, "lease lost: every claim is gone; joining again");
        let mut guard = self.replica.write().unwrap_or_else(|e| e.into_inner());
        if let Some(replica) = guard.as_mut()
            && let Err(e) = replica.rejoin()
        {
            tracing::warn!(replica = %self.name, error = %e, "cannot join again; trying at the next renewal");
        }
    }

    /// Claims and lets go so the live replicas share `store`'s clusters (it blocks on
    /// etcd); compacts etcd's history when due.
    fn balance(&self, store: &Store) {
        let guard = self.read();
        let Some(replica) = guard.as_ref() else {
            return;
        };
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

    fn send_guard(&self, cluster: &str) -> Option<flightdeck_http::SendGuard> {
        let claim = self.claimed.token(cluster)?;
        let (claimed, cluster) = (self.claimed.clone(), cluster.to_string());
        Some(Arc::new(move || {
            claimed.may_act(&cluster, claim, Instant::now())
        }))
    }

    fn caller(&self, cluster: &str) -> Option<String> {
        self.claimed
            .token(cluster)
            .map(|t| format!("replica={} claim={t}", self.name))
    }

    fn holder(&self, cluster: &str) -> String {
        // Joining again holds the lock while it waits on etcd: do not wait behind it.
        let Ok(guard) = self.replica.try_read() else {
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
        // The renewals run on a thread of their own, not on the async runtime: a runtime
        // whose workers are all held (by blocking store calls, under CPU contention)
        // must not starve the lease (a trial under a full build once saw one replica's
        // renewals stop without an error). The thread ends when `renewals` is dropped.
        let (renewals, stopped) = std::sync::mpsc::channel::<()>();
        let me = self.clone();
        let thread = std::thread::Builder::new()
            .name(format!("lease-{}", self.name))
            .spawn(move || {
                while matches!(
                    stopped.recv_timeout(every),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                ) {
                    me.renew();
                }
            });
        if let Err(e) = &thread {
            tracing::error!(replica = %self.name, error = %e, "cannot start the lease's renewals; the replica stops acting at its deadline");
        }
        tokio::spawn(async move {
            loop {
                let started = Instant::now();
                let (me, s) = (self.clone(), store.clone());
                if let Err(e) = tokio::task::spawn_blocking(move || me.balance(&s)).await {
                    tracing::warn!(replica = %self.name, error = %e, "the replica's turn failed");
                }
                let balanced = started.elapsed();
                if let Err(f) = fleet.sync_claims(&self.claimed.tokens()).await {
                    tracing::warn!(replica = %self.name, error = %f.message, "cannot hand the claims to the backends");
                }
                let took = started.elapsed();
                if took > self.ttl {
                    tracing::warn!(replica = %self.name, took_ms = took.as_millis() as u64, balancing_ms = balanced.as_millis() as u64, "a turn took longer than the lease's TTL (the lease is renewed on its own, but claims follow the live replicas late)");
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => {
                        drop(renewals);
                        return;
                    }
                }
            }
        })
    }

    /// The lease is revoked, so the other replicas take the clusters over at once
    /// instead of after the TTL.
    fn leave(&self) {
        let Some(replica) = self
            .replica
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
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
