//! The driver loop: virtual time advances to the next thing that happens (a reconcile
//! due, a cloud transition, a fault, a workload step or a restart), and after every step
//! the invariants are checked against the simulator's ground truth.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use flightdeck_cloud::{Clock, DynProvider, Provider, Rng, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig, EngineError};
use flightdeck_plan::{Event, Severity};
use flightdeck_sim::{SimCloud, SimConfig, World};
use flightdeck_spec::scenario::{WorkloadAction, WorkloadStep};
use flightdeck_spec::{Cluster, Duration, Invariant};
use flightdeck_store::{MemoryDisk, Store, StoreError};

use crate::engine_faults::{
    EngineFaultProfile, Fired, InjectedEngineFaults, STORE_RESTART, STORE_RESTORED_LAGGING,
};
use crate::expect::{ConditionWatch, MutationCounts, count_expectations, final_expectations};
use crate::flight::FlightChecks;
use crate::invariants::{CallBudget, Invariants};
use crate::load::LoadedScenario;
use crate::pace::Pace;
use crate::report::{ClusterReport, ExpectationResult, Report, TimelineEntry};
use crate::stage;
use crate::track::ClusterTrack;
use crate::workload::apply_step;

mod checks;
mod converge;
mod restarts;

/// The most steps one run may take; a run that needs more is stuck in a loop.
pub const STEPS_MAX: u64 = 2_000_000;
/// How long after its last fault, workload step and restart a scenario without
/// `convergeAfter` gives its fleet to converge: its run goes on past its duration, up
/// to this, until it has.
pub const CONVERGE_BOUND: Duration = Duration::from_mins(30);
/// The most reconcile batches run at one virtual instant before time must move on.
pub const RECONCILES_PER_INSTANT_MAX: usize = 64;

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the scenario's own seed.
    pub seed: Option<u64>,
    pub engine: EngineConfig,
    /// Keep state here instead of on an in-memory disk.
    pub state_dir: Option<PathBuf>,
    /// Virtual times (since start) at which the engine is dropped and rebuilt on the
    /// same store and the same cloud, as after a crash.
    pub restarts: Vec<Duration>,
    /// Virtual times at which the engine and the store are both closed and reopened.
    pub store_restarts: Vec<Duration>,
    /// (at, lag): at `at` the engine and the store are closed, and the store comes back
    /// as it was `lag` before, as from a backup or a replica that lost its last commits:
    /// the cloud is ahead of what flightdeck remembers. Needs the in-memory disk.
    pub lagging_restores: Vec<(Duration, Duration)>,
    /// Engine faults (crashes between writes, stale observations, lost requeues).
    pub engine_faults: Option<EngineFaultProfile>,
    /// End as soon as every cluster is Ready (the `up` command).
    pub stop_when_ready: bool,
    /// Check the invariants at most this often in virtual time (and always at the last
    /// step) instead of at every step: `up` of a large fleet, whose steps are many and
    /// whose world is large. The checks read the mutation log since their last look
    /// and judge episodes by their length, so a coarser look delays a finding by at
    /// most this much; scenarios and the swarm look at every step.
    pub check_every: Option<Duration>,
    /// From this time on no fault is active and the fleet must converge before the
    /// scenario ends (the `convergence` invariant); the run ends once it has.
    pub converge_after: Option<Duration>,
    pub call_budget: CallBudget,
    /// The simulated cloud's settings.
    pub sim: SimConfig,
    /// Where the engine issues its own access to kubeadm clusters' workload APIs, for
    /// the provider's workload clients to read (wire runs: see `wire::guest_over_tls`).
    pub workload_access: Option<Arc<flightdeck_cloud::AccessBook>>,
    /// Keep no record of what the run has judged already: the timeline's entries are
    /// counted, not kept (`on_event` still sees each), and the checks take the
    /// simulator's mutations out of its log as they read them. `up` of a large fleet
    /// reports only how many entries there were; keeping 78,000 of them, and 44,000
    /// mutations, for 1,000 clusters cost 14 and 10 MB of its peak. The report's
    /// `timeline` is then empty and the returned cloud's mutation log holds at most
    /// what came after the last look: a scenario that counts events by reason, or a
    /// test that reads the log after the run, needs them kept.
    pub forget_seen: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a lagging store restore needs the in-memory disk, not a state directory")]
    LaggingRestoreNeedsMemoryDisk,
    #[error("the run took more than {STEPS_MAX} steps; a loop is suspected")]
    TooManySteps,
    #[error("wire mode: {0}")]
    Wire(String),
    #[error("no key for the run's secrets: {0}")]
    Secrets(String),
}

