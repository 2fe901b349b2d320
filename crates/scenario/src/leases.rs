//! A store with etcd's lease semantics in virtual time, for the swarm's split-brain
//! seeds: several engines, each a replica with a lease, share one store and claim its
//! clusters as `flightdeck serve --store etcd://…` replicas do (`flightdeck-etcd`).
//!
//! [`LeaseHub`] stands for etcd: the records (an embedded store in memory), the leases
//! with their expiry on the hub's clock, each cluster's claim bound to its holder's
//! lease and numbered by a revision (the fencing token), and every claim's lifetime
//! ([`ClaimSpan`]): the ground truth a check compares the cloud's mutation log with.
//! [`LeasedBackend`] is one replica's handle on it, and fences like the etcd backend:
//! a commit that writes a cluster's state passes only if the cluster is still claimed
//! under the revision the replica holds (checked by the hub, as etcd's transaction
//! compares it), and nothing passes once the replica's lease deadline has gone by on
//! its own clock. [`ReplicaFence::renew`] and [`ReplicaFence::balance`] are the
//! replica's lease loop and claim turn, run by the caller when the replica is not
//! paused.
//!
//! Each check can be switched off ([`Unfenced`]), to show the swarm notices.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use flightdeck_cloud::{Clock, SimClock, Timestamp};
use flightdeck_spec::Duration;
use flightdeck_store::{Backend, RedbStore, StoreError, Write};

/// One claim from when it was made until it ended (released, or its lease expired).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimSpan {
    pub cluster: String,
    pub holder: String,
    pub revision: i64,
    pub from: Timestamp,
    /// `None` while it holds.
    pub to: Option<Timestamp>,
}

#[derive(Default)]
struct HubState {
    revision: i64,
    /// Each live lease: holder → when it expires.
    leases: BTreeMap<String, Timestamp>,
    /// Each claim: cluster → index into `history`.
    claims: BTreeMap<String, usize>,
    history: Vec<ClaimSpan>,
}

impl HubState {
    /// Drops the leases that ran out by `now`, and every claim bound to them.
    fn expire(&mut self, now: Timestamp) {
        let gone: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(h, _)| h.clone())
            .collect();
        for holder in gone {
            self.leases.remove(&holder);
            let dropped: Vec<String> = self
                .claims
                .iter()
                .filter(|(_, i)| self.history[**i].holder == holder)
                .map(|(c, _)| c.clone())
                .collect();
            for c in dropped {
                self.end_claim(&c, now);
            }
        }
    }

    fn end_claim(&mut self, cluster: &str, now: Timestamp) {
        if let Some(i) = self.claims.remove(cluster) {
            self.history[i].to = Some(now);
        }
    }

    fn claim_of(&self, cluster: &str) -> Option<&ClaimSpan> {
        self.claims.get(cluster).map(|i| &self.history[*i])
    }
}

/// etcd, simulated: records, leases and claims on one clock.
pub struct LeaseHub {
    data: RedbStore,
    clock: SimClock,
    state: Mutex<HubState>,
}

