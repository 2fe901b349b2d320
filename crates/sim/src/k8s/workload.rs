//! What runs inside the workload clusters, one controller pass ([`reconcile`]) at a
//! time: the guest Node of every running VMI of a flightdeck cluster (its kubelet),
//! DaemonSet (`kube-proxy`) and mirror (`kube-apiserver`) pods, the `web` app (a
//! ReplicaSet-like controller and a scheduler) and pod readiness; the pass ends with
//! PodDisruptionBudget status ([`super::disruption`]). Pod startup and graceful deletion
//! are in [`super::pods`]; a new cluster's objects and a guest's end in
//! [`super::guests`].
//!
//! The guests of OpenStack servers and OpenNebula VMs run the same controllers
//! ([`controllers`]) from [`super::machines`].
//!
//! A guest node registers `node_register` after its VMI runs (named for the VM, with
//! `spec.providerID: kubevirt://<vm>`) and turns Ready `node_ready` later. A re-created
//! VMI brings its existing Node back to Ready and keeps its `spec.unschedulable`. When
//! the VMI is gone the Node is NotReady (it stays until someone deletes it), and pods
//! that had to leave it but had not are killed on the spot ([`super::guests`]).

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::disruption::pdb_status;
use super::guests::{REPLICAS_MAX, ensure};
use super::objects::{
    MIRROR_ANNOTATION, controller_of, finished, is_control_plane_node, node_is_ready, node_object,
    node_schedulable, pod_is_ready, pod_node, pod_ns, pod_phase, set_condition, set_node_ready,
};
use super::pods::delete_pod;
use super::store::{Kind, at, deleting, labels_of, name_of, obj_at, set_at, str_at};
use super::{
    DEFAULT_GRACE_SECONDS, Event, INFRA_CLUSTER, POD_START_MS, VmiRef, after, after_in, kubevirt,
    tags_of_labels, uid_of,
};
use crate::State;

fn find_vmi<'a>(st: &'a State, name: &str, uid: Option<&str>) -> Option<&'a Value> {
    st.kube
        .infra
        .list(Kind::Vmi, None)
        .find(|v| name_of(v) == name && uid.is_none_or(|u| uid_of(v) == u))
}

