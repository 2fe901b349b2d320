//! F9: graceful eviction of KubeVirt VMIs with a bounded drain.
//!
//! When an infra node is drained, KubeVirt marks each VMI there whose eviction strategy is
//! `External` with `status.evacuationNodeName` (the **infra** node) and leaves the rest to
//! the cluster's controller. flightdeck then:
//!
//! 1. finds the guest node by the machine's own identity (its providerID
//!    `kubevirt://<vm>`), never by `evacuationNodeName`; a guest node it cannot find is an
//!    error condition, not a drained node;
//! 2. records when the drain started, in memory, so its deadline survives restarts;
//! 3. cordons the guest node and evicts its pods through the Eviction API, skipping
//!    DaemonSet and mirror pods; a 429 (a PodDisruptionBudget) is looked at again later,
//!    never waited for inside a reconcile;
//! 4. deletes the VMI once no pod that must leave is left, or anyway once `drainTimeout`
//!    has passed since the drain started (with an event saying so);
//! 5. uncordons the guest node once the replacement VMI runs and the node is Ready.
//!
//! Upstream looked the guest node up by `evacuationNodeName` and took the NotFound for
//! "drained" ([`DrainPolicy::UpstreamByEvacuationNode`], kept only to prove the
//! `drainBeforeDelete` invariant catches it).

use flightdeck_cloud::{EvictionStrategy, Node, Vmi};
use flightdeck_spec::Duration;

use crate::Planner;
use crate::action::Action;
use crate::condition::PlanEvent;
use crate::memory::DrainRecord;
use crate::node_drain::{self, Ask, MissingNode, Step};
use crate::safety::Mechanism;

pub use crate::node_drain::{DRAINING, POLL_DRAIN};

/// How often a KubeVirt cluster's VMIs are looked at for evacuation requests when nothing
/// else is under way. An infra node drain waits on flightdeck, so it must be noticed
/// soon; the periodic resync alone would take minutes.
pub const POLL_EVACUATION: Duration = Duration::from_secs(30);

/// How the guest node of an evacuated VMI is found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DrainPolicy {
    /// By the machine's identity (providerID `kubevirt://<vm>`, else the VM's name).
    #[default]
    ByIdentity,
    /// **Unsafe**, kept only to prove the invariants catch it: by
    /// `evacuationNodeName`, the infra node's name, and a NotFound counts as drained.
    UpstreamByEvacuationNode,
}

/// Whether KubeVirt asks flightdeck to evacuate this VMI.
pub fn evacuation_requested(vmi: &Vmi) -> bool {
    !vmi.deleting
        && vmi.eviction_strategy == Some(EvictionStrategy::External)
        && vmi.evacuation_node.is_some()
}

/// The guest node of machine `vm`, found by its identity.
pub fn guest_node_of<'a>(nodes: &'a [Node], vm: &str) -> Option<&'a Node> {
    nodes
        .iter()
        .find(|n| n.server_id.as_deref() == Some(vm))
        .or_else(|| nodes.iter().find(|n| n.name == vm && n.server_id.is_none()))
}

/// Plans every drain of the cluster.
pub(crate) fn plan_drains(p: &mut Planner<'_>) {
    let Some(kv) = p.spec.spec.provider.kubevirt.as_ref() else {
        return;
    };
    let timeout = kv.drain_timeout;
    p.wait(POLL_EVACUATION);
    let vmis: Vec<Vmi> = p.observed.vmis.clone();
    for vmi in vmis.iter().filter(|v| evacuation_requested(v)) {
        if let Some(m) = drain_one(p, vmi, timeout) {
            p.drain_notes.push(m);
        }
    }
    finish_drains(p, &vmis);
}

