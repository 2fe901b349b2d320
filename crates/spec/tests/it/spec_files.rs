//! Spec files as users write them: every shipped example parses, and every kind of
//! mistake is rejected with the field path and the line.

use std::path::Path;

use flightdeck_spec::{Document, SpecError, load_documents, load_file};

const VALID: &str = "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  controlPlane:
    replicas: 3
    version: v1.30.2
    machine: {flavor: m1.large, image: ubuntu}
  network:
    podCIDR: 10.244.0.0/16
    securityGroup: demo
  provider:
    openstack: {cloud: sim, network: private, subnet: private-subnet}
";

fn rejected(text: &str) -> SpecError {
    match load_documents(text, "test.yaml") {
        Ok(docs) => panic!("accepted an invalid spec: {docs:?}"),
        Err(e) => e,
    }
}

#[test]
fn a_minimal_cluster_gets_every_default() {
    let docs = load_documents(VALID, "test.yaml").expect("valid");
    let [Document::Cluster(c)] = docs.as_slice() else {
        panic!("one cluster expected")
    };
    let f = &c.spec.flight;
    assert_eq!(f.member_timeout.to_string(), "5m");
    assert_eq!(f.node_startup_timeout.to_string(), "10m");
    assert_eq!(f.max_unhealthy.to_string(), "40%");
    assert_eq!(f.max_surge.get(), 1);
    assert_eq!(c.spec.api_load_balancer.port.get(), 6443);
    assert!(c.spec.api_load_balancer.health_monitor.is_none());
    assert!(c.spec.node_pools.is_empty());
}

#[test]
fn a_pod_cidr_with_a_33_bit_prefix_is_rejected_naming_the_field_and_line() {
    let e = rejected(&VALID.replace("10.244.0.0/16", "10.0.0.0/33"));
    assert_eq!(e.path, "spec.network.podCIDR");
    assert_eq!(e.line, Some(11));
    assert!(e.message.contains("longer than 32"), "{e}");
    assert!(e.to_string().contains("test.yaml:11"), "{e}");
}

#[test]
fn two_control_plane_replicas_are_rejected() {
    let e = rejected(&VALID.replace("replicas: 3", "replicas: 2"));
    assert_eq!(e.path, "spec.controlPlane.replicas");
    assert_eq!(e.line, Some(7));
    assert!(e.message.contains("1, 3 or 5"), "{e}");
}

#[test]
fn an_unknown_field_is_rejected_naming_it() {
    let e = rejected(&VALID.replace(
        "    securityGroup: demo\n",
        "    securityGroup: demo\n    securityGroups: [x]\n",
    ));
    assert_eq!(e.path, "spec.network.securityGroups");
    assert!(e.message.contains("unknown field `securityGroups`"), "{e}");
    assert_eq!(e.line, Some(13));
}

#[test]
fn a_wrong_type_is_rejected_naming_the_field() {
    let e = rejected(&VALID.replace("replicas: 3", "replicas: three"));
    assert_eq!(e.path, "spec.controlPlane.replicas");
    assert!(e.message.contains("invalid type"), "{e}");
}

#[test]
fn a_duration_without_a_unit_is_rejected() {
    let e = rejected(&format!("{VALID}  flight:\n    memberTimeout: 300\n"));
    assert_eq!(e.path, "spec.flight.memberTimeout");
    assert!(e.message.contains("unit"), "{e}");
}

#[test]
fn a_missing_field_and_a_missing_provider_are_rejected() {
    let e = rejected(&VALID.replace("    version: v1.30.2\n", ""));
    assert!(e.message.contains("missing field `version`"), "{e}");
    let e = rejected(&VALID.replace(
        "    openstack: {cloud: sim, network: private, subnet: private-subnet}\n",
        "    {}\n",
    ));
    assert_eq!(e.path, "spec.provider");
}

