//! One drain for every cloud and every cause: before a machine whose node is live is
//! deleted (a rollout, a scale-down, a repair, an operator's removal, KubeVirt's
//! evacuation), its node is emptied the way `kubectl drain` empties one:
//!
//! 1. a node carrying [`HOLD_DELETION`] holds the machine before anything starts (the
//!    pre-drain hook); the deadline does not run while it holds;
//! 2. the node is cordoned (`spec.unschedulable`), and until the cordon shows in a list
//!    an empty node proves nothing (a pod may land on it in the meantime);
//! 3. every pod that must leave (not DaemonSet, not mirror) is evicted through the
//!    Eviction API; a 429 (a PodDisruptionBudget) is looked at again after
//!    [`POLL_DRAIN`] (every [`POLL_DRAIN_SLOW`] once the drain has run a minute), never
//!    waited for inside a reconcile; a pod that needs no budget
//!    check (finished, pending, already being deleted) is deleted;
//! 4. the machine may go once no such pod is left, or once the drain's deadline has
//!    passed (with an event naming the deadline and the pods left), or at once when its
//!    node is unreachable: NotReady for [`UNREACHABLE_AFTER`] or more, as Cluster API
//!    skips the drain of a node whose Ready condition has been Unknown for 5 minutes. An
//!    unreachable kubelet cannot stop a pod, so no eviction can finish.
//!
//! The caller records when its drain started ([`Ask::since`]), so that restarts keep the
//! deadline, and says what an unfindable node means ([`MissingNode`]).

use flightdeck_cloud::{HOLD_DELETION, Node, Pod, Timestamp};
use flightdeck_spec::Duration;

use crate::Planner;
use crate::action::Action;
use crate::condition::{Condition, PlanEvent};
use crate::safety::Mechanism;

/// Condition kind: a drain is under way or blocked.
pub const DRAINING: &str = "Draining";
/// Condition kind: a node's [`HOLD_DELETION`] annotation holds its machine's deletion.
pub const DELETION_HELD: &str = "DeletionHeld";

/// How often a drain is looked at while pods leave or a disruption budget blocks
/// (`kubectl drain` retries a 429 after 5 s).
pub const POLL_DRAIN: Duration = Duration::from_secs(5);

/// How often a drain is looked at once it has run for [`DRAIN_FAST_FOR`]: a disruption
/// budget that has held a drain that long is not about to let go, and a fleet whose
/// drains all wait on budgets must not poll the workload APIs (and the cloud, at every
/// pass) every 5 s for ten minutes. Cluster API's machine controller requeues a drain
/// every 20 s.
pub const POLL_DRAIN_SLOW: Duration = Duration::from_secs(20);

/// How long a drain is looked at every [`POLL_DRAIN`] before every [`POLL_DRAIN_SLOW`].
pub const DRAIN_FAST_FOR: Duration = Duration::from_mins(1);

/// How soon a drain that has run for `waited` is looked at again.
pub(crate) fn poll(waited: Duration) -> Duration {
    if waited < DRAIN_FAST_FOR {
        POLL_DRAIN
    } else {
        POLL_DRAIN_SLOW
    }
}

/// How long a node must have been NotReady before its drain is not waited for.
pub const UNREACHABLE_AFTER: Duration = Duration::from_mins(5);

/// What a node that cannot be found means for the drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MissingNode {
    /// Nothing to drain: the machine never registered a node, or its node is gone.
    NothingToDrain,
    /// Not drained: the node exists but could not be matched (F9 finds the guest node
    /// by the machine's identity and never takes a miss for drained). The machine goes
    /// at the deadline.
    WaitForDeadline,
    /// Not known: the node list is blind (unreachable, stale, empty) and the node was
    /// never seen. Nothing proves its pods gone or the node absent, so the machine waits
    /// for the list, without a deadline: the deadline bounds a drain, and this one has
    /// not begun. Once the node is seen it is cordoned and its deadline starts.
    WaitUntilSeen,
}

