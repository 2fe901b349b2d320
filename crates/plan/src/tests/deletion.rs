//! F12: deletion removes every owned object in dependency order and confirms each is gone.

use super::*;
use crate::status::Phase;

fn deleting(w: &mut World) {
    w.memory.deletion_requested = Some(Timestamp(T0.0 - 1000));
}

/// A deletion pass over the world as it stands, so its recorded objects count as seen.
fn saw_everything(w: &mut World) {
    deleting(w);
    let p = w.plan();
    w.memory.deletion_proof = p.memory.deletion_proof;
    assert!(!w.memory.deletion_proof.seen.is_empty());
}

#[test]
fn a_deletion_that_sees_none_of_the_recorded_objects_stops_instead_of_forgetting_the_cluster() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    deleting(&mut w);
    // Another cloud entry, project or namespace: none of the recorded objects is listed.
    let nodes = w.observed.nodes.clone();
    w.observed = Observed {
        nodes,
        ..Observed::default()
    };
    let p = w.plan();
    assert!(!p.deleted, "nothing seen is no proof of deletion");
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert_eq!(p.status.phase, Phase::Deleting);
    assert!(!p.memory.machines.is_empty(), "records are kept");
    let c = p
        .conditions
        .iter()
        .find(|c| c.kind == "DeletionUnconfirmed")
        .expect("DeletionUnconfirmed");
    assert!(c.status);
    assert!(c.message.contains("--forget"), "{}", c.message);
    assert!(
        c.message.contains(LB),
        "names the recorded objects: {}",
        c.message
    );
    assert!(p.requeue_after.is_some(), "looks again");

    // An operator checked: the objects are gone.
    w.memory.deletion_proof.forget = true;
    let p = w.plan_confirmed();
    assert!(p.deleted);
    assert!(p.events.iter().any(|e| e.reason == "ClusterDeleted"));
}

#[test]
fn a_deletion_that_saw_some_recorded_objects_ends_when_the_rest_vanished_outside_flightdeck() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    deleting(&mut w);
    // This pass sees only the load balancer; the servers were deleted by hand.
    w.observed.servers.clear();
    w.observed.security_groups.clear();
    let p = w.plan();
    assert!(!p.deleted, "the load balancer is still there");
    w.memory = p.memory;
    let nodes = w.observed.nodes.clone();
    w.observed = Observed {
        nodes,
        ..Observed::default()
    };
    let p = w.plan_confirmed();
    assert!(p.deleted, "{:#?}", p.conditions);
}

#[test]
fn deletion_deletes_the_load_balancer_with_cascade_and_every_server_but_not_the_security_group() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    deleting(&mut w);
    let p = w.plan();

    let lbs: Vec<_> = p
        .actions
        .iter()
        .filter(|a| {
            a.action
                == Action::DeleteLoadBalancer {
                    load_balancer_id: LB.into(),
                }
        })
        .collect();
    assert_eq!(lbs.len(), 1, "{:#?}", p.actions);
    assert!(lbs[0].action.summary().contains("cascade"));
    assert_eq!(
        count(&p, "DeleteMember"),
        0,
        "the cascade takes the members"
    );
    let mut servers = targets(&p, "DeleteServer");
    servers.sort();
    let mut want: Vec<_> = w.observed.servers.iter().map(|s| s.name.clone()).collect();
    want.sort();
    assert_eq!(servers, want);
    assert_eq!(count(&p, "DeleteSecurityGroup"), 0, "servers still use it");
    assert_eq!(p.actions.len(), 1 + want.len(), "{:#?}", p.actions);
    assert!(!p.deleted);
    assert_eq!(p.status.phase, Phase::Deleting);
    assert_eq!(count(&p, "CreateServer") + count(&p, "CreateMember"), 0);
}

