//! Taking one machine out: its member first (awaited until Octavia no longer lists it),
//! then its server (awaited until Nova no longer lists it), then its record.

use flightdeck_cloud::{ProvisioningStatus, Timestamp};

use crate::action::Action;
use crate::condition::PlanEvent;
use crate::machines::{MachineView, ServerPhase};
use crate::member_gate::MemberGate;
use crate::memory::Removal;
use crate::node_drain::{self, Ask, MissingNode, Step};
use crate::safety::Mechanism;
use crate::{POLL_MACHINES, POLL_OCTAVIA, POLL_STUCK, Planner};

pub(crate) fn plan_removals(p: &mut Planner<'_>, all: &[MachineView<'_>]) {
    let lb_active = p
        .memory
        .ids
        .load_balancer
        .as_deref()
        .and_then(|id| p.observed.load_balancers.iter().find(|l| l.id == id))
        .is_some_and(|l| l.provisioning_status == ProvisioningStatus::Active);
    // The unsafe seed-001 policy takes an ACTIVE load balancer as proof that the member
    // delete finished; the real gate waits until Octavia no longer lists the member.
    let trust_lb = p.options.member_gate == MemberGate::LoadBalancerOnly;
    let blind = crate::remediation::blind_observer(p, all).is_some();
    for m in all {
        let Some(record) = p.memory.machines.get(m.name()) else {
            continue;
        };
        let Some(removal) = record.removal.clone() else {
            continue;
        };
        let member = m.member.filter(|x| {
            !(trust_lb && lb_active && x.provisioning_status == ProvisioningStatus::PendingDelete)
        });
        // Without the pool in view, "no member listed" proves nothing.
        let pool_listed = p
            .memory
            .ids
            .pool
            .as_deref()
            .is_some_and(|id| p.observed.pools.iter().any(|x| x.id == id));
        if member.is_none() && record.member_id.is_some() && !pool_listed {
            p.wait(POLL_MACHINES);
            continue;
        }
        if let Some(member) = member {
            if member.provisioning_status == ProvisioningStatus::PendingDelete {
                let stuck = record
                    .member_unready_since
                    .is_some_and(|since| p.now.since(since) >= p.spec.spec.flight.member_timeout);
                p.wait(if stuck { POLL_STUCK } else { POLL_OCTAVIA });
            } else if let Some(pool_id) = p.memory.ids.pool.clone() {
                p.act_on_load_balancer(
                    Action::DeleteMember {
                        machine: m.name().to_string(),
                        pool_id,
                        member_id: member.id.clone(),
                    },
                    format!(
                        "{} is being removed ({}); its member goes first",
                        m.name(),
                        removal.reason
                    ),
                );
            }
            continue;
        }
        let phase = m.server_phase();
        match phase {
            ServerPhase::Building | ServerPhase::Running | ServerPhase::Failed => {
                if let Some(server) = m.server {
                    match leave(p, m, phase == ServerPhase::Failed, blind) {
                        Step::Go => {}
                        Step::Wait(note) => {
                            p.drain_notes.push(note);
                            continue;
                        }
                        Step::Held(note) => {
                            p.held_notes.push(note);
                            p.wait(POLL_HELD);
                            continue;
                        }
                    }
                    p.act(
                        Action::DeleteServer {
                            machine: m.name().to_string(),
                            server_id: server.id.clone(),
                        },
                        format!(
                            "{} is being removed ({}); it no longer has a member",
                            m.name(),
                            removal.reason
                        ),
                    );
                }
                p.wait(POLL_MACHINES);
            }
            ServerPhase::Deleting => p.wait(POLL_MACHINES),
            // Its create went out lately and a lagging list may hide the server it made:
            // not gone until the lists have had time to show it. A create planned in
            // this very pass is withdrawn instead: the machine leaves before it exists.
            ServerPhase::Requested
                if !crate::creates::withdraw(p, m.name())
                    && crate::creates::may_have_landed(p, m.record) =>
            {
                p.wait(POLL_MACHINES);
            }
            // A server made less than `LIST_LAG_MAX` ago may be missing from a lagging
            // list although it runs: not gone until the lists have had time to show it
            // (swarm seed 400045722: a stale Nova list hid a surge machine made 30 s
            // before; its record was dropped, and its server came back as an orphan,
            // adopted as a machine made again).
            ServerPhase::Gone if crate::creates::too_young_to_miss(p, m.record) => {
                p.wait(POLL_MACHINES);
            }
            ServerPhase::Gone | ServerPhase::Requested => {
                let now = p.now;
                if let Some(r) = p.memory.machines.remove(m.name()) {
                    if let Some(id) = r.server_id {
                        p.memory.gone_servers.insert(id, now);
                    }
                    let node = r.removal.and_then(|x| x.node);
                    if let Some(node) = node.or_else(|| m.node.map(|n| n.name.clone())) {
                        p.memory.node_deletions.entry(node).or_insert(now);
                    }
                }
                p.events.push(PlanEvent::normal(
                    "MachineRemoved",
                    format!("{} is gone: member and server confirmed deleted", m.name()),
                ));
                // What waited for this machine to go (a rollout's next step, a scale
                // down's next machine) is planned at the next pass: soon, not at a node
                // watch's event or the resync (a broken watch sends none).
                p.wait(POLL_MACHINES);
            }
        }
    }
}

