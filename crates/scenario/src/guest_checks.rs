//! The guest's own invariants, read from what the simulator saw happen inside each
//! workload cluster, never from flightdeck:
//!
//! - `noPodLost`: a pod lost with a machine whose deletion was asked through the cloud's
//!   API while its node was Ready is a violation, unless the node had been cordoned for
//!   its drain deadline (a drain starts with its cordon) or the cluster was being
//!   deleted (a cluster's deletion does not drain);
//! - `disruptionBudgetsKept`: no healthy pod a PodDisruptionBudget with no disruption
//!   left covers is deleted through the API, evicted, or lost as above;
//! - `nodesCleaned`: no Node of a machine that is gone outlives `nodeDeletionTimeout`
//!   plus one resync (and [`NODE_CLEAN_SLACK`]), counted from when it went or, if later,
//!   from when its workload cluster last had no machine running with a Ready Node (no
//!   API to delete it through: a kubeadm cluster whose every machine went).

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Timestamp;
use flightdeck_sim::{BudgetEvent, BudgetEventKind, LostPod, SimCloud};
use flightdeck_spec::Duration;
use flightdeck_spec::scenario::Invariant;

use crate::invariants::{DEADLINE_TOLERANCE, Invariants};
use crate::track::ClusterTrack;

/// How much longer than `nodeDeletionTimeout` plus one resync a Node of a gone machine
/// may stay: the machine is confirmed gone from a list (up to [`flightdeck_plan::GONE_AFTER`]
/// after it went, longer while lists lag) before its Node is asked for.
pub const NODE_CLEAN_SLACK: Duration = Duration::from_mins(8);

/// What the guest checks have read so far.
#[derive(Debug, Default)]
pub struct GuestChecks {
    lost_seen: u64,
    budget_seen: u64,
    stale_reported: BTreeSet<(String, String)>,
    /// By cluster: when it was last seen with no machine running with a Ready Node.
    api_dead_at: BTreeMap<String, Timestamp>,
}

impl GuestChecks {
    /// Reads what happened in the workload clusters since the last call, and checks it.
    pub fn check(
        &mut self,
        inv: &mut Invariants,
        cloud: &SimCloud,
        world: &flightdeck_sim::World,
        tracks: &BTreeMap<String, ClusterTrack>,
        now: Timestamp,
    ) {
        let (lost, next) = cloud.lost_pods_since(self.lost_seen);
        self.lost_seen = next;
        let (budget, next) = cloud.budget_events_since(self.budget_seen);
        self.budget_seen = next;
        // Each look at the logs is a check, whether or not anything was lost since.
        inv.record(Invariant::NoPodLost, now, None);
        inv.record(Invariant::DisruptionBudgetsKept, now, None);
        let mut excused = BTreeSet::new();
        for pod in &lost {
            // A VMI KubeVirt evacuated is `drainBeforeDelete`'s to judge: its deadline
            // counts from the evacuation, which the simulator stamped.
            let evacuated = world.kube.vmi_deletions.iter().any(|d| {
                d.cluster == pod.cluster
                    && d.guest_node.as_deref() == Some(pod.node.as_str())
                    && d.evacuation_since.is_some()
            });
            let verdict = if evacuated {
                None
            } else {
                lost_violation(pod, tracks, |from, to| {
                    Duration::from_millis(inv.kube_outage_within(from, to))
                })
            };
            match verdict {
                Some(why) => inv.record(Invariant::NoPodLost, pod.at, Some(why)),
                None => {
                    excused.insert((pod.cluster.clone(), pod.namespace.clone(), pod.name.clone()));
                }
            }
        }
        for e in &budget {
            if let Some(v) = budget_violation(e, &excused) {
                inv.record(Invariant::DisruptionBudgetsKept, e.at, Some(v));
            }
        }
        if inv.enabled(Invariant::NodesCleaned) {
            self.check_nodes(inv, cloud, tracks, now);
        }
    }

