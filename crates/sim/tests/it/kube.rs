//! The workload cluster's nodes and the reachability of its API.

use crate::common;

use common::*;
use flightdeck_cloud::{Compute, GuestCluster, LoadBalancing, Node};
use flightdeck_sim::SimCloud;

fn nodes(sim: &SimCloud, uid: &str) -> Vec<Node> {
    sim.snapshot()
        .nodes
        .into_iter()
        .filter(|(u, _)| u == uid)
        .map(|(_, n)| n)
        .collect()
}

#[test]
fn node_registers_then_turns_ready_and_goes_after_its_server() {
    let sim = common::sim_with_node_controller(1);
    let o = owner("u1");
    let (sid, _) = active_server(&sim, &o, "cp-1");
    let active_at = now(&sim);
    wait_ms(&sim, 39_999);
    assert!(nodes(&sim, "u1").is_empty(), "kubelet takes at least 40 s");
    wait_for(&sim, |sim| !nodes(sim, "u1").is_empty());
    assert!(
        now(&sim) <= active_at.plus_millis(70_000),
        "and at most 70 s"
    );
    let n = nodes(&sim, "u1");
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].name, "cp-1");
    assert_eq!(n[0].server_id.as_deref(), Some(sid.as_str()));
    assert!(!n[0].ready);
    wait_ms(&sim, 15_000);
    assert!(nodes(&sim, "u1")[0].ready);

    ready(sim.delete_server(&sid)).expect("delete");
    wait_for(&sim, |sim| server(sim, &sid).is_none());
    let n = nodes(&sim, "u1");
    assert!(n.len() == 1 && !n[0].ready, "lingers NotReady for a while");
    wait_ms(&sim, 5_000);
    assert!(nodes(&sim, "u1").is_empty());
}

#[test]
fn servers_without_a_cluster_uid_never_register() {
    let sim = sim(2);
    sim.add_foreign_server("stranger", vec!["team=x".into()]);
    let tagged = sim.add_foreign_server(
        "tagged",
        owner("u9").tags(&flightdeck_cloud::Role::Machine("tagged".into())),
    );
    wait_ms(&sim, 100_000);
    let w = sim.snapshot();
    assert_eq!(w.nodes.len(), 1);
    assert_eq!(w.nodes[0].0, "u9");
    assert_eq!(w.nodes[0].1.server_id.as_deref(), Some(tagged.as_str()));
}

#[test]
fn nodes_are_unreachable_until_a_member_serves() {
    let sim = sim(3);
    let o = owner("u1");
    assert_eq!(
        ready(sim.list_nodes(&o)).expect("call"),
        None,
        "no load balancer"
    );
    let (lb, pool) = api_lb(&sim, &o, true);
    let (sid, addr) = active_server(&sim, &o, "cp-1");
    ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    assert_eq!(
        ready(sim.list_nodes(&o)).expect("call"),
        None,
        "member not online"
    );

    wait_for(&sim, |sim| {
        ready(sim.list_nodes(&o)).expect("call").is_some()
    });
    let listed = ready(sim.list_nodes(&o)).expect("call").expect("reachable");
    assert_eq!(listed.len(), 1);
    assert!(listed[0].ready, "reachable only through a Ready node");
    assert_eq!(listed[0].server_id.as_deref(), Some(sid.as_str()));
    assert_eq!(
        ready(sim.list_nodes(&owner("other"))).expect("call"),
        None,
        "another cluster's endpoint is its own"
    );

    ready(sim.delete_server(&sid)).expect("delete");
    assert_eq!(
        ready(sim.list_nodes(&o)).expect("call"),
        None,
        "backend going away"
    );
    assert!(sim.api_calls()["kubernetes"]["GET /api/v1/nodes"] > 3);
}

