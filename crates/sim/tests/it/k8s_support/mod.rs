//! Helpers for the simulated Kubernetes API tests: requests, VMs as flightdeck labels
//! them, and bringing a workload cluster up.
#![allow(dead_code)]

use flightdeck_sim::{INFRA_CLUSTER, KubeRequest, KubeWorld, SimCloud};
use serde_json::{Value, json};

use crate::common::{wait_for, wait_ms};

pub const INFRA: &str = INFRA_CLUSTER;

/// Sends one request; answers the status and the body as JSON (`Null` if not JSON).
pub fn call(
    sim: &SimCloud,
    cluster: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    content_type: Option<&str>,
) -> (u16, Value) {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let resp = sim.kube_request(
        cluster,
        KubeRequest {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            body: body
                .map(|b| serde_json::to_vec(&b).expect("json"))
                .unwrap_or_default(),
            content_type: content_type.map(str::to_string),
        },
    );
    let value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
    (resp.status, value)
}

pub fn get(sim: &SimCloud, cluster: &str, path: &str) -> (u16, Value) {
    call(sim, cluster, "GET", path, None, None)
}

pub fn post(sim: &SimCloud, cluster: &str, path: &str, body: Value) -> (u16, Value) {
    call(
        sim,
        cluster,
        "POST",
        path,
        Some(body),
        Some("application/json"),
    )
}

pub fn merge_patch(sim: &SimCloud, cluster: &str, path: &str, body: Value) -> (u16, Value) {
    call(
        sim,
        cluster,
        "PATCH",
        path,
        Some(body),
        Some("application/merge-patch+json"),
    )
}

pub fn delete(sim: &SimCloud, cluster: &str, path: &str) -> (u16, Value) {
    call(sim, cluster, "DELETE", path, None, None)
}

/// The raw body of a request (watch streams are not one JSON document).
pub fn raw(sim: &SimCloud, cluster: &str, path: &str) -> (u16, String) {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let resp = sim.kube_request(
        cluster,
        KubeRequest {
            method: "GET".into(),
            path: path.into(),
            query: query.into(),
            ..KubeRequest::default()
        },
    );
    (
        resp.status,
        String::from_utf8_lossy(&resp.body).into_owned(),
    )
}

pub fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn rv(v: &Value) -> u64 {
    s(v, &["metadata", "resourceVersion"]).parse().unwrap_or(0)
}

/// A VirtualMachine as flightdeck creates it: labelled with its cluster and machine.
pub fn vm(name: &str, cluster: &str, machine: &str, eviction: &str) -> Value {
    let labels = json!({
        "flightdeck.dev/cluster": cluster,
        "flightdeck.dev/uid": format!("uid-{cluster}"),
        "flightdeck.dev/role": "machine",
        "flightdeck.dev/machine": machine,
    });
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "metadata": {"labels": labels},
                "spec": {"evictionStrategy": eviction, "domain": {"devices": {}}},
            },
        },
    })
}

pub const VMS: &str = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines";
pub const VMIS: &str = "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances";
pub const PODS: &str = "/api/v1/namespaces/default/pods";
pub const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

pub fn create_vm(sim: &SimCloud, name: &str, cluster: &str, machine: &str, eviction: &str) {
    let (code, body) = post(sim, INFRA, VMS, vm(name, cluster, machine, eviction));
    assert_eq!(code, 201, "{body}");
}

pub fn kube(sim: &SimCloud) -> KubeWorld {
    sim.snapshot().kube
}

/// Brings workload cluster `cluster` up with one control-plane VM and `workers`
/// worker VMs (`<cluster>-w-<i>`), and waits until its `web` pods run.
pub fn cluster_up(sim: &SimCloud, cluster: &str, workers: usize, eviction: &str) {
    // Workers first, so that they have registered when the app is scheduled.
    for i in 0..workers {
        create_vm(
            sim,
            &format!("{cluster}-w-{i}"),
            cluster,
            &format!("w-{i}"),
            eviction,
        );
    }
    wait_ms(sim, 60_000);
    create_vm(sim, &format!("{cluster}-cp-0"), cluster, "cp-0", eviction);
    wait_for(sim, |sim| {
        let k = kube(sim);
        k.workloads.iter().any(|w| {
            w.name == cluster
                && w.api_up
                && w.nodes.len() == workers + 1
                && w.nodes.iter().all(|n| n.ready)
                && w.pods
                    .iter()
                    .filter(|p| p.name.starts_with("web-"))
                    .filter(|p| p.phase == "Running" && p.ready)
                    .count()
                    == 2
        })
    });
}

/// The web pods of `cluster`: (name, node, phase, deleting).
pub fn web_pods(sim: &SimCloud, cluster: &str) -> Vec<(String, Option<String>, String, bool)> {
    kube(sim)
        .workloads
        .into_iter()
        .find(|w| w.name == cluster)
        .map(|w| {
            w.pods
                .into_iter()
                .filter(|p| p.name.starts_with("web-"))
                .map(|p| (p.name, p.node, p.phase, p.deleting))
                .collect()
        })
        .unwrap_or_default()
}
