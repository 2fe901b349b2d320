//! Cluster identity in the cloud (issue 13): a lost store never means a second cluster.
//! A new cluster whose name the cloud already carries under another UID holds and says
//! what it found; `--adopt` takes the earlier cluster's objects over by its UID. And a
//! deletion that sees none of the recorded objects stops instead of forgetting (F12).
//! Every check reads the simulator's world and mutation log.

use std::sync::Arc;

use crate::common;
use common::{drive, example};
use flightdeck_cloud::{SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig};
use flightdeck_sim::{MutationKind, SimCloud, SimConfig};
use flightdeck_store::Store;

fn engine(cloud: &Arc<SimCloud>, clock: &SimClock, store: Store, seed: u64) -> Engine<SimCloud> {
    Engine::new(
        cloud.clone(),
        Arc::new(store),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(seed)),
        EngineConfig::default(),
    )
    .expect("engine")
}

fn ready(e: &Engine<SimCloud>) -> bool {
    e.cluster("demo").is_some_and(|c| c.status.ready)
}

/// Creates of servers, load balancers and security groups since mutation `from`.
fn creates_since(cloud: &SimCloud, from: u64, operation: &str) -> usize {
    let (fresh, _) = cloud.mutations_since(from);
    fresh
        .iter()
        .filter(|m| m.kind == MutationKind::Create && m.operation == operation)
        .count()
}

#[tokio::test]
async fn a_lost_store_holds_the_new_cluster_until_it_adopts_the_earlier_ones_objects() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 3, clock.clone()));
    let mut first = engine(&cloud, &clock, Store::in_memory().expect("store"), 1);
    first.apply(example()).expect("apply");
    assert!(
        drive(&mut first, &cloud, &clock, 3600, ready).await,
        "first build is Ready"
    );
    let old_uid = first.cluster("demo").expect("demo").memory.uid.clone();
    let servers = cloud.snapshot().servers.len();
    drop(first);

    // The store is lost: a new flightdeck applies the same spec.
    let (_, mark) = cloud.mutations_since(u64::MAX);
    let mut second = engine(&cloud, &clock, Store::in_memory().expect("store"), 2);
    second.apply(example()).expect("apply");
    drive(&mut second, &cloud, &clock, 600, |_| false).await;
    let (fresh, _) = cloud.mutations_since(mark);
    assert!(
        fresh.is_empty(),
        "nothing is created or changed: {fresh:#?}"
    );
    let c = second.cluster("demo").expect("demo");
    assert_ne!(c.memory.uid, old_uid);
    assert!(!c.status.ready);
    let held = c
        .status
        .conditions
        .iter()
        .find(|x| x.kind == "ForeignObjects")
        .expect("ForeignObjects condition");
    assert!(held.status);
    for named in [
        "server demo-cp-1",
        "load balancer",
        "security group",
        &old_uid,
        "--adopt",
    ] {
        assert!(
            held.message.contains(named),
            "{named:?} in {}",
            held.message
        );
    }

    // Adopt: the earlier cluster's UID, and so its objects, are taken over.
    second.apply_with(example(), true).expect("adopt");
    assert!(
        drive(&mut second, &cloud, &clock, 3600, ready).await,
        "adopted cluster is Ready"
    );
    let c = second.cluster("demo").expect("demo");
    assert_eq!(c.memory.uid, old_uid);
    assert!(
        c.status
            .conditions
            .iter()
            .all(|x| x.kind != "ForeignObjects")
    );
    assert_eq!(
        creates_since(&cloud, mark, "POST /v2/lbaas/loadbalancers"),
        0
    );
    assert_eq!(creates_since(&cloud, mark, "POST /v2.0/security-groups"), 0);
    let world = cloud.snapshot();
    assert_eq!(world.load_balancers.len(), 1, "one load balancer, not two");
    assert_eq!(
        world.security_groups.len(),
        1,
        "one security group, not two"
    );
    assert!(
        world.servers.len() <= servers,
        "no second copy of the machines: {} servers, {servers} before",
        world.servers.len()
    );
}

#[tokio::test]
async fn f12_a_deletion_that_sees_none_of_its_objects_keeps_the_cluster_until_told_to_forget() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let built = Arc::new(SimCloud::new(SimConfig::default(), 4, clock.clone()));
    let store = Arc::new(Store::in_memory().expect("store"));
    let mut e = Engine::new(
        built.clone(),
        store.clone(),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(1)),
        EngineConfig::default(),
    )
    .expect("engine");
    // Its own bootstrap: the second engine below is given no key for a kubeadm PKI.
    let mut plain = example();
    plain.spec.bootstrap.provider = flightdeck_spec::bootstrap::BootstrapProvider::None;
    e.apply(plain).expect("apply");
    assert!(drive(&mut e, &built, &clock, 3600, ready).await);
    drop(e);

    // The same store, pointed at another cloud (another entry, project or region).
    let elsewhere = Arc::new(SimCloud::new(SimConfig::default(), 5, clock.clone()));
    let mut e = Engine::new(
        elsewhere.clone(),
        store,
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(2)),
        EngineConfig::default(),
    )
    .expect("engine");
    e.delete("demo").expect("delete");
    let gone = drive(&mut e, &elsewhere, &clock, 600, |e| {
        e.cluster("demo").is_none()
    })
    .await;
    assert!(!gone, "the cluster is not forgotten");
    let c = e.cluster("demo").expect("still known");
    let why = c
        .status
        .conditions
        .iter()
        .find(|x| x.kind == "DeletionUnconfirmed" && x.status)
        .expect("DeletionUnconfirmed");
    assert!(why.message.contains("--forget"), "{}", why.message);
    let world = built.snapshot();
    assert_eq!(
        world.load_balancers.len(),
        1,
        "the real objects still stand"
    );

    e.forget("demo").expect("forget");
    assert!(
        drive(&mut e, &elsewhere, &clock, 600, |e| e
            .cluster("demo")
            .is_none())
        .await
    );
}
