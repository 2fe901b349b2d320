//! Actions a plan asks the engine to carry out, each with the reason that produced it.

use std::fmt;
use std::net::IpAddr;

use flightdeck_cloud::{Route, SecurityGroupRuleCreate, Timestamp};
use serde::{Deserialize, Serialize};

use crate::memory::MachineRole;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Action {
    CreateSecurityGroup {
        name: String,
    },
    CreateSecurityGroupRule {
        rule: SecurityGroupRuleCreate,
    },
    CreateLoadBalancer {
        name: String,
        subnet: String,
    },
    CreateListener {
        name: String,
        load_balancer_id: String,
        port: u16,
    },
    CreatePool {
        name: String,
        listener_id: String,
    },
    CreateHealthMonitor {
        name: String,
        pool_id: String,
        kind: String,
        delay_s: u32,
        timeout_s: u32,
        max_retries: u8,
    },
    CreateServer {
        machine: String,
        key: String,
        role: MachineRole,
        flavor: String,
        image: String,
        network: String,
        security_group: String,
        /// KubeVirt: the VMI's eviction strategy.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        eviction_strategy: Option<String>,
        /// Cloud-init user data, variables filled in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_data: Option<String>,
        /// kubeadm (`spec.bootstrap.provider: kubeadm`): what the machine is to its
        /// cluster; the engine renders its user data from this and the cluster's PKI.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bootstrap: Option<crate::bootstrap::BootstrapPlan>,
        /// The machine template's digest, tagged on the machine.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        template: String,
    },
    CreateMember {
        machine: String,
        key: String,
        pool_id: String,
        address: IpAddr,
        port: u16,
    },
    /// A build's first members, added in one call (Octavia's batch member update,
    /// which with `additive_only` deletes nothing) and one change of the load balancer.
    AddMembers {
        pool_id: String,
        port: u16,
        members: Vec<NewMember>,
    },
    DeleteMember {
        machine: String,
        pool_id: String,
        member_id: String,
    },
    DeleteServer {
        machine: String,
        server_id: String,
    },
    DeleteLoadBalancer {
        load_balancer_id: String,
    },
    DeleteSecurityGroup {
        security_group_id: String,
    },
    /// F5: put a server back into the cluster's security group.
    AddSecurityGroup {
        machine: String,
        server_id: String,
        security_group: String,
    },
    /// F7: routes to node pod networks; every destination lies inside `pod_cidr`.
    AddRoutes {
        router_id: String,
        routes: Vec<Route>,
        pod_cidr: String,
    },
    /// F7, F8: stale or duplicate routes; every destination lies inside `pod_cidr`.
    RemoveRoutes {
        router_id: String,
        routes: Vec<Route>,
        pod_cidr: String,
    },
    /// OpenNebula: register an image under its content-addressed name.
    CreateImage {
        name: String,
        content: String,
        datastore: u32,
    },
    /// OpenNebula: register a VM template under its content-addressed name.
    CreateTemplate {
        name: String,
        content: String,
    },
    /// OpenNebula: a machine's VM, from a held template.
    Instantiate {
        machine: String,
        key: String,
        role: MachineRole,
        template_id: String,
        /// Cloud-init user data, variables filled in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_data: Option<String>,
        /// kubeadm (`spec.bootstrap.provider: kubeadm`): what the machine is to its
        /// cluster; the engine renders its user data from this and the cluster's PKI.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bootstrap: Option<crate::bootstrap::BootstrapPlan>,
        /// The machine template's digest, tagged on the machine.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        template: String,
    },
    /// OpenNebula: a template flightdeck registered and no cluster holds any more.
    DeleteTemplate {
        template_id: String,
        name: String,
    },
    /// OpenNebula: an image flightdeck registered and no cluster holds any more.
    DeleteImage {
        image_id: String,
        name: String,
    },
    /// KubeVirt: the control-plane endpoint Service in the infra cluster.
    CreateEndpointService {
        name: String,
        port: u16,
    },
    /// KubeVirt: the endpoint Service, when the cluster is deleted.
    DeleteEndpointService {
        name: String,
    },
    /// Mark a node unschedulable before draining it (any cloud, any cause).
    CordonNode {
        machine: String,
        node: String,
    },
    /// KubeVirt (F9): make a replacement's guest node schedulable again.
    UncordonNode {
        machine: String,
        node: String,
    },
    /// Evict a pod from a node being drained, through the Eviction API.
    EvictPod {
        node: String,
        namespace: String,
        pod: String,
    },
    /// Delete a pod of a node being drained that needs no disruption-budget check
    /// (finished, pending, or already being deleted).
    DeletePod {
        node: String,
        namespace: String,
        pod: String,
    },
    /// Put the set's labels and taints on a machine's Node (or take off the ones the
    /// spec no longer asks for): `labels` to set (`None`: remove), and, when the taints
    /// change, the Node's whole new list.
    PatchNode {
        machine: String,
        node: String,
        labels: std::collections::BTreeMap<String, Option<String>>,
        taints: Option<Vec<flightdeck_cloud::Taint>>,
    },
    /// Delete the Node of a machine that is gone from the workload cluster, so that
    /// `kubectl get nodes` lists no machine that no longer exists.
    DeleteNode {
        machine: String,
        node: String,
    },
    /// kubeadm: move the expiration of a joining machine's bootstrap token on, while
    /// its machine has not joined.
    RefreshBootstrapToken {
        machine: String,
        token_id: String,
        expires_at: Timestamp,
    },
    /// kubeadm: delete a machine's bootstrap token once it joined, or went.
    DeleteBootstrapToken {
        machine: String,
        token_id: String,
    },
    /// KubeVirt (F9): delete a VMI KubeVirt asked to evacuate, once its guest node is
    /// drained or its deadline passed. Its VM starts a replacement.
    DeleteVmi {
        machine: String,
        vmi: String,
        uid: String,
    },
}

