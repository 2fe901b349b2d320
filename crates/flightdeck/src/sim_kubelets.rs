//! `sim serve --kubelets-for ENTRY` (test bed): the simulator plays the workload cluster
//! of a cluster on a real OpenStack. Every few seconds the real cloud's servers of the
//! cluster are listed (by its `flightdeck-cluster` tag) and mirrored into the simulator,
//! whose kubelets register for them by their real IDs; `sim serve --kubernetes` then
//! answers the cluster's node list as a real workload cluster's API would.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_openstack::{CloudEntry, OpenStackCloud, SessionOptions, config_error};
use flightdeck_sim::SimCloud;
use flightdeck_spec::Cidr;

/// How often the real cloud's servers are listed.
const POLL_INTERVAL: Duration = Duration::from_secs(3);

/// Which cluster's servers get kubelets, and how.
pub struct Follow {
    /// The clouds.yaml entry of the real OpenStack.
    pub entry: String,
    pub cluster: String,
    pub pod_cidr: Option<Cidr>,
    pub never_register: Vec<String>,
}

/// Logs in to the real cloud (a wrong entry or password fails here, at start).
pub async fn connect(follow: &Follow) -> anyhow::Result<OpenStackCloud> {
    let entry = CloudEntry::load(Some(&follow.entry)).map_err(config_error)?;
    OpenStackCloud::connect(&entry, SessionOptions::default())
        .await
        .with_context(|| format!("--kubelets-for: cannot reach cloud {}", follow.entry))
}

/// Mirrors the cluster's servers into `cloud` forever. A failed list is logged and
/// tried again: the kubelets keep what they had.
pub async fn run(cloud: Arc<SimCloud>, source: OpenStackCloud, follow: Follow) {
    let tag = format!("{TAG_CLUSTER}{}", follow.cluster);
    eprintln!(
        "kubelets for the servers of cluster {} on cloud {}{}",
        follow.cluster,
        follow.entry,
        if follow.never_register.is_empty() {
            String::new()
        } else {
            format!(" (never registering: {})", follow.never_register.join(", "))
        }
    );
    loop {
        match source.list_servers_tagged(&tag).await {
            Ok(servers) => cloud.mirror_servers(
                &follow.cluster,
                &servers,
                &follow.never_register,
                follow.pod_cidr,
            ),
            Err(e) => tracing::warn!(cloud = %follow.entry, error = %e, "cannot list servers"),
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
