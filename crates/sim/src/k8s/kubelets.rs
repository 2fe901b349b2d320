//! The Kubernetes API of OpenStack and OpenNebula workload clusters, as far as nodes go:
//! the kubelets of [`crate::kube`] seen through the same wire as a real cluster's, so
//! flightdeck reads them with the same kube-rs client it uses on a real workload cluster.
//!
//! Each Node carries `spec.providerID` in its cloud's format (`openstack:///<server id>`,
//! `opennebula://<VM ID>`), its `spec.podCIDR`, and its address as `InternalIP`. Only
//! reads are served (`GET` of the node list, one node, a watch of nodes, and discovery):
//! drains are KubeVirt's business. While the cluster's API is down (no serving
//! load-balancer member, no running control-plane VM) every request is a 503; the
//! `observer.*` faults change what the list answers, as they do in process.
//!
//! Nodes are made from the simulator's state on each request, so each cluster keeps a
//! [`NodeLog`] of what its API served: every request first records the nodes that
//! appeared, changed or went since the last one as events with a new resourceVersion.
//! A list answers that resourceVersion; a watch answers the events after the one it
//! gives, or `410 Expired` when those are no longer kept (the client lists again).

use std::collections::{BTreeMap, VecDeque};

use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_cloud::{Node, Ownership, Timestamp};
use flightdeck_spec::FaultKind;
use serde_json::{Value, json};

