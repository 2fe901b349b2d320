//! kubeadm bootstrap (`spec.bootstrap.provider: kubeadm`): which machine runs `kubeadm
//! init`, which ones join, and the life of each joining machine's bootstrap token. The
//! planner decides; the engine renders each machine's data from the decision and the
//! cluster's PKI (crate `flightdeck-guest`) and makes its token through the workload API.
//!
//! - Exactly one machine of a cluster's life runs `kubeadm init`: the first
//!   control-plane machine ([`BootstrapMemory::init_machine`]). Until the workload
//!   cluster's API has answered once ([`BootstrapMemory::initialized_at`]), no other
//!   machine is made: joins need the API, as Cluster API's KubeadmControlPlane waits
//!   for its first machine. If the init machine goes before the API ever answered, the
//!   next control-plane machine runs init again with the same CAs; once it answered,
//!   never again.
//! - Every other machine joins with a token of its own, made just before its server:
//!   [`TOKEN_TTL`] long, moved on while the machine has not joined
//!   ([`TOKEN_REFRESH_LEFT`] before it runs out), and deleted once it joined or went.

use flightdeck_spec::Duration;
use serde::{Deserialize, Serialize};

use crate::Planner;
use crate::action::Action;
use crate::condition::Condition;
use crate::memory::{MachineRecord, MachineRole};
use crate::safety::Mechanism;

/// How long a bootstrap token lives from when it is made or last moved on (Cluster API's
/// kubeadm bootstrap provider uses 15 minutes).
pub const TOKEN_TTL: Duration = Duration::from_mins(15);
/// A token with less than this left is moved on by [`TOKEN_TTL`] from now.
pub const TOKEN_REFRESH_LEFT: Duration = Duration::from_mins(10);
/// How often to look at a cluster whose API has not answered yet.
const POLL_INIT: Duration = Duration::from_secs(10);

/// The condition a kubeadm cluster shows while its machines wait for `kubeadm init`.
pub const WAITING_FOR_INIT: &str = "WaitingForControlPlaneInit";

/// What a machine is to its cluster's kubeadm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BootstrapRole {
    /// `kubeadm init`: the first control-plane machine.
    Init,
    /// `kubeadm join --control-plane`, with the cluster's CAs.
    JoinControlPlane,
    /// `kubeadm join`, with a token and the CA's discovery hash.
    JoinWorker,
}

impl BootstrapRole {
    pub fn joins(self) -> bool {
        self != BootstrapRole::Init
    }
}

impl std::fmt::Display for BootstrapRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BootstrapRole::Init => "kubeadm init",
            BootstrapRole::JoinControlPlane => "kubeadm join as a control plane",
            BootstrapRole::JoinWorker => "kubeadm join",
        })
    }
}

/// A machine's kubeadm bootstrap as planned: its role, and the control-plane endpoint
/// every machine of the cluster reaches the API through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapPlan {
    pub role: BootstrapRole,
    pub endpoint_host: String,
    pub endpoint_port: u16,
}

/// Whether the cluster's machines boot flightdeck's kubeadm data.
pub(crate) fn kubeadm(p: &Planner<'_>) -> bool {
    p.spec.spec.bootstrap.kubeadm()
}

/// Whether the workload cluster has been made: its API answered once.
pub(crate) fn initialized(p: &Planner<'_>) -> bool {
    p.memory.bootstrap.initialized_at.is_some()
}

/// Notes when the workload cluster's API first answers with nodes (or the cluster was
/// Ready before this was kept): from then on every machine joins.
pub(crate) fn observe(p: &mut Planner<'_>) {
    if !kubeadm(p) || initialized(p) {
        return;
    }
    presume_init_machine(p);
    let answered = p.observed.nodes.as_ref().is_some_and(|n| !n.is_empty());
    if answered || p.memory.ready_since.is_some() {
        p.memory.bootstrap.initialized_at = Some(p.now);
        p.events.push(crate::PlanEvent::normal(
            "ControlPlaneInitialized",
            format!(
                "the workload cluster's API answered: it was made by {}; every machine from now on joins it",
                p.memory
                    .bootstrap
                    .init_machine
                    .as_deref()
                    .unwrap_or("an earlier machine")
            ),
        ));
    }
}

