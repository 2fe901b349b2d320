//! Wire mode: the engine talks to the simulated OpenStack through the real HTTP provider
//! (`flightdeck-openstack`), with the simulator served on loopback by
//! `flightdeck-sim-http`. The workload cluster (nodes) stays simulated and is reached
//! in-process, keyed by the servers' real IDs: Nova's servers boot no kubelet.

use std::sync::Arc;

pub use flightdeck_embedded::{SimulatedNodes, simulated_nodes};
pub use flightdeck_openstack::OpenStackProvider as WireProvider;
use flightdeck_openstack::{
    CloudEntry, Credentials, Domain, OpenStackCloud, Password, Scope, SessionOptions,
};
use flightdeck_sim::SimCloud;
use flightdeck_sim_http::ServeOptions;
use flightdeck_workload::ProviderIdFormat;

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
    let options = one_at_a_time(options);
    let connect = |cloud: Arc<SimCloud>| async move {
        let (listener, base) = loopback().await?;
        let serve = ServeOptions::default();
        let entry = cloud_entry(&base, &serve);
        tokio::spawn(flightdeck_sim_http::serve(cloud.clone(), listener, serve));
        // Virtual time runs far faster than a rate limit meant for real clouds.
        let session = SessionOptions {
            rate_limit: None,
            ..SessionOptions::default()
        };
        let openstack = OpenStackCloud::connect(&entry, session)
            .await
            .map_err(|e| RunError::Wire(format!("cannot connect to the served simulator: {e}")))?;
        Ok(Arc::new(WireProvider::new(
            openstack,
            simulated_nodes(cloud, ProviderIdFormat::OpenStack),
        )))
    };
    run_on(loaded, &options, connect, on_event).await
}
