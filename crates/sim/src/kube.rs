//! The workload clusters' Kubernetes API, as far as nodes go. Every running server (or
//! RUNNING OpenNebula VM, whose node is named for the VM and keyed by its id) whose
//! tags carry a cluster UID runs a kubelet that registers a Node some time after
//! the server became ACTIVE; the Node turns Ready later, and the cloud controller
//! manager removes it some time after its server is gone.
//!
//! A node of a cluster with a registered pod network gets a slice of it when it
//! registers (see [`crate::routes`]); a server marked by `net.noRegistration` never
//! registers.
//!
//! A cluster's API is reached through its load balancer, so it answers only while some
//! member of an ACTIVE load balancer of the cluster serves from a Ready node. The
//! `observer.*` faults change what the list answers, never the nodes themselves.

use flightdeck_cloud::ownership::{TAG_CLUSTER, TAG_MACHINE, uid_of};
use flightdeck_cloud::{
    GuestCluster, Node, OperatingStatus, Ownership, ProvisioningStatus, Timestamp,
};
use flightdeck_spec::FaultKind;

use crate::routes::{self, cluster_of};
use crate::{Event as SimEvent, Result, SimCloud, State, faults};

const KUBERNETES: &str = "kubernetes";

pub(crate) struct NodeRec {
    /// The cluster UID of the server the node runs on.
    pub(crate) uid: String,
    /// The cluster name of the server the node runs on.
    pub(crate) cluster: Option<String>,
    pub(crate) node: Node,
    /// When its server or VM went, if it did (its kubelet with it).
    pub(crate) machine_gone_at: Option<Timestamp>,
    /// The ownership tags of its machine when it registered: a Node outlives its
    /// machine, and still belongs to it.
    pub(crate) machine_tags: Vec<String>,
    /// Its machine is a Nova server (else an OpenNebula VM): its providerID's scheme,
    /// which outlives the machine.
    pub(crate) nova: bool,
}

#[derive(Clone, Debug)]
pub(crate) enum Event {
    Register(String),
    Ready(String),
    Gone(String),
}

/// Server (or OpenNebula VM) `server_id` became ACTIVE (RUNNING) at `t`: its kubelet
/// will register.
pub(crate) fn server_active(st: &mut State, t: Timestamp, server_id: &str) {
    let tags = st
        .host(server_id)
        .filter(|h| uid_of(&h.tags).is_some() && h.kubelet)
        .map(|h| h.tags);
    if let Some(tags) = tags {
        // A slow boot (`kubeadm.slowBoot`) runs cloud-init, and so kubeadm, later.
        let slow = crate::faults::slow_boot_ms(st, t, &tags);
        let (lo, hi) = st.config.latencies.node_register;
        st.schedule_after(
            t,
            (lo + slow, hi + slow),
            SimEvent::Kube(Event::Register(server_id.into())),
        );
    }
}

/// Server `server_id` stopped at `t` but still exists (it went ERROR): its kubelet
/// stopped, so its Node goes NotReady and stays (the cloud controller manager removes
/// only nodes whose server is gone).
pub(crate) fn server_stopped(st: &mut State, t: Timestamp, server_id: &str) {
    if let Some(rec) = st.nodes.get_mut(server_id) {
        rec.node.ready = false;
    }
    crate::k8s::node_changed(st, t, server_id);
}

/// Server `server_id` is gone at `t`: its kubelet stopped, the pods on its node went
/// with it, and its Node will be removed.
pub(crate) fn server_gone(st: &mut State, t: Timestamp, server_id: &str) {
    crate::k8s::machine_gone(st, t, server_id);
    crate::k8s::node_changed(st, t, server_id);
    let Some(rec) = st.nodes.get_mut(server_id) else {
        return;
    };
    rec.node.ready = false;
    rec.machine_gone_at.get_or_insert(t);
    if st.config.node_controller {
        let latency = st.config.latencies.node_gone_after_server;
        st.schedule_after(t, latency, SimEvent::Kube(Event::Gone(server_id.into())));
    }
}

pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::Register(sid) => {
            let Some(host) = st.host(&sid).filter(|h| h.running) else {
                return;
            };
            let Some(uid) = uid_of(&host.tags).map(str::to_string) else {
                return;
            };
            if st.nodes.contains(&sid) {
                return;
            }
            // kubeadm's data decides whether, and when, the kubelet registers.
            match crate::bootstrap::admit(st, t, &sid) {
                Ok(true) => {}
                Ok(false) => return,
                Err(retry_at) => {
                    let wait = retry_at.since(t).as_millis();
                    st.schedule_after(t, (wait, wait), SimEvent::Kube(Event::Register(sid)));
                    return;
                }
            }
            let name = host.name;
            let internal_ip = host.address;
            let cluster = cluster_of(&host.tags).map(str::to_string);
            if let Some(old) = orphaned_node(st, &uid, cluster.as_deref(), &name) {
                take_over(st, t, &old, &sid, &host.tags, internal_ip);
                return;
            }
            let pod_cidr = cluster
                .as_deref()
                .and_then(|c| routes::assign_pod_cidr(st, c, &sid));
            let node = Node {
                name,
                server_id: Some(sid.clone()),
                ready: false,
                unschedulable: false,
                created_at: t,
                pod_cidr,
                internal_ip,
                labels: Default::default(),
                taints: Vec::new(),
                hold_deletion: None,
            };
            let seq = st.next_seq();
            st.nodes.insert(
                seq,
                sid.clone(),
                NodeRec {
                    uid,
                    cluster,
                    node,
                    machine_gone_at: None,
                    machine_tags: host.tags.clone(),
                    nova: st.servers.get(&sid).is_some(),
                },
            );
            crate::k8s::node_changed(st, t, &sid);
            let latency = st.config.latencies.node_ready;
            st.schedule_after(t, latency, SimEvent::Kube(Event::Ready(sid)));
        }
        Event::Ready(sid) => {
            let running = st.host_running(&sid);
            if let Some(rec) = st.nodes.get_mut(&sid) {
                rec.node.ready = running;
            }
            crate::k8s::node_changed(st, t, &sid);
        }
        Event::Gone(sid) => {
            crate::k8s::node_changed(st, t, &sid);
            if st.nodes.remove(&sid).is_some() {
                routes::release_pod_cidr(st, &sid);
            }
        }
    }
}

/// The Node named `name` in cluster `uid`'s workload cluster whose machine is gone (a
/// Node's name is unique in its cluster, and it outlives its machine).
fn orphaned_node(st: &State, uid: &str, cluster: Option<&str>, name: &str) -> Option<String> {
    st.nodes
        .in_group(uid)
        .find(|n| {
            n.uid == uid
                && n.cluster.as_deref() == cluster
                && n.node.name == name
                && n.machine_gone_at.is_some()
        })
        .and_then(|n| n.node.server_id.clone())
}

/// A new machine's kubelet registers under the name of a Node whose machine is gone
/// (a machine made again under the same name): as a real kubelet does, it finds the
/// Node already there and takes it over. The Node keeps what was written on it (its
/// creation time, labels, taints, cordon, annotations and pod CIDR, which is
/// immutable) and now runs on machine `sid`; it turns Ready when the kubelet does.
/// (Two live machines of one name would fight over one Node; the simulator does not
/// model that and keeps a record for each.)
fn take_over(
    st: &mut State,
    t: Timestamp,
    old_sid: &str,
    sid: &str,
    tags: &[String],
    internal_ip: Option<std::net::IpAddr>,
) {
    let Some(mut rec) = st.nodes.remove(old_sid) else {
        return;
    };
    routes::move_pod_cidr(st, old_sid, sid);
    rec.node.server_id = Some(sid.to_string());
    rec.node.internal_ip = internal_ip;
    rec.node.ready = false;
    rec.machine_gone_at = None;
    rec.machine_tags = tags.to_vec();
    rec.nova = st.servers.get(sid).is_some();
    let seq = st.next_seq();
    st.nodes.insert(seq, sid.to_string(), rec);
    crate::k8s::node_changed(st, t, sid);
    let latency = st.config.latencies.node_ready;
    st.schedule_after(t, latency, SimEvent::Kube(Event::Ready(sid.to_string())));
}

pub(crate) fn is_live(st: &State, event: &Event) -> bool {
    match event {
        Event::Register(sid) => st.host_running(sid) && !st.nodes.contains(sid),
        Event::Ready(sid) => st.nodes.get(sid).is_some_and(|n| !n.node.ready),
        Event::Gone(sid) => st.nodes.contains(sid),
    }
}

