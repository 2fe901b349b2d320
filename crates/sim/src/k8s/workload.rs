//! What runs inside the clusters: the guest Node of every running VMI of a flightdeck
//! cluster (its kubelet), DaemonSet (`kube-proxy`) and mirror (`kube-apiserver`) pods,
//! the `web` app (a ReplicaSet-like controller and a scheduler), pod startup and
//! graceful deletion, and PodDisruptionBudget status as the disruption controller
//! computes it.
//!
//! A guest node registers `node_register` after its VMI runs (named for the VM, with
//! `spec.providerID: kubevirt://<vm>`) and turns Ready `node_ready` later. A re-created
//! VMI brings its existing Node back to Ready and keeps its `spec.unschedulable`. When
//! the VMI is gone the Node is NotReady (it stays until someone deletes it), and pods
//! that had to leave it but had not are killed on the spot.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_spec::FaultKind;
use serde_json::{Map, Value, json};

use super::store::{
    Kind, Store, at, deleting, labels_of, name_of, obj_at, rfc3339, set_at, str_at,
};
use super::{
    DEFAULT_GRACE_SECONDS, Event, INFRA_CLUSTER, KUBE_WORKLOAD_CLUSTERS_MAX, POD_START_MS, VmiRef,
    Workload, after, kubevirt, tags_of_labels, uid_of,
};
use crate::{Event as SimEvent, State, faults};

/// The Kubernetes version the simulated servers and kubelets report.
pub(crate) const KUBE_VERSION: &str = "v1.24.17";
const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The most pods the ReplicaSet controller creates for one ReplicaSet.
const REPLICAS_MAX: u64 = 100;

/// A Node object, Ready or not.
pub(crate) fn node_object(
    name: &str,
    provider_id: Option<&str>,
    control_plane: bool,
    ready: bool,
    now: Timestamp,
) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    });
    if control_plane {
        obj_at(&mut labels, &[]).insert(CONTROL_PLANE_LABEL.into(), json!(""));
    }
    let mut node = json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "addresses": [{"type": "Hostname", "address": name}],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "nodeInfo": {
                "kubeletVersion": KUBE_VERSION,
                "kubeProxyVersion": KUBE_VERSION,
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.6.20",
                "kernelVersion": "6.1.0-18-amd64",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    });
    if let Some(p) = provider_id {
        set_at(&mut node, &["spec", "providerID"], json!(p));
    }
    set_node_ready(&mut node, ready, now);
    node
}

fn condition_true(obj: &Value, kind: &str) -> bool {
    at(obj, &["status", "conditions"])
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Sets condition `kind` to `status` (keeping its transition time if unchanged).
fn set_condition(obj: &mut Value, kind: &str, status: &str, reason: &str, now: Timestamp) {
    let conditions = obj_at(obj, &["status"])
        .entry("conditions")
        .or_insert(json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let existing = list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind));
    match existing {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {}
        Some(c) => {
            *c = json!({"type": kind, "status": status, "reason": reason,
                "lastTransitionTime": rfc3339(now)});
        }
        None => list.push(json!({"type": kind, "status": status, "reason": reason,
            "lastTransitionTime": rfc3339(now)})),
    }
}

fn set_node_ready(node: &mut Value, ready: bool, now: Timestamp) {
    if ready {
        set_condition(node, "Ready", "True", "KubeletReady", now);
    } else {
        set_condition(node, "Ready", "False", "KubeletNotReady", now);
    }
}

pub(crate) fn node_is_ready(node: &Value) -> bool {
    condition_true(node, "Ready")
}

fn node_schedulable(node: &Value) -> bool {
    node_is_ready(node)
        && at(node, &["spec", "unschedulable"]).and_then(Value::as_bool) != Some(true)
}

fn is_control_plane_node(node: &Value) -> bool {
    labels_of(node).contains_key(CONTROL_PLANE_LABEL)
}

pub(crate) fn pod_is_ready(pod: &Value) -> bool {
    condition_true(pod, "Ready")
}

