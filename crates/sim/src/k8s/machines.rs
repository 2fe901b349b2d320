//! The workload clusters of OpenStack and OpenNebula clusters, whose machines are Nova
//! servers and OpenNebula VMs: the guest of [`super::guests`], run by the controllers
//! of [`super::workload`], with its Nodes following the kubelets of [`crate::kube`].
//!
//! A cluster's guest is made when its first kubelet registers ([`node_changed`]). At
//! each pass its store's Nodes are brought in line with the kubelets' nodes (Ready,
//! cordoned), and its controllers run while a control-plane node is Ready (its API
//! server runs there). A machine whose deletion begins is noted ([`machine_deleting`]);
//! when it is gone its pods go with it ([`machine_gone`]). The guest goes when its
//! last node does. Nodes are served from [`super::kubelets`], which also takes their
//! cordons and deletions ([`node_write`]).

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::TAG_MACHINE;
use serde_json::{Value, json};

use super::answers::{Answer, fail, status_response};
use super::guests::{deletion_begins, ensure, guest_gone};
use super::objects::{is_control_plane_node, node_is_ready, node_object, set_node_ready};
use super::store::{Kind, at, name_of, set_at};
use super::workload::{controllers, forget_starts};
use super::{KubeRequest, patch};
use crate::State;

/// Controller passes per settle of one guest, at most.
const PASSES_MAX: usize = 8;

/// The cluster and node name of the kubelet of machine `sid`, if it registered.
fn node_of(st: &State, sid: &str) -> Option<(String, String)> {
    let rec = st.nodes.get(sid)?;
    Some((rec.cluster.clone()?, rec.node.name.clone()))
}

/// Whether the node of machine `sid` named `name` is a control-plane node: its
/// machine's key starts `cp-` (or, with no machine to ask, its name says so).
pub(crate) fn is_control_plane(st: &State, sid: &str, name: &str) -> bool {
    let by_tag = st.host(sid).is_some_and(|h| {
        h.tags.iter().any(|t| {
            t.strip_prefix(TAG_MACHINE)
                .is_some_and(|k| k.starts_with("cp-"))
        })
    });
    by_tag || name.contains("-cp-")
}

/// The kubelet of machine `sid` registered, changed or is about to go: its cluster's
/// guest (made now if it has none) looks again at the next settle.
pub(crate) fn node_changed(st: &mut State, t: Timestamp, sid: &str) {
    let Some(rec) = st.nodes.get(sid) else {
        return;
    };
    let (Some(cluster), uid) = (rec.cluster.clone(), rec.uid.clone()) else {
        return;
    };
    if !st.kube.workloads.contains_key(&cluster) && !ensure(st, t, &cluster, true) {
        return;
    }
    if let Some(w) = st.kube.workloads.get_mut(&cluster).filter(|w| w.cloud) {
        w.uids.insert(uid);
        st.kube.guests_dirty.insert(cluster);
    }
}

/// The deletion of machine `sid` (server or VM) begins at `now`; `by_api`: asked
/// through the cloud's API (not an operator's or a fault's, out of band).
pub(crate) fn machine_deleting(st: &mut State, now: Timestamp, sid: &str, by_api: bool) {
    if let Some((cluster, node)) = node_of(st, sid)
        && st.kube.is_cloud_guest(&cluster)
    {
        deletion_begins(st, now, &cluster, &node, by_api);
        st.kube.touch(&cluster);
    }
}

/// Machine `sid` is gone at `t`: the pods on its node go with it.
pub(crate) fn machine_gone(st: &mut State, t: Timestamp, sid: &str) {
    if let Some((cluster, node)) = node_of(st, sid)
        && st.kube.is_cloud_guest(&cluster)
    {
        guest_gone(st, t, &cluster, &node);
    }
}

/// The machines (server or VM ids) whose registered Nodes `fault` targets.
fn targeted_nodes(st: &State, fault: &crate::faults::SimFault) -> Vec<String> {
    st.nodes
        .values()
        .filter(|n| n.machine_gone_at.is_none() && fault.targets(&n.machine_tags))
        .filter_map(|n| n.node.server_id.clone())
        .collect()
}

/// `operator.holdNodeDeletion` starts: the hold annotation goes on every targeted Node.
/// Answers the machines of the Nodes it went on.
pub(crate) fn hold_nodes(
    st: &mut State,
    t: Timestamp,
    fault: &crate::faults::SimFault,
) -> Vec<String> {
    let chosen = targeted_nodes(st, fault);
    for sid in &chosen {
        if let Some(rec) = st.nodes.get_mut(sid) {
            rec.node.hold_deletion = Some("operator".into());
        }
        node_changed(st, t, sid);
    }
    chosen
}

/// `operator.holdNodeDeletion` ends: the annotation comes off the Nodes it went on.
pub(crate) fn release_nodes(st: &mut State, t: Timestamp, held: &[String]) {
    for sid in held {
        if let Some(rec) = st.nodes.get_mut(sid) {
            rec.node.hold_deletion = None;
        }
        node_changed(st, t, sid);
    }
}

