//! F5: every running server of the cluster is in the cluster's security group. Nova
//! sometimes creates an instance without it (seed 002), which leaves the machine with no
//! network; it is put back.

use crate::Planner;
use crate::action::Action;
use crate::infra::Infra;
use crate::machines::{MachineView, ServerPhase};

pub(crate) fn plan_membership(p: &mut Planner<'_>, infra: &Infra, all: &[MachineView<'_>]) {
    if !p.spec.spec.flight.repairs.security_group_membership {
        return;
    }
    let Some(group_id) = infra.security_group_id.clone() else {
        return;
    };
    let Some(group_name) = p
        .spec
        .spec
        .network
        .security_group
        .as_ref()
        .map(|g| g.to_string())
    else {
        return;
    };
    for m in all {
        let Some(server) = m.server else { continue };
        if m.removing() || m.server_phase() != ServerPhase::Running {
            continue;
        }
        let member_of = server
            .security_groups
            .iter()
            .any(|g| *g == group_name || *g == group_id);
        let what = format!("{}'s membership of {group_name}", m.name());
        if member_of {
            crate::churn::seen(p, &what);
        } else if !crate::churn::may_make(p, &what) {
            crate::churn::report(p);
        } else {
            crate::churn::making(p, &what);
            p.act(
                Action::AddSecurityGroup {
                    machine: m.name().to_string(),
                    server_id: server.id.clone(),
                    security_group: group_id.clone(),
                },
                format!(
                    "{} is not in the cluster's security group {group_name}, so it has no pod network",
                    m.name()
                ),
            );
        }
    }
}
