//! Flight control's machine repairs: F3 (a machine whose node never registers, or
//! stays NotReady, within `nodeStartupTimeout`) and F6 (a server in ERROR) are replaced,
//! new machine first. F10 keeps it safe:
//! - at most `maxUnhealthy` of a set is under remediation at once;
//! - no node-based remediation on a node list that is missing, empty or stale;
//! - when every node looks unhealthy at once, the observer is broken, not the nodes:
//!   remediation pauses with `RemediationPaused`.
//!
//! The upstream policy (`RemediationPolicy::Upstream`) exists only to prove that the
//! invariants catch it: it deletes every unregistered or errored machine at once.

use flightdeck_cloud::Timestamp;
use flightdeck_spec::Duration;

use crate::Planner;
use crate::churn;
use crate::condition::{Condition, PlanEvent, kind};
use crate::machines::{MachineView, ServerPhase};
use crate::memory::Remediation;
use crate::safety::Mechanism;
use crate::status::RepairStatus;

/// How old a node list may be before nothing is concluded from it.
pub const NODE_LIST_FRESHNESS: Duration = Duration::from_mins(2);

/// How machines that need repair are handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RemediationPolicy {
    /// Budgeted, replacement first, never on a blind observer.
    #[default]
    Guarded,
    /// **Unsafe**, kept only to prove the invariants catch it: every unregistered or
    /// errored machine is deleted at once, with no budget and no freshness check.
    Upstream,
}

/// Why the node list cannot be trusted for remediation right now, if it cannot.
pub(crate) fn blind_observer(p: &Planner<'_>, all: &[MachineView<'_>]) -> Option<String> {
    if !p.options.on(Mechanism::BlindObserverGuard) {
        return None;
    }
    let running = all
        .iter()
        .filter(|m| m.server_phase() == ServerPhase::Running)
        .count();
    let nodes_at = p.observed.nodes_stale_since.unwrap_or(p.observed.at);
    match &p.observed.nodes {
        None => {
            Some("the workload cluster's API cannot be reached, so its nodes are unknown".into())
        }
        Some(_) if p.now.since(nodes_at) > NODE_LIST_FRESHNESS => Some(format!(
            "the node list is {} old, older than {NODE_LIST_FRESHNESS}{}",
            p.now.since(nodes_at),
            if p.observed.nodes_stale_since.is_some() {
                " (the watch of the workload cluster's nodes is broken)"
            } else {
                ""
            }
        )),
        Some(nodes) if nodes.is_empty() && running > 0 => Some(format!(
            "the node list is empty while {running} server(s) run"
        )),
        Some(nodes) if !nodes.is_empty() && nodes.iter().all(|n| !n.ready) => Some(format!(
            "all {} nodes report NotReady at once, which is an outage of the observer, not of the nodes",
            nodes.len()
        )),
        Some(_) => None,
    }
}

/// One machine's verdict.
struct Candidate {
    name: String,
    reason: String,
    node_based: bool,
    created_at: Timestamp,
}

