//! Providers for each kind of cloud: the embedded simulator's three, and real clouds
//! reached through their own credentials (clouds.yaml, ONE_AUTH/ONE_XMLRPC, kubeconfig).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use flightdeck_cloud::{Clock, Timestamp};
use flightdeck_kubevirt::{KubeVirtCloud, KubeconfigFile};
use flightdeck_opennebula::{HttpOptions, HttpTransport, OpenNebulaCloud};
use flightdeck_openstack::OpenStackProvider;
use flightdeck_openstack::{CloudEntry, OpenStackCloud, SessionOptions, config_error};
use flightdeck_scenario::guest::SimulatedKubelets;
use flightdeck_sim::SimCloud;
use flightdeck_spec::Duration;

use crate::error::Failure;
use crate::sim_host::SimHost;

/// The system clock, for real clouds.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        )
    }
}

/// How long a simulated kubelet takes to register, and then to be Ready.
const KUBELET_REGISTER: Duration = Duration::from_secs(5);
const KUBELET_READY: Duration = Duration::from_secs(10);

pub fn sim_openstack(sim: &SimHost) -> Arc<SimCloud> {
    sim.cloud.clone()
}

pub fn sim_opennebula(sim: &SimHost) -> Arc<flightdeck_scenario::one::InProcessOne> {
    flightdeck_scenario::one::in_process(sim.cloud.clone())
}

pub fn sim_kubevirt(
    sim: &SimHost,
    namespace: &str,
) -> Arc<flightdeck_scenario::kubevirt::InProcessKubeVirt> {
    flightdeck_scenario::kubevirt::in_process(sim.cloud.clone(), namespace)
}

fn no_nodes(cloud: &str) -> Failure {
    Failure::unprocessable(format!(
        "{cloud}: reaching real workload clusters through kubeconfig is not built yet; start serve with --simulated-nodes"
    ))
}

/// A real OpenStack, by clouds.yaml entry.
pub async fn openstack(
    cloud: &str,
    simulated_nodes: bool,
) -> Result<Arc<OpenStackProvider<SimulatedKubelets<OpenStackCloud>>>, Failure> {
    if !simulated_nodes {
        return Err(no_nodes(&format!("cloud {cloud}")));
    }
    let entry = CloudEntry::load(Some(cloud))
        .map_err(config_error)
        .map_err(|e| Failure::unprocessable(e.to_string()))?;
    let connect = || async {
        OpenStackCloud::connect(&entry, SessionOptions::default())
            .await
            .map_err(|e| Failure::gateway(format!("cannot reach cloud {cloud}: {e}")))
    };
    let openstack = connect().await?;
    let nodes = connect().await?;
    let kubelets = SimulatedKubelets::new(
        Arc::new(nodes),
        Arc::new(SystemClock),
        KUBELET_REGISTER,
        KUBELET_READY,
    );
    Ok(Arc::new(OpenStackProvider::new(openstack, kubelets)))
}

/// A real OpenNebula at `xmlrpc` (else `$ONE_XMLRPC`) with `$ONE_AUTH`'s credentials.
pub async fn opennebula(
    xmlrpc: Option<&str>,
    simulated_nodes: bool,
) -> Result<
    Arc<OpenNebulaCloud<HttpTransport, SimulatedKubelets<OpenNebulaCloud<HttpTransport, ()>>>>,
    Failure,
> {
    let name = xmlrpc.unwrap_or("$ONE_XMLRPC");
    if !simulated_nodes {
        return Err(no_nodes(&format!("OpenNebula {name}")));
    }
    let options = HttpOptions::default();
    let fail = |e: flightdeck_cloud::CloudError| {
        Failure::gateway(format!("cannot reach OpenNebula {name}: {e}"))
    };
    let vms = OpenNebulaCloud::over_http(xmlrpc, None, &options, ()).map_err(fail)?;
    vms.client().system_version().await.map_err(fail)?;
    let kubelets = SimulatedKubelets::new(
        Arc::new(vms),
        Arc::new(SystemClock),
        KUBELET_REGISTER,
        KUBELET_READY,
    );
    let provider = OpenNebulaCloud::over_http(xmlrpc, None, &options, kubelets).map_err(fail)?;
    Ok(Arc::new(provider))
}

/// A real KubeVirt infra cluster by kubeconfig; the workload cluster's kubeconfig is
/// `<infra dir>/<cluster>.kubeconfig` unless the spec names one.
pub async fn kubevirt(
    infra: &str,
    namespace: &str,
) -> Result<Arc<KubeVirtCloud<KubeconfigFile>>, Failure> {
    let _ = (infra, namespace);
    Err(Failure::unprocessable(format!(
        "kubevirt:{infra}: a real KubeVirt under serve is not built yet; use `flightdeck up --kubevirt`"
    )))
}
