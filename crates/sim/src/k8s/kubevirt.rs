//! virt-controller on the infrastructure cluster: a VirtualMachine that should run gets a
//! VirtualMachineInstance of its name (a new uid each time), which goes `Pending →
//! Scheduling → Scheduled → Running` on the schedulable infra node with the fewest
//! VMIs. A deleted VMI goes after its finalizers ran; a deleted (or halted) VM takes its
//! VMI with it.
//!
//! `kubevirt.drainInfraNode` cordons an infra node and does what KubeVirt's eviction
//! webhook and evacuation controller do when the node is drained: VMIs there with
//! `evictionStrategy: External` get `status.evacuationNodeName` (someone else must move
//! them), `LiveMigrate`/`LiveMigrateIfPossible` ones are live-migrated to another node.
//! VMIs with `None` (or no strategy) are left alone: the real pod eviction would kill
//! them; the simulator does not.

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::store::{Kind, at, deleting, labels_of, name_of, obj_at, rfc3339, set_at, str_at};
use super::{
    API_UP_AFTER_MS, Event, LABEL_CLUSTER, LABEL_MACHINE, VMI_DELETE_MS, VMI_MIGRATION_MS,
    VMI_PLACE_MS, VMI_SCHEDULING_MS, VMI_START_MS, VmiDeletion, VmiRef, after, guests, objects,
    uid_of,
};
use crate::faults::SimFault;
use crate::{Event as SimEvent, State};

/// A VM's `spec.runStrategy`, or what `spec.running` stands for.
pub(crate) fn run_strategy(vm: &Value) -> &str {
    if let Some(s) = str_at(vm, &["spec", "runStrategy"]) {
        return s;
    }
    match at(vm, &["spec", "running"]).and_then(Value::as_bool) {
        Some(true) => "Always",
        _ => "Halted",
    }
}

fn wants_to_run(vm: &Value) -> bool {
    matches!(run_strategy(vm), "Always" | "RerunOnFailure")
}

/// Whether a live migration of the VMI is under way.
pub(crate) fn migrating(vmi: &Value) -> bool {
    at(vmi, &["status", "migrationState"])
        .is_some_and(|m| !m.is_null() && m.get("completed").and_then(Value::as_bool) != Some(true))
}

fn vmi_ref(vmi: &Value) -> VmiRef {
    VmiRef {
        ns: str_at(vmi, &["metadata", "namespace"])
            .unwrap_or("")
            .to_string(),
        name: name_of(vmi).to_string(),
        uid: uid_of(vmi).to_string(),
    }
}

fn phase(vmi: &Value) -> &str {
    str_at(vmi, &["status", "phase"]).unwrap_or("")
}

/// Whether a VMI belongs to a control-plane machine (`flightdeck.dev/machine: cp-…`).
pub(crate) fn is_control_plane(vmi: &Value) -> bool {
    labels_of(vmi)
        .get(LABEL_MACHINE)
        .is_some_and(|m| m.starts_with("cp-"))
}

/// The flightdeck cluster a VM or VMI belongs to.
pub(crate) fn cluster_of(obj: &Value) -> Option<String> {
    cluster_label(obj).map(str::to_string)
}

/// The cluster label of an object, without copying anything.
pub(crate) fn cluster_label(obj: &Value) -> Option<&str> {
    str_at(obj, &["metadata", "labels", LABEL_CLUSTER])
}

/// Infra nodes new VMIs (and migrations) may go to, with how many VMIs each holds,
/// in name order.
fn schedulable_nodes(st: &State, except: Option<&str>) -> Vec<(String, usize)> {
    let infra = &st.kube.infra;
    infra
        .list(Kind::Node, None)
        .filter(|n| at(n, &["spec", "unschedulable"]).and_then(Value::as_bool) != Some(true))
        .filter(|n| objects::node_is_ready(n))
        .map(|n| name_of(n).to_string())
        .filter(|n| Some(n.as_str()) != except)
        .map(|n| {
            let load = infra
                .list(Kind::Vmi, None)
                .filter(|v| !deleting(v) && str_at(v, &["status", "nodeName"]) == Some(&n))
                .count();
            (n, load)
        })
        .collect()
}