fn pod_phase(pod: &Value) -> &str {
    str_at(pod, &["status", "phase"]).unwrap_or("Pending")
}

fn pod_node(pod: &Value) -> Option<&str> {
    str_at(pod, &["spec", "nodeName"]).filter(|n| !n.is_empty())
}

fn pod_ns(pod: &Value) -> &str {
    str_at(pod, &["metadata", "namespace"]).unwrap_or("")
}

fn controller_of(pod: &Value) -> Option<&Value> {
    at(pod, &["metadata", "ownerReferences"])
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

pub(crate) fn is_daemonset_pod(pod: &Value) -> bool {
    controller_of(pod).is_some_and(|r| r.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
}

pub(crate) fn is_mirror_pod(pod: &Value) -> bool {
    at(pod, &["metadata", "annotations", MIRROR_ANNOTATION]).is_some()
}

/// Succeeded or Failed: nothing runs any more.
pub(crate) fn finished(pod: &Value) -> bool {
    matches!(pod_phase(pod), "Succeeded" | "Failed")
}

/// Whether a drain must move the pod off its node: not a DaemonSet or mirror pod, not
/// already being deleted, not finished.
pub(crate) fn must_leave(pod: &Value) -> bool {
    !is_daemonset_pod(pod) && !is_mirror_pod(pod) && !deleting(pod) && !finished(pod)
}

/// Creates workload cluster `cluster` with what a fresh cluster holds, unless it exists
/// or [`KUBE_WORKLOAD_CLUSTERS_MAX`] are reached. Answers whether it exists now.
pub(crate) fn ensure(st: &mut State, now: Timestamp, cluster: &str) -> bool {
    if cluster == INFRA_CLUSTER || cluster.is_empty() {
        return false;
    }
    if st.kube.workloads.contains_key(cluster) {
        return true;
    }
    if st.kube.workloads.len() >= KUBE_WORKLOAD_CLUSTERS_MAX {
        return false;
    }
    let mut store = Store::default();
    let make = |st: &mut State, store: &mut Store, kind: Kind, ns: &str, obj: Value| {
        let uid = st.kube.uid();
        store.create(kind, ns, obj, uid, now)
    };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        make(st, &mut store, Kind::Namespace, "", obj);
    }
    let svc = json!({
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
        "status": {"loadBalancer": {}},
    });
    make(st, &mut store, Kind::Service, "default", svc);
    let ds = json!({
        "metadata": {"name": "kube-proxy", "labels": {"k8s-app": "kube-proxy"}},
        "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
            "template": {"metadata": {"labels": {"k8s-app": "kube-proxy"}},
                "spec": {"containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.24.17"}]}}},
        "status": {},
    });
    make(st, &mut store, Kind::DaemonSet, "kube-system", ds);
    let hash = st.kube.suffix(10);
    let replicas = st.config.workload_replicas.min(REPLICAS_MAX as usize);
    let rs = json!({
        "metadata": {"name": format!("web-{hash}"), "labels": {"app": "web", "pod-template-hash": hash}},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": hash}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}],
                    "terminationGracePeriodSeconds": DEFAULT_GRACE_SECONDS}}},
        "status": {"replicas": 0},
    });
    make(st, &mut store, Kind::ReplicaSet, "default", rs);
    let pdb = json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {},
    });
    make(st, &mut store, Kind::Pdb, "default", pdb);
    st.kube.workloads.insert(
        cluster.to_string(),
        Workload {
            store,
            up: false,
            node_tags: BTreeMap::new(),
        },
    );
    true
}

fn find_vmi<'a>(st: &'a State, name: &str, uid: Option<&str>) -> Option<&'a Value> {
    st.kube
        .infra
        .list(Kind::Vmi, None)
        .find(|v| name_of(v) == name && uid.is_none_or(|u| uid_of(v) == u))
}

fn vmi_running(vmi: &Value) -> bool {
    str_at(vmi, &["status", "phase"]) == Some("Running") && !deleting(vmi)
}

