//! F12, "nothing it did not create is touched", when the cloud answers more than it was
//! asked: Nova ignores the `tags` filter of its server list (`nova.tagFilterIgnored`) and
//! every cluster is shown the whole project. Proved in process and through the real
//! OpenStack provider over loopback HTTP.

use flightdeck_cloud::ownership::uid_of;
use flightdeck_engine::EngineConfig;
use flightdeck_scenario::{Run, RunOptions, load_scenario, run, run_wire};

const SCENARIO: &str = "f12-tag-filter-ignored";

async fn run_it(options: RunOptions, wire: bool) -> Run {
    let loaded = load_scenario(SCENARIO).expect("built-in scenario loads");
    let run = if wire {
        run_wire(&loaded, &options, &mut |_| {}).await
    } else {
        run(&loaded, &options, &mut |_| {}).await
    };
    run.unwrap_or_else(|e| panic!("{SCENARIO} (wire: {wire}): {e}"))
}

/// Server deletions, by the UID tag the deleted server carried.
fn deleted_servers_by_uid(run: &Run) -> Vec<String> {
    run.cloud
        .mutations()
        .iter()
        .filter(|m| m.ok && m.operation == "DELETE /servers/{server_id}")
        .map(|m| uid_of(&m.target_tags).unwrap_or("(untagged)").to_string())
        .collect()
}

#[tokio::test]
async fn f12_a_project_wide_server_list_makes_no_cluster_touch_another_clusters_servers() {
    for wire in [false, true] {
        let run = run_it(RunOptions::default(), wire).await;
        assert!(run.report.passed, "wire: {wire}: {:#?}", run.report);
        let world = run.cloud.snapshot();
        // Only demo's rollout deleted servers: its three old control-plane machines.
        let deleted = deleted_servers_by_uid(&run);
        assert_eq!(deleted.len(), 3, "wire: {wire}: {deleted:?}");
        let bastion = world.servers.iter().find(|s| s.name == "bastion");
        assert!(bastion.is_some(), "the bastion is still there");
        // neighbour keeps every server it made: one control plane and three workers.
        let neighbour = world
            .servers
            .iter()
            .filter(|s| s.name.starts_with("neighbour-"))
            .count();
        assert_eq!(neighbour, 4, "wire: {wire}");
    }
}

#[tokio::test]
async fn f12_without_the_ownership_check_the_clusters_delete_each_others_servers() {
    let options = RunOptions {
        engine: EngineConfig {
            ownership_check: false,
            ..EngineConfig::default()
        },
        ..RunOptions::default()
    };
    let run = run_it(options, false).await;
    assert!(
        !run.report.passed,
        "the scenario must fail without the check"
    );
    let deleted = deleted_servers_by_uid(&run);
    assert!(
        deleted.len() > 3,
        "servers not in a rollout are deleted: {deleted:?}"
    );
}
