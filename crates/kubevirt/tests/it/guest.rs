//! The workload side against a fake API: nodes, pods, cordons and evictions, and what a
//! workload cluster that cannot be reached answers.

use crate::support;

use flightdeck_cloud::{CloudError, ErrorClass, GuestCluster, GuestDrain, Ownership};
use flightdeck_kubevirt::{KubeVirtCloud, WorkloadClients, WorkloadFn};
use serde_json::json;
use support::{Answer, list, owner, seen, status};

/// A provider whose infra cluster must not be called and whose workload cluster is
/// `workload`.
fn cloud(workload: kube::Client) -> KubeVirtCloud<impl WorkloadClients> {
    let (infra, _) =
        support::client(|_| status(500, "InternalError", "the infra cluster was called"));
    KubeVirtCloud::new(
        infra,
        "infra",
        WorkloadFn::new(move |_| Ok(Some(workload.clone()))),
    )
}

const PDB_MESSAGE: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

#[tokio::test]
async fn no_workload_client_yet_means_no_nodes_and_no_pods() {
    let (infra, log) = support::client(|_| status(500, "InternalError", "unexpected"));
    let c = KubeVirtCloud::new(infra, "infra", WorkloadFn::new(|_| Ok(None)));
    assert_eq!(c.list_nodes(&owner()).await.expect("no error"), None);
    assert_eq!(
        c.list_pods_on(&owner(), "n1").await.expect("no error"),
        None
    );
    let e = c
        .set_unschedulable(&owner(), "n1", true)
        .await
        .expect_err("unreachable");
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.service, "kubernetes");
    let e = c
        .evict_pod(&owner(), "app", "web-1")
        .await
        .expect_err("unreachable");
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(seen(&log).is_empty());
}

#[tokio::test]
async fn a_workload_client_error_is_passed_on() {
    let (infra, _) = support::client(|_| status(500, "InternalError", "unexpected"));
    let c = KubeVirtCloud::new(
        infra,
        "infra",
        WorkloadFn::new(|o: &Ownership| {
            Err(CloudError::new(
                ErrorClass::Permanent,
                "kubernetes",
                "load kubeconfig",
                None,
                format!("no kubeconfig for {}", o.cluster),
            ))
        }),
    );
    let e = c.list_nodes(&owner()).await.expect_err("passed on");
    assert_eq!(e.message, "no kubeconfig for demo");
}

#[tokio::test]
async fn a_workload_api_that_refuses_or_answers_503_is_not_reachable() {
    let (client, _) = support::client(|_| Answer::Refused);
    assert_eq!(
        cloud(client).list_nodes(&owner()).await.expect("no error"),
        None
    );
    let (client, _) = support::client(|_| status(503, "ServiceUnavailable", "apiserver not ready"));
    assert_eq!(
        cloud(client).list_nodes(&owner()).await.expect("no error"),
        None
    );
    let (client, _) = support::client(|_| Answer::Refused);
    assert_eq!(
        cloud(client)
            .list_pods_on(&owner(), "n1")
            .await
            .expect("no error"),
        None
    );
}

#[tokio::test]
async fn a_forbidden_workload_api_is_a_permanent_error() {
    let (client, _) = support::client(|_| {
        status(
            403,
            "Forbidden",
            "nodes is forbidden: User \"x\" cannot list resource \"nodes\"",
        )
    });
    let e = cloud(client).list_nodes(&owner()).await.expect_err("403");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.service, "kubernetes");
    assert_eq!(e.operation, "list nodes");
    assert_eq!(e.status, Some(403));
    assert!(e.message.starts_with("nodes is forbidden"), "{e}");
}

