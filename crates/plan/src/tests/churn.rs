//! F6 and F11: replacements of failed machines. A set repaired machine by machine is
//! no loop; one slot re-created again and again is, and it is re-created at a falling
//! pace before the breaker stops it.

use super::*;

/// The cluster with 10 workers, of which workers-5 .. workers-13 report ERROR.
fn nine_of_ten_failed() -> World {
    let mut w = World::cluster(spec(V1, 10), V1, 10);
    for s in w.observed.servers.iter_mut().filter(|s| {
        s.name
            .strip_prefix("demo-workers-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n >= 5)
    }) {
        s.status = ServerStatus::Error;
    }
    w
}

#[test]
fn f11_a_pool_repaired_machine_by_machine_is_not_a_loop() {
    let w = nine_of_ten_failed();
    let p = w.plan();
    // maxUnhealthy 40% of 10: four at once, each the first re-creation of its slot.
    assert_eq!(under_repair(&p).len(), 4, "{:#?}", p.status.repairs);
    assert!(condition(&p, "ReconcileLoopDetected").is_none());
    assert!(p.events.iter().all(|e| e.reason != "ReconcileLoopDetected"));
    // Each replacement takes over its slot: the ones made in this pass already, the
    // others when they are made.
    let heirs = p.memory.churn.heirs.get("workers").map_or(0, Vec::len);
    let made = p
        .memory
        .machines
        .values()
        .filter(|r| r.lineage.len() == 1)
        .count();
    assert_eq!(heirs + made, 4, "{heirs} waiting, {made} made");
}

#[test]
fn f11_one_slot_re_created_churn_limit_times_is_stopped_and_named() {
    let mut w = nine_of_ten_failed();
    let t = |mins: u64| Timestamp(T0.0 - mins * 60_000);
    w.record("demo-workers-5").lineage = vec![t(20), t(12), t(5)];
    let p = w.plan();
    let stopped = condition(&p, "ReconcileLoopDetected").expect("the slot is stopped");
    assert!(
        stopped.message.contains("slot of demo-workers-5"),
        "{}",
        stopped.message
    );
    assert!(stopped.message.contains("3 times"), "{}", stopped.message);
    let r = under_repair(&p);
    assert!(!r.contains(&"demo-workers-5".to_string()), "{r:?}");
    assert_eq!(r.len(), 4, "the other slots are still repaired: {r:?}");
}

#[test]
fn f6_a_slot_re_created_lately_waits_a_growing_backoff() {
    let mut w = nine_of_ten_failed();
    // workers-5 replaced a machine 10 s ago: the next replacement waits 30 s.
    w.record("demo-workers-5").lineage = vec![Timestamp(T0.0 - 10_000)];
    // workers-6 was the third in its slot, 50 s ago: it waits 2 minutes.
    w.record("demo-workers-6").lineage = vec![Timestamp(T0.0 - 200_000), Timestamp(T0.0 - 50_000)];
    let p = w.plan();
    let r = under_repair(&p);
    assert!(!r.contains(&"demo-workers-5".to_string()), "{r:?}");
    assert!(!r.contains(&"demo-workers-6".to_string()), "{r:?}");
    let waiting: Vec<&str> = p
        .status
        .repairs
        .iter()
        .filter(|x| x.state.contains("backoff"))
        .map(|x| x.machine.as_str())
        .collect();
    assert_eq!(waiting, ["demo-workers-5", "demo-workers-6"]);
    let requeue = p.requeue_after.expect("looks again").as_millis();
    assert!(
        requeue <= 20_000,
        "looks again when the first backoff ends: {requeue}"
    );
    // Once the backoff is over, the slot is replaced.
    w.now = Timestamp(T0.0 + 25_000);
    let p = w.plan();
    assert!(under_repair(&p).contains(&"demo-workers-5".to_string()));
}

/// Plans `passes` times; before each pass, `remove` takes something away from the cloud
/// as something outside flightdeck would, and the object flightdeck made in the pass
/// before shows up. Answers the last plan.
fn fight(
    w: &mut World,
    passes: usize,
    remove: impl Fn(&mut World),
    made: impl Fn(&mut World, &Plan),
) -> Plan {
    let mut last = w.plan();
    for _ in 0..passes {
        w.memory = last.memory.clone();
        made(w, &last);
        w.now = w.now.plus_millis(60_000);
        // Seen for a pass, then taken away again.
        w.memory = w.plan().memory;
        remove(w);
        w.now = w.now.plus_millis(60_000);
        last = w.plan();
    }
    last
}

#[test]
fn f11_a_rule_something_keeps_removing_is_re_added_churn_limit_times_then_left_alone() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    let lose_tcp = |w: &mut World| {
        w.observed.security_groups[0]
            .rules
            .retain(|r| r.protocol.as_deref() != Some("tcp"));
    };
    let apply_made = |w: &mut World, p: &Plan| {
        for a in &p.actions {
            if let Action::CreateSecurityGroupRule { rule } = &a.action {
                let proto = rule.protocol.as_deref().unwrap_or("any");
                w.observed.security_groups[0]
                    .rules
                    .push(super::rule(proto, "ingress", POD_CIDR));
            }
        }
    };
    lose_tcp(&mut w);
    // Made once, then lost and re-made three times (churnLimit); lost a fourth time, it
    // is left alone.
    let p = fight(&mut w, 4, lose_tcp, apply_made);
    assert_eq!(count(&p, "CreateSecurityGroupRule"), 0, "{:#?}", p.actions);
    let stopped = condition(&p, "ReconcileLoopDetected").expect("named");
    assert!(
        stopped
            .message
            .contains("pod-network rule tcp from 10.244.0.0/16")
            && stopped.message.contains("3 times"),
        "{}",
        stopped.message
    );
    assert!(
        !stopped.message.contains("udp") && !stopped.message.contains("icmp"),
        "the other rules are not stopped: {}",
        stopped.message
    );
}

