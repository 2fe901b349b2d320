//! Which of an OpenStack cluster's lists a reconcile may take again from the one before
//! instead of asking the cloud (issue 16: a build cost 8 times the minimum of calls, most
//! of them lists of objects that had not changed since the last look, 2 seconds before).
//!
//! A list is taken again only while all of these hold:
//! - it is younger than [`REUSE_MAX`]. The planner already plans safely from lists that
//!   lag the cloud (a cache or a read replica, the Sieve class's stale read, up to
//!   `LIST_LAG_MAX`), and [`REUSE_MAX`] is well inside that;
//! - no action of the reconcile that made it touched its kind, or tried to: a list older
//!   than flightdeck's own write of that kind is never planned from;
//! - nothing in it is in flux: every object of its kind is settled (ACTIVE; a member
//!   also serving), and each object flightdeck recorded of that kind is in it. A wait on
//!   something that changes by itself (a server booting, a member coming ONLINE, a load
//!   balancer PENDING_UPDATE) lists that kind at every pass;
//! - the cluster is not being rolled out, repaired, scaled down or deleted, and no
//!   recorded load balancer or security group is missing: those decisions read every
//!   list fresh (a recorded server missing makes the server list fresh, above);
//! - for the API pool's members: the cluster has never been Ready. From then on the
//!   member gate (F2) decides from them, and they are listed at every pass.
//!
//! A pass whose plan turns the cluster Ready from lists taken again more than
//! [`READY_LISTS_MAX`] ago lists the ones a fault may change behind flightdeck's back
//! again, and plans again ([`stale_for_ready`]): Ready is said of the cloud as it is, not
//! as it was up to [`REUSE_MAX`] ago.
//!
//! The workload cluster's nodes are read at every pass (during a build, once a member
//! of the API pool serves: before, the API cannot answer), from its node watch; OpenNebula and KubeVirt
//! clusters list everything at every pass. A spec applied, a cluster let go of or taken
//! up, an engine restarted and a failed reconcile start again from fresh lists: the engine
//! forgets the observation then. (A spec applied while a reconcile is out gets that
//! reconcile's lists back; what is listed depends only on the spec's immutable fields,
//! the cluster's security group and router.)

use flightdeck_cloud::{
    Observed, OperatingStatus, ProvisioningStatus, ServerStatus, Timestamp, ownership::role_of,
};
use flightdeck_cloud::{Ownership, Role};
use flightdeck_plan::{Action, Memory, PlannedAction};
use flightdeck_spec::{Cluster, Duration};

use crate::observe::Reuse;

/// How old a list may be and still be taken again.
pub const REUSE_MAX: Duration = Duration::from_secs(90);

/// One kind of OpenStack list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Servers = 0,
    SecurityGroups,
    LoadBalancers,
    Listeners,
    Pools,
    HealthMonitors,
    Members,
    Router,
}

const KINDS: usize = 8;
const ALL: [Kind; KINDS] = [
    Kind::Servers,
    Kind::SecurityGroups,
    Kind::LoadBalancers,
    Kind::Listeners,
    Kind::Pools,
    Kind::HealthMonitors,
    Kind::Members,
    Kind::Router,
];

/// A set of kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kinds(u16);

impl Kinds {
    pub const NONE: Kinds = Kinds(0);
    pub const EVERY: Kinds = Kinds((1 << KINDS) - 1);

    pub(crate) fn has(self, k: Kind) -> bool {
        self.0 & (1 << k as u16) != 0
    }

    pub(crate) fn add(&mut self, k: Kind) {
        self.0 |= 1 << k as u16;
    }

    pub(crate) fn without(self, other: Kinds) -> Kinds {
        Kinds(self.0 & !other.0)
    }
}

/// A cluster's last observation, and when each of its lists was taken.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub observed: Observed,
    /// When each kind was listed (by [`Kind`] as index); `None`: never by this engine.
    pub listed_at: [Option<Timestamp>; KINDS],
    /// The kinds the actions of the reconcile that made it touched, or tried to.
    pub touched: Kinds,
}

impl Seen {
    /// An observation whose lists were all taken at `observed.at`, or (for `reused`)
    /// are those of `before`.
    pub fn new(observed: Observed, reused: Kinds, before: Option<&Seen>) -> Seen {
        let mut listed_at = [Some(observed.at); KINDS];
        if let Some(before) = before {
            for k in ALL {
                if reused.has(k) {
                    listed_at[k as usize] = before.listed_at[k as usize];
                }
            }
        }
        Seen {
            observed,
            listed_at,
            touched: Kinds::default(),
        }
    }
}

