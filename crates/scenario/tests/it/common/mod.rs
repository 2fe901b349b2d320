//! What several scenario tests start from.

use flightdeck_cloud::{Clock, SimClock};
use flightdeck_engine::Engine;
use flightdeck_sim::SimCloud;
use flightdeck_spec::{Cluster, Document, load_file};

/// The cluster of `examples/openstack.yaml`.
pub fn example() -> Cluster {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/openstack.yaml");
    match load_file(&path).expect("example parses").pop() {
        Some(Document::Cluster(c)) => *c,
        _ => panic!("the example is a cluster"),
    }
}

/// Runs the engine and the simulated cloud in virtual time until `done` or `limit_s`.
pub async fn drive(
    e: &mut Engine<SimCloud>,
    cloud: &SimCloud,
    clock: &SimClock,
    limit_s: u64,
    done: impl Fn(&Engine<SimCloud>) -> bool,
) -> bool {
    let end = clock.now().plus_millis(limit_s * 1000);
    loop {
        cloud.advance();
        e.run_due().await.expect("reconcile");
        if done(e) {
            return true;
        }
        let now = clock.now();
        if now >= end {
            return false;
        }
        let next = [e.next_due(), cloud.next_transition_at(), Some(end)]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .min()
            .unwrap_or(end);
        clock.advance_to(next);
    }
}

/// The built-in scenarios, checked to be all there: a loop over them that found none, or
/// a few, would pass having tried nothing. 40 are shipped today.
pub fn built_in_scenarios() -> Vec<&'static str> {
    let names = flightdeck_scenario::builtin::scenario_names();
    assert!(
        names.len() >= 40,
        "{} built-in scenarios, 40 expected at least: {names:?}",
        names.len()
    );
    names
}

/// The report of built-in scenario `name`, run with `options`.
pub async fn report(
    name: &str,
    options: &flightdeck_scenario::RunOptions,
) -> flightdeck_scenario::report::Report {
    let loaded = flightdeck_scenario::load_scenario(name).expect("built-in scenario loads");
    flightdeck_scenario::run(&loaded, options, &mut |_| {})
        .await
        .expect("run completes")
        .report
}

/// The verdict on invariant `name` in `r`.
pub fn verdict<'r>(
    r: &'r flightdeck_scenario::report::Report,
    name: &str,
) -> &'r flightdeck_scenario::invariants::Verdict {
    r.invariants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} is checked"))
}
