//! The embedded simulator's own records of a cluster, for `GET /api/v1/sim/objects`.

use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_sim::SimCloud;

use crate::types::SimObjects;

/// OpenNebula's DONE state: the VM is gone, though the pool keeps its record.
const ONE_VM_DONE: u32 = 6;

pub fn sim_objects(cloud: &SimCloud, cluster: &str) -> SimObjects {
    let world = cloud.snapshot();
    let tagged = |tags: &[String]| {
        tags.iter()
            .any(|t| t.strip_prefix(TAG_CLUSTER) == Some(cluster))
    };
    let mut out = SimObjects {
        cluster: cluster.to_string(),
        ..SimObjects::default()
    };
    let mut count = |kind: &str, n: usize| {
        out.objects.insert(kind.to_string(), n);
    };
    count(
        "servers",
        world.servers.iter().filter(|x| tagged(&x.tags)).count(),
    );
    count(
        "securityGroups",
        world
            .security_groups
            .iter()
            .filter(|x| tagged(&x.tags))
            .count(),
    );
    count(
        "loadBalancers",
        world
            .load_balancers
            .iter()
            .filter(|x| tagged(&x.tags))
            .count(),
    );
    count(
        "listeners",
        world.listeners.iter().filter(|x| tagged(&x.tags)).count(),
    );
    count(
        "pools",
        world.pools.iter().filter(|x| tagged(&x.tags)).count(),
    );
    count(
        "healthMonitors",
        world
            .health_monitors
            .iter()
            .filter(|x| tagged(&x.tags))
            .count(),
    );
    count(
        "members",
        world.members.iter().filter(|x| tagged(&x.tags)).count(),
    );
    count(
        "openNebulaVms",
        world
            .one_vms
            .iter()
            .filter(|x| x.state != ONE_VM_DONE && tagged(&x.tags))
            .count(),
    );
    count(
        "kubevirtVms",
        world.kube.vms.iter().filter(|x| tagged(&x.tags)).count(),
    );
    count(
        "kubevirtVmis",
        world
            .kube
            .vmis
            .iter()
            .filter(|x| !x.deleting && tagged(&x.tags))
            .count(),
    );
    out.routes = world
        .routers
        .iter()
        .flat_map(|r| {
            r.routes
                .iter()
                .map(move |x| format!("{}: {} via {}", r.name, x.destination, x.nexthop))
        })
        .collect();
    out.shared = world
        .one_templates
        .iter()
        .map(|t| format!("template {}", t.name))
        .chain(world.one_images.iter().map(|i| format!("image {}", i.name)))
        .collect();
    out
}
