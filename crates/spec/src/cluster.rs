//! `kind: Cluster`: the infrastructure of one Kubernetes cluster.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::cidr::Cidr;
use crate::duration::Duration;
use crate::names::{KubernetesVersion, Name, Text};

pub const API_VERSION: &str = "flightdeck.dev/v1alpha1";

/// The most machines one node pool may ask for; a bound keeps every loop over a pool small.
pub const POOL_REPLICAS_MAX: u32 = 200;

/// A whole `kind: Cluster` document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cluster {
    pub api_version: ApiVersion,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: ClusterSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    pub name: Name,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSpec {
    pub control_plane: ControlPlane,
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
    pub network: Network,
    #[serde(default)]
    pub api_load_balancer: ApiLoadBalancer,
    pub provider: Provider,
    #[serde(default)]
    pub flight: Flight,
    /// How the workload cluster's own API is reached (see [`crate::workload`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::workload::WorkloadSpec>,
    /// How machines become the cluster's nodes (see [`crate::bootstrap`]). Always
    /// written out: a stored spec without it was stored before kubeadm became the
    /// default, and means `provider: none` (see `Bootstrap::stored_before_kubeadm`).
    #[serde(default)]
    pub bootstrap: crate::bootstrap::Bootstrap,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ControlPlane {
    pub replicas: ControlPlaneReplicas,
    pub version: KubernetesVersion,
    pub machine: MachineTemplate,
    /// Labels flightdeck keeps on the set's Nodes (see [`NodePool::labels`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints flightdeck keeps on the set's Nodes (see [`NodePool::taints`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<NodeTaint>,
}

/// What a machine is made from. A change to any field of a control-plane template (or to
/// the control plane's version) is a rollout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachineTemplate {
    /// OpenStack: the Nova flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<Text>,
    /// OpenStack: the Glance image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Text>,
    /// OpenNebula: one of `spec.provider.opennebula.templates`, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Name>,
    /// A cloud-init file every machine of the set boots with (path relative to the spec
    /// file); see [`crate::userdata`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<crate::userdata::UserData>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodePool {
    pub name: Name,
    pub replicas: PoolReplicas,
    pub machine: MachineTemplate,
    /// Labels flightdeck puts on the pool's Nodes once they register, and puts back
    /// when someone removes them (`node-role.kubernetes.io/*` included, which a kubelet
    /// may not set on itself). A change is made to the Nodes in place: no rollout.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints flightdeck keeps on the pool's Nodes, as it keeps the labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<NodeTaint>,
}

/// A taint of a set's Nodes (`spec.taints[]` of a Node).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeTaint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Network {
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Cidr,
    /// OpenStack: the name of the security group flightdeck creates for the cluster's
    /// machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group: Option<Text>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiLoadBalancer {
    #[serde(default = "default_api_port")]
    pub port: Port,
    /// When present, the pool gets a health monitor and members must be ONLINE to count.
    #[serde(default)]
    pub health_monitor: Option<HealthMonitor>,
}

impl Default for ApiLoadBalancer {
    fn default() -> Self {
        ApiLoadBalancer {
            port: default_api_port(),
            health_monitor: None,
        }
    }
}

fn default_api_port() -> Port {
    Port(6443)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HealthMonitor {
    #[serde(default, rename = "type")]
    pub kind: HealthMonitorKind,
    #[serde(default = "default_hm_delay")]
    pub delay: Duration,
    #[serde(default = "default_hm_timeout")]
    pub timeout: Duration,
    #[serde(default = "default_hm_retries")]
    pub max_retries: u8,
}

fn default_hm_delay() -> Duration {
    Duration::from_secs(5)
}
fn default_hm_timeout() -> Duration {
    Duration::from_secs(3)
}
fn default_hm_retries() -> u8 {
    3
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HealthMonitorKind {
    #[default]
    Tcp,
    Http,
    Https,
}

impl HealthMonitorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthMonitorKind::Tcp => "TCP",
            HealthMonitorKind::Http => "HTTP",
            HealthMonitorKind::Https => "HTTPS",
        }
    }
}

/// The cloud provider block. Exactly one provider must be set; more kinds of cloud
/// join as optional fields here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Provider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openstack: Option<OpenStackProvider>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opennebula: Option<crate::opennebula::OpenNebulaProvider>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<crate::kubevirt::KubeVirtProvider>,
}

impl Provider {
    /// Whether the cluster lives on KubeVirt (VirtualMachines in an infra cluster).
    pub fn is_kubevirt(&self) -> bool {
        self.kubevirt.is_some()
    }

