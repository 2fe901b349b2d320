//! The Eviction subresource against PodDisruptionBudgets, and graceful pod deletion in
//! virtual time.

use crate::common;
use crate::k8s_support;

use common::{sim, wait_ms};
use flightdeck_sim::SimCloud;
use k8s_support::*;
use serde_json::{Value, json};

fn pod(sim: &SimCloud, name: &str, app: &str) {
    let p = json!({"metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": "infra-1", "containers": [{"name": "c", "image": "x"}]}});
    assert_eq!(post(sim, INFRA, PODS, p).0, 201);
}

fn pdb(sim: &SimCloud, name: &str, app: &str, min_available: Value) {
    let b = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}});
    let (code, body) = post(sim, INFRA, PDBS, b);
    assert_eq!(code, 201, "{body}");
}

fn evict(sim: &SimCloud, name: &str, version: &str) -> (u16, Value) {
    post(
        sim,
        INFRA,
        &format!("{PODS}/{name}/eviction"),
        json!({"apiVersion": version, "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"}}),
    )
}

fn pdb_status(sim: &SimCloud, name: &str) -> Value {
    get(sim, INFRA, &format!("{PDBS}/{name}")).1["status"].clone()
}

/// Two running pods `app=web` guarded by a PDB with minAvailable 1.
fn web(seed: u64) -> SimCloud {
    let sim = sim(seed);
    pod(&sim, "web-a", "web");
    pod(&sim, "web-b", "web");
    pdb(&sim, "web", "web", json!(1));
    wait_ms(&sim, 10_000);
    assert_eq!(pdb_status(&sim, "web")["disruptionsAllowed"], 1);
    sim
}

#[test]
fn eviction_is_granted_while_the_budget_allows_and_takes_the_disruption_at_once() {
    let sim = web(10);
    let (code, body) = evict(&sim, "web-a", "policy/v1");
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"], "Success");
    let status = pdb_status(&sim, "web");
    assert_eq!(
        status["disruptionsAllowed"], 0,
        "the eviction used the budget at once"
    );
    assert!(status["disruptedPods"]["web-a"].is_string());
    let (_, evicted) = get(&sim, INFRA, &format!("{PODS}/web-a"));
    assert!(
        evicted["metadata"]["deletionTimestamp"].is_string(),
        "graceful deletion started"
    );
    assert_eq!(evicted["metadata"]["deletionGracePeriodSeconds"], 30);
}

#[test]
fn eviction_that_would_violate_the_budget_answers_429_with_the_disruption_budget_cause() {
    let sim = web(11);
    assert_eq!(
        evict(&sim, "web-a", "policy/v1beta1").0,
        201,
        "kubectl 1.20 evicts through v1beta1"
    );
    let (code, body) = evict(&sim, "web-b", "policy/v1beta1");
    assert_eq!(code, 429);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(
        body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(body["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "The disruption budget web needs 1 healthy pods and has 1 currently"
    );
    let (_, still) = get(&sim, INFRA, &format!("{PODS}/web-b"));
    assert!(
        still["metadata"]["deletionTimestamp"].is_null(),
        "a refused eviction deletes nothing"
    );
}

#[test]
fn eviction_of_a_missing_pod_is_404_and_of_a_pod_under_two_budgets_is_500() {
    let sim = web(12);
    let (code, body) = evict(&sim, "nope", "policy/v1");
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(body["message"], "pods \"nope\" not found");
    pdb(&sim, "web-too", "web", json!("50%"));
    wait_ms(&sim, 10);
    let (code, body) = evict(&sim, "web-a", "policy/v1");
    assert_eq!(code, 500);
    assert_eq!(body["reason"], "InternalError");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[test]
fn pending_finished_and_terminating_pods_are_evicted_without_a_budget_check() {
    let sim = sim(13);
    // A budget nothing may pass: minAvailable 100%.
    pdb(&sim, "all", "job", json!("100%"));
    let pending = json!({"metadata": {"name": "pending", "labels": {"app": "job"}},
        "spec": {"containers": [{"name": "c", "image": "x"}], "nodeSelector": {"none": "none"}}});
    // No node is cordoned, so make it stay Pending by cordoning all nodes first.
    for n in ["infra-1", "infra-2", "infra-3"] {
        merge_patch(
            &sim,
            INFRA,
            &format!("/api/v1/nodes/{n}"),
            json!({"spec": {"unschedulable": true}}),
        );
    }
    assert_eq!(post(&sim, INFRA, PODS, pending).0, 201);
    pod(&sim, "done", "job");
    wait_ms(&sim, 10_000);
    let (code, _) = call(
        &sim,
        INFRA,
        "PUT",
        &format!("{PODS}/done/status"),
        Some({
            let (_, mut p) = get(&sim, INFRA, &format!("{PODS}/done"));
            p["status"]["phase"] = json!("Succeeded");
            p
        }),
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(pdb_status(&sim, "all")["disruptionsAllowed"], 0);
    assert_eq!(evict(&sim, "pending", "policy/v1").0, 201);
    assert_eq!(
        get(&sim, INFRA, &format!("{PODS}/pending")).0,
        404,
        "an unscheduled pod goes at once"
    );
    assert_eq!(evict(&sim, "done", "policy/v1").0, 201);
    pod(&sim, "busy", "job");
    wait_ms(&sim, 10_000);
    assert_eq!(evict(&sim, "busy", "policy/v1").0, 429);
    delete(&sim, INFRA, &format!("{PODS}/busy"));
    assert_eq!(
        evict(&sim, "busy", "policy/v1").0,
        201,
        "a terminating pod is not checked"
    );
}

#[test]
fn graceful_pod_deletion_takes_the_grace_period_in_virtual_time() {
    let sim = sim(14);
    pod(&sim, "p", "x");
    pod(&sim, "q", "x");
    pod(&sim, "r", "x");
    wait_ms(&sim, 10_000);
    let (code, p) = call(
        &sim,
        INFRA,
        "DELETE",
        &format!("{PODS}/p"),
        Some(json!({"gracePeriodSeconds": 10})),
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 10);
    let (_, q) = delete(&sim, INFRA, &format!("{PODS}/q"));
    assert_eq!(
        q["metadata"]["deletionGracePeriodSeconds"], 30,
        "the default grace period"
    );
    let (code, _) = delete(&sim, INFRA, &format!("{PODS}/r?gracePeriodSeconds=0"));
    assert_eq!(code, 200);
    assert_eq!(
        get(&sim, INFRA, &format!("{PODS}/r")).0,
        404,
        "grace 0 deletes at once"
    );
    wait_ms(&sim, 9_999);
    assert_eq!(
        get(&sim, INFRA, &format!("{PODS}/p")).0,
        200,
        "still terminating"
    );
    wait_ms(&sim, 1);
    assert_eq!(get(&sim, INFRA, &format!("{PODS}/p")).0, 404);
    assert_eq!(get(&sim, INFRA, &format!("{PODS}/q")).0, 200);
    wait_ms(&sim, 20_000);
    assert_eq!(get(&sim, INFRA, &format!("{PODS}/q")).0, 404);
}
