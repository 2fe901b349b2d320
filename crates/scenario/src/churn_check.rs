//! `noChurn` per machine set (F11), from the mutation log: a remediation loop makes a
//! new machine each time under a new name, so it is invisible to a check keyed on the
//! machine. The churn breaker promises that each slot of a set is re-created at most
//! `churnLimit` times within `churnWindow` without a spec change; so a set makes at most
//! `churnLimit + 1` machines for each slot it may hold in any window, counted from its
//! last spec change (or restore of the store from a backup: `ClusterTrack::churn_epoch`).
//! Without the breaker a slot whose machines keep failing is re-made
//! with a backoff of 30 s doubling up to 10 minutes: seven times in thirty minutes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::{TAG_MACHINE, TAG_ROLE, uid_of};
use flightdeck_sim::{Mutation, MutationKind};

use crate::track::ClusterTrack;

/// The set a machine key (`cp-3`, `workers-12`) belongs to.
pub(crate) fn set_of(key: &str) -> &str {
    key.rsplit_once('-').map_or(key, |(set, _)| set)
}

/// An object of the workload cluster that carries its machine's tags without being the
/// machine: its Node, its pods, and its bootstrap token's Secret (deleted once the
/// machine joined, and made again with the next machine of the slot).
pub(crate) fn guest_object(m: &Mutation) -> bool {
    m.service == "kubernetes"
        && (m.target_id.contains("/node/")
            || m.target_id.contains("/pod/")
            || m.target_id.contains("/secret/"))
}

#[derive(Default)]
pub struct SetChurn {
    /// (cluster UID, set) → when its machines were made since its last spec change.
    made: BTreeMap<(String, String), VecDeque<Timestamp>>,
    /// Cluster UID → the churn epoch its history belongs to.
    generation: BTreeMap<String, (u64, u64)>,
    reported: BTreeSet<(String, String, (u64, u64))>,
}

impl SetChurn {
    /// Notes `m` if it makes a machine of one of `clusters`; answers a violation when
    /// its set made more machines within one churn window than the breaker allows.
    pub fn note(
        &mut self,
        m: &Mutation,
        clusters: &BTreeMap<String, ClusterTrack>,
    ) -> Option<String> {
        if m.kind != MutationKind::Create
            || guest_object(m)
            || !m
                .target_tags
                .iter()
                .any(|t| t.strip_prefix(TAG_ROLE) == Some("machine"))
        {
            return None;
        }
        let uid = uid_of(&m.target_tags)?;
        let key = m
            .target_tags
            .iter()
            .find_map(|t| t.strip_prefix(TAG_MACHINE))?;
        let c = clusters.values().find(|c| c.uid == uid)?;
        if self.generation.get(uid) != Some(&c.churn_epoch()) {
            self.generation.insert(uid.to_string(), c.churn_epoch());
            self.made.retain(|(u, _), _| u != uid);
        }
        let set = set_of(key).to_string();
        let window = c.sets.churn_window();
        let times = self.made.entry((uid.to_string(), set.clone())).or_default();
        times.push_back(m.at);
        while times.front().is_some_and(|t| m.at.since(*t) > window) {
            times.pop_front();
        }
        let n = times.len() as u32;
        let allowed = c.sets.allowed(&set);
        (n > allowed && self.reported.insert((uid.to_string(), set.clone(), c.churn_epoch()))).then(
            || {
                format!(
                    "cluster {}: set {set} made {n} machines within {window} with no spec change \
                     (the last: {}), more than the {allowed} its replicas, maxSurge and churnLimit allow: a repair loop",
                    c.name, m.target_name
                )
            },
        )
    }
}
