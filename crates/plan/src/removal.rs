//! Taking one machine out: its member first (awaited until Octavia no longer lists it),
//! then its server (awaited until Nova no longer lists it), then its record.

use flightdeck_cloud::ProvisioningStatus;

use crate::action::Action;
use crate::condition::PlanEvent;
use crate::machines::{MachineView, ServerPhase};
use crate::member_gate::MemberGate;
use crate::memory::Removal;
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
        match m.server_phase() {
            ServerPhase::Building | ServerPhase::Running | ServerPhase::Failed => {
                if let Some(server) = m.server {
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
                if let Some(id) = p.memory.machines.remove(m.name()).and_then(|r| r.server_id) {
                    p.memory.gone_servers.insert(id, now);
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

/// Marks machine `name` for removal (member first, then server, then the record), once.
pub(crate) fn mark_removal(p: &mut Planner<'_>, name: &str, why: String) {
    let now = p.now;
    if let Some(r) = p.memory.machines.get_mut(name)
        && r.removal.is_none()
    {
        r.removal = Some(Removal {
            since: now,
            reason: why.clone(),
        });
        p.events.push(PlanEvent::normal(
            "MachineRemovalStarted",
            format!("removing {name}: {why}"),
        ));
    }
}