fn least_loaded(st: &State, except: Option<&str>) -> Option<String> {
    schedulable_nodes(st, except)
        .into_iter()
        .min_by_key(|(_, load)| *load)
        .map(|(n, _)| n)
}

pub(crate) fn reconcile(st: &mut State, now: Timestamp) {
    // What the loops read of each object, taken before they change anything (as a
    // controller works from its informer's copy); objects are not copied whole.
    let vms: Vec<(VmiRef, bool)> = st
        .kube
        .infra
        .list(Kind::Vm, None)
        .map(|vm| (vmi_ref(vm), wants_to_run(vm)))
        .collect();
    for (r, wants) in &vms {
        let vmi = st.kube.infra.get(Kind::Vmi, &r.ns, &r.name);
        let (exists, stopping) = (vmi.is_some(), vmi.is_some_and(deleting));
        match (exists, *wants) {
            (false, true) => {
                if let Some(vm) = st.kube.infra.get(Kind::Vm, &r.ns, &r.name).cloned() {
                    create_vmi(st, now, &vm);
                }
            }
            (true, false) if !stopping => {
                start_deletion(st, now, &r.ns, &r.name, "runStrategy Halted");
            }
            _ => {}
        }
        let vmi = st.kube.infra.get(Kind::Vmi, &r.ns, &r.name);
        let printable = match vmi {
            None if *wants => "Starting",
            None => "Stopped",
            Some(v) if deleting(v) => "Stopping",
            Some(v) if phase(v) == "Running" && migrating(v) => "Migrating",
            Some(v) if phase(v) == "Running" => "Running",
            Some(_) => "Starting",
        };
        let ready = vmi.is_some_and(|v| phase(v) == "Running" && !deleting(v));
        let created = vmi.is_some();
        let shown = st
            .kube
            .infra
            .get(Kind::Vm, &r.ns, &r.name)
            .is_some_and(|vm| {
                str_at(vm, &["status", "printableStatus"]) == Some(printable)
                    && at(vm, &["status", "ready"]).and_then(Value::as_bool) == Some(ready)
                    && at(vm, &["status", "created"]).and_then(Value::as_bool) == Some(created)
            });
        if shown {
            continue;
        }
        st.kube.infra.modify(Kind::Vm, &r.ns, &r.name, |vm| {
            let status = obj_at(vm, &["status"]);
            status.insert("printableStatus".into(), json!(printable));
            status.insert("ready".into(), json!(ready));
            status.insert("created".into(), json!(created));
        });
    }
    let vmis: Vec<(VmiRef, bool, String, bool)> = st
        .kube
        .infra
        .list(Kind::Vmi, None)
        .map(|v| {
            (
                vmi_ref(v),
                deleting(v),
                phase(v).to_string(),
                unschedulable(v),
            )
        })
        .collect();
    for (r, stopping, phase, unplaced) in &vmis {
        if *stopping {
            continue;
        }
        match phase.as_str() {
            "" => {
                st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                    set_at(v, &["status", "phase"], json!("Pending"));
                });
                after(st, now, VMI_SCHEDULING_MS, Event::VmiStep(r.clone()));
            }
            // One that found no node at its turn is placed as soon as one frees up.
            "Scheduling" if *unplaced => {
                place(st, now, r);
            }
            _ => {}
        }
    }
    collect_owned_secrets(st);
    // Forget what belonged to VMIs that are gone (keeps the side tables bounded).
    let live: std::collections::BTreeSet<&str> = vmis.iter().map(|v| v.0.uid.as_str()).collect();
    st.kube
        .running_since
        .retain(|uid, _| live.contains(uid.as_str()));
    st.kube
        .evacuation_since
        .retain(|uid, _| live.contains(uid.as_str()));
}

/// Whether the VMI found no node when it was its turn.
fn unschedulable(vmi: &Value) -> bool {
    at(vmi, &["status", "conditions"])
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.get("reason").and_then(Value::as_str) == Some("Unschedulable"))
        })
}

