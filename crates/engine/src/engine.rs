use std::collections::BTreeMap;
use std::sync::Arc;

use flightdeck_cloud::{Clock, ErrorClass, Provider, Rng, Timestamp};
use flightdeck_plan::{ClusterStatus, Event, IdentityCheck, Memory, Severity};
use flightdeck_spec::{Cluster, Duration};
use flightdeck_store::{Store, Write};
use serde::{Deserialize, Serialize};

use crate::backoff::jitter;
use crate::faults::{EngineFaults, RequeueFate};
use crate::queue::WorkQueue;
use crate::reconcile::{Job, Outcome, reconcile};
use crate::secrets::{SecretsAtRest, SecretsError, StoredPki, T_PKI};
use flightdeck_guest::SecretsKey;

use crate::config::{
    CLUSTERS_MAX, CONFLICTS_BEFORE_BACKOFF, EngineConfig, EngineError, InFlight, T_MEMORY, T_SPEC,
    T_STATUS,
};

/// What the engine keeps per cluster; its persisted parts live in the store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterRecord {
    pub spec: Cluster,
    pub memory: Memory,
    pub status: ClusterStatus,
    /// Actions the latest reconcile carried out: `Some(0)` once nothing is left to do,
    /// `None` when it could not plan (observation failed or was stale).
    #[serde(skip)]
    pub last_actions: Option<u64>,
    #[serde(skip)]
    failures: u32,
    #[serde(skip)]
    conflicts: u32,
    /// When the periodic resync is due next.
    #[serde(skip)]
    resync_at: Timestamp,
    /// When this engine last reconciled the cluster, successfully or not.
    #[serde(skip)]
    pub last_reconciled: Option<Timestamp>,
    /// When this engine took the cluster up from the store; `None` for a cluster applied
    /// to it. The store may be behind the cloud (restored from a backup): see
    /// `flightdeck_plan::PlanInput::taken_up`.
    #[serde(skip)]
    pub taken_up: Option<Timestamp>,
}

impl ClusterRecord {
    /// A record as loaded or applied: no failures yet, a resync due at once.
    fn fresh(spec: Cluster, memory: Memory, status: ClusterStatus, now: Timestamp) -> Self {
        ClusterRecord {
            spec,
            memory,
            status,
            last_actions: None,
            failures: 0,
            conflicts: 0,
            resync_at: now,
            last_reconciled: None,
            taken_up: None,
        }
    }

    /// Reconciles in a row that ended in a failed or refused call; zero after a success.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures + self.conflicts
    }
}

/// Counters over the engine's life, for reports and budgets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileStats {
    pub reconciles: u64,
    pub actions: u64,
    pub action_failures: u64,
    pub observe_failures: u64,
    /// Store transactions committed by this engine: a reconcile that changes nothing
    /// commits nothing.
    pub store_commits: u64,
}

pub struct Engine<P: Provider> {
    pub(crate) provider: Arc<P>,
    pub(crate) store: Arc<Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) rng: Box<dyn Rng>,
    pub(crate) config: Arc<EngineConfig>,
    pub(crate) clusters: BTreeMap<String, ClusterRecord>,
    pub(crate) queue: WorkQueue,
    pub(crate) events: Vec<Event>,
    pub(crate) stats: ReconcileStats,
    /// The store's commit count when this engine took it over.
    pub(crate) commits_base: u64,
    /// The last observation per cluster, kept only to be handed out stale by injected
    /// faults.
    pub(crate) last_observed: BTreeMap<String, crate::reuse::Seen>,
    pub(crate) faults: Option<Arc<std::sync::Mutex<Box<dyn EngineFaults>>>>,
    /// What each reconcile [`Engine::run_due`] runs is wrapped in, with its cluster's
    /// name (see [`Engine::with_call_scope`]).
    pub(crate) call_scope: Option<CallScope>,
    /// What every cluster holds of shared OpenNebula objects (F1).
    pub(crate) ledger: Arc<crate::reconcile::Ledger>,
    /// Clusters whose reconcile runs now (see [`Engine::start_due`]), with what was
    /// asked of them meanwhile.
    pub(crate) in_flight: BTreeMap<String, InFlight>,
    /// How the clusters' secrets are kept at rest.
    pub(crate) secrets: SecretsAtRest,
    /// Where flightdeck's own access to its kubeadm clusters' workload APIs is kept for
    /// the provider's workload clients (see [`Engine::with_workload_access`]).
    pub(crate) access: Option<Arc<flightdeck_cloud::AccessBook>>,
}

