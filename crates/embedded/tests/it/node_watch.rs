//! Nodes watched in the simulator's own runs (in process, virtual time): the workload
//! cluster is listed once and watched; each read takes what the watch carried since,
//! without a call; the watch asks again when its request's time runs out and lists
//! again after its lifetime; a broken watch keeps its nodes, stale from when they were
//! last current, and a new one lists again once the API answers.

use std::sync::Arc;

use flightdeck_cloud::{
    Clock, GuestCluster, Node, Ownership, Role, Server, ServerStatus, SimClock, Timestamp,
};
use flightdeck_embedded::simulated_nodes;
use flightdeck_sim::{SimCloud, SimConfig, SimFault};
use flightdeck_spec::scenario::{FaultKind, Service};
use flightdeck_workload::ProviderIdFormat;

const CLUSTER: &str = "demo";

fn owner() -> Ownership {
    Ownership {
        cluster: CLUSTER.into(),
        uid: "uid-1".into(),
    }
}

fn server(n: u32, machine: &str) -> Server {
    Server {
        id: format!("srv-{n}"),
        name: format!("{CLUSTER}-{machine}"),
        status: ServerStatus::Active,
        task_state: None,
        tags: owner().tags(&Role::Machine(machine.into())),
        security_groups: Vec::new(),
        address: Some(format!("10.0.0.{n}").parse().expect("ip")),
        image: "img".into(),
        flavor: "m1".into(),
        fault: None,
        created_at: Timestamp::SIM_EPOCH,
    }
}

/// A simulated cloud whose workload cluster has `servers`' nodes, registered.
fn cloud_with(servers: &[Server]) -> Arc<SimCloud> {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let sim = Arc::new(SimCloud::new(SimConfig::default(), 3, clock));
    sim.mirror_servers(
        CLUSTER,
        servers,
        &[],
        Some("10.244.0.0/16".parse().expect("cidr")),
    );
    wait_s(&sim, 120);
    sim
}

fn wait_s(sim: &SimCloud, s: u64) {
    sim.clock().advance(flightdeck_spec::Duration::from_secs(s));
    sim.advance();
}

/// The calls of the workload cluster's API for nodes: (lists, watch requests).
fn node_calls(sim: &SimCloud) -> (u64, u64) {
    let calls = sim.api_calls();
    let of = |op: &str| {
        calls
            .get("kubernetes")
            .and_then(|m| m.get(op))
            .copied()
            .unwrap_or(0)
    };
    (of("GET nodes"), of("WATCH nodes"))
}

