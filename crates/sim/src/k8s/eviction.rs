//! The Eviction subresource (`POST /api/v1/namespaces/{ns}/pods/{name}/eviction`), as
//! `pkg/registry/core/pod/storage/eviction.go` answers it: a pod that is Pending,
//! finished or already being deleted is deleted without looking at budgets; otherwise
//! the one PodDisruptionBudget matching the pod must allow a disruption (429 if not,
//! 500 if several match), which the eviction takes at once (`disruptionsAllowed - 1`,
//! the pod in `status.disruptedPods`) before the pod's graceful deletion starts.

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::answers::{self, Answer};
use super::lost::{BudgetEventKind, note_budget};
use super::store::{Kind, at, deleting, name_of, obj_at, rfc3339, str_at};
use super::{disruption, pods};
use crate::State;

/// The message of the 429 when a budget allows no disruption.
pub(crate) const MESSAGE_BUDGET: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";
/// The error the 500 wraps when several budgets match the pod.
pub(crate) const MESSAGE_MULTIPLE: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

pub(crate) fn evict(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    ns: &str,
    name: &str,
    body: &[u8],
) -> Answer {
    let eviction: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return answers::fail(
                400,
                "BadRequest",
                "the body of the request was in an unknown format - accepted media types include: application/json",
            );
        }
    };
    if let Some(kind) = eviction.get("kind").and_then(Value::as_str)
        && kind != "Eviction"
    {
        return answers::fail(400, "BadRequest", &format!("kind {kind} is not Eviction"));
    }
    if let Some(v) = eviction.get("apiVersion").and_then(Value::as_str)
        && !matches!(v, "policy/v1" | "policy/v1beta1")
    {
        return answers::fail(
            400,
            "BadRequest",
            &format!("no kind \"Eviction\" is registered for version \"{v}\""),
        );
    }
    if let Some(n) = str_at(&eviction, &["metadata", "name"])
        && n != name
    {
        return answers::fail(
            400,
            "BadRequest",
            "name in URL does not match name in Eviction object",
        );
    }
    let grace = at(&eviction, &["deleteOptions", "gracePeriodSeconds"]).and_then(Value::as_u64);
    let Some(store) = st.kube.store(cluster) else {
        return answers::unavailable();
    };
    let Some(pod) = store.get(Kind::Pod, ns, name).cloned() else {
        return answers::not_found(Kind::Pod, name);
    };
    let phase = str_at(&pod, &["status", "phase"]).unwrap_or("Pending");
    let ignores_budgets = deleting(&pod) || matches!(phase, "Pending" | "Succeeded" | "Failed");
    if !ignores_budgets {
        let pdbs = disruption::pdbs_for_pod(store, &pod);
        if pdbs.len() > 1 {
            return answers::fail_with(
                500,
                "InternalError",
                &format!("Internal error occurred: {MESSAGE_MULTIPLE}"),
                Some(json!({"causes": [{"message": MESSAGE_MULTIPLE}]})),
            );
        }
        if let Some(pdb) = pdbs.first() {
            let pdb_name = name_of(pdb).to_string();
            let allowed = at(pdb, &["status", "disruptionsAllowed"])
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if allowed < 0 {
                return answers::fail(403, "Forbidden", "pdb disruptions allowed is negative");
            }
            if allowed == 0 {
                let n = |f: &str| at(pdb, &["status", f]).and_then(Value::as_i64).unwrap_or(0);
                let cause = format!(
                    "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                    n("desiredHealthy"),
                    n("currentHealthy")
                );
                note_budget(st, now, cluster, &pod, BudgetEventKind::EvictionRefused);
                return answers::fail_with(
                    429,
                    "TooManyRequests",
                    MESSAGE_BUDGET,
                    Some(json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]})),
                );
            }
            note_budget(st, now, cluster, &pod, BudgetEventKind::EvictionGranted);
            if let Some(s) = st.kube.store_mut(cluster) {
                s.modify(Kind::Pdb, ns, &pdb_name, |p| {
                    let status = obj_at(p, &["status"]);
                    status.insert("disruptionsAllowed".into(), json!(allowed - 1));
                    obj_at(p, &["status", "disruptedPods"])
                        .insert(name.to_string(), json!(rfc3339(now)));
                });
            }
        }
    }
    let touched = pods::delete_pod(st, now, cluster, ns, name, grace).or(Some(pod));
    (answers::status_response(201, "", "", None), touched)
}