/// One machine to drain.
pub(crate) struct Ask<'a> {
    pub machine: &'a str,
    pub node: Option<&'a Node>,
    /// When the drain started: the deadline counts from here.
    pub since: Timestamp,
    pub timeout: Duration,
    /// Why the machine leaves, as a person reads it ("it is replaced by the rollout").
    pub cause: &'a str,
    pub missing: MissingNode,
    /// When the machine's node was first seen NotReady, if it is NotReady.
    pub unready_since: Option<Timestamp>,
}

/// What the drain allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The machine may be deleted now.
    Go,
    /// Not yet: the drain is under way, blocked or held; what the cluster says about it.
    Wait(String),
    /// Held by [`HOLD_DELETION`] before the drain started; the deadline does not run.
    Held(String),
}

/// Whether the node's hold annotation holds the machine, as the step to take if so.
pub(crate) fn held(machine: &str, node: Option<&Node>) -> Option<Step> {
    let node = node?;
    let value = node.hold_deletion.as_ref()?;
    Some(Step::Held(format!(
        "{machine}: node {} carries {HOLD_DELETION}={value:?}; its deletion waits until the annotation is removed",
        node.name
    )))
}

/// Drains `ask.node`: plans the cordon and evictions still needed, and says whether the
/// machine may go. Events and actions go on the planner; the caller deletes the machine
/// on [`Step::Go`].
pub(crate) fn drain(p: &mut Planner<'_>, ask: &Ask<'_>) -> Step {
    let machine = ask.machine;
    if !p.options.on(Mechanism::DrainBeforeDelete) {
        return Step::Go;
    }
    if ask.node.is_none() && ask.missing == MissingNode::WaitUntilSeen {
        p.wait(poll(p.now.since(ask.since)));
        return Step::Wait(format!(
            "{machine}: the node list is blind and its node has not been seen; it goes once the list shows its node drained or shows none (its deadline of {} starts when the node is seen)",
            ask.timeout
        ));
    }
    let waited = p.now.since(ask.since);
    let deadline_on = p.options.on(Mechanism::DrainDeadline);
    if deadline_on && waited >= ask.timeout {
        let left = ask
            .node
            .and_then(|n| p.observed.pods.get(&n.name))
            .map(|pods| pods.iter().filter(|x| x.must_leave()).count());
        p.events.push(PlanEvent::warning(
            "DrainDeadlinePassed",
            format!(
                "the drain of {machine} did not finish within its deadline of {}; it is deleted anyway ({}){}",
                ask.timeout,
                ask.cause,
                match left {
                    Some(n) if n > 0 => format!(" with {n} pod(s) still on its node"),
                    _ => String::new(),
                }
            ),
        ));
        return Step::Go;
    }
    let deadline_in = if deadline_on {
        Duration::from_millis(ask.timeout.as_millis().saturating_sub(waited.as_millis()))
    } else {
        POLL_DRAIN_SLOW
    };
    let Some(node) = ask.node else {
        return match ask.missing {
            MissingNode::NothingToDrain => Step::Go,
            MissingNode::WaitForDeadline | MissingNode::WaitUntilSeen => {
                p.wait(poll(waited).min(deadline_in));
                Step::Wait(format!(
                    "{machine}: its node cannot be found by the machine's identity; it is not taken for drained, and the machine goes at the deadline in {deadline_in}"
                ))
            }
        };
    };
    if let Some(since) = ask.unready_since.filter(|_| !node.ready)
        && p.now.since(since) >= UNREACHABLE_AFTER
    {
        p.events.push(PlanEvent::warning(
            "NodeUnreachable",
            format!(
                "node {} of {machine} has been NotReady for {}: its kubelet cannot let pods go, so the drain is not waited for ({})",
                node.name,
                p.now.since(since),
                ask.cause
            ),
        ));
        return Step::Go;
    }
    if !node.unschedulable {
        act_once(
            p,
            Action::CordonNode {
                machine: machine.to_string(),
                node: node.name.clone(),
            },
            format!(
                "{machine} is drained before it goes ({}): no new pod may land on its node",
                ask.cause
            ),
        );
    }
    let Some(pods) = p.observed.pods.get(&node.name).cloned() else {
        p.wait(poll(waited).min(deadline_in));
        return Step::Wait(format!(
            "{machine}: the pods of node {} are not listed yet",
            node.name
        ));
    };
    let leaving: Vec<&Pod> = pods.iter().filter(|x| x.must_leave()).collect();
    if leaving.is_empty() && !node.unschedulable {
        // Until the cordon is in force pods may still land on it (evicted from another
        // node in this very pass, say): an empty list taken before proves nothing.
        p.wait(poll(waited).min(deadline_in));
        return Step::Wait(format!(
            "{machine}: cordoning node {} before it can be taken for drained",
            node.name
        ));
    }
    if leaving.is_empty() {
        p.events.push(PlanEvent::normal(
            "NodeDrained",
            format!(
                "node {} of {machine} is drained after {waited}; the machine goes ({})",
                node.name, ask.cause
            ),
        ));
        return Step::Go;
    }
    let mut waiting_on = Vec::new();
    for pod in &leaving {
        waiting_on.push(format!("{}/{}", pod.namespace, pod.name));
        if pod.deleting {
            continue;
        }
        let (node_name, namespace, name) =
            (node.name.clone(), pod.namespace.clone(), pod.name.clone());
        let action = if pod.deleted_directly() {
            Action::DeletePod {
                node: node_name,
                namespace,
                pod: name,
            }
        } else {
            Action::EvictPod {
                node: node_name,
                namespace,
                pod: name,
            }
        };
        act_once(
            p,
            action,
            format!("draining node {} of {machine}", node.name),
        );
    }
    p.wait(poll(waited).min(deadline_in));
    Step::Wait(format!(
        "{machine}: draining node {} for {waited}, {} pod(s) left: {} (deadline in {deadline_in})",
        node.name,
        waiting_on.len(),
        waiting_on.join(", ")
    ))
}

