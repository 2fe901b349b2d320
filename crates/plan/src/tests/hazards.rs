//! Hazards a review found: an unusual answer from the cloud, or a change of heart
//! between two passes, must never take the API down or make the planner poll hot.

use flightdeck_cloud::ServerStatus;
use flightdeck_spec::Duration;

use super::*;
use OperatingStatus::{Offline, Online};
use ProvisioningStatus::{Active, Error, PendingDelete};

fn serving_count(w: &World, except: &[&str]) -> usize {
    w.observed
        .members
        .iter()
        .filter(|m| !except.contains(&m.name.as_str()))
        .filter(|m| m.provisioning_status == Active && m.operating_status == Online)
        .count()
}

/// R1: a removal decided while the gate held is carried out later without re-checking it.
/// cp-1 was marked when cp-2, cp-3 and cp-6 served; its member delete did not go out
/// (503 / LB busy). Now every other member is OFFLINE: deleting cp-1's member leaves
/// the pool with nothing serving.
#[test]
fn a_planned_removal_is_withdrawn_when_the_others_stop_serving() {
    let mut w = World::cluster(spec(V2, 2), V1, 2);
    w.add_cp(6, V2, SERVING);
    w.mark_removal("demo-cp-1");
    for n in ["demo-cp-2", "demo-cp-3", "demo-cp-6"] {
        w.member(n).operating_status = Offline;
    }
    assert_eq!(serving_count(&w, &[]), 1, "only cp-1 serves");
    let p = w.plan();
    assert!(
        targets(&p, "DeleteMember").is_empty(),
        "deletes the last serving member: {:?}",
        targets(&p, "DeleteMember")
    );
}

/// R2: servers that report ERROR are all marked for removal at once, with no
/// one-at-a-time rule and no healthy minimum, even though Octavia says their members
/// are ACTIVE/ONLINE and their nodes are Ready. They are replaced, one at a time.
#[test]
fn servers_in_error_that_still_serve_are_replaced_one_at_a_time() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    for s in w
        .observed
        .servers
        .iter_mut()
        .filter(|s| s.name.contains("-cp-"))
    {
        s.status = ServerStatus::Error;
    }
    let p = w.plan();
    let removing = removing(&p);
    assert!(
        removing.len() <= 1,
        "{} control-plane machines marked at once: {removing:?}; first member delete: {:?}",
        removing.len(),
        targets(&p, "DeleteMember")
    );
    // And the replacement proceeds: one control-plane machine is repaired, and a
    // server to take its place is asked for.
    let repaired = under_repair(&p);
    let creates = targets(&p, "CreateServer");
    assert_eq!(
        repaired.len(),
        1,
        "one machine repaired at once: {repaired:?}"
    );
    assert!(repaired[0].contains("-cp-"), "{repaired:?}");
    assert_eq!(
        creates.iter().filter(|m| m.contains("-cp-")).count(),
        1,
        "one replacement control-plane server: {creates:?}"
    );
}

/// R3: one Nova list that misses the servers (empty page, wrong scope) makes every
/// machine `Gone`; all are marked and their (serving) members deleted.
#[test]
fn an_empty_server_list_removes_nothing() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.observed.servers.clear();
    let p = w.plan();
    let removing = removing(&p);
    assert!(
        removing.is_empty(),
        "{} machines marked on an empty server list: {removing:?}; {:?}",
        removing.len(),
        targets(&p, "DeleteMember")
    );
    assert!(condition(&p, crate::condition::kind::OBSERVATION_SUSPECT).is_some());
}

