//! A Ready cluster with nothing wrong costs the cloud only its resync lists, and the
//! store nothing (issue 16: two commits per reconcile even when nothing changed).

use crate::common;

use flightdeck_scenario::report::Report;
use flightdeck_scenario::{LoadedScenario, RunOptions, run};
use flightdeck_spec::Duration;

async fn up(duration: Duration, stop_when_ready: bool) -> Report {
    up_of(common::example(), duration, stop_when_ready).await
}

async fn up_of(
    cluster: flightdeck_spec::Cluster,
    duration: Duration,
    stop_when_ready: bool,
) -> Report {
    let loaded = LoadedScenario::of_clusters("quiet".into(), vec![cluster], 7, duration);
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
        .filter(|(op, _)| {
            !op.starts_with("GET ") && !op.starts_with("WATCH ") && !op.starts_with("POST /v3/auth")
        })
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
    // Nodes are watched, not listed: in the hour, a list only when the watch starts
    // afresh (every 15 minutes), and watch requests (each runs 290 s).
    let lists = node_calls(&hour, "GET nodes") - node_calls(&ready, "GET nodes");
    let watches = node_calls(&hour, "WATCH nodes") - node_calls(&ready, "WATCH nodes");
    assert!(
        lists <= 4 && watches >= 10,
        "{lists} node lists and {watches} watch requests in a quiet hour of {} reconciles",
        hour.engine.reconciles - ready.engine.reconciles
    );
}

fn node_calls(r: &Report, op: &str) -> u64 {
    r.api_calls
        .get("kubernetes")
        .and_then(|ops| ops.get(op))
        .copied()
        .unwrap_or(0)
}

/// Issue 16: building the example (3 control-plane machines, 2 workers) cost 318 calls,
/// 8.4 times the minimum, because every pass listed all nine kinds. A pass now takes
/// again the lists that are young, untouched by flightdeck and settled (`reuse.rs` in
/// the engine); a build asks its workload cluster for nodes only once a member of its
/// API pool serves, adds its first members in one batch, and does not list again at its
/// first pass what its identity check read in the same instant. The minimum is the
/// bench's: one token, every mutation, and two lists of each kind the spec uses (one
/// before acting, one to see the result); the goal is at most 1.5 times it, reads
/// included (this seed: 49 calls for a minimum of 35; seeds 1 to 8 of `up`: 1.35 to
/// 1.44 times). The goal is about the infrastructure: the example with `bootstrap:
/// none` (a kubeadm build, two phases, is the bench's `build-calls-kubeadm`).
#[tokio::test]
async fn building_a_cluster_costs_at_most_one_and_a_half_times_the_minimum_of_cloud_calls() {
    let mut infrastructure = common::example();
    infrastructure.spec.bootstrap.provider = flightdeck_spec::bootstrap::BootstrapProvider::None;
    let ready = up_of(infrastructure, Duration::from_secs(3600), true).await;
    assert!(ready.passed, "{:#?}", ready.invariants);
    let kinds_used = 9; // servers, nodes, security groups, router, and five Octavia kinds
    let minimum = 1 + mutations(&ready) + 2 * kinds_used;
    assert!(
        2 * ready.api_calls_total <= 3 * minimum,
        "{} calls to build, more than 1.5 times the minimum of {minimum}: {:#?}",
        ready.api_calls_total,
        ready.api_calls
    );
}

/// Issue 16: a build asked its workload cluster for nodes at every pass from its first
/// member on, and until a member served the load balancer had nowhere to forward: six of
/// the example's nine node lists answered 503. The node list now waits for a serving
/// member: the example's control plane first serves at 54 s and is Ready at 74 s, three
/// passes.
#[tokio::test]
async fn a_build_asks_its_workload_cluster_for_nodes_only_once_a_member_serves() {
    let ready = up(Duration::from_secs(3600), true).await;
    assert!(ready.passed, "{:#?}", ready.invariants);
    let first_serving = ready
        .timeline
        .iter()
        .find(|e| e.reason == "MemberChanged" && e.message.ends_with("ACTIVE/ONLINE"))
        .map(|e| e.at_ms)
        .expect("a member came to serve");
    let ready_at = ready
        .timeline
        .iter()
        .find(|e| e.reason == "Ready")
        .map(|e| e.at_ms)
        .expect("the cluster became Ready");
    let node_lists = ready.api_calls["kubernetes"]["GET nodes"];
    assert!(node_lists > 0, "a Ready cluster's nodes were read");
    // The engine looks at a waiting build every 10 s at most; one list per pass from the
    // first serving member to Ready.
    let passes = (ready_at - first_serving) / 10_000 + 1;
    assert!(
        node_lists <= passes,
        "{node_lists} node lists, more than the {passes} passes from the first serving member (at {first_serving} ms) to Ready (at {ready_at} ms)"
    );
}
