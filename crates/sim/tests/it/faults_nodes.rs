//! Faults of the workload clusters' nodes: kubelets that never register, and node lists
//! that lie (empty, or all NotReady) while the nodes themselves are fine.

use crate::common;

use common::*;
use flightdeck_cloud::{Compute, GuestCluster, ServerStatus};
use flightdeck_sim::{SimCloud, SimFault};
use flightdeck_spec::FaultKind;

fn listed_ready(sim: &SimCloud, o: &flightdeck_cloud::Ownership) -> Vec<bool> {
    ready(sim.list_nodes(o))
        .expect("call")
        .expect("reachable")
        .iter()
        .map(|n| n.ready)
        .collect()
}

#[test]
fn no_registration_fault_keeps_new_servers_kubelets_from_registering() {
    let sim = sim(1);
    let alpha = cluster_owner("alpha", "ua");
    let beta = cluster_owner("beta", "ub");
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(10_000)),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::NoRegistration, start)
    });
    let mute = ready(sim.create_server(&server_req("alpha-0", &alpha, &[]))).expect("create");
    let other = ready(sim.create_server(&server_req("beta-0", &beta, &[]))).expect("create");
    wait_ms(&sim, 10_000);
    let later = ready(sim.create_server(&server_req("alpha-1", &alpha, &[]))).expect("create");
    wait_ms(&sim, 200_000);
    assert_eq!(
        server(&sim, &mute.id).map(|s| s.status),
        Some(ServerStatus::Active),
        "the server itself is fine"
    );
    assert!(node(&sim, &mute.id).is_none(), "its kubelet never started");
    assert!(node(&sim, &other.id).is_some(), "beta is not targeted");
    assert!(node(&sim, &later.id).is_some(), "requested after the fault");
}

#[test]
fn no_registration_fault_hits_about_its_rate_of_servers() {
    let sim = sim(2);
    let o = owner("u1");
    sim.inject(SimFault {
        rate: Some(0.5),
        ..SimFault::new(FaultKind::NoRegistration, now(&sim))
    });
    let ids: Vec<String> = (0..200)
        .map(|i| {
            ready(sim.create_server(&server_req(&format!("m{i}"), &o, &[])))
                .expect("create")
                .id
        })
        .collect();
    wait_ms(&sim, 200_000);
    let registered = ids.iter().filter(|id| node(&sim, id).is_some()).count();
    assert!((70..130).contains(&registered), "{registered} of 200");
}

#[test]
fn empty_node_list_fault_answers_an_empty_list_while_active() {
    let sim = sim(3);
    let alpha = cluster_owner("alpha", "ua");
    let beta = cluster_owner("beta", "ub");
    reachable_cluster(&sim, &alpha);
    reachable_cluster(&sim, &beta);
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(5_000)),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::EmptyNodeList, start)
    });
    assert_eq!(ready(sim.list_nodes(&alpha)).expect("call"), Some(vec![]));
    assert_eq!(
        listed_ready(&sim, &beta),
        vec![true],
        "beta is not targeted"
    );
    assert_eq!(sim.snapshot().nodes.len(), 2, "the nodes are all there");
    wait_ms(&sim, 5_000);
    assert_eq!(listed_ready(&sim, &alpha), vec![true], "fault over");
}

#[test]
fn empty_node_list_fault_does_not_make_an_unreachable_api_answer() {
    let sim = sim(4);
    let o = owner("u1");
    sim.inject(SimFault::new(FaultKind::EmptyNodeList, now(&sim)));
    assert_eq!(ready(sim.list_nodes(&o)).expect("call"), None);
}

#[test]
fn all_not_ready_fault_reports_every_node_not_ready_while_active() {
    let sim = sim(5);
    let alpha = cluster_owner("alpha", "ua");
    let beta = cluster_owner("beta", "ub");
    let sid = reachable_cluster(&sim, &alpha);
    reachable_cluster(&sim, &beta);
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(5_000)),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::AllNotReady, start)
    });
    assert_eq!(listed_ready(&sim, &alpha), vec![false]);
    assert_eq!(
        listed_ready(&sim, &beta),
        vec![true],
        "beta is not targeted"
    );
    assert!(
        node(&sim, &sid).is_some_and(|n| n.ready),
        "the world keeps the real state"
    );
    wait_ms(&sim, 5_000);
    assert_eq!(listed_ready(&sim, &alpha), vec![true], "fault over");
}

#[test]
fn untargeted_all_not_ready_fault_hits_every_cluster() {
    let sim = sim(6);
    let alpha = cluster_owner("alpha", "ua");
    let beta = cluster_owner("beta", "ub");
    reachable_cluster(&sim, &alpha);
    reachable_cluster(&sim, &beta);
    sim.inject(SimFault::new(FaultKind::AllNotReady, now(&sim)));
    assert_eq!(listed_ready(&sim, &alpha), vec![false]);
    assert_eq!(listed_ready(&sim, &beta), vec![false]);
}