/// When the machine a VMI runs was made: its VM's creation (flightdeck makes the VM;
/// KubeVirt makes a VMI again for it after an evacuation or a restart), else the VMI's.
/// The bootstrap checks weigh a lost token against when its machine was made (seed
/// 73002782: a VMI made again after a lagging restore passed for a machine made after
/// it).
fn machine_made_at(st: &State, vmi: &Value) -> Option<Timestamp> {
    let ns = str_at(vmi, &["metadata", "namespace"]).unwrap_or("");
    let created =
        |v: &Value| str_at(v, &["metadata", "creationTimestamp"]).and_then(super::parse_rfc3339);
    st.kube
        .infra
        .get(Kind::Vm, ns, name_of(vmi))
        .and_then(created)
        .or_else(|| created(vmi))
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
    let tags = tags_of_labels(&labels_of(&vmi));
    let registered = st
        .kube
        .workloads
        .get(&cluster)
        .is_some_and(|w| w.store.contains(Kind::Node, "", &r.name));
    if !registered {
        // kubeadm's data decides whether, and when, the kubelet registers (a VMI made
        // again for the same VM finds its Node there: it does not bootstrap again).
        let booting = crate::bootstrap::Booting {
            key: r.uid.clone(),
            name: r.name.clone(),
            tags: tags.clone(),
            made_at: machine_made_at(st, &vmi).unwrap_or(t),
            user_data: kubevirt::user_data(st, &vmi),
            kubevirt: true,
        };
        match crate::bootstrap::admit_machine(st, t, &booting) {
            Ok(true) => {}
            Ok(false) => return,
            Err(retry_at) => {
                let wait = retry_at.since(t).as_millis();
                after(st, t, (wait, wait), Event::NodeRegister(r.clone()));
                return;
            }
        }
    }
    if !ensure(st, t, &cluster, false) {
        return;
    }
    let uid = st.kube.uid();
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
    super::after(
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

/// The controller pass of the infrastructure cluster and of every KubeVirt guest.
pub(crate) fn reconcile(st: &mut State, now: Timestamp) {
    let names: Vec<String> = st
        .kube
        .workloads
        .iter()
        .filter(|(_, w)| !w.cloud)
        .map(|(name, _)| name.clone())
        .collect();
    // One walk of the infra VMIs for every cluster: whose API serves, and which VMIs run.
    let mut serving_apis: std::collections::BTreeSet<String> = Default::default();
    let mut running_vmis: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut live_vmis: std::collections::BTreeSet<String> = Default::default();
    let mut up_control_planes: Vec<(String, String, Value)> = Vec::new();
    for v in st.kube.infra.list(Kind::Vmi, None) {
        live_vmis.insert(uid_of(v).to_string());
        let Some(cluster) = kubevirt::cluster_label(v) else {
            continue;
        };
        if kubevirt::is_control_plane(v) && kubevirt::api_serving(st, v, now) {
            up_control_planes.push((cluster.to_string(), name_of(v).to_string(), v.clone()));
        }
        if vmi_running(v) {
            running_vmis
                .entry(cluster.to_string())
                .or_default()
                .push(name_of(v).to_string());
        }
    }
    // A control-plane VMI that boots kubeadm's data serves only once it ran init or
    // joined (its Node registered); any other once it has run a while.
    for (cluster, name, vmi) in up_control_planes {
        let kubeadm =
            crate::bootstrap::boots_kubeadm(st, uid_of(&vmi), |st| kubevirt::user_data(st, &vmi));
        let joined = || {
            st.kube
                .workloads
                .get(&cluster)
                .is_some_and(|w| w.store.contains(Kind::Node, "", &name))
        };
        if !kubeadm || joined() {
            serving_apis.insert(cluster);
        }
    }
    crate::bootstrap::forget_vmis(st, &live_vmis);
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
    forget_starts(st, &clusters);
}

/// Forgets the pending starts of `clusters`' pods that are gone (keeps the set bounded).
pub(crate) fn forget_starts(st: &mut State, clusters: &[String]) {
    for c in clusters {
        let from = (c.clone(), String::new());
        let gone: Vec<(String, String)> = st
            .kube
            .pods_starting
            .range(from..)
            .take_while(|(cluster, _)| cluster == c)
            .filter(|(_, uid)| {
                st.kube.store(c).is_none_or(|s| {
                    let mut live = false;
                    s.peek_all(Kind::Pod, |p| live |= uid_of(p) == uid);
                    !live
                })
            })
            .cloned()
            .collect();
        for key in gone {
            st.kube.pods_starting.remove(&key);
        }
    }
}

/// One pass of a workload cluster's controllers: while its API serves them (`up`), the
/// DaemonSet and mirror pods, the ReplicaSets and the scheduler; pod readiness and
/// the PodDisruptionBudgets' status always.
pub(crate) fn controllers(st: &mut State, now: Timestamp, cluster: &str, up: bool) {
    if up {
        system_pods(st, now, cluster);
        replica_sets(st, now, cluster);
        schedule_pods(st, now, cluster);
    }
    pod_readiness(st, now, cluster);
    pdb_status(st, now, cluster);
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
    // Pod garbage collection: pods bound to a node that no longer exists go, force
    // deleted: no eviction, no budget asked. Those that had to leave are lost (a Node
    // deleted while its machine still shuts down takes its pods with it).
    let orphans: Vec<Value> = store
        .list(Kind::Pod, None)
        .filter(|p| pod_node(p).is_some_and(|n| !nodes.iter().any(|(m, _, _)| m == n)))
        .cloned()
        .collect();
    for pod in &orphans {
        super::lost::lose_orphan(st, now, cluster, pod);
    }
    let orphans: Vec<(String, String)> = orphans
        .iter()
        .map(|p| (pod_ns(p).to_string(), name_of(p).to_string()))
        .collect();
    for pod in wanted {
        let uid = st.kube.uid_in(cluster);
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
            let name = format!("{rs_name}-{}", st.kube.suffix(cluster, 5));
            let uid = st.kube.uid_in(cluster);
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
        .filter(|p| {
            !st.kube
                .pods_starting
                .contains(&(cluster.to_string(), uid_of(p).to_string()))
        })
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
        st.kube
            .pods_starting
            .insert((cluster.to_string(), uid.clone()));
        after_in(
            st,
            cluster,
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
