//! Helpers for the workload clusters of OpenStack and OpenNebula clusters: a cluster
//! brought up with its workload running, its pods as the simulator has them, and
//! requests to its API.
#![allow(dead_code)]

use flightdeck_cloud::Compute;
use flightdeck_sim::{KubePodView, SimCloud};
use serde_json::{Value, json};

use crate::common::{active_server, cluster_owner, reachable_cluster, ready, wait_for};
use crate::k8s_support::{call, get, merge_patch, post};

pub const CLUSTER: &str = "demo";

/// The guest's pods now.
pub fn pods(sim: &SimCloud, cluster: &str) -> Vec<KubePodView> {
    sim.guest_view(cluster).map(|w| w.pods).unwrap_or_default()
}

/// The running pods of app `app` (name prefix), with their nodes.
pub fn running(sim: &SimCloud, cluster: &str, app: &str) -> Vec<(String, String)> {
    pods(sim, cluster)
        .into_iter()
        .filter(|p| p.name.starts_with(&format!("{app}-")))
        .filter(|p| p.phase == "Running" && p.ready && !p.deleting)
        .map(|p| (p.name, p.node.unwrap_or_default()))
        .collect()
}

/// Whether every pod of the workload runs: `kube-proxy` on each of `nodes` nodes, the
/// `web` replicas and the `cache`.
pub fn workload_runs(sim: &SimCloud, cluster: &str, nodes: usize) -> bool {
    let all = pods(sim, cluster);
    let proxies = all
        .iter()
        .filter(|p| p.daemonset && p.phase == "Running")
        .count();
    proxies == nodes
        && running(sim, cluster, "web").len() == 2
        && running(sim, cluster, "cache").len() == 1
}

/// An OpenStack cluster `demo` with a reachable API (one control-plane server) and
/// `workers` worker servers (`demo-w-<i>`), its workload running. Answers the
/// control-plane server's id and the workers' ids.
pub fn openstack_cluster(sim: &SimCloud, workers: usize) -> (String, Vec<String>) {
    let o = cluster_owner(CLUSTER, "u-demo");
    let ids: Vec<String> = (0..workers)
        .map(|i| active_server(sim, &o, &format!("{CLUSTER}-w-{i}")).0)
        .collect();
    // Every worker is Ready before the control plane schedules anything.
    wait_for(sim, |sim| {
        let w = sim.snapshot();
        ids.iter().all(|id| {
            w.nodes
                .iter()
                .any(|(_, n)| n.server_id.as_deref() == Some(id.as_str()) && n.ready)
        })
    });
    let cp = reachable_cluster(sim, &o);
    wait_for(sim, |sim| workload_runs(sim, CLUSTER, workers + 1));
    (cp, ids)
}

/// The server id of node `name`.
pub fn server_of(sim: &SimCloud, name: &str) -> String {
    sim.snapshot()
        .nodes
        .into_iter()
        .find(|(_, n)| n.name == name)
        .and_then(|(_, n)| n.server_id)
        .expect("the node is registered")
}

pub fn delete_server(sim: &SimCloud, id: &str) {
    ready(sim.delete_server(id)).expect("delete");
}

/// Cordons `node` on the wire.
pub fn cordon(sim: &SimCloud, cluster: &str, node: &str) {
    let path = format!("/api/v1/nodes/{node}");
    let (code, body) = merge_patch(
        sim,
        cluster,
        &path,
        json!({"spec": {"unschedulable": true}}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["unschedulable"], true, "{body}");
}

/// Evicts pod `ns/name` on the wire; answers the status code.
pub fn evict(sim: &SimCloud, cluster: &str, ns: &str, name: &str) -> (u16, Value) {
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}/eviction");
    let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns}});
    post(sim, cluster, &path, body)
}

/// The pods bound to `node` as the API lists them: (namespace, name, is a DaemonSet or
/// mirror pod).
pub fn pods_on(sim: &SimCloud, cluster: &str, node: &str) -> Vec<(String, String, bool)> {
    let (code, list) = get(
        sim,
        cluster,
        &format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"),
    );
    assert_eq!(code, 200, "{list}");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| {
            let owned_by_node = p["metadata"]["ownerReferences"][0]["kind"]
                .as_str()
                .is_some_and(|k| k == "DaemonSet" || k == "Node");
            (
                p["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                owned_by_node,
            )
        })
        .collect()
}

/// `DELETE` of a path on the wire.
pub fn delete_path(sim: &SimCloud, cluster: &str, path: &str) -> (u16, Value) {
    call(sim, cluster, "DELETE", path, None, None)
}