/// A finished run: the report and the simulated cloud as it was left.
pub struct Run {
    pub report: Report,
    pub cloud: Arc<SimCloud>,
    /// Engine faults that struck, by name.
    pub engine_faults_fired: BTreeMap<&'static str, u64>,
    /// Virtual seconds from `converge_after` until the fleet converged.
    pub convergence_seconds: Option<f64>,
}

/// What a scheduled restart does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Restart {
    /// The engine is dropped and rebuilt on the same store.
    Engine,
    /// The engine and the store are closed and reopened.
    Store,
    /// An image of the store's disk is taken, for the lagging restore at that instant.
    Image(Timestamp),
    /// The engine and the store are closed; the store reopens from the image taken then.
    Lagging(Timestamp),
}

/// Where the state store lives; either can be closed and opened again.
enum StoreHome {
    Dir(PathBuf),
    Disk(MemoryDisk),
}

impl StoreHome {
    fn open(&self) -> Result<Store, StoreError> {
        match self {
            StoreHome::Dir(dir) => {
                let mut s = Store::open(dir)?;
                // The simulated cloud lives in memory; waiting for the disk buys nothing.
                s.set_durable(false);
                Ok(s)
            }
            StoreHome::Disk(disk) => Store::on_memory_disk(disk),
        }
    }
}

