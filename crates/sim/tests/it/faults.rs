//! Fault injection: each fault kind does what the scenario language promises.

use crate::common;

use common::*;
use flightdeck_cloud::{
    Compute, ErrorClass, LoadBalancing, Network, OperatingStatus, ProvisioningStatus, Role,
    ServerStatus,
};
use flightdeck_sim::{MutationKind, SimFault};
use flightdeck_spec::{Duration, FaultKind, Service};

#[test]
fn error_rate_fault_answers_503() {
    let sim = sim(1);
    let o = owner("u1");
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(10_000)),
        service: Some(Service::Neutron),
        rate: Some(1.0),
        ..SimFault::new(FaultKind::ApiErrorRate, start)
    });
    let tags = o.tags(&Role::SecurityGroup);
    let err = ready(sim.create_security_group("sg", &tags)).expect_err("503");
    assert_eq!(err.class, ErrorClass::Transient);
    assert_eq!(err.status, Some(503));
    assert_eq!(err.service, "neutron");
    assert!(sim.snapshot().security_groups.is_empty(), "no effect");
    ready(sim.list_servers(&o)).expect("other services are unaffected");

    let m = sim.mutations();
    assert_eq!(m.len(), 1);
    assert!(!m[0].ok);
    assert_eq!(
        (m[0].kind, m[0].target_tags.clone()),
        (MutationKind::Create, tags.clone())
    );
    assert_eq!(
        sim.api_calls()["neutron"]["POST /v2.0/security-groups"],
        1,
        "a failed call still counts"
    );

    wait_until(&sim, start.plus_millis(10_000));
    ready(sim.create_security_group("sg", &tags)).expect("fault over");
}

#[test]
fn partial_error_rate_fails_about_that_fraction_of_calls() {
    let sim = sim(2);
    let o = owner("u1");
    sim.inject(SimFault {
        service: Some(Service::Nova),
        rate: Some(0.3),
        ..SimFault::new(FaultKind::ApiErrorRate, now(&sim))
    });
    let failed = (0..1_000)
        .filter(|_| ready(sim.list_servers(&o)).is_err())
        .count();
    assert!((200..400).contains(&failed), "{failed} of 1000 failed");
}

#[test]
fn latency_fault_moves_the_clock_before_the_call_is_performed() {
    let sim = sim(3);
    let o = owner("u1");
    let start = now(&sim);
    sim.inject(SimFault {
        service: Some(Service::Octavia),
        latency: Some(Duration::from_secs(2)),
        ..SimFault::new(FaultKind::ApiLatency, start)
    });
    ready(sim.list_servers(&o)).expect("nova");
    assert_eq!(now(&sim), start, "nova is not slowed");
    ready(sim.list_load_balancers(&o)).expect("octavia");
    assert_eq!(now(&sim), start.plus_millis(2_000));
}

#[test]
fn boot_error_fault_sends_new_servers_to_error_with_no_valid_host() {
    let sim = sim(4);
    let o = owner("u1");
    let start = now(&sim);
    let before = ready(sim.create_server(&server_req("before", &o, &[]))).expect("create");
    sim.inject(SimFault {
        end: Some(start.plus_millis(1_000)),
        ..SimFault::new(FaultKind::BootError, start.plus_millis(1))
    });
    wait_ms(&sim, 1);
    let doomed = ready(sim.create_server(&server_req("doomed", &o, &[]))).expect("accepted");
    assert_eq!(doomed.status, ServerStatus::Build);
    wait_ms(&sim, 5_000);
    let fine = ready(sim.create_server(&server_req("after", &o, &[]))).expect("create");
    wait_ms(&sim, 5_000);
    let doomed = server(&sim, &doomed.id).expect("listed");
    assert_eq!(doomed.status, ServerStatus::Error);
    assert_eq!(
        doomed.fault.as_deref(),
        Some("No valid host was found. There are not enough hosts available.")
    );
    assert_eq!(doomed.address, None);
    for id in [before.id, fine.id] {
        assert_eq!(
            server(&sim, &id).map(|s| s.status),
            Some(ServerStatus::Active)
        );
    }
}

