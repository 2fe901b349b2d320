//! virt-controller on the infrastructure cluster: VMs get VMIs that run on infra nodes,
//! deleted VMIs come back with a new uid, and a drained infra node evacuates its VMIs.

use crate::common;
use crate::k8s_support;

use common::{now, sim, wait_for, wait_ms};
use flightdeck_sim::{KubeVmiView, SimCloud, SimFault};
use flightdeck_spec::FaultKind;
use k8s_support::*;
use serde_json::json;

fn vmi(sim: &SimCloud, name: &str) -> Option<KubeVmiView> {
    kube(sim).vmis.into_iter().find(|v| v.name == name)
}

fn running(sim: &SimCloud, name: &str) -> bool {
    vmi(sim, name).is_some_and(|v| v.phase == "Running" && !v.deleting)
}

#[test]
fn a_vm_gets_a_vmi_that_goes_pending_to_running_on_an_infra_node() {
    let sim = sim(20);
    create_vm(&sim, "c1-w-0", "c1", "w-0", "External");
    let first = vmi(&sim, "c1-w-0").expect("the VMI exists at once");
    assert_eq!(first.phase, "Pending");
    assert_eq!(
        first.eviction_strategy.as_deref(),
        Some("External"),
        "copied from the template"
    );
    assert!(first.tags.contains(&"flightdeck-cluster=c1".to_string()));
    let mut phases = vec![first.phase];
    wait_for(&sim, |sim| {
        let p = vmi(sim, "c1-w-0").map(|v| v.phase).unwrap_or_default();
        if phases.last() != Some(&p) {
            phases.push(p.clone());
        }
        p == "Running"
    });
    assert_eq!(phases, ["Pending", "Scheduling", "Scheduled", "Running"]);
    let v = vmi(&sim, "c1-w-0").expect("vmi");
    assert!(v.node.as_deref().is_some_and(|n| n.starts_with("infra-")));
    let took = now(&sim)
        .since(flightdeck_cloud::Timestamp::SIM_EPOCH)
        .as_millis();
    assert!((5_000..=15_000).contains(&took), "{took} ms");
    let (_, vm) = get(&sim, INFRA, &format!("{VMS}/c1-w-0"));
    assert_eq!(vm["status"]["printableStatus"], "Running");
    assert_eq!(vm["status"]["ready"], true);
    let (_, got) = get(&sim, INFRA, &format!("{VMIS}/c1-w-0"));
    assert_eq!(
        got["metadata"]["ownerReferences"][0]["kind"],
        "VirtualMachine"
    );
    assert_eq!(got["metadata"]["labels"]["flightdeck.dev/machine"], "w-0");
}

#[test]
fn vmis_spread_over_the_infra_nodes() {
    let sim = sim(21);
    for i in 0..3 {
        create_vm(
            &sim,
            &format!("c1-w-{i}"),
            "c1",
            &format!("w-{i}"),
            "External",
        );
    }
    wait_for(&sim, |sim| {
        (0..3).all(|i| running(sim, &format!("c1-w-{i}")))
    });
    let mut nodes: Vec<String> = kube(&sim).vmis.into_iter().filter_map(|v| v.node).collect();
    nodes.sort();
    assert_eq!(nodes, ["infra-1", "infra-2", "infra-3"]);
}

#[test]
fn deleting_a_vmi_recreates_it_with_a_new_uid() {
    let sim = sim(22);
    create_vm(&sim, "c1-w-0", "c1", "w-0", "External");
    wait_for(&sim, |sim| running(&sim.clone(), "c1-w-0"));
    let old = vmi(&sim, "c1-w-0").expect("vmi").uid;
    let (code, body) = delete(&sim, INFRA, &format!("{VMIS}/c1-w-0"));
    assert_eq!(code, 200);
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    assert!(vmi(&sim, "c1-w-0").is_some_and(|v| v.deleting));
    wait_for(&sim, |sim| vmi(sim, "c1-w-0").is_some_and(|v| v.uid != old));
    wait_for(&sim, |sim| running(sim, "c1-w-0"));
    let deletions = kube(&sim).vmi_deletions;
    assert_eq!(deletions.len(), 1);
    assert_eq!(deletions[0].uid, old);
    assert_eq!(deletions[0].cause, "DELETE virtualmachineinstances");
}

