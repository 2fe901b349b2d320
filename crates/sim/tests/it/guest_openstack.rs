//! The workload cluster of an OpenStack cluster: the workload its servers run, drained
//! through the Eviction API against its PodDisruptionBudgets, and what a server deleted
//! under running pods loses.

use crate::common::{self, now, wait_for, wait_ms};
use crate::guest_support::*;
use crate::k8s_support::get;

use flightdeck_sim::BudgetEventKind;

#[test]
fn an_openstack_guest_runs_the_web_deployment_spread_over_its_workers() {
    let sim = common::sim(401);
    openstack_cluster(&sim, 2);
    let view = sim.guest_view(CLUSTER).expect("the guest exists");
    assert!(view.api_up);
    let all = pods(&sim, CLUSTER);
    let on = |name: &str| {
        all.iter()
            .find(|p| p.name == name)
            .and_then(|p| p.node.clone())
    };
    let mut web_nodes: Vec<String> = running(&sim, CLUSTER, "web")
        .into_iter()
        .map(|p| p.1)
        .collect();
    web_nodes.sort();
    assert_eq!(
        web_nodes,
        ["demo-w-0", "demo-w-1"],
        "one web pod per worker"
    );
    assert!(
        running(&sim, CLUSTER, "cache")[0].1.starts_with("demo-w-"),
        "not on the control plane"
    );
    for node in ["demo-cp-1", "demo-w-0", "demo-w-1"] {
        assert_eq!(on(&format!("kube-proxy-{node}")).as_deref(), Some(node));
    }
    let mirrors: Vec<&str> = all
        .iter()
        .filter(|p| p.mirror)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(mirrors, ["kube-apiserver-demo-cp-1"]);
    // The same on the wire.
    let (code, list) = get(&sim, CLUSTER, "/api/v1/pods");
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(all.len()));
    let (code, pdbs) = get(
        &sim,
        CLUSTER,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    );
    assert_eq!(code, 200, "{pdbs}");
    let web = pdbs["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|p| p["metadata"]["name"] == "web")
        .cloned();
    let web = web.expect("web's budget");
    assert_eq!(
        (
            web["status"]["currentHealthy"].as_i64(),
            web["status"]["disruptionsAllowed"].as_i64()
        ),
        (Some(2), Some(1))
    );
    let cache = pods(&sim, CLUSTER)
        .into_iter()
        .find(|p| p.name.starts_with("cache-"))
        .expect("cache");
    let (_, pod) = get(
        &sim,
        CLUSTER,
        &format!("/api/v1/namespaces/default/pods/{}", cache.name),
    );
    assert!(pod["spec"]["volumes"][0]["emptyDir"].is_object(), "{pod}");
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 60);
}

#[test]
fn evicting_a_pod_on_an_openstack_node_reschedules_it_on_another_schedulable_node() {
    let sim = common::sim(402);
    openstack_cluster(&sim, 3);
    cordon(&sim, CLUSTER, "demo-w-0");
    let (_, node) = get(&sim, CLUSTER, "/api/v1/nodes/demo-w-0");
    assert_eq!(node["spec"]["unschedulable"], true, "served cordoned");
    let on_w0: Vec<(String, String)> = running(&sim, CLUSTER, "web")
        .into_iter()
        .chain(running(&sim, CLUSTER, "cache"))
        .filter(|p| p.1 == "demo-w-0")
        .collect();
    assert!(!on_w0.is_empty(), "the spread put something on demo-w-0");
    let (victim, _) = on_w0[0].clone();
    let (code, body) = evict(&sim, CLUSTER, "default", &victim);
    assert_eq!(code, 201, "{body}");
    let evicted_at = now(&sim);
    wait_ms(&sim, 1_000);
    assert!(
        pods(&sim, CLUSTER)
            .iter()
            .any(|p| p.name == victim && p.deleting),
        "terminating"
    );
    wait_for(&sim, |sim| {
        !pods(sim, CLUSTER).iter().any(|p| p.name == victim)
    });
    assert!(
        now(&sim) >= evicted_at.plus_millis(30_000),
        "it took its grace period"
    );
    let app = victim.split('-').next().unwrap_or_default().to_string();
    wait_for(&sim, |sim| {
        running(sim, CLUSTER, &app).len() == if app == "web" { 2 } else { 1 }
    });
    assert!(
        running(&sim, CLUSTER, &app)
            .iter()
            .all(|p| p.1 != "demo-w-0" && p.1.starts_with("demo-w-")),
        "rescheduled on another schedulable worker: {:?}",
        running(&sim, CLUSTER, &app)
    );
    let (events, _) = sim.budget_events_since(0);
    assert!(
        events
            .iter()
            .any(|e| e.kind == BudgetEventKind::EvictionGranted && e.pod == victim)
    );
}

