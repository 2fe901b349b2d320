//! What the simulator shows about itself beyond the APIs: the ground-truth snapshot of
//! the world, the per-operation call counts and the log of mutating calls.

use std::collections::{BTreeMap, VecDeque};

use flightdeck_cloud::{
    Clock, HealthMonitor, Listener, LoadBalancer, Member, Node, Pool, Router, SecurityGroup,
    Server, Timestamp,
};
use serde::Serialize;

use crate::{SimCloud, State, faults};

/// The most mutations [`crate::SimCloud::mutations`] keeps; older ones are dropped.
pub const MUTATIONS_MAX: usize = 100_000;

/// Everything in the simulated cloud at one instant, flightdeck's or not, each list in
/// creation order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct World {
    pub now: Timestamp,
    /// Shared with the simulator's own records until either changes.
    pub servers: Vec<std::sync::Arc<Server>>,
    pub security_groups: Vec<SecurityGroup>,
    pub load_balancers: Vec<LoadBalancer>,
    pub listeners: Vec<Listener>,
    pub pools: Vec<Pool>,
    pub health_monitors: Vec<HealthMonitor>,
    pub members: Vec<Member>,
    /// Member id → since when it has carried traffic to a live backend without
    /// interruption (ACTIVE and ONLINE, or ACTIVE and NO_MONITOR with its server running
    /// and registered as a node); members that serve nothing are absent.
    pub member_serving_since: std::collections::BTreeMap<String, Timestamp>,
    /// Workload-cluster nodes with the cluster UID their server was tagged with, in
    /// registration order.
    pub nodes: Vec<(String, Node)>,
    pub routers: Vec<Router>,
    /// The most extra routes a router takes now: Neutron's `max_routes`, or the lowest
    /// limit an active `neutron.maxRoutes` sets for any cluster.
    pub route_limit: usize,
    /// When that limit last changed (a `neutron.maxRoutes` started or ended).
    pub route_limit_changed: Option<Timestamp>,
    /// OpenNebula VMs, by id (DONE ones included, as the pool keeps them).
    pub one_vms: Vec<crate::OneVm>,
    /// OpenNebula VM templates, by id.
    pub one_templates: Vec<crate::OneTemplate>,
    /// OpenNebula images, by id.
    pub one_images: Vec<crate::OneImage>,
    /// The simulated Kubernetes clusters: infra nodes, KubeVirt VMs and VMIs, workload
    /// clusters, and the client-initiated VMI deletions (ground truth).
    pub kube: crate::KubeWorld,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MutationKind {
    Create,
    Update,
    Delete,
}

/// One mutating API call as the cloud received it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mutation {
    pub at: Timestamp,
    /// `nova`, `neutron`, `octavia`, `opennebula` or `kubernetes`.
    pub service: &'static str,
    /// The operation, e.g. `DELETE /servers/{server_id}`, or the XML-RPC method
    /// (`one.template.allocate`).
    pub operation: String,
    pub kind: MutationKind,
    /// The object created, updated or deleted; empty for a create that failed. A
    /// security-group rule create is an `Update` of its group; a member create is a
    /// `Create` of the member. OpenNebula objects are `template/<id>`, `image/<id>`
    /// and `vm/<id>` (an instantiate is a `Create` of the VM, a `terminate` action a
    /// `Delete`). Kubernetes objects are `<cluster>/<kind>/<namespace>/<name>` (or
    /// `<cluster>/<kind>/<name>` if cluster-scoped, and for VMs and VMIs), e.g. `infra/vmi/w-1`,
    /// `c1/pod/default/web-x`, `c1/node/w-1`; an eviction is a `Delete` of its pod.
    pub target_id: String,
    /// The target's name (the created object's, or the one the object had when the
    /// call arrived; the requested name for a failed OpenNebula create); empty if
    /// unknown.
    pub target_name: String,
    /// The target's tags: for a create the created object's (the request's if it
    /// failed), otherwise the tags the object had when the call arrived (empty if
    /// there was no such object).
    pub target_tags: Vec<String>,
    /// Whether the cloud accepted the call.
    pub ok: bool,
    /// Who sent it, as the call said (`X-Flightdeck-Caller`: a replica and the claim
    /// revision it acted under); none for calls that did not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// A time a member carried traffic to a live backend without interruption, now over:
/// `since` to `until`, both included. With [`World::member_serving_since`] it tells what
/// served at any past instant, which a look at the world now and then cannot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServingSpell {
    pub member_id: String,
    pub since: Timestamp,
    pub until: Timestamp,
}

