//! What a spec may ask for: machines per cluster and per file, a pod network large
//! enough for its nodes, one definition per cluster name, no pod networks that collide on
//! a shared router, and YAML that cannot cost the parser the square of its size.

use flightdeck_spec::{SpecError, load_documents};

fn cluster(name: &str, pod_cidr: &str, router: Option<&str>, pools: &str) -> String {
    let router = router.map_or(String::new(), |r| format!(", router: {r}"));
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
  nodePools:{pools}
  network:
    podCIDR: {pod_cidr}
    securityGroup: {name}
  provider:
    openstack: {{cloud: sim, network: private, subnet: private-subnet{router}}}
"
    )
}

fn rejected(text: &str) -> SpecError {
    match load_documents(text, "test.yaml") {
        Ok(docs) => panic!("accepted an invalid spec: {} document(s)", docs.len()),
        Err(e) => e,
    }
}

fn pools(n: usize, replicas: u32) -> String {
    (0..n)
        .map(|i| {
            format!(
                "\n  - {{name: p{i}, replicas: {replicas}, machine: {{flavor: m1, image: ubuntu}}}}"
            )
        })
        .collect()
}

#[test]
fn a_pod_network_too_small_for_the_machines_is_refused() {
    // A /22 holds four /24 node ranges: 3 control-plane machines and the surge fit.
    let ok = cluster("a", "10.244.0.0/22", None, " []");
    load_documents(&ok, "test.yaml").expect("fits");
    let e = rejected(&cluster("a", "10.244.0.0/23", None, " []"));
    assert_eq!(e.path, "spec.network.podCIDR", "{e}");
    assert!(e.message.contains("may have 4 machines at once"), "{e}");
    let e = rejected(&cluster("a", "10.244.0.0/25", None, " []"));
    assert!(e.message.contains("0 node range"), "{e}");
}

#[test]
fn too_many_machines_or_pools_in_one_cluster_are_refused() {
    let e = rejected(&cluster("a", "10.0.0.0/8", None, &pools(6, 200)));
    assert!(
        e.message
            .contains("1203 machines; a cluster has at most 1000"),
        "{e}"
    );
    let e = rejected(&cluster("a", "10.0.0.0/8", None, &pools(51, 1)));
    assert!(e.message.contains("51 node pools"), "{e}");
}

#[test]
fn a_cluster_name_defined_twice_is_refused_at_the_second() {
    let text = format!(
        "{}---\n{}",
        cluster("a", "10.244.0.0/16", None, " []"),
        cluster("a", "10.245.0.0/16", None, " []")
    );
    let e = rejected(&text);
    assert_eq!((e.document, e.path.as_str()), (1, "metadata.name"), "{e}");
    assert!(e.message.contains("already defined by document 1"), "{e}");
}

#[test]
fn overlapping_pod_networks_on_one_router_are_refused_and_elsewhere_allowed() {
    let shared = format!(
        "{}---\n{}",
        cluster("a", "10.244.0.0/16", Some("r1"), " []"),
        cluster("b", "10.244.128.0/17", Some("r1"), " []")
    );
    let e = rejected(&shared);
    assert_eq!(e.path, "spec.network.podCIDR", "{e}");
    assert!(e.message.contains("router \"r1\""), "{e}");
    let apart = format!(
        "{}---\n{}",
        cluster("a", "10.244.0.0/16", Some("r1"), " []"),
        cluster("b", "10.244.0.0/16", Some("r2"), " []")
    );
    load_documents(&apart, "test.yaml").expect("different routers");
}

#[test]
fn deeply_nested_yaml_is_refused_with_its_line_before_parsing() {
    let text = format!(
        "apiVersion: flightdeck.dev/v1alpha1\nkind: Cluster\nspec: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let e = rejected(&text);
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.message.contains("nested deeper than 64"), "{e}");
}
