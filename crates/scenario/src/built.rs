//! When the world first showed each cluster built, for the checks that hold "from Ready
//! on" (the API serves, routes and rules stay, repairs keep their budget). The world's
//! word, not the engine's: a cluster is built once every machine set has at least its
//! replicas of live machines whose node is Ready and, where flightdeck builds the API's
//! load balancer, at least the control-plane replicas of members serve.

use std::collections::BTreeMap;

use flightdeck_cloud::ownership::uid_of;
use flightdeck_sim::World;

use crate::repair_check::live_machines;
use crate::track::ClusterTrack;

/// Sets `ready_since` of every track the world shows built for the first time now.
pub fn note_built(tracks: &mut BTreeMap<String, ClusterTrack>, world: &World) {
    if tracks.values().all(|t| t.ready_since.is_some()) {
        return;
    }
    let mut serving: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for m in live_machines(world).iter().filter(|m| m.serving) {
        *serving.entry((m.uid, m.set)).or_default() += 1;
    }
    let mut members: BTreeMap<&str, u32> = BTreeMap::new();
    for x in &world.members {
        if world.member_serving_since.contains_key(&x.id)
            && let Some(uid) = uid_of(&x.tags)
        {
            *members.entry(uid).or_default() += 1;
        }
    }
    for t in tracks.values_mut().filter(|t| t.ready_since.is_none()) {
        let uid = t.uid.as_str();
        let sets_up = t
            .sets
            .sets()
            .all(|set| serving.get(&(uid, set)).copied().unwrap_or(0) >= t.sets.replicas(set));
        let api_up =
            t.external_endpoint || members.get(uid).copied().unwrap_or(0) >= t.sets.replicas("cp");
        if sets_up && api_up {
            t.ready_since = Some(world.now);
        }
    }
}
