//! Table-driven tests of the planner. Every observed cloud is built by hand from the
//! small helpers below; there is no I/O and no simulator. One file per concern:
//! `infra` (security group, load balancer, ownership), `rollout` (F2 member gate,
//! memberTimeout, removal order, scaling), `deletion` (F12).

mod adoption;
mod churn;
mod creates;
mod deletion;
mod drain;
mod hazards;
mod infra;
mod leave;
mod nodes;
mod opennebula;
mod restored;
mod rollout;
mod routes;
mod stale;
mod startup;
mod userdata;
mod verify;

use std::net::{IpAddr, Ipv4Addr};

use flightdeck_cloud::{
    HealthMonitor, Listener, LoadBalancer, Member, Node, Observed, OperatingStatus, Ownership,
    Pool, ProvisioningStatus, Role, SecurityGroup, SecurityGroupRule, Server, ServerStatus,
    Timestamp,
};
use flightdeck_spec::{Cluster, Document, load_documents};

use crate::memory::{RecordedIds, Removal};
use crate::{
    Action, MachineRecord, MachineRole, MachineTemplate, MemberGate, Memory, Plan, PlanInput,
    PlanOptions, plan,
};

const V1: &str = "v1.30.2";
const V2: &str = "v1.31.0";
const IMAGE: &str = "ubuntu-2204-kube";
const POD_CIDR: &str = "10.244.0.0/16";
/// "Now" in every test; machines are created ten minutes before it.
const T0: Timestamp = Timestamp(Timestamp::SIM_EPOCH.0 + 3_600_000);
const SG: &str = "sg-1";
const LB: &str = "lb-1";
const LISTENER: &str = "listener-1";
const POOL: &str = "pool-1";
const HM: &str = "hm-1";

/// The cluster `demo`: three control-plane machines at `version`, a `workers` pool,
/// pod CIDR 10.244.0.0/16, memberTimeout 5m, maxSurge 1, and a TCP health monitor
/// when `monitor` is set. It boots its own data (`bootstrap: none`): these tests are
/// about machines, load balancers and rules; `bootstrap.rs` plans kubeadm's steps.
fn spec_with(version: &str, workers: u32, monitor: bool) -> Cluster {
    let hm = if monitor {
        "\n    healthMonitor:\n      type: TCP"
    } else {
        ""
    };
    let yaml = format!(
        "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  bootstrap: {{provider: none}}
  controlPlane:
    replicas: 3
    version: {version}
    machine: {{flavor: m1.large, image: {IMAGE}}}
  nodePools:
    - name: workers
      replicas: {workers}
      machine: {{flavor: m1.xlarge, image: {IMAGE}}}
  network:
    podCIDR: {POD_CIDR}
    securityGroup: demo-nodes
  apiLoadBalancer:
    port: 6443{hm}
  provider:
    openstack: {{cloud: sim, network: private, subnet: private-subnet}}
  flight:
    memberTimeout: 5m
    maxSurge: 1
"
    );
    let docs = load_documents(&yaml, "test-spec").expect("the test spec parses");
    match docs.into_iter().next() {
        Some(Document::Cluster(c)) => *c,
        other => panic!("expected one Cluster document, got {other:?}"),
    }
}

fn spec(version: &str, workers: u32) -> Cluster {
    spec_with(version, workers, true)
}

fn tags(role: Role) -> Vec<String> {
    Ownership {
        cluster: "demo".into(),
        uid: "uid-1".into(),
    }
    .tags(&role)
}

fn rule(protocol: &str, direction: &str, prefix: &str) -> SecurityGroupRule {
    SecurityGroupRule {
        id: format!("rule-{protocol}-{direction}-{prefix}"),
        direction: direction.into(),
        ethertype: "IPv4".into(),
        protocol: Some(protocol.into()),
        remote_ip_prefix: Some(prefix.into()),
    }
}

fn security_group(id: &str, tags: Vec<String>, rules: Vec<SecurityGroupRule>) -> SecurityGroup {
    SecurityGroup {
        id: id.into(),
        name: "demo-nodes".into(),
        tags,
        rules,
    }
}

fn load_balancer(id: &str, tags: Vec<String>, status: ProvisioningStatus) -> LoadBalancer {
    LoadBalancer {
        id: id.into(),
        name: "demo-api".into(),
        provisioning_status: status,
        operating_status: OperatingStatus::Online,
        vip_address: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10))),
        tags,
    }
}

/// What the cloud shows of one machine besides its (ACTIVE) server.
#[derive(Clone, Copy)]
struct Health {
    member: Option<(ProvisioningStatus, OperatingStatus)>,
    node_ready: Option<bool>,
}

const SERVING: Health = Health {
    member: Some((ProvisioningStatus::Active, OperatingStatus::Online)),
    node_ready: Some(true),
};
const WORKER_READY: Health = Health {
    member: None,
    node_ready: Some(true),
};

fn with_member(provisioning: ProvisioningStatus, operating: OperatingStatus) -> Health {
    Health {
        member: Some((provisioning, operating)),
        node_ready: Some(true),
    }
}

/// A change to a `World` that a table row makes before planning.
type Setup = fn(&mut World);

