//! Creating one machine's server (OpenStack, KubeVirt) or VM (OpenNebula), and when a
//! create may be sent again. Nova and OpenNebula do not make names unique: a create sent
//! twice makes two servers. The record is written before the create is sent; once sent
//! it is not sent again while a server it made could still be missing from a lagging
//! list, and a second server that carries a machine's tag after all is deleted.

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::machine_of;

use crate::action::Action;
use crate::condition::PlanEvent;
use crate::infra::Infra;
use crate::machines::MachineView;
use crate::memory::MachineRecord;
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
    p.act(
        Action::Instantiate {
            machine: record.name.clone(),
            key: record.key.clone(),
            role: record.role.clone(),
            template_id,
            user_data: crate::userdata::render_for(p, record),
            template: record.template.digest(),
        },
        why.to_string(),
    );
    note_sent(p, &record.name, true);
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
