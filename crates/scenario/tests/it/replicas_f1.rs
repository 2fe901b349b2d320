//! F1 across replicas: two engines drive one cluster each on one shared store, as two
//! replicas on etcd do, and the two clusters share OpenNebula templates and an image.
//! The ledger of who holds what lives in the store, each commit guarded by the records
//! it decided on; without that, an engine that sees only its own cluster deletes the
//! templates under the other. Every check reads the simulator's world and mutation log.

use std::sync::Arc;

use flightdeck_cloud::{Clock, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig};
use flightdeck_scenario::one::{InProcessOne, in_process};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_spec::{Cluster, Document, load_file};
use flightdeck_store::Store;

type OneEngine = Engine<InProcessOne>;

fn twins() -> Vec<Cluster> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/opennebula-twins.yaml");
    load_file(&path)
        .expect("the example parses")
        .into_iter()
        .filter_map(|d| match d {
            Document::Cluster(c) => Some(*c),
            _ => None,
        })
        .collect()
}

struct Replicas {
    clock: SimClock,
    cloud: Arc<SimCloud>,
    engines: Vec<OneEngine>,
}

impl Replicas {
    /// Two engines on one store (shared between them when `shared`), each driving one
    /// of the twin clusters.
    fn start(shared: bool) -> Replicas {
        let clock = SimClock::new(Timestamp::SIM_EPOCH);
        let cloud = Arc::new(SimCloud::new(SimConfig::default(), 5, clock.clone()));
        let mut store = Store::in_memory().expect("store");
        if shared {
            store.share_between_engines();
        }
        let store = Arc::new(store);
        // Both start on the empty store (an engine takes up every cluster it finds
        // there), then each is given its own cluster, as claims would.
        let mut engines: Vec<OneEngine> = (1..=2)
            .map(|seed| {
                Engine::new(
                    in_process(cloud.clone()),
                    store.clone(),
                    Arc::new(clock.clone()),
                    Box::new(SeededRng::new(seed)),
                    EngineConfig::default(),
                )
                .expect("engine")
            })
            .collect();
        for (e, spec) in engines.iter_mut().zip(twins()) {
            e.apply(spec).expect("apply");
        }
        Replicas {
            clock,
            cloud,
            engines,
        }
    }

    /// Runs both engines and the cloud in virtual time until `done` or `limit_s`.
    async fn drive(&mut self, limit_s: u64, done: impl Fn(&[OneEngine]) -> bool) -> bool {
        let end = self.clock.now().plus_millis(limit_s * 1000);
        loop {
            self.cloud.advance();
            for e in &mut self.engines {
                e.run_due().await.expect("reconcile");
            }
            if done(&self.engines) {
                return true;
            }
            let now = self.clock.now();
            if now >= end {
                return false;
            }
            let next = self
                .engines
                .iter()
                .map(|e| e.next_due())
                .chain([self.cloud.next_transition_at(), Some(end)])
                .flatten()
                .filter(|t| *t > now)
                .min()
                .unwrap_or(end);
            self.clock.advance_to(next);
        }
    }

    /// What each engine's clusters say, and their latest events: for a failed check.
    fn explain(&mut self) -> String {
        let mut out = String::new();
        for e in &mut self.engines {
            for (name, c) in e.clusters() {
                out += &format!("{name}: {:?} {:?}\n", c.status.phase, c.status.conditions);
            }
            for ev in e.drain_events().iter().rev().take(12).rev() {
                out += &format!("  {} {}: {}\n", ev.cluster, ev.reason, ev.message);
            }
        }
        out
    }

    fn count(&self, operation: &str) -> usize {
        self.cloud
            .mutations()
            .iter()
            .filter(|m| m.operation == operation)
            .count()
    }
}

/// Every engine drives its cluster, and each is Ready (an engine that drives none is not).
fn ready(engines: &[OneEngine]) -> bool {
    engines.iter().all(|e| {
        e.driven().count() > 0
            && e.driven()
                .all(|c| e.cluster(c).is_some_and(|r| r.status.ready))
    })
}

fn first_gone(engines: &[OneEngine]) -> bool {
    engines[0].driven().count() == 0
}

fn all_gone(engines: &[OneEngine]) -> bool {
    engines.iter().all(|e| e.driven().count() == 0)
}

#[tokio::test]
async fn f1_two_replicas_on_a_shared_store_never_delete_a_template_the_other_holds() {
    let mut r = Replicas::start(true);
    assert!(r.drive(3600, ready).await, "both clusters Ready");
    assert_eq!(
        r.count("one.template.allocate"),
        2,
        "master and worker registered once, for both"
    );
    r.engines[0].delete("sylva-a").expect("delete");
    assert!(
        r.drive(3600, first_gone).await,
        "sylva-a is gone:\n{}",
        r.explain()
    );
    assert_eq!(
        r.count("one.template.delete"),
        0,
        "sylva-b still holds both templates"
    );
    assert_eq!(r.cloud.snapshot().one_templates.len(), 2);
    r.engines[1].delete("sylva-b").expect("delete");
    assert!(
        r.drive(3600, all_gone).await,
        "sylva-b is gone:\n{}",
        r.explain()
    );
    let world = r.cloud.snapshot();
    assert!(world.one_templates.is_empty(), "{:#?}", world.one_templates);
    assert!(world.one_images.is_empty(), "{:#?}", world.one_images);
    assert_eq!(
        r.count("one.template.delete"),
        2,
        "each deleted once, by the last holder"
    );
}

/// The same two engines on a store each believes is its own: each keeps the ledger of
/// its one cluster, so the first deletion takes the templates the other cluster uses.
#[tokio::test]
async fn f1_without_the_shared_ledger_one_engine_deletes_the_templates_under_the_other() {
    let mut r = Replicas::start(false);
    assert!(r.drive(3600, ready).await, "both clusters Ready");
    r.engines[0].delete("sylva-a").expect("delete");
    // Its deletion never ends (the image stays in use by the other cluster's VMs).
    r.drive(1800, |_| false).await;
    assert!(
        r.count("one.template.delete") > 0,
        "the check above is the one that holds: without it the templates go"
    );
}
