//! What several scenario tests start from.

use flightdeck_spec::{Cluster, Document, load_file};

/// The cluster of `examples/openstack.yaml`.
pub fn example() -> Cluster {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/openstack.yaml");
    match load_file(&path).expect("example parses").pop() {
        Some(Document::Cluster(c)) => *c,
        _ => panic!("the example is a cluster"),
    }
}
