//! What the runner knows of each cluster for the checks: its identity, when it was first
//! Ready, its spec's machine sets, the addresses its servers have had.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::uid_of;
use flightdeck_sim::World;
use flightdeck_spec::{Cluster, Duration};

/// What the runner knows of one cluster, for the invariants.
#[derive(Clone, Debug)]
pub struct ClusterTrack {
    pub name: String,
    pub uid: String,
    /// When the cluster was first Ready; from then on its API must serve.
    pub ready_since: Option<Timestamp>,
    pub deletion_requested: bool,
    /// When the scenario asked for the deletion (the workload step's time).
    pub deletion_asked_at: Option<Timestamp>,
    pub deleted_at: Option<Timestamp>,
    /// Bumped by every spec change the workload makes.
    pub generation: u64,
    /// Bumped by every restore of the store from a backup (`store.restoredLagging`).
    pub restores: u64,
    /// The API endpoint is not a load balancer flightdeck builds member by member
    /// (OpenNebula's VIP, KubeVirt's Service): it serves while some control-plane VM or
    /// VMI runs with a Ready node.
    pub external_endpoint: bool,
    /// KubeVirt: how long a guest drain may take (F9).
    pub drain_timeout: Option<flightdeck_spec::Duration>,
    /// `flight.nodeDrainTimeout` and `flight.nodeDeletionTimeout`, from the scenario's
    /// spec.
    pub node_drain_timeout: flightdeck_spec::Duration,
    pub node_deletion_timeout: flightdeck_spec::Duration,
    /// `flight.resyncPeriod`: a lost requeue is made up for by the next resync.
    pub resync_period: flightdeck_spec::Duration,
    /// The cluster's pod network (the routes to it are the cluster's, via its servers).
    pub pod_cidr: flightdeck_spec::Cidr,
    /// Every address a server of the cluster has had, as the world showed it.
    pub addresses: std::collections::BTreeSet<std::net::IpAddr>,
    /// What the spec says of its machine sets now, for `noChurn` per set.
    pub sets: SetBounds,
    /// The UID the simulated workload cluster was last given the pod network under.
    pub pod_network_uid: Option<String>,
}

impl ClusterTrack {
    /// The track of cluster `name` (UID `uid`) as its `spec` first was: not yet Ready,
    /// not being deleted, at generation 0.
    /// What the churn checks count within: from the last spec change, or the last
    /// restore of the store from a backup. A restored store has lost the record of what
    /// flightdeck made and deleted since the backup (the churn ledger, the slots it
    /// retired), and the operator applied every spec again: some of that work may be
    /// done again once, and what is made after the restore is bounded as ever.
    pub fn churn_epoch(&self) -> (u64, u64) {
        (self.generation, self.restores)
    }

    pub fn new(name: &str, uid: &str, spec: &flightdeck_spec::Cluster) -> Self {
        let s = &spec.spec;
        let mut sets = SetBounds::default();
        sets.refresh(spec, 0);
        ClusterTrack {
            name: name.to_string(),
            uid: uid.to_string(),
            ready_since: None,
            deletion_requested: false,
            deletion_asked_at: None,
            deleted_at: None,
            generation: 0,
            restores: 0,
            external_endpoint: s.provider.external_endpoint(),
            drain_timeout: s.provider.kubevirt.as_ref().map(|k| k.drain_timeout),
            resync_period: s.flight.resync_period,
            node_drain_timeout: s.flight.node_drain_timeout,
            node_deletion_timeout: s.flight.node_deletion_timeout,
            pod_cidr: s.network.pod_cidr,
            pod_network_uid: None,
            addresses: Default::default(),
            sets,
        }
    }

    /// Notes the addresses the cluster's servers have in `world`.
    pub fn note_addresses(&mut self, world: &World) {
        let uid = self.uid.as_str();
        self.addresses.extend(
            world
                .servers
                .iter()
                .filter(|s| uid_of(&s.tags) == Some(uid))
                .filter_map(|s| s.address),
        );
    }
}

/// Notes the addresses every cluster's servers have in `world`, walking the servers once.
pub fn note_addresses(tracks: &mut BTreeMap<String, ClusterTrack>, world: &World) {
    let mut by_uid: BTreeMap<&str, Vec<std::net::IpAddr>> = BTreeMap::new();
    for s in &world.servers {
        if let (Some(uid), Some(a)) = (uid_of(&s.tags), s.address) {
            by_uid.entry(uid).or_default().push(a);
        }
    }
    for t in tracks.values_mut() {
        if let Some(addresses) = by_uid.get(t.uid.as_str()) {
            t.addresses.extend(addresses.iter().copied());
        }
    }
}