impl<P: Provider> Engine<P> {
    /// Builds an engine over `store`, picking up every cluster it holds where it stopped.
    pub fn new(
        provider: Arc<P>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
        config: EngineConfig,
    ) -> Result<Self, EngineError> {
        Self::new_for(provider, store, clock, rng, config, &|_| true)
    }

    /// Builds an engine over `store` that takes up only the stored clusters `accept`
    /// takes: one store may hold clusters of several clouds, each driven by the engine
    /// of its own cloud.
    pub fn new_for(
        provider: Arc<P>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
        config: EngineConfig,
        accept: &dyn Fn(&Cluster) -> bool,
    ) -> Result<Self, EngineError> {
        let commits_base = store.commits();
        let secrets = match &config.secrets {
            Some(s) => s.clone(),
            None => {
                if let Some(cluster) = store.keys(T_PKI)?.into_iter().next() {
                    return Err(SecretsError::NoKey { cluster }.into());
                }
                let key = SecretsKey::generate("a key made for this run, kept nowhere").map_err(
                    |source| SecretsError::Seal {
                        cluster: String::new(),
                        source,
                    },
                )?;
                SecretsAtRest::Sealed(Arc::new(key))
            }
        };
        let mut engine = Engine {
            provider,
            store,
            clock,
            rng,
            config: Arc::new(config),
            clusters: BTreeMap::new(),
            queue: WorkQueue::default(),
            events: Vec::new(),
            stats: ReconcileStats::default(),
            commits_base,
            last_observed: BTreeMap::new(),
            faults: None,
            call_scope: None,
            ledger: Default::default(),
            in_flight: BTreeMap::new(),
            secrets,
            access: None,
        };
        for name in engine.store.keys(T_SPEC)? {
            let Some(spec) = crate::config::stored_spec(&engine.store, &name)? else {
                continue;
            };
            if accept(&spec) {
                engine.load(&name, spec)?;
            }
        }
        Ok(engine)
    }

