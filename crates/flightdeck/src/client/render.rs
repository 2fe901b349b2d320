//! What the client prints: ages, clock times, tables, event lines and plans.

use std::fmt::Write as _;

use anyhow::Context as _;

use super::Format;
use super::types::{ClusterSummary, EventView, PlanView};

/// An age the way kubectl prints one (`45s`, `3m12s`, `2h5m`, `3d`), from two times in
/// milliseconds on the same clock. `<unknown>` without a start time.
pub fn age(since: Option<u64>, now: u64) -> String {
    let Some(since) = since else {
        return "<unknown>".into();
    };
    let secs = (i128::from(now) - i128::from(since)) / 1000;
    human_duration(secs)
}

/// kubectl's `HumanDuration`, in whole seconds.
pub fn human_duration(secs: i128) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

/// `HH:MM:SS` (UTC) of a time in milliseconds since the Unix epoch.
pub fn clock(ms: u64) -> String {
    let secs = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Columns padded to their widest cell, three spaces apart, like kubectl's tables.
pub struct Table {
    pub widths: Vec<usize>,
}

impl Table {
    /// Widths that fit the header and every row.
    pub fn fit(header: &[&str], rows: &[Vec<String>]) -> Self {
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in rows {
            for (i, cell) in row.iter().enumerate() {
                let n = cell.chars().count();
                match widths.get_mut(i) {
                    Some(w) => *w = (*w).max(n),
                    None => widths.push(n),
                }
            }
        }
        Table { widths }
    }

    /// One line; a cell wider than its column pushes the rest right.
    pub fn line<S: AsRef<str>>(&self, cells: &[S]) -> String {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let cell = cell.as_ref();
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let w = self.widths.get(i).copied().unwrap_or(0);
                let _ = write!(out, "{cell:<w$}   ");
            }
        }
        out.trim_end().to_string()
    }

    /// The header and every row, each line ending in a newline.
    pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
        let t = Table::fit(header, rows);
        let mut out = t.line(header);
        out.push('\n');
        for r in rows {
            out.push_str(&t.line(r));
            out.push('\n');
        }
        out
    }
}

pub const CLUSTER_HEADER: [&str; 7] = [
    "NAME",
    "CLOUD",
    "PHASE",
    "CONTROL-PLANE",
    "WORKERS",
    "CONDITIONS",
    "AGE",
];
pub const WIDE_EXTRA: [&str; 4] = ["ENDPOINT", "BREAKERS", "REPAIRS", "UID"];

pub fn cluster_header(wide: bool) -> Vec<&'static str> {
    let mut h = CLUSTER_HEADER.to_vec();
    if wide {
        h.extend(WIDE_EXTRA);
    }
    h
}

/// The index of the AGE column, which changes on every look without the cluster
/// changing.
pub const AGE_COLUMN: usize = 6;

fn dash_if_empty(s: String) -> String {
    if s.is_empty() { "-".into() } else { s }
}

/// One row of `get clusters`.
pub fn cluster_row(c: &ClusterSummary, wide: bool) -> Vec<String> {
    let workers = if c.pools.is_empty() {
        "-".to_string()
    } else {
        let ready: u32 = c.pools.iter().map(|p| p.ready).sum();
        let desired: u32 = c.pools.iter().map(|p| p.desired).sum();
        format!("{ready}/{desired}")
    };
    let mut row = vec![
        c.name.clone(),
        c.cloud.clone(),
        c.phase.clone(),
        format!("{}/{}", c.control_plane.ready, c.control_plane.desired),
        workers,
        dash_if_empty(c.conditions.join(",")),
        age(c.created_at, c.now),
    ];
    if wide {
        row.extend([
            c.endpoint.clone().unwrap_or_else(|| "-".into()),
            c.breakers.len().to_string(),
            c.repairs.to_string(),
            c.uid.clone(),
        ]);
    }
    row
}

/// The `get clusters` table.
pub fn cluster_table(items: &[ClusterSummary], wide: bool) -> String {
    let rows: Vec<Vec<String>> = items.iter().map(|c| cluster_row(c, wide)).collect();
    Table::render(&cluster_header(wide), &rows)
}

/// `[HH:MM:SS] !CLUSTER    REASON                   MESSAGE`: `!` marks a warning.
pub fn event_line(e: &EventView) -> String {
    let mark = if e.severity == "Warning" { "!" } else { " " };
    format!(
        "[{}] {mark}{:<10} {:<24} {}",
        clock(e.at),
        e.cluster,
        e.reason,
        e.message
    )
}

/// `budget workers: 1 of 2 in use, 1 left (maxUnhealthy)`.
pub fn budget_line(set: &str, budget: u32, in_use: u32) -> String {
    format!(
        "budget {set}: {in_use} of {budget} in use, {} left (maxUnhealthy)",
        budget.saturating_sub(in_use)
    )
}

/// `plan NAME` in the words of the offline `plan -f`.
pub fn plan_text(p: &PlanView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Dry run against what the cloud showed at {} (nothing is changed):",
        clock(p.observed_at)
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "cluster {}: {} action(s)", p.cluster, p.actions.len());
    for (i, a) in p.actions.iter().enumerate() {
        let _ = writeln!(out, "  {:>2}. {}", i + 1, a.summary);
        let _ = writeln!(out, "      because {}", a.reason);
    }
    let _ = writeln!(out, "  repairs (flight control):");
    if p.repairs.is_empty() {
        let _ = writeln!(out, "    none pending");
    }
    for r in &p.repairs {
        let _ = writeln!(out, "    - {}: {} ({})", r.machine, r.reason, r.state);
    }
    for b in &p.repair_budgets {
        let _ = writeln!(out, "    {}", budget_line(&b.set, b.budget, b.in_use));
    }
    if !p.conditions.is_empty() {
        let _ = writeln!(out, "  conditions: {}", p.conditions.join(", "));
    }
    if let Some(r) = &p.requeue_after {
        let _ = writeln!(out, "  then look again in {r}");
    }
    out
}

/// Prints a document as the daemon sent it, as JSON or YAML.
pub fn print_doc(v: &serde_json::Value, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Yaml => out!(
            "{}",
            yaml_serde::to_string(v).context("cannot render YAML")?
        ),
        _ => outln!("{}", serde_json::to_string_pretty(v)?),
    }
    Ok(())
}
