//! The swarm: randomized fault simulation. A seed expands, deterministically, into a
//! fleet, a fault profile, a workload and engine perturbations; the run has a safety
//! phase (faults active, every invariant checked after every step) and a liveness phase
//! (faults stopped, the fleet must converge within a bound set by its size). Every seed
//! runs twice and its two timelines must hash the same.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use flightdeck_cloud::{Rng, SeededRng};
use flightdeck_plan::MemberGate;
use flightdeck_spec::cluster::ApiVersion;
use flightdeck_spec::scenario::{
    Expectations, FaultKind, ScenarioMetadata, ScenarioSpec, WorkloadAction, WorkloadStep,
};
use flightdeck_spec::{Cluster, Document, Duration, Invariant, Scenario, Text, load_documents};
use serde::Serialize;

use crate::dispatch::run_swarm_case as run;
use crate::engine_faults::EngineFaultProfile;
use crate::load::LoadedScenario;
use crate::report::{Report, TimelineEntry};
use crate::runner::RunOptions;
use crate::swarm_faults::cloud_faults;
pub use crate::swarm_fleet::SwarmCloud;
use crate::swarm_fleet::{cluster_yaml, pick};

/// The most clusters one seed's fleet holds.
pub const FLEET_MAX: u64 = 5;
/// Timeline entries shown before a violation.
pub const TRACE_LINES: usize = 20;

pub use crate::unsafe_switch::{FENCES, Unsafe};

#[derive(Clone, Debug, Default)]
pub struct SwarmOptions {
    pub seeds: u64,
    pub from: u64,
    pub jobs: usize,
    pub disabled: Vec<Unsafe>,
    /// Run every seed twice and compare the timelines (on by default in the CLI).
    pub check_determinism: bool,
    /// Also restore the store behind the cloud now and then (`store.restoredLagging`; on
    /// in the CLI unless `--no-lagging-store`).
    pub lagging_store: bool,
}

/// One seed, expanded.
#[derive(Clone, Debug)]
pub struct SwarmCase {
    pub cloud: SwarmCloud,
    pub loaded: LoadedScenario,
    pub options: RunOptions,
}