/// Puts a Scheduling VMI on the schedulable infra node with the fewest VMIs; false if
/// there is none.
fn place(st: &mut State, now: Timestamp, r: &VmiRef) -> bool {
    let Some(node) = least_loaded(st, None) else {
        return false;
    };
    st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
        set_at(v, &["status", "phase"], json!("Scheduled"));
        set_at(v, &["status", "nodeName"], json!(node));
        set_at(v, &["status", "conditions"], json!([]));
        obj_at(v, &["metadata", "labels"]).insert("kubevirt.io/nodeName".into(), json!(node));
    });
    after(st, now, VMI_START_MS, Event::VmiStep(r.clone()));
    true
}

fn create_vmi(st: &mut State, now: Timestamp, vm: &Value) {
    let r = vmi_ref(vm);
    let template = at(vm, &["spec", "template"]).cloned().unwrap_or(json!({}));
    let mut meta = json!({
        "name": r.name,
        "labels": at(&template, &["metadata", "labels"]).cloned().unwrap_or(json!({})),
        "ownerReferences": [{
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "name": r.name,
            "uid": r.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }],
        "finalizers": ["kubevirt.io/virtualMachineControllerFinalize", "foregroundDeleteVirtualMachine"],
    });
    if let Some(a) = at(&template, &["metadata", "annotations"]) {
        set_at(&mut meta, &["annotations"], a.clone());
    }
    let vmi = json!({
        "metadata": meta,
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
        "status": {},
    });
    let uid = st.kube.uid();
    st.kube.infra.create(Kind::Vmi, &r.ns, vmi, uid, now);
}

/// A pending VMI transition is due.
pub(crate) fn step(st: &mut State, t: Timestamp, r: &VmiRef) {
    let Some(vmi) = st.kube.infra.get(Kind::Vmi, &r.ns, &r.name).cloned() else {
        return;
    };
    if deleting(&vmi) {
        return;
    }
    match phase(&vmi) {
        "Pending" => {
            st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                set_at(v, &["status", "phase"], json!("Scheduling"));
            });
            after(st, t, VMI_PLACE_MS, Event::VmiStep(r.clone()));
        }
        "Scheduling" if !place(st, t, r) => {
            st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                set_at(
                    v,
                    &["status", "conditions"],
                    json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "no infra node is schedulable"}]),
                );
            });
        }
        "Scheduled" if missing_secret(st, &vmi).is_some() => {
            // The launcher pod cannot mount the user-data Secret: it waits, as the
            // kubelet does, and tries again.
            let secret = missing_secret(st, &vmi).unwrap_or_default();
            st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                set_at(
                    v,
                    &["status", "conditions"],
                    json!([{"type": "Ready", "status": "False", "reason": "FailedMount",
                        "message": format!("MountVolume.SetUp failed for volume \"{CLOUD_INIT_DISK}\": secret \"{secret}\" not found")}]),
                );
            });
            after(st, t, VMI_START_MS, Event::VmiStep(r.clone()));
        }
        "Scheduled" => {
            st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                set_at(v, &["status", "phase"], json!("Running"));
                set_at(
                    v,
                    &["status", "conditions"],
                    json!([{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(t)}]),
                );
            });
            st.kube.running_since.insert(r.uid.clone(), t);
            if let Some(cluster) = cluster_of(&vmi) {
                guests::ensure(st, t, &cluster, false);
                // A slow boot (`kubeadm.slowBoot`) runs cloud-init, and so kubeadm, later.
                let tags = super::tags_of_labels(&labels_of(&vmi));
                let slow = crate::faults::slow_boot_ms(st, t, &tags);
                let (lo, hi) = st.config.latencies.node_register;
                after(
                    st,
                    t,
                    (lo + slow, hi + slow),
                    Event::NodeRegister(r.clone()),
                );
                if is_control_plane(&vmi) {
                    st.schedule(t.plus_millis(API_UP_AFTER_MS), SimEvent::K8s(Event::Tick));
                }
            }
        }
        _ => {}
    }
}

