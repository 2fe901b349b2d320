//! Octavia: load balancer lifecycle, immutability while pending, members and health.

use crate::common;

use common::*;
use flightdeck_cloud::{
    Compute, ErrorClass, ListenerCreate, LoadBalancerCreate, LoadBalancing, Member,
    OperatingStatus, ProvisioningStatus, Role,
};
use flightdeck_sim::{SimCloud, SimConfig};

fn lb_req(o: &flightdeck_cloud::Ownership) -> LoadBalancerCreate {
    LoadBalancerCreate {
        name: "api".into(),
        vip_subnet: "subnet".into(),
        tags: o.tags(&Role::ApiLoadBalancer),
    }
}

fn member(sim: &SimCloud, pool: &str, id: &str) -> Option<Member> {
    ready(sim.list_members(pool))
        .expect("list members")
        .into_iter()
        .find(|m| m.id == id)
}

#[test]
fn load_balancer_goes_pending_create_then_active_online() {
    let sim = sim(1);
    let o = owner("u1");
    let start = now(&sim);
    let lb = ready(sim.create_load_balancer(&lb_req(&o))).expect("create");
    assert_eq!(lb.provisioning_status, ProvisioningStatus::PendingCreate);
    assert_eq!(lb.operating_status, OperatingStatus::Offline);
    assert!(lb.vip_address.is_some());
    wait_ms(&sim, 499);
    assert_eq!(
        lb_status(&sim, &lb.id),
        Some(ProvisioningStatus::PendingCreate)
    );
    wait_until(&sim, start.plus_millis(1_200));
    let listed = ready(sim.list_load_balancers(&o)).expect("list");
    assert_eq!(listed[0].provisioning_status, ProvisioningStatus::Active);
    assert_eq!(listed[0].operating_status, OperatingStatus::Online);
}

#[test]
fn child_change_on_pending_load_balancer_is_rejected_as_immutable() {
    let sim = sim(2);
    let o = owner("u1");
    let lb = ready(sim.create_load_balancer(&lb_req(&o))).expect("create");
    let listener = |port| ListenerCreate {
        name: "api".into(),
        loadbalancer_id: lb.id.clone(),
        protocol_port: port,
        tags: o.tags(&Role::ApiListener),
    };
    let err = ready(sim.create_listener(&listener(6443))).expect_err("PENDING_CREATE");
    assert_eq!(err.class, ErrorClass::Conflict);
    assert_eq!(err.status, Some(409));
    assert_eq!(
        err.message,
        format!(
            "Load Balancer {} is immutable and cannot be updated.",
            lb.id
        )
    );

    wait_lb_active(&sim, &lb.id);
    let l = ready(sim.create_listener(&listener(6443))).expect("ACTIVE takes changes");
    assert_eq!(l.provisioning_status, ProvisioningStatus::PendingCreate);
    assert_eq!(
        lb_status(&sim, &lb.id),
        Some(ProvisioningStatus::PendingUpdate)
    );
    let err = ready(sim.create_listener(&listener(8443))).expect_err("PENDING_UPDATE");
    assert_eq!(err.class, ErrorClass::Conflict);
    let err = ready(sim.delete_load_balancer_cascade(&lb.id)).expect_err("pending");
    assert_eq!(err.class, ErrorClass::Conflict);

    wait_ms(&sim, 900);
    assert_eq!(lb_status(&sim, &lb.id), Some(ProvisioningStatus::Active));
    let listed = ready(sim.list_listeners(&o)).expect("list");
    assert_eq!(listed[0].provisioning_status, ProvisioningStatus::Active);
    let err = ready(sim.create_listener(&listener(6443))).expect_err("port taken");
    assert_eq!(err.class, ErrorClass::AlreadyExists);
}

#[test]
fn member_without_health_monitor_reports_no_monitor() {
    let sim = sim(3);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, addr) = active_server(&sim, &o, "cp-1");
    let m = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    assert_eq!(m.provisioning_status, ProvisioningStatus::PendingCreate);
    assert_eq!(m.operating_status, OperatingStatus::NoMonitor);
    assert_eq!(
        lb_status(&sim, &lb),
        Some(ProvisioningStatus::PendingUpdate)
    );
    wait_ms(&sim, 900);
    let m = member(&sim, &pool, &m.id).expect("listed");
    assert_eq!(m.provisioning_status, ProvisioningStatus::Active);
    assert_eq!(m.operating_status, OperatingStatus::NoMonitor);
    assert_eq!(lb_status(&sim, &lb), Some(ProvisioningStatus::Active));

    let err = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect_err("dup");
    assert_eq!(err.class, ErrorClass::AlreadyExists);
}

