//! Memory lost (a store restored from before the cluster's machines were made): every
//! machine is adopted from its tags. One whose template tag matches the spec is current
//! and stays; one without it is known only by what the server shows, and is rolled.

use flightdeck_cloud::ownership::TAG_TEMPLATE;

use super::*;

/// The cluster with its memory of machines lost; each server tagged with its template
/// digest when `tagged`.
fn memory_lost(tagged: bool) -> World {
    let mut w = World::cluster(spec(V1, 2), V1, 2);
    let records = std::mem::take(&mut w.memory.machines);
    w.memory.machine_seq = 0;
    for s in &mut w.observed.servers {
        let Some(r) = records.values().find(|r| r.name == s.name) else {
            continue;
        };
        if tagged {
            s.tags
                .push(format!("{TAG_TEMPLATE}{}", r.template.digest()));
        }
    }
    w
}

#[test]
fn machines_adopted_with_their_template_tag_are_current_and_stay() {
    let p = memory_lost(true).plan();
    assert_eq!(
        p.events
            .iter()
            .filter(|e| e.reason == "MachineAdopted")
            .count(),
        5,
        "{:?}",
        p.events
    );
    assert!(targets(&p, "CreateServer").is_empty(), "{:?}", p.actions);
    assert_eq!(p.memory.machines["demo-cp-1"].template.version, V1);
}

#[test]
fn control_plane_machines_adopted_without_the_tag_are_rolled() {
    let p = memory_lost(false).plan();
    assert_eq!(p.memory.machines["demo-cp-1"].template.version, "unknown");
    assert!(
        targets(&p, "CreateServer")
            .iter()
            .any(|m| m.starts_with("demo-cp-")),
        "a surge-first rollout begins: {:?}",
        p.actions
    );
}