/// A running VMI's kubelet registers (or re-registers) its Node.
pub(crate) fn register(st: &mut State, t: Timestamp, r: &VmiRef) {
    let Some(vmi) = st
        .kube
        .infra
        .get(Kind::Vmi, &r.ns, &r.name)
        .filter(|v| uid_of(v) == r.uid && vmi_running(v))
        .cloned()
    else {
        return;
    };
    let Some(cluster) = kubevirt::cluster_of(&vmi) else {
        return;
    };
    if !ensure(st, t, &cluster) {
        return;
    }
    let uid = st.kube.uid();
    let tags = tags_of_labels(&labels_of(&vmi));
    let Some(w) = st.kube.workloads.get_mut(&cluster) else {
        return;
    };
    if !w.store.contains(Kind::Node, "", &r.name) {
        let node = node_object(
            &r.name,
            Some(&format!("kubevirt://{}", r.name)),
            kubevirt::is_control_plane(&vmi),
            false,
            t,
        );
        if w.store.create(Kind::Node, "", node, uid, t).is_none() {
            return;
        }
    }
    w.node_tags.insert(r.name.clone(), tags);
    let latency = st.config.latencies.node_ready;
    after(
        st,
        t,
        latency,
        Event::NodeReady {
            cluster,
            node: r.name.clone(),
            vmi_uid: r.uid.clone(),
        },
    );
}

/// The kubelet of `node` reports Ready (if its VMI still runs).
pub(crate) fn node_ready(st: &mut State, t: Timestamp, cluster: &str, node: &str, vmi_uid: &str) {
    if !find_vmi(st, node, Some(vmi_uid)).is_some_and(vmi_running) {
        return;
    }
    if let Some(w) = st.kube.workloads.get_mut(cluster) {
        w.store
            .modify(Kind::Node, "", node, |n| set_node_ready(n, true, t));
    }
}

/// The guest Node of VMI `vmi` in `cluster` (if registered), and the pods that must
/// still leave it (`<namespace>/<name>`).
pub(crate) fn guest_pods_left(
    st: &State,
    cluster: &str,
    vmi: &str,
) -> (Option<String>, Vec<String>) {
    let Some(w) = st.kube.workloads.get(cluster) else {
        return (None, Vec::new());
    };
    if !w.store.contains(Kind::Node, "", vmi) {
        return (None, Vec::new());
    }
    let pods = w
        .store
        .list(Kind::Pod, None)
        .filter(|p| pod_node(p) == Some(vmi) && must_leave(p))
        .map(|p| format!("{}/{}", pod_ns(p), name_of(p)))
        .collect();
    (Some(vmi.to_string()), pods)
}

/// VMI `vmi` of `cluster` is gone: its Node goes NotReady and the pods that had to
/// leave it are killed abruptly (their controllers replace them).
pub(crate) fn guest_gone(st: &mut State, t: Timestamp, cluster: &str, vmi: &str) {
    let Some(w) = st.kube.workloads.get_mut(cluster) else {
        return;
    };
    w.store
        .modify(Kind::Node, "", vmi, |n| set_node_ready(n, false, t));
    let killed: Vec<(String, String)> = w
        .store
        .list(Kind::Pod, None)
        .filter(|p| pod_node(p) == Some(vmi) && must_leave(p))
        .map(|p| (pod_ns(p).to_string(), name_of(p).to_string()))
        .collect();
    for (ns, name) in killed {
        w.store.remove(Kind::Pod, &ns, &name);
    }
}

