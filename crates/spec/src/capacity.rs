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

/// The rules of one cluster: every one broken, as (field path, problem).
pub fn check_cluster(c: &Cluster) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if c.spec.node_pools.len() > POOLS_MAX {
        out.push((
            "spec.nodePools".into(),
            format!(
                "{} node pools; a cluster has at most {POOLS_MAX}",
                c.spec.node_pools.len()
            ),
        ));
    }
    let (wanted, at_once) = machines(c);
    if wanted > MACHINES_MAX {
        out.push((
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
        out.push((
            "spec.network.podCIDR".into(),
            format!(
                "{pod} holds {ranges} node range(s) of /{node_prefix}, but the cluster may have {at_once} machines at once ({wanted} and the surge of each set)"
            ),
        ));
    }
    out
}

/// The rules across the clusters of one file, given as (document index, cluster):
/// every one broken, as (document, field path, problem). Each cluster gets at most one
/// problem per rule (the first earlier cluster it collides with), so the list grows
/// with the clusters, not with their pairs.
pub fn check_file(clusters: &[(usize, &Cluster)]) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut too_many_told = false;
    for (n, &(doc, c)) in clusters.iter().enumerate() {
        total += machines(c).0;
        if total > FILE_MACHINES_MAX && !too_many_told {
            too_many_told = true;
            out.push((
                doc,
                "spec".into(),
                format!("the file asks for more than {FILE_MACHINES_MAX} machines"),
            ));
        }
        let earlier = &clusters[..n];
        let a = c.spec.network.pod_cidr;
        let same_name = earlier.iter().position(|(_, o)| o.name() == c.name());
        let overlap = earlier.iter().position(|(_, other)| {
            let b = other.spec.network.pod_cidr;
            router(c).is_some() && router(c) == router(other) && (a.covers(&b) || b.covers(&a))
        });
        let mut found = Vec::new();
        if let Some(j) = same_name {
            let (other_doc, _) = earlier[j];
            let why = format!(
                "cluster {:?} is already defined by document {}",
                c.name().as_str(),
                other_doc + 1
            );
            found.push((j, 0, "metadata.name", why));
        }
        if let Some(j) = overlap {
            let (other_doc, other) = earlier[j];
            let why = format!(
                "{a} overlaps {} of cluster {:?} (document {}), and both route pods on router {:?}",
                other.spec.network.pod_cidr,
                other.name().as_str(),
                other_doc + 1,
                router(c).unwrap_or_default()
            );
            found.push((j, 1, "spec.network.podCIDR", why));
        }
        // In the order of the earlier cluster each one collides with.
        found.sort_by_key(|&(j, rule, _, _)| (j, rule));
        out.extend(
            found
                .into_iter()
                .map(|(_, _, path, why)| (doc, path.to_string(), why)),
        );
    }
    out
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