/// `operator.stripNodeLabels` starts: every label put on a targeted Node through the
/// API, and every taint, is removed. Answers how many Nodes lost something.
pub(crate) fn strip_node_labels(
    st: &mut State,
    t: Timestamp,
    fault: &crate::faults::SimFault,
) -> u64 {
    let mut n = 0;
    for sid in targeted_nodes(st, fault) {
        if let Some(rec) = st.nodes.get_mut(&sid)
            && (!rec.node.labels.is_empty() || !rec.node.taints.is_empty())
        {
            rec.node.labels.clear();
            rec.node.taints.clear();
            n += 1;
        }
        node_changed(st, t, &sid);
    }
    n
}

/// The nodes `cluster`'s kubelets have registered: name → (Ready, cordoned,
/// control plane, machine).
fn kubelet_nodes(st: &State, cluster: &str) -> BTreeMap<String, (bool, bool, bool, String)> {
    let Some(w) = st.kube.workloads.get(cluster) else {
        return BTreeMap::new();
    };
    w.uids
        .iter()
        .flat_map(|uid| st.nodes.in_group(uid).filter(move |n| &n.uid == uid))
        .filter(|n| n.cluster.as_deref() == Some(cluster))
        .filter_map(|n| {
            let sid = n.node.server_id.clone()?;
            let cp = is_control_plane(st, &sid, &n.node.name);
            Some((
                n.node.name.clone(),
                (n.node.ready, n.node.unschedulable, cp, sid),
            ))
        })
        .collect()
}

/// Brings the guest's Nodes in line with its kubelets'; answers whether it has any.
fn sync_nodes(st: &mut State, now: Timestamp, cluster: &str) -> bool {
    let want = kubelet_nodes(st, cluster);
    let Some(w) = st.kube.workloads.get_mut(cluster) else {
        return false;
    };
    let nodes = &st.nodes;
    w.uids.retain(|uid| {
        want.values()
            .any(|(_, _, _, sid)| nodes.get(sid).is_some_and(|n| &n.uid == uid))
    });
    let have: BTreeMap<String, (bool, bool)> = w
        .store
        .list(Kind::Node, None)
        .map(|n| (name_of(n).to_string(), (node_is_ready(n), cordoned(n))))
        .collect();
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        w.store.remove(Kind::Node, "", name);
    }
    for (name, &(ready, unschedulable, cp, _)) in &want {
        match have.get(name) {
            Some(&(r, u)) if r == ready && u == unschedulable => {}
            Some(_) => {
                if let Some(s) = st.kube.store_mut(cluster) {
                    s.modify(Kind::Node, "", name, |n| {
                        set_node_ready(n, ready, now);
                        set_at(n, &["spec", "unschedulable"], json!(unschedulable));
                    });
                }
            }
            None => {
                let mut node = guest_node(name, cp, ready, now);
                set_at(&mut node, &["spec", "unschedulable"], json!(unschedulable));
                let uid = st.kube.uid_in(cluster);
                if let Some(s) = st.kube.store_mut(cluster) {
                    s.create(Kind::Node, "", node, uid, now);
                }
            }
        }
    }
    !want.is_empty()
}

/// The Node a guest keeps for its controllers: only what they read (the kubelets' own
/// are what the API serves).
fn guest_node(name: &str, control_plane: bool, ready: bool, now: Timestamp) -> Value {
    let mut node = node_object(name, None, control_plane, ready, now);
    if let Some(status) = node.get_mut("status").and_then(Value::as_object_mut) {
        status.retain(|k, _| k == "conditions");
    }
    node
}

fn cordoned(node: &Value) -> bool {
    at(node, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true)
}

/// Runs the controllers of every guest something happened to, each until nothing
/// changes, and keeps each store compact again.
pub(crate) fn reconcile(st: &mut State, now: Timestamp) {
    let dirty = std::mem::take(&mut st.kube.guests_dirty);
    for cluster in dirty {
        if !st.kube.is_cloud_guest(&cluster) {
            continue;
        }
        if !sync_nodes(st, now, &cluster) {
            let empty = st
                .kube
                .store(&cluster)
                .is_none_or(|s| s.list(Kind::Node, None).next().is_none());
            if empty {
                st.kube.workloads.remove(&cluster);
                forget_starts(st, std::slice::from_ref(&cluster));
                continue;
            }
        }
        for _ in 0..PASSES_MAX {
            let Some(store) = st.kube.store(&cluster) else {
                break;
            };
            let before = store.resource_version();
            let up = store
                .list(Kind::Node, None)
                .any(|n| is_control_plane_node(n) && node_is_ready(n));
            if let Some(w) = st.kube.workloads.get_mut(&cluster) {
                w.up = up;
            }
            controllers(st, now, &cluster, up);
            if st.kube.store(&cluster).map(|s| s.resource_version()) == Some(before) {
                break;
            }
        }
        forget_starts(st, std::slice::from_ref(&cluster));
        compact(st, &cluster);
    }
}

/// Keeps `cluster`'s store compact (after a request read it, or a pass).
pub(crate) fn compact(st: &mut State, cluster: &str) {
    if let Some(w) = st.kube.workloads.get_mut(cluster).filter(|w| w.cloud) {
        w.store.compact();
    }
}

