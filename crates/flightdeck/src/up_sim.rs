//! `flightdeck up` on the embedded default, the built-in simulated cloud (the `sim`
//! feature): the clusters of a file driven to Ready in virtual time, with the invariants
//! checked on the way.

use std::process::ExitCode;

use anyhow::{Context, bail};
use flightdeck_scenario::{LoadedScenario, RunOptions, run as run_scenario};
use flightdeck_spec::{Document, load_file};
use serde::Serialize;

use crate::output::{progress_line, status_table};
use crate::{Output, UpArgs};

#[derive(Serialize)]
struct UpReport<'a> {
    ready: bool,
    virtual_seconds: f64,
    clusters: &'a [flightdeck_scenario::report::ClusterReport],
    api_calls_total: u64,
    api_calls: &'a std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    events: usize,
}

pub async fn run_up(args: &UpArgs) -> anyhow::Result<(bool, flightdeck_scenario::Report)> {
    let docs = load_file(&args.file)?;
    if let Some(dir) = &args.state_dir {
        // The simulated cloud lives only as long as one `up`; memory from an earlier run
        // would describe servers and load balancers that no longer exist.
        let store = flightdeck_store::Store::open(dir)?;
        let known = store.keys("spec")?;
        if !known.is_empty() {
            bail!(
                "state directory {} already holds cluster(s) {} from an earlier run, whose \
                 simulated cloud is gone; use a new --state-dir (the old one keeps that run's \
                 events) or remove it",
                dir.display(),
                known.join(", ")
            );
        }
    }
    let mut clusters = Vec::new();
    for d in docs {
        match d {
            Document::Cluster(c) => {
                if clusters
                    .iter()
                    .any(|x: &flightdeck_spec::Cluster| x.name() == c.name())
                {
                    bail!(
                        "{}: cluster {} is defined twice",
                        args.file.display(),
                        c.name()
                    );
                }
                clusters.push(*c);
            }
            Document::Scenario(_) => bail!(
                "{}: holds a Scenario; `up` takes clusters (run scenarios with `flightdeck sim run`)",
                args.file.display()
            ),
        }
    }
    let loaded = LoadedScenario::of_clusters(
        args.file.display().to_string(),
        clusters,
        args.seed,
        args.timeout,
    );
    let options = RunOptions {
        seed: Some(args.seed),
        state_dir: args.state_dir.clone(),
        stop_when_ready: true,
        // A fleet of many clusters takes many steps over a large world: the invariants
        // are checked once per virtual second, and at the end.
        check_every: Some(flightdeck_spec::Duration::from_secs(1)),
        // Only the number of events is reported, and nothing reads the mutation log
        // after the run.
        forget_seen: true,
        ..RunOptions::default()
    };
    let mut options = options;
    if let Some(n) = args.concurrency {
        options.engine.concurrency_max = usize::from(n);
    }
    options.sim.guest_workload = !args.no_workload;
    let quiet = args.quiet;
    let mut on_event = |e: &flightdeck_scenario::report::TimelineEntry| {
        if !quiet {
            eprintln!("{}", progress_line(e));
        }
    };
    let result = run_scenario(&loaded, &options, &mut on_event)
        .await
        .context("the run failed")?;
    let report = result.report;
    let ready = !report.clusters.is_empty()
        && report
            .clusters
            .iter()
            .all(|c| c.status.as_ref().is_some_and(|s| s.ready));
    Ok((ready && report.invariants.iter().all(|v| v.held), report))
}

pub async fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    if !args.quiet {
        eprintln!(
            "flightdeck up: {} on the built-in simulated OpenStack (virtual time, seed {})",
            args.file.display(),
            args.seed
        );
    }
    let (ok, report) = run_up(&args).await?;
    match args.output {
        Output::Json => {
            let out = UpReport {
                ready: ok,
                virtual_seconds: report.virtual_seconds,
                clusters: &report.clusters,
                api_calls_total: report.api_calls_total,
                api_calls: &report.api_calls,
                events: report.events,
            };
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Output::Text => {
            println!();
            print!("{}", status_table(&report.clusters));
            println!();
            println!(
                "{} after {:.0}s of virtual time, {} cloud API calls, {} reconciles.",
                if ok { "Ready" } else { "NOT ready" },
                report.virtual_seconds,
                report.api_calls_total,
                report.engine.reconciles
            );
        }
    }
    for v in report.invariants.iter().filter(|v| !v.held) {
        if let Some(first) = &v.first_violation {
            eprintln!(
                "invariant {} violated at {:.1}s: {}",
                v.name, first.at_seconds, first.message
            );
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
