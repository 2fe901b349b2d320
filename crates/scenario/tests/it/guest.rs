//! Machines leave gracefully on every cloud (seed 003): every rollout, scale-down and
//! repair drains a live node before its machine goes, within its deadline, and deletes
//! the Node after; judged by what the simulated workload clusters saw (noPodLost,
//! disruptionBudgetsKept, nodesCleaned).

use flightdeck_plan::{Disabled, Mechanism};
use flightdeck_scenario::RunOptions;

use crate::common::{report, verdict};

fn without_drains() -> RunOptions {
    let mut o = RunOptions::default();
    o.engine.plan.disabled = Disabled::of([Mechanism::DrainBeforeDelete]);
    o
}

/// Each rollout scenario passes as built, and loses pods without the drain: the check
/// reads the simulator's lost pods, so it goes red when the product stops draining.
async fn drains_or_loses_pods(name: &str) {
    let r = report(name, &RunOptions::default()).await;
    assert!(
        r.passed,
        "{name}: {:#?} {:#?}",
        r.invariants, r.expectations
    );
    for inv in ["noPodLost", "disruptionBudgetsKept"] {
        let v = verdict(&r, inv);
        assert!(v.held && v.checks > 0, "{name}: {inv}: {v:?}");
    }
    let r = report(name, &without_drains()).await;
    let lost = verdict(&r, "noPodLost");
    assert!(
        !lost.held,
        "{name}: without drains no pod was lost: {lost:?}"
    );
    let message = &lost.first_violation.as_ref().expect("a violation").message;
    assert!(message.contains("was lost with node"), "{message}");
}

#[tokio::test]
async fn seed_003_an_openstack_worker_rollout_drains_before_each_server_goes() {
    drains_or_loses_pods("guest-rollout-openstack").await;
}

#[tokio::test]
async fn seed_003_an_opennebula_worker_rollout_drains_before_each_vm_goes() {
    drains_or_loses_pods("guest-rollout-opennebula").await;
}

/// On KubeVirt the same drain runs. Without it the old worker's Node is deleted while its
/// VMI still shuts down, and the Node's pods are garbage collected with it, force
/// deleted: lost, as on the other clouds.
#[tokio::test]
async fn seed_003_a_kubevirt_worker_rollout_drains_before_each_vm_goes() {
    drains_or_loses_pods("guest-rollout-kubevirt").await;
}

#[tokio::test]
async fn seed_003_a_scale_down_drains_each_worker_and_deletes_its_node() {
    let r = report("guest-scale-down", &RunOptions::default()).await;
    assert!(r.passed, "{:#?} {:#?}", r.invariants, r.expectations);
    let v = verdict(&r, "nodesCleaned");
    assert!(v.held && v.checks > 0, "{v:?}");
}
