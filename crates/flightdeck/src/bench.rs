//! `flightdeck bench`: the performance figures of issue 16, measured on this machine and
//! written as a report (`bench.json` and `bench.md`): how `up` scales with the number of
//! clusters, how many cloud calls one build and one quiet hour cost, how fast the swarm
//! runs, and what the wire costs over calling the simulator in process. It exits 1 when
//! a goal it judges is missed or a run it makes fails, naming each such goal, once the
//! report is written.
//!
//! Wall-clock time is read here, at the binary's edge; nothing simulated depends on it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use flightdeck_scenario::report::Report;
use flightdeck_scenario::{LoadedScenario, RunOptions, builtin, load_scenario};
use flightdeck_spec::{Cluster, Document, load_documents};

use crate::bench_goals::{self, Bounds, GoalOverride};
use crate::bench_report::{self as render, BenchReport, BuildCalls, Steady, Swarm, Wire};
use crate::bench_scale;

/// The example every figure but the scale is measured on: three control-plane
/// machines and two workers on OpenStack.
pub(crate) const EXAMPLE: &str = include_str!("../../../examples/openstack.yaml");

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Fleet sizes for the scale figure: N clusters of 3 control-plane machines and 7
    /// workers each, built by `flightdeck up` in a child process.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    pub sizes: Vec<usize>,
    /// Wall-clock time one size may take before it is stopped and reported unfinished.
    #[arg(long, default_value = "10m", value_parser = crate::parse_duration)]
    pub size_budget: flightdeck_spec::Duration,
    /// Swarm seeds to time on one core (each run twice, the determinism check; 0 skips
    /// the figure).
    #[arg(long, default_value_t = 200)]
    pub swarm_seeds: u64,
    /// How many built-in scenarios to time in process and on the wire (all by default;
    /// 0 skips the figure).
    #[arg(long)]
    pub wire_scenarios: Option<usize>,
    /// Where to write bench.json and bench.md.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Judge a goal against another bound, e.g. `--goal build-calls=1.2` (repeatable):
    /// up-1000, linear, peak-rss, build-calls, quiet-hour-writes, swarm, wire. The
    /// report shows each goal's bound.
    #[arg(long = "goal", value_name = "NAME=VALUE", value_parser = bench_goals::parse_goal)]
    pub goals: Vec<GoalOverride>,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if args.sizes.is_empty() || args.sizes.contains(&0) {
        anyhow::bail!("--sizes: give one or more fleet sizes of at least 1 cluster");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create --out {}", args.out.display()))?;
    let example = example()?;
    eprintln!("bench: scale of `up` over {:?} cluster(s)", args.sizes);
    let scale = bench_scale::scale(&args.sizes, args.size_budget.to_std(), &args.out)?;
    let bare = bench_scale::without_workload(&scale, args.size_budget.to_std(), &args.out)?;
    eprintln!("bench: cloud calls to build one 3+2 cluster's infrastructure (bootstrap: none)");
    let mut infrastructure = example.clone();
    infrastructure.spec.bootstrap.provider = flightdeck_spec::bootstrap::BootstrapProvider::None;
    let build = build_calls(&infrastructure).await?;
    eprintln!("bench: calls to build it with kubeadm (the default)");
    let build_kubeadm = build_calls(&example).await?;
    eprintln!("bench: cloud calls of a Ready cluster left alone for an hour");
    let steady = steady(&example).await?;
    let swarm = (args.swarm_seeds > 0).then(|| {
        eprintln!("bench: swarm of {} seed(s) on one core", args.swarm_seeds);
        swarm(args.swarm_seeds)
    });
    let wire = match args.wire_scenarios {
        Some(0) => None,
        n => {
            eprintln!("bench: built-in scenarios in process and on the wire");
            Some(wire(n).await?)
        }
    };
    let bounds = Bounds::with(&args.goals);
    let mut report = BenchReport::new(scale, build, build_kubeadm, steady, swarm, wire, &bounds);
    report.without_workload = bare;
    let md = write(&report, &args.out)?;
    for g in &report.goals {
        if let bench_goals::Verdict::NotJudged(why) = &g.verdict {
            eprintln!("bench: not judged: {} [{}]: {why}", g.what, g.name);
        }
    }
    let failures = report.failures();
    if failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "bench: FAILED: {} goal(s) missed or failed (report: {}):",
        failures.len(),
        md.display()
    );
    for f in &failures {
        eprintln!("bench:   {f}");
    }
    Ok(ExitCode::from(1))
}

