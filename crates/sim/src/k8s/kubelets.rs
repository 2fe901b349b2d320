//! The Kubernetes API of OpenStack and OpenNebula workload clusters: their nodes are
//! the kubelets of [`crate::kube`] seen through the same wire as a real cluster's, so
//! flightdeck reads them with the same kube-rs client it uses on a real workload cluster;
//! everything else (pods, evictions, budgets, discovery beyond `/api`) is the guest of
//! [`super::machines`], answered as a KubeVirt guest's is ([`super::api`]).
//!
//! Each Node carries `spec.providerID` in its cloud's format (`openstack:///<server id>`,
//! `opennebula://<VM ID>`), its `spec.podCIDR`, and its address as `InternalIP`. Nodes are
//! read (`GET` of the node list, one node, a watch of nodes), cordoned (a `PATCH` or
//! `PUT` of `spec.unschedulable`) and deleted. While the cluster's API is down (no
//! serving load-balancer member, no running control-plane VM) every request is a 503;
//! the `observer.*` faults change what the node list answers, as they do in process.
//!
//! Nodes are made from the simulator's state on each request, so each cluster keeps a
//! [`NodeLog`] of what its API served: every request first records the nodes that
//! appeared, changed or went since the last one as events with a new resourceVersion.
//! A list answers that resourceVersion; a watch answers the events after the one it
//! gives, or `410 Expired` when those are no longer kept (the client lists again).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_cloud::{Node, Ownership, Timestamp};
use flightdeck_spec::FaultKind;
use serde_json::{Value, json};

use super::answers::{Answer, fail, json_response, served_response, unavailable};
use super::discovery;
use super::objects::node_object;
use super::read::{
    BOOKMARK_START, bookmark_line, expired_line, wants_bookmarks, watch_answer, watch_since,
};
use super::routes::{Route, SERVICE, is_watch, query};
use super::store::rfc3339;
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
        && !kubevirt_guest(st, cluster)
        && (st
            .kube
            .workloads
            .get(cluster)
            .is_some_and(|w| !w.uids.is_empty())
            || !uids(st, cluster).is_empty())
}

fn kubevirt_guest(st: &State, cluster: &str) -> bool {
    st.kube.workloads.get(cluster).is_some_and(|w| !w.cloud)
}

/// The OpenStack and OpenNebula workload clusters this API plays.
pub(crate) fn clusters(st: &State) -> Vec<String> {
    st.nodes
        .values()
        .filter_map(|n| n.cluster.clone())
        .filter(|c| !kubevirt_guest(st, c))
        .collect()
}

/// Whether the API of `cluster` answers now (without striking any fault).
fn reachable(st: &State, cluster: &str) -> bool {
    uids(st, cluster).into_iter().any(|uid| {
        crate::kube::api_reachable(
            st,
            &Ownership {
                cluster: cluster.to_string(),
                uid,
            },
        )
    })
}

/// The nodes of `cluster` as its API serves them now, to a list or a watch; `None` while
/// it answers nothing. An `api.staleRead` on `kubernetes` lags its watch cache: lists
/// and watches are served the nodes as they were up to the fault's `latency` before.
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
    out.map(|fresh| crate::stale::answer(st, SERVICE, "GET nodes", cluster, now, fresh))
}

/// A node as the API server shows it.
fn node_json(st: &State, n: &Node, now: Timestamp) -> Value {
    let sid = n.server_id.as_deref().unwrap_or_default();
    let nova = st
        .nodes
        .get(sid)
        .map_or_else(|| st.servers.get(sid).is_some(), |r| r.nova);
    let provider_id = if nova {
        format!("openstack:///{sid}")
    } else {
        format!("opennebula://{sid}")
    };
    let control_plane = n.name.contains("-cp-");
    let mut v = node_object(&n.name, Some(&provider_id), control_plane, n.ready, now);
    if n.unschedulable {
        v["spec"]["unschedulable"] = json!(true);
    }
    v["metadata"]["creationTimestamp"] = json!(rfc3339(n.created_at));
    v["metadata"]["uid"] = json!(format!("node-{sid}"));
    if let Some(cidr) = &n.pod_cidr {
        v["spec"]["podCIDR"] = json!(cidr);
        v["spec"]["podCIDRs"] = json!([cidr]);
    }
    if let (Some(ip), Some(addresses)) = (n.internal_ip, v["status"]["addresses"].as_array_mut()) {
        addresses.insert(0, json!({"type": "InternalIP", "address": ip.to_string()}));
    }
    // What was put on the node through the API: labels beyond the kubelet's own,
    // taints, and the hold annotation.
    if let Some(labels) = v["metadata"]["labels"].as_object_mut() {
        for (k, val) in &n.labels {
            labels.insert(k.clone(), json!(val));
        }
    }
    if !n.taints.is_empty() {
        v["spec"]["taints"] = json!(n.taints);
    }
    if let Some(hold) = &n.hold_deletion {
        v["metadata"]["annotations"] = json!({ flightdeck_cloud::HOLD_DELETION: hold });
    }
    v
}