use super::api::{
    Answer, expired_line, fail, is_watch, json_response, query, unavailable, watch_answer,
    watch_line, watch_since,
};
use super::discovery;
use super::store::rfc3339;
use super::workload::node_object;
use super::{INFRA_CLUSTER, KubeRequest};
use crate::{State, faults};

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
fn nodes(st: &mut State, now: Timestamp, cluster: &str) -> Option<Vec<Node>> {
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

/// The most node events one cluster keeps for watches.
pub(crate) const NODE_EVENTS_MAX: usize = 1_000;

/// What the API of one played cluster served of its nodes.
#[derive(Debug, Default)]
pub(crate) struct NodeLog {
    /// The newest resourceVersion.
    version: u64,
    /// Each node as last served, and its object.
    current: BTreeMap<String, (Node, Value)>,
    /// `(resourceVersion, type, object)`, oldest first, at most [`NODE_EVENTS_MAX`].
    events: VecDeque<(u64, &'static str, Value)>,
}

impl NodeLog {
    fn push(&mut self, kind: &'static str, mut object: Value) -> Value {
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        if self.events.len() == NODE_EVENTS_MAX {
            self.events.pop_front();
        }
        self.events.push_back((self.version, kind, object.clone()));
        object
    }

    /// Records the nodes as they are now: an event for each that appeared, changed or
    /// went since the last request. `object` makes a node's object, only for those that
    /// changed.
    fn record(&mut self, now: Vec<Node>, object: impl Fn(&Node) -> Value) {
        let mut seen = BTreeMap::new();
        for node in now {
            let name = node.name.clone();
            let object = match self.current.remove(&name) {
                Some((old, old_object)) if old == node => old_object,
                Some(_) => self.push("MODIFIED", object(&node)),
                None => self.push("ADDED", object(&node)),
            };
            seen.insert(name, (node, object));
        }
        let gone = std::mem::replace(&mut self.current, seen);
        for (_, (_, object)) in gone {
            self.push("DELETED", object);
        }
    }

    /// The events after `since`; `Err(oldest kept)` when some of them are no longer kept.
    fn after(&self, since: u64) -> Result<Vec<&(u64, &'static str, Value)>, u64> {
        let oldest = self.events.front().map_or(self.version + 1, |e| e.0);
        if since + 1 < oldest && since < self.version {
            return Err(oldest);
        }
        Ok(self.events.iter().filter(|e| e.0 > since).collect())
    }
}

fn not_found_path() -> Answer {
    fail(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// The watch of a cluster's nodes from `params`' resourceVersion.
fn watch(log: &NodeLog, params: &BTreeMap<String, String>) -> Answer {
    let since = match watch_since(params) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut body = Vec::new();
    match since.map(|s| (s, log.after(s))) {
        None => {
            for (_, object) in log.current.values() {
                body.extend(watch_line("ADDED", object));
            }
        }
        Some((since, Err(oldest))) => body.extend(expired_line(since, oldest)),
        Some((_, Ok(events))) => {
            for (_, kind, object) in events {
                body.extend(watch_line(kind, object));
            }
        }
    }
    watch_answer(body)
}

/// Answers one request to the API of `cluster`.
pub(crate) fn handle(st: &mut State, now: Timestamp, cluster: &str, req: &KubeRequest) -> Answer {
    if !req.method.eq_ignore_ascii_case("GET") {
        return fail(
            405,
            "MethodNotAllowed",
            "this simulated workload cluster serves reads of nodes only",
        );
    }
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => return (json_response(200, &discovery::version()), None),
        ["api"] => return (json_response(200, &discovery::api_versions()), None),
        ["api", "v1", "nodes"] | ["api", "v1", "nodes", _] | ["api", "v1", "watch", "nodes"] => {}
        _ => return not_found_path(),
    }
    let Some(nodes) = nodes(st, now, cluster) else {
        return unavailable();
    };
    let mut logs = std::mem::take(&mut st.kube.kubelet_logs);
    let log = logs.entry(cluster.to_string()).or_default();
    log.record(nodes, |n| node_json(st, n, now));
    let params = query(&req.query);
    let answer = answer(log, &segs, &params);
    st.kube.kubelet_logs = logs;
    let watching = matches!(segs.as_slice(), ["api", "v1", "watch", "nodes"])
        || (segs.as_slice() == ["api", "v1", "nodes"] && is_watch(&params));
    if watching {
        reorder(st, now, cluster, answer)
    } else {
        answer
    }
}

/// `k8s.watchReorder`: a watch answer of two or more events, while the fault holds for
/// `cluster`, comes with its events in reverse order (counted as the fault's effect
/// only then: one event cannot be out of order).
fn reorder(st: &mut State, now: Timestamp, cluster: &str, answer: Answer) -> Answer {
    let (mut resp, extra) = answer;
    let tags = [format!("{TAG_CLUSTER}{cluster}")];
    if resp.status != 200 || !faults::any_active_for(st, FaultKind::K8sWatchReorder, now, &tags) {
        return (resp, extra);
    }
    let lines: Vec<&[u8]> = resp
        .body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    if lines.len() < 2 {
        return (resp, extra);
    }
    faults::strike(st, FaultKind::K8sWatchReorder, now, &tags);
    let mut body = Vec::with_capacity(resp.body.len());
    for line in lines.into_iter().rev() {
        body.extend_from_slice(line);
        body.push(b'\n');
    }
    resp.body = body;
    (resp, extra)
}

/// The answer to a read of `log`'s nodes at `segs` (already recorded).
fn answer(log: &NodeLog, segs: &[&str], params: &BTreeMap<String, String>) -> Answer {
    match segs {
        ["api", "v1", "watch", "nodes"] => watch(log, params),
        ["api", "v1", "nodes"] if is_watch(params) => watch(log, params),
        ["api", "v1", "nodes"] => {
            let items: Vec<&Value> = log.current.values().map(|(_, v)| v).collect();
            let list = json!({
                "apiVersion": "v1",
                "kind": "NodeList",
                "metadata": {"resourceVersion": log.version.to_string()},
                "items": items,
            });
            (json_response(200, &list), None)
        }
        ["api", "v1", "nodes", name] => match log.current.get(*name) {
            Some((_, v)) => {
                let mut v = v.clone();
                v["apiVersion"] = json!("v1");
                v["kind"] = json!("Node");
                (json_response(200, &v), None)
            }
            None => fail(404, "NotFound", &format!("nodes \"{name}\" not found")),
        },
        _ => not_found_path(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool) -> Node {
        Node {
            name: name.into(),
            server_id: Some(format!("{name}-id")),
            ready,
            unschedulable: false,
            created_at: Timestamp(0),
            pod_cidr: None,
            internal_ip: None,
        }
    }

    fn object(n: &Node) -> Value {
        json!({"metadata": {"name": n.name}, "ready": n.ready})
    }

    fn kinds(log: &NodeLog, since: u64) -> Vec<(u64, &'static str)> {
        log.after(since)
            .expect("kept")
            .into_iter()
            .map(|e| (e.0, e.1))
            .collect()
    }

    #[test]
    fn a_watch_sees_nodes_register_change_and_go() {
        let mut log = NodeLog::default();
        log.record(vec![node("a", true)], object);
        log.record(vec![node("a", true)], object);
        assert_eq!(log.version, 1, "nothing changed, nothing recorded");
        log.record(vec![node("a", false), node("b", true)], object);
        log.record(vec![node("b", true)], object);
        assert_eq!(
            kinds(&log, 1),
            [(2, "MODIFIED"), (3, "ADDED"), (4, "DELETED")]
        );
        assert_eq!(kinds(&log, 4), []);
        let objects: Vec<&str> = log.current.keys().map(String::as_str).collect();
        assert_eq!(objects, ["b"]);
    }

    #[test]
    fn a_watch_from_a_version_no_longer_kept_must_list_again() {
        let mut log = NodeLog::default();
        for i in 0..NODE_EVENTS_MAX + 5 {
            log.record(vec![node("a", i % 2 == 0)], object);
        }
        assert_eq!(log.events.len(), NODE_EVENTS_MAX);
        assert!(log.after(1).is_err(), "events after 1 were dropped");
        assert!(log.after(log.version - 1).is_ok());
        let since = |v: &str| BTreeMap::from([("resourceVersion".to_string(), v.to_string())]);
        let (resp, _) = watch(&log, &since("1"));
        let text = String::from_utf8(resp.body).expect("utf-8");
        assert!(text.contains("\"code\":410"), "{text}");
        let (resp, _) = watch(&log, &since("x"));
        assert_eq!(resp.status, 400);
    }
}
