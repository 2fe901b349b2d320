//! F2: surge-first control-plane rollout behind the member gate, memberTimeout, removal
//! order, and scaling of worker pools.

use flightdeck_spec::Duration;

use super::*;
use crate::condition::kind;

use OperatingStatus::{NoMonitor, Offline};
use ProvisioningStatus::{Active, PendingCreate, PendingDelete};

/// A control-plane rollout from V1 to V2: three old serving machines (cp-1..cp-3, cp-1
/// oldest), two Ready workers, and the replacement cp-6 at V2 in the state `h`.
fn rollout_with_replacement(h: Health, monitor: bool) -> World {
    let mut w = World::cluster(spec_with(V2, 2, monitor), V1, 2);
    w.add_cp(6, V2, h);
    w
}

#[test]
fn rollout_creates_exactly_one_replacement_and_removes_nothing() {
    let w = World::cluster(spec(V2, 2), V1, 2);
    let p = w.plan();
    assert_eq!(
        targets(&p, "CreateServer"),
        ["demo-cp-6"],
        "{:#?}",
        p.actions
    );
    assert_eq!(p.memory.machines["demo-cp-6"].template.version, V2);
    assert_eq!(p.memory.machines["demo-cp-6"].server_id, None);
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));
    assert_eq!(count(&p, "DeleteMember") + count(&p, "DeleteServer"), 0);
    assert!(p.events.iter().any(|e| e.reason == "RolloutStarted"));
}

/// F2 table: (what, replacement state, health monitor, gate, old machines removed).
#[test]
fn old_control_plane_machine_is_removed_only_once_the_replacement_serves() {
    let not_ready = Health {
        node_ready: Some(false),
        ..SERVING
    };
    let no_member = Health {
        member: None,
        node_ready: Some(true),
    };
    let unsafe_gate = MemberGate::LoadBalancerOnly;
    let safe = MemberGate::MemberServing;
    let rows = [
        (
            "member PENDING_CREATE",
            with_member(PendingCreate, Offline),
            true,
            safe,
            0,
        ),
        (
            "member ACTIVE but OFFLINE under a health monitor",
            with_member(Active, Offline),
            true,
            safe,
            0,
        ),
        (
            "member ACTIVE/ONLINE but node NotReady",
            not_ready,
            true,
            safe,
            0,
        ),
        ("no member yet", no_member, true, safe, 0),
        (
            "member ACTIVE/ONLINE and node Ready",
            SERVING,
            true,
            safe,
            1,
        ),
        (
            "member ACTIVE/NO_MONITOR without a health monitor",
            with_member(Active, NoMonitor),
            false,
            safe,
            1,
        ),
        (
            "seed-001 gate: member PENDING_CREATE, LB ACTIVE",
            with_member(PendingCreate, Offline),
            true,
            unsafe_gate,
            1,
        ),
    ];
    for (name, h, monitor, gate, want) in rows {
        let mut w = rollout_with_replacement(h, monitor);
        w.gate = gate;
        let p = w.plan();
        let gone = removing(&p);
        assert_eq!(gone.len(), want, "{name}: {gone:?}");
        assert_eq!(count(&p, "CreateServer"), 0, "{name}: no second surge");
        if want == 1 {
            assert_eq!(gone, ["demo-cp-1"], "{name}: the oldest goes first");
            assert_eq!(targets(&p, "DeleteMember"), ["demo-cp-1"], "{name}");
            assert_eq!(count(&p, "DeleteServer"), 0, "{name}: member first");
        } else {
            assert_eq!(
                count(&p, "DeleteMember") + count(&p, "DeleteServer"),
                0,
                "{name}"
            );
        }
    }
}

#[test]
fn replacement_member_pending_create_keeps_every_old_machine() {
    let p = rollout_with_replacement(with_member(PendingCreate, Offline), true).plan();
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));
}

#[test]
fn replacement_member_active_but_offline_under_a_health_monitor_keeps_every_old_machine() {
    let p = rollout_with_replacement(with_member(Active, Offline), true).plan();
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));
}

#[test]
fn replacement_member_active_online_with_node_ready_marks_exactly_one_old_machine_for_removal() {
    let p = rollout_with_replacement(SERVING, true).plan();
    assert_eq!(removing(&p), ["demo-cp-1"]);
    let r = p.memory.machines["demo-cp-1"].removal.as_ref();
    assert!(
        r.is_some_and(|r| r.since == T0 && r.reason.contains("rollout")),
        "{r:?}"
    );
}

#[test]
fn load_balancer_only_gate_removes_an_old_machine_while_the_member_is_pending_create() {
    // The unsafe seed-001 behaviour, kept only so the invariants can prove they catch it.
    let mut w = rollout_with_replacement(with_member(PendingCreate, Offline), true);
    w.gate = MemberGate::LoadBalancerOnly;
    assert_eq!(removing(&w.plan()), ["demo-cp-1"]);
}

