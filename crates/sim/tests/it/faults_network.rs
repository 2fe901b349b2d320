//! Faults of the network: lost rules, servers without their security group, stale
//! routes and a lowered route limit. Faults are the cloud misbehaving: what they change
//! is neither a call nor a mutation.

use crate::common;

use common::*;
use flightdeck_cloud::{
    Compute, ErrorClass, Network, Ownership, Role, SecurityGroupRuleCreate, ServerStatus,
};
use flightdeck_sim::{Route, SimCloud, SimConfig, SimFault};
use flightdeck_spec::FaultKind;

fn rule(group: &str, protocol: &str, prefix: Option<&str>) -> SecurityGroupRuleCreate {
    SecurityGroupRuleCreate {
        security_group_id: group.into(),
        direction: "ingress".into(),
        ethertype: "IPv4".into(),
        protocol: Some(protocol.into()),
        remote_ip_prefix: prefix.map(str::to_string),
    }
}

/// A group of `o` with three pod-network ingress rules and one without a prefix.
fn group_with_rules(sim: &SimCloud, o: &Ownership, name: &str) -> String {
    let sg = ready(sim.create_security_group(name, &o.tags(&Role::SecurityGroup))).expect("sg");
    for proto in ["tcp", "udp", "icmp"] {
        ready(sim.create_security_group_rule(&rule(&sg.id, proto, Some("10.244.0.0/16"))))
            .expect("rule");
    }
    ready(sim.create_security_group_rule(&rule(&sg.id, "tcp", None))).expect("rule");
    sg.id
}

fn rule_ids(sim: &SimCloud, group: &str) -> Vec<String> {
    let w = sim.snapshot();
    let g = w
        .security_groups
        .iter()
        .find(|g| g.id == group)
        .expect("group");
    g.rules.iter().map(|r| r.id.clone()).collect()
}

/// (calls, mutations) so far, to show that a fault added neither.
fn bookkeeping(sim: &SimCloud) -> (String, usize) {
    (format!("{:?}", sim.api_calls()), sim.mutations().len())
}

#[test]
fn rule_lost_fault_removes_prefixed_ingress_rules_of_the_targeted_cluster() {
    let lost = |seed: u64| {
        let sim = sim(seed);
        let alpha = cluster_owner("alpha", "ua");
        let beta = cluster_owner("beta", "ub");
        let a = group_with_rules(&sim, &alpha, "alpha");
        let b = group_with_rules(&sim, &beta, "beta");
        let foreign = sim.add_foreign_security_group("theirs");
        let before = (
            rule_ids(&sim, &a),
            rule_ids(&sim, &b),
            rule_ids(&sim, &foreign),
        );
        let books = bookkeeping(&sim);
        sim.inject(SimFault {
            count: Some(2),
            cluster: Some("alpha".into()),
            ..SimFault::new(FaultKind::RuleLost, now(&sim))
        });
        sim.advance();
        assert_eq!(bookkeeping(&sim), books, "not a call, not a mutation");
        assert_eq!(rule_ids(&sim, &b), before.1, "beta is not targeted");
        assert_eq!(rule_ids(&sim, &foreign), before.2);
        let w = sim.snapshot();
        let g = w.security_groups.iter().find(|g| g.id == a).expect("group");
        assert_eq!(g.rules.len(), 4, "six rules, two lost");
        let prefixed = g.rules.iter().filter(|r| r.remote_ip_prefix.is_some());
        assert_eq!(prefixed.count(), 1, "only prefixed ingress rules go");
        let gone: Vec<String> = before
            .0
            .into_iter()
            .filter(|id| !g.rules.iter().any(|r| &r.id == id))
            .collect();
        gone
    };
    assert_eq!(lost(11), lost(11), "the same seed loses the same rules");
}

