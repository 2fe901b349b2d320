//! Simulated Kubernetes API servers, reached one request at a time through
//! [`SimCloud::kube_request`]: the infrastructure cluster (`"infra"`), which runs
//! KubeVirt, and one workload cluster per flightdeck cluster whose machines are
//! KubeVirt VMs.
//!
//! - [`store`]: objects, the cluster-wide `resourceVersion` and the watch log.
//! - [`api`]: one request answered: [`routes`] (paths, verbs, what calls are counted
//!   under), [`answers`] (responses and `Status` bodies), [`read`] (lists and watches),
//!   [`writes`] (create, update, delete) with [`validate`], [`discovery`] and [`patch`].
//! - [`eviction`]: the Eviction subresource against PodDisruptionBudgets.
//! - [`kubevirt`]: virt-controller: VMs → VMIs, scheduling, deletion, evacuation.
//! - [`workload`]: the workload clusters' controller pass: guest nodes registering,
//!   DaemonSet and mirror pods, the `web` app's ReplicaSet controller and scheduler;
//!   with [`guests`] (a new workload cluster, a guest's end), [`pods`] (pod startup and
//!   graceful deletion), [`disruption`] (PDB status) and [`objects`] (Nodes and pods as
//!   JSON).
//!
//! Everything happens in virtual time under the one [`State`] lock: a request changes
//! the store at once; what controllers and kubelets do later is a timer transition.
//! Controllers run after every call and transition ([`settle`]) until nothing changes.
//!
//! flightdeck labels its VMs with `flightdeck.dev/cluster`, `flightdeck.dev/uid`,
//! `flightdeck.dev/role` and `flightdeck.dev/machine`; wherever the simulator reports
//! tags (the [`crate::World`] and [`crate::Mutation::target_tags`]) these labels read as
//! flightdeck's tag strings (`flightdeck-cluster=<name>`, ...).

mod answers;
mod api;
mod compact;
mod discovery;
mod disruption;
mod eviction;
mod guests;
mod keyed;
mod kubelets;
mod kubevirt;
mod lost;
mod machines;
mod objects;
mod patch;
mod pods;
mod read;
mod routes;
mod select;
mod store;
mod validate;
mod views;
mod watch_query;
mod workload;
mod writes;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use flightdeck_cloud::ownership::{TAG_CLUSTER, TAG_MACHINE, TAG_ROLE, TAG_TEMPLATE, TAG_UID};
use flightdeck_cloud::{Clock, Rng, SeededRng, Timestamp};
use serde::Serialize;
use serde_json::Value;

use crate::{Event as SimEvent, Mutation, SimCloud, State};

pub use lost::{BUDGET_EVENTS_MAX, BudgetEvent, BudgetEventKind, LOST_PODS_MAX, LostPod};
pub use read::BOOKMARK_START;
pub(crate) use store::parse_rfc3339;
pub use store::{GUEST_EVENTS_MAX, KUBE_EVENTS_MAX, KUBE_OBJECTS_MAX};
use store::{Kind, Store};
/// The kind bootstrap tokens are kept as.
pub(crate) const SECRET_KIND: Kind = Kind::Secret;
pub use views::StaleNode;
pub use watch_query::{query_param, watch_line_version, with_resource_version};

/// The name [`SimCloud::kube_request`] knows the infrastructure cluster by.
pub const INFRA_CLUSTER: &str = "infra";
/// The most workload clusters the simulator runs at once.
pub const KUBE_WORKLOAD_CLUSTERS_MAX: usize = 4_096;
/// The most client-initiated VMI deletions [`KubeWorld::vmi_deletions`] keeps.
pub const VMI_DELETIONS_MAX: usize = 10_000;
/// The largest request body the simulated API servers accept (the real limit, 3 MiB).
pub const KUBE_BODY_MAX: usize = 3 * 1024 * 1024;

/// The label keys flightdeck puts on its VMs, and the tag prefix each reads as.
pub const LABEL_CLUSTER: &str = "flightdeck.dev/cluster";
pub const LABEL_UID: &str = "flightdeck.dev/uid";
pub const LABEL_ROLE: &str = "flightdeck.dev/role";
pub const LABEL_MACHINE: &str = "flightdeck.dev/machine";
const LABEL_TAGS: [(&str, &str); 5] = [
    (LABEL_CLUSTER, TAG_CLUSTER),
    (LABEL_UID, TAG_UID),
    (LABEL_ROLE, TAG_ROLE),
    (LABEL_MACHINE, TAG_MACHINE),
    ("flightdeck.dev/template", TAG_TEMPLATE),
];

