//! The security group, the load-balancer chain, and which objects count as the cluster's.

use super::*;
use crate::POLL_OCTAVIA;
use crate::condition::kind;

#[test]
fn empty_cloud_creates_security_group_and_load_balancer_and_records_every_machine() {
    let p = World::empty(spec(V1, 2)).plan();

    assert_eq!(count(&p, "CreateSecurityGroup"), 1, "{:#?}", p.actions);
    assert_eq!(count(&p, "CreateLoadBalancer"), 1, "{:#?}", p.actions);
    assert!(p.actions.iter().any(|a| a.action
        == Action::CreateLoadBalancer {
            name: "demo-api".into(),
            subnet: "private-subnet".into(),
        }));
    assert!(
        p.actions.iter().all(|a| !a.reason.trim().is_empty()),
        "every action says why: {:#?}",
        p.actions
    );
    // Servers wait for the security group; their records are written now.
    assert_eq!(count(&p, "CreateServer"), 0);
    assert_eq!(p.memory.machine_seq, 5);
    let roles: Vec<_> = p.memory.machines.values().map(|r| r.role.clone()).collect();
    let cp = roles
        .iter()
        .filter(|r| **r == MachineRole::ControlPlane)
        .count();
    let workers = roles
        .iter()
        .filter(|r| **r == MachineRole::Pool("workers".into()))
        .count();
    assert_eq!((cp, workers), (3, 2), "{:#?}", p.memory.machines);
    for r in p.memory.machines.values() {
        assert_eq!(r.server_id, None, "{} has no server yet", r.name);
        assert!(r.removal.is_none() && !r.reason.is_empty(), "{r:#?}");
    }
    assert!(p.memory.machines.contains_key("demo-cp-1"));
    assert_eq!(condition(&p, kind::READY).map(|c| c.status), Some(false));
}

#[test]
fn machines_recorded_before_the_security_group_existed_are_created_once_it_does() {
    let mut w = World::empty(spec(V1, 2));
    w.memory = w.plan().memory;
    w.observed.security_groups.push(security_group(
        SG,
        tags(Role::SecurityGroup),
        ["tcp", "udp", "icmp"]
            .map(|p| rule(p, "ingress", POD_CIDR))
            .into(),
    ));
    w.observed.load_balancers.push(load_balancer(
        LB,
        tags(Role::ApiLoadBalancer),
        ProvisioningStatus::PendingCreate,
    ));

    let p = w.plan();
    let mut created = targets(&p, "CreateServer");
    created.sort();
    let mut recorded: Vec<_> = w.memory.machines.keys().cloned().collect();
    recorded.sort();
    assert_eq!(created, recorded, "each recorded machine exactly once");
    assert_eq!(p.memory.machine_seq, 5, "no new records");
    assert!(p.actions.iter().all(|a| match &a.action {
        Action::CreateServer { security_group, .. } => security_group == SG,
        _ => true,
    }));
}

#[test]
fn security_group_gets_exactly_the_missing_pod_cidr_rules() {
    let all = ["tcp", "udp", "icmp"];
    let rows: [(&str, Vec<SecurityGroupRule>, &[&str]); 5] = [
        ("no rules", vec![], &all),
        (
            "tcp present",
            vec![rule("tcp", "ingress", POD_CIDR)],
            &["udp", "icmp"],
        ),
        (
            "tcp and icmp present",
            vec![
                rule("icmp", "ingress", POD_CIDR),
                rule("tcp", "ingress", POD_CIDR),
            ],
            &["udp"],
        ),
        (
            "all three present",
            all.map(|p| rule(p, "ingress", POD_CIDR)).into(),
            &[],
        ),
        (
            "egress or other-CIDR rules do not count",
            vec![
                rule("tcp", "egress", POD_CIDR),
                rule("udp", "ingress", "10.0.0.0/8"),
            ],
            &all,
        ),
    ];
    for (name, rules, want) in rows {
        let mut w = World::cluster(spec(V1, 2), V1, 2);
        w.observed.security_groups[0].rules = rules;
        let p = w.plan();
        let planned: Vec<_> = p
            .actions
            .iter()
            .filter_map(|a| match &a.action {
                Action::CreateSecurityGroupRule { rule } => Some(rule),
                _ => None,
            })
            .collect();
        let protocols: Vec<_> = planned
            .iter()
            .map(|r| r.protocol.as_deref().unwrap_or("any"))
            .collect();
        assert_eq!(protocols, want, "{name}");
        for r in planned {
            assert_eq!(
                (
                    r.security_group_id.as_str(),
                    r.direction.as_str(),
                    r.ethertype.as_str()
                ),
                (SG, "ingress", "IPv4"),
                "{name}"
            );
            assert_eq!(r.remote_ip_prefix.as_deref(), Some(POD_CIDR), "{name}");
        }
        assert_eq!(p.actions.len(), want.len(), "{name}: {:#?}", p.actions);
    }
}

