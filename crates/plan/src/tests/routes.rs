//! F7 and F8: which routes on a shared router are the cluster's, the router's limit, and
//! routes at deletion (F12).

use flightdeck_cloud::{Route, Router};

use super::*;

const ROUTER: &str = "router-1";

/// The cluster with `workers` Ready workers, each node holding 10.244.<n>.0/24, on the
/// router `edge` with no routes yet.
fn routed(workers: u64) -> World {
    let mut w = World::cluster(spec(V1, u32::try_from(workers).expect("few")), V1, workers);
    if let Some(o) = w.spec.spec.provider.openstack.as_mut() {
        o.router = Some(flightdeck_spec::Text::new("edge").expect("name"));
    }
    for n in w.observed.nodes.iter_mut().flatten() {
        let k: u64 = n
            .name
            .rsplit('-')
            .next()
            .and_then(|k| k.parse().ok())
            .expect("numbered");
        n.pod_cidr = Some(format!("10.244.{k}.0/24"));
    }
    w.observed.router = Some(Router {
        id: ROUTER.into(),
        name: "edge".into(),
        tags: vec![],
        routes: vec![],
    });
    w
}

fn route(dest: &str, hop: [u8; 4]) -> Route {
    Route {
        destination: dest.into(),
        nexthop: IpAddr::V4(Ipv4Addr::from(hop)),
    }
}