/// An OpenStack workload cluster's API on the Kubernetes wire: what flightdeck's kube-rs
/// client reads on a real cluster, with each node's providerID in OpenStack's format.
#[test]
fn an_openstack_workload_cluster_serves_its_nodes_on_the_kubernetes_wire() {
    let sim = sim(7);
    let o = cluster_owner("demo", "u7");
    let call = |method: &str, path: &str| {
        sim.kube_request(
            "demo",
            flightdeck_sim::KubeRequest {
                method: method.into(),
                path: path.into(),
                query: String::new(),
                body: Vec::new(),
                content_type: None,
            },
        )
    };
    assert_eq!(call("GET", "/api/v1/nodes").status, 503, "no API yet");
    let sid = reachable_cluster(&sim, &o);
    let address = server(&sim, &sid).and_then(|s| s.address).expect("address");
    let answer = call("GET", "/api/v1/nodes");
    assert_eq!(answer.status, 200);
    let list: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
    assert_eq!(list["kind"], "NodeList");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    let n = &items[0];
    assert_eq!(n["metadata"]["name"], "demo-cp-1");
    assert_eq!(n["spec"]["providerID"], format!("openstack:///{sid}"));
    assert_eq!(n["status"]["addresses"][0]["type"], "InternalIP");
    assert_eq!(n["status"]["addresses"][0]["address"], address.to_string());
    let ready = n["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .expect("Ready condition");
    assert_eq!(ready["status"], "True");
    assert_eq!(call("GET", "/api/v1/nodes/demo-cp-1").status, 200);
    assert_eq!(call("GET", "/api/v1/nodes/nope").status, 404);
    assert_eq!(
        call("POST", "/api/v1/nodes").status,
        405,
        "nodes are their kubelets'"
    );
    assert!(sim.kube_clusters().contains(&"demo".to_string()));
}

/// The test bed's kubelets for a real cloud: servers listed by a real OpenStack get a
/// node with their real ID, unless told never to register, and lose it when they go.
#[test]
fn mirrored_servers_of_a_real_cloud_register_by_their_real_ids() {
    let sim = common::sim_with_node_controller(8);
    let o = cluster_owner("demo", "u8");
    let real = |id: &str, name: &str, key: &str, last: u8| {
        real_server(&o, id, name, key, [192, 168, 7, last], now(&sim))
    };
    let cp = real("7f3e-cp", "demo-cp-1", "cp-1", 10);
    let worker = real("7f3e-w", "demo-workers-2", "workers-2", 11);
    let never = vec!["demo-workers-2".to_string()];
    let cidr = "10.244.0.0/16".parse().ok();
    sim.mirror_servers("demo", &[cp.clone(), worker.clone()], &never, cidr);
    wait_ms(&sim, 120_000);
    sim.mirror_servers("demo", &[cp.clone(), worker.clone()], &never, cidr);
    let listed = ready(sim.list_nodes(&o))
        .expect("call")
        .expect("the API answers");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].server_id.as_deref(), Some("7f3e-cp"));
    assert!(
        listed[0]
            .pod_cidr
            .as_deref()
            .is_some_and(|c| c.starts_with("10.244."))
    );
    let answer = sim.kube_request(
        "demo",
        flightdeck_sim::KubeRequest {
            method: "GET".into(),
            path: "/api/v1/nodes".into(),
            query: String::new(),
            body: Vec::new(),
            content_type: None,
        },
    );
    let list: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
    assert_eq!(
        list["items"][0]["spec"]["providerID"],
        "openstack:///7f3e-cp"
    );
    sim.mirror_servers("demo", std::slice::from_ref(&worker), &never, cidr);
    wait_ms(&sim, 60_000);
    assert!(
        node(&sim, "7f3e-cp").is_none(),
        "the node goes with its server"
    );
}

/// `api.staleRead` on `kubernetes`: the workload cluster's API serves its nodes from a
/// watch cache that lags, to lists and watches alike, never older than the lag.
#[test]
fn a_lagging_watch_cache_serves_the_nodes_as_they_were() {
    use flightdeck_sim::{KubeRequest, SimFault};
    use flightdeck_spec::Duration;
    use flightdeck_spec::scenario::{FaultKind, Service};

    let sim = sim(9);
    let o = cluster_owner("demo", "u9");
    let server = |id: &str, key: &str, last: u8| {
        real_server(
            &o,
            id,
            &format!("demo-{key}"),
            key,
            [192, 168, 9, last],
            now(&sim),
        )
    };
    let listed = |sim: &SimCloud| -> usize {
        let answer = sim.kube_request(
            "demo",
            KubeRequest {
                method: "GET".into(),
                path: "/api/v1/nodes".into(),
                ..KubeRequest::default()
            },
        );
        assert_eq!(answer.status, 200);
        let list: serde_json::Value = serde_json::from_slice(&answer.body).expect("json");
        list["items"].as_array().map_or(0, Vec::len)
    };
    let cidr = "10.244.0.0/16".parse().ok();
    let cp = server("cp-id", "cp-1", 10);
    sim.mirror_servers("demo", std::slice::from_ref(&cp), &[], cidr);
    wait_ms(&sim, 120_000);
    sim.inject(SimFault {
        service: Some(Service::Kubernetes),
        latency: Some(Duration::from_secs(120)),
        ..SimFault::new(FaultKind::ApiStaleRead, now(&sim))
    });
    assert_eq!(listed(&sim), 1);
    // A worker registers; the cache, two minutes behind, has not seen it.
    sim.mirror_servers(
        "demo",
        &[cp.clone(), server("w-id", "workers-2", 11)],
        &[],
        cidr,
    );
    wait_ms(&sim, 80_000);
    assert_eq!(
        nodes(&sim, "u9").len(),
        2,
        "the world has the worker's node"
    );
    assert_eq!(listed(&sim), 1, "the cache answers as it was");
    // Two minutes on, the cache has caught up with what it served then.
    wait_ms(&sim, 121_000);
    assert_eq!(listed(&sim), 2, "never older than the lag");
    assert!(
        sim.fault_effects()
            .get(&FaultKind::ApiStaleRead)
            .copied()
            .unwrap_or(0)
            > 0
    );
}

/// A server of a real cloud, mirrored into the simulator so its kubelet registers there.
fn real_server(
    o: &flightdeck_cloud::Ownership,
    id: &str,
    name: &str,
    key: &str,
    address: [u8; 4],
    at: flightdeck_cloud::Timestamp,
) -> flightdeck_cloud::Server {
    flightdeck_cloud::Server {
        id: id.into(),
        name: name.into(),
        status: flightdeck_cloud::ServerStatus::Active,
        task_state: None,
        tags: o.tags(&flightdeck_cloud::Role::Machine(key.into())),
        security_groups: Vec::new(),
        address: Some(std::net::IpAddr::from(address)),
        image: "fake-img".into(),
        flavor: "m1.tiny".into(),
        fault: None,
        created_at: at,
    }
}