/// The most node events one cluster keeps for watches.
pub(crate) const NODE_EVENTS_MAX: usize = 1_000;

/// A node's object as served, in JSON. Kept serialized and shared between the node's
/// current entry and its newest event: a parsed object costs several times its text, and a
/// fleet of 1,000 clusters keeps tens of thousands of them.
type Served = Arc<str>;

/// What the API of one played cluster served of its nodes.
#[derive(Debug, Default)]
pub(crate) struct NodeLog {
    /// The newest resourceVersion.
    version: u64,
    /// Each node as last served, and its object.
    current: BTreeMap<String, (Node, Served)>,
    /// `(resourceVersion, type, object)`, oldest first, at most [`NODE_EVENTS_MAX`].
    events: VecDeque<(u64, &'static str, Served)>,
}

impl NodeLog {
    fn push(&mut self, kind: &'static str, mut object: Value) -> Served {
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        let served: Served = Arc::from(object.to_string());
        if self.events.len() == NODE_EVENTS_MAX {
            self.events.pop_front();
        }
        self.events.push_back((self.version, kind, served.clone()));
        served
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
            // The deletion's event carries the deletion's resourceVersion.
            let object = serde_json::from_str(&object).unwrap_or(Value::Null);
            self.push("DELETED", object);
        }
    }

    /// The events after `since`; `Err(oldest kept)` when some of them are no longer kept.
    fn after(&self, since: u64) -> Result<Vec<&(u64, &'static str, Served)>, u64> {
        let oldest = self.events.front().map_or(self.version + 1, |e| e.0);
        if since + 1 < oldest && since < self.version {
            return Err(oldest);
        }
        Ok(self.events.iter().filter(|e| e.0 > since).collect())
    }
}

/// One line of a watch: `{"type":…,"object":…}` around an object already serialized.
fn served_line(kind: &str, object: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(object.len() + kind.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object.as_bytes());
    line.extend_from_slice(b"}\n");
    line
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
                body.extend(served_line("ADDED", object));
            }
        }
        Some((since, Err(oldest))) => {
            body.extend(expired_line(since, oldest));
            return watch_answer(body);
        }
        Some((_, Ok(events))) => {
            for (_, kind, object) in events {
                body.extend(served_line(kind, object));
            }
        }
    }
    if wants_bookmarks(params) {
        body.extend(bookmark_line("v1", "Node", log.version));
    }
    watch_answer(body)
}

/// Answers one request to the API of `cluster`.
pub(crate) fn handle(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    route: &Route,
) -> Answer {
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    let get = req.method.eq_ignore_ascii_case("GET");
    match segs.as_slice() {
        ["version"] if get => return (json_response(200, &discovery::version()), None),
        ["api"] if get => return (json_response(200, &discovery::api_versions()), None),
        ["api", "v1", "nodes"] | ["api", "v1", "watch", "nodes"] if get => {}
        ["api", "v1", "nodes", name] if !get => return write_node(st, now, cluster, req, name),
        ["api", "v1", "nodes", _] if get => {}
        ["api", "v1", "nodes", ..] | ["api", "v1", "watch", "nodes", ..] => {
            return super::answers::method_not_allowed();
        }
        _ => return guest_request(st, now, cluster, req, route),
    }
    read_nodes(st, now, cluster, req, &segs)
}

/// Anything but nodes: the guest's API answers, while the cluster's API answers at all.
fn guest_request(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    route: &Route,
) -> Answer {
    if !reachable(st, cluster) || !st.kube.is_cloud_guest(cluster) {
        return unavailable();
    }
    let answer = super::api::handle(st, now, cluster, req, route);
    super::machines::compact(st, cluster);
    answer
}