    /// Whether the control plane's address is not a load balancer flightdeck builds
    /// member by member (OpenNebula's VIP, KubeVirt's Service).
    pub fn external_endpoint(&self) -> bool {
        self.opennebula.is_some() || self.kubevirt.is_some()
    }

    /// Whether the cluster lives on OpenNebula (templates, VMs, an external endpoint).
    pub fn is_opennebula(&self) -> bool {
        self.opennebula.is_some()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenStackProvider {
    /// The entry of `clouds.yaml` to use.
    pub cloud: Text,
    pub network: Text,
    pub subnet: Text,
    /// The router that carries the routes to each node's pod network (F7, F8). Without
    /// it flightdeck manages no routes.
    #[serde(default)]
    pub router: Option<Text>,
}

/// How flightdeck flies the cluster: timeouts, budgets and rollout settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Flight {
    /// How long a new load-balancer member may stay PENDING_* (or not ONLINE) before the
    /// rollout halts with `LoadBalancerMemberStuck`.
    #[serde(default = "default_member_timeout")]
    pub member_timeout: Duration,
    /// How long a booted machine may take to register a Ready node, and how long a node
    /// may stay NotReady, before the machine is replaced (F3).
    #[serde(default = "default_node_startup_timeout")]
    pub node_startup_timeout: Duration,
    /// The most machines of a pool (or of the control plane) under remediation at once
    /// (F10): a percentage rounds down, and the budget is at least 1.
    #[serde(default = "default_max_unhealthy")]
    pub max_unhealthy: IntOrPercent,
    /// How many machines above the desired count a rollout may create (Cluster API's
    /// `maxSurge`). Rollouts here are always surge-first.
    #[serde(default = "default_max_surge")]
    pub max_surge: Surge,
    /// How often a cluster is reconciled when nothing happens.
    #[serde(default = "default_resync_period")]
    pub resync_period: Duration,
    /// Which automatic repairs are on. All are, by default.
    #[serde(default)]
    pub repairs: Repairs,
    /// The churn breaker (F11): an object deleted and re-created more than `churnLimit`
    /// times within `churnWindow` without a spec change stops being reconciled.
    #[serde(default = "default_churn_limit")]
    pub churn_limit: u32,
    #[serde(default = "default_churn_window")]
    pub churn_window: Duration,
    /// How long a machine's node may take to drain (cordon, then every pod that must
    /// leave evicted through the Eviction API) before the machine is deleted anyway,
    /// with an event saying so (Cluster API's `nodeDrainTimeout`). Counts from the
    /// drain's start, which is recorded, so a restart keeps the deadline.
    #[serde(default = "default_node_drain_timeout")]
    pub node_drain_timeout: Duration,
    /// How long flightdeck keeps asking the workload cluster to delete the Node of a
    /// machine that is gone (Cluster API's `nodeDeletionTimeout`), from when the
    /// machine was confirmed gone.
    #[serde(default = "default_node_deletion_timeout")]
    pub node_deletion_timeout: Duration,
}

/// Switches for flight control's repairs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Repairs {
    /// F3: replace machines whose node never registers within `nodeStartupTimeout`, or
    /// stays NotReady that long.
    #[serde(default = "yes")]
    pub unregistered: bool,
    /// F6: replace machines whose server is in ERROR.
    #[serde(default = "yes")]
    pub errored: bool,
    /// F4: put lost pod-network rules back into the security group.
    #[serde(default = "yes")]
    pub security_group_rules: bool,
    /// F5: put servers that lost the cluster's security group back into it.
    #[serde(default = "yes")]
    pub security_group_membership: bool,
    /// F7, F8: keep the router's routes to pod networks pointing at live nodes.
    #[serde(default = "yes")]
    pub routes: bool,
}

impl Default for Repairs {
    fn default() -> Self {
        Repairs {
            unregistered: true,
            errored: true,
            security_group_rules: true,
            security_group_membership: true,
            routes: true,
        }
    }
}

fn yes() -> bool {
    true
}
fn default_churn_limit() -> u32 {
    3
}
fn default_churn_window() -> Duration {
    Duration::from_mins(30)
}

impl Default for Flight {
    fn default() -> Self {
        Flight {
            member_timeout: default_member_timeout(),
            node_startup_timeout: default_node_startup_timeout(),
            max_unhealthy: default_max_unhealthy(),
            max_surge: default_max_surge(),
            resync_period: default_resync_period(),
            repairs: Repairs::default(),
            churn_limit: default_churn_limit(),
            churn_window: default_churn_window(),
            node_drain_timeout: default_node_drain_timeout(),
            node_deletion_timeout: default_node_deletion_timeout(),
        }
    }
}

