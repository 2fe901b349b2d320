//! A simulated OpenStack (Nova, Neutron, Octavia), a simulated OpenNebula (reached
//! through [`SimCloud::one_call`]), the workload cluster's Kubernetes nodes, and
//! simulated Kubernetes API servers — an infrastructure cluster running KubeVirt and a
//! workload cluster per KubeVirt-hosted flightdeck cluster (reached through
//! [`SimCloud::kube_request`]) — in process and in virtual time.
//!
//! Every object is a small state machine. A request changes state at once where the real
//! API does (Neutron security groups) and otherwise schedules a transition on a timer
//! queue (`BUILD → ACTIVE`, `PENDING_UPDATE → ACTIVE`, kubelet registration, ...), with
//! latencies drawn from the measured ranges of a real OpenStack Zed. Time moves only
//! when the shared [`SimClock`] is moved; the simulator catches up lazily on every call
//! (or on [`SimCloud::advance`]) and applies due transitions in time order.
//!
//! Guarantees:
//! - **Replay.** The same seed and the same sequence of calls at the same virtual times
//!   give the same ids, latencies, fault decisions and answers.
//! - **Faithful answers.** Statuses, HTTP codes and messages are the ones OpenStack
//!   gives, mapped into [`flightdeck_cloud::ErrorClass`] as a real provider would.
//! - **Bounded.** Every collection has a limit; beyond it the cloud answers as a real
//!   one does at quota (403/409), never by growing without end.

mod auth;
pub mod bootstrap;
pub mod caller;
mod fault_effects;
mod faults;
pub mod guest_etcd;
mod identity;
mod ids;
mod k8s;
mod kube;
pub mod member_batch;
mod members;
mod mirror;
mod neutron;
mod nova;
mod octavia;
mod one;
mod routes;
mod stale;
mod world;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use flightdeck_cloud::{
    Clock, CloudError, HealthMonitor, Listener, Pool, Rng, SecurityGroup, SeededRng, SimClock,
    Timestamp,
};

pub use auth::{ISSUE_OP as KEYSTONE_ISSUE_OP, TOKEN_LIFETIME_MS};
pub use bootstrap::{BootEvent, BootFailure, WorkloadCa};
pub use faults::{FAULTS_MAX, FaultId, SimFault};
pub use flightdeck_cloud::{Route, Router};
pub use k8s::{
    BOOKMARK_START, BUDGET_EVENTS_MAX, BudgetEvent, BudgetEventKind, GUEST_EVENTS_MAX,
    INFRA_CLUSTER, KUBE_BODY_MAX, KUBE_EVENTS_MAX, KUBE_OBJECTS_MAX, KUBE_WORKLOAD_CLUSTERS_MAX,
    KubeNodeView, KubeObjectView, KubePdbView, KubePodView, KubeRequest, KubeResponse, KubeVmView,
    KubeVmiView, KubeWorkloadView, KubeWorld, LABEL_CLUSTER, LABEL_MACHINE, LABEL_ROLE, LABEL_UID,
    LOST_PODS_MAX, LostPod, StaleNode, VMI_DELETIONS_MAX, VmiDeletion, query_param,
    watch_line_version, with_resource_version,
};
pub use neutron::{RULES_PER_GROUP_MAX, SECURITY_GROUPS_MAX};
pub use nova::SERVERS_MAX;
pub use octavia::{CHILDREN_MAX, LOAD_BALANCERS_MAX};
pub use one::{
    ONE_DONE_VMS_KEPT, ONE_IMAGES_MAX, ONE_TEMPLATES_MAX, ONE_VMS_MAX, OneImage, OneLock,
    OneTemplate, OneVm,
};
pub use routes::{ROUTERS_MAX, ROUTES_PER_ROUTER_MAX};
pub use stale::KEPT as STALE_READ_LAG_MAX;
pub use world::{CallTally, MUTATIONS_MAX, Mutation, MutationKind, ServingSpell, World};

use ids::{AddressPool, Table};
use world::{Created, Log};

type Result<T> = std::result::Result<T, CloudError>;

