//! Routers: finding them, their extra routes, the route limit, and whose routes a
//! route call touches.

use crate::common;

use common::*;
use flightdeck_cloud::{ErrorClass, Network, Role};
use flightdeck_sim::{MutationKind, Route, SimConfig};

fn route(n: u32) -> Route {
    Route {
        destination: format!("10.244.{n}.0/24"),
        nexthop: format!("10.0.0.{}", n + 2).parse().expect("ip"),
    }
}

fn to(destination: &str, nexthop: &str) -> Route {
    Route {
        destination: destination.into(),
        nexthop: nexthop.parse().expect("ip"),
    }
}

#[test]
fn find_router_matches_an_id_or_a_name_among_all_routers() {
    let sim = sim(1);
    let edge = sim.add_foreign_router("edge");
    let mine = sim
        .create_router("mine", &owner("u1").tags(&Role::SecurityGroup))
        .expect("router");
    let found = ready(sim.find_router("edge")).expect("by name");
    assert_eq!((found.id.as_str(), found.tags.len()), (edge.as_str(), 0));
    assert_eq!(ready(sim.find_router(&edge)).expect("by id").name, "edge");
    assert_eq!(ready(sim.find_router("mine")).expect("owned too"), mine);

    let err = ready(sim.find_router("nope")).expect_err("404");
    assert_eq!((err.class, err.status), (ErrorClass::NotFound, Some(404)));
    assert_eq!(err.message, "Router nope could not be found.");

    sim.add_foreign_router("twin");
    let twin = sim.add_foreign_router("twin");
    let err = ready(sim.find_router("twin")).expect_err("ambiguous");
    assert_eq!((err.class, err.status), (ErrorClass::Permanent, Some(409)));
    assert_eq!(err.message, "Multiple routers match twin");
    ready(sim.find_router(&twin)).expect("an id is never ambiguous");

    assert_eq!(sim.api_calls()["neutron"]["GET /v2.0/routers"], 6);
    assert_eq!(
        sim.mutations().len(),
        1,
        "only the create; finding changes nothing"
    );
}

#[test]
fn route_limit_defaults_to_thirty_and_answers_routes_exhausted() {
    let sim = sim(5);
    let router = sim.add_foreign_router("r");
    let thirty: Vec<Route> = (0..30).map(route).collect();
    let r = ready(sim.add_extra_routes(&router, &thirty)).expect("30 fit");
    assert_eq!(r.routes.len(), 30);
    let r = ready(sim.add_extra_routes(&router, &thirty[..3]))
        .expect("adding existing routes is a no-op");
    assert_eq!(r.routes, thirty);

    let err = ready(sim.add_extra_routes(&router, &[route(30)])).expect_err("31st");
    assert_eq!((err.class, err.status), (ErrorClass::Permanent, Some(400)));
    assert_eq!(
        err.message,
        format!(
            "Unable to complete operation for {router}. The number of routes exceeds the maximum 30."
        )
    );
    assert_eq!(
        sim.snapshot().routers[0].routes,
        thirty,
        "nothing was added"
    );

    let r = ready(sim.remove_extra_routes(&router, &thirty[..1])).expect("remove");
    assert_eq!(r.routes.len(), 29);
    let r = ready(sim.remove_extra_routes(&router, &thirty[..1])).expect("absent: no-op");
    assert_eq!(r.routes.len(), 29);
    ready(sim.add_extra_routes(&router, &[route(30)])).expect("room again");

    let err = ready(sim.add_extra_routes("nope", &[route(1)])).expect_err("404");
    assert_eq!(err.class, ErrorClass::NotFound);
    let err = ready(sim.add_extra_routes(&router, &[to("banana", "10.0.0.9")])).expect_err("400");
    assert_eq!((err.class, err.status), (ErrorClass::Permanent, Some(400)));

    let calls = sim.api_calls();
    let neutron = &calls["neutron"];
    assert_eq!(neutron["PUT /v2.0/routers/{router_id}/add_extraroutes"], 6);
    assert_eq!(
        neutron["PUT /v2.0/routers/{router_id}/remove_extraroutes"],
        2
    );
}

#[test]
fn route_limit_follows_max_routes() {
    let config = SimConfig {
        max_routes: 2,
        ..SimConfig::default()
    };
    let sim = sim_with(config, 6);
    let router = sim.add_foreign_router("r");
    let err = ready(sim.add_extra_routes(&router, &[route(0), route(1), route(2)]))
        .expect_err("three routes");
    assert!(err.message.ends_with("exceeds the maximum 2."), "{err}");
    ready(sim.add_extra_routes(&router, &[route(0), route(1)])).expect("two fit");
}

#[test]
fn route_calls_are_logged_as_the_pod_network_owners_changes() {
    let sim = sim(7);
    let router = sim.add_foreign_router("edge");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    sim.set_pod_network("beta", "ub", "10.245.0.0/16".parse().expect("cidr"));
    let alpha = [
        to("10.244.3.0/24", "10.0.0.5"),
        to("10.244.4.0/24", "10.0.0.6"),
    ];
    ready(sim.add_extra_routes(&router, &alpha)).expect("add");
    ready(sim.remove_extra_routes(&router, &alpha[..1])).expect("remove");
    ready(sim.add_extra_routes(&router, &[to("192.168.1.0/24", "10.0.0.7")])).expect("add");
    ready(sim.remove_extra_routes(
        &router,
        &[alpha[1].clone(), to("10.245.1.0/24", "10.0.0.8")],
    ))
    .expect("remove");
    let _ = ready(sim.add_extra_routes("nope", &alpha[..1]));

    let m = sim.mutations();
    assert_eq!(m.len(), 5);
    let alpha_tags = vec![
        "flightdeck-cluster=alpha".to_string(),
        "flightdeck-uid=ua".to_string(),
        "flightdeck-role=routes".to_string(),
    ];
    for (i, op) in [(0, "add_extraroutes"), (1, "remove_extraroutes")] {
        assert_eq!(m[i].service, "neutron");
        assert_eq!(
            m[i].operation,
            format!("PUT /v2.0/routers/{{router_id}}/{op}")
        );
        assert_eq!(
            (m[i].kind, m[i].target_id.as_str()),
            (MutationKind::Update, router.as_str())
        );
        assert_eq!(
            m[i].target_tags, alpha_tags,
            "routes to alpha's pods are alpha's"
        );
        assert!(m[i].ok);
    }
    assert!(
        m[2].target_tags.is_empty(),
        "a route to no pod network is the (untagged) router's"
    );
    assert!(
        m[3].target_tags.is_empty(),
        "routes of two clusters in one call are the router's"
    );
    assert_eq!((m[4].ok, m[4].target_tags.clone()), (false, alpha_tags));
}