/// Plans the drain of one evacuated VMI; returns what the cluster should say about it.
fn drain_one(p: &mut Planner<'_>, vmi: &Vmi, timeout: Duration) -> Option<String> {
    let machine = vmi.name.clone();
    let infra_node = vmi.evacuation_node.clone().unwrap_or_default();
    let now = p.now;
    let record = match p.memory.drains.get(&machine) {
        Some(r) if r.vmi_uid == vmi.uid => r.clone(),
        _ => {
            let r = DrainRecord {
                vmi_uid: vmi.uid.clone(),
                infra_node: infra_node.clone(),
                since: now,
                guest_node: None,
                vmi_deleted: None,
            };
            p.events.push(PlanEvent::normal(
                "DrainStarted",
                format!(
                    "KubeVirt evacuates {machine} from infra node {infra_node}: draining its guest node, at most {timeout}"
                ),
            ));
            p.memory.drains.insert(machine.clone(), r.clone());
            r
        }
    };
    if record.vmi_deleted.is_some() {
        if !vmi.deleting {
            // Asked for, but the VMI shows no deletion: the call failed (a 503, say).
            // Asked again; a VMI that is never deleted blocks its infra node for ever.
            delete_vmi(p, vmi, &machine);
            return Some(format!(
                "{machine}: VMI {} was not deleted when asked; asking again",
                vmi.name
            ));
        }
        // Asked for already; the VMI is going.
        p.wait(POLL_DRAIN);
        return Some(format!("{machine}: VMI {} is being deleted", vmi.name));
    }
    let waited = now.since(record.since);
    let nodes = p.observed.nodes.clone().unwrap_or_default();
    let node = match p.options.drain {
        DrainPolicy::ByIdentity => guest_node_of(&nodes, &machine).cloned(),
        DrainPolicy::UpstreamByEvacuationNode => {
            nodes.iter().find(|n| n.name == infra_node).cloned()
        }
    };
    // The control plane loses one member at a time: while another control-plane VMI
    // evacuated earlier has not come back Ready, this one waits, even past its drain
    // deadline. Two at once would cost etcd its quorum; a late infra drain costs less.
    if is_control_plane(p, &machine)
        && let Some(other) = control_plane_in_flight(p, &machine)
    {
        let deadline = match timeout.as_millis().checked_sub(waited.as_millis()) {
            Some(left) if left > 0 => format!("deadline in {}", Duration::from_millis(left)),
            _ => format!("its deadline of {timeout} has passed"),
        };
        // Slower once it has waited a minute (seed 45005134: such waits at 5 s under
        // `api.errorRate` cost more refused calls than a hot loop may).
        p.wait(crate::node_drain::poll(waited));
        return Some(format!(
            "{machine}: waits until control-plane machine {other} is back before it leaves ({deadline})"
        ));
    }
    if p.options.drain == DrainPolicy::UpstreamByEvacuationNode
        && node.is_none()
        && p.options.on(Mechanism::DrainBeforeDelete)
    {
        // Upstream: NotFound means drained.
        delete_vmi(p, vmi, &machine);
        return None;
    }
    if let (Some(n), Some(r)) = (&node, p.memory.drains.get_mut(&machine)) {
        r.guest_node = Some(n.name.clone());
    }
    let unready_since = p
        .memory
        .machines
        .get(&machine)
        .and_then(|m| m.node_unready_since);
    let cause = format!("KubeVirt evacuates it from infra node {infra_node}");
    let ask = Ask {
        machine: &machine,
        node: node.as_ref(),
        since: record.since,
        timeout,
        cause: &cause,
        missing: MissingNode::WaitForDeadline,
        unready_since,
    };
    match node_drain::drain(p, &ask) {
        Step::Go => {
            delete_vmi(p, vmi, &machine);
            None
        }
        Step::Wait(m) | Step::Held(m) => Some(m),
    }
}

fn is_control_plane(p: &Planner<'_>, machine: &str) -> bool {
    p.memory
        .machines
        .get(machine)
        .is_some_and(|m| m.role == crate::MachineRole::ControlPlane)
}

/// Another control-plane machine whose VMI was deleted for an evacuation and whose
/// replacement is not Ready yet, if there is one.
fn control_plane_in_flight(p: &Planner<'_>, machine: &str) -> Option<String> {
    p.memory
        .drains
        .iter()
        .filter(|(m, r)| m.as_str() != machine && r.vmi_deleted.is_some())
        .map(|(m, _)| m.clone())
        .find(|m| is_control_plane(p, m))
}

fn delete_vmi(p: &mut Planner<'_>, vmi: &Vmi, machine: &str) {
    let now = p.now;
    if let Some(r) = p.memory.drains.get_mut(machine) {
        r.vmi_deleted.get_or_insert(now);
    }
    p.act(
        Action::DeleteVmi {
            machine: machine.to_string(),
            vmi: vmi.name.clone(),
            uid: vmi.uid.clone(),
        },
        "KubeVirt asked to evacuate it",
    );
    p.wait(POLL_DRAIN);
}

/// Drains whose VMI is gone: the replacement's guest node is uncordoned once it runs and
/// is Ready, and then the record is dropped. A record whose VMI went away on its own is
/// dropped too, once a new VMI runs.
fn finish_drains(p: &mut Planner<'_>, vmis: &[Vmi]) {
    let records: Vec<(String, DrainRecord)> = p
        .memory
        .drains
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let nodes = p.observed.nodes.clone().unwrap_or_default();
    for (machine, r) in records {
        let current = vmis.iter().find(|v| v.name == machine);
        let replaced = current.is_some_and(|v| v.uid != r.vmi_uid && !v.deleting);
        if !p.memory.machines.contains_key(&machine) && current.is_none() {
            // The machine itself is gone (removed, or the cluster deleted).
            p.memory.drains.remove(&machine);
            continue;
        }
        if !replaced {
            continue;
        }
        let running = current.is_some_and(|v| v.phase == "Running");
        let node = r
            .guest_node
            .as_deref()
            .and_then(|n| nodes.iter().find(|x| x.name == n))
            .or_else(|| guest_node_of(&nodes, &machine));
        match node {
            Some(n) if n.unschedulable && running && n.ready => {
                p.act(
                    Action::UncordonNode {
                        machine: machine.clone(),
                        node: n.name.clone(),
                    },
                    format!("{machine} runs again on a new VMI and its node is Ready"),
                );
                p.memory.drains.remove(&machine);
                p.events.push(PlanEvent::normal(
                    "DrainFinished",
                    format!("{machine} was evacuated; its guest node {} is back", n.name),
                ));
            }
            Some(n) if !n.unschedulable => {
                p.memory.drains.remove(&machine);
            }
            _ => p.wait(crate::POLL_MACHINES),
        }
    }
}