/// Before the workload cluster answered, a control-plane machine whose server exists
/// while memory names no init machine was given `kubeadm init` by a memory that was
/// lost since (a store restored from a backup taken before the init machine's create
/// was planned): only the init machine is made before the API answers. It is taken for
/// the init machine, so that no second init is handed out beside it (seed 60006581:
/// the restored record of cp-1 had no init role; flight control condemned cp-1 while it
/// still booted, and its replacement ran init too, a split).
pub(crate) fn presume_init_machine(p: &mut Planner<'_>) {
    if !kubeadm(p) || initialized(p) {
        return;
    }
    let known = p
        .memory
        .bootstrap
        .init_machine
        .as_ref()
        .is_some_and(|m| p.memory.machines.contains_key(m));
    if known {
        return;
    }
    let pool = p.memory.ids.pool.clone();
    let mut views = crate::machines::views(p.memory.machines.values(), p.observed, pool.as_deref());
    views.sort_by_key(|v| v.record.created_at.millis());
    let Some(name) = views
        .iter()
        .find(|v| {
            v.record.role == MachineRole::ControlPlane
                && matches!(
                    v.server_phase(),
                    crate::machines::ServerPhase::Building | crate::machines::ServerPhase::Running
                )
        })
        .map(|v| v.name().to_string())
    else {
        return;
    };
    p.events.push(crate::PlanEvent::warning(
        "InitMachinePresumed",
        format!(
            "{name} is taken for the machine that runs kubeadm init: its server exists before the workload cluster answered, and memory names no init machine (it was lost)"
        ),
    ));
    p.memory.bootstrap.init_machine = Some(name);
}

/// How many new machines set `role` may be given now: all it wants once the cluster is
/// initialized; before, one control-plane machine (the init machine) while none holds
/// that role, and nothing else.
pub(crate) fn creatable(p: &mut Planner<'_>, role: &MachineRole, wanted: u32) -> u32 {
    if wanted == 0 || !kubeadm(p) || initialized(p) {
        return wanted;
    }
    let holder = init_holder(p).or_else(|| first_control_plane(p));
    if *role == MachineRole::ControlPlane && holder.is_none() {
        return 1;
    }
    let by = holder.unwrap_or_else(|| "the first control-plane machine".to_string());
    wait_for_init(p, role.label(), &by);
    0
}

/// A control-plane machine recorded and not being removed: the one that will run init
/// (it waits for the endpoint), so no second one is made meanwhile.
fn first_control_plane(p: &Planner<'_>) -> Option<String> {
    p.memory
        .machines
        .values()
        .find(|r| r.role == MachineRole::ControlPlane && !condemned(r) && !failed(p, r))
        .map(|r| r.name.clone())
}

/// The init machine, while its record is there and the cloud does not list its server
/// as failed (Nova's ERROR, OpenNebula's BOOT_FAILURE: it never ran kubeadm). A
/// condemned one keeps the role until it is gone: it may have made the cluster unseen
/// (seed 445: the API was out of reach through the load balancer for ten minutes, flight
/// control condemned the init machine for an API that "never came up", and its surge
/// replacement ran init beside the cluster it had made). So flight control deletes an
/// init machine before its replacement is made ([`remove_first`]), and the replacement
/// runs init once the first is gone, with nothing lost: no machine joins before the
/// API answered.
fn init_holder(p: &Planner<'_>) -> Option<String> {
    let name = p.memory.bootstrap.init_machine.as_ref()?;
    p.memory
        .machines
        .get(name)
        .filter(|r| !failed(p, r))
        .map(|r| r.name.clone())
}

/// Whether machine `name` must be deleted before its replacement is made: the init
/// machine of a kubeadm cluster whose API has not answered yet (see [`init_holder`]).
pub(crate) fn remove_first(p: &Planner<'_>, name: &str) -> bool {
    kubeadm(p) && !initialized(p) && p.memory.bootstrap.init_machine.as_deref() == Some(name)
}

fn condemned(r: &MachineRecord) -> bool {
    r.remediation.is_some() || r.removal.is_some()
}

/// Whether the cloud lists `r`'s server as failed. A server not listed (yet) is not
/// taken for failed: a list that lags a create must not free the init role twice. A
/// machine whose server failed never ran kubeadm, and must not keep its set waiting
/// (seed 10: a surge machine in ERROR kept the role, and no repair could begin).
fn failed(p: &Planner<'_>, r: &MachineRecord) -> bool {
    let pool = p.memory.ids.pool.as_deref();
    crate::machines::views(std::iter::once(r), p.observed, pool)
        .first()
        .is_some_and(|v| v.server_phase() == crate::machines::ServerPhase::Failed)
}