/// A server list that shows none of the recorded servers is believed only when the
/// servers, read one by one, say they are gone: then they are replaced (a store restored
/// from before they were deleted; seed 245 with `--lagging-store` stayed with no control
/// plane at all behind `NoRecordedServerListed`). One read that finds a server keeps the
/// list suspect.
#[test]
fn an_empty_server_list_is_believed_when_each_server_read_directly_is_gone() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    let ids: Vec<String> = w.observed.servers.iter().map(|s| s.id.clone()).collect();
    w.observed.servers.clear();
    let long_ago = Timestamp(T0.0 - 3_600_000);
    for r in w.memory.machines.values_mut() {
        r.server_missing_since = Some(long_ago);
    }

    w.observed.direct_reads = ids.iter().map(|id| (id.clone(), true)).collect();
    w.observed.direct_reads.insert(ids[0].clone(), false);
    let p = w.plan();
    assert!(condition(&p, crate::condition::kind::OBSERVATION_SUSPECT).is_some());
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));

    w.observed.direct_reads = ids.iter().map(|id| (id.clone(), true)).collect();
    let p = w.plan();
    assert!(
        condition(&p, crate::condition::kind::OBSERVATION_SUSPECT).is_none(),
        "{:?}",
        p.conditions
    );
    let removed: Vec<&str> = p
        .events
        .iter()
        .filter(|e| e.reason == "MachineRemovalStarted" && e.message.contains("disappeared"))
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(removed.len(), ids.len(), "every gone machine: {removed:#?}");
    let creates = targets(&p, "CreateServer");
    assert!(
        creates.iter().filter(|m| m.contains("-cp-")).count() == 3,
        "the control plane is made again: {creates:?}"
    );
}

/// R4: a member stuck PENDING_DELETE far past memberTimeout is polled every 2 s
/// forever, although the code promises POLL_STUCK (30 s) for stuck members.
#[test]
fn a_member_stuck_pending_delete_is_polled_slowly() {
    let mut w = World::cluster(spec(V2, 2), V1, 2);
    w.add_cp(6, V2, SERVING);
    w.mark_removal("demo-cp-1");
    w.member("demo-cp-1").provisioning_status = PendingDelete;
    w.record("demo-cp-1").member_unready_since = Some(Timestamp(T0.0 - 3_600_000));
    let p = w.plan();
    assert!(condition(&p, crate::condition::kind::LOAD_BALANCER_MEMBER_STUCK).is_some());
    assert!(
        p.requeue_after >= Some(Duration::from_secs(30)),
        "requeue {:?}",
        p.requeue_after
    );
}

/// R5: a load balancer in ERROR (not replaced by design) is polled every 2 s forever
/// whenever some load-balancer change is wanted.
#[test]
fn a_load_balancer_in_error_is_polled_slowly() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.observed.load_balancers[0].provisioning_status = Error;
    w.drop_member("demo-cp-3");
    let p = w.plan();
    assert!(condition(&p, crate::condition::kind::LOAD_BALANCER_FAILED).is_some());
    assert!(
        p.requeue_after >= Some(Duration::from_secs(30)),
        "requeue {:?}",
        p.requeue_after
    );
}

/// R10a: one Octavia list that comes back empty makes the planner forget the API load
/// balancer and create a second one (new VIP) instead of waiting.
#[test]
fn an_empty_load_balancer_list_does_not_create_a_second_load_balancer() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.observed.load_balancers.clear();
    w.observed.listeners.clear();
    w.observed.pools.clear();
    w.observed.health_monitors.clear();
    w.observed.members.clear();
    w.observed.nodes = None;
    let p = w.plan();
    assert_eq!(
        count(&p, "CreateLoadBalancer"),
        0,
        "ids now {:?}",
        p.memory.ids
    );
    assert!(condition(&p, crate::condition::kind::OBJECT_MISSING).is_some());
    // Still missing a minute later: now it is taken for gone and created again.
    let mut later = w;
    later.memory = p.memory;
    later.now = Timestamp(T0.0 + 61_000);
    let p = later.plan();
    assert_eq!(count(&p, "CreateLoadBalancer"), 1);
}

