//! Pool labels and taints: the labels and taints of `controlPlane` and each node pool are
//! put on the set's Nodes once they register, and put back when someone removes them.
//! A change to them is made to the Nodes in place (no rollout). What flightdeck put on
//! and the spec no longer asks for is taken off, and nothing else: labels and taints
//! others set are left alone.

use std::collections::BTreeMap;

use flightdeck_cloud::{Node, Taint};

use crate::Planner;
use crate::action::Action;
use crate::machines::{MachineView, views};
use crate::memory::{MachineRole, NodeMeta};

/// What the spec asks of the set with role `role`.
fn wanted(p: &Planner<'_>, role: &MachineRole) -> NodeMeta {
    let (labels, taints) = match role {
        MachineRole::ControlPlane => {
            let cp = &p.spec.spec.control_plane;
            (&cp.labels, &cp.taints)
        }
        MachineRole::Pool(name) => {
            match p
                .spec
                .spec
                .node_pools
                .iter()
                .find(|x| x.name.as_str() == name)
            {
                Some(pool) => (&pool.labels, &pool.taints),
                None => return NodeMeta::default(),
            }
        }
    };
    NodeMeta {
        labels: labels.clone(),
        taints: taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone().filter(|v| !v.is_empty()),
                effect: t.effect.clone(),
            })
            .collect(),
    }
}

/// Labels to set (`None`: remove) and, if they change, the Node's whole new taints.
type NodeChange = (BTreeMap<String, Option<String>>, Option<Vec<Taint>>);

/// The change node `n` needs: labels to set or remove, and its new taints if they change.
fn change(n: &Node, want: &NodeMeta, stale: &NodeMeta) -> Option<NodeChange> {
    let mut labels: BTreeMap<String, Option<String>> = want
        .labels
        .iter()
        .filter(|(k, v)| n.labels.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    for (k, v) in &stale.labels {
        if n.labels.get(k) == Some(v) {
            labels.insert(k.clone(), None);
        }
    }
    let mut taints: Vec<Taint> = n
        .taints
        .iter()
        .filter(|t| !stale.taints.contains(t))
        .cloned()
        .collect();
    for t in &want.taints {
        // A taint of the same key and effect with another value is replaced.
        taints.retain(|x| !(x.key == t.key && x.effect == t.effect && x != t));
        if !taints.contains(t) {
            taints.push(t.clone());
        }
    }
    let taints = (taints != n.taints).then_some(taints);
    (!labels.is_empty() || taints.is_some()).then_some((labels, taints))
}

/// Plans the labels and taints of every set's registered Nodes.
pub(crate) fn plan_node_meta(p: &mut Planner<'_>) {
    if p.observed.nodes.is_none() {
        return;
    }
    let mut roles: Vec<MachineRole> = p.memory.machines.values().map(|r| r.role.clone()).collect();
    roles.sort_by(|a, b| a.label().cmp(b.label()));
    roles.dedup();
    let mut actions = Vec::new();
    let mut memory = BTreeMap::new();
    for role in roles {
        let want = wanted(p, &role);
        let applied = p
            .memory
            .node_meta
            .get(role.label())
            .cloned()
            .unwrap_or_default();
        let stale = NodeMeta {
            labels: applied
                .labels
                .iter()
                .filter(|(k, v)| want.labels.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            taints: applied
                .taints
                .iter()
                .filter(|t| !want.taints.contains(t))
                .cloned()
                .collect(),
        };
        let members = p
            .memory
            .machines
            .values()
            .filter(|r| r.role == role && r.removal.is_none());
        let mut pending_stale = false;
        for m in views(members, p.observed, None) {
            let Some(n) = m.node else {
                continue;
            };
            if let Some((labels, taints)) = change(n, &want, &stale) {
                pending_stale |= labels.values().any(Option::is_none)
                    || taints.is_some() && !stale.taints.is_empty();
                actions.push(patch(&m, n, labels, taints));
            }
        }
        // What was taken off everywhere is forgotten; until then it is remembered.
        let mut keep = want.clone();
        if pending_stale {
            keep.labels.extend(stale.labels);
            keep.taints.extend(stale.taints);
        }
        if !keep.is_empty() {
            memory.insert(role.label().to_string(), keep);
        }
    }
    p.memory.node_meta = memory;
    for (action, reason) in actions {
        p.act(action, reason);
    }
}

fn patch(
    m: &MachineView<'_>,
    n: &Node,
    labels: BTreeMap<String, Option<String>>,
    taints: Option<Vec<Taint>>,
) -> (Action, String) {
    let reason = format!(
        "the labels and taints of {}'s set belong on its node {}",
        m.name(),
        n.name
    );
    (
        Action::PatchNode {
            machine: m.name().to_string(),
            node: n.name.clone(),
            labels,
            taints,
        },
        reason,
    )
}
