//! Handing a cluster between replicas: a claim lost and won back while a reconcile of
//! the cluster is still out. The reconcile decided under the lost claim is dropped, and
//! the cluster is driven again from the store once it is back: a replica that holds a
//! claim always drives its cluster. The check reads the simulator's world.

use std::sync::Arc;

use crate::common::{drive, example};
use flightdeck_cloud::{Compute, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_store::Store;

fn ready(e: &Engine<SimCloud>) -> bool {
    e.cluster("demo").is_some_and(|c| c.status.ready)
}

#[tokio::test]
async fn a_cluster_claimed_again_while_its_dropped_reconcile_runs_is_driven_once_it_is_back() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 3, clock.clone()));
    let mut e = Engine::new(
        cloud.clone(),
        Arc::new(Store::in_memory().expect("store")),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(3)),
        EngineConfig::default(),
    )
    .expect("engine");
    e.apply(example()).expect("apply");
    assert!(drive(&mut e, &cloud, &clock, 3600, ready).await);
    e.drain_events();

    // The next resync starts; the claim moves away and comes back under a new revision
    // before it returns.
    clock.advance_to(e.next_due().expect("a resync is due"));
    let mut started = e.start_due(4);
    assert_eq!(started.len(), 1, "the cluster's resync");
    let (_, out) = started.remove(0);
    assert!(e.let_go("demo"));
    assert!(e.take_up("demo", "replica me claim 9").expect("take up"));
    assert!(
        e.cluster("demo").is_none(),
        "not driven while the old reconcile is out"
    );
    e.complete(out.await).expect("completed");

    let taken: Vec<String> = e
        .drain_events()
        .into_iter()
        .filter(|ev| ev.reason == "ClusterTakenUp")
        .map(|ev| ev.message)
        .collect();
    assert!(
        taken.iter().any(|m| m.contains("claim 9")),
        "taken up under the new claim: {taken:?}"
    );

    // Driven from here on: a server the cloud loses is replaced.
    let lost = cloud.snapshot().servers[0].id.clone();
    Compute::delete_server(&*cloud, &lost)
        .await
        .expect("deleted by hand");
    assert!(drive(&mut e, &cloud, &clock, 3600, ready).await);
    let world = cloud.snapshot();
    assert!(
        world.servers.iter().all(|s| s.id != lost) && world.servers.len() >= 3,
        "the lost server is replaced: {:?}",
        world.servers.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
}
