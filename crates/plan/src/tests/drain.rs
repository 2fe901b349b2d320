//! F9: graceful eviction of KubeVirt VMIs with a bounded drain. Each test builds the
//! VMIs, guest nodes and pods the cloud shows and checks the drain's next step.

use std::collections::BTreeMap;

use flightdeck_cloud::{EvictionStrategy, Node, Observed, Pod, Server, ServerStatus, Vmi};
use flightdeck_spec::{Cluster, Document, Duration, load_documents};

use super::{T0, condition};
use crate::drain::DrainPolicy;
use crate::memory::DrainRecord;
use crate::{
    Action, MachineRecord, MachineRole, MachineTemplate, Memory, Plan, PlanInput, PlanOptions,
    Shared, plan,
};

const VM: &str = "kv-workers-2";
const INFRA: &str = "infra-2";

fn kv_spec() -> Cluster {
    let yaml = "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata:
  name: kv
spec:
  bootstrap: {provider: none}
  controlPlane:
    replicas: 1
    version: v1.30.2
    machine: {flavor: u1.medium, image: quay.io/containerdisks/ubuntu:22.04}
  nodePools:
    - name: workers
      replicas: 1
      machine: {flavor: u1.large, image: quay.io/containerdisks/ubuntu:22.04}
  network:
    podCIDR: 10.244.0.0/16
  provider:
    kubevirt:
      namespace: clusters
      drainTimeout: 10m
";
    let docs = load_documents(yaml, "kv-spec").expect("the KubeVirt test spec parses");
    match docs.into_iter().next() {
        Some(Document::Cluster(c)) => *c,
        other => panic!("expected one Cluster document, got {other:?}"),
    }
}

fn tags(key: &str) -> Vec<String> {
    flightdeck_cloud::Ownership {
        cluster: "kv".into(),
        uid: "uid-1".into(),
    }
    .tags(&flightdeck_cloud::Role::Machine(key.into()))
}

struct World {
    spec: Cluster,
    observed: Observed,
    memory: Memory,
    now: flightdeck_cloud::Timestamp,
    drain: DrainPolicy,
}

impl World {
    /// One control-plane and one worker machine, both running and Ready, the endpoint
    /// Service in place; the worker's VMI is asked to evacuate `infra-2` when `evacuate`.
    fn new(strategy: EvictionStrategy, evacuate: bool) -> World {
        let spec = kv_spec();
        let mut memory = Memory::new("uid-1".into());
        let mut observed = Observed::default();
        let mut nodes = Vec::new();
        for (key, flavor, role) in [
            ("cp-1", "u1.medium", MachineRole::ControlPlane),
            ("workers-2", "u1.large", MachineRole::Pool("workers".into())),
        ] {
            let name = format!("kv-{key}");
            memory.machines.insert(
                name.clone(),
                MachineRecord {
                    name: name.clone(),
                    key: key.into(),
                    role,
                    template: MachineTemplate {
                        flavor: flavor.into(),
                        image: "quay.io/containerdisks/ubuntu:22.04".into(),
                        version: if key.starts_with("cp") {
                            "v1.30.2".into()
                        } else {
                            String::new()
                        },
                        user_data: 0,
                    },
                    reason: "test".into(),
                    created_at: T0.minus_mins(30),
                    server_id: Some(name.clone()),
                    member_id: None,
                    member_unready_since: None,
                    server_missing_since: None,
                    node_unready_since: None,
                    remediation: None,
                    removal: None,
                    running_since: None,
                    lineage: Vec::new(),
                    create_sent_at: None,
                    token: None,
                },
            );
            observed.servers.push(Server {
                id: name.clone(),
                name: name.clone(),
                status: ServerStatus::Active,
                task_state: None,
                tags: tags(key),
                security_groups: vec![],
                address: None,
                image: "quay.io/containerdisks/ubuntu:22.04".into(),
                flavor: flavor.into(),
                fault: None,
                created_at: T0.minus_mins(30),
            });
            let is_worker = key.starts_with("workers");
            observed.vmis.push(Vmi {
                name: name.clone(),
                uid: format!("vmi-{key}"),
                phase: "Running".into(),
                node: Some(if is_worker { INFRA } else { "infra-1" }.into()),
                eviction_strategy: Some(if is_worker {
                    strategy.clone()
                } else {
                    EvictionStrategy::External
                }),
                evacuation_node: (is_worker && evacuate).then(|| INFRA.to_string()),
                deleting: false,
                tags: tags(key),
            });
            nodes.push(Node {
                name: name.clone(),
                server_id: Some(name.clone()),
                ready: true,
                unschedulable: false,
                created_at: T0.minus_mins(25),
                pod_cidr: None,
                internal_ip: None,
                labels: Default::default(),
                taints: Vec::new(),
                hold_deletion: None,
            });
        }
        observed.nodes = Some(nodes);
        observed.services.push(flightdeck_cloud::EndpointService {
            name: "kv-api".into(),
            port: 6443,
            address: Some("10.96.0.10".into()),
            tags: vec![],
        });
        memory.ready_since = Some(T0.minus_mins(20));
        World {
            spec,
            observed,
            memory,
            now: T0,
            drain: DrainPolicy::ByIdentity,
        }
    }

