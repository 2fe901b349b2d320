//! Split-brain seeds by the thousand (`flightdeck sim swarm --split-brain`): each seed
//! is one run of `split_brain.rs`, run twice to check that it replays (the mutation
//! logs must match), seeds spread over threads as the swarm's are.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::leases::Unfenced;
use crate::split_brain::{SplitBrainOutcome, run_split_brain};

#[derive(Clone, Debug, Default)]
pub struct SplitBrainOptions {
    pub seeds: u64,
    pub from: u64,
    pub jobs: usize,
    pub unfenced: Unfenced,
    pub check_determinism: bool,
}

/// A seed that failed: the check, what it saw, and how to run it again.
#[derive(Clone, Debug, Serialize)]
pub struct SplitBrainFailure {
    pub seed: u64,
    pub check: String,
    pub message: String,
    pub replay: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SplitBrainReport {
    pub from: u64,
    pub seeds_requested: u64,
    pub seeds_run: u64,
    pub failures: Vec<SplitBrainFailure>,
    /// Reconciles of resumed or moved-off replicas the fence refused, over every seed.
    pub fenced_reconciles: u64,
    /// Seeds whose paused replica held clusters when it was paused.
    pub seeds_with_takeover: u64,
    /// Seconds from a pause until the others held all the paused replica's clusters.
    pub takeover_median_s: Option<f64>,
    pub takeover_worst_s: Option<f64>,
    /// Cloud mutations checked against the claims, over every seed.
    pub mutations_checked: u64,
    pub determinism_checked: bool,
    pub fences_switched_off: Vec<&'static str>,
}

pub fn replay_command(seed: u64, options: &SplitBrainOptions) -> String {
    let mut cmd = format!("flightdeck sim swarm --split-brain --seeds 1 --from {seed}");
    for f in fences_off(options.unfenced) {
        cmd += &format!(" --unsafe-disable {f}");
    }
    cmd
}

fn fences_off(u: Unfenced) -> Vec<&'static str> {
    let mut out = Vec::new();
    if u.own_deadline {
        out.push("lease-deadline");
    }
    if u.claim_revision {
        out.push("claim-revision");
    }
    out
}

/// One seed, and its failure if it had one (a second run that differs is one).
pub async fn run_seed(
    seed: u64,
    options: &SplitBrainOptions,
) -> (Option<SplitBrainOutcome>, Option<SplitBrainFailure>) {
    let fail = |check: &str, message: String| SplitBrainFailure {
        seed,
        check: check.into(),
        message,
        replay: replay_command(seed, options),
    };
    let first = match run_split_brain(seed, options.unfenced).await {
        Ok(o) => o,
        Err(e) => return (None, Some(fail("run", e))),
    };
    let mut failure = first
        .violation
        .clone()
        .map(|(check, message)| fail(&check, message));
    if failure.is_none() && options.check_determinism {
        match run_split_brain(seed, options.unfenced).await {
            Ok(second) if second.log_hash == first.log_hash => {}
            Ok(second) => {
                failure = Some(fail(
                    "determinism",
                    format!(
                        "two runs of the same seed made different mutation logs ({} and {} mutations)",
                        first.mutations, second.mutations
                    ),
                ));
            }
            Err(e) => failure = Some(fail("run", e)),
        }
    }
    (Some(first), failure)
}

/// Runs `options.seeds` seeds from `options.from` on `options.jobs` threads, until
/// `should_stop` says so.
pub fn run_split_brain_swarm(
    options: &SplitBrainOptions,
    should_stop: &(dyn Fn() -> bool + Sync),
    on_seed: &(dyn Fn(u64, Option<&SplitBrainFailure>) + Sync),
) -> SplitBrainReport {
    let next = AtomicU64::new(0);
    let report = Mutex::new(SplitBrainReport {
        from: options.from,
        seeds_requested: options.seeds,
        determinism_checked: options.check_determinism,
        fences_switched_off: fences_off(options.unfenced),
        ..SplitBrainReport::default()
    });
    let takeovers = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.max(1) {
            scope.spawn(|| {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
                    return;
                };
                while !should_stop() {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= options.seeds {
                        break;
                    }
                    let seed = options.from.wrapping_add(i);
                    let (outcome, failure) = runtime.block_on(run_seed(seed, options));
                    on_seed(seed, failure.as_ref());
                    let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
                    r.seeds_run += 1;
                    if let Some(o) = &outcome {
                        r.fenced_reconciles += o.fenced as u64;
                        r.mutations_checked += o.mutations as u64;
                        if let Some(t) = o.takeover_s.filter(|_| !o.held_at_pause.is_empty()) {
                            r.seeds_with_takeover += 1;
                            takeovers.lock().unwrap_or_else(|e| e.into_inner()).push(t);
                        }
                    }
                    r.failures.extend(failure);
                }
            });
        }
    });
    let mut r = report.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut t = takeovers.into_inner().unwrap_or_else(|e| e.into_inner());
    t.sort_by(f64::total_cmp);
    r.takeover_median_s = t.get(t.len() / 2).copied();
    r.takeover_worst_s = t.last().copied();
    r.failures.sort_by_key(|f| f.seed);
    r
}