/// How often a deletion held by its node's annotation is looked at again.
pub const POLL_HELD: flightdeck_spec::Duration = flightdeck_spec::Duration::from_secs(30);

/// Whether machine `m`, being removed, may be deleted now: its node drained (see
/// [`node_drain`]), its deadline passed, or no node to drain. A server in ERROR whose node
/// is NotReady is not waited on: its kubelet is gone with it. While the node list is
/// `blind` (unreachable, stale, empty, or all NotReady at once) a missing node is not
/// taken for none and NotReady not for unreachable: the drain waits, for a node never
/// seen until the list shows it (its deadline starts then), for one seen before at most
/// until its deadline.
fn leave(p: &mut Planner<'_>, m: &MachineView<'_>, failed: bool, blind: bool) -> Step {
    let name = m.name().to_string();
    let Some(removal) = p.memory.machines.get(&name).and_then(|r| r.removal.clone()) else {
        return Step::Go;
    };
    let since = match removal.drain_since {
        Some(since) => since,
        None => {
            if !p.options.on(Mechanism::DrainBeforeDelete) {
                return Step::Go;
            }
            if let Some(held) = node_drain::held(&name, m.node) {
                return held;
            }
            // A server in ERROR runs no kubelet: no node of its is anywhere to drain.
            if m.node.is_none() && (!blind || failed) {
                return Step::Go;
            }
            let now = p.now;
            let timeout = p.spec.spec.flight.node_drain_timeout;
            p.events.push(PlanEvent::normal(
                "DrainStarted",
                format!(
                    "draining the node of {name} before it goes ({}): at most {timeout}",
                    removal.reason
                ),
            ));
            now
        }
    };
    // A drain that began before its node could be seen (the node list was blind) starts
    // again when the node first shows: its pods get their whole `nodeDrainTimeout` from
    // the cordon, not what the blindness left of it.
    let since = match (removal.drain_since, &removal.node, m.node) {
        (Some(_), None, Some(node)) => {
            p.events.push(PlanEvent::normal(
                "DrainStarted",
                format!(
                    "draining node {} of {name} now that it is seen ({}): at most {}",
                    node.name, removal.reason, p.spec.spec.flight.node_drain_timeout
                ),
            ));
            p.now
        }
        _ => since,
    };
    let unready_since = match m.record.node_unready_since {
        Some(_) if failed => Some(Timestamp(0)),
        Some(t) if !blind => Some(t),
        _ => None,
    };
    if let Some(r) = p
        .memory
        .machines
        .get_mut(&name)
        .and_then(|r| r.removal.as_mut())
    {
        r.drain_since = Some(since);
        if let Some(n) = m.node {
            r.node = Some(n.name.clone());
        }
    }
    let ask = Ask {
        machine: &name,
        node: m.node,
        since,
        timeout: p.spec.spec.flight.node_drain_timeout,
        cause: &removal.reason,
        // A blind list hides whether the node is there: one never seen is waited for
        // (a machine is never deleted under pods flightdeck could not see), one seen and
        // cordoned before keeps its deadline.
        // A cluster never Ready has run no workload flightdeck could have seen: its
        // machines go at the deadline, as before (scenario f3-never-registered-at-birth).
        missing: match (blind && !failed, &removal.node) {
            (false, _) => MissingNode::NothingToDrain,
            (true, None) if p.memory.ready_since.is_some() => MissingNode::WaitUntilSeen,
            (true, _) => MissingNode::WaitForDeadline,
        },
        unready_since,
    };
    node_drain::drain(p, &ask)
}