/// The volume cloud-init reads.
const CLOUD_INIT_DISK: &str = "cloudinitdisk";

/// The Secret a VMI's `cloudInitNoCloud` volume names that does not exist (or lacks the
/// `userdata` key), if one does.
fn missing_secret(st: &State, vmi: &Value) -> Option<String> {
    let ns = str_at(vmi, &["metadata", "namespace"]).unwrap_or("");
    at(vmi, &["spec", "volumes"])?
        .as_array()?
        .iter()
        .filter_map(|v| str_at(v, &["cloudInitNoCloud", "secretRef", "name"]))
        .find(|name| {
            st.kube.infra.get(Kind::Secret, ns, name).is_none_or(|s| {
                at(s, &["data", "userdata"]).is_none() && at(s, &["data", "userData"]).is_none()
            })
        })
        .map(str::to_string)
}

/// The garbage collector, for Secrets: one owned by a VirtualMachine that no longer
/// exists (by uid) goes.
fn collect_owned_secrets(st: &mut State) {
    let orphans: Vec<(String, String)> = st
        .kube
        .infra
        .list(Kind::Secret, None)
        .filter(|s| {
            let ns = str_at(s, &["metadata", "namespace"]).unwrap_or("");
            let owners = at(s, &["metadata", "ownerReferences"]).and_then(Value::as_array);
            owners.is_some_and(|os| {
                os.iter()
                    .filter(|o| o.get("kind").and_then(Value::as_str) == Some("VirtualMachine"))
                    .any(|o| {
                        let name = o.get("name").and_then(Value::as_str).unwrap_or("");
                        let uid = o.get("uid").and_then(Value::as_str).unwrap_or("");
                        st.kube
                            .infra
                            .get(Kind::Vm, ns, name)
                            .is_none_or(|vm| uid_of(vm) != uid)
                    })
            })
        })
        .map(|s| {
            let ns = str_at(s, &["metadata", "namespace"]).unwrap_or("");
            (ns.to_string(), name_of(s).to_string())
        })
        .collect();
    for (ns, name) in orphans {
        st.kube.infra.remove(Kind::Secret, &ns, &name);
    }
}

/// The cloud-init user data a VMI boots: its `cloudInitNoCloud` volume's `userData`,
/// `userDataBase64`, or the `userdata` key of the infra Secret it names.
pub(crate) fn user_data(st: &State, vmi: &Value) -> Option<String> {
    use base64::Engine as _;
    let b64 = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let ns = str_at(vmi, &["metadata", "namespace"]).unwrap_or("");
    let source = at(vmi, &["spec", "volumes"])?
        .as_array()?
        .iter()
        .find_map(|v| v.get("cloudInitNoCloud"))?;
    if let Some(plain) = source.get("userData").and_then(Value::as_str) {
        return Some(plain.to_string());
    }
    if let Some(encoded) = source.get("userDataBase64").and_then(Value::as_str) {
        return b64(encoded);
    }
    let secret = str_at(source, &["secretRef", "name"])?;
    let s = st.kube.infra.get(Kind::Secret, ns, secret)?;
    str_at(s, &["data", "userdata"])
        .or_else(|| str_at(s, &["data", "userData"]))
        .and_then(b64)
}

/// Whether the workload cluster `cluster`, a KubeVirt guest, has a machine that runs
/// with its Node: a VMI of the cluster's incarnation `uid` that runs, whose Node the
/// guest holds.
pub(crate) fn guest_lives(st: &State, cluster: &str, uid: &str) -> bool {
    let Some(w) = st.kube.workloads.get(cluster).filter(|w| !w.cloud) else {
        return false;
    };
    st.kube.infra.list(Kind::Vmi, None).any(|v| {
        cluster_label(v) == Some(cluster)
            && str_at(v, &["metadata", "labels", super::LABEL_UID]) == Some(uid)
            && phase(v) == "Running"
            && !deleting(v)
            && w.store.contains(Kind::Node, "", name_of(v))
    })
}