/// A cordon or deletion of node `name`, answered with the node as served after it.
fn write_node(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    name: &str,
) -> Answer {
    let segs = ["api", "v1", "nodes", name];
    let (current, _) = read_nodes(st, now, cluster, req, &segs);
    if current.status != 200 {
        return (current, None);
    }
    let Ok(served) = serde_json::from_slice::<Value>(&current.body) else {
        return fail(500, "InternalError", "a served node no longer parses");
    };
    if let Some(answer) = super::machines::node_write(st, now, cluster, name, req, &served) {
        return answer;
    }
    let (answer, _) = read_nodes(st, now, cluster, req, &segs);
    let touched = serde_json::from_slice(&answer.body).ok();
    (answer, touched)
}

/// A read of `cluster`'s nodes at `segs`, recorded in its node log first.
fn read_nodes(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    segs: &[&str],
) -> Answer {
    let Some(nodes) = nodes(st, now, cluster) else {
        return unavailable();
    };
    let mut logs = std::mem::take(&mut st.kube.kubelet_logs);
    let log = logs.entry(cluster.to_string()).or_default();
    log.record(nodes, |n| node_json(st, n, now));
    let params = query(&req.query);
    let answer = answer(log, segs, &params);
    st.kube.kubelet_logs = logs;
    let watching = matches!(segs, ["api", "v1", "watch", "nodes"])
        || (segs == ["api", "v1", "nodes"] && is_watch(&params));
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
    let mut lines: Vec<&[u8]> = resp
        .body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    // A bookmark says how far the answer goes: it stays last.
    let bookmark = lines
        .last()
        .is_some_and(|l| l.starts_with(BOOKMARK_START.as_bytes()))
        .then(|| lines.pop())
        .flatten();
    if lines.len() < 2 {
        return (resp, extra);
    }
    faults::strike(st, FaultKind::K8sWatchReorder, now, &tags);
    let mut body = Vec::with_capacity(resp.body.len());
    for line in lines.into_iter().rev().chain(bookmark) {
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
            let mut body = format!(
                "{{\"apiVersion\":\"v1\",\"kind\":\"NodeList\",\"metadata\":\
                 {{\"resourceVersion\":\"{}\"}},\"items\":[",
                log.version
            );
            for (i, (_, object)) in log.current.values().enumerate() {
                if i > 0 {
                    body.push(',');
                }
                body.push_str(object);
            }
            body.push_str("]}");
            (served_response(body), None)
        }
        ["api", "v1", "nodes", name] => match log.current.get(*name) {
            Some((_, served)) => {
                let Ok(mut v) = serde_json::from_str::<Value>(served) else {
                    return fail(500, "InternalError", "a served node no longer parses");
                };
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
            labels: Default::default(),
            taints: Vec::new(),
            hold_deletion: None,
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

    #[test]
    fn lists_and_watches_serve_each_node_with_the_version_of_its_last_change() {
        let mut log = NodeLog::default();
        log.record(vec![node("a", true), node("b", false)], object);
        log.record(vec![node("b", true)], object);
        let (resp, _) = answer(&log, &["api", "v1", "nodes"], &BTreeMap::new());
        let list: Value = serde_json::from_slice(&resp.body).expect("a list is JSON");
        assert_eq!(list["kind"], "NodeList");
        assert_eq!(list["metadata"]["resourceVersion"], "4");
        let items = list["items"].as_array().expect("items");
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["metadata"]["name"], "b");
        assert_eq!(items[0]["metadata"]["resourceVersion"], "3");
        let since = BTreeMap::from([("resourceVersion".to_string(), "2".to_string())]);
        let (resp, _) = watch(&log, &since);
        let lines: Vec<Value> = resp
            .body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("each watch line is JSON"))
            .collect();
        let seen: Vec<(&str, &str, &str)> = lines
            .iter()
            .map(|l| {
                (
                    l["type"].as_str().unwrap_or_default(),
                    l["object"]["metadata"]["name"].as_str().unwrap_or_default(),
                    l["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [("MODIFIED", "b", "3"), ("DELETED", "a", "4")],
            "a deletion carries the deletion's version, not the node's last one"
        );
        let (resp, _) = answer(&log, &["api", "v1", "nodes", "b"], &BTreeMap::new());
        let one: Value = serde_json::from_slice(&resp.body).expect("a node is JSON");
        assert_eq!(
            (one["kind"].as_str(), one["ready"].as_bool()),
            (Some("Node"), Some(true))
        );
    }
}