#[test]
fn halting_or_deleting_a_vm_deletes_its_vmi() {
    let sim = sim(23);
    create_vm(&sim, "a", "c1", "w-0", "External");
    create_vm(&sim, "b", "c1", "w-1", "External");
    wait_for(&sim, |sim| running(sim, "a") && running(sim, "b"));
    let (code, _) = call(
        &sim,
        INFRA,
        "PATCH",
        &format!("{VMS}/a"),
        Some(json!({"spec": {"runStrategy": "Halted"}})),
        Some("application/merge-patch+json"),
    );
    assert_eq!(code, 200);
    assert_eq!(delete(&sim, INFRA, &format!("{VMS}/b")).0, 200);
    assert_eq!(
        get(&sim, INFRA, &format!("{VMS}/b")).0,
        404,
        "a VM goes at once"
    );
    wait_ms(&sim, 6_000);
    assert!(vmi(&sim, "a").is_none() && vmi(&sim, "b").is_none());
    let (_, vm) = get(&sim, INFRA, &format!("{VMS}/a"));
    assert_eq!(vm["status"]["printableStatus"], "Stopped");
    assert_eq!(kube(&sim).vmi_deletions.len(), 2);
}

#[test]
fn drain_infra_node_sets_evacuation_node_only_on_external_vmis_and_migrates_live_migrate_ones() {
    let sim = sim(24);
    // Only infra-1 takes VMIs at first.
    for n in ["infra-2", "infra-3"] {
        merge_patch(
            &sim,
            INFRA,
            &format!("/api/v1/nodes/{n}"),
            json!({"spec": {"unschedulable": true}}),
        );
    }
    create_vm(&sim, "ext", "c1", "w-0", "External");
    create_vm(&sim, "live", "c1", "w-1", "LiveMigrate");
    create_vm(&sim, "none", "c1", "w-2", "None");
    wait_for(&sim, |sim| {
        ["ext", "live", "none"].iter().all(|n| running(sim, n))
    });
    for n in ["infra-2", "infra-3"] {
        merge_patch(
            &sim,
            INFRA,
            &format!("/api/v1/nodes/{n}"),
            json!({"spec": {"unschedulable": false}}),
        );
    }
    let mut fault = SimFault::new(FaultKind::KubevirtDrainInfraNode, now(&sim));
    fault.node = Some("infra-1".into());
    fault.end = Some(now(&sim).plus_millis(120_000));
    sim.inject(fault);
    wait_ms(&sim, 1);
    let k = kube(&sim);
    assert!(
        k.infra_nodes
            .iter()
            .any(|n| n.name == "infra-1" && n.unschedulable)
    );
    let by = |n: &str| vmi(&sim, n).expect("vmi");
    assert_eq!(by("ext").evacuation_node.as_deref(), Some("infra-1"));
    assert_eq!(by("live").evacuation_node, None);
    assert!(by("live").migrating);
    assert_eq!(by("none").evacuation_node, None);
    assert!(!by("none").migrating);
    wait_ms(&sim, 30_000);
    let live = by("live");
    assert!(!live.migrating);
    assert!(
        live.node.as_deref().is_some_and(|n| n != "infra-1"),
        "{live:?}"
    );
    assert_eq!(
        by("ext").node.as_deref(),
        Some("infra-1"),
        "External VMIs wait for someone else"
    );
    // Deleting the evacuated VMI records when the evacuation began.
    let start = now(&sim);
    delete(&sim, INFRA, &format!("{VMIS}/ext"));
    let d = kube(&sim).vmi_deletions.pop().expect("recorded");
    assert_eq!(d.evacuation.as_deref(), Some("infra-1"));
    assert!(d.evacuation_since.is_some_and(|t| t < start));
    // The re-created VMI avoids the drained node; the node comes back at the fault's end.
    wait_for(&sim, |sim| running(sim, "ext"));
    assert_ne!(by("ext").node.as_deref(), Some("infra-1"));
    wait_ms(&sim, 120_000);
    let infra = kube(&sim).infra_nodes;
    assert!(infra.iter().any(|n| n.name == "infra-1"), "{infra:?}");
    assert!(infra.iter().all(|n| !n.unschedulable), "{infra:?}");
}

