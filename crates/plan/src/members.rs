//! Control-plane members: one per running control-plane machine, and the
//! `memberTimeout` watch over members that do not serve (F2).

use flightdeck_spec::Duration;

use crate::action::Action;
use crate::condition::{Condition, kind};
use crate::infra::Infra;
use crate::machines::{MachineView, ServerPhase};
use crate::member_gate::{self, MemberWait};
use crate::{POLL_OCTAVIA, POLL_STUCK, Planner};

/// Members: one per running control-plane machine; and the `memberTimeout` watch.
pub(crate) fn plan_members(p: &mut Planner<'_>, cp: &[&MachineView<'_>], infra: &Infra) {
    let Some(pool) = infra.pool.clone() else {
        return;
    };
    let port = p.spec.spec.api_load_balancer.port.get();
    let timeout = p.spec.spec.flight.member_timeout;
    let desired_version = p.spec.spec.control_plane.version.to_string();
    let mut stuck = Vec::new();
    for m in cp {
        let removing = p
            .memory
            .machines
            .get(m.name())
            .is_some_and(|r| r.removal.is_some());
        if !removing
            && m.member.is_none()
            && m.server_phase() == ServerPhase::Running
            && let Some(address) = m.server.and_then(|s| s.address)
        {
            p.act_on_load_balancer(
                Action::CreateMember {
                    machine: m.name().to_string(),
                    key: m.record.key.clone(),
                    pool_id: pool.pool_id.clone(),
                    address,
                    port,
                },
                format!(
                    "{} is running and must serve the API through the load balancer",
                    m.name()
                ),
            );
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
                // Wake up right at the deadline, not a poll later.
                let left = timeout
                    .as_millis()
                    .saturating_sub(p.now.since(*since).as_millis());
                p.wait(Duration::from_millis(left.max(1)).min(POLL_OCTAVIA));
            }
            // A stuck member is an operator's matter now: look less often, no hot loop.
            MemberWait::Stuck { .. } => p.wait(POLL_STUCK),
            MemberWait::NotWaiting => {}
        }
        // The rollout waits on up-to-date members and on members being removed; those are
        // the ones whose being stuck halts it.
        let waited_on = removing || m.template().version == desired_version;
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
