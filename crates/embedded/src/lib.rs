//! The engine's providers over the in-process simulator: the embedded default of
//! `flightdeck serve` and `up`, and what the test bed's in-process runs drive. Each goes
//! through the same provider code as a real cloud; only the transport is in process:
//!
//! - OpenNebula: the XML-RPC provider, each call handed to the simulator
//!   ([`SimTransport`]);
//! - KubeVirt, and every cloud's workload cluster: kube-rs, each request handed to the
//!   simulator's API server by a tower service ([`in_process_client`]).
//!
//! (OpenStack's in-process provider is the simulator itself.)

use std::sync::Arc;

use flightdeck_cloud::provider::Result as CloudResult;
use flightdeck_cloud::{Clock, CloudError, Ownership};
use flightdeck_kubevirt::KubeVirtCloud;
use flightdeck_opennebula::{OneClient, OneCredentials, OpenNebulaCloud, Secret, Transport};
use flightdeck_openstack::OpenStackProvider;
use flightdeck_sim::{INFRA_CLUSTER, KubeRequest, SimCloud, SimConfig};
use flightdeck_workload::{KubeGuest, ProviderIdFormat, WorkloadFn};

mod watch_body;
pub use watch_body::{SimBody, WatchBroke};

/// A `kube::Client` whose requests go straight to the simulated API server `cluster`.
/// A watch's answer goes on, read on demand, until its `timeoutSeconds` of simulated
/// time (see [`watch_body`]).
pub fn in_process_client(cloud: Arc<SimCloud>, cluster: &str) -> kube::Client {
    let cluster = cluster.to_string();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let cloud = cloud.clone();
        let cluster = cluster.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect_bytes().await?;
            let request = KubeRequest {
                method: parts.method.to_string(),
                path: parts.uri.path().to_string(),
                query: parts.uri.query().unwrap_or_default().to_string(),
                body: body.to_vec(),
                content_type: parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
            };
            let watch = request.is_watch();
            let answer = cloud.kube_request(&cluster, request.clone());
            let body = if watch && answer.status == 200 {
                SimBody::watch(cloud, &cluster, request, answer.body)
            } else {
                SimBody::whole(answer.body)
            };
            http::Response::builder()
                .status(answer.status)
                .header(http::header::CONTENT_TYPE, answer.content_type)
                .body(body)
                .map_err(|e| kube::Error::Service(Box::new(e)))
        }
    });
    kube::Client::new(service, "default")
}

pub type Workload =
    WorkloadFn<Box<dyn Fn(&flightdeck_cloud::Ownership) -> WorkloadAnswer + Send + Sync>>;
pub type WorkloadAnswer = Result<Option<kube::Client>, CloudError>;

/// The KubeVirt provider over the in-process simulator.
pub type InProcessKubeVirt = KubeVirtCloud<Workload>;

/// The provider the engine uses against the in-process simulated KubeVirt.
pub fn in_process_kubevirt(cloud: Arc<SimCloud>, namespace: &str) -> Arc<InProcessKubeVirt> {
    let infra = in_process_client(cloud.clone(), INFRA_CLUSTER);
    let cloud_clock = cloud.clock().clone();
    let workload: Box<dyn Fn(&flightdeck_cloud::Ownership) -> WorkloadAnswer + Send + Sync> =
        Box::new(move |owner| {
            Ok(cloud
                .kube_clusters()
                .contains(&owner.cluster)
                .then(|| in_process_client(cloud.clone(), &owner.cluster)))
        });
    let clock: Arc<dyn Clock> = Arc::new(cloud_clock);
    Arc::new(
        KubeVirtCloud::new(infra, namespace, WorkloadFn::new(workload)).pump_node_watches(clock),
    )
}

/// The user the simulated OpenNebula knows.
pub const SIM_USER: &str = "oneadmin";

/// An XML-RPC transport that hands every call to the in-process simulator: exactly one
/// simulator call per request, as `POST /RPC2` would make.
pub struct SimTransport(pub Arc<SimCloud>);

impl Transport for SimTransport {
    async fn call(&self, method: &str, params: Vec<dxr::Value>) -> Result<dxr::Value, CloudError> {
        Ok(self.0.one_call(method, params))
    }
}

/// The OpenNebula provider over the in-process simulator.
pub type InProcessOne = OpenNebulaCloud<SimTransport, SimulatedNodes>;

/// How the simulator's workload clusters are reached: as real ones, through kube-rs (an
/// in-process client per cluster), nodes matched by providerID in the cloud's format and
/// watched, read on demand in the simulator's time ([`flightdeck_workload::pumped`]).
pub type SimulatedNodes = KubeGuest<WorkloadFn<Box<WorkloadSource>>>;
type WorkloadSource = dyn Fn(&Ownership) -> CloudResult<Option<kube::Client>> + Send + Sync;

/// The simulator's workload clusters on `cloud`, whose nodes carry `format`'s providerIDs.
pub fn simulated_nodes(cloud: Arc<SimCloud>, format: ProviderIdFormat) -> SimulatedNodes {
    let clock: Arc<dyn Clock> = Arc::new(cloud.clock().clone());
    let source: Box<WorkloadSource> = Box::new(move |owner: &Ownership| {
        Ok(Some(in_process_client(cloud.clone(), &owner.cluster)))
    });
    KubeGuest::pumped(WorkloadFn::new(source), format, clock)
}

/// The OpenStack provider over the in-process simulator: Nova, Neutron and Octavia are
/// the simulator's own calls, and the workload cluster's nodes come through kube-rs from
/// its simulated Kubernetes API, as they do from a real cluster.
pub type InProcessOpenStack = OpenStackProvider<SimulatedNodes, SimCloud>;

/// The provider the engine uses against the in-process simulated OpenStack.
pub fn in_process_openstack(cloud: Arc<SimCloud>) -> Arc<InProcessOpenStack> {
    let nodes = simulated_nodes(cloud.clone(), ProviderIdFormat::OpenStack);
    Arc::new(OpenStackProvider::shared(cloud, nodes))
}

/// The runner's simulators are built with the default configuration, whose password
/// is a test fixture for loopback only.
pub fn credentials(_cloud: &SimCloud) -> OneCredentials {
    OneCredentials::new(SIM_USER, Secret::new(SimConfig::default().one_password))
}

/// The provider the engine uses against the in-process simulated OpenNebula.
pub fn in_process_opennebula(cloud: Arc<SimCloud>) -> Arc<InProcessOne> {
    let client = OneClient::new(SimTransport(cloud.clone()), &credentials(&cloud));
    Arc::new(OpenNebulaCloud::new(
        client,
        simulated_nodes(cloud, ProviderIdFormat::OpenNebula),
    ))
}