/// R10b: after that, memory points at the new load balancer, but members are matched by
/// machine tag across *every* owned pool, so each machine's old-pool member counts as its
/// member: the new pool never gets one, yet the control plane shows serving.
#[test]
fn members_of_another_pool_do_not_count_for_the_recorded_pool() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    let o = &mut w.observed;
    o.load_balancers
        .push(load_balancer("lb-2", tags(Role::ApiLoadBalancer), Active));
    o.listeners.push(Listener {
        id: "listener-2".into(),
        name: "demo-api-6443".into(),
        loadbalancer_id: "lb-2".into(),
        protocol_port: 6443,
        provisioning_status: Active,
        tags: tags(Role::ApiListener),
    });
    o.pools.push(Pool {
        id: "pool-2".into(),
        name: "demo-api".into(),
        loadbalancer_id: "lb-2".into(),
        listener_id: Some("listener-2".into()),
        provisioning_status: Active,
        tags: tags(Role::ApiPool),
    });
    o.health_monitors.push(HealthMonitor {
        id: "hm-2".into(),
        name: "demo-api".into(),
        pool_id: "pool-2".into(),
        kind: "TCP".into(),
        provisioning_status: Active,
        tags: tags(Role::ApiHealthMonitor),
    });
    w.memory.ids.load_balancer = Some("lb-2".into());
    w.memory.ids.listener = Some("listener-2".into());
    w.memory.ids.pool = Some("pool-2".into());
    w.memory.ids.health_monitor = Some("hm-2".into());
    let p = w.plan();
    assert!(
        count(&p, "CreateMember") > 0,
        "new pool stays empty; status ready={}",
        p.status.ready
    );
}

/// Found by the swarm: with every node NotReady (a blind observer) and the replacement's
/// server in ERROR, the only control-plane machine looked like it "served nothing" and
/// was removed, taking the API down. Octavia says its member serves; it must stay.
#[test]
fn the_only_serving_control_plane_machine_stays_while_the_node_list_is_blind() {
    let mut spec1 = spec(V2, 0);
    spec1.spec.control_plane.replicas =
        flightdeck_spec::cluster::ControlPlaneReplicas::new(1).expect("replicas");
    let mut w = World::with_infra(spec1);
    w.add_cp(
        1,
        V1,
        Health {
            member: Some((Active, Online)),
            node_ready: Some(false),
        },
    );
    w.add_cp(
        4,
        V2,
        Health {
            member: None,
            node_ready: None,
        },
    );
    for s in w
        .observed
        .servers
        .iter_mut()
        .filter(|s| s.name == "demo-cp-4")
    {
        s.status = ServerStatus::Error;
    }
    let p = w.plan();
    assert!(removing(&p).is_empty(), "{:?}", removing(&p));
    assert!(targets(&p, "DeleteMember").is_empty());
}

/// Found by the swarm: without a health monitor every ACTIVE member looks like it
/// serves, so an unregistered control-plane machine under repair "carried traffic" and
/// could never be taken out, while the next broken one waited for the budget forever.
/// Without a monitor, the node is the evidence.
#[test]
fn an_unregistered_control_plane_machine_under_repair_is_taken_out_without_a_monitor() {
    let mut w = World::with_infra(spec_with(V1, 0, false));
    let no_node = Health {
        member: Some((Active, OperatingStatus::NoMonitor)),
        node_ready: None,
    };
    let ready = Health {
        member: Some((Active, OperatingStatus::NoMonitor)),
        node_ready: Some(true),
    };
    w.add_cp(1, V1, no_node);
    w.add_cp(2, V1, no_node);
    w.add_cp(3, V1, ready);
    w.add_cp(9, V1, ready);
    for n in ["demo-cp-1", "demo-cp-2"] {
        w.record(n).created_at = Timestamp(T0.0 - 1_200_000);
    }
    w.record("demo-cp-1").remediation = Some(crate::memory::Remediation {
        since: Timestamp(T0.0 - 60_000),
        reason: "not registered as a node after 10m".into(),
        node_based: true,
    });
    let p = w.plan();
    assert_eq!(removing(&p), ["demo-cp-1"], "{:#?}", p.conditions);
}