/// The kinds `actions` touch; anything but an OpenStack action touches every kind.
pub(crate) fn touched_by(actions: &[PlannedAction]) -> Kinds {
    use Kind::*;
    let mut out = Kinds::default();
    for a in actions {
        let kinds: &[Kind] = match &a.action {
            Action::CreateSecurityGroup { .. }
            | Action::CreateSecurityGroupRule { .. }
            | Action::DeleteSecurityGroup { .. } => &[SecurityGroups],
            Action::AddSecurityGroup { .. } => &[SecurityGroups, Servers],
            Action::CreateServer { .. } | Action::DeleteServer { .. } => &[Servers],
            Action::CreateLoadBalancer { .. } => &[LoadBalancers],
            Action::CreateListener { .. } => &[LoadBalancers, Listeners],
            Action::CreatePool { .. } => &[LoadBalancers, Pools],
            Action::CreateHealthMonitor { .. } => &[LoadBalancers, HealthMonitors, Members],
            Action::CreateMember { .. }
            | Action::AddMembers { .. }
            | Action::DeleteMember { .. } => &[LoadBalancers, Members],
            Action::AddRoutes { .. } | Action::RemoveRoutes { .. } => &[Router],
            _ => return Kinds::EVERY,
        };
        for k in kinds {
            out.add(*k);
        }
    }
    out
}

/// What a reconcile of `spec` at `now` may take from the observation before, or (for a
/// new cluster whose identity check found nothing of its name) from `blank`.
pub(crate) fn reusable<'a>(
    before: Option<&'a Seen>,
    blank: Option<&'a Observed>,
    now: Timestamp,
    spec: &Cluster,
    memory: &Memory,
    owner: &Ownership,
) -> Reuse<'a> {
    if let Some(blank) = blank {
        return from_nothing(blank, spec);
    }
    let openstack = !spec.spec.provider.is_kubevirt() && !spec.spec.provider.is_opennebula();
    match before {
        Some(seen) if openstack => Reuse {
            from: Some(&seen.observed),
            kinds: kinds_reusable(seen, now, memory, owner),
            building: memory.ready_since.is_none(),
        },
        _ => Reuse::NONE,
    }
}

/// What the first reconcile of a new OpenStack cluster takes from its identity check,
/// which found no object of the cluster's name at all in the same instant (`blank.at`):
/// its servers, security groups and load balancers are none, and asking again would
/// read the same three lists twice.
fn from_nothing<'a>(blank: &'a Observed, spec: &Cluster) -> Reuse<'a> {
    if spec.spec.provider.is_kubevirt() || spec.spec.provider.is_opennebula() {
        return Reuse::NONE;
    }
    let mut kinds = Kinds::default();
    for k in [Kind::Servers, Kind::SecurityGroups, Kind::LoadBalancers] {
        kinds.add(k);
    }
    Reuse {
        from: Some(blank),
        kinds,
        building: true,
    }
}

/// The kinds a pass that first says Ready must list again, because it took them from an
/// earlier pass more than [`READY_LISTS_MAX`] ago (swarm seed 41011018: a security-group
/// list a minute old missed a rule lost since, and the cluster was said Ready without
/// it). Only the kinds a fault changes behind flightdeck's back while nothing else moves
/// (rules, a server's groups, members) are listed again; the others changed only through
/// flightdeck's own calls, which end their reuse. [`Kinds::NONE`] when the pass does not
/// turn the cluster Ready.
pub(crate) fn stale_for_ready(
    plan: &flightdeck_plan::Plan,
    prev: &flightdeck_plan::ClusterStatus,
    reuse: &Reuse<'_>,
    seen: Option<&Seen>,
    now: Timestamp,
) -> Kinds {
    let mut out = Kinds::NONE;
    if !plan.status.ready || prev.ready {
        return out;
    }
    for k in [Kind::Servers, Kind::SecurityGroups, Kind::Members] {
        let old = seen
            .and_then(|s| s.listed_at[k as usize])
            .is_none_or(|at| now.since(at) > READY_LISTS_MAX);
        if reuse.kinds.has(k) && old {
            out.add(k);
        }
    }
    out
}

/// How old a reused list may be in the pass that first says Ready: under the 30 s
/// `statusTruthful` allows between the world changing and flightdeck saying so.
pub const READY_LISTS_MAX: Duration = Duration::from_secs(20);

