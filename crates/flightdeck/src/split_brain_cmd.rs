//! `flightdeck sim swarm --split-brain`: replicas on a simulated etcd, one paused past
//! its lease mid-rollout, by the thousand (see `flightdeck_scenario::split_brain`).

use std::process::ExitCode;
use std::time::Instant;

use crate::swarm_cmd::{SwarmJson, wall_and_rate};
use crate::{Output, SwarmArgs};
use flightdeck_scenario::leases::Unfenced;
use flightdeck_scenario::split_brain_swarm::{
    SplitBrainFailure, SplitBrainOptions, SplitBrainReport, run_split_brain_swarm,
};
use flightdeck_scenario::swarm::{FENCES, Unsafe};

/// The fences `--unsafe-disable` switches off; any other mechanism is refused (a
/// split-brain seed has no cloud faults for it to matter).
fn unfenced(flags: &[Unsafe]) -> anyhow::Result<Unfenced> {
    let mut u = Unfenced::default();
    for f in flags {
        match f {
            Unsafe::LeaseDeadline => u.own_deadline = true,
            Unsafe::ClaimRevision => u.claim_revision = true,
            other => anyhow::bail!(
                "--unsafe-disable {}: split-brain seeds switch off only the replicas' fences ({})",
                other.flag(),
                FENCES.map(Unsafe::flag).join(", ")
            ),
        }
    }
    Ok(u)
}

pub fn run(args: SwarmArgs, jobs: usize) -> anyhow::Result<ExitCode> {
    if args.no_lagging_store || args.trace {
        anyhow::bail!(
            "--split-brain runs on its own: --no-lagging-store and --trace are for the fleet swarm"
        );
    }
    let options = SplitBrainOptions {
        seeds: args.seeds,
        from: args.from,
        jobs,
        unfenced: unfenced(&args.unsafe_disable)?,
        check_determinism: !args.no_determinism_check,
    };
    // Wall-clock time is read here, at the binary's edge, only for the budget and the
    // seeds/s figure; nothing simulated depends on it.
    let started = Instant::now();
    let budget = args.budget.map(|b| b.to_std());
    let should_stop = || budget.is_some_and(|b| started.elapsed() >= b);
    let on_seed = |seed: u64, f: Option<&SplitBrainFailure>| {
        if let Some(f) = f {
            eprintln!("seed {seed} FAILED: {}: {}", f.check, f.message);
        }
    };
    let report = run_split_brain_swarm(&options, &should_stop, &on_seed);
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
        Output::Text => print_text(&report, wall, rate),
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_text(r: &SplitBrainReport, wall: f64, rate: f64) {
    println!(
        "{}",
        crate::swarm_cmd::headline(
            "split-brain swarm",
            [r.seeds_run, r.seeds_requested, r.from],
            r.failures.len(),
            (wall, rate),
            r.determinism_checked
        )
    );
    if !r.fences_switched_off.is_empty() {
        println!(
            "  fences switched off: {}",
            r.fences_switched_off.join(", ")
        );
    }
    println!(
        "  {} cloud mutations checked against who held each claim; {} stale reconciles refused by the fence",
        r.mutations_checked, r.fenced_reconciles
    );
    if let (Some(median), Some(worst)) = (r.takeover_median_s, r.takeover_worst_s) {
        println!(
            "  a paused replica's clusters taken over in {median:.0}s median, {worst:.0}s worst ({} seeds; lease TTLs 6–30s)",
            r.seeds_with_takeover
        );
    }
    for f in &r.failures {
        println!();
        println!("seed {}: {} violated: {}", f.seed, f.check, f.message);
        println!("  replay: {}", f.replay);
    }
}
