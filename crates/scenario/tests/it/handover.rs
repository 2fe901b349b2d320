//! Handing a cluster between replicas. A claim lost and won back while a reconcile of
//! the cluster is still out: nothing of the cluster is decided until that reconcile is
//! back (its outcome dropped); then the cluster is taken up from the store and driven. A
//! spec applied to a stored cluster not yet driven here goes on from its stored memory.
//! The checks read the simulator's world.

use std::sync::Arc;

use crate::common::{drive, example};
use flightdeck_cloud::{Compute, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig, EngineError};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_store::Store;

fn ready(e: &Engine<SimCloud>) -> bool {
    e.cluster("demo").is_some_and(|c| c.status.ready)
}

/// An engine on a fresh simulated cloud, with `demo` built to Ready.
async fn built() -> (Engine<SimCloud>, Arc<SimCloud>, SimClock) {
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
    (e, cloud, clock)
}

fn handing_over<T: std::fmt::Debug>(r: Result<T, EngineError>) -> bool {
    matches!(r, Err(EngineError::HandingOver(ref c)) if c == "demo")
}

#[tokio::test]
async fn a_cluster_claimed_again_while_its_dropped_reconcile_runs_is_driven_once_it_is_back() {
    let (mut e, cloud, clock) = built().await;

    // The next resync starts; the claim moves away and comes back under a new revision
    // before it returns.
    clock.advance_to(e.next_due().expect("a resync is due"));
    let mut started = e.start_due(4);
    assert_eq!(started.len(), 1, "the cluster's resync");
    let (_, out) = started.remove(0);
    assert!(e.let_go("demo"));
    // Until it is back, the cluster is neither taken up nor changed: the fleet asks again
    // at its next turn, an operator's client gets a 503.
    assert!(handing_over(e.take_up("demo", "replica me claim 9")));
    assert!(handing_over(e.apply(example())));
    assert!(handing_over(e.resume("demo")));
    assert!(handing_over(e.delete("demo")));
    assert!(e.cluster("demo").is_none(), "not driven while it is out");
    e.complete(out.await).expect("completed");
    assert!(e.take_up("demo", "replica me claim 9").expect("take up"));

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

#[tokio::test]
async fn a_spec_applied_to_a_stored_cluster_not_driven_here_keeps_its_uid_and_objects() {
    let (mut e, cloud, clock) = built().await;
    let uid = e.cluster("demo").expect("driven").memory.uid.clone();
    let servers = cloud.snapshot().servers.len();
    // Another replica drove it; this one was just given its claim, and an apply comes in
    // before its fleet took the cluster up.
    assert!(e.let_go("demo"));
    e.apply(example()).expect("applied");
    assert_eq!(
        e.cluster("demo").expect("driven").memory.uid,
        uid,
        "the stored UID, not a new one"
    );
    assert!(drive(&mut e, &cloud, &clock, 1800, ready).await);
    let world = cloud.snapshot();
    assert_eq!(world.servers.len(), servers, "no second cluster built");
    assert!(
        world
            .servers
            .iter()
            .all(|s| s.tags.iter().any(|t| *t == format!("flightdeck-uid={uid}"))),
        "every server still the cluster's"
    );
}