/// Plans `action` unless this pass already holds it: a machine being removed whose VMI
/// KubeVirt also evacuates is drained by both (each keeps its own deadline), and one
/// cordon and one eviction per pod serve both.
fn act_once(p: &mut Planner<'_>, action: Action, reason: String) {
    let same = |planned: &Action| match (planned, &action) {
        (Action::CordonNode { node: a, .. }, Action::CordonNode { node: b, .. }) => a == b,
        (a, b) => a == b,
    };
    if !p.actions.iter().any(|a| same(&a.action)) {
        p.act(action, reason);
    }
}

/// The nodes whose pods the next plan needs to drain them: those of the machines being
/// removed. KubeVirt's evacuations are listed by the observation itself.
pub fn nodes_to_drain(
    memory: &crate::Memory,
    observed: &flightdeck_cloud::Observed,
) -> Vec<String> {
    let leaving = memory.machines.values().filter(|r| r.removal.is_some());
    crate::machines::views(leaving, observed, None)
        .iter()
        .filter_map(|m| m.node.map(|n| n.name.clone()))
        .collect()
}

/// What the status says of the drain of machine `m`, being removed as `removal` says.
pub(crate) fn status(
    p: &Planner<'_>,
    m: &crate::machines::MachineView<'_>,
    removal: &crate::memory::Removal,
) -> Option<crate::status::DrainStatus> {
    let node = m.node?;
    let held = removal.drain_since.is_none() && node.hold_deletion.is_some();
    if removal.drain_since.is_none() && !held {
        return None;
    }
    let timeout = p.spec.spec.flight.node_drain_timeout;
    Some(crate::status::DrainStatus {
        since: removal.drain_since,
        deadline: removal.drain_since.map(|s| s.plus(timeout)),
        pods_left: p
            .observed
            .pods
            .get(&node.name)
            .map(|pods| pods.iter().filter(|x| x.must_leave()).count()),
        held,
    })
}

/// Sets the [`DRAINING`] and [`DELETION_HELD`] conditions from what the drains of this
/// pass said.
pub(crate) fn publish(p: &mut Planner<'_>, draining: &[String], held: &[String]) {
    if !draining.is_empty() {
        p.condition(Condition::new(
            DRAINING,
            true,
            "NodeDrain",
            draining.join("; "),
        ));
    }
    if !held.is_empty() {
        p.condition(Condition::new(
            DELETION_HELD,
            true,
            "HoldAnnotation",
            held.join("; "),
        ));
    }
}