/// Deletes the Nodes of machines that are gone, each until the workload cluster no
/// longer lists it or `nodeDeletionTimeout` has passed since its machine went. Without a
/// node list nothing is known, and nothing is given up on either.
pub(crate) fn plan_node_deletions(p: &mut Planner<'_>) {
    adopt_stale_nodes(p);
    if p.memory.node_deletions.is_empty() {
        return;
    }
    let Some(nodes) = p.observed.nodes.clone() else {
        p.wait(crate::POLL_MACHINES);
        return;
    };
    // A node missing from an empty list, or from one a broken watch keeps, may still be
    // there: only a fresh list that shows nodes proves one gone.
    let proves_gone = !nodes.is_empty() && p.observed.nodes_stale_since.is_none();
    let timeout = p.spec.spec.flight.node_deletion_timeout;
    let pending: Vec<(String, Timestamp)> = p
        .memory
        .node_deletions
        .iter()
        .map(|(n, t)| (n.clone(), *t))
        .collect();
    for (node, since) in pending {
        // A node of that name that registered after the machine went is another
        // machine's (a replacement under the same name): not this one to delete.
        let listed = nodes
            .iter()
            .find(|n| n.name == node)
            .filter(|n| n.created_at <= since);
        let Some(listed) = listed else {
            if proves_gone || p.now.since(since) >= timeout {
                p.memory.node_deletions.remove(&node);
            } else {
                p.wait(crate::POLL_MACHINES);
            }
            continue;
        };
        if p.now.since(since) >= timeout {
            p.memory.node_deletions.remove(&node);
            p.events.push(PlanEvent::warning(
                "NodeDeletionTimedOut",
                format!(
                    "node {node} of a machine that is gone could not be deleted within {timeout}; flightdeck no longer tries"
                ),
            ));
            continue;
        }
        let machine = listed.server_id.clone().unwrap_or_else(|| node.clone());
        p.act(
            Action::DeleteNode {
                machine,
                node: node.clone(),
            },
            format!("the machine of node {node} is gone"),
        );
        p.wait(crate::POLL_MACHINES);
    }
}

/// NotReady Nodes whose server (or VM) a direct read found gone, and which no machine
/// flightdeck remembers holds, are deleted like the Node of a machine it removed.
fn adopt_stale_nodes(p: &mut Planner<'_>) {
    let Some(nodes) = &p.observed.nodes else {
        return;
    };
    let remembered = |id: &str| {
        p.memory
            .machines
            .values()
            .any(|r| r.server_id.as_deref() == Some(id))
    };
    // Only a Node old enough that no list can lag behind its machine, and whose name no
    // listed server carries: a direct read answered for a machine that runs must never
    // cost that machine its Node (swarm seed 42000692).
    let now = p.now;
    let stale: Vec<String> = nodes
        .iter()
        .filter(|n| !n.ready)
        .filter(|n| now.since(n.created_at) >= crate::LIST_LAG_MAX)
        .filter(|n| !p.observed.servers.iter().any(|s| s.name == n.name))
        .filter(|n| {
            n.server_id
                .as_deref()
                .is_some_and(|id| p.observed.direct_reads.get(id) == Some(&true) && !remembered(id))
        })
        .map(|n| n.name.clone())
        .filter(|n| !p.memory.node_deletions.contains_key(n))
        .collect();
    for node in stale {
        p.events.push(PlanEvent::normal(
            "StaleNodeFound",
            format!("node {node}'s machine is gone (read one by one); the node goes too"),
        ));
        p.memory.node_deletions.insert(node, now);
    }
}

/// Marks machine `name` for removal (member first, then server, then the record), once.
pub(crate) fn mark_removal(p: &mut Planner<'_>, name: &str, why: String) {
    mark(p, name, why, false);
}

/// [`mark_removal`] of a machine its set no longer needs (a scale-down).
pub(crate) fn mark_scale_down(p: &mut Planner<'_>, name: &str, why: String) {
    mark(p, name, why, true);
}

fn mark(p: &mut Planner<'_>, name: &str, why: String, scale_down: bool) {
    let now = p.now;
    if let Some(r) = p.memory.machines.get_mut(name)
        && r.removal.is_none()
    {
        r.removal = Some(Removal {
            since: now,
            reason: why.clone(),
            drain_since: None,
            node: None,
            scale_down,
        });
        p.events.push(PlanEvent::normal(
            "MachineRemovalStarted",
            format!("removing {name}: {why}"),
        ));
    }
}
