//! The API's JSON documents, shared by the server (`flightdeck serve`) and the CLI
//! client. Timestamps are milliseconds on the cluster's clock (the Unix epoch for real
//! clouds; the embedded simulator's virtual clock, which starts at the wall clock and
//! may run faster); every document that carries times also carries `now` on the same
//! clock, so ages can be computed.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Ready/desired counts of one machine set.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetCount {
    pub name: String,
    /// Machines counted healthy: serving for the control plane, a Ready node for pools.
    pub ready: u32,
    pub desired: u32,
    pub up_to_date: u32,
}

/// One line of `get clusters`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    pub name: String,
    pub uid: String,
    /// Where the cluster lives: `sim/openstack`, `sim/opennebula`, `sim/kubevirt`, or
    /// `openstack:<clouds.yaml entry>`, `opennebula:<endpoint>`, `kubevirt:<kubeconfig>`.
    pub cloud: String,
    /// Provisioning, Ready, RollingOut, Scaling, Deleting.
    pub phase: String,
    pub ready: bool,
    pub control_plane: SetCount,
    pub pools: Vec<SetCount>,
    /// The API endpoint's address, once known.
    pub endpoint: Option<String>,
    /// Active conditions (other than Ready), by type.
    pub conditions: Vec<String>,
    /// Objects the churn breaker stopped (F11), by key; `resume` closes them.
    pub breakers: Vec<String>,
    /// Repairs under way or waiting for budget.
    pub repairs: u32,
    /// When the cluster was first applied (the cluster's clock), if known.
    pub created_at: Option<u64>,
    /// The latest reconcile's error, if it failed.
    pub last_error: Option<String>,
    /// Counts the specs applied to this cluster since the daemon started (1 at start).
    #[serde(default)]
    pub generation: u64,
    /// The generation the latest finished reconcile started from: the status describes
    /// the current spec only once it equals `generation` (as in Kubernetes).
    #[serde(default)]
    pub observed_generation: u64,
    pub now: u64,
}

/// `get cluster NAME`: everything about one cluster.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDetail {
    #[serde(flatten)]
    pub summary: ClusterSummary,
    /// The applied spec, as `kind: Cluster`.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// The cluster's status: sets, machines (server, node, member), load balancer,
    /// repairs, budgets and conditions (with reason, message and `since`).
    #[schema(value_type = Object)]
    pub status: serde_json::Value,
    /// What flightdeck remembers that a person may want to see: deletion, routes,
    /// templates held, the churn breakers' state.
    #[schema(value_type = Object)]
    pub memory: serde_json::Value,
}

/// `GET /api/v1/clusters`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ClusterList {
    pub items: Vec<ClusterSummary>,
}

/// The answer to an apply: one entry per cluster document.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub name: String,
    pub uid: String,
    /// `created`, `configured` (the spec changed), `unchanged`, or `adopting` (`?adopt=true`
    /// on a cluster held by objects of an earlier cluster of its name).
    pub result: String,
    pub cloud: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ApplyResult {
    pub items: Vec<Applied>,
}

/// One problem in a spec, as `flightdeck validate` reports it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    pub source: String,
    /// 1-based document index in the submitted text.
    pub document: usize,
    /// The field path, for example `spec.network.podCIDR`.
    pub path: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

/// Every error answer: a message that says what is wrong, and for a spec, where.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiError {
    pub error: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
}

/// One event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// When it happened (the cluster's clock, milliseconds).
    pub at: u64,
    pub cluster: String,
    /// `Normal` or `Warning`.
    pub severity: String,
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct EventList {
    pub items: Vec<EventView>,
    pub now: u64,
}

/// One action of a plan.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct PlannedActionView {
    /// `CreateServer`, `DeleteMember`, ...
    pub kind: String,
    pub summary: String,
    pub reason: String,
}

/// A repair flight control would start or has under way.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RepairView {
    pub machine: String,
    pub reason: String,
    pub state: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetView {
    pub set: String,
    pub budget: u32,
    pub in_use: u32,
}

/// `plan NAME`: the dry run against what the cloud shows now and the cluster's memory.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    pub cluster: String,
    pub actions: Vec<PlannedActionView>,
    pub repairs: Vec<RepairView>,
    pub repair_budgets: Vec<BudgetView>,
    pub conditions: Vec<String>,
    pub requeue_after: Option<String>,
    /// When the cloud was observed for this plan.
    pub observed_at: u64,
}

/// A fault to start in the embedded simulator (`POST /api/v1/sim/faults`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultRequest {
    /// A fault kind of the Scenario DSL, e.g. `neutron.ruleLost`, `nova.bootError`,
    /// `api.latency` (`GET /api/v1/sim/faults` lists them).
    pub kind: String,
    /// The cluster hit.
    pub cluster: String,
    /// How long it lasts (e.g. `2m`); absent: until the daemon stops.
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub service: Option<String>,
    #[serde(default)]
    pub rate: Option<f64>,
    /// `api.latency`: extra time per call (e.g. `60s`).
    #[serde(default)]
    pub latency: Option<String>,
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default)]
    pub level: Option<String>,
    #[serde(default)]
    pub template: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
}

/// A fault the embedded simulator holds.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FaultView {
    /// Which fault it is: `DELETE /api/v1/sim/faults/{id}` stops it (0 from a daemon
    /// that gave none).
    #[serde(default)]
    pub id: u64,
    pub kind: String,
    pub cluster: String,
    /// The cloud it was injected into: `openstack`, `opennebula` or `kubevirt`.
    pub cloud: String,
    pub start: u64,
    pub end: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct FaultKinds {
    pub kinds: Vec<String>,
    pub active: Vec<FaultView>,
}

/// What the embedded simulator itself holds of a cluster (its ground truth, not
/// flightdeck's memory): objects tagged with the cluster's name, by kind.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimObjects {
    pub cluster: String,
    /// Kind → how many objects tagged `flightdeck-cluster=<cluster>` exist (OpenNebula
    /// VMs that are DONE, and KubeVirt VMIs being deleted, are not counted).
    pub objects: std::collections::BTreeMap<String, usize>,
    /// Every extra route on every simulated router: `router: destination via nexthop`.
    pub routes: Vec<String>,
    /// Every OpenNebula template and image in the simulator, by name.
    pub shared: Vec<String>,
}

/// Who the presented token is.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    /// `viewer` (may look) or `admin` (may also apply, delete, resume and break the
    /// simulator).
    pub role: String,
}
