//! `kind: Scenario`: clusters, a timed fault schedule, a timed workload and expectations,
//! run in simulated time.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cluster::{ApiVersion, Cluster, MachineTemplate};
use crate::duration::Duration;
use crate::names::{KubernetesVersion, Name, Text};

/// The most faults or workload steps a scenario may hold.
pub const SCENARIO_STEPS_MAX: usize = 256;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    pub api_version: ApiVersion,
    pub kind: String,
    pub metadata: ScenarioMetadata,
    pub spec: ScenarioSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioMetadata {
    pub name: Text,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioSpec {
    #[serde(default)]
    pub description: String,
    /// The seed used when none is given on the command line.
    #[serde(default)]
    pub seed: u64,
    /// How much virtual time the scenario runs.
    pub duration: Duration,
    pub clusters: Vec<ClusterSource>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub workload: Vec<WorkloadStep>,
    /// Virtual times at which the controller is restarted (as after a crash): its
    /// memory survives in its store, everything else is rebuilt.
    #[serde(default)]
    pub restarts: Vec<Duration>,
    #[serde(default)]
    pub expect: Expectations,
}

/// A cluster given by a file path relative to the scenario file (`file:`), or inline
/// (`inline:`); exactly one of the two.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<Box<Cluster>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FaultKind {
    /// New members stay PENDING_CREATE while their load balancer reports ACTIVE.
    #[serde(rename = "octavia.memberStuckPending")]
    MemberStuckPending,
    /// Members report operating status OFFLINE.
    #[serde(rename = "octavia.memberOffline")]
    MemberOffline,
    /// Servers requested in the window go BUILD → ERROR.
    #[serde(rename = "nova.bootError")]
    BootError,
    /// A fraction of one service's calls answer 503.
    #[serde(rename = "api.errorRate")]
    ApiErrorRate,
    /// One service's calls take longer.
    #[serde(rename = "api.latency")]
    ApiLatency,
    /// Servers booted in the window never register a node (`rate` of them).
    #[serde(rename = "net.noRegistration")]
    NoRegistration,
    /// At the start, `count` pod-network ingress rules disappear from a cluster's group.
    #[serde(rename = "neutron.ruleLost")]
    RuleLost,
    /// Servers created in the window come up without their security group (`rate`), and
    /// at the start `count` running servers lose it.
    #[serde(rename = "nova.dropSecurityGroup")]
    DropSecurityGroup,
    /// At the start, `count` stale routes (a live pod network's destination, a dead next
    /// hop) appear on the cluster's router.
    #[serde(rename = "router.staleRoute")]
    StaleRoute,
    /// While active, routers hold at most `count` extra routes.
    #[serde(rename = "neutron.maxRoutes")]
    MaxRoutes,
    /// While active, the workload cluster's node list comes back empty.
    #[serde(rename = "observer.emptyNodeList")]
    EmptyNodeList,
    /// While active, every node reports NotReady.
    #[serde(rename = "observer.allNotReady")]
    AllNotReady,
    /// At the start, an operator locks every OpenNebula template whose name starts with
    /// `template`, at `level`; at the end (if the fault has a duration) unlocks them.
    #[serde(rename = "one.lockTemplate")]
    OneLockTemplate,
    /// OpenNebula VMs instantiated in the window end in BOOT_FAILURE (`rate` of them).
    #[serde(rename = "one.vmBootFailure")]
    OneVmBootFailure,
    /// OpenNebula images allocated in the window end in ERROR (`rate` of them).
    #[serde(rename = "one.imageError")]
    OneImageError,
    /// A fraction (`rate`) of OpenNebula XML-RPC calls answer INTERNAL.
    #[serde(rename = "one.rpcError")]
    OneRpcError,
    /// At the start, the infra node `node` is drained: KubeVirt sets
    /// `status.evacuationNodeName` on every VMI there whose eviction strategy is
    /// External (as its eviction webhook does), and schedules nothing new on it until the
    /// fault ends.
    #[serde(rename = "kubevirt.drainInfraNode")]
    KubevirtDrainInfraNode,
    /// While active, every PodDisruptionBudget of the workload cluster (of `cluster`, or
    /// of all) keeps `disruptionsAllowed` at 0.
    #[serde(rename = "k8s.pdbBlocks")]
    K8sPdbBlocks,
}

