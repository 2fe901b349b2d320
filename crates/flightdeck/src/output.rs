//! What a person sees: progress lines and status tables.

#[cfg(feature = "sim")]
use std::fmt::Write as _;

use flightdeck_engine::TimelineEntry;
#[cfg(feature = "sim")]
use flightdeck_scenario::report::ClusterReport;

/// One timeline line: `[  1:02.3] demo      CreateServer  create server demo-cp-1: ...`.
pub fn progress_line(e: &TimelineEntry) -> String {
    let mark = if e.severity == "Warning" { "!" } else { " " };
    format!(
        "[{}] {mark}{:<10} {:<24} {}",
        e.at_label(),
        e.source,
        e.reason,
        e.message
    )
}

/// The status table printed at the end of `up` and `sim run`.
#[cfg(feature = "sim")]
pub fn status_table(clusters: &[ClusterReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:<12} {:<22} {:<18} {:<16} CONDITIONS",
        "CLUSTER", "PHASE", "CONTROL PLANE", "WORKERS", "API VIP"
    );
    for c in clusters {
        let Some(s) = &c.status else {
            let _ = writeln!(out, "{:<12} {:<12}", c.name, c.phase);
            continue;
        };
        let cp = &s.control_plane;
        let version = cp
            .machines
            .first()
            .map(|m| m.version.as_str())
            .unwrap_or("-");
        let workers: Vec<String> = s
            .node_pools
            .iter()
            .map(|p| format!("{} {}/{}", p.name, p.ready, p.replicas))
            .collect();
        let vip = s
            .load_balancer
            .as_ref()
            .and_then(|l| l.vip_address.map(|a| a.to_string()))
            .or_else(|| s.api_endpoint.clone())
            .unwrap_or_else(|| "-".into());
        let conditions: Vec<String> = s
            .conditions
            .iter()
            .filter(|x| x.status)
            .map(|x| x.kind.clone())
            .collect();
        let _ = writeln!(
            out,
            "{:<12} {:<12} {:<22} {:<18} {:<16} {}",
            c.name,
            c.phase,
            format!("{}/{} serving {version}", cp.ready, cp.replicas),
            if workers.is_empty() {
                "-".into()
            } else {
                workers.join(", ")
            },
            vip,
            if conditions.is_empty() {
                "-".into()
            } else {
                conditions.join(",")
            }
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<22} {:<14} {:<10} {:<13} {:<9} MEMBER",
        "MACHINE", "ROLE", "SERVER", "ADDRESS", "NODE"
    );
    for c in clusters {
        let Some(s) = &c.status else { continue };
        for set in std::iter::once(&s.control_plane).chain(s.node_pools.iter()) {
            for m in &set.machines {
                let member = m
                    .member
                    .as_ref()
                    .map(|x| format!("{}/{}", x.provisioning_status, x.operating_status))
                    .unwrap_or_else(|| "-".into());
                let _ = writeln!(
                    out,
                    "{:<22} {:<14} {:<10} {:<13} {:<9} {}{}",
                    m.name,
                    set.name,
                    m.server_status,
                    m.address
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "-".into()),
                    m.node.as_deref().unwrap_or("-"),
                    member,
                    if m.removing { "  (removing)" } else { "" }
                );
            }
        }
    }
    out
}
