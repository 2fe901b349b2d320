//! One replica among several on one etcd: its lease, its entry among the live replicas,
//! and the clusters it claims.
//!
//! - **Lease.** The replica holds an etcd lease and renews it; its entry under
//!   `replicas/` and every claim it makes are bound to it, so when it dies they go with
//!   it after the lease's TTL. It also keeps its own deadline (when it sent the last
//!   renewal that etcd answered, plus the TTL, less a margin) on its monotonic clock:
//!   past it, the fence refuses its commits before etcd has said anything.
//! - **Assignment.** Every replica computes the same assignment from the same live
//!   replicas and clusters ([`assign`]): clusters taken in an order of their own, each
//!   to its best-ranked replica (rendezvous hashing) that has fewer than its share
//!   (`ceil(clusters / replicas)`). So no replica holds more than its share, and a
//!   replica that joins or leaves moves few clusters.
//! - **Claims.** A cluster is claimed by creating `claims/<cluster>` under the lease,
//!   only if no claim exists (one etcd transaction). The claim's create revision is the
//!   fencing token every commit of that cluster compares. A replica lets go of a cluster
//!   assigned elsewhere by forgetting it in the fence first (no more commits), then
//!   deleting its claim; the new owner claims it once it is free.

use std::collections::{BTreeMap, BTreeSet};

use crate::assign::assign;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};
use flightdeck_store::{Store, StoreError};

use crate::EtcdOptions;
use crate::backend::EtcdStore;
use crate::conn::Conn;
use crate::fence::{Fence, Now};

/// How much earlier than the lease's TTL a replica takes its lease for lost.
pub const LEASE_MARGIN: Duration = Duration::from_secs(2);

/// How many revisions compaction keeps behind the newest. flightdeck reads no history
/// (its events are keys of their own); these are for an operator's `etcdctl watch --rev`.
pub const KEEP_REVISIONS: i64 = 1000;

/// A replica's lease and claims.
pub struct Replica {
    id: String,
    /// Where this replica's API answers, kept in its entry so the others can name it.
    address: String,
    lease: i64,
    ttl: Duration,
    conn: Arc<Conn>,
    fence: Arc<Fence>,
    now: Now,
}

/// What one [`Replica::balance`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Balance {
    /// The clusters this replica holds now.
    pub held: BTreeSet<String>,
    pub claimed: Vec<String>,
    pub released: Vec<String>,
    /// Assigned here but still claimed by another replica (which lets go of it on its
    /// next balance, or whose lease runs out).
    pub waiting: Vec<String>,
}

/// What a replica holds as its fence knows it (claims it made, less those it let go of
/// or found lost), read without asking etcd: cheap enough for every cloud call.
#[derive(Clone)]
pub struct Claimed(Arc<Fence>);

impl Claimed {
    /// The claim revision `cluster` is held under, if it is.
    pub fn token(&self, cluster: &str) -> Option<i64> {
        self.0.token(cluster)
    }

    pub fn held(&self) -> BTreeSet<String> {
        self.0.held().into_keys().collect()
    }

    /// Each held cluster with its claim revision.
    pub fn tokens(&self) -> BTreeMap<String, i64> {
        self.0.held()
    }

    /// Whether a call for `cluster` made under `claim` may still go out at `now`: not
    /// once the claim is gone or held anew, nor past the lease deadline on this
    /// replica's own clock (the store's `may_act`, without a store).
    pub fn may_act(&self, cluster: &str, claim: i64, now: Instant) -> Result<(), String> {
        self.0.may_act(cluster, Some(claim), now)
    }
}

