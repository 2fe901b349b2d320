//! The driver loop: virtual time advances to the next thing that happens (a reconcile
//! due, a cloud transition, a fault or workload step), and after every step the
//! invariants are checked against the simulator's ground truth.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use flightdeck_cloud::{Clock, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig, EngineError};
use flightdeck_plan::{Event, Severity};
use flightdeck_sim::{SimCloud, SimConfig, SimFault};
use flightdeck_spec::scenario::{FinalState, WorkloadAction};
use flightdeck_spec::{Cluster, Duration, Invariant, KubernetesVersion, MachineTemplate};
use flightdeck_store::{Store, StoreError};

use crate::invariants::{ClusterTrack, Invariants, leaks};
use crate::load::LoadedScenario;
use crate::report::{ClusterReport, ExpectationResult, Report, TimelineEntry};

/// The most steps one run may take; a run that needs more is stuck in a loop.
pub const STEPS_MAX: u64 = 2_000_000;
/// The most reconciles run at one virtual instant before time must move on.
pub const RECONCILES_PER_INSTANT_MAX: usize = 64;

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the scenario's own seed.
    pub seed: Option<u64>,
    pub engine: EngineConfig,
    /// Keep state here instead of in memory.
    pub state_dir: Option<PathBuf>,
    /// Virtual times (since start) at which the engine is dropped and rebuilt on the
    /// same store and the same cloud, as after a crash.
    pub restarts: Vec<Duration>,
    /// End as soon as every cluster is Ready (the `up` command).
    pub stop_when_ready: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run took more than {STEPS_MAX} steps; a loop is suspected")]
    TooManySteps,
}

/// A finished run: the report and the simulated cloud as it was left.
pub struct Run {
    pub report: Report,
    pub cloud: Arc<SimCloud>,
}

struct ConditionWatch {
    cluster: String,
    condition: String,
    status: bool,
    after: Timestamp,
    within: Timestamp,
    met_at: Option<Timestamp>,
}

