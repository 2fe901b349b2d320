//! `noChurn` per machine set (F11), from the mutation log: a remediation loop makes a
//! new machine each time under a new name, so it is invisible to a check keyed on the
//! machine. The churn breaker promises that each slot of a set is re-created at most
//! `churnLimit` times within `churnWindow` without a spec change; so a set makes at most
//! `churnLimit + 1` machines for each slot it may hold in any window, counted from its
//! last spec change. Without the breaker a slot whose machines keep failing is re-made
//! with a backoff of 30 s doubling up to 10 minutes: seven times in thirty minutes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::{TAG_MACHINE, TAG_ROLE, uid_of};
use flightdeck_sim::{Mutation, MutationKind};
use flightdeck_spec::{Cluster, Duration};

use crate::invariants::ClusterTrack;

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
    /// `cp` and each pool's name → its machine template (and, for `cp`, the version),
    /// and the generation at which that last changed: machines made before it are
    /// outdated, and their set may surge.
    templates: BTreeMap<String, (String, u64)>,
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
            let since = match self.templates.get(&set) {
                Some((old, since)) if *old == template => *since,
                _ => generation,
            };
            templates.insert(set, (template, since));
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

    /// The generation at which set `set`'s machine template last changed.
    pub fn template_generation(&self, set: &str) -> u64 {
        self.templates.get(set).map_or(0, |(_, g)| *g)
    }

    pub fn max_surge(&self) -> u32 {
        self.max_surge
    }

    /// The most machines set `set` may make within one churn window: every slot it
    /// may hold (replicas, and maxSurge more during a rollout or repair) made once and
    /// re-created `churnLimit` times. Slots are counted as the spec has them now; a set
    /// scaled down keeps the lineages of the slots it had until their machines go, so
    /// the bound also counts the surge's slots.
    fn allowed(&self, set: &str) -> u32 {
        let replicas = self.replicas.get(set).copied().unwrap_or(0);
        (replicas.max(1) + self.max_surge) * (self.churn_limit + 1)
    }
}

/// The set a machine key (`cp-3`, `workers-12`) belongs to.
pub(crate) fn set_of(key: &str) -> &str {
    key.rsplit_once('-').map_or(key, |(set, _)| set)
}

#[derive(Default)]
pub struct SetChurn {
    /// (cluster UID, set) → when its machines were made since its last spec change.
    made: BTreeMap<(String, String), VecDeque<Timestamp>>,
    /// Cluster UID → the generation its history belongs to.
    generation: BTreeMap<String, u64>,
    reported: BTreeSet<(String, String, u64)>,
}

impl SetChurn {
    /// Notes `m` if it makes a machine of one of `clusters`; answers a violation when
    /// its set made more machines within one churn window than the breaker allows.
    pub fn note(
        &mut self,
        m: &Mutation,
        clusters: &BTreeMap<String, ClusterTrack>,
    ) -> Option<String> {
        if m.kind != MutationKind::Create
            || !m
                .target_tags
                .iter()
                .any(|t| t.strip_prefix(TAG_ROLE) == Some("machine"))
        {
            return None;
        }
        let uid = uid_of(&m.target_tags)?;
        let key = m
            .target_tags
            .iter()
            .find_map(|t| t.strip_prefix(TAG_MACHINE))?;
        let c = clusters.values().find(|c| c.uid == uid)?;
        if self.generation.get(uid) != Some(&c.generation) {
            self.generation.insert(uid.to_string(), c.generation);
            self.made.retain(|(u, _), _| u != uid);
        }
        let set = set_of(key).to_string();
        let window = c.sets.churn_window;
        let times = self.made.entry((uid.to_string(), set.clone())).or_default();
        times.push_back(m.at);
        while times.front().is_some_and(|t| m.at.since(*t) > window) {
            times.pop_front();
        }
        let n = times.len() as u32;
        let allowed = c.sets.allowed(&set);
        (n > allowed && self.reported.insert((uid.to_string(), set.clone(), c.generation))).then(
            || {
                format!(
                    "cluster {}: set {set} made {n} machines within {window} with no spec change \
                     (the last: {}), more than the {allowed} its replicas, maxSurge and churnLimit allow: a repair loop",
                    c.name, m.target_name
                )
            },
        )
    }
}