/// VMI `Pending → Scheduling` (virt-controller creates the launcher pod).
const VMI_SCHEDULING_MS: (u64, u64) = (1_000, 3_000);
/// VMI `Scheduling → Scheduled` (the launcher pod is bound to a node).
const VMI_PLACE_MS: (u64, u64) = (500, 2_000);
/// VMI `Scheduled → Running` (the launcher pod starts, the guest boots).
const VMI_START_MS: (u64, u64) = (3_500, 10_000);
/// A deleted VMI's finalizers done → gone.
const VMI_DELETE_MS: (u64, u64) = (2_000, 5_000);
/// A live migration, from start to the VMI running on the target node.
const VMI_MIGRATION_MS: (u64, u64) = (10_000, 30_000);
/// A control-plane VMI running → its cluster's API server answers.
const API_UP_AFTER_MS: u64 = 30_000;
/// A pod bound to a Ready node → Running and Ready.
const POD_START_MS: (u64, u64) = (4_000, 6_000);
/// Pods' default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: u64 = 30;

/// One HTTP request to a simulated Kubernetes API server, as it arrives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeRequest {
    pub method: String,
    /// E.g. `/api/v1/nodes`.
    pub path: String,
    /// Raw, without the `?`.
    pub query: String,
    pub body: Vec<u8>,
    pub content_type: Option<String>,
}

/// The simulated API server's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// A client-initiated VMI deletion (a `DELETE` of the VMI or of its VM, or its VM's
/// `runStrategy` set to `Halted`): the ground truth for "the guest node was drained
/// before its VMI went".
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VmiDeletion {
    pub at: Timestamp,
    /// The flightdeck cluster (the VMI's `flightdeck.dev/cluster` label); empty if none.
    pub cluster: String,
    pub vmi: String,
    pub uid: String,
    /// The call that deleted it: `DELETE virtualmachineinstances`, `DELETE
    /// virtualmachines` or `PATCH virtualmachines` (and the like for PUT).
    pub cause: String,
    /// The workload cluster's Node for this VMI, if one registered.
    pub guest_node: Option<String>,
    /// `<namespace>/<name>` of the pods that still had to leave the guest node (not
    /// DaemonSet, not mirror, not being deleted, not finished) when the deletion came.
    pub pods_left: Vec<String>,
    /// The VMI's `status.evacuationNodeName` then.
    pub evacuation: Option<String>,
    /// When `status.evacuationNodeName` was set.
    pub evacuation_since: Option<Timestamp>,
}

/// A node as the snapshot shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubeNodeView {
    pub name: String,
    pub ready: bool,
    pub unschedulable: bool,
}

/// Another object of the infrastructure cluster flightdeck may make (a Service, a
/// Secret), with the ownership tags its labels carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubeObjectView {
    pub namespace: String,
    pub name: String,
    pub tags: Vec<String>,
}

/// A KubeVirt VirtualMachine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubeVmView {
    pub name: String,
    pub uid: String,
    /// `spec.runStrategy` (`Always` for `spec.running: true`, `Halted` if neither).
    pub run_strategy: String,
    pub printable_status: String,
    pub tags: Vec<String>,
    /// It has a deletion timestamp: its removal was asked for.
    pub deleting: bool,
}

/// A KubeVirt VirtualMachineInstance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubeVmiView {
    pub name: String,
    pub uid: String,
    /// `Pending`, `Scheduling`, `Scheduled`, `Running`.
    pub phase: String,
    pub node: Option<String>,
    pub evacuation_node: Option<String>,
    pub eviction_strategy: Option<String>,
    pub migrating: bool,
    pub deleting: bool,
    pub tags: Vec<String>,
    /// When `status.evacuationNodeName` was set, if it is.
    pub evacuation_since: Option<Timestamp>,
}

/// A workload-cluster pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubePodView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: Option<String>,
    pub phase: String,
    pub ready: bool,
    pub daemonset: bool,
    pub mirror: bool,
    pub deleting: bool,
}

