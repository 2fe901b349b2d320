//! F7 and F8: the router's routes to the nodes' pod networks.
//!
//! A route belongs to the cluster when its destination lies in the cluster's pod network
//! *and* its next hop is one of the cluster's machines, or flightdeck added it (memory
//! records the routes it added), or no Neutron port holds its next hop (a dead hop: its
//! machine is gone, and the route can only black-hole traffic into the cluster's pod
//! network; a store restored from a backup older than the route does not know it); a pod
//! CIDR alone proves nothing on a router other clusters share. One more route is the cluster's to judge: one to a pod network a
//! live node of the cluster holds now, via any other next hop, since it hijacks that
//! node's traffic (pod networks are recycled at once: the ASR story of seed 002).
//!
//! A route of the cluster is stale when its next hop is no live machine, or when no node
//! of the cluster holds its destination. A machine being removed keeps its route while
//! its node lives, that is until the pass that deletes its server. Stale routes are removed before any route is added. The router's
//! limit is the one it answered with (Neutron `max_routes`); until it has answered
//! with one, none is assumed, and `RouteLimitReached` names a learned limit instead of a
//! stream of failing calls.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use flightdeck_cloud::Route;
use flightdeck_spec::{Cidr, Duration};

use crate::Planner;
use crate::action::Action;
use crate::condition::{Condition, kind};
use crate::machines::{MachineView, ServerPhase};

/// How long a limit a router answered with is trusted before it is tried again.
pub const LEARNED_LIMIT_TTL: Duration = Duration::from_mins(30);

