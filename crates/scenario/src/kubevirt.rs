//! KubeVirt runs. The engine talks to the simulated infra cluster and workload clusters
//! through the real KubeVirt provider (`flightdeck-kubevirt`, kube-rs): in process, each
//! `kube::Client` is a tower service that hands the request to the simulator directly;
//! in wire mode the simulator's API servers are served on loopback
//! (`flightdeck-sim-http`) and the clients speak HTTP. Either way the requests are built
//! and the answers parsed by the code that talks to a real cluster.

use std::sync::Arc;

use flightdeck_cloud::{CloudError, ErrorClass};
use flightdeck_embedded::WorkloadAnswer;
use flightdeck_kubevirt::{KubeVirtCloud, WorkloadFn};
use flightdeck_sim::{INFRA_CLUSTER, SimCloud};
use flightdeck_workload::IssuedFirst;

pub use flightdeck_embedded::{
    InProcessKubeVirt, in_process_client, in_process_kubevirt as in_process,
};

use crate::load::LoadedScenario;
use crate::report::TimelineEntry;
use crate::runner::{Run, RunError, RunOptions, run_on};

/// A `kube::Client` for the API server `http://{base}/clusters/{cluster}`.
pub fn http_client(base: &str, cluster: &str) -> Result<kube::Client, CloudError> {
    let url: http::Uri = format!("{base}/clusters/{cluster}").parse().map_err(|e| {
        CloudError::new(
            ErrorClass::Permanent,
            "kubernetes",
            "connect",
            None,
            format!("{base}/clusters/{cluster} is no URL: {e}"),
        )
    })?;
    let mut config = kube::Config::new(url);
    // As for any client flightdeck builds: no retries inside a call (a 429 from a
    // disruption budget is the planner's to look at again), and a bounded wait.
    config.default_retry = false;
    config.read_timeout = Some(std::time::Duration::from_secs(30));
    kube::Client::try_from(config).map_err(|e| {
        CloudError::new(
            ErrorClass::Permanent,
            "kubernetes",
            "connect",
            None,
            format!("cannot build a client for {cluster}: {e}"),
        )
    })
}

/// The namespace every scenario's KubeVirt clusters live in, unless their spec says.
fn namespace(loaded: &LoadedScenario) -> String {
    loaded
        .clusters
        .iter()
        .find_map(|c| c.spec.provider.kubevirt.as_ref())
        .map(|k| k.namespace.to_string())
        .unwrap_or_else(|| "default".into())
}

/// Whether the scenario's clusters live on KubeVirt (see [`LoadedScenario::all_on`]).
pub fn is_kubevirt(loaded: &LoadedScenario) -> Result<bool, RunError> {
    loaded.all_on("KubeVirt", flightdeck_spec::Provider::is_kubevirt)
}

/// Runs a KubeVirt scenario in process.
pub async fn run_in_process(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    let ns = namespace(loaded);
    run_on(
        loaded,
        options,
        |cloud| async move { Ok(in_process(cloud, &ns)) },
        on_event,
    )
    .await
}

/// Runs a KubeVirt scenario in wire mode: the Kubernetes API over loopback HTTP.
pub async fn run_wire(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    let mut options = crate::loopback::one_at_a_time(options);
    // kubeadm clusters' workload APIs over TLS, with flightdeck's own certificate (the
    // engine fills the book only for them); any other cluster's over plain HTTP.
    let book = Arc::new(flightdeck_cloud::AccessBook::new());
    if crate::wire::boots_kubeadm(loaded) {
        options.workload_access = Some(book.clone());
    }
    let ns = namespace(loaded);
    let connect = |cloud: Arc<SimCloud>| async move {
        let (listener, base) = crate::loopback::loopback().await?;
        tokio::spawn(flightdeck_sim_http::serve_kubernetes(
            cloud.clone(),
            listener,
        ));
        let cloud_for_router = cloud.clone();
        let infra = http_client(&base, INFRA_CLUSTER)
            .map_err(|e| RunError::Wire(format!("cannot reach the served infra cluster: {e}")))?;
        // One client per workload cluster, made at its first call and kept: a client
        // made per call (its TLS setup, its connection pool) cost most of a wire run.
        let clients: std::sync::Mutex<std::collections::BTreeMap<String, kube::Client>> =
            Default::default();
        let workload: Box<dyn Fn(&flightdeck_cloud::Ownership) -> WorkloadAnswer + Send + Sync> =
            Box::new(move |owner| {
                if !cloud.kube_clusters().contains(&owner.cluster) {
                    return Ok(None);
                }
                let mut clients = clients.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(client) = clients.get(&owner.cluster) {
                    return Ok(Some(client.clone()));
                }
                let client = http_client(&base, &owner.cluster)?;
                clients.insert(owner.cluster.clone(), client.clone());
                Ok(Some(client))
            });
        let router = crate::wire::tls_router(cloud_for_router);
        Ok(Arc::new(KubeVirtCloud::new(
            infra,
            &ns,
            IssuedFirst::routed(book, WorkloadFn::new(workload), router),
        )))
    };
    run_on(loaded, &options, connect, on_event).await
}
