//! The runner never skips due work: a fleet of many clusters on a cloud that adds 50 ms
//! to every call is still reconciled at its resync pace, every cluster of it
//! (`reconcilePace`, checked after every step).

use flightdeck_scenario::{RunOptions, load_scenario, run};

const CLUSTERS: usize = 40;

fn fleet() -> String {
    (1..=CLUSTERS)
        .map(|i| {
            format!(
                "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata: {{name: c{i}}}
spec:
  controlPlane:
    replicas: 1
    version: v1.30.2
    machine: {{flavor: m1.large, image: ubuntu-2204-kube-v1.30.2}}
  nodePools:
    - name: workers
      replicas: 1
      machine: {{flavor: m1.xlarge, image: ubuntu-2204-kube-v1.30.2}}
  network: {{podCIDR: 10.{i}.0.0/16, securityGroup: c{i}-nodes}}
  provider:
    openstack: {{cloud: sim, network: private, subnet: private-subnet}}
"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

const SCENARIO: &str = "apiVersion: flightdeck.dev/v1alpha1
kind: Scenario
metadata: {name: slow-cloud-many-clusters}
spec:
  description: 40 clusters, 50 ms added to every call
  seed: 7
  duration: 40m
  clusters:
    - file: fleet.yaml
  faults:
    - {at: 0s, kind: api.latency, service: nova, latency: 50ms}
    - {at: 0s, kind: api.latency, service: neutron, latency: 50ms}
    - {at: 0s, kind: api.latency, service: octavia, latency: 50ms}
    - {at: 0s, kind: api.latency, service: kubernetes, latency: 50ms}
  expect:
    invariants: [reconcilePace, onlyOwned, apiEndpointServing]
";

#[tokio::test]
async fn every_cluster_of_a_large_fleet_on_a_slow_cloud_is_reconciled_at_its_resync_pace() {
    let dir = std::env::temp_dir().join(format!("flightdeck-pace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("fleet.yaml"), fleet()).expect("fleet");
    std::fs::write(dir.join("pace.yaml"), SCENARIO).expect("scenario");
    let loaded =
        load_scenario(dir.join("pace.yaml").to_str().expect("utf-8 path")).expect("scenario loads");
    let report = run(&loaded, &RunOptions::default(), &mut |_| {})
        .await
        .expect("run completes")
        .report;
    let _ = std::fs::remove_dir_all(&dir);
    let pace = report
        .invariants
        .iter()
        .find(|v| v.name == "reconcilePace")
        .expect("checked");
    assert!(pace.held, "{pace:#?}");
    // Checked for every cluster after every step, through the whole 40 minutes.
    assert!(pace.checks > (CLUSTERS as u64) * 100, "{pace:#?}");
    assert!(report.virtual_seconds >= 2400.0);
    // 40 minutes at a 5-minute resync is at least 8 reconciles per cluster.
    assert!(
        report.engine.reconciles >= (CLUSTERS as u64) * 8,
        "{:?}",
        report.engine
    );
    assert!(report.passed, "{:#?}", report.invariants);
}