/// Runs a scenario to its end (or, with `stop_when_ready`, until every cluster is Ready)
/// and reports. `on_event` sees every timeline entry as it happens.
pub async fn run(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    let spec = &loaded.scenario.spec;
    let seed = options.seed.unwrap_or(spec.seed);
    let start = Timestamp::SIM_EPOCH;
    let end = start.plus(spec.duration);
    let clock = SimClock::new(start);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), seed, clock.clone()));
    // Objects flightdeck did not create: it must never touch them, even when they share
    // a name with the cluster's own.
    cloud.add_foreign_server("bastion", vec!["team=platform".into()]);
    cloud.add_foreign_load_balancer("legacy-ingress");
    for c in &loaded.clusters {
        cloud.add_foreign_security_group(c.spec.network.security_group.as_str());
    }
    let mut timeline: Vec<TimelineEntry> = Vec::new();
    let mut emit = |timeline: &mut Vec<TimelineEntry>, e: TimelineEntry| {
        on_event(&e);
        timeline.push(e);
    };
    for f in &spec.faults {
        cloud.inject(SimFault {
            kind: f.kind,
            start: start.plus(f.at),
            end: f.duration.map(|d| start.plus(f.at).plus(d)),
            service: f.service,
            rate: f.rate,
            latency: f.latency,
            count: f.count,
        });
    }
    let mut fault_marks: Vec<(Timestamp, String)> = Vec::new();
    for f in &spec.faults {
        let what = match f.service {
            Some(s) => format!("{} on {}", f.kind.as_str(), s.as_str()),
            None => f.kind.as_str().to_string(),
        };
        fault_marks.push((start.plus(f.at), format!("fault {what} starts")));
        if let Some(d) = f.duration {
            fault_marks.push((start.plus(f.at).plus(d), format!("fault {what} ends")));
        }
    }
    fault_marks.sort();

    let store = Arc::new(match &options.state_dir {
        Some(dir) => {
            let mut s = Store::open(dir)?;
            // The simulated cloud lives in memory; waiting for the disk buys nothing.
            s.set_durable(false);
            s
        }
        None => Store::in_memory()?,
    });
    let build = |clock: &SimClock, generation: u64| -> Result<Engine<SimCloud>, EngineError> {
        Engine::new(
            cloud.clone(),
            store.clone(),
            Arc::new(clock.clone()),
            Box::new(SeededRng::fork(seed, &format!("engine-{generation}"))),
            options.engine.clone(),
        )
    };
    let mut engine = build(&clock, 0)?;
    let mut tracks: BTreeMap<String, ClusterTrack> = BTreeMap::new();
    let mut specs: BTreeMap<String, Cluster> = BTreeMap::new();
    for c in &loaded.clusters {
        engine.apply(c.clone())?;
        specs.insert(c.name().to_string(), c.clone());
    }
    let enabled: Vec<Invariant> = spec
        .expect
        .invariants
        .clone()
        .unwrap_or_else(|| Invariant::ALL.to_vec());
    let mut invariants = Invariants::new(&enabled, start);
    let mut watches: Vec<ConditionWatch> = spec
        .expect
        .conditions
        .iter()
        .map(|c| ConditionWatch {
            cluster: c.cluster.to_string(),
            condition: c.condition.clone(),
            status: c.status,
            after: start.plus(c.after),
            within: start.plus(c.within),
            met_at: None,
        })
        .collect();
    let mut workload: Vec<(usize, &flightdeck_spec::scenario::WorkloadStep)> =
        spec.workload.iter().enumerate().collect();
    workload.sort_by_key(|(i, w)| (w.at, *i));
    let mut next_step = 0;
    let mut restarts: Vec<Timestamp> = options.restarts.iter().map(|d| start.plus(*d)).collect();
    restarts.sort();
    let mut restart_generation = 0;
    let mut steps: u64 = 0;
    let mut workload_failures: Vec<String> = Vec::new();

    loop {
        steps += 1;
        if steps > STEPS_MAX {
            return Err(RunError::TooManySteps);
        }
        cloud.advance();
        let now = clock.now();
        while fault_marks.first().is_some_and(|(t, _)| *t <= now) {
            let (t, what) = fault_marks.remove(0);
            emit(
                &mut timeline,
                entry(t, "sim", Severity::Warning, "Fault", what),
            );
        }
        while restarts.first().is_some_and(|t| *t <= now) {
            restarts.remove(0);
            restart_generation += 1;
            drop(engine);
            engine = build(&clock, restart_generation)?;
            emit(
                &mut timeline,
                entry(
                    now,
                    "sim",
                    Severity::Warning,
                    "EngineRestarted",
                    "the engine was dropped and rebuilt on the same store".into(),
                ),
            );
        }
        while let Some((index, step)) = workload.get(next_step).copied() {
            if start.plus(step.at) > now {
                break;
            }
            next_step += 1;
            let name = step.cluster.to_string();
            let result = apply_step(&mut engine, &mut specs, loaded, index, step);
            let (severity, message) = match result {
                Ok(m) => (Severity::Normal, m),
                Err(e) => {
                    workload_failures.push(format!("workload step {index} ({name}): {e}"));
                    (Severity::Warning, format!("failed: {e}"))
                }
            };
            if let Some(t) = tracks.get_mut(&name) {
                t.generation += 1;
                if step.action == WorkloadAction::Delete {
                    t.deletion_requested = true;
                }
            }
            emit(
                &mut timeline,
                entry(
                    now,
                    "workload",
                    severity,
                    &format!("{:?}", step.action),
                    message,
                ),
            );
        }
        for _ in 0..RECONCILES_PER_INSTANT_MAX {
            if engine.run_due().await? == 0 {
                break;
            }
        }
        for e in engine.drain_events() {
            emit(&mut timeline, from_event(e));
        }
        // Track clusters for the invariants.
        let now = clock.now();
        for (name, c) in engine.clusters() {
            let t = tracks.entry(name.clone()).or_insert_with(|| ClusterTrack {
                name: name.clone(),
                uid: c.memory.uid.clone(),
                ready_since: None,
                deletion_requested: false,
                deleted_at: None,
                generation: 0,
            });
            t.ready_since = c.memory.ready_since;
            t.deletion_requested |= c.memory.deletion_requested.is_some();
        }
        for t in tracks.values_mut() {
            if t.deleted_at.is_none() && t.deletion_requested && engine.cluster(&t.name).is_none() {
                t.deleted_at = Some(now);
            }
        }
        let world = cloud.snapshot();
        invariants.check(
            &world,
            cloud.mutations_since(invariants.mutations_seen()),
            &tracks,
        );
        for w in watches.iter_mut().filter(|w| w.met_at.is_none()) {
            if now < w.after || now > w.within {
                continue;
            }
            let holds = engine.cluster(&w.cluster).is_some_and(|c| {
                c.status
                    .conditions
                    .iter()
                    .any(|x| x.kind == w.condition && x.status == w.status)
            });
            if holds {
                w.met_at = Some(now);
            }
        }

        if now >= end {
            break;
        }
        if options.stop_when_ready
            && next_step >= workload.len()
            && engine.clusters().count() > 0
            && engine.clusters().all(|(_, c)| c.status.ready)
        {
            break;
        }
        let candidates = [
            engine.next_due(),
            cloud.next_transition_at(),
            workload.get(next_step).map(|(_, w)| start.plus(w.at)),
            fault_marks.first().map(|(t, _)| *t),
            restarts.first().copied(),
            Some(end),
        ];
        let next = candidates
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .min()
            .unwrap_or(end);
        clock.advance_to(next);
    }

    let now = clock.now();
    let mut expectations: Vec<ExpectationResult> = watches
        .iter()
        .map(|w| ExpectationResult {
            expectation: format!(
                "{} {}={} between {} and {}",
                w.cluster,
                w.condition,
                if w.status { "True" } else { "False" },
                w.after.since(start),
                w.within.since(start)
            ),
            met: w.met_at.is_some(),
            at_seconds: w.met_at.map(|t| t.since(start).as_secs_f64()),
            detail: if w.met_at.is_some() {
                "seen".into()
            } else {
                "never seen in the window".into()
            },
        })
        .collect();
    for f in &spec.expect.final_state {
        let name = f.cluster.to_string();
        let (met, detail) = match f.state {
            FinalState::Deleted => match engine.cluster(&name) {
                Some(c) => (
                    false,
                    format!("still there, phase {}", c.status.phase.as_str()),
                ),
                None => {
                    let uid = tracks.get(&name).map(|t| t.uid.clone()).unwrap_or_default();
                    match leaks(&cloud.snapshot(), &uid) {
                        Some(left) => (false, format!("deleted, but {left} remain")),
                        None => (true, "deleted; nothing it owned remains".into()),
                    }
                }
            },
            FinalState::Ready => match engine.cluster(&name) {
                None => (false, "not there".into()),
                Some(c) if !c.status.ready => (false, format!("phase {}", c.status.phase.as_str())),
                Some(c) => match &f.version {
                    Some(v) => {
                        let all = c
                            .status
                            .control_plane
                            .machines
                            .iter()
                            .all(|m| m.version == v.as_str());
                        (
                            all,
                            if all {
                                format!("Ready on {v}")
                            } else {
                                format!("Ready, but not every control-plane machine runs {v}")
                            },
                        )
                    }
                    None => (true, "Ready".into()),
                },
            },
        };
        expectations.push(ExpectationResult {
            expectation: format!(
                "{name} ends {:?}{}",
                f.state,
                f.version
                    .as_ref()
                    .map(|v| format!(" on {v}"))
                    .unwrap_or_default()
            ),
            met,
            at_seconds: if met {
                Some(now.since(start).as_secs_f64())
            } else {
                None
            },
            detail,
        });
    }
    for failure in workload_failures {
        expectations.push(ExpectationResult {
            expectation: "every workload step applies".into(),
            met: false,
            at_seconds: None,
            detail: failure,
        });
    }
    let api_calls = cloud.api_calls();
    let api_calls_total = api_calls.values().flat_map(|m| m.values()).sum();
    let clusters = tracks
        .values()
        .map(|t| ClusterReport {
            name: t.name.clone(),
            uid: t.uid.clone(),
            phase: match engine.cluster(&t.name) {
                Some(c) => c.status.phase.as_str().to_string(),
                None => "Deleted".into(),
            },
            status: engine.cluster(&t.name).map(|c| c.status.clone()),
        })
        .collect();
    let passed = invariants.all_held() && expectations.iter().all(|e| e.met);
    let report = Report {
        scenario: loaded.scenario.metadata.name.to_string(),
        seed,
        passed,
        virtual_seconds: now.since(start).as_secs_f64(),
        steps,
        invariants: invariants.verdicts(),
        expectations,
        api_calls,
        api_calls_total,
        engine: engine.stats().clone(),
        clusters,
        timeline,
    };
    Ok(Run { report, cloud })
}