fn default_node_drain_timeout() -> Duration {
    Duration::from_mins(10)
}
fn default_node_deletion_timeout() -> Duration {
    Duration::from_mins(10)
}

fn default_member_timeout() -> Duration {
    Duration::from_mins(5)
}
fn default_node_startup_timeout() -> Duration {
    Duration::from_mins(10)
}
fn default_max_unhealthy() -> IntOrPercent {
    IntOrPercent::Percent(40)
}
fn default_max_surge() -> Surge {
    Surge(1)
}
fn default_resync_period() -> Duration {
    Duration::from_mins(5)
}

/// `apiVersion`, which must be `flightdeck.dev/v1alpha1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiVersion;

impl Serialize for ApiVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(API_VERSION)
    }
}

impl<'de> Deserialize<'de> for ApiVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == API_VERSION {
            Ok(ApiVersion)
        } else {
            Err(de::Error::custom(format!(
                "unsupported apiVersion {s:?}; this flightdeck reads {API_VERSION}"
            )))
        }
    }
}

/// Number of control-plane machines: 1, 3 or 5, so that etcd always has a quorum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ControlPlaneReplicas(u32);

impl ControlPlaneReplicas {
    pub fn new(n: u32) -> Result<Self, String> {
        match n {
            1 | 3 | 5 => Ok(ControlPlaneReplicas(n)),
            _ => Err(format!(
                "control-plane replicas must be 1, 3 or 5 (an odd count keeps etcd's quorum), got {n}"
            )),
        }
    }
    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for ControlPlaneReplicas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        ControlPlaneReplicas::new(n).map_err(de::Error::custom)
    }
}

/// Number of machines in a node pool: 0 to [`POOL_REPLICAS_MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PoolReplicas(u32);

impl PoolReplicas {
    pub fn new(n: u32) -> Result<Self, String> {
        if n > POOL_REPLICAS_MAX {
            return Err(format!(
                "node pool replicas must be at most {POOL_REPLICAS_MAX}, got {n}"
            ));
        }
        Ok(PoolReplicas(n))
    }
    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for PoolReplicas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        PoolReplicas::new(n).map_err(de::Error::custom)
    }
}

/// `maxSurge`: 1 to 5 extra machines during a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Surge(u32);

impl Surge {
    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Surge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        if (1..=5).contains(&n) {
            Ok(Surge(n))
        } else {
            Err(de::Error::custom(format!(
                "maxSurge must be between 1 and 5 (rollouts are always surge-first), got {n}"
            )))
        }
    }
}

/// A TCP port, 1 to 65535.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Port(u16);

impl Port {
    pub fn get(self) -> u16 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(d)?;
        match u16::try_from(n) {
            Ok(p) if p > 0 => Ok(Port(p)),
            _ => Err(de::Error::custom(format!(
                "port must be between 1 and 65535, got {n}"
            ))),
        }
    }
}

/// A count (`2`) or a percentage of a pool (`"40%"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u8),
}

