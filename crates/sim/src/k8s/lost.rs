//! Ground truth about the workload's pods that no API shows: the pods lost with their
//! node's machine ([`LostPod`]), and every disruption a PodDisruptionBudget covered,
//! with the budget as it stood ([`BudgetEvent`]). Both logs are bounded and numbered as
//! the mutation log is.

use std::collections::VecDeque;

use flightdeck_cloud::Timestamp;
use serde::Serialize;
use serde_json::Value;

use super::disruption::pdbs_for_pod;
use super::objects::{must_leave, pod_is_ready, pod_node, pod_ns};
use super::store::{Kind, at, deleting, name_of};
use flightdeck_cloud::Clock;

use crate::{SimCloud, State};

/// The most lost pods [`SimCloud::lost_pods`] keeps; older ones are dropped.
pub const LOST_PODS_MAX: usize = 10_000;
/// The most budget events [`SimCloud::budget_events_since`] keeps.
pub const BUDGET_EVENTS_MAX: usize = 10_000;

/// A pod that was on its node when the node's machine (a Nova server, an OpenNebula
/// VM, a KubeVirt VMI) went: it was never evicted, or its graceful deletion had not
/// finished (`terminating`). DaemonSet and mirror pods belong to their node and are
/// never lost; neither are finished pods.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LostPod {
    /// When the machine went (the pod with it).
    pub at: Timestamp,
    /// The flightdeck cluster.
    pub cluster: String,
    pub node: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Whether it had an `emptyDir` volume: data that went with the machine.
    pub empty_dir: bool,
    /// Whether its graceful deletion had begun (an eviction or a delete) and not ended.
    pub terminating: bool,
    /// When the deletion of the node's machine began, if the simulator saw it begin
    /// (a machine can also just stop).
    pub deletion_began_at: Option<Timestamp>,
    /// Whether the node was Ready when its machine's deletion began (when it went, if
    /// no beginning was seen).
    pub node_ready_at_deletion: bool,
    /// Whether the machine's deletion was asked through the cloud's API (flightdeck's
    /// calls), not made out of band (an operator's, a fault's).
    pub deleted_by_api: bool,
    /// Since when the node had been cordoned through its API when its machine's deletion
    /// began: a drain starts with its cordon, so its deadline counts from here.
    pub cordoned_at: Option<Timestamp>,
}

/// How the deletion of a node's machine began.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeletionBegun {
    pub(crate) at: Timestamp,
    /// The node was Ready then.
    pub(crate) ready: bool,
    pub(crate) by_api: bool,
    pub(crate) cordoned_at: Option<Timestamp>,
}

/// Node `node` of `cluster` was cordoned (or uncordoned) through its API at `now`.
pub(crate) fn note_cordon(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    node: &str,
    cordoned: bool,
) {
    let Some(w) = st.kube.workloads.get_mut(cluster) else {
        return;
    };
    if cordoned {
        w.cordoned_at.entry(node.to_string()).or_insert(now);
    } else {
        w.cordoned_at.remove(node);
    }
}

/// What happened to a pod a PodDisruptionBudget covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BudgetEventKind {
    /// The Eviction API let the pod go (it took one of `disruptions_allowed`).
    EvictionGranted,
    /// The Eviction API refused: 429, the budget allows no disruption.
    EvictionRefused,
    /// The pod was deleted directly (`DELETE` of the pod), not through the Eviction API.
    PodDeleted,
    /// The pod went with its node's machine.
    MachineDeleted,
}

/// One disruption (or refused one) of a pod a PodDisruptionBudget covers, with the
/// budget's status just before it. A `PodDeleted` or `MachineDeleted` of a healthy pod
/// (`pod_healthy`) while `disruptions_allowed` was 0 took the budget below what it
/// allows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetEvent {
    pub at: Timestamp,
    pub cluster: String,
    pub kind: BudgetEventKind,
    pub namespace: String,
    pub pdb: String,
    pub pod: String,
    /// The pod counted among the budget's healthy pods (Ready, not being deleted).
    pub pod_healthy: bool,
    pub disruptions_allowed: i64,
    pub current_healthy: i64,
    pub desired_healthy: i64,
    pub expected_pods: i64,
}

/// The two logs.
#[derive(Debug, Default)]
pub(crate) struct Records {
    lost: VecDeque<LostPod>,
    lost_dropped: u64,
    budget: VecDeque<BudgetEvent>,
    budget_dropped: u64,
}

fn push_bounded<T>(log: &mut VecDeque<T>, dropped: &mut u64, max: usize, item: T) {
    if log.len() >= max {
        log.pop_front();
        *dropped += 1;
    }
    log.push_back(item);
}

impl Records {
    pub(crate) fn lost(&mut self, p: LostPod) {
        push_bounded(&mut self.lost, &mut self.lost_dropped, LOST_PODS_MAX, p);
    }

    pub(crate) fn budget(&mut self, e: BudgetEvent) {
        let max = BUDGET_EVENTS_MAX;
        push_bounded(&mut self.budget, &mut self.budget_dropped, max, e);
    }
}

/// Records `kind` for pod `ns/name` of `cluster` against every budget covering it, with
/// each budget's status now (before the disruption takes effect).
pub(crate) fn note_budget(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    pod: &Value,
    kind: BudgetEventKind,
) {
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let healthy = pod_is_ready(pod) && !deleting(pod);
    let events: Vec<BudgetEvent> = pdbs_for_pod(store, pod)
        .into_iter()
        .map(|pdb| {
            let n = |f: &str| at(pdb, &["status", f]).and_then(Value::as_i64).unwrap_or(0);
            BudgetEvent {
                at: now,
                cluster: cluster.to_string(),
                kind,
                namespace: pod_ns(pod).to_string(),
                pdb: name_of(pdb).to_string(),
                pod: name_of(pod).to_string(),
                pod_healthy: healthy,
                disruptions_allowed: n("disruptionsAllowed"),
                current_healthy: n("currentHealthy"),
                desired_healthy: n("desiredHealthy"),
                expected_pods: n("expectedPods"),
            }
        })
        .collect();
    for e in events {
        st.kube.records.budget(e);
    }
}

