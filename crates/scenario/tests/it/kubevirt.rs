//! F9 on KubeVirt: graceful VMI eviction with a bounded drain, proved against the
//! simulated infra and workload clusters through the real kube-rs provider, in process
//! and over loopback HTTP.

use flightdeck_engine::EngineConfig;
use flightdeck_plan::{DrainPolicy, PlanOptions};
use flightdeck_scenario::report::Report;
use flightdeck_scenario::{Run, RunOptions, load_scenario, run, run_wire};

async fn run_named(name: &str, options: RunOptions, wire: bool) -> Run {
    let loaded = load_scenario(name).expect("built-in scenario loads");
    let run = if wire {
        run_wire(&loaded, &options, &mut |_| {}).await
    } else {
        run(&loaded, &options, &mut |_| {}).await
    };
    run.unwrap_or_else(|e| panic!("{name} (wire: {wire}): {e}"))
}

fn assert_passed(report: &Report) {
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
}

fn held(report: &Report, name: &str) -> bool {
    report
        .invariants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} was not checked"))
        .held
}

/// Seconds since the scenario started at which an event with `reason` was first seen.
fn first(report: &Report, reason: &str) -> Option<f64> {
    report
        .timeline
        .iter()
        .find(|e| e.reason == reason)
        .map(|e| e.at_ms as f64 / 1000.0)
}

fn vmi_deletions(run: &Run) -> Vec<flightdeck_sim::VmiDeletion> {
    run.cloud
        .snapshot()
        .kube
        .vmi_deletions
        .into_iter()
        .filter(|d| d.cause == "DELETE virtualmachineinstances")
        .collect()
}

/// Minutes since the scenario started (the simulation epoch).
fn minutes_in(d: &flightdeck_sim::VmiDeletion) -> f64 {
    d.at.since(flightdeck_cloud::Timestamp::SIM_EPOCH)
        .as_secs_f64()
        / 60.0
}