/// Whether the API of `cluster`, a KubeVirt guest, answers.
pub(crate) fn guest_api_up(st: &State, cluster: &str) -> bool {
    st.kube
        .workloads
        .get(cluster)
        .is_some_and(|w| !w.cloud && w.up)
}

/// Whether the VMI (`ns/name`) has run for the time its cluster's API needs to answer.
pub(crate) fn api_serving(st: &State, vmi: &Value, now: Timestamp) -> bool {
    phase(vmi) == "Running"
        && !deleting(vmi)
        && st
            .kube
            .running_since
            .get(uid_of(vmi))
            .is_some_and(|since| since.plus_millis(API_UP_AFTER_MS) <= now)
}

/// Starts deleting VMI `ns/name` (its finalizers run, then it is gone), recording the
/// deletion as client-initiated through `cause`. Answers the VMI as it is now.
pub(crate) fn start_deletion(
    st: &mut State,
    now: Timestamp,
    ns: &str,
    name: &str,
    cause: &str,
) -> Option<Value> {
    let vmi = st.kube.infra.get(Kind::Vmi, ns, name)?.clone();
    if deleting(&vmi) {
        return Some(vmi);
    }
    let cluster = cluster_of(&vmi).unwrap_or_default();
    let (guest_node, pods_left) = guests::guest_pods_left(st, &cluster, name);
    // An operator's (or a fault's) deletion is out of band; every other is a client's.
    let by_api = !cause.starts_with("operator:");
    guests::deletion_begins(st, now, &cluster, name, by_api);
    st.kube.record_deletion(VmiDeletion {
        at: now,
        cluster,
        vmi: name.to_string(),
        uid: uid_of(&vmi).to_string(),
        cause: cause.to_string(),
        guest_node,
        pods_left,
        evacuation: str_at(&vmi, &["status", "evacuationNodeName"]).map(str::to_string),
        evacuation_since: st.kube.evacuation_since.get(uid_of(&vmi)).copied(),
    });
    let updated = st.kube.infra.modify(Kind::Vmi, ns, name, |v| {
        let meta = obj_at(v, &["metadata"]);
        meta.insert("deletionTimestamp".into(), json!(rfc3339(now)));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    });
    // The guest gets its `terminationGracePeriodSeconds` to shut down (at most 10
    // minutes); without one it stops within a few seconds.
    let grace = at(&vmi, &["spec", "terminationGracePeriodSeconds"])
        .and_then(Value::as_u64)
        .filter(|g| *g > 0)
        .map(|g| g.min(600) * 1000);
    let range = grace.map_or(VMI_DELETE_MS, |ms| (ms, ms));
    after(st, now, range, Event::VmiGone(vmi_ref(&vmi)));
    updated
}

/// A deleted VMI's finalizers ran: it is gone, its guest with it.
pub(crate) fn gone(st: &mut State, t: Timestamp, r: &VmiRef) {
    let Some(vmi) = st.kube.infra.remove(Kind::Vmi, &r.ns, &r.name) else {
        return;
    };
    st.kube.running_since.remove(&r.uid);
    st.kube.evacuation_since.remove(&r.uid);
    if let Some(cluster) = cluster_of(&vmi) {
        guests::guest_gone(st, t, &cluster, &r.name);
    }
}

/// `operator.deleteMachine` on KubeVirt: an operator deletes `count` of the targeted
/// VMs (`kubectl delete vm`), picked with the fault stream; their VMIs go with them.
/// Answers how many.
pub(crate) fn delete_out_of_band(
    st: &mut State,
    now: Timestamp,
    fault: &SimFault,
    count: usize,
) -> u64 {
    let candidates: Vec<(String, String)> = st
        .kube
        .infra
        .list(Kind::Vm, None)
        .filter(|vm| !deleting(vm))
        .filter(|vm| {
            let tags = super::tags_of_labels(&labels_of(vm));
            flightdeck_cloud::ownership::uid_of(&tags).is_some() && fault.targets(&tags)
        })
        .map(|vm| {
            let ns = str_at(vm, &["metadata", "namespace"]).unwrap_or_default();
            (ns.to_string(), name_of(vm).to_string())
        })
        .collect();
    let chosen = crate::faults::pick(&mut st.rng_faults, candidates, count);
    let n = chosen.len() as u64;
    for (ns, name) in chosen {
        vm_deleted(st, now, &ns, &name, "operator: kubectl delete vm");
        st.kube.infra.remove(Kind::Vm, &ns, &name);
        st.kube.dirty = true;
    }
    n
}

