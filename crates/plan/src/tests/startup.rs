//! F3: `nodeStartupTimeout` counts the machine's own time: from when its server runs,
//! never from when its record was made, and never while flightdeck could not look.

use super::*;

const MIN: u64 = 60_000;

/// The cluster with 2 workers; workers-4 has no node yet. Its record was made 30
/// minutes ago (an outage held its server back); its server has run for `running` min.
fn late_worker(running: u64) -> World {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.observed
        .nodes
        .as_mut()
        .expect("nodes")
        .retain(|n| n.name != "demo-workers-4");
    let r = w.record("demo-workers-4");
    r.created_at = Timestamp(T0.0 - 30 * MIN);
    r.running_since = Some(Timestamp(T0.0 - running * MIN));
    w
}

#[test]
fn f3_a_server_made_late_gets_its_full_startup_time() {
    let p = late_worker(2).plan();
    assert!(under_repair(&p).is_empty(), "{:#?}", p.status.repairs);
    let p = late_worker(11).plan();
    assert_eq!(under_repair(&p), ["demo-workers-4"]);
}

#[test]
fn f3_a_server_first_seen_running_starts_its_clock_now() {
    let mut w = late_worker(0);
    w.record("demo-workers-4").running_since = None;
    let p = w.plan();
    assert!(under_repair(&p).is_empty());
    assert_eq!(p.memory.machines["demo-workers-4"].running_since, Some(T0));
}

#[test]
fn f3_time_flightdeck_could_not_observe_is_no_machines() {
    let mut w = late_worker(12);
    // Lists failed for the last 10 minutes.
    w.memory.unobserved_since = Some(Timestamp(T0.0 - 10 * MIN));
    let p = w.plan();
    assert!(
        under_repair(&p).is_empty(),
        "only 2 minutes were the machine's"
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "UnobservedTimeForgiven")
    );
    assert_eq!(p.memory.unobserved_since, None);
    assert_eq!(
        p.memory.machines["demo-workers-4"].running_since,
        Some(Timestamp(T0.0 - 2 * MIN))
    );
}

#[test]
fn f3_control_plane_machines_are_not_condemned_for_an_api_without_a_way_in() {
    // Bootstrapping (never Ready, no node list), Octavia down: no member anywhere.
    let mut w = World::cluster(spec(V1, 0), V1, 0);
    w.memory.ready_since = None;
    w.observed.nodes = None;
    w.observed.members.clear();
    for r in w.memory.machines.values_mut() {
        r.member_id = None;
        r.running_since = Some(Timestamp(T0.0 - 20 * MIN));
    }
    let p = w.plan();
    assert!(under_repair(&p).is_empty(), "{:#?}", p.status.repairs);
}
