//! What machines do to the workload clusters they make up, whatever the cloud: a
//! workload cluster created with what a fresh one holds ([`ensure`]), the pods that
//! still had to leave a guest Node when its machine's deletion came, and the guest gone
//! with its machine: the Node is NotReady (it stays until someone deletes it), and pods
//! that had to leave it but had not are killed on the spot, and recorded lost
//! ([`super::lost`]).
//!
//! A fresh workload cluster runs `kube-proxy` (a DaemonSet), the `web` app (a
//! ReplicaSet of `workload_replicas` pods, spread over the workers, with a
//! PodDisruptionBudget of `minAvailable: 1`) and, on OpenStack and OpenNebula, `cache`
//! (one pod keeping data in an `emptyDir`, which takes [`CACHE_GRACE_SECONDS`] to
//! terminate, with a budget of `maxUnavailable: 1`); control-plane nodes add their
//! static `kube-apiserver` pods.

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::lost::lose_pods;
use super::objects::{must_leave, node_is_ready, pod_node, pod_ns, set_node_ready};
use super::store::{Kind, Store, name_of};
use super::{DEFAULT_GRACE_SECONDS, INFRA_CLUSTER, KUBE_WORKLOAD_CLUSTERS_MAX, Workload};
use crate::State;

/// The most pods the ReplicaSet controller creates for one ReplicaSet.
pub(crate) const REPLICAS_MAX: u64 = 100;
/// How long the `cache` pod takes to terminate (its `terminationGracePeriodSeconds`).
pub(crate) const CACHE_GRACE_SECONDS: u64 = 60;

/// Creates workload cluster `cluster` with what a fresh cluster holds, unless it exists
/// or [`KUBE_WORKLOAD_CLUSTERS_MAX`] are reached; `cloud`: its machines are servers or
/// OpenNebula VMs (it keeps its objects compact and draws from a stream of its own).
/// Answers whether it exists now.
pub(crate) fn ensure(st: &mut State, now: Timestamp, cluster: &str, cloud: bool) -> bool {
    if cluster == INFRA_CLUSTER || cluster.is_empty() {
        return false;
    }
    if st.kube.workloads.contains_key(cluster) {
        return true;
    }
    if st.kube.workloads.len() >= KUBE_WORKLOAD_CLUSTERS_MAX {
        return false;
    }
    let w = if cloud {
        Workload {
            store: Store::compacting(),
            cloud,
            rng: Some(st.kube.guest_rng()),
            ..Workload::default()
        }
    } else {
        Workload::default()
    };
    st.kube.workloads.insert(cluster.to_string(), w);
    let make = |st: &mut State, kind: Kind, ns: &str, obj: Value| {
        let uid = st.kube.uid_in(cluster);
        if let Some(store) = st.kube.store_mut(cluster) {
            store.create(kind, ns, obj, uid, now);
        }
    };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        make(st, Kind::Namespace, "", obj);
    }
    let svc = json!({
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
        "status": {"loadBalancer": {}},
    });
    make(st, Kind::Service, "default", svc);
    if cloud && !st.config.guest_workload {
        return true;
    }
    let ds = json!({
        "metadata": {"name": "kube-proxy", "labels": {"k8s-app": "kube-proxy"}},
        "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
            "template": {"metadata": {"labels": {"k8s-app": "kube-proxy"}},
                "spec": {"containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.24.17"}]}}},
        "status": {},
    });
    make(st, Kind::DaemonSet, "kube-system", ds);
    let replicas = st.config.workload_replicas.min(REPLICAS_MAX as usize);
    let web = json!({"containers": [{"name": "web", "image": "nginx:1.25"}],
        "terminationGracePeriodSeconds": DEFAULT_GRACE_SECONDS});
    let hash = st.kube.suffix(cluster, 10);
    make(
        st,
        Kind::ReplicaSet,
        "default",
        replica_set("web", &hash, replicas, web),
    );
    make(
        st,
        Kind::Pdb,
        "default",
        budget("web", json!({"minAvailable": 1})),
    );
    if !cloud {
        // Not yet on KubeVirt: its draws would shift the stream every KubeVirt run
        // shares, and with it where the f9 scenarios' pods land (their drains are
        // built on `web` sitting on the drained VM).
        return true;
    }
    let cache = json!({"containers": [{"name": "cache", "image": "redis:7.2",
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "terminationGracePeriodSeconds": CACHE_GRACE_SECONDS});
    let hash = st.kube.suffix(cluster, 10);
    make(
        st,
        Kind::ReplicaSet,
        "default",
        replica_set("cache", &hash, 1, cache),
    );
    make(
        st,
        Kind::Pdb,
        "default",
        budget("cache", json!({"maxUnavailable": 1})),
    );
    true
}

/// ReplicaSet `<app>-<hash>` of `replicas` pods of `spec`, labelled `app: <app>`.
fn replica_set(app: &str, hash: &str, replicas: usize, spec: Value) -> Value {
    let labels = json!({"app": app, "pod-template-hash": hash});
    json!({
        "metadata": {"name": format!("{app}-{hash}"), "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec}},
        "status": {"replicas": 0},
    })
}

/// PodDisruptionBudget `app` over the pods labelled `app: <app>`, with `spec`'s bound.
fn budget(app: &str, mut spec: Value) -> Value {
    spec["selector"] = json!({"matchLabels": {"app": app}});
    json!({"metadata": {"name": app}, "spec": spec, "status": {}})
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

/// The machine of node `node` of `cluster` begins to be deleted at `t`: noted, with
/// whether the node is Ready, for the pods it will take ([`super::lost`]). `by_api`: the
/// deletion was asked through the cloud's API, not made out of band (an operator's, a
/// fault's).
pub(crate) fn deletion_begins(
    st: &mut State,
    t: Timestamp,
    cluster: &str,
    node: &str,
    by_api: bool,
) {
    let Some(w) = st.kube.workloads.get_mut(cluster) else {
        return;
    };
    let Some(ready) = w.store.peek(Kind::Node, "", node, node_is_ready) else {
        return;
    };
    let cordoned_at = w.cordoned_at.get(node).copied();
    w.deletions_begun
        .entry(node.to_string())
        .or_insert(super::lost::DeletionBegun {
            at: t,
            ready,
            by_api,
            cordoned_at,
        });
}

/// The machine of node `node` of `cluster` is gone: the Node goes NotReady and the pods
/// that had to leave it (or were still leaving) are killed abruptly, recorded lost
/// (their controllers replace them).
pub(crate) fn guest_gone(st: &mut State, t: Timestamp, cluster: &str, node: &str) {
    let killed = lose_pods(st, t, cluster, node);
    let Some(w) = st.kube.workloads.get_mut(cluster) else {
        return;
    };
    w.deletions_begun.remove(node);
    w.cordoned_at.remove(node);
    w.store
        .modify(Kind::Node, "", node, |n| set_node_ready(n, false, t));
    for (ns, name) in killed {
        w.store.remove(Kind::Pod, &ns, &name);
    }
    st.kube.touch(cluster);
}