#[tokio::test]
async fn nodes_are_mapped_to_their_vm_by_provider_id() {
    let (client, log) = support::client(|_| {
        list(vec![
            json!({"metadata": {"name": "demo-cp-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"providerID": "kubevirt://demo-cp-1", "podCIDR": "10.244.1.0/24"},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"metadata": {"name": "stray"}, "spec": {},
                   "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        ])
    });
    let nodes = cloud(client)
        .list_nodes(&owner())
        .await
        .expect("listed")
        .expect("reachable");
    assert_eq!(seen(&log)[0].path, "/api/v1/nodes");
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0].server_id.as_deref(), Some("demo-cp-1"));
    assert!(nodes[0].ready);
    assert_eq!(nodes[0].pod_cidr.as_deref(), Some("10.244.1.0/24"));
    assert_eq!(nodes[1].server_id, None);
    assert!(!nodes[1].ready);
}

#[tokio::test]
async fn pods_on_a_node_are_listed_in_all_namespaces_by_field_selector() {
    let (client, log) = support::client(|_| {
        list(vec![
            json!({"metadata": {"name": "kube-proxy-x", "namespace": "kube-system", "uid": "1",
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy", "uid": "d"}]},
                   "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}),
            json!({"metadata": {"name": "kube-apiserver-n1", "namespace": "kube-system", "uid": "2",
                    "annotations": {"kubernetes.io/config.mirror": "hash"}},
                   "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}),
            json!({"metadata": {"name": "web-1", "namespace": "app", "uid": "3"},
                   "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}),
        ])
    });
    let pods = cloud(client)
        .list_pods_on(&owner(), "n1")
        .await
        .expect("listed")
        .expect("reachable");
    let sent = seen(&log);
    assert_eq!(sent[0].path, "/api/v1/pods");
    assert_eq!(
        sent[0].query.get("fieldSelector").map(String::as_str),
        Some("spec.nodeName=n1")
    );
    let leaving: Vec<_> = pods
        .iter()
        .filter(|p| p.must_leave())
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(leaving, ["web-1"]);
    assert!(pods[0].daemon_set);
    assert!(pods[1].mirror);
}

#[tokio::test]
async fn a_cordon_is_a_merge_patch_of_spec_unschedulable() {
    let (client, log) = support::client(|_| {
        Answer::Json(
            200,
            json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}}),
        )
    });
    let c = cloud(client);
    c.set_unschedulable(&owner(), "n1", true)
        .await
        .expect("cordoned");
    c.set_unschedulable(&owner(), "n1", false)
        .await
        .expect("uncordoned");
    let sent = seen(&log);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("PATCH", "/api/v1/nodes/n1")
    );
    assert_eq!(
        sent[0].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(sent[0].body, json!({"spec": {"unschedulable": true}}));
    assert_eq!(sent[1].body, json!({"spec": {"unschedulable": false}}));
}

#[tokio::test]
async fn an_eviction_is_posted_to_the_pods_eviction_subresource() {
    let (client, log) = support::client(|_| {
        Answer::Json(
            201,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    });
    cloud(client)
        .evict_pod(&owner(), "app", "web-1")
        .await
        .expect("evicted");
    let sent = seen(&log);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("POST", "/api/v1/namespaces/app/pods/web-1/eviction")
    );
    assert_eq!(sent[0].content_type.as_deref(), Some("application/json"));
    // What kube 5 sends: no apiVersion or kind, so the API server reads it as the
    // subresource's own version (policy/v1).
    assert_eq!(sent[0].body["metadata"]["name"], "web-1");
    assert!(sent[0].body.get("apiVersion").is_none());
}

#[tokio::test]
async fn an_eviction_blocked_by_a_disruption_budget_is_a_conflict_with_the_message_verbatim() {
    let (client, _) = support::client(|_| status(429, "TooManyRequests", PDB_MESSAGE));
    let e = cloud(client)
        .evict_pod(&owner(), "app", "web-1")
        .await
        .expect_err("429");
    assert_eq!(e.class, ErrorClass::Conflict);
    assert_eq!(e.status, Some(429));
    assert_eq!(e.message, PDB_MESSAGE);
    assert_eq!(e.service, "kubernetes");
    assert_eq!(e.operation, "create eviction");
}

#[tokio::test]
async fn an_eviction_of_a_gone_pod_is_not_found_and_of_a_multi_budget_pod_permanent() {
    let (client, _) = support::client(|_| status(404, "NotFound", "pods \"web-1\" not found"));
    let e = cloud(client)
        .evict_pod(&owner(), "app", "web-1")
        .await
        .expect_err("404");
    assert_eq!(e.class, ErrorClass::NotFound);
    let multi = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
    let (client, _) = support::client(move |_| status(500, "InternalError", multi));
    let e = cloud(client)
        .evict_pod(&owner(), "app", "web-1")
        .await
        .expect_err("500");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.message, multi);
}

#[tokio::test]
async fn a_pod_that_needs_no_budget_check_is_deleted() {
    let (client, log) = support::client(|_| {
        Answer::Json(
            200,
            json!({"metadata": {"name": "job-1", "namespace": "app"}}),
        )
    });
    cloud(client)
        .delete_pod(&owner(), "app", "job-1")
        .await
        .expect("deleted");
    let sent = seen(&log);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("DELETE", "/api/v1/namespaces/app/pods/job-1")
    );
}
