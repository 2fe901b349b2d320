//! Observation: what the cloud has for one cluster, one list per resource kind.

use flightdeck_cloud::ownership::role_of;
use std::collections::BTreeMap;
use std::future::Future;

use flightdeck_cloud::{
    CloudError, DIRECT_READS_MAX, ErrorClass, Member, Observed, OperatingStatus, Ownership,
    Provider, ProvisioningStatus, Role, Timestamp,
};
use flightdeck_plan::drain::{evacuation_requested, guest_node_of};
use flightdeck_plan::node_drain::nodes_to_drain;
use flightdeck_spec::Cluster;

use crate::reuse::{Kind, Kinds};

/// Lists what the cluster's cloud has for it: on OpenNebula its VMs, every template and
/// image (ownership of those is in memory), and the workload cluster's nodes; elsewhere
/// see [`observe`].
///
/// With `owned_only` (the ownership check, off only to prove the checks notice), an
/// OpenStack list is kept to the objects that carry the cluster's UID tag whatever the
/// cloud answered: a Nova asked below microversion 2.26, or a Neutron without filter
/// validation, ignores the `tags` filter and answers the whole project.
///
/// `recorded`: the IDs of the servers flightdeck recorded for the cluster. When the list
/// shows none of them (two or more), some are read one by one ([`read_missing`]).
pub async fn observe_cluster<P: Provider>(
    provider: &P,
    owner: &Ownership,
    now: Timestamp,
    spec: &Cluster,
    owned_only: crate::config::OwnershipScope,
    recorded: &[String],
    reuse: Reuse<'_>,
) -> Result<Observed, CloudError> {
    let mut observed = observe_lists(provider, owner, now, spec, reuse).await?;
    let openstack = !spec.spec.provider.is_kubevirt() && !spec.spec.provider.is_opennebula();
    if owned_only != crate::config::OwnershipScope::Off && openstack {
        keep_owned(&mut observed, owner, owned_only);
    }
    if reuse.take(Kind::Servers).is_none() {
        observed.direct_reads = read_missing(provider, &observed.servers, recorded).await;
    }
    // Nodes that come from a watch broken since some time are as old as that.
    if observed.nodes.is_some() {
        observed.nodes_stale_since = provider.nodes_stale_since(owner);
    }
    Ok(observed)
}

/// What one reconcile observes: the cluster, at `now`, with the servers memory
/// recorded, stamped with the cluster's write counter.
pub(crate) struct Look<'a> {
    pub(crate) owner: &'a Ownership,
    pub(crate) now: Timestamp,
    pub(crate) spec: &'a Cluster,
    pub(crate) recorded: &'a [String],
    /// What flightdeck remembers: its write counter, and the machines being removed
    /// (whose nodes' pods a drain needs).
    pub(crate) memory: &'a flightdeck_plan::Memory,
}

impl Look<'_> {
    pub(crate) async fn observe<P: Provider>(
        &self,
        provider: &P,
        owned_only: crate::config::OwnershipScope,
        reuse: Reuse<'_>,
    ) -> Result<Observed, CloudError> {
        let observed = observe_cluster(
            provider,
            self.owner,
            self.now,
            self.spec,
            owned_only,
            self.recorded,
            reuse,
        )
        .await?;
        let mut observed = Observed {
            after_write: self.memory.write_seq,
            ..observed
        };
        pods_of_leaving(provider, self.owner, &mut observed, self.memory).await;
        read_nodes_machines(provider, &mut observed).await;
        Ok(observed)
    }
}

async fn observe_lists<P: Provider>(
    provider: &P,
    owner: &Ownership,
    now: Timestamp,
    spec: &Cluster,
    reuse: Reuse<'_>,
) -> Result<Observed, CloudError> {
    if spec.spec.provider.is_kubevirt() {
        return observe_kubevirt(provider, owner, now).await;
    }
    if !spec.spec.provider.is_opennebula() {
        let router = spec
            .spec
            .provider
            .openstack
            .as_ref()
            .and_then(|o| o.router.as_ref())
            .map(|r| r.as_str());
        let mut observed = observe_reusing(provider, owner, now, router, reuse).await?;
        observed.dead_hops = dead_hops(provider, &observed, spec.spec.network.pod_cidr).await;
        return Ok(observed);
    }
    let servers = twice(|| provider.list_servers(owner)).await?;
    let templates = twice(|| provider.list_templates()).await?;
    let images = twice(|| provider.list_images()).await?;
    // The endpoint is not flightdeck's: the workload cluster is asked whenever some VM
    // exists.
    let nodes = if servers.is_empty() {
        None
    } else {
        workload_nodes(provider, owner).await?
    };
    Ok(Observed {
        at: now,
        servers,
        nodes,
        templates,
        images,
        ..Observed::default()
    })
}

