//! Machine sets: the control plane and each node pool. Creation, scaling and rollouts
//! are surge-first: a replacement is created and must be healthy before an old machine
//! is chosen for removal, one at a time, and never when removal would leave fewer
//! healthy machines than the set's replicas.

use crate::condition::{Condition, PlanEvent, kind, reason};
use crate::infra::Infra;
use crate::machines::{MachineView, ServerPhase, machine_status, machine_template, views};
use crate::member_gate;
use crate::memory::{MachineRecord, MachineRole, MachineTemplate};
use crate::removal::mark_removal;
use crate::status::{Phase, SetStatus};
use crate::{
    GONE_AFTER, POLL_MACHINES, POLL_STUCK, Planner, adoption, creates, members, remediation,
    removal,
};

/// The most machines created in one pass, so a large scale-up is spread over several
/// reconciles and a mistake cannot create hundreds of servers at once.
pub const CREATES_PER_PASS_MAX: u32 = 10;

/// What one machine set should be.
pub(crate) struct SetSpec {
    pub role: MachineRole,
    pub replicas: u32,
    pub template: MachineTemplate,
    pub max_surge: u32,
}

/// What planning one set concluded.
#[derive(Default)]
struct SetOutcome {
    converged: bool,
    outdated: usize,
    status: SetStatus,
}

