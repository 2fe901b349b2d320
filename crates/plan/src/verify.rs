//! The plan's own guarantees, asserted in production before anything of a plan is
//! carried out (TIGER_STYLE): a planner bug shows as a refused plan with a clear
//! condition, never as an action in the cloud.
//!
//! Asserted today:
//! - no two actions on one object in a pass;
//! - no deletion of a shared OpenNebula template or image another cluster holds (the
//!   last-holder rule, unless a test switched that rule off).
//!
//! Ownership is asserted where actions are carried out (the engine refuses a deletion
//! of anything without the cluster's UID tag). Not asserted yet: that no serving member
//! is removed below the control plane's replicas; the member gate decides what serves,
//! and a second copy of that rule here would have to agree with it exactly.

use std::collections::BTreeSet;

use crate::PlanOptions;
use crate::action::{Action, PlannedAction};
use crate::opennebula::{Shared, TemplatePolicy};
use crate::safety::Mechanism;

/// The object `action` changes, if it names one.
fn objects(action: &Action) -> Vec<String> {
    match action {
        Action::CreateSecurityGroup { name } => vec![format!("security group {name}")],
        Action::DeleteSecurityGroup { security_group_id } => {
            vec![format!("security group {security_group_id}")]
        }
        Action::CreateLoadBalancer { name, .. } => vec![format!("load balancer {name}")],
        Action::DeleteLoadBalancer { load_balancer_id } => {
            vec![format!("load balancer {load_balancer_id}")]
        }
        Action::CreateServer { machine, .. } | Action::Instantiate { machine, .. } => {
            vec![format!("machine {machine}")]
        }
        Action::DeleteServer { server_id, .. } => vec![format!("server {server_id}")],
        Action::CreateMember { machine, .. } => vec![format!("member of {machine}")],
        Action::AddMembers { members, .. } => members
            .iter()
            .map(|m| format!("member of {}", m.machine))
            .collect(),
        Action::DeleteMember { member_id, .. } => vec![format!("member {member_id}")],
        Action::AddSecurityGroup { server_id, .. } => {
            vec![format!("security groups of server {server_id}")]
        }
        Action::AddRoutes {
            router_id, routes, ..
        }
        | Action::RemoveRoutes {
            router_id, routes, ..
        } => routes
            .iter()
            .map(|r| format!("route {} via {} on {router_id}", r.destination, r.nexthop))
            .collect(),
        Action::DeleteTemplate { template_id, .. } => vec![format!("template {template_id}")],
        Action::DeleteImage { image_id, .. } => vec![format!("image {image_id}")],
        Action::CreateTemplate { name, .. } => vec![format!("template named {name}")],
        Action::CreateImage { name, .. } => vec![format!("image named {name}")],
        Action::CreateEndpointService { name, .. } | Action::DeleteEndpointService { name } => {
            vec![format!("service {name}")]
        }
        Action::CordonNode { node, .. }
        | Action::UncordonNode { node, .. }
        | Action::DeleteNode { node, .. }
        | Action::PatchNode { node, .. } => {
            vec![format!("node {node}")]
        }
        Action::EvictPod { namespace, pod, .. } | Action::DeletePod { namespace, pod, .. } => {
            vec![format!("pod {namespace}/{pod}")]
        }
        Action::DeleteVmi { uid, vmi, .. } => vec![format!("VMI {vmi} ({uid})")],
        Action::RefreshBootstrapToken { token_id, .. }
        | Action::DeleteBootstrapToken { token_id, .. } => {
            vec![format!("bootstrap token {token_id}")]
        }
        Action::CreateSecurityGroupRule { .. }
        | Action::CreateListener { .. }
        | Action::CreatePool { .. }
        | Action::CreateHealthMonitor { .. } => Vec::new(),
    }
}

/// Why the plan's `actions` break a guarantee, if they do.
pub fn verify_actions(
    actions: &[PlannedAction],
    shared: &Shared,
    options: &PlanOptions,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for a in actions {
        for object in objects(&a.action) {
            if !seen.insert(object.clone()) {
                return Err(format!(
                    "two actions on {object} in one pass (the second: {})",
                    a.action.summary()
                ));
            }
        }
        let shared_key = match &a.action {
            Action::DeleteTemplate { template_id, .. } => Some(format!("template/{template_id}")),
            Action::DeleteImage { image_id, .. } => Some(format!("image/{image_id}")),
            _ => None,
        };
        // The upstream template policy (a test's) deletes by name and stamp, not by
        // holder: the rule it breaks is what that test proves the invariants catch.
        let last_holder_rule = options.on(Mechanism::TemplateLastHolder)
            && options.templates == TemplatePolicy::ContentAddressed;
        if let Some(key) = shared_key
            && last_holder_rule
            && let Some(holders) = shared.holders.get(&key).filter(|h| !h.is_empty())
        {
            return Err(format!(
                "{} while {} still hold(s) it",
                a.action.summary(),
                holders.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}