impl Replica {
    /// Connects as replica `id`, whose API answers at `address`, with a lease of `ttl`,
    /// and returns the store whose commits this replica's claims fence, with the replica.
    pub fn join(
        options: &EtcdOptions,
        id: &str,
        address: &str,
        ttl: Duration,
        now: Now,
    ) -> Result<(Store, Replica), StoreError> {
        let conn = Arc::new(Conn::connect(options)?);
        let fail = |m: String| conn.error(&format!("replica {id}"), m);
        if id.is_empty() || id.contains('/') {
            return Err(fail("a replica's name is not empty and has no '/'".into()));
        }
        if ttl <= LEASE_MARGIN * 2 {
            return Err(fail(format!(
                "a lease of {}s is too short: it must be longer than twice the {}s safety margin",
                ttl.as_secs(),
                LEASE_MARGIN.as_secs()
            )));
        }
        let fence = Arc::new(Fence::default());
        fence.turn_on();
        let (lease, deadline) = Self::grant(&conn, ttl, &now)?;
        fence.set_deadline(deadline);
        let me = Replica {
            id: id.to_string(),
            address: address.to_string(),
            lease,
            ttl,
            conn: conn.clone(),
            fence: fence.clone(),
            now: now.clone(),
        };
        me.register()?;
        let store = EtcdStore::new(conn, fence, now, options.max_txn_ops);
        Ok((Store::with_backend(Box::new(store)), me))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// A new lease of `ttl`, and the deadline it gives on this replica's clock.
    fn grant(conn: &Conn, ttl: Duration, now: &Now) -> Result<(i64, Instant), StoreError> {
        let sent = now();
        let secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        let lease = conn
            .call("granting a lease", move |mut c| async move {
                c.lease_grant(secs, None).await
            })?
            .id();
        Ok((lease, sent + ttl - LEASE_MARGIN))
    }

    /// After its lease expired (the process was paused, or cut off from etcd for longer
    /// than the TTL): every claim is gone with the old lease, so the fence forgets them
    /// all first; then a new lease and a new entry. Claims come back through
    /// [`Replica::balance`], under new revisions.
    pub fn rejoin(&mut self) -> Result<(), StoreError> {
        for c in self.held() {
            self.fence.drop_claim(&c);
        }
        // Gone already when it expired; revoked here otherwise, with what it still
        // binds (the old entry would refuse the new one).
        let old = self.lease;
        let _ = self
            .conn
            .call("revoking the old lease", move |mut c| async move {
                c.lease_revoke(old).await
            });
        let (lease, deadline) = Self::grant(&self.conn, self.ttl, &self.now)?;
        self.lease = lease;
        self.fence.set_deadline(deadline);
        self.register()
    }

    /// The fencing token (the claim's create revision) this replica holds `cluster`
    /// under, if it does.
    pub fn token(&self, cluster: &str) -> Option<i64> {
        self.claimed().token(cluster)
    }

    /// What this replica holds, readable from anywhere without asking etcd.
    pub fn claimed(&self) -> Claimed {
        Claimed(self.fence.clone())
    }

    /// Which replica claims `cluster` now, with where its API answers.
    pub fn holder(&self, cluster: &str) -> Result<Option<(String, String)>, StoreError> {
        let Some((owner, _)) = self.claims()?.remove(cluster) else {
            return Ok(None);
        };
        let key = format!("{}{owner}", self.replicas_prefix());
        let k = key.clone();
        let resp = self.conn.call(&format!("reading {key}"), move |mut c| {
            let k = k.clone();
            async move { c.get(k, None).await }
        })?;
        let address = resp
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
            .unwrap_or_default();
        Ok(Some((owner, address)))
    }

    fn replicas_prefix(&self) -> String {
        format!("{}replicas/", self.conn.prefix)
    }

    /// Puts this replica among the live ones, under its lease; refused when a live
    /// replica already has its name.
    fn register(&self) -> Result<(), StoreError> {
        let key = format!("{}{}", self.replicas_prefix(), self.id);
        let (created, _) = self.conn.create_leased(
            "registering the replica",
            key,
            self.address.clone(),
            self.lease,
        )?;
        if !created {
            return Err(self.conn.error(
                "registering the replica",
                format!("a live replica is already named {}", self.id),
            ));
        }
        Ok(())
    }

    /// Renews the lease once. Its deadline moves to when this renewal was sent plus the
    /// TTL, less [`LEASE_MARGIN`]; a lease etcd says has expired is an error, and the
    /// fence stays shut.
    pub fn keep_alive(&self) -> Result<(), StoreError> {
        // When the renewal etcd answered was sent: a call that failed over to another
        // member after one did not answer counts from its last attempt, not its first
        // (a deadline counted from the first is already past when a stuck member took
        // longer than TTL less the margin to time out).
        let sent = Arc::new(std::sync::Mutex::new((self.now)()));
        let lease = self.lease;
        let (now, at) = (self.now.clone(), sent.clone());
        let ttl = self.conn.call("renewing the lease", move |mut c| {
            *at.lock().unwrap_or_else(|e| e.into_inner()) = now();
            async move {
                let renewed = async {
                    let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
                    keeper.keep_alive().await?;
                    Ok(stream.message().await?.map(|m| m.ttl()).unwrap_or(0))
                }
                .await;
                match renewed {
                    // The lease expired and etcd forgot it: as good as a TTL of 0.
                    Err(etcd_client::Error::LeaseKeepAliveError(m)) if m.contains("not found") => {
                        Ok(0)
                    }
                    other => other,
                }
            }
        })?;
        let sent = *sent.lock().unwrap_or_else(|e| e.into_inner());
        if ttl <= 0 {
            return Err(StoreError::Fenced {
                path: self.conn.describe(),
                message: format!("replica {}'s lease has expired", self.id),
            });
        }
        // etcd renews to the TTL it granted: trust the shorter of that and ours.
        let granted = Duration::from_secs(u64::try_from(ttl).unwrap_or(0)).min(self.ttl);
        let deadline = sent + granted.saturating_sub(LEASE_MARGIN);
        self.fence.set_deadline(deadline);
        if (self.now)() >= deadline {
            return Err(self.conn.error(
                "renewing the lease",
                format!(
                    "etcd answered after the deadline that renewal gave ({} s after it was sent); the fence stays shut",
                    (self.now)().saturating_duration_since(sent).as_secs()
                ),
            ));
        }
        Ok(())
    }

    /// The live replicas, by name.
    pub fn live(&self) -> Result<Vec<String>, StoreError> {
        self.conn.names_under(&self.replicas_prefix())
    }

    /// The clusters this replica holds.
    pub fn held(&self) -> BTreeSet<String> {
        self.fence.held().into_keys().collect()
    }

    /// Claims the clusters assigned to this replica that are free, and lets go of those
    /// assigned elsewhere.
    pub fn balance(&self, clusters: &[String]) -> Result<Balance, StoreError> {
        let live = self.live()?;
        let assignment = assign(clusters, &live);
        let claims = self.claims()?;
        let mut out = Balance::default();
        for (cluster, (owner, revision)) in &claims {
            let mine = assignment.get(cluster) == Some(&self.id);
            if owner == &self.id && !mine {
                self.release(cluster)?;
                out.released.push(cluster.clone());
            } else if owner == &self.id {
                self.fence.hold(cluster, *revision);
            } else if mine {
                out.waiting.push(cluster.clone());
            }
        }
        for (cluster, owner) in &assignment {
            if owner == &self.id && !claims.contains_key(cluster) && self.claim(cluster)? {
                out.claimed.push(cluster.clone());
            }
        }
        out.held = self.held();
        Ok(out)
    }

    /// Every claim: cluster → (replica, create revision).
    fn claims(&self) -> Result<BTreeMap<String, (String, i64)>, StoreError> {
        let prefix = self.conn.claim_key("");
        let p = prefix.clone();
        let resp = self.conn.call("reading the claims", move |mut c| {
            let p = p.clone();
            async move { c.get(p, Some(GetOptions::new().with_prefix())).await }
        })?;
        Ok(resp
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                let cluster = key.strip_prefix(&prefix)?.to_string();
                let owner = String::from_utf8_lossy(kv.value()).into_owned();
                Some((cluster, (owner, kv.create_revision())))
            })
            .collect())
    }

    /// Claims `cluster` if no replica does; whether it did.
    fn claim(&self, cluster: &str) -> Result<bool, StoreError> {
        let (created, revision) = self.conn.create_leased(
            &format!("claiming {cluster}"),
            self.conn.claim_key(cluster),
            self.id.clone(),
            self.lease,
        )?;
        if !created {
            return Ok(false);
        }
        // The put's revision is the claim's create revision: the fencing token.
        self.fence.hold(cluster, revision);
        Ok(true)
    }

    /// Lets go of `cluster`: no commit of it from here on, then its claim deleted (only
    /// if it is still this replica's).
    fn release(&self, cluster: &str) -> Result<(), StoreError> {
        self.fence.drop_claim(cluster);
        let key = self.conn.claim_key(cluster);
        let txn = Txn::new()
            .when(vec![Compare::value(
                key.clone(),
                CompareOp::Equal,
                self.id.clone(),
            )])
            .and_then(vec![TxnOp::delete(key, None::<DeleteOptions>)]);
        self.conn
            .call(&format!("releasing {cluster}"), move |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })?;
        Ok(())
    }

    /// Compacts etcd's history to `keep` revisions behind the newest, so old revisions
    /// of every rewritten key do not pile up; the revision compacted to, or `None` when
    /// there was nothing that old (or another replica compacted as far already).
    pub fn compact(&self, keep: i64) -> Result<Option<i64>, StoreError> {
        let key = format!("{}{}", self.replicas_prefix(), self.id);
        let resp = self
            .conn
            .call("reading the newest revision", move |mut c| {
                let key = key.clone();
                async move { c.get(key, Some(GetOptions::new().with_keys_only())).await }
            })?;
        let newest = resp.header().map(|h| h.revision()).unwrap_or(0);
        let to = newest - keep.max(0);
        if to <= 0 {
            return Ok(None);
        }
        match self.conn.call(
            &format!("compacting to revision {to}"),
            move |mut c| async move { c.compact(to, None).await },
        ) {
            Ok(_) => Ok(Some(to)),
            // "mvcc: required revision has been compacted": compacted past it already.
            Err(e) if e.to_string().contains("has been compacted") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Leaves: the lease is revoked, and every claim and the replica's entry go with it.
    pub fn leave(self) -> Result<(), StoreError> {
        for c in self.held() {
            self.fence.drop_claim(&c);
        }
        let lease = self.lease;
        self.conn
            .call("revoking the lease", move |mut c| async move {
                c.lease_revoke(lease).await
            })
            .map(|_| ())
    }
}
