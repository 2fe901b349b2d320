//! `flightdeck sim scenarios` and `flightdeck sim run`.

use std::process::ExitCode;

use flightdeck_scenario::{RunOptions, builtin, load_scenario, run as run_scenario};

use crate::output::{progress_line, status_table};
use crate::{Output, SimRunArgs};

pub fn list() -> anyhow::Result<ExitCode> {
    for name in builtin::scenario_names() {
        let description = load_scenario(name)
            .map(|s| s.scenario.spec.description.clone())
            .unwrap_or_else(|e| format!("(cannot be loaded: {e})"));
        println!("{name:<34} {description}");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn run(args: SimRunArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_scenario(&args.scenario)?;
    let options = RunOptions {
        seed: args.seed,
        ..RunOptions::default()
    };
    let text = args.output == Output::Text && !args.quiet;
    let mut on_event = |e: &flightdeck_scenario::report::TimelineEntry| {
        if text {
            println!("{}", progress_line(e));
        }
    };
    let report = if args.wire {
        flightdeck_scenario::run_wire(&loaded, &options, &mut on_event)
            .await?
            .report
    } else {
        run_scenario(&loaded, &options, &mut on_event).await?.report
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Text => {
            println!();
            print!("{}", status_table(&report.clusters));
            println!();
            println!(
                "scenario {} (seed {}): {:.0}s of virtual time, {} steps, {} cloud API calls",
                report.scenario,
                report.seed,
                report.virtual_seconds,
                report.steps,
                report.api_calls_total
            );
            for v in &report.invariants {
                match (&v.first_violation, &v.not_applicable) {
                    (None, Some(why)) => {
                        println!("  invariant {:<20} not applicable: {why}", v.name)
                    }
                    (None, None) => {
                        println!("  invariant {:<20} held ({} checks)", v.name, v.checks)
                    }
                    (Some(f), _) => println!(
                        "  invariant {:<20} VIOLATED {} time(s), first at {:.1}s: {}",
                        v.name, v.violations, f.at_seconds, f.message
                    ),
                }
            }
            for e in &report.expectations {
                println!(
                    "  expect {:<55} {}{}",
                    e.expectation,
                    if e.met { "met" } else { "NOT MET" },
                    match e.at_seconds {
                        Some(t) => format!(" at {t:.1}s ({})", e.detail),
                        None => format!(" ({})", e.detail),
                    }
                );
            }
            println!("{}", if report.passed { "PASSED" } else { "FAILED" });
        }
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
