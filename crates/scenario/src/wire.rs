//! Wire mode: the engine talks to the simulated OpenStack through the real HTTP provider
//! (`flightdeck-openstack`), with the simulator served on loopback by
//! `flightdeck-sim-http`. The workload cluster (nodes) stays simulated, keyed by the
//! servers' real IDs (Nova's servers boot no kubelet): a cluster that boots
//! flightdeck's kubeadm data is reached over TLS with flightdeck's own certificate
//! ([`guest_over_tls`]), any other in process.

use std::sync::Arc;

use flightdeck_cloud::{AccessBook, CloudError, Ownership};
pub use flightdeck_embedded::{SimulatedNodes, simulated_nodes};
pub use flightdeck_openstack::OpenStackProvider as WireProvider;
use flightdeck_openstack::{
    CloudEntry, Credentials, Domain, OpenStackCloud, Password, Scope, SessionOptions,
};
use flightdeck_sim::SimCloud;
use flightdeck_sim_http::ServeOptions;
use flightdeck_workload::issued::unroutable;
use flightdeck_workload::{IssuedFirst, KubeGuest, ProviderIdFormat, Route, WorkloadFn};

use crate::load::LoadedScenario;
use crate::loopback::{loopback, one_at_a_time};
use crate::report::TimelineEntry;
use crate::runner::{Run, RunError, RunOptions, run_on};

/// The `clouds.yaml` entry that reaches a simulator served at `base` (e.g.
/// `http://127.0.0.1:PORT`) with `options`.
pub fn cloud_entry(base: &str, options: &ServeOptions) -> CloudEntry {
    let mut entry = CloudEntry::new(
        "flightdeck-sim",
        Credentials {
            auth_url: format!("{base}/identity/v3"),
            username: options.user.clone(),
            password: Password::new(options.password.clone()),
            project: Scope::Name {
                name: options.project.clone(),
                domain: Domain::default(),
            },
            user_domain: Domain::default(),
        },
    );
    entry.region_name = Some(options.region.clone());
    entry
}

/// Runs an OpenStack scenario in wire mode: the simulator is served on a loopback port
/// for the length of the run and the engine reaches it only over HTTP.
pub async fn run_openstack_wire(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> std::result::Result<Run, RunError> {
    let mut options = one_at_a_time(options);
    if boots_kubeadm(loaded) {
        let book = Arc::new(AccessBook::new());
        options.workload_access = Some(book.clone());
        let connect = |cloud: Arc<SimCloud>| async move {
            let openstack = connect_openstack(&cloud).await?;
            Ok(Arc::new(WireProvider::new(
                openstack,
                guest_over_tls(cloud, ProviderIdFormat::OpenStack, book),
            )))
        };
        return run_on(loaded, &options, connect, on_event).await;
    }
    let connect = |cloud: Arc<SimCloud>| async move {
        let openstack = connect_openstack(&cloud).await?;
        Ok(Arc::new(WireProvider::new(
            openstack,
            simulated_nodes(cloud, ProviderIdFormat::OpenStack),
        )))
    };
    run_on(loaded, &options, connect, on_event).await
}

/// Serves `cloud`'s OpenStack on a loopback port for the length of the run, and
/// connects flightdeck's OpenStack client to it.
async fn connect_openstack(cloud: &Arc<SimCloud>) -> std::result::Result<OpenStackCloud, RunError> {
    {
        let (listener, base) = loopback().await?;
        let serve = ServeOptions::default();
        let entry = cloud_entry(&base, &serve);
        tokio::spawn(flightdeck_sim_http::serve(cloud.clone(), listener, serve));
        // Virtual time runs far faster than a rate limit meant for real clouds.
        let session = SessionOptions {
            rate_limit: None,
            ..SessionOptions::default()
        };
        OpenStackCloud::connect(&entry, session)
            .await
            .map_err(|e| RunError::Wire(format!("cannot connect to the served simulator: {e}")))
    }
}

/// Whether any of the scenario's clusters boots with flightdeck's kubeadm data: in wire
/// mode, those clusters' workload APIs are reached over TLS with flightdeck's own
/// certificate ([`guest_over_tls`]).
pub fn boots_kubeadm(loaded: &LoadedScenario) -> bool {
    loaded.clusters.iter().any(|c| c.spec.bootstrap.kubeadm())
}

/// The workload clusters of a wire run, as a product reaches them: a kubeadm cluster
/// through its API server served over TLS on loopback (`WorkloadListeners`), with the
/// client certificate the engine issued itself into `book` and the server verified
/// against the cluster CA under the endpoint's name; any other cluster in process, as
/// before. Nodes are listed on every read: a long-lived watch over real HTTP would not
/// follow virtual time.
pub fn guest_over_tls(
    cloud: Arc<SimCloud>,
    format: ProviderIdFormat,
    book: Arc<AccessBook>,
) -> TlsGuest {
    let router = tls_router(cloud.clone());
    let inner: Box<InProcess> = Box::new(move |owner: &Ownership| {
        Ok(Some(flightdeck_embedded::in_process_client(
            cloud.clone(),
            &owner.cluster,
        )))
    });
    KubeGuest::new(
        IssuedFirst::routed(book, WorkloadFn::new(inner), router),
        format,
    )
}

/// How a wire run reaches a kubeadm cluster's API server: at the TLS listener the
/// simulator serves for it once `kubeadm init` made it, by the endpoint's name.
pub fn tls_router(cloud: Arc<SimCloud>) -> Box<flightdeck_workload::issued::Router> {
    let listeners = flightdeck_sim_http::WorkloadListeners::new(cloud);
    Box::new(move |cluster, access| {
        let host = endpoint_host(&access.server)
            .ok_or_else(|| unroutable(cluster, format!("{} names no host", access.server)))?;
        match listeners.server(cluster) {
            Ok(Some(served)) => Ok(Some(Route {
                url: format!("https://{}", served.addr),
                tls_server_name: Some(host),
                proxy_url: None,
            })),
            // No `kubeadm init` has made the cluster: nothing answers at its endpoint.
            Ok(None) => Ok(None),
            Err(e) => Err(unroutable(cluster, e)),
        }
    })
}

type InProcess = dyn Fn(&Ownership) -> Result<Option<kube::Client>, CloudError> + Send + Sync;
/// [`guest_over_tls`]'s workload clusters.
pub type TlsGuest = KubeGuest<IssuedFirst<WorkloadFn<Box<InProcess>>>>;

/// The host of an `https://host:port` URL (an IPv6 address without its brackets).
fn endpoint_host(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri.host()?;
    Some(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
}
