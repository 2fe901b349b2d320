//! Neutron routers with their extra routes, and the workload clusters' pod networks that
//! those routes lead to.
//!
//! A cluster's pod network is cut into one /24 per node (Kubernetes' node IPAM): a node
//! gets the lowest free /24 when it registers, and the /24 is free again the moment
//! the node is gone — so the next node can get it at once, which is what makes a route
//! left behind for a dead node dangerous.
//!
//! Routers are not flightdeck's, but the routes to a cluster's pod network are: a route
//! call is logged with the tags of the cluster whose pod network holds the routes.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use flightdeck_cloud::ownership::{TAG_CLUSTER, TAG_ROLE, TAG_UID};
use flightdeck_cloud::{Clock, CloudError, ErrorClass, Ownership, Route, Router, Timestamp};
use flightdeck_spec::Cidr;

use crate::faults::{self, SimFault};
use crate::{MutationKind, Result, SimCloud, State};

pub(crate) const NEUTRON: &str = "neutron";

/// The most routers the cloud holds.
pub const ROUTERS_MAX: usize = 1_000;
/// The most extra routes a router ever holds, faults included (`max_routes` and
/// `neutron.maxRoutes` limit what callers may add; this bounds what faults add).
pub const ROUTES_PER_ROUTER_MAX: usize = 10_000;
/// The most stale routes one `router.staleRoute` fault adds per cluster.
const STALE_ROUTES_PER_FAULT_MAX: usize = 1_000;

/// The prefix of the slice of the pod network each node gets.
const NODE_PREFIX: u8 = 24;

pub(crate) const OP_FIND: &str = "GET /v2.0/routers";
pub(crate) const OP_ADD: &str = "PUT /v2.0/routers/{router_id}/add_extraroutes";
pub(crate) const OP_REMOVE: &str = "PUT /v2.0/routers/{router_id}/remove_extraroutes";

/// One cluster's pod network and the /24s handed out from it.
#[derive(Debug)]
pub(crate) struct PodNetwork {
    uid: String,
    cidr: Cidr,
    /// Network address of each /24 in use → the server whose node holds it.
    assigned: BTreeMap<u32, String>,
}

impl PodNetwork {
    /// The network as `(address, prefix)` if it can be cut into /24s (IPv4, /24 or
    /// shorter).
    fn v4(&self) -> Option<(u32, u8)> {
        match self.cidr.addr() {
            IpAddr::V4(a) if self.cidr.prefix() <= NODE_PREFIX => {
                Some((u32::from(a), self.cidr.prefix()))
            }
            _ => None,
        }
    }

    /// The lowest /24 of the network that no node holds.
    fn lowest_free(&self) -> Option<u32> {
        let (base, prefix) = self.v4()?;
        let blocks = 1u64 << (NODE_PREFIX - prefix);
        // Only `assigned.len() + 1` candidates need looking at.
        (0..blocks)
            .map(|i| base.wrapping_add((i as u32) << (32 - NODE_PREFIX)))
            .find(|b| !self.assigned.contains_key(b))
    }

    /// The tags the routes to this network are logged with.
    fn route_tags(&self, cluster: &str) -> Vec<String> {
        vec![
            format!("{TAG_CLUSTER}{cluster}"),
            format!("{TAG_UID}{}", self.uid),
            format!("{TAG_ROLE}routes"),
        ]
    }
}

fn block(base: u32) -> String {
    format!("{}/{NODE_PREFIX}", Ipv4Addr::from(base))
}

fn error(class: ErrorClass, op: &str, status: u16, message: String) -> CloudError {
    CloudError::new(class, NEUTRON, op, Some(status), message)
}

fn router_not_found(op: &str, id: &str) -> CloudError {
    error(
        ErrorClass::NotFound,
        op,
        404,
        format!("Router {id} could not be found"),
    )
}

/// The cluster name an object's tags declare.
pub(crate) fn cluster_of(tags: &[String]) -> Option<&str> {
    tags.iter().find_map(|t| t.strip_prefix(TAG_CLUSTER))
}

/// Registers (or re-registers) `cluster`'s pod network. Nodes of the cluster that have
/// no slice yet get one now, in registration order, as the node IPAM controller would.
/// Slices already handed out stay where they are.
pub(crate) fn set_pod_network(st: &mut State, cluster: &str, uid: &str, cidr: Cidr) {
    let net = st
        .pod_networks
        .entry(cluster.to_string())
        .or_insert_with(|| PodNetwork {
            uid: uid.to_string(),
            cidr,
            assigned: BTreeMap::new(),
        });
    net.uid = uid.to_string();
    net.cidr = cidr;
    let waiting: Vec<String> = st
        .nodes
        .values()
        .filter(|n| n.node.pod_cidr.is_none() && n.cluster.as_deref() == Some(cluster))
        .filter_map(|n| n.node.server_id.clone())
        .collect();
    for sid in waiting {
        let pod_cidr = assign_pod_cidr(st, cluster, &sid);
        if let Some(n) = st.nodes.get_mut(&sid) {
            n.node.pod_cidr = pod_cidr;
        }
    }
}