/// Deletes pod `ns/name` gracefully: it gets `deletionTimestamp` (now + grace) and
/// `deletionGracePeriodSeconds` and is gone when the grace period is over. `grace` is
/// the request's `gracePeriodSeconds` (default: the pod's
/// `terminationGracePeriodSeconds`, else 30); 0, or a pod on no node, goes at once.
/// Answers the pod as it is after the call (`None`: no such pod).
pub(crate) fn delete_pod(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    ns: &str,
    name: &str,
    grace: Option<u64>,
) -> Option<Value> {
    let pod = st.kube.store(cluster)?.get(Kind::Pod, ns, name)?.clone();
    let grace = grace
        .or_else(|| at(&pod, &["spec", "terminationGracePeriodSeconds"]).and_then(Value::as_u64))
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .min(86_400 * 365);
    let store = st.kube.store_mut(cluster)?;
    if grace == 0 || pod_node(&pod).is_none() {
        return store.remove(Kind::Pod, ns, name);
    }
    if let Some(current) =
        at(&pod, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_u64)
        && current <= grace
    {
        return Some(pod);
    }
    let updated = store.modify(Kind::Pod, ns, name, |p| {
        let meta = obj_at(p, &["metadata"]);
        meta.insert(
            "deletionTimestamp".into(),
            json!(rfc3339(now.plus_millis(grace * 1000))),
        );
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    });
    st.schedule(
        now.plus_millis(grace * 1000),
        SimEvent::K8s(Event::PodGone {
            cluster: cluster.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            uid: uid_of(&pod).to_string(),
        }),
    );
    updated
}

/// A bound pod's containers start: Running and Ready (if its node is Ready).
pub(crate) fn pod_start(
    st: &mut State,
    t: Timestamp,
    cluster: &str,
    ns: &str,
    name: &str,
    uid: &str,
) {
    st.kube.pods_starting.remove(uid);
    let Some(store) = st.kube.store_mut(cluster) else {
        return;
    };
    let Some(pod) = store.get(Kind::Pod, ns, name).filter(|p| uid_of(p) == uid) else {
        return;
    };
    if deleting(pod) || pod_phase(pod) != "Pending" {
        return;
    }
    let ready = pod_node(pod)
        .and_then(|n| store.get(Kind::Node, "", n))
        .is_some_and(node_is_ready);
    if !ready {
        return;
    }
    store.modify(Kind::Pod, ns, name, |p| {
        let containers: Vec<Value> = at(p, &["spec", "containers"])
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        json!({"name": c.get("name").cloned().unwrap_or(json!("main")),
                            "image": c.get("image").cloned().unwrap_or(json!("")),
                            "ready": true, "started": true, "restartCount": 0,
                            "state": {"running": {"startedAt": rfc3339(t)}}})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let status = obj_at(p, &["status"]);
        status.insert("phase".into(), json!("Running"));
        status.insert("startTime".into(), json!(rfc3339(t)));
        status.insert("containerStatuses".into(), Value::Array(containers));
        for c in ["Initialized", "ContainersReady", "Ready"] {
            set_condition(p, c, "True", "", t);
        }
    });
}

pub(crate) fn reconcile(st: &mut State, now: Timestamp) {
    let names: Vec<String> = st.kube.workloads.keys().cloned().collect();
    // One walk of the infra VMIs for every cluster: whose API serves, and which VMIs run.
    let mut serving_apis: std::collections::BTreeSet<String> = Default::default();
    let mut running_vmis: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in st.kube.infra.list(Kind::Vmi, None) {
        let Some(cluster) = kubevirt::cluster_label(v) else {
            continue;
        };
        if kubevirt::is_control_plane(v) && kubevirt::api_serving(st, v, now) {
            serving_apis.insert(cluster.to_string());
        }
        if vmi_running(v) {
            running_vmis
                .entry(cluster.to_string())
                .or_default()
                .push(name_of(v).to_string());
        }
    }
    for cluster in &names {
        let serving = serving_apis.contains(cluster);
        let running = running_vmis.remove(cluster).unwrap_or_default();
        let Some(w) = st.kube.workloads.get_mut(cluster) else {
            continue;
        };
        w.up = serving;
        // A Ready node whose VMI does not run any more stops reporting.
        let stale: Vec<String> = w
            .store
            .list(Kind::Node, None)
            .filter(|n| node_is_ready(n) && !running.iter().any(|r| r == name_of(n)))
            .map(|n| name_of(n).to_string())
            .collect();
        for n in stale {
            w.store
                .modify(Kind::Node, "", &n, |n| set_node_ready(n, false, now));
        }
        // Without an API server no controller, scheduler or kubelet gets anything done.
        if serving {
            system_pods(st, now, cluster);
            replica_sets(st, now, cluster);
        }
    }
    let mut clusters = vec![INFRA_CLUSTER.to_string()];
    clusters.extend(names);
    for cluster in &clusters {
        let up = cluster == INFRA_CLUSTER || st.kube.workloads.get(cluster).is_some_and(|w| w.up);
        if up {
            schedule_pods(st, now, cluster);
        }
        pod_readiness(st, now, cluster);
        pdb_status(st, now, cluster);
    }
    let live: std::collections::BTreeSet<String> = clusters
        .iter()
        .filter_map(|c| st.kube.store(c))
        .flat_map(|s| s.list(Kind::Pod, None).map(|p| uid_of(p).to_string()))
        .collect();
    st.kube.pods_starting.retain(|uid| live.contains(uid));
}

