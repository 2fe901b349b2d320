//! Nova: server lifecycle, addresses, security-group membership.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};

use common::*;
use flightdeck_cloud::{Compute, ErrorClass, Network, ServerStatus};

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

#[test]
fn server_goes_build_then_active_after_boot_latency() {
    let sim = sim(1);
    let o = owner("u1");
    let start = now(&sim);
    let s = ready(sim.create_server(&server_req("cp-1", &o, &[]))).expect("create");
    assert_eq!(s.status, ServerStatus::Build);
    assert_eq!(s.address, None, "no address is shown before ACTIVE");

    wait_ms(&sim, 1_599);
    let listed = ready(sim.list_servers(&o)).expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].status,
        ServerStatus::Build,
        "boot takes at least 1.6 s"
    );

    wait_until(&sim, start.plus_millis(3_600));
    let listed = ready(sim.list_servers(&o)).expect("list");
    assert_eq!(
        listed[0].status,
        ServerStatus::Active,
        "boot takes at most 3.6 s"
    );
    assert_eq!(
        listed[0].address,
        Some(ip(2)),
        ".0 and .1 are never handed out"
    );
    assert_eq!(listed[0].task_state, None);
}

#[test]
fn deleted_server_is_listed_as_deleting_until_gone_and_its_address_is_not_reused_at_once() {
    let sim = sim(2);
    let o = owner("u1");
    let (a, addr_a) = active_server(&sim, &o, "a");
    let (_b, addr_b) = active_server(&sim, &o, "b");
    assert_eq!((addr_a, addr_b), (ip(2), ip(3)));

    ready(sim.delete_server(&a)).expect("delete");
    let s = server(&sim, &a).expect("still listed while deleting");
    assert!(s.is_deleting());
    ready(sim.delete_server(&a)).expect("a repeated delete is accepted");

    wait_ms(&sim, 900);
    assert!(server(&sim, &a).is_none(), "gone within 0.9 s");
    let err = ready(sim.delete_server(&a)).expect_err("gone");
    assert_eq!(err.class, ErrorClass::NotFound);
    assert_eq!(err.status, Some(404));
    assert_eq!(err.message, format!("Instance {a} could not be found."));

    let (_c, addr_c) = active_server(&sim, &o, "c");
    assert_eq!(
        addr_c,
        ip(4),
        "a just-released address waits while never-used ones remain, as with Neutron's IPAM"
    );
}

#[test]
fn server_request_naming_a_missing_security_group_is_rejected() {
    let sim = sim(3);
    let o = owner("u1");
    let err = ready(sim.create_server(&server_req("a", &o, &["nope"]))).expect_err("400");
    assert_eq!(err.class, ErrorClass::Permanent);
    assert_eq!(err.status, Some(400));
    assert_eq!(err.message, "Security group nope not found.");
    assert!(sim.snapshot().servers.is_empty(), "nothing was created");
}

#[test]
fn server_request_naming_an_ambiguous_security_group_is_rejected() {
    let sim = sim(3);
    let o = owner("u1");
    sim.add_foreign_security_group("shared");
    sim.add_foreign_security_group("shared");
    let err = ready(sim.create_server(&server_req("a", &o, &["shared"]))).expect_err("409");
    assert_eq!(err.status, Some(409));
    assert!(
        err.message.contains("Multiple security_group matches"),
        "{err}"
    );
}

#[test]
fn add_security_group_adds_membership_once_and_404s_for_unknown_objects() {
    let sim = sim(4);
    let o = owner("u1");
    let sg = ready(
        sim.create_security_group("demo-sg", &o.tags(&flightdeck_cloud::Role::SecurityGroup)),
    )
    .expect("sg");
    let (id, _) = active_server(&sim, &o, "a");
    ready(sim.add_security_group(&id, "demo-sg")).expect("add");
    ready(sim.add_security_group(&id, &sg.id)).expect("adding again (by id) is a no-op");
    assert_eq!(
        server(&sim, &id).expect("server").security_groups,
        vec!["demo-sg"]
    );

    let err = ready(sim.add_security_group("no-such-server", "demo-sg")).expect_err("404");
    assert_eq!(err.class, ErrorClass::NotFound);
    let err = ready(sim.add_security_group(&id, "no-such-group")).expect_err("404");
    assert_eq!(err.status, Some(404));
    assert_eq!(err.message, "Security group no-such-group not found.");
}

#[test]
fn server_quota_answers_403_beyond_fifty_thousand_servers_not_counting_the_operators_own() {
    let sim = sim(5);
    let o = owner("u1");
    let req = server_req("a", &o, &[]);
    sim.add_foreign_server("bastion", Vec::new());
    for _ in 0..flightdeck_sim::SERVERS_MAX {
        ready(sim.create_server(&req)).expect("within quota");
    }
    let err = ready(sim.create_server(&req)).expect_err("quota");
    assert_eq!(err.class, ErrorClass::Permanent);
    assert_eq!(err.status, Some(403));
    assert!(
        err.message.starts_with("Quota exceeded for instances"),
        "{err}"
    );
}

#[test]
fn exhausted_subnet_sends_new_servers_to_error() {
    let config = flightdeck_sim::SimConfig {
        subnet_cidr: "10.0.0.0/30".into(),
        ..Default::default()
    };
    let sim = sim_with(config, 6);
    let o = owner("u1");
    let (_, addr) = active_server(&sim, &o, "a");
    assert_eq!(addr, ip(2), "a /30 has one address here");
    let s = ready(sim.create_server(&server_req("b", &o, &[]))).expect("accepted");
    wait_ms(&sim, 3_600);
    let s = server(&sim, &s.id).expect("listed");
    assert_eq!(s.status, ServerStatus::Error);
    assert!(
        s.fault
            .as_deref()
            .is_some_and(|f| f.contains("Failed to allocate the network(s)")),
        "{s:?}"
    );
}