    fn pods(&mut self, node: &str, pods: Vec<Pod>) {
        self.observed.pods.insert(node.into(), pods);
    }

    fn node_mut(&mut self, name: &str) -> &mut Node {
        self.observed
            .nodes
            .as_mut()
            .and_then(|n| n.iter_mut().find(|x| x.name == name))
            .expect("the node exists")
    }

    fn plan(&self) -> Plan {
        let mut observed = self.observed.clone();
        observed.at = self.now;
        plan(PlanInput {
            spec: &self.spec,
            observed: &observed,
            memory: &self.memory,
            now: self.now,
            options: &PlanOptions {
                drain: self.drain,
                ..PlanOptions::default()
            },
            shared: &Shared::default(),
            taken_up: None,
        })
    }
}

fn pod(name: &str, daemon_set: bool, mirror: bool, phase: &str) -> Pod {
    Pod {
        namespace: if daemon_set || mirror {
            "kube-system"
        } else {
            "default"
        }
        .into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node: VM.into(),
        phase: phase.into(),
        daemon_set,
        mirror,
        deleting: false,
    }
}

fn kinds(p: &Plan) -> Vec<&'static str> {
    p.actions.iter().map(|a| a.action.kind()).collect()
}

fn evicted(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::EvictPod { pod, .. } | Action::DeletePod { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

trait Minus {
    fn minus_mins(self, m: u64) -> Self;
}

impl Minus for flightdeck_cloud::Timestamp {
    fn minus_mins(self, m: u64) -> Self {
        flightdeck_cloud::Timestamp(self.0 - m * 60_000)
    }
}

#[test]
fn f9_an_evacuation_cordons_the_guest_node_found_by_identity_and_evicts_its_pods() {
    let mut w = World::new(EvictionStrategy::External, true);
    w.pods(
        VM,
        vec![
            pod("web-1", false, false, "Running"),
            pod("kube-proxy-x", true, false, "Running"),
            pod("static-x", false, true, "Running"),
            pod("job-done", false, false, "Succeeded"),
        ],
    );
    let p = w.plan();
    assert!(kinds(&p).contains(&"CordonNode"), "{:?}", kinds(&p));
    // DaemonSet and mirror pods stay; a finished pod is deleted without a budget check.
    assert_eq!(evicted(&p), vec!["web-1", "job-done"]);
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(&a.action, Action::DeletePod { pod, .. } if pod == "job-done"))
    );
    assert!(!kinds(&p).contains(&"DeleteVmi"), "not before the drain");
    let record = &p.memory.drains[VM];
    assert_eq!(record.since, T0, "the drain start is recorded");
    assert_eq!(record.infra_node, INFRA);
    assert_eq!(record.guest_node.as_deref(), Some(VM));
    assert!(condition(&p, "Draining").is_some());
    assert!(p.requeue_after.is_some_and(|d| d <= Duration::from_secs(5)));
}