/// The DaemonSet pod on every node and the mirror pod on every Ready control-plane
/// node (the kubelet re-creates either if deleted); pods of removed nodes go.
fn system_pods(st: &mut State, now: Timestamp, cluster: &str) {
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let ds_uid = store
        .get(Kind::DaemonSet, "kube-system", "kube-proxy")
        .map(|d| uid_of(d).to_string());
    let nodes: Vec<(String, bool, bool)> = store
        .list(Kind::Node, None)
        .map(|n| {
            (
                name_of(n).to_string(),
                is_control_plane_node(n),
                node_is_ready(n),
            )
        })
        .collect();
    let mut wanted = Vec::new();
    for (node, cp, ready) in &nodes {
        if let Some(ds_uid) = &ds_uid {
            let name = format!("kube-proxy-{node}");
            if !store.contains(Kind::Pod, "kube-system", &name) {
                wanted.push(json!({
                    "metadata": {"name": name, "labels": {"k8s-app": "kube-proxy"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                            "name": "kube-proxy", "uid": ds_uid, "controller": true,
                            "blockOwnerDeletion": true}]},
                    "spec": {"nodeName": node, "priorityClassName": "system-node-critical",
                        "containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.24.17"}],
                        "terminationGracePeriodSeconds": 30},
                    "status": {"phase": "Pending"},
                }));
            }
        }
        let name = format!("kube-apiserver-{node}");
        if *cp && *ready && !store.contains(Kind::Pod, "kube-system", &name) {
            wanted.push(json!({
                "metadata": {"name": name, "labels": {"component": "kube-apiserver", "tier": "control-plane"},
                    "annotations": {MIRROR_ANNOTATION: "3d4b1c2e", "kubernetes.io/config.source": "file"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                        "uid": "", "controller": true}]},
                "spec": {"nodeName": node, "priorityClassName": "system-node-critical",
                    "containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.24.17"}]},
                "status": {"phase": "Pending"},
            }));
        }
    }
    // Pod garbage collection: pods bound to a node that no longer exists go.
    let orphans: Vec<(String, String)> = store
        .list(Kind::Pod, None)
        .filter(|p| pod_node(p).is_some_and(|n| !nodes.iter().any(|(m, _, _)| m == n)))
        .map(|p| (pod_ns(p).to_string(), name_of(p).to_string()))
        .collect();
    for pod in wanted {
        let uid = st.kube.uid();
        if let Some(s) = st.kube.store_mut(cluster) {
            s.create(Kind::Pod, "kube-system", pod, uid, now);
        }
    }
    if let Some(s) = st.kube.store_mut(cluster) {
        for (ns, name) in orphans {
            s.remove(Kind::Pod, &ns, &name);
        }
    }
}