/// A PodDisruptionBudget's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubePdbView {
    pub namespace: String,
    pub name: String,
    pub disruptions_allowed: i64,
    pub current_healthy: i64,
    pub desired_healthy: i64,
}

/// One workload cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KubeWorkloadView {
    pub name: String,
    /// Whether its API answers ([`SimCloud::kube_clusters`]).
    pub api_up: bool,
    pub nodes: Vec<KubeNodeView>,
    pub pods: Vec<KubePodView>,
    pub pdbs: Vec<KubePdbView>,
}

/// The Kubernetes side of the [`crate::World`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KubeWorld {
    pub infra_nodes: Vec<KubeNodeView>,
    pub vms: Vec<KubeVmView>,
    pub vmis: Vec<KubeVmiView>,
    /// The workload clusters of KubeVirt-hosted clusters by name (also those whose API
    /// is not up yet). Those of OpenStack and OpenNebula clusters are read one at a
    /// time ([`SimCloud::guest_view`]): a fleet of them would weigh on every snapshot.
    pub workloads: Vec<KubeWorkloadView>,
    /// Client-initiated VMI deletions, oldest first (the latest [`VMI_DELETIONS_MAX`]).
    pub vmi_deletions: Vec<VmiDeletion>,
    /// The infrastructure cluster's Services and Secrets.
    pub services: Vec<KubeObjectView>,
    pub secrets: Vec<KubeObjectView>,
}

/// One workload cluster as the simulator keeps it.
#[derive(Debug, Default)]
pub(crate) struct Workload {
    pub(crate) store: Store,
    /// Its controllers run: its API server answers them.
    pub(crate) up: bool,
    /// Guest node → the ownership tags of the machine (VM) it runs on (KubeVirt).
    pub(crate) node_tags: BTreeMap<String, Vec<String>>,
    /// Its machines are Nova servers or OpenNebula VMs ([`machines`]), not VMIs.
    pub(crate) cloud: bool,
    /// Cloud guests: the cluster UIDs whose nodes it holds.
    pub(crate) uids: BTreeSet<String>,
    /// Cloud guests draw from a stream of their own, so that their pods change no
    /// KubeVirt cluster's draws.
    pub(crate) rng: Option<SeededRng>,
    /// Node → when its machine's deletion began, and how.
    pub(crate) deletions_begun: BTreeMap<String, lost::DeletionBegun>,
    /// Node → since when it has been cordoned (`spec.unschedulable` set through the API).
    pub(crate) cordoned_at: BTreeMap<String, Timestamp>,
}

/// Everything the simulated Kubernetes API servers hold.
pub(crate) struct KubeState {
    pub(crate) infra: Store,
    pub(crate) workloads: BTreeMap<String, Workload>,
    pub(crate) deletions: VecDeque<VmiDeletion>,
    /// VMI uid → when it last became Running.
    pub(crate) running_since: BTreeMap<String, Timestamp>,
    /// VMI uid → when its `evacuationNodeName` was set.
    pub(crate) evacuation_since: BTreeMap<String, Timestamp>,
    /// `(cluster, pod uid)` with a start transition pending.
    pub(crate) pods_starting: BTreeSet<(String, String)>,
    /// Something changed since controllers last ran (infra and KubeVirt guests).
    pub(crate) dirty: bool,
    /// Cloud guests whose controllers must run.
    pub(crate) guests_dirty: BTreeSet<String>,
    /// Lost pods and budget events.
    pub(crate) records: lost::Records,
    /// Where the cloud guests' streams come from, and how many were made.
    guest_seed: u64,
    guests_made: u64,
    /// What the API of each OpenStack/OpenNebula workload cluster served of its nodes,
    /// so a watch can answer the changes since a resourceVersion.
    pub(crate) kubelet_logs: BTreeMap<String, kubelets::NodeLog>,
    rng: SeededRng,
}

impl KubeState {
    pub(crate) fn new(seed: u64) -> Self {
        KubeState {
            infra: Store::default(),
            workloads: BTreeMap::new(),
            deletions: VecDeque::new(),
            running_since: BTreeMap::new(),
            evacuation_since: BTreeMap::new(),
            pods_starting: BTreeSet::new(),
            dirty: false,
            guests_dirty: BTreeSet::new(),
            records: lost::Records::default(),
            guest_seed: SeededRng::fork(seed, "guests").next_u64(),
            guests_made: 0,
            kubelet_logs: BTreeMap::new(),
            rng: SeededRng::new(seed),
        }
    }

