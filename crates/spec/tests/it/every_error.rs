//! A bad spec file reports every error it holds at once, each with its document, field
//! and line, and each once: a new user fixes the file in one pass, not one error a run.

use flightdeck_spec::load::ERRORS_MAX;
use flightdeck_spec::{SpecError, load_documents};

/// A valid cluster whose lines are known: `metadata.name` on line 4, `replicas` on 7,
/// `podCIDR` on 11, `securityGroup` on 12, `flight:` on 15 (each document is 17 lines).
fn cluster(name: &str, flight: &str) -> String {
    format!(
        "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata:
  name: {name}
spec:
  controlPlane:
    replicas: 3
    version: v1.30.2
    machine: {{flavor: m1.large, image: ubuntu}}
  network:
    podCIDR: 10.244.0.0/16
    securityGroup: {name}
  provider:
    openstack: {{cloud: sim, network: private, subnet: private-subnet, router: r1}}
  flight:
{flight}"
    )
}

const GOOD_FLIGHT: &str = "    churnLimit: 3\n    resyncPeriod: 5m\n";

fn rejected(text: &str) -> SpecError {
    match load_documents(text, "test.yaml") {
        Ok(docs) => panic!("accepted an invalid spec: {} document(s)", docs.len()),
        Err(e) => e,
    }
}

/// Each error as (document from 1, path, line).
fn where_each(e: &SpecError) -> Vec<(usize, String, Option<usize>)> {
    e.all()
        .map(|e| (e.document + 1, e.path.clone(), e.line))
        .collect()
}

#[test]
fn a_file_with_three_bad_fields_reports_all_three_with_their_lines() {
    // Document 1 breaks two independent rules; document 2 holds a value no field takes.
    let text = format!(
        "{}---\n{}",
        cluster("a", "    churnLimit: 0\n    resyncPeriod: 1s\n"),
        cluster("b", GOOD_FLIGHT).replace("replicas: 3", "replicas: 2"),
    );
    let e = rejected(&text);
    assert_eq!(
        where_each(&e),
        [
            (1, "spec.flight.churnLimit".to_string(), Some(16)),
            (1, "spec.flight.resyncPeriod".to_string(), Some(17)),
            (2, "spec.controlPlane.replicas".to_string(), Some(25)),
        ],
        "{e}"
    );
    let shown = e.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "one line per error:\n{shown}");
    assert!(
        lines[0].starts_with(
            "test.yaml:16:5: document 1: spec.flight.churnLimit: must be between 1 and 100"
        ),
        "{shown}"
    );
    assert!(
        lines[1].starts_with("test.yaml:17:5: document 1: spec.flight.resyncPeriod: 1s is shorter"),
        "{shown}"
    );
    assert!(
        lines[2].starts_with("test.yaml:25:")
            && lines[2].contains(
                "document 2: spec.controlPlane.replicas: control-plane replicas must be 1, 3 or 5"
            ),
        "{shown}"
    );
}

#[test]
fn each_error_is_shown_once() {
    let text = format!(
        "{}---\n{}",
        cluster("a", "    churnLimit: 0\n"),
        cluster("b", "    churnLimit: 0\n"),
    );
    let shown = rejected(&text).to_string();
    assert_eq!(shown.matches("churnLimit").count(), 2, "{shown}");
    assert_eq!(shown.lines().count(), 2, "{shown}");
}

#[test]
fn a_document_that_fails_to_parse_does_not_hide_the_next_ones() {
    let text = format!(
        "{}---\n{}---\n{}",
        cluster("a", GOOD_FLIGHT).replace("v1.30.2", "1.30"),
        cluster("b", GOOD_FLIGHT).replace("kind: Cluster", "kind: Machine"),
        cluster("c", "    resyncPeriod: 1s\n"),
    );
    let e = rejected(&text);
    assert_eq!(
        where_each(&e),
        [
            (1, "spec.controlPlane.version".to_string(), Some(7)),
            (2, "kind".to_string(), Some(20)),
            (3, "spec.flight.resyncPeriod".to_string(), Some(52)),
        ],
        "{e}"
    );
}

#[test]
fn rules_across_clusters_are_reported_beside_each_cluster_s_own_errors() {
    // b reuses a's name and c's pod network overlaps a's on router r1; d is bad alone.
    let text = format!(
        "{}---\n{}---\n{}---\n{}",
        cluster("a", GOOD_FLIGHT),
        cluster("b", GOOD_FLIGHT)
            .replace("name: b", "name: a")
            .replace("10.244.0.0/16", "10.245.0.0/16"),
        cluster("c", GOOD_FLIGHT).replace("10.244.0.0/16", "10.244.128.0/17"),
        cluster("d", "    churnLimit: 0\n"),
    );
    let e = rejected(&text);
    assert_eq!(
        where_each(&e),
        [
            (2, "metadata.name".to_string(), Some(22)),
            (3, "spec.network.podCIDR".to_string(), Some(47)),
            (4, "spec.flight.churnLimit".to_string(), Some(70)),
        ],
        "{e}"
    );
}

#[test]
fn unreadable_yaml_ends_the_check_but_the_documents_before_it_are_still_checked() {
    let text = format!(
        "{}---\nkind: [unclosed\n---\n{}",
        cluster("a", "    churnLimit: 0\n"),
        cluster("c", "    churnLimit: 0\n"),
    );
    let e = rejected(&text);
    let found = where_each(&e);
    assert_eq!(found.len(), 2, "{e}");
    assert_eq!(
        found[0],
        (1, "spec.flight.churnLimit".to_string(), Some(16))
    );
    assert_eq!(found[1].0, 2, "{e}");
    assert!(found[1].2.is_some(), "{e}");
}

#[test]
fn a_scenario_reports_every_bad_step() {
    let text = "apiVersion: flightdeck.dev/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  duration: 10m
  clusters: [{file: x.yaml}]
  workload:
    - {at: 20m, action: delete, cluster: a}
    - {at: 1m, action: scale, cluster: a}
  expect:
    faults:
      - {what: no.suchFault}
";
    let e = rejected(text);
    let paths: Vec<&str> = e.all().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.expect.faults[0].what",
            "spec.workload[0].at",
            "spec.workload[1].replicas",
        ],
        "{e}"
    );
    assert!(e.all().all(|e| e.line.is_some()), "{e}");
}

#[test]
fn a_file_with_more_errors_than_the_bound_stops_and_says_so() {
    let docs: Vec<String> = (0..ERRORS_MAX + 10)
        .map(|i| cluster(&format!("c{i}"), "    churnLimit: 0\n"))
        .collect();
    let e = rejected(&docs.join("---\n"));
    let all: Vec<&SpecError> = e.all().collect();
    assert_eq!(all.len(), ERRORS_MAX + 1, "{e}");
    assert!(all[ERRORS_MAX].message.contains("stopped after"), "{e}");
}
