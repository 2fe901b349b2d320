//! One test per ground-truth check, each on a world broken on purpose: a healthy
//! `examples/openstack.yaml` cluster (three control-plane machines, two workers, their
//! members, rules and routes) built in the simulator's own world type, then one thing
//! taken away or added. Each check must name the damage, and say nothing of the
//! healthy world.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use flightdeck_cloud::ownership::{Ownership, Role};
use flightdeck_cloud::{
    Member, Node, OperatingStatus, ProvisioningStatus, Route, Router, SecurityGroup,
    SecurityGroupRule, Server, ServerStatus, SimClock, Timestamp,
};
use flightdeck_sim::{
    KubeObjectView, Mutation, MutationKind, ServingSpell, SimCloud, SimConfig, World,
};
use flightdeck_spec::Cluster;
use flightdeck_spec::{Document, load_documents};

use crate::converge_check::cluster_problem;
use crate::flight::network_problem;
use crate::invariants::leaks;
use crate::owned::Owned;
use crate::repair_check::RepairCheck;
use crate::serving::ServingCheck;
use crate::track::ClusterTrack;
use crate::track::SetBounds;

const UID: &str = "0123456789abcdef";
const MACHINES: [&str; 5] = ["cp-1", "cp-2", "cp-3", "workers-4", "workers-5"];

fn spec() -> Cluster {
    let text = include_str!("../../../examples/openstack.yaml");
    match load_documents(text, "examples/openstack.yaml")
        .expect("the example parses")
        .remove(0)
    {
        Document::Cluster(c) => *c,
        Document::Scenario(_) => panic!("the example is a cluster"),
    }
}

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: UID.into(),
    }
}

fn address(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10 + i as u8))
}

fn pod(i: usize) -> String {
    format!("10.244.{i}.0/24")
}

/// The cluster as it should be: every machine ACTIVE with a Ready node, every
/// control-plane member ONLINE and serving for a minute, its three rules, one route per
/// node on `demo-router`.
fn healthy() -> (World, ClusterTrack) {
    let start = Timestamp::SIM_EPOCH;
    let mut world = SimCloud::new(SimConfig::default(), 1, SimClock::new(start)).snapshot();
    let now = start.plus_millis(3_600_000);
    world.now = now;
    let o = owner();
    let spec = spec();
    let mut routes = Vec::new();
    for (i, key) in MACHINES.iter().enumerate() {
        let id = format!("server-{i}");
        let (image, flavor) = if key.starts_with("cp") {
            ("ubuntu-2204-kube-v1.30.2", "m1.large")
        } else {
            ("ubuntu-2204-kube-v1.30.2", "m1.xlarge")
        };
        world.servers.push(std::sync::Arc::new(Server {
            id: id.clone(),
            name: format!("demo-{key}"),
            status: ServerStatus::Active,
            task_state: None,
            tags: o.tags(&Role::Machine(key.to_string())),
            security_groups: vec!["demo-nodes".into()],
            address: Some(address(i)),
            image: image.into(),
            flavor: flavor.into(),
            fault: None,
            created_at: start,
        }));
        world.nodes.push((
            UID.into(),
            Node {
                name: format!("demo-{key}"),
                server_id: Some(id.clone()),
                ready: true,
                unschedulable: false,
                created_at: start,
                pod_cidr: Some(pod(i)),
                internal_ip: Some(address(i)),
                labels: Default::default(),
                taints: Vec::new(),
                hold_deletion: None,
            },
        ));
        routes.push(Route {
            destination: pod(i),
            nexthop: address(i),
        });
        if key.starts_with("cp") {
            let member = format!("member-{i}");
            world.members.push(Member {
                id: member.clone(),
                name: format!("demo-{key}"),
                pool_id: "pool".into(),
                address: address(i),
                protocol_port: 6443,
                provisioning_status: ProvisioningStatus::Active,
                operating_status: OperatingStatus::Online,
                tags: o.tags(&Role::Machine(key.to_string())),
            });
            world
                .member_serving_since
                .insert(member, Timestamp(now.0 - 60_000));
        }
    }
    world.security_groups.push(SecurityGroup {
        id: "sg".into(),
        name: "demo-nodes".into(),
        tags: o.tags(&Role::SecurityGroup),
        rules: ["tcp", "udp", "icmp"]
            .into_iter()
            .map(|p| SecurityGroupRule {
                id: format!("rule-{p}"),
                direction: "ingress".into(),
                ethertype: "IPv4".into(),
                protocol: Some(p.into()),
                remote_ip_prefix: Some("10.244.0.0/16".into()),
            })
            .collect(),
    });
    world.routers.retain(|r| r.name != "demo-router");
    world.routers.push(Router {
        id: "router".into(),
        name: "demo-router".into(),
        tags: vec![],
        routes,
    });
    let mut track = ClusterTrack::new("demo", UID, &spec);
    track.ready_since = Some(start);
    track.note_addresses(&world);
    (world, track)
}

