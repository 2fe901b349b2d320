//! `flightdeck bench` at its smallest (one cluster, no swarm, no wire): the report is
//! written in full, then the exit status says whether every goal it judged was met.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bench(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["bench", "--sizes", "1", "--swarm-seeds", "0"])
        .args(["--wire-scenarios", "0", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("flightdeck runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn report(dir: &Path) -> (String, serde_json::Value) {
    let md = std::fs::read_to_string(dir.join("bench.md")).expect("bench.md is written");
    let json = std::fs::read_to_string(dir.join("bench.json")).expect("bench.json is written");
    (md, serde_json::from_str(&json).expect("bench.json is JSON"))
}

fn verdict<'v>(json: &'v serde_json::Value, goal: &str) -> &'v serde_json::Value {
    let goals = json["goals"].as_array().expect("goals");
    &goals
        .iter()
        .find(|g| g["name"] == goal)
        .unwrap_or_else(|| panic!("no goal {goal} in {goals:#?}"))["verdict"]
}

fn out_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bench");
    (dir, out)
}

#[test]
fn a_bench_that_meets_every_goal_it_judges_exits_0_and_says_which_it_did_not_judge() {
    let (_dir, out) = out_dir();
    let run = bench(&out, &[]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let (md, json) = report(&out);
    assert!(md.contains("Every goal judged is met."), "{md}");
    for goal in [
        "sizes-ready",
        "build-calls",
        "build-calls-kubeadm",
        "quiet-hour-writes",
        "quiet-hour-lists",
    ] {
        assert_eq!(verdict(&json, goal), "met", "{goal}: {md}");
    }
    // The goals about 1,000 clusters, the swarm and the wire are not judged at this
    // size, and the report and stderr say why.
    for goal in ["up-1000", "linear", "peak-rss", "swarm", "wire"] {
        assert!(
            verdict(&json, goal)["notJudged"].is_string(),
            "{goal}: {md}"
        );
    }
    assert!(
        md.contains("not judged: the goal is about 1,000 clusters"),
        "{md}"
    );
    assert!(md.contains("not judged: not run (--swarm-seeds 0)"), "{md}");
    // What the workload costs: the largest Ready size again, its workload clusters
    // running no apps.
    assert!(md.contains("## What the workload costs"), "{md}");
    assert!(md.contains("The workload costs "), "{md}");
    assert_eq!(json["scale"][0]["workload"], true);
    let bare = &json["without_workload"];
    assert_eq!(bare["clusters"], 1, "{bare}");
    assert_eq!(bare["workload"], false, "{bare}");
    assert_eq!(bare["ready"], true, "{bare}");
    assert!(
        stderr(&run).contains("not judged: `sim run --wire` against in process [wire]"),
        "{}",
        stderr(&run)
    );
}

#[test]
fn a_missed_goal_and_a_fleet_never_ready_exit_1_naming_each_row_after_the_report_is_written() {
    let (_dir, out) = out_dir();
    // A bound the build's calls cannot meet (it needs 1.3× the minimum), and no time at
    // all for `up` of the fleet.
    let run = bench(&out, &["--goal", "build-calls=1", "--size-budget", "0s"]);
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("FAILED: 2 goal(s) missed or failed"), "{err}");
    let missed = err
        .lines()
        .find(|l| {
            l.contains(
                "missed: cloud calls to build one 3+2 cluster's infrastructure (bootstrap: none) [build-calls]",
            )
        })
        .unwrap_or_else(|| panic!("the missed goal is named: {err}"));
    assert!(
        missed.contains("measured ") && missed.contains("× the minimum of "),
        "{missed}"
    );
    assert!(missed.contains("goal: at most 1× the minimum"), "{missed}");
    let failed = err
        .lines()
        .find(|l| l.contains("FAILED: up of each size in --sizes [sizes-ready]"))
        .unwrap_or_else(|| panic!("the fleet that was never Ready is named: {err}"));
    assert!(failed.contains("N=1: not finished within 0s"), "{failed}");
    // The report was written in full first, each row with its verdict.
    let (md, json) = report(&out);
    assert!(
        md.contains("**no: missed**") && md.contains("**FAILED**"),
        "{md}"
    );
    assert!(md.contains("**bench FAILED**: 2 goal(s)"), "{md}");
    assert!(
        md.contains("## Calls of a Ready cluster in a quiet hour"),
        "{md}"
    );
    assert_eq!(verdict(&json, "build-calls"), "missed");
    assert!(verdict(&json, "sizes-ready")["failed"].is_string());
}

#[test]
fn a_goal_flag_with_an_unknown_name_or_a_bad_value_is_refused_listing_the_goals() {
    for bad in [
        "nope=1",
        "build-calls=-1",
        "build-calls=many",
        "build-calls",
    ] {
        let (_dir, out) = out_dir();
        let run = bench(&out, &["--goal", bad]);
        let err = stderr(&run);
        assert_eq!(run.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--goal"), "{bad}: {err}");
        for known in [
            "up-1000",
            "linear",
            "peak-rss",
            "build-calls",
            "quiet-hour-writes",
        ] {
            assert!(err.contains(known), "{bad}: {known} not listed: {err}");
        }
        assert!(!out.exists(), "{bad}: nothing was measured");
    }
}
