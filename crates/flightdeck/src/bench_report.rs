//! The report of `flightdeck bench`: its figures, each goal with its verdict
//! (`bench_goals`), and the Markdown rendering.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::bench_goals::{self, Bounds, Goal, Verdict};

#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    pub clusters: usize,
    pub machines: usize,
    /// Its workload clusters ran their apps (pods and budgets), as in every row of the
    /// scale figure; not in [`BenchReport::without_workload`].
    pub workload: bool,
    /// `None`: stopped at the size budget.
    pub wall_seconds: Option<f64>,
    pub per_cluster_ms: Option<f64>,
    pub peak_rss_mb: f64,
    pub ready: bool,
    pub api_calls: u64,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct BuildCalls {
    pub total: u64,
    pub mutations: u64,
    pub reads: u64,
    pub reconciles: u64,
    /// One token, one list of each kind the spec uses before acting, every mutation,
    /// and one more list of each kind to see each phase's result: one phase for the
    /// infrastructure alone, two with kubeadm (the init machine serving, then the
    /// joins).
    pub minimum: u64,
    pub kinds_used: usize,
    /// "service METHOD path" → calls.
    pub by_call: BTreeMap<String, u64>,
    /// The invariants and expectations the build broke (none when it passed).
    pub broken: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Steady {
    pub calls_per_hour: u64,
    pub mutations_per_hour: u64,
    pub store_commits_per_hour: u64,
    pub reconciles_per_hour: u64,
    /// The lists of Kubernetes nodes an hour: one per start of the node watch (every
    /// 15 minutes it starts afresh), no more when nodes are watched.
    pub node_lists_per_hour: u64,
    /// The node watch requests an hour (each runs 290 s, then is asked again).
    pub node_watch_requests_per_hour: u64,
    /// Whether nodes are watched, not listed: watch requests, and no more lists than
    /// the watch's starts.
    pub nodes_watched: bool,
    pub unused_kinds_listed: Vec<String>,
    pub by_call: BTreeMap<String, u64>,
    /// The invariants and expectations the quiet hour broke (none when it passed).
    pub broken: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Swarm {
    pub seeds: u64,
    /// Each failed seed: its invariant, message and replay command.
    pub failures: Vec<String>,
    pub wall_seconds: f64,
    /// The process's CPU time over the swarm (its wall time where that cannot be read).
    pub cpu_seconds: f64,
    /// Seeds over `cpu_seconds`: unlike wall time, not lowered by other work on the
    /// machine.
    pub seeds_per_second_per_core: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Wire {
    pub scenarios: usize,
    /// How many built-in scenarios there are (the goal is about all of them).
    pub scenarios_built_in: usize,
    /// Each run that did not pass, in process or on the wire, and why.
    pub failed: Vec<String>,
    pub in_process_seconds: f64,
    pub wire_seconds: f64,
    pub ratio: f64,
    pub worst_scenario: String,
    pub worst_ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub cores: usize,
    pub scale: Vec<ScaleRow>,
    /// The largest fleet of `scale` that became Ready, built again with workload
    /// clusters that run no apps: what the workload costs is the difference. `None`:
    /// no size became Ready.
    pub without_workload: Option<ScaleRow>,
    /// The infrastructure alone (`bootstrap: none`): issue 16's goal.
    pub build: BuildCalls,
    /// The same cluster with kubeadm, the default.
    pub build_kubeadm: BuildCalls,
    pub steady: Steady,
    /// `None`: not run (`--swarm-seeds 0`).
    pub swarm: Option<Swarm>,
    /// `None`: not run (`--wire-scenarios 0`).
    pub wire: Option<Wire>,
    pub goals: Vec<Goal>,
}

impl BenchReport {
    pub fn new(
        scale: Vec<ScaleRow>,
        build: BuildCalls,
        build_kubeadm: BuildCalls,
        steady: Steady,
        swarm: Option<Swarm>,
        wire: Option<Wire>,
        bounds: &Bounds,
    ) -> Self {
        let mut r = BenchReport {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scale,
            without_workload: None,
            build,
            build_kubeadm,
            steady,
            swarm,
            wire,
            goals: Vec::new(),
        };
        r.goals = bench_goals::judge(&r, bounds);
        r
    }

    /// The goals missed and the runs failed, one line each: the goal, what was
    /// measured and the bound.
    pub fn failures(&self) -> Vec<String> {
        self.goals
            .iter()
            .filter_map(|g| match &g.verdict {
                Verdict::Missed => Some(format!(
                    "missed: {} [{}]: measured {}; goal: {}",
                    g.what, g.name, g.measured, g.goal
                )),
                Verdict::Failed(why) => Some(format!(
                    "FAILED: {} [{}]: {why}; measured {}; goal: {}",
                    g.what, g.name, g.measured, g.goal
                )),
                Verdict::Met | Verdict::NotJudged(_) => None,
            })
            .chain(
                self.without_workload
                    .as_ref()
                    .filter(|row| !row.ready)
                    .map(|row| {
                        format!(
                            "FAILED: up of {} cluster(s) without the workload: {}",
                            row.clusters, row.note
                        )
                    }),
            )
            .collect()
    }
}

/// What modelling the workload costs: the largest fleet with and without it.
fn workload_cost(s: &mut String, r: &BenchReport) {
    let Some(bare) = &r.without_workload else {
        return;
    };
    let Some(with) = r
        .scale
        .iter()
        .find(|row| row.clusters == bare.clusters && row.ready)
    else {
        return;
    };
    let _ = writeln!(s, "\n## What the workload costs\n");
    let _ = writeln!(
        s,
        "`up` of {} clusters, their workload clusters running their apps (`kube-proxy`, \
         `web`, `cache`, two disruption budgets) and again running none (`up --no-workload`).\n",
        bare.clusters
    );
    let _ = writeln!(s, "| workload | wall | peak RSS | cloud calls | Ready |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for (what, row) in [("modelled", with), ("none", bare)] {
        let _ = writeln!(
            s,
            "| {what} | {} | {:.0} MB | {} | {} |",
            row.wall_seconds.map_or("-".into(), |w| format!("{w:.1} s")),
            row.peak_rss_mb,
            row.api_calls,
            if row.ready {
                "true".into()
            } else {
                format!("**FAILED**: {}", row.note)
            }
        );
    }
    if let (Some(a), Some(b)) = (with.wall_seconds, bare.wall_seconds) {
        let _ = writeln!(
            s,
            "\nThe workload costs {:+.1} s ({:+.0} %) and {:+.0} MB of peak RSS.",
            a - b,
            (a - b) * 100.0 / b.max(f64::EPSILON),
            with.peak_rss_mb - bare.peak_rss_mb
        );
    }
}

pub fn markdown(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# flightdeck bench ({} core(s))\n", r.cores);
    let _ = writeln!(s, "| what | goal | measured | met |");
    let _ = writeln!(s, "|---|---|---|---|");
    for g in &r.goals {
        let met = match &g.verdict {
            Verdict::Met => "yes".to_string(),
            Verdict::Missed => "**no: missed**".to_string(),
            Verdict::Failed(why) => format!("**FAILED**: {why}"),
            Verdict::NotJudged(why) => format!("not judged: {why}"),
        };
        let _ = writeln!(s, "| {} | {} | {} | {met} |", g.what, g.goal, g.measured);
    }
    let bad = r.goals.iter().filter(|g| g.judged_bad()).count();
    let _ = writeln!(
        s,
        "\n{}",
        if bad == 0 {
            "Every goal judged is met.".to_string()
        } else {
            format!("**bench FAILED**: {bad} goal(s) missed or failed.")
        }
    );
    let _ = writeln!(s, "\n## Scale: `up` of N clusters of 3+7 machines\n");
    let _ = writeln!(
        s,
        "| clusters | machines | wall | per cluster | peak RSS | Ready | cloud calls | note |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for row in &r.scale {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} MB | {} | {} | {} |",
            row.clusters,
            row.machines,
            row.wall_seconds.map_or("-".into(), |w| format!("{w:.1} s")),
            row.per_cluster_ms
                .map_or("-".into(), |m| format!("{m:.1} ms")),
            row.peak_rss_mb,
            if row.ready { "true" } else { "**FAILED**" },
            row.api_calls,
            row.note
        );
    }
    workload_cost(&mut s, r);
    let _ = writeln!(
        s,
        "\n## Calls to build one 3+2 cluster's infrastructure (`bootstrap: none`), by call\n"
    );
    calls_table(&mut s, &r.build.by_call);
    let _ = writeln!(
        s,
        "\n## Calls to build it with kubeadm (the default), by call\n"
    );
    calls_table(&mut s, &r.build_kubeadm.by_call);
    let _ = writeln!(
        s,
        "\n## Calls of a Ready cluster in a quiet hour, by call\n"
    );
    calls_table(&mut s, &r.steady.by_call);
    s
}

fn calls_table(s: &mut String, calls: &BTreeMap<String, u64>) {
    let _ = writeln!(s, "| call | count |");
    let _ = writeln!(s, "|---|---|");
    for (k, n) in calls {
        let _ = writeln!(s, "| `{k}` | {n} |");
    }
}
