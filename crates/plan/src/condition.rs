//! Conditions (stable `reason`, human `message`) and events.

use flightdeck_cloud::Timestamp;
use serde::{Deserialize, Serialize};

/// Condition types. A condition type is also the name users grep for, so these strings
/// never change.
pub mod kind {
    pub const READY: &str = "Ready";
    pub const LOAD_BALANCER_MEMBER_STUCK: &str = "LoadBalancerMemberStuck";
    pub const MACHINE_FAILED: &str = "MachineFailed";
    pub const LOAD_BALANCER_FAILED: &str = "LoadBalancerFailed";
    /// The API load balancer has stayed PENDING_* for over a minute: Octavia takes no
    /// change until it is ACTIVE again.
    pub const LOAD_BALANCER_HELD_UP: &str = "LoadBalancerHeldUp";
    pub const ROLLOUT_HALTED: &str = "RolloutHalted";
    pub const CLOUD_ERROR: &str = "CloudError";
    pub const OBJECT_MISSING: &str = "ObjectNotListed";
    pub const OBSERVATION_SUSPECT: &str = "ObservationSuspect";
    pub const MEMBER_ADDRESS_BUSY: &str = "MemberAddressBusy";
    pub const RECONCILE_LOOP_DETECTED: &str = "ReconcileLoopDetected";
    pub const REMEDIATION_PAUSED: &str = "RemediationPaused";
    pub const REMEDIATING: &str = "Remediating";
    pub const ROUTE_LIMIT_REACHED: &str = "RouteLimitReached";
    pub const ROUTER_NOT_FOUND: &str = "RouterNotFound";
    /// Objects of the cluster's name under another UID stand in the cloud; nothing is
    /// created until they are adopted or removed.
    pub const FOREIGN_OBJECTS: &str = "ForeignObjects";
    /// Deletion sees none of the objects the cluster recorded and deleted none of them:
    /// it stops instead of forgetting the cluster.
    pub const DELETION_UNCONFIRMED: &str = "DeletionUnconfirmed";
    /// The cluster was taken up from the store lately: until the lists must show every
    /// machine made before (a store restored from a backup forgot them), no machine is
    /// made under a new name.
    pub const NEW_MACHINES_HELD: &str = "NewMachinesHeld";
    /// The plan broke one of its own guarantees (a planner bug): none of it was carried
    /// out, and it is planned again at the next look.
    pub const PLAN_REJECTED: &str = "PlanRejected";
}

/// Reasons of the `Ready` condition.
pub mod reason {
    pub const READY: &str = "Ready";
    pub const PROVISIONING: &str = "Provisioning";
    pub const ROLLING_OUT: &str = "RollingOut";
    pub const SCALING: &str = "Scaling";
    pub const DELETING: &str = "Deleting";
    pub const WAITING_FOR_MEMBERS: &str = "WaitingForLoadBalancerMembers";
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: bool,
    pub reason: String,
    #[serde(serialize_with = "flightdeck_cloud::error::serialize_bounded")]
    pub message: String,
    /// When `status` last changed; kept by the engine.
    #[serde(default)]
    pub since: Timestamp,
}

impl Condition {
    pub fn new(kind: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            kind: kind.to_string(),
            status,
            reason: reason.to_string(),
            message: message.into(),
            since: Timestamp::default(),
        }
    }
}

/// Something worth telling a person, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub at: Timestamp,
    pub cluster: String,
    /// `Normal` or `Warning`, as in Kubernetes.
    pub severity: Severity,
    /// Stable, machine-readable: `CreateServer`, `LoadBalancerMemberStuck`, ...
    pub reason: String,
    #[serde(serialize_with = "flightdeck_cloud::error::serialize_bounded")]
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Severity {
    Normal,
    Warning,
}

/// An event the plan wants recorded; the engine stamps time and cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEvent {
    pub severity: Severity,
    pub reason: String,
    #[serde(serialize_with = "flightdeck_cloud::error::serialize_bounded")]
    pub message: String,
}

impl PlanEvent {
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        PlanEvent {
            severity: Severity::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        PlanEvent {
            severity: Severity::Warning,
            reason: reason.into(),
            message: message.into(),
        }
    }
}