/// Like [`crate::run`], but the engine talks to the cloud through the provider `connect` makes
/// from the simulated cloud (for example the real HTTP provider against the simulator
/// served on loopback: wire mode). The invariants still read the simulator's ground truth.
pub async fn run_on<P, F, Fut>(
    loaded: &LoadedScenario,
    options: &RunOptions,
    connect: F,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError>
where
    P: Provider + 'static,
    F: FnOnce(Arc<SimCloud>) -> Fut,
    Fut: std::future::Future<Output = Result<Arc<P>, RunError>>,
{
    let cloud = Driver::<DynProvider>::new_cloud(loaded, options);
    let provider = connect(cloud.clone()).await?;
    drive(loaded, options, on_event, cloud, DynProvider::new(provider)).await
}

/// Brings `t` up to what the engine holds of its cluster `c`, whose spec as the
/// scenario wrote it is `spec`.
fn follow(
    t: &mut ClusterTrack,
    c: &flightdeck_engine::ClusterRecord,
    spec: Option<&Cluster>,
    cloud: &SimCloud,
) {
    // The workload cluster hands its nodes pod networks from the spec's podCIDR, under
    // the cluster's UID (which an adoption changes).
    if t.pod_network_uid.as_deref() != Some(c.memory.uid.as_str()) {
        t.pod_network_uid = Some(c.memory.uid.clone());
        cloud.set_pod_network(&t.name, &c.memory.uid, c.spec.spec.network.pod_cidr);
    }
    // The limits are the spec's as the scenario wrote it, not as flightdeck stored it.
    t.sets.refresh(spec.unwrap_or(&c.spec), t.generation);
    // `ready_since` is the world's (`truth.rs`), and so is the deletion: the scenario
    // asked for it (`fire_workload`).
}

/// The run itself, on any cloud's provider: the driver and its engine are compiled once,
/// not once for each provider type.
async fn drive(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
    cloud: Arc<SimCloud>,
    provider: DynProvider,
) -> Result<Run, RunError> {
    // One key for the whole run: every engine the run builds on its store (after a
    // crash, a restart or a lagging restore) opens the secrets the first one sealed.
    // Tokens from the run's seed: the timeline names each token's id, and a run replays.
    let seeded;
    let options = if options.engine.tokens == flightdeck_engine::TokenSource::Secure {
        let mut o = options.clone();
        o.engine.tokens = flightdeck_engine::TokenSource::Seeded(
            options.seed.unwrap_or(loaded.scenario.spec.seed),
        );
        seeded = o;
        &seeded
    } else {
        options
    };
    let keyed;
    let options = match options.engine.secrets {
        Some(_) => options,
        None => {
            let key = flightdeck_guest::SecretsKey::generate("the run's key, kept nowhere")
                .map_err(|e| RunError::Secrets(e.to_string()))?;
            let mut o = options.clone();
            o.engine.secrets = Some(flightdeck_engine::secrets::SecretsAtRest::Sealed(Arc::new(
                key,
            )));
            keyed = o;
            &keyed
        }
    };
    let mut d = Driver::new(loaded, options, on_event, cloud, Arc::new(provider))?;
    d.run().await?;
    Ok(d.finish())
}

struct Driver<'a, P: Provider> {
    loaded: &'a LoadedScenario,
    options: &'a RunOptions,
    on_event: &'a mut dyn FnMut(&TimelineEntry),
    seed: u64,
    start: Timestamp,
    end: Timestamp,
    clock: SimClock,
    cloud: Arc<SimCloud>,
    provider: Arc<P>,
    home: StoreHome,
    engine: Engine<P>,
    engine_generation: u64,
    fired: Fired,
    timeline: Vec<TimelineEntry>,
    /// Every entry the timeline had, kept or not.
    events: usize,
    marks: Vec<stage::Mark>,
    workload: Vec<(usize, &'a WorkloadStep)>,
    next_step: usize,
    restarts: Vec<(Timestamp, Restart)>,
    /// The disk images taken for lagging restores, by the instant they restore to.
    images: Vec<(Timestamp, MemoryDisk)>,
    tracks: BTreeMap<String, ClusterTrack>,
    /// The world as the last step saw it, with the simulator's change count then.
    world: Option<(u64, flightdeck_sim::World)>,
    /// When the invariants were last checked.
    last_check: Option<Timestamp>,
    specs: BTreeMap<String, Cluster>,
    invariants: Invariants,
    watches: Vec<ConditionWatch>,
    mutation_counts: MutationCounts,
    workload_failures: Vec<String>,
    steps: u64,
    converged_at: Option<Timestamp>,
    /// From when the fleet must converge: the run's option, else the file's
    /// `convergeAfter`, else the end of its last fault, workload step and restart.
    converge_after: Option<Duration>,
    /// The convergence point was not asked for but found: the run does not end before
    /// the scenario's own end (`spec_end`), and goes on past it until the fleet
    /// converged, at most [`CONVERGE_BOUND`] after the point.
    converge_implicit: bool,
    /// Why `convergence` does not apply to this run, when it does not.
    converge_not_applicable: Option<String>,
    /// The end the scenario's duration sets.
    spec_end: Timestamp,
    cluster_millis: u64,
    flight: FlightChecks,
    pace: Pace,
    truth: crate::truth::Truth,
    guest: crate::guest_checks::GuestChecks,
    boot: crate::boot_check::BootChecks,
}

impl<'a, P: Provider + 'static> Driver<'a, P> {
    /// The simulated cloud a run starts from, with its clock at the simulation epoch.
    fn new_cloud(loaded: &LoadedScenario, options: &RunOptions) -> Arc<SimCloud> {
        let seed = options.seed.unwrap_or(loaded.scenario.spec.seed);
        let clock = SimClock::new(Timestamp::SIM_EPOCH);
        Arc::new(SimCloud::new(options.sim.clone(), seed, clock))
    }

    fn new(
        loaded: &'a LoadedScenario,
        options: &'a RunOptions,
        on_event: &'a mut dyn FnMut(&TimelineEntry),
        cloud: Arc<SimCloud>,
        provider: Arc<P>,
    ) -> Result<Self, RunError> {
        let spec = &loaded.scenario.spec;
        let seed = options.seed.unwrap_or(spec.seed);
        let start = Timestamp::SIM_EPOCH;
        let clock = cloud.clock().clone();
        let stage::Stage {
            blind,
            outages,
            slow,
            stale_lists,
            marks,
        } = stage::set(&cloud, loaded, start);
        let home = match &options.state_dir {
            Some(dir) => StoreHome::Dir(dir.clone()),
            None => StoreHome::Disk(MemoryDisk::new()),
        };
        let store = Arc::new(home.open()?);
        let fired: Fired = Arc::default();
        let engine = build_engine(&provider, &store, &clock, seed, 0, options, start, &fired)?;
        let mut workload: Vec<(usize, &WorkloadStep)> = spec.workload.iter().enumerate().collect();
        workload.sort_by_key(|(i, w)| (w.at, *i));
        let mut restarts: Vec<(Timestamp, Restart)> = options
            .restarts
            .iter()
            .chain(&spec.restarts)
            .map(|d| (start.plus(*d), Restart::Engine))
            .chain(
                options
                    .store_restarts
                    .iter()
                    .map(|d| (start.plus(*d), Restart::Store)),
            )
            .collect();
        for (at, lag) in &options.lagging_restores {
            if matches!(home, StoreHome::Dir(_)) {
                return Err(RunError::LaggingRestoreNeedsMemoryDisk);
            }
            let at = start.plus(*at);
            let image_at = Timestamp(at.0.saturating_sub(lag.as_millis()).max(start.0));
            restarts.push((image_at, Restart::Image(at)));
            restarts.push((at, Restart::Lagging(image_at)));
        }
        restarts.sort();
        let enabled: Vec<Invariant> = spec
            .expect
            .invariants
            .clone()
            .unwrap_or_else(|| Invariant::ALL.to_vec());
        let watches = spec
            .expect
            .conditions
            .iter()
            .map(|c| ConditionWatch::new(c, start))
            .collect();
        let asked = options.converge_after.or(spec.expect.converge_after);
        let (found, converge_not_applicable) = match (asked, options.stop_when_ready) {
            (Some(_), _) => (None, None),
            (None, true) => (None, Some("`up` ends once every cluster is Ready".into())),
            (None, false) => match quiet_from(loaded, options) {
                Ok(at) => (Some(at), None),
                Err(why) => (None, Some(why)),
            },
        };
        let spec_end = start.plus(spec.duration);
        let end = match found {
            Some(at) => spec_end.max(start.plus(at).plus(CONVERGE_BOUND)),
            None => spec_end,
        };
        Ok(Driver {
            loaded,
            options,
            on_event,
            seed,
            start,
            end,
            spec_end,
            converge_implicit: found.is_some(),
            converge_not_applicable,
            clock,
            cloud,
            provider,
            home,
            engine,
            engine_generation: 0,
            fired,
            timeline: Vec::new(),
            events: 0,
            marks,
            workload,
            next_step: 0,
            restarts,
            images: Vec::new(),
            tracks: BTreeMap::new(),
            world: None,
            last_check: None,
            specs: BTreeMap::new(),
            invariants: {
                let mut inv = Invariants::new(&enabled, start, options.call_budget.clone());
                inv.note_faults(start, &spec.faults);
                inv.note_lagging_restores(
                    options
                        .lagging_restores
                        .iter()
                        .map(|(at, lag)| (start.plus(*at), *lag))
                        .collect(),
                );

                inv
            },
            watches,
            mutation_counts: MutationCounts::default(),
            workload_failures: Vec::new(),
            steps: 0,
            converged_at: None,
            converge_after: asked.or(found),
            cluster_millis: 0,
            flight: FlightChecks::new(blind, outages, stale_lists),
            pace: Pace::new(slow),
            truth: crate::truth::Truth::new(fault_windows(loaded, options, start)),
            guest: Default::default(),
            boot: Default::default(),
        })
    }

    fn emit(
        &mut self,
        at: Timestamp,
        source: &str,
        severity: Severity,
        reason: &str,
        message: String,
    ) {
        let e = entry(at, source, severity, reason, message);
        self.record(e);
    }

    async fn run(&mut self) -> Result<(), RunError> {
        for c in &self.loaded.clusters {
            self.engine.apply(c.clone())?;
            self.specs.insert(c.name().to_string(), c.clone());
        }
        let mut last = self.clock.now();
        loop {
            self.steps += 1;
            if self.steps > STEPS_MAX {
                return Err(RunError::TooManySteps);
            }
            self.invariants.at_step(self.steps);
            self.cloud.advance();
            let now = self.clock.now();
            self.cluster_millis +=
                now.since(last).as_millis() * self.engine.clusters().len() as u64;
            last = now;
            self.fire_marks(now);
            self.fire_restarts(now)?;
            self.fire_workload(now)?;
            self.reconcile_due().await?;
            let now = self.clock.now();
            self.track_clusters(now);
            for w in &mut self.watches {
                w.observe(now, &self.engine);
            }
            let ready = self.options.stop_when_ready
                && self.next_step >= self.workload.len()
                && self.engine.clusters().len() > 0
                && self.engine.clusters().all(|(_, c)| c.status.ready);
            let last = ready || now >= self.end;
            if (last || self.check_due(now)) && self.check_step(now) {
                break;
            }
            if last {
                break;
            }
            let candidates = [
                self.engine.next_due(),
                self.cloud.next_transition_at(),
                self.workload
                    .get(self.next_step)
                    .map(|(_, w)| self.start.plus(w.at)),
                self.marks.first().map(|m| m.0),
                self.restarts.first().map(|r| r.0),
                self.converge_after.map(|d| self.start.plus(d)),
                Some(self.spec_end),
                Some(self.end),
            ];
            // Reconciles that came due while others ran (their calls move the clock) run
            // at this instant, before time moves on: due work is never skipped.
            if self
                .engine
                .next_due()
                .is_some_and(|t| t <= self.clock.now())
            {
                continue;
            }
            let next = candidates
                .into_iter()
                .flatten()
                .filter(|t| *t > now)
                .min()
                .unwrap_or(self.end);
            self.clock.advance_to(next);
        }
        Ok(())
    }

    fn fire_marks(&mut self, now: Timestamp) {
        while self.marks.first().is_some_and(|m| m.0 <= now) {
            let (t, severity, reason, what) = self.marks.remove(0);
            self.emit(t, "sim", severity, reason, what);
        }
    }

    fn build(&self, store: &Arc<Store>, generation: u64) -> Result<Engine<P>, EngineError> {
        build_engine(
            &self.provider,
            store,
            &self.clock,
            self.seed,
            generation,
            self.options,
            self.start,
            &self.fired,
        )
    }

    fn fire_workload(&mut self, now: Timestamp) -> Result<(), RunError> {
        while let Some((index, step)) = self.workload.get(self.next_step).copied() {
            if self.start.plus(step.at) > now {
                break;
            }
            self.next_step += 1;
            let name = step.cluster.to_string();
            let outcome = apply_step(&mut self.engine, &mut self.specs, self.loaded, index, step);
            let accepted = outcome.is_ok();
            let (severity, message, failure) =
                judge_step(outcome, step.refused.as_ref().map(|t| t.as_str()));
            if let Some(f) = failure {
                self.workload_failures
                    .push(format!("workload step {index} ({name}): {f}"));
            }
            if accepted && let Some(t) = self.tracks.get_mut(&name) {
                t.generation += 1;
                if step.action == WorkloadAction::Delete {
                    t.deletion_requested = true;
                    t.deletion_asked_at.get_or_insert(now);
                }
            }
            self.emit(
                now,
                "workload",
                severity,
                &format!("{:?}", step.action),
                message,
            );
        }
        Ok(())
    }

    async fn reconcile_due(&mut self) -> Result<(), RunError> {
        for _ in 0..RECONCILES_PER_INSTANT_MAX {
            let result = self.engine.run_due().await;
            // One batch reconciles each cluster at most once; calls move the clock
            // (`api.latency`), so one instant may hold several batches.
            self.check_call_tallies();
            let ran = match result {
                Ok(n) => n,
                Err(EngineError::Crashed(cluster)) => {
                    let now = self.clock.now();
                    self.invariants.note_crash(now);
                    self.drain_events();
                    self.emit(
                        now,
                        "sim",
                        Severity::Warning,
                        "EngineCrashed",
                        format!("the engine crashed between two writes of {cluster}'s plan"),
                    );
                    self.restart_engine(false)?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            self.drain_events();
            if ran == 0 {
                break;
            }
        }
        Ok(())
    }

    /// `callBudget`: the calls the cloud answered for each cluster since the last look.
    fn check_call_tallies(&mut self) {
        let tallies = self.cloud.take_call_tallies();
        if tallies.is_empty() {
            return;
        }
        let tallies = if tallies.keys().any(|k| k.starts_with("uid:")) {
            let names: BTreeMap<&str, &str> = self
                .tracks
                .values()
                .map(|t| (t.uid.as_str(), t.name.as_str()))
                .collect();
            crate::budget::by_name(tallies, |uid| names.get(uid).map(|n| n.to_string()))
        } else {
            tallies
        };
        self.invariants
            .check_call_tallies(self.clock.now(), &tallies);
    }

    fn drain_events(&mut self) {
        for e in self.engine.drain_events() {
            self.record(from_event(e));
        }
    }

    /// Shows `entry` to `on_event`, counts it, and keeps it unless told not to.
    fn record(&mut self, entry: TimelineEntry) {
        (self.on_event)(&entry);
        self.events += 1;
        if !self.options.forget_seen {
            self.timeline.push(entry);
        }
    }

    fn track_clusters(&mut self, now: Timestamp) {
        // Runs at every step over every cluster, so it allocates nothing for a cluster it
        // has seen (a name formatted per cluster per step made `up` of 1,000 clusters
        // cost 2.6 times as much per cluster as `up` of 10) and looks nothing up: the
        // engine's clusters and the tracks are both in name order, and are walked in step
        // (three lookups by name per cluster per step were a fifth of `up`).
        let mut tracks = self.tracks.iter_mut().peekable();
        let mut new = Vec::new();
        for (name, c) in self.engine.clusters() {
            while tracks.next_if(|(n, _)| *n < name).is_some() {}
            match tracks.next_if(|(n, _)| *n == name) {
                Some((_, t)) => follow(t, c, self.specs.get(name), &self.cloud),
                None => {
                    let mut track = ClusterTrack::new(name, &c.memory.uid, &c.spec);
                    follow(&mut track, c, self.specs.get(name), &self.cloud);
                    new.push((name.clone(), track));
                }
            }
        }
        self.tracks.extend(new);
        for t in self.tracks.values_mut() {
            if t.deleted_at.is_none()
                && t.deletion_requested
                && self.engine.cluster(&t.name).is_none()
            {
                t.deleted_at = Some(now);
            }
        }
    }

    fn finish(mut self) -> Run {
        let now = self.clock.now();
        let start = self.start;
        let api_calls = self.cloud.api_calls();
        let api_calls_total: u64 = api_calls.values().flat_map(|m| m.values()).sum();
        // At least a quarter hour per cluster: building a cluster costs a few hundred
        // calls however fast it goes, and a build of a few minutes is no poll rate (with
        // one quarter hour for the whole fleet, `up` of nine clusters or more failed this
        // budget although every cluster was Ready).
        let clusters = self.tracks.len().max(1) as f64;
        let cluster_hours = (self.cluster_millis as f64 / 3_600_000.0).max(0.25 * clusters);
        let per_cluster_hour = api_calls_total as f64 / cluster_hours;
        self.invariants
            .check_calls_per_cluster_hour(now, per_cluster_hour);
        let mut expectations: Vec<ExpectationResult> =
            self.watches.iter().map(|w| w.result(start)).collect();
        expectations.extend(final_expectations(
            &self.loaded.scenario.spec.expect.final_state,
            &self.engine,
            &self.tracks,
            &self.cloud.snapshot(),
            now.since(start).as_secs_f64(),
        ));
        let expect = &self.loaded.scenario.spec.expect;
        let fault_effects: BTreeMap<String, u64> = self
            .cloud
            .fault_effects()
            .into_iter()
            .map(|(k, n)| (k.as_str().to_string(), n))
            .collect();
        expectations.extend(count_expectations(
            expect,
            &self.timeline,
            &self.mutation_counts,
            &fault_effects,
        ));
        for failure in std::mem::take(&mut self.workload_failures) {
            expectations.push(ExpectationResult {
                expectation: "every workload step applies".into(),
                met: false,
                at_seconds: None,
                detail: failure,
            });
        }
        let clusters = self
            .tracks
            .values()
            .map(|t| ClusterReport {
                name: t.name.clone(),
                uid: t.uid.clone(),
                phase: match self.engine.cluster(&t.name) {
                    Some(c) => c.status.phase.as_str().to_string(),
                    None => "Deleted".into(),
                },
                status: self.engine.cluster(&t.name).map(|c| c.status.clone()),
            })
            .collect();
        let why_not = self.not_applicable();
        self.invariants.conclude(now, |i| why_not.get(&i).cloned());
        let passed = self.invariants.all_held() && expectations.iter().all(|e| e.met);
        let convergence_seconds = match (self.converged_at, self.converge_after) {
            (Some(t), Some(after)) => Some(t.since(start.plus(after)).as_secs_f64()),
            _ => None,
        };
        let report = Report {
            scenario: self.loaded.scenario.metadata.name.to_string(),
            seed: self.seed,
            passed,
            virtual_seconds: now.since(start).as_secs_f64(),
            steps: self.steps,
            invariants: self.invariants.verdicts(),
            expectations,
            api_calls,
            api_calls_total,
            api_calls_per_cluster_hour: per_cluster_hour,
            engine: self.engine.stats().clone(),
            fault_effects,
            clusters,
            timeline: std::mem::take(&mut self.timeline),
            events: self.events,
        };
        let engine_faults_fired = self.fired.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Run {
            report,
            cloud: self.cloud,
            engine_faults_fired,
            convergence_seconds,
        }
    }
}

/// From when nothing more is done to the fleet: the end of the last fault, workload
/// step, restart and engine fault; or why that time never comes (a fault without end).
fn quiet_from(loaded: &LoadedScenario, options: &RunOptions) -> Result<Duration, String> {
    let spec = &loaded.scenario.spec;
    let mut at = Duration::ZERO;
    for f in &spec.faults {
        match f.duration {
            Some(d) => at = at.max(Duration::from_millis(f.at.as_millis() + d.as_millis())),
            None => {
                return Err(format!(
                    "fault {} from {} never ends",
                    f.kind.as_str(),
                    f.at
                ));
            }
        }
    }
    let times = spec
        .workload
        .iter()
        .map(|w| w.at)
        .chain(spec.restarts.iter().copied())
        .chain(options.restarts.iter().copied())
        .chain(options.store_restarts.iter().copied())
        .chain(options.lagging_restores.iter().map(|(t, _)| *t))
        .chain(options.engine_faults.iter().map(|p| p.until));
    Ok(times.fold(at, Duration::max))
}

/// When the cloud or the engine may keep flightdeck from seeing what the world shows:
/// the scenario's faults and the engine's injected faults, from and until (`None`:
/// to the end).
fn fault_windows(
    loaded: &LoadedScenario,
    options: &RunOptions,
    start: Timestamp,
) -> Vec<(Timestamp, Option<Timestamp>)> {
    let faults = loaded.scenario.spec.faults.iter().map(|f| {
        let from = start.plus(f.at);
        (from, f.duration.map(|d| from.plus(d)))
    });
    let engine = options
        .engine_faults
        .iter()
        .map(|p| (start, Some(start.plus(p.until))));
    faults.chain(engine).collect()
}

impl<P: Provider + 'static> Driver<'_, P> {
    /// Why each invariant that was never checked does not apply to this run, where it
    /// does not: read from the scenario and the world, never from flightdeck.
    fn not_applicable(&self) -> BTreeMap<Invariant, String> {
        let mut why = BTreeMap::new();
        let specs = || self.specs.values().map(|c| &c.spec);
        if self.tracks.is_empty() {
            for i in Invariant::ALL {
                why.insert(i, "no cluster was taken up".to_string());
            }
        }
        if let Some(w) = &self.converge_not_applicable {
            why.insert(Invariant::Convergence, w.clone());
        }
        if !specs().any(|s| s.bootstrap.kubeadm()) {
            for i in [Invariant::BootstrapValid, Invariant::SingleInit] {
                why.insert(i, "no cluster boots with kubeadm".into());
            }
        }
        if !self.tracks.values().any(|t| t.deletion_requested) {
            why.insert(Invariant::NoLeaks, "no cluster is deleted".into());
        }
        // Checked at each look while a Node outlives its machine (KubeVirt's guest
        // Nodes are the VMs' own and go with them).
        why.insert(
            Invariant::NodesCleaned,
            "no Node outlived its machine while its cluster lived".into(),
        );
        if !specs().any(|s| s.provider.is_kubevirt()) {
            why.insert(
                Invariant::DrainBeforeDelete,
                "no cluster runs on KubeVirt".into(),
            );
        } else if !self
            .cloud
            .snapshot()
            .kube
            .vmi_deletions
            .iter()
            .any(|d| d.cause == crate::invariants::VMI_DELETE)
        {
            // An evacuation is a check of its own, at every look while it lasts.
            why.insert(
                Invariant::DrainBeforeDelete,
                "no VMI was deleted by a client, and none was evacuated".into(),
            );
        }
        let routed = specs().any(|s| {
            s.flight.repairs.routes
                && s.provider
                    .openstack
                    .as_ref()
                    .is_some_and(|o| o.router.is_some())
        });
        if !routed {
            why.insert(
                Invariant::RoutesConsistent,
                "no cluster has routes on a router".into(),
            );
        }
        if !self.tracks.values().any(|t| t.ready_since.is_some()) {
            let never = "the world never showed a cluster ready (convergence and statusTruthful judge that)";
            for i in [
                Invariant::ApiEndpointServing,
                Invariant::RulesRestored,
                Invariant::RoutesConsistent,
            ] {
                why.insert(i, never.into());
            }
        } else if !self.flight.looked_at_ready() {
            // Seed 43006849: a cluster ready only during an API outage, then deleted.
            for i in [Invariant::RulesRestored, Invariant::RoutesConsistent] {
                why.insert(
                    i,
                    "no cluster was ready outside an API outage and before its deletion".into(),
                );
            }
        }
        why.insert(Invariant::StatusTruthful, self.truth.not_checked());
        for i in [
            Invariant::RemediationWithinBudget,
            Invariant::NoRemediationOnBlindObserver,
        ] {
            why.insert(i, "no repair began".into());
        }
        why
    }
}

/// A workload step's outcome against what the scenario wants of it (`refused`: a
/// refusal containing that text): the event's severity and message, and the failure
/// if it is not what was wanted.
fn judge_step(
    outcome: Result<String, String>,
    refused: Option<&str>,
) -> (Severity, String, Option<String>) {
    match (outcome, refused) {
        (Ok(m), None) => (Severity::Normal, m, None),
        (Err(e), None) => (Severity::Warning, format!("failed: {e}"), Some(e)),
        (Err(e), Some(want)) if e.contains(want) => {
            (Severity::Normal, format!("refused, as wanted: {e}"), None)
        }
        (Err(e), Some(want)) => (
            Severity::Warning,
            format!("refused: {e}"),
            Some(format!("refused, but not with {want:?}: {e}")),
        ),
        (Ok(m), Some(want)) => (
            Severity::Warning,
            format!("accepted: {m}"),
            Some(format!(
                "accepted ({m}), but it must be refused with {want:?}"
            )),
        ),
    }
}

/// Labels the calls of cluster `cluster`'s reconcile as made for it, in process and on
/// the wire (`X-Flightdeck-Caller: cluster=NAME`): the simulator then knows, from its own
/// records, which cluster each call and each change was for (`onlyOwned`,
/// `reconcilePace`).
fn label_calls<'a>(
    cluster: &str,
    calls: futures_util::future::LocalBoxFuture<'a, ()>,
) -> futures_util::future::LocalBoxFuture<'a, ()> {
    let cluster = cluster.to_string();
    Box::pin(async move {
        let label = format!("cluster={cluster}");
        flightdeck_http::as_caller(label, flightdeck_sim::caller::for_cluster(&cluster, calls))
            .await
    })
}

#[allow(clippy::too_many_arguments)]
fn build_engine<P: Provider + 'static>(
    cloud: &Arc<P>,
    store: &Arc<Store>,
    clock: &SimClock,
    seed: u64,
    generation: u64,
    options: &RunOptions,
    start: Timestamp,
    fired: &Fired,
) -> Result<Engine<P>, EngineError> {
    let engine = Engine::new(
        cloud.clone(),
        store.clone(),
        Arc::new(clock.clone()),
        Box::new(SeededRng::fork(seed, &format!("engine-{generation}"))),
        options.engine.clone(),
    )?
    .with_call_scope(Arc::new(label_calls));
    let engine = match &options.workload_access {
        Some(book) => engine.with_workload_access(book.clone()),
        None => engine,
    };
    Ok(match &options.engine_faults {
        Some(profile) => engine.with_faults(Box::new(InjectedEngineFaults::new(
            profile.clone(),
            SeededRng::fork(seed, &format!("engine-faults-{generation}")).next_u64(),
            clock.clone(),
            start,
            fired.clone(),
        ))),
        None => engine,
    })
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