#[test]
fn an_eviction_that_would_break_the_pod_disruption_budget_is_refused_with_429() {
    let sim = common::sim(403);
    openstack_cluster(&sim, 2);
    let web = running(&sim, CLUSTER, "web");
    let (code, body) = evict(&sim, CLUSTER, "default", &web[0].0);
    assert_eq!(code, 201, "{body}");
    let (code, body) = evict(&sim, CLUSTER, "default", &web[1].0);
    assert_eq!(code, 429, "{body}");
    assert!(
        pods(&sim, CLUSTER)
            .iter()
            .any(|p| p.name == web[1].0 && !p.deleting),
        "kept"
    );
    let (events, next) = sim.budget_events_since(0);
    let refused = events
        .iter()
        .find(|e| e.kind == BudgetEventKind::EvictionRefused)
        .expect("recorded");
    assert_eq!(
        (refused.pdb.as_str(), refused.disruptions_allowed),
        ("web", 0)
    );
    assert_eq!(sim.budget_events_since(next).0, [], "numbered");
}

#[test]
fn deleting_a_server_with_running_pods_records_them_lost() {
    let sim = common::sim(404);
    openstack_cluster(&sim, 2);
    let node = running(&sim, CLUSTER, "cache")[0].1.clone();
    let on_node: Vec<String> = running(&sim, CLUSTER, "web")
        .into_iter()
        .chain(running(&sim, CLUSTER, "cache"))
        .filter(|p| p.1 == node)
        .map(|p| p.0)
        .collect();
    let deleted_at = now(&sim);
    delete_server(&sim, &server_of(&sim, &node));
    wait_for(&sim, |sim| !sim.lost_pods().is_empty());
    let lost = sim.lost_pods();
    let mut names: Vec<String> = lost.iter().map(|p| p.name.clone()).collect();
    names.sort();
    let mut want = on_node.clone();
    want.sort();
    assert_eq!(names, want, "the app's pods, not kube-proxy");
    assert!(lost.iter().all(|p| p.cluster == CLUSTER
        && p.node == node
        && p.node_ready_at_deletion
        && !p.terminating));
    assert!(lost.iter().all(|p| p.deletion_began_at == Some(deleted_at)));
    assert!(
        lost.iter()
            .any(|p| p.empty_dir && p.name.starts_with("cache-")),
        "the cache's data went"
    );
    let (events, _) = sim.budget_events_since(0);
    assert!(
        events
            .iter()
            .any(|e| e.kind == BudgetEventKind::MachineDeleted
                && e.pod.starts_with("cache-")
                && e.pod_healthy)
    );
    // The controllers replace them on the node left.
    wait_for(&sim, |sim| {
        running(sim, CLUSTER, "cache").len() == 1 && running(sim, CLUSTER, "web").len() == 2
    });
}

#[test]
fn a_drained_nodes_deletion_loses_nothing() {
    let sim = common::sim_with_node_controller(405);
    openstack_cluster(&sim, 2);
    let node = running(&sim, CLUSTER, "cache")[0].1.clone();
    cordon(&sim, CLUSTER, &node);
    for _ in 0..100 {
        let left: Vec<(String, String, bool)> = pods_on(&sim, CLUSTER, &node)
            .into_iter()
            .filter(|p| !p.2)
            .collect();
        if left.is_empty() {
            break;
        }
        for (ns, name, _) in left {
            let (code, body) = evict(&sim, CLUSTER, &ns, &name);
            assert!(code == 201 || code == 429, "{body}");
        }
        wait_ms(&sim, 5_000);
    }
    assert!(
        pods_on(&sim, CLUSTER, &node).iter().all(|p| p.2),
        "only kube-proxy is left"
    );
    delete_server(&sim, &server_of(&sim, &node));
    wait_for(&sim, |sim| {
        !sim.snapshot().nodes.iter().any(|(_, n)| n.name == node)
    });
    assert_eq!(sim.lost_pods(), []);
    let (events, _) = sim.budget_events_since(0);
    assert!(
        events
            .iter()
            .all(|e| e.kind != BudgetEventKind::MachineDeleted)
    );
}

#[test]
fn a_node_deleted_on_the_wire_is_gone_for_good_and_its_pods_move() {
    let sim = common::sim(406);
    openstack_cluster(&sim, 2);
    let node = running(&sim, CLUSTER, "cache")[0].1.clone();
    let (code, body) = delete_path(&sim, CLUSTER, &format!("/api/v1/nodes/{node}"));
    assert_eq!(code, 200, "{body}");
    assert_eq!(get(&sim, CLUSTER, &format!("/api/v1/nodes/{node}")).0, 404);
    wait_ms(&sim, 120_000);
    assert_eq!(
        get(&sim, CLUSTER, &format!("/api/v1/nodes/{node}")).0,
        404,
        "its kubelet does not come back"
    );
    assert!(
        running(&sim, CLUSTER, "cache").iter().all(|p| p.1 != node),
        "moved"
    );
    assert_eq!(running(&sim, CLUSTER, "cache").len(), 1);
    assert_eq!(sim.lost_pods(), [], "its machine still runs");
}