fn wait_for_init(p: &mut Planner<'_>, set: &str, by: &str) {
    p.condition(Condition::new(
        WAITING_FOR_INIT,
        true,
        "ControlPlaneNotInitialized",
        format!(
            "{set}: machines join the workload cluster once its API answers; {by} runs kubeadm init"
        ),
    ));
    p.wait(POLL_INIT);
}

/// The kubeadm bootstrap of `record`'s machine, now: `Ok(None)` for a cluster that
/// boots its own user data, `Err(())` while the machine must wait (the endpoint is not
/// known yet, or the workload cluster is not made yet; the wait is planned).
pub(crate) fn plan_for(
    p: &mut Planner<'_>,
    record: &MachineRecord,
) -> Result<Option<BootstrapPlan>, ()> {
    if !kubeadm(p) {
        return Ok(None);
    }
    let (host, port) = crate::userdata::endpoint(p);
    let Ok(port) = port.parse::<u16>() else {
        return Err(());
    };
    if host.is_empty() {
        // The load balancer's VIP is not there yet: every machine's data names it.
        p.wait(POLL_INIT);
        return Err(());
    }
    let role = if initialized(p) {
        match record.role {
            MachineRole::ControlPlane => BootstrapRole::JoinControlPlane,
            MachineRole::Pool(_) => BootstrapRole::JoinWorker,
        }
    } else {
        match init_holder(p) {
            Some(name) if name == record.name => BootstrapRole::Init,
            None if record.role == MachineRole::ControlPlane => {
                p.memory.bootstrap.init_machine = Some(record.name.clone());
                BootstrapRole::Init
            }
            holder => {
                let by = holder.unwrap_or_else(|| "the first control-plane machine".into());
                wait_for_init(p, record.role.label(), &by);
                return Err(());
            }
        }
    };
    Ok(Some(BootstrapPlan {
        role,
        endpoint_host: host,
        endpoint_port: port,
    }))
}

/// The tokens of joining machines: deleted once the machine's node is there or the
/// machine goes, moved on while it has not joined. Nothing while the workload API does
/// not answer (it is where tokens live).
pub(crate) fn plan_tokens(p: &mut Planner<'_>) {
    if !kubeadm(p) {
        return;
    }
    let Some(nodes) = p.observed.nodes.as_ref() else {
        return;
    };
    let refresh = p.options.on(Mechanism::TokenRefresh);
    let pool = p.memory.ids.pool.clone();
    let views = crate::machines::views(p.memory.machines.values(), p.observed, pool.as_deref());
    let mut actions = Vec::new();
    let mut next: Option<Duration> = None;
    for m in &views {
        let Some(token) = m.record.token.as_ref() else {
            continue;
        };
        let joined = m.node.is_some() || nodes.iter().any(|n| n.name == m.record.name);
        // A machine being removed keeps its token until its server no longer runs:
        // deleted first, a kubelet still booting would fail its join in between
        // (seed 5693), a failure of flightdeck's making.
        let server_down = !matches!(
            m.server_phase(),
            crate::machines::ServerPhase::Running | crate::machines::ServerPhase::Building
        );
        if joined || (m.removing() && server_down) {
            let why = if joined {
                format!("{} joined: its node {} is registered", m.name(), m.name())
            } else {
                format!("{} is being removed", m.name())
            };
            actions.push((
                Action::DeleteBootstrapToken {
                    machine: m.name().to_string(),
                    token_id: token.id.clone(),
                },
                why,
            ));
            continue;
        }
        if token.gone {
            // Nothing to move on: flight control replaces the machine.
            continue;
        }
        let left = token.expires_at.since(p.now);
        let expired = token.expires_at <= p.now;
        if refresh && !expired && left <= TOKEN_REFRESH_LEFT {
            actions.push((
                Action::RefreshBootstrapToken {
                    machine: m.name().to_string(),
                    token_id: token.id.clone(),
                    expires_at: p.now.plus(TOKEN_TTL),
                },
                format!(
                    "{} has not joined yet and its token runs out in {left}",
                    m.name()
                ),
            ));
        } else if !expired {
            let due = Duration::from_millis(left.as_millis() - TOKEN_REFRESH_LEFT.as_millis());
            next = Some(next.map_or(due, |n: Duration| n.min(due)));
        }
    }
    for (action, why) in actions {
        p.act(action, why);
    }
    if let Some(d) = next {
        p.wait(d.max(Duration::from_secs(1)));
    }
}
