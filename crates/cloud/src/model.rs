//! The objects flightdeck observes, and the requests that create them. Field names and
//! status values follow the OpenStack APIs (Nova, Neutron, Octavia) and Kubernetes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Nova's server `status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServerStatus {
    Build,
    Active,
    Error,
    /// Any other status Nova reports (SHUTOFF, REBOOT, ...), kept verbatim.
    Other(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Server {
    pub id: String,
    pub name: String,
    pub status: ServerStatus,
    /// Nova's `OS-EXT-STS:task_state`, e.g. `deleting`.
    pub task_state: Option<String>,
    pub tags: Vec<String>,
    /// Names of the security groups the server is in.
    pub security_groups: Vec<String>,
    pub address: Option<IpAddr>,
    pub image: String,
    pub flavor: String,
    /// Nova's `fault.message` for an ERROR server.
    pub fault: Option<String>,
    pub created_at: Timestamp,
}

impl Server {
    pub fn is_deleting(&self) -> bool {
        self.task_state.as_deref() == Some("deleting")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerCreate {
    pub name: String,
    pub flavor: String,
    pub image: String,
    pub network: String,
    pub security_groups: Vec<String>,
    pub tags: Vec<String>,
    /// KubeVirt: the VMI's eviction strategy (`External` when absent). Other clouds
    /// ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// The machine's cloud-init user data, variables filled in (`machine.userData`):
    /// Nova `user_data`, a KubeVirt `cloudInitNoCloud` volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecurityGroup {
    pub id: String,
    pub name: String,
    pub tags: Vec<String>,
    pub rules: Vec<SecurityGroupRule>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroupRule {
    pub id: String,
    /// `ingress` or `egress`.
    pub direction: String,
    /// `IPv4` or `IPv6`.
    pub ethertype: String,
    /// `tcp`, `udp`, `icmp`, ... or `None` for any.
    pub protocol: Option<String>,
    pub remote_ip_prefix: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroupRuleCreate {
    pub security_group_id: String,
    pub direction: String,
    pub ethertype: String,
    pub protocol: Option<String>,
    pub remote_ip_prefix: Option<String>,
}

impl SecurityGroupRule {
    /// Whether this rule is the one `want` asks for (ids aside).
    pub fn matches(&self, want: &SecurityGroupRuleCreate) -> bool {
        self.direction == want.direction
            && self.ethertype == want.ethertype
            && self.protocol == want.protocol
            && self.remote_ip_prefix == want.remote_ip_prefix
    }
}

/// Octavia's `provisioning_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProvisioningStatus {
    PendingCreate,
    PendingUpdate,
    PendingDelete,
    Active,
    Error,
    Deleted,
}

impl ProvisioningStatus {
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            ProvisioningStatus::PendingCreate
                | ProvisioningStatus::PendingUpdate
                | ProvisioningStatus::PendingDelete
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisioningStatus::PendingCreate => "PENDING_CREATE",
            ProvisioningStatus::PendingUpdate => "PENDING_UPDATE",
            ProvisioningStatus::PendingDelete => "PENDING_DELETE",
            ProvisioningStatus::Active => "ACTIVE",
            ProvisioningStatus::Error => "ERROR",
            ProvisioningStatus::Deleted => "DELETED",
        }
    }
}

/// Octavia's `operating_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperatingStatus {
    Online,
    Offline,
    Degraded,
    Error,
    NoMonitor,
    Draining,
}

impl OperatingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OperatingStatus::Online => "ONLINE",
            OperatingStatus::Offline => "OFFLINE",
            OperatingStatus::Degraded => "DEGRADED",
            OperatingStatus::Error => "ERROR",
            OperatingStatus::NoMonitor => "NO_MONITOR",
            OperatingStatus::Draining => "DRAINING",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancer {
    pub id: String,
    pub name: String,
    pub provisioning_status: ProvisioningStatus,
    pub operating_status: OperatingStatus,
    pub vip_address: Option<IpAddr>,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancerCreate {
    pub name: String,
    pub vip_subnet: String,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Listener {
    pub id: String,
    pub name: String,
    pub loadbalancer_id: String,
    pub protocol_port: u16,
    pub provisioning_status: ProvisioningStatus,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListenerCreate {
    pub name: String,
    pub loadbalancer_id: String,
    pub protocol_port: u16,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub id: String,
    pub name: String,
    pub loadbalancer_id: String,
    pub listener_id: Option<String>,
    pub provisioning_status: ProvisioningStatus,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolCreate {
    pub name: String,
    pub listener_id: String,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthMonitor {
    pub id: String,
    pub name: String,
    pub pool_id: String,
    /// `TCP`, `HTTP`, `HTTPS`.
    pub kind: String,
    pub provisioning_status: ProvisioningStatus,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealthMonitorCreate {
    pub name: String,
    pub pool_id: String,
    pub kind: String,
    pub delay_s: u32,
    pub timeout_s: u32,
    pub max_retries: u8,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub id: String,
    pub name: String,
    pub pool_id: String,
    pub address: IpAddr,
    pub protocol_port: u16,
    pub provisioning_status: ProvisioningStatus,
    pub operating_status: OperatingStatus,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberCreate {
    pub name: String,
    pub pool_id: String,
    pub address: IpAddr,
    pub protocol_port: u16,
    pub tags: Vec<String>,
}

/// A Kubernetes Node of the workload cluster, as far as flightdeck cares.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// `spec.providerID` in the cloud's format (`openstack:///<id>`, `opennebula://<id>`,
    /// `kubevirt://<vm>`), reduced to the server id.
    pub server_id: Option<String>,
    pub ready: bool,
    pub unschedulable: bool,
    pub created_at: Timestamp,
    /// `spec.podCIDR`: the slice of the cluster's pod network this node's pods use.
    #[serde(default)]
    pub pod_cidr: Option<String>,
    /// The node's `InternalIP` address: how a node without a providerID in its cloud's
    /// format, and with another name, is still matched to its machine.
    #[serde(default)]
    pub internal_ip: Option<IpAddr>,
    /// `metadata.labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// The value of the annotation [`HOLD_DELETION`], if the node carries it: the
    /// pre-drain hook, which holds its machine's deletion before the drain starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_deletion: Option<String>,
}

/// The Node annotation that holds a machine's deletion before its drain starts (the
/// pre-drain hook), whatever its value, until someone removes it.
pub const HOLD_DELETION: &str = "flightdeck.dev/hold-deletion";

/// A taint of a Node (`spec.taints[]`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A static route of a Neutron router (`extra routes`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Route {
    /// A CIDR, e.g. `10.244.3.0/24`.
    pub destination: String,
    pub nexthop: IpAddr,
}

/// A Neutron router, as far as extra routes go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Router {
    pub id: String,
    pub name: String,
    pub tags: Vec<String>,
    /// In the order they were added.
    pub routes: Vec<Route>,
}

/// Everything flightdeck could see of one cluster's objects in one observation. Every
/// list holds only objects that carry the cluster's UID tag, except `nodes`, which come
/// from the workload cluster itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub at: Timestamp,
    /// The cluster's write counter when the lists were taken: an observation taken
    /// before the cluster's latest write is stale, and nothing may be concluded from it.
    #[serde(default)]
    pub after_write: u64,
    pub servers: Vec<Server>,
    pub security_groups: Vec<SecurityGroup>,
    pub load_balancers: Vec<LoadBalancer>,
    pub listeners: Vec<Listener>,
    pub pools: Vec<Pool>,
    pub health_monitors: Vec<HealthMonitor>,
    pub members: Vec<Member>,
    /// `None` when the workload cluster's API could not be reached (no load balancer
    /// yet, or the API is down): nothing may be concluded about nodes then.
    pub nodes: Option<Vec<Node>>,
    /// When the node list stopped being current, if it did: the nodes come from a watch
    /// that broke then. `None`: they are as of [`Observed::at`].
    #[serde(default)]
    pub nodes_stale_since: Option<Timestamp>,
    /// The router the cluster's pod routes live on, when the spec names one.
    #[serde(default)]
    pub router: Option<Router>,
    /// Next hops of the router's routes into the cluster's pod network that no server
    /// of the cluster has and that no Neutron port holds: dead, whoever added the
    /// route. Only asked for such hops, and a failed ask proves none dead.
    #[serde(default)]
    pub dead_hops: std::collections::BTreeSet<std::net::IpAddr>,
    /// OpenNebula: every VM template the session's user can see (ownership is decided by
    /// flightdeck's records, not by the list).
    #[serde(default)]
    pub templates: Vec<crate::VmTemplate>,
    /// OpenNebula: every image the session's user can see.
    #[serde(default)]
    pub images: Vec<crate::Image>,
    /// KubeVirt: the cluster's VMIs.
    #[serde(default)]
    pub vmis: Vec<crate::Vmi>,
    /// KubeVirt: the pods on the guest nodes being drained, by node name. A node that is
    /// not a key was not listed (nothing may be concluded about its pods).
    #[serde(default)]
    pub pods: std::collections::BTreeMap<String, Vec<crate::Pod>>,
    /// KubeVirt: the cluster's control-plane endpoint Services.
    #[serde(default)]
    pub services: Vec<crate::EndpointService>,
    /// Servers read one by one, by ID, and whether the cloud said each is gone: taken
    /// only when the server list shows none of the servers flightdeck recorded (a list
    /// that lost everything, or a cluster whose servers are all really gone), and for at
    /// most [`DIRECT_READS_MAX`] of them.
    pub direct_reads: std::collections::BTreeMap<String, bool>,
}

impl Observed {
    /// An observation at `at` in which every list is empty.
    pub fn blank(at: Timestamp) -> Observed {
        Observed {
            at,
            ..Observed::default()
        }
    }
}

/// The most servers read one by one in one observation.
pub const DIRECT_READS_MAX: usize = 10;