impl FaultKind {
    /// The kinds that hit an OpenStack fleet (and its workload clusters).
    pub const OPENSTACK: [FaultKind; 12] = [
        FaultKind::MemberStuckPending,
        FaultKind::MemberOffline,
        FaultKind::BootError,
        FaultKind::ApiErrorRate,
        FaultKind::ApiLatency,
        FaultKind::NoRegistration,
        FaultKind::RuleLost,
        FaultKind::DropSecurityGroup,
        FaultKind::StaleRoute,
        FaultKind::MaxRoutes,
        FaultKind::EmptyNodeList,
        FaultKind::AllNotReady,
    ];

    pub const ALL: [FaultKind; 18] = [
        FaultKind::MemberStuckPending,
        FaultKind::MemberOffline,
        FaultKind::BootError,
        FaultKind::ApiErrorRate,
        FaultKind::ApiLatency,
        FaultKind::NoRegistration,
        FaultKind::RuleLost,
        FaultKind::DropSecurityGroup,
        FaultKind::StaleRoute,
        FaultKind::MaxRoutes,
        FaultKind::EmptyNodeList,
        FaultKind::AllNotReady,
        FaultKind::OneLockTemplate,
        FaultKind::OneVmBootFailure,
        FaultKind::OneImageError,
        FaultKind::OneRpcError,
        FaultKind::KubevirtDrainInfraNode,
        FaultKind::K8sPdbBlocks,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::MemberStuckPending => "octavia.memberStuckPending",
            FaultKind::MemberOffline => "octavia.memberOffline",
            FaultKind::BootError => "nova.bootError",
            FaultKind::ApiErrorRate => "api.errorRate",
            FaultKind::ApiLatency => "api.latency",
            FaultKind::NoRegistration => "net.noRegistration",
            FaultKind::RuleLost => "neutron.ruleLost",
            FaultKind::DropSecurityGroup => "nova.dropSecurityGroup",
            FaultKind::StaleRoute => "router.staleRoute",
            FaultKind::MaxRoutes => "neutron.maxRoutes",
            FaultKind::EmptyNodeList => "observer.emptyNodeList",
            FaultKind::AllNotReady => "observer.allNotReady",
            FaultKind::OneLockTemplate => "one.lockTemplate",
            FaultKind::OneVmBootFailure => "one.vmBootFailure",
            FaultKind::OneImageError => "one.imageError",
            FaultKind::OneRpcError => "one.rpcError",
            FaultKind::KubevirtDrainInfraNode => "kubevirt.drainInfraNode",
            FaultKind::K8sPdbBlocks => "k8s.pdbBlocks",
        }
    }
}

/// A cloud service that faults can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    Keystone,
    Nova,
    Neutron,
    Octavia,
    Kubernetes,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Keystone => "keystone",
            Service::Nova => "nova",
            Service::Neutron => "neutron",
            Service::Octavia => "octavia",
            Service::Kubernetes => "kubernetes",
        }
    }
}

/// One fault in the schedule. Parameters that a kind does not use are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fault {
    pub at: Duration,
    /// How long the fault lasts; absent means until the end of the scenario.
    #[serde(default)]
    pub duration: Option<Duration>,
    pub kind: FaultKind,
    /// `api.errorRate`, `api.latency`: the service hit.
    #[serde(default)]
    pub service: Option<Service>,
    /// `api.errorRate`, `nova.bootError`: fraction of calls or servers hit, 0 < rate ≤ 1.
    #[serde(default)]
    pub rate: Option<f64>,
    /// `api.latency`: extra time per call.
    #[serde(default)]
    pub latency: Option<Duration>,
    /// `octavia.memberOffline`: how many existing members go offline (default 1).
    #[serde(default)]
    pub count: Option<u32>,
    /// `octavia.*`, `nova.bootError`: only this cluster's objects are hit; absent hits
    /// every cluster's.
    #[serde(default)]
    pub cluster: Option<Name>,
    /// `one.lockTemplate`: the lock level.
    #[serde(default)]
    pub level: Option<LockLevelSpec>,
    /// `one.lockTemplate`: templates whose name starts with this are locked.
    #[serde(default)]
    pub template: Option<Text>,
    /// `kubevirt.drainInfraNode`: the infra node drained.
    #[serde(default)]
    pub node: Option<Text>,
}