/// How long the simulated cloud takes for each asynchronous transition, as inclusive
/// `(min, max)` ranges in milliseconds; each transition draws uniformly from its range.
/// Defaults are measured on a real OpenStack Zed (see `shared/openstack/README.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latencies {
    /// Nova `BUILD → ACTIVE` (or `ERROR`).
    pub server_boot: (u64, u64),
    /// Nova `deleting → gone`.
    pub server_delete: (u64, u64),
    /// Octavia load balancer `PENDING_CREATE → ACTIVE`.
    pub lb_create: (u64, u64),
    /// How long a listener, pool or health-monitor change keeps its load balancer in
    /// `PENDING_UPDATE`.
    pub lb_update: (u64, u64),
    /// Member `PENDING_CREATE → ACTIVE` (its load balancer is `PENDING_UPDATE` as long).
    pub member_create: (u64, u64),
    /// Member `PENDING_DELETE → gone`.
    pub member_delete: (u64, u64),
    /// Cascade delete: load balancer `PENDING_DELETE → gone` with all its children.
    pub cascade_delete: (u64, u64),
    /// Server `ACTIVE` → its kubelet registers a Node.
    pub node_register: (u64, u64),
    /// Node registered → Ready.
    pub node_ready: (u64, u64),
    /// Server gone → its Node is deleted (the cloud controller manager's job).
    pub node_gone_after_server: (u64, u64),
    /// Monitored member: consecutive healthy checks before it reports `ONLINE`.
    pub health_check_rise: (u64, u64),
    /// OpenNebula image `LOCKED → READY` (or `ERROR`): the datastore copies it in.
    pub one_image_ready: (u64, u64),
    /// OpenNebula image `DELETE → gone`.
    pub one_image_delete: (u64, u64),
    /// OpenNebula VM `PENDING → ACTIVE/PROLOG` (the scheduler's pass).
    pub one_vm_pending: (u64, u64),
    /// OpenNebula VM `PROLOG → BOOT`.
    pub one_vm_prolog: (u64, u64),
    /// OpenNebula VM `BOOT → RUNNING` (or `BOOT_FAILURE`).
    pub one_vm_boot: (u64, u64),
    /// OpenNebula VM `SHUTDOWN → EPILOG` and `SHUTDOWN_POWEROFF → POWEROFF`.
    pub one_vm_shutdown: (u64, u64),
    /// OpenNebula VM `EPILOG → DONE`.
    pub one_vm_epilog: (u64, u64),
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            server_boot: (1_600, 3_600),
            server_delete: (600, 900),
            lb_create: (500, 1_200),
            lb_update: (300, 900),
            member_create: (500, 900),
            member_delete: (450, 750),
            cascade_delete: (250, 400),
            node_register: (40_000, 70_000),
            node_ready: (5_000, 15_000),
            node_gone_after_server: (2_000, 5_000),
            health_check_rise: (5_000, 10_000),
            one_image_ready: (3_000, 8_000),
            one_image_delete: (500, 1_500),
            one_vm_pending: (1_000, 3_000),
            one_vm_prolog: (2_000, 8_000),
            one_vm_boot: (2_000, 9_000),
            one_vm_shutdown: (1_000, 3_000),
            one_vm_epilog: (1_000, 3_000),
        }
    }
}

/// The shape of the simulated cloud.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    pub latencies: Latencies,
    /// The one subnet servers and load-balancer VIPs get their addresses from (IPv4 or
    /// IPv6). A value that does not parse leaves the cloud without addresses: servers
    /// then go `ERROR` and load balancers `ERROR`.
    pub subnet_cidr: String,
    /// Neutron's `max_routes`: extra routes a router may hold.
    pub max_routes: usize,
    /// The password of the simulated OpenNebula's `oneadmin` (UID 0, GID 0), the one
    /// user it accepts (session `"oneadmin:<password>"`).
    pub one_password: String,
    /// The infrastructure cluster's nodes (KubeVirt runs VMIs on them), there from the
    /// start.
    pub infra_nodes: Vec<String>,
    /// Replicas of the `web` app every KubeVirt workload cluster runs (with a PDB
    /// `minAvailable: 1`).
    pub workload_replicas: usize,
    /// Whether a cloud controller manager deletes the Node of a server or VM that is
    /// gone (2 to 5 s after), as cloud-provider-openstack's does. Off by default, as on
    /// a cluster without one: the Node stays, NotReady, until someone deletes it.
    pub node_controller: bool,
    /// Whether the workload clusters of OpenStack and OpenNebula clusters run their
    /// apps (`kube-proxy`, `web`, `cache` and their budgets). Off, each is an empty
    /// cluster (its nodes, namespaces and `kubernetes` service): `flightdeck bench`
    /// measures what modelling the workload costs against it.
    pub guest_workload: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            latencies: Latencies::default(),
            subnet_cidr: "10.0.0.0/16".into(),
            max_routes: 30,
            one_password: "opennebula".into(),
            infra_nodes: vec!["infra-1".into(), "infra-2".into(), "infra-3".into()],
            workload_replicas: 2,
            node_controller: false,
            guest_workload: true,
        }
    }
}

