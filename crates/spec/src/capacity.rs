//! Limits on how many machines a spec asks for, and rules across the clusters of one
//! file:
//! - a cluster has at most [`POOLS_MAX`] pools and [`MACHINES_MAX`] machines;
//! - its pod CIDR holds a per-node range for every machine it may have at once (its
//!   replicas plus each set's surge): Kubernetes gives each node a /24 (IPv4) or a /64
//!   (IPv6) by default (`kube-controller-manager --node-cidr-mask-size`);
//! - a file holds at most [`FILE_MACHINES_MAX`] machines, no cluster name twice, and no
//!   two clusters whose pod CIDRs overlap on the same router (their routes would collide).

use crate::Cluster;

/// The most node pools one cluster may have.
pub const POOLS_MAX: usize = 50;
/// The most machines (replicas of every set) one cluster may have.
pub const MACHINES_MAX: u64 = 1_000;
/// The most machines one spec file may ask for.
pub const FILE_MACHINES_MAX: u64 = 100_000;

/// The machines `c` asks for, and the most it may have at once during a rollout.
fn machines(c: &Cluster) -> (u64, u64) {
    let surge = u64::from(c.spec.flight.max_surge.get());
    let cp = u64::from(c.spec.control_plane.replicas.get());
    let pools: u64 = c
        .spec
        .node_pools
        .iter()
        .map(|p| u64::from(p.replicas.get()))
        .sum();
    let sets = 1 + c.spec.node_pools.len() as u64;
    (cp + pools, cp + pools + surge * sets)
}

/// The rules of one cluster.
pub fn check_cluster(c: &Cluster) -> Result<(), (String, String)> {
    if c.spec.node_pools.len() > POOLS_MAX {
        return Err((
            "spec.nodePools".into(),
            format!(
                "{} node pools; a cluster has at most {POOLS_MAX}",
                c.spec.node_pools.len()
            ),
        ));
    }
    let (wanted, at_once) = machines(c);
    if wanted > MACHINES_MAX {
        return Err((
            "spec.nodePools".into(),
            format!("{wanted} machines; a cluster has at most {MACHINES_MAX}"),
        ));
    }
    let pod = c.spec.network.pod_cidr;
    let node_prefix: u32 = if pod.addr().is_ipv4() { 24 } else { 64 };
    let prefix = u32::from(pod.prefix());
    let ranges = if prefix > node_prefix {
        0
    } else {
        1u64.checked_shl(node_prefix - prefix).unwrap_or(u64::MAX)
    };
    if ranges < at_once {
        return Err((
            "spec.network.podCIDR".into(),
            format!(
                "{pod} holds {ranges} node range(s) of /{node_prefix}, but the cluster may have {at_once} machines at once ({wanted} and the surge of each set)"
            ),
        ));
    }
    Ok(())
}

/// The rules across the clusters of one file, given as (document index, cluster):
/// the document and field of the first one broken.
pub fn check_file(clusters: &[(usize, &Cluster)]) -> Result<(), (usize, String, String)> {
    let mut total = 0u64;
    for (n, &(doc, c)) in clusters.iter().enumerate() {
        total += machines(c).0;
        if total > FILE_MACHINES_MAX {
            return Err((
                doc,
                "spec".into(),
                format!("the file asks for more than {FILE_MACHINES_MAX} machines"),
            ));
        }
        for &(other_doc, other) in &clusters[..n] {
            if other.name() == c.name() {
                return Err((
                    doc,
                    "metadata.name".into(),
                    format!(
                        "cluster {:?} is already defined by document {}",
                        c.name().as_str(),
                        other_doc + 1
                    ),
                ));
            }
            let (a, b) = (c.spec.network.pod_cidr, other.spec.network.pod_cidr);
            if router(c).is_some() && router(c) == router(other) && (a.covers(&b) || b.covers(&a)) {
                return Err((
                    doc,
                    "spec.network.podCIDR".into(),
                    format!(
                        "{a} overlaps {b} of cluster {:?} (document {}), and both route pods on router {:?}",
                        other.name().as_str(),
                        other_doc + 1,
                        router(c).unwrap_or_default()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Why `c` and `other` cannot live side by side: their pod CIDRs overlap and both
/// route pods on the same router (of the same cloud entry), so each would take the
/// other's routes for its own.
pub fn routes_collide(c: &Cluster, other: &Cluster) -> Option<String> {
    let (a, b) = (c.spec.network.pod_cidr, other.spec.network.pod_cidr);
    let cloud = |x: &Cluster| {
        x.spec
            .provider
            .openstack
            .as_ref()
            .map(|o| o.cloud.to_string())
    };
    let shared = router(c).is_some() && router(c) == router(other) && cloud(c) == cloud(other);
    (shared && (a.covers(&b) || b.covers(&a))).then(|| {
        format!(
            "cluster {:?}: pod CIDR {a} overlaps {b} of cluster {:?}, and both route pods on router {:?}",
            c.name().as_str(),
            other.name().as_str(),
            router(c).unwrap_or_default()
        )
    })
}

fn router(c: &Cluster) -> Option<&str> {
    c.spec
        .provider
        .openstack
        .as_ref()
        .and_then(|o| o.router.as_ref())
        .map(|r| r.as_str())
}