/// Situations that each want one load-balancer change, on a healthy V1 cluster.
fn lb_work() -> Vec<(&'static str, Setup)> {
    vec![
        ("listener missing", |w| {
            w.observed.listeners.clear();
            w.observed.pools.clear();
            w.observed.health_monitors.clear();
            w.observed.members.clear();
        }),
        ("health monitor missing", |w| {
            w.observed.health_monitors.clear()
        }),
        ("a running control-plane machine has no member", |w| {
            w.drop_member("demo-cp-2")
        }),
        ("a machine being removed still has its member", |w| {
            w.add_cp(6, V1, SERVING);
            w.mark_removal("demo-cp-1")
        }),
        ("all of the above but the listener", |w| {
            w.observed.health_monitors.clear();
            w.drop_member("demo-cp-2");
            w.drop_member("demo-cp-3");
            w.mark_removal("demo-cp-1");
        }),
    ]
}

#[test]
fn load_balancer_pending_update_gets_no_mutation_because_octavia_answers_409_immutable() {
    for (name, setup) in lb_work() {
        let mut w = World::cluster(spec(V1, 2), V1, 2);
        setup(&mut w);
        w.observed.load_balancers[0].provisioning_status = ProvisioningStatus::PendingUpdate;
        let p = w.plan();
        assert_eq!(lb_mutations(&p), Vec::<String>::new(), "{name}");
        assert!(
            p.requeue_after.is_some_and(|d| d <= POLL_OCTAVIA),
            "{name}: looks again soon, got {:?}",
            p.requeue_after
        );
    }
}

#[test]
fn load_balancer_active_gets_at_most_one_mutation_per_pass() {
    for (name, setup) in lb_work() {
        let mut w = World::cluster(spec(V1, 2), V1, 2);
        setup(&mut w);
        let p = w.plan();
        assert_eq!(lb_mutations(&p).len(), 1, "{name}: {:#?}", p.actions);
    }
}