/// The simulated cloud. Cloning gives another handle on the same cloud (the state is
/// shared), so an engine can hold one while a test inspects another.
///
/// It implements [`flightdeck_cloud::Compute`], [`flightdeck_cloud::Network`],
/// [`flightdeck_cloud::LoadBalancing`] and [`flightdeck_cloud::GuestCluster`]; their
/// futures are always ready on first poll (see [`poll_ready`]).
#[derive(Clone)]
pub struct SimCloud {
    state: Arc<Mutex<State>>,
    clock: SimClock,
}

/// One pending asynchronous transition.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    Nova(nova::Event),
    Octavia(octavia::Event),
    Kube(kube::Event),
    Fault(faults::Event),
    One(one::Event),
    K8s(k8s::Event),
}

/// What the node machinery needs of a machine, server or VM.
pub(crate) struct Host {
    pub(crate) name: String,
    pub(crate) tags: Vec<String>,
    pub(crate) running: bool,
    /// Whether its kubelet starts at all (`net.noRegistration` stops it on servers).
    pub(crate) kubelet: bool,
    /// Its first address, which its node reports as `InternalIP`.
    pub(crate) address: Option<std::net::IpAddr>,
}

/// Everything the cloud knows. Only ever touched under the [`SimCloud`]'s lock.
pub(crate) struct State {
    pub(crate) config: SimConfig,
    rng_ids: SeededRng,
    rng_latency: SeededRng,
    pub(crate) rng_faults: SeededRng,
    seq: u64,
    /// Pending transitions by (due time, creation sequence): ties resolve in the order
    /// the transitions were scheduled.
    timers: BTreeMap<(Timestamp, u64), Event>,
    pub(crate) addresses: AddressPool,
    /// Which server holds an address; only servers that are ACTIVE have one here.
    pub(crate) server_by_address: BTreeMap<IpAddr, String>,
    pub(crate) servers: Table<nova::ServerRec>,
    pub(crate) security_groups: Table<SecurityGroup>,
    pub(crate) routers: Table<Router>,
    pub(crate) lbs: Table<octavia::LbRec>,
    pub(crate) listeners: Table<Listener>,
    pub(crate) pools: Table<Pool>,
    pub(crate) health_monitors: Table<HealthMonitor>,
    pub(crate) members: Table<members::MemberRec>,
    /// Nodes by their server's id, in registration order.
    pub(crate) nodes: Table<kube::NodeRec>,
    /// Registered pod networks by cluster name.
    pub(crate) pod_networks: BTreeMap<String, routes::PodNetwork>,
    /// Test bed: clusters whose servers are mirrored from a real cloud ([`mirror`]).
    pub(crate) mirrored: std::collections::BTreeSet<String>,
    pub(crate) faults: Vec<faults::FaultRec>,
    /// Keystone's revocations and the in-process client's token.
    pub(crate) session: auth::Session,
    pub(crate) log: Log,
    /// The simulated OpenNebula.
    pub(crate) one: one::OneState,
    /// The simulated Kubernetes API servers (infrastructure and workload clusters).
    pub(crate) kube: k8s::KubeState,
    /// What lists answered lately, for `api.staleRead`.
    pub(crate) lists: stale::ListHistory,
    /// Something changed outside a call or a transition (a fixture added, a fault
    /// scheduled): derived statuses are re-evaluated at the next catch-up. Calls and
    /// transitions settle themselves, so a read that finds nothing due settles nothing.
    pub(crate) unsettled: bool,
    /// Objects added as the operator's own (`add_foreign_*`): outside the quotas.
    pub(crate) fixtures: Fixtures,
    /// What member health depends on, so that a settle re-derives only what changed.
    pub(crate) health: members::HealthIndex,
    /// The machines' kubeadm bootstraps ([`bootstrap`]).
    pub(crate) boot: bootstrap::BootState,
}

