//! `callBudget`, from the simulator's counts alone: the calls it answered for each
//! cluster ([`flightdeck_sim::SimCloud::take_call_tallies`]) and how many of them it
//! answered with an error. Nothing here reads flightdeck's reconcile count, events or
//! failure counters: a flightdeck that under-reported its own calls or failures would
//! still be held to what the cloud saw.

use std::collections::{BTreeMap, VecDeque};

use flightdeck_cloud::Timestamp;
use flightdeck_sim::CallTally;
use flightdeck_spec::Duration;

/// Bounds of the `callBudget` invariant.
#[derive(Clone, Debug, PartialEq)]
pub struct CallBudget {
    /// Calls the cloud may answer for one cluster in one batch of reconciles (the
    /// engine reconciles a cluster at most once a batch): one reconcile's, observation
    /// included.
    pub per_instant_max: u64,
    /// Calls per cluster-hour over the whole run, and for each cluster over its life
    /// (at least a quarter hour: building a cluster costs a few hundred calls however
    /// fast it goes).
    pub per_cluster_hour_max: f64,
    /// Calls the cloud may refuse one cluster within `hot_loop_window` before they
    /// count as a hot retry loop: 30 failed reconciles of up to 8 refused calls each.
    /// Backoff that doubles from 1 s allows about ten failed reconciles in ten minutes,
    /// and a reconcile may have several calls in flight when the cloud refuses them
    /// (600 seeds from 5000 saw at most 109, seed 5016: a KubeVirt cluster under
    /// `api.errorRate`). An eviction a disruption budget holds back is no refusal.
    pub refused_per_window_max: u64,
    pub hot_loop_window: Duration,
}

impl Default for CallBudget {
    fn default() -> Self {
        CallBudget {
            per_instant_max: 64,
            per_cluster_hour_max: 12_000.0,
            refused_per_window_max: 240,
            hot_loop_window: Duration::from_mins(10),
        }
    }
}

/// At least this much of a cluster's life counts for its calls per hour.
const LIFE_MIN_MS: u64 = 15 * 60 * 1000;

/// What `callBudget` remembers between looks.
#[derive(Default)]
pub(crate) struct BudgetCheck {
    /// Calls refused per cluster within the window: when, and how many.
    refused: BTreeMap<String, VecDeque<(Timestamp, u64)>>,
    /// Per cluster: the first call seen, and the calls since.
    lives: BTreeMap<String, (Timestamp, u64)>,
}

impl BudgetCheck {
    /// One instant's tallies, by cluster name: a verdict for each cluster that the
    /// cloud answered at it.
    pub(crate) fn instant(
        &mut self,
        budget: &CallBudget,
        now: Timestamp,
        tallies: &BTreeMap<String, CallTally>,
    ) -> Vec<Option<String>> {
        let mut verdicts = Vec::with_capacity(tallies.len());
        for (cluster, tally) in tallies {
            let life = self.lives.entry(cluster.clone()).or_insert((now, 0));
            life.1 += tally.calls;
            let max = budget.per_instant_max;
            verdicts.push((tally.calls > max).then(|| {
                format!(
                    "cluster {cluster}: the cloud answered {} calls for it in one reconcile, more than {max}",
                    tally.calls
                )
            }));
            if tally.refused > 0 {
                verdicts.push(self.refusals(budget, cluster, now, tally.refused));
            }
        }
        verdicts
    }

    fn refusals(
        &mut self,
        budget: &CallBudget,
        cluster: &str,
        now: Timestamp,
        refused: u64,
    ) -> Option<String> {
        let window = budget.hot_loop_window;
        let q = self.refused.entry(cluster.to_string()).or_default();
        q.push_back((now, refused));
        while q.front().is_some_and(|(t, _)| now.since(*t) > window) {
            q.pop_front();
        }
        let n: u64 = q.iter().map(|(_, n)| n).sum();
        let max = budget.refused_per_window_max;
        (n > max).then(|| {
            format!(
                "cluster {cluster}: the cloud refused {n} of its calls within {window}, a hot retry loop (at most {max})"
            )
        })
    }