/// The calls the cloud answered for one cluster, and how many of them with an error
/// (a fault, a rate limit, an expired token, a conflict, a missing object: any answer
/// that is not a success).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CallTally {
    pub calls: u64,
    pub refused: u64,
}

/// Call counts, the bounded mutation log and the bounded log of ended serving spells.
#[derive(Debug, Default)]
pub(crate) struct Log {
    calls: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    pub(crate) mutations: VecDeque<Mutation>,
    pub(crate) mutations_dropped: u64,
    pub(crate) spells: VecDeque<ServingSpell>,
    pub(crate) spells_dropped: u64,
    pub(crate) faults_ignored: u64,
    /// When a call was last made for each cluster: by its name (its caller label, or
    /// the workload cluster it went to) and by `uid:<UID>` (a Kubernetes list selecting
    /// the cluster's UID label).
    pub(crate) last_calls: BTreeMap<String, Timestamp>,
    /// Calls answered for each cluster since the last [`crate::SimCloud::take_call_tallies`],
    /// each counted once: by its name if the call says it, else by `uid:<UID>`.
    pub(crate) tallies: BTreeMap<String, CallTally>,
    /// The cluster the call being answered is for, from its entry to its answer.
    pub(crate) current: Option<String>,
    /// Bumped by every mutating call, transition and out-of-band change: a world taken
    /// at the same count is the same world (but for the time).
    pub(crate) changes: u64,
}

impl Log {
    pub(crate) fn count(&mut self, service: &'static str, operation: &'static str) {
        *self
            .calls
            .entry(service)
            .or_default()
            .entry(operation)
            .or_default() += 1;
    }

    /// Notes that the call being answered is for `cluster` (a name, or `uid:<UID>`),
    /// unless it already named one: [`Log::answered`] counts it there.
    pub(crate) fn answering_for(&mut self, cluster: &str) {
        if self.current.is_none() {
            self.current = Some(cluster.to_string());
        }
    }

    /// The call being answered was answered, with an error if not `ok`: it counts in
    /// its cluster's tally (if it named one).
    pub(crate) fn answered(&mut self, ok: bool) {
        if let Some(cluster) = self.current.take() {
            let tally = match self.tallies.get_mut(&cluster) {
                Some(t) => t,
                None => self.tallies.entry(cluster).or_default(),
            };
            tally.calls += 1;
            tally.refused += u64::from(!ok);
        }
    }

    /// Notes a call made for `cluster` (a name, or `uid:<UID>`) at `now`.
    pub(crate) fn called_for(&mut self, cluster: &str, now: Timestamp) {
        match self.last_calls.get_mut(cluster) {
            Some(t) => *t = now,
            None => {
                self.last_calls.insert(cluster.to_string(), now);
            }
        }
    }