/// How many of the cloud's objects are fixtures, which the quotas do not count.
#[derive(Debug, Default)]
pub(crate) struct Fixtures {
    pub(crate) servers: usize,
    pub(crate) load_balancers: usize,
}

impl State {
    fn new(config: SimConfig, seed: u64) -> Self {
        // Separate streams, so that e.g. an extra fault decision does not change the
        // ids every later object gets.
        let mut base = SeededRng::fork(seed, "sim");
        let rng_ids = SeededRng::new(base.next_u64());
        let rng_latency = SeededRng::new(base.next_u64());
        let rng_faults = SeededRng::new(base.next_u64());
        let kube = k8s::KubeState::new(base.next_u64());
        State {
            kube,
            addresses: AddressPool::new(&config.subnet_cidr),
            config,
            rng_ids,
            rng_latency,
            rng_faults,
            seq: 0,
            unsettled: false,
            fixtures: Fixtures::default(),
            health: members::HealthIndex::default(),
            boot: bootstrap::BootState::default(),
            timers: BTreeMap::new(),
            server_by_address: BTreeMap::new(),
            servers: Table::tracked(),
            security_groups: Table::default(),
            routers: Table::default(),
            lbs: Table::default(),
            listeners: Table::default(),
            pools: Table::default(),
            health_monitors: Table::tracked(),
            members: Table::tracked(),
            nodes: Table::tracked(),
            pod_networks: BTreeMap::new(),
            mirrored: std::collections::BTreeSet::new(),
            faults: Vec::new(),
            session: auth::Session::default(),
            log: Log::default(),
            one: one::OneState::default(),
            lists: stale::ListHistory::default(),
        }
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A fresh object id, unique across every kind of object.
    pub(crate) fn new_id(&mut self) -> String {
        loop {
            let id = ids::uuid(&mut self.rng_ids);
            if self.tags_of(&id).is_none() && !self.nodes.contains(&id) {
                return id;
            }
        }
    }

    /// A latency drawn uniformly from `range` (milliseconds).
    pub(crate) fn draw(&mut self, range: (u64, u64)) -> u64 {
        self.rng_latency.between(range.0, range.1)
    }

    pub(crate) fn schedule(&mut self, at: Timestamp, event: Event) {
        let seq = self.next_seq();
        self.timers.insert((at, seq), event);
    }

    /// Schedules `event` a drawn latency after `now`; returns when it is due.
    pub(crate) fn schedule_after(
        &mut self,
        now: Timestamp,
        range: (u64, u64),
        event: Event,
    ) -> Timestamp {
        let at = now.plus_millis(self.draw(range));
        self.schedule(at, event);
        at
    }

    /// Applies every transition due at or before `now`, in time order, re-evaluating
    /// derived statuses after each so that they change at the right virtual time.
    pub(crate) fn run_due(&mut self, now: Timestamp) {
        let mut fired = false;
        while let Some((&(at, _), _)) = self.timers.first_key_value() {
            if at > now {
                break;
            }
            let Some(((at, _), event)) = self.timers.pop_first() else {
                break;
            };
            match event {
                Event::Nova(e) => nova::apply(self, at, e),
                Event::Octavia(e) => octavia::apply(self, at, e),
                Event::Kube(e) => kube::apply(self, at, e),
                Event::Fault(e) => fault_effects::apply(self, at, e),
                Event::One(e) => one::apply(self, at, e),
                Event::K8s(e) => k8s::apply(self, at, e),
            }
            self.settle(at);
            fired = true;
            self.log.changes += 1;
        }
        // Member health and the Kubernetes controllers change only when something else
        // did: every threshold they wait for is a transition of its own.
        if fired || self.unsettled {
            self.log.changes += u64::from(self.unsettled);
            self.unsettled = false;
            self.settle(now);
        }
    }

    /// Re-evaluates statuses derived from the rest of the world (member health, and
    /// what the Kubernetes controllers do about any change).
    pub(crate) fn settle(&mut self, now: Timestamp) {
        members::evaluate(self, now);
        k8s::settle(self, now);
    }

    /// Whether a transition is due at or before `t` (one of the same instant, while
    /// transitions are applied).
    pub(crate) fn due_by(&self, t: Timestamp) -> bool {
        self.timers.first_key_value().is_some_and(|(k, _)| k.0 <= t)
    }

    /// When the next pending transition that would change anything is due. Drops
    /// transitions made moot (their object gone or changed since) on the way.
    fn next_live_timer(&mut self) -> Option<Timestamp> {
        while let Some((&key, event)) = self.timers.first_key_value() {
            let live = match event {
                Event::Nova(e) => nova::is_live(self, e),
                Event::Octavia(e) => octavia::is_live(self, e),
                Event::Kube(e) => kube::is_live(self, e),
                Event::Fault(_) => true,
                Event::One(e) => one::is_live(self, e),
                Event::K8s(e) => k8s::is_live(self, e),
            };
            if live {
                return Some(key.0);
            }
            self.timers.remove(&key);
        }
        None
    }

    /// The machine a kubelet runs on: a Nova server by its id, or an OpenNebula VM by
    /// its numeric id as a string.
    pub(crate) fn host(&self, id: &str) -> Option<Host> {
        if let Some(s) = self.servers.get(id) {
            return Some(Host {
                name: s.server.name.clone(),
                tags: s.server.tags.clone(),
                running: s.is_running(),
                kubelet: !s.no_kubelet,
                address: s.server.address,
            });
        }
        self.one.vm_by_key(id).map(|v| Host {
            name: v.name.clone(),
            tags: v.tags.clone(),
            running: v.is_running(),
            kubelet: true,
            address: v.addresses.first().copied(),
        })
    }

    /// Whether the machine `id` (server or VM) runs.
    pub(crate) fn host_running(&self, id: &str) -> bool {
        match self.servers.get(id) {
            Some(s) => s.is_running(),
            None => self.one.vm_by_key(id).is_some_and(|v| v.is_running()),
        }
    }

    /// The name of the object with this id, of any kind (an OpenNebula object by its
    /// mutation target, `vm/3`); `None` if there is none or it has no name.
    pub(crate) fn name_of(&self, id: &str) -> Option<String> {
        if let Some(s) = self.servers.get(id) {
            return Some(s.server.name.clone());
        }
        if let Some(g) = self.security_groups.get(id) {
            return Some(g.name.clone());
        }
        if let Some(r) = self.routers.get(id) {
            return Some(r.name.clone());
        }
        if let Some(l) = self.lbs.get(id) {
            return Some(l.lb.name.clone());
        }
        if let Some(l) = self.listeners.get(id) {
            return Some(l.name.clone());
        }
        if let Some(p) = self.pools.get(id) {
            return Some(p.name.clone());
        }
        if let Some(h) = self.health_monitors.get(id) {
            return Some(h.name.clone());
        }
        if let Some(m) = self.members.get(id) {
            return Some(m.member.name.clone());
        }
        one::name_of(self, id)
    }

    /// The tags of the object with this id, of any kind; `None` if there is none.
    pub(crate) fn tags_of(&self, id: &str) -> Option<Vec<String>> {
        if let Some(s) = self.servers.get(id) {
            return Some(s.server.tags.clone());
        }
        if let Some(g) = self.security_groups.get(id) {
            return Some(g.tags.clone());
        }
        if let Some(r) = self.routers.get(id) {
            return Some(r.tags.clone());
        }
        if let Some(l) = self.lbs.get(id) {
            return Some(l.lb.tags.clone());
        }
        if let Some(l) = self.listeners.get(id) {
            return Some(l.tags.clone());
        }
        if let Some(p) = self.pools.get(id) {
            return Some(p.tags.clone());
        }
        if let Some(h) = self.health_monitors.get(id) {
            return Some(h.tags.clone());
        }
        self.members.get(id).map(|m| m.member.tags.clone())
    }
}

impl SimCloud {
    /// A cloud with nothing in it, drawing ids, latencies and fault decisions from
    /// `SeededRng::fork(seed, "sim")`, living in `clock`'s time.
    pub fn new(config: SimConfig, seed: u64, clock: SimClock) -> Self {
        let mut state = State::new(config, seed);
        k8s::init(&mut state, clock.now());
        SimCloud {
            state: Arc::new(Mutex::new(state)),
            clock,
        }
    }