/// Whether `labels` match the label selector `selector` (`matchLabels` and
/// `matchExpressions`); an empty selector matches everything, a missing one nothing.
pub(crate) fn selector_matches(
    selector: Option<&Value>,
    labels: &BTreeMap<String, String>,
) -> bool {
    let Some(sel) = selector.filter(|s| s.is_object()) else {
        return false;
    };
    let by_labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
        });
    let by_expressions = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| {
            es.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let have = labels.get(key).map(String::as_str);
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => have.is_some_and(|h| values.contains(&h)),
                    Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
                    Some("Exists") => have.is_some(),
                    Some("DoesNotExist") => have.is_none(),
                    _ => false,
                }
            })
        });
    by_labels && by_expressions
}

/// Keeps every ReplicaSet at `spec.replicas` live pods: a pod gone or being deleted is
/// replaced by a new one (new name, new uid); extra pods are deleted.
fn replica_sets(st: &mut State, now: Timestamp, cluster: &str) {
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let sets = store.list_owned(Kind::ReplicaSet, None);
    for rs in sets {
        let Some(store) = st.kube.store(cluster) else {
            return;
        };
        let ns = pod_ns(&rs).to_string();
        let rs_name = name_of(&rs).to_string();
        let rs_uid = uid_of(&rs).to_string();
        let desired = at(&rs, &["spec", "replicas"])
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .min(REPLICAS_MAX);
        let owned: Vec<&Value> = store
            .list(Kind::Pod, Some(&ns))
            .filter(|p| {
                controller_of(p)
                    .and_then(|r| r.get("uid"))
                    .and_then(Value::as_str)
                    == Some(&rs_uid)
            })
            .collect();
        let live: Vec<String> = owned
            .iter()
            .filter(|p| !deleting(p) && !finished(p))
            .map(|p| name_of(p).to_string())
            .collect();
        let ready = owned
            .iter()
            .filter(|p| !deleting(p) && pod_is_ready(p))
            .count();
        let template = at(&rs, &["spec", "template"]).cloned().unwrap_or(json!({}));
        let missing = desired.saturating_sub(live.len() as u64);
        let extra: Vec<String> = live
            .iter()
            .rev()
            .take(usize::try_from((live.len() as u64).saturating_sub(desired)).unwrap_or(0))
            .cloned()
            .collect();
        for _ in 0..missing {
            let name = format!("{rs_name}-{}", st.kube.suffix(5));
            let uid = st.kube.uid();
            let mut meta = json!({
                "name": name,
                "labels": at(&template, &["metadata", "labels"]).cloned().unwrap_or(json!({})),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": rs_name, "uid": rs_uid, "controller": true, "blockOwnerDeletion": true}],
            });
            if let Some(a) = at(&template, &["metadata", "annotations"]) {
                set_at(&mut meta, &["annotations"], a.clone());
            }
            let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
            let spec_map = obj_at(&mut spec, &[]);
            spec_map
                .entry("terminationGracePeriodSeconds")
                .or_insert(json!(DEFAULT_GRACE_SECONDS));
            spec_map.insert("schedulerName".into(), json!("default-scheduler"));
            let pod = json!({"metadata": meta, "spec": spec, "status": {"phase": "Pending", "qosClass": "BestEffort"}});
            if let Some(s) = st.kube.store_mut(cluster) {
                s.create(Kind::Pod, &ns, pod, uid, now);
            }
        }
        for name in extra {
            delete_pod(st, now, cluster, &ns, &name, None);
        }
        let live_now = live.len() as u64 + missing;
        if let Some(s) = st.kube.store_mut(cluster) {
            s.modify(Kind::ReplicaSet, &ns, &rs_name, |r| {
                let generation = at(r, &["metadata", "generation"])
                    .cloned()
                    .unwrap_or(json!(1));
                let status = obj_at(r, &["status"]);
                status.insert(
                    "replicas".into(),
                    json!(live_now.min(desired.max(live.len() as u64))),
                );
                status.insert("readyReplicas".into(), json!(ready));
                status.insert("availableReplicas".into(), json!(ready));
                status.insert("observedGeneration".into(), generation);
            });
        }
    }
}