    /// Takes up a stored cluster where it stopped: its memory and status as last
    /// committed, reconciled now. Whether it had memory to take up (a spec alone is a
    /// cluster no engine has applied yet).
    pub(crate) fn load(&mut self, name: &str, spec: Cluster) -> Result<bool, EngineError> {
        let now = self.clock.now();
        let Some(memory) = self.store.get::<Memory>(T_MEMORY, name)? else {
            return Ok(false);
        };
        if spec.spec.bootstrap.kubeadm() {
            // A key that does not open the cluster's PKI stops here, naming the key
            // file, before anything is done with the cluster.
            self.open_pki(name, &memory.uid)?;
        }
        let status = self
            .store
            .get::<ClusterStatus>(T_STATUS, name)?
            .unwrap_or_default();
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), memory.one.clone());
        let mut record = ClusterRecord::fresh(spec, memory, status, now);
        record.taken_up = Some(now);
        self.clusters.insert(name.to_string(), record);
        self.queue.schedule(name, now);
        Ok(true)
    }

    /// Cluster `name`'s PKI, opened from the store (`None`: the cluster is not known
    /// here, or its bootstrap is not kubeadm). For the one answer that hands a secret
    /// on (a kubeconfig's client certificate) and for tests; never logged.
    pub fn pki(&self, name: &str) -> Result<Option<flightdeck_guest::ClusterPki>, EngineError> {
        let Some(c) = self.clusters.get(name) else {
            return Ok(None);
        };
        if !c.spec.spec.bootstrap.kubeadm() {
            return Ok(None);
        }
        self.open_pki(name, &c.memory.uid).map(Some)
    }

    fn open_pki(&self, name: &str, uid: &str) -> Result<flightdeck_guest::ClusterPki, EngineError> {
        let stored =
            self.store
                .get::<StoredPki>(T_PKI, name)?
                .ok_or_else(|| SecretsError::Missing {
                    cluster: name.to_string(),
                })?;
        Ok(self.secrets.open_pki(name, uid, &stored)?)
    }

    /// Installs injected engine faults (the swarm's; never the product's).
    pub fn with_faults(mut self, faults: Box<dyn EngineFaults>) -> Self {
        self.faults = Some(Arc::new(std::sync::Mutex::new(faults)));
        self
    }

    /// Issues flightdeck's own client certificate for each kubeadm cluster into `book`,
    /// which the provider's workload clients read (see `access.rs`). Without a book the
    /// workload clusters are reached only as their specs say.
    pub fn with_workload_access(mut self, book: Arc<flightdeck_cloud::AccessBook>) -> Self {
        self.access = Some(book);
        self
    }

    /// Wraps every reconcile [`Engine::run_due`] runs in `scope`, given the cluster's
    /// name: a test bed labels the cloud calls each cluster's reconcile makes with it
    /// (the daemon labels the reconciles it starts itself).
    pub fn with_call_scope(mut self, scope: CallScope) -> Self {
        self.call_scope = Some(scope);
        self
    }

    /// Applies a cluster spec: a new cluster gets a UID; a known one picks up the change
    /// at its next reconcile, which is scheduled now.
    pub fn apply(&mut self, spec: Cluster) -> Result<(), EngineError> {
        self.apply_with(spec, false)
    }

    /// [`Engine::apply`]; with `adopt`, a new cluster (or one held by the identity gate)
    /// takes over what one earlier cluster of its name left in the cloud, by its UID.
    pub fn apply_with(&mut self, spec: Cluster, adopt: bool) -> Result<(), EngineError> {
        let name = spec.name().to_string();
        self.refuse_while_handing_over(&name)?;
        // A new spec is planned from fresh lists.
        self.last_observed.remove(&name);
        if !self.clusters.contains_key(&name)
            && let Some(stored) = crate::config::stored_spec(&self.store, &name)?
            && self.load(&name, stored)?
        {
            // Stored, but not driven here yet: another replica drove it until this one
            // was given its claim. It goes on from its stored memory, its UID and the
            // objects it recorded, never a new UID over them.
            self.note_taken_up(&name, "this replica (on an apply)")?;
        }
        let now = self.clock.now();
        if let Some(why) = self
            .clusters
            .iter()
            .filter(|(other, _)| **other != name)
            .find_map(|(_, c)| flightdeck_spec::capacity::routes_collide(&spec, &c.spec))
        {
            return Err(EngineError::RoutesCollide(why));
        }
        let memory = match self.clusters.get(&name) {
            Some(c) if c.memory.deletion_requested.is_some() => {
                return Err(EngineError::Deleting(name));
            }
            Some(c) => {
                immutable_fields_unchanged(&c.spec, &spec)?;
                c.memory.clone()
            }
            None => {
                if self.clusters.len() >= CLUSTERS_MAX {
                    return Err(EngineError::TooManyClusters);
                }
                let uid = format!("{:016x}", self.rng.next_u64());
                let mut memory = Memory::new(uid);
                memory.identity = if adopt {
                    IdentityCheck::Adopt
                } else {
                    IdentityCheck::Pending
                };
                memory
            }
        };
        let is_new = !self.clusters.contains_key(&name);
        let event = Event {
            at: now,
            cluster: name.clone(),
            severity: Severity::Normal,
            reason: if is_new {
                "ClusterApplied"
            } else {
                "SpecApplied"
            }
            .into(),
            message: if is_new {
                format!("cluster {name} applied with UID {}", memory.uid)
            } else {
                format!("new spec for cluster {name} applied")
            },
        };
        // A known cluster's memory is not rewritten: a reconcile in flight may have
        // committed newer memory (its write-ahead) since this copy was taken.
        let mut writes = vec![
            Write::put(T_SPEC, &name, &spec),
            Write::event(&name, &event),
        ];
        if is_new {
            writes.push(Write::put(T_MEMORY, &name, &memory));
            if spec.spec.bootstrap.kubeadm() {
                let now_secs = i64::try_from(now.millis() / 1000).unwrap_or(i64::MAX);
                writes.push(self.secrets.make_pki(&name, &memory.uid, now_secs)?);
            }
        }
        self.store.commit(writes)?;
        self.events.push(event);
        let status = self
            .clusters
            .get(&name)
            .map(|c| c.status.clone())
            .unwrap_or_default();
        let mut record = ClusterRecord::fresh(spec, memory, status, now);
        if let Some(old) = self.clusters.get(&name) {
            // The reconcile state survives a spec change; only the spec is new.
            record.failures = old.failures;
            record.conflicts = old.conflicts;
            record.last_actions = old.last_actions;
            record.resync_at = old.resync_at;
            record.taken_up = old.taken_up;
        }
        self.clusters.insert(name.clone(), record);
        self.schedule_now(&name);
        if adopt && !is_new {
            self.adopt(&name)?;
        }
        Ok(())
    }

    /// Closes the cluster's churn breakers (F11): objects stopped with
    /// `ReconcileLoopDetected` are reconciled again, with a fresh history.
    pub fn resume(&mut self, name: &str) -> Result<(), EngineError> {
        self.known(name)?;
        if let Some(f) = self.in_flight.get_mut(name) {
            // Applied when the reconcile in flight is done, to the memory it ends with.
            f.resume = true;
            return Ok(());
        }
        let c = self.cluster_mut(name)?;
        let stopped: Vec<String> = c.memory.churn.tripped.keys().cloned().collect();
        c.memory.churn = Default::default();
        // The slots' histories go too, or a stopped slot would stop again at once.
        for r in c.memory.machines.values_mut() {
            r.lineage.clear();
        }
        let message = if stopped.is_empty() {
            "resumed; nothing was stopped".into()
        } else {
            format!(
                "resumed by an operator: {} reconciled again",
                stopped.join(", ")
            )
        };
        self.commit_memory_change(name, "Resumed", message)
    }

    /// Whether an operator's request for cluster `name` can be taken: it is driven here
    /// (a request for a cluster in flight is applied when its reconcile is back, which a
    /// cluster let go of meanwhile never is).
    pub(crate) fn known(&self, name: &str) -> Result<(), EngineError> {
        self.refuse_while_handing_over(name)?;
        if !self.clusters.contains_key(name) {
            return Err(EngineError::UnknownCluster(name.to_string()));
        }
        Ok(())
    }

    pub(crate) fn cluster_mut(&mut self, name: &str) -> Result<&mut ClusterRecord, EngineError> {
        self.clusters
            .get_mut(name)
            .ok_or_else(|| EngineError::UnknownCluster(name.to_string()))
    }

    /// Persists the cluster's memory with an event saying why it changed, and looks at
    /// the cluster again at once.
    pub(crate) fn commit_memory_change(
        &mut self,
        name: &str,
        reason: &str,
        message: String,
    ) -> Result<(), EngineError> {
        let now = self.clock.now();
        let Some(c) = self.clusters.get(name) else {
            return Err(EngineError::UnknownCluster(name.to_string()));
        };
        let event = Event {
            at: now,
            cluster: name.to_string(),
            severity: Severity::Normal,
            reason: reason.into(),
            message,
        };
        self.store.commit(vec![
            Write::put(T_MEMORY, name, &c.memory),
            Write::event(name, &event),
        ])?;
        self.events.push(event);
        self.schedule_now(name);
        Ok(())
    }

    /// Whether cluster `name` is being deleted: its deletion was requested, or was asked
    /// for while a reconcile of it was in flight (applied when that reconcile ends).
    pub fn deleting(&self, name: &str) -> bool {
        self.clusters
            .get(name)
            .is_some_and(|c| c.memory.deletion_requested.is_some())
            || self.in_flight.get(name).is_some_and(|f| f.delete.is_some())
    }

    /// Starts deleting a cluster. Deletion cannot be undone; it ends when the cloud no
    /// longer lists anything the cluster owned.
    pub fn delete(&mut self, name: &str) -> Result<(), EngineError> {
        let now = self.clock.now();
        self.known(name)?;
        if let Some(f) = self.in_flight.get_mut(name) {
            // Applied when the reconcile in flight is done, to the memory it ends with.
            f.delete = Some(now);
            return Ok(());
        }
        let c = self.cluster_mut(name)?;
        if c.memory.deletion_requested.is_some() {
            self.schedule_now(name);
            return Ok(());
        }
        c.memory.deletion_requested = Some(now);
        self.commit_memory_change(
            name,
            "DeletionRequested",
            format!("deleting cluster {name} and everything it owns"),
        )
    }

    /// Gives up the engine, handing back its store (to be closed or reused).
    pub fn into_store(self) -> Arc<Store> {
        self.store
    }

    pub fn cluster(&self, name: &str) -> Option<&ClusterRecord> {
        self.clusters.get(name)
    }

    /// The clusters by name, in name order.
    pub fn clusters(&self) -> impl ExactSizeIterator<Item = (&String, &ClusterRecord)> {
        self.clusters.iter()
    }

    pub fn stats(&self) -> &ReconcileStats {
        &self.stats
    }

    /// Events since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// When the next reconcile is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.queue.next_due()
    }

    /// The cluster's last observation, for a job, which takes it (the outcome brings the
    /// next one): its lists may be taken again (`reuse.rs`), and an injected stale
    /// observation (the swarm's) replays it. A reconcile that fails leaves none, so the
    /// next one lists everything.
    pub(crate) fn previous_observation(&mut self, key: &str) -> Option<crate::reuse::Seen> {
        self.last_observed.remove(key)
    }

    /// Runs the reconciles due now, at most `concurrency_max` at once. Returns how many ran.
    pub async fn run_due(&mut self) -> Result<usize, EngineError> {
        let now = self.clock.now();
        let keys = self.queue.pop_due(now, self.config.concurrency_max);
        if keys.is_empty() {
            return Ok(0);
        }
        let mut jobs = Vec::with_capacity(keys.len());
        for k in &keys {
            let previous = self.previous_observation(k);
            if let Some(c) = self.clusters.get(k) {
                jobs.push(Job {
                    name: k.clone(),
                    spec: c.spec.clone(),
                    memory: c.memory.clone(),
                    status: c.status.clone(),
                    previous,
                    claim: self.store.act_token(k),
                    taken_up: c.taken_up,
                });
            }
        }
        let owned = self.owned_ctx();
        let ctx = owned.borrow();
        let scope = self.call_scope.clone();
        let outcomes = futures_util::future::join_all(jobs.into_iter().map(|job| {
            let name = job.name.clone();
            let scope = scope.clone();
            let ctx = &ctx;
            async move { scoped(scope.as_ref(), &name, reconcile(ctx, job)).await }
        }))
        .await;
        let n = outcomes.len();
        // Every outcome is applied before an error is returned: the others' state and
        // schedule must not be lost because one cluster's reconcile failed.
        let mut first_error = None;
        for (key, outcome) in keys.iter().zip(outcomes) {
            let result = outcome.and_then(|o| self.finish(o));
            if let Err(e) = result {
                self.failed(key, &e);
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Looks at a cluster whose reconcile failed again after the backoff (an injected
    /// crash is not a failure: the engine is rebuilt from its store).
    pub(crate) fn failed(&mut self, key: &str, e: &EngineError) {
        if matches!(e, EngineError::Crashed(_)) {
            return;
        }
        let now = self.clock.now();
        if let Some(c) = self.clusters.get_mut(key) {
            c.last_reconciled = Some(now);
            c.failures += 1;
            let delay = self.config.backoff.delay(c.failures, &mut *self.rng);
            self.queue.reschedule(key, now.plus(delay));
        }
    }

    pub(crate) fn finish(&mut self, o: Outcome) -> Result<(), EngineError> {
        self.stats.reconciles += 1;
        self.stats.actions += o.actions;
        self.stats.action_failures += o.action_failures;
        self.stats.observe_failures += u64::from(o.observe_failed);
        self.stats.store_commits = self.store.commits() - self.commits_base;
        self.events.extend(o.events);
        if let Some(observed) = o.observed {
            self.last_observed.insert(o.name.clone(), observed);
        }
        let now = self.clock.now();
        if o.deleted {
            let writes = vec![
                Write::Remove {
                    table: T_SPEC,
                    key: o.name.clone(),
                },
                Write::Remove {
                    table: T_MEMORY,
                    key: o.name.clone(),
                },
                Write::Remove {
                    table: T_STATUS,
                    key: o.name.clone(),
                },
                Write::Remove {
                    table: T_PKI,
                    key: o.name.clone(),
                },
            ];
            if self.store.shared() {
                // Whatever the ledger records still say it holds goes with it.
                crate::shared_ledger::commit_facts(
                    &self.store,
                    &o.name,
                    &Default::default(),
                    writes,
                )?;
            } else {
                self.store.commit(writes)?;
            }
            self.clusters.remove(&o.name);
            self.ledger
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&o.name);
            self.queue.remove(&o.name);
            self.last_observed.remove(&o.name);
            if let Some(book) = &self.access {
                book.remove(&o.name);
            }
            return Ok(());
        }
        let Some(c) = self.clusters.get_mut(&o.name) else {
            return Ok(());
        };
        c.memory = o.memory;
        c.last_reconciled = Some(now);
        c.last_actions = o.status.is_some().then_some(o.actions);
        if let Some(status) = o.status {
            c.status = status;
        }
        // The periodic resync is the engine's own timer, kept apart from requeues: a lost
        // or late requeue never pushes it back, so every cluster is looked at within one
        // resync period whatever happens to its requeues.
        let period = c.spec.spec.flight.resync_period.as_millis();
        if now >= c.resync_at {
            c.resync_at = now.plus_millis(jitter(period, 0.1, &mut *self.rng));
        }
        let requeue: Option<Duration> = match o.failure {
            Some(ErrorClass::Conflict) => {
                // Busy, not broken: look again soon without growing the backoff. A
                // conflict that does not clear is no longer "busy": after a few in a
                // row the backoff grows after all, so it never becomes a hot loop.
                c.conflicts += 1;
                Some(match c.conflicts.checked_sub(CONFLICTS_BEFORE_BACKOFF) {
                    Some(over) if over > 0 => self.config.backoff.delay(over, &mut *self.rng),
                    _ => o
                        .requeue_after
                        .unwrap_or(self.config.conflict_retry)
                        .min(self.config.conflict_retry),
                })
            }
            Some(ErrorClass::RateLimited(Some(after))) => {
                c.failures += 1;
                Some(after.max(self.config.backoff.delay(c.failures, &mut *self.rng)))
            }
            Some(_) => {
                c.failures += 1;
                Some(self.config.backoff.delay(c.failures, &mut *self.rng))
            }
            None => {
                c.failures = 0;
                c.conflicts = 0;
                o.requeue_after
            }
        };
        // Injected faults may lose or delay a requeue (never the resync).
        let requeue = match (requeue, self.faults.as_ref()) {
            (Some(delay), Some(faults)) => {
                let fate = faults
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .requeue(&o.name, delay);
                match fate {
                    RequeueFate::Keep => Some(delay),
                    RequeueFate::Delay(extra) => Some(Duration::from_millis(
                        delay.as_millis().saturating_add(extra.as_millis()),
                    )),
                    RequeueFate::Drop => None,
                }
            }
            (requeue, _) => requeue,
        };
        let next = match requeue {
            Some(d) => now.plus(d).min(c.resync_at),
            None => c.resync_at,
        };
        self.queue.reschedule(&o.name, next);
        Ok(())
    }
}

/// The provider block without what may change: OpenNebula's templates and images are
/// content-addressed, so new content is a new sibling and a rollout.
fn fixed_provider(p: &flightdeck_spec::Provider) -> flightdeck_spec::Provider {
    let mut p = p.clone();
    if let Some(one) = p.opennebula.as_mut() {
        one.templates.clear();
        one.images.clear();
    }
    p
}

/// Fields the cloud objects are built from once and that flightdeck does not migrate:
/// a change would leave the old objects (rules, listener, group) behind or silently
/// unapplied, so it is refused with the field's name.
pub fn immutable_fields_unchanged(old: &Cluster, new: &Cluster) -> Result<(), EngineError> {
    let (o, n) = (&old.spec, &new.spec);
    let fields: [(&'static str, String, String); 6] = [
        (
            "spec.bootstrap.provider",
            o.bootstrap.provider.to_string(),
            n.bootstrap.provider.to_string(),
        ),
        (
            "spec.network.podCIDR",
            o.network.pod_cidr.to_string(),
            n.network.pod_cidr.to_string(),
        ),
        (
            "spec.network.securityGroup",
            format!("{:?}", o.network.security_group),
            format!("{:?}", n.network.security_group),
        ),
        (
            "spec.apiLoadBalancer.port",
            o.api_load_balancer.port.get().to_string(),
            n.api_load_balancer.port.get().to_string(),
        ),
        (
            "spec.apiLoadBalancer.healthMonitor",
            format!("{:?}", o.api_load_balancer.health_monitor),
            format!("{:?}", n.api_load_balancer.health_monitor),
        ),
        (
            "spec.provider",
            format!("{:?}", fixed_provider(&o.provider)),
            format!("{:?}", fixed_provider(&n.provider)),
        ),
    ];
    for (field, from, to) in fields {
        if from != to {
            return Err(EngineError::Immutable {
                cluster: new.name().to_string(),
                field,
                from,
                to,
            });
        }
    }
    Ok(())
}

/// Wraps the calls of one cluster's reconcile: given the cluster's name and the
/// reconcile, it runs the reconcile to its end within whatever it sets up.
pub type CallScope = Arc<
    dyn for<'a> Fn(
            &str,
            futures_util::future::LocalBoxFuture<'a, ()>,
        ) -> futures_util::future::LocalBoxFuture<'a, ()>
        + Send
        + Sync,
>;

/// Runs `work` for cluster `name` within `scope`, if there is one.
async fn scoped<T>(
    scope: Option<&CallScope>,
    name: &str,
    work: impl std::future::Future<Output = T>,
) -> T {
    let Some(scope) = scope else {
        return work.await;
    };
    let mut out = None;
    scope(
        name,
        Box::pin(async {
            out = Some(work.await);
        }),
    )
    .await;
    out.expect("a call scope runs the reconcile it is given to its end")
}
