//! Nodes and pods as JSON objects, in the infrastructure and the workload clusters
//! alike: a Node as its kubelet registers it, conditions read and set, and what a pod
//! is (its phase, node and controller; DaemonSet, mirror, finished, whether a drain
//! must move it).

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::store::{at, deleting, labels_of, obj_at, rfc3339, set_at, str_at};

/// The Kubernetes version the simulated servers and kubelets report.
pub(crate) const KUBE_VERSION: &str = "v1.24.17";
pub(crate) const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
pub(crate) const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

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
pub(crate) fn set_condition(
    obj: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    now: Timestamp,
) {
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

pub(crate) fn set_node_ready(node: &mut Value, ready: bool, now: Timestamp) {
    if ready {
        set_condition(node, "Ready", "True", "KubeletReady", now);
    } else {
        set_condition(node, "Ready", "False", "KubeletNotReady", now);
    }
}

pub(crate) fn node_is_ready(node: &Value) -> bool {
    condition_true(node, "Ready")
}

pub(crate) fn node_schedulable(node: &Value) -> bool {
    node_is_ready(node)
        && at(node, &["spec", "unschedulable"]).and_then(Value::as_bool) != Some(true)
}

pub(crate) fn is_control_plane_node(node: &Value) -> bool {
    labels_of(node).contains_key(CONTROL_PLANE_LABEL)
}

pub(crate) fn pod_is_ready(pod: &Value) -> bool {
    condition_true(pod, "Ready")
}

pub(crate) fn pod_phase(pod: &Value) -> &str {
    str_at(pod, &["status", "phase"]).unwrap_or("Pending")
}

pub(crate) fn pod_node(pod: &Value) -> Option<&str> {
    str_at(pod, &["spec", "nodeName"]).filter(|n| !n.is_empty())
}

pub(crate) fn pod_ns(pod: &Value) -> &str {
    str_at(pod, &["metadata", "namespace"]).unwrap_or("")
}

pub(crate) fn controller_of(pod: &Value) -> Option<&Value> {
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