fn added(p: &Plan) -> Vec<Route> {
    p.actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::AddRoutes { routes, .. } => Some(routes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn removed(p: &Plan) -> Vec<Route> {
    p.actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::RemoveRoutes { routes, .. } => Some(routes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn f8_a_router_that_never_answered_with_a_limit_takes_every_nodes_route() {
    let w = routed(40);
    let p = w.plan();
    assert_eq!(added(&p).len(), 43, "3 control-plane and 40 worker nodes");
    assert!(condition(&p, "RouteLimitReached").is_none());
    assert_eq!(p.memory.routes.len(), 43, "the added routes are recorded");
}

#[test]
fn f8_stale_routes_go_first_when_the_router_is_full() {
    let mut w = routed(4);
    // The router answered with a limit of 6; it holds 6 routes: 4 right, 2 of the cluster
    // via machines long gone (recorded), and the two newest nodes have none yet.
    w.memory.route_limit = Some((6, T0));
    let right: Vec<Route> = (1..=4)
        .map(|k| {
            route(
                &format!("10.244.{k}.0/24"),
                [10, 0, 0, u8::try_from(k).expect("k")],
            )
        })
        .collect();
    let gone = [
        route("10.244.90.0/24", [10, 0, 0, 90]),
        route("10.244.91.0/24", [10, 0, 0, 91]),
    ];
    let router = w.observed.router.as_mut().expect("router");
    router.routes = right.iter().chain(&gone).cloned().collect();
    w.memory.routes = router.routes.iter().cloned().collect();
    let p = w.plan();
    assert_eq!(removed(&p), gone.to_vec(), "the stale ones go");
    let first_remove = p
        .actions
        .iter()
        .position(|a| matches!(a.action, Action::RemoveRoutes { .. }));
    let first_add = p
        .actions
        .iter()
        .position(|a| matches!(a.action, Action::AddRoutes { .. }));
    assert!(first_remove < first_add, "removed before anything is added");
    assert_eq!(added(&p).len(), 2, "room for two after the cleanup");
    let full = condition(&p, "RouteLimitReached").expect("one route does not fit");
    assert!(full.message.contains("at most 6"), "{}", full.message);
}

#[test]
fn f7_a_route_in_an_overlapping_pod_network_via_another_clusters_machine_is_left_alone() {
    let mut w = routed(2);
    let theirs = route("10.244.200.0/24", [10, 9, 9, 9]);
    w.observed
        .router
        .as_mut()
        .expect("router")
        .routes
        .push(theirs.clone());
    let p = w.plan();
    assert!(!removed(&p).contains(&theirs), "{:#?}", p.actions);
    // But one that hijacks a network a live node of the cluster holds is removed.
    let hijack = route("10.244.4.0/24", [10, 9, 9, 9]);
    w.observed
        .router
        .as_mut()
        .expect("router")
        .routes
        .push(hijack.clone());
    let p = w.plan();
    assert_eq!(removed(&p), vec![hijack]);
}

/// A store restored from a backup older than the route knows nothing of it, and its
/// next hop is no server's now: only Neutron's ports can tell a dead hop from another
/// cluster's machine.
#[test]
fn f7_a_route_in_the_pod_network_via_an_address_no_port_holds_is_removed() {
    let mut w = routed(2);
    let unknown = route("10.244.200.0/24", [10, 9, 9, 9]);
    w.observed
        .router
        .as_mut()
        .expect("router")
        .routes
        .push(unknown.clone());
    // While a port holds the address, the route may be another cluster's.
    let p = w.plan();
    assert!(!removed(&p).contains(&unknown), "{:#?}", p.actions);
    w.observed.dead_hops.insert(unknown.nexthop);
    let p = w.plan();
    assert_eq!(removed(&p), vec![unknown]);
}

#[test]
fn f7_a_machine_being_removed_keeps_its_route_while_its_node_lives() {
    let mut w = routed(3);
    let routes = w.plan().memory.routes;
    w.observed.router.as_mut().expect("router").routes = routes.iter().cloned().collect();
    w.memory.routes = routes;
    // A control-plane machine leaves member first: its server, and node, run on.
    let name = "demo-cp-1".to_string();
    w.mark_removal(&name);
    let p = w.plan();
    assert_eq!(count(&p, "DeleteServer"), 0, "{:#?}", p.actions);
    assert!(removed(&p).is_empty(), "{:#?}", p.actions);
    // Once its node is gone, its route goes.
    w.observed
        .nodes
        .as_mut()
        .expect("nodes")
        .retain(|n| n.name != name);
    let p = w.plan();
    assert_eq!(removed(&p), vec![route("10.244.1.0/24", [10, 0, 0, 1])]);
}

#[test]
fn f7_the_pass_that_deletes_a_workers_server_removes_its_route() {
    let mut w = routed(3);
    let routes = w.plan().memory.routes;
    w.observed.router.as_mut().expect("router").routes = routes.iter().cloned().collect();
    w.memory.routes = routes;
    // A worker has no member: its server is deleted as its removal starts.
    w.mark_removal("demo-workers-5");
    let p = w.plan();
    assert_eq!(targets(&p, "DeleteServer"), ["demo-workers-5"]);
    assert_eq!(removed(&p), vec![route("10.244.5.0/24", [10, 0, 0, 5])]);
}

#[test]
fn f12_deletion_removes_the_clusters_routes_and_confirms_with_a_second_list() {
    let mut w = routed(2);
    let routes = w.plan().memory.routes;
    let theirs = route("10.244.200.0/24", [10, 9, 9, 9]);
    let router = w.observed.router.as_mut().expect("router");
    router.routes = routes.iter().cloned().collect();
    router.routes.push(theirs.clone());
    w.memory.routes = routes.clone();
    w.memory.deletion_requested = Some(T0);
    let p = w.plan();
    let gone = removed(&p);
    assert_eq!(gone.len(), routes.len(), "{gone:#?}");
    assert!(!gone.contains(&theirs), "another cluster's route stays");
    assert!(!p.deleted);

    // Everything is gone, the router keeps only the other route: a first empty list...
    w.memory = p.memory;
    let nodes = w.observed.nodes.clone();
    let mut router = w.observed.router.clone().expect("router");
    router.routes = vec![theirs];
    w.observed = Observed {
        nodes,
        router: Some(router),
        ..Observed::default()
    };
    let p = w.plan();
    assert!(!p.deleted, "one empty list is not proof enough");
    assert!(p.requeue_after.is_some());
    // ... and a second one confirms it.
    w.memory = p.memory;
    w.now = Timestamp(w.now.0 + 10_000);
    let p = w.plan();
    assert!(p.deleted);
}
