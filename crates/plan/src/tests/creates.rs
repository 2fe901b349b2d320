//! A create sent twice makes two servers (Nova and OpenNebula names are not unique): a
//! create whose answer was lost is not sent again while a lagging list may hide what it
//! made, and a second server of one machine is deleted, never taken for the machine.

use flightdeck_spec::Duration;

use super::*;
use crate::LIST_LAG_MAX;

/// demo-workers-5 as a crash left it: its create was sent `ago` before now, its answer
/// (the server's ID) never recorded, and no list shows the server.
fn create_answer_lost(ago: Duration) -> World {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    w.drop_server("demo-workers-5");
    w.drop_member("demo-workers-5");
    w.observed
        .nodes
        .get_or_insert_with(Vec::new)
        .retain(|n| n.name != "demo-workers-5");
    let sent = Timestamp(T0.0 - ago.as_millis());
    let r = w.record("demo-workers-5");
    r.server_id = None;
    r.created_at = sent;
    r.create_sent_at = Some(sent);
    w
}

#[test]
fn a_create_whose_answer_was_lost_is_not_sent_again_while_a_list_may_lag() {
    let w = create_answer_lost(Duration::from_secs(90));
    let p = w.plan();
    assert!(targets(&p, "CreateServer").is_empty(), "{:?}", p.actions);
    assert!(p.requeue_after.is_some(), "it looks again");
    // Once every list has had LIST_LAG_MAX to show the server, one that still lacks
    // it is right: the create made nothing, and it is sent again.
    let w = create_answer_lost(Duration::from_millis(LIST_LAG_MAX.as_millis() + 1000));
    let p = w.plan();
    assert_eq!(targets(&p, "CreateServer"), ["demo-workers-5"]);
    assert_eq!(
        p.memory.machines["demo-workers-5"].create_sent_at,
        Some(T0),
        "the new send is noted before acting"
    );
}

#[test]
fn a_create_never_sent_is_sent_at_once() {
    let mut w = create_answer_lost(Duration::from_secs(90));
    w.record("demo-workers-5").create_sent_at = None;
    let p = w.plan();
    assert_eq!(targets(&p, "CreateServer"), ["demo-workers-5"]);
}

#[test]
fn a_second_server_of_one_machine_is_deleted_and_the_recorded_one_kept() {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    let recorded = w.record("demo-workers-5").server_id.clone().expect("id");
    let mut second = w
        .observed
        .servers
        .iter()
        .find(|s| s.name == "demo-workers-5")
        .cloned()
        .expect("the server");
    second.id = "second-of-workers-5".into();
    second.address = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 250)));
    // Listed first: order must not make it the machine's.
    w.observed.servers.insert(0, second);
    let p = w.plan();
    let deleted: Vec<&str> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::DeleteServer { server_id, .. } => Some(server_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, ["second-of-workers-5"]);
    assert_eq!(
        p.memory.machines["demo-workers-5"].server_id.as_deref(),
        Some(recorded.as_str())
    );
    assert!(
        p.events.iter().any(|e| e.reason == "DuplicateServer"),
        "{:?}",
        p.events
    );
    assert!(targets(&p, "CreateServer").is_empty(), "{:?}", p.actions);
}

#[test]
fn a_machine_never_made_whose_template_is_outdated_is_dropped_not_made() {
    let mut w = create_answer_lost(Duration::from_millis(LIST_LAG_MAX.as_millis() + 1000));
    w.record("demo-workers-5").template.image = "an-older-image".into();
    let p = w.plan();
    assert!(
        !targets(&p, "CreateServer").contains(&"demo-workers-5".to_string()),
        "{:?}",
        p.actions
    );
    let record = p.memory.machines.get("demo-workers-5");
    assert!(
        record.is_none_or(|r| r.removal.is_some()),
        "dropped: {record:?}"
    );
}

#[test]
fn a_machine_never_made_that_a_scale_down_no_longer_needs_is_dropped_not_made() {
    let mut w = create_answer_lost(Duration::from_millis(LIST_LAG_MAX.as_millis() + 1000));
    w.spec = spec(V1, 1);
    let p = w.plan();
    assert!(targets(&p, "CreateServer").is_empty(), "{:?}", p.actions);
    let record = p.memory.machines.get("demo-workers-5");
    assert!(
        record.is_none_or(|r| r.removal.is_some()),
        "dropped: {record:?}"
    );
    assert!(
        p.memory.machines["demo-workers-4"].removal.is_none(),
        "the machine that runs stays"
    );
}
