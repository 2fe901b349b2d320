//! What the API shows of a cluster, built from the engine's record of it.

use flightdeck_engine::ClusterRecord;
use flightdeck_plan::Event;
use flightdeck_plan::status::Phase;
use flightdeck_plan::status::SetStatus;

use crate::types::{ClusterDetail, ClusterSummary, EventView, SetCount};

fn count(set: &SetStatus) -> SetCount {
    SetCount {
        name: set.name.clone(),
        ready: set.ready,
        desired: set.replicas,
        up_to_date: set.up_to_date,
    }
}

/// What a person needs to know of one cluster, on one line.
pub fn summary(
    name: &str,
    record: &ClusterRecord,
    cloud: &str,
    created_at: Option<u64>,
    last_error: Option<String>,
    generations: (u64, u64),
    now: u64,
) -> ClusterSummary {
    let status = &record.status;
    let deleting = record.memory.deletion_requested.is_some();
    let phase = if deleting {
        Phase::Deleting
    } else {
        status.phase
    };
    let mut control_plane = count(&status.control_plane);
    if control_plane.desired == 0 {
        control_plane.desired = record.spec.spec.control_plane.replicas.get();
    }
    let pools = record
        .spec
        .spec
        .node_pools
        .iter()
        .map(|p| {
            status
                .node_pools
                .iter()
                .find(|s| s.name == p.name.as_str())
                .map(count)
                .unwrap_or(SetCount {
                    name: p.name.to_string(),
                    ready: 0,
                    desired: p.replicas.get(),
                    up_to_date: 0,
                })
        })
        .collect();
    ClusterSummary {
        name: name.to_string(),
        uid: record.memory.uid.clone(),
        cloud: cloud.to_string(),
        phase: phase.as_str().to_string(),
        ready: status.ready && !deleting,
        control_plane,
        pools,
        endpoint: status
            .load_balancer
            .as_ref()
            .and_then(|lb| lb.vip_address)
            .map(|ip| ip.to_string()),
        conditions: status
            .conditions
            .iter()
            .filter(|c| c.status && !c.kind.ends_with("Ready"))
            .map(|c| c.kind.clone())
            .collect(),
        breakers: record.memory.churn.tripped.keys().cloned().collect(),
        repairs: u32::try_from(status.repairs.len()).unwrap_or(u32::MAX),
        created_at,
        last_error,
        generation: generations.0,
        observed_generation: generations.1,
        now,
    }
}

/// Everything about one cluster.
pub fn detail(summary: ClusterSummary, record: &ClusterRecord) -> ClusterDetail {
    let json = |v: serde_json::Result<serde_json::Value>| v.unwrap_or(serde_json::Value::Null);
    ClusterDetail {
        summary,
        spec: json(serde_json::to_value(&record.spec)),
        status: json(serde_json::to_value(&record.status)),
        memory: json(serde_json::to_value(&record.memory)),
    }
}

/// The view a viewer gets: each userData of the spec without its content (it can hold
/// secrets), with its size in bytes and its digest in its place.
pub fn without_user_data(mut d: ClusterDetail) -> ClusterDetail {
    fn strip(u: &mut serde_json::Value) {
        let Some(u) = u.as_object_mut() else {
            return;
        };
        if let Some(content) = u.remove("content") {
            let size = content.as_str().map_or(0, str::len);
            u.insert("size".into(), size.into());
        }
    }
    let spec = &mut d.spec["spec"];
    strip(&mut spec["controlPlane"]["machine"]["userData"]);
    if let Some(pools) = spec["nodePools"].as_array_mut() {
        for p in pools {
            strip(&mut p["machine"]["userData"]);
        }
    }
    d
}

pub fn event(e: &Event) -> EventView {
    EventView {
        at: e.at.millis(),
        cluster: e.cluster.clone(),
        severity: format!("{:?}", e.severity),
        reason: e.reason.clone(),
        message: e.message.clone(),
    }
}