#[test]
fn rule_lost_fault_takes_one_rule_by_default_from_any_cluster() {
    let sim = sim(12);
    let a = group_with_rules(&sim, &cluster_owner("alpha", "ua"), "alpha");
    let b = group_with_rules(&sim, &cluster_owner("beta", "ub"), "beta");
    sim.inject(SimFault::new(FaultKind::RuleLost, now(&sim)));
    sim.advance();
    assert_eq!(rule_ids(&sim, &a).len() + rule_ids(&sim, &b).len(), 11);
}

#[test]
fn drop_security_group_fault_strips_count_running_servers_at_its_start() {
    let sim = sim(13);
    let alpha = cluster_owner("alpha", "ua");
    let beta = cluster_owner("beta", "ub");
    ready(sim.create_security_group("alpha", &alpha.tags(&Role::SecurityGroup))).expect("sg");
    ready(sim.create_security_group("beta", &beta.tags(&Role::SecurityGroup))).expect("sg");
    let running: Vec<String> = (0..3)
        .map(|i| ready(sim.create_server(&server_req(&format!("a{i}"), &alpha, &["alpha"]))))
        .chain([ready(sim.create_server(&server_req(
            "b0",
            &beta,
            &["beta"],
        )))])
        .map(|s| s.expect("create").id)
        .collect();
    wait_ms(&sim, 5_000);
    let books = bookkeeping(&sim);
    sim.inject(SimFault {
        count: Some(2),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::DropSecurityGroup, now(&sim))
    });
    let fresh = ready(sim.create_server(&server_req("a9", &alpha, &["alpha"]))).expect("create");
    wait_ms(&sim, 5_000);
    let groups = |id: &str| server(&sim, id).expect("server").security_groups;
    let stripped = running.iter().filter(|id| groups(id).is_empty()).count();
    assert_eq!(stripped, 2, "two of alpha's running servers");
    assert_eq!(
        groups(&running[3]),
        vec!["beta".to_string()],
        "beta untouched"
    );
    assert_eq!(
        groups(&fresh.id),
        vec!["alpha".to_string()],
        "with only a count, new servers are spared"
    );
    assert_eq!(sim.mutations().len(), books.1 + 1, "only the create of a9");
    assert_eq!(sim.api_calls()["nova"]["POST /servers"], 5);
    assert!(!sim.api_calls()["nova"].contains_key("POST /servers/{server_id}/action"));
}

#[test]
fn drop_security_group_fault_brings_new_servers_up_without_groups() {
    let sim = sim(14);
    let o = owner("u1");
    ready(sim.create_security_group("sg", &o.tags(&Role::SecurityGroup))).expect("sg");
    let before = ready(sim.create_server(&server_req("m0", &o, &["sg"]))).expect("create");
    wait_ms(&sim, 5_000);
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(1_000)),
        ..SimFault::new(FaultKind::DropSecurityGroup, start)
    });
    let hit = ready(sim.create_server(&server_req("m1", &o, &["sg"]))).expect("create");
    wait_ms(&sim, 5_000);
    let spared = ready(sim.create_server(&server_req("m2", &o, &["sg"]))).expect("create");
    wait_ms(&sim, 5_000);
    let hit = server(&sim, &hit.id).expect("server");
    assert_eq!(hit.status, ServerStatus::Active);
    assert!(hit.security_groups.is_empty(), "came up without its group");
    for id in [&before.id, &spared.id] {
        assert_eq!(
            server(&sim, id).expect("server").security_groups,
            vec!["sg".to_string()],
            "running before (count defaults to 0) or requested after"
        );
    }
}

fn stale_world(seed: u64, config: SimConfig) -> (SimCloud, String, String) {
    let sim = sim_with(config, seed);
    let router = sim.add_foreign_router("edge");
    let alpha = cluster_owner("alpha", "ua");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    sim.set_pod_network("beta", "ub", "10.245.0.0/16".parse().expect("cidr"));
    let (sid, _) = active_server(&sim, &alpha, "alpha-0");
    wait_for(&sim, |sim| node(sim, &sid).is_some());
    (sim, router, sid)
}

