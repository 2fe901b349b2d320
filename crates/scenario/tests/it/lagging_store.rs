//! A store that comes back behind the cloud (the Acto class: a restore from a backup, a
//! replica that lost its last commits): flightdeck remembers less than it built. It must
//! find what it built by its tags and adopt it, make no duplicate, and keep every
//! invariant.

use flightdeck_scenario::{RunOptions, load_scenario, run};
use flightdeck_spec::Duration;

fn scenario_file(dir: &std::path::Path) -> std::path::PathBuf {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/openstack.yaml");
    let text = format!(
        "apiVersion: flightdeck.dev/v1alpha1
kind: Scenario
metadata: {{name: store-restored-behind}}
spec:
  duration: 40m
  clusters: [{{file: {}}}]
  expect:
    final:
      - {{cluster: demo, state: Ready}}
",
        example.display()
    );
    let path = dir.join("store-restored-behind.yaml");
    std::fs::write(&path, text).expect("write scenario");
    path
}

#[tokio::test]
async fn a_store_restored_from_before_the_build_adopts_every_machine_and_keeps_every_invariant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = scenario_file(dir.path());
    let loaded = load_scenario(path.to_str().expect("utf-8")).expect("loads");
    // At 8 minutes, long after the cluster is Ready, the store comes back as it was at
    // the start: the cluster applied, nothing built.
    let options = RunOptions {
        lagging_restores: vec![(Duration::from_mins(8), Duration::from_mins(8))],
        converge_after: Some(Duration::from_mins(12)),
        ..RunOptions::default()
    };
    let report = run(&loaded, &options, &mut |_| {})
        .await
        .expect("runs")
        .report;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    let restored = report
        .timeline
        .iter()
        .filter(|e| e.message.contains("the store came back as it was 8m"))
        .count();
    assert_eq!(restored, 1, "the restore happened");
    let adopted = report
        .timeline
        .iter()
        .filter(|e| e.reason == "MachineAdopted")
        .count();
    assert_eq!(adopted, 5, "three control-plane machines and two workers");
    // Every machine carries the digest of its template in its tags, so each adopted one
    // is known to be current: nothing is rolled, nothing made again. (Before the tag,
    // the control plane's version was unknown after a restore and its three machines
    // were rolled once: 5 + 3 creates.)
    assert_eq!(
        report.api_calls["nova"]["POST /servers"], 5,
        "the build only"
    );
}