    /// A stream for a new cloud guest.
    pub(crate) fn guest_rng(&mut self) -> SeededRng {
        self.guests_made += 1;
        SeededRng::fork(self.guest_seed, &self.guests_made.to_string())
    }

    /// The stream `cluster` draws from.
    fn rng_for(&mut self, cluster: &str) -> &mut SeededRng {
        match self.workloads.get_mut(cluster).and_then(|w| w.rng.as_mut()) {
            Some(rng) => rng,
            None => &mut self.rng,
        }
    }

    pub(crate) fn uid(&mut self) -> String {
        crate::ids::uuid(&mut self.rng)
    }

    /// A uid for an object of `cluster`.
    pub(crate) fn uid_in(&mut self, cluster: &str) -> String {
        crate::ids::uuid(self.rng_for(cluster))
    }

    /// A random suffix as Kubernetes' `generateName` makes it, for `cluster`.
    pub(crate) fn suffix(&mut self, cluster: &str, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let rng = self.rng_for(cluster);
        (0..len)
            .map(|_| {
                let i = rng.below(ALPHABET.len() as u64) as usize;
                char::from(ALPHABET.get(i).copied().unwrap_or(b'x'))
            })
            .collect()
    }

    /// Whether `cluster` is the guest of OpenStack servers or OpenNebula VMs.
    pub(crate) fn is_cloud_guest(&self, cluster: &str) -> bool {
        self.workloads.get(cluster).is_some_and(|w| w.cloud)
    }

    /// Something changed in `cluster`: its controllers run at the next settle.
    pub(crate) fn touch(&mut self, cluster: &str) {
        if self.is_cloud_guest(cluster) {
            self.guests_dirty.insert(cluster.to_string());
        } else {
            self.dirty = true;
        }
    }

    /// The store of `cluster` (`"infra"` or a workload cluster, up or not).
    pub(crate) fn store(&self, cluster: &str) -> Option<&Store> {
        if cluster == INFRA_CLUSTER {
            Some(&self.infra)
        } else {
            self.workloads.get(cluster).map(|w| &w.store)
        }
    }

    pub(crate) fn store_mut(&mut self, cluster: &str) -> Option<&mut Store> {
        if cluster == INFRA_CLUSTER {
            Some(&mut self.infra)
        } else {
            self.workloads.get_mut(cluster).map(|w| &mut w.store)
        }
    }

    fn record_deletion(&mut self, d: VmiDeletion) {
        if self.deletions.len() >= VMI_DELETIONS_MAX {
            self.deletions.pop_front();
        }
        self.deletions.push_back(d);
    }
}

/// flightdeck's tags for an object with `labels` (its `flightdeck.dev/*` labels).
pub(crate) fn tags_of_labels(labels: &BTreeMap<String, String>) -> Vec<String> {
    LABEL_TAGS
        .iter()
        .filter_map(|(label, tag)| labels.get(*label).map(|v| format!("{tag}{v}")))
        .collect()
}

/// One VMI incarnation: a transition for it is moot once the VMI is gone or re-created.
#[derive(Clone, Debug)]
pub(crate) struct VmiRef {
    pub(crate) ns: String,
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// A timer of the Kubernetes simulation.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// VMI `Pending → Scheduling → Scheduled → Running`.
    VmiStep(VmiRef),
    /// A deleted VMI is gone.
    VmiGone(VmiRef),
    /// A live migration completes.
    Migrated(VmiRef),
    /// Something time-based is due (a cluster's API comes up): controllers run.
    Tick,
    /// A running VMI's kubelet registers its Node.
    NodeRegister(VmiRef),
    /// A registered Node turns Ready (if its VMI still runs).
    NodeReady {
        cluster: String,
        node: String,
        vmi_uid: String,
    },
    /// A bound pod's containers run.
    PodStart {
        cluster: String,
        ns: String,
        name: String,
        uid: String,
    },
    /// A gracefully deleted pod's grace period is over.
    PodGone {
        cluster: String,
        ns: String,
        name: String,
        uid: String,
    },
}

