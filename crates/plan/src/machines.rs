//! Machines as the planner sees them: a memory record joined with what the cloud shows
//! for it (server, load-balancer member, node).

use flightdeck_cloud::ownership::machine_of;
use flightdeck_cloud::{
    Member, Node, Observed, OperatingStatus, ProvisioningStatus, Server, ServerStatus,
};

use crate::Planner;
use crate::memory::{MachineRecord, MachineRole, MachineTemplate};
use crate::status::{MachineStatus, MemberStatus};

#[derive(Clone, Debug)]
pub struct MachineView<'a> {
    pub record: &'a MachineRecord,
    pub server: Option<&'a Server>,
    pub member: Option<&'a Member>,
    pub node: Option<&'a Node>,
}

/// Where a machine's server is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerPhase {
    /// Recorded, but no server seen yet (create pending or about to be issued).
    Requested,
    Building,
    Running,
    Failed,
    Deleting,
    /// A server was recorded but is no longer there.
    Gone,
}

impl<'a> MachineView<'a> {
    pub fn name(&self) -> &str {
        &self.record.name
    }
    pub fn role(&self) -> &MachineRole {
        &self.record.role
    }
    pub fn template(&self) -> &MachineTemplate {
        &self.record.template
    }
    pub fn removing(&self) -> bool {
        self.record.removal.is_some()
    }

    pub fn server_phase(&self) -> ServerPhase {
        match self.server {
            None if self.record.server_id.is_some() => ServerPhase::Gone,
            None => ServerPhase::Requested,
            Some(s) if s.is_deleting() => ServerPhase::Deleting,
            Some(s) => match s.status {
                ServerStatus::Active => ServerPhase::Running,
                ServerStatus::Error => ServerPhase::Failed,
                ServerStatus::Build | ServerStatus::Other(_) => ServerPhase::Building,
            },
        }
    }

    pub fn node_ready(&self) -> bool {
        self.node.is_some_and(|n| n.ready)
    }

    /// Whether the member carries traffic as far as Octavia tells: provisioning ACTIVE
    /// and operating ONLINE, or NO_MONITOR when the pool has no health monitor.
    pub fn member_serving(&self, monitored: bool) -> bool {
        self.member.is_some_and(|m| {
            m.provisioning_status == ProvisioningStatus::Active
                && if monitored {
                    m.operating_status == OperatingStatus::Online
                } else {
                    matches!(
                        m.operating_status,
                        OperatingStatus::Online | OperatingStatus::NoMonitor
                    )
                }
        })
    }
}

/// The node of a machine: by the server ID in its providerID, then (for a node without
/// one in the cloud's format) by name, then by its InternalIP.
fn node_of<'a>(nodes: &'a [Node], server: Option<&Server>, name: &str) -> Option<&'a Node> {
    let Some(s) = server else {
        return nodes.iter().find(|n| n.name == name);
    };
    let unclaimed = || nodes.iter().filter(|n| n.server_id.is_none());
    nodes
        .iter()
        .find(|n| n.server_id.as_deref() == Some(s.id.as_str()))
        .or_else(|| unclaimed().find(|n| n.name == name))
        .or_else(|| {
            s.address
                .and_then(|ip| unclaimed().find(|n| n.internal_ip == Some(ip)))
        })
}

/// Joins every machine record with the observed objects that belong to it, found by
/// recorded ID first and by machine tag second (a crash may have come between a create
/// and the recording of its ID).
/// Only members of `pool` count: a member of another pool (an old load balancer's)
/// does not carry the cluster's API.
pub fn views<'a>(
    records: impl Iterator<Item = &'a MachineRecord>,
    observed: &'a Observed,
    pool: Option<&str>,
) -> Vec<MachineView<'a>> {
    records
        .map(|record| {
            // The recorded server, whatever else carries the machine's tag (a duplicate
            // is deleted, never taken for the machine); by tag only while none is
            // recorded.
            let server = match record.server_id.as_deref() {
                Some(id) => observed.servers.iter().find(|s| s.id == id),
                None => observed
                    .servers
                    .iter()
                    .find(|s| machine_of(&s.tags) == Some(record.key.as_str())),
            };
            // A member Octavia lists as DELETED is gone, like one it no longer lists. By
            // tag, only a member on the listed server's address is its: one on another
            // address was made for an earlier machine of the same key (seed 45003950:
            // an operator deleted cp-4, a restore forgot it, and cp-4 was made again,
            // and took the old member for its own before its server was listed).
            let member = observed.members.iter().find(|m| {
                m.provisioning_status != ProvisioningStatus::Deleted
                    && pool.is_some_and(|p| m.pool_id == p)
                    && (record.member_id.as_deref() == Some(m.id.as_str())
                        || (machine_of(&m.tags) == Some(record.key.as_str())
                            && server.and_then(|s| s.address) == Some(m.address)))
            });
            let node = observed
                .nodes
                .as_ref()
                .and_then(|nodes| node_of(nodes, server, &record.name));
            MachineView {
                record,
                server,
                member,
                node,
            }
        })
        .collect()
}

