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
use std::time::Duration;

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};
use flightdeck_store::{Store, StoreError};

use crate::EtcdOptions;
use crate::backend::{Conn, EtcdStore};
use crate::fence::{Fence, Now};

/// How much earlier than the lease's TTL a replica takes its lease for lost.
pub const LEASE_MARGIN: Duration = Duration::from_secs(2);

/// A replica's lease and claims.
pub struct Replica {
    id: String,
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

impl Replica {
    /// Connects as replica `id` with a lease of `ttl`, and returns the store whose
    /// commits this replica's claims fence, with the replica.
    pub fn join(
        options: &EtcdOptions,
        id: &str,
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
        let sent = now();
        let secs = ttl.as_secs() as i64;
        let lease = conn
            .call("granting a lease", move |mut c| async move {
                c.lease_grant(secs, None).await
            })?
            .id();
        fence.set_deadline(sent + ttl - LEASE_MARGIN);
        let me = Replica {
            id: id.to_string(),
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

    fn replicas_prefix(&self) -> String {
        format!("{}replicas/", self.conn.prefix)
    }

    /// Puts this replica among the live ones, under its lease; refused when a live
    /// replica already has its name.
    fn register(&self) -> Result<(), StoreError> {
        let key = format!("{}{}", self.replicas_prefix(), self.id);
        let (created, _) =
            self.conn
                .create_leased("registering the replica", key, self.id.clone(), self.lease)?;
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
        let sent = (self.now)();
        let lease = self.lease;
        let ttl = self
            .conn
            .call("renewing the lease", move |mut c| async move {
                let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
                keeper.keep_alive().await?;
                Ok(stream.message().await?.map(|m| m.ttl()).unwrap_or(0))
            })?;
        if ttl <= 0 {
            return Err(StoreError::Fenced {
                path: self.conn.describe(),
                message: format!("replica {}'s lease has expired", self.id),
            });
        }
        self.fence.set_deadline(sent + self.ttl - LEASE_MARGIN);
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
        let resp = self
            .conn
            .call("reading the claims", move |mut c| async move {
                c.get(p, Some(GetOptions::new().with_prefix())).await
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
            .call(&format!("releasing {cluster}"), move |mut c| async move {
                c.txn(txn).await
            })?;
        Ok(())
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
