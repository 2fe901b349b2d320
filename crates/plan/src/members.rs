//! Control-plane members: one per running control-plane machine, and the
//! `memberTimeout` watch over members that do not serve (F2).

use flightdeck_spec::Duration;

use flightdeck_cloud::ProvisioningStatus;
use flightdeck_cloud::ownership::machine_of;

use crate::action::{Action, NewMember};
use crate::condition::{Condition, kind};
use crate::infra::Infra;
use crate::machines::{MachineView, ServerPhase};
use crate::member_gate::{self, MemberWait};
use crate::memory::MachineTemplate;
use crate::{POLL_MACHINES, POLL_OCTAVIA, POLL_STUCK, Planner};

/// Members: one per running control-plane machine; and the `memberTimeout` watch.
pub(crate) fn plan_members(
    p: &mut Planner<'_>,
    cp: &[&MachineView<'_>],
    infra: &Infra,
    desired: &MachineTemplate,
) {
    let Some(pool) = infra.pool.clone() else {
        return;
    };
    let port = p.spec.spec.api_load_balancer.port.get();
    let timeout = p.spec.spec.flight.member_timeout;
    remove_orphan_members(p, &pool.pool_id);
    let mut stuck = Vec::new();
    let mut wanted = Vec::new();
    for m in cp {
        let removing = p
            .memory
            .machines
            .get(m.name())
            .is_some_and(|r| r.removal.is_some());
        let what = format!("the member of {}", m.name());
        if m.member.is_some() {
            crate::churn::seen(p, &what);
        }
        if !removing
            && m.member.is_none()
            && m.server_phase() == ServerPhase::Running
            && let Some(address) = m.server.and_then(|s| s.address)
        {
            // Octavia refuses a second member on the same address and port. That address
            // can only be held by the member of a machine that is gone; wait for it to go.
            if let Some(other) = p.observed.members.iter().find(|x| {
                x.pool_id == pool.pool_id && x.address == address && x.protocol_port == port
            }) {
                p.condition(Condition::new(
                    kind::MEMBER_ADDRESS_BUSY,
                    true,
                    "AddressHeldByAnotherMember",
                    format!(
                        "{} waits for member {} ({}) to release {address}:{port}",
                        m.name(),
                        other.id,
                        other.provisioning_status.as_str()
                    ),
                ));
                p.wait(POLL_OCTAVIA);
                continue;
            }
            if !crate::churn::may_make(p, &what) {
                crate::churn::report(p);
                continue;
            }
            wanted.push(NewMember {
                machine: m.name().to_string(),
                key: m.record.key.clone(),
                address,
            });
        }
        let serving = m.member_serving(pool.monitored);
        let since = p
            .memory
            .machines
            .get(m.name())
            .and_then(|r| r.member_unready_since);
        let verdict = member_gate::member_wait(m.member.is_some(), serving, since, p.now, timeout);
        let new_since = match &verdict {
            MemberWait::NotWaiting => None,
            MemberWait::Waiting { since } | MemberWait::Stuck { since, .. } => Some(*since),
        };
        if let Some(r) = p.memory.machines.get_mut(m.name()) {
            r.member_unready_since = new_since;
        }
        match &verdict {
            MemberWait::Waiting { since } => {
                // Octavia's own transitions take about a second; a member it made that
                // does not serve yet waits for its machine's API server to answer the
                // health monitor, which takes as long as a node joining.
                let poll = if m.member.is_some_and(|x| x.provisioning_status.is_pending()) {
                    POLL_OCTAVIA
                } else {
                    POLL_MACHINES
                };
                // Wake up right at the deadline, not a poll later.
                let left = timeout
                    .as_millis()
                    .saturating_sub(p.now.since(*since).as_millis());
                p.wait(Duration::from_millis(left.max(1)).min(poll));
            }
            // A stuck member is an operator's matter now: look less often, no hot loop.
            MemberWait::Stuck { .. } => p.wait(POLL_STUCK),
            MemberWait::NotWaiting => {}
        }
        // The rollout waits on up-to-date members and on members being removed; those are
        // the ones whose being stuck halts it.
        let waited_on = removing || m.template() == desired;
        if let (MemberWait::Stuck { since: _, waited }, Some(member)) = (&verdict, m.member)
            && waited_on
        {
            let state = if member.provisioning_status.is_pending() {
                member.provisioning_status.as_str()
            } else {
                member.operating_status.as_str()
            };
            stuck.push(format!(
                "member of {} ({}:{}) has been {state} for {}, longer than memberTimeout {}",
                m.name(),
                member.address,
                member.protocol_port,
                Duration::from_secs(waited.as_millis() / 1000),
                timeout
            ));
        }
    }
    add_members(p, &pool.pool_id, port, wanted);
    if !stuck.is_empty() {
        p.condition(Condition::new(
            kind::LOAD_BALANCER_MEMBER_STUCK,
            true,
            "MemberNotServing",
            format!(
                "{}; the control-plane rollout is halted and no old member is removed until it serves",
                stuck.join("; ")
            ),
        ));
    }
}

/// Adds the members of running control-plane machines that have none. Octavia takes one
/// change of a load balancer at a time, so each is a pass of its own, except a build's
/// first members: into a pool with no member at all of a cluster never Ready, they go in
/// one batch (with `additive_only`, which deletes nothing and sent again changes
/// nothing).
fn add_members(p: &mut Planner<'_>, pool_id: &str, port: u16, wanted: Vec<NewMember>) {
    let first =
        p.memory.ready_since.is_none() && !p.observed.members.iter().any(|x| x.pool_id == pool_id);
    if first && wanted.len() > 1 {
        let names: Vec<String> = wanted.iter().map(|m| m.machine.clone()).collect();
        let made = p.act_on_load_balancer(
            Action::AddMembers {
                pool_id: pool_id.to_string(),
                port,
                members: wanted,
            },
            format!(
                "{} are running and must serve the API through the load balancer",
                names.join(", ")
            ),
        );
        if made {
            for name in names {
                crate::churn::making(p, &format!("the member of {name}"));
            }
        }
        return;
    }
    for m in wanted {
        let what = format!("the member of {}", m.machine);
        let reason = format!(
            "{} is running and must serve the API through the load balancer",
            m.machine
        );
        let made = p.act_on_load_balancer(
            Action::CreateMember {
                machine: m.machine,
                key: m.key,
                pool_id: pool_id.to_string(),
                address: m.address,
                port,
            },
            reason,
        );
        if made {
            crate::churn::making(p, &what);
        }
    }
}

/// Members that carry this cluster's machine tag but whose machine no longer exists in
/// memory: left behind by a crash, or by a removal that moved on too early. They are
/// deleted, one per pass like every load-balancer change.
///
/// Not for [`LIST_LAG_MAX`](crate::LIST_LAG_MAX) after the cluster was taken up from the
/// store: a store restored from a backup forgot the machines made since, and a lagging
/// list may not show their servers yet. Such a machine is adopted, its member with it,
/// once a list shows its server; deleting its member first would only make it again
/// (swarm seed 41017523: a restore 3 minutes behind, under a Nova list lagging by up
/// to 2 minutes, deleted the member of a surge machine made 53 s before, and made it
/// again when the server was adopted).
fn remove_orphan_members(p: &mut Planner<'_>, pool_id: &str) {
    let orphans: Vec<(String, String)> = p
        .observed
        .members
        .iter()
        .filter(|x| {
            x.pool_id == pool_id && x.provisioning_status != ProvisioningStatus::PendingDelete
        })
        .filter(|x| x.provisioning_status != ProvisioningStatus::Deleted)
        .filter_map(|x| {
            let key = machine_of(&x.tags)?;
            // A machine of that key owns it, unless the member is on another address
            // than that machine's server and is not the member it recorded: then it was
            // an earlier machine's of the same key.
            let known = p.memory.machines.values().any(|r| {
                r.key == key
                    && (r.member_id.as_deref() == Some(x.id.as_str())
                        || crate::machines::member_on_server(
                            x,
                            r.server_id
                                .as_deref()
                                .and_then(|id| p.observed.servers.iter().find(|s| s.id == id)),
                        ))
            });
            (!known).then(|| (x.id.clone(), key.to_string()))
        })
        .collect();
    if orphans.is_empty() {
        return;
    }
    if let Some(left) = crate::creates::taken_up_lately(p) {
        p.wait(left);
        return;
    }
    for (member_id, key) in orphans {
        p.act_on_load_balancer(
            Action::DeleteMember {
                machine: format!("{}-{key}", p.spec.name()),
                pool_id: pool_id.to_string(),
                member_id,
            },
            format!(
                "the member's machine {key} no longer exists; a member without a machine is a leak"
            ),
        );
    }
}
