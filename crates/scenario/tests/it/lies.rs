//! A flightdeck that lies is caught by a built-in scenario, not only by the swarm: each
//! switch below makes it say what the cloud does not show, and the scenario's checks
//! read the simulator, never flightdeck's status or memory.

use flightdeck_engine::EngineConfig;
use flightdeck_plan::{Disabled, Mechanism, PlanOptions};
use flightdeck_scenario::{Report, RunOptions, load_scenario, run};

async fn run_with(scenario: &str, engine: EngineConfig) -> Report {
    let loaded = load_scenario(scenario).expect("built-in scenario loads");
    let options = RunOptions {
        engine,
        ..RunOptions::default()
    };
    run(&loaded, &options, &mut |_| {})
        .await
        .unwrap_or_else(|e| panic!("{scenario}: {e}"))
        .report
}

fn without(m: Mechanism) -> EngineConfig {
    EngineConfig {
        plan: PlanOptions {
            disabled: Disabled::of([m]),
            ..PlanOptions::default()
        },
        ..EngineConfig::default()
    }
}

/// Asserts that `scenario` passes as flightdeck is, and that with `engine` it fails
/// `invariant` (and names it).
async fn caught(scenario: &str, engine: EngineConfig, invariant: &str) {
    let honest = run_with(scenario, EngineConfig::default()).await;
    assert!(
        honest.passed,
        "{scenario} fails as flightdeck is: {honest:#?}"
    );
    let lying = run_with(scenario, engine).await;
    let verdict = lying
        .invariants
        .iter()
        .find(|v| v.name == invariant)
        .unwrap_or_else(|| panic!("{scenario}: no verdict for {invariant}"));
    assert!(
        !verdict.held && verdict.first_violation.is_some(),
        "{scenario}: {invariant} held against the lie: {verdict:?}"
    );
    assert!(!lying.passed, "{scenario} passed against the lie");
}

#[tokio::test]
async fn lifecycle_catches_a_ready_reported_before_the_machines_serve() {
    caught(
        "lifecycle",
        without(Mechanism::HonestReady),
        "statusTruthful",
    )
    .await;
}

#[tokio::test]
async fn f12_lifecycle_catches_a_cluster_forgotten_with_its_objects_left() {
    caught(
        "lifecycle",
        without(Mechanism::DeleteBeforeForget),
        "noLeaks",
    )
    .await;
}

#[tokio::test]
async fn f12_a_project_wide_list_catches_a_cluster_acting_on_another_clusters_servers() {
    let engine = EngineConfig {
        cluster_ownership: false,
        ..EngineConfig::default()
    };
    caught("f12-tag-filter-ignored", engine, "onlyOwned").await;
}