#[derive(Clone, Debug, Serialize)]
pub struct SeedFailure {
    pub seed: u64,
    pub invariant: String,
    pub step: Option<u64>,
    pub at_seconds: Option<f64>,
    pub message: String,
    /// The timeline just before the violation, oldest first.
    pub trace: Vec<String>,
    /// The one command that replays exactly this seed.
    pub replay: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct SeedOutcome {
    pub seed: u64,
    /// The cloud its fleet lives on (`None` when the seed could not be expanded).
    pub cloud: Option<SwarmCloud>,
    pub clusters: usize,
    pub failure: Option<SeedFailure>,
    pub fault_kinds: BTreeSet<String>,
    pub api_calls: u64,
    pub cluster_hours: f64,
    pub convergence_seconds: Option<f64>,
    pub steps: u64,
    pub timeline_hash: u64,
    #[serde(skip)]
    pub timeline: Vec<TimelineEntry>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SlowestConvergence {
    pub seed: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SwarmReport {
    pub from: u64,
    pub seeds_requested: u64,
    pub seeds_run: u64,
    pub failures: Vec<SeedFailure>,
    pub failures_by_invariant: BTreeMap<String, u64>,
    /// How many seeds drew a fleet on each cloud.
    pub clouds: BTreeMap<SwarmCloud, u64>,
    pub fault_kinds_exercised: BTreeSet<String>,
    pub api_calls_per_cluster_hour: f64,
    pub slowest_convergence: Option<SlowestConvergence>,
    pub determinism_checked: bool,
    pub disabled_safety: Vec<String>,
}

fn minutes(rng: &mut SeededRng, lo: u64, hi: u64) -> Duration {
    Duration::from_secs(rng.between(lo * 60, hi * 60))
}

const VERSIONS: [&str; 3] = ["v1.30.2", "v1.31.0", "v1.32.1"];

/// When the faults stop, the operator resumes every cluster that is not deleted: any
/// fault that kills machines (boot failures, errored servers, an endless boot failure
/// above all) may have tripped a churn breaker, which waits for a person by design.
fn resumes(
    clusters: &[(Cluster, u64)],
    workload: &[WorkloadStep],
    safety: Duration,
) -> Vec<WorkloadStep> {
    clusters
        .iter()
        .map(|(c, _)| &c.metadata.name)
        .filter(|name| {
            !workload
                .iter()
                .any(|w| &w.cluster == *name && w.action == WorkloadAction::Delete)
        })
        .map(|name| bare_step(safety, WorkloadAction::Resume, name))
        .collect()
}

/// A workload step with nothing but its time, action and cluster.
fn bare_step(
    at: Duration,
    action: WorkloadAction,
    cluster: &flightdeck_spec::Name,
) -> WorkloadStep {
    WorkloadStep {
        at,
        action,
        cluster: cluster.clone(),
        file: None,
        pool: None,
        replicas: None,
        version: None,
        machine: None,
        refused: None,
    }
}

/// Expands `seed` into its fleet, faults, workload and engine perturbations.
pub fn case(seed: u64, options: &SwarmOptions) -> Result<SwarmCase, String> {
    let mut rng = SeededRng::fork(seed, "swarm-case");
    let cloud = SwarmCloud::draw(&mut rng);
    let kubeadm = crate::swarm_faults::kubeadm_fleet(seed);
    let fleet = 1 + [0, 0, 0, 1, 1, 1, 2, 2, 3, 4][rng.below(10) as usize];
    let safety = minutes(&mut rng, 30, 50);
    let mut clusters = Vec::new();
    let mut workload = Vec::new();
    for i in 1..=fleet {
        let name = format!("c{i}");
        let pools = rng.below(3);
        let mut yaml = cluster_yaml(&mut rng, cloud, &name, i, pools);
        // Both bootstraps by name: kubeadm is the default, and a fleet that boots its
        // own data (`none`) stays drawn.
        match kubeadm {
            // Under `flight:`, the last mapping of the spec `cluster_yaml` writes.
            Some(startup) => {
                let _ = write!(
                    yaml,
                    "    nodeStartupTimeout: {startup}\n  bootstrap: {{provider: kubeadm}}\n"
                );
            }
            None => yaml.push_str("  bootstrap: {provider: none}\n"),
        }
        let cluster = match load_documents(&yaml, &format!("swarm seed {seed} cluster {name}"))
            .map_err(|e| e.to_string())?
            .pop()
        {
            Some(Document::Cluster(c)) => *c,
            _ => {
                return Err(format!(
                    "seed {seed}: generated cluster {name} is not a cluster"
                ));
            }
        };
        clusters.push((cluster, pools));
    }
    let mut faults = cloud_faults(&mut rng, cloud, safety, &clusters, kubeadm.is_some());
    faults.extend(crate::swarm_faults::foreign_lists(seed, cloud, safety));
    faults.extend(crate::swarm_faults::kubeadm_faults(
        seed,
        kubeadm.is_some(),
        safety,
        &clusters,
    ));
    for (cluster, pools) in &clusters {
        // A cluster whose members a fault takes offline keeps at least three control-plane
        // machines: a fault that blacks out every member is an outage no controller can
        // prevent, not a finding.
        // So does one whose control-plane machines a fault takes away.
        let keep_three = faults.iter().any(|f| {
            let takes_members = f.kind == FaultKind::MemberOffline
                || f.pool.as_ref().is_some_and(|p| p.as_str() == "cp");
            takes_members && f.cluster.as_ref() == Some(&cluster.metadata.name)
        }) || cloud == SwarmCloud::KubeVirt;
        workload.extend(cluster_workload(
            &mut rng, cloud, cluster, *pools, safety, keep_three,
        ));
    }
    workload.extend(resumes(&clusters, &workload, safety));
    workload.sort_by_key(|w: &WorkloadStep| w.at);
    let clusters: Vec<Cluster> = clusters.into_iter().map(|(c, _)| c).collect();

    let engine_faults = engine_faults(&mut rng, safety);
    let store_restarts = (0..rng.below(3))
        .map(|_| Duration::from_secs(rng.between(60, safety.as_millis() / 1000)))
        .collect();
    let restarts = (0..rng.below(2))
        .map(|_| Duration::from_secs(rng.between(60, safety.as_millis() / 1000)))
        .collect();
    // A store that comes back behind the cloud: restored from a backup or a replica
    // that lost its last commits, 20 s to 10 minutes behind.
    let lagging_restores: Vec<(Duration, Duration)> = (0..rng.below(2))
        .map(|_| {
            let at = Duration::from_secs(rng.between(120, safety.as_millis() / 1000));
            (at, Duration::from_secs(rng.between(20, 600)))
        })
        .filter(|_| options.lagging_store)
        .collect();
    // Liveness bound: time to build or roll the largest cluster, once per cluster. A
    // kubeadm fleet's nodeStartupTimeout past the default 10 minutes adds what it is
    // past: a machine that never registered, made just before the faults stopped, is
    // judged only that late (seed 60011355: made at 31:09 under `net.noRegistration`,
    // with a 40-minute timeout, it could not be replaced before the 35-minute bound).
    let late_judged = kubeadm.map_or(0, |t| t.as_millis().saturating_sub(10 * 60 * 1000));
    let bound = Duration::from_millis((25 + 5 * fleet) * 60 * 1000 + late_judged);
    let mut engine = flightdeck_engine::EngineConfig::default();
    let mut off = Vec::new();
    for d in &options.disabled {
        match d {
            Unsafe::MemberGate => engine.plan.member_gate = MemberGate::LoadBalancerOnly,
            Unsafe::OwnershipCheck => engine.ownership_check = false,
            Unsafe::ClusterOwnership => engine.cluster_ownership = false,
            Unsafe::Plan(m) => off.push(*m),
            // A fleet of one engine has no replicas to fence: the CLI refuses these
            // without --split-brain.
            Unsafe::LeaseDeadline | Unsafe::ClaimRevision => {}
        }
    }
    engine.plan.disabled = flightdeck_plan::Disabled::of(off);
    let scenario = Scenario {
        api_version: ApiVersion,
        kind: "Scenario".into(),
        metadata: ScenarioMetadata {
            name: Text::new(&format!("swarm-{seed}"))?,
        },
        spec: ScenarioSpec {
            description: format!(
                "swarm seed {seed}: {fleet} {} cluster(s){}",
                cloud.as_str(),
                if kubeadm.is_some() {
                    " made by kubeadm"
                } else {
                    ""
                }
            ),
            seed,
            duration: Duration::from_millis(safety.as_millis() + bound.as_millis()),
            clusters: clusters
                .iter()
                .map(|c| flightdeck_spec::scenario::ClusterSource {
                    file: None,
                    inline: Some(Box::new(c.clone())),
                })
                .collect(),
            faults,
            workload,
            restarts: Vec::new(),
            expect: Expectations {
                invariants: Some(Invariant::ALL.to_vec()),
                conditions: Vec::new(),
                final_state: Vec::new(),
                events: Vec::new(),
                mutations: Vec::new(),
                faults: Vec::new(),
                // The run's own `converge_after` (the end of the faults) applies.
                converge_after: None,
            },
        },
    };
    scenario.validate().map_err(|(path, msg)| {
        format!("seed {seed}: generated scenario is invalid at {path}: {msg}")
    })?;
    Ok(SwarmCase {
        cloud,
        loaded: LoadedScenario {
            source: format!("swarm seed {seed}"),
            scenario,
            clusters,
            applies: Vec::new(),
        },
        options: RunOptions {
            seed: Some(seed),
            engine,
            restarts,
            store_restarts,
            lagging_restores,
            engine_faults,
            converge_after: Some(safety),
            ..RunOptions::default()
        },
    })
}

fn cluster_workload(
    rng: &mut SeededRng,
    cloud: SwarmCloud,
    c: &Cluster,
    pools: u64,
    safety: Duration,
    keep_three: bool,
) -> Vec<WorkloadStep> {
    let mut steps = Vec::new();
    let mut version = 0;
    let latest = safety.as_millis() / 1000 - 180;
    for _ in 0..rng.below(4) {
        let at = Duration::from_secs(rng.between(180, latest));
        let step = |action| bare_step(at, action, &c.metadata.name);
        let kind = rng.below(10);
        let s = match kind {
            0..=2 if pools > 0 => WorkloadStep {
                pool: flightdeck_spec::Name::new(&format!("p{}", rng.between(1, pools))).ok(),
                replicas: Some(rng.between(0, 4) as u32),
                ..step(WorkloadAction::Scale)
            },
            3..=5 if version + 1 < VERSIONS.len() => {
                version += 1;
                let v = VERSIONS[version];
                WorkloadStep {
                    version: flightdeck_spec::KubernetesVersion::new(v).ok(),
                    // Elsewhere the version alone rolls the machines.
                    machine: (cloud == SwarmCloud::OpenStack)
                        .then(|| machine("m1.large", &format!("ubuntu-kube-{v}")))
                        .flatten(),
                    ..step(WorkloadAction::Upgrade)
                }
            }
            6 if pools > 0 && cloud != SwarmCloud::OpenNebula => WorkloadStep {
                pool: flightdeck_spec::Name::new(&format!("p{}", rng.between(1, pools))).ok(),
                machine: if cloud == SwarmCloud::OpenStack {
                    machine("m1.xlarge", &format!("worker-{}", rng.between(1, 9)))
                } else {
                    machine(
                        pick::<&str>(rng, &["u1.large", "u1.xlarge"]),
                        "quay.io/containerdisks/ubuntu:22.04",
                    )
                },
                ..step(WorkloadAction::Upgrade)
            },
            7 => WorkloadStep {
                replicas: Some(if keep_three {
                    *pick(rng, &[3u32, 5])
                } else {
                    *pick(rng, &[1u32, 3, 5])
                }),
                ..step(WorkloadAction::Scale)
            },
            8 if at.as_millis() > 600_000 => step(WorkloadAction::Delete),
            _ => continue,
        };
        let deleting = s.action == WorkloadAction::Delete;
        steps.push(s);
        if deleting {
            break;
        }
    }
    // Nothing may follow a delete of the same cluster.
    steps.sort_by_key(|s| s.at);
    if let Some(i) = steps
        .iter()
        .position(|s| s.action == WorkloadAction::Delete)
    {
        steps.truncate(i + 1);
    }
    steps
}

fn machine(flavor: &str, image: &str) -> Option<flightdeck_spec::MachineTemplate> {
    Some(flightdeck_spec::MachineTemplate {
        flavor: Some(Text::new(flavor).ok()?),
        image: Some(Text::new(image).ok()?),
        template: None,
        user_data: None,
    })
}

fn engine_faults(rng: &mut SeededRng, safety: Duration) -> Option<EngineFaultProfile> {
    let on = |p: f64, lo: f64, hi: f64, rng: &mut SeededRng| {
        if rng.chance(p) {
            lo + (hi - lo) * rng.unit()
        } else {
            0.0
        }
    };
    let profile = EngineFaultProfile {
        until: safety,
        crash_rate: on(0.5, 0.005, 0.03, rng),
        requeue_drop_rate: on(0.5, 0.02, 0.2, rng),
        requeue_delay_rate: on(0.5, 0.05, 0.3, rng),
        requeue_delay_max: Duration::from_secs(rng.between(5, 60)),
    };
    let any = profile.crash_rate + profile.requeue_drop_rate + profile.requeue_delay_rate > 0.0;
    any.then_some(profile)
}

/// The command that replays exactly `seed` under `options`.
pub fn replay_command(seed: u64, options: &SwarmOptions) -> String {
    let mut cmd = format!("flightdeck sim swarm --seeds 1 --from {seed} --trace");
    if !options.lagging_store {
        cmd.push_str(" --no-lagging-store");
    }
    for d in &options.disabled {
        cmd.push_str(" --unsafe-disable ");
        cmd.push_str(d.flag());
    }
    cmd
}

/// Runs one seed (twice, when determinism is checked) and judges it.
pub async fn run_seed(seed: u64, options: &SwarmOptions) -> SeedOutcome {
    let failed = |invariant: &str, message: String| SeedOutcome {
        seed,
        cloud: None,
        clusters: 0,
        failure: Some(SeedFailure {
            seed,
            invariant: invariant.into(),
            step: None,
            at_seconds: None,
            message,
            trace: Vec::new(),
            replay: replay_command(seed, options),
        }),
        fault_kinds: BTreeSet::new(),
        api_calls: 0,
        cluster_hours: 0.0,
        convergence_seconds: None,
        steps: 0,
        timeline_hash: 0,
        timeline: Vec::new(),
    };
    let case = match case(seed, options) {
        Ok(c) => c,
        Err(e) => return failed("generator", e),
    };
    let first = match run(&case.loaded, &case.options, &mut |_| {}).await {
        Ok(r) => r,
        Err(e) => return failed("run", e.to_string()),
    };
    // A fault kind counts as exercised only where the simulator records that it struck.
    let mut fault_kinds: BTreeSet<String> = first
        .report
        .fault_effects
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, _)| k.clone())
        .collect();
    fault_kinds.extend(first.engine_faults_fired.keys().map(|k| k.to_string()));
    let report = &first.report;
    let mut failure = first_failure(report, seed, options);
    if failure.is_none() && options.check_determinism {
        match run(&case.loaded, &case.options, &mut |_| {}).await {
            Ok(second)
                if second.report.timeline_hash() == report.timeline_hash()
                    && second.report.steps == report.steps => {}
            Ok(second) => {
                let diverged = report
                    .timeline
                    .iter()
                    .zip(second.report.timeline.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(report.timeline.len().min(second.report.timeline.len()));
                failure = Some(SeedFailure {
                    seed,
                    invariant: "determinism".into(),
                    step: None,
                    at_seconds: report
                        .timeline
                        .get(diverged)
                        .map(|e| e.at_ms as f64 / 1000.0),
                    message: format!(
                        "two runs of the same seed differ from timeline entry {diverged} on (hashes {:016x} and {:016x})",
                        report.timeline_hash(),
                        second.report.timeline_hash()
                    ),
                    trace: trace_before(
                        &report.timeline,
                        report.timeline.get(diverged).map_or(u64::MAX, |e| e.at_ms),
                    ),
                    replay: replay_command(seed, options),
                });
            }
            Err(e) => return failed("run", e.to_string()),
        }
    }
    let cluster_hours = if report.api_calls_per_cluster_hour > 0.0 {
        report.api_calls_total as f64 / report.api_calls_per_cluster_hour
    } else {
        0.0
    };
    SeedOutcome {
        seed,
        cloud: Some(case.cloud),
        clusters: case.loaded.clusters.len(),
        failure,
        fault_kinds,
        api_calls: report.api_calls_total,
        cluster_hours,
        convergence_seconds: first.convergence_seconds,
        steps: report.steps,
        timeline_hash: report.timeline_hash(),
        timeline: first.report.timeline,
    }
}

fn first_failure(report: &Report, seed: u64, options: &SwarmOptions) -> Option<SeedFailure> {
    let v = report
        .invariants
        .iter()
        .filter_map(|v| v.first_violation.as_ref().map(|f| (v.name, f)))
        .min_by(|a, b| a.1.step.cmp(&b.1.step))?;
    let at_ms = (v.1.at_seconds * 1000.0) as u64;
    Some(SeedFailure {
        seed,
        invariant: v.0.to_string(),
        step: Some(v.1.step),
        at_seconds: Some(v.1.at_seconds),
        message: v.1.message.clone(),
        trace: trace_before(&report.timeline, at_ms),
        replay: replay_command(seed, options),
    })
}

fn trace_before(timeline: &[TimelineEntry], at_ms: u64) -> Vec<String> {
    let upto = timeline.iter().take_while(|e| e.at_ms <= at_ms).count();
    timeline[upto.saturating_sub(TRACE_LINES)..upto]
        .iter()
        .map(|e| {
            format!(
                "[{}] {} {}: {}",
                e.at_label(),
                e.source,
                e.reason,
                e.message
            )
        })
        .collect()
}

/// Runs seeds `from .. from + seeds` on `jobs` threads, until done or until
/// `should_stop` says the budget is spent. `on_seed` sees each outcome as it finishes;
/// only the tally is kept, so a long swarm runs in constant memory.
pub fn run_swarm(
    options: &SwarmOptions,
    should_stop: &(dyn Fn() -> bool + Sync),
    on_seed: &(dyn Fn(&SeedOutcome) + Sync),
) -> SwarmReport {
    let next = AtomicU64::new(0);
    let tally: Mutex<SwarmTally> = Mutex::new(SwarmTally::default());
    let jobs = options.jobs.max(1);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
                    return;
                };
                loop {
                    if should_stop() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= options.seeds {
                        break;
                    }
                    let seed = options.from.wrapping_add(i);
                    let outcome = runtime.block_on(run_seed(seed, options));
                    on_seed(&outcome);
                    tally
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .add(&outcome);
                }
            });
        }
    });
    tally
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .report(options)
}