/// Starts remediation for the machines of one set (`label`, `replicas`) that need it,
/// within the budget. `blind` is why node-based repairs are paused, if they are.
pub(crate) fn plan_set_remediation(
    p: &mut Planner<'_>,
    label: &str,
    replicas: u32,
    machines: &[&MachineView<'_>],
    blind: Option<&str>,
) {
    let flight = p.spec.spec.flight.clone();
    let timeout = flight.node_startup_timeout;
    let now = p.now;
    // Keep each node's NotReady clock, and each server's running clock.
    for m in machines {
        if let Some(r) = p.memory.machines.get_mut(m.name()) {
            r.node_unready_since = match m.node {
                Some(n) if !n.ready => Some(r.node_unready_since.unwrap_or(now)),
                _ => None,
            };
            r.running_since = match m.server_phase() {
                ServerPhase::Running => Some(r.running_since.unwrap_or(now)),
                _ => None,
            };
        }
    }
    // nodeStartupTimeout counts from when the server runs, never from the record.
    let started_long_ago = |r: &crate::memory::MachineRecord| {
        r.running_since
            .is_some_and(|since| now.since(since) >= timeout)
    };
    // A machine that recovered before its removal began is no longer condemned: keeping
    // it under repair would hold the budget while it serves (and could block the repair
    // of a machine that is really broken).
    for m in machines.iter().filter(|m| !m.removing()) {
        let recovered = m.server_phase() == ServerPhase::Running && m.node_ready();
        if let Some(r) = p.memory.machines.get_mut(m.name())
            && recovered
            && let Some(rem) = r.remediation.take()
        {
            p.events.push(PlanEvent::normal(
                "RemediationCancelled",
                format!(
                    "{} recovered (its node is Ready); no longer replaced ({})",
                    m.name(),
                    rem.reason
                ),
            ));
        }
    }
    let mut candidates = Vec::new();
    for m in machines.iter().filter(|m| !m.removing()) {
        let Some(record) = p.memory.machines.get(m.name()) else {
            continue;
        };
        if record.remediation.is_some() {
            continue;
        }
        let phase = m.server_phase();
        let verdict = if flight.repairs.errored && phase == ServerPhase::Failed {
            let fault = m
                .server
                .and_then(|s| s.fault.clone())
                .unwrap_or_else(|| "no fault given".into());
            Some((format!("its server is in ERROR ({fault})"), false))
        } else if flight.repairs.unregistered
            && m.node.is_none()
            && let Some(token) = record.token.as_ref().filter(|t| t.gone)
        {
            // The workload API itself answered that the token its data names is not
            // there: it can never join, however long it is waited for. That it has not
            // joined is the node list's word, so the repair is node-based: paused while
            // the list is not to be trusted (seed 50001892: a restored store still held
            // the tokens of machines that had joined, under an empty node list).
            Some((
                format!(
                    "its bootstrap token {} is gone from the workload cluster before it joined: it can never join",
                    token.id
                ),
                true,
            ))
        } else if flight.repairs.unregistered
            && phase == ServerPhase::Running
            && m.node.is_none()
            && *m.role() == crate::memory::MachineRole::ControlPlane
            && started_long_ago(record)
            && let Some(why) = control_plane_never_served(p, m, record, timeout)
        {
            // Evidence from Octavia or from the bootstrap itself, not from a node list.
            Some((why, false))
        } else if flight.repairs.unregistered && phase == ServerPhase::Running {
            match (m.node, p.observed.nodes.is_some()) {
                (None, true) if started_long_ago(record) => {
                    Some((format!("not registered as a node after {timeout}"), true))
                }
                (Some(n), _) if !n.ready => record
                    .node_unready_since
                    .filter(|since| now.since(*since) >= timeout)
                    .map(|since| {
                        (
                            format!("node NotReady for {}", secs(now.since(since))),
                            true,
                        )
                    }),
                _ => None,
            }
        } else {
            None
        };
        if let Some((reason, node_based)) = verdict {
            candidates.push(Candidate {
                name: m.name().to_string(),
                reason,
                node_based,
                created_at: record.created_at,
            });
        }
    }
    if p.options.remediation == RemediationPolicy::Upstream {
        for c in candidates {
            start(p, &c, true);
        }
        return;
    }
    if let Some(why) = blind {
        let paused: Vec<&str> = candidates
            .iter()
            .filter(|c| c.node_based)
            .map(|c| c.name.as_str())
            .collect();
        if !paused.is_empty() {
            p.condition(Condition::new(
                kind::REMEDIATION_PAUSED,
                true,
                "ObserverUntrusted",
                format!("not replacing {}: {why}", paused.join(", ")),
            ));
        }
        candidates.retain(|c| !c.node_based);
    }
    let budget = if p.options.on(Mechanism::RemediationBudget) {
        flight.max_unhealthy.of(replicas)
    } else {
        replicas
    };
    let in_use = machines
        .iter()
        .filter(|m| {
            p.memory
                .machines
                .get(m.name())
                .is_some_and(|r| r.remediation.is_some())
        })
        .count() as u32;
    let started = candidates.len().min(budget.saturating_sub(in_use) as usize) as u32;
    p.status.repair_budgets.push(crate::status::RepairBudget {
        set: label.to_string(),
        budget,
        in_use: in_use + started,
    });
    // Errored servers first, then the oldest.
    candidates.sort_by_key(|c| (c.node_based, c.created_at.millis(), c.name.clone()));
    let mut left = budget.saturating_sub(in_use);
    for c in &candidates {
        if left == 0 {
            p.status.repairs.push(RepairStatus {
                machine: c.name.clone(),
                reason: c.reason.clone(),
                state: format!("waiting: {label} has {in_use} of {budget} machine(s) under repair (maxUnhealthy)"),
            });
            continue;
        }
        match churn::slot(p, label, &c.name) {
            churn::Slot::Go => {
                churn::hand_down(p, label, &c.name);
                let remove_now = crate::bootstrap::remove_first(p, &c.name);
                start(p, c, remove_now);
                left -= 1;
            }
            churn::Slot::Wait(wait, n) => {
                p.status.repairs.push(RepairStatus {
                    machine: c.name.clone(),
                    reason: c.reason.clone(),
                    state: format!(
                        "waiting {wait}: its slot was re-created {n} time(s) lately (backoff)"
                    ),
                });
                p.wait(wait);
            }
            churn::Slot::Stopped => {}
        }
    }
    churn::report(p);
}

/// Why a control-plane machine without a node is broken by evidence other than the
/// node list: its member fails the health check, or the cluster's API never came up.
fn control_plane_never_served(
    p: &Planner<'_>,
    m: &MachineView<'_>,
    record: &crate::memory::MachineRecord,
    timeout: Duration,
) -> Option<String> {
    let monitored = !p.observed.health_monitors.is_empty();
    if monitored
        && let Some(member) = m.member
        && member.operating_status != flightdeck_cloud::OperatingStatus::Online
        && record
            .member_unready_since
            .is_some_and(|since| p.now.since(since) >= timeout)
    {
        return Some(format!(
            "its API has failed the load balancer's health check for {timeout} (member {})",
            member.operating_status.as_str()
        ));
    }
    // While bootstrapping, an API that cannot be reached is the machines' fault: there is
    // no working control plane yet whose observer could be broken. Unless the way to it
    // is not there: without its member in the load balancer, no machine could be reached
    // (an Octavia outage is not the machine's fault).
    // A member the health monitor finds ONLINE serves the API: the API came up, and
    // only the way flightdeck reads it fails (seed 44014283: the workload API answered
    // 429 while every member was ONLINE).
    let serving = monitored
        && m.member
            .is_some_and(|x| x.operating_status == flightdeck_cloud::OperatingStatus::Online);
    // A kubeadm cluster whose API answered once came up (seed 70005732: a store restored
    // from before the cluster was Ready, then a node list that went blind, and the init
    // machine, the cluster's only etcd member, was condemned for an API that "never
    // came up").
    if p.observed.nodes.is_none()
        && p.memory.ready_since.is_none()
        && !crate::bootstrap::initialized(p)
        && m.member.is_some()
        && !serving
    {
        return Some(format!("the cluster's API never came up within {timeout}"));
    }
    None
}

fn start(p: &mut Planner<'_>, c: &Candidate, remove_now: bool) {
    let now = p.now;
    if let Some(r) = p.memory.machines.get_mut(&c.name) {
        r.remediation = Some(Remediation {
            since: now,
            reason: c.reason.clone(),
            node_based: c.node_based,
        });
    }
    if remove_now {
        crate::removal::mark_removal(p, &c.name, c.reason.clone());
    }
    p.events.push(PlanEvent::warning(
        "RemediationStarted",
        if remove_now {
            format!("deleting {}: {}", c.name, c.reason)
        } else {
            format!(
                "replacing {}: {} (a new machine comes first)",
                c.name, c.reason
            )
        },
    ));
}

/// The repairs under way in a set, for the status.
pub(crate) fn report_repairs(p: &mut Planner<'_>, machines: &[&MachineView<'_>]) {
    let repairs: Vec<RepairStatus> = machines
        .iter()
        .filter_map(|m| {
            let r = p.memory.machines.get(m.name())?.remediation.clone()?;
            Some(RepairStatus {
                machine: m.name().to_string(),
                reason: r.reason,
                state: "replacing".into(),
            })
        })
        .collect();
    if !repairs.is_empty() {
        let names: Vec<String> = repairs
            .iter()
            .map(|r| format!("{} ({})", r.machine, r.reason))
            .collect();
        p.condition(Condition::new(
            kind::REMEDIATING,
            true,
            "ReplacingMachines",
            format!("replacing {}", names.join(", ")),
        ));
    }
    p.status.repairs.extend(repairs);
}

fn secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_millis() / 1000)
}
