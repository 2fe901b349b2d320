//! Providers for each kind of cloud: the embedded simulator's three, and real clouds
//! reached through their own credentials (clouds.yaml, ONE_AUTH/ONE_XMLRPC, kubeconfig).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use flightdeck_cloud::AccessBook;
use flightdeck_cloud::{Clock, Timestamp};
use flightdeck_kubevirt::{KubeVirtCloud, KubeconfigFile};
use flightdeck_opennebula::{HttpOptions, HttpTransport, OpenNebulaCloud};
use flightdeck_openstack::OpenStackProvider;
use flightdeck_openstack::{CloudEntry, OpenStackCloud, SessionOptions, config_error};
use flightdeck_workload::{IssuedFirst, KubeGuest, KubeconfigFiles, ProviderIdFormat};

use crate::error::Failure;
#[cfg(feature = "sim")]
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

#[cfg(feature = "sim")]
pub fn sim_openstack(sim: &SimHost) -> Arc<flightdeck_embedded::InProcessOpenStack> {
    flightdeck_embedded::in_process_openstack(sim.cloud.clone())
}

#[cfg(feature = "sim")]
pub fn sim_opennebula(sim: &SimHost) -> Arc<flightdeck_embedded::InProcessOne> {
    flightdeck_embedded::in_process_opennebula(sim.cloud.clone())
}

#[cfg(feature = "sim")]
pub fn sim_kubevirt(sim: &SimHost, namespace: &str) -> Arc<flightdeck_embedded::InProcessKubeVirt> {
    flightdeck_embedded::in_process_kubevirt(sim.cloud.clone(), namespace)
}

/// How a real cloud's clusters' nodes are read: each cluster's own API, with
/// flightdeck's own certificate for a cluster it bootstraps with kubeadm (the engine
/// issues it into the access book), else through the kubeconfig its spec names
/// (`spec.workload.kubeconfig`).
pub type Nodes = KubeGuest<IssuedFirst<Arc<KubeconfigFiles>>>;

/// How flightdeck reaches the kubeadm clusters it bootstraps: the access book its
/// engines issue into, and the HTTP proxy in front of the clusters' network, if any.
#[derive(Clone, Copy)]
pub struct Reach<'a> {
    pub access: &'a Arc<AccessBook>,
    pub proxy: Option<&'a str>,
}

impl Reach<'_> {
    fn clients(&self, kubeconfigs: &Arc<KubeconfigFiles>) -> IssuedFirst<Arc<KubeconfigFiles>> {
        IssuedFirst::new(self.access.clone(), kubeconfigs.clone())
            .through_proxy(self.proxy.map(str::to_string))
    }
}

/// A real OpenStack's provider.
pub type RealOpenStack = OpenStackProvider<Nodes>;
/// A real OpenNebula's provider.
pub type RealOpenNebula = OpenNebulaCloud<HttpTransport, Nodes>;

/// A real OpenStack, by clouds.yaml entry. Each cluster's nodes are read through the
/// kubeconfig its spec names, kept in `kubeconfigs`.
pub async fn openstack(
    cloud: &str,
    kubeconfigs: &Arc<KubeconfigFiles>,
    reach: Reach<'_>,
) -> Result<Arc<RealOpenStack>, Failure> {
    let entry = CloudEntry::load(Some(cloud))
        .map_err(config_error)
        .map_err(|e| Failure::unprocessable(e.to_string()))?;
    let openstack = OpenStackCloud::connect(&entry, SessionOptions::default())
        .await
        .map_err(|e| Failure::gateway(format!("cannot reach cloud {cloud}: {e}")))?;
    let nodes = KubeGuest::watching(
        reach.clients(kubeconfigs),
        ProviderIdFormat::OpenStack,
        Arc::new(SystemClock),
    );
    Ok(Arc::new(OpenStackProvider::new(openstack, nodes)))
}

/// A real OpenNebula at `xmlrpc` (else `$ONE_XMLRPC`) with `$ONE_AUTH`'s credentials.
/// Each cluster's nodes are read through the kubeconfig its spec names.
pub async fn opennebula(
    xmlrpc: Option<&str>,
    kubeconfigs: &Arc<KubeconfigFiles>,
    reach: Reach<'_>,
) -> Result<Arc<RealOpenNebula>, Failure> {
    let name = xmlrpc.unwrap_or("$ONE_XMLRPC");
    let options = HttpOptions::default();
    let fail = |e: flightdeck_cloud::CloudError| {
        Failure::gateway(format!("cannot reach OpenNebula {name}: {e}"))
    };
    let probe = OpenNebulaCloud::over_http(xmlrpc, None, &options, ()).map_err(fail)?;
    probe.client().system_version().await.map_err(fail)?;
    let nodes = KubeGuest::watching(
        reach.clients(kubeconfigs),
        ProviderIdFormat::OpenNebula,
        Arc::new(SystemClock),
    );
    let provider = OpenNebulaCloud::over_http(xmlrpc, None, &options, nodes).map_err(fail)?;
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