/// Hands the node of server `server_id` the lowest free /24 of `cluster`'s pod
/// network; `None` without a registered network or a free /24.
pub(crate) fn assign_pod_cidr(st: &mut State, cluster: &str, server_id: &str) -> Option<String> {
    let net = st.pod_networks.get_mut(cluster)?;
    let base = net.lowest_free()?;
    net.assigned.insert(base, server_id.to_string());
    Some(block(base))
}

/// The node of server `from` now runs on server `to` (a kubelet took it over): its /24
/// goes with it.
pub(crate) fn move_pod_cidr(st: &mut State, from: &str, to: &str) {
    for net in st.pod_networks.values_mut() {
        for sid in net.assigned.values_mut().filter(|sid| *sid == from) {
            *sid = to.to_string();
        }
    }
}

/// The node of server `server_id` is gone: its /24 is free at once.
pub(crate) fn release_pod_cidr(st: &mut State, server_id: &str) {
    for net in st.pod_networks.values_mut() {
        net.assigned.retain(|_, sid| sid != server_id);
    }
}

/// The tags a route call on `router_id` is logged with: those of the cluster whose pod
/// network holds every route's destination, or else (routes of several clusters, or
/// of none) the router's own.
pub(crate) fn route_call_tags(st: &State, router_id: &str, routes: &[Route]) -> Vec<String> {
    let owner_of = |route: &Route| {
        let dest = route.destination.parse::<Cidr>().ok()?;
        st.pod_networks
            .iter()
            .find(|(_, net)| net.cidr.covers(&dest))
    };
    let mut owners = routes.iter().map(owner_of);
    if let Some(Some((cluster, net))) = owners.next()
        && owners.all(|o| o.is_some_and(|(c, _)| c == cluster))
    {
        return net.route_tags(cluster);
    }
    st.routers
        .get(router_id)
        .map(|r| r.tags.clone())
        .unwrap_or_default()
}

pub(crate) fn find_router(st: &State, name_or_id: &str) -> Result<Router> {
    if let Some(r) = st.routers.get(name_or_id) {
        return Ok(r.clone());
    }
    let mut named = st.routers.values().filter(|r| r.name == name_or_id);
    match (named.next(), named.next()) {
        (Some(r), None) => Ok(r.clone()),
        (Some(_), Some(_)) => Err(error(
            ErrorClass::Permanent,
            OP_FIND,
            409,
            format!("Multiple routers match {name_or_id}"),
        )),
        _ => Err(error(
            ErrorClass::NotFound,
            OP_FIND,
            404,
            format!("Router {name_or_id} could not be found."),
        )),
    }
}

/// Neutron's `add_extraroutes`: routes already present are left as they are; if the
/// call would take the router beyond its limit, nothing changes and it answers 400
/// `RoutesExhausted`. A call that adds nothing new always succeeds.
pub(crate) fn add_routes(
    st: &mut State,
    now: Timestamp,
    router_id: &str,
    routes: &[Route],
) -> Result<Router> {
    for r in routes {
        if r.destination.parse::<Cidr>().is_err() {
            return Err(error(
                ErrorClass::Permanent,
                OP_ADD,
                400,
                format!(
                    "Invalid input for routes. Reason: '{}' is not a valid IP subnet.",
                    r.destination
                ),
            ));
        }
    }
    let tags = route_call_tags(st, router_id, routes);
    let limited = faults::route_limit(st, now, &tags);
    let max = limited.unwrap_or(st.config.max_routes);
    let Some(router) = st.routers.get(router_id) else {
        return Err(router_not_found(OP_ADD, router_id));
    };
    let mut wanted = router.routes.clone();
    for r in routes {
        if !wanted.contains(r) {
            wanted.push(r.clone());
        }
    }
    if wanted.len() > router.routes.len() && wanted.len() > max {
        if limited.is_some_and(|m| m < st.config.max_routes) {
            faults::note_route_limit(st, now, &tags);
        }
        // Neutron's type for this answer is RoutesExhausted.
        return Err(error(
            ErrorClass::Permanent,
            OP_ADD,
            400,
            format!(
                "Unable to complete operation for {router_id}. The number of routes exceeds the maximum {max}."
            ),
        ));
    }
    let Some(router) = st.routers.get_mut(router_id) else {
        return Err(router_not_found(OP_ADD, router_id));
    };
    router.routes = wanted;
    Ok(router.clone())
}

