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
            .map(|ip| ip.to_string())
            .or_else(|| status.api_endpoint.clone()),
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

/// The view a viewer gets: the spec without what can hold secrets, each userData's
/// content and each OpenNebula template's and image's body (its CONTEXT can hold
/// passwords and scripts), with its size in bytes and its SHA-256 in its place. The
/// FNV digest that names user data is left out: unkeyed and fast, it would let a viewer
/// confirm a guess of short content.
pub fn without_user_data(mut d: ClusterDetail) -> ClusterDetail {
    hide_secrets(&mut d.spec);
    d
}

/// [`without_user_data`] on the spec as the API shows it (`kind: Cluster`).
fn hide_secrets(doc: &mut serde_json::Value) {
    fn seen(content: &serde_json::Value) -> serde_json::Value {
        let bytes = content.as_str().unwrap_or_default().as_bytes();
        let sha = ring::digest::digest(&ring::digest::SHA256, bytes);
        let hex: String = sha.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        serde_json::json!({"size": bytes.len(), "sha256": hex})
    }
    fn strip_user_data(u: &mut serde_json::Value) {
        let Some(u) = u.as_object_mut() else {
            return;
        };
        u.remove("digest");
        if let Some(content) = u.remove("content")
            && let Some(seen) = seen(&content).as_object()
        {
            u.extend(seen.clone());
        }
    }
    let spec = &mut doc["spec"];
    strip_user_data(&mut spec["controlPlane"]["machine"]["userData"]);
    if let Some(pools) = spec["nodePools"].as_array_mut() {
        for p in pools {
            strip_user_data(&mut p["machine"]["userData"]);
        }
    }
    for list in ["templates", "images"] {
        if let Some(items) = spec["provider"]["opennebula"][list].as_array_mut() {
            for t in items {
                if let Some(content) = t.get("content") {
                    t["content"] = seen(content);
                }
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_viewer_reads_no_user_data_and_no_opennebula_template_body() {
        let mut doc = serde_json::json!({"spec": {
            "controlPlane": {"machine": {"userData": {"content": "#cloud-config\npassword: hunter2\n", "digest": 7}}},
            "nodePools": [{"machine": {"userData": {"file": "w.yaml", "content": "hunter2", "digest": 9}}}],
            "provider": {"opennebula": {
                "templates": [{"name": "cp", "content": "CONTEXT = [ PASSWORD = \"hunter2\" ]"}],
                "images": [{"name": "os", "content": "PATH = \"http://x/hunter2.qcow2\""}]
            }}
        }});
        hide_secrets(&mut doc);
        let text = doc.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("\"digest\""), "{text}");
        let u = &doc["spec"]["nodePools"][0]["machine"]["userData"];
        assert_eq!(u["size"], 7);
        assert_eq!(u["file"], "w.yaml");
        // SHA-256 of "hunter2".
        assert_eq!(
            u["sha256"],
            "f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7"
        );
        let t = &doc["spec"]["provider"]["opennebula"]["templates"][0];
        assert_eq!(t["name"], "cp");
        assert!(t["content"]["size"].as_u64().is_some_and(|n| n > 10), "{t}");
    }
}