/// One planning input, owned, so a test can change a piece and plan again.
struct World {
    spec: Cluster,
    observed: Observed,
    memory: Memory,
    now: Timestamp,
    gate: MemberGate,
    /// When the engine took the cluster up from the store (`None`: applied to it).
    taken_up: Option<Timestamp>,
    /// Safety mechanisms switched off (none, but to prove a test notices).
    disabled: crate::Disabled,
}

impl World {
    /// Nothing in the cloud and nothing remembered.
    fn empty(spec: Cluster) -> Self {
        World {
            spec,
            observed: Observed::default(),
            memory: Memory::new("uid-1".into()),
            now: T0,
            gate: MemberGate::default(),
            taken_up: None,
            disabled: crate::Disabled::default(),
        }
    }

    /// The security group with its three pod-CIDR rules and an ACTIVE load-balancer
    /// chain (with a health monitor when the spec asks for one), IDs recorded, no machines.
    fn with_infra(spec: Cluster) -> Self {
        let mut w = World::empty(spec);
        let monitored = w.spec.spec.api_load_balancer.health_monitor.is_some();
        let o = &mut w.observed;
        let rules = ["tcp", "udp", "icmp"].map(|p| rule(p, "ingress", POD_CIDR));
        o.security_groups
            .push(security_group(SG, tags(Role::SecurityGroup), rules.into()));
        o.load_balancers.push(load_balancer(
            LB,
            tags(Role::ApiLoadBalancer),
            ProvisioningStatus::Active,
        ));
        o.listeners.push(Listener {
            id: LISTENER.into(),
            name: "demo-api-6443".into(),
            loadbalancer_id: LB.into(),
            protocol_port: 6443,
            provisioning_status: ProvisioningStatus::Active,
            tags: tags(Role::ApiListener),
        });
        o.pools.push(Pool {
            id: POOL.into(),
            name: "demo-api".into(),
            loadbalancer_id: LB.into(),
            listener_id: Some(LISTENER.into()),
            provisioning_status: ProvisioningStatus::Active,
            tags: tags(Role::ApiPool),
        });
        if monitored {
            o.health_monitors.push(HealthMonitor {
                id: HM.into(),
                name: "demo-api".into(),
                pool_id: POOL.into(),
                kind: "TCP".into(),
                provisioning_status: ProvisioningStatus::Active,
                tags: tags(Role::ApiHealthMonitor),
            });
        }
        o.nodes = Some(Vec::new());
        w.memory.spec_hash = w.spec.spec_hash();
        w.memory.ready_since = Some(Timestamp(T0.0 - 3_000_000));
        w.memory.ids = RecordedIds {
            security_group: Some(SG.into()),
            load_balancer: Some(LB.into()),
            listener: Some(LISTENER.into()),
            pool: Some(POOL.into()),
            health_monitor: monitored.then(|| HM.into()),
            missing_since: None,
        };
        w
    }

    /// Infra plus three serving control-plane machines at `cp_version` (cp-1..cp-3) and
    /// `workers` Ready workers (workers-4, ...).
    fn cluster(spec: Cluster, cp_version: &str, workers: u64) -> Self {
        let mut w = World::with_infra(spec);
        for n in 1..=3 {
            w.add_cp(n, cp_version, SERVING);
        }
        for n in 4..4 + workers {
            w.add_worker(n, WORKER_READY);
        }
        w
    }

    fn plan(&self) -> Plan {
        // The engine observes right before planning: the lists are as fresh as `now`.
        let mut observed = self.observed.clone();
        observed.at = self.now;
        plan(PlanInput {
            spec: &self.spec,
            observed: &observed,
            memory: &self.memory,
            now: self.now,
            options: &PlanOptions {
                member_gate: self.gate,
                disabled: self.disabled.clone(),
                ..PlanOptions::default()
            },
            shared: &crate::Shared::default(),
            taken_up: self.taken_up,
        })
    }

    /// Plans, and when a deletion saw nothing left and asks for a second list to
    /// confirm it, plans again from that memory (the second list shows the same).
    fn plan_confirmed(&mut self) -> Plan {
        let p = self.plan();
        if p.deleted || p.memory.deletion_proof.empty_since.is_none() {
            return p;
        }
        self.memory = p.memory;
        self.plan()
    }