impl IntOrPercent {
    /// The count this stands for in a pool of `total`, rounded down but at least 1.
    pub fn of(self, total: u32) -> u32 {
        let n = match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => total * u32::from(p) / 100,
        };
        n.max(1)
    }
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for IntOrPercent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrPercent::Int(n) => s.serialize_u32(*n),
            IntOrPercent::Percent(_) => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = IntOrPercent;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a count such as 2 or a percentage such as \"40%\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrPercent, E> {
                u32::try_from(v)
                    .map(IntOrPercent::Int)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrPercent, E> {
                Err(E::custom(format!("must not be negative, got {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrPercent, E> {
                let p = v
                    .strip_suffix('%')
                    .and_then(|n| n.trim().parse::<u8>().ok())
                    .filter(|p| (1..=100).contains(p));
                p.map(IntOrPercent::Percent).ok_or_else(|| {
                    E::custom(format!("{v:?} is not a percentage between 1% and 100%"))
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl Cluster {
    pub fn name(&self) -> &Name {
        &self.metadata.name
    }

    /// Rules that involve more than one field. Single-field rules are enforced while
    /// parsing, where the YAML line is known. Returns the first of [`Cluster::problems`].
    pub fn validate(&self) -> Result<(), (String, String)> {
        first_problem(self.problems())
    }

    /// Every multi-field rule the cluster breaks, as (field path, problem), in the order
    /// of the spec's checks. A check that needs an earlier one to pass (a machine's
    /// template against a broken provider block) is skipped when that one fails.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.kind != "Cluster" {
            out.push((
                "kind".into(),
                format!("expected Cluster, got {:?}", self.kind),
            ));
        }
        if let Some(w) = &self.spec.workload {
            out.extend(w.validate().err());
            if self
                .spec
                .provider
                .kubevirt
                .as_ref()
                .is_some_and(|k| k.workload_kubeconfig.is_some())
            {
                out.push((
                    "spec.workload.kubeconfig".into(),
                    "give the workload cluster's kubeconfig once: here or in spec.provider.kubevirt.workloadKubeconfig".into(),
                ));
            }
        }
        let provider = &self.spec.provider;
        match (
            &provider.openstack,
            &provider.opennebula,
            &provider.kubevirt,
        ) {
            (Some(_), None, None) => self.validate_openstack(&mut out),
            (None, Some(one), None) => {
                let broken = one.problems();
                let templates_usable = broken.is_empty();
                out.extend(
                    broken
                        .into_iter()
                        .map(|(f, m)| (format!("spec.provider.opennebula.{f}"), m)),
                );
                self.validate_opennebula(one, templates_usable, &mut out);
            }
            (None, None, Some(kv)) => {
                out.extend(
                    kv.problems()
                        .into_iter()
                        .map(|(f, m)| (format!("spec.provider.kubevirt.{f}"), m)),
                );
                self.validate_kubevirt(&mut out);
            }
            _ => out.push((
                "spec.provider".into(),
                "exactly one provider must be set (openstack, opennebula or kubevirt)".into(),
            )),
        }
        let pod = self.spec.network.pod_cidr;
        let widest = if pod.addr().is_ipv4() { 8 } else { 32 };
        if pod.prefix() < widest {
            out.push((
                "spec.network.podCIDR".into(),
                format!(
                    "{pod} is wider than /{widest}; the pod network would let almost any \
                     address in through the cluster's security group"
                ),
            ));
        }
        out.extend(crate::capacity::check_cluster(self));
        out.extend(crate::bootstrap::problems(self));
        let cp = &self.spec.control_plane;
        out.extend(crate::node_meta::problems(
            "spec.controlPlane",
            &cp.labels,
            &cp.taints,
        ));
        for (i, pool) in self.spec.node_pools.iter().enumerate() {
            out.extend(crate::node_meta::problems(
                &format!("spec.nodePools[{i}]"),
                &pool.labels,
                &pool.taints,
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, pool) in self.spec.node_pools.iter().enumerate() {
            if !seen.insert(pool.name.as_str()) {
                out.push((
                    format!("spec.nodePools[{i}].name"),
                    format!("node pool name {:?} is used twice", pool.name.as_str()),
                ));
            } else if pool.name.as_str() == "cp" {
                out.push((
                    format!("spec.nodePools[{i}].name"),
                    "\"cp\" is reserved for the control plane".into(),
                ));
            }
        }
        if let Some(hm) = &self.spec.api_load_balancer.health_monitor {
            if hm.timeout >= hm.delay {
                out.push((
                    "spec.apiLoadBalancer.healthMonitor.timeout".into(),
                    format!(
                        "timeout {} must be shorter than delay {} (Octavia rejects it otherwise)",
                        hm.timeout, hm.delay
                    ),
                ));
            }
            for (field, d) in [("delay", hm.delay), ("timeout", hm.timeout)] {
                if d.as_millis() % 1000 != 0 || d.as_millis() == 0 {
                    out.push((
                        format!("spec.apiLoadBalancer.healthMonitor.{field}"),
                        format!(
                            "{d} is not a whole number of seconds, which is what Octavia takes"
                        ),
                    ));
                }
            }
            if !(1..=10).contains(&hm.max_retries) {
                out.push((
                    "spec.apiLoadBalancer.healthMonitor.maxRetries".into(),
                    format!("must be between 1 and 10, got {}", hm.max_retries),
                ));
            }
        }
        let f = &self.spec.flight;
        if !(1..=100).contains(&f.churn_limit) {
            out.push((
                "spec.flight.churnLimit".into(),
                format!("must be between 1 and 100, got {}", f.churn_limit),
            ));
        }
        for (field, value, min) in [
            ("memberTimeout", f.member_timeout, Duration::from_secs(10)),
            (
                "nodeStartupTimeout",
                f.node_startup_timeout,
                Duration::from_secs(30),
            ),
            ("resyncPeriod", f.resync_period, Duration::from_secs(10)),
            ("churnWindow", f.churn_window, Duration::from_mins(1)),
            (
                "nodeDrainTimeout",
                f.node_drain_timeout,
                Duration::from_secs(10),
            ),
            (
                "nodeDeletionTimeout",
                f.node_deletion_timeout,
                Duration::from_secs(10),
            ),
        ] {
            if value < min {
                out.push((
                    format!("spec.flight.{field}"),
                    format!("{value} is shorter than the minimum of {min}"),
                ));
            }
        }
        out
    }

    /// Every machine template with its field path.
    fn machine_templates(&self) -> Vec<(String, &MachineTemplate)> {
        let mut all = vec![(
            "spec.controlPlane.machine".to_string(),
            &self.spec.control_plane.machine,
        )];
        for (i, pool) in self.spec.node_pools.iter().enumerate() {
            all.push((format!("spec.nodePools[{i}].machine"), &pool.machine));
        }
        all
    }

    /// Machines made from a flavor (instancetype) and an image, as OpenStack and KubeVirt
    /// make them.
    fn validate_flavor_and_image(&self, cloud: &str, out: &mut Vec<(String, String)>) {
        for (path, m) in self.machine_templates() {
            if m.flavor.is_none() {
                out.push((
                    format!("{path}.flavor"),
                    format!("{cloud} machines need a flavor"),
                ));
            }
            if m.image.is_none() {
                out.push((
                    format!("{path}.image"),
                    format!("{cloud} machines need an image"),
                ));
            }
            if m.template.is_some() {
                out.push((
                    format!("{path}.template"),
                    format!("templates are OpenNebula's; {cloud} machines take flavor and image"),
                ));
            }
        }
    }

    fn validate_kubevirt(&self, out: &mut Vec<(String, String)>) {
        self.validate_flavor_and_image("KubeVirt", out);
        if self.spec.network.security_group.is_some() {
            out.push((
                "spec.network.securityGroup".into(),
                "flightdeck manages no security group on KubeVirt".into(),
            ));
        }
        if self.spec.api_load_balancer.health_monitor.is_some() {
            out.push((
                "spec.apiLoadBalancer.healthMonitor".into(),
                "KubeVirt clusters are reached through a Service; there is no load balancer to monitor".into(),
            ));
        }
    }

    fn validate_openstack(&self, out: &mut Vec<(String, String)>) {
        self.validate_flavor_and_image("OpenStack", out);
        if self.spec.network.security_group.is_none() {
            out.push((
                "spec.network.securityGroup".into(),
                "OpenStack clusters need the name of their security group".into(),
            ));
        }
    }

    /// `templates_usable`: whether the provider block's templates can be looked up (a
    /// machine naming a template is checked against them only then).
    fn validate_opennebula(
        &self,
        one: &crate::opennebula::OpenNebulaProvider,
        templates_usable: bool,
        out: &mut Vec<(String, String)>,
    ) {
        for (path, m) in self.machine_templates() {
            match &m.template {
                None => out.push((
                    format!("{path}.template"),
                    "OpenNebula machines need a template (one of spec.provider.opennebula.templates)"
                        .into(),
                )),
                Some(t) if templates_usable && one.template(t.as_str()).is_none() => out.push((
                    format!("{path}.template"),
                    format!(
                        "{:?} is not one of spec.provider.opennebula.templates",
                        t.as_str()
                    ),
                )),
                Some(_) => {}
            }
            for (field, set) in [("flavor", m.flavor.is_some()), ("image", m.image.is_some())] {
                if set {
                    out.push((
                        format!("{path}.{field}"),
                        format!(
                            "OpenNebula machines are made from templates; {field} is OpenStack's"
                        ),
                    ));
                }
            }
        }
        if self.spec.network.security_group.is_some() {
            out.push((
                "spec.network.securityGroup".into(),
                "flightdeck manages no security group on OpenNebula; put the VM's security groups in the template's NIC".into(),
            ));
        }
        if self.spec.api_load_balancer.health_monitor.is_some() {
            out.push((
                "spec.apiLoadBalancer.healthMonitor".into(),
                "OpenNebula clusters have no load balancer to monitor; the endpoint is spec.provider.opennebula.endpoint".into(),
            ));
        }
    }

    /// A stable fingerprint of everything in the spec; a change of it is a spec change.
    pub fn spec_hash(&self) -> u64 {
        let json = serde_json::to_string(&self.spec).unwrap_or_default();
        crate::fnv1a(json.as_bytes())
    }
}

/// The first of `problems` as an error, for callers that stop at one.
pub(crate) fn first_problem(problems: Vec<(String, String)>) -> Result<(), (String, String)> {
    match problems.into_iter().next() {
        Some(p) => Err(p),
        None => Ok(()),
    }
}