fn names(nodes: &Option<Vec<Node>>) -> Vec<String> {
    let mut v: Vec<String> = nodes.iter().flatten().map(|n| n.name.clone()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn in_the_simulators_runs_nodes_are_listed_once_then_watched() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let sim = Arc::new(SimCloud::new(SimConfig::default(), 3, clock.clone()));
    let mut servers = vec![server(1, "cp-1")];
    sim.mirror_servers(
        CLUSTER,
        &servers,
        &[],
        Some("10.244.0.0/16".parse().expect("cidr")),
    );
    wait_s(&sim, 120);
    let guest = simulated_nodes(sim.clone(), ProviderIdFormat::OpenStack);

    // The first read lists and opens the watch: its nodes are known at once.
    let nodes = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(names(&nodes), ["demo-cp-1"]);
    assert_eq!(node_calls(&sim), (1, 1), "one list, one watch request");
    assert_eq!(guest.nodes_stale_since(&owner()), None);

    // A node that registers is seen at the next read, without a call.
    servers.push(server(2, "workers-1"));
    sim.mirror_servers(CLUSTER, &servers, &[], None);
    wait_s(&sim, 120);
    let nodes = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(names(&nodes), ["demo-cp-1", "demo-workers-1"]);
    for _ in 0..5 {
        guest.list_nodes(&owner()).await.expect("read");
    }
    assert_eq!(node_calls(&sim), (1, 1), "reads of a watch cost no call");

    // The watch request's 290 s run out: it is asked again from where it got, not listed.
    wait_s(&sim, 200);
    let nodes = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(names(&nodes), ["demo-cp-1", "demo-workers-1"]);
    assert_eq!(node_calls(&sim), (1, 2), "a new watch request, no list");

    // The API drops the stream: the watch breaks; its nodes are kept, stale from the
    // last read that found them current.
    let current_at = clock.now();
    wait_s(&sim, 10);
    let mut fault = SimFault::new(FaultKind::ApiErrorRate, clock.now());
    fault.service = Some(Service::Kubernetes);
    fault.end = Some(clock.now().plus(flightdeck_spec::Duration::from_secs(3)));
    sim.inject(fault);
    let kept = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(names(&kept), ["demo-cp-1", "demo-workers-1"], "kept");
    assert_eq!(
        guest.nodes_stale_since(&owner()),
        Some(current_at),
        "stale from when they were last current"
    );

    // No new watch within 5 s of the break; after it, one lists again and is current.
    wait_s(&sim, 4);
    guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(node_calls(&sim).0, 1, "no restart within 5 s");
    wait_s(&sim, 2);
    let nodes = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(names(&nodes), ["demo-cp-1", "demo-workers-1"]);
    assert_eq!(guest.nodes_stale_since(&owner()), None, "healed");
    assert_eq!(node_calls(&sim), (2, 3), "listed and watched again");

    // Every watch starts afresh after 15 minutes, with a list.
    for _ in 0..4 {
        wait_s(&sim, 240);
        guest.list_nodes(&owner()).await.expect("read");
    }
    assert_eq!(
        node_calls(&sim).0,
        3,
        "a new list after the watch's lifetime"
    );
}

/// A node that goes NotReady is seen NotReady at the next read, and Ready again after.
#[tokio::test]
async fn a_watched_node_that_goes_not_ready_is_seen_at_the_next_read() {
    let sim = cloud_with(&[server(1, "cp-1"), server(2, "workers-1")]);
    let clock = sim.clock().clone();
    let guest = simulated_nodes(sim.clone(), ProviderIdFormat::OpenStack);
    let ready = |nodes: &Option<Vec<Node>>| -> Vec<bool> {
        let mut v: Vec<(String, bool)> = nodes
            .iter()
            .flatten()
            .map(|n| (n.name.clone(), n.ready))
            .collect();
        v.sort();
        v.into_iter().map(|(_, r)| r).collect()
    };
    assert_eq!(
        ready(&guest.list_nodes(&owner()).await.expect("read")),
        [true, true]
    );
    let mut blip = SimFault::new(FaultKind::AllNotReady, clock.now());
    blip.end = Some(clock.now().plus(flightdeck_spec::Duration::from_secs(30)));
    sim.inject(blip);
    wait_s(&sim, 1);
    assert_eq!(
        ready(&guest.list_nodes(&owner()).await.expect("read")),
        [false, false],
        "the NotReady events are carried by the watch"
    );
    wait_s(&sim, 60);
    assert_eq!(
        ready(&guest.list_nodes(&owner()).await.expect("read")),
        [true, true]
    );
    assert_eq!(node_calls(&sim), (1, 1), "all of it through one watch");
}

/// A controller that restarts has no watch: the scenario runner, which keeps the
/// provider across an engine restart, drops its watches with the engine, and the next
/// read lists the nodes again, as a restarted flightdeck would.
#[tokio::test]
async fn after_a_restart_the_nodes_are_listed_again() {
    let sim = cloud_with(&[server(1, "cp-1")]);
    let guest = simulated_nodes(sim.clone(), ProviderIdFormat::OpenStack);
    guest.list_nodes(&owner()).await.expect("read");
    wait_s(&sim, 10);
    guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(node_calls(&sim), (1, 1), "watched, not listed again");

    guest.forget_node_watches();
    wait_s(&sim, 10);
    let nodes = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(names(&nodes), ["demo-cp-1"]);
    assert_eq!(
        node_calls(&sim),
        (2, 2),
        "a new watch: one more list and one more watch request"
    );
}
