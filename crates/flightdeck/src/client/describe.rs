//! `describe cluster NAME`: the cluster as a tree, like `clusterctl describe cluster`,
//! then its conditions, repairs and breakers.

use std::fmt::Write as _;

use flightdeck_plan::ClusterStatus;
use flightdeck_plan::status::{DrainStatus, MachineStatus, SetStatus};

use super::render::{Table, age, budget_line};
use super::types::{ClusterDetail, ClusterSummary, SetCount};

/// One line of the tree and the lines under it.
struct Node {
    label: String,
    status: String,
    details: String,
    children: Vec<Node>,
}

impl Node {
    fn new(
        label: impl Into<String>,
        status: impl Into<String>,
        details: impl Into<String>,
    ) -> Self {
        Node {
            label: label.into(),
            status: status.into(),
            details: details.into(),
            children: Vec::new(),
        }
    }
}

/// What a cloud calls a machine's instance.
fn instance_word(cloud: &str) -> &'static str {
    let kind = cloud.strip_prefix("sim/").unwrap_or(cloud);
    let kind = kind.split(':').next().unwrap_or(kind);
    match kind {
        "opennebula" => "VM",
        "kubevirt" => "VMI",
        _ => "Server",
    }
}

/// Whether a cloud puts its control plane behind a load balancer with members: only
/// OpenStack's Octavia does (OpenNebula's and KubeVirt's endpoints have none), so only
/// there does a machine without a member lack something.
fn has_members(cloud: &str) -> bool {
    let kind = cloud.strip_prefix("sim/").unwrap_or(cloud);
    kind.split(':').next().unwrap_or(kind) == "openstack"
}

