//! `apiEndpointServing`, its rollout half (F2), from the simulator's state and its
//! mutation log: flightdeck never deletes a serving member of a cluster's API pool while
//! fewer other members serve than the spec's control-plane replicas. A surge-first
//! rollout brings the replacement up first, a repair replaces first, and a scale-down
//! keeps the new count: none of them needs to go below.
//!
//! What serves is the simulator's own record (`World::member_serving_since`): ACTIVE and
//! ONLINE, or ACTIVE and NO_MONITOR with its server running and registered as a node.
//! Without a health monitor Octavia sends traffic to any member, whether its node is
//! Ready this second or not; one whose API never came up serves nothing.
//!
//! The check looks at the world only between steps, and one step may span several
//! reconciles. A member counts as serving at a deletion's instant when it served at
//! the last look, or when it serves now and has served since before that instant.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::uid_of;
use flightdeck_sim::{Mutation, MutationKind, World};

use crate::track::ClusterTrack;

#[derive(Default)]
pub struct ServingCheck {
    /// Cluster UID → the ids of its members that served at the last look.
    serving: BTreeMap<String, BTreeSet<String>>,
}

impl ServingCheck {
    /// Judges the member deletions in `fresh` against what served at their instant, then
    /// notes what serves now. Answers one violation per offending deletion.
    pub fn check(
        &mut self,
        world: &World,
        fresh: &[Mutation],
        clusters: &BTreeMap<String, ClusterTrack>,
    ) -> Vec<(Timestamp, String)> {
        let mut violations = Vec::new();
        let mut gone: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for m in fresh
            .iter()
            .filter(|m| m.ok && m.service == "octavia" && m.kind == MutationKind::Delete)
        {
            let Some((uid, before)) = self
                .serving
                .iter()
                .find(|(_, ids)| ids.contains(&m.target_id))
            else {
                continue;
            };
            let Some(c) = clusters.values().find(|c| &c.uid == uid) else {
                continue;
            };
            if c.ready_since.is_none() || c.deletion_requested || c.external_endpoint {
                continue;
            }
            let taken = gone.entry(uid.as_str()).or_default();
            taken.insert(m.target_id.as_str());
            let risen = world.members.iter().filter(|x| {
                uid_of(&x.tags) == Some(uid.as_str())
                    && world
                        .member_serving_since
                        .get(&x.id)
                        .is_some_and(|since| *since <= m.at)
            });
            let serving: BTreeSet<&str> = before
                .iter()
                .map(String::as_str)
                .chain(risen.map(|x| x.id.as_str()))
                .filter(|id| !taken.contains(id))
                .collect();
            let others = serving.len() as u32;
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
        self.serving.clear();
        for member in &world.members {
            let Some(uid) = uid_of(&member.tags) else {
                continue;
            };
            if world.member_serving_since.contains_key(&member.id) {
                self.serving
                    .entry(uid.to_string())
                    .or_default()
                    .insert(member.id.clone());
            }
        }
        violations
    }
}
