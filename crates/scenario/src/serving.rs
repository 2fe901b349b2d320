//! `apiEndpointServing`, its rollout half (F2), from the simulator's state and its
//! mutation log: flightdeck never deletes a serving member of a cluster's API pool while
//! fewer other members serve than the spec's control-plane replicas. A surge-first
//! rollout brings the replacement up first, a repair replaces first, and a scale-down
//! keeps the new count: none of them needs to go below.
//!
//! What serves is the simulator's own record: ACTIVE and ONLINE, or ACTIVE and
//! NO_MONITOR with its server running and registered as a node. Without a health
//! monitor Octavia sends traffic to any member, whether its node is Ready this second or
//! not; one whose API never came up serves nothing. The check looks at the world only
//! between steps, and one step may span several reconciles and faults, so it reads what
//! served at a deletion's instant from the simulator's spells: those still running
//! (`World::member_serving_since`) and those that ended since the last look
//! (`SimCloud::serving_spells_since`).

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::uid_of;
use flightdeck_sim::{Mutation, MutationKind, ServingSpell, World};

use crate::track::ClusterTrack;

#[derive(Default)]
pub struct ServingCheck {
    /// The number of the next ended spell the simulator will log (a cursor).
    spells_seen: u64,
}

impl ServingCheck {
    /// The cursor for [`flightdeck_sim::SimCloud::serving_spells_since`].
    pub fn spells_seen(&self) -> u64 {
        self.spells_seen
    }

    /// Judges the member deletions in `fresh` against what served at their instant.
    /// `ended` are the serving spells that ended since the last look, and `next` the
    /// number of the next one. Answers one violation per offending deletion.
    pub fn check(
        &mut self,
        world: &World,
        fresh: &[Mutation],
        (ended, next): (&[ServingSpell], u64),
        clusters: &BTreeMap<String, ClusterTrack>,
    ) -> Vec<(Timestamp, String)> {
        self.spells_seen = next;
        let served_at = |id: &str, at: Timestamp| {
            world
                .member_serving_since
                .get(id)
                .is_some_and(|since| *since <= at)
                || ended
                    .iter()
                    .any(|s| s.member_id == id && s.since <= at && at <= s.until)
        };
        let mut violations = Vec::new();
        let mut gone: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for m in fresh
            .iter()
            .filter(|m| m.ok && m.service == "octavia" && m.kind == MutationKind::Delete)
        {
            let Some(uid) = uid_of(&m.target_tags) else {
                continue;
            };
            if !served_at(&m.target_id, m.at) {
                continue;
            }
            let Some(c) = clusters.values().find(|c| c.uid == uid) else {
                continue;
            };
            if c.ready_since.is_none() || c.deletion_requested || c.external_endpoint {
                continue;
            }
            let taken = gone.entry(uid).or_default();
            taken.insert(m.target_id.as_str());
            // Members now in the world, and those gone since the last look whose spell
            // covers the instant.
            let candidates: BTreeSet<&str> = world
                .members
                .iter()
                .filter(|x| uid_of(&x.tags) == Some(uid))
                .map(|x| x.id.as_str())
                .chain(ended.iter().map(|s| s.member_id.as_str()))
                .collect();
            let others = candidates
                .into_iter()
                .filter(|id| !taken.contains(id) && served_at(id, m.at))
                .filter(|id| member_of(world, fresh, id, uid))
                .count() as u32;
            let replicas = c.sets.replicas("cp");
            if others < replicas {
                violations.push((
                    m.at,
                    format!(
                        "cluster {}: serving member {} ({}) was deleted while only {others} other member(s) served, fewer than the {replicas} control-plane replicas",
                        c.name, m.target_name, m.target_id
                    ),
                ));
            }
        }
        violations
    }
}

/// Whether member `id` belongs to the cluster `uid`: by its tags if it is still in the
/// world, else by the tags its deletion was logged with.
fn member_of(world: &World, fresh: &[Mutation], id: &str, uid: &str) -> bool {
    match world.members.iter().find(|x| x.id == id) {
        Some(x) => uid_of(&x.tags) == Some(uid),
        None => fresh
            .iter()
            .any(|m| m.target_id == id && uid_of(&m.target_tags) == Some(uid)),
    }
}