/// What the spec says of a cluster's machine sets, refreshed every step.
#[derive(Clone, Debug, Default)]
pub struct SetBounds {
    /// `cp` and each pool's name → replicas.
    replicas: BTreeMap<String, u32>,
    max_surge: u32,
    churn_limit: u32,
    churn_window: Duration,
    /// `cp` and each pool's name → how many of its machines may be under repair at
    /// once (`maxUnhealthy` of its replicas).
    budgets: BTreeMap<String, u32>,
    /// `cp` and each pool's name → its machine templates (and, for `cp`, the version),
    /// each with the generation from which it was in force, oldest first. A machine is
    /// made with the template in force when it appears; it is outdated when that is not
    /// the current one (a template changed and changed back makes it current again).
    templates: BTreeMap<String, Vec<(u64, String)>>,
    /// The cluster's generation these bounds were read at.
    generation: Option<u64>,
}

impl SetBounds {
    /// Reads the bounds from `spec` when the cluster's `generation` moved on since the
    /// last read (the runner calls this every step; the spec changes only with it).
    pub fn refresh(&mut self, spec: &Cluster, generation: u64) {
        if self.generation == Some(generation) {
            return;
        }
        self.generation = Some(generation);
        let s = &spec.spec;
        self.replicas.clear();
        self.budgets.clear();
        let cp = &s.control_plane;
        let sets = std::iter::once((
            "cp".to_string(),
            cp.replicas.get(),
            format!("{:?} {}", cp.machine, cp.version),
        ))
        .chain(s.node_pools.iter().map(|p| {
            (
                p.name.to_string(),
                p.replicas.get(),
                format!("{:?}", p.machine),
            )
        }));
        let mut templates = BTreeMap::new();
        for (set, replicas, template) in sets {
            self.replicas.insert(set.clone(), replicas);
            self.budgets
                .insert(set.clone(), s.flight.max_unhealthy.of(replicas));
            let mut history = self.templates.remove(&set).unwrap_or_default();
            if history.last().is_none_or(|(_, last)| *last != template) {
                history.push((generation, template));
            }
            templates.insert(set, history);
        }
        self.templates = templates;
        self.max_surge = s.flight.max_surge.get();
        self.churn_limit = s.flight.churn_limit;
        self.churn_window = s.flight.churn_window;
    }

    /// The replicas the spec asks of set `set` (`cp`: the control plane).
    pub fn replicas(&self, set: &str) -> u32 {
        self.replicas.get(set).copied().unwrap_or(0)
    }

    /// The sets the spec has now: `cp` and each pool's name.
    pub fn sets(&self) -> impl Iterator<Item = &str> {
        self.replicas.keys().map(String::as_str)
    }

    /// How many of set `set`'s machines may be under repair at once.
    pub fn budget(&self, set: &str) -> u32 {
        self.budgets.get(set).copied().unwrap_or(0)
    }

    /// Whether a machine of set `set` that first appeared at generation `made` has an
    /// outdated template: the one in force then is not the current one.
    pub fn outdated_if_made_at(&self, set: &str, made: u64) -> bool {
        let Some(history) = self.templates.get(set) else {
            return false;
        };
        let then = history
            .iter()
            .rev()
            .find(|(from, _)| *from <= made)
            .or(history.first());
        then.zip(history.last()).is_some_and(|(a, b)| a.1 != b.1)
    }

    pub fn max_surge(&self) -> u32 {
        self.max_surge
    }

    /// `flight.churnWindow`.
    pub fn churn_window(&self) -> Duration {
        self.churn_window
    }

    /// The most machines set `set` may make within one churn window: every slot it
    /// may hold (replicas, and maxSurge more during a rollout or repair) made once and
    /// re-created `churnLimit` times. Slots are counted as the spec has them now; a set
    /// scaled down keeps the lineages of the slots it had until their machines go, so
    /// the bound also counts the surge's slots.
    pub(crate) fn allowed(&self, set: &str) -> u32 {
        let replicas = self.replicas.get(set).copied().unwrap_or(0);
        (replicas.max(1) + self.max_surge) * (self.churn_limit + 1)
    }
}