impl LeaseHub {
    pub fn new(clock: SimClock) -> Result<Arc<LeaseHub>, StoreError> {
        Ok(Arc::new(LeaseHub {
            data: RedbStore::in_memory()?,
            clock,
            state: Mutex::new(HubState::default()),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.expire(self.clock.now());
        s
    }

    /// Grants `holder` a lease of `ttl` from now, or keeps its live one alive; `false`
    /// when `keep` is set and the lease had already run out (its claims are gone).
    fn lease(&self, holder: &str, ttl: Duration, keep: bool) -> bool {
        let now = self.clock.now();
        let mut s = self.lock();
        if keep && !s.leases.contains_key(holder) {
            return false;
        }
        s.leases.insert(holder.to_string(), now.plus(ttl));
        true
    }

    /// The holders whose lease is live, in order.
    pub fn live(&self) -> Vec<String> {
        self.lock().leases.keys().cloned().collect()
    }

    /// Every claim that holds now: cluster → (holder, revision).
    pub fn claims(&self) -> BTreeMap<String, (String, i64)> {
        let s = self.lock();
        s.claims
            .iter()
            .map(|(c, i)| {
                (
                    c.clone(),
                    (s.history[*i].holder.clone(), s.history[*i].revision),
                )
            })
            .collect()
    }

    /// Every claim ever made, ended or not, in the order they were made.
    pub fn history(&self) -> Vec<ClaimSpan> {
        self.lock().history.clone()
    }

    /// Claims `cluster` for `holder` if nobody holds it and `holder`'s lease is live;
    /// the claim's revision if it did.
    fn claim(&self, cluster: &str, holder: &str) -> Option<i64> {
        let now = self.clock.now();
        let mut s = self.lock();
        if s.claims.contains_key(cluster) || !s.leases.contains_key(holder) {
            return None;
        }
        s.revision += 1;
        let revision = s.revision;
        s.history.push(ClaimSpan {
            cluster: cluster.to_string(),
            holder: holder.to_string(),
            revision,
            from: now,
            to: None,
        });
        let i = s.history.len() - 1;
        s.claims.insert(cluster.to_string(), i);
        Some(revision)
    }

    /// Deletes `cluster`'s claim if it is still `holder`'s.
    fn release(&self, cluster: &str, holder: &str) {
        let now = self.clock.now();
        let mut s = self.lock();
        if s.claim_of(cluster).is_some_and(|c| c.holder == holder) {
            s.end_claim(cluster, now);
        }
    }

    /// Commits `writes` only if every cluster in `tokens` is still claimed under that
    /// revision: one transaction, as etcd compares the claim keys' create revisions.
    fn commit_guarded(&self, writes: &[Write], tokens: &[(String, i64)]) -> Result<(), StoreError> {
        let s = self.lock();
        for (cluster, revision) in tokens {
            if s.claim_of(cluster).map(|c| c.revision) != Some(*revision) {
                return Err(StoreError::Fenced {
                    path: "simulated etcd".into(),
                    message: format!(
                        "cluster {cluster} was claimed by another replica; nothing of this commit was written"
                    ),
                });
            }
        }
        self.data.commit(writes)
    }
}

/// A fencing check switched off, for a test that shows the swarm catches its absence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unfenced {
    /// The replica acts and commits past its lease deadline on its own clock.
    pub own_deadline: bool,
    /// The hub commits a write without comparing the claim's revision.
    pub claim_revision: bool,
}

#[derive(Default)]
struct Local {
    /// Off until the replica's first lease: a store nobody leased is fenced by nothing
    /// (as the etcd backend's fence before its replica starts).
    on: bool,
    held: BTreeMap<String, i64>,
    /// Until when the lease holds as this replica last knew it, less the margin; `None`
    /// before its first lease.
    deadline: Option<Timestamp>,
}

/// One replica's view of its lease and claims (the fence), shared by its store handle
/// and the loop that renews and balances.
pub struct ReplicaFence {
    hub: Arc<LeaseHub>,
    name: String,
    ttl: Duration,
    margin: Duration,
    unfenced: Unfenced,
    local: Mutex<Local>,
}

/// What a claim turn changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Turn {
    /// Clusters this replica holds now and did not before.
    pub taken_up: Vec<String>,
    /// Clusters it held before and must let go of.
    pub let_go: Vec<String>,
}

impl ReplicaFence {
    pub fn new(
        hub: Arc<LeaseHub>,
        name: &str,
        ttl: Duration,
        margin: Duration,
        unfenced: Unfenced,
    ) -> Arc<ReplicaFence> {
        assert!(
            margin < ttl,
            "the safety margin must be shorter than the lease"
        );
        Arc::new(ReplicaFence {
            hub,
            name: name.to_string(),
            ttl,
            margin,
            unfenced,
            local: Mutex::new(Local::default()),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn local(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the lease alive, or takes a new one when it had run out: then every claim
    /// it held is gone, and `renew` says which clusters to let go of.
    pub fn renew(&self) -> Vec<String> {
        let sent = self.hub.clock.now();
        let mut lost = Vec::new();
        if !self.hub.lease(&self.name, self.ttl, true) {
            let mut l = self.local();
            lost = std::mem::take(&mut l.held).into_keys().collect();
            l.deadline = None;
            drop(l);
            self.hub.lease(&self.name, self.ttl, false);
        }
        let mut l = self.local();
        l.on = true;
        let deadline =
            sent.plus_millis(self.ttl.as_millis().saturating_sub(self.margin.as_millis()));
        l.deadline = Some(l.deadline.map_or(deadline, |d| d.max(deadline)));
        lost
    }

    /// One claim turn: the clusters of `all` are shared among the live replicas
    /// (`flightdeck_etcd::assign`); this replica releases what is no longer its share,
    /// forgets claims that moved, and claims its share's free clusters.
    pub fn balance(&self, all: &[String]) -> Turn {
        let live = self.hub.live();
        if !live.contains(&self.name) {
            return Turn {
                let_go: std::mem::take(&mut self.local().held).into_keys().collect(),
                taken_up: Vec::new(),
            };
        }
        let assignment = flightdeck_etcd::assign(all, &live);
        let claims = self.hub.claims();
        let mut turn = Turn::default();
        let held: Vec<(String, i64)> = self.local().held.clone().into_iter().collect();
        for (cluster, revision) in held {
            let still = claims.get(&cluster) == Some(&(self.name.clone(), revision));
            let mine = assignment.get(&cluster) == Some(&self.name);
            if !still || !mine {
                self.local().held.remove(&cluster);
                if still {
                    self.hub.release(&cluster, &self.name);
                }
                turn.let_go.push(cluster);
            }
        }
        for (cluster, owner) in &assignment {
            if owner == &self.name
                && !claims.contains_key(cluster)
                && let Some(revision) = self.hub.claim(cluster, &self.name)
            {
                self.local().held.insert(cluster.clone(), revision);
                turn.taken_up.push(cluster.clone());
            }
        }
        turn
    }

    /// The clusters this replica believes it holds.
    pub fn held(&self) -> BTreeSet<String> {
        self.local().held.keys().cloned().collect()
    }

    /// The revision of each of `clusters`' claims, or why this replica must not write
    /// them.
    fn tokens(&self, clusters: &BTreeSet<String>) -> Result<Vec<(String, i64)>, String> {
        let l = self.local();
        if !l.on {
            return Ok(Vec::new());
        }
        let now = self.hub.clock.now();
        if !self.unfenced.own_deadline && l.deadline.is_none_or(|d| now >= d) {
            return Err(
                "this replica's lease has run out on its own clock; it writes nothing until it is renewed"
                    .into(),
            );
        }
        clusters
            .iter()
            .map(|c| match l.held.get(c) {
                Some(rev) => Ok((c.clone(), *rev)),
                None => Err(format!("cluster {c} is not held by this replica")),
            })
            .collect()
    }
}

/// One replica's store: the hub's records, fenced by the replica's claims.
pub struct LeasedBackend {
    fence: Arc<ReplicaFence>,
}

impl LeasedBackend {
    pub fn new(fence: Arc<ReplicaFence>) -> LeasedBackend {
        LeasedBackend { fence }
    }

    fn fenced(&self, message: String) -> StoreError {
        StoreError::Fenced {
            path: self.describe(),
            message,
        }
    }
}

impl Backend for LeasedBackend {
    fn describe(&self) -> String {
        format!("simulated etcd (replica {})", self.fence.name)
    }
    fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.fence.hub.data.get(table, key)
    }
    fn keys(&self, table: &str) -> Result<Vec<String>, StoreError> {
        self.fence.hub.data.keys(table)
    }
    fn scan(&self, table: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.fence.hub.data.scan(table)
    }
    fn shared(&self) -> bool {
        true
    }
    fn events(&self, key: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        self.fence.hub.data.events(key)
    }
    fn commit(&self, writes: &[Write]) -> Result<(), StoreError> {
        let clusters = flightdeck_etcd::clusters_written(writes);
        let tokens = if clusters.is_empty() {
            Vec::new()
        } else {
            self.fence.tokens(&clusters).map_err(|m| self.fenced(m))?
        };
        if self.fence.unfenced.claim_revision {
            return self.fence.hub.data.commit(writes);
        }
        self.fence.hub.commit_guarded(writes, &tokens)
    }
    fn act_token(&self, cluster: &str) -> Option<i64> {
        self.fence.local().held.get(cluster).copied()
    }
    fn may_act(&self, cluster: &str, claim: Option<i64>) -> Result<(), StoreError> {
        let one = BTreeSet::from([cluster.to_string()]);
        let tokens = self.fence.tokens(&one).map_err(|m| self.fenced(m))?;
        if tokens.is_empty() || tokens.first().map(|(_, rev)| *rev) == claim {
            Ok(())
        } else {
            Err(self.fenced(format!(
                "cluster {cluster} was claimed again since this reconcile started; it stops here and the claim's own reconcile takes over"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use flightdeck_store::Store;

    use super::*;

    fn replica(hub: &Arc<LeaseHub>, name: &str, unfenced: Unfenced) -> (Arc<ReplicaFence>, Store) {
        let fence = ReplicaFence::new(
            hub.clone(),
            name,
            Duration::from_secs(10),
            Duration::from_secs(2),
            unfenced,
        );
        let store = Store::with_backend(Box::new(LeasedBackend::new(fence.clone())));
        (fence, store)
    }

    #[test]
    fn the_simulated_etcd_passes_the_store_suite() {
        let hub = LeaseHub::new(SimClock::new(Timestamp::SIM_EPOCH)).expect("hub");
        let (_, store) = replica(&hub, "r1", Unfenced::default());
        flightdeck_store::conformance::run(&store, "");
    }

    /// r1 claims c1, then is paused past its lease; r2 claims c1 anew. Returns r1's
    /// fence and store, and its token from before the pause.
    fn paused_past_lease(
        unfenced: Unfenced,
    ) -> (Arc<LeaseHub>, Arc<ReplicaFence>, Store, Option<i64>) {
        let clock = SimClock::new(Timestamp::SIM_EPOCH);
        let hub = LeaseHub::new(clock.clone()).expect("hub");
        let all = vec!["c1".to_string()];
        let (r1, s1) = replica(&hub, "r1", unfenced);
        let (r2, _) = replica(&hub, "r2", Unfenced::default());
        r1.renew();
        assert_eq!(r1.balance(&all).taken_up, all);
        s1.commit(vec![Write::put("status", "c1", &"Ready")])
            .expect("r1 holds c1");
        let token = s1.act_token("c1");
        assert!(s1.may_act("c1", token).is_ok());
        clock.advance(Duration::from_secs(11));
        r2.renew();
        assert_eq!(r2.balance(&all).taken_up, all);
        assert!(hub.claims()["c1"].1 > token.expect("a token"));
        (hub, r1, s1, token)
    }

    #[test]
    fn a_claim_dies_with_its_lease_and_its_old_holder_stops_on_its_own_clock() {
        let (hub, r1, s1, token) = paused_past_lease(Unfenced::default());
        let err = s1.may_act("c1", token).expect_err("past its own deadline");
        assert!(err.to_string().contains("lease has run out"), "{err}");
        let err = s1
            .commit(vec![Write::put("status", "c1", &"Ready")])
            .expect_err("past its own deadline");
        assert!(err.to_string().contains("lease has run out"), "{err}");
        // Renewed, r1 learns its claims are gone.
        assert_eq!(r1.renew(), vec!["c1".to_string()]);
        assert!(r1.held().is_empty());
        let spans = hub.history();
        assert_eq!(spans.len(), 2);
        let expired = Timestamp::SIM_EPOCH.plus(Duration::from_secs(10));
        assert!(spans[0].to.is_some_and(|t| t >= expired), "{spans:?}");
    }

    #[test]
    fn without_its_own_deadline_the_hub_still_refuses_a_stale_claim() {
        let no_deadline = Unfenced {
            own_deadline: true,
            claim_revision: false,
        };
        let (_, _, s1, token) = paused_past_lease(no_deadline);
        assert!(s1.may_act("c1", token).is_ok(), "it believes it holds c1");
        let err = s1
            .commit(vec![Write::put("status", "c1", &"Ready")])
            .expect_err("the claim moved");
        assert!(
            err.to_string().contains("claimed by another replica"),
            "{err}"
        );
    }
}
