//! PodDisruptionBudgets as the disruption controller keeps them: label selectors
//! matched, the budgets that cover a pod, and every budget's status.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_spec::FaultKind;
use serde_json::{Map, Value, json};

use super::INFRA_CLUSTER;
use super::objects::{controller_of, pod_is_ready, pod_ns, set_condition};
use super::store::{Kind, Store, at, deleting, labels_of, name_of, set_at};
use crate::{State, faults};

/// Whether `labels` match the label selector `selector` (`matchLabels` and
/// `matchExpressions`); an empty selector matches everything, a missing one nothing.
pub(crate) fn selector_matches(
    selector: Option<&Value>,
    labels: &BTreeMap<String, String>,
) -> bool {
    let Some(sel) = selector.filter(|s| s.is_object()) else {
        return false;
    };
    let by_labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
        });
    let by_expressions = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| {
            es.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let have = labels.get(key).map(String::as_str);
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => have.is_some_and(|h| values.contains(&h)),
                    Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
                    Some("Exists") => have.is_some(),
                    Some("DoesNotExist") => have.is_none(),
                    _ => false,
                }
            })
        });
    by_labels && by_expressions
}

/// The PodDisruptionBudgets in the pod's namespace whose selector matches it.
pub(crate) fn pdbs_for_pod<'a>(store: &'a Store, pod: &Value) -> Vec<&'a Value> {
    let labels = labels_of(pod);
    store
        .list(Kind::Pdb, Some(pod_ns(pod)))
        .filter(|pdb| selector_matches(at(pdb, &["spec", "selector"]), &labels))
        .collect()
}

/// An int-or-percent of `total`, rounded up.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let pct: i64 = v.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((pct * total + 99) / 100)
}

/// Recomputes every PodDisruptionBudget's status as the disruption controller does:
/// healthy pods are Ready and not being deleted nor just disrupted; `k8s.pdbBlocks`
/// holds `disruptionsAllowed` at 0.
pub(crate) fn pdb_status(st: &mut State, now: Timestamp, cluster: &str) {
    let blocked = cluster != INFRA_CLUSTER
        && faults::strike(
            st,
            FaultKind::K8sPdbBlocks,
            now,
            &[format!("{TAG_CLUSTER}{cluster}")],
        );
    let Some(store) = st.kube.store(cluster) else {
        return;
    };
    let mut updates = Vec::new();
    for pdb in store.list(Kind::Pdb, None) {
        let ns = pod_ns(pdb);
        let selector = at(pdb, &["spec", "selector"]);
        let pods: Vec<&Value> = store
            .list(Kind::Pod, Some(ns))
            .filter(|p| selector_matches(selector, &labels_of(p)))
            .collect();
        let mut disrupted = Map::new();
        if let Some(m) = at(pdb, &["status", "disruptedPods"]).and_then(Value::as_object) {
            for (name, t) in m {
                if pods.iter().any(|p| name_of(p) == name) {
                    disrupted.insert(name.clone(), t.clone());
                }
            }
        }
        let healthy = pods
            .iter()
            .filter(|p| !deleting(p) && pod_is_ready(p) && !disrupted.contains_key(name_of(p)))
            .count() as i64;
        let mut expected = pods.len() as i64;
        let min_available = at(pdb, &["spec", "minAvailable"]);
        let max_unavailable = at(pdb, &["spec", "maxUnavailable"]);
        if min_available.and_then(Value::as_i64).is_none() {
            // Percentages and maxUnavailable count against the controllers' scale.
            let mut owners: BTreeMap<String, i64> = BTreeMap::new();
            for p in &pods {
                if let Some(r) = controller_of(p)
                    && r.get("kind").and_then(Value::as_str) == Some("ReplicaSet")
                {
                    let rs = r.get("name").and_then(Value::as_str).unwrap_or("");
                    let scale = store
                        .get(Kind::ReplicaSet, ns, rs)
                        .and_then(|s| at(s, &["spec", "replicas"]))
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    owners.insert(rs.to_string(), scale);
                }
            }
            if !owners.is_empty() {
                expected = owners.values().sum();
            }
        }
        let desired = match (min_available, max_unavailable) {
            (Some(m), _) => scaled(m, expected).unwrap_or(expected),
            (None, Some(m)) => (expected - scaled(m, expected).unwrap_or(0)).max(0),
            (None, None) => expected,
        };
        let allowed = if blocked {
            0
        } else {
            (healthy - desired).max(0)
        };
        let generation = at(pdb, &["metadata", "generation"])
            .cloned()
            .unwrap_or(json!(1));
        updates.push((
            ns.to_string(),
            name_of(pdb).to_string(),
            json!({
                "observedGeneration": generation,
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "disruptedPods": disrupted,
            }),
            allowed > 0,
        ));
    }
    let Some(store) = st.kube.store_mut(cluster) else {
        return;
    };
    for (ns, name, status, allowed) in updates {
        store.modify(Kind::Pdb, &ns, &name, |p| {
            let conditions = at(p, &["status", "conditions"]).cloned();
            set_at(p, &["status"], status);
            if let Some(c) = conditions {
                set_at(p, &["status", "conditions"], c);
            }
            let (s, reason) = if allowed {
                ("True", "SufficientPods")
            } else {
                ("False", "InsufficientPods")
            };
            set_condition(p, "DisruptionAllowed", s, reason, now);
        });
    }
}