/// Whether `owner`'s API endpoint answers: a configured load balancer of the owner
/// (ACTIVE, or PENDING_UPDATE: its amphora keeps forwarding while a change is applied)
/// has an ACTIVE member, `ONLINE` or `NO_MONITOR`, whose server runs with a Ready node.
pub(crate) fn api_reachable(st: &State, owner: &Ownership) -> bool {
    // The owner's pools and their members, by index: this runs at every node list.
    let serving = |lb_id: &str| {
        let pools = st
            .pools
            .in_group(&owner.uid)
            .filter(|p| p.loadbalancer_id == lb_id);
        let mut members = pools.flat_map(|p| st.members.in_group(&p.id));
        members.any(|m| {
            let m = &m.member;
            m.provisioning_status == ProvisioningStatus::Active
                && matches!(
                    m.operating_status,
                    OperatingStatus::Online | OperatingStatus::NoMonitor
                )
                && st.server_by_address.get(&m.address).is_some_and(|sid| {
                    st.host_running(sid) && st.nodes.get(sid).is_some_and(|n| n.node.ready)
                })
        })
    };
    let through_lb = st.lbs.in_group(&owner.uid).any(|l| {
        owner.owns(&l.lb.tags)
            && matches!(
                l.lb.provisioning_status,
                ProvisioningStatus::Active | ProvisioningStatus::PendingUpdate
            )
            && serving(&l.lb.id)
    });
    // OpenNebula clusters have an external endpoint: a VIP the control-plane VMs hold
    // (kube-vip). It answers once some control-plane VM runs and its kubelet has
    // registered (the API server is up).
    let through_vip = st.one.vms.iter().any(|(id, vm)| {
        owner.owns(&vm.tags)
            && vm.tags.iter().any(|t| {
                t.strip_prefix(flightdeck_cloud::ownership::TAG_MACHINE)
                    .is_some_and(|k| k.starts_with("cp-"))
            })
            && vm.is_running()
            && st.nodes.contains(&id.to_string())
    });
    through_lb || through_vip || mirrored_api_reachable(st, owner)
}

/// Whether the API of a cluster mirrored from a real cloud (test bed, `mirror.rs`) answers: one of its control-plane machines
/// runs with a Ready node.
fn mirrored_api_reachable(st: &State, owner: &Ownership) -> bool {
    st.mirrored.contains(&owner.cluster)
        && st.servers.values().any(|r| {
            owner.owns(&r.server.tags)
                && r.server.tags.iter().any(|t| {
                    t.strip_prefix(TAG_MACHINE)
                        .is_some_and(|k| k.starts_with("cp-"))
                })
                && st.host_running(&r.server.id)
                && st.nodes.get(&r.server.id).is_some_and(|n| n.node.ready)
        })
}

/// The nodes of `owner`'s workload cluster as its API lists them at `now` (`None`: its
/// API answers nothing); the observer faults in force strike the answer.
pub(crate) fn list_nodes(st: &mut State, now: Timestamp, owner: &Ownership) -> Option<Vec<Node>> {
    if !api_reachable(st, owner) {
        return None;
    }
    let tags = [format!("{TAG_CLUSTER}{}", owner.cluster)];
    if faults::strike(st, FaultKind::EmptyNodeList, now, &tags) {
        return Some(Vec::new());
    }
    let not_ready = faults::strike(st, FaultKind::AllNotReady, now, &tags);
    Some(
        st.nodes
            .in_group(&owner.uid)
            .filter(|n| n.uid == owner.uid)
            .map(|n| Node {
                ready: n.node.ready && !not_ready,
                ..n.node.clone()
            })
            .collect(),
    )
}

impl GuestCluster for SimCloud {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        self.list(KUBERNETES, "GET /api/v1/nodes", &owner.uid, |st, now| {
            Ok(list_nodes(st, now, owner))
        })
    }

    /// Read from the simulator's state at the moment: never stale.
    fn nodes_stale_since(&self, _owner: &Ownership) -> Option<Timestamp> {
        None
    }
    /// The simulator answers nodes from its world at every read: nothing is kept.
    fn forget_node_watches(&self) {}
}
