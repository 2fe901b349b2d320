//! Nova: servers. `BUILD → ACTIVE` (or `ERROR`) after the boot latency; delete marks
//! the server `deleting` and it is gone after the delete latency. An address is taken
//! from the subnet when the server is requested and shown once it is ACTIVE.

use std::net::IpAddr;
use std::sync::Arc;

use flightdeck_cloud::ownership::{TAG_CLUSTER, uid_of};
use flightdeck_cloud::{
    CloudError, Compute, ErrorClass, Ownership, Server, ServerCreate, ServerStatus, Timestamp,
};
use flightdeck_spec::FaultKind;

use crate::faults::SimFault;
use crate::neutron::{self, Lookup};
use crate::{Event as SimEvent, MutationKind, Result, SimCloud, State, faults, kube};

pub(crate) const NOVA: &str = "nova";

/// The most servers (of any owner, deleting ones included) the cloud holds: Nova's
/// instance quota.
pub const SERVERS_MAX: usize = 50_000;
/// Nova's limits on server tags.
const TAGS_MAX: usize = 50;
const TAG_LEN_MAX: usize = 60;
const NAME_LEN_MAX: usize = 255;

const NO_VALID_HOST: &str = "No valid host was found. There are not enough hosts available.";

pub(crate) struct ServerRec {
    /// Shared with the world snapshots taken since it last changed ([`ServerRec::server_mut`]
    /// copies it then): a snapshot of 10,000 servers costs 10,000 reference counts, not
    /// 100,000 allocations.
    pub(crate) server: Arc<Server>,
    /// Ids of the security groups the server is in (`server.security_groups` has the
    /// names).
    pub(crate) group_ids: Vec<String>,
    /// The address taken from the subnet when the server was requested.
    allocated: Option<IpAddr>,
    /// Decided when requested: the boot ends in ERROR.
    boot_fails: bool,
    /// Decided when requested (`net.noRegistration`): its kubelet never starts.
    pub(crate) no_kubelet: bool,
    /// Decided when requested (`nova.dropSecurityGroup`): it comes up without groups.
    drop_groups: bool,
    /// The user data it was created with (decoded), as Nova keeps it.
    pub(crate) user_data: Option<String>,
}

impl ServerRec {
    /// The server, to change it: a snapshot that holds it keeps its own copy.
    pub(crate) fn server_mut(&mut self) -> &mut Server {
        Arc::make_mut(&mut self.server)
    }

