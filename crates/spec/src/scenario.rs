//! `kind: Scenario`: clusters, a timed fault schedule, a timed workload and expectations,
//! run in simulated time.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cluster::{ApiVersion, Cluster, MachineTemplate};
use crate::duration::Duration;
use crate::names::{KubernetesVersion, Name, Text};

use crate::fault::presence;
pub use crate::fault::{Fault, FaultKind, LockLevelSpec, Service};

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
    /// The step must be refused, with an error that contains this text (an apply that
    /// breaks a rule across clusters, say); absent: it must be accepted.
    #[serde(default)]
    pub refused: Option<Text>,
}

/// The invariants a scenario can check at every step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Invariant {
    /// Once a cluster has been Ready, and until its deletion starts, at least one member is
    /// ACTIVE and ONLINE (or NO_MONITOR) and points at a Ready control-plane node; and
    /// no serving member is deleted while fewer other members serve than the spec's
    /// control-plane replicas (a rollout or repair never takes the pool below it).
    ApiEndpointServing,
    /// No owned object is deleted and re-created without a spec change.
    NoChurn,
    /// Nothing a deleted cluster owned remains: once flightdeck has forgotten it, and
    /// in any case once its deletion has had 20 minutes outside fault windows since the
    /// scenario asked for it.
    NoLeaks,
    /// No mutation touches an object that lacks a managed cluster's ownership tag, and
    /// no call made for one cluster changes an object another cluster's calls created
    /// (by the simulator's record of the calls, whatever the tags say).
    OnlyOwned,
    /// Cloud API calls stay within budget: per reconcile, per cluster-hour, and no
    /// action fails over and over in a hot loop.
    CallBudget,
    /// Once faults stop, the world comes to match the spec within a bound (each set's
    /// machines, members, rules, routes and templates, read from the cloud), and the
    /// cluster's status then says so.
    Convergence,
    /// No set holds more machines under repair (live machines beyond its replicas that
    /// neither a rollout's surge nor a scale-down explains) than its `maxUnhealthy`
    /// budget.
    RemediationWithinBudget,
    /// No set begins a repair while a fault blinds its cluster's observer (its node list
    /// empty, stale or all NotReady), unless the cloud itself reports a machine of the set
    /// failed.
    NoRemediationOnBlindObserver,
    /// A lost pod-network rule is back within one resync interval plus its backoff.
    RulesRestored,
    /// After the settling time, no pod-network destination has a stale next hop, and
    /// every Ready node of a running server has its route (unless the router is full).
    RoutesConsistent,
    /// A VMI KubeVirt asked to evacuate is deleted only after its guest node was drained
    /// (no pod that must leave is left on it) or its drain deadline passed (F9).
    DrainBeforeDelete,
    /// Every cluster is reconciled at least once per resync period (with its jitter)
    /// plus two minutes, by the calls the simulator sees made for it, outside windows in
    /// which calls were slowed by half a second or more (`api.latency`) or Keystone
    /// refused tokens: no cluster is starved.
    ReconcilePace,
    /// What flightdeck says of a cluster agrees with what the cloud shows: it never says
    /// Ready for long before the world first shows the cluster ready, and never withholds
    /// Ready for long, without a reason, from a cluster the world shows as its spec asks.
    StatusTruthful,
    /// No pod is lost with a machine flightdeck deleted while its node was Ready, unless
    /// the node's drain deadline (`nodeDrainTimeout`, counted from its cordon) had
    /// passed. Read from the pods the simulator saw go with their machines.
    NoPodLost,
    /// flightdeck never takes a PodDisruptionBudget below what it allows: no healthy pod
    /// a budget with no disruption left covers is deleted, or lost with its machine,
    /// by flightdeck's doing.
    DisruptionBudgetsKept,
    /// No Node of a machine that is gone outlives `nodeDeletionTimeout` plus one
    /// resync: `kubectl get nodes` lists no machine that no longer exists.
    NodesCleaned,
    /// kubeadm: no machine failed to join its cluster because of the data flightdeck
    /// gave it (a token that was missing or expired, a wrong hash, endpoint or CA),
    /// outside the faults that themselves break a join. Read from the simulator's record
    /// of every bootstrap.
    BootstrapValid,
    /// kubeadm: one `kubeadm init` per cluster life: never a second one while the
    /// cluster the first made still has a live machine (a split cluster).
    SingleInit,
}