#[test]
fn cross_field_rules_name_the_field() {
    let two_pools = format!(
        "{VALID}  nodePools:\n    - {{name: w, replicas: 1, machine: {{flavor: f, image: i}}}}\n    - {{name: w, replicas: 2, machine: {{flavor: f, image: i}}}}\n"
    );
    let e = rejected(&two_pools);
    assert_eq!(e.path, "spec.nodePools[1].name");
    let bad_hm = VALID.replace(
        "  provider:",
        "  apiLoadBalancer:\n    healthMonitor: {delay: 2s, timeout: 5s}\n  provider:",
    );
    let e = rejected(&bad_hm);
    assert_eq!(e.path, "spec.apiLoadBalancer.healthMonitor.timeout");
}

#[test]
fn a_pod_cidr_wider_than_a_slash_8_and_fractional_monitor_seconds_are_rejected() {
    let e = rejected(&VALID.replace("10.244.0.0/16", "0.0.0.0/0"));
    assert_eq!(e.path, "spec.network.podCIDR");
    assert!(e.message.contains("wider than /8"), "{e}");
    let e = rejected(&VALID.replace(
        "  provider:",
        "  apiLoadBalancer:\n    healthMonitor: {delay: 1500ms, timeout: 1s}\n  provider:",
    ));
    assert_eq!(e.path, "spec.apiLoadBalancer.healthMonitor.delay");
}

#[test]
fn a_file_may_hold_several_documents_and_errors_name_the_document() {
    let two = format!("{VALID}---\n{}", VALID.replace("name: demo", "name: other"));
    let docs = load_documents(&two, "test.yaml").expect("two clusters");
    assert_eq!(docs.len(), 2);
    let broken = format!("{VALID}---\n{}", VALID.replace("v1.30.2", "1.30"));
    let e = rejected(&broken);
    assert_eq!(e.document, 1);
    assert_eq!(e.path, "spec.controlPlane.version");
    assert_eq!(
        e.line,
        Some(22),
        "line numbers count from the top of the file"
    );
}

#[test]
fn unknown_kinds_and_api_versions_are_rejected() {
    let e = rejected(&VALID.replace("kind: Cluster", "kind: Machine"));
    assert_eq!(e.path, "kind");
    let e = rejected(&VALID.replace("v1alpha1", "v2"));
    assert_eq!(e.path, "apiVersion");
    let e = rejected("just a string");
    assert!(e.message.contains("mapping"), "{e}");
    let e = rejected("a: [unclosed");
    assert!(e.line.is_some(), "{e}");
}

#[test]
fn every_shipped_example_and_scenario_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut seen = 0;
    for dir in ["examples", "scenarios"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                load_file(&path).unwrap_or_else(|e| panic!("{e}"));
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 5,
        "expected the shipped examples and scenarios, found {seen}"
    );
}

#[test]
fn scenario_faults_reject_parameters_their_kind_does_not_take() {
    let s = "apiVersion: flightdeck.dev/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  duration: 10m
  clusters: [{file: x.yaml}]
  faults:
    - {at: 1m, kind: api.errorRate, service: nova}
";
    let e = rejected(s);
    assert_eq!(e.path, "spec.faults[0].rate");
    let e = rejected(&s.replace("service: nova", "service: nova, rate: 2"));
    assert!(e.message.contains("(0, 1]"), "{e}");
    let e = rejected(&s.replace("kind: api.errorRate, service: nova", "kind: nova.meltdown"));
    assert_eq!(e.path, "spec.faults[0].kind");
    // A scenario's watch carries at most one event per node in an answer: a fault that
    // reorders them would change nothing, so it is refused rather than counted as drawn.
    let e = rejected(&s.replace(
        "kind: api.errorRate, service: nova",
        "kind: k8s.watchReorder",
    ));
    assert_eq!(e.path, "spec.faults[0].kind");
    assert!(e.message.contains("only a watch"), "{e}");
}
