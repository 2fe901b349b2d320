//! The checks of a split-brain seed (`split_brain.rs`), each on ground truth: the
//! simulator's mutation log and servers, and the hub's record of who held each claim
//! when. Never what an engine believes.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Timestamp;
use flightdeck_sim::{Mutation, SimCloud};
use flightdeck_spec::{Cluster, Duration};

use crate::leases::ClaimSpan;
use crate::split_brain::{SplitBrainCase, seconds};

pub(crate) struct Inputs<'a> {
    pub case: &'a SplitBrainCase,
    pub start: Timestamp,
    pub cloud: &'a SimCloud,
    pub history: Vec<ClaimSpan>,
    pub claims: BTreeMap<String, (String, i64)>,
    pub live: Vec<String>,
    /// Each cluster's last spec.
    pub specs: Vec<&'a Cluster>,
    /// The clusters the paused replica held when it was paused.
    pub held_at_pause: &'a [String],
}

type Violation = (String, String);

impl Inputs<'_> {
    /// The first violation, if any, and the takeover time.
    pub fn run(&self, mutations: &[Mutation]) -> (Option<Violation>, Option<f64>) {
        let (takeover, late) = self.takeover();
        let violation = self
            .fenced_mutations(mutations)
            .or(late)
            .or_else(|| self.servers())
            .or_else(|| self.balanced());
        (violation, takeover)
    }

    fn at(&self, t: Timestamp) -> f64 {
        seconds(self.start, t)
    }

    /// Every mutation was sent by the replica that held the cluster's claim then.
    fn fenced_mutations(&self, mutations: &[Mutation]) -> Option<Violation> {
        for m in mutations {
            let Some((replica, cluster)) = m.caller.as_deref().and_then(parse_caller) else {
                return Some((
                    "fencedMutations".into(),
                    format!(
                        "{} {} at {:.1}s names no replica and cluster (caller {:?})",
                        m.service,
                        m.operation,
                        self.at(m.at),
                        m.caller
                    ),
                ));
            };
            let held = self.history.iter().any(|s| {
                s.cluster == cluster
                    && s.holder == replica
                    && s.from <= m.at
                    && s.to.is_none_or(|to| m.at < to)
            });
            if !held {
                let holders: Vec<String> = self
                    .history
                    .iter()
                    .filter(|s| s.cluster == cluster)
                    .map(|s| {
                        format!(
                            "{} (revision {}) {:.1}s–{}",
                            s.holder,
                            s.revision,
                            self.at(s.from),
                            s.to.map_or("now".into(), |t| format!("{:.1}s", self.at(t)))
                        )
                    })
                    .collect();
                return Some((
                    "fencedMutations".into(),
                    format!(
                        "replica {replica} sent {} {} on {} ({}) of cluster {cluster} at {:.1}s without holding its claim; its claims: {}",
                        m.service,
                        m.operation,
                        m.target_name,
                        m.target_id,
                        self.at(m.at),
                        holders.join(", ")
                    ),
                ));
            }
        }
        None
    }

    /// Seconds from the pause until every cluster the paused replica held was claimed
    /// by another; a violation when that took longer than its lease TTL plus two turns.
    fn takeover(&self) -> (Option<f64>, Option<Violation>) {
        let pause = self.start.plus(Duration::from_secs(self.case.pause_at_s));
        let mut worst: Option<f64> = Some(0.0);
        for c in self.held_at_pause {
            let taken = self
                .history
                .iter()
                .filter(|s| &s.cluster == c && s.holder != self.case.paused && s.from >= pause)
                .map(|s| s.from)
                .min();
            worst = match (worst, taken) {
                (Some(w), Some(t)) => Some(w.max(seconds(pause, t))),
                _ => None,
            };
        }
        let bound = self.case.ttl_s as f64 + 2.0;
        let late = match worst {
            Some(w) if w <= bound => None,
            Some(w) => Some(format!(
                "the paused replica's clusters were taken over after {w:.1}s, more than its lease TTL plus two turns ({bound:.0}s)"
            )),
            None if self.case.pause_for_s as f64 > bound => Some(format!(
                "the paused replica's clusters {:?} were never taken over in its {}s pause",
                self.held_at_pause, self.case.pause_for_s
            )),
            None => None,
        };
        (worst, late.map(|m| ("takeover".into(), m)))
    }

    /// At the end each cluster has its spec's machines, on its image, and no name twice.
    fn servers(&self) -> Option<Violation> {
        let world = self.cloud.snapshot();
        for spec in &self.specs {
            let name = spec.metadata.name.as_str();
            let prefix = format!("{name}-");
            let live: Vec<_> = world
                .servers
                .iter()
                .filter(|s| !s.is_deleting() && s.name.starts_with(&prefix))
                .collect();
            let mut seen = BTreeSet::new();
            if let Some(dup) = live.iter().find(|s| !seen.insert(s.name.as_str())) {
                return Some((
                    "noDuplicates".into(),
                    format!("cluster {name}: two servers named {}", dup.name),
                ));
            }
            let want = spec.spec.control_plane.replicas.get()
                + spec
                    .spec
                    .node_pools
                    .iter()
                    .map(|p| p.replicas.get())
                    .sum::<u32>();
            let outdated: Vec<&str> = live
                .iter()
                .filter(|s| {
                    !s.image.ends_with(super::split_brain::NEXT_VERSION)
                        && !s.image.ends_with("worker-b")
                })
                .map(|s| s.name.as_str())
                .collect();
            if live.len() != want as usize || !outdated.is_empty() {
                return Some((
                    "converged".into(),
                    format!(
                        "cluster {name}: {} live server(s), the spec wants {want}; not on the new image: {outdated:?}",
                        live.len()
                    ),
                ));
            }
        }
        None
    }

    /// No live replica holds more than its share of the clusters.
    fn balanced(&self) -> Option<Violation> {
        let share = self.specs.len().div_ceil(self.live.len().max(1));
        let loads = crate::split_brain::loads(&self.claims);
        loads
            .iter()
            .find(|(_, n)| **n > share)
            .map(|(r, n)| {
                (
                    "balanced".into(),
                    format!("replica {r} holds {n} clusters, more than its share ({share})"),
                )
            })
            .or_else(|| {
                (self.claims.len() != self.specs.len()).then(|| {
                    (
                        "balanced".into(),
                        format!(
                            "{} of {} clusters are claimed at the end",
                            self.claims.len(),
                            self.specs.len()
                        ),
                    )
                })
            })
    }
}

/// `replica=R cluster=C` → (R, C).
fn parse_caller(caller: &str) -> Option<(&str, &str)> {
    let mut replica = None;
    let mut cluster = None;
    for part in caller.split_whitespace() {
        if let Some(r) = part.strip_prefix("replica=") {
            replica = Some(r);
        } else if let Some(c) = part.strip_prefix("cluster=") {
            cluster = Some(c);
        }
    }
    Some((replica?, cluster?))
}
