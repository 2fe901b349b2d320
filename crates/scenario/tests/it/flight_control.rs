//! Flight control (F3–F8, F10, F11): the repairs seed 002 asks for, each within its
//! budget, never on a blind observer, and never in a loop.

use flightdeck_engine::EngineConfig;
use flightdeck_plan::{PlanOptions, RemediationPolicy};
use flightdeck_scenario::report::Report;
use flightdeck_scenario::{Run, RunOptions, load_scenario, run};

async fn run_named(name: &str, options: RunOptions) -> Run {
    let loaded = load_scenario(name).expect("built-in scenario loads");
    run(&loaded, &options, &mut |_| {})
        .await
        .expect("run completes")
}

fn verdict<'a>(report: &'a Report, name: &str) -> &'a flightdeck_scenario::invariants::Verdict {
    report
        .invariants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} was not checked"))
}

fn events<'a>(report: &'a Report, reason: &str) -> Vec<&'a str> {
    report
        .timeline
        .iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message.as_str())
        .collect()
}

#[tokio::test]
async fn f3_every_unregistered_worker_is_replaced_within_the_budget() {
    let report = run_named("f3-unregistered-workers", RunOptions::default())
        .await
        .report;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    let started = events(&report, "RemediationStarted");
    assert!(!started.is_empty());
    assert!(
        started
            .iter()
            .all(|m| m.contains("not registered as a node after 10m")),
        "{started:?}"
    );
    let budget = verdict(&report, "remediationWithinBudget");
    assert!(budget.held && budget.checks > 0);
}

#[tokio::test]
async fn f4_lost_pod_network_rules_come_back_within_a_resync() {
    let report = run_named("f4-rule-lost", RunOptions::default())
        .await
        .report;
    assert!(report.passed, "{:#?}", report.invariants);
    assert!(verdict(&report, "rulesRestored").checks > 0);
    // The initial three rules, then the three lost ones put back.
    assert!(events(&report, "CreateSecurityGroupRule").len() >= 6);
}

#[tokio::test]
async fn f5_servers_without_the_security_group_are_put_back_into_it() {
    let run = run_named("f5-dropped-security-group", RunOptions::default()).await;
    assert!(run.report.passed, "{:#?}", run.report.invariants);
    assert!(!events(&run.report, "AddSecurityGroup").is_empty());
    let world = run.cloud.snapshot();
    let ours = world
        .servers
        .iter()
        .filter(|s| s.tags.iter().any(|t| t.starts_with("flightdeck-uid=")));
    for s in ours {
        assert!(
            s.security_groups.iter().any(|g| g == "demo-nodes"),
            "{} lacks the group",
            s.name
        );
    }
}

#[tokio::test]
async fn f6_errored_servers_are_replaced() {
    let report = run_named("f6-errored-servers", RunOptions::default())
        .await
        .report;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    assert!(
        events(&report, "RemediationStarted")
            .iter()
            .any(|m| m.contains("ERROR"))
    );
}

#[tokio::test]
async fn f7_stale_and_hijacking_routes_are_removed() {
    let report = run_named("f7-stale-routes", RunOptions::default())
        .await
        .report;
    assert!(report.passed, "{:#?}", report.invariants);
    let routes = verdict(&report, "routesConsistent");
    assert!(routes.held && routes.checks > 0);
    assert!(!events(&report, "RemoveRoutes").is_empty());
}

#[tokio::test]
async fn f8_a_full_router_is_reported_once_not_hammered() {
    let report = run_named("f8-route-limit", RunOptions::default())
        .await
        .report;
    assert!(report.passed, "{:#?}", report.expectations);
    let failed_adds: Vec<u64> = report
        .timeline
        .iter()
        .filter(|e| e.reason == "ActionFailed" && e.message.starts_with("add route"))
        .map(|e| e.at_ms)
        .collect();
    assert!(!failed_adds.is_empty(), "the first add discovers the limit");
    // The limit the router answered with is trusted for 30 minutes: at most one probe
    // per half hour, not a stream of 400s.
    for pair in failed_adds.windows(2) {
        assert!(pair[1] - pair[0] >= 30 * 60 * 1000, "{failed_adds:?}");
    }
}

#[tokio::test]
async fn f10_an_empty_node_list_deletes_nothing() {
    let run = run_named("f10-empty-node-list", RunOptions::default()).await;
    assert!(
        run.report.passed,
        "{:#?} {:#?}",
        run.report.invariants, run.report.expectations
    );
    assert!(events(&run.report, "RemediationStarted").is_empty());
    let deletes = run
        .cloud
        .mutations()
        .iter()
        .filter(|m| m.operation.starts_with("DELETE /servers"))
        .count();
    assert_eq!(deletes, 0, "zero deletions while the node list is empty");
}

#[tokio::test]
async fn f10_an_upstream_style_remediator_deletes_on_an_empty_node_list_and_is_caught() {
    let options = RunOptions {
        engine: EngineConfig {
            plan: PlanOptions {
                remediation: RemediationPolicy::Upstream,
                ..PlanOptions::default()
            },
            ..EngineConfig::default()
        },
        ..RunOptions::default()
    };
    let run = run_named("f10-empty-node-list", options).await;
    let blind = verdict(&run.report, "noRemediationOnBlindObserver");
    assert!(
        !blind.held,
        "the upstream policy must violate noRemediationOnBlindObserver"
    );
    let deletes = run
        .cloud
        .mutations()
        .iter()
        .filter(|m| m.operation.starts_with("DELETE /servers"))
        .count();
    assert!(deletes >= 5, "upstream deletes every machine: {deletes}");
}

#[tokio::test]
async fn f10_all_nodes_not_ready_pauses_remediation() {
    let report = run_named("f10-all-not-ready", RunOptions::default())
        .await
        .report;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    assert!(events(&report, "RemediationStarted").is_empty());
    assert!(!events(&report, "RemediationPaused").is_empty());
}

#[tokio::test]
async fn f11_endless_boot_failures_trip_the_churn_breaker_until_resumed() {
    let report = run_named("f11-churn-breaker", RunOptions::default())
        .await
        .report;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    let loops = events(&report, "ReconcileLoopDetected");
    assert!(
        loops
            .iter()
            .any(|m| m.contains("the slot of demo-workers-") && m.contains("re-created 3 times")),
        "{loops:?}"
    );
    assert!(!events(&report, "Resumed").is_empty());
}