#[test]
fn objects_without_the_role_tag_are_not_adopted_as_the_clusters_security_group_or_load_balancer() {
    let uid_only = || {
        let mut t = tags(Role::SecurityGroup);
        t.retain(|t| !t.starts_with(flightdeck_cloud::ownership::TAG_ROLE));
        t
    };
    let rows: [(&str, Vec<String>, Vec<String>, bool); 3] = [
        ("cluster and uid tags only", uid_only(), uid_only(), false),
        (
            "tagged for another role",
            tags(Role::Machine("cp-1".into())),
            tags(Role::ApiPool),
            false,
        ),
        (
            "recorded in memory but untagged",
            uid_only(),
            uid_only(),
            true,
        ),
    ];
    for (name, sg_tags, lb_tags, recorded) in rows {
        let mut w = World::empty(spec(V1, 2));
        w.observed.security_groups.push(security_group(
            "foreign-sg",
            sg_tags,
            ["tcp", "udp", "icmp"]
                .map(|p| rule(p, "ingress", POD_CIDR))
                .into(),
        ));
        w.observed.load_balancers.push(load_balancer(
            "foreign-lb",
            lb_tags,
            ProvisioningStatus::Active,
        ));
        if recorded {
            w.memory.ids.security_group = Some("foreign-sg".into());
            w.memory.ids.load_balancer = Some("foreign-lb".into());
            // A recorded object that is not (validly) listed is only taken for gone
            // after a while; until then nothing is created.
            let first = w.plan();
            assert_eq!(count(&first, "CreateSecurityGroup"), 0, "{name}");
            assert_eq!(count(&first, "CreateLoadBalancer"), 0, "{name}");
            w.memory = first.memory;
            w.now = Timestamp(T0.0 + 61_000);
        }
        let p = w.plan();
        assert_eq!(count(&p, "CreateSecurityGroup"), 1, "{name}");
        assert_eq!(count(&p, "CreateLoadBalancer"), 1, "{name}");
        assert_eq!(p.memory.ids.security_group, None, "{name}");
        assert_eq!(p.memory.ids.load_balancer, None, "{name}");
        assert!(
            p.actions
                .iter()
                .all(|a| !a.action.summary().contains("foreign")),
            "{name}: nothing acts on the foreign objects: {:#?}",
            p.actions
        );
        assert_eq!(p.status.load_balancer, None, "{name}");
    }
}

#[test]
fn a_load_balancer_held_pending_past_a_minute_is_looked_at_every_30_seconds() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.observed.load_balancers[0].provisioning_status = ProvisioningStatus::PendingUpdate;
    let p = w.plan();
    assert_eq!(
        p.requeue_after,
        Some(POLL_OCTAVIA),
        "a change in flight: soon"
    );
    assert_eq!(p.memory.lb_pending_since, Some(w.now));
    w.memory = p.memory;
    w.now = w.now.plus_millis(61_000);
    let p = w.plan();
    assert_eq!(
        p.requeue_after,
        Some(crate::POLL_STUCK),
        "held up (a hanging failover): no polling every 2 s"
    );
    let held = condition(&p, kind::LOAD_BALANCER_HELD_UP).expect("shown");
    assert!(
        held.status && held.message.contains("PENDING_UPDATE for 1m1s"),
        "{held:?}"
    );
    w.memory = p.memory;
    w.observed.load_balancers[0].provisioning_status = ProvisioningStatus::Active;
    let p = w.plan();
    assert_eq!(
        p.memory.lb_pending_since, None,
        "ACTIVE again: the clock resets"
    );
}

/// Issue 16: a build added its members one per pass (Octavia takes one change of a load
/// balancer at a time), three passes and three load-balancer waits for a control plane
/// of three. Its first members now go in one batch.
#[test]
fn a_builds_first_members_are_added_in_one_batch() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.memory.ready_since = None;
    w.observed.members.clear();
    let p = w.plan();
    assert_eq!(count(&p, "CreateMember"), 0, "{:#?}", p.actions);
    let batch: Vec<_> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::AddMembers { members, .. } => Some(members.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(batch.len(), 1, "{:#?}", p.actions);
    let names: Vec<_> = batch[0].iter().map(|m| m.machine.as_str()).collect();
    assert_eq!(names, ["demo-cp-1", "demo-cp-2", "demo-cp-3"]);
}

/// Once a cluster has served, or while its pool has a member, members are added one per
/// pass as before: a batch is only for a build's first members.
#[test]
fn members_missing_after_the_build_are_added_one_per_pass() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.observed.members.clear();
    let p = w.plan();
    assert_eq!(count(&p, "AddMembers"), 0, "{:#?}", p.actions);
    assert_eq!(targets(&p, "CreateMember"), ["demo-cp-1"]);

    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.memory.ready_since = None;
    w.drop_member("demo-cp-2");
    w.drop_member("demo-cp-3");
    let p = w.plan();
    assert_eq!(count(&p, "AddMembers"), 0, "{:#?}", p.actions);
    assert_eq!(targets(&p, "CreateMember"), ["demo-cp-2"]);
}