/// Node `node` of `cluster` went with its machine at `t`: the pods still on it that
/// would have had to leave (not DaemonSet, not mirror, not finished, being deleted or
/// not) are lost. Answers those not being deleted as `(namespace, name)`, for the
/// caller to remove (the others go when their grace period ends, as before).
pub(crate) fn lose_pods(
    st: &mut State,
    t: Timestamp,
    cluster: &str,
    node: &str,
) -> Vec<(String, String)> {
    let began = st
        .kube
        .workloads
        .get_mut(cluster)
        .and_then(|w| w.deletions_begun.remove(node));
    let Some(store) = st.kube.store(cluster) else {
        return Vec::new();
    };
    let ready_now = store
        .get(Kind::Node, "", node)
        .is_some_and(super::objects::node_is_ready);
    let on_node: Vec<Value> = store
        .list(Kind::Pod, None)
        .filter(|p| pod_node(p) == Some(node))
        .filter(|p| must_leave(p) || (deleting(p) && leaves_if_deleted(p)))
        .cloned()
        .collect();
    let mut gone = Vec::new();
    for pod in on_node {
        note_budget(st, t, cluster, &pod, BudgetEventKind::MachineDeleted);
        st.kube.records.lost(LostPod {
            at: t,
            cluster: cluster.to_string(),
            node: node.to_string(),
            namespace: pod_ns(&pod).to_string(),
            name: name_of(&pod).to_string(),
            uid: super::uid_of(&pod).to_string(),
            empty_dir: has_empty_dir(&pod),
            terminating: deleting(&pod),
            deletion_began_at: began.map(|b| b.at),
            node_ready_at_deletion: began.map_or(ready_now, |b| b.ready),
            deleted_by_api: began.is_some_and(|b| b.by_api),
            cordoned_at: began.and_then(|b| b.cordoned_at),
        });
        if !deleting(&pod) {
            gone.push((pod_ns(&pod).to_string(), name_of(&pod).to_string()));
        }
    }
    gone
}

/// Pod `pod` of `cluster`, bound to a Node that was deleted, is garbage collected at `t`:
/// if it had to leave and its node's machine had begun to go, it is lost, judged by how
/// that deletion began (a Node deleted under a machine that stays loses nothing: its
/// pods are made again elsewhere, as the wire test of a deleted Node shows).
pub(crate) fn lose_orphan(st: &mut State, t: Timestamp, cluster: &str, pod: &Value) {
    if !(must_leave(pod) || (deleting(pod) && leaves_if_deleted(pod))) {
        return;
    }
    let node = pod_node(pod).unwrap_or_default().to_string();
    let Some(began) = st
        .kube
        .workloads
        .get(cluster)
        .and_then(|w| w.deletions_begun.get(&node).copied())
    else {
        return;
    };
    let began = Some(began);
    note_budget(st, t, cluster, pod, BudgetEventKind::MachineDeleted);
    st.kube.records.lost(LostPod {
        at: t,
        cluster: cluster.to_string(),
        node,
        namespace: pod_ns(pod).to_string(),
        name: name_of(pod).to_string(),
        uid: super::uid_of(pod).to_string(),
        empty_dir: has_empty_dir(pod),
        terminating: deleting(pod),
        deletion_began_at: began.map(|b| b.at),
        node_ready_at_deletion: began.is_some_and(|b| b.ready),
        deleted_by_api: began.is_some_and(|b| b.by_api),
        cordoned_at: began.and_then(|b| b.cordoned_at),
    });
}

/// A pod being deleted that would count as lost: not DaemonSet, mirror or finished.
fn leaves_if_deleted(pod: &Value) -> bool {
    !super::objects::is_daemonset_pod(pod)
        && !super::objects::is_mirror_pod(pod)
        && !super::objects::finished(pod)
}

fn has_empty_dir(pod: &Value) -> bool {
    at(pod, &["spec", "volumes"])
        .and_then(Value::as_array)
        .is_some_and(|vs| vs.iter().any(|v| v.get("emptyDir").is_some()))
}

impl SimCloud {
    /// Every pod lost with its node's machine, oldest first (the latest
    /// [`LOST_PODS_MAX`]): the ground truth for "no pod was lost to a machine deleted
    /// before its node was drained". Not an API call.
    pub fn lost_pods(&self) -> Vec<LostPod> {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.kube.records.lost.iter().cloned().collect()
    }

    /// The lost pods numbered `from` and later, and the number the next one will get,
    /// as [`SimCloud::mutations_since`] answers mutations.
    pub fn lost_pods_since(&self, from: u64) -> (Vec<LostPod>, u64) {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        let r = &st.kube.records;
        crate::world::numbered_since(&r.lost, r.lost_dropped, from)
    }

    /// The budget events numbered `from` and later (the latest [`BUDGET_EVENTS_MAX`]),
    /// and the number the next one will get: every eviction granted or refused, and
    /// every pod a budget covers deleted directly or lost with its machine. Not an API
    /// call.
    pub fn budget_events_since(&self, from: u64) -> (Vec<BudgetEvent>, u64) {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        let r = &st.kube.records;
        crate::world::numbered_since(&r.budget, r.budget_dropped, from)
    }
}
