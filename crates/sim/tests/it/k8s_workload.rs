//! Workload clusters on KubeVirt: guest nodes, system pods, the `web` app with its PDB,
//! `k8s.pdbBlocks`, and the ground truth of VMIs deleted with pods still on them.

use crate::common;
use crate::k8s_support;

use common::{now, sim, wait_for, wait_ms};
use flightdeck_sim::{MutationKind, SimCloud, SimFault};
use flightdeck_spec::FaultKind;
use k8s_support::*;
use serde_json::{Value, json};

fn pdb_web(sim: &SimCloud, cluster: &str) -> Value {
    get(sim, cluster, &format!("{PDBS}/web")).1["status"].clone()
}

#[test]
fn a_guest_node_registers_with_a_kubevirt_provider_id_and_the_api_comes_up() {
    let sim = sim(30);
    assert!(sim.kube_clusters().is_empty());
    create_vm(&sim, "c1-cp-0", "c1", "cp-0", "External");
    create_vm(&sim, "c1-w-0", "c1", "w-0", "External");
    assert_eq!(
        get(&sim, "c1", "/api/v1/nodes").0,
        503,
        "no API before a control plane runs"
    );
    wait_for(&sim, |sim| sim.kube_clusters() == ["c1"]);
    wait_for(&sim, |sim| get(sim, "c1", "/api/v1/nodes/c1-w-0").0 == 200);
    let (_, node) = get(&sim, "c1", "/api/v1/nodes/c1-w-0");
    assert_eq!(node["spec"]["providerID"], "kubevirt://c1-w-0");
    wait_for(&sim, |sim| {
        kube(sim).workloads[0]
            .nodes
            .iter()
            .filter(|n| n.ready)
            .count()
            == 2
    });
    let (_, cp) = get(&sim, "c1", "/api/v1/nodes/c1-cp-0");
    assert!(cp["metadata"]["labels"]["node-role.kubernetes.io/control-plane"].is_string());
    wait_ms(&sim, 10_000);
    let (_, system) = get(&sim, "c1", "/api/v1/namespaces/kube-system/pods");
    let names: Vec<&str> = system["items"]
        .as_array()
        .map(|i| {
            i.iter()
                .filter_map(|p| p["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            "kube-apiserver-c1-cp-0",
            "kube-proxy-c1-cp-0",
            "kube-proxy-c1-w-0"
        ]
    );
    let (_, mirror) = get(
        &sim,
        "c1",
        "/api/v1/namespaces/kube-system/pods/kube-apiserver-c1-cp-0",
    );
    assert!(mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string());
    let (_, proxy) = get(
        &sim,
        "c1",
        "/api/v1/namespaces/kube-system/pods/kube-proxy-c1-w-0",
    );
    assert_eq!(proxy["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
    let (code, ds) = get(
        &sim,
        "c1",
        "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy",
    );
    assert_eq!(code, 200, "kubectl drain looks the DaemonSet up: {ds}");
    assert_eq!(
        get(&sim, "c1", "/apis/kubevirt.io/v1").0,
        404,
        "a workload cluster has no KubeVirt"
    );
}

#[test]
fn web_pods_run_on_workers_and_are_rescheduled_after_an_eviction_as_the_pdb_follows() {
    let sim = sim(31);
    cluster_up(&sim, "c1", 2, "External");
    let pods = web_pods(&sim, "c1");
    let mut nodes: Vec<_> = pods.iter().filter_map(|p| p.1.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, ["c1-w-0", "c1-w-1"], "spread over the workers");
    assert_eq!(pdb_web(&sim, "c1")["disruptionsAllowed"], 1);
    assert_eq!(pdb_web(&sim, "c1")["expectedPods"], 2);

    // Drain c1-w-0 as kubectl does: cordon, then evict.
    let (code, _) = call(
        &sim,
        "c1",
        "PATCH",
        "/api/v1/nodes/c1-w-0",
        Some(json!({"spec": {"unschedulable": true}})),
        Some("application/strategic-merge-patch+json"),
    );
    assert_eq!(code, 200);
    let (_, on_node) = get(
        &sim,
        "c1",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dc1-w-0",
    );
    let victim = on_node["items"]
        .as_array()
        .and_then(|i| {
            i.iter()
                .find(|p| s(p, &["metadata", "name"]).starts_with("web-"))
        })
        .map(|p| s(p, &["metadata", "name"]).to_string())
        .expect("a web pod on c1-w-0");
    let (code, body) = post(
        &sim,
        "c1",
        &format!("{PODS}/{victim}/eviction"),
        json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": victim}}),
    );
    assert_eq!(code, 201, "{body}");
    assert_eq!(pdb_web(&sim, "c1")["disruptionsAllowed"], 0);
    let pods = web_pods(&sim, "c1");
    assert_eq!(pods.len(), 3, "a replacement is created at once: {pods:?}");
    let replacement = pods
        .iter()
        .find(|p| p.0 != victim && !p.3 && p.2 == "Pending")
        .expect("replacement");
    assert_eq!(
        replacement.1.as_deref(),
        Some("c1-w-1"),
        "the cordoned node takes no new pods"
    );
    wait_ms(&sim, 31_000);
    let pods = web_pods(&sim, "c1");
    assert_eq!(pods.len(), 2, "the deployment's two pods: {pods:?}");
    assert!(
        pods.iter().all(|p| p.0 != victim),
        "the evicted pod is gone after its grace period"
    );
    assert!(
        pods.iter()
            .all(|p| p.2 == "Running" && p.1.as_deref() == Some("c1-w-1"))
    );
    assert_eq!(
        pdb_web(&sim, "c1")["disruptionsAllowed"],
        1,
        "the budget follows the healthy pods"
    );
    let (_, node) = get(&sim, "c1", "/api/v1/nodes/c1-w-0");
    assert_eq!(node["spec"]["unschedulable"], true);
}

#[test]
fn pdb_blocks_keeps_disruptions_allowed_at_zero_while_active() {
    let sim = sim(32);
    cluster_up(&sim, "c1", 2, "External");
    assert_eq!(pdb_web(&sim, "c1")["disruptionsAllowed"], 1);
    let mut fault = SimFault::new(FaultKind::K8sPdbBlocks, now(&sim));
    fault.cluster = Some("c1".into());
    fault.end = Some(now(&sim).plus_millis(60_000));
    sim.inject(fault);
    wait_ms(&sim, 1);
    assert_eq!(pdb_web(&sim, "c1")["disruptionsAllowed"], 0);
    let victim = web_pods(&sim, "c1")[0].0.clone();
    let (code, body) = post(
        &sim,
        "c1",
        &format!("{PODS}/{victim}/eviction"),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim}}),
    );
    assert_eq!(code, 429, "{body}");
    wait_ms(&sim, 60_000);
    assert_eq!(
        pdb_web(&sim, "c1")["disruptionsAllowed"],
        1,
        "the budget frees up at the fault's end"
    );
}

#[test]
fn a_vmi_deleted_with_pods_still_on_its_node_is_recorded_and_the_pods_are_killed() {
    let sim = sim(33);
    cluster_up(&sim, "c1", 2, "External");
    let web_on_w0 = web_pods(&sim, "c1")
        .into_iter()
        .filter(|p| p.1.as_deref() == Some("c1-w-0"))
        .count();
    assert_eq!(web_on_w0, 1);
    let on_w0: Vec<String> = kube(&sim).workloads[0]
        .pods
        .iter()
        .filter(|p| p.node.as_deref() == Some("c1-w-0") && !p.daemonset && !p.mirror)
        .map(|p| format!("default/{}", p.name))
        .collect();
    assert_eq!(on_w0.len(), 1);
    let (code, _) = delete(&sim, INFRA, &format!("{VMIS}/c1-w-0"));
    assert_eq!(code, 200);
    let d = kube(&sim).vmi_deletions.pop().expect("recorded");
    assert_eq!(d.cluster, "c1");
    assert_eq!(d.vmi, "c1-w-0");
    assert_eq!(d.guest_node.as_deref(), Some("c1-w-0"));
    assert_eq!(d.pods_left, on_w0, "DaemonSet pods do not count");
    assert_eq!(d.evacuation, None);
    let m = sim
        .mutations()
        .into_iter()
        .rev()
        .find(|m| m.service == "kubernetes")
        .expect("logged");
    assert_eq!(
        (m.kind, m.operation.as_str()),
        (MutationKind::Delete, "DELETE virtualmachineinstances")
    );
    assert_eq!(m.target_id, "infra/vmi/c1-w-0");
    assert!(
        m.target_tags
            .contains(&"flightdeck-machine=w-0".to_string())
    );
    // When the VMI is gone its guest dies: the pod is gone at once, the node NotReady.
    wait_ms(&sim, 5_000);
    assert!(
        web_pods(&sim, "c1")
            .iter()
            .all(|p| p.1.as_deref() != Some("c1-w-0") || p.2 == "Pending")
    );
    let w = kube(&sim).workloads.remove(0);
    assert!(
        w.nodes.iter().any(|n| n.name == "c1-w-0" && !n.ready),
        "the node stays, NotReady"
    );
    // The VM still wants to run: a new VMI comes, and the node is Ready again.
    wait_for(&sim, |sim| {
        kube(sim).workloads[0].nodes.iter().all(|n| n.ready)
    });
}

#[test]
fn a_re_registered_node_keeps_its_cordon_and_pod_mutations_carry_the_machine_tags() {
    let sim = sim(34);
    cluster_up(&sim, "c1", 1, "External");
    merge_patch(
        &sim,
        "c1",
        "/api/v1/nodes/c1-w-0",
        json!({"spec": {"unschedulable": true}}),
    );
    let m = sim
        .mutations()
        .into_iter()
        .rev()
        .find(|m| m.service == "kubernetes")
        .expect("logged");
    assert_eq!(
        (m.operation.as_str(), m.target_id.as_str()),
        ("PATCH nodes", "c1/node/c1-w-0")
    );
    assert!(m.target_tags.contains(&"flightdeck-cluster=c1".to_string()));
    assert!(m.target_tags.contains(&"flightdeck-uid=uid-c1".to_string()));
    let victim = web_pods(&sim, "c1")
        .into_iter()
        .find(|p| p.1.as_deref() == Some("c1-w-0"))
        .expect("pod")
        .0;
    post(
        &sim,
        "c1",
        &format!("{PODS}/{victim}/eviction"),
        json!({"apiVersion": "policy/v1", "kind": "Eviction"}),
    );
    let m = sim
        .mutations()
        .into_iter()
        .rev()
        .find(|m| m.service == "kubernetes")
        .expect("logged");
    assert_eq!(m.operation, "POST pods/eviction");
    assert_eq!(m.target_id, format!("c1/pod/default/{victim}"));
    assert!(
        m.target_tags
            .contains(&"flightdeck-machine=w-0".to_string())
    );
    delete(&sim, INFRA, &format!("{VMIS}/c1-w-0"));
    wait_ms(&sim, 6_000);
    wait_for(&sim, |sim| {
        kube(sim).workloads[0].nodes.iter().all(|n| n.ready)
    });
    let (_, node) = get(&sim, "c1", "/api/v1/nodes/c1-w-0");
    assert_eq!(
        node["spec"]["unschedulable"], true,
        "a re-registered node keeps its cordon"
    );
}

#[test]
fn a_kubevirt_vm_deleted_under_running_pods_records_them_lost() {
    let sim = common::sim(412);
    cluster_up(&sim, "c1", 2, "External");
    let (name, node, _, _) = web_pods(&sim, "c1").remove(0);
    let node = node.expect("bound");
    let (code, body) = delete(&sim, INFRA, &format!("{VMS}/{node}"));
    assert_eq!(code, 200, "{body}");
    wait_for(&sim, |sim| !sim.lost_pods().is_empty());
    let lost = sim.lost_pods();
    assert!(
        lost.iter()
            .any(|p| p.name == name && p.cluster == "c1" && p.node == node),
        "{lost:?}"
    );
    assert!(
        lost.iter()
            .all(|p| p.node_ready_at_deletion && p.deletion_began_at.is_some())
    );
}