/// Writes bench.json and bench.md into `out` and prints the Markdown; the path of
/// bench.md.
fn write(report: &BenchReport, out: &std::path::Path) -> anyhow::Result<PathBuf> {
    let json = out.join("bench.json");
    let md = out.join("bench.md");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let text = render::markdown(report);
    std::fs::write(&md, &text).with_context(|| format!("cannot write {}", md.display()))?;
    print!("{text}");
    eprintln!(
        "bench: report written to {} and {}",
        json.display(),
        md.display()
    );
    Ok(md)
}

fn example() -> anyhow::Result<Cluster> {
    match load_documents(EXAMPLE, "examples/openstack.yaml")?.pop() {
        Some(Document::Cluster(c)) => Ok(*c),
        _ => anyhow::bail!("examples/openstack.yaml holds no cluster"),
    }
}

async fn up(cluster: &Cluster, duration_ms: u64, stop_when_ready: bool) -> anyhow::Result<Report> {
    let loaded = LoadedScenario::of_clusters(
        "bench".into(),
        vec![cluster.clone()],
        1,
        flightdeck_spec::Duration::from_millis(duration_ms),
    );
    let options = RunOptions {
        seed: Some(1),
        stop_when_ready,
        ..RunOptions::default()
    };
    let result = flightdeck_scenario::run(&loaded, &options, &mut |_| {}).await?;
    Ok(result.report)
}

/// Whether a call changes the cloud (anything but a read, a watch or a token).
fn is_mutation(op: &str) -> bool {
    !(op.starts_with("GET ") || op.starts_with("WATCH ") || op == "POST /v3/auth/tokens")
}

/// The kinds of object a cluster of this spec needs to look at, as the calls that list
/// them are named.
fn kinds_used(c: &Cluster) -> Vec<&'static str> {
    let mut kinds = vec!["nova GET /servers/detail", "kubernetes GET nodes"];
    if c.spec.network.security_group.is_some() {
        kinds.push("neutron GET /v2.0/security-groups");
    }
    // On OpenStack the API is always served through an Octavia load balancer.
    kinds.extend([
        "octavia GET /v2/lbaas/loadbalancers",
        "octavia GET /v2/lbaas/listeners",
        "octavia GET /v2/lbaas/pools",
        "octavia GET /v2/lbaas/pools/{pool_id}/members",
    ]);
    if c.spec.api_load_balancer.health_monitor.is_some() {
        kinds.push("octavia GET /v2/lbaas/healthmonitors");
    }
    if c.spec
        .provider
        .openstack
        .as_ref()
        .is_some_and(|o| o.router.is_some())
    {
        kinds.push("neutron GET /v2.0/routers");
    }
    kinds
}

fn flat(r: &Report) -> BTreeMap<String, u64> {
    r.api_calls
        .iter()
        .flat_map(|(s, ops)| ops.iter().map(move |(op, n)| (format!("{s} {op}"), *n)))
        .collect()
}

async fn build_calls(example: &Cluster) -> anyhow::Result<BuildCalls> {
    let r = up(example, 3_600_000, true).await?;
    let calls = flat(&r);
    let mutations: u64 = calls
        .iter()
        .filter(|(k, _)| is_mutation(k.split_once(' ').map_or("", |x| x.1)))
        .map(|(_, n)| n)
        .sum();
    let kinds = kinds_used(example);
    // One token, one list of each kind the spec uses before acting, every mutation, and
    // one more list of each kind to see each phase's result: with kubeadm the joins wait
    // for the init machine's API to answer (two phases), otherwise one.
    let phases = if example.spec.bootstrap.kubeadm() {
        2
    } else {
        1
    };
    let minimum = 1 + mutations + (1 + phases) * kinds.len() as u64;
    Ok(BuildCalls {
        total: r.api_calls_total,
        mutations,
        reads: r.api_calls_total - mutations,
        reconciles: r.engine.reconciles,
        minimum,
        kinds_used: kinds.len(),
        by_call: calls,
        broken: broken(&r),
    })
}

/// The invariants a run broke and the expectations it did not meet, by name; none when
/// it passed.
fn broken(r: &Report) -> Vec<String> {
    let invariants = r
        .invariants
        .iter()
        .filter(|v| !v.held)
        .map(|v| format!("invariant {}", v.name));
    let expectations = r
        .expectations
        .iter()
        .filter(|e| !e.met)
        .map(|e| format!("expectation {} ({})", e.expectation, e.detail));
    let mut broken: Vec<String> = invariants.chain(expectations).collect();
    if !r.passed && broken.is_empty() {
        broken.push("the run did not pass".into());
    }
    broken
}