/// A VM as flightdeck makes it for a kubeadm cluster: its data inline in the
/// `cloudInitNoCloud` volume.
fn vm_with_data(name: &str, cluster: &str, machine: &str, data: &str) -> serde_json::Value {
    use base64::Engine as _;
    let mut v = vm(name, cluster, machine, "External");
    v["spec"]["template"]["spec"]["volumes"] = json!([{
        "name": "cloudinitdisk",
        "cloudInitNoCloud": {"userDataBase64": base64::engine::general_purpose::STANDARD.encode(data)},
    }]);
    v
}

#[test]
fn a_vmi_whose_kubeadm_data_is_broken_never_registers_and_the_simulator_says_why() {
    let sim = sim(20);
    // kubeadm's data (it writes kubeadm's configuration) in an apiVersion kubeadm does
    // not read.
    let data = "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta1\n    kind: InitConfiguration\nruncmd:\n- kubeadm init --config /run/kubeadm/kubeadm.yaml\n";
    let (code, body) = post(
        &sim,
        INFRA,
        VMS,
        vm_with_data("c1-cp-0", "c1", "cp-0", data),
    );
    assert_eq!(code, 201, "{body}");
    wait_for(&sim, |sim| running(sim, "c1-cp-0"));
    wait_ms(&sim, 120_000);
    let (events, _) = sim.boot_events_since(0);
    let failed = events
        .iter()
        .find_map(|e| match e {
            flightdeck_sim::BootEvent::Failed {
                machine, reason, ..
            } if machine == "c1-cp-0" => Some(reason.clone()),
            _ => None,
        })
        .expect("the failed bootstrap is recorded");
    assert!(failed.contains("v1beta1"), "{failed}");
    let k = kube(&sim);
    let nodes = k
        .workloads
        .iter()
        .find(|w| w.name == "c1")
        .map_or(0, |w| w.nodes.len());
    assert_eq!(nodes, 0, "a machine with broken data registers no node");
    assert!(
        !k.workloads.iter().any(|w| w.name == "c1" && w.api_up),
        "a kubeadm control plane that never ran init serves no API"
    );
}

#[test]
fn a_vmi_without_kubeadm_data_registers_as_before() {
    let sim = sim(20);
    let (code, body) = post(
        &sim,
        INFRA,
        VMS,
        vm_with_data("c1-w-0", "c1", "w-0", "#cloud-config\nruncmd: [echo hi]\n"),
    );
    assert_eq!(code, 201, "{body}");
    wait_for(&sim, |sim| {
        kube(sim)
            .workloads
            .iter()
            .any(|w| w.name == "c1" && w.nodes.iter().any(|n| n.name == "c1-w-0"))
    });
    assert!(sim.boot_events_since(0).0.is_empty());
}

#[test]
fn a_service_gets_a_cluster_ip_on_create_and_one_asked_for_must_be_free_and_in_range() {
    let sim = sim(20);
    let svc = |name: &str, ip: Option<&str>| {
        let mut spec = json!({"ports": [{"port": 6443}]});
        if let Some(ip) = ip {
            spec["clusterIP"] = json!(ip);
        }
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
    };
    const SVCS: &str = "/api/v1/namespaces/default/services";
    let (code, first) = post(&sim, INFRA, SVCS, svc("a", None));
    assert_eq!(code, 201, "{first}");
    let (_, second) = post(&sim, INFRA, SVCS, svc("b", None));
    let (a, b) = (
        s(&first, &["spec", "clusterIP"]).to_string(),
        s(&second, &["spec", "clusterIP"]).to_string(),
    );
    assert!(
        a.starts_with("10.96.") && b.starts_with("10.96."),
        "{a} {b}"
    );
    assert_ne!(a, b);
    assert_eq!(first["spec"]["clusterIPs"], json!([a]));
    let (code, taken) = post(&sim, INFRA, SVCS, svc("c", Some(&a)));
    assert_eq!(code, 422, "{taken}");
    assert!(taken.to_string().contains("already allocated"), "{taken}");
    let (code, outside) = post(&sim, INFRA, SVCS, svc("d", Some("192.0.2.1")));
    assert_eq!(code, 422, "{outside}");
    assert!(outside.to_string().contains("spec.clusterIP"), "{outside}");
    let (code, headless) = post(&sim, INFRA, SVCS, svc("e", Some("None")));
    assert_eq!(code, 201, "{headless}");
    assert_eq!(s(&headless, &["spec", "clusterIP"]), "None");
}
