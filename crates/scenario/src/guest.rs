//! A simulated kubelet for real clouds. Nova's fake driver boots no kubelet, so against
//! Debian's OpenStack services the workload cluster is simulated: every ACTIVE server of
//! the cluster, as the real cloud lists it (Nova's servers, OpenNebula's VMs), registers a
//! node after `register_after` and is Ready after `ready_after`, keyed by the server's
//! real name and ID.
//!
//! This exists for integration tests only. Real workload clusters are reached through
//! their kubeconfig, which flightdeck does not do yet.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{Clock, Compute, GuestCluster, Node, Ownership, ServerStatus, Timestamp};
use flightdeck_openstack::OpenStackCloud;
use flightdeck_spec::Duration;

pub struct SimulatedKubelets<C = OpenStackCloud> {
    servers: Arc<C>,
    clock: Arc<dyn Clock>,
    register_after: Duration,
    ready_after: Duration,
    /// (cluster UID, server id) → when the server was first seen ACTIVE.
    active_since: Mutex<BTreeMap<(String, String), Timestamp>>,
}

impl<C> SimulatedKubelets<C> {
    pub fn new(
        servers: Arc<C>,
        clock: Arc<dyn Clock>,
        register_after: Duration,
        ready_after: Duration,
    ) -> Self {
        SimulatedKubelets {
            servers,
            clock,
            register_after,
            ready_after,
            active_since: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<C: Compute + Send + Sync> GuestCluster for SimulatedKubelets<C> {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        let servers = self.servers.list_servers(owner).await?;
        let now = self.clock.now();
        let mut since = self.active_since.lock().unwrap_or_else(|e| e.into_inner());
        let mut nodes = Vec::new();
        for s in servers
            .iter()
            .filter(|s| s.status == ServerStatus::Active && !s.is_deleting())
        {
            let first = *since
                .entry((owner.uid.clone(), s.id.clone()))
                .or_insert(now);
            let up = now.since(first);
            if up >= self.register_after {
                nodes.push(Node {
                    name: s.name.clone(),
                    server_id: Some(s.id.clone()),
                    ready: up >= self.ready_after,
                    unschedulable: false,
                    created_at: first.plus(self.register_after),
                    pod_cidr: None,
                    internal_ip: s.address,
                });
            }
        }
        // Forget this cluster's servers that are gone; other clusters' are theirs.
        since.retain(|(uid, id), _| *uid != owner.uid || servers.iter().any(|s| s.id == *id));
        Ok(Some(nodes))
    }
}