/// Binds Pending pods without a node to a Ready schedulable node (in a workload
/// cluster a worker, the one with the fewest pods of the same app; control-plane nodes
/// are tainted NoSchedule), and starts bound pods whose node is Ready.
fn schedule_pods(st: &mut State, now: Timestamp, cluster: &str) {
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let pending: Vec<Value> = store
        .list(Kind::Pod, None)
        .filter(|p| !deleting(p) && pod_phase(p) == "Pending" && pod_node(p).is_none())
        .cloned()
        .collect();
    for pod in pending {
        let Some(store) = st.kube.store(cluster) else {
            return;
        };
        let app = labels_of(&pod).get("app").cloned();
        let load = |node: &str| {
            store
                .list(Kind::Pod, None)
                .filter(|p| !deleting(p) && pod_node(p) == Some(node))
                .filter(|p| app.is_none() || labels_of(p).get("app") == app.as_ref())
                .count()
        };
        // Pods of an app spread over the workers (the fewest of the app's pods first,
        // a soft spread). Control-plane nodes carry kubeadm's
        // `node-role.kubernetes.io/control-plane:NoSchedule` taint: app pods wait for a
        // worker, as in a real cluster.
        let role_ok = |n: &Value| cluster == INFRA_CLUSTER || !is_control_plane_node(n);
        let candidates: Vec<(bool, usize, String)> = store
            .list(Kind::Node, None)
            .filter(|n| node_schedulable(n) && role_ok(n))
            .map(|n| {
                (
                    is_control_plane_node(n),
                    load(name_of(n)),
                    name_of(n).to_string(),
                )
            })
            .collect();
        let Some((_, _, node)) = candidates.into_iter().min() else {
            continue;
        };
        let (ns, name) = (pod_ns(&pod).to_string(), name_of(&pod).to_string());
        if let Some(s) = st.kube.store_mut(cluster) {
            s.modify(Kind::Pod, &ns, &name, |p| {
                set_at(p, &["spec", "nodeName"], json!(node));
                set_condition(p, "PodScheduled", "True", "", now);
            });
        }
    }
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let to_start: Vec<(String, String, String)> = store
        .list(Kind::Pod, None)
        .filter(|p| !deleting(p) && pod_phase(p) == "Pending")
        .filter(|p| !st.kube.pods_starting.contains(uid_of(p)))
        .filter(|p| {
            pod_node(p)
                .and_then(|n| store.get(Kind::Node, "", n))
                .is_some_and(node_is_ready)
        })
        .map(|p| {
            (
                pod_ns(p).to_string(),
                name_of(p).to_string(),
                uid_of(p).to_string(),
            )
        })
        .collect();
    for (ns, name, uid) in to_start {
        st.kube.pods_starting.insert(uid.clone());
        after(
            st,
            now,
            POD_START_MS,
            Event::PodStart {
                cluster: cluster.to_string(),
                ns,
                name,
                uid,
            },
        );
    }
}

/// A Running pod is Ready exactly while its node is Ready.
fn pod_readiness(st: &mut State, now: Timestamp, cluster: &str) {
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let flips: Vec<(String, String, bool)> = store
        .list(Kind::Pod, None)
        .filter(|p| pod_phase(p) == "Running")
        .filter_map(|p| {
            let node_ready = pod_node(p)
                .and_then(|n| store.get(Kind::Node, "", n))
                .is_some_and(node_is_ready);
            (node_ready != pod_is_ready(p))
                .then(|| (pod_ns(p).to_string(), name_of(p).to_string(), node_ready))
        })
        .collect();
    let Some(store) = st.kube.store_mut(cluster) else {
        return;
    };
    for (ns, name, ready) in flips {
        store.modify(Kind::Pod, &ns, &name, |p| {
            let status = if ready { "True" } else { "False" };
            set_condition(p, "Ready", status, "", now);
            set_condition(p, "ContainersReady", status, "", now);
        });
    }
}