pub(crate) fn plan_machines(p: &mut Planner<'_>, infra: &Infra) {
    adoption::adopt_orphans(p);
    // An adopted control-plane machine may be the one a lost memory gave `kubeadm init`
    // (seed 60000848): it is taken for the init machine in this pass, before any
    // replacement could be handed init beside it.
    crate::bootstrap::presume_init_machine(p);
    let records: Vec<MachineRecord> = p.memory.machines.values().cloned().collect();
    let pool_id = p.memory.ids.pool.clone();
    let all = views(records.iter(), p.observed, pool_id.as_deref());
    adoption::record_observed_ids(p, &all);
    creates::remove_duplicates(p, &all);
    note_missing_servers(p, &all);

    let monitored = infra.pool.as_ref().is_some_and(|x| x.monitored);
    let lb_active = infra.pool.as_ref().is_some_and(|x| x.lb_active);
    let gate = p.options.member_gate;
    let has_pool = infra.pool.is_some();

    // Control plane.
    let cp = &p.spec.spec.control_plane;
    let cp_spec = SetSpec {
        role: MachineRole::ControlPlane,
        replicas: cp.replicas.get(),
        template: machine_template(p, &cp.machine, cp.version.to_string()),
        max_surge: p.spec.spec.flight.max_surge.get(),
    };
    // With an external endpoint (OpenNebula) there are no members: a control-plane
    // machine serves once its VM runs and its node is Ready.
    let external = infra.external_endpoint;
    let cp_healthy = |m: &MachineView<'_>| {
        if external {
            m.server_phase() == ServerPhase::Running && m.node_ready()
        } else {
            has_pool && member_gate::serving(m, gate, monitored, lb_active)
        }
    };
    let cp_views: Vec<&MachineView<'_>> = all
        .iter()
        .filter(|m| *m.role() == MachineRole::ControlPlane)
        .collect();
    let blind = remediation::blind_observer(p, &all);
    remediation::plan_set_remediation(
        p,
        MachineRole::ControlPlane.label(),
        cp_spec.replicas,
        &cp_views,
        blind.as_deref(),
    );
    // What carries traffic is judged by the evidence that cannot be blinded by the node
    // list: Octavia's member status for the control plane. For workers only a node list
    // that can be trusted says a node is gone; a blind one says nothing.
    // A cluster whose API never came up has no observer to be blind: nothing has ever
    // served through it, so an unreachable API is no reason to think a machine serves.
    let never_served = p.observed.nodes.is_none() && p.memory.ready_since.is_none();
    let blind_now = blind.is_some() && !never_served;
    // Without a health monitor Octavia sends traffic to any ACTIVE member, dead or alive.
    // On a running server, a registered node's API server may answer whether or not its
    // kubelet reports Ready (NotReady says the kubelet is silent, not that the API is
    // down), so it counts as carrying traffic: a rollout brings its replacement up before
    // it takes such a machine away (swarm seeds 400041147, 400051730). A server in ERROR
    // whose node went NotReady is taken for a dead host: waiting for it to stop serving
    // would wait forever when its replacement fails too (seeds 600006629, 600007135,
    // 600009579). A machine whose node never registered, or is gone, serves nothing,
    // unless the node list is blind.
    let cp_traffic = |m: &MachineView<'_>| {
        if external {
            m.server_phase() == ServerPhase::Running && (m.node_ready() || blind_now)
        } else if monitored {
            m.member_serving(true) || (blind_now && m.member.is_some())
        } else {
            let kubelet_silent = m.node.is_some() && m.server_phase() == ServerPhase::Running;
            m.member_serving(false) && (m.node_ready() || kubelet_silent || blind_now)
        }
    };
    let cp_out = plan_set(
        p,
        &cp_spec,
        &cp_views,
        &cp_healthy,
        &cp_traffic,
        infra,
        blind_now,
    );
    remediation::report_repairs(p, &cp_views);
    note_rollout(p, &cp_spec, &cp_out);

    // Node pools.
    let mut pools_converged = true;
    let mut pool_statuses = Vec::new();
    let mut any_pool_outdated = false;
    let pools = p.spec.spec.node_pools.clone();
    for pool in &pools {
        let set = SetSpec {
            role: MachineRole::Pool(pool.name.to_string()),
            replicas: pool.replicas.get(),
            template: machine_template(p, &pool.machine, String::new()),
            max_surge: p.spec.spec.flight.max_surge.get(),
        };
        let worker_healthy =
            |m: &MachineView<'_>| m.server_phase() == ServerPhase::Running && m.node_ready();
        let members: Vec<&MachineView<'_>> = all.iter().filter(|m| *m.role() == set.role).collect();
        remediation::plan_set_remediation(
            p,
            set.role.label(),
            set.replicas,
            &members,
            blind.as_deref(),
        );
        let worker_traffic = |m: &MachineView<'_>| blind_now || m.node_ready();
        let out = plan_set(
            p,
            &set,
            &members,
            &worker_healthy,
            &worker_traffic,
            infra,
            blind_now,
        );
        remediation::report_repairs(p, &members);
        pools_converged &= out.converged;
        any_pool_outdated |= out.outdated > 0;
        pool_statuses.push(out.status);
    }

    // Machines of pools that left the spec.
    for m in &all {
        if let MachineRole::Pool(name) = m.role()
            && !pools.iter().any(|x| x.name.as_str() == name)
            && !m.removing()
        {
            mark_removal(
                p,
                m.name(),
                format!("node pool {name} is no longer in the spec"),
            );
        }
    }

    removal::plan_removals(p, &all);
    crate::membership::plan_membership(p, infra, &all);
    crate::routes::plan_routes(p, &all, blind.as_deref());
    members::plan_members(p, &cp_views, infra, &cp_spec.template);

    let removing = p.memory.machines.values().any(|m| m.removal.is_some());
    let converged = infra.complete && cp_out.converged && pools_converged && !removing;
    if !converged {
        // Waiting on an operator (or on a fault to clear) is no reason to poll fast.
        let stuck = p.conditions.iter().any(|c| {
            c.status
                && [
                    kind::LOAD_BALANCER_MEMBER_STUCK,
                    kind::LOAD_BALANCER_FAILED,
                    kind::LOAD_BALANCER_HELD_UP,
                    kind::ROLLOUT_HALTED,
                    kind::OBSERVATION_SUSPECT,
                ]
                .contains(&c.kind.as_str())
        });
        p.wait(if stuck { POLL_STUCK } else { POLL_MACHINES });
    }
    if converged && p.memory.ready_since.is_none() {
        p.memory.ready_since = Some(p.now);
    }
    let phase = if converged {
        Phase::Ready
    } else if p.memory.ready_since.is_none() {
        Phase::Provisioning
    } else if cp_out.outdated > 0 || any_pool_outdated {
        Phase::RollingOut
    } else {
        Phase::Scaling
    };
    let (why, message) = if converged {
        (
            reason::READY,
            "every machine is up to date and serving".to_string(),
        )
    } else {
        let why = match phase {
            Phase::Provisioning => reason::PROVISIONING,
            Phase::RollingOut => reason::ROLLING_OUT,
            _ => reason::SCALING,
        };
        let mut parts = vec![format!(
            "control plane {}/{} serving, {} up to date",
            cp_out.status.ready, cp_out.status.replicas, cp_out.status.up_to_date
        )];
        for s in &pool_statuses {
            parts.push(format!("pool {} {}/{} ready", s.name, s.ready, s.replicas));
        }
        if !infra.complete {
            parts.push("security group or load balancer not complete".into());
        }
        (why, parts.join("; "))
    };
    p.condition(Condition::new(kind::READY, converged, why, message));
    // Switched off only to prove the test bed notices: Ready once everything is asked for.
    let lie = !converged
        && !p.options.on(crate::safety::Mechanism::HonestReady)
        && all_requested(&cp_out.status, &pool_statuses);
    p.status.phase = if lie { Phase::Ready } else { phase };
    p.status.ready = converged || lie;
    p.status.control_plane = cp_out.status;
    p.status.node_pools = pool_statuses;
}