#[tokio::test]
async fn f9_a_blocked_drain_finishes_cleanly_once_the_budget_allows_and_the_vmi_is_replaced() {
    for wire in [false, true] {
        let run = run_named("f9-drain-pdb-blocks", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        let deletions = vmi_deletions(&run);
        assert_eq!(deletions.len(), 1, "{deletions:#?}");
        let d = &deletions[0];
        assert_eq!(d.vmi, "kv-workers-4");
        assert!(d.pods_left.is_empty(), "drained first: {d:#?}");
        // The budget blocked until 10m: nothing was deleted before.
        assert!(minutes_in(d) >= 10.0, "{d:#?}");
        // 429s were retried on the drain's own clock, never as failures.
        assert!(
            run.report
                .timeline
                .iter()
                .any(|e| e.reason == "EvictionBlocked"
                    && e.message.contains(
                        "Cannot evict pod as it would violate the pod's disruption budget."
                    )),
            "wire: {wire}"
        );
        // The VM runs again on a new VMI, off the drained infra node, uncordoned.
        let world = run.cloud.snapshot();
        let vmi = world
            .kube
            .vmis
            .iter()
            .find(|v| v.name == "kv-workers-4")
            .expect("a replacement VMI");
        assert_ne!(vmi.uid, d.uid);
        assert_eq!(vmi.phase, "Running");
        assert_ne!(vmi.node.as_deref(), Some("infra-3"));
        assert!(first(&run.report, "DrainFinished").is_some());
        let kv = world
            .kube
            .workloads
            .iter()
            .find(|w| w.name == "kv")
            .expect("the workload cluster");
        // Three control-plane machines and two workers, every node back in service.
        assert_eq!(kv.nodes.len(), 5, "{:#?}", kv.nodes);
        assert!(kv.nodes.iter().all(|n| !n.unschedulable && n.ready));
    }
}

#[tokio::test]
async fn f9_a_budget_that_never_allows_is_overruled_at_the_deadline_with_an_event() {
    let run = run_named("f9-drain-deadline", RunOptions::default(), false).await;
    assert_passed(&run.report);
    let started = first(&run.report, "DrainStarted").expect("the drain started");
    let deadline = first(&run.report, "DrainDeadlinePassed").expect("the deadline passed");
    assert!(
        (deadline - started - 600.0).abs() < 1.0,
        "deleted 10 minutes after the drain started: {started} → {deadline}"
    );
    let deletions = vmi_deletions(&run);
    assert_eq!(deletions.len(), 1);
    assert!(
        !deletions[0].pods_left.is_empty(),
        "the pods could not leave: the deadline is what let the VMI go"
    );
    assert!(held(&run.report, "drainBeforeDelete"));
}

#[tokio::test]
async fn f9_a_restart_in_the_middle_of_a_drain_keeps_the_original_deadline() {
    let plain = run_named("f9-drain-deadline", RunOptions::default(), false).await;
    let restarted = run_named("f9-drain-restart", RunOptions::default(), false).await;
    assert_passed(&restarted.report);
    assert!(
        restarted
            .report
            .timeline
            .iter()
            .any(|e| e.reason == "EngineRestarted"),
        "the engine was restarted"
    );
    let at = |r: &Run| minutes_in(&vmi_deletions(r)[0]);
    let (plain_at, restarted_at) = (at(&plain), at(&restarted));
    assert!(
        (plain_at - restarted_at).abs() < 0.2,
        "deleted at {restarted_at:.1} min, not 10 minutes after the restart (plain run: {plain_at:.1})"
    );
    assert!(restarted_at < 16.0, "{restarted_at}");
}

#[tokio::test]
async fn f9_the_guest_node_is_found_by_identity_and_drained_not_the_infra_node_s_namesake() {
    for wire in [false, true] {
        let run = run_named("f9-guest-names-differ", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        let evictions: Vec<&str> = run
            .report
            .timeline
            .iter()
            .filter(|e| e.reason == "EvictPod")
            .map(|e| e.message.as_str())
            .collect();
        assert!(!evictions.is_empty());
        assert!(
            evictions.iter().all(|m| m.contains("from kv-workers-4")),
            "the guest node, named after its VM: {evictions:#?}"
        );
        // The one VMI on the drained infra node was deleted, once drained.
        let deletions = vmi_deletions(&run);
        assert_eq!(deletions.len(), 1, "{deletions:#?}");
        assert!(deletions.iter().all(|d| d.pods_left.is_empty()));
    }
}

#[tokio::test]
async fn f9_the_upstream_lookup_by_evacuation_node_name_kills_the_workload_and_is_caught() {
    let options = RunOptions {
        engine: EngineConfig {
            plan: PlanOptions {
                drain: DrainPolicy::UpstreamByEvacuationNode,
                ..PlanOptions::default()
            },
            ..EngineConfig::default()
        },
        ..RunOptions::default()
    };
    let run = run_named("f9-guest-names-differ", options, false).await;
    assert!(
        !held(&run.report, "drainBeforeDelete"),
        "the upstream policy must violate drainBeforeDelete"
    );
    let deletions = vmi_deletions(&run);
    assert!(
        deletions.iter().any(|d| !d.pods_left.is_empty()),
        "pods were killed abruptly: {deletions:#?}"
    );
    assert!(
        !run.report.timeline.iter().any(|e| e.reason == "EvictPod"),
        "upstream evicted nothing"
    );
}

#[tokio::test]
async fn f9_live_migrating_vmis_are_left_to_kubevirt() {
    for wire in [false, true] {
        let run = run_named("f9-live-migrate", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        assert!(vmi_deletions(&run).is_empty(), "flightdeck deleted no VMI");
        assert!(
            !run.report
                .timeline
                .iter()
                .any(|e| e.reason == "DrainStarted" || e.reason == "CordonNode"),
            "and drained nothing"
        );
        // KubeVirt moved them off the drained node, same VMIs: all five machines'.
        let world = run.cloud.snapshot();
        assert_eq!(world.kube.vmis.len(), 5, "{:#?}", world.kube.vmis);
        assert!(
            world
                .kube
                .vmis
                .iter()
                .all(|v| v.node.as_deref() != Some("infra-3")),
            "{:#?}",
            world.kube.vmis
        );
    }
}

#[tokio::test]
async fn f9_a_vmi_already_being_deleted_is_left_alone() {
    for wire in [false, true] {
        let run = run_named("f9-vmi-already-deleting", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        // The scale-down drained kv-workers-4 and deleted its VM at 4:30; its guest had 60 s to shut
        // down, so its VMI was still going when infra-3 was drained at 5:00.
        let all = run.cloud.snapshot().kube.vmi_deletions;
        let by_vm: Vec<_> = all.iter().filter(|d| d.vmi == "kv-workers-4").collect();
        assert_eq!(by_vm.len(), 1, "{all:#?}");
        assert_eq!(by_vm[0].cause, "DELETE virtualmachines");
        assert!(
            vmi_deletions(&run).is_empty(),
            "no VMI deleted again: {all:#?}"
        );
        assert!(
            !run.report
                .timeline
                .iter()
                .any(|e| e.reason == "DrainStarted"
                    && e.message.contains("KubeVirt evacuates kv-workers-4")),
            "not drained for the evacuation (the scale-down drained it before its VM went)"
        );
    }
}