/// The second look of a pass that first says Ready: `again` is listed anew, everything
/// else is taken from the first look of the pass (`first`).
pub(crate) fn relist<'a>(first: &'a Observed, again: Kinds, building: bool) -> Reuse<'a> {
    Reuse {
        from: Some(first),
        kinds: Kinds(Kinds::EVERY.0 & !again.0),
        building,
    }
}

/// The kinds the next reconcile of an OpenStack cluster may take from `seen` at `now`.
fn kinds_reusable(seen: &Seen, now: Timestamp, memory: &Memory, owner: &Ownership) -> Kinds {
    let mut out = Kinds::default();
    let busy = memory.deletion_requested.is_some()
        || memory.rollout_target.is_some()
        || memory.ids.missing_since.is_some()
        || memory
            .machines
            .values()
            .any(|r| r.removal.is_some() || r.remediation.is_some());
    if busy {
        return out;
    }
    for k in ALL {
        // A clock that stepped back makes no list young: `since` stops at zero.
        let young =
            seen.listed_at[k as usize].is_some_and(|at| at <= now && now.since(at) < REUSE_MAX);
        if young && !seen.touched.has(k) && settled(k, &seen.observed, memory, owner) {
            out.add(k);
        }
    }
    out
}

/// An Octavia list is settled when every object in it is ACTIVE and the one recorded is
/// there.
fn octavia<'a>(
    recorded: &Option<String>,
    listed: impl Iterator<Item = (ProvisioningStatus, &'a String)> + Clone,
) -> bool {
    listed.clone().all(|(s, _)| s == ProvisioningStatus::Active)
        && recorded
            .as_ref()
            .is_none_or(|id| listed.clone().any(|(_, x)| x == id))
}

/// Whether nothing of kind `k` in `o` is in flux, and everything recorded of it is there.
fn settled(k: Kind, o: &Observed, memory: &Memory, owner: &Ownership) -> bool {
    let ids = &memory.ids;
    fn has<'a>(id: &Option<String>, mut listed: impl Iterator<Item = &'a String>) -> bool {
        id.as_ref().is_none_or(|id| listed.any(|x| x == id))
    }
    let active = |s: ProvisioningStatus| s == ProvisioningStatus::Active;
    match k {
        Kind::Servers => {
            o.servers.iter().all(|s| {
                s.status == ServerStatus::Active
                    && s.task_state.is_none()
                    && memory
                        .machines
                        .values()
                        .any(|r| r.server_id.as_ref() == Some(&s.id))
            }) && memory.machines.values().all(|r| {
                r.server_id
                    .as_ref()
                    .is_some_and(|id| o.servers.iter().any(|s| &s.id == id))
            })
        }
        Kind::SecurityGroups => has(&ids.security_group, o.security_groups.iter().map(|x| &x.id)),
        Kind::LoadBalancers => octavia(
            &ids.load_balancer,
            o.load_balancers
                .iter()
                .map(|x| (x.provisioning_status, &x.id)),
        ),
        Kind::Listeners => octavia(
            &ids.listener,
            o.listeners.iter().map(|x| (x.provisioning_status, &x.id)),
        ),
        Kind::Pools => octavia(
            &ids.pool,
            o.pools.iter().map(|x| (x.provisioning_status, &x.id)),
        ),
        Kind::HealthMonitors => octavia(
            &ids.health_monitor,
            o.health_monitors
                .iter()
                .map(|x| (x.provisioning_status, &x.id)),
        ),
        Kind::Members => {
            // Once the API has served, a member list is what the member gate leans on
            // to take a member out (F2), and a list older than a member's going OFFLINE
            // cannot be seen through (ARCHITECTURE.md, "Stale lists"): it is taken at
            // every pass. Only a build's wait for its first members takes it again.
            let api_pool_listed = o
                .pools
                .iter()
                .any(|p| role_of(&p.tags) == Some(Role::ApiPool) && owner.owns(&p.tags));
            memory.ready_since.is_none()
                && api_pool_listed
                && o.members.iter().all(|m| {
                    // Under a health monitor NO_MONITOR is not serving yet (the planner
                    // reads it so): members made before the monitor show it until the
                    // amphora reports.
                    active(m.provisioning_status)
                        && (m.operating_status == OperatingStatus::Online
                            || (m.operating_status == OperatingStatus::NoMonitor
                                && o.health_monitors.is_empty()))
                })
                && memory.machines.values().all(|r| {
                    r.member_id
                        .as_ref()
                        .is_none_or(|id| o.members.iter().any(|m| &m.id == id))
                })
        }
        Kind::Router => o.router.is_some(),
    }
}

#[cfg(test)]
#[path = "reuse_tests.rs"]
mod tests;
