//! Creating one machine's server (OpenStack, KubeVirt) or VM (OpenNebula), and when a
//! create may be sent again. Nova and OpenNebula do not make names unique: a create sent
//! twice makes two servers. The record is written before the create is sent; once sent
//! it is not sent again while a server it made could still be missing from a lagging
//! list, and a second server that carries a machine's tag after all is deleted. Machine
//! names are never handed out twice: not while a cluster taken up from its store may not
//! see yet what was made before.

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::machine_of;

use crate::action::Action;
use crate::condition::{Condition, PlanEvent, kind};
use crate::infra::Infra;
use crate::machines::MachineView;
use crate::memory::{MachineRecord, MachineRole};
use crate::rollout::SetSpec;
use crate::{LIST_LAG_MAX, POLL_MACHINES, Planner};

/// Whether the last create of `record`'s server may have made one that no list shows
/// yet: it was sent less than [`LIST_LAG_MAX`] ago and no refusal came back.
pub(crate) fn may_have_landed(p: &Planner<'_>, record: &MachineRecord) -> bool {
    record
        .create_sent_at
        .is_some_and(|t| p.now.since(t) < LIST_LAG_MAX)
}

/// Whether `record`'s machine was made so lately that a lagging list may not show its
/// server although it exists: missing from a list is no proof it is gone.
pub(crate) fn too_young_to_miss(p: &Planner<'_>, record: &MachineRecord) -> bool {
    p.now.since(record.created_at) < LIST_LAG_MAX
}

/// How long, if at all, the cluster stays within [`LIST_LAG_MAX`] of being taken up from
/// the store. A store restored from a backup has forgotten the machines made since, and
/// a lagging list may not show their servers yet: until then, what the cloud shows of
/// a machine memory does not know (a member carrying its key) is no proof the machine
/// is gone.
pub(crate) fn taken_up_lately(p: &Planner<'_>) -> Option<flightdeck_spec::Duration> {
    let taken_up_for = p.now.since(p.taken_up?);
    (taken_up_for < LIST_LAG_MAX).then(|| {
        flightdeck_spec::Duration::from_millis(LIST_LAG_MAX.as_millis() - taken_up_for.as_millis())
    })
}