#[test]
fn stuck_member_stays_pending_while_load_balancer_is_active() {
    let sim = sim(5);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, addr) = active_server(&sim, &o, "cp-1");
    let start = now(&sim);
    let end = start.plus_millis(60_000);
    sim.inject(SimFault {
        end: Some(end),
        ..SimFault::new(FaultKind::MemberStuckPending, start)
    });
    let m = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("member");
    wait_ms(&sim, 30_000);
    assert_eq!(
        lb_status(&sim, &lb),
        Some(ProvisioningStatus::Active),
        "LB is done"
    );
    let status = |sim: &flightdeck_sim::SimCloud| {
        ready(sim.list_members(&pool)).expect("list")[0].provisioning_status
    };
    assert_eq!(
        status(&sim),
        ProvisioningStatus::PendingCreate,
        "member is not"
    );

    wait_until(&sim, end);
    assert_eq!(
        status(&sim),
        ProvisioningStatus::PendingCreate,
        "completes after the end"
    );
    wait_until(&sim, end.plus_millis(900));
    assert_eq!(status(&sim), ProvisioningStatus::Active);

    // Deletes stick the same way.
    sim.inject(SimFault::new(FaultKind::MemberStuckPending, now(&sim)));
    ready(sim.delete_member(&pool, &m.id)).expect("delete");
    wait_ms(&sim, 60_000);
    assert_eq!(lb_status(&sim, &lb), Some(ProvisioningStatus::Active));
    assert_eq!(status(&sim), ProvisioningStatus::PendingDelete);
}

