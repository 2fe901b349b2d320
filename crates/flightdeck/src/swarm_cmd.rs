//! `flightdeck sim swarm`: randomized fault simulation over many seeds.

use std::process::ExitCode;
use std::time::Instant;

use flightdeck_scenario::swarm::{SeedOutcome, SwarmOptions, run_swarm};
use serde::Serialize;

use crate::output::progress_line;
use crate::{Output, SwarmArgs};

/// A swarm's report as JSON, with its wall time, rate and verdict.
#[derive(Serialize)]
pub(crate) struct SwarmJson<'a, R> {
    #[serde(flatten)]
    pub(crate) report: &'a R,
    pub(crate) wall_seconds: f64,
    pub(crate) seeds_per_second: f64,
    pub(crate) passed: bool,
}

/// Seconds since `started`, and seeds per second over them.
pub(crate) fn wall_and_rate(started: Instant, seeds_run: u64) -> (f64, f64) {
    let wall = started.elapsed().as_secs_f64();
    let rate = if wall > 0.0 {
        seeds_run as f64 / wall
    } else {
        0.0
    };
    (wall, rate)
}

pub fn run(args: SwarmArgs) -> anyhow::Result<ExitCode> {
    if args.seeds == 0 {
        anyhow::bail!("--seeds must be at least 1");
    }
    let jobs = match args.jobs {
        Some(0) => anyhow::bail!("--jobs must be at least 1"),
        Some(j) => j,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    if args.split_brain {
        return crate::split_brain_cmd::run(args, jobs);
    }
    if let Some(f) = args
        .unsafe_disable
        .iter()
        .find(|f| flightdeck_scenario::swarm::FENCES.contains(f))
    {
        anyhow::bail!(
            "--unsafe-disable {}: a replica's fence; only --split-brain seeds run replicas",
            f.flag()
        );
    }
    let options = SwarmOptions {
        seeds: args.seeds,
        from: args.from,
        jobs,
        disabled: args.unsafe_disable.clone(),
        check_determinism: !args.no_determinism_check,
        lagging_store: !args.no_lagging_store,
    };
    // Wall-clock time is read here, at the binary's edge, only for the budget and the
    // seeds/s figure; nothing simulated depends on it.
    let started = Instant::now();
    let budget = args.budget.map(|b| b.to_std());
    let should_stop = || budget.is_some_and(|b| started.elapsed() >= b);
    let text = args.output == Output::Text;
    let trace = args.trace;
    let on_seed = |o: &SeedOutcome| {
        if trace {
            for e in &o.timeline {
                eprintln!("{}", progress_line(e));
            }
        }
        if let Some(f) = &o.failure {
            eprintln!(
                "seed {} FAILED: {} at step {:?}: {}",
                o.seed, f.invariant, f.step, f.message
            );
        } else if text && trace {
            eprintln!(
                "seed {} passed ({} cluster(s), {} steps)",
                o.seed, o.clusters, o.steps
            );
        }
    };
    let report = run_swarm(&options, &should_stop, &on_seed);
    let (wall, rate) = wall_and_rate(started, report.seeds_run);
    let passed = report.failures.is_empty() && report.seeds_run > 0;
    match args.output {
        Output::Json => {
            let out = SwarmJson {
                report: &report,
                wall_seconds: wall,
                seeds_per_second: rate,
                passed,
            };
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Output::Text => {
            println!(
                "{}",
                headline(
                    "swarm",
                    [report.seeds_run, report.seeds_requested, report.from],
                    report.failures.len(),
                    (wall, rate),
                    report.determinism_checked
                )
            );
            if !report.disabled_safety.is_empty() {
                println!(
                    "  safety switched off: {}",
                    report.disabled_safety.join(", ")
                );
            }
            println!(
                "  clouds: {}",
                report
                    .clouds
                    .iter()
                    .map(|(c, n)| format!("{} {n}", c.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!(
                "  fault kinds exercised ({}): {}",
                report.fault_kinds_exercised.len(),
                report
                    .fault_kinds_exercised
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!(
                "  cloud API calls per cluster-hour: {:.0}",
                report.api_calls_per_cluster_hour
            );
            if let Some(s) = &report.slowest_convergence {
                println!(
                    "  slowest convergence after faults stopped: {:.0}s (seed {})",
                    s.seconds, s.seed
                );
            }
            for (inv, n) in &report.failures_by_invariant {
                println!("  failures of {inv}: {n}");
            }
            for f in &report.failures {
                println!();
                println!(
                    "seed {}: invariant {} violated at step {} ({}s): {}",
                    f.seed,
                    f.invariant,
                    f.step.map_or("?".into(), |s| s.to_string()),
                    f.at_seconds.map_or("?".into(), |s| format!("{s:.1}")),
                    f.message
                );
                for line in &f.trace {
                    println!("    {line}");
                }
                println!("  replay: {}", f.replay);
            }
        }
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A swarm's first line: `[seeds run, requested, first seed]`, failures, `(wall
/// seconds, seeds per second)`.
pub(crate) fn headline(
    what: &str,
    [run, requested, from]: [u64; 3],
    failures: usize,
    (wall, rate): (f64, f64),
    twice: bool,
) -> String {
    format!(
        "{what}: {run} of {requested} seed(s) from {from} in {wall:.1}s ({rate:.1} seeds/s), {failures} failure(s){}",
        if twice { ", every seed run twice" } else { "" }
    )
}