/// KubeVirt: the cluster's VMs and VMIs, its endpoint Service, the workload cluster's
/// nodes, and the pods of every guest node KubeVirt asks to evacuate (F9). Pods are listed
/// only for those nodes: a drain needs them, nothing else does.
async fn observe_kubevirt<P: Provider>(
    provider: &P,
    owner: &Ownership,
    now: Timestamp,
) -> Result<Observed, CloudError> {
    let servers = twice(|| provider.list_servers(owner)).await?;
    let vmis = twice(|| provider.list_vmis(owner)).await?;
    let services = twice(|| provider.list_endpoint_services(owner)).await?;
    let nodes = if servers.is_empty() {
        None
    } else {
        workload_nodes(provider, owner).await?
    };
    let mut pods = std::collections::BTreeMap::new();
    if let Some(nodes) = &nodes {
        for vmi in vmis.iter().filter(|v| evacuation_requested(v)) {
            // The guest node by identity, and (only so that the upstream policy can be
            // shown wrong) the node named like the infra node, if there is one.
            let by_identity = guest_node_of(nodes, &vmi.name).map(|n| n.name.clone());
            let by_infra_name = vmi
                .evacuation_node
                .as_ref()
                .filter(|n| nodes.iter().any(|x| &x.name == *n))
                .cloned();
            for node in by_identity.into_iter().chain(by_infra_name) {
                if pods.contains_key(&node) {
                    continue;
                }
                match twice(|| provider.list_pods_on(owner, &node)).await {
                    Ok(Some(list)) => {
                        pods.insert(node, list);
                    }
                    Ok(None) => {}
                    Err(e) if e.class == ErrorClass::Transient => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(Observed {
        at: now,
        servers,
        nodes,
        vmis,
        pods,
        services,
        ..Observed::default()
    })
}

/// Lists the pods of every node a removal drains ([`nodes_to_drain`]) that the
/// observation has not listed yet. A node whose pods cannot be listed is left out: its
/// drain waits, and the machine goes at the drain's deadline.
pub async fn pods_of_leaving<P: Provider>(
    provider: &P,
    owner: &Ownership,
    observed: &mut Observed,
    memory: &flightdeck_plan::Memory,
) {
    for node in nodes_to_drain(memory, observed) {
        if observed.pods.contains_key(&node) {
            continue;
        }
        match twice(|| provider.list_pods_on(owner, &node)).await {
            Ok(Some(list)) => {
                observed.pods.insert(node, list);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(cluster = %owner.cluster, node, error = %e.message, "pods of a node being drained could not be listed");
            }
        }
    }
}

/// The most servers of NotReady nodes read one by one in one observation.
pub const NODE_READS_MAX: usize = 4;

/// Reads, one by one, the server (or VM) of each NotReady node whose machine no list
/// shows (at most [`NODE_READS_MAX`]): a Node whose machine is confirmed gone is deleted
/// even when flightdeck's memory never knew the machine (a store restored from a backup
/// older than its removal). The answers join [`Observed::direct_reads`].
async fn read_nodes_machines<P: Provider>(provider: &P, observed: &mut Observed) {
    let Some(nodes) = &observed.nodes else {
        return;
    };
    let unlisted: Vec<String> = nodes
        .iter()
        .filter(|n| !n.ready)
        .filter_map(|n| n.server_id.clone())
        .filter(|id| !observed.servers.iter().any(|s| &s.id == id))
        .filter(|id| !observed.direct_reads.contains_key(id))
        .take(NODE_READS_MAX)
        .collect();
    for id in unlisted {
        match twice(|| provider.server_gone(&id)).await {
            Ok(gone) => {
                observed.direct_reads.insert(id, gone);
            }
            Err(e) => {
                tracing::debug!(server = %id, error = %e, "a direct read of a node's server failed")
            }
        }
    }
}

/// The most next hops asked about in one observation: a router shared with clusters
/// whose pod networks overlap this one's could otherwise cost a call per route.
pub const DEAD_HOPS_ASKED_MAX: usize = 8;

/// Next hops of routes into `pod` that no server of the cluster has, which no Neutron
/// port holds either (see [`Observed::dead_hops`]). A route whose machine is gone and
/// which flightdeck's memory does not know (a store restored from a backup older than
/// the route) is found this way. A failed ask proves nothing dead.
async fn dead_hops<P: Provider>(
    provider: &P,
    observed: &Observed,
    pod: flightdeck_spec::Cidr,
) -> std::collections::BTreeSet<std::net::IpAddr> {
    let Some(router) = &observed.router else {
        return Default::default();
    };
    let ours: std::collections::BTreeSet<_> =
        observed.servers.iter().filter_map(|s| s.address).collect();
    let unknown: std::collections::BTreeSet<std::net::IpAddr> = router
        .routes
        .iter()
        .filter(|r| {
            r.destination
                .parse::<flightdeck_spec::Cidr>()
                .is_ok_and(|c| pod.covers(&c))
        })
        .map(|r| r.nexthop)
        .filter(|hop| !ours.contains(hop))
        .take(DEAD_HOPS_ASKED_MAX)
        .collect();
    if unknown.is_empty() {
        return unknown;
    }
    let asked: Vec<std::net::IpAddr> = unknown.iter().copied().collect();
    match twice(|| provider.addresses_in_use(&asked)).await {
        Ok(held) => unknown.into_iter().filter(|h| !held.contains(h)).collect(),
        Err(_) => Default::default(),
    }
}

/// Lists every owned object of an OpenStack cluster. Members are listed per pool
/// (Octavia has no cross-pool member list), and only for the cluster's own API pool.
pub async fn observe<P: Provider>(
    provider: &P,
    owner: &Ownership,
    now: Timestamp,
    router: Option<&str>,
) -> Result<Observed, CloudError> {
    observe_reusing(provider, owner, now, router, Reuse::NONE).await
}

/// The lists a reconcile may take from the observation before instead of the cloud
/// (see `reuse.rs`).
#[derive(Clone, Copy)]
pub struct Reuse<'a> {
    pub(crate) from: Option<&'a Observed>,
    pub(crate) kinds: Kinds,
    /// The cluster has never been Ready: its workload cluster is asked for its nodes only
    /// once a member of its API pool serves (until then the load balancer has nothing to
    /// forward to and every node list answers 503).
    pub(crate) building: bool,
}

impl<'a> Reuse<'a> {
    /// Every list from the cloud.
    pub const NONE: Reuse<'static> = Reuse {
        from: None,
        kinds: Kinds::NONE,
        building: false,
    };

    /// The observation to take kind `k` from, if it may be.
    pub(crate) fn take(&self, k: Kind) -> Option<&'a Observed> {
        self.from.filter(|_| self.kinds.has(k))
    }
}

/// [`observe`], taking again the lists `reuse` allows.
async fn observe_reusing<P: Provider>(
    provider: &P,
    owner: &Ownership,
    now: Timestamp,
    router: Option<&str>,
    reuse: Reuse<'_>,
) -> Result<Observed, CloudError> {
    let servers = match reuse.take(Kind::Servers) {
        Some(o) => o.servers.clone(),
        None => twice(|| provider.list_servers(owner)).await?,
    };
    let security_groups = match reuse.take(Kind::SecurityGroups) {
        Some(o) => o.security_groups.clone(),
        None => twice(|| provider.list_security_groups(owner)).await?,
    };
    let load_balancers = match reuse.take(Kind::LoadBalancers) {
        Some(o) => o.load_balancers.clone(),
        None => twice(|| provider.list_load_balancers(owner)).await?,
    };
    let (listeners, pools, health_monitors) = if load_balancers.is_empty() {
        // Children cannot exist without a load balancer: skip three calls.
        (Vec::new(), Vec::new(), Vec::new())
    } else {
        (
            match reuse.take(Kind::Listeners) {
                Some(o) => o.listeners.clone(),
                None => twice(|| provider.list_listeners(owner)).await?,
            },
            match reuse.take(Kind::Pools) {
                Some(o) => o.pools.clone(),
                None => twice(|| provider.list_pools(owner)).await?,
            },
            match reuse.take(Kind::HealthMonitors) {
                Some(o) => o.health_monitors.clone(),
                None => twice(|| provider.list_health_monitors(owner)).await?,
            },
        )
    };
    let members = match reuse.take(Kind::Members) {
        Some(o) => o.members.clone(),
        None => {
            let mut members = Vec::new();
            for pool in pools
                .iter()
                .filter(|p| role_of(&p.tags) == Some(Role::ApiPool) && owner.owns(&p.tags))
            {
                members.extend(twice(|| provider.list_members(&pool.id)).await?);
            }
            members
        }
    };
    let nodes = if members.is_empty() || (reuse.building && !members.iter().any(serves)) {
        // No member, no API endpoint: the workload cluster cannot be reached. During a
        // build the same holds until a member serves.
        None
    } else {
        workload_nodes(provider, owner).await?
    };
    let router = match (router, reuse.take(Kind::Router)) {
        (None, _) => None,
        (Some(_), Some(o)) => o.router.clone(),
        (Some(name), None) => match twice(|| provider.find_router(name)).await {
            Ok(r) => Some(r),
            // The planner says so with a condition; nothing else stops.
            Err(e) if e.class == ErrorClass::NotFound => None,
            Err(e) => return Err(e),
        },
    };
    Ok(Observed {
        at: now,
        router,
        after_write: 0,
        servers,
        security_groups,
        load_balancers,
        listeners,
        pools,
        health_monitors,
        members,
        nodes,
        ..Observed::default()
    })
}

/// A list that shows none of the servers flightdeck recorded may have lost them all (a
/// broken filter, a lagging cache), or they may all be gone (deleted behind flightdeck's
/// back, or while a store restored from a backup did not know it). The planner concludes
/// nothing from such a list unless the servers, read one by one, say they are gone: up
/// to [`DIRECT_READS_MAX`] are read, in ID order. A read that fails is left out: it
/// confirms nothing, and the list stays suspect.
async fn read_missing<P: Provider>(
    provider: &P,
    listed: &[flightdeck_cloud::Server],
    recorded: &[String],
) -> BTreeMap<String, bool> {
    let mut reads = BTreeMap::new();
    if recorded.len() < 2 || listed.iter().any(|s| recorded.contains(&s.id)) {
        return reads;
    }
    let mut ids: Vec<&String> = recorded.iter().collect();
    ids.sort();
    ids.dedup();
    for id in ids.into_iter().take(DIRECT_READS_MAX) {
        match twice(|| provider.server_gone(id)).await {
            Ok(gone) => {
                reads.insert(id.clone(), gone);
            }
            Err(e) => tracing::debug!(server = %id, error = %e, "a direct read of a server failed"),
        }
    }
    reads
}

/// Drops from an OpenStack observation every object without `owner`'s UID tag.
fn keep_owned(o: &mut Observed, owner: &Ownership, scope: crate::config::OwnershipScope) {
    let owns = |tags: &[String]| scope.keeps(owner, tags);
    o.servers.retain(|x| owns(&x.tags));
    o.security_groups.retain(|x| owns(&x.tags));
    o.load_balancers.retain(|x| owns(&x.tags));
    o.listeners.retain(|x| owns(&x.tags));
    o.pools.retain(|x| owns(&x.tags));
    o.health_monitors.retain(|x| owns(&x.tags));
    o.members.retain(|x| owns(&x.tags));
}

/// The workload cluster's nodes. Its API failing is not the cloud failing: it only means
/// nothing is known about nodes, which the planner treats as "not Ready".
async fn workload_nodes<P: Provider>(
    provider: &P,
    owner: &Ownership,
) -> Result<Option<Vec<flightdeck_cloud::Node>>, CloudError> {
    match twice(|| provider.list_nodes(owner)).await {
        Ok(nodes) => Ok(nodes),
        Err(e) if e.class == ErrorClass::Transient => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether Octavia says `m` takes traffic: ACTIVE, and ONLINE or NO_MONITOR (the
/// amphora forwards to a member no monitor checks).
fn serves(m: &Member) -> bool {
    m.provisioning_status == ProvisioningStatus::Active
        && matches!(
            m.operating_status,
            OperatingStatus::Online | OperatingStatus::NoMonitor
        )
}

/// A list call, tried a second time at once if the first answer was a transient error:
/// one 503 should not cost a whole reconcile and its backoff. Never more than twice.
async fn twice<T, F, Fut>(call: F) -> Result<T, CloudError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, CloudError>>,
{
    match call().await {
        Err(e) if e.class == ErrorClass::Transient => call().await,
        other => other,
    }
}