#[test]
fn security_group_is_deleted_only_once_no_server_is_listed() {
    // (what is left besides the security group, want DeleteSecurityGroup)
    let rows: [(&str, Setup, bool); 4] = [
        (
            "a running server",
            |w| w.observed.servers.truncate(1),
            false,
        ),
        (
            "a server already deleting",
            |w| {
                w.observed.servers.truncate(1);
                w.observed.servers[0].task_state = Some("deleting".into());
            },
            false,
        ),
        (
            "no server, load balancer still listed",
            |w| w.observed.servers.clear(),
            true,
        ),
        (
            "nothing else",
            |w| {
                w.observed.servers.clear();
                w.observed.load_balancers.clear();
            },
            true,
        ),
    ];
    for (name, setup, want) in rows {
        let mut w = World::cluster(spec(V1, 2), V1, 2);
        deleting(&mut w);
        // The load balancer's cascade is under way: its children are gone already.
        w.observed.load_balancers[0].provisioning_status = ProvisioningStatus::PendingDelete;
        w.observed.listeners.clear();
        w.observed.pools.clear();
        w.observed.health_monitors.clear();
        w.observed.members.clear();
        setup(&mut w);
        let p = w.plan();
        let deletes_sg = p.actions.iter().any(|a| {
            a.action
                == Action::DeleteSecurityGroup {
                    security_group_id: SG.into(),
                }
        });
        assert_eq!(deletes_sg, want, "{name}: {:#?}", p.actions);
        assert_eq!(
            count(&p, "DeleteLoadBalancer"),
            0,
            "{name}: PENDING_DELETE is waited out"
        );
        assert!(!p.deleted, "{name}: the security group is still listed");
    }
}

#[test]
fn deletion_is_done_only_when_nothing_is_observed() {
    let rows: [(&str, Setup); 8] = [
        ("load balancer", |w| {
            w.observed.load_balancers = World::with_infra(spec(V1, 2)).observed.load_balancers
        }),
        ("orphan listener", |w| {
            w.observed.listeners = World::with_infra(spec(V1, 2)).observed.listeners
        }),
        ("orphan pool", |w| {
            w.observed.pools = World::with_infra(spec(V1, 2)).observed.pools
        }),
        ("orphan health monitor", |w| {
            w.observed.health_monitors = World::with_infra(spec(V1, 2)).observed.health_monitors
        }),
        ("orphan member", |w| {
            w.observed.members = World::cluster(spec(V1, 2), V1, 0).observed.members
        }),
        ("server", |w| {
            w.observed.servers = World::cluster(spec(V1, 2), V1, 0).observed.servers
        }),
        ("security group", |w| {
            w.observed.security_groups = World::with_infra(spec(V1, 2)).observed.security_groups
        }),
        ("nothing", |_| {}),
    ];
    for (left, setup) in rows {
        let mut w = World::cluster(spec(V1, 2), V1, 2);
        // An earlier pass of this deletion saw the cluster's objects.
        saw_everything(&mut w);
        let nodes = w.observed.nodes.clone();
        w.observed = Observed {
            nodes, // nodes belong to the workload cluster, not to the cloud
            ..Observed::default()
        };
        deleting(&mut w);
        setup(&mut w);
        let p = w.plan_confirmed();
        let done = left == "nothing";
        assert_eq!(p.deleted, done, "{left} left: {:#?}", p.actions);
        if done {
            assert!(p.actions.is_empty(), "{:#?}", p.actions);
            assert!(p.memory.machines.is_empty());
            assert_eq!(p.memory.ids, RecordedIds::default());
            assert_eq!(p.status.phase, Phase::Deleted);
            assert!(p.events.iter().any(|e| e.reason == "ClusterDeleted"));
        } else {
            assert!(
                !p.memory.machines.is_empty(),
                "{left}: records kept until done"
            );
            assert!(p.requeue_after.is_some(), "{left}: looks again");
        }
    }
}

/// Swarm seed 15006030 (callBudget): a deletion waiting on a load balancer Octavia held
/// PENDING_UPDATE for six minutes looked again every 2 s, listing every kind each time.
#[test]
fn a_deletion_waiting_on_a_load_balancer_held_pending_past_a_minute_looks_every_30_seconds() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    deleting(&mut w);
    // The servers and the security group are gone; the load balancer is held.
    w.observed.servers.clear();
    w.observed.security_groups.clear();
    let held = ProvisioningStatus::PendingUpdate;
    // (seconds later, the load balancer's status, deletes it, looks again within)
    let passes = [
        (0, held, 0, crate::POLL_OCTAVIA),
        (61, held, 0, crate::POLL_STUCK),
        (91, ProvisioningStatus::Active, 1, crate::POLL_OCTAVIA),
    ];
    for (at, status, deletes, poll) in passes {
        w.now = Timestamp(T0.0 + at * 1000);
        w.observed.load_balancers[0].provisioning_status = status;
        let p = w.plan();
        let what = format!("{}s, {}", at, status.as_str());
        assert_eq!(count(&p, "DeleteLoadBalancer"), deletes, "{what}");
        assert_eq!(p.requeue_after, Some(poll), "{what}");
        assert!(!p.deleted, "{what}");
        w.memory = p.memory;
    }
    assert_eq!(
        w.memory.lb_pending_since, None,
        "ACTIVE again: the clock resets"
    );
}