/// The machine (server or VM id) of `cluster`'s node `name`.
pub(crate) fn machine_of(st: &State, cluster: &str, name: &str) -> Option<String> {
    let w = st.kube.workloads.get(cluster)?;
    w.uids
        .iter()
        .flat_map(|uid| st.nodes.in_group(uid))
        .find(|n| n.node.name == name && n.cluster.as_deref() == Some(cluster))
        .and_then(|n| n.node.server_id.clone())
}

/// The ownership tags of the machine of `cluster`'s node `name`.
pub(crate) fn node_machine_tags(st: &State, cluster: &str, name: &str) -> Vec<String> {
    machine_of(st, cluster, name)
        .and_then(|sid| st.nodes.get(&sid))
        .map(|n| n.machine_tags.clone())
        .unwrap_or_default()
}

/// What a node's write keeps beyond its cordon: the labels it adds to those the kubelet
/// sets, its taints, and the hold
/// annotation. A malformed taint is refused, as the API server refuses it.
type Kept = (
    BTreeMap<String, String>,
    Vec<flightdeck_cloud::Taint>,
    Option<String>,
);

fn kept_metadata(next: &Value) -> Result<Kept, String> {
    let kubelet_labels = [
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
    ];
    let labels = at(next, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !kubelet_labels.contains(&k.as_str()))
                .filter(|(k, _)| k.as_str() != super::objects::CONTROL_PLANE_LABEL)
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let taints = match at(next, &["spec", "taints"]) {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value::<Vec<flightdeck_cloud::Taint>>(v.clone())
            .map_err(|e| format!("spec.taints: {e}"))?,
    };
    for t in &taints {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
            return Err(format!(
                "spec.taints: Unsupported value: {:?}: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                t.effect
            ));
        }
    }
    let hold = at(
        next,
        &["metadata", "annotations", flightdeck_cloud::HOLD_DELETION],
    )
    .and_then(Value::as_str)
    .map(str::to_string);
    Ok((labels, taints, hold))
}

/// A `PATCH`, `PUT` or `DELETE` of node `name` of `cluster`, whose served object is
/// `current`: a cordon (`spec.unschedulable`) is kept by its kubelet's node, so that
/// the node is served cordoned and the scheduler passes it by; other changes are not
/// kept. A deletion removes the node for good (its kubelet does not register again;
/// its pod network slice is free). `None` when the change was made and the node is to
/// be answered as it is now; else the answer.
pub(crate) fn node_write(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    name: &str,
    req: &KubeRequest,
    current: &Value,
) -> Option<Answer> {
    let Some(sid) = machine_of(st, cluster, name) else {
        return Some(super::answers::not_found(Kind::Node, name));
    };
    st.kube.touch(cluster);
    let method = req.method.to_ascii_uppercase();
    if method == "DELETE" {
        if st.nodes.remove(&sid).is_some() {
            crate::routes::release_pod_cidr(st, &sid);
        }
        let details = json!({"name": name, "kind": "nodes",
            "uid": at(current, &["metadata", "uid"]).cloned().unwrap_or(Value::Null)});
        return Some((
            status_response(200, "", "", Some(details)),
            Some(current.clone()),
        ));
    }
    let next = if method == "PUT" {
        serde_json::from_slice::<Value>(&req.body).map_err(|e| e.to_string())
    } else {
        let content_type = req.content_type.as_deref().unwrap_or("");
        patch::apply(current, content_type, &req.body).map_err(|(_, _, m)| m)
    };
    let next = match next {
        Ok(v) if v.is_object() => v,
        Ok(_) => return Some(fail(400, "BadRequest", "the body must be a JSON object")),
        Err(m) => return Some(fail(400, "BadRequest", &m)),
    };
    let kept = match kept_metadata(&next) {
        Ok(k) => k,
        Err(m) => return Some(fail(422, "Invalid", &m)),
    };
    if let Some(rec) = st.nodes.get_mut(&sid) {
        rec.node.unschedulable = cordoned(&next);
        (rec.node.labels, rec.node.taints, rec.node.hold_deletion) = kept;
    }
    super::lost::note_cordon(st, now, cluster, name, cordoned(&next));
    None
}

/// `kubeadm init` ran again in `cluster` (of `uid`) after every machine of the cluster
/// the first one made was gone: a new etcd, so a new, empty cluster. The Nodes of the
/// gone machines, and everything else the old cluster held, went with the old etcd.
pub(crate) fn restart_guest(st: &mut State, cluster: &str, uid: &str) {
    let dead: Vec<String> = st
        .nodes
        .values()
        .filter(|n| n.cluster.as_deref() == Some(cluster) && n.uid == uid)
        .filter_map(|n| n.node.server_id.clone())
        .filter(|sid| !st.host_running(sid))
        .collect();
    for sid in dead {
        st.nodes.remove(&sid);
    }
    if st.kube.workloads.remove(cluster).is_some() {
        super::workload::forget_starts(st, &[cluster.to_string()]);
    }
}