#[test]
fn f9_the_vmi_is_deleted_once_only_daemonset_and_mirror_pods_remain() {
    let mut w = World::new(EvictionStrategy::External, true);
    w.node_mut(VM).unschedulable = true;
    w.pods(
        VM,
        vec![
            pod("kube-proxy-x", true, false, "Running"),
            pod("static-x", false, true, "Running"),
        ],
    );
    let p = w.plan();
    assert_eq!(kinds(&p), vec!["DeleteVmi"]);
    assert!(p.events.iter().any(|e| e.reason == "NodeDrained"));
    assert!(p.memory.drains[VM].vmi_deleted.is_some());
}

#[test]
fn f9_a_vmi_whose_delete_failed_is_deleted_again() {
    // The delete was answered 503: memory says it was asked, the VMI shows no deletion.
    // Waiting for it would block the infra node for ever (swarm seed 93, found by the
    // deadline half of drainBeforeDelete).
    let mut w = World::new(EvictionStrategy::External, true);
    w.node_mut(VM).unschedulable = true;
    w.pods(VM, vec![pod("kube-proxy-x", true, false, "Running")]);
    let p = w.plan();
    assert_eq!(kinds(&p), vec!["DeleteVmi"]);
    let asked = p.memory.drains[VM].vmi_deleted;
    w.memory = p.memory;
    w.now = T0.plus(Duration::from_secs(5));
    let p = w.plan();
    assert_eq!(kinds(&p), vec!["DeleteVmi"], "asked again");
    assert_eq!(p.memory.drains[VM].vmi_deleted, asked, "first asked then");
    // Once the VMI shows its deletion, nothing more is asked.
    w.memory = p.memory;
    w.observed.vmis.iter_mut().for_each(|v| {
        if v.name == VM {
            v.deleting = true;
        }
    });
    let p = w.plan();
    assert!(kinds(&p).is_empty(), "{:?}", kinds(&p));
}

#[test]
fn f9_an_empty_guest_node_not_yet_cordoned_is_cordoned_first_then_taken_for_drained() {
    // Its pods were listed before the cordon: a pod evicted from another guest node in
    // this pass may still land on it (swarm seed 27 with KubeVirt fleets).
    let mut w = World::new(EvictionStrategy::External, true);
    w.pods(VM, vec![pod("kube-proxy-x", true, false, "Running")]);
    let p = w.plan();
    assert_eq!(
        kinds(&p),
        vec!["CordonNode"],
        "no DeleteVmi on a list taken uncordoned"
    );
    assert!(p.events.iter().all(|e| e.reason != "NodeDrained"));
    assert!(p.requeue_after.is_some_and(|d| d <= Duration::from_secs(5)));
    w.memory = p.memory;
    w.node_mut(VM).unschedulable = true;
    let p = w.plan();
    assert_eq!(kinds(&p), vec!["DeleteVmi"]);
}

#[test]
fn f9_a_pod_still_leaving_holds_the_vmi_back() {
    let mut w = World::new(EvictionStrategy::External, true);
    w.node_mut(VM).unschedulable = true;
    let mut leaving = pod("web-1", false, false, "Running");
    leaving.deleting = true;
    w.pods(VM, vec![leaving]);
    let p = w.plan();
    assert!(kinds(&p).is_empty(), "{:?}", kinds(&p));
}