/// One member of an [`Action::AddMembers`]: the machine it serves, its key (tagged on
/// the member) and its address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewMember {
    pub machine: String,
    pub key: String,
    pub address: IpAddr,
}

impl Action {
    /// Whether the action changes a load balancer or one of its children; Octavia takes
    /// one such change at a time.
    pub fn mutates_load_balancer(&self) -> bool {
        matches!(
            self,
            Action::CreateListener { .. }
                | Action::CreatePool { .. }
                | Action::CreateHealthMonitor { .. }
                | Action::CreateMember { .. }
                | Action::AddMembers { .. }
                | Action::DeleteMember { .. }
                | Action::DeleteLoadBalancer { .. }
        )
    }

    /// The action's stable name, used as the reason of the event it produces.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::CreateSecurityGroup { .. } => "CreateSecurityGroup",
            Action::CreateSecurityGroupRule { .. } => "CreateSecurityGroupRule",
            Action::CreateLoadBalancer { .. } => "CreateLoadBalancer",
            Action::CreateListener { .. } => "CreateListener",
            Action::CreatePool { .. } => "CreatePool",
            Action::CreateHealthMonitor { .. } => "CreateHealthMonitor",
            Action::CreateServer { .. } => "CreateServer",
            Action::CreateMember { .. } => "CreateMember",
            Action::AddMembers { .. } => "AddMembers",
            Action::DeleteMember { .. } => "DeleteMember",
            Action::DeleteServer { .. } => "DeleteServer",
            Action::DeleteLoadBalancer { .. } => "DeleteLoadBalancer",
            Action::DeleteSecurityGroup { .. } => "DeleteSecurityGroup",
            Action::AddSecurityGroup { .. } => "AddSecurityGroup",
            Action::AddRoutes { .. } => "AddRoutes",
            Action::RemoveRoutes { .. } => "RemoveRoutes",
            Action::CreateImage { .. } => "CreateImage",
            Action::CreateTemplate { .. } => "CreateTemplate",
            Action::Instantiate { .. } => "Instantiate",
            Action::DeleteTemplate { .. } => "DeleteTemplate",
            Action::DeleteImage { .. } => "DeleteImage",
            Action::CreateEndpointService { .. } => "CreateEndpointService",
            Action::DeleteEndpointService { .. } => "DeleteEndpointService",
            Action::CordonNode { .. } => "CordonNode",
            Action::UncordonNode { .. } => "UncordonNode",
            Action::EvictPod { .. } => "EvictPod",
            Action::DeletePod { .. } => "DeletePod",
            Action::DeleteNode { .. } => "DeleteNode",
            Action::PatchNode { .. } => "PatchNode",
            Action::DeleteVmi { .. } => "DeleteVmi",
            Action::RefreshBootstrapToken { .. } => "RefreshBootstrapToken",
            Action::DeleteBootstrapToken { .. } => "DeleteBootstrapToken",
        }
    }

    /// A short verb phrase for timelines: `create server demo-cp-3`.
    pub fn summary(&self) -> String {
        match self {
            Action::CreateSecurityGroup { name } => format!("create security group {name}"),
            Action::CreateSecurityGroupRule { rule } => format!(
                "create {} rule {} from {}",
                rule.direction,
                rule.protocol.as_deref().unwrap_or("any"),
                rule.remote_ip_prefix.as_deref().unwrap_or("anywhere")
            ),
            Action::CreateLoadBalancer { name, .. } => format!("create load balancer {name}"),
            Action::CreateListener { name, port, .. } => format!("create listener {name} :{port}"),
            Action::CreatePool { name, .. } => format!("create pool {name}"),
            Action::CreateHealthMonitor { name, kind, .. } => {
                format!("create {kind} health monitor {name}")
            }
            Action::CreateServer {
                machine,
                bootstrap: Some(b),
                ..
            } => format!("create server {machine} ({})", b.role),
            Action::CreateServer { machine, .. } => format!("create server {machine}"),
            Action::CreateMember {
                machine,
                address,
                port,
                ..
            } => {
                format!("create member {machine} ({address}:{port})")
            }
            Action::AddMembers { members, port, .. } => format!(
                "add members {} in one batch",
                members
                    .iter()
                    .map(|m| format!("{} ({}:{port})", m.machine, m.address))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Action::DeleteMember { machine, .. } => format!("delete member {machine}"),
            Action::DeleteServer { machine, .. } => format!("delete server {machine}"),
            Action::DeleteLoadBalancer { load_balancer_id } => {
                format!("delete load balancer {load_balancer_id} (cascade)")
            }
            Action::DeleteSecurityGroup { security_group_id } => {
                format!("delete security group {security_group_id}")
            }
            Action::AddSecurityGroup { machine, .. } => {
                format!("put {machine} back into the security group")
            }
            Action::AddRoutes { routes, .. } => format!("add route(s) {}", route_list(routes)),
            Action::RemoveRoutes { routes, .. } => {
                format!("remove route(s) {}", route_list(routes))
            }
            Action::CreateImage { name, .. } => format!("create image {name}"),
            Action::CreateTemplate { name, .. } => format!("create template {name}"),
            Action::Instantiate {
                machine,
                template_id,
                bootstrap,
                ..
            } => match bootstrap {
                Some(b) => format!(
                    "instantiate {machine} from template {template_id} ({})",
                    b.role
                ),
                None => format!("instantiate {machine} from template {template_id}"),
            },
            Action::DeleteTemplate { template_id, name } => {
                format!("delete template {name} ({template_id})")
            }
            Action::DeleteImage { image_id, name } => format!("delete image {name} ({image_id})"),
            Action::CreateEndpointService { name, port } => {
                format!("create endpoint service {name} :{port}")
            }
            Action::DeleteEndpointService { name } => format!("delete endpoint service {name}"),
            Action::CordonNode { node, .. } => format!("cordon guest node {node}"),
            Action::DeleteNode { node, .. } => format!("delete node {node}"),
            Action::PatchNode {
                node,
                labels,
                taints,
                ..
            } => {
                let mut parts: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => format!("label {k}={v}"),
                        None => format!("remove label {k}"),
                    })
                    .collect();
                if let Some(t) = taints {
                    parts.push(format!("{} taint(s)", t.len()));
                }
                format!("set {} on node {node}", parts.join(", "))
            }
            Action::UncordonNode { node, .. } => format!("uncordon guest node {node}"),
            Action::EvictPod {
                node,
                namespace,
                pod,
            } => format!("evict pod {namespace}/{pod} from {node}"),
            Action::DeletePod {
                node,
                namespace,
                pod,
            } => format!("delete pod {namespace}/{pod} on {node}"),
            Action::DeleteVmi { vmi, .. } => format!("delete VMI {vmi}"),
            Action::RefreshBootstrapToken {
                machine, token_id, ..
            } => format!("extend bootstrap token {token_id} of {machine}"),
            Action::DeleteBootstrapToken { machine, token_id } => {
                format!("delete bootstrap token {token_id} of {machine}")
            }
        }
    }
}

/// An action and the human reason for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedAction {
    #[serde(flatten)]
    pub action: Action,
    pub reason: String,
}

impl fmt::Display for PlannedAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.action.summary(), self.reason)
    }
}

fn route_list(routes: &[Route]) -> String {
    routes
        .iter()
        .map(|r| format!("{} via {}", r.destination, r.nexthop))
        .collect::<Vec<_>>()
        .join(", ")
}
