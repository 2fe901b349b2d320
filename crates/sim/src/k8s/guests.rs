//! What the VMIs of the infrastructure cluster do to the workload clusters they make
//! up: a workload cluster created with what a fresh one holds ([`ensure`]), the pods
//! that still had to leave a guest Node when its VMI's deletion came, and the guest gone
//! with its VMI: the Node is NotReady (it stays until someone deletes it), and pods
//! that had to leave it but had not are killed on the spot.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::objects::{must_leave, pod_node, pod_ns, set_node_ready};
use super::store::{Kind, Store, name_of};
use super::{DEFAULT_GRACE_SECONDS, INFRA_CLUSTER, KUBE_WORKLOAD_CLUSTERS_MAX, Workload};
use crate::State;

/// The most pods the ReplicaSet controller creates for one ReplicaSet.
pub(crate) const REPLICAS_MAX: u64 = 100;

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
