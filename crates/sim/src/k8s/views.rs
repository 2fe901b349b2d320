//! What the simulator shows of its Kubernetes clusters beyond their APIs: the
//! Kubernetes side of the world snapshot ([`snapshot`]), and the workload cluster of one
//! OpenStack or OpenNebula cluster ([`SimCloud::guest_view`]).

use serde_json::Value;

use super::store::{Kind, Store, at, deleting, labels_of, name_of, str_at};
use super::{
    KubeNodeView, KubeObjectView, KubePdbView, KubePodView, KubeVmView, KubeVmiView,
    KubeWorkloadView, KubeWorld, Workload, kubevirt, objects, tags_of_labels, uid_of,
};
use flightdeck_cloud::Clock;

use crate::{SimCloud, State};

fn node_view(n: &Value) -> KubeNodeView {
    KubeNodeView {
        name: name_of(n).to_string(),
        ready: objects::node_is_ready(n),
        unschedulable: at(n, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true),
    }
}

fn namespace_of(v: &Value) -> String {
    str_at(v, &["metadata", "namespace"])
        .unwrap_or("")
        .to_string()
}

fn pod_view(p: &Value) -> KubePodView {
    KubePodView {
        namespace: namespace_of(p),
        name: name_of(p).to_string(),
        uid: uid_of(p).to_string(),
        node: str_at(p, &["spec", "nodeName"]).map(str::to_string),
        phase: str_at(p, &["status", "phase"]).unwrap_or("").to_string(),
        ready: objects::pod_is_ready(p),
        daemonset: objects::is_daemonset_pod(p),
        mirror: objects::is_mirror_pod(p),
        deleting: deleting(p),
    }
}

fn pdb_view(p: &Value) -> KubePdbView {
    let n = |f: &str| at(p, &["status", f]).and_then(Value::as_i64).unwrap_or(0);
    KubePdbView {
        namespace: namespace_of(p),
        name: name_of(p).to_string(),
        disruptions_allowed: n("disruptionsAllowed"),
        current_healthy: n("currentHealthy"),
        desired_healthy: n("desiredHealthy"),
    }
}

/// Views of every object of `kind` in `store`, parsing none for good.
fn views<T>(store: &Store, kind: Kind, view: impl Fn(&Value) -> T) -> Vec<T> {
    let mut out = Vec::new();
    store.peek_all(kind, |v| out.push(view(v)));
    out
}

fn workload_view(name: &str, w: &Workload) -> KubeWorkloadView {
    KubeWorkloadView {
        name: name.to_string(),
        api_up: w.up,
        nodes: views(&w.store, Kind::Node, node_view),
        pods: views(&w.store, Kind::Pod, pod_view),
        pdbs: views(&w.store, Kind::Pdb, pdb_view),
    }
}

/// The Kubernetes side of the world snapshot.
pub(crate) fn snapshot(st: &State) -> KubeWorld {
    let infra = &st.kube.infra;
    let objects = |kind: Kind| -> Vec<KubeObjectView> {
        infra
            .list(kind, None)
            .map(|v| KubeObjectView {
                namespace: namespace_of(v),
                name: name_of(v).to_string(),
                tags: tags_of_labels(&labels_of(v)),
            })
            .collect()
    };
    let vms = infra
        .list(Kind::Vm, None)
        .map(|v| KubeVmView {
            name: name_of(v).to_string(),
            uid: uid_of(v).to_string(),
            run_strategy: kubevirt::run_strategy(v).to_string(),
            printable_status: str_at(v, &["status", "printableStatus"])
                .unwrap_or("")
                .to_string(),
            tags: tags_of_labels(&labels_of(v)),
            deleting: deleting(v),
        })
        .collect();
    let vmis = infra
        .list(Kind::Vmi, None)
        .map(|v| KubeVmiView {
            name: name_of(v).to_string(),
            uid: uid_of(v).to_string(),
            phase: str_at(v, &["status", "phase"]).unwrap_or("").to_string(),
            node: str_at(v, &["status", "nodeName"]).map(str::to_string),
            evacuation_node: str_at(v, &["status", "evacuationNodeName"]).map(str::to_string),
            eviction_strategy: str_at(v, &["spec", "evictionStrategy"]).map(str::to_string),
            migrating: kubevirt::migrating(v),
            deleting: deleting(v),
            tags: tags_of_labels(&labels_of(v)),
            evacuation_since: st.kube.evacuation_since.get(uid_of(v)).copied(),
        })
        .collect();
    let workloads = st
        .kube
        .workloads
        .iter()
        .filter(|(_, w)| !w.cloud)
        .map(|(name, w)| workload_view(name, w))
        .collect();
    KubeWorld {
        infra_nodes: infra.list(Kind::Node, None).map(node_view).collect(),
        vms,
        vmis,
        workloads,
        vmi_deletions: st.kube.deletions.iter().cloned().collect(),
        services: objects(Kind::Service),
        secrets: objects(Kind::Secret),
    }
}

/// A Node of an OpenStack or OpenNebula workload cluster whose server or VM is gone.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StaleNode {
    /// The flightdeck cluster.
    pub cluster: String,
    pub node: String,
    /// When its machine went.
    pub machine_gone_at: flightdeck_cloud::Timestamp,
    /// Whether the workload cluster has an API to delete it through now: some machine
    /// of the cluster runs with its Node Ready. When none does (every machine is gone or
    /// down), nobody can delete a Node.
    pub api_alive: bool,
}

impl SimCloud {
    /// Every Node whose machine is gone and which no one has deleted yet (ground truth
    /// for "`kubectl get nodes` lists no machine that no longer exists"). Not an API call.
    pub fn stale_nodes(&self) -> Vec<StaleNode> {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        let alive: std::collections::BTreeSet<&str> = st
            .nodes
            .values()
            .filter(|n| n.machine_gone_at.is_none() && n.node.ready)
            .filter(|n| {
                n.node
                    .server_id
                    .as_deref()
                    .is_some_and(|sid| st.host_running(sid))
            })
            .filter_map(|n| n.cluster.as_deref())
            .collect();
        st.nodes
            .values()
            .filter_map(|rec| {
                let cluster = rec.cluster.clone()?;
                Some(StaleNode {
                    api_alive: alive.contains(cluster.as_str()),
                    cluster,
                    node: rec.node.name.clone(),
                    machine_gone_at: rec.machine_gone_at?,
                })
            })
            .collect()
    }

    /// The workload cluster of OpenStack or OpenNebula cluster `cluster` as it is now
    /// (after catching up): its nodes, pods and PodDisruptionBudgets, as
    /// [`crate::KubeWorld::workloads`] shows those of KubeVirt clusters; `None` while
    /// none of its machines has registered a node. `api_up` says whether its
    /// controllers run (a control-plane node is Ready). Not an API call.
    pub fn guest_view(&self, cluster: &str) -> Option<KubeWorkloadView> {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.kube
            .workloads
            .get(cluster)
            .filter(|w| w.cloud)
            .map(|w| workload_view(cluster, w))
    }
}