#[test]
fn monitored_member_goes_online_only_once_its_backend_has_a_node() {
    let sim = sim(4);
    let o = owner("u1");
    let (_lb, pool) = api_lb(&sim, &o, true);
    let (sid, addr) = active_server(&sim, &o, "cp-1");
    let m = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    assert_eq!(m.operating_status, OperatingStatus::Offline);
    wait_ms(&sim, 900);
    let got = member(&sim, &pool, &m.id).expect("listed");
    assert_eq!(got.provisioning_status, ProvisioningStatus::Active);
    assert_eq!(
        got.operating_status,
        OperatingStatus::Offline,
        "not checked yet"
    );

    // First checks are due within the rise time; the kubelet has not registered yet.
    wait_ms(&sim, 10_000);
    let got = member(&sim, &pool, &m.id).expect("listed");
    assert_eq!(
        got.operating_status,
        OperatingStatus::Error,
        "backend not serving"
    );

    let node_at = |sim: &SimCloud| {
        sim.snapshot()
            .nodes
            .iter()
            .any(|(_, n)| n.server_id.as_deref() == Some(sid.as_str()))
    };
    wait_for(&sim, node_at);
    wait_ms(&sim, 10_000);
    let got = member(&sim, &pool, &m.id).expect("listed");
    assert_eq!(got.operating_status, OperatingStatus::Online);

    ready(sim.delete_server(&sid)).expect("delete backend");
    let got = member(&sim, &pool, &m.id).expect("listed");
    assert_eq!(
        got.operating_status,
        OperatingStatus::Error,
        "a deleting backend fails checks"
    );
}

#[test]
fn health_monitor_created_later_switches_members_to_checks() {
    let sim = sim(5);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, addr) = active_server(&sim, &o, "cp-1");
    let m = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    ready(
        sim.create_health_monitor(&flightdeck_cloud::HealthMonitorCreate {
            name: "hm".into(),
            pool_id: pool.clone(),
            kind: "TCP".into(),
            delay_s: 5,
            timeout_s: 3,
            max_retries: 3,
            tags: o.tags(&Role::ApiHealthMonitor),
        }),
    )
    .expect("hm");
    let got = member(&sim, &pool, &m.id).expect("listed");
    assert_eq!(got.operating_status, OperatingStatus::Offline);
}

#[test]
fn cascade_delete_removes_the_load_balancer_and_everything_under_it() {
    let sim = sim(6);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, true);
    let (_, addr) = active_server(&sim, &o, "cp-1");
    ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    ready(sim.delete_load_balancer_cascade(&lb)).expect("cascade");
    assert_eq!(
        lb_status(&sim, &lb),
        Some(ProvisioningStatus::PendingDelete)
    );
    let err = ready(sim.delete_load_balancer_cascade(&lb)).expect_err("pending delete");
    assert_eq!(err.class, ErrorClass::Conflict);
    wait_ms(&sim, 400);
    let w = sim.snapshot();
    assert!(w.load_balancers.is_empty() && w.listeners.is_empty() && w.pools.is_empty());
    assert!(w.health_monitors.is_empty() && w.members.is_empty());
    let err = ready(sim.list_members(&pool)).expect_err("pool gone");
    assert_eq!(err.class, ErrorClass::NotFound);
    assert_eq!(err.message, format!("Pool {pool} not found."));
    let err = ready(sim.delete_load_balancer_cascade(&lb)).expect_err("gone");
    assert_eq!(err.class, ErrorClass::NotFound);
}

#[test]
fn member_delete_goes_pending_delete_then_gone() {
    let sim = sim(7);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, addr) = active_server(&sim, &o, "cp-1");
    let m = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    let err = ready(sim.delete_member(&pool, &m.id)).expect_err("lb pending");
    assert_eq!(err.class, ErrorClass::Conflict);
    wait_lb_active(&sim, &lb);
    ready(sim.delete_member(&pool, &m.id)).expect("delete");
    let got = member(&sim, &pool, &m.id).expect("still listed");
    assert_eq!(got.provisioning_status, ProvisioningStatus::PendingDelete);
    wait_ms(&sim, 750);
    assert!(member(&sim, &pool, &m.id).is_none());
    let err = ready(sim.delete_member(&pool, &m.id)).expect_err("gone");
    assert_eq!(err.class, ErrorClass::NotFound);
}

#[test]
fn load_balancer_in_error_refuses_children_but_can_be_deleted() {
    // A /30 has one host address: the server takes it, the VIP finds none.
    let config = SimConfig {
        subnet_cidr: "10.0.0.0/30".into(),
        ..SimConfig::default()
    };
    let sim = sim_with(config, 8);
    let o = owner("u1");
    active_server(&sim, &o, "cp-1");
    let lb = ready(sim.create_load_balancer(&lb_req(&o))).expect("accepted");
    wait_ms(&sim, 1_200);
    assert_eq!(lb_status(&sim, &lb.id), Some(ProvisioningStatus::Error));
    let err = ready(sim.create_listener(&ListenerCreate {
        name: "api".into(),
        loadbalancer_id: lb.id.clone(),
        protocol_port: 6443,
        tags: vec![],
    }))
    .expect_err("ERROR refuses children");
    assert_eq!(err.status, Some(409));
    ready(sim.delete_load_balancer_cascade(&lb.id)).expect("ERROR can be deleted");
    wait_ms(&sim, 400);
    assert!(lb_status(&sim, &lb.id).is_none());
}

#[test]
fn unknown_ids_are_not_found() {
    let sim = sim(9);
    let err = ready(sim.delete_member("no-pool", "no-member")).expect_err("404");
    assert_eq!(err.class, ErrorClass::NotFound);
    assert_eq!(err.message, "Pool no-pool not found.");
    let err = ready(sim.delete_load_balancer_cascade("x")).expect_err("404");
    assert_eq!(err.message, "Load Balancer x not found.");
}