/// The PodDisruptionBudgets in the pod's namespace whose selector matches it.
pub(crate) fn pdbs_for_pod<'a>(store: &'a Store, pod: &Value) -> Vec<&'a Value> {
    let labels = labels_of(pod);
    store
        .list(Kind::Pdb, Some(pod_ns(pod)))
        .filter(|pdb| selector_matches(at(pdb, &["spec", "selector"]), &labels))
        .collect()
}

/// An int-or-percent of `total`, rounded up.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let pct: i64 = v.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((pct * total + 99) / 100)
}

/// Recomputes every PodDisruptionBudget's status as the disruption controller does:
/// healthy pods are Ready and not being deleted nor just disrupted; `k8s.pdbBlocks`
/// holds `disruptionsAllowed` at 0.
fn pdb_status(st: &mut State, now: Timestamp, cluster: &str) {
    let blocked = cluster != INFRA_CLUSTER
        && faults::strike(
            st,
            FaultKind::K8sPdbBlocks,
            now,
            &[format!("{TAG_CLUSTER}{cluster}")],
        );
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let mut updates = Vec::new();
    for pdb in store.list(Kind::Pdb, None) {
        let ns = pod_ns(pdb);
        let selector = at(pdb, &["spec", "selector"]);
        let pods: Vec<&Value> = store
            .list(Kind::Pod, Some(ns))
            .filter(|p| selector_matches(selector, &labels_of(p)))
            .collect();
        let mut disrupted = Map::new();
        if let Some(m) = at(pdb, &["status", "disruptedPods"]).and_then(Value::as_object) {
            for (name, t) in m {
                if pods.iter().any(|p| name_of(p) == name) {
                    disrupted.insert(name.clone(), t.clone());
                }
            }
        }
        let healthy = pods
            .iter()
            .filter(|p| !deleting(p) && pod_is_ready(p) && !disrupted.contains_key(name_of(p)))
            .count() as i64;
        let mut expected = pods.len() as i64;
        let min_available = at(pdb, &["spec", "minAvailable"]);
        let max_unavailable = at(pdb, &["spec", "maxUnavailable"]);
        if min_available.and_then(Value::as_i64).is_none() {
            // Percentages and maxUnavailable count against the controllers' scale.
            let mut owners: BTreeMap<String, i64> = BTreeMap::new();
            for p in &pods {
                if let Some(r) = controller_of(p)
                    && r.get("kind").and_then(Value::as_str) == Some("ReplicaSet")
                {
                    let rs = r.get("name").and_then(Value::as_str).unwrap_or("");
                    let scale = store
                        .get(Kind::ReplicaSet, ns, rs)
                        .and_then(|s| at(s, &["spec", "replicas"]))
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    owners.insert(rs.to_string(), scale);
                }
            }
            if !owners.is_empty() {
                expected = owners.values().sum();
            }
        }
        let desired = match (min_available, max_unavailable) {
            (Some(m), _) => scaled(m, expected).unwrap_or(expected),
            (None, Some(m)) => (expected - scaled(m, expected).unwrap_or(0)).max(0),
            (None, None) => expected,
        };
        let allowed = if blocked {
            0
        } else {
            (healthy - desired).max(0)
        };
        let generation = at(pdb, &["metadata", "generation"])
            .cloned()
            .unwrap_or(json!(1));
        updates.push((
            ns.to_string(),
            name_of(pdb).to_string(),
            json!({
                "observedGeneration": generation,
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "disruptedPods": disrupted,
            }),
            allowed > 0,
        ));
    }
    let Some(store) = st.kube.store_mut(cluster) else {
        return;
    };
    for (ns, name, status, allowed) in updates {
        store.modify(Kind::Pdb, &ns, &name, |p| {
            let conditions = at(p, &["status", "conditions"]).cloned();
            set_at(p, &["status"], status);
            if let Some(c) = conditions {
                set_at(p, &["status", "conditions"], c);
            }
            let (s, reason) = if allowed {
                ("True", "SufficientPods")
            } else {
                ("False", "InsufficientPods")
            };
            set_condition(p, "DisruptionAllowed", s, reason, now);
        });
    }
}