#[test]
fn member_first_seen_not_serving_starts_the_member_timeout_clock_at_now() {
    let p = rollout_with_replacement(with_member(PendingCreate, Offline), true).plan();
    assert_eq!(
        p.memory.machines["demo-cp-6"].member_unready_since,
        Some(T0)
    );
    assert_eq!(p.memory.machines["demo-cp-1"].member_unready_since, None);
    assert!(condition(&p, kind::LOAD_BALANCER_MEMBER_STUCK).is_none());
}

#[test]
fn member_not_serving_for_member_timeout_halts_the_rollout_with_load_balancer_member_stuck() {
    let mut w = rollout_with_replacement(with_member(PendingCreate, Offline), true);
    w.memory = w.plan().memory;
    let timeout = Duration::from_mins(5);

    w.now = Timestamp(T0.plus(timeout).0 - 1);
    let p = w.plan();
    assert!(
        condition(&p, kind::LOAD_BALANCER_MEMBER_STUCK).is_none(),
        "1ms before the deadline"
    );

    w.now = T0.plus(timeout);
    let p = w.plan();
    let c = condition(&p, kind::LOAD_BALANCER_MEMBER_STUCK).expect("stuck at the deadline");
    assert!(c.status, "{c:?}");
    assert!(
        c.message.contains("demo-cp-6"),
        "names the machine: {}",
        c.message
    );
    assert!(
        c.message.contains("memberTimeout 5m"),
        "names the timeout: {}",
        c.message
    );
    assert!(removing(&p).is_empty(), "the rollout halts");
    assert_eq!(
        p.memory.machines["demo-cp-6"].member_unready_since,
        Some(T0)
    );
}

#[test]
fn member_timeout_counts_from_the_persisted_start_after_a_restart_not_from_now() {
    let mut w = rollout_with_replacement(with_member(PendingCreate, Offline), true);
    let started = Timestamp(T0.0 - Duration::from_mins(6).as_millis());
    w.record("demo-cp-6").member_unready_since = Some(started);
    let p = w.plan();
    let c = condition(&p, kind::LOAD_BALANCER_MEMBER_STUCK).expect("6m > memberTimeout 5m");
    assert!(c.message.contains("for 6m"), "{}", c.message);
    assert_eq!(
        p.memory.machines["demo-cp-6"].member_unready_since,
        Some(started)
    );
}

/// How the removal of cp-1 proceeds from what the cloud shows: (step, member state or
/// `None` when gone, server deleting or `None` when gone, what the plan does).
type RemovalStep = (
    &'static str,
    Option<ProvisioningStatus>,
    Option<bool>,
    &'static str,
);

#[test]
fn removal_deletes_the_member_first_then_the_server_then_forgets_the_machine() {
    let cp1 = "demo-cp-1";
    let rows: [RemovalStep; 5] = [
        ("member ACTIVE", Some(Active), Some(false), "DeleteMember"),
        (
            "member PENDING_DELETE",
            Some(PendingDelete),
            Some(false),
            "wait",
        ),
        ("member gone", None, Some(false), "DeleteServer"),
        ("server deleting", None, Some(true), "wait"),
        ("server gone", None, None, "forget"),
    ];
    for (step, member, server, want) in rows {
        let mut w = World::cluster(spec(V1, 2), V1, 2);
        // A fourth machine, so that three others serve while cp-1 goes.
        w.add_cp(6, V1, SERVING);
        w.mark_removal(cp1);
        match member {
            Some(s) => w.member(cp1).provisioning_status = s,
            None => w.drop_member(cp1),
        }
        match server {
            Some(deleting) => {
                let s = w.observed.servers.iter_mut().find(|s| s.name == cp1);
                s.expect("cp-1 has a server").task_state = deleting.then(|| "deleting".into());
            }
            None => w.drop_server(cp1),
        }
        let p = w.plan();
        let on_cp1 = |kind| targets(&p, kind).contains(&cp1.to_string());
        let done = match (on_cp1("DeleteMember"), on_cp1("DeleteServer")) {
            (true, false) => "DeleteMember",
            (false, true) => "DeleteServer",
            (false, false) if p.memory.machines.contains_key(cp1) => "wait",
            (false, false) => "forget",
            (true, true) => "both in one pass",
        };
        assert_eq!(done, want, "{step}: {:#?}", p.actions);
        if want == "forget" {
            assert!(
                p.events.iter().any(|e| e.reason == "MachineRemoved"),
                "{step}"
            );
        } else {
            assert!(p.requeue_after.is_some(), "{step}: looks again");
        }
    }
}

#[test]
fn removal_counts_a_member_listed_as_deleted_as_gone() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.mark_removal("demo-cp-1");
    w.member("demo-cp-1").provisioning_status = ProvisioningStatus::Deleted;
    let p = w.plan();
    assert_eq!(targets(&p, "DeleteMember"), Vec::<String>::new());
    assert_eq!(targets(&p, "DeleteServer"), ["demo-cp-1"]);
}

