//! Test bed: kubelets for another cloud's machines. The servers of a real OpenStack
//! (Nova's fake driver boots nothing) are mirrored into the simulator with their real
//! IDs, tags and addresses; their kubelets register here, and the workload cluster's
//! API (`sim serve --kubernetes`) answers for them with `openstack:///<real id>`
//! providerIDs, as a real cluster on that cloud would. flightdeck reaches it through a
//! kubeconfig, exactly as it reaches a real workload cluster.
//!
//! A mirrored cluster's API answers once one of its control-plane machines runs with a
//! Ready node: its real load balancer is not in the simulator (see `kube.rs`).

use flightdeck_cloud::ownership::{TAG_CLUSTER, uid_of};
use flightdeck_cloud::{Clock, Server, ServerStatus};
use flightdeck_spec::Cidr;

use crate::{SimCloud, nova, routes};

impl SimCloud {
    /// Makes the simulator's servers of `cluster` the running ones of `servers`, as the
    /// real cloud lists them now: a new one gets a kubelet (never, if its name is in
    /// `never_register`), one gone from the list stops its kubelet. With `pod_cidr`,
    /// each node gets a /24 of it. Not an API call.
    pub fn mirror_servers(
        &self,
        cluster: &str,
        servers: &[Server],
        never_register: &[String],
        pod_cidr: Option<Cidr>,
    ) {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        st.unsettled = true;
        st.mirrored.insert(cluster.to_string());
        let running: Vec<&Server> = servers
            .iter()
            .filter(|s| s.status == ServerStatus::Active && !s.is_deleting())
            .filter(|s| {
                s.tags
                    .iter()
                    .any(|t| t == &format!("{TAG_CLUSTER}{cluster}"))
            })
            .collect();
        if let (Some(cidr), Some(uid)) = (pod_cidr, running.iter().find_map(|s| uid_of(&s.tags)))
            && !st.pod_networks.contains_key(cluster)
        {
            routes::set_pod_network(&mut st, cluster, uid, cidr);
        }
        let gone: Vec<String> = st
            .servers
            .values()
            .map(|r| &r.server)
            .filter(|s| {
                s.tags
                    .iter()
                    .any(|t| t == &format!("{TAG_CLUSTER}{cluster}"))
            })
            .filter(|s| !running.iter().any(|r| r.id == s.id))
            .map(|s| s.id.clone())
            .collect();
        for id in gone {
            nova::unmirror(&mut st, now, &id);
        }
        for s in running {
            nova::mirror(&mut st, now, s, never_register.contains(&s.name));
        }
    }
}
