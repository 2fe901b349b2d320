//! Which lists a reconcile takes again: only young, untouched, settled ones.

use flightdeck_cloud::{
    LoadBalancer, Member, Observed, OperatingStatus, Ownership, Pool, ProvisioningStatus, Role,
    SecurityGroup, Timestamp,
};
use flightdeck_plan::{Action, Memory, PlannedAction};

use super::{Kind, Kinds, REUSE_MAX, Seen, kinds_reusable, reusable, touched_by};

const T0: Timestamp = Timestamp(1_000_000);

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

/// A built cluster's infrastructure, every object ACTIVE and recorded; its one member
/// serving.
fn settled() -> (Observed, Memory) {
    let o = owner();
    let observed = Observed {
        at: T0,
        security_groups: vec![SecurityGroup {
            id: "sg".into(),
            name: "demo-nodes".into(),
            tags: o.tags(&Role::SecurityGroup),
            rules: Vec::new(),
        }],
        load_balancers: vec![LoadBalancer {
            id: "lb".into(),
            name: "demo-api".into(),
            provisioning_status: ProvisioningStatus::Active,
            operating_status: OperatingStatus::Online,
            vip_address: None,
            tags: o.tags(&Role::ApiLoadBalancer),
        }],
        pools: vec![Pool {
            id: "pool".into(),
            name: "demo-api".into(),
            loadbalancer_id: "lb".into(),
            listener_id: None,
            provisioning_status: ProvisioningStatus::Active,
            tags: o.tags(&Role::ApiPool),
        }],
        members: vec![Member {
            id: "m1".into(),
            name: "demo-cp-1".into(),
            pool_id: "pool".into(),
            address: "10.0.0.5".parse().expect("address"),
            protocol_port: 6443,
            provisioning_status: ProvisioningStatus::Active,
            operating_status: OperatingStatus::Online,
            tags: o.tags(&Role::Machine("demo-cp-1".into())),
        }],
        ..Observed::default()
    };
    let mut memory = Memory::new("u1".into());
    memory.ids.security_group = Some("sg".into());
    memory.ids.load_balancer = Some("lb".into());
    memory.ids.pool = Some("pool".into());
    (observed, memory)
}

fn reusable_at(seen: &Seen, after_ms: u64, memory: &Memory) -> Kinds {
    kinds_reusable(seen, Timestamp(T0.0 + after_ms), memory, &owner())
}

#[test]
fn a_settled_observation_is_taken_again_within_reuse_max_and_listed_anew_after() {
    let (observed, memory) = settled();
    let seen = Seen::new(observed, Kinds::NONE, None);
    let kinds = reusable_at(&seen, 2_000, &memory);
    for k in [
        Kind::SecurityGroups,
        Kind::LoadBalancers,
        Kind::Pools,
        Kind::Members,
        Kind::Servers,
    ] {
        assert!(kinds.has(k), "{k:?} is settled and 2 s old");
    }
    assert!(
        !kinds.has(Kind::Router),
        "no router was seen: it is looked up"
    );
    let late = reusable_at(&seen, REUSE_MAX.as_millis(), &memory);
    assert_eq!(late, Kinds::NONE, "every list is as old as REUSE_MAX");
}

#[test]
fn a_kind_flightdeck_acted_on_is_listed_anew() {
    let (observed, memory) = settled();
    let mut seen = Seen::new(observed, Kinds::NONE, None);
    seen.touched = touched_by(&[PlannedAction {
        action: Action::DeleteMember {
            machine: "demo-cp-1".into(),
            pool_id: "pool".into(),
            member_id: "m1".into(),
        },
        reason: "test".into(),
    }]);
    let kinds = reusable_at(&seen, 2_000, &memory);
    assert!(!kinds.has(Kind::Members) && !kinds.has(Kind::LoadBalancers));
    assert!(kinds.has(Kind::SecurityGroups) && kinds.has(Kind::Pools));
}

#[test]
fn what_is_in_flux_or_missing_is_listed_anew() {
    let (mut observed, mut memory) = settled();
    observed.load_balancers[0].provisioning_status = ProvisioningStatus::PendingUpdate;
    observed.members[0].operating_status = OperatingStatus::Error;
    memory.ids.health_monitor = Some("hm".into());
    let seen = Seen::new(observed, Kinds::NONE, None);
    let kinds = reusable_at(&seen, 2_000, &memory);
    assert!(
        !kinds.has(Kind::LoadBalancers),
        "PENDING_UPDATE changes by itself"
    );
    assert!(!kinds.has(Kind::Members), "a member not serving yet");
    assert!(
        !kinds.has(Kind::HealthMonitors),
        "a recorded monitor not in the list"
    );
    assert!(kinds.has(Kind::SecurityGroups));
}