/// What a swarm keeps of its seeds: counts, sums and failures, not timelines.
#[derive(Default)]
pub struct SwarmTally {
    seeds: u64,
    failures: Vec<SeedFailure>,
    failures_by_invariant: BTreeMap<String, u64>,
    clouds: BTreeMap<SwarmCloud, u64>,
    fault_kinds: BTreeSet<String>,
    calls: u64,
    cluster_hours: f64,
    slowest: Option<SlowestConvergence>,
}

/// The most failures a report lists in full; the count by invariant stays complete.
pub const FAILURES_LISTED_MAX: usize = 100;

impl SwarmTally {
    pub fn add(&mut self, o: &SeedOutcome) {
        self.seeds += 1;
        if let Some(f) = &o.failure {
            *self
                .failures_by_invariant
                .entry(f.invariant.clone())
                .or_insert(0) += 1;
            // Seeds finish out of order: keep a margin, then list the lowest seeds.
            if self.failures.len() < 10 * FAILURES_LISTED_MAX {
                self.failures.push(f.clone());
            }
        }
        if let Some(c) = o.cloud {
            *self.clouds.entry(c).or_insert(0) += 1;
        }
        self.fault_kinds.extend(o.fault_kinds.iter().cloned());
        self.calls += o.api_calls;
        self.cluster_hours += o.cluster_hours;
        if let Some(s) = o.convergence_seconds
            && self.slowest.as_ref().is_none_or(|x| s > x.seconds)
        {
            self.slowest = Some(SlowestConvergence {
                seed: o.seed,
                seconds: s,
            });
        }
    }

    pub fn report(mut self, options: &SwarmOptions) -> SwarmReport {
        self.failures.sort_by_key(|f| f.seed);
        let mut failures_by_invariant = BTreeMap::new();
        for f in &self.failures {
            *failures_by_invariant
                .entry(f.invariant.clone())
                .or_insert(0) += 1;
        }
        self.failures.truncate(FAILURES_LISTED_MAX);
        SwarmReport {
            from: options.from,
            seeds_requested: options.seeds,
            seeds_run: self.seeds,
            failures: self.failures,
            failures_by_invariant,
            clouds: self.clouds,
            fault_kinds_exercised: self.fault_kinds,
            api_calls_per_cluster_hour: if self.cluster_hours > 0.0 {
                self.calls as f64 / self.cluster_hours
            } else {
                0.0
            },
            slowest_convergence: self.slowest,
            determinism_checked: options.check_determinism,
            disabled_safety: options
                .disabled
                .iter()
                .map(|d| d.flag().to_string())
                .collect(),
        }
    }
}