async fn steady(example: &Cluster) -> anyhow::Result<Steady> {
    let ready = up(example, 3_600_000, true).await?;
    let built = (ready.virtual_seconds * 1000.0).ceil() as u64;
    let hour = up(example, built + 3_600_000, false).await?;
    let before = flat(&ready);
    let mut by_call = flat(&hour);
    for (k, n) in &mut by_call {
        *n = n.saturating_sub(before.get(k).copied().unwrap_or(0));
    }
    by_call.retain(|_, n| *n > 0);
    let used = kinds_used(example);
    let unused_kinds_listed = by_call
        .keys()
        .filter(|k| k.contains(" GET ") && !used.contains(&k.as_str()))
        .cloned()
        .collect();
    let node_lists = by_call.get("kubernetes GET nodes").copied().unwrap_or(0);
    let node_watches = by_call.get("kubernetes WATCH nodes").copied().unwrap_or(0);
    // A watch starts afresh, with a list, once per lifetime.
    let watch_starts = 3_600_000_u64.div_ceil(flightdeck_workload::watch::LIFETIME_MAX.as_millis());
    Ok(Steady {
        calls_per_hour: by_call.values().sum(),
        mutations_per_hour: by_call
            .iter()
            .filter(|(k, _)| is_mutation(k.split_once(' ').map_or("", |x| x.1)))
            .map(|(_, n)| n)
            .sum(),
        store_commits_per_hour: hour
            .engine
            .store_commits
            .saturating_sub(ready.engine.store_commits),
        reconciles_per_hour: hour
            .engine
            .reconciles
            .saturating_sub(ready.engine.reconciles),
        node_lists_per_hour: node_lists,
        node_watch_requests_per_hour: node_watches,
        nodes_watched: node_watches > 0 && node_lists <= watch_starts,
        unused_kinds_listed,
        by_call,
        broken: broken(&hour),
    })
}

fn swarm(seeds: u64) -> Swarm {
    use flightdeck_scenario::swarm::{SwarmOptions, run_swarm};
    let options = SwarmOptions {
        seeds,
        from: 1,
        jobs: 1,
        disabled: Vec::new(),
        check_determinism: true,
        // As `sim swarm` runs by default.
        lagging_store: true,
    };
    let started = Instant::now();
    let cpu_before = process_cpu_seconds();
    let report = run_swarm(&options, &|| false, &|_| {});
    let wall = started.elapsed().as_secs_f64();
    // The swarm runs on one thread while the rest of the process waits for it.
    let cpu = match (cpu_before, process_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => wall,
    };
    Swarm {
        seeds: report.seeds_run,
        failures: report
            .failures
            .iter()
            .map(|f| {
                format!(
                    "seed {}: {}: {} ({})",
                    f.seed, f.invariant, f.message, f.replay
                )
            })
            .collect(),
        wall_seconds: wall,
        cpu_seconds: cpu,
        seeds_per_second_per_core: report.seeds_run as f64 / cpu.max(1e-9),
    }
}

/// This process's CPU time (user and system, every thread), from `/proc/self/stat`;
/// `None` where there is no such file.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // utime and stime are the 14th and 15th fields of the line, in clock ticks.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // Linux reports /proc times in USER_HZ, 100 a second on every architecture it
    // exposes to user space in practice.
    Some((utime + stime) as f64 / 100.0)
}

async fn wire(limit: Option<usize>) -> anyhow::Result<Wire> {
    let all = builtin::scenario_names();
    let names: Vec<&str> = all
        .iter()
        .copied()
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    let mut in_process = 0.0;
    let mut on_wire = 0.0;
    let mut worst = (String::new(), 0.0_f64);
    let mut failed = Vec::new();
    for name in &names {
        let loaded = load_scenario(name)?;
        let options = RunOptions::default();
        let t = Instant::now();
        let a_run = flightdeck_scenario::run(&loaded, &options, &mut |_| {}).await;
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let b_run = flightdeck_scenario::run_wire(&loaded, &options, &mut |_| {}).await;
        let b = t.elapsed().as_secs_f64();
        for (how, run) in [("in process", a_run), ("on the wire", b_run)] {
            match run {
                Ok(run) if run.report.passed => {}
                Ok(run) => failed.push(format!("{name} {how}: {}", broken(&run.report).join(", "))),
                Err(e) => failed.push(format!("{name} {how}: {e:#}")),
            }
        }
        in_process += a;
        on_wire += b;
        let ratio = b / a.max(1e-9);
        if ratio > worst.1 {
            worst = (name.to_string(), ratio);
        }
    }
    Ok(Wire {
        scenarios: names.len(),
        scenarios_built_in: all.len(),
        failed,
        in_process_seconds: in_process,
        wire_seconds: on_wire,
        ratio: on_wire / f64::max(in_process, 1e-9),
        worst_scenario: worst.0,
        worst_ratio: worst.1,
    })
}
