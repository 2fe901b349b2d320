//! Wire mode: every OpenStack scenario passes when the engine reaches the simulator only
//! through the real HTTP provider (Keystone, Nova, Neutron, Octavia REST on loopback).

use flightdeck_scenario::{RunOptions, load_scenario, run_wire};

#[tokio::test]
async fn every_built_in_scenario_passes_over_the_wire() {
    for name in crate::common::built_in_scenarios() {
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

#[tokio::test]
async fn wrong_credentials_name_the_cloud_entry_and_keystones_message_but_never_the_password() {
    use std::sync::Arc;

    use flightdeck_cloud::{SimClock, Timestamp};
    use flightdeck_openstack::{OpenStackCloud, Password, SessionOptions};
    use flightdeck_sim::{SimCloud, SimConfig};
    use flightdeck_sim_http::ServeOptions;

    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(flightdeck_sim_http::serve(
        cloud,
        listener,
        ServeOptions::default(),
    ));
    let mut entry = flightdeck_scenario::wire::cloud_entry(&base, &ServeOptions::default());
    let secret = "hunter2-not-the-password";
    entry.auth.password = Password::new(secret);
    let err = match OpenStackCloud::connect(&entry, SessionOptions::default()).await {
        Ok(_) => panic!("a wrong password was accepted"),
        Err(e) => e,
    };
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("flightdeck-sim"),
        "names the cloud entry: {text}"
    );
    assert!(
        text.contains("requires authentication"),
        "carries Keystone's message: {text}"
    );
    assert!(!text.contains(secret), "never the password: {text}");
}
