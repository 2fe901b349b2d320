//! Create, scale, upgrade and delete (F12), and a cloud that answers badly (F6).

use flightdeck_scenario::report::Report;
use flightdeck_scenario::{Run, RunOptions, load_scenario, run};
use flightdeck_sim::{Mutation, MutationKind};

async fn run_named(name: &str) -> Report {
    run_full(name).await.report
}

async fn run_full(name: &str) -> Run {
    let loaded = load_scenario(name).expect("built-in scenario loads");
    run(&loaded, &RunOptions::default(), &mut |_| {})
        .await
        .expect("run completes")
}

#[tokio::test]
async fn f12_a_full_lifecycle_leaves_nothing_behind_and_touches_nothing_foreign() {
    let run = run_full("lifecycle").await;
    let report = &run.report;
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
    // Deletion went in dependency order, as the cloud received it: the security group
    // only after every server.
    let mutations = run.cloud.mutations();
    let accepted = |op: &str| {
        let op = op.to_string();
        move |m: &&Mutation| m.ok && m.kind == MutationKind::Delete && m.operation == op
    };
    let server_deletes: Vec<_> = mutations
        .iter()
        .enumerate()
        .filter(|(_, m)| accepted("DELETE /servers/{server_id}")(m))
        .map(|(i, _)| i)
        .collect();
    let group_delete = mutations
        .iter()
        .position(|m| accepted("DELETE /v2.0/security-groups/{security_group_id}")(&m))
        .expect("the cloud received the group's deletion");
    let last_server_delete = *server_deletes
        .last()
        .expect("the cloud received server deletions");
    assert!(
        group_delete > last_server_delete,
        "the group was deleted at mutation {group_delete}, before server deletion {last_server_delete}"
    );
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
