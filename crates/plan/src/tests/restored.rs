//! A cluster taken up from a store that may be behind the cloud (restored from a backup):
//! machine names it handed out since are never handed out again, and what its machines
//! left on the router goes with them (F7, F11).

use flightdeck_cloud::Route;
use flightdeck_spec::Duration;

use super::*;
use crate::LIST_LAG_MAX;

const MIN: u64 = 60_000;

/// The cluster with 2 of the 3 workers its spec asks for, taken up from the store
/// `ago` before now.
fn taken_up(ago: Duration) -> World {
    let mut w = World::cluster(spec(V1, 3), V1, 2);
    w.taken_up = Some(Timestamp(T0.0 - ago.as_millis()));
    w
}

#[test]
fn f11_a_cluster_taken_up_from_the_store_makes_no_machine_under_a_new_name_while_a_list_may_lag() {
    let p = taken_up(Duration::from_millis(MIN)).plan();
    assert!(targets(&p, "CreateServer").is_empty(), "{:?}", p.actions);
    assert_eq!(p.memory.machine_seq, 5, "no name is handed out");
    let held = condition(&p, "NewMachinesHeld").expect("the cluster says why");
    assert!(held.message.contains("workers wants 1"), "{}", held.message);
    assert!(
        p.requeue_after
            .is_some_and(|d| d <= Duration::from_millis(LIST_LAG_MAX.as_millis() - MIN)),
        "it looks again by the end of the wait: {:?}",
        p.requeue_after
    );
    assert!(!p.status.ready);
    // Once every list must show what was made before it was taken up, it goes on.
    let p = taken_up(LIST_LAG_MAX).plan();
    assert_eq!(targets(&p, "CreateServer"), ["demo-workers-6"]);
    assert!(condition(&p, "NewMachinesHeld").is_none());
}

#[test]
fn f11_a_cluster_applied_to_this_engine_makes_its_machines_at_once() {
    let mut w = taken_up(Duration::ZERO);
    w.taken_up = None;
    assert_eq!(targets(&w.plan(), "CreateServer"), ["demo-workers-6"]);
}

#[test]
fn f11_a_machine_the_restored_store_forgot_is_adopted_once_listed_and_its_name_never_reused() {
    // The store forgot demo-workers-6 and -7, made before it was restored: -7 lives on,
    // -6 was deleted. Once a list shows -7, it is adopted and the set is whole.
    let mut w = taken_up(LIST_LAG_MAX);
    w.memory.machine_seq = 5;
    w.observed.servers.push(Server {
        id: "srv-workers-7".into(),
        name: "demo-workers-7".into(),
        status: ServerStatus::Active,
        task_state: None,
        tags: tags(Role::Machine("workers-7".into())),
        security_groups: vec!["demo-nodes".into()],
        address: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))),
        image: IMAGE.into(),
        flavor: "m1.xlarge".into(),
        fault: None,
        created_at: Timestamp(T0.0 - 8 * MIN),
    });
    let p = w.plan();
    assert!(targets(&p, "CreateServer").is_empty(), "{:?}", p.actions);
    assert!(p.memory.machines.contains_key("demo-workers-7"));
    assert_eq!(
        p.memory.machine_seq, 7,
        "neither 6 nor 7 is handed out again"
    );
}

#[test]
fn f11_a_name_a_load_balancer_member_carries_is_never_handed_out_again() {
    // Nova's list lags and shows no server of demo-cp-9; Octavia lists its member.
    let mut w = World::cluster(spec(V1, 3), V1, 2);
    let mut member = w.observed.members[0].clone();
    member.id = "mem-cp-9".into();
    member.name = "demo-cp-9".into();
    member.address = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
    member.tags = tags(Role::Machine("cp-9".into()));
    w.observed.members.push(member);
    let p = w.plan();
    assert_eq!(targets(&p, "CreateServer"), ["demo-workers-10"]);
}

#[test]
fn f7_a_route_the_restored_store_never_recorded_goes_with_the_machine_removed_in_the_same_pass() {
    // The routes were added after the backup: memory has none of them. A worker is
    // removed (a scale-down the store did not know was done) in the pass that finds it.
    let mut w = World::cluster(spec(V1, 1), V1, 2);
    if let Some(o) = w.spec.spec.provider.openstack.as_mut() {
        o.router = Some(flightdeck_spec::Text::new("edge").expect("name"));
    }
    let mut routes = Vec::new();
    for n in w.observed.nodes.iter_mut().flatten() {
        let k = n.name.rsplit('-').next().expect("numbered").to_string();
        n.pod_cidr = Some(format!("10.244.{k}.0/24"));
        routes.push(Route {
            destination: format!("10.244.{k}.0/24"),
            nexthop: IpAddr::V4(Ipv4Addr::new(10, 0, 0, k.parse().expect("number"))),
        });
    }
    w.observed.router = Some(flightdeck_cloud::Router {
        id: "router-1".into(),
        name: "edge".into(),
        tags: vec![],
        routes: routes.clone(),
    });
    w.drained("demo-workers-5");
    let p = w.plan();
    assert_eq!(targets(&p, "DeleteServer"), ["demo-workers-5"]);
    let via_5 = Route {
        destination: "10.244.5.0/24".into(),
        nexthop: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)),
    };
    let removed: Vec<&Route> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::RemoveRoutes { routes, .. } => Some(routes),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(removed, [&via_5], "{:#?}", p.actions);
    assert!(
        p.memory.routes.contains(&via_5),
        "recorded until the router no longer lists it: a removal that fails is tried again"
    );
    // Next pass: the server is gone, the removal did not reach the router.
    let mut w2 = w;
    w2.memory = p.memory;
    w2.drop_server("demo-workers-5");
    w2.observed
        .nodes
        .as_mut()
        .expect("nodes")
        .retain(|n| n.name != "demo-workers-5");
    let p = w2.plan();
    assert!(
        p.actions.iter().any(
            |a| matches!(&a.action, Action::RemoveRoutes { routes, .. } if routes.contains(&via_5))
        ),
        "{:#?}",
        p.actions
    );
}