    /// The clock the cloud lives by (shared with whoever created it).
    pub fn clock(&self) -> &SimClock {
        &self.clock
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the state consistent enough
        // for a simulator: every mutation is a few field writes.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Schedules `fault`: it starts at `fault.start` and ends at `fault.end` (never when
    /// `None`). A fault whose start has passed takes effect at the next catch-up. At
    /// most [`FAULTS_MAX`] faults are kept; further ones are ignored (see
    /// [`SimCloud::faults_ignored`]). Answers which fault it is, for
    /// [`SimCloud::stop_fault`]; `None` when ignored.
    pub fn inject(&self, fault: SimFault) -> Option<FaultId> {
        let mut st = self.lock();
        let id = faults::inject(&mut st, fault);
        st.unsettled = true;
        id
    }

    /// Stops fault `id` now (after catching up): from now on it strikes nothing, and
    /// what its start took (members taken offline, templates locked, load balancers
    /// held, a node drained) is given back now, as at its end. One that has not started
    /// never will. Answers false when the fault had already ended (nothing to stop).
    pub fn stop_fault(&self, id: FaultId) -> bool {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        let stopped = fault_effects::stop(&mut st, now, id.0);
        st.unsettled |= stopped;
        stopped
    }

    /// How often the scheduled faults of each kind struck: calls they answered, objects
    /// they changed or held. A kind scheduled but never struck shows 0. Not an API call.
    pub fn fault_effects(&self) -> BTreeMap<flightdeck_spec::FaultKind, u64> {
        faults::effects(&self.lock())
    }

    /// How many injected faults were ignored because [`FAULTS_MAX`] was reached.
    pub fn faults_ignored(&self) -> u64 {
        self.lock().log.faults_ignored
    }

    /// When something next changes on its own: the earliest pending transition or fault
    /// start/end. Catches up to `clock.now()` first, so the answer is strictly later
    /// than now; `None` when nothing is pending.
    pub fn next_transition_at(&self) -> Option<Timestamp> {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.next_live_timer()
    }

    /// Applies every transition due at or before `clock.now()`, in time order (ties in
    /// the order they were scheduled).
    pub fn advance(&self) {
        self.lock().run_due(self.clock.now());
    }

    /// Calls made so far: service (`nova`, `neutron`, `octavia`, `kubernetes`) →
    /// `"METHOD /path/{template}"` → count, and `opennebula` → XML-RPC method name →
    /// count. Failed calls count too.
    /// Notes a call that the front end answered itself (Keystone's, or one refused for
    /// its token) as made for the cluster its caller label names, if it names one.
    /// `ok`: whether it answered with a success.
    pub fn note_call(&self, ok: bool) {
        if let Some(cluster) = caller::cluster() {
            let mut st = self.lock();
            let now = self.clock.now();
            st.log.called_for(&cluster, now);
            st.log.answering_for(&cluster);
            st.log.answered(ok);
        }
    }

    /// The calls answered for each cluster since the last time this was asked, each
    /// under the cluster's name when the call said it (its caller label, or the
    /// workload cluster it went to), else under `uid:<UID>` (a Kubernetes list by the
    /// cluster's UID label). Calls that name no cluster are in no tally.
    pub fn take_call_tallies(&self) -> BTreeMap<String, CallTally> {
        std::mem::take(&mut self.lock().log.tallies)
    }

    /// When a call was last made for each cluster, as far as the call said: by the
    /// cluster's name (the call's caller label, or the workload cluster it went to) and
    /// by `uid:<UID>` (a Kubernetes list by the cluster's UID label).
    pub fn last_calls(&self) -> BTreeMap<String, Timestamp> {
        self.lock().log.last_calls.clone()
    }

    pub fn api_calls(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        self.lock().log.api_calls()
    }

    /// Every mutating call, in order, failed ones included (`ok: false`). Keeps the
    /// latest [`MUTATIONS_MAX`]; see [`SimCloud::mutations_dropped`].
    pub fn mutations(&self) -> Vec<Mutation> {
        self.lock().log.mutations.iter().cloned().collect()
    }

    /// The mutations numbered `from` and later (the first mutation ever is number 0),
    /// and the number the next one will get. Lets an observer read only what is new;
    /// numbers already dropped from the bounded log are skipped.
    pub fn mutations_since(&self, from: u64) -> (Vec<Mutation>, u64) {
        let st = self.lock();
        world::numbered_since(&st.log.mutations, st.log.mutations_dropped, from)
    }

    /// As [`SimCloud::mutations_since`], but the log keeps none of them: a reader that
    /// has the only use of the log (`up`, whose checks read each mutation once) takes
    /// them out instead of copying them, and the log holds what came since its last
    /// look instead of the latest [`MUTATIONS_MAX`]. They count as dropped.
    pub fn take_mutations_since(&self, from: u64) -> (Vec<Mutation>, u64) {
        let mut st = self.lock();
        let log = &mut st.log;
        let skip = usize::try_from(from.saturating_sub(log.mutations_dropped))
            .unwrap_or(usize::MAX)
            .min(log.mutations.len());
        let taken: Vec<Mutation> = log.mutations.drain(..).skip(skip).collect();
        log.mutations_dropped += (skip + taken.len()) as u64;
        (taken, log.mutations_dropped)
    }

    /// The ended serving spells numbered `from` and later, and the number the next one
    /// will get, as [`SimCloud::mutations_since`] does for mutations.
    pub fn serving_spells_since(&self, from: u64) -> (Vec<ServingSpell>, u64) {
        let st = self.lock();
        world::numbered_since(&st.log.spells, st.log.spells_dropped, from)
    }

    /// How many of the oldest mutations were dropped from [`SimCloud::mutations`].
    pub fn mutations_dropped(&self) -> u64 {
        self.lock().log.mutations_dropped
    }

    /// Adds a server that flightdeck did not create, `ACTIVE` at once (with an address,
    /// and with a node later if its tags carry a cluster UID). Not an API call.
    pub fn add_foreign_server(&self, name: &str, tags: Vec<String>) -> String {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        st.unsettled = true;
        st.fixtures.servers += 1;
        nova::add_foreign(&mut st, now, name, tags)
    }

    /// Adds a security group that flightdeck did not create (untagged, with Neutron's
    /// default egress rules). Not an API call.
    pub fn add_foreign_security_group(&self, name: &str) -> String {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.unsettled = true;
        neutron::add_foreign_group(&mut st, name)
    }

    /// The user data Nova keeps for a server (decoded), as
    /// `OS-EXT-SRV-ATTR:user_data` shows it. Not an API call.
    pub fn server_user_data(&self, id: &str) -> Option<String> {
        self.lock()
            .servers
            .get(id)
            .and_then(|s| s.user_data.clone())
    }

    /// Adds a load balancer that flightdeck did not create, untagged and
    /// `ACTIVE/ONLINE` at once. Not an API call.
    pub fn add_foreign_load_balancer(&self, name: &str) -> String {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        st.unsettled = true;
        st.fixtures.load_balancers += 1;
        octavia::add_foreign(&mut st, name)
    }

    /// Catches up, counts the call and applies API faults; answers the time the call
    /// is performed at (later than before if an `api.latency` fault held it up).
    fn enter(
        &self,
        st: &mut State,
        service: &'static str,
        operation: &'static str,
    ) -> Result<Timestamp> {
        self.enter_for(st, service, operation, &mut faults::CallFor::labelled())
    }

    /// [`SimCloud::enter`] for a call whose cluster `call` says.
    fn enter_for(
        &self,
        st: &mut State,
        service: &'static str,
        operation: &'static str,
        call: &mut faults::CallFor<'_>,
    ) -> Result<Timestamp> {
        st.run_due(self.clock.now());
        st.log.count(service, operation);
        st.log.current = None;
        if let Some(cluster) = call.cluster() {
            st.log.called_for(cluster, self.clock.now());
            st.log.answering_for(cluster);
        }
        auth::ensure_token(st, &self.clock, service, operation)?;
        faults::before_call(st, &self.clock, service, operation, call)?;
        Ok(self.clock.now())
    }

    /// Runs a call that changes nothing.
    pub(crate) fn read<T>(
        &self,
        service: &'static str,
        operation: &'static str,
        f: impl FnOnce(&mut State, Timestamp) -> Result<T>,
    ) -> Result<T> {
        let mut st = self.lock();
        let result = self
            .enter(&mut st, service, operation)
            .and_then(|now| f(&mut st, now));
        st.log.answered(result.is_ok());
        result
    }

    /// Runs a list call whose answer an `api.staleRead` may replace with an earlier one
    /// of the same list (`key`: whose list it is).
    pub(crate) fn list<T: Clone + Send + Sync + 'static>(
        &self,
        service: &'static str,
        operation: &'static str,
        key: &str,
        f: impl FnOnce(&mut State, Timestamp) -> Result<T>,
    ) -> Result<T> {
        let mut st = self.lock();
        let fresh = self
            .enter(&mut st, service, operation)
            .and_then(|now| Ok((now, f(&mut st, now)?)));
        st.log.answered(fresh.is_ok());
        let (now, fresh) = fresh?;
        Ok(stale::answer(&mut st, service, operation, key, now, fresh))
    }

