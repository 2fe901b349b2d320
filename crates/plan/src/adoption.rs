//! Adoption: objects that carry this cluster's tags but whose IDs memory lacks. A crash
//! between a create and the recording of its ID leaves such objects behind; they are
//! taken back, never created a second time.

use flightdeck_cloud::ownership::{machine_of, template_of};

use crate::Planner;
use crate::condition::PlanEvent;
use crate::machines::MachineView;
use crate::memory::{MachineRecord, MachineRole, MachineTemplate};

/// Servers and members carrying our machine tag whose IDs we had not recorded yet: a
/// crash came between a create and its recording. Their IDs are recorded now.
pub(crate) fn record_observed_ids(p: &mut Planner<'_>, all: &[MachineView<'_>]) {
    for m in all {
        let Some(rec) = p.memory.machines.get_mut(m.name()) else {
            continue;
        };
        if let Some(s) = m.server
            && rec.server_id.as_deref() != Some(s.id.as_str())
        {
            rec.server_id = Some(s.id.clone());
        }
        if m.server.is_some() {
            rec.create_sent_at = None;
        }
        if let Some(x) = m.member
            && rec.member_id.as_deref() != Some(x.id.as_str())
        {
            rec.member_id = Some(x.id.clone());
        }
    }
}

/// Servers that carry this cluster's UID and a machine tag but have no record: memory
/// was lost. They are adopted with the image and flavor the server shows; what the
/// server does not show (a control-plane version, a user-data digest) is unknown, so a
/// rollout replaces them where the spec asks for one.
pub(crate) fn adopt_orphans(p: &mut Planner<'_>) {
    never_reuse_names_seen(p);
    let cluster = p.spec.name().to_string();
    for s in &p.observed.servers {
        let Some(key) = machine_of(&s.tags) else {
            continue;
        };
        if p.memory.machines.values().any(|r| r.key == key) {
            continue;
        }
        let role = match key.rsplit_once('-') {
            Some(("cp", _)) => MachineRole::ControlPlane,
            Some((pool, _)) => MachineRole::Pool(pool.to_string()),
            None => continue,
        };
        let name = format!("{cluster}-{key}");
        // A pool's machines have no version of their own; the control plane's is not
        // on the server, so its adopted machines are rolled.
        let version = match role {
            MachineRole::ControlPlane => "unknown".to_string(),
            MachineRole::Pool(_) => String::new(),
        };
        // The server's template tag says whether it was built from what the set asks
        // for now; without one (made before the tag existed) only what the server shows
        // is known, so the adopted machine is rolled where the spec asks for more.
        let current = spec_template(p, &role);
        let template = match current {
            Some(t) if template_of(&s.tags) == Some(t.digest().as_str()) => t,
            _ => MachineTemplate {
                flavor: s.flavor.clone(),
                image: s.image.clone(),
                version: version.clone(),
                user_data: 0,
            },
        };
        p.events.push(PlanEvent::warning(
            "MachineAdopted",
            format!(
                "server {} carries this cluster's tags but was not in memory; adopted as {name}",
                s.id
            ),
        ));
        p.memory.machines.insert(
            name.clone(),
            MachineRecord {
                name,
                key: key.to_string(),
                role,
                template,
                reason: "adopted: it carries this cluster's tags".into(),
                created_at: s.created_at,
                server_id: Some(s.id.clone()),
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
    }
}

/// Machine numbers are never handed out twice in a cluster: the next one is above every
/// key the cluster's objects in the cloud carry, on a server (whatever its state,
/// recorded or not) or on a load-balancer member (Octavia may show a machine a lagging
/// Nova list does not). A store restored from a backup has forgotten the keys handed
/// out since; what the cloud still shows of them is not taken again (F11).
fn never_reuse_names_seen(p: &mut Planner<'_>) {
    let servers = p.observed.servers.iter().map(|s| &s.tags);
    let members = p.observed.members.iter().map(|m| &m.tags);
    let highest = servers
        .chain(members)
        .filter_map(|tags| machine_of(tags)?.rsplit_once('-')?.1.parse::<u64>().ok())
        .max();
    if let Some(n) = highest {
        p.memory.machine_seq = p.memory.machine_seq.max(n);
    }
}

/// The template the spec asks of `role`'s set now, if the set exists.
fn spec_template(p: &Planner<'_>, role: &MachineRole) -> Option<MachineTemplate> {
    let spec = &p.spec.spec;
    match role {
        MachineRole::ControlPlane => {
            let cp = &spec.control_plane;
            Some(crate::machines::machine_template(
                p,
                &cp.machine,
                cp.version.to_string(),
            ))
        }
        MachineRole::Pool(name) => spec
            .node_pools
            .iter()
            .find(|x| x.name.as_str() == name)
            .map(|x| crate::machines::machine_template(p, &x.machine, String::new())),
    }
}