/// Neutron's `remove_extraroutes`: routes not present are ignored.
pub(crate) fn remove_routes(st: &mut State, router_id: &str, routes: &[Route]) -> Result<Router> {
    let Some(router) = st.routers.get_mut(router_id) else {
        return Err(router_not_found(OP_REMOVE, router_id));
    };
    router.routes.retain(|r| !routes.contains(r));
    Ok(router.clone())
}

fn new_router(st: &mut State, name: &str, tags: &[String]) -> Router {
    let router = Router {
        id: st.new_id(),
        name: name.into(),
        tags: tags.to_vec(),
        routes: Vec::new(),
    };
    let seq = st.next_seq();
    st.routers.insert(seq, router.id.clone(), router.clone());
    router
}

/// `router.staleRoute` starts: for each targeted cluster with a pod network, `count`
/// routes appear on every router, each to a /24 a live node holds (the network's first
/// /24 if none does; the network itself if it is not cut into /24s), via an address of
/// the subnet nobody holds (the highest free ones). Beyond any route limit.
/// Answers how many routes it added.
pub(crate) fn add_stale_routes(st: &mut State, fault: &SimFault) -> u64 {
    let count = (fault.count.unwrap_or(1) as usize).min(STALE_ROUTES_PER_FAULT_MAX);
    let targets: Vec<(String, Vec<String>)> = st
        .pod_networks
        .iter()
        .filter(|(cluster, _)| {
            fault
                .cluster
                .as_deref()
                .is_none_or(|c| c == cluster.as_str())
        })
        .map(|(cluster, net)| {
            let live: Vec<String> = net
                .assigned
                .iter()
                .filter(|(_, sid)| st.nodes.contains(sid))
                .map(|(b, _)| block(*b))
                .collect();
            let dests = if !live.is_empty() {
                live
            } else if let Some((base, _)) = net.v4() {
                vec![block(base)]
            } else {
                vec![net.cidr.to_string()]
            };
            (cluster.clone(), dests)
        })
        .collect();
    let mut hops = st
        .addresses
        .highest_free(count.saturating_mul(targets.len()))
        .into_iter();
    let mut stale = Vec::new();
    for (_, dests) in &targets {
        for i in 0..count {
            let Some(nexthop) = hops.next() else { break };
            stale.push(Route {
                destination: dests[i % dests.len()].clone(),
                nexthop,
            });
        }
    }
    let mut added = 0;
    for router in st.routers.values_mut() {
        for r in &stale {
            if router.routes.len() < ROUTES_PER_ROUTER_MAX && !router.routes.contains(r) {
                router.routes.push(r.clone());
                added += 1;
            }
        }
    }
    added
}

impl SimCloud {
    /// Registers the pod network of `cluster` (whose UID is `uid`): each node of the
    /// cluster's servers (tagged `flightdeck-cluster=<cluster>`) gets the lowest free
    /// /24 of `cidr` as its `pod_cidr` when it registers, and gives it back when it is
    /// gone. Only IPv4 networks of /24 or shorter are cut; nodes of other networks
    /// (or of clusters without one) get no `pod_cidr`. Calling it again replaces the
    /// network; slices already handed out stay. Not an API call.
    pub fn set_pod_network(&self, cluster: &str, uid: &str, cidr: Cidr) {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.unsettled = true;
        set_pod_network(&mut st, cluster, uid, cidr);
    }

    /// Adds a router that flightdeck did not create (untagged, no routes). Not an API
    /// call.
    pub fn add_foreign_router(&self, name: &str) -> String {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.unsettled = true;
        new_router(&mut st, name, &[]).id
    }

    /// Creates a router (`POST /v2.0/routers`), counted and logged like every call.
    pub fn create_router(&self, name: &str, tags: &[String]) -> Result<Router> {
        const OP: &str = "POST /v2.0/routers";
        self.create(NEUTRON, OP, tags, |st, _| {
            if st.routers.len() >= ROUTERS_MAX {
                return Err(error(
                    ErrorClass::Permanent,
                    OP,
                    409,
                    "Quota exceeded for resources: ['router'].".into(),
                ));
            }
            Ok(new_router(st, name, tags))
        })
    }

    /// The routers tagged with `owner`'s UID.
    pub fn list_routers(&self, owner: &Ownership) -> Result<Vec<Router>> {
        self.read(NEUTRON, OP_FIND, |st, _| {
            Ok(st
                .routers
                .in_group(&owner.uid)
                .filter(|r| owner.owns(&r.tags))
                .cloned()
                .collect())
        })
    }

    pub fn delete_router(&self, id: &str) -> Result<()> {
        const OP: &str = "DELETE /v2.0/routers/{router_id}";
        self.change(NEUTRON, OP, MutationKind::Delete, id, |st, _| {
            st.routers
                .remove(id)
                .map(|_| ())
                .ok_or_else(|| router_not_found(OP, id))
        })
    }
}