#[test]
fn rollout_removes_the_unhealthy_old_machine_before_healthy_older_ones() {
    let mut w = World::with_infra(spec(V2, 0));
    w.add_cp(1, V1, SERVING);
    w.add_cp(2, V1, SERVING);
    w.add_cp(3, V1, with_member(Active, Offline)); // the newest old one, not serving
    w.add_cp(6, V2, SERVING);
    let p = w.plan();
    assert_eq!(removing(&p), ["demo-cp-3"]);
    assert_eq!(targets(&p, "DeleteMember"), ["demo-cp-3"]);
}

#[test]
fn rollout_halts_while_fewer_than_replicas_other_machines_serve() {
    // The replacement came up long ago but never serves (member OFFLINE): removing any
    // of the serving old machines would leave two, fewer than three.
    let mut w = World::with_infra(spec(V2, 0));
    w.add_cp(1, V1, SERVING);
    w.add_cp(2, V1, SERVING);
    w.add_cp(3, V1, SERVING);
    w.add_cp(6, V2, with_member(Active, Offline));
    w.record("demo-cp-6").created_at = Timestamp(T0.0 - 1_200_000);
    let p = w.plan();
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));
    assert_eq!(count(&p, "DeleteMember") + count(&p, "DeleteServer"), 0);
    // The halt is said, not silent: the condition names the machine it waits for.
    let halted = p
        .conditions
        .iter()
        .find(|c| c.kind == "RolloutHalted" && c.status)
        .expect("RolloutHalted is set");
    assert!(halted.message.contains("demo-cp-6"), "{}", halted.message);
}

#[test]
fn a_machine_that_serves_nothing_is_taken_out_first_without_waiting_for_the_minimum() {
    // Two old members OFFLINE: removing one of them lowers nothing that serves.
    let mut w = World::with_infra(spec(V2, 0));
    w.add_cp(1, V1, SERVING);
    w.add_cp(2, V1, with_member(Active, Offline));
    w.add_cp(3, V1, with_member(Active, Offline));
    w.add_cp(6, V2, SERVING);
    let p = w.plan();
    assert_eq!(
        removing(&p),
        ["demo-cp-2"],
        "{:#?} {:#?}",
        p.conditions,
        p.actions
    );
}

#[test]
fn rollout_stays_within_max_surge_while_an_old_machine_is_still_being_removed() {
    // cp-1 is on its way out (member delete pending); cp-2, cp-3 old; cp-6 new and serving.
    // Four control-plane servers exist = replicas + maxSurge: no fifth may be created yet.
    let mut w = rollout_with_replacement(SERVING, true);
    w.mark_removal("demo-cp-1");
    w.member("demo-cp-1").provisioning_status = PendingDelete;
    let p = w.plan();
    assert_eq!(targets(&p, "CreateServer"), Vec::<String>::new());
}

#[test]
fn worker_pool_scales_down_one_machine_at_a_time_newest_first() {
    let mut w = World::cluster(spec(V1, 1), V1, 3); // workers-4..6, wants 1
    w.drained("demo-workers-6");
    let p = w.plan();
    assert_eq!(removing(&p), ["demo-workers-6"]);
    assert_eq!(
        targets(&p, "DeleteServer"),
        ["demo-workers-6"],
        "no member to wait for"
    );

    // Next pass: the first victim's server is still listed; no second victim yet.
    w.memory = p.memory;
    let p = w.plan();
    assert_eq!(removing(&p), ["demo-workers-6"]);

    // Once its server is gone its record is dropped, and only then the next one goes.
    w.drop_server("demo-workers-6");
    w.memory = p.memory;
    let p = w.plan();
    assert!(!p.memory.machines.contains_key("demo-workers-6"));
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));
    w.memory = p.memory;
    let p = w.plan();
    assert_eq!(removing(&p), ["demo-workers-5"]);
    assert_eq!(count(&p, "CreateServer"), 0);
}

#[test]
fn worker_pool_scales_up_by_creating_the_missing_machines() {
    let w = World::cluster(spec(V1, 4), V1, 2); // workers-4, workers-5; wants 4
    let p = w.plan();
    assert_eq!(
        targets(&p, "CreateServer"),
        ["demo-workers-6", "demo-workers-7"]
    );
    assert_eq!(p.memory.machine_seq, 7);
    for name in ["demo-workers-6", "demo-workers-7"] {
        let r = &p.memory.machines[name];
        assert_eq!(r.role, MachineRole::Pool("workers".into()));
        assert_eq!(r.server_id, None);
    }
    assert!(removing(&p).is_empty());
    assert!(p.actions.iter().all(|a| !a.reason.is_empty()));
}
