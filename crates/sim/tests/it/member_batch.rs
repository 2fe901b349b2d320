//! Octavia's batch member update (`PUT /v2/lbaas/pools/{pool_id}/members`): a pool's
//! members set in one call and one change of the load balancer.

use crate::common;

use common::*;
use flightdeck_cloud::{ErrorClass, LoadBalancing, ProvisioningStatus};
use flightdeck_sim::MutationKind;

#[test]
fn a_batch_adds_every_member_in_one_change_of_the_load_balancer() {
    let sim = sim(11);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, a1) = active_server(&sim, &o, "cp-1");
    let (_, a2) = active_server(&sim, &o, "cp-2");
    let batch = [
        member_req(&pool, "cp-1", a1, &o),
        member_req(&pool, "cp-2", a2, &o),
    ];
    ready(sim.add_members(&pool, &batch)).expect("batch");
    assert_eq!(
        lb_status(&sim, &lb),
        Some(ProvisioningStatus::PendingUpdate)
    );
    let listed = ready(sim.list_members(&pool)).expect("list");
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|m| m.provisioning_status == ProvisioningStatus::PendingCreate)
    );
    // One change: the load balancer is ACTIVE again with both members.
    wait_lb_active(&sim, &lb);
    let listed = ready(sim.list_members(&pool)).expect("list");
    assert!(
        listed
            .iter()
            .all(|m| m.provisioning_status == ProvisioningStatus::Active)
    );
    let mut names: Vec<_> = listed.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["cp-1", "cp-2"]);
    // The log has one create per member, each with the member's tags.
    let creates: Vec<_> = sim
        .mutations()
        .into_iter()
        .filter(|m| m.operation == "PUT /v2/lbaas/pools/{pool_id}/members")
        .collect();
    assert_eq!(creates.len(), 2);
    assert!(
        creates
            .iter()
            .all(|m| m.kind == MutationKind::Create && m.ok)
    );
    for (logged, asked) in creates.iter().zip(&batch) {
        assert_eq!(logged.target_name, asked.name);
        assert_eq!(logged.target_tags, asked.tags);
    }
}

#[test]
fn an_additive_batch_sent_again_changes_nothing_and_deletes_nothing() {
    let sim = sim(12);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, a1) = active_server(&sim, &o, "cp-1");
    let (_, a2) = active_server(&sim, &o, "cp-2");
    let first = [member_req(&pool, "cp-1", a1, &o)];
    ready(sim.add_members(&pool, &first)).expect("batch");
    wait_lb_active(&sim, &lb);
    let id = ready(sim.list_members(&pool)).expect("list")[0].id.clone();
    // cp-1 again (matched by address and port: updated, not duplicated) and cp-2 new.
    let second = [
        member_req(&pool, "cp-1", a1, &o),
        member_req(&pool, "cp-2", a2, &o),
    ];
    ready(sim.add_members(&pool, &second)).expect("batch");
    wait_lb_active(&sim, &lb);
    let listed = ready(sim.list_members(&pool)).expect("list");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().any(|m| m.id == id), "cp-1 kept its member");
    // A batch without cp-1, additive: cp-1 stays.
    ready(sim.add_members(&pool, &second[1..])).expect("batch");
    wait_lb_active(&sim, &lb);
    assert_eq!(ready(sim.list_members(&pool)).expect("list").len(), 2);
}

#[test]
fn a_batch_without_additive_only_deletes_the_members_it_leaves_out() {
    let sim = sim(13);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, a1) = active_server(&sim, &o, "cp-1");
    let (_, a2) = active_server(&sim, &o, "cp-2");
    let both = [
        member_req(&pool, "cp-1", a1, &o),
        member_req(&pool, "cp-2", a2, &o),
    ];
    sim.batch_members(&pool, &both, true).expect("batch");
    wait_lb_active(&sim, &lb);
    sim.batch_members(&pool, &both[1..], false).expect("batch");
    let listed = ready(sim.list_members(&pool)).expect("list");
    let cp1 = listed.iter().find(|m| m.name == "cp-1").expect("listed");
    assert_eq!(cp1.provisioning_status, ProvisioningStatus::PendingDelete);
    wait_lb_active(&sim, &lb);
    let listed = ready(sim.list_members(&pool)).expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "cp-2");
    assert!(
        sim.mutations()
            .iter()
            .any(|m| m.kind == MutationKind::Delete
                && m.target_name == "cp-1"
                && m.operation == "PUT /v2/lbaas/pools/{pool_id}/members")
    );
}

#[test]
fn a_batch_is_refused_whole_on_a_busy_load_balancer_or_a_doubled_address() {
    let sim = sim(14);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let (_, a1) = active_server(&sim, &o, "cp-1");
    let (_, a2) = active_server(&sim, &o, "cp-2");
    let doubled = [
        member_req(&pool, "cp-1", a1, &o),
        member_req(&pool, "cp-1b", a1, &o),
    ];
    let err = ready(sim.add_members(&pool, &doubled)).expect_err("doubled");
    assert_eq!(err.status, Some(400));
    assert!(
        err.message.contains("Duplicate member address/port"),
        "{err}"
    );
    assert!(ready(sim.list_members(&pool)).expect("list").is_empty());
    ready(sim.add_members(&pool, &doubled[..1])).expect("batch");
    // The load balancer is PENDING_UPDATE: the next batch is refused, nothing added.
    let err =
        ready(sim.add_members(&pool, &[member_req(&pool, "cp-2", a2, &o)])).expect_err("busy");
    assert_eq!(err.class, ErrorClass::Conflict);
    wait_lb_active(&sim, &lb);
    assert_eq!(ready(sim.list_members(&pool)).expect("list").len(), 1);
    let failed = sim.mutations().iter().filter(|m| !m.ok).count();
    assert_eq!(failed, 3, "two for the doubled batch, one for the busy one");
}
