//! Pod networks: each node of a cluster with a registered pod network gets the lowest
//! free /24 of it, and gives it back the moment it is gone.

use crate::common;

use common::*;
use flightdeck_cloud::{Compute, GuestCluster};
use flightdeck_sim::SimCloud;

fn pod_cidr(sim: &SimCloud, server_id: &str) -> Option<String> {
    node(sim, server_id).and_then(|n| n.pod_cidr)
}

fn registered(sim: &SimCloud, server_id: &str) {
    wait_for(sim, |sim| node(sim, server_id).is_some());
}

#[test]
fn nodes_get_the_lowest_free_slices_in_registration_order() {
    let sim = sim(1);
    let alpha = cluster_owner("alpha", "ua");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    let ids: Vec<String> = (0..3)
        .map(|i| active_server(&sim, &alpha, &format!("alpha-{i}")).0)
        .collect();
    for id in &ids {
        registered(&sim, id);
    }
    let slices: Vec<Option<String>> = sim
        .snapshot()
        .nodes
        .into_iter()
        .map(|(uid, n)| {
            assert_eq!(uid, "ua");
            n.pod_cidr
        })
        .collect();
    assert_eq!(
        slices,
        vec![
            Some("10.244.0.0/24".to_string()),
            Some("10.244.1.0/24".to_string()),
            Some("10.244.2.0/24".to_string())
        ],
        "the world lists nodes in registration order"
    );
}

#[test]
fn a_gone_nodes_slice_is_handed_out_again_at_once() {
    let sim = common::sim_with_node_controller(2);
    let alpha = cluster_owner("alpha", "ua");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    let (first, _) = active_server(&sim, &alpha, "alpha-0");
    registered(&sim, &first);
    let (second, _) = active_server(&sim, &alpha, "alpha-1");
    registered(&sim, &second);
    assert_eq!(pod_cidr(&sim, &first).as_deref(), Some("10.244.0.0/24"));
    assert_eq!(pod_cidr(&sim, &second).as_deref(), Some("10.244.1.0/24"));

    ready(sim.delete_server(&first)).expect("delete");
    wait_for(&sim, |sim| server(sim, &first).is_none());
    assert_eq!(
        pod_cidr(&sim, &first).as_deref(),
        Some("10.244.0.0/24"),
        "a lingering NotReady node keeps its slice"
    );
    wait_for(&sim, |sim| node(sim, &first).is_none());
    let (third, _) = active_server(&sim, &alpha, "alpha-2");
    registered(&sim, &third);
    assert_eq!(
        pod_cidr(&sim, &third).as_deref(),
        Some("10.244.0.0/24"),
        "the lowest free slice, just freed"
    );
}

#[test]
fn nodes_of_clusters_without_a_pod_network_get_none() {
    let sim = sim(3);
    let alpha = cluster_owner("alpha", "ua");
    let beta = cluster_owner("beta", "ub");
    let gamma = cluster_owner("gamma", "ug");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    sim.set_pod_network("gamma", "ug", "10.246.0.0/25".parse().expect("cidr"));
    let (a, _) = active_server(&sim, &alpha, "alpha-0");
    let (b, _) = active_server(&sim, &beta, "beta-0");
    let (g, _) = active_server(&sim, &gamma, "gamma-0");
    for id in [&a, &b, &g] {
        registered(&sim, id);
    }
    assert_eq!(pod_cidr(&sim, &a).as_deref(), Some("10.244.0.0/24"));
    assert_eq!(pod_cidr(&sim, &b), None, "no network registered");
    assert_eq!(pod_cidr(&sim, &g), None, "a /25 is not cut into /24s");
}

#[test]
fn a_network_registered_late_is_handed_to_waiting_nodes() {
    let sim = sim(4);
    let alpha = cluster_owner("alpha", "ua");
    let (a, _) = active_server(&sim, &alpha, "alpha-0");
    registered(&sim, &a);
    assert_eq!(pod_cidr(&sim, &a), None);
    sim.set_pod_network("alpha", "ua", "10.100.0.0/22".parse().expect("cidr"));
    assert_eq!(pod_cidr(&sim, &a).as_deref(), Some("10.100.0.0/24"));
}

#[test]
fn the_node_list_carries_each_nodes_pod_cidr() {
    let sim = sim(5);
    let alpha = cluster_owner("alpha", "ua");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/16".parse().expect("cidr"));
    reachable_cluster(&sim, &alpha);
    let listed = ready(sim.list_nodes(&alpha))
        .expect("call")
        .expect("reachable");
    assert_eq!(listed[0].pod_cidr.as_deref(), Some("10.244.0.0/24"));
}

#[test]
fn a_full_pod_network_leaves_further_nodes_without_a_slice() {
    let sim = sim(6);
    let alpha = cluster_owner("alpha", "ua");
    sim.set_pod_network("alpha", "ua", "10.244.0.0/24".parse().expect("cidr"));
    let (a, _) = active_server(&sim, &alpha, "alpha-0");
    registered(&sim, &a);
    let (b, _) = active_server(&sim, &alpha, "alpha-1");
    registered(&sim, &b);
    assert_eq!(pod_cidr(&sim, &a).as_deref(), Some("10.244.0.0/24"));
    assert_eq!(pod_cidr(&sim, &b), None, "one /24, already taken");
}