/// Schedules `event` a latency drawn (from the Kubernetes stream) in `range` after `now`.
pub(crate) fn after(st: &mut State, now: Timestamp, range: (u64, u64), event: Event) {
    let ms = st.kube.rng.between(range.0, range.1);
    st.schedule(now.plus_millis(ms), SimEvent::K8s(event));
}

/// [`after`], drawn from `cluster`'s stream (and on a cloud guest's tick).
pub(crate) fn after_in(
    st: &mut State,
    cluster: &str,
    now: Timestamp,
    range: (u64, u64),
    event: Event,
) {
    let ms = st.kube.rng_for(cluster).between(range.0, range.1);
    let at = on_tick(st, cluster, now.plus_millis(ms));
    st.schedule(at, SimEvent::K8s(event));
}

/// The kubelets of the guests of OpenStack and OpenNebula clusters report on this tick.
const GUEST_TICK_MS: u64 = 5_000;

/// When something due at `at` in `cluster` happens: at once, or in a cloud guest at the
/// next [`GUEST_TICK_MS`] tick. A fleet's pods then change at a few shared instants
/// instead of each at its own, and whoever steps from one change to the next (the
/// scenario runner checks the world at each) takes a few steps, not one per pod.
pub(crate) fn on_tick(st: &State, cluster: &str, at: Timestamp) -> Timestamp {
    if st.kube.is_cloud_guest(cluster) {
        Timestamp(at.millis().div_ceil(GUEST_TICK_MS) * GUEST_TICK_MS)
    } else {
        at
    }
}

fn uid_of(v: &Value) -> &str {
    store::str_at(v, &["metadata", "uid"]).unwrap_or("")
}

/// Whether the object `kind/ns/name` in `cluster` exists with `uid`.
fn has_uid(st: &State, cluster: &str, kind: Kind, ns: &str, name: &str, uid: &str) -> bool {
    st.kube
        .store(cluster)
        .and_then(|s| s.peek(kind, ns, name, |o| uid_of(o) == uid))
        .unwrap_or(false)
}

/// The cluster a timer is about, if it is about one workload cluster.
fn cluster_of_event(event: &Event) -> Option<&str> {
    match event {
        Event::NodeReady { cluster, .. }
        | Event::PodStart { cluster, .. }
        | Event::PodGone { cluster, .. } => Some(cluster),
        _ => None,
    }
}

pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    let guest = match cluster_of_event(&event) {
        Some(c) if st.kube.is_cloud_guest(c) => Some(c.to_string()),
        _ => None,
    };
    match &guest {
        Some(c) => st.kube.touch(c),
        None => st.kube.dirty = true,
    }
    apply_event(st, t, event);
    // Its controllers may wait for the instant's other transitions: what this one
    // parsed must not wait with them (a tick starts pods in every guest of a fleet).
    if let Some(c) = guest {
        machines::compact(st, &c);
    }
}

fn apply_event(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::VmiStep(r) => kubevirt::step(st, t, &r),
        Event::VmiGone(r) => kubevirt::gone(st, t, &r),
        Event::Migrated(r) => kubevirt::migrated(st, t, &r),
        Event::Tick => {}
        Event::NodeRegister(r) => workload::register(st, t, &r),
        Event::NodeReady {
            cluster,
            node,
            vmi_uid,
        } => workload::node_ready(st, t, &cluster, &node, &vmi_uid),
        Event::PodStart {
            cluster,
            ns,
            name,
            uid,
        } => pods::pod_start(st, t, &cluster, &ns, &name, &uid),
        Event::PodGone {
            cluster,
            ns,
            name,
            uid,
        } => {
            if has_uid(st, &cluster, Kind::Pod, &ns, &name, &uid)
                && let Some(s) = st.kube.store_mut(&cluster)
            {
                s.remove(Kind::Pod, &ns, &name);
            }
        }
    }
}

pub(crate) fn is_live(st: &State, event: &Event) -> bool {
    match event {
        Event::VmiStep(r) | Event::VmiGone(r) | Event::Migrated(r) | Event::NodeRegister(r) => {
            has_uid(st, INFRA_CLUSTER, Kind::Vmi, &r.ns, &r.name, &r.uid)
        }
        Event::Tick => true,
        Event::NodeReady { cluster, node, .. } => st
            .kube
            .store(cluster)
            .is_some_and(|s| s.contains(Kind::Node, "", node)),
        Event::PodStart {
            cluster,
            ns,
            name,
            uid,
        }
        | Event::PodGone {
            cluster,
            ns,
            name,
            uid,
        } => has_uid(st, cluster, Kind::Pod, ns, name, uid),
    }
}

