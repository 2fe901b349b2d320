//! The Kubernetes API of OpenStack and OpenNebula workload clusters, as far as nodes go:
//! the kubelets of [`crate::kube`] seen through the same wire as a real cluster's, so
//! flightdeck reads them with the same kube-rs client it uses on a real workload cluster.
//!
//! Each Node carries `spec.providerID` in its cloud's format (`openstack:///<server id>`,
//! `opennebula://<VM ID>`), its `spec.podCIDR`, and its address as `InternalIP`. Only
//! reads are served (`GET` of the node list, one node, and discovery): drains are
//! KubeVirt's business. While the cluster's API is down (no serving load-balancer member,
//! no running control-plane VM) every request is a 503; the `observer.*` faults change
//! what the list answers, as they do in process.

use flightdeck_cloud::{Node, Ownership, Timestamp};
use serde_json::{Value, json};

use super::INFRA_CLUSTER;
use super::api::{Answer, fail, json_response, unavailable};
use super::discovery;
use super::store::rfc3339;
use super::workload::node_object;
use crate::State;

/// The cluster UIDs whose nodes answer to the name `cluster` (the incarnations of a
/// cluster of that name, usually one).
fn uids(st: &State, cluster: &str) -> Vec<String> {
    let mut uids: Vec<String> = st
        .nodes
        .values()
        .filter(|n| n.cluster.as_deref() == Some(cluster))
        .map(|n| n.uid.clone())
        .collect();
    uids.sort();
    uids.dedup();
    uids
}

/// Whether `cluster` is an OpenStack or OpenNebula workload cluster this API plays (not
/// a KubeVirt one, not the infra cluster).
pub(crate) fn plays(st: &State, cluster: &str) -> bool {
    cluster != INFRA_CLUSTER
        && !st.kube.workloads.contains_key(cluster)
        && !uids(st, cluster).is_empty()
}

/// The OpenStack and OpenNebula workload clusters this API plays.
pub(crate) fn clusters(st: &State) -> Vec<String> {
    st.nodes
        .values()
        .filter_map(|n| n.cluster.clone())
        .filter(|c| !st.kube.workloads.contains_key(c))
        .collect()
}

/// The nodes of `cluster` as its API lists them now; `None` while it answers nothing.
fn nodes(st: &State, now: Timestamp, cluster: &str) -> Option<Vec<Node>> {
    let mut out: Option<Vec<Node>> = None;
    for uid in uids(st, cluster) {
        let owner = Ownership {
            cluster: cluster.to_string(),
            uid,
        };
        if let Some(ns) = crate::kube::list_nodes(st, now, &owner) {
            out.get_or_insert_with(Vec::new).extend(ns);
        }
    }
    out
}

/// A node as the API server shows it.
fn node_json(st: &State, n: &Node, now: Timestamp) -> Value {
    let sid = n.server_id.as_deref().unwrap_or_default();
    let provider_id = if st.servers.get(sid).is_some() {
        format!("openstack:///{sid}")
    } else {
        format!("opennebula://{sid}")
    };
    let control_plane = n.name.contains("-cp-");
    let mut v = node_object(&n.name, Some(&provider_id), control_plane, n.ready, now);
    v["metadata"]["creationTimestamp"] = json!(rfc3339(n.created_at));
    v["metadata"]["uid"] = json!(format!("node-{sid}"));
    if let Some(cidr) = &n.pod_cidr {
        v["spec"]["podCIDR"] = json!(cidr);
        v["spec"]["podCIDRs"] = json!([cidr]);
    }
    if let (Some(ip), Some(addresses)) = (n.internal_ip, v["status"]["addresses"].as_array_mut()) {
        addresses.insert(0, json!({"type": "InternalIP", "address": ip.to_string()}));
    }
    v
}

/// Answers one request to the API of `cluster`.
pub(crate) fn handle(
    st: &State,
    now: Timestamp,
    cluster: &str,
    method: &str,
    path: &str,
) -> Answer {
    if !method.eq_ignore_ascii_case("GET") {
        return fail(
            405,
            "MethodNotAllowed",
            "this simulated workload cluster serves reads of nodes only",
        );
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => return (json_response(200, &discovery::version()), None),
        ["api"] => return (json_response(200, &discovery::api_versions()), None),
        _ => {}
    }
    let Some(nodes) = nodes(st, now, cluster) else {
        return unavailable();
    };
    match segs.as_slice() {
        ["api", "v1", "nodes"] => {
            let items: Vec<Value> = nodes.iter().map(|n| node_json(st, n, now)).collect();
            let list = json!({
                "apiVersion": "v1",
                "kind": "NodeList",
                "metadata": {"resourceVersion": now.millis().to_string()},
                "items": items,
            });
            (json_response(200, &list), None)
        }
        ["api", "v1", "nodes", name] => match nodes.iter().find(|n| n.name == *name) {
            Some(n) => {
                let mut v = node_json(st, n, now);
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("Node");
                (json_response(200, &v), None)
            }
            None => fail(404, "NotFound", &format!("nodes \"{name}\" not found")),
        },
        _ => fail(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}
