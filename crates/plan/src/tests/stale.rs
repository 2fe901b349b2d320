//! Lists that lag behind the cloud (`api.staleRead`, the Sieve class's stale read): a
//! server confirmed deleted that a lagging list still shows is not taken back, and a
//! server made lately that a lagging list does not show yet is not taken for gone.

use flightdeck_spec::Duration;

use super::*;
use crate::LIST_LAG_MAX;

#[test]
fn a_server_confirmed_deleted_that_a_lagging_list_still_shows_is_not_adopted() {
    let mut w = World::cluster(spec(V1, 1), V1, 2);
    w.mark_removal("demo-workers-5");
    w.drop_member("demo-workers-5");
    let server = w
        .observed
        .servers
        .iter()
        .find(|s| s.name == "demo-workers-5")
        .cloned()
        .expect("the server");
    w.drop_server("demo-workers-5");
    let p = w.plan();
    assert_eq!(events(&p, "MachineRemoved").len(), 1, "{:?}", p.events);
    w.memory = p.memory;
    // A minute later a list that lags shows the server again, as it was.
    w.now = Timestamp(T0.0 + 60_000);
    w.observed.servers.push(server.clone());
    let p = w.plan();
    assert!(events(&p, "MachineAdopted").is_empty(), "{:?}", p.events);
    assert!(!p.memory.machines.contains_key("demo-workers-5"));
    // Nothing but the deletion of the gone machine's Node, which the test's node list
    // still shows.
    assert!(
        p.actions
            .iter()
            .all(|a| matches!(a.action, crate::Action::DeleteNode { .. })),
        "{:?}",
        p.actions
    );
    // Past LIST_LAG_MAX no list can lag that far: a server listed then is there, and
    // one of the cluster's, unrecorded, is adopted.
    w.memory = p.memory;
    w.now = T0.plus(LIST_LAG_MAX).plus(Duration::from_secs(1));
    let p = w.plan();
    assert_eq!(events(&p, "MachineAdopted").len(), 1, "{:?}", p.events);
    assert!(p.memory.gone_servers.is_empty());
}

#[test]
fn a_server_made_lately_that_a_lagging_list_does_not_show_is_not_taken_for_gone() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.drop_server("demo-workers-5");
    w.observed
        .nodes
        .get_or_insert_with(Vec::new)
        .retain(|n| n.name != "demo-workers-5");
    // Made two minutes ago, missing from every list for a minute and a half.
    w.record("demo-workers-5").created_at = Timestamp(T0.0 - 120_000);
    w.record("demo-workers-5").server_missing_since = Some(Timestamp(T0.0 - 90_000));
    let p = w.plan();
    assert!(
        events(&p, "MachineRemovalStarted").is_empty(),
        "{:?}",
        p.events
    );
    assert!(targets(&p, "CreateServer").is_empty());
    assert!(p.requeue_after.is_some(), "it looks again");
    // Made longer than LIST_LAG_MAX ago: a list now would show it; it is gone.
    w.record("demo-workers-5").created_at = Timestamp(T0.0 - LIST_LAG_MAX.as_millis() - 1000);
    let p = w.plan();
    assert_eq!(
        events(&p, "MachineRemovalStarted").len(),
        1,
        "{:?}",
        p.events
    );
}
