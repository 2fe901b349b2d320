//! Wire mode: every OpenStack scenario passes when the engine reaches the simulator only
//! through the real HTTP provider (Keystone, Nova, Neutron, Octavia REST on loopback).

use flightdeck_scenario::{RunOptions, builtin, load_scenario, wire::run_wire};

#[tokio::test]
async fn every_built_in_scenario_passes_over_the_wire() {
    for name in builtin::scenario_names() {
        let loaded = load_scenario(name).expect("built-in scenario loads");
        let run = run_wire(&loaded, &RunOptions::default(), &mut |_| {})
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = run.report;
        assert!(
            report.passed,
            "{name}: {:#?} {:#?}",
            report.invariants, report.expectations
        );
        // The calls went over HTTP: the simulator counted them as its API.
        assert!(report.api_calls_total > 0);
    }
}

#[tokio::test]
async fn the_wire_and_the_in_process_runs_tell_the_same_story() {
    let loaded = load_scenario("seed-001-member-stuck-pending").expect("loads");
    let wire = run_wire(&loaded, &RunOptions::default(), &mut |_| {})
        .await
        .expect("wire run")
        .report;
    let reasons = |r: &flightdeck_scenario::Report| -> Vec<String> {
        r.timeline
            .iter()
            .filter(|e| {
                [
                    "LoadBalancerMemberStuck",
                    "RolloutComplete",
                    "ClusterDeleted",
                ]
                .contains(&e.reason.as_str())
            })
            .map(|e| e.reason.clone())
            .collect()
    };
    assert!(reasons(&wire).contains(&"LoadBalancerMemberStuck".to_string()));
    assert!(reasons(&wire).contains(&"RolloutComplete".to_string()));
}