/// An OpenNebula lock level, as `one.lockTemplate` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockLevelSpec {
    Use,
    Manage,
    Admin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WorkloadAction {
    /// Apply a cluster spec (new or changed), from `file`.
    Apply,
    /// Change a node pool's (or, without `pool`, the control plane's) replica count.
    Scale,
    /// Change the control plane's version and/or machine template (or, with `pool`, that
    /// node pool's machine template): a rollout.
    Upgrade,
    /// Delete the cluster.
    Delete,
    /// Close the cluster's churn breakers, as `flightdeck resume` does.
    Resume,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadStep {
    pub at: Duration,
    pub action: WorkloadAction,
    pub cluster: Name,
    #[serde(default)]
    pub file: Option<PathBuf>,
    #[serde(default)]
    pub pool: Option<Name>,
    #[serde(default)]
    pub replicas: Option<u32>,
    #[serde(default)]
    pub version: Option<KubernetesVersion>,
    #[serde(default)]
    pub machine: Option<MachineTemplate>,
}

/// The invariants a scenario can check at every step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Invariant {
    /// Once a cluster has been Ready, and until its deletion starts, at least one member is
    /// ACTIVE and ONLINE (or NO_MONITOR) and points at a Ready control-plane node.
    ApiEndpointServing,
    /// No owned object is deleted and re-created without a spec change.
    NoChurn,
    /// After a cluster's deletion completes, nothing it owned remains.
    NoLeaks,
    /// No mutation touches an object that lacks the cluster's ownership tag.
    OnlyOwned,
    /// Cloud API calls stay within budget: per reconcile, per cluster-hour, and no
    /// action fails over and over in a hot loop.
    CallBudget,
    /// Once faults stop, the fleet converges to its spec within a bound.
    Convergence,
    /// No set has more machines under remediation than its `maxUnhealthy` budget.
    RemediationWithinBudget,
    /// No remediation decided from the node list starts while that list is blind
    /// (empty, or every node NotReady because of the observer).
    NoRemediationOnBlindObserver,
    /// A lost pod-network rule is back within one resync interval plus its backoff.
    RulesRestored,
    /// After the settling time, no pod-network destination has a stale next hop.
    RoutesConsistent,
    /// A VMI KubeVirt asked to evacuate is deleted only after its guest node was drained
    /// (no pod that must leave is left on it) or its drain deadline passed (F9).
    DrainBeforeDelete,
}

