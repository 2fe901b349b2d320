//! The scale figure of `flightdeck bench`: `flightdeck up` of N clusters (3 control-plane
//! machines and 7 workers each) in a child process, timed, its peak memory read from
//! `/proc`, stopped when it runs past its budget.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::bench::EXAMPLE;
use crate::bench_report::ScaleRow;

/// Machines per cluster in the scale figure: 3 control-plane machines and 7 workers.
pub const MACHINES_PER_CLUSTER: usize = 10;

/// The fleet file of `n` clusters: the example, renamed, with 7 workers, its own pod
/// network (a /20 each, from 10.16.0.0), security group and router.
pub fn fleet(n: usize) -> String {
    assert!(
        n <= 3_840,
        "at most 3,840 /20 pod networks fit in 10.16.0.0/8"
    );
    (0..n)
        .map(|i| {
            let pod = format!("10.{}.{}.0/20", 16 + i / 16, (i % 16) * 16);
            EXAMPLE
                .replace("name: demo\n", &format!("name: c{i}\n"))
                .replace("replicas: 2\n", "replicas: 7\n")
                .replace("podCIDR: 10.244.0.0/16", &format!("podCIDR: {pod}"))
                .replace(
                    "securityGroup: demo-nodes",
                    &format!("securityGroup: c{i}-nodes"),
                )
                .replace("router: demo-router", &format!("router: c{i}-router"))
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

pub fn scale(sizes: &[usize], budget: Duration, out: &Path) -> anyhow::Result<Vec<ScaleRow>> {
    let exe = std::env::current_exe().context("cannot find flightdeck's own binary")?;
    let mut rows = Vec::new();
    for &n in sizes {
        let file = out.join(format!("fleet-{n}.yaml"));
        std::fs::write(&file, fleet(n))
            .with_context(|| format!("cannot write {}", file.display()))?;
        eprintln!(
            "bench:   up of {n} cluster(s) ({} machines)",
            n * MACHINES_PER_CLUSTER
        );
        let row = one_size(&exe, &file, n, budget, true)?;
        eprintln!(
            "bench:   {n} cluster(s): {}",
            match row.wall_seconds {
                Some(s) => format!("{s:.1}s, peak RSS {:.0} MB", row.peak_rss_mb),
                None => format!("stopped after {}s: {}", budget.as_secs(), row.note),
            }
        );
        let stop = row.wall_seconds.is_none();
        rows.push(row);
        if stop {
            // A larger fleet would not finish either.
            break;
        }
    }
    Ok(rows)
}

/// The largest fleet of `rows` that became Ready, built again with workload clusters
/// that run no apps (`up --no-workload`): what modelling the workload costs is the
/// difference. `None` when no size became Ready.
pub fn without_workload(
    rows: &[ScaleRow],
    budget: Duration,
    out: &Path,
) -> anyhow::Result<Option<ScaleRow>> {
    let Some(n) = rows.iter().filter(|r| r.ready).map(|r| r.clusters).max() else {
        return Ok(None);
    };
    let exe = std::env::current_exe().context("cannot find flightdeck's own binary")?;
    let file = out.join(format!("fleet-{n}.yaml"));
    eprintln!("bench:   up of {n} cluster(s) again, their workload clusters running no apps");
    let row = one_size(&exe, &file, n, budget, false)?;
    if let Some(s) = row.wall_seconds {
        eprintln!(
            "bench:   {n} cluster(s) without the workload: {s:.1}s, peak RSS {:.0} MB",
            row.peak_rss_mb
        );
    }
    Ok(Some(row))
}

fn one_size(
    exe: &Path,
    file: &Path,
    n: usize,
    budget: Duration,
    workload: bool,
) -> anyhow::Result<ScaleRow> {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(["up", "--output", "json", "--quiet", "--timeout", "24h"])
        .args((!workload).then_some("--no-workload"))
        .arg("-f")
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0_u64;
    let mut stdout = child.stdout.take().context("child stdout")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let mut stderr = child.stderr.take().context("child stderr")?;
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).map(|_| s)
    });
    let status = loop {
        if let Some(kb) = vm_hwm_kb(&status_file) {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() >= budget {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let wall = started.elapsed().as_secs_f64();
    let stdout = reader.join().ok().and_then(Result::ok).unwrap_or_default();
    let stderr = err_reader
        .join()
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut row = ScaleRow {
        clusters: n,
        machines: n * MACHINES_PER_CLUSTER,
        workload,
        wall_seconds: None,
        per_cluster_ms: None,
        peak_rss_mb: peak_kb as f64 / 1024.0,
        ready: false,
        api_calls: 0,
        note: String::new(),
    };
    let Some(status) = status else {
        row.note = format!("not finished within {}s; stopped", budget.as_secs());
        return Ok(row);
    };
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
    row.ready = status.success() && v["ready"] == true;
    row.api_calls = v["api_calls_total"].as_u64().unwrap_or(0);
    row.wall_seconds = Some(wall);
    row.per_cluster_ms = Some(wall * 1000.0 / n as f64);
    if !row.ready {
        let last = stderr.lines().rev().take(3).collect::<Vec<_>>().join(" / ");
        row.note = format!("`up` exited with {status}: {last}");
    }
    Ok(row)
}

/// The peak resident set of a running process, in kB (`VmHWM`), if it still runs.
fn vm_hwm_kb(status_file: &str) -> Option<u64> {
    let text = std::fs::read_to_string(status_file).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_file_holds_n_distinct_clusters_that_validate() {
        let text = fleet(40);
        let docs =
            flightdeck_spec::load_documents(&text, "fleet.yaml").expect("the fleet validates");
        assert_eq!(docs.len(), 40);
        let mut pods = std::collections::BTreeSet::new();
        for d in docs {
            let flightdeck_spec::Document::Cluster(c) = d else {
                panic!("clusters only");
            };
            assert_eq!(c.spec.node_pools[0].replicas.get(), 7);
            assert!(pods.insert(c.spec.network.pod_cidr.to_string()));
        }
    }
}
