//! The report of `flightdeck bench`: its figures, each goal of issue 16 with whether it
//! is met, and the Markdown rendering.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    pub clusters: usize,
    pub machines: usize,
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
    /// and one more list of each kind to see the result.
    pub minimum: u64,
    pub kinds_used: usize,
    /// "service METHOD path" → calls.
    pub by_call: BTreeMap<String, u64>,
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
}

#[derive(Clone, Debug, Serialize)]
pub struct Swarm {
    pub seeds: u64,
    pub failures: u64,
    pub wall_seconds: f64,
    pub seeds_per_second_per_core: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Wire {
    pub scenarios: usize,
    pub in_process_seconds: f64,
    pub wire_seconds: f64,
    pub ratio: f64,
    pub worst_scenario: String,
    pub worst_ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    pub what: String,
    pub goal: String,
    pub measured: String,
    pub met: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub cores: usize,
    pub scale: Vec<ScaleRow>,
    pub build: BuildCalls,
    pub steady: Steady,
    pub swarm: Swarm,
    pub wire: Option<Wire>,
    pub goals: Vec<Goal>,
}

impl BenchReport {
    pub fn new(
        scale: Vec<ScaleRow>,
        build: BuildCalls,
        steady: Steady,
        swarm: Swarm,
        wire: Option<Wire>,
    ) -> Self {
        let mut r = BenchReport {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scale,
            build,
            steady,
            swarm,
            wire,
            goals: Vec::new(),
        };
        r.goals = goals(&r);
        r
    }
}

fn goal(what: &str, goal: &str, measured: String, met: bool) -> Goal {
    Goal {
        what: what.into(),
        goal: goal.into(),
        measured,
        met,
    }
}

fn goals(r: &BenchReport) -> Vec<Goal> {
    let mut g = Vec::new();
    let largest = r.scale.iter().max_by_key(|s| s.clusters);
    let thousand = r.scale.iter().find(|s| s.clusters >= 1000);
    g.push(goal(
        "up of 1,000 clusters (10,000 machines)",
        "Ready in under 60 s of wall time",
        match thousand {
            Some(s) => match s.wall_seconds {
                Some(w) => format!("{w:.1} s, ready: {}", s.ready),
                None => s.note.clone(),
            },
            None => match largest {
                Some(s) => format!("not run (largest size {})", s.clusters),
                None => "not run".into(),
            },
        },
        thousand.is_some_and(|s| s.ready && s.wall_seconds.is_some_and(|w| w < 60.0)),
    ));
    let finished: Vec<&ScaleRow> = r.scale.iter().filter(|s| s.ready).collect();
    let (small, big) = (finished.first(), finished.last());
    let linear = match (small, big) {
        (Some(a), Some(b)) if a.clusters < b.clusters => {
            let ratio = b.per_cluster_ms.unwrap_or(0.0) / a.per_cluster_ms.unwrap_or(1.0);
            (
                format!(
                    "{ratio:.1}× ({:.1} ms per cluster at N={} vs {:.1} ms at N={})",
                    b.per_cluster_ms.unwrap_or(0.0),
                    b.clusters,
                    a.per_cluster_ms.unwrap_or(0.0),
                    a.clusters
                ),
                ratio <= 2.0 && r.scale.iter().all(|s| s.ready),
            )
        }
        _ => ("fewer than two sizes finished".into(), false),
    };
    g.push(goal(
        "cost linear in N",
        "per-cluster cost at the largest N within 2× of the smallest",
        linear.0,
        linear.1,
    ));
    let rss = r.scale.iter().map(|s| s.peak_rss_mb).fold(0.0, f64::max);
    g.push(goal(
        "peak memory",
        "peak RSS under 300 MB",
        format!("{rss:.0} MB (largest size run)"),
        thousand.is_some() && rss < 300.0,
    ));
    let ratio = r.build.total as f64 / r.build.minimum.max(1) as f64;
    g.push(goal(
        "cloud calls to build one 3+2 cluster",
        "at most 1.5× the minimum, reads included",
        format!(
            "{} calls ({} mutations, {} reads, {} reconciles) = {ratio:.1}× the minimum of {}",
            r.build.total, r.build.mutations, r.build.reads, r.build.reconciles, r.build.minimum
        ),
        ratio <= 1.5,
    ));
    g.push(goal(
        "steady state, no faults",
        "0 mutations and 0 store commits an hour",
        format!(
            "{} mutations, {} store commits, {} calls in {} reconciles an hour",
            r.steady.mutations_per_hour,
            r.steady.store_commits_per_hour,
            r.steady.calls_per_hour,
            r.steady.reconciles_per_hour
        ),
        r.steady.mutations_per_hour == 0 && r.steady.store_commits_per_hour == 0,
    ));
    g.push(goal(
        "steady state: what is listed",
        "no list of a kind the cluster does not use; nodes watched, not listed",
        format!(
            "unused kinds listed: {}; nodes {}",
            if r.steady.unused_kinds_listed.is_empty() {
                "none".to_string()
            } else {
                r.steady.unused_kinds_listed.join(", ")
            },
            if r.steady.nodes_watched {
                format!(
                    "watched ({} watch requests and {} lists an hour: one list per start of the watch)",
                    r.steady.node_watch_requests_per_hour, r.steady.node_lists_per_hour
                )
            } else {
                format!(
                    "listed ({} lists an hour, {} watch requests)",
                    r.steady.node_lists_per_hour, r.steady.node_watch_requests_per_hour
                )
            }
        ),
        r.steady.unused_kinds_listed.is_empty() && r.steady.nodes_watched,
    ));
    g.push(goal(
        "swarm",
        "at least 100 seeds/s per core, determinism check on",
        format!(
            "{:.1} seeds/s on one core ({} seeds, {} failed)",
            r.swarm.seeds_per_second_per_core, r.swarm.seeds, r.swarm.failures
        ),
        r.swarm.seeds_per_second_per_core >= 100.0 && r.swarm.failures == 0,
    ));
    if let Some(w) = &r.wire {
        g.push(goal(
            "`sim run --wire` against in process",
            "at most 3× slower",
            format!(
                "{:.1}× over {} scenarios ({:.1} s vs {:.1} s); worst {} at {:.1}×",
                w.ratio,
                w.scenarios,
                w.wire_seconds,
                w.in_process_seconds,
                w.worst_scenario,
                w.worst_ratio
            ),
            w.ratio <= 3.0,
        ));
    }
    g
}

pub fn markdown(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# flightdeck bench ({} core(s))\n", r.cores);
    let _ = writeln!(s, "| what | goal | measured | met |");
    let _ = writeln!(s, "|---|---|---|---|");
    for g in &r.goals {
        let met = if g.met { "yes" } else { "**no**" };
        let _ = writeln!(s, "| {} | {} | {} | {met} |", g.what, g.goal, g.measured);
    }
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
            row.ready,
            row.api_calls,
            row.note
        );
    }
    let _ = writeln!(s, "\n## Calls to build one 3+2 cluster, by call\n");
    calls_table(&mut s, &r.build.by_call);
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
