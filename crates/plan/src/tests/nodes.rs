//! How machines find their nodes: by the server ID in the node's providerID, then by
//! name, then by the node's InternalIP.

use super::*;

fn rename_node(w: &mut World, from: &str, to: &str, server_id: Option<&str>) {
    let nodes = w.observed.nodes.as_mut().expect("nodes");
    let n = nodes.iter_mut().find(|n| n.name == from).expect("node");
    n.name = to.into();
    n.server_id = server_id.map(str::to_string);
}

#[test]
fn a_node_with_another_name_and_no_provider_id_is_found_by_its_internal_ip() {
    let mut w = World::cluster(spec(V1, 0), V1, 0);
    rename_node(&mut w, "demo-cp-1", "ip-10-0-0-1", None);
    let ip = w
        .observed
        .servers
        .iter()
        .find(|s| s.name == "demo-cp-1")
        .and_then(|s| s.address);
    w.observed.nodes.as_mut().expect("nodes")[0].internal_ip = ip;
    let p = w.plan();
    assert!(p.status.ready, "{:#?}", p.conditions);
}

#[test]
fn a_node_with_another_name_and_no_address_leaves_its_machine_unregistered() {
    let mut w = World::cluster(spec(V1, 0), V1, 0);
    rename_node(&mut w, "demo-cp-1", "ip-10-0-0-1", None);
    let p = w.plan();
    assert!(!p.status.ready);
}

#[test]
fn the_provider_id_wins_over_the_name() {
    let mut w = World::cluster(spec(V1, 0), V1, 0);
    // The node named like cp-1 runs on cp-2's server: it is cp-2's node, not cp-1's.
    rename_node(&mut w, "demo-cp-2", "gone", None);
    rename_node(&mut w, "demo-cp-1", "demo-cp-1", Some("srv-cp-2"));
    let p = w.plan();
    assert!(!p.status.ready, "cp-1 has no node of its own");
}

/// F10: nodes from a watch that broke are as old as the break. While that is recent they
/// are used; past the freshness limit nothing is repaired from them.
#[test]
fn a_broken_node_watch_grows_stale_and_then_nothing_is_repaired_from_it() {
    let mut w = World::cluster(spec(V1, 2), V1, 1);
    w.add_worker(
        5,
        Health {
            member: None,
            node_ready: None,
        },
    );
    w.now = w.now.plus(flightdeck_spec::Duration::from_mins(30));
    assert_eq!(
        count(&w.plan(), "CreateServer"),
        1,
        "a current list shows the worker never registered"
    );

    w.observed.nodes_stale_since = Some(Timestamp(w.now.0 - 60_000));
    assert_eq!(
        count(&w.plan(), "CreateServer"),
        1,
        "a watch broken for a minute is still fresh enough"
    );

    w.observed.nodes_stale_since = Some(Timestamp(w.now.0 - 3 * 60_000));
    let p = w.plan();
    assert_eq!(
        count(&p, "CreateServer"),
        0,
        "nothing is repaired from a stale list"
    );
    let paused = p
        .events
        .iter()
        .map(|e| e.message.clone())
        .chain(p.conditions.iter().map(|c| c.message.clone()))
        .find(|m| m.contains("watch"))
        .unwrap_or_else(|| {
            panic!(
                "the stale watch is said: {:#?} {:#?}",
                p.events, p.conditions
            )
        });
    assert!(paused.contains("3m"), "{paused}");
}
