//! The faults found by trying flightdeck in the field: an operator deleting machines,
//! servers going ERROR, Octavia holding a load balancer or a member deletion, rate
//! limits, Keystone revoking tokens; each aimed at a cluster, a pool or one machine.

use crate::common;

use common::*;
use flightdeck_cloud::{
    Compute, ErrorClass, LoadBalancing, ProvisioningStatus, ServerStatus, Timestamp,
};
use flightdeck_sim::{KEYSTONE_ISSUE_OP, SimCloud, SimFault, TOKEN_LIFETIME_MS};
use flightdeck_spec::{Duration, FaultKind, Service};

fn fault(kind: FaultKind, at: Timestamp, cluster: &str) -> SimFault {
    SimFault {
        cluster: Some(cluster.into()),
        ..SimFault::new(kind, at)
    }
}

fn status(sim: &SimCloud, id: &str) -> Option<ServerStatus> {
    server(sim, id).map(|s| s.status)
}

fn effects(sim: &SimCloud, kind: FaultKind) -> u64 {
    sim.fault_effects().get(&kind).copied().unwrap_or(0)
}

#[test]
fn an_operator_deletes_only_the_machines_of_the_pool_aimed_at() {
    let sim = sim(71);
    let o = cluster_owner("demo", "u1");
    let (cp, _) = active_server(&sim, &o, "cp-1");
    let (w1, _) = active_server(&sim, &o, "workers-2");
    let (w2, _) = active_server(&sim, &o, "workers-3");
    // A pool whose name another pool's starts with is not hit by it.
    let (big, _) = active_server(&sim, &o, "workers-big-4");
    sim.inject(SimFault {
        pool: Some("workers".into()),
        count: Some(5),
        ..fault(FaultKind::OperatorDeleteMachine, now(&sim), "demo")
    });
    wait_ms(&sim, 2_000);
    assert_eq!(status(&sim, &w1), None, "deleted and gone");
    assert_eq!(status(&sim, &w2), None, "deleted and gone");
    assert_eq!(status(&sim, &cp), Some(ServerStatus::Active));
    assert_eq!(status(&sim, &big), Some(ServerStatus::Active));
    assert_eq!(effects(&sim, FaultKind::OperatorDeleteMachine), 2);
    assert!(
        sim.mutations()
            .iter()
            .all(|m| !m.operation.starts_with("DELETE")),
        "the operator's deletes are not flightdeck's calls"
    );
}

#[test]
fn a_server_that_goes_error_stops_its_node_and_keeps_its_record() {
    let sim = sim(72);
    let o = cluster_owner("demo", "u1");
    reachable_cluster(&sim, &o);
    let (w, _) = active_server(&sim, &o, "workers-2");
    wait_for(&sim, |s| node(s, &w).is_some_and(|n| n.ready));
    sim.inject(SimFault {
        machine: Some("workers-2".into()),
        ..fault(FaultKind::ServerError, now(&sim), "demo")
    });
    wait_ms(&sim, 1);
    let s = server(&sim, &w).expect("still listed");
    assert_eq!(s.status, ServerStatus::Error);
    assert!(s.fault.is_some_and(|f| f.contains("compute host")));
    wait_ms(&sim, 60_000);
    let n = node(&sim, &w).expect("the node stays");
    assert!(!n.ready, "its kubelet stopped");
    assert_eq!(effects(&sim, FaultKind::ServerError), 1);
}