/// Withdraws the removals of a set scaled down and up again (scale-down removals only:
/// an operator's or a repair's removal stands) that have not touched the
/// world yet: nothing cordoned (no drain begun, or its node never seen), no member deleted, the server not
/// deleting, the machine up to date and not under repair. Such a machine is as good as
/// any other the set would make instead, and making one beside it while it waits to go
/// is a repair in all but name (seed 60002297: a scale to 0 and back to 2 while the
/// node list was blind made a new machine beside one whose drain waited for the list).
/// Only as many as the set lacks of its replicas among its machines not leaving.
fn reclaim_untouched(p: &mut Planner<'_>, set: &SetSpec, machines: &[&MachineView<'_>]) {
    let staying = machines
        .iter()
        .filter(|m| {
            p.memory
                .machines
                .get(m.name())
                .is_some_and(|r| r.removal.is_none())
        })
        .count() as u32;
    let mut lacking = set.replicas.saturating_sub(staying);
    for m in machines.iter().filter(|m| m.removing()) {
        if lacking == 0 {
            return;
        }
        let Some(r) = p.memory.machines.get(m.name()) else {
            continue;
        };
        // No cordon was sent while the drain has not begun, or while its node has
        // never been seen (a blind node list: the drain waits for the node to show).
        let untouched = r
            .removal
            .as_ref()
            .is_some_and(|x| x.scale_down && (x.drain_since.is_none() || x.node.is_none()))
            && r.remediation.is_none()
            && r.template == set.template
            && (r.member_id.is_none() || m.member.is_some())
            && matches!(
                m.server_phase(),
                ServerPhase::Building | ServerPhase::Running
            );
        if !untouched {
            continue;
        }
        lacking -= 1;
        if let Some(r) = p.memory.machines.get_mut(m.name()) {
            r.removal = None;
        }
        p.events.push(PlanEvent::normal(
            "MachineRemovalWithdrawn",
            format!(
                "{} stays: {} asks for {} machine(s) again, and its removal had not begun (no drain, nothing deleted)",
                m.name(),
                set.role.label(),
                set.replicas
            ),
        ));
    }
}

