//! `reconcilePace`: every cluster is reconciled at least once per resync period (with
//! its 10 % jitter) plus two minutes. A cluster is reconciled when the simulator sees a
//! call made for it (every reconcile lists something fresh at least once a resync
//! period); what flightdeck says of when it last reconciled is not looked at. A runner that skips due work, or an engine whose
//! queue starves some clusters behind others, fails it. Windows in which calls were
//! slowed by half a second or more (`api.latency`) are excused: in virtual time calls do
//! not overlap, so there a fleet falls behind, and the clock starts again when the
//! window ends.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Timestamp;
use flightdeck_spec::{Cluster, Duration, Invariant};

use crate::invariants::Invariants;
use crate::track::ClusterTrack;

/// The slack on top of a resync period: one long reconcile, and the jitter's spread.
const SLACK: Duration = Duration::from_secs(120);

#[derive(Default)]
pub(crate) struct Pace {
    /// When each cluster was last seen reconciled (or first seen, or last excused).
    last: BTreeMap<String, Timestamp>,
    /// When calls were slowed.
    slow: Vec<(Timestamp, Timestamp)>,
    reported: BTreeSet<String>,
}

impl Pace {
    pub(crate) fn new(slow: Vec<(Timestamp, Timestamp)>) -> Self {
        Pace {
            slow,
            ..Pace::default()
        }
    }

    /// Checks every cluster the scenario has not deleted, by the calls the simulator
    /// saw made for it (`last_calls`: by name, or `uid:<UID>`), against the resync
    /// period of the spec the scenario wrote.
    pub(crate) fn check(
        &mut self,
        inv: &mut Invariants,
        now: Timestamp,
        last_calls: &BTreeMap<String, Timestamp>,
        tracks: &BTreeMap<String, ClusterTrack>,
        specs: &BTreeMap<String, Cluster>,
    ) {
        if !inv.enabled(Invariant::ReconcilePace) {
            return;
        }
        let clusters: Vec<(String, Option<Timestamp>, Duration)> = tracks
            .values()
            .filter(|t| !t.deletion_requested)
            .filter_map(|t| {
                let period = specs.get(&t.name)?.spec.flight.resync_period;
                let by_name = last_calls.get(&t.name).copied();
                let by_uid = last_calls.get(&format!("uid:{}", t.uid)).copied();
                Some((t.name.clone(), by_name.max(by_uid), period))
            })
            .collect();
        self.check_clusters(inv, now, &clusters);
    }

    /// Checks `clusters` (name, when last reconciled, resync period) at `now`.
    fn check_clusters(
        &mut self,
        inv: &mut Invariants,
        now: Timestamp,
        clusters: &[(String, Option<Timestamp>, Duration)],
    ) {
        let excused = self.slow.iter().any(|(s, e)| *s <= now && now < *e);
        for (name, reconciled, period) in clusters {
            let last = self.last.entry(name.clone()).or_insert(now);
            if let Some(t) = reconciled {
                *last = (*last).max(*t);
            }
            if excused {
                *last = now;
                continue;
            }
            let bound = Duration::from_millis(period.as_millis() * 11 / 10 + SLACK.as_millis());
            let idle = now.since(*last);
            let v = (idle > bound && self.reported.insert(name.clone())).then(|| {
                format!(
                    "cluster {name} was not reconciled for {idle}, more than its resync period {period} plus {SLACK}: starved"
                )
            });
            inv.record(Invariant::ReconcilePace, now, v);
        }
        self.last
            .retain(|n, _| clusters.iter().any(|(c, _, _)| c == n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants::CallBudget;

    fn at(secs: u64) -> Timestamp {
        Timestamp::SIM_EPOCH.plus_millis(secs * 1000)
    }

    fn run(slow: Vec<(Timestamp, Timestamp)>, reconciled: &[u64], until: u64) -> bool {
        let mut inv = Invariants::new(&[Invariant::ReconcilePace], at(0), CallBudget::default());
        let mut pace = Pace::new(slow);
        let period = Duration::from_mins(5);
        let mut last = None;
        for t in (0..=until).step_by(10) {
            if reconciled.contains(&t) {
                last = Some(at(t));
            }
            pace.check_clusters(&mut inv, at(t), &[("c1".into(), last, period)]);
        }
        inv.all_held()
    }

    #[test]
    fn a_cluster_reconciled_every_resync_period_keeps_pace() {
        assert!(run(Vec::new(), &[0, 300, 610, 900, 1230], 1500));
    }

    #[test]
    fn a_cluster_left_alone_for_a_period_and_more_is_starved() {
        // 5m30s of jitter and 2 minutes of slack: at 7m40s of silence it is starved.
        assert!(run(Vec::new(), &[0, 300], 750));
        assert!(!run(Vec::new(), &[0, 300], 770));
    }

    #[test]
    fn a_slow_cloud_excuses_the_silence_until_it_is_fast_again() {
        assert!(run(vec![(at(300), at(1200))], &[0, 300], 1200 + 440));
        assert!(!run(vec![(at(300), at(1200))], &[0, 300], 1200 + 460));
    }
}