#[test]
fn stale_route_fault_points_a_live_pod_slice_at_a_dead_next_hop() {
    let config = SimConfig {
        max_routes: 1,
        ..SimConfig::default()
    };
    let (sim, router, sid) = stale_world(15, config);
    let books = bookkeeping(&sim);
    sim.inject(SimFault {
        count: Some(2),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::StaleRoute, now(&sim))
    });
    sim.advance();
    assert_eq!(bookkeeping(&sim), books, "not a call, not a mutation");
    let w = sim.snapshot();
    let routes = &w.routers[0].routes;
    let live = node(&sim, &sid).and_then(|n| n.pod_cidr).expect("slice");
    assert_eq!(
        routes,
        &vec![
            Route {
                destination: live.clone(),
                nexthop: "10.0.255.254".parse().expect("ip")
            },
            Route {
                destination: live,
                nexthop: "10.0.255.253".parse().expect("ip")
            },
        ],
        "the highest free addresses, beyond the route limit of 1"
    );
    assert!(w.servers.iter().all(|s| {
        s.address
            .is_none_or(|a| routes.iter().all(|r| r.nexthop != a))
    }));
    wait_ms(&sim, 3_600_000);
    assert_eq!(
        &ready(sim.find_router(&router)).expect("find").routes,
        routes,
        "they stay"
    );
}

#[test]
fn untargeted_stale_route_fault_hits_every_pod_network() {
    let (sim, _, _) = stale_world(16, SimConfig::default());
    sim.inject(SimFault::new(FaultKind::StaleRoute, now(&sim)));
    let r = ready(sim.find_router("edge")).expect("find");
    let dests: Vec<&str> = r.routes.iter().map(|r| r.destination.as_str()).collect();
    assert_eq!(
        dests,
        vec!["10.244.0.0/24", "10.245.0.0/24"],
        "alpha's live slice, and beta's first slice (it has no nodes)"
    );
    assert_ne!(r.routes[0].nexthop, r.routes[1].nexthop);
}

#[test]
fn max_routes_fault_lowers_the_route_limit_while_active() {
    let sim = sim(17);
    let router = sim.add_foreign_router("edge");
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(10_000)),
        count: Some(2),
        ..SimFault::new(FaultKind::MaxRoutes, start)
    });
    let route = |n: u32| Route {
        destination: format!("10.244.{n}.0/24"),
        nexthop: format!("10.0.0.{}", n + 2).parse().expect("ip"),
    };
    ready(sim.add_extra_routes(&router, &[route(0), route(1)])).expect("two fit");
    let err = ready(sim.add_extra_routes(&router, &[route(2)])).expect_err("third");
    assert_eq!((err.class, err.status), (ErrorClass::Permanent, Some(400)));
    assert_eq!(
        err.message,
        format!(
            "Unable to complete operation for {router}. The number of routes exceeds the maximum 2."
        )
    );
    wait_ms(&sim, 10_000);
    let all: Vec<Route> = (0..30).map(route).collect();
    ready(sim.add_extra_routes(&router, &all)).expect("back to the default 30");
}

#[test]
fn targeted_max_routes_fault_limits_only_that_clusters_route_calls() {
    let sim = sim(18);
    let router = sim.add_foreign_router("edge");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    sim.set_pod_network("beta", "ub", "10.245.0.0/16".parse().expect("cidr"));
    sim.inject(SimFault {
        count: Some(1),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::MaxRoutes, now(&sim))
    });
    let to = |dest: &str| Route {
        destination: dest.into(),
        nexthop: "10.0.0.9".parse().expect("ip"),
    };
    ready(sim.add_extra_routes(&router, &[to("10.245.0.0/24"), to("10.245.1.0/24")]))
        .expect("beta is not limited");
    let err = ready(sim.add_extra_routes(&router, &[to("10.244.0.0/24")])).expect_err("alpha is");
    assert!(err.message.ends_with("exceeds the maximum 1."), "{err}");
}