    /// Runs a call that creates an object, recording it as a [`MutationKind::Create`]
    /// of the created object (or, when it fails, of an object with `request_tags`).
    pub(crate) fn create<T: Created>(
        &self,
        service: &'static str,
        operation: &'static str,
        request_tags: &[String],
        f: impl FnOnce(&mut State, Timestamp) -> Result<T>,
    ) -> Result<T> {
        let mut st = self.lock();
        let result = self
            .enter(&mut st, service, operation)
            .and_then(|now| f(&mut st, now));
        let target = match &result {
            Ok(created) => created.identity(),
            Err(_) => (String::new(), String::new(), request_tags.to_vec()),
        };
        let now = self.clock.now();
        let ok = result.is_ok();
        st.log.answered(ok);
        st.log
            .record(now, (service, operation), MutationKind::Create, target, ok);
        st.settle(now);
        result
    }

    /// Runs a call that updates or deletes the existing object `target_id`, recording
    /// it with the tags that object had before the call.
    pub(crate) fn change<T>(
        &self,
        service: &'static str,
        operation: &'static str,
        kind: MutationKind,
        target_id: &str,
        f: impl FnOnce(&mut State, Timestamp) -> Result<T>,
    ) -> Result<T> {
        self.change_as(
            service,
            operation,
            kind,
            target_id,
            |st| st.tags_of(target_id).unwrap_or_default(),
            f,
        )
    }

    /// Like [`SimCloud::change`], recording the call with the tags `tags` answers
    /// before the call (for calls whose target is not the owner of what they touch).
    pub(crate) fn change_as<T>(
        &self,
        service: &'static str,
        operation: &'static str,
        kind: MutationKind,
        target_id: &str,
        tags: impl FnOnce(&State) -> Vec<String>,
        f: impl FnOnce(&mut State, Timestamp) -> Result<T>,
    ) -> Result<T> {
        let mut st = self.lock();
        let entered = self.enter(&mut st, service, operation);
        let target_tags = tags(&st);
        let target_name = st.name_of(target_id).unwrap_or_default();
        let result = entered.and_then(|now| f(&mut st, now));
        let now = self.clock.now();
        let target = (target_id.to_string(), target_name, target_tags);
        let ok = result.is_ok();
        st.log.answered(ok);
        st.log.record(now, (service, operation), kind, target, ok);
        st.settle(now);
        result
    }
}

/// Polls `future` once and answers its output if it is ready. Every future of the
/// simulator is ready on its first poll, so this is all the executor tests need.
pub fn poll_ready<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}