    /// Records a mutating call of `operation` on the object `target` (its ID, name and
    /// tags), done or refused (`ok`).
    pub(crate) fn record(
        &mut self,
        at: Timestamp,
        (service, operation): (&'static str, &str),
        kind: MutationKind,
        (target_id, target_name, target_tags): (String, String, Vec<String>),
        ok: bool,
    ) {
        self.mutation(Mutation {
            at,
            service,
            operation: operation.into(),
            kind,
            target_id,
            target_name,
            target_tags,
            ok,
            caller: None,
        });
    }

    pub(crate) fn mutation(&mut self, mut m: Mutation) {
        if m.caller.is_none() {
            m.caller = crate::caller::current();
        }
        self.changes += 1;
        if self.mutations.len() >= MUTATIONS_MAX {
            self.mutations.pop_front();
            self.mutations_dropped += 1;
        }
        self.mutations.push_back(m);
    }

    /// Notes a serving spell that just ended; keeps the latest [`MUTATIONS_MAX`].
    pub(crate) fn spell(&mut self, spell: ServingSpell) {
        if self.spells.len() >= MUTATIONS_MAX {
            self.spells.pop_front();
            self.spells_dropped += 1;
        }
        self.spells.push_back(spell);
    }

    pub(crate) fn api_calls(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        self.calls
            .iter()
            .map(|(service, ops)| {
                let ops = ops.iter().map(|(op, n)| ((*op).to_string(), *n)).collect();
                ((*service).to_string(), ops)
            })
            .collect()
    }
}

/// The entries of a bounded log numbered `from` and later (the first entry ever is
/// number 0, and `dropped` were dropped from its front), and the number the next one
/// will get. Numbers already dropped are skipped.
pub(crate) fn numbered_since<T: Clone>(
    log: &VecDeque<T>,
    dropped: u64,
    from: u64,
) -> (Vec<T>, u64) {
    let next = dropped + log.len() as u64;
    let skip = usize::try_from(from.saturating_sub(dropped)).unwrap_or(usize::MAX);
    (log.iter().skip(skip).cloned().collect(), next)
}

/// An object a create call answers with: its id, name and tags, for the mutation log.
pub(crate) trait Created {
    fn identity(&self) -> (String, String, Vec<String>);
}

macro_rules! created {
    ($($t:ty),*) => {$(
        impl Created for $t {
            fn identity(&self) -> (String, String, Vec<String>) {
                (self.id.clone(), self.name.clone(), self.tags.clone())
            }
        }
    )*};
}

created!(
    Server,
    SecurityGroup,
    LoadBalancer,
    Listener,
    Pool,
    HealthMonitor,
    Member,
    Router
);

pub(crate) fn snapshot(st: &State, now: Timestamp) -> World {
    World {
        now,
        servers: st.servers.values().map(|s| s.server.clone()).collect(),
        security_groups: st.security_groups.values().cloned().collect(),
        load_balancers: st.lbs.values().map(|l| l.lb.clone()).collect(),
        listeners: st.listeners.values().cloned().collect(),
        pools: st.pools.values().cloned().collect(),
        health_monitors: st.health_monitors.values().cloned().collect(),
        members: st.members.values().map(|m| m.member.clone()).collect(),
        member_serving_since: st
            .members
            .values()
            .filter_map(|m| Some((m.member.id.clone(), m.serving_since?)))
            .collect(),
        nodes: st
            .nodes
            .values()
            .map(|n| (n.uid.clone(), n.node.clone()))
            .collect(),
        routers: st.routers.values().cloned().collect(),
        route_limit: crate::faults::lowest_route_limit(st, now).unwrap_or(st.config.max_routes),
        route_limit_changed: crate::faults::route_limit_changed(st, now),
        one_vms: crate::one::snapshot_vms(st),
        one_templates: crate::one::snapshot_templates(st),
        one_images: crate::one::snapshot_images(st),
        kube: crate::k8s::snapshot(st),
    }
}

impl SimCloud {
    /// The whole world as it is now (after catching up), including objects flightdeck
    /// does not own. Not counted as an API call.
    pub fn snapshot(&self) -> World {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        snapshot(&st, now)
    }

    /// How many changes the world has seen (after catching up): a world taken by
    /// [`SimCloud::refresh`] at the same count is the world now, but for its time and
    /// what the time alone decides.
    pub fn changes(&self) -> u64 {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        st.log.changes
    }

    /// Brings `cached` up to now: the world is taken again only if something changed
    /// since it was (a mutating call, a transition, a fixture or fault added); else only
    /// its time, and what the time alone decides (the route limit), move on. What
    /// [`SimCloud::snapshot`] would answer, at the cost of what changed.
    pub fn refresh(&self, cached: Option<(u64, World)>) -> (u64, World) {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        let changes = st.log.changes;
        // A stale world goes before the new one is taken: a fleet's world is large.
        let cached = cached.filter(|(at, _)| *at == changes);
        match cached {
            Some((_, mut world)) => {
                world.now = now;
                world.route_limit =
                    faults::lowest_route_limit(&st, now).unwrap_or(st.config.max_routes);
                world.route_limit_changed = faults::route_limit_changed(&st, now);
                (changes, world)
            }
            None => (changes, snapshot(&st, now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mutation(n: u64) -> Mutation {
        Mutation {
            at: Timestamp(n),
            service: "nova",
            operation: "POST /servers".into(),
            kind: MutationKind::Create,
            target_id: n.to_string(),
            target_name: String::new(),
            target_tags: vec![],
            ok: true,
            caller: None,
        }
    }

    #[test]
    fn mutation_log_keeps_the_latest_and_counts_what_it_dropped() {
        let mut log = Log::default();
        for n in 0..(MUTATIONS_MAX as u64 + 3) {
            log.mutation(mutation(n));
        }
        assert_eq!(log.mutations.len(), MUTATIONS_MAX);
        assert_eq!(log.mutations_dropped, 3);
        assert_eq!(log.mutations.front().map(|m| m.at), Some(Timestamp(3)));
    }
}