impl Invariant {
    pub const ALL: [Invariant; 18] = [
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
        Invariant::ReconcilePace,
        Invariant::StatusTruthful,
        Invariant::NoPodLost,
        Invariant::DisruptionBudgetsKept,
        Invariant::NodesCleaned,
        Invariant::BootstrapValid,
        Invariant::SingleInit,
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
            Invariant::ReconcilePace => "reconcilePace",
            Invariant::StatusTruthful => "statusTruthful",
            Invariant::NoPodLost => "noPodLost",
            Invariant::DisruptionBudgetsKept => "disruptionBudgetsKept",
            Invariant::NodesCleaned => "nodesCleaned",
            Invariant::BootstrapValid => "bootstrapValid",
            Invariant::SingleInit => "singleInit",
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
    /// What the faults did, counted from the simulator's records by fault kind (the
    /// calls a fault answered, the objects it changed): proof that a fault really
    /// struck, or bounds on how much.
    #[serde(default)]
    pub faults: Vec<CountExpectation>,
    /// From this time on (since the start) no fault may be active, and the fleet must
    /// converge to its spec before the scenario ends: the `convergence` invariant.
    /// Absent: the invariant is not checked (the swarm sets its own).
    #[serde(default)]
    pub converge_after: Option<Duration>,
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
    /// Rules spanning several fields; returns the field path and the problem: the first
    /// of [`Scenario::problems`].
    pub fn validate(&self) -> Result<(), (String, String)> {
        crate::cluster::first_problem(self.problems())
    }

    /// Every rule spanning several fields that the scenario breaks, as (field path,
    /// problem). Each fault and each workload step reports its own; a fault reports
    /// the first thing wrong with it.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.kind != "Scenario" {
            out.push((
                "kind".into(),
                format!("expected Scenario, got {:?}", self.kind),
            ));
        }
        let s = &self.spec;
        if s.clusters.is_empty() {
            out.push((
                "spec.clusters".into(),
                "a scenario needs at least one cluster".into(),
            ));
        }
        for (i, c) in s.clusters.iter().enumerate() {
            if c.file.is_some() == c.inline.is_some() {
                out.push((
                    format!("spec.clusters[{i}]"),
                    "give exactly one of `file` and `inline`".into(),
                ));
            }
            if let Some(inline) = &c.inline {
                out.extend(
                    inline
                        .problems()
                        .into_iter()
                        .map(|(path, msg)| (format!("spec.clusters[{i}].inline.{path}"), msg)),
                );
            }
        }
        if s.faults.len() > SCENARIO_STEPS_MAX || s.workload.len() > SCENARIO_STEPS_MAX {
            // Checking each of too many steps is work the bound exists to refuse.
            out.push((
                "spec".into(),
                format!("at most {SCENARIO_STEPS_MAX} faults and workload steps are allowed"),
            ));
            return out;
        }
        for (i, f) in s.faults.iter().enumerate() {
            if let Err((field, msg)) = f.validate(s.duration) {
                out.push((format!("spec.faults[{i}].{field}"), msg));
            }
        }
        s.expect.problems(s, &mut out);
        for (i, w) in s.workload.iter().enumerate() {
            let at = |field: &str| format!("spec.workload[{i}].{field}");
            if w.at > s.duration {
                out.push((
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
                    out.push((
                        at(field),
                        presence(&format!("{:?}", w.action).to_lowercase(), wanted),
                    ));
                }
            }
            if w.action == WorkloadAction::Upgrade && w.pool.is_some() && w.machine.is_none() {
                out.push((
                    at("machine"),
                    "upgrading a node pool needs its new machine".into(),
                ));
            } else if w.action == WorkloadAction::Upgrade
                && w.version.is_none()
                && w.machine.is_none()
            {
                out.push((
                    at("version"),
                    "upgrade needs a version, a machine, or both".into(),
                ));
            }
        }
        out
    }
}

impl Expectations {
    /// `convergeAfter` lies within the run and after every fault; counted faults are
    /// fault kinds. Adds each rule broken to `out`.
    fn problems(&self, s: &ScenarioSpec, out: &mut Vec<(String, String)>) {
        if let Some(after) = self.converge_after {
            if after > s.duration {
                out.push((
                    "spec.expect.convergeAfter".into(),
                    format!("{after} is after the scenario ends ({})", s.duration),
                ));
            } else {
                for (i, f) in s.faults.iter().enumerate() {
                    let end = f.duration.map(|d| {
                        Duration::from_millis(f.at.as_millis().saturating_add(d.as_millis()))
                    });
                    if end.is_none_or(|end| end > after) {
                        out.push((
                            format!("spec.faults[{i}]"),
                            format!(
                                "{} is still active at convergeAfter ({after}); give it a duration that ends by then",
                                f.kind.as_str()
                            ),
                        ));
                    }
                }
            }
        }
        for (i, c) in self.faults.iter().enumerate() {
            if c.cluster.is_some() {
                out.push((
                    format!("spec.expect.faults[{i}].cluster"),
                    "faults are counted over the whole cloud; give no cluster".into(),
                ));
            }
            if !FaultKind::ALL.iter().any(|k| k.as_str() == c.what) {
                out.push((
                    format!("spec.expect.faults[{i}].what"),
                    format!("{:?} is not a fault kind", c.what),
                ));
            }
        }
    }
}