#[test]
fn member_offline_fault_takes_members_offline_until_it_ends() {
    let sim = sim(6);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, a) = active_server(&sim, &o, "cp-1");
    let (_, b) = active_server(&sim, &o, "cp-2");
    ready(sim.create_member(&member_req(&pool, "cp-1", a, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    ready(sim.create_member(&member_req(&pool, "cp-2", b, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    // Both serve once their servers register as nodes.
    wait_for(&sim, |sim| sim.snapshot().member_serving_since.len() == 2);
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(5_000)),
        ..SimFault::new(FaultKind::MemberOffline, start)
    });
    let statuses = |sim: &flightdeck_sim::SimCloud| -> Vec<OperatingStatus> {
        let members = ready(sim.list_members(&pool)).expect("list");
        members.iter().map(|m| m.operating_status).collect()
    };
    let during = statuses(&sim);
    assert_eq!(
        during
            .iter()
            .filter(|s| **s == OperatingStatus::Offline)
            .count(),
        1,
        "count defaults to one: {during:?}"
    );
    assert!(during.contains(&OperatingStatus::NoMonitor));
    wait_ms(&sim, 5_000);
    assert_eq!(statuses(&sim), vec![OperatingStatus::NoMonitor; 2]);
    // The offline member's serving spell ended when the fault began, and is logged for
    // checks that look later; the other one's goes on.
    let (spells, next) = sim.serving_spells_since(0);
    assert_eq!(next, 1, "{spells:?}");
    assert_eq!(spells[0].until, start, "{spells:?}");
    assert!(spells[0].since < start);
    let world = sim.snapshot();
    assert!(
        world
            .member_serving_since
            .contains_key(&spells[0].member_id)
    );
    assert_eq!(world.member_serving_since.len(), 2);
    assert_eq!(sim.serving_spells_since(next).0, vec![]);
}

#[test]
fn faults_from_a_scenario_start_relative_to_its_origin() {
    let fault = flightdeck_spec::scenario::Fault {
        duration: Some(Duration::from_secs(5)),
        service: Some(Service::Nova),
        rate: Some(1.0),
        ..flightdeck_spec::scenario::Fault::new(FaultKind::ApiErrorRate, Duration::from_secs(10))
    };
    let origin = flightdeck_cloud::Timestamp::SIM_EPOCH;
    let f = SimFault::from_spec(&fault, origin);
    assert_eq!(f.start, origin.plus_millis(10_000));
    assert_eq!(f.end, Some(origin.plus_millis(15_000)));
    assert!(!f.is_active_at(origin.plus_millis(9_999)));
    assert!(f.is_active_at(origin.plus_millis(10_000)));
    assert!(!f.is_active_at(origin.plus_millis(15_000)));
}

#[test]
fn a_fault_targeted_at_one_cluster_leaves_the_others_alone() {
    let sim = sim(8);
    let a = flightdeck_cloud::Ownership {
        cluster: "alpha".into(),
        uid: "ua".into(),
    };
    let b = flightdeck_cloud::Ownership {
        cluster: "beta".into(),
        uid: "ub".into(),
    };
    let (lb_a, pool_a) = api_lb(&sim, &a, false);
    let (lb_b, pool_b) = api_lb(&sim, &b, false);
    let (_, addr_a) = active_server(&sim, &a, "a-cp-1");
    let (_, addr_b) = active_server(&sim, &b, "b-cp-1");
    let start = now(&sim);
    sim.inject(SimFault {
        end: Some(start.plus_millis(60_000)),
        cluster: Some("alpha".into()),
        ..SimFault::new(FaultKind::MemberStuckPending, start)
    });
    ready(sim.create_member(&member_req(&pool_a, "a-cp-1", addr_a, &a))).expect("member a");
    ready(sim.create_member(&member_req(&pool_b, "b-cp-1", addr_b, &b))).expect("member b");
    wait_ms(&sim, 10_000);
    wait_lb_active(&sim, &lb_a);
    wait_lb_active(&sim, &lb_b);
    let status = |pool: &str| ready(sim.list_members(pool)).expect("list")[0].provisioning_status;
    assert_eq!(
        status(&pool_a),
        ProvisioningStatus::PendingCreate,
        "alpha is the target"
    );
    assert_eq!(status(&pool_b), ProvisioningStatus::Active, "beta is not");
    wait_ms(&sim, 60_000);
    assert_eq!(
        status(&pool_a),
        ProvisioningStatus::Active,
        "released when the fault ends"
    );
}

#[test]
fn stale_read_answers_a_list_as_it_was_within_the_lag_and_never_older() {
    let sim = sim(5);
    let o = owner("u1");
    let start = now(&sim);
    sim.inject(SimFault {
        service: Some(Service::Nova),
        latency: Some(Duration::from_secs(30)),
        ..SimFault::new(FaultKind::ApiStaleRead, start.plus_millis(40_000))
    });
    let names = |l: Vec<flightdeck_cloud::Server>| -> Vec<String> {
        l.into_iter().map(|s| s.name).collect()
    };
    let first = ready(sim.create_server(&server_req("first", &o, &[]))).expect("create");
    assert_eq!(names(ready(sim.list_servers(&o)).expect("list")), ["first"]);
    wait_ms(&sim, 20_000);
    ready(sim.create_server(&server_req("second", &o, &[]))).expect("create");
    assert_eq!(
        names(ready(sim.list_servers(&o)).expect("list")),
        ["first", "second"],
        "before the fault, lists are fresh"
    );
    wait_ms(&sim, 25_000);
    ready(sim.delete_server(&first.id)).expect("delete");
    wait_ms(&sim, 5_000);
    // 50 s in: the oldest answer of the last 30 s is the one given at 20 s.
    let listed = ready(sim.list_servers(&o)).expect("list");
    assert_eq!(names(listed.clone()), ["first", "second"]);
    assert!(
        sim.snapshot().servers.iter().all(|s| s.name != "first"),
        "the world has moved on"
    );
    assert_eq!(
        listed[0].status,
        ServerStatus::Active,
        "as it was then, not as it is"
    );
    // A server made at 55 s; nobody lists until 100 s. Every answer kept is more than
    // 30 s old, and a replica 30 s behind has seen the new server by then.
    wait_ms(&sim, 5_000);
    ready(sim.create_server(&server_req("third", &o, &[]))).expect("create");
    wait_ms(&sim, 45_000);
    assert_eq!(
        names(ready(sim.list_servers(&o)).expect("list")),
        ["second", "third"],
        "never older than the lag"
    );
    // Other services answer fresh.
    assert!(
        ready(sim.list_load_balancers(&o))
            .expect("octavia")
            .is_empty()
    );
}