#[test]
fn a_held_load_balancer_refuses_changes_until_the_fault_ends() {
    let sim = sim(73);
    let o = cluster_owner("demo", "u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, addr) = active_server(&sim, &o, "cp-1");
    let start = now(&sim);
    let end = start.plus_millis(600_000);
    sim.inject(SimFault {
        end: Some(end),
        ..fault(FaultKind::LbPendingUpdate, start, "demo")
    });
    wait_ms(&sim, 1);
    assert_eq!(
        lb_status(&sim, &lb),
        Some(ProvisioningStatus::PendingUpdate)
    );
    let err = ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect_err("409");
    assert_eq!((err.class, err.status), (ErrorClass::Conflict, Some(409)));
    assert!(err.message.contains("immutable"), "{}", err.message);
    wait_until(&sim, end);
    assert_eq!(lb_status(&sim, &lb), Some(ProvisioningStatus::Active));
    ready(sim.create_member(&member_req(&pool, "cp-1", addr, &o))).expect("taken");
    assert_eq!(effects(&sim, FaultKind::LbPendingUpdate), 1);
}

#[test]
fn member_deletions_stick_while_creations_complete() {
    let sim = sim(74);
    let o = cluster_owner("demo", "u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, a1) = active_server(&sim, &o, "cp-1");
    let (_, a2) = active_server(&sim, &o, "cp-2");
    let m1 = ready(sim.create_member(&member_req(&pool, "cp-1", a1, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    let end = now(&sim).plus_millis(300_000);
    sim.inject(SimFault {
        end: Some(end),
        ..fault(FaultKind::MemberStuckDeleting, now(&sim), "demo")
    });
    ready(sim.delete_member(&pool, &m1.id)).expect("delete");
    wait_lb_active(&sim, &lb);
    let m2 = ready(sim.create_member(&member_req(&pool, "cp-2", a2, &o))).expect("member");
    wait_ms(&sim, 60_000);
    let listed = |sim: &SimCloud, id: &str| {
        ready(sim.list_members(&pool))
            .expect("list")
            .into_iter()
            .find(|m| m.id == id)
            .map(|m| m.provisioning_status)
    };
    assert_eq!(
        listed(&sim, &m1.id),
        Some(ProvisioningStatus::PendingDelete)
    );
    assert_eq!(listed(&sim, &m2.id), Some(ProvisioningStatus::Active));
    wait_until(&sim, end.plus_millis(1_000));
    assert_eq!(listed(&sim, &m1.id), None, "released at the end");
    assert_eq!(effects(&sim, FaultKind::MemberStuckDeleting), 1);
}

#[test]
fn a_rate_limit_answers_429_with_the_wait_it_asks_for() {
    let sim = sim(75);
    let o = owner("u1");
    sim.inject(SimFault {
        service: Some(Service::Nova),
        rate: Some(1.0),
        retry_after: Some(Duration::from_secs(20)),
        ..SimFault::new(FaultKind::ApiRateLimit, now(&sim))
    });
    let err = ready(sim.list_servers(&o)).expect_err("429");
    assert_eq!(err.status, Some(429));
    assert_eq!(
        err.class,
        ErrorClass::RateLimited(Some(Duration::from_secs(20)))
    );
    ready(sim.list_load_balancers(&o)).expect("octavia is not limited");
    assert_eq!(effects(&sim, FaultKind::ApiRateLimit), 1);
}

#[test]
fn keystone_renews_the_token_and_its_faults_strike_the_renewal() {
    let sim = sim(76);
    let o = owner("u1");
    let issued = |sim: &SimCloud| {
        sim.api_calls()
            .get("keystone")
            .and_then(|ops| ops.get(KEYSTONE_ISSUE_OP))
            .copied()
            .unwrap_or(0)
    };
    ready(sim.list_servers(&o)).expect("first call authenticates");
    ready(sim.list_servers(&o)).expect("the token is kept");
    assert_eq!(issued(&sim), 1);
    // Keystone is down: the token still works until it nears its end.
    sim.inject(SimFault {
        service: Some(Service::Keystone),
        rate: Some(1.0),
        ..SimFault::new(FaultKind::ApiErrorRate, now(&sim))
    });
    ready(sim.list_servers(&o)).expect("still good");
    wait_ms(&sim, TOKEN_LIFETIME_MS);
    let err = ready(sim.list_servers(&o)).expect_err("no token to be had");
    assert_eq!((err.service, err.status), ("keystone", Some(503)));
    assert_eq!(effects(&sim, FaultKind::ApiErrorRate), 1);
}

#[test]
fn revoked_tokens_make_the_client_authenticate_again() {
    let sim = sim(77);
    let o = owner("u1");
    ready(sim.list_servers(&o)).expect("first call authenticates");
    sim.inject(SimFault::new(FaultKind::KeystoneRevokeTokens, now(&sim)));
    wait_ms(&sim, 1);
    ready(sim.list_servers(&o)).expect("authenticates again and repeats the call");
    ready(sim.list_servers(&o)).expect("with the new token");
    assert_eq!(sim.api_calls()["keystone"][KEYSTONE_ISSUE_OP], 2);
    assert_eq!(
        sim.api_calls()["nova"]["GET /servers/detail"],
        4,
        "the refused call is made twice"
    );
    assert_eq!(effects(&sim, FaultKind::KeystoneRevokeTokens), 1);
}
