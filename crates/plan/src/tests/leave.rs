//! Machines leave gracefully (seed 003): a machine whose node is live is drained before
//! its server goes, whatever the cause, within `nodeDrainTimeout`; a node NotReady for
//! long is not waited on; a hold annotation holds the deletion before the drain starts;
//! the Node goes once its machine has.

use flightdeck_cloud::Pod;
use flightdeck_spec::Duration;

use super::*;
use crate::node_drain::{DELETION_HELD, DRAINING, UNREACHABLE_AFTER};

const WORKER: &str = "demo-workers-5";

/// Two Ready workers; the pool scales down to one, so the newest (workers-5) leaves.
fn scale_down() -> World {
    World::cluster(spec(V1, 1), V1, 2)
}

fn pod(name: &str, node: &str) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node: node.into(),
        phase: "Running".into(),
        daemon_set: false,
        mirror: false,
        deleting: false,
    }
}

fn node_mut<'w>(w: &'w mut World, name: &str) -> &'w mut Node {
    w.observed
        .nodes
        .iter_mut()
        .flatten()
        .find(|n| n.name == name)
        .expect("the node is listed")
}

/// Plans, and carries the plan's memory into the world.
fn step(w: &mut World) -> Plan {
    let p = w.plan();
    w.memory = p.memory.clone();
    p
}