/// Plans one set: replaces failed machines, creates what is missing (surge-first during
/// a rollout), and chooses at most one machine to remove when every gate holds.
fn plan_set(
    p: &mut Planner<'_>,
    set: &SetSpec,
    machines: &[&MachineView<'_>],
    healthy: &dyn Fn(&MachineView<'_>) -> bool,
    carries_traffic: &dyn Fn(&MachineView<'_>) -> bool,
    infra: &Infra,
    blind: bool,
) -> SetOutcome {
    let label = set.role.label().to_string();
    // Servers in ERROR are replaced by remediation (F6, budgeted); machines whose server
    // is confirmed gone leave the set at once.
    for m in machines.iter().filter(|m| !m.removing()) {
        match m.server_phase() {
            ServerPhase::Failed => {
                let fault = m
                    .server
                    .and_then(|s| s.fault.clone())
                    .unwrap_or_else(|| "no fault given".into());
                let serving = if carries_traffic(m) {
                    " (it may still serve)"
                } else {
                    ""
                };
                p.condition(Condition::new(
                    kind::MACHINE_FAILED,
                    true,
                    "ServerError",
                    format!("server of {} is in ERROR{serving}: {fault}", m.name()),
                ));
            }
            ServerPhase::Gone if gone_confirmed(p, m) && !healthy(m) => {
                mark_removal(p, m.name(), "its server disappeared from the cloud".into());
            }
            _ => {}
        }
    }
    // A removal decided while the gate held is withdrawn if, before its member is
    // deleted, fewer others serve than the spec now asks for: removing it would drop
    // the set below its healthy minimum. That happens when the others stop serving,
    // and when the spec changes under a pending removal (swarm seeds 600071990 and
    // 137684436: a scale-down's or a rollout's removal went on after the spec asked for
    // 5). A surge-first set decides a removal only while `replicas` others serve, so it
    // never withdraws one it has just decided (nor re-decides one while fewer than
    // `replicas` others are healthy); delete-first (a test's switch) removes
    // below `replicas` by design and holds only the others it has.
    let surge_first = p.options.on(crate::safety::Mechanism::SurgeFirst);
    let others: Vec<&MachineView<'_>> =
        machines.iter().copied().filter(|m| !m.removing()).collect();
    let others_healthy = others.iter().filter(|m| healthy(m)).count() as u32;
    for m in machines.iter().filter(|m| m.removing()) {
        let member_still_there = m
            .member
            .is_some_and(|x| !x.provisioning_status.is_pending());
        let needed = if surge_first {
            set.replicas
        } else {
            set.replicas.min(others.len() as u32)
        };
        // Its own traffic is judged by what the node list cannot blind (Octavia's member
        // status): while every node reads NotReady no machine is healthy, yet its member
        // still serves (swarm seed 12001926).
        let serves = healthy(m) || carries_traffic(m);
        if member_still_there && serves && others_healthy < needed {
            if let Some(r) = p.memory.machines.get_mut(m.name()) {
                r.removal = None;
            }
            p.events.push(PlanEvent::warning(
                "MachineRemovalWithdrawn",
                format!(
                    "{} keeps serving: only {others_healthy} other machine(s) of {label} serve, {needed} must",
                    m.name()
                ),
            ));
        }
    }
    reclaim_untouched(p, set, machines);
    // Memory says which machines stay: a view's record is a copy taken before this
    // pass, and shows a removal that `reclaim_untouched` just withdrew (seed 71019655: a
    // pool scaled to 0 and back to 4 while the node list was blind kept the machine it
    // reclaimed, counted only the other, and made three: one more than the spec, a
    // repair begun blind in all but name).
    let active: Vec<&MachineView<'_>> = machines
        .iter()
        .copied()
        .filter(|m| {
            p.memory
                .machines
                .get(m.name())
                .is_some_and(|r| r.removal.is_none())
        })
        .collect();
    // A machine needs replacing when its template is outdated or flight control decided
    // to repair it.
    let under_repair: Vec<String> = machines
        .iter()
        .filter(|m| {
            p.memory
                .machines
                .get(m.name())
                .is_some_and(|r| r.remediation.is_some())
        })
        .map(|m| m.name().to_string())
        .collect();
    let replace = |m: &MachineView<'_>| {
        *m.template() != set.template || under_repair.iter().any(|n| n == m.name())
    };
    let current: Vec<&MachineView<'_>> = active.iter().copied().filter(|m| !replace(m)).collect();
    let outdated: Vec<&MachineView<'_>> = active.iter().copied().filter(|m| replace(m)).collect();
    // In flight: still coming up. A machine whose server failed, that is past its
    // startup time without serving, or whose bootstrap token is gone before it joined,
    // is broken rather than in flight: waiting for it would wait forever (its repair is
    // remediation's business, within the budget).
    let startup = p.spec.spec.flight.node_startup_timeout;
    let now = p.now;
    let coming_up = |m: &MachineView<'_>| {
        let token_gone = m.record.token.as_ref().is_some_and(|t| t.gone);
        !token_gone
            && match m.server_phase() {
                ServerPhase::Requested | ServerPhase::Building => true,
                ServerPhase::Running => now.since(m.record.created_at) < startup,
                ServerPhase::Failed | ServerPhase::Deleting | ServerPhase::Gone => false,
            }
    };
    let in_flight = current
        .iter()
        .filter(|m| !healthy(m) && coming_up(m))
        .count();
    let healthy_count = active.iter().filter(|m| healthy(m)).count() as u32;
    let current_n = current.len() as u32;
    let total = active.len() as u32;
    // Machines still being removed hold a server (and maybe a member) until they are
    // gone, so they count against maxSurge as Cluster API counts deleting machines.
    let total_with_leaving = machines.len() as u32;

    // Creation. Without surge-first (a test's switch only), a rollout deletes first and
    // replaces what it deleted.
    // A repair decided from the node list (F3) makes no replacement while that list is
    // blind: what it was decided on may no longer hold, and a new machine now would be a
    // repair begun blind (seed 60011403: a control-plane machine that booted slowly was
    // condemned, its replacement made while the node list was empty, and the machine
    // joined soon after). Such a machine counts as current until the list is back. So
    // does one condemned on other evidence while its server is not reported failed
    // (seed 62000800: a kubeadm init machine whose API never served behind an offline
    // Octavia member was condemned, and its replacement made while the node list was
    // empty): whether its node joined since is what the blind list cannot say. Only the
    // cloud's own word (a server in ERROR) is a repair that needs no node list.
    let held_repairs = if blind {
        outdated
            .iter()
            .filter(|m| {
                *m.template() == set.template
                    && m.record
                        .remediation
                        .as_ref()
                        .is_some_and(|r| r.node_based || m.server_phase() != ServerPhase::Failed)
            })
            .count() as u32
    } else {
        0
    };
    let want_create = if outdated.is_empty() {
        set.replicas.saturating_sub(current_n)
    } else if !surge_first {
        set.replicas.saturating_sub(total_with_leaving)
    } else if in_flight == 0 {
        (set.replicas + set.max_surge)
            .saturating_sub(total_with_leaving)
            .min(set.replicas.saturating_sub(current_n + held_repairs))
    } else {
        0
    };
    let want_create = want_create.min(CREATES_PER_PASS_MAX);
    creates::create_missing(p, set, want_create, (outdated.len(), current_n), infra);

    // Servers recorded but not yet seen: (re)issue their create, unless the last one may
    // have landed where no list shows it yet. One the spec no longer wants (its template
    // changed, or the set shrank below it meanwhile) is not made at all: it would only
    // be replaced or scaled away.
    let mut surplus = current_n.saturating_sub(set.replicas);
    for m in active
        .iter()
        .filter(|m| m.server_phase() == ServerPhase::Requested)
    {
        if creates::may_have_landed(p, m.record) {
            p.wait(POLL_MACHINES);
            continue;
        }
        // A store restored from a backup forgets that a create was sent: a record with
        // none sent may have had one sent after the backup, and a lagging list may not
        // show its server yet (seed 41017523: a kubeadm init machine made again beside
        // the one that had made the cluster, a split). Until the lists can be trusted,
        // it waits as a new name does.
        if m.record.create_sent_at.is_none()
            && let Some(left) = creates::taken_up_lately(p)
        {
            p.wait(left);
            continue;
        }
        let why = if let Some(trace) = creates::made_before(p, m.record) {
            format!("its server was made before (the cloud still shows its {trace}) and is gone")
        } else if m.record.template != set.template {
            "its server was never made, and its template is outdated".to_string()
        } else if surplus > 0 && !replace(m) {
            surplus -= 1;
            format!(
                "its server was never made, and {label} needs only {} machine(s) now",
                set.replicas
            )
        } else {
            creates::request_server(p, m.record, infra, &m.record.reason);
            continue;
        };
        mark_removal(p, m.name(), why);
    }

    // Removal: one at a time per set, only when nothing new is still coming up.
    let removal_running = machines.iter().any(|m| {
        p.memory
            .machines
            .get(m.name())
            .is_some_and(|r| r.removal.is_some())
    });
    let delete_first = !surge_first && !outdated.is_empty() && total >= set.replicas;
    if delete_first && !removal_running {
        if let Some(victim) = outdated.iter().min_by_key(|m| m.record.created_at.millis())
            && !crate::guest_holders::hold(p, &label, victim, machines)
        {
            mark_removal(
                p,
                victim.name(),
                format!("rollout of {label}, delete first"),
            );
        }
    } else if total > set.replicas && in_flight == 0 && !removal_running && want_create == 0 {
        let mut candidates: Vec<&MachineView<'_>> = if outdated.is_empty() {
            current.clone()
        } else {
            outdated.clone()
        };
        // Unhealthy machines go first; among equals, the oldest in a rollout and the
        // newest when scaling down.
        let rolling = !outdated.is_empty();
        candidates.sort_by_key(|m| {
            let age_key = if rolling {
                m.record.created_at.millis()
            } else {
                u64::MAX - m.record.created_at.millis()
            };
            (healthy(m), age_key, m.name().to_string())
        });
        if let Some(victim) = candidates.first()
            && !crate::guest_holders::hold(p, &label, victim, machines)
        {
            let others_healthy = healthy_count - u32::from(healthy(victim));
            // Taking out a machine that carries no traffic never lowers what serves; any
            // other may only go while at least `replicas` others are healthy.
            if !carries_traffic(victim) || others_healthy >= set.replicas.min(total - 1) {
                let why = if rolling && !carries_traffic(victim) {
                    format!(
                        "rollout of {label}: it carries no traffic, so taking it out lowers nothing that serves"
                    )
                } else if rolling {
                    format!(
                        "rollout of {label}: {others_healthy} other machine(s) are healthy, at least {} must stay",
                        set.replicas
                    )
                } else {
                    format!("{label} scales down to {}", set.replicas)
                };
                if rolling {
                    mark_removal(p, victim.name(), why);
                } else {
                    crate::removal::mark_scale_down(p, victim.name(), why);
                }
            } else {
                let unhealthy: Vec<&str> = active
                    .iter()
                    .filter(|m| !healthy(m))
                    .map(|m| m.name())
                    .collect();
                p.condition(Condition::new(
                    kind::ROLLOUT_HALTED,
                    true,
                    "TooFewHealthyMachines",
                    format!(
                        "{label}: removing {} would leave {others_healthy} healthy machine(s), \
                         fewer than the {} that must stay; waiting for {} to recover",
                        victim.name(),
                        set.replicas,
                        unhealthy.join(", ")
                    ),
                ));
                p.wait(POLL_MACHINES);
            }
        }
    }

    let ready = healthy_count;
    let status = SetStatus {
        name: label,
        replicas: set.replicas,
        ready,
        up_to_date: current_n,
        machines: machines
            .iter()
            .map(|m| {
                let removal = p
                    .memory
                    .machines
                    .get(m.name())
                    .and_then(|r| r.removal.as_ref());
                let mut status = machine_status(m, &set.template, removal.is_some());
                status.drain = removal.and_then(|r| crate::node_drain::status(p, m, r));
                status
            })
            .collect(),
    };
    let converged = outdated.is_empty()
        && current_n == set.replicas
        && current.iter().all(|m| healthy(m))
        && want_create == 0
        && !machines.iter().any(|m| {
            p.memory
                .machines
                .get(m.name())
                .is_some_and(|r| r.removal.is_some())
        });
    SetOutcome {
        converged,
        outdated: outdated.len(),
        status,
    }
}

