//! The fleet as one replica among several: it drives only the clusters its claims hold.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flightdeck_plan::Event;
use flightdeck_store::Store;
use tokio::sync::watch;

use crate::backend::Command;
use crate::claims::Claims;
use crate::fleet::{Fleet, FleetOptions};
use crate::metrics::Metrics;
use crate::published::Published;
use crate::sim_host::SimHost;

/// Claims a test hands out by hand.
#[derive(Default)]
struct HandClaims(Mutex<BTreeMap<String, i64>>);

impl HandClaims {
    fn set(&self, claims: &[(&str, i64)]) {
        *self.0.lock().expect("lock") = claims.iter().map(|(c, r)| (c.to_string(), *r)).collect();
    }
}

impl Claims for HandClaims {
    fn holds(&self, cluster: &str) -> bool {
        self.0.lock().expect("lock").contains_key(cluster)
    }
    fn held(&self) -> BTreeMap<String, i64> {
        self.0.lock().expect("lock").clone()
    }
    fn caller(&self, cluster: &str) -> Option<String> {
        self.held()
            .get(cluster)
            .map(|r| format!("replica=me claim={r}"))
    }
    fn send_guard(&self, _cluster: &str) -> Option<flightdeck_http::SendGuard> {
        None
    }
    fn holder(&self, _cluster: &str) -> String {
        "replica other (http://10.0.0.2:7443)".into()
    }
}

fn spec() -> flightdeck_spec::Cluster {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/openstack.yaml"
    ))
    .expect("the example spec");
    match flightdeck_spec::load_documents(&text, "examples/openstack.yaml")
        .expect("a valid spec")
        .remove(0)
    {
        flightdeck_spec::Document::Cluster(c) => *c,
        flightdeck_spec::Document::Scenario(_) => panic!("the example is a cluster"),
    }
}

/// Syncs the fleet with the claims until `cond` holds, as the replica loop does at every
/// turn: a backend busy with a reconcile may not take a cluster up within one sync's
/// wait, and is asked again at the next. At most [`WAIT_MAX`] of wall time: a bound for
/// a test that hangs, not a performance figure (a loaded CI machine once took more than
/// the two syncs this test used to make).
async fn synced_until(
    fleet: &Fleet,
    claims: &HandClaims,
    what: &str,
    mut cond: impl FnMut() -> bool,
) {
    let deadline = std::time::Instant::now() + WAIT_MAX;
    while std::time::Instant::now() < deadline {
        fleet.sync_claims(&claims.held()).await.expect("synced");
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {WAIT_MAX:?}");
}

const WAIT_MAX: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_drives_only_the_clusters_it_holds_and_stores_the_others_specs_for_their_holder()
{
    let store = Arc::new(Store::in_memory().expect("store"));
    let sim = SimHost::start(7, 50.0)
        .map_err(|f| f.message)
        .expect("simulator");
    let claims = Arc::new(HandClaims::default());
    let (stop, stopped) = watch::channel(false);
    let fleet = Fleet::start(
        store.clone(),
        Some(sim),
        Arc::new(Published::new(Metrics::new())),
        FleetOptions {
            concurrency: 4,
            claims: Some(claims.clone()),
            secrets: test_secrets(),
            workload_proxy: None,
        },
        stopped,
    )
    .await
    .expect("fleet");

    // Not held here: the spec is stored for its holder, and nothing is driven.
    let applied = fleet.apply(vec![spec()], false).await.expect("applied");
    assert_eq!(applied[0].result, "stored");
    assert!(
        store
            .get::<flightdeck_spec::Cluster>("spec", "demo")
            .expect("read")
            .is_some()
    );
    assert!(
        store
            .get::<flightdeck_plan::Memory>("memory", "demo")
            .expect("read")
            .is_none()
    );
    assert!(fleet.published.view("demo").is_none());
    let refused = fleet
        .command("demo", |reply| Command::Resume("demo".into(), reply))
        .await
        .expect_err("another replica drives it");
    assert!(
        refused
            .message
            .contains("replica other (http://10.0.0.2:7443)"),
        "{}",
        refused.message
    );

    // Claimed: taken up from the store and driven.
    claims.set(&[("demo", 5)]);
    synced_until(&fleet, &claims, "the claimed cluster is driven", || {
        fleet.published.view("demo").is_some()
    })
    .await;
    let events: Vec<Event> = store.events("demo").expect("events");
    assert!(
        events.iter().any(|e| e.reason == "ClusterApplied"),
        "{events:?}"
    );

    // Claimed again under another revision (after a pause): let go of, then taken up
    // afresh from the store, with an event naming the claim.
    claims.set(&[("demo", 9)]);
    synced_until(
        &fleet,
        &claims,
        "the cluster is taken up under its new claim",
        || {
            store
                .events::<Event>("demo")
                .expect("events")
                .iter()
                .any(|e| e.reason == "ClusterTakenUp" && e.message.contains("claim 9"))
        },
    )
    .await;

    // The claim moved away: let go of, nothing more published.
    claims.set(&[]);
    synced_until(&fleet, &claims, "the cluster is let go of", || {
        fleet.published.view("demo").is_none()
    })
    .await;
    let _ = stop.send(true);
    fleet.stopped().await;
}

fn two_clusters() -> Vec<flightdeck_spec::Cluster> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/two-clusters.yaml"
    ))
    .expect("the example specs");
    flightdeck_spec::load_documents(&text, "examples/two-clusters.yaml")
        .expect("valid specs")
        .into_iter()
        .map(|d| match d {
            flightdeck_spec::Document::Cluster(c) => *c,
            flightdeck_spec::Document::Scenario(_) => panic!("the example is clusters"),
        })
        .collect()
}