/// A VM was deleted: its VMI goes too.
pub(crate) fn vm_deleted(st: &mut State, now: Timestamp, ns: &str, name: &str, cause: &str) {
    start_deletion(st, now, ns, name, cause);
}

/// `kubevirt.drainInfraNode` starts on `node`.
/// Answers how many VMIs ran there.
pub(crate) fn drain_start(st: &mut State, t: Timestamp, node: &str) -> u64 {
    st.kube.dirty = true;
    st.kube.infra.modify(Kind::Node, "", node, |n| {
        set_at(n, &["spec", "unschedulable"], json!(true));
        set_at(
            n,
            &["spec", "taints"],
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": rfc3339(t)}]),
        );
    });
    let on_node: Vec<Value> = st
        .kube
        .infra
        .list(Kind::Vmi, None)
        .filter(|v| str_at(v, &["status", "nodeName"]) == Some(node))
        .cloned()
        .collect();
    let n = on_node.len() as u64;
    for vmi in on_node {
        let r = vmi_ref(&vmi);
        match str_at(&vmi, &["spec", "evictionStrategy"]) {
            // Marked even while already being deleted (its launcher pod is evicted with
            // the rest): whoever handles evacuations must leave such a VMI alone.
            Some("External") => {
                st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                    set_at(v, &["status", "evacuationNodeName"], json!(node));
                });
                st.kube.evacuation_since.entry(r.uid.clone()).or_insert(t);
            }
            Some("LiveMigrate" | "LiveMigrateIfPossible")
                if !migrating(&vmi) && !deleting(&vmi) =>
            {
                st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
                    set_at(
                        v,
                        &["status", "migrationState"],
                        json!({
                            "sourceNode": node,
                            "startTimestamp": rfc3339(t),
                            "mode": "PreCopy",
                            "completed": false,
                            "failed": false,
                        }),
                    );
                });
                after(st, t, VMI_MIGRATION_MS, Event::Migrated(r));
            }
            _ => {}
        }
    }
    n
}

/// `kubevirt.drainInfraNode` ends: the node takes VMIs again.
pub(crate) fn drain_end(st: &mut State, _t: Timestamp, node: &str) {
    st.kube.dirty = true;
    st.kube.infra.modify(Kind::Node, "", node, |n| {
        let spec = obj_at(n, &["spec"]);
        spec.remove("unschedulable");
        spec.remove("taints");
    });
}

/// A live migration completes: the VMI runs on another schedulable node (or the
/// migration failed when there is none, and it stays).
pub(crate) fn migrated(st: &mut State, t: Timestamp, r: &VmiRef) {
    let Some(vmi) = st.kube.infra.get(Kind::Vmi, &r.ns, &r.name).cloned() else {
        return;
    };
    if !migrating(&vmi) || deleting(&vmi) {
        return;
    }
    let source = str_at(&vmi, &["status", "nodeName"]).map(str::to_string);
    let target = least_loaded(st, source.as_deref());
    st.kube.infra.modify(Kind::Vmi, &r.ns, &r.name, |v| {
        let state = obj_at(v, &["status", "migrationState"]);
        state.insert("completed".into(), json!(true));
        state.insert("endTimestamp".into(), json!(rfc3339(t)));
        match &target {
            Some(node) => {
                state.insert("targetNode".into(), json!(node));
                set_at(v, &["status", "nodeName"], json!(node));
                obj_at(v, &["metadata", "labels"])
                    .insert("kubevirt.io/nodeName".into(), json!(node));
            }
            None => {
                state.insert("failed".into(), json!(true));
            }
        }
    });
}