#[test]
fn f9_the_deadline_deletes_the_vmi_anyway_counted_from_the_recorded_start() {
    let mut w = World::new(EvictionStrategy::External, true);
    w.node_mut(VM).unschedulable = true;
    w.pods(VM, vec![pod("web-1", false, false, "Running")]);
    // A restart six minutes in: memory still says when the drain started.
    w.memory.drains.insert(
        VM.into(),
        DrainRecord {
            vmi_uid: "vmi-workers-2".into(),
            infra_node: INFRA.into(),
            since: T0.minus_mins(6),
            guest_node: Some(VM.into()),
            vmi_deleted: None,
        },
    );
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteVmi"), "4 minutes are left");
    w.now = T0.plus(Duration::from_mins(4));
    let p = w.plan();
    assert!(kinds(&p).contains(&"DeleteVmi"), "{:?}", kinds(&p));
    assert!(p.events.iter().any(|e| e.reason == "DrainDeadlinePassed"));
}

#[test]
fn f9_a_guest_node_not_found_by_identity_is_an_error_not_a_drained_node() {
    let mut w = World::new(EvictionStrategy::External, true);
    // The guest node's providerID names another VM: nothing is found for this one.
    w.node_mut(VM).server_id = Some("someone-else".into());
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteVmi"), "{:?}", kinds(&p));
    let c = condition(&p, "Draining").expect("the cluster says why");
    assert!(c.message.contains("cannot be found"), "{}", c.message);
}

#[test]
fn f9_the_upstream_lookup_by_infra_node_name_deletes_at_once() {
    let mut w = World::new(EvictionStrategy::External, true);
    w.pods(VM, vec![pod("web-1", false, false, "Running")]);
    w.drain = DrainPolicy::UpstreamByEvacuationNode;
    let p = w.plan();
    // No guest node is called infra-2: upstream takes the NotFound for "drained".
    assert_eq!(kinds(&p), vec!["DeleteVmi"]);
}

#[test]
fn f9_vmis_being_deleted_or_live_migrating_are_left_alone() {
    let w = World::new(EvictionStrategy::LiveMigrate, true);
    let p = w.plan();
    assert!(kinds(&p).is_empty(), "{:?}", kinds(&p));
    let mut w = World::new(EvictionStrategy::External, true);
    w.observed.vmis[1].deleting = true;
    let p = w.plan();
    assert!(kinds(&p).is_empty(), "{:?}", kinds(&p));
    assert!(p.memory.drains.is_empty());
}

#[test]
fn f9_the_replacement_s_node_is_uncordoned_once_it_runs_and_is_ready() {
    let mut w = World::new(EvictionStrategy::External, false);
    w.node_mut(VM).unschedulable = true;
    w.observed.vmis[1].uid = "vmi-replacement".into();
    w.memory.drains.insert(
        VM.into(),
        DrainRecord {
            vmi_uid: "vmi-workers-2".into(),
            infra_node: INFRA.into(),
            since: T0.minus_mins(3),
            guest_node: Some(VM.into()),
            vmi_deleted: Some(T0.minus_mins(2)),
        },
    );
    w.node_mut(VM).ready = false;
    let p = w.plan();
    assert!(!kinds(&p).contains(&"UncordonNode"), "not before Ready");
    w.node_mut(VM).ready = true;
    let p = w.plan();
    assert_eq!(kinds(&p), vec!["UncordonNode"]);
    assert!(p.memory.drains.is_empty());
    let _: BTreeMap<String, DrainRecord> = p.memory.drains;
}

/// Another control-plane machine, `other`, whose VMI was deleted for an evacuation a
/// minute ago and is not back yet.
fn evacuated_a_minute_ago(w: &mut World, other: &str) {
    let mut record = w.memory.machines["kv-cp-1"].clone();
    record.name = other.into();
    w.memory.machines.insert(other.into(), record);
    w.memory.drains.insert(
        other.into(),
        DrainRecord {
            vmi_uid: "old".into(),
            infra_node: "infra-1".into(),
            since: T0.minus_mins(2),
            guest_node: Some(other.into()),
            vmi_deleted: Some(T0.minus_mins(1)),
        },
    );
}