pub(crate) fn plan_routes(p: &mut Planner<'_>, all: &[MachineView<'_>], blind: Option<&str>) {
    let Some(router_name) = p
        .spec
        .spec
        .provider
        .openstack
        .as_ref()
        .and_then(|o| o.router.clone())
    else {
        return;
    };
    if !p.spec.spec.flight.repairs.routes {
        return;
    }
    let Some(router) = p.observed.router.clone() else {
        p.condition(Condition::new(
            kind::ROUTER_NOT_FOUND,
            true,
            "RouterNotFound",
            format!("router {router_name} named in spec.provider.openstack.router cannot be found"),
        ));
        return;
    };
    if p.servers_suspect {
        return;
    }
    let pod: Cidr = p.spec.spec.network.pod_cidr;
    // Machines whose server this pass deletes: their nodes go with them, and so do their
    // routes, now rather than at the next pass.
    let deleted_now: std::collections::BTreeSet<String> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::DeleteServer { machine, .. } => Some(machine.clone()),
            _ => None,
        })
        .collect();
    // Addresses of the cluster's live machines.
    let live: BTreeMap<IpAddr, &str> = all
        .iter()
        .filter(|m| !deleted_now.contains(m.name()))
        .filter(|m| {
            matches!(
                m.server_phase(),
                ServerPhase::Running | ServerPhase::Building | ServerPhase::Failed
            )
        })
        .filter_map(|m| Some((m.server?.address?, m.name())))
        .collect();
    // Where each pod network should go, as the (trusted) node list says. A machine being
    // removed keeps its route while its node lives: it still runs pods.
    let trusted = blind.is_none();
    let mut desired: BTreeMap<String, (IpAddr, &str)> = BTreeMap::new();
    if trusted {
        for m in all.iter().filter(|m| !deleted_now.contains(m.name())) {
            let (Some(node), Some(server)) = (m.node, m.server) else {
                continue;
            };
            let (Some(cidr), Some(address)) = (node.pod_cidr.clone(), server.address) else {
                continue;
            };
            let inside = cidr.parse::<Cidr>().is_ok_and(|c| pod.covers(&c));
            if inside && m.server_phase() == ServerPhase::Running {
                desired.insert(cidr, (address, m.name()));
            }
        }
    }
    let hops = cluster_hops(p, all);
    let (stale, why) = stale_routes(
        p,
        &router.routes,
        pod,
        (&live, &hops),
        trusted.then_some(&desired),
    );
    if !stale.is_empty() {
        // The record keeps a route until the router no longer lists it: a removal that
        // never reached the cloud (a crash after the write-ahead) is tried again.
        p.act(
            Action::RemoveRoutes {
                router_id: router.id.clone(),
                routes: stale.clone(),
                pod_cidr: pod.to_string(),
            },
            format!("stale routes hijack pod traffic: {}", why.join("; ")),
        );
    }
    // What the record holds of routes no longer on the router (and not about to be
    // added) is forgotten.
    p.memory.routes.retain(|r| {
        router.routes.contains(r)
            || desired
                .get(&r.destination)
                .is_some_and(|d| d.0 == r.nexthop)
    });
    // A route into the pod network via one of the cluster's servers is the cluster's,
    // whoever added it: it is remembered, so that it goes with its machine even when the
    // record of adding it was lost (a store restored from a backup), and a removal that
    // does not reach the router is tried again once the server is gone.
    for r in &router.routes {
        let inside = r.destination.parse::<Cidr>().is_ok_and(|c| pod.covers(&c));
        if inside && hops.contains(&r.nexthop) {
            p.memory.routes.insert(r.clone());
        }
    }
    let wanted: Vec<Route> = desired
        .iter()
        .map(|(destination, (nexthop, _))| Route {
            destination: destination.clone(),
            nexthop: *nexthop,
        })
        .collect();
    let mut missing = Vec::new();
    for r in wanted {
        let what = route_object(&r);
        if router.routes.contains(&r) {
            crate::churn::seen(p, &what);
        } else if crate::churn::may_make(p, &what) {
            missing.push(r);
        } else {
            crate::churn::report(p);
        }
    }
    if missing.is_empty() {
        return;
    }
    let learned = p
        .memory
        .route_limit
        .filter(|(_, at)| p.now.since(*at) < LEARNED_LIMIT_TTL)
        .map(|(limit, _)| limit);
    if learned.is_none() {
        p.memory.route_limit = None;
    }
    let after_cleanup = router.routes.len() - stale.len();
    // No limit is assumed before the router answers with one (F8).
    let room = learned.map_or(usize::MAX, |limit| limit.saturating_sub(after_cleanup));
    let limit = learned.unwrap_or(usize::MAX);
    let (fits, over) = missing.split_at(room.min(missing.len()));
    if !over.is_empty() {
        p.condition(Condition::new(
            kind::ROUTE_LIMIT_REACHED,
            true,
            "RouterFull",
            format!(
                "router {router_name} holds {after_cleanup} route(s) after removing stale ones and takes at most {limit} \
                 (Neutron max_routes); {} pod network route(s) cannot be added: {}",
                over.len(),
                over.iter().map(|r| format!("{} via {}", r.destination, r.nexthop)).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    if !fits.is_empty() {
        for r in fits {
            crate::churn::making(p, &route_object(r));
        }
        p.memory.routes.extend(fits.iter().cloned());
        let names: Vec<String> = fits
            .iter()
            .filter_map(|r| {
                desired
                    .get(&r.destination)
                    .map(|(_, n)| format!("{n} ({})", r.destination))
            })
            .collect();
        p.act(
            Action::AddRoutes {
                router_id: router.id.clone(),
                routes: fits.to_vec(),
                pod_cidr: pod.to_string(),
            },
            format!("pod traffic must reach {}", names.join(", ")),
        );
    }
}

/// The addresses of the cluster's servers in this pass, whatever their state: the live
/// ones, one whose server this pass deletes, one being deleted, and a server no machine
/// records (a duplicate). A route into the pod network via one of them is the cluster's,
/// even when memory never recorded it (F7: a store restored from a backup adopts a
/// machine and removes it in the same pass).
fn cluster_hops(p: &Planner<'_>, all: &[MachineView<'_>]) -> BTreeSet<IpAddr> {
    let uid = p.memory.uid.as_str();
    let untracked = p
        .observed
        .servers
        .iter()
        .filter(|s| flightdeck_cloud::ownership::uid_of(&s.tags) == Some(uid));
    all.iter()
        .filter_map(|m| m.server)
        .chain(untracked)
        .filter_map(|s| s.address)
        .collect()
}

/// What the churn breaker calls a route.
fn route_object(r: &Route) -> String {
    format!("the route to {} via {}", r.destination, r.nexthop)
}

/// The routes of the router that are the cluster's and stale, with why: see the module
/// documentation for which routes are the cluster's. `desired` is where each pod network
/// of a live node should go (`None` while the node list cannot be trusted).
fn stale_routes(
    p: &Planner<'_>,
    routes: &[Route],
    pod: Cidr,
    (live, hops): (&BTreeMap<IpAddr, &str>, &BTreeSet<IpAddr>),
    desired: Option<&BTreeMap<String, (IpAddr, &str)>>,
) -> (Vec<Route>, Vec<String>) {
    let recorded_hops: std::collections::BTreeSet<IpAddr> =
        p.memory.routes.iter().map(|r| r.nexthop).collect();
    let mut stale = Vec::new();
    let mut why = Vec::new();
    for r in routes {
        if !r.destination.parse::<Cidr>().is_ok_and(|c| pod.covers(&c)) {
            continue;
        }
        let holder = desired.and_then(|d| d.get(&r.destination));
        let dead = p.observed.dead_hops.contains(&r.nexthop);
        let ours = live.contains_key(&r.nexthop)
            || hops.contains(&r.nexthop)
            || p.memory.routes.contains(r)
            || recorded_hops.contains(&r.nexthop)
            || dead;
        let verdict = match holder {
            Some((address, _)) if *address == r.nexthop => None,
            Some((_, owner)) => Some(format!("that pod network belongs to {owner} now")),
            None if !ours => None,
            None if dead => Some("no port holds that address".into()),
            None if !live.contains_key(&r.nexthop) => {
                Some("no live machine has that address".into())
            }
            None if desired.is_some() => Some("no node owns that pod network".into()),
            None => None,
        };
        if let Some(v) = verdict {
            why.push(format!("{} via {}: {v}", r.destination, r.nexthop));
            stale.push(r.clone());
        }
    }
    (stale, why)
}