fn join_details(parts: Vec<String>) -> String {
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a person reads of a machine's drain: held, or draining with what is left.
fn drain_node(d: &DrainStatus, now: u64) -> Node {
    if d.held {
        return Node::new(
            "Drain",
            "held",
            format!(
                "{} on its node holds the deletion",
                flightdeck_cloud::HOLD_DELETION
            ),
        );
    }
    let left = d.pods_left.map_or("pods not listed yet".to_string(), |n| {
        format!("{n} pod(s) left")
    });
    let deadline = d.deadline.map_or(String::new(), |t| {
        let secs = (i128::from(t.millis()) - i128::from(now)) / 1000;
        if secs > 0 {
            format!("deadline in {}", super::render::human_duration(secs))
        } else {
            "deadline passed".to_string()
        }
    });
    let since = format!("for {}", age(d.since.map(|t| t.millis()), now));
    Node::new(
        "Drain",
        "draining",
        join_details(vec![left, deadline, since]),
    )
}

fn machine_node(m: &MachineStatus, instance: &str, members: bool, now: u64) -> Node {
    let state = if m.up_to_date {
        "up to date"
    } else {
        "outdated"
    };
    let mut status = state.to_string();
    if m.removing {
        status.push_str(", removing");
    }
    let mut node = Node::new(
        format!("Machine/{}", m.name),
        status,
        join_details(vec![m.version.clone(), format!("image {}", m.image)]),
    );
    let id = m
        .server_id
        .as_ref()
        .map_or("not created yet".to_string(), |id| format!("id {id}"));
    let address = m
        .address
        .map(|a| format!("address {a}"))
        .unwrap_or_default();
    node.children.push(Node::new(
        instance,
        m.server_status.clone(),
        join_details(vec![id, address]),
    ));
    node.children.push(match &m.node {
        Some(n) => Node::new("Node", n.clone(), ""),
        None => Node::new("Node", "-", "not joined yet"),
    });
    if let Some(d) = &m.drain {
        node.children.push(drain_node(d, now));
    }
    if members || m.member.is_some() {
        node.children.push(match &m.member {
            Some(x) => Node::new(
                "Member",
                format!("{}/{}", x.provisioning_status, x.operating_status),
                format!("id {}", x.id),
            ),
            None => Node::new("Member", "-", "not a load balancer member yet"),
        });
    }
    node
}

fn set_node(
    label: String,
    count: Option<&SetCount>,
    set: Option<&SetStatus>,
    instance: &str,
    members: bool,
    now: u64,
) -> Node {
    let (ready, desired, fresh) = match (count, set) {
        (Some(c), _) => (c.ready, c.desired, c.up_to_date),
        (None, Some(s)) => (s.ready, s.replicas, s.up_to_date),
        (None, None) => (0, 0, 0),
    };
    let mut node = Node::new(
        label,
        format!("{ready}/{desired} ready"),
        format!("{fresh} up to date"),
    );
    for m in set.map(|s| s.machines.as_slice()).unwrap_or_default() {
        node.children.push(machine_node(m, instance, members, now));
    }
    node
}

fn cluster_tree(s: &ClusterSummary, status: Option<&ClusterStatus>) -> Node {
    let instance = instance_word(&s.cloud);
    let mut details = vec![s.cloud.clone()];
    details.push(format!(
        "endpoint {}",
        s.endpoint.as_deref().unwrap_or("not yet known")
    ));
    if !s.conditions.is_empty() {
        details.push(format!("conditions {}", s.conditions.join(",")));
    }
    details.push(format!("age {}", age(s.created_at, s.now)));
    let mut root = Node::new(
        format!("Cluster/{}", s.name),
        s.phase.clone(),
        join_details(details),
    );
    if let Some(lb) = status.and_then(|st| st.load_balancer.as_ref()) {
        let vip = lb
            .vip_address
            .map(|a| format!("vip {a}"))
            .unwrap_or_default();
        root.children.push(Node::new(
            "LoadBalancer",
            format!("{}/{}", lb.provisioning_status, lb.operating_status),
            join_details(vec![format!("id {}", lb.id), vip]),
        ));
    }
    let cp = status.map(|st| &st.control_plane);
    let cp_name = cp
        .map(|c| c.name.as_str())
        .filter(|n| !n.is_empty())
        .unwrap_or(s.control_plane.name.as_str());
    root.children.push(set_node(
        format!("ControlPlane/{cp_name}"),
        Some(&s.control_plane),
        cp,
        instance,
        has_members(&s.cloud),
        s.now,
    ));
    let pools = status
        .map(|st| st.node_pools.as_slice())
        .unwrap_or_default();
    for count in &s.pools {
        let set = pools.iter().find(|p| p.name == count.name);
        root.children.push(set_node(
            format!("NodePool/{}", count.name),
            Some(count),
            set,
            instance,
            false,
            s.now,
        ));
    }
    for set in pools
        .iter()
        .filter(|p| !s.pools.iter().any(|c| c.name == p.name))
    {
        root.children.push(set_node(
            format!("NodePool/{}", set.name),
            None,
            Some(set),
            instance,
            false,
            s.now,
        ));
    }
    root
}

fn flatten(node: &Node, prefix: &str, branch: &str, rows: &mut Vec<Vec<String>>) {
    rows.push(vec![
        format!("{prefix}{branch}{}", node.label),
        node.status.clone(),
        node.details.clone(),
    ]);
    let child_prefix = match branch {
        "├─" => format!("{prefix}│ "),
        "└─" => format!("{prefix}  "),
        _ => prefix.to_string(),
    };
    let last = node.children.len().saturating_sub(1);
    for (i, child) in node.children.iter().enumerate() {
        let b = if i == last { "└─" } else { "├─" };
        flatten(child, &child_prefix, b, rows);
    }
}

fn conditions_section(out: &mut String, status: &ClusterStatus, now: u64) {
    let _ = writeln!(out, "Conditions:");
    if status.conditions.is_empty() {
        let _ = writeln!(out, "  none");
        return;
    }
    let rows: Vec<Vec<String>> = status
        .conditions
        .iter()
        .map(|c| {
            let since = (c.since.0 > 0).then_some(c.since.0);
            vec![
                c.kind.clone(),
                if c.status { "True" } else { "False" }.to_string(),
                c.reason.clone(),
                age(since, now),
                c.message.clone(),
            ]
        })
        .collect();
    let table = Table::render(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows);
    for line in table.lines() {
        let _ = writeln!(out, "  {line}");
    }
}

fn repairs_section(out: &mut String, status: &ClusterStatus) {
    let _ = writeln!(out, "Repairs (flight control):");
    if status.repairs.is_empty() {
        let _ = writeln!(out, "  none pending");
    }
    for r in &status.repairs {
        let _ = writeln!(out, "  - {}: {} ({})", r.machine, r.reason, r.state);
    }
    for b in &status.repair_budgets {
        let _ = writeln!(out, "  {}", budget_line(&b.set, b.budget, b.in_use));
    }
}

fn breakers_section(out: &mut String, s: &ClusterSummary) {
    if s.breakers.is_empty() {
        let _ = writeln!(out, "Breakers: none tripped");
        return;
    }
    let _ = writeln!(
        out,
        "Breakers (the churn breaker stopped these; `flightdeck resume {}` closes them):",
        s.name
    );
    for b in &s.breakers {
        let _ = writeln!(out, "  - {b}");
    }
}

/// The whole description of one cluster.
pub fn describe(d: &ClusterDetail) -> anyhow::Result<String> {
    let s = &d.summary;
    let status: Option<ClusterStatus> = if d.status.is_null() {
        None
    } else {
        Some(serde_json::from_value(d.status.clone()).map_err(|e| {
            anyhow::anyhow!("the status of cluster {} is not understood: {e}", s.name)
        })?)
    };
    let mut rows = Vec::new();
    flatten(&cluster_tree(s, status.as_ref()), "", "", &mut rows);
    let mut out = Table::render(&["NAME", "STATUS", "DETAILS"], &rows);
    if let Some(e) = &s.last_error {
        let _ = writeln!(out, "\nLast reconcile failed: {e}");
    }
    let _ = writeln!(out);
    match &status {
        Some(st) => {
            conditions_section(&mut out, st, s.now);
            let _ = writeln!(out);
            repairs_section(&mut out, st);
        }
        None => {
            let _ = writeln!(out, "No status yet: the cluster was not reconciled so far.");
        }
    }
    let _ = writeln!(out);
    breakers_section(&mut out, s);
    Ok(out)
}
