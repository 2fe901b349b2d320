//! A cloud that fails every call is retried with growing, jittered backoff, never in a hot
//! loop, and the backoff starts over once a reconcile succeeds.

use flightdeck_scenario::{RunOptions, load_scenario, run};

fn scenario_file(dir: &std::path::Path) -> std::path::PathBuf {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/openstack.yaml");
    let text = format!(
        "apiVersion: flightdeck.dev/v1alpha1
kind: Scenario
metadata: {{name: nova-down-twice}}
spec:
  duration: 40m
  clusters: [{{file: {}}}]
  faults:
    - {{at: 0s, duration: 3m, kind: api.errorRate, service: nova, rate: 1.0}}
    - {{at: 20m, duration: 8m, kind: api.errorRate, service: nova, rate: 1.0}}
  expect:
    conditions:
      - {{cluster: demo, type: Ready, after: 3m, within: 15m}}
    final:
      - {{cluster: demo, state: Ready}}
",
        example.display()
    );
    let path = dir.join("nova-down.yaml");
    std::fs::write(&path, text).expect("write scenario");
    path
}

#[tokio::test]
async fn a_failing_cloud_is_retried_with_growing_backoff_that_resets_after_success() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = scenario_file(dir.path());
    let loaded = load_scenario(path.to_str().expect("utf-8")).expect("loads");
    let report = run(&loaded, &RunOptions::default(), &mut |_| {})
        .await
        .expect("runs")
        .report;
    assert!(report.passed, "{:#?}", report.expectations);

    let failures: Vec<u64> = report
        .timeline
        .iter()
        .filter(|e| e.reason == "ObserveFailed")
        .map(|e| e.at_ms)
        .collect();
    let (first_window, second_window): (Vec<u64>, Vec<u64>) =
        failures.iter().partition(|t| **t < 10 * 60 * 1000);
    assert!(
        first_window.len() >= 5,
        "retried during the outage: {first_window:?}"
    );
    assert!(
        first_window.len() <= 12,
        "no hot loop: {} attempts in 3 minutes",
        first_window.len()
    );
    // Each wait is at least 75% of its nominal wait, which doubles each time (±25% jitter).
    for (k, pair) in first_window.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        let nominal = 1000u64 << k;
        assert!(
            gap * 4 >= nominal.min(300_000) * 3,
            "gap {k} was {gap} ms, nominal {nominal} ms"
        );
    }
    // After success the backoff starts over: the second outage is retried within
    // seconds, not minutes.
    assert!(second_window.len() >= 2, "{second_window:?}");
    let gap = second_window[1] - second_window[0];
    assert!(
        gap <= 2_500,
        "the first retry after a success waited {gap} ms"
    );
}

/// `callBudget` reads the calls the simulator refused, not flightdeck's own failure
/// count: a flightdeck that retries a dead Nova every second, without backing off, is
/// caught as a hot retry loop.
#[tokio::test]
async fn a_cloud_retried_every_second_without_backoff_breaks_the_call_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = scenario_file(dir.path());
    let loaded = load_scenario(path.to_str().expect("utf-8")).expect("loads");
    let mut options = RunOptions::default();
    options.engine.backoff = flightdeck_engine::backoff::BackoffPolicy {
        base: flightdeck_spec::Duration::from_secs(1),
        max: flightdeck_spec::Duration::from_secs(1),
    };
    let report = run(&loaded, &options, &mut |_| {})
        .await
        .expect("runs")
        .report;
    let budget = report
        .invariants
        .iter()
        .find(|v| v.name == "callBudget")
        .expect("checked");
    let message = budget
        .first_violation
        .as_ref()
        .map(|v| v.message.as_str())
        .unwrap_or_default();
    assert!(
        !budget.held && message.contains("hot retry loop"),
        "{budget:?}"
    );
}
