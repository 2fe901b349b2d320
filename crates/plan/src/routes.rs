//! F7 and F8: the router's routes to the nodes' pod networks.
//!
//! A route whose destination lies in the cluster's pod network belongs to the cluster.
//! It is stale when its next hop is no live machine of the cluster, or when another node
//! now owns its destination (pod networks are recycled at once, so an old route can
//! hijack a new node's traffic: the ASR story of seed 002). Stale routes are removed
//! before any route is added, and when the router's limit (Neutron `max_routes`, 30 by
//! default) would still be exceeded, `RouteLimitReached` names the limit instead of a
//! stream of failing calls.

use std::collections::BTreeMap;
use std::net::IpAddr;

use flightdeck_cloud::Route;
use flightdeck_spec::{Cidr, Duration};

use crate::Planner;
use crate::action::Action;
use crate::condition::{Condition, kind};
use crate::machines::{MachineView, ServerPhase};

/// Neutron's default `max_routes`.
pub const ROUTES_MAX_DEFAULT: usize = 30;
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
    // Addresses of the cluster's live machines.
    let live: BTreeMap<IpAddr, &str> = all
        .iter()
        .filter(|m| {
            matches!(
                m.server_phase(),
                ServerPhase::Running | ServerPhase::Building | ServerPhase::Failed
            )
        })
        .filter_map(|m| Some((m.server?.address?, m.name())))
        .collect();
    // Where each pod network should go, as the (trusted) node list says.
    let trusted = blind.is_none();
    let mut desired: BTreeMap<String, (IpAddr, &str)> = BTreeMap::new();
    if trusted {
        for m in all.iter().filter(|m| !m.removing()) {
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
    let mut stale = Vec::new();
    let mut why = Vec::new();
    for r in &router.routes {
        let ours = r.destination.parse::<Cidr>().is_ok_and(|c| pod.covers(&c));
        if !ours {
            continue;
        }
        if !live.contains_key(&r.nexthop) {
            why.push(format!(
                "{} via {}: no live machine has that address",
                r.destination, r.nexthop
            ));
            stale.push(r.clone());
        } else if trusted {
            match desired.get(&r.destination) {
                Some((address, _)) if *address == r.nexthop => {}
                Some((_, owner)) => {
                    why.push(format!(
                        "{} via {}: that pod network belongs to {owner} now",
                        r.destination, r.nexthop
                    ));
                    stale.push(r.clone());
                }
                None => {
                    why.push(format!(
                        "{} via {}: no node owns that pod network",
                        r.destination, r.nexthop
                    ));
                    stale.push(r.clone());
                }
            }
        }
    }
    if !stale.is_empty() {
        p.act(
            Action::RemoveRoutes {
                router_id: router.id.clone(),
                routes: stale.clone(),
                pod_cidr: pod.to_string(),
            },
            format!("stale routes hijack pod traffic: {}", why.join("; ")),
        );
    }
    let missing: Vec<Route> = desired
        .iter()
        .map(|(destination, (nexthop, _))| Route {
            destination: destination.clone(),
            nexthop: *nexthop,
        })
        .filter(|r| !router.routes.contains(r))
        .collect();
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
    let limit = learned
        .unwrap_or(ROUTES_MAX_DEFAULT)
        .min(ROUTES_MAX_DEFAULT);
    let after_cleanup = router.routes.len() - stale.len();
    let room = limit.saturating_sub(after_cleanup);
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