/// What the cloud still shows of a server `record`'s machine had before, although no
/// server of its key is listed and memory never saw one: a load-balancer member that
/// carries its key, or a node of its name. Only a running server gets either, so its
/// create was carried out by a memory that was lost since (a store restored from a
/// backup), and the server has gone (an operator deleted it). Made again under the same
/// key, its member and node would be deleted and made again too (seed 60001342): the
/// machine is gone, and a replacement gets a new key.
pub(crate) fn made_before(p: &Planner<'_>, record: &MachineRecord) -> Option<&'static str> {
    let pool = p.memory.ids.pool.as_deref();
    let member = p.observed.members.iter().any(|m| {
        m.provisioning_status != flightdeck_cloud::ProvisioningStatus::Deleted
            && pool.is_some_and(|id| m.pool_id == id)
            && machine_of(&m.tags) == Some(record.key.as_str())
    });
    if member {
        return Some("load-balancer member");
    }
    let node = p
        .observed
        .nodes
        .as_ref()
        .is_some_and(|nodes| nodes.iter().any(|n| n.name == record.name));
    node.then_some("node")
}

/// Whether a new machine name (a new key) must wait: the cluster was taken up from the
/// store less than [`LIST_LAG_MAX`] ago. A store restored from a backup has forgotten the
/// machines made since, and the keys it hands out again would name a second server,
/// and its node, like the first (F11: a machine made again). Their servers carry their
/// keys and are adopted, but a lagging list may not show them until then; a store that
/// is current loses nothing by the wait but time. `set` wants `wanted` new machines.
pub(crate) fn new_names_held(p: &mut Planner<'_>, set: &str, wanted: u32) -> bool {
    let Some(left) = taken_up_lately(p) else {
        return false;
    };
    // The message stays the same from pass to pass: a quiet reconcile commits nothing.
    p.condition(Condition::new(
        kind::NEW_MACHINES_HELD,
        true,
        "TakenUpFromStore",
        format!(
            "{set} wants {wanted} new machine(s); this cluster was taken up from the store lately, and for \
             {LIST_LAG_MAX} after that a list may not show machines made before (a store restored from a \
             backup forgot them): none is made under a new name until then"
        ),
    ));
    p.wait(left);
    true
}

/// Withdraws a create of machine `name` planned in this pass; answers whether there was
/// one.
pub(crate) fn withdraw(p: &mut Planner<'_>, name: &str) -> bool {
    let before = p.actions.len();
    p.actions.retain(|a| {
        !matches!(&a.action,
            Action::CreateServer { machine, .. } | Action::Instantiate { machine, .. }
                if machine == name)
    });
    p.actions.len() < before
}

/// Notes in the record (written before acting) that its create is being sent: the
/// machine's server is being made now, so its startup time and its youth (a lagging
/// list may not show it yet) count from now, not from when the record was written (a
/// create held back by a crash went out minutes later: seed 31338870). `ambiguous`:
/// whether a second create could make a second server (KubeVirt refuses one with 409).
fn note_sent(p: &mut Planner<'_>, name: &str, ambiguous: bool) {
    let now: Timestamp = p.now;
    if let Some(r) = p.memory.machines.get_mut(name) {
        r.created_at = now;
        if ambiguous {
            r.create_sent_at = Some(now);
        }
    }
}

/// Plans the create of `record`'s server (or VM), once per pass; it waits in the record
/// while the security group or template it needs is missing.
pub(crate) fn request_server(
    p: &mut Planner<'_>,
    record: &MachineRecord,
    infra: &Infra,
    why: &str,
) {
    if p.spec.spec.provider.is_opennebula() {
        request_vm(p, record, infra, why);
        return;
    }
    // KubeVirt: a VirtualMachine in the infra namespace, no security group; a second
    // VirtualMachine of one name is refused, so a second create is no hazard.
    let (network, security_group, eviction_strategy, note) =
        if let Some(kv) = p.spec.spec.provider.kubevirt.as_ref() {
            let eviction = Some(kv.eviction_strategy.as_str().to_string());
            (kv.namespace.to_string(), String::new(), eviction, false)
        } else {
            let Some(group) = infra.security_group_id.clone() else {
                p.wait(POLL_MACHINES);
                return;
            };
            let Some(openstack) = p.spec.spec.provider.openstack.as_ref() else {
                return;
            };
            (openstack.network.to_string(), group, None, true)
        };
    if p.actions.iter().any(
        |a| matches!(&a.action, Action::CreateServer { machine, .. } if *machine == record.name),
    ) {
        return;
    }
    let Ok(bootstrap) = crate::bootstrap::plan_for(p, record) else {
        return;
    };
    p.act(
        Action::CreateServer {
            machine: record.name.clone(),
            key: record.key.clone(),
            role: record.role.clone(),
            flavor: record.template.flavor.clone(),
            image: record.template.image.clone(),
            network,
            security_group,
            eviction_strategy,
            user_data: crate::userdata::render_for(p, record),
            bootstrap,
            template: record.template.digest(),
        },
        why.to_string(),
    );
    note_sent(p, &record.name, note);
}

/// OpenNebula: the machine's VM, from the held template its record names.
fn request_vm(p: &mut Planner<'_>, record: &MachineRecord, infra: &Infra, why: &str) {
    let Some(template_id) = infra.templates.get(&record.template.image).cloned() else {
        // Not registered or not usable yet (image copying, USE lock): the record waits.
        p.wait(POLL_MACHINES);
        return;
    };
    if p.actions.iter().any(
        |a| matches!(&a.action, Action::Instantiate { machine, .. } if *machine == record.name),
    ) {
        return;
    }
    let Ok(bootstrap) = crate::bootstrap::plan_for(p, record) else {
        return;
    };
    p.act(
        Action::Instantiate {
            machine: record.name.clone(),
            key: record.key.clone(),
            role: record.role.clone(),
            template_id,
            user_data: crate::userdata::render_for(p, record),
            bootstrap,
            template: record.template.digest(),
        },
        why.to_string(),
    );
    note_sent(p, &record.name, true);
}

/// Makes the `n` machines set `set` wants now, each with why; none while new names are
/// held (see [`new_names_held`]). `(outdated, current)`: how many of the set's
/// machines are outdated, and how many are current.
pub(crate) fn create_missing(
    p: &mut Planner<'_>,
    set: &SetSpec,
    n: u32,
    (outdated, current): (usize, u32),
    infra: &Infra,
) {
    let label = set.role.label();
    let n = crate::bootstrap::creatable(p, &set.role, n);
    if n == 0 || new_names_held(p, label, n) {
        return;
    }
    for _ in 0..n {
        let why = if outdated > 0 {
            format!(
                "surge-first rollout of {label}: a replacement comes up before any of the {outdated} outdated machine(s) is removed"
            )
        } else if p.memory.ready_since.is_none() {
            format!("{label} needs {} machine(s), has {current}", set.replicas)
        } else {
            format!(
                "{label} scales to {} machine(s) from {current}",
                set.replicas
            )
        };
        new_machine(p, set, why, infra);
    }
}

/// Records a new machine (so a crash cannot lose or duplicate it) and plans its server.
fn new_machine(p: &mut Planner<'_>, set: &SetSpec, why: String, infra: &Infra) {
    p.memory.machine_seq += 1;
    let short = match &set.role {
        MachineRole::ControlPlane => "cp",
        MachineRole::Pool(name) => name.as_str(),
    };
    let key = format!("{short}-{}", p.memory.machine_seq);
    let name = format!("{}-{key}", p.spec.name());
    let record = MachineRecord {
        name: name.clone(),
        key,
        role: set.role.clone(),
        template: set.template.clone(),
        reason: why.clone(),
        created_at: p.now,
        server_id: None,
        member_id: None,
        member_unready_since: None,
        server_missing_since: None,
        node_unready_since: None,
        remediation: None,
        removal: None,
        // A replacement takes over the slot of the machine it replaces (F11).
        running_since: None,
        lineage: crate::churn::take_heir(p, set.role.label().to_string()),
        create_sent_at: None,
        token: None,
    };
    p.memory.machines.insert(name, record.clone());
    // The security group or template may not exist yet; then the create waits in the
    // record.
    let infra = Infra {
        security_group_id: p.memory.ids.security_group.clone(),
        ..infra.clone()
    };
    request_server(p, &record, &infra, &why);
}

/// Servers that carry a recorded machine's tag but are not its recorded server: a create
/// sent twice made them (the first one's answer was lost and a lagging list hid its
/// server longer than [`LIST_LAG_MAX`]). The recorded one is the machine; the others are
/// deleted, so no node, route or member is ever made for a second server of one machine.
pub(crate) fn remove_duplicates(p: &mut Planner<'_>, all: &[MachineView<'_>]) {
    if p.servers_suspect {
        return;
    }
    let mut duplicates = Vec::new();
    for m in all {
        let Some(recorded) = m.record.server_id.as_deref() else {
            continue;
        };
        for s in &p.observed.servers {
            if s.id != recorded
                && !s.is_deleting()
                && machine_of(&s.tags) == Some(m.record.key.as_str())
            {
                duplicates.push((m.name().to_string(), s.id.clone(), recorded.to_string()));
            }
        }
    }
    for (machine, server_id, recorded) in duplicates {
        p.events.push(PlanEvent::warning(
            "DuplicateServer",
            format!(
                "server {server_id} carries the tag of {machine}, whose server is {recorded}: a create was sent twice; the second server is deleted"
            ),
        ));
        p.act(
            Action::DeleteServer {
                machine: format!("{machine} (duplicate {server_id})"),
                server_id: server_id.clone(),
            },
            format!("{server_id} duplicates {machine}'s server {recorded}"),
        );
    }
}