fn converged(world: &World, track: &ClusterTrack) -> Option<String> {
    let mut repairs = RepairCheck::default();
    let tracks = BTreeMap::from([("demo".to_string(), track.clone())]);
    repairs.look(world, &tracks, |_| None);
    cluster_problem(world, track, &spec(), &repairs)
}

#[test]
fn the_healthy_world_satisfies_every_check() {
    let (world, track) = healthy();
    assert_eq!(converged(&world, &track), None);
    assert_eq!(
        network_problem(&world, &Owned::of(&world), &track, &spec().spec),
        None
    );
}

#[test]
fn routes_consistent_sees_one_route_removed() {
    let (mut world, track) = healthy();
    world
        .routers
        .last_mut()
        .expect("the router")
        .routes
        .remove(3);
    let problem =
        network_problem(&world, &Owned::of(&world), &track, &spec().spec).expect("a missing route");
    assert!(
        problem.contains("missing route(s) [10.244.3.0/24 via 10.0.0.13 (node demo-workers-4)]"),
        "{problem}"
    );
}

#[test]
fn routes_consistent_sees_a_route_left_to_a_dead_machine() {
    let (mut world, track) = healthy();
    // workers-5 was deleted; its route stayed.
    world.servers.retain(|s| s.id != "server-4");
    world.nodes.retain(|(_, n)| n.name != "demo-workers-5");
    let problem =
        network_problem(&world, &Owned::of(&world), &track, &spec().spec).expect("a stale route");
    assert!(
        problem.contains("stale route(s) [10.244.4.0/24 via 10.0.0.14"),
        "{problem}"
    );
}

#[test]
fn rules_restored_sees_a_lost_rule() {
    let (mut world, track) = healthy();
    world
        .security_groups
        .last_mut()
        .expect("the group")
        .rules
        .retain(|r| r.protocol.as_deref() != Some("icmp"));
    let problem =
        network_problem(&world, &Owned::of(&world), &track, &spec().spec).expect("a missing rule");
    assert_eq!(problem, "pod-network rule(s) icmp missing");
}

fn delete_member(world: &World, id: &str, key: &str) -> Mutation {
    Mutation {
        at: world.now,
        service: "octavia",
        operation: "DELETE /v2/lbaas/pools/{pool_id}/members/{member_id}".into(),
        kind: MutationKind::Delete,
        target_id: id.into(),
        target_name: format!("demo-{key}"),
        target_tags: owner().tags(&Role::Machine(key.into())),
        ok: true,
        caller: None,
    }
}

#[test]
fn api_endpoint_serving_sees_a_member_deleted_out_of_turn() {
    let (world, track) = healthy();
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    let mut check = ServingCheck::default();
    assert!(check.check(&world, &[], (&[], 0), &tracks).is_empty());
    // A rollout deletes cp-1's member before any replacement serves: two of the three
    // replicas are left.
    let found = check.check(
        &world,
        &[delete_member(&world, "member-0", "cp-1")],
        (&[], 0),
        &tracks,
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .1
            .contains("demo-cp-1 (member-0) was deleted while only 2 other member(s) served"),
        "{}",
        found[0].1
    );
}

