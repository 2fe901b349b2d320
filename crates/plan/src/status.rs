//! What a person sees of a cluster: phase, machines, members, load balancer, conditions.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::condition::Condition;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    #[default]
    Provisioning,
    Ready,
    RollingOut,
    Scaling,
    Deleting,
    Deleted,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Provisioning => "Provisioning",
            Phase::Ready => "Ready",
            Phase::RollingOut => "RollingOut",
            Phase::Scaling => "Scaling",
            Phase::Deleting => "Deleting",
            Phase::Deleted => "Deleted",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub phase: Phase,
    pub ready: bool,
    pub control_plane: SetStatus,
    pub node_pools: Vec<SetStatus>,
    pub load_balancer: Option<LoadBalancerStatus>,
    /// KubeVirt: the control-plane endpoint (`host:port`), the address of the endpoint
    /// Service once it has one (its load balancer's, else its cluster IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_endpoint: Option<String>,
    /// Machines flight control is replacing, or would replace once the budget allows.
    #[serde(default)]
    pub repairs: Vec<RepairStatus>,
    /// Each set's `maxUnhealthy` budget and how much of it is in use.
    #[serde(default)]
    pub repair_budgets: Vec<RepairBudget>,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairBudget {
    pub set: String,
    pub budget: u32,
    pub in_use: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairStatus {
    pub machine: String,
    pub reason: String,
    /// `replacing`, or why it waits.
    pub state: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetStatus {
    pub name: String,
    pub replicas: u32,
    /// Machines counted as healthy: for the control plane, serving through the load
    /// balancer; for pools, a Ready node.
    pub ready: u32,
    pub up_to_date: u32,
    pub machines: Vec<MachineStatus>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    pub name: String,
    pub server_id: Option<String>,
    /// BUILD, ACTIVE, ERROR, DELETING, or REQUESTED before the server exists.
    pub server_status: String,
    pub address: Option<IpAddr>,
    pub version: String,
    pub image: String,
    pub node: Option<String>,
    pub member: Option<MemberStatus>,
    pub up_to_date: bool,
    pub removing: bool,
    /// While the machine's node is drained before it goes, or its deletion is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainStatus>,
}

/// The drain of a machine's node before the machine goes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatus {
    /// When the drain started (`None` while the hold annotation keeps it from starting).
    pub since: Option<flightdeck_cloud::Timestamp>,
    /// When the machine goes whatever is left (`nodeDrainTimeout` after `since`).
    pub deadline: Option<flightdeck_cloud::Timestamp>,
    /// Pods that must still leave its node, when they were listed.
    pub pods_left: Option<usize>,
    /// The node carries `flightdeck.dev/hold-deletion`, which holds the deletion.
    pub held: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    pub id: String,
    pub provisioning_status: String,
    pub operating_status: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerStatus {
    pub id: String,
    pub provisioning_status: String,
    pub operating_status: String,
    pub vip_address: Option<IpAddr>,
}