/// Whether `member` may be `server`'s: on its address, or the server or its address is
/// not known (nothing proves otherwise).
pub(crate) fn member_on_server(member: &Member, server: Option<&Server>) -> bool {
    server
        .and_then(|s| s.address)
        .is_none_or(|a| a == member.address)
}

/// Time during which flightdeck could not observe the cluster is no machine's: every
/// machine deadline (`nodeStartupTimeout` from the server's start, NotReady, the member's
/// `memberTimeout`, a drain's `nodeDrainTimeout`) moves on by it, and the gap is
/// forgotten.
pub(crate) fn forgive_unobserved_time(p: &mut crate::Planner<'_>) {
    let Some(since) = p.memory.unobserved_since.take() else {
        return;
    };
    let gap = p.now.since(since).as_millis();
    if gap == 0 {
        return;
    }
    let now = p.now;
    let shift = |t: &mut Option<flightdeck_cloud::Timestamp>| {
        if let Some(x) = t.as_mut() {
            *x = flightdeck_cloud::Timestamp(x.0.saturating_add(gap).min(now.0));
        }
    };
    for r in p.memory.machines.values_mut() {
        shift(&mut r.running_since);
        shift(&mut r.node_unready_since);
        shift(&mut r.member_unready_since);
        // A drain cannot go on while nothing is seen: its `nodeDrainTimeout` moves on
        // too (seed 60005480: a drain whose cordon was refused, then ten minutes
        // unobserved, was taken for timed out and its node's pods were lost).
        if let Some(removal) = r.removal.as_mut() {
            shift(&mut removal.drain_since);
        }
    }
    p.events.push(crate::condition::PlanEvent::normal(
        "UnobservedTimeForgiven",
        format!(
            "the cluster could not be observed for {}; machine deadlines move on by as much",
            flightdeck_spec::Duration::from_millis(gap)
        ),
    ));
}

/// The machine template a set's spec asks for, as machine records keep it. On OpenNebula
/// the image is the registered (content-addressed) template name, so a content change
/// is a rollout.
pub(crate) fn machine_template(
    p: &Planner<'_>,
    m: &flightdeck_spec::MachineTemplate,
    version: String,
) -> MachineTemplate {
    if let (Some(one), Some(t)) = (p.spec.spec.provider.opennebula.as_ref(), &m.template) {
        return MachineTemplate {
            flavor: String::new(),
            image: crate::opennebula::template_name(one, t.as_str()).unwrap_or_default(),
            version,
            user_data: m.user_data.as_ref().map_or(0, |u| u.digest),
        };
    }
    MachineTemplate {
        flavor: m.flavor.as_ref().map(|f| f.to_string()).unwrap_or_default(),
        image: m.image.as_ref().map(|i| i.to_string()).unwrap_or_default(),
        version,
        user_data: m.user_data.as_ref().map_or(0, |u| u.digest),
    }
}

/// What the status says of machine `m`.
pub(crate) fn machine_status(
    m: &MachineView<'_>,
    template: &MachineTemplate,
    removing: bool,
) -> MachineStatus {
    let server_status = match m.server_phase() {
        ServerPhase::Requested => "REQUESTED".to_string(),
        ServerPhase::Building => "BUILD".to_string(),
        ServerPhase::Running => "ACTIVE".to_string(),
        ServerPhase::Failed => "ERROR".to_string(),
        ServerPhase::Deleting => "DELETING".to_string(),
        ServerPhase::Gone => "GONE".to_string(),
    };
    MachineStatus {
        name: m.name().to_string(),
        server_id: m
            .server
            .map(|s| s.id.clone())
            .or_else(|| m.record.server_id.clone()),
        server_status,
        address: m.server.and_then(|s| s.address),
        version: m.template().version.clone(),
        image: m.template().image.clone(),
        node: m.node.map(|n| {
            if n.ready {
                "Ready".to_string()
            } else {
                "NotReady".to_string()
            }
        }),
        member: m.member.map(|x| MemberStatus {
            id: x.id.clone(),
            provisioning_status: x.provisioning_status.as_str().into(),
            operating_status: x.operating_status.as_str().into(),
        }),
        up_to_date: m.template() == template,
        removing,
        drain: None,
    }
}