/// Sets up the infrastructure cluster: its namespaces and nodes exist from the start.
pub(crate) fn init(st: &mut State, now: Timestamp) {
    for ns in ["default", "kube-system", "kubevirt"] {
        let uid = st.kube.uid();
        let obj = serde_json::json!({
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        st.kube.infra.create(Kind::Namespace, "", obj, uid, now);
    }
    let nodes = st.config.infra_nodes.clone();
    for name in nodes.iter().take(store::KUBE_OBJECTS_MAX / 4) {
        let uid = st.kube.uid();
        let obj = objects::node_object(name, None, false, true, now);
        st.kube.infra.create(Kind::Node, "", obj, uid, now);
    }
}

/// Runs the controllers until nothing changes (at most a few passes).
pub(crate) fn settle(st: &mut State, now: Timestamp) {
    // The guests' controllers run once the instant's transitions are all applied: a
    // fleet's pods start on shared ticks, and a pass per pod would cost a pass per pod.
    if !st.kube.guests_dirty.is_empty() && !st.due_by(now) {
        machines::reconcile(st, now);
    }
    if !st.kube.dirty {
        return;
    }
    st.kube.dirty = false;
    for _ in 0..8 {
        let before = versions(st);
        kubevirt::reconcile(st, now);
        workload::reconcile(st, now);
        if versions(st) == before {
            break;
        }
    }
}

fn versions(st: &State) -> (u64, u64, usize) {
    let kubevirt = || st.kube.workloads.values().filter(|w| !w.cloud);
    let workloads = kubevirt().map(|w| w.store.resource_version()).sum::<u64>();
    (
        st.kube.infra.resource_version(),
        workloads,
        kubevirt().filter(|w| w.up).count(),
    )
}

fn writes_secret(route: &routes::Route) -> bool {
    matches!(
        route,
        routes::Route::Collection { res, .. } | routes::Route::Object { res, .. }
            if res.kind == Kind::Secret
    )
}

/// A fault of the Kubernetes side started or ended: controllers look again.
pub(crate) fn fault_changed(st: &mut State) {
    st.kube.dirty = true;
}

pub(crate) use kubevirt::{delete_out_of_band, drain_end, drain_start, guest_api_up, guest_lives};
pub(crate) use machines::{
    hold_nodes, machine_deleting, machine_gone, node_changed, release_nodes, restart_guest,
    strip_node_labels,
};
pub(crate) use views::snapshot;

impl SimCloud {
    /// One HTTP request to a simulated Kubernetes API server. `cluster` is `"infra"`
    /// (the infrastructure cluster, [`INFRA_CLUSTER`]) or the name of a flightdeck
    /// cluster (its workload cluster). An unknown workload cluster, or one whose API is
    /// not up, answers 503. Counted in [`SimCloud::api_calls`] under `kubernetes`
    /// (`GET nodes`, `POST pods/eviction`, ...); every mutating request is logged in
    /// [`SimCloud::mutations`]. Never panics, whatever the request.
    pub fn kube_request(&self, cluster: &str, req: KubeRequest) -> KubeResponse {
        let mut st = self.lock();
        let route = routes::route(cluster, &req);
        let operation = routes::operation(&req.method, &route);
        let mut call = crate::faults::CallFor::to((cluster != INFRA_CLUSTER).then_some(cluster));
        let entered = self.enter_for(&mut st, routes::SERVICE, operation, &mut call);
        if let Some(uid) = selected_uid(&req.query) {
            let now = self.clock.now();
            let key = format!("uid:{uid}");
            st.log.called_for(&key, now);
            st.log.answering_for(&key);
        }
        let mutating = routes::mutation_kind(&req.method, &route);
        let before = mutating.map(|_| routes::target(&st, cluster, &route, None));
        let refused_by_cloud = entered.is_err();
        let (response, touched) = match entered {
            Err(e) => (answers::refused(&e), None),
            Ok(now) if kubelets::plays(&st, cluster) => {
                kubelets::handle(&mut st, now, cluster, &req, &route)
            }
            Ok(now) => api::handle(&mut st, now, cluster, &req, &route),
        };
        let now = self.clock.now();
        // An eviction a disruption budget holds back (429) is the API's answer, not a
        // failure: a drain asks again until the budget allows it, as `kubectl drain` does.
        let budget_says_wait = response.status == 429 && operation == "POST pods/eviction";
        st.log
            .answered(!refused_by_cloud && (response.status < 400 || budget_says_wait));
        if let (Some(kind), Some(before)) = (mutating, before) {
            let target = if touched.is_some() && before.name.is_empty() {
                routes::target(&st, cluster, &route, touched.as_ref())
            } else {
                before
            };
            st.log.mutation(Mutation {
                at: now,
                service: routes::SERVICE,
                operation: operation.into(),
                kind,
                target_id: target.id,
                target_name: target.name,
                target_tags: target.tags,
                ok: response.status < 400,
                caller: None,
            });
            // A workload cluster's Secrets (bootstrap tokens) are read by kubeadm when a
            // machine joins, never by a controller: their writes wake none (a token made,
            // moved on and deleted per joining machine cost a controller pass each, a
            // tenth of `up` of a kubeadm fleet). The infra cluster's are VMIs' user data.
            if cluster == INFRA_CLUSTER || !writes_secret(&route) {
                st.kube.dirty = true;
                st.kube.touch(cluster);
            }
            // A read changes nothing a controller or a health check looks at: only a
            // mutation settles the world again.
            st.settle(now);
        }
        response
    }

    /// What an open watch `req` (a `GET` with `watch` and `resourceVersion`) carries
    /// now: the events after its `resourceVersion`, as its answer would list them. The
    /// transports' stand-in for a long-lived response going on: it is part of the
    /// request already counted, so it is not counted again, and of the faults of a call
    /// only an `api.errorRate` strikes it (the stream drops, a 503); an API that went
    /// down since answers 503 too (the connection broke), as anything else the request
    /// would answer now.
    pub fn kube_watch_continue(&self, cluster: &str, req: &KubeRequest) -> KubeResponse {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        let mut call = crate::faults::CallFor::to((cluster != INFRA_CLUSTER).then_some(cluster));
        if crate::faults::drops_stream(&mut st, routes::SERVICE, now, &mut call) {
            return answers::fail(503, "ServiceUnavailable", "the watch's connection dropped").0;
        }
        let route = routes::route(cluster, req);
        let watching = req.method.eq_ignore_ascii_case("GET") && routes::watches(&route);
        if !watching {
            return answers::fail(400, "BadRequest", "only a watch goes on").0;
        }
        if kubelets::plays(&st, cluster) {
            kubelets::handle(&mut st, now, cluster, req, &route).0
        } else {
            api::handle(&mut st, now, cluster, req, &route).0
        }
    }

    /// The workload clusters that exist now (their API is up), by name.
    pub fn kube_clusters(&self) -> Vec<String> {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        let mut names: Vec<String> = st
            .kube
            .workloads
            .iter()
            .filter(|(_, w)| w.up && !w.cloud)
            .map(|(name, _)| name.clone())
            .collect();
        names.extend(kubelets::clusters(&st));
        names.sort();
        names.dedup();
        names
    }
}

/// The cluster UID a list's `labelSelector` selects (`flightdeck.dev/uid=<UID>`), if it
/// does: whose call it is when its caller did not say.
fn selected_uid(query: &str) -> Option<String> {
    let selector = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("labelSelector="))?;
    let selector = selector
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%3D", "=")
        .replace("%3d", "=")
        .replace("%2C", ",")
        .replace("%2c", ",");
    selector
        .split(',')
        .find_map(|term| term.strip_prefix("flightdeck.dev/uid="))
        .map(str::to_string)
}

#[cfg(test)]
mod selector_tests {
    #[test]
    fn a_list_by_a_clusters_uid_label_says_whose_it_is() {
        assert_eq!(
            super::selected_uid("labelSelector=flightdeck.dev%2Fuid%3Dabc123&limit=500"),
            Some("abc123".into())
        );
        assert_eq!(
            super::selected_uid("labelSelector=app%3Dweb%2Cflightdeck.dev%2Fuid%3Dx"),
            Some("x".into())
        );
        assert_eq!(super::selected_uid("labelSelector=app%3Dweb"), None);
        assert_eq!(super::selected_uid("watch=true"), None);
    }
}