/// Found by the swarm: a control-plane machine condemned during bootstrap recovered, but
/// stayed under repair, holding the budget while a really broken machine waited forever.
#[test]
fn a_machine_that_recovers_before_its_removal_is_no_longer_under_repair() {
    let mut w = World::cluster(spec(V1, 0), V1, 0);
    w.record("demo-cp-1").remediation = Some(crate::memory::Remediation {
        since: Timestamp(T0.0 - 60_000),
        reason: "the cluster's API never came up within 10m".into(),
        node_based: false,
    });
    let p = w.plan();
    assert!(p.memory.machines["demo-cp-1"].remediation.is_none());
    assert!(p.events.iter().any(|e| e.reason == "RemediationCancelled"));
    assert!(removing(&p).is_empty());
}

/// Found by the swarm (seed 203241300): a one-machine control plane whose API never came
/// up had its machine under repair and the replacement, made during the same
/// registration fault, never registered either. With no node list the observer counted
/// as blind, so the first machine "carried traffic" and could not go, and the second
/// waited for the budget: the cluster stayed Provisioning for good. Nothing has ever
/// served through an API that never came up, so the condemned machine is taken out.
#[test]
fn a_condemned_machine_of_a_cluster_that_never_came_up_is_taken_out() {
    let mut spec1 = spec_with(V1, 0, false);
    spec1.spec.control_plane.replicas =
        flightdeck_spec::cluster::ControlPlaneReplicas::new(1).expect("replicas");
    let mut w = World::with_infra(spec1);
    let no_node = Health {
        member: Some((Active, OperatingStatus::NoMonitor)),
        node_ready: None,
    };
    w.add_cp(1, V1, no_node);
    w.add_cp(3, V1, no_node);
    w.observed.nodes = None;
    w.memory.ready_since = None;
    for n in ["demo-cp-1", "demo-cp-3"] {
        w.record(n).created_at = Timestamp(T0.0 - 1_800_000);
    }
    w.record("demo-cp-1").remediation = Some(crate::memory::Remediation {
        since: Timestamp(T0.0 - 1_200_000),
        reason: "the cluster's API never came up within 10m".into(),
        node_based: false,
    });
    let p = w.plan();
    assert_eq!(removing(&p), ["demo-cp-1"], "{:#?}", p.conditions);
    assert!(condition(&p, "RolloutHalted").is_none_or(|c| !c.status));
}

/// Seed 44014283: while the workload API answered 429 (no node list) during the build,
/// every control-plane member was ONLINE: the API had come up, and only flightdeck's
/// reads of it failed. No machine is replaced for an API that serves.
#[test]
fn an_api_whose_members_are_online_came_up_even_when_it_cannot_be_read() {
    let mut spec1 = spec_with(V1, 0, true);
    spec1.spec.control_plane.replicas =
        flightdeck_spec::cluster::ControlPlaneReplicas::new(1).expect("replicas");
    let mut w = World::with_infra(spec1);
    let online = Health {
        member: Some((Active, OperatingStatus::Online)),
        node_ready: None,
    };
    w.add_cp(1, V1, online);
    w.observed.nodes = None;
    w.memory.ready_since = None;
    w.record("demo-cp-1").created_at = Timestamp(T0.0 - 1_800_000);
    w.record("demo-cp-1").running_since = Some(Timestamp(T0.0 - 1_800_000));
    assert!(!w.observed.health_monitors.is_empty(), "monitored");
    let p = w.plan();
    assert!(
        !p.events.iter().any(|e| e.reason == "RemediationStarted"),
        "{:#?}",
        p.events
    );
    assert!(p.memory.machines["demo-cp-1"].remediation.is_none());
}

