//! Create, scale, upgrade and delete (F12), and a cloud that answers badly (F6).

use flightdeck_scenario::report::Report;
use flightdeck_scenario::{RunOptions, load_scenario, run};

async fn run_named(name: &str) -> Report {
    let loaded = load_scenario(name).expect("built-in scenario loads");
    run(&loaded, &RunOptions::default(), &mut |_| {})
        .await
        .expect("run completes")
        .report
}

#[tokio::test]
async fn f12_a_full_lifecycle_leaves_nothing_behind_and_touches_nothing_foreign() {
    let report = run_named("lifecycle").await;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    for name in ["noLeaks", "onlyOwned", "noChurn", "apiEndpointServing"] {
        let v = report
            .invariants
            .iter()
            .find(|v| v.name == name)
            .expect("checked");
        assert!(v.held && v.checks > 0, "{name}: {v:?}");
    }
    assert!(report.timeline.iter().any(|e| e.reason == "ClusterDeleted"));
    // Deletion went in dependency order: the security group only after every server.
    let last_server_delete = report
        .timeline
        .iter()
        .rposition(|e| e.reason == "DeleteServer")
        .expect("servers deleted");
    let group_delete = report
        .timeline
        .iter()
        .position(|e| e.reason == "DeleteSecurityGroup")
        .expect("group deleted");
    assert!(group_delete > last_server_delete);
}

#[tokio::test]
async fn f6_errors_latency_and_boot_failures_still_converge_without_duplicates() {
    let report = run_named("api-faults").await;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    assert!(
        report.engine.action_failures + report.engine.observe_failures > 0,
        "the faults were felt"
    );
}

#[tokio::test]
async fn every_built_in_scenario_passes() {
    for name in crate::common::built_in_scenarios() {
        let report = run_named(name).await;
        assert!(
            report.passed,
            "{name}: {:#?} {:#?}",
            report.invariants, report.expectations
        );
    }
}