    fn check_nodes(
        &mut self,
        inv: &mut Invariants,
        cloud: &SimCloud,
        tracks: &BTreeMap<String, ClusterTrack>,
        now: Timestamp,
    ) {
        for n in cloud.stale_nodes() {
            let Some(track) = tracks.get(&n.cluster) else {
                continue;
            };
            // A cluster being deleted takes its workload cluster with it.
            if track.deletion_requested || track.deleted_at.is_some() {
                continue;
            }
            if !n.api_alive {
                self.api_dead_at.insert(n.cluster.clone(), now);
            }
            let bound = track.node_deletion_timeout.as_millis()
                + track.resync_period.as_millis() * 11 / 10
                + NODE_CLEAN_SLACK.as_millis();
            let from = self
                .api_dead_at
                .get(&n.cluster)
                .map_or(n.machine_gone_at, |dead| (*dead).max(n.machine_gone_at));
            let stayed = now.since(from);
            if stayed.as_millis() <= bound {
                inv.record(Invariant::NodesCleaned, now, None);
                continue;
            }
            if !self
                .stale_reported
                .insert((n.cluster.clone(), n.node.clone()))
            {
                continue;
            }
            inv.record(
                Invariant::NodesCleaned,
                now,
                Some(format!(
                    "cluster {}: node {} is still listed {stayed} after its machine went (or its cluster last had no API); nodeDeletionTimeout is {}",
                    n.cluster, n.node, track.node_deletion_timeout
                )),
            );
        }
    }
}

/// Why a lost pod breaks `noPodLost`, if it does.
/// `refused(from, to)`: how long the Kubernetes APIs refused calls within the span (a
/// cordon refused is sent again later, so the cordon the simulator saw may come after the
/// drain began by that much).
fn lost_violation(
    pod: &LostPod,
    tracks: &BTreeMap<String, ClusterTrack>,
    refused: impl Fn(Timestamp, Timestamp) -> Duration,
) -> Option<String> {
    if !pod.deleted_by_api || !pod.node_ready_at_deletion {
        return None;
    }
    let began = pod.deletion_began_at?;
    let track = tracks.get(&pod.cluster)?;
    if track.deletion_asked_at.is_some_and(|asked| asked <= began) {
        return None;
    }
    let timeout = match track.drain_timeout {
        Some(kv) => kv.min(track.node_drain_timeout),
        None => track.node_drain_timeout,
    };
    let cordon = match pod.cordoned_at {
        Some(at)
            if began.plus(DEADLINE_TOLERANCE).plus(refused(
                Timestamp(at.millis().saturating_sub(timeout.as_millis())),
                at,
            )) >= at.plus(timeout) =>
        {
            return None;
        }
        Some(at) => format!("cordoned {} before", began.since(at)),
        None => "never cordoned".to_string(),
    };
    Some(format!(
        "cluster {}: pod {}/{} was lost with node {}{}: its machine's deletion began at {} while the node was Ready ({cordon}), before the drain deadline of {timeout}",
        pod.cluster,
        pod.namespace,
        pod.name,
        pod.node,
        if pod.empty_dir {
            " with its emptyDir data"
        } else {
            ""
        },
        began,
    ))
}

/// Why a budget event breaks `disruptionBudgetsKept`, if it does.
fn budget_violation(
    e: &BudgetEvent,
    excused: &BTreeSet<(String, String, String)>,
) -> Option<String> {
    if !e.pod_healthy || e.disruptions_allowed > 0 {
        return None;
    }
    let how = match e.kind {
        BudgetEventKind::EvictionRefused => return None,
        BudgetEventKind::EvictionGranted => "evicted",
        BudgetEventKind::PodDeleted => "deleted",
        BudgetEventKind::MachineDeleted => {
            let key = (e.cluster.clone(), e.namespace.clone(), e.pod.clone());
            if excused.contains(&key) {
                return None;
            }
            "lost with its machine"
        }
    };
    Some(format!(
        "cluster {}: pod {}/{} was {how} while PodDisruptionBudget {} allowed no disruption ({} healthy, {} desired)",
        e.cluster, e.namespace, e.pod, e.pdb, e.current_healthy, e.desired_healthy
    ))
}
