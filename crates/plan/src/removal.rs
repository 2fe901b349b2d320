//! Taking one machine out: its member first (awaited until Octavia no longer lists it),
//! then its server (awaited until Nova no longer lists it), then its record.

use flightdeck_cloud::ProvisioningStatus;

use crate::action::Action;
use crate::condition::PlanEvent;
use crate::machines::{MachineView, ServerPhase};
use crate::{POLL_MACHINES, POLL_OCTAVIA, Planner};

pub(crate) fn plan_removals(p: &mut Planner<'_>, all: &[MachineView<'_>]) {
    for m in all {
        let Some(record) = p.memory.machines.get(m.name()) else {
            continue;
        };
        let Some(removal) = record.removal.clone() else {
            continue;
        };
        if let Some(member) = m.member {
            if member.provisioning_status == ProvisioningStatus::PendingDelete {
                p.wait(POLL_OCTAVIA);
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
            ServerPhase::Gone | ServerPhase::Requested => {
                p.memory.machines.remove(m.name());
                p.events.push(PlanEvent::normal(
                    "MachineRemoved",
                    format!("{} is gone: member and server confirmed deleted", m.name()),
                ));
            }
        }
    }
}