/// Found by the swarm (seeds 600071990, 137684436): a removal decided under the old spec
/// (here a rollout's, when cp-2, cp-3 and cp-6 served for 3 replicas) must not go on
/// once the spec asks for 5: only 3 others serve, fewer than the new replicas.
#[test]
fn a_pending_removal_is_withdrawn_when_the_spec_scales_the_control_plane_up() {
    let mut w = World::cluster(spec(V2, 0), V2, 0);
    w.add_cp(6, V2, SERVING);
    w.record("demo-cp-1").template.image = "old".into();
    w.mark_removal("demo-cp-1");
    let p = w.plan();
    assert_eq!(targets(&p, "DeleteMember"), vec!["demo-cp-1".to_string()]);

    w.spec.spec.control_plane.replicas =
        flightdeck_spec::cluster::ControlPlaneReplicas::new(5).expect("replicas");
    let p = w.plan();
    assert!(
        targets(&p, "DeleteMember").is_empty(),
        "deletes a serving member while 3 others serve for 5 replicas: {:?}",
        targets(&p, "DeleteMember")
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "MachineRemovalWithdrawn"),
        "{:?}",
        p.events
    );
    assert!(p.memory.machines["demo-cp-1"].removal.is_none());
}

/// Found by the 100,000-seed swarm (seed 12001926): the same spec change, while every
/// node reads NotReady (a blind observer). No machine counts as healthy then, so the
/// pending removal's own machine did not either, and its member was deleted while 4
/// others served for 5 replicas. Octavia's member status, which the node list cannot
/// blind, says it still carries traffic: the removal is withdrawn.
#[test]
fn a_pending_removal_is_withdrawn_when_the_spec_scales_up_while_every_node_reads_not_ready() {
    let mut w = World::cluster(spec(V2, 0), V2, 0);
    w.add_cp(4, V2, SERVING);
    w.add_cp(5, V2, SERVING);
    w.mark_removal("demo-cp-1");
    w.spec.spec.control_plane.replicas =
        flightdeck_spec::cluster::ControlPlaneReplicas::new(5).expect("replicas");
    for node in w.observed.nodes.iter_mut().flatten() {
        node.ready = false;
    }
    let p = w.plan();
    assert!(
        targets(&p, "DeleteMember").is_empty(),
        "deletes a serving member while 4 others serve for 5 replicas: {:?}",
        targets(&p, "DeleteMember")
    );
    assert!(p.memory.machines["demo-cp-1"].removal.is_none());
}

/// Seed 70005732: in a kubeadm cluster, the init machine is the workload cluster's
/// first etcd member. A control-plane rollout must not take it out for "carrying no
/// traffic" (its Octavia member offline) while no other control-plane machine has
/// joined: the cluster would lose its only member. Once another has a Ready node, it goes.
#[test]
fn the_last_control_plane_machine_that_may_hold_the_workload_cluster_is_not_removed() {
    let world = |cp4_joined: bool| {
        let mut kubeadm = spec(V2, 0);
        kubeadm.spec.bootstrap.provider = flightdeck_spec::bootstrap::BootstrapProvider::Kubeadm;
        let mut w = World::with_infra(kubeadm);
        let offline = Health {
            member: Some((Active, Offline)),
            node_ready: Some(true),
        };
        let unregistered = Health {
            member: Some((Active, OperatingStatus::NoMonitor)),
            node_ready: None,
        };
        let joined = Health {
            node_ready: Some(true),
            ..unregistered
        };
        w.add_cp(1, V1, offline);
        w.add_cp(4, V2, if cp4_joined { joined } else { unregistered });
        w.add_cp(5, V2, unregistered);
        w.add_cp(6, V2, unregistered);
        for n in ["demo-cp-1", "demo-cp-4", "demo-cp-5", "demo-cp-6"] {
            w.record(n).created_at = Timestamp(T0.0 - 1_800_000);
            w.record(n).running_since = Some(Timestamp(T0.0 - 1_800_000));
        }
        w.memory.bootstrap.init_machine = Some("demo-cp-1".into());
        w.memory.bootstrap.initialized_at = Some(Timestamp(T0.0 - 1_700_000));
        w
    };

    let p = world(false).plan();
    assert!(removing(&p).is_empty(), "{:?}", p.events);
    let halted = condition(&p, "RolloutHalted").expect("the rollout halts");
    assert!(
        halted.reason == "LastControlPlaneMember" && halted.message.contains("demo-cp-1"),
        "{halted:?}"
    );

    let p = world(true).plan();
    assert_eq!(removing(&p), ["demo-cp-1"], "{:#?}", p.conditions);
}
