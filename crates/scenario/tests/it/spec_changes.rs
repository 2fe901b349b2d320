//! Spec changes: what may change on a live cluster, and what is refused by name.

use std::sync::Arc;

use crate::common;
use common::example;
use flightdeck_cloud::{SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig, EngineError};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_spec::Cluster;
use flightdeck_store::Store;

fn engine() -> Engine<SimCloud> {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    Engine::new(
        cloud,
        Arc::new(Store::in_memory().expect("store")),
        Arc::new(clock),
        Box::new(SeededRng::new(1)),
        EngineConfig::default(),
    )
    .expect("engine")
}

#[test]
fn fields_the_cloud_objects_are_built_from_are_refused_by_name_once_the_cluster_exists() {
    let mut e = engine();
    let base = example();
    e.apply(base.clone()).expect("first apply");
    type Change = (&'static str, fn(&mut Cluster));
    let changes: [Change; 5] = [
        ("spec.bootstrap.provider", |c| {
            c.spec.bootstrap.provider = flightdeck_spec::bootstrap::BootstrapProvider::None
        }),
        ("spec.network.podCIDR", |c| {
            c.spec.network.pod_cidr = "10.96.0.0/16".parse().expect("cidr")
        }),
        ("spec.network.securityGroup", |c| {
            c.spec.network.security_group = Some(flightdeck_spec::Text::new("other").expect("text"))
        }),
        ("spec.apiLoadBalancer.healthMonitor", |c| {
            c.spec.api_load_balancer.health_monitor = None
        }),
        ("spec.provider", |c| {
            if let Some(o) = c.spec.provider.openstack.as_mut() {
                o.subnet = flightdeck_spec::Text::new("other-subnet").expect("text");
            }
        }),
    ];
    for (field, change) in changes {
        let mut changed = base.clone();
        change(&mut changed);
        match e.apply(changed) {
            Err(EngineError::Immutable { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected a refusal, got {other:?}"),
        }
    }
    // What flightdeck can carry out is accepted: a new version, more workers.
    let mut upgraded = base.clone();
    upgraded.spec.control_plane.version =
        flightdeck_spec::KubernetesVersion::new("v1.31.0").expect("version");
    upgraded.spec.node_pools[0].replicas =
        flightdeck_spec::cluster::PoolReplicas::new(5).expect("replicas");
    e.apply(upgraded)
        .expect("version and replica changes are accepted");
}

#[test]
fn f7_a_cluster_whose_pod_cidr_overlaps_another_on_the_same_router_is_refused_naming_both() {
    let mut e = engine();
    e.apply(example()).expect("demo");
    let mut twin = example();
    twin.metadata.name = flightdeck_spec::Name::new("twin").expect("name");
    twin.spec.network.pod_cidr = "10.244.128.0/17".parse().expect("cidr");
    match e.apply(twin.clone()) {
        Err(EngineError::RoutesCollide(why)) => {
            assert!(
                why.contains("\"twin\"") && why.contains("\"demo\""),
                "{why}"
            );
            assert!(why.contains("demo-router"), "{why}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Its own pod network, or another router, is fine.
    twin.spec.network.pod_cidr = "10.245.0.0/16".parse().expect("cidr");
    e.apply(twin).expect("a pod CIDR of its own");
}