    /// Adds machine number `n` (older for smaller `n`): record, ACTIVE server, and the
    /// member and node `h` asks for. Returns the machine's name.
    fn add_machine(&mut self, n: u64, role: MachineRole, version: &str, h: Health) -> String {
        let (key, flavor) = match &role {
            MachineRole::ControlPlane => (format!("cp-{n}"), "m1.large"),
            MachineRole::Pool(p) => (format!("{p}-{n}"), "m1.xlarge"),
        };
        let name = format!("demo-{key}");
        let server_id = format!("srv-{key}");
        let member_id = format!("mem-{key}");
        let created_at = Timestamp(T0.0 - 600_000 + n * 1000);
        let address = IpAddr::V4(Ipv4Addr::new(
            10,
            0,
            0,
            u8::try_from(n).expect("machine numbers stay small"),
        ));
        self.observed.servers.push(Server {
            id: server_id.clone(),
            name: name.clone(),
            status: ServerStatus::Active,
            task_state: None,
            tags: tags(Role::Machine(key.clone())),
            security_groups: vec!["demo-nodes".into()],
            address: Some(address),
            image: IMAGE.into(),
            flavor: flavor.into(),
            fault: None,
            created_at,
        });
        if let Some((provisioning_status, operating_status)) = h.member {
            self.observed.members.push(Member {
                id: member_id.clone(),
                name: name.clone(),
                pool_id: POOL.into(),
                address,
                protocol_port: 6443,
                provisioning_status,
                operating_status,
                tags: tags(Role::Machine(key.clone())),
            });
        }
        if let Some(ready) = h.node_ready {
            self.observed.nodes.get_or_insert_with(Vec::new).push(Node {
                name: name.clone(),
                server_id: Some(server_id.clone()),
                ready,
                unschedulable: false,
                created_at,
                pod_cidr: None,
                internal_ip: None,
                labels: Default::default(),
                taints: Vec::new(),
                hold_deletion: None,
            });
        }
        self.memory.machine_seq = self.memory.machine_seq.max(n);
        let record = MachineRecord {
            name: name.clone(),
            key,
            role,
            template: MachineTemplate {
                flavor: flavor.into(),
                image: IMAGE.into(),
                version: version.into(),
                user_data: 0,
            },
            reason: "test".into(),
            created_at,
            server_id: Some(server_id),
            member_id: h.member.map(|_| member_id),
            member_unready_since: None,
            server_missing_since: None,
            node_unready_since: None,
            remediation: None,
            removal: None,
            // An earlier pass saw the server run from its creation.
            running_since: Some(created_at),
            lineage: Vec::new(),
            create_sent_at: None,
            token: None,
        };
        self.memory.machines.insert(name.clone(), record);
        name
    }

    fn add_cp(&mut self, n: u64, version: &str, h: Health) -> String {
        self.add_machine(n, MachineRole::ControlPlane, version, h)
    }

    fn add_worker(&mut self, n: u64, h: Health) -> String {
        self.add_machine(n, MachineRole::Pool("workers".into()), "", h)
    }

    fn record(&mut self, name: &str) -> &mut MachineRecord {
        self.memory
            .machines
            .get_mut(name)
            .expect("the machine is recorded")
    }

    /// Marks `name` for removal, its node (if any) already drained: cordoned, no pod
    /// left. The drain itself is `tests/drain.rs`'s.
    fn mark_removal(&mut self, name: &str) {
        self.drained(name);
        self.record(name).removal = Some(Removal {
            since: Timestamp(T0.0 - 1000),
            reason: "test removal".into(),
            drain_since: None,
            node: None,
            scale_down: false,
        });
    }

    /// The node of machine `name`, if it has one, drained: cordoned, with no pod left.
    fn drained(&mut self, name: &str) {
        if let Some(n) = self
            .observed
            .nodes
            .iter_mut()
            .flatten()
            .find(|n| n.name == name)
        {
            n.unschedulable = true;
            self.observed.pods.insert(name.to_string(), Vec::new());
        }
    }

    fn member(&mut self, name: &str) -> &mut Member {
        self.observed
            .members
            .iter_mut()
            .find(|m| m.name == name)
            .expect("the machine has a member")
    }

    fn drop_member(&mut self, name: &str) {
        self.observed.members.retain(|m| m.name != name);
    }

    fn drop_server(&mut self, name: &str) {
        self.observed.servers.retain(|s| s.name != name);
    }
}

/// The messages of the plan's events of `reason`.
fn events(p: &Plan, reason: &str) -> Vec<String> {
    p.events
        .iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

/// The machine names that actions of `kind` act on, in plan order.
fn targets(p: &Plan, kind: &str) -> Vec<String> {
    p.actions
        .iter()
        .filter(|a| a.action.kind() == kind)
        .filter_map(|a| match &a.action {
            Action::CreateServer { machine, .. }
            | Action::CreateMember { machine, .. }
            | Action::DeleteMember { machine, .. }
            | Action::DeleteServer { machine, .. } => Some(machine.clone()),
            _ => None,
        })
        .collect()
}

/// The machines the plan has under repair.
fn under_repair(p: &Plan) -> Vec<String> {
    p.memory
        .machines
        .values()
        .filter(|r| r.remediation.is_some())
        .map(|r| r.name.clone())
        .collect()
}

fn count(p: &Plan, kind: &str) -> usize {
    p.actions.iter().filter(|a| a.action.kind() == kind).count()
}

fn lb_mutations(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter(|a| a.action.mutates_load_balancer())
        .map(|a| a.action.summary())
        .collect()
}

/// Machines the plan's memory marks for removal.
fn removing(p: &Plan) -> Vec<String> {
    p.memory
        .machines
        .values()
        .filter(|r| r.removal.is_some())
        .map(|r| r.name.clone())
        .collect()
}

fn condition<'p>(p: &'p Plan, kind: &str) -> Option<&'p crate::Condition> {
    p.conditions.iter().find(|c| c.kind == kind)
}