fn note_rollout(p: &mut Planner<'_>, set: &SetSpec, out: &SetOutcome) {
    if out.outdated > 0 && p.memory.rollout_target.as_ref() != Some(&set.template) {
        p.events.push(PlanEvent::normal(
            "RolloutStarted",
            format!(
                "control plane rolls to {} ({}), one machine at a time, surge first",
                set.template.version, set.template.image
            ),
        ));
        p.memory.rollout_target = Some(set.template.clone());
    }
    if out.outdated == 0 && out.converged && p.memory.rollout_target.take().is_some() {
        p.events.push(PlanEvent::normal(
            "RolloutComplete",
            format!(
                "every control-plane machine runs {} ({})",
                set.template.version, set.template.image
            ),
        ));
    }
}

/// Keeps the clock of servers Nova does not list. When it lists none of the servers
/// memory records, the observer is suspect, not every server: nothing is concluded,
/// unless the servers read one by one (`Observed::direct_reads`, the engine takes them
/// then) all say they are gone: then the list is right, and they are (a store restored
/// from before they were deleted; every server deleted behind flightdeck's back).
fn note_missing_servers(p: &mut Planner<'_>, all: &[MachineView<'_>]) {
    let recorded = all.iter().filter(|m| m.record.server_id.is_some()).count();
    let missing: Vec<&str> = all
        .iter()
        .filter(|m| m.server_phase() == ServerPhase::Gone)
        .map(|m| m.name())
        .collect();
    let reads = &p.observed.direct_reads;
    let read_gone = !reads.is_empty() && reads.values().all(|gone| *gone);
    p.servers_suspect = recorded >= 2 && missing.len() == recorded && !read_gone;
    if p.servers_suspect {
        p.condition(Condition::new(
            kind::OBSERVATION_SUSPECT,
            true,
            "NoRecordedServerListed",
            format!(
                "Nova lists none of the {recorded} servers flightdeck recorded; nothing is concluded from that list"
            ),
        ));
    }
    let now = p.now;
    for m in all {
        let gone = m.server_phase() == ServerPhase::Gone;
        if let Some(r) = p.memory.machines.get_mut(m.name()) {
            r.server_missing_since = if gone {
                Some(r.server_missing_since.unwrap_or(now))
            } else {
                None
            };
        }
    }
}

/// Whether a machine whose server is not listed may be taken for gone: made more than
/// [`crate::LIST_LAG_MAX`] ago, missing for [`GONE_AFTER`], and not every recorded server
/// missing at once.
fn gone_confirmed(p: &mut Planner<'_>, m: &MachineView<'_>) -> bool {
    if p.servers_suspect {
        return false;
    }
    // A list that lags may not show a server made lately: not gone yet.
    if crate::creates::too_young_to_miss(p, m.record) {
        p.wait(POLL_MACHINES);
        return false;
    }
    let since = p
        .memory
        .machines
        .get(m.name())
        .and_then(|r| r.server_missing_since)
        .unwrap_or(p.now);
    if p.now.since(since) >= GONE_AFTER {
        return true;
    }
    p.wait(POLL_MACHINES);
    false
}

/// Whether every set has asked for as many machines as its replicas, whatever their
/// state: what a dishonest Ready (`honest-ready` switched off) is reported on.
fn all_requested(cp: &SetStatus, pools: &[SetStatus]) -> bool {
    std::iter::once(cp)
        .chain(pools)
        .all(|s| s.machines.len() as u32 >= s.replicas)
}
