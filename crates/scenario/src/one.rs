//! OpenNebula runs. The engine talks to the simulated OpenNebula through the real
//! XML-RPC provider (`flightdeck-opennebula`): in process, its transport hands each call
//! to the simulator directly ([`SimTransport`]); in wire mode the simulator is served
//! on loopback (`flightdeck-sim-http`) and the transport is HTTP. Either way the request
//! is built, and the answer's XML documents parsed, by the same code that talks to a
//! real OpenNebula. The workload cluster's nodes stay simulated and in process.

use std::sync::Arc;

use flightdeck_opennebula::{HttpOptions, HttpTransport, OpenNebulaCloud};
use flightdeck_sim::SimCloud;

use crate::load::LoadedScenario;
use crate::report::TimelineEntry;
use crate::runner::{Run, RunError, RunOptions, run_on};
pub use flightdeck_embedded::{
    InProcessOne, SIM_USER, SimTransport, in_process_opennebula as in_process,
};
use flightdeck_embedded::{SimulatedNodes, credentials, simulated_nodes};
use flightdeck_workload::ProviderIdFormat;

/// The OpenNebula provider over the simulator served at `endpoint`.
pub type WireOne = OpenNebulaCloud<HttpTransport, SimulatedNodes>;

/// Whether the scenario's clusters live on OpenNebula (see [`LoadedScenario::all_on`]).
pub fn is_opennebula(loaded: &LoadedScenario) -> Result<bool, RunError> {
    loaded.all_on("OpenNebula", flightdeck_spec::Provider::is_opennebula)
}

/// Runs an OpenNebula scenario in process.
pub async fn run_in_process(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    run_on(
        loaded,
        options,
        |cloud| async move { Ok(in_process(cloud)) },
        on_event,
    )
    .await
}

/// Runs an OpenNebula scenario in wire mode: XML-RPC over loopback HTTP.
pub async fn run_wire(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    let mut options = crate::loopback::one_at_a_time(options);
    if crate::wire::boots_kubeadm(loaded) {
        // kubeadm clusters' workload APIs over TLS, with flightdeck's own certificate.
        let book = Arc::new(flightdeck_cloud::AccessBook::new());
        options.workload_access = Some(book.clone());
        let connect = |cloud: Arc<SimCloud>| async move {
            let endpoint = serve_xmlrpc(&cloud).await?;
            let nodes =
                crate::wire::guest_over_tls(cloud.clone(), ProviderIdFormat::OpenNebula, book);
            over_http(&cloud, &endpoint, nodes)
        };
        return run_on(loaded, &options, connect, on_event).await;
    }
    let connect = |cloud: Arc<SimCloud>| async move {
        let endpoint = serve_xmlrpc(&cloud).await?;
        let nodes = simulated_nodes(cloud.clone(), ProviderIdFormat::OpenNebula);
        over_http(&cloud, &endpoint, nodes)
    };
    run_on(loaded, &options, connect, on_event).await
}

/// Serves `cloud`'s OpenNebula XML-RPC on a loopback port for the length of the run:
/// its endpoint.
async fn serve_xmlrpc(cloud: &Arc<SimCloud>) -> Result<String, RunError> {
    let (listener, base) = crate::loopback::loopback().await?;
    tokio::spawn(flightdeck_sim_http::serve_opennebula(
        cloud.clone(),
        listener,
    ));
    Ok(format!("{base}/RPC2"))
}

/// flightdeck's OpenNebula provider over XML-RPC at `endpoint`, its workload clusters
/// reached through `nodes`.
fn over_http<G: flightdeck_cloud::GuestCluster + flightdeck_cloud::GuestDrain + Send + Sync>(
    cloud: &Arc<SimCloud>,
    endpoint: &str,
    nodes: G,
) -> Result<Arc<OpenNebulaCloud<flightdeck_opennebula::HttpTransport, G>>, RunError> {
    let provider = OpenNebulaCloud::over_http(
        Some(endpoint),
        Some(credentials(cloud)),
        &HttpOptions::default(),
        nodes,
    )
    .map_err(|e| RunError::Wire(format!("cannot reach the served OpenNebula: {e}")))?;
    Ok(Arc::new(provider))
}