    /// Whether this server can run a kubelet and serve: ACTIVE and not being deleted.
    pub(crate) fn is_running(&self) -> bool {
        self.server.status == ServerStatus::Active && !self.server.is_deleting()
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Event {
    Boot(String),
    Gone(String),
}

fn error(class: ErrorClass, op: &str, status: u16, message: String) -> CloudError {
    CloudError::new(class, NOVA, op, Some(status), message)
}

fn not_found(op: &str, id: &str) -> CloudError {
    error(
        ErrorClass::NotFound,
        op,
        404,
        format!("Instance {id} could not be found."),
    )
}

/// The servers tagged with `owner`'s UID; under `nova.tagFilterIgnored`, every server
/// in the project (the filter asked for is not applied).
fn list(st: &mut State, now: Timestamp, owner: &Ownership) -> Vec<Server> {
    let tags = [format!("{TAG_CLUSTER}{}", owner.cluster)];
    if faults::strike(st, FaultKind::TagFilterIgnored, now, &tags) {
        return st
            .servers
            .values()
            .map(|s| Server::clone(&s.server))
            .collect();
    }
    st.servers
        .in_group(&owner.uid)
        .filter(|s| owner.owns(&s.server.tags))
        .map(|s| Server::clone(&s.server))
        .collect()
}

fn validate(op: &str, req: &ServerCreate) -> Result<()> {
    let bad = |field: &str| {
        Err(error(
            ErrorClass::Permanent,
            op,
            400,
            format!("Invalid input for field/attribute {field}."),
        ))
    };
    if req.name.is_empty() || req.name.len() > NAME_LEN_MAX {
        return bad("name");
    }
    let tag_ok = |t: &String| !t.is_empty() && t.len() <= TAG_LEN_MAX && !t.contains(['/', ',']);
    if req.tags.len() > TAGS_MAX || !req.tags.iter().all(tag_ok) {
        return bad("tags");
    }
    Ok(())
}

fn create(st: &mut State, now: Timestamp, req: &ServerCreate) -> Result<Server> {
    const OP: &str = "POST /servers";
    validate(OP, req)?;
    // The operator's own servers (fixtures such as a bastion) are not counted.
    let used = st.servers.len().saturating_sub(st.fixtures.servers);
    if used >= SERVERS_MAX {
        return Err(error(
            ErrorClass::Permanent,
            OP,
            403,
            format!(
                "Quota exceeded for instances: Requested 1, but already used {used} of {SERVERS_MAX} instances"
            ),
        ));
    }
    let mut group_ids = Vec::new();
    let mut group_names = Vec::new();
    for wanted in &req.security_groups {
        match neutron::resolve_group(st, wanted) {
            Lookup::Found { id, name } => {
                if !group_ids.contains(&id) {
                    group_ids.push(id);
                    group_names.push(name);
                }
            }
            Lookup::NotFound => {
                return Err(error(
                    ErrorClass::Permanent,
                    OP,
                    400,
                    format!("Security group {wanted} not found."),
                ));
            }
            Lookup::Ambiguous => return Err(ambiguous(OP, wanted)),
        }
    }
    let id = st.new_id();
    let boot_fails = faults::server_hit(st, FaultKind::BootError, now, &req.tags);
    let no_kubelet = faults::server_hit(st, FaultKind::NoRegistration, now, &req.tags);
    let drop_groups = faults::server_hit(st, FaultKind::DropSecurityGroup, now, &req.tags);
    let allocated = st.addresses.allocate();
    let server = Server {
        id: id.clone(),
        name: req.name.clone(),
        status: ServerStatus::Build,
        task_state: Some("scheduling".into()),
        tags: req.tags.clone(),
        security_groups: group_names,
        address: None,
        image: req.image.clone(),
        flavor: req.flavor.clone(),
        fault: None,
        created_at: now,
    };
    let seq = st.next_seq();
    st.servers.insert(
        seq,
        id.clone(),
        ServerRec {
            server: Arc::new(server.clone()),
            group_ids,
            allocated,
            boot_fails,
            no_kubelet,
            drop_groups,
            user_data: req.user_data.clone(),
        },
    );
    let boot = st.config.latencies.server_boot;
    st.schedule_after(now, boot, SimEvent::Nova(Event::Boot(id)));
    Ok(server)
}

fn ambiguous(op: &str, name: &str) -> CloudError {
    // Nova resolves names through Neutron; several groups of that name make it give up.
    error(
        ErrorClass::Permanent,
        op,
        409,
        format!(
            "Multiple security_group matches found for name '{name}', use an ID to be more specific."
        ),
    )
}

fn delete(st: &mut State, now: Timestamp, id: &str, by_api: bool) -> Result<()> {
    const OP: &str = "DELETE /servers/{server_id}";
    let Some(rec) = st.servers.get_mut(id) else {
        return Err(not_found(OP, id));
    };
    if rec.server.is_deleting() {
        // Nova accepts a repeated delete and changes nothing.
        return Ok(());
    }
    rec.server_mut().task_state = Some("deleting".into());
    crate::k8s::machine_deleting(st, now, id, by_api);
    let latency = st.config.latencies.server_delete;
    st.schedule_after(now, latency, SimEvent::Nova(Event::Gone(id.into())));
    Ok(())
}

fn add_security_group(st: &mut State, server_id: &str, group: &str) -> Result<()> {
    const OP: &str = "POST /servers/{server_id}/action";
    if !st.servers.contains(server_id) {
        return Err(not_found(OP, server_id));
    }
    let (gid, name) = match neutron::resolve_group(st, group) {
        Lookup::Found { id, name } => (id, name),
        Lookup::NotFound => {
            return Err(error(
                ErrorClass::NotFound,
                OP,
                404,
                format!("Security group {group} not found."),
            ));
        }
        Lookup::Ambiguous => return Err(ambiguous(OP, group)),
    };
    if let Some(rec) = st.servers.get_mut(server_id)
        && !rec.group_ids.contains(&gid)
    {
        rec.group_ids.push(gid);
        rec.server_mut().security_groups.push(name);
    }
    Ok(())
}

pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::Boot(id) => {
            let Some(rec) = st.servers.get_mut(&id) else {
                return;
            };
            if rec.server.status != ServerStatus::Build || rec.server.is_deleting() {
                return;
            }
            let fault = match rec.allocated {
                _ if rec.boot_fails => Some(NO_VALID_HOST.to_string()),
                None => Some(format!(
                    "Build of instance {id} aborted: Failed to allocate the network(s), not rescheduling."
                )),
                Some(_) => None,
            };
            rec.server_mut().task_state = None;
            if let Some(fault) = fault {
                rec.server_mut().status = ServerStatus::Error;
                rec.server_mut().fault = Some(fault);
                // A server that never got scheduled keeps no port.
                if let Some(ip) = rec.allocated.take() {
                    st.addresses.release(ip);
                }
                return;
            }
            rec.server_mut().status = ServerStatus::Active;
            rec.server_mut().address = rec.allocated;
            if rec.drop_groups {
                rec.group_ids.clear();
                rec.server_mut().security_groups.clear();
            }
            if let Some(ip) = rec.allocated {
                st.server_by_address.insert(ip, id.clone());
                st.health.touched_addresses.insert(ip);
            }
            kube::server_active(st, t, &id);
        }
        Event::Gone(id) => {
            let Some(rec) = st.servers.remove(&id) else {
                return;
            };
            if let Some(ip) = rec.allocated {
                if st.server_by_address.get(&ip) == Some(&id) {
                    st.server_by_address.remove(&ip);
                }
                st.health.touched_addresses.insert(ip);
                st.addresses.release(ip);
            }
            kube::server_gone(st, t, &id);
        }
    }
}