#[test]
fn api_endpoint_serving_lets_a_member_go_while_enough_others_serve() {
    let (mut world, track) = healthy();
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    // A fourth member (the surge's) serves: cp-1's may go.
    surge_member(&mut world, OperatingStatus::Online);
    world
        .member_serving_since
        .insert("member-surge".into(), Timestamp(world.now.0 - 1000));
    let mut check = ServingCheck::default();
    let _ = check.check(&world, &[], (&[], 0), &tracks);
    let delete = delete_member(&world, "member-0", "cp-1");
    assert!(check.check(&world, &[delete], (&[], 0), &tracks).is_empty());
}

/// A fourth member (the surge's), in the world with `status`.
fn surge_member(world: &mut World, status: OperatingStatus) {
    world.members.push(Member {
        id: "member-surge".into(),
        name: "demo-cp-6".into(),
        pool_id: "pool".into(),
        address: address(6),
        protocol_port: 6443,
        provisioning_status: ProvisioningStatus::Active,
        operating_status: status,
        tags: owner().tags(&Role::Machine("cp-6".into())),
    });
}

#[test]
fn api_endpoint_serving_counts_a_member_that_served_at_the_deletion_and_stopped_before_the_look() {
    // Swarm seed 27794876: the surge's member served when cp-1's was deleted, and went
    // offline (a fault) before the check looked. What served at the instant counts.
    let (mut world, track) = healthy();
    surge_member(&mut world, OperatingStatus::Offline);
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    let mut delete = delete_member(&world, "member-0", "cp-1");
    delete.at = Timestamp(world.now.0 - 10_000);
    let spell = ServingSpell {
        member_id: "member-surge".into(),
        since: Timestamp(world.now.0 - 60_000),
        until: Timestamp(world.now.0 - 5_000),
    };
    let mut check = ServingCheck::default();
    assert!(
        check
            .check(
                &world,
                &[delete.clone()],
                (std::slice::from_ref(&spell), 1),
                &tracks
            )
            .is_empty()
    );
    // Had it stopped before the deletion, only two would have served.
    let early = ServingSpell {
        until: Timestamp(world.now.0 - 20_000),
        ..spell
    };
    let found = ServingCheck::default().check(&world, &[delete], (&[early], 1), &tracks);
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn no_leaks_sees_a_route_and_a_secret_left_by_a_deleted_cluster() {
    let (mut world, mut track) = healthy();
    track.deletion_requested = true;
    let routes = world.routers.last().expect("the router").routes.clone();
    world.servers.clear();
    world.members.clear();
    world.security_groups.clear();
    world.nodes.clear();
    world.routers.last_mut().expect("the router").routes.clear();
    assert_eq!(leaks(&world, &track), None);
    world.routers.last_mut().expect("the router").routes = routes[..1].to_vec();
    world.kube.secrets.push(KubeObjectView {
        namespace: "default".into(),
        name: "demo-cp-1-userdata".into(),
        tags: owner().tags(&Role::Machine("cp-1".into())),
    });
    let left = leaks(&world, &track).expect("what was left");
    assert_eq!(
        left,
        "1 route(s) to its pod network via its servers, 1 Kubernetes Secret(s)"
    );
}

#[test]
fn convergence_sees_a_missing_machine_and_an_outdated_image() {
    let (mut world, track) = healthy();
    std::sync::Arc::make_mut(&mut world.servers[4]).image = "ubuntu-2004".into();
    let problem = converged(&world, &track).expect("an outdated machine");
    assert!(
        problem.contains("demo-workers-5 of set workers runs image ubuntu-2004"),
        "{problem}"
    );
    world.servers.remove(4);
    let problem = converged(&world, &track).expect("a missing machine");
    assert_eq!(
        problem,
        "demo: set workers has 1 live machine(s), the spec asks for 2"
    );
}

#[test]
fn convergence_sees_a_member_that_does_not_serve() {
    let (mut world, track) = healthy();
    world.member_serving_since.remove("member-2");
    world.members[2].operating_status = OperatingStatus::Error;
    let problem = converged(&world, &track).expect("a member down");
    assert!(problem.contains("3 member(s), 2 serving"), "{problem}");
}

fn extra_worker(world: &mut World, i: usize, status: ServerStatus) {
    let key = format!("workers-{i}");
    world.servers.push(std::sync::Arc::new(Server {
        id: format!("server-{i}"),
        name: format!("demo-{key}"),
        status,
        task_state: None,
        tags: owner().tags(&Role::Machine(key)),
        security_groups: vec![],
        address: Some(address(i)),
        image: "ubuntu-2204-kube-v1.30.2".into(),
        flavor: "m1.xlarge".into(),
        fault: None,
        created_at: world.now,
    }));
}

#[test]
fn remediation_within_budget_sees_two_repairs_where_one_is_allowed() {
    let (mut world, track) = healthy();
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    let mut check = RepairCheck::default();
    let found = check.look(&world, &tracks, |_| None);
    assert!(found.over_budget.is_empty());
    // maxUnhealthy 40% of 2 workers is 1: one replacement is fine, two are not.
    extra_worker(&mut world, 6, ServerStatus::Build);
    let found = check.look(&world, &tracks, |_| None);
    assert!(found.over_budget.is_empty(), "{:?}", found.over_budget);
    extra_worker(&mut world, 7, ServerStatus::Build);
    let found = check.look(&world, &tracks, |_| None);
    assert_eq!(found.over_budget.len(), 1);
    assert!(
        found.over_budget[0].contains("2 under repair, more than its budget of 1"),
        "{}",
        found.over_budget[0]
    );
}

#[test]
fn no_remediation_on_blind_observer_sees_a_repair_begun_blind() {
    let (mut world, track) = healthy();
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    let mut check = RepairCheck::default();
    let blind = |_: &str| Some("the node list was empty (observer.emptyNodeList)");
    check.look(&world, &tracks, blind);
    extra_worker(&mut world, 6, ServerStatus::Build);
    let found = check.look(&world, &tracks, blind);
    assert_eq!(found.grew.len(), 1);
    assert!(found.grew[0].1.contains("while the node list was empty"));
}

#[test]
fn a_repair_of_an_errored_server_is_no_blind_repair() {
    let (mut world, track) = healthy();
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    let mut check = RepairCheck::default();
    let blind = |_: &str| Some("the node list was empty (observer.emptyNodeList)");
    std::sync::Arc::make_mut(&mut world.servers[3]).status = ServerStatus::Error;
    check.look(&world, &tracks, blind);
    extra_worker(&mut world, 6, ServerStatus::Build);
    let found = check.look(&world, &tracks, blind);
    assert!(found.grew.is_empty(), "{:?}", found.grew);
    assert_eq!(found.started, 1);
}

#[test]
fn a_rollout_surge_is_no_repair() {
    let (mut world, mut track) = healthy();
    let mut check = RepairCheck::default();
    let tracks = BTreeMap::from([("demo".to_string(), track.clone())]);
    check.look(&world, &tracks, |_| None);
    // The workers' image changes: one surge machine is the rollout's, not a repair.
    let mut changed = spec();
    changed.spec.node_pools[0].machine.image =
        Some(flightdeck_spec::Text::new("v2").expect("text"));
    track.generation = 1;
    let mut sets = SetBounds::default();
    sets.refresh(&spec(), 0);
    sets.refresh(&changed, 1);
    track.sets = sets;
    let tracks = BTreeMap::from([("demo".to_string(), track)]);
    extra_worker(&mut world, 6, ServerStatus::Build);
    let found = check.look(&world, &tracks, |_| None);
    assert_eq!(found.started, 0);
}

#[test]
fn a_template_changed_and_changed_back_makes_the_first_machines_current_again() {
    let mut changed = spec();
    changed.spec.node_pools[0].machine.image =
        Some(flightdeck_spec::Text::new("v2").expect("text"));
    let mut sets = SetBounds::default();
    sets.refresh(&spec(), 0);
    let pool = changed.spec.node_pools[0].name.to_string();
    assert!(!sets.outdated_if_made_at(&pool, 0));
    sets.refresh(&changed, 1);
    assert!(
        sets.outdated_if_made_at(&pool, 0),
        "made under the first image"
    );
    assert!(!sets.outdated_if_made_at(&pool, 1));
    sets.refresh(&spec(), 2);
    assert!(
        !sets.outdated_if_made_at(&pool, 0),
        "the first image is back"
    );
    assert!(sets.outdated_if_made_at(&pool, 1), "made under v2");
    assert!(!sets.outdated_if_made_at(&pool, 2));
}