#[test]
fn f11_a_member_made_but_never_seen_is_retried_not_counted() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.drop_member("demo-cp-2");
    // Octavia never shows the member: every pass asks again, a retry of the same
    // creation, which is no loop.
    let mut p = w.plan();
    for _ in 0..6 {
        assert_eq!(count(&p, "CreateMember"), 1, "{:#?}", p.actions);
        w.memory = p.memory;
        w.now = w.now.plus_millis(60_000);
        p = w.plan();
    }
    assert!(condition(&p, "ReconcileLoopDetected").is_none());
}

#[test]
fn f11_the_history_of_an_object_that_stays_in_the_cloud_does_not_change_from_pass_to_pass() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    let tcp = |r: &flightdeck_cloud::SecurityGroupRule| r.protocol.as_deref() == Some("tcp");
    w.observed.security_groups[0].rules.retain(|r| !tcp(r));
    let p = w.plan();
    assert_eq!(count(&p, "CreateSecurityGroupRule"), 1, "{:#?}", p.actions);
    w.memory = p.memory;
    w.observed.security_groups[0]
        .rules
        .push(super::rule("tcp", "ingress", POD_CIDR));
    w.now = w.now.plus_millis(60_000);
    // First seen: the history says so once.
    w.memory = w.plan().memory;
    let settled = w.memory.churn.clone();
    // An hour of resyncs with the rule in place leaves the memory as it was: a quiet
    // reconcile commits nothing (issue 16).
    for _ in 0..12 {
        w.now = w.now.plus_millis(300_000);
        let p = w.plan();
        assert!(p.actions.is_empty(), "{:#?}", p.actions);
        assert_eq!(p.memory.churn, settled);
        w.memory = p.memory;
    }
}

#[test]
fn f11_a_new_machine_takes_over_the_slot_re_created_most_often() {
    // Two condemned machines left their slots waiting (a scale-down took one of them
    // without a replacement); the one machine made now carries on the most churned.
    let mut w = World::cluster(spec(V1, 2), V1, 1);
    let t = |mins: u64| Timestamp(T0.0 - mins * 60_000);
    w.memory.churn.heirs.insert(
        "workers".into(),
        vec![vec![t(20)], vec![t(25), t(12), t(6)]],
    );
    let p = w.plan();
    let made: Vec<&MachineRecord> = p
        .memory
        .machines
        .values()
        .filter(|r| r.created_at == T0)
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].lineage.len(), 3, "{:?}", made[0].lineage);
}