pub(crate) fn is_live(st: &State, event: &Event) -> bool {
    match event {
        Event::Boot(id) => st
            .servers
            .get(id)
            .is_some_and(|s| s.server.status == ServerStatus::Build && !s.server.is_deleting()),
        Event::Gone(id) => st.servers.contains(id),
    }
}

pub(crate) fn add_foreign(st: &mut State, now: Timestamp, name: &str, tags: Vec<String>) -> String {
    let id = st.new_id();
    let address = st.addresses.allocate();
    let server = Server {
        id: id.clone(),
        name: name.into(),
        status: ServerStatus::Active,
        task_state: None,
        tags,
        security_groups: Vec::new(),
        address,
        image: "foreign".into(),
        flavor: "foreign".into(),
        fault: None,
        created_at: now,
    };
    let seq = st.next_seq();
    st.servers.insert(
        seq,
        id.clone(),
        ServerRec {
            server: Arc::new(server),
            group_ids: Vec::new(),
            allocated: address,
            boot_fails: false,
            no_kubelet: false,
            drop_groups: false,
            user_data: None,
        },
    );
    if let Some(ip) = address {
        st.server_by_address.insert(ip, id.clone());
        st.health.touched_addresses.insert(ip);
    }
    kube::server_active(st, now, &id);
    id
}

/// `nova.dropSecurityGroup` starts: `count` running servers of flightdeck's (the
/// targeted cluster's) that are in some group lose all their groups, picked with the
/// fault stream among them in creation order.
pub(crate) fn strip_groups(st: &mut State, fault: &SimFault, count: usize) -> u64 {
    let candidates: Vec<String> = st
        .servers
        .values()
        .filter(|s| {
            s.is_running()
                && !s.group_ids.is_empty()
                && uid_of(&s.server.tags).is_some()
                && fault.targets(&s.server.tags)
        })
        .map(|s| s.server.id.clone())
        .collect();
    let chosen = faults::pick(&mut st.rng_faults, candidates, count);
    let n = chosen.len() as u64;
    for id in chosen {
        if let Some(rec) = st.servers.get_mut(&id) {
            rec.group_ids.clear();
            rec.server_mut().security_groups.clear();
        }
    }
    n
}

/// flightdeck's running (or booting) servers within `fault`'s target, in creation
/// order, not being deleted.
fn targeted_servers(st: &State, fault: &SimFault, running_only: bool) -> Vec<String> {
    st.servers
        .values()
        .filter(|s| {
            let alive = if running_only {
                s.is_running()
            } else {
                !s.server.is_deleting() && s.server.status != ServerStatus::Error
            };
            alive && uid_of(&s.server.tags).is_some() && fault.targets(&s.server.tags)
        })
        .map(|s| s.server.id.clone())
        .collect()
}