/// Issue 38: a fault aimed at one cluster struck every cluster. Each reconcile's calls
/// say which cluster they are for, so an `api.errorRate` on every service of `alpha`
/// fails all of alpha's changes and none of beta's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_aimed_at_one_cluster_fails_its_reconciles_calls_and_no_other_cluster_s() {
    let store = Arc::new(Store::in_memory().expect("store"));
    let sim = SimHost::start(12, 50.0)
        .map_err(|f| f.message)
        .expect("simulator");
    let (stop, stopped) = watch::channel(false);
    let fleet = Fleet::start(
        store,
        Some(sim.clone()),
        Arc::new(Published::new(Metrics::new())),
        FleetOptions {
            concurrency: 4,
            claims: None,
            secrets: test_secrets(),
            workload_proxy: None,
        },
        stopped,
    )
    .await
    .expect("fleet");
    let fault: crate::types::FaultRequest = serde_json::from_value(serde_json::json!({
        "kind": "api.errorRate", "cluster": "alpha", "rate": 1.0
    }))
    .expect("request");
    sim.inject(&fault, "openstack")
        .map_err(|f| f.message)
        .expect("started");
    fleet.apply(two_clusters(), false).await.expect("applied");

    let of = |m: &flightdeck_sim::Mutation| {
        m.target_tags
            .iter()
            .find_map(|t| t.strip_prefix(flightdeck_cloud::ownership::TAG_CLUSTER))
            .map(str::to_string)
    };
    let struck = || {
        sim.cloud
            .fault_effects()
            .get(&flightdeck_spec::FaultKind::ApiErrorRate)
            .copied()
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + WAIT_MAX;
    let mutations = loop {
        let m = sim.cloud.mutations();
        let members = m
            .iter()
            .any(|m| of(m).as_deref() == Some("beta") && m.ok && m.operation.contains("members"));
        if members && struck() > 0 {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "beta got members and alpha's calls were struck within {WAIT_MAX:?}: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Alpha's calls all fail, its first list already: it changes nothing.
    for m in &mutations {
        let cluster = of(m);
        assert_eq!(cluster.as_deref(), Some("beta"), "{m:?}");
        assert!(m.ok, "{m:?}");
        assert_eq!(m.caller.as_deref(), Some("cluster=beta"), "{m:?}");
    }
    let _ = stop.send(true);
    fleet.stopped().await;
}

/// Secrets sealed under a key made for the test.
fn test_secrets() -> flightdeck_engine::secrets::SecretsAtRest {
    flightdeck_engine::secrets::SecretsAtRest::Sealed(Arc::new(
        flightdeck_guest::SecretsKey::generate("test").expect("key"),
    ))
}