fn evicted(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::EvictPod { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_scale_down_cordons_and_evicts_before_the_server_goes() {
    let mut w = scale_down();
    let p = step(&mut w);
    assert_eq!(removing(&p), [WORKER]);
    assert!(targets(&p, "DeleteServer").is_empty(), "{:#?}", p.actions);
    assert_eq!(count(&p, "CordonNode"), 1, "{:#?}", p.actions);
    assert_eq!(events(&p, "DrainStarted").len(), 1);
    assert!(condition(&p, DRAINING).is_some_and(|c| c.message.contains(WORKER)));
    let since = p.memory.machines[WORKER]
        .removal
        .as_ref()
        .and_then(|r| r.drain_since);
    assert_eq!(since, Some(T0), "the drain's start is recorded");

    // The cordon shows; two pods must leave, a DaemonSet pod stays.
    node_mut(&mut w, WORKER).unschedulable = true;
    let mut proxy = pod("proxy", WORKER);
    proxy.daemon_set = true;
    w.observed.pods.insert(
        WORKER.into(),
        vec![pod("web-1", WORKER), pod("cache-1", WORKER), proxy],
    );
    w.now = T0.plus(Duration::from_secs(5));
    let p = step(&mut w);
    assert_eq!(evicted(&p), ["web-1", "cache-1"]);
    assert!(targets(&p, "DeleteServer").is_empty());
    assert_eq!(p.requeue_after, Some(crate::node_drain::POLL_DRAIN));

    // Only the DaemonSet pod is left: the node is drained and the server goes.
    w.observed
        .pods
        .get_mut(WORKER)
        .expect("listed")
        .retain(|p| p.daemon_set);
    w.now = T0.plus(Duration::from_secs(40));
    let p = step(&mut w);
    assert_eq!(targets(&p, "DeleteServer"), [WORKER]);
    assert_eq!(events(&p, "NodeDrained").len(), 1);
}

#[test]
fn a_drain_that_outlives_its_deadline_lets_the_machine_go_with_an_event() {
    let mut w = scale_down();
    step(&mut w);
    node_mut(&mut w, WORKER).unschedulable = true;
    w.observed
        .pods
        .insert(WORKER.into(), vec![pod("web-1", WORKER)]);
    let timeout = w.spec.spec.flight.node_drain_timeout;
    w.now = Timestamp(T0.0 + timeout.as_millis() - 1);
    let p = step(&mut w);
    assert!(
        targets(&p, "DeleteServer").is_empty(),
        "not before the deadline"
    );
    // Seed 44019776: past its first minute a blocked drain no longer asks for a look
    // every 5 s (what else the pass waits for may still ask sooner than 20 s).
    w.now = T0.plus(Duration::from_mins(2));
    let p = step(&mut w);
    assert!(
        p.requeue_after.is_some_and(
            |d| d > crate::node_drain::POLL_DRAIN && d <= crate::node_drain::POLL_DRAIN_SLOW
        ),
        "{:?}",
        p.requeue_after
    );
    w.now = T0.plus(timeout);
    let p = step(&mut w);
    assert_eq!(targets(&p, "DeleteServer"), [WORKER]);
    let e = events(&p, "DrainDeadlinePassed");
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("1 pod(s) still on its node"), "{}", e[0]);
}

/// Seed 103142837: a drain that began while the node list was empty cordons the node
/// only when the list comes back; its pods get the whole timeout from then, not what
/// the blindness left of it, and until then the machine waits past any deadline.
#[test]
fn a_drain_begun_blind_starts_again_when_its_node_is_first_seen() {
    let mut w = scale_down();
    removing_worker(&mut w);
    let nodes = w.observed.nodes.replace(Vec::new());
    let p = step(&mut w);
    assert_eq!(events(&p, "DrainStarted").len(), 1);
    assert_eq!(count(&p, "CordonNode"), 0, "no node to cordon");
    assert!(
        targets(&p, "DeleteServer").is_empty(),
        "a blind list proves no node gone"
    );
    // Seed 43004743: past the deadline, still blind: a node never seen is not given up
    // on (its pods would go with the machine, never cordoned).
    w.now = T0.plus(Duration::from_mins(12));
    let p = step(&mut w);
    assert!(targets(&p, "DeleteServer").is_empty(), "{:#?}", p.actions);
    assert!(events(&p, "DrainDeadlinePassed").is_empty());

    w.now = T0.plus(Duration::from_mins(16));
    w.observed.nodes = nodes;
    let p = step(&mut w);
    assert_eq!(count(&p, "CordonNode"), 1);
    let started = events(&p, "DrainStarted");
    assert!(
        started.len() == 1 && started[0].contains("now that it is seen"),
        "{started:?}"
    );
    let r = p.memory.machines[WORKER]
        .removal
        .as_ref()
        .expect("removing");
    assert_eq!(
        r.drain_since,
        Some(w.now),
        "the deadline counts from the cordon"
    );

    // Past the first deadline, within the second: the pod under its budget still has time.
    node_mut(&mut w, WORKER).unschedulable = true;
    w.observed
        .pods
        .insert(WORKER.into(), vec![pod("web-1", WORKER)]);
    w.now = T0.plus(Duration::from_mins(25));
    let p = step(&mut w);
    assert!(targets(&p, "DeleteServer").is_empty(), "{:#?}", p.actions);
    assert!(
        events(&p, "DrainStarted").is_empty(),
        "it starts again once only"
    );
    assert_eq!(evicted(&p), ["web-1"]);
}

/// `WORKER` marked for removal (by a repair, an operator), its node not drained.
fn removing_worker(w: &mut World) {
    w.record(WORKER).removal = Some(crate::memory::Removal {
        since: w.now,
        reason: "an operator removes it".into(),
        drain_since: None,
        node: None,
        scale_down: false,
    });
}

#[test]
fn a_node_not_ready_for_long_is_not_waited_on() {
    let mut w = scale_down();
    removing_worker(&mut w);
    node_mut(&mut w, WORKER).ready = false;
    w.record(WORKER).node_unready_since = Some(Timestamp(T0.0 - UNREACHABLE_AFTER.as_millis()));
    w.observed
        .pods
        .insert(WORKER.into(), vec![pod("web-1", WORKER)]);
    let p = step(&mut w);
    assert_eq!(targets(&p, "DeleteServer"), [WORKER], "{:#?}", p.actions);
    assert_eq!(events(&p, "NodeUnreachable").len(), 1);
    assert!(evicted(&p).is_empty());

    // NotReady for less than that: drained like any other.
    let mut w = scale_down();
    removing_worker(&mut w);
    node_mut(&mut w, WORKER).ready = false;
    w.record(WORKER).node_unready_since = Some(Timestamp(T0.0 - 60_000));
    let p = step(&mut w);
    assert!(targets(&p, "DeleteServer").is_empty());
    assert_eq!(count(&p, "CordonNode"), 1);
}

#[test]
fn the_hold_annotation_holds_the_deletion_before_the_drain_starts() {
    let mut w = scale_down();
    node_mut(&mut w, WORKER).hold_deletion = Some("backup running".into());
    let p = step(&mut w);
    assert_eq!(removing(&p), [WORKER]);
    assert_eq!(count(&p, "CordonNode"), 0, "nothing starts while it holds");
    assert!(targets(&p, "DeleteServer").is_empty());
    let held = condition(&p, DELETION_HELD).expect("the hold is said");
    assert!(
        held.message.contains(WORKER) && held.message.contains(flightdeck_cloud::HOLD_DELETION),
        "{}",
        held.message
    );
    let r = p.memory.machines[WORKER]
        .removal
        .as_ref()
        .expect("removing");
    assert_eq!(
        r.drain_since, None,
        "the deadline does not run while it holds"
    );

    // An hour later the annotation is removed: the drain starts then, with its full time.
    w.now = T0.plus(Duration::from_mins(60));
    node_mut(&mut w, WORKER).hold_deletion = None;
    let p = step(&mut w);
    assert_eq!(count(&p, "CordonNode"), 1);
    assert!(condition(&p, DELETION_HELD).is_none());
    let r = p.memory.machines[WORKER]
        .removal
        .as_ref()
        .expect("removing");
    assert_eq!(r.drain_since, Some(w.now));
}

#[test]
fn the_node_of_a_machine_that_is_gone_is_deleted_until_its_timeout() {
    let mut w = scale_down();
    w.mark_removal(WORKER);
    w.drop_member(WORKER);
    let p = step(&mut w);
    assert_eq!(targets(&p, "DeleteServer"), [WORKER]);
    w.drop_server(WORKER);
    let p = step(&mut w);
    assert_eq!(events(&p, "MachineRemoved").len(), 1);
    let deletes: Vec<&Action> = p
        .actions
        .iter()
        .map(|a| &a.action)
        .filter(|a| matches!(a, Action::DeleteNode { .. }))
        .collect();
    assert_eq!(deletes.len(), 1, "{:#?}", p.actions);
    assert!(matches!(deletes[0], Action::DeleteNode { node, .. } if node == WORKER));

    // The workload cluster keeps refusing: past nodeDeletionTimeout flightdeck stops.
    w.now = w.now.plus(w.spec.spec.flight.node_deletion_timeout);
    let p = step(&mut w);
    assert_eq!(count(&p, "DeleteNode"), 0);
    assert_eq!(events(&p, "NodeDeletionTimedOut").len(), 1);
    assert!(p.memory.node_deletions.is_empty());

    // A Node that is gone is not asked for again.
    let mut w = scale_down();
    w.memory.node_deletions.insert("demo-workers-9".into(), T0);
    let p = step(&mut w);
    assert_eq!(count(&p, "DeleteNode"), 0);
    assert!(p.memory.node_deletions.is_empty());
}

#[test]
fn without_drain_on_delete_the_server_goes_with_its_pods() {
    let mut w = scale_down();
    w.disabled = crate::Disabled::of([crate::Mechanism::DrainBeforeDelete]);
    w.observed
        .pods
        .insert(WORKER.into(), vec![pod("web-1", WORKER)]);
    let p = step(&mut w);
    assert_eq!(targets(&p, "DeleteServer"), [WORKER]);
    assert_eq!(count(&p, "CordonNode") + evicted(&p).len(), 0);
}