/// `operator.deleteMachine` starts: an operator deletes `count` of the targeted
/// servers (`openstack server delete`), picked with the fault stream. Answers how
/// many.
pub(crate) fn delete_out_of_band(
    st: &mut State,
    now: Timestamp,
    fault: &SimFault,
    count: usize,
) -> u64 {
    let candidates = targeted_servers(st, fault, false);
    let chosen = faults::pick(&mut st.rng_faults, candidates, count);
    let n = chosen.len() as u64;
    for id in chosen {
        // As if through the API, but not flightdeck's call: neither counted nor logged.
        let _ = delete(st, now, &id, false);
    }
    n
}

/// `nova.serverError` starts: `count` running servers of the target go ERROR (their
/// compute host failed): they stop serving and their kubelets stop. Answers how many.
pub(crate) fn fail_running(st: &mut State, now: Timestamp, fault: &SimFault, count: usize) -> u64 {
    let candidates = targeted_servers(st, fault, true);
    let chosen = faults::pick(&mut st.rng_faults, candidates, count);
    let n = chosen.len() as u64;
    for id in chosen {
        let Some(rec) = st.servers.get_mut(&id) else {
            continue;
        };
        rec.server_mut().status = ServerStatus::Error;
        rec.server_mut().fault = Some(format!(
            "Instance {id} is in an error state: its compute host stopped responding."
        ));
        if let Some(ip) = rec.server.address
            && st.server_by_address.get(&ip) == Some(&id)
        {
            st.server_by_address.remove(&ip);
            st.health.touched_addresses.insert(ip);
        }
        kube::server_stopped(st, now, &id);
    }
    n
}

impl SimCloud {
    /// Nova's `GET /servers/{server_id}`: the server as it is now, `None` (a 404) when no
    /// server has that ID. A direct read: never answered from a stale list.
    pub fn show_server(&self, id: &str) -> Result<Option<Server>> {
        self.read(NOVA, "GET /servers/{server_id}", |st, _| {
            Ok(st.servers.get(id).map(|s| Server::clone(&s.server)))
        })
    }
}

impl Compute for SimCloud {
    async fn list_servers(&self, owner: &Ownership) -> Result<Vec<Server>> {
        self.list(NOVA, "GET /servers/detail", &owner.uid, |st, now| {
            Ok(list(st, now, owner))
        })
    }

    async fn create_server(&self, req: &ServerCreate) -> Result<Server> {
        self.create(NOVA, "POST /servers", &req.tags, |st, now| {
            create(st, now, req)
        })
    }

    async fn delete_server(&self, id: &str) -> Result<()> {
        self.change(
            NOVA,
            "DELETE /servers/{server_id}",
            MutationKind::Delete,
            id,
            |st, now| delete(st, now, id, true),
        )
    }

    async fn server_gone(&self, id: &str) -> Result<bool> {
        Ok(self.show_server(id)?.is_none())
    }

    async fn add_security_group(&self, server_id: &str, group: &str) -> Result<()> {
        self.change(
            NOVA,
            "POST /servers/{server_id}/action",
            MutationKind::Update,
            server_id,
            |st, _| add_security_group(st, server_id, group),
        )
    }
}

/// Test bed: a server of another (real) cloud, mirrored with its own id, tags and
/// address, so that a kubelet registers for it here (`no_kubelet`: never). Not an API
/// call.
pub(crate) fn mirror(st: &mut State, now: Timestamp, server: &Server, no_kubelet: bool) {
    if st.servers.contains(&server.id) {
        return;
    }
    let id = server.id.clone();
    let seq = st.next_seq();
    st.servers.insert(
        seq,
        id.clone(),
        ServerRec {
            server: Arc::new(Server {
                status: ServerStatus::Active,
                ..server.clone()
            }),
            group_ids: Vec::new(),
            allocated: None,
            boot_fails: false,
            no_kubelet,
            drop_groups: false,
            user_data: None,
        },
    );
    if let Some(ip) = server.address {
        st.server_by_address.insert(ip, id.clone());
    }
    kube::server_active(st, now, &id);
}

/// Test bed: a mirrored server is gone from its cloud: its kubelet stops.
pub(crate) fn unmirror(st: &mut State, now: Timestamp, id: &str) {
    let Some(rec) = st.servers.remove(id) else {
        return;
    };
    if let Some(ip) = rec.server.address
        && st.server_by_address.get(&ip).map(String::as_str) == Some(id)
    {
        st.server_by_address.remove(&ip);
    }
    kube::server_gone(st, now, id);
}
