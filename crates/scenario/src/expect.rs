//! Expectations of a scenario: conditions seen within a window, and final states.

use std::collections::BTreeMap;

use flightdeck_cloud::Provider;
use flightdeck_cloud::Timestamp;
use flightdeck_engine::Engine;
use flightdeck_sim::World;
use flightdeck_spec::scenario::{
    ConditionExpectation, CountExpectation, Expectations, FinalExpectation, FinalState,
};

use crate::invariants::leaks;
use crate::report::ExpectationResult;
use crate::track::ClusterTrack;

/// Watches for one condition to be seen with a status inside a time window.
pub(crate) struct ConditionWatch {
    cluster: String,
    condition: String,
    status: bool,
    after: Timestamp,
    within: Timestamp,
    met_at: Option<Timestamp>,
}

impl ConditionWatch {
    pub(crate) fn new(c: &ConditionExpectation, start: Timestamp) -> Self {
        ConditionWatch {
            cluster: c.cluster.to_string(),
            condition: c.condition.clone(),
            status: c.status,
            after: start.plus(c.after),
            within: start.plus(c.within),
            met_at: None,
        }
    }

    pub(crate) fn observe<P: Provider>(&mut self, now: Timestamp, engine: &Engine<P>) {
        if self.met_at.is_some() || now < self.after || now > self.within {
            return;
        }
        // `status: false` means the condition is gone: shown False, or not shown at all.
        let holds = engine.cluster(&self.cluster).is_some_and(|c| {
            let shown_true = c
                .status
                .conditions
                .iter()
                .any(|x| x.kind == self.condition && x.status);
            shown_true == self.status
        });
        if holds {
            self.met_at = Some(now);
        }
    }

    pub(crate) fn result(&self, start: Timestamp) -> ExpectationResult {
        ExpectationResult {
            expectation: format!(
                "{} {}={} between {} and {}",
                self.cluster,
                self.condition,
                if self.status { "True" } else { "False" },
                self.after.since(start),
                self.within.since(start)
            ),
            met: self.met_at.is_some(),
            at_seconds: self.met_at.map(|t| t.since(start).as_secs_f64()),
            detail: if self.met_at.is_some() {
                "seen".into()
            } else {
                "never seen in the window".into()
            },
        }
    }
}

/// Judges where each named cluster ended.
pub(crate) fn final_expectations<P: Provider>(
    wanted: &[FinalExpectation],
    engine: &Engine<P>,
    tracks: &BTreeMap<String, ClusterTrack>,
    world: &World,
    at_seconds: f64,
) -> Vec<ExpectationResult> {
    wanted
        .iter()
        .map(|f| {
            let name = f.cluster.to_string();
            let (met, detail) = match f.state {
                FinalState::Deleted => match engine.cluster(&name) {
                    Some(c) => (
                        false,
                        format!("still there, phase {}", c.status.phase.as_str()),
                    ),
                    None => match tracks.get(&name).map(|t| leaks(world, t)) {
                        Some(Some(left)) => (false, format!("deleted, but {left} remain")),
                        Some(None) => (true, "deleted; nothing it owned remains".into()),
                        None => (false, "never tracked".into()),
                    },
                },
                FinalState::Ready => match engine.cluster(&name) {
                    None => (false, "not there".into()),
                    Some(c) if !c.status.ready => {
                        (false, format!("phase {}", c.status.phase.as_str()))
                    }
                    Some(c) => match &f.version {
                        Some(v) => {
                            let all = c
                                .status
                                .control_plane
                                .machines
                                .iter()
                                .all(|m| m.version == v.as_str());
                            let detail = if all {
                                format!("Ready on {v}")
                            } else {
                                format!("Ready, but not every control-plane machine runs {v}")
                            };
                            (all, detail)
                        }
                        None => (true, "Ready".into()),
                    },
                },
            };
            ExpectationResult {
                expectation: format!(
                    "{name} ends {:?}{}",
                    f.state,
                    f.version
                        .as_ref()
                        .map(|v| format!(" on {v}"))
                        .unwrap_or_default()
                ),
                met,
                at_seconds: met.then_some(at_seconds),
                detail,
            }
        })
        .collect()
}

/// The mutations the cloud accepted, counted by operation and by the cluster named in
/// the target's tags, as the runner reads them from the simulator's log.
#[derive(Default)]
pub(crate) struct MutationCounts(BTreeMap<(String, String), u64>);

impl MutationCounts {
    pub(crate) fn add(&mut self, batch: &[flightdeck_sim::Mutation]) {
        for m in batch.iter().filter(|m| m.ok) {
            let cluster = m
                .target_tags
                .iter()
                .find_map(|t| t.strip_prefix(flightdeck_cloud::ownership::TAG_CLUSTER))
                .unwrap_or_default();
            *self
                .0
                .entry((m.operation.clone(), cluster.to_string()))
                .or_default() += 1;
        }
    }

    fn count(&self, operation: &str, cluster: Option<&str>) -> u64 {
        self.0
            .iter()
            .filter(|((op, c), _)| op == operation && cluster.is_none_or(|x| x == c))
            .map(|(_, n)| n)
            .sum()
    }
}

/// Judges the counted expectations: events by reason from the timeline, mutations by
/// operation from the simulator's log.
pub(crate) fn count_expectations(
    expect: &Expectations,
    timeline: &[flightdeck_engine::TimelineEntry],
    counts: &MutationCounts,
    fault_effects: &BTreeMap<String, u64>,
) -> Vec<ExpectationResult> {
    let (events, mutations) = (&expect.events, &expect.mutations);
    let judge = |kind: &str, c: &CountExpectation, n: u64| {
        let within = n >= c.min && c.max.is_none_or(|max| n <= max);
        let bounds = match c.max {
            Some(max) if max == c.min => format!("exactly {max}"),
            Some(max) => format!("{}..={max}", c.min),
            None => format!("at least {}", c.min),
        };
        ExpectationResult {
            expectation: format!(
                "{kind} {}{} seen {bounds} time(s)",
                c.what,
                c.cluster
                    .as_ref()
                    .map(|x| format!(" of {x}"))
                    .unwrap_or_default()
            ),
            met: within,
            at_seconds: None,
            detail: format!("seen {n} time(s)"),
        }
    };
    let mut out: Vec<ExpectationResult> = events
        .iter()
        .map(|c| {
            let n = timeline
                .iter()
                .filter(|e| e.reason == c.what)
                .filter(|e| c.cluster.as_ref().is_none_or(|x| e.source == x.as_str()))
                .count() as u64;
            judge("event", c, n)
        })
        .collect();
    out.extend(mutations.iter().map(|c| {
        let n = counts.count(&c.what, c.cluster.as_ref().map(|x| x.as_str()));
        judge("mutation", c, n)
    }));
    out.extend(expect.faults.iter().map(|c| {
        let n = fault_effects.get(&c.what).copied().unwrap_or(0);
        judge("fault", c, n)
    }));
    out
}