impl Invariant {
    pub const ALL: [Invariant; 11] = [
        Invariant::ApiEndpointServing,
        Invariant::NoChurn,
        Invariant::NoLeaks,
        Invariant::OnlyOwned,
        Invariant::CallBudget,
        Invariant::Convergence,
        Invariant::RemediationWithinBudget,
        Invariant::NoRemediationOnBlindObserver,
        Invariant::RulesRestored,
        Invariant::RoutesConsistent,
        Invariant::DrainBeforeDelete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Invariant::ApiEndpointServing => "apiEndpointServing",
            Invariant::NoChurn => "noChurn",
            Invariant::NoLeaks => "noLeaks",
            Invariant::OnlyOwned => "onlyOwned",
            Invariant::CallBudget => "callBudget",
            Invariant::Convergence => "convergence",
            Invariant::RemediationWithinBudget => "remediationWithinBudget",
            Invariant::NoRemediationOnBlindObserver => "noRemediationOnBlindObserver",
            Invariant::RulesRestored => "rulesRestored",
            Invariant::RoutesConsistent => "routesConsistent",
            Invariant::DrainBeforeDelete => "drainBeforeDelete",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectations {
    /// Invariants to check; absent means all of them.
    #[serde(default)]
    pub invariants: Option<Vec<Invariant>>,
    /// Conditions that must be seen with the given status inside a time window.
    #[serde(default)]
    pub conditions: Vec<ConditionExpectation>,
    /// Where each named cluster must be when the scenario ends.
    #[serde(default, rename = "final")]
    pub final_state: Vec<FinalExpectation>,
    /// Events counted over the whole run, by reason: one that must never happen
    /// (`max: 0`), or happens between `min` and `max` times.
    #[serde(default)]
    pub events: Vec<CountExpectation>,
    /// Mutating calls counted from the simulator's log, by operation (as the log names
    /// it, e.g. `DELETE /servers/{server_id}`), of the objects tagged with `cluster`.
    #[serde(default)]
    pub mutations: Vec<CountExpectation>,
}

/// Something counted over a run: between `min` and `max` times (either may be absent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CountExpectation {
    /// An event's reason, or a mutation's operation.
    #[serde(alias = "reason", alias = "operation")]
    pub what: String,
    /// Only this cluster's (its events; mutations of objects tagged with its name).
    #[serde(default)]
    pub cluster: Option<Name>,
    #[serde(default)]
    pub min: u64,
    #[serde(default)]
    pub max: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionExpectation {
    pub cluster: Name,
    #[serde(rename = "type")]
    pub condition: String,
    /// `true`: the condition is seen True in the window; `false`: it is gone (False or
    /// not shown) at some point in the window.
    #[serde(default = "yes")]
    pub status: bool,
    /// The condition must be seen no earlier than this (virtual time since start).
    #[serde(default)]
    pub after: Duration,
    /// ... and no later than this.
    pub within: Duration,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FinalState {
    Ready,
    Deleted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FinalExpectation {
    pub cluster: Name,
    pub state: FinalState,
    /// For a Ready cluster: the control-plane version it must run.
    #[serde(default)]
    pub version: Option<KubernetesVersion>,
}

impl Scenario {
    /// Rules spanning several fields; returns the field path and the problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.kind != "Scenario" {
            return Err((
                "kind".into(),
                format!("expected Scenario, got {:?}", self.kind),
            ));
        }
        let s = &self.spec;
        if s.clusters.is_empty() {
            return Err((
                "spec.clusters".into(),
                "a scenario needs at least one cluster".into(),
            ));
        }
        for (i, c) in s.clusters.iter().enumerate() {
            if c.file.is_some() == c.inline.is_some() {
                return Err((
                    format!("spec.clusters[{i}]"),
                    "give exactly one of `file` and `inline`".into(),
                ));
            }
            if let Some(inline) = &c.inline {
                inline
                    .validate()
                    .map_err(|(path, msg)| (format!("spec.clusters[{i}].inline.{path}"), msg))?;
            }
        }
        if s.faults.len() > SCENARIO_STEPS_MAX || s.workload.len() > SCENARIO_STEPS_MAX {
            return Err((
                "spec".into(),
                format!("at most {SCENARIO_STEPS_MAX} faults and workload steps are allowed"),
            ));
        }
        for (i, f) in s.faults.iter().enumerate() {
            let at = |field: &str| format!("spec.faults[{i}].{field}");
            if f.at > s.duration {
                return Err((
                    at("at"),
                    format!("{} is after the scenario ends ({})", f.at, s.duration),
                ));
            }
            let (needs_service, needs_rate, needs_latency, takes_count, takes_rate) = match f.kind {
                FaultKind::MemberStuckPending => (false, false, false, false, false),
                FaultKind::MemberOffline => (false, false, false, true, false),
                FaultKind::BootError => (false, false, false, false, true),
                FaultKind::ApiErrorRate => (true, true, false, false, true),
                FaultKind::ApiLatency => (true, false, true, false, false),
                FaultKind::NoRegistration => (false, false, false, false, true),
                FaultKind::RuleLost => (false, false, false, true, false),
                FaultKind::DropSecurityGroup => (false, false, false, true, true),
                FaultKind::StaleRoute => (false, false, false, true, false),
                FaultKind::MaxRoutes => (false, false, false, true, false),
                FaultKind::EmptyNodeList => (false, false, false, false, false),
                FaultKind::AllNotReady => (false, false, false, false, false),
                FaultKind::OneLockTemplate => (false, false, false, false, false),
                FaultKind::OneVmBootFailure => (false, false, false, false, true),
                FaultKind::OneImageError => (false, false, false, false, true),
                FaultKind::OneRpcError => (false, true, false, false, true),
                FaultKind::KubevirtDrainInfraNode => (false, false, false, false, false),
                FaultKind::K8sPdbBlocks => (false, false, false, false, false),
            };
            let drains = f.kind == FaultKind::KubevirtDrainInfraNode;
            if drains != f.node.is_some() {
                return Err((at("node"), presence(f.kind.as_str(), drains)));
            }
            let locks = f.kind == FaultKind::OneLockTemplate;
            if locks != f.level.is_some() {
                return Err((at("level"), presence(f.kind.as_str(), locks)));
            }
            if locks != f.template.is_some() {
                return Err((at("template"), presence(f.kind.as_str(), locks)));
            }
            if f.kind == FaultKind::MaxRoutes && f.count.is_none() {
                return Err((
                    at("count"),
                    "neutron.maxRoutes needs the limit as `count`".into(),
                ));
            }
            let kind = f.kind.as_str();
            if needs_service != f.service.is_some() {
                return Err((at("service"), presence(kind, needs_service)));
            }
            if needs_rate && f.rate.is_none() {
                return Err((at("rate"), presence(kind, true)));
            }
            if !takes_rate && f.rate.is_some() {
                return Err((at("rate"), presence(kind, false)));
            }
            if let Some(rate) = f.rate
                && !(rate > 0.0 && rate <= 1.0)
            {
                return Err((at("rate"), format!("must be in (0, 1], got {rate}")));
            }
            if needs_latency != f.latency.is_some() {
                return Err((at("latency"), presence(kind, needs_latency)));
            }
            if !takes_count && f.count.is_some() {
                return Err((at("count"), presence(kind, false)));
            }
            if f.count == Some(0) {
                return Err((at("count"), "must be at least 1".into()));
            }
            let takes_cluster = !matches!(
                f.kind,
                FaultKind::ApiErrorRate
                    | FaultKind::ApiLatency
                    | FaultKind::OneRpcError
                    | FaultKind::OneLockTemplate
                    | FaultKind::OneImageError
                    | FaultKind::KubevirtDrainInfraNode
            );
            if !takes_cluster && f.cluster.is_some() {
                return Err((
                    at("cluster"),
                    format!("{kind} hits a whole service; it takes no cluster"),
                ));
            }
        }
        for (i, w) in s.workload.iter().enumerate() {
            let at = |field: &str| format!("spec.workload[{i}].{field}");
            if w.at > s.duration {
                return Err((
                    at("at"),
                    format!("{} is after the scenario ends ({})", w.at, s.duration),
                ));
            }
            let (file, pool, replicas, version, machine) = match w.action {
                WorkloadAction::Apply => (true, false, false, false, false),
                WorkloadAction::Scale => (false, w.pool.is_some(), true, false, false),
                WorkloadAction::Upgrade => (
                    false,
                    w.pool.is_some(),
                    false,
                    w.version.is_some() && w.pool.is_none(),
                    w.machine.is_some(),
                ),
                WorkloadAction::Delete | WorkloadAction::Resume => {
                    (false, false, false, false, false)
                }
            };
            for (field, wanted, present) in [
                ("file", file, w.file.is_some()),
                ("pool", pool, w.pool.is_some()),
                ("replicas", replicas, w.replicas.is_some()),
                ("version", version, w.version.is_some()),
                ("machine", machine, w.machine.is_some()),
            ] {
                if wanted != present {
                    return Err((
                        at(field),
                        presence(&format!("{:?}", w.action).to_lowercase(), wanted),
                    ));
                }
            }
            if w.action == WorkloadAction::Upgrade && w.pool.is_some() && w.machine.is_none() {
                return Err((
                    at("machine"),
                    "upgrading a node pool needs its new machine".into(),
                ));
            }
            if w.action == WorkloadAction::Upgrade && w.version.is_none() && w.machine.is_none() {
                return Err((
                    at("version"),
                    "upgrade needs a version, a machine, or both".into(),
                ));
            }
        }
        Ok(())
    }
}

fn presence(kind: &str, needed: bool) -> String {
    if needed {
        format!("{kind} needs this field")
    } else {
        format!("{kind} does not take this field")
    }
}