    /// Each cluster's calls per hour of its life (from its first call to `now`).
    pub(crate) fn lives(&self, budget: &CallBudget, now: Timestamp) -> Vec<Option<String>> {
        let max = budget.per_cluster_hour_max;
        self.lives
            .iter()
            .map(|(cluster, (first, calls))| {
                let hours = now.since(*first).as_millis().max(LIFE_MIN_MS) as f64 / 3_600_000.0;
                let rate = *calls as f64 / hours;
                (rate > max).then(|| {
                    format!(
                        "cluster {cluster}: {rate:.0} cloud calls per hour of its life, more than {max:.0}"
                    )
                })
            })
            .collect()
    }
}

/// Tallies keyed by `uid:<UID>` moved under the name of the cluster with that UID
/// (`uid_names`), added to those already under its name.
pub(crate) fn by_name(
    tallies: BTreeMap<String, CallTally>,
    uid_names: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, CallTally> {
    let mut named: BTreeMap<String, CallTally> = BTreeMap::new();
    for (key, t) in tallies {
        let name = match key.strip_prefix("uid:") {
            Some(uid) => uid_names(uid).unwrap_or(key),
            None => key,
        };
        let e = named.entry(name).or_default();
        e.calls += t.calls;
        e.refused += t.refused;
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    fn tally(calls: u64, refused: u64) -> BTreeMap<String, CallTally> {
        BTreeMap::from([("c1".to_string(), CallTally { calls, refused })])
    }

    #[test]
    fn a_cluster_answered_more_calls_at_one_instant_than_allowed_breaks_the_budget() {
        let budget = CallBudget::default();
        let mut check = BudgetCheck::default();
        assert_eq!(check.instant(&budget, at(0), &tally(64, 0)), vec![None]);
        let v = check.instant(&budget, at(1), &tally(65, 0));
        assert!(
            v[0].as_deref().is_some_and(|m| m.contains("65 calls")),
            "{v:?}"
        );
    }

    #[test]
    fn refusals_within_the_window_add_up_to_a_hot_loop_and_old_ones_leave_it() {
        let budget = CallBudget::default();
        let mut check = BudgetCheck::default();
        for s in 0..240 {
            assert!(
                check
                    .instant(&budget, at(s), &tally(1, 1))
                    .iter()
                    .all(Option::is_none)
            );
        }
        let v = check.instant(&budget, at(240), &tally(1, 1));
        assert!(
            v.iter()
                .any(|m| m.as_deref().is_some_and(|m| m.contains("refused 241"))),
            "{v:?}"
        );
        // Ten minutes later the early ones have left the window.
        let v = check.instant(&budget, at(240 + 600), &tally(1, 1));
        assert!(v.iter().all(Option::is_none), "{v:?}");
    }

    #[test]
    fn a_cluster_that_polls_too_often_over_its_life_breaks_the_budget() {
        let budget = CallBudget::default();
        let mut check = BudgetCheck::default();
        // 3,000 calls in the first quarter hour is 12,000 an hour: at the bound.
        check.instant(&budget, at(0), &tally(50, 0));
        for s in 1..60 {
            check.instant(&budget, at(s * 15), &tally(50, 0));
        }
        assert!(check.lives(&budget, at(900)).iter().all(Option::is_none));
        check.instant(&budget, at(901), &tally(50, 0));
        let v = check.lives(&budget, at(901));
        assert!(
            v[0].as_deref()
                .is_some_and(|m| m.contains("per hour of its life")),
            "{v:?}"
        );
    }

    #[test]
    fn a_list_by_uid_counts_for_the_cluster_with_that_uid() {
        let tallies = BTreeMap::from([
            (
                "c1".to_string(),
                CallTally {
                    calls: 2,
                    refused: 1,
                },
            ),
            (
                "uid:u1".to_string(),
                CallTally {
                    calls: 3,
                    refused: 0,
                },
            ),
            (
                "uid:gone".to_string(),
                CallTally {
                    calls: 1,
                    refused: 0,
                },
            ),
        ]);
        let named = by_name(tallies, |uid| (uid == "u1").then(|| "c1".to_string()));
        assert_eq!(
            named["c1"],
            CallTally {
                calls: 5,
                refused: 1
            }
        );
        assert_eq!(named["uid:gone"].calls, 1);
    }
}