#[test]
fn f9_control_plane_vmis_leave_one_at_a_time() {
    let mut w = World::new(EvictionStrategy::External, false);
    // The control-plane VMI is asked to evacuate while another control-plane machine,
    // evacuated a minute ago, is not back yet.
    w.observed.vmis[0].evacuation_node = Some("infra-1".into());
    w.node_mut("kv-cp-1").unschedulable = true;
    w.pods("kv-cp-1", vec![pod("kube-proxy-x", true, false, "Running")]);
    let other = "kv-cp-9";
    evacuated_a_minute_ago(&mut w, other);
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteVmi"), "{:?}", kinds(&p));
    let c = condition(&p, "Draining").expect("says why it waits");
    assert!(
        c.message.contains("one") || c.message.contains(other),
        "{}",
        c.message
    );
    // Alone, it goes.
    w.memory.drains.remove(other);
    let p = w.plan();
    assert!(kinds(&p).contains(&"DeleteVmi"), "{:?}", kinds(&p));
}

#[test]
fn f9_at_the_deadline_control_plane_vmis_still_leave_one_at_a_time() {
    let mut w = World::new(EvictionStrategy::External, false);
    w.observed.vmis[0].evacuation_node = Some("infra-1".into());
    w.node_mut("kv-cp-1").unschedulable = true;
    w.pods("kv-cp-1", vec![pod("kube-proxy-x", true, false, "Running")]);
    // Its drain began long ago: the deadline has passed.
    let uid = w.observed.vmis[0].uid.clone();
    w.memory.drains.insert(
        "kv-cp-1".into(),
        DrainRecord {
            vmi_uid: uid,
            infra_node: "infra-1".into(),
            since: T0.minus_mins(120),
            guest_node: Some("kv-cp-1".into()),
            vmi_deleted: None,
        },
    );
    // Another control-plane machine's VMI went a minute ago and is not back.
    let other = "kv-cp-9";
    evacuated_a_minute_ago(&mut w, other);
    let p = w.plan();
    assert!(
        !kinds(&p).contains(&"DeleteVmi"),
        "quorum first: {:?}",
        kinds(&p)
    );
    let c = condition(&p, "Draining").expect("says why it waits");
    assert!(c.message.contains("deadline"), "{}", c.message);
    assert!(c.message.contains(other), "{}", c.message);
    // Once the other is back, the deadline takes it at once.
    w.memory.drains.remove(other);
    let p = w.plan();
    assert!(kinds(&p).contains(&"DeleteVmi"), "{:?}", kinds(&p));
    assert!(p.events.iter().any(|e| e.reason == "DrainDeadlinePassed"));
}

/// Seed 42005826: a machine being removed (a rollout, a scale-down) whose VMI KubeVirt
/// evacuates at the same time is drained by both. One cordon and one eviction per pod
/// serve both drains, so the plan is not refused as two actions on one node.
#[test]
fn g1_a_machine_removed_while_its_vmi_is_evacuated_is_cordoned_and_evicted_once() {
    let mut w = World::new(EvictionStrategy::External, true);
    w.memory.machines.get_mut(VM).expect("the worker").removal = Some(crate::memory::Removal {
        since: T0,
        reason: "an operator removes it".into(),
        drain_since: None,
        node: None,
        scale_down: false,
    });
    w.pods(VM, vec![pod("web-1", false, false, "Running")]);
    let p = w.plan();
    assert!(
        !p.events.iter().any(|e| e.reason == "PlanRejected"),
        "{:#?}",
        p.events
    );
    let cordons = kinds(&p).iter().filter(|k| **k == "CordonNode").count();
    assert_eq!(cordons, 1, "{:?}", kinds(&p));
    assert_eq!(evicted(&p), vec!["web-1"]);
    assert_eq!(p.memory.drains[VM].since, T0, "F9's drain runs too");
}
