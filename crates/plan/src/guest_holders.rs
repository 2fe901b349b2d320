//! Which control-plane machines hold a kubeadm workload cluster, as far as the planner
//! can tell from the node list: a machine that ran `kubeadm init` or joined as a
//! control plane carries a member of the cluster's stacked etcd. Removing the last one
//! of them loses the cluster's data, however little traffic it carries (seed 70005732:
//! a store restored behind the cloud, an Octavia member offline and joins that never
//! registered; a control-plane rollout took out the init machine, the only member, for
//! "carrying no traffic", and the workload API never answered again).
//!
//! This guard knows members only by their nodes. Issue 42 reads the guest etcd itself
//! (member list, quorum, leadership) and refines it into the quorum guard.

use crate::Planner;
use crate::condition::{Condition, kind};
use crate::machines::{MachineView, ServerPhase};
use crate::memory::MachineRole;

/// Why `victim` must stay for now, or `None` when it may go: in an initialized kubeadm
/// cluster, a control-plane machine that may hold a member goes only while another
/// control-plane machine of `set`, not being removed, has a Ready node (it joined and is
/// alive). While the node list is blind no other machine is known to have joined, so
/// none is removed.
pub(crate) fn last_holder(
    p: &Planner<'_>,
    victim: &MachineView<'_>,
    set: &[&MachineView<'_>],
) -> Option<String> {
    if !crate::bootstrap::kubeadm(p)
        || !crate::bootstrap::initialized(p)
        || *victim.role() != MachineRole::ControlPlane
        || !may_hold(p, victim)
    {
        return None;
    }
    let another = set.iter().any(|m| {
        m.name() != victim.name()
            && !m.removing()
            && *m.role() == MachineRole::ControlPlane
            && p.memory
                .machines
                .get(m.name())
                .is_some_and(|r| r.removal.is_none())
            && m.node.is_some_and(|n| n.ready)
    });
    if another {
        return None;
    }
    let seen = if p.observed.nodes.is_none() {
        "the workload cluster's node list cannot be read"
    } else {
        "no other control-plane machine has a Ready node"
    };
    Some(format!(
        "{} may hold the workload cluster's only etcd member: {seen}, so none is known to have joined",
        victim.name()
    ))
}

/// Whether `m` may carry an etcd member: it ran init, has a node, or its server ran
/// (its join may have finished unseen).
fn may_hold(p: &Planner<'_>, m: &MachineView<'_>) -> bool {
    p.memory.bootstrap.init_machine.as_deref() == Some(m.name())
        || m.node.is_some()
        || m.record.running_since.is_some()
        || matches!(m.server_phase(), ServerPhase::Running)
}

/// Keeps `victim` while [`last_holder`] says it must stay: the set's rollout or scale-down
/// halts with a condition naming it, and is looked at again. Returns whether it halted.
pub(crate) fn hold(
    p: &mut Planner<'_>,
    label: &str,
    victim: &MachineView<'_>,
    set: &[&MachineView<'_>],
) -> bool {
    let Some(why) = last_holder(p, victim, set) else {
        return false;
    };
    p.condition(Condition::new(
        kind::ROLLOUT_HALTED,
        true,
        "LastControlPlaneMember",
        format!("{label}: not removing {}: {why}", victim.name()),
    ));
    p.wait(crate::POLL_MACHINES);
    true
}
