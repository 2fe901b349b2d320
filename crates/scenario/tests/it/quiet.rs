//! A Ready cluster with nothing wrong costs the cloud only its resync lists, and the
//! store nothing (issue 16: two commits per reconcile even when nothing changed).

use crate::common;

use flightdeck_scenario::report::Report;
use flightdeck_scenario::{LoadedScenario, RunOptions, run};
use flightdeck_spec::Duration;

async fn up(duration: Duration, stop_when_ready: bool) -> Report {
    let loaded = LoadedScenario::of_clusters("quiet".into(), vec![common::example()], 7, duration);
    let options = RunOptions {
        stop_when_ready,
        ..RunOptions::default()
    };
    run(&loaded, &options, &mut |_| {})
        .await
        .expect("run completes")
        .report
}

fn mutations(r: &Report) -> u64 {
    r.api_calls
        .values()
        .flat_map(|ops| ops.iter())
        .filter(|(op, _)| !op.starts_with("GET ") && !op.starts_with("POST /v3/auth"))
        .map(|(_, n)| n)
        .sum()
}

#[tokio::test]
async fn a_ready_cluster_left_alone_for_an_hour_changes_nothing_and_commits_nothing() {
    let ready = up(Duration::from_secs(3600), true).await;
    assert!(ready.passed, "{:#?}", ready.invariants);
    let built = Duration::from_millis((ready.virtual_seconds * 1000.0).ceil() as u64);
    let hour = up(Duration::from_millis(built.as_millis() + 3_600_000), false).await;
    assert!(hour.passed, "{:#?}", hour.invariants);
    // The same seed: the first part of the long run is the short run.
    assert!(hour.engine.reconciles > ready.engine.reconciles + 10);
    assert_eq!(mutations(&hour), mutations(&ready), "{:#?}", hour.api_calls);
    assert_eq!(
        hour.engine.store_commits, ready.engine.store_commits,
        "an hour of resyncs that found nothing to do committed to the store"
    );
}

/// Issue 16: building the example (3 control-plane machines, 2 workers) cost 318 calls,
/// 8.4 times the minimum, because every pass listed all nine kinds. A pass now takes
/// again the lists that are young, untouched by flightdeck and settled (`reuse.rs` in
/// the engine). The minimum is the bench's: one token, every mutation, and two lists of
/// each kind the spec uses (one before acting, one to see the result). Today's figure
/// is 1.9 times it; the goal is 1.5, not met yet, so this holds the ground gained.
#[tokio::test]
async fn building_a_cluster_costs_at_most_twice_the_minimum_of_cloud_calls() {
    let ready = up(Duration::from_secs(3600), true).await;
    assert!(ready.passed, "{:#?}", ready.invariants);
    let kinds_used = 9; // servers, nodes, security groups, router, and five Octavia kinds
    let minimum = 1 + mutations(&ready) + 2 * kinds_used;
    assert!(
        ready.api_calls_total <= 2 * minimum,
        "{} calls to build, more than twice the minimum of {minimum}: {:#?}",
        ready.api_calls_total,
        ready.api_calls
    );
}