fn entry(
    at: Timestamp,
    source: &str,
    severity: Severity,
    reason: &str,
    message: String,
) -> TimelineEntry {
    TimelineEntry {
        at_ms: at.since(Timestamp::SIM_EPOCH).as_millis(),
        source: source.to_string(),
        severity: format!("{severity:?}"),
        reason: reason.to_string(),
        message,
    }
}

fn from_event(e: Event) -> TimelineEntry {
    entry(e.at, &e.cluster, e.severity, &e.reason, e.message)
}

/// Carries out one workload step against the engine; returns what it did.
fn apply_step(
    engine: &mut Engine<SimCloud>,
    specs: &mut BTreeMap<String, Cluster>,
    loaded: &LoadedScenario,
    index: usize,
    step: &flightdeck_spec::scenario::WorkloadStep,
) -> Result<String, String> {
    let name = step.cluster.to_string();
    if step.action == WorkloadAction::Delete {
        engine.delete(&name).map_err(|e| e.to_string())?;
        return Ok(format!("delete cluster {name}"));
    }
    let mut spec = match step.action {
        WorkloadAction::Apply => loaded
            .applies
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, c)| c.clone())
            .ok_or_else(|| "no cluster file for this step".to_string())?,
        _ => specs
            .get(&name)
            .cloned()
            .ok_or_else(|| format!("cluster {name} was never applied"))?,
    };
    let what = match step.action {
        WorkloadAction::Scale => {
            let n = step.replicas.unwrap_or_default();
            match &step.pool {
                Some(pool) => {
                    let p = spec
                        .spec
                        .node_pools
                        .iter_mut()
                        .find(|p| p.name == *pool)
                        .ok_or_else(|| format!("cluster {name} has no node pool {pool}"))?;
                    p.replicas = flightdeck_spec::cluster::PoolReplicas::new(n)?;
                    format!("scale {name}/{pool} to {n}")
                }
                None => {
                    spec.spec.control_plane.replicas =
                        flightdeck_spec::cluster::ControlPlaneReplicas::new(n)?;
                    format!("scale {name} control plane to {n}")
                }
            }
        }
        WorkloadAction::Upgrade => {
            let cp = &mut spec.spec.control_plane;
            if let Some(v) = &step.version {
                cp.version = KubernetesVersion::clone(v);
            }
            if let Some(m) = &step.machine {
                cp.machine = MachineTemplate::clone(m);
            }
            format!(
                "upgrade {name} control plane to {} ({})",
                cp.version, cp.machine.image
            )
        }
        WorkloadAction::Apply => format!("apply a new spec for {name}"),
        WorkloadAction::Delete => {
            return Err("a delete step has no spec to apply".into());
        }
    };
    spec.validate()
        .map_err(|(path, msg)| format!("{path}: {msg}"))?;
    engine.apply(spec.clone()).map_err(|e| e.to_string())?;
    specs.insert(name, spec);
    Ok(what)
}
