//! Events that describe a reconcile to a person: progress seen in the cloud, and
//! conditions that appeared, changed or went away.

use flightdeck_cloud::Timestamp;
use flightdeck_plan::condition::kind;
use flightdeck_plan::{ClusterStatus, Condition, Event, Severity};

/// Events for what changed in the cloud since the last reconcile: a server going
/// ACTIVE, a node becoming Ready, a member turning ONLINE. This is the progress a person
/// watches during a long operation.
pub(crate) fn progress_events(
    prev: &ClusterStatus,
    new: &ClusterStatus,
    at: Timestamp,
    cluster: &str,
) -> Vec<Event> {
    let mut out = Vec::new();
    let mut push = |reason: &str, message: String| {
        out.push(Event {
            at,
            cluster: cluster.to_string(),
            severity: Severity::Normal,
            reason: reason.to_string(),
            message,
        })
    };
    if let Some(lb) = &new.load_balancer {
        let before = prev.load_balancer.as_ref().filter(|p| p.id == lb.id);
        if before.map(|p| (&p.provisioning_status, &p.operating_status))
            != Some((&lb.provisioning_status, &lb.operating_status))
        {
            push(
                "LoadBalancerChanged",
                format!(
                    "load balancer {} is {}/{}",
                    lb.id, lb.provisioning_status, lb.operating_status
                ),
            );
        }
    }
    let machines = |s: &ClusterStatus| -> Vec<flightdeck_plan::status::MachineStatus> {
        std::iter::once(&s.control_plane)
            .chain(s.node_pools.iter())
            .flat_map(|set| set.machines.iter().cloned())
            .collect()
    };
    let before = machines(prev);
    for m in machines(new) {
        let old = before.iter().find(|b| b.name == m.name);
        if old.map(|o| &o.server_status) != Some(&m.server_status) && m.server_status != "REQUESTED"
        {
            let address = m.address.map(|a| format!(" at {a}")).unwrap_or_default();
            push(
                "ServerChanged",
                format!("{}: server {}{address}", m.name, m.server_status),
            );
        }
        if let Some(node) = &m.node
            && old.and_then(|o| o.node.as_ref()) != Some(node)
        {
            push("NodeChanged", format!("{}: node {node}", m.name));
        }
        if let Some(member) = &m.member
            && old.and_then(|o| o.member.as_ref()) != Some(member)
        {
            push(
                "MemberChanged",
                format!(
                    "{}: member {}/{}",
                    m.name, member.provisioning_status, member.operating_status
                ),
            );
        }
    }
    out
}

/// Events for conditions that appeared, changed status or went away; keeps `since`.
pub(crate) fn condition_events(
    prev: &[Condition],
    now_set: &mut [Condition],
    at: Timestamp,
    cluster: &str,
) -> Vec<Event> {
    let mut out = Vec::new();
    for c in now_set.iter_mut() {
        match prev.iter().find(|p| p.kind == c.kind) {
            Some(p) if p.status == c.status => c.since = p.since,
            _ => {
                c.since = at;
                let interesting = c.kind != kind::READY || c.status;
                if interesting {
                    out.push(Event {
                        at,
                        cluster: cluster.to_string(),
                        severity: if c.kind == kind::READY {
                            Severity::Normal
                        } else {
                            Severity::Warning
                        },
                        reason: if c.kind == kind::READY {
                            "Ready".into()
                        } else {
                            c.kind.clone()
                        },
                        message: c.message.clone(),
                    });
                }
            }
        }
    }
    for p in prev {
        if p.status && p.kind != kind::READY && !now_set.iter().any(|c| c.kind == p.kind) {
            out.push(Event {
                at,
                cluster: cluster.to_string(),
                severity: Severity::Normal,
                reason: format!("{}Resolved", p.kind),
                message: format!("{} no longer holds", p.kind),
            });
        }
    }
    out
}