#[test]
fn once_the_api_has_served_its_members_are_listed_at_every_pass() {
    let (observed, mut memory) = settled();
    memory.ready_since = Some(T0);
    let seen = Seen::new(observed, Kinds::NONE, None);
    let kinds = reusable_at(&seen, 2_000, &memory);
    assert!(!kinds.has(Kind::Members));
    assert!(kinds.has(Kind::LoadBalancers));
}

#[test]
fn a_clock_that_stepped_back_makes_no_list_young() {
    let (observed, memory) = settled();
    let seen = Seen::new(observed, Kinds::NONE, None);
    let before = kinds_reusable(&seen, Timestamp(T0.0 - 600_000), &memory, &owner());
    assert_eq!(before, Kinds::NONE);
}

#[test]
fn a_member_without_monitor_status_under_a_health_monitor_is_not_settled() {
    let (mut observed, memory) = settled();
    observed.members[0].operating_status = OperatingStatus::NoMonitor;
    let seen = Seen::new(observed.clone(), Kinds::NONE, None);
    assert!(
        reusable_at(&seen, 2_000, &memory).has(Kind::Members),
        "no monitor: it serves"
    );
    observed
        .health_monitors
        .push(flightdeck_cloud::HealthMonitor {
            id: "hm".into(),
            name: "demo-api".into(),
            pool_id: "pool".into(),
            kind: "TCP".into(),
            provisioning_status: ProvisioningStatus::Active,
            tags: owner().tags(&Role::ApiHealthMonitor),
        });
    let seen = Seen::new(observed, Kinds::NONE, None);
    assert!(!reusable_at(&seen, 2_000, &memory).has(Kind::Members));
}

#[test]
fn a_cluster_being_deleted_lists_everything() {
    let (observed, mut memory) = settled();
    memory.deletion_requested = Some(T0);
    let seen = Seen::new(observed, Kinds::NONE, None);
    assert_eq!(reusable_at(&seen, 2_000, &memory), Kinds::NONE);
}

#[test]
fn a_list_taken_again_keeps_the_time_it_was_taken() {
    let (observed, memory) = settled();
    let first = Seen::new(observed.clone(), Kinds::NONE, None);
    let mut later = observed;
    later.at = Timestamp(T0.0 + 30_000);
    let mut reused = Kinds::NONE;
    reused.add(Kind::SecurityGroups);
    let second = Seen::new(later, reused, Some(&first));
    let kinds = reusable_at(&second, REUSE_MAX.as_millis() + 1_000, &memory);
    assert!(
        !kinds.has(Kind::SecurityGroups),
        "listed at T0, past REUSE_MAX"
    );
    assert!(
        kinds.has(Kind::LoadBalancers),
        "listed 30 s later, still young"
    );
}

#[test]
fn an_action_of_another_cloud_touches_every_kind() {
    let t = touched_by(&[PlannedAction {
        action: Action::DeleteTemplate {
            template_id: "7".into(),
            name: "t".into(),
        },
        reason: "test".into(),
    }]);
    assert_eq!(t, Kinds::EVERY);
}

fn example(file: &str) -> flightdeck_spec::Cluster {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("example");
    match flightdeck_spec::load_documents(&text, file)
        .expect("parses")
        .remove(0)
    {
        flightdeck_spec::Document::Cluster(c) => *c,
        other => panic!("not a cluster: {other:?}"),
    }
}

/// A new cluster whose identity check found nothing of its name (under any UID) in the
/// same instant starts from empty lists of the three kinds that check read, instead of
/// reading them twice. Had the check found objects of the cluster's own UID (a store
/// restored from before the check), the gate says so and every list is taken:
/// `lagging_store.rs` in the scenario tests fails when it does not.
#[test]
fn a_new_cluster_that_the_cloud_shows_nothing_of_starts_from_empty_lists() {
    let memory = Memory::new("u1".into());
    let blank = Observed::blank(T0);
    let spec = example("openstack.yaml");
    let reuse = reusable(None, Some(&blank), T0, &spec, &memory, &owner());
    for k in [Kind::Servers, Kind::SecurityGroups, Kind::LoadBalancers] {
        assert!(reuse.kinds.has(k), "{k:?}");
    }
    assert!(!reuse.kinds.has(Kind::Router), "the check reads no router");
    assert!(reuse.building);
    let none = reusable(None, None, T0, &spec, &memory, &owner());
    assert_eq!(none.kinds, Kinds::NONE);
    // OpenNebula's check reads VMs, not its templates or images: nothing is taken.
    let one = example("opennebula.yaml");
    let reuse = reusable(None, Some(&blank), T0, &one, &memory, &owner());
    assert_eq!(reuse.kinds, Kinds::NONE);
}
