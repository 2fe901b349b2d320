//! The workload cluster's API: its nodes ([`GuestCluster`]) and draining them
//! ([`GuestDrain`], F9), through the client [`WorkloadClients`] gives for the cluster.
//!
//! Lists answer `Ok(None)` while the workload cluster cannot be reached (no client yet,
//! connection refused, or 503), because nothing may be concluded about its nodes then.
//! A mutation in that state is a Transient error: the engine looks again later.
//!
//! Evictions go through kube-rs's `Api::<Pod>::evict`, which POSTs
//! `{"metadata": {"name": …}, "delete_options": null}` without `apiVersion` or `kind`: the
//! API server reads such a body as the subresource's own version, `policy/v1` Eviction
//! (Kubernetes 1.22 and later; 1.25 removed `policy/v1beta1`). No delete options are
//! passed: kube 5 spells the field `delete_options`, which the API server would not read.

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{CloudError, ErrorClass, GuestCluster, GuestDrain, Node, Ownership, Pod};
use k8s_openapi::api::core::v1 as core;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};

use crate::errors::{self, CallKind, WORKLOAD, workload_unreachable};
use crate::list::{ListError, list_all};
use crate::provider::KubeVirtCloud;
use crate::servers::timestamp_of;
use crate::workload::WorkloadClients;

/// The providerID scheme KubeVirt's cloud controller manager gives guest nodes.
pub const PROVIDER_ID_PREFIX: &str = "kubevirt://";
/// The annotation the kubelet puts on the mirror pod of a static pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A workload Node as flightdeck's [`Node`]; `server_id` is the VM's name from the
/// providerID `kubevirt://<vm>`.
pub fn node_of(n: &core::Node) -> Node {
    let spec = n.spec.clone().unwrap_or_default();
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        server_id: spec
            .provider_id
            .as_deref()
            .and_then(|p| p.strip_prefix(PROVIDER_ID_PREFIX))
            .map(|vm| vm.trim_matches('/'))
            .filter(|vm| !vm.is_empty())
            .map(str::to_string),
        ready,
        unschedulable: spec.unschedulable.unwrap_or(false),
        created_at: timestamp_of(n.metadata.creation_timestamp.as_ref()),
        pod_cidr: spec.pod_cidr.filter(|c| !c.is_empty()),
    }
}

/// A workload Pod as a drain sees it.
pub fn pod_of(p: &core::Pod) -> Pod {
    let meta = &p.metadata;
    Pod {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        node: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        phase: p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        daemon_set: meta
            .owner_references
            .as_ref()
            .is_some_and(|os| os.iter().any(|o| o.kind == "DaemonSet")),
        mirror: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)),
        deleting: meta.deletion_timestamp.is_some(),
    }
}

/// `fieldSelector` for the pods on `node`.
pub fn pods_on_selector(node: &str) -> String {
    format!("spec.nodeName={node}")
}

/// The body that cordons (or uncordons) a node, sent as a JSON merge patch.
pub fn unschedulable_patch(unschedulable: bool) -> serde_json::Value {
    serde_json::json!({"spec": {"unschedulable": unschedulable}})
}

fn unreachable(operation: &str) -> CloudError {
    CloudError::new(
        ErrorClass::Transient,
        WORKLOAD,
        operation,
        None,
        "the workload cluster's API is not reachable yet",
    )
}

fn workload_error(operation: &str, kind: CallKind) -> impl FnOnce(kube::Error) -> CloudError + '_ {
    move |e| errors::cloud_error(WORKLOAD, operation, kind, e)
}

/// A list of the workload cluster: `Ok(None)` when it cannot be reached.
fn reachable<T>(operation: &str, r: std::result::Result<T, ListError>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(ListError::Kube(e)) if workload_unreachable(&e) => {
            tracing::debug!(operation, "workload cluster not reachable");
            Ok(None)
        }
        Err(e) => Err(e.into_cloud(WORKLOAD, operation)),
    }
}

impl<W: WorkloadClients> KubeVirtCloud<W> {
    async fn workload_client(&self, owner: &Ownership) -> Result<Option<Client>> {
        self.workload().client(owner).await
    }

    async fn workload_client_or_unreachable(
        &self,
        owner: &Ownership,
        operation: &str,
    ) -> Result<Client> {
        self.workload_client(owner)
            .await?
            .ok_or_else(|| unreachable(operation))
    }
}

impl<W: WorkloadClients> GuestCluster for KubeVirtCloud<W> {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        const OP: &str = "list nodes";
        let Some(client) = self.workload_client(owner).await? else {
            return Ok(None);
        };
        let api: Api<core::Node> = Api::all(client);
        let nodes = reachable(OP, list_all(&api, &ListParams::default()).await)?;
        Ok(nodes.map(|ns| ns.iter().map(node_of).collect()))
    }
}

impl<W: WorkloadClients> GuestDrain for KubeVirtCloud<W> {
    async fn list_pods_on(&self, owner: &Ownership, node: &str) -> Result<Option<Vec<Pod>>> {
        const OP: &str = "list pods";
        let Some(client) = self.workload_client(owner).await? else {
            return Ok(None);
        };
        let api: Api<core::Pod> = Api::all(client);
        let lp = ListParams::default().fields(&pods_on_selector(node));
        let pods = reachable(OP, list_all(&api, &lp).await)?;
        Ok(pods.map(|ps| ps.iter().map(pod_of).collect()))
    }

    async fn set_unschedulable(
        &self,
        owner: &Ownership,
        node: &str,
        unschedulable: bool,
    ) -> Result<()> {
        const OP: &str = "patch node";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Node> = Api::all(client);
        api.patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(unschedulable_patch(unschedulable)),
        )
        .await
        .map_err(workload_error(OP, CallKind::Plain))?;
        tracing::debug!(node, unschedulable, "patched node");
        Ok(())
    }

    async fn evict_pod(&self, owner: &Ownership, namespace: &str, name: &str) -> Result<()> {
        const OP: &str = "create eviction";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Pod> = Api::namespaced(client, namespace);
        api.evict(name, &EvictParams::default())
            .await
            .map_err(workload_error(OP, CallKind::Eviction))?;
        tracing::debug!(namespace, pod = name, "evicted pod");
        Ok(())
    }

    async fn delete_pod(&self, owner: &Ownership, namespace: &str, name: &str) -> Result<()> {
        const OP: &str = "delete pod";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Pod> = Api::namespaced(client, namespace);
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(workload_error(OP, CallKind::Plain))?;
        tracing::debug!(namespace, pod = name, "deleted pod");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_node_is_found_by_its_kubevirt_provider_id() {
        let n: core::Node = serde_json::from_value(json!({
            "metadata": {"name": "demo-cp-1-guest", "creationTimestamp": "2026-01-01T00:00:02Z"},
            "spec": {"providerID": "kubevirt://demo-cp-1", "unschedulable": true, "podCIDR": "10.244.3.0/24"},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]},
        }))
        .expect("node");
        let got = node_of(&n);
        assert_eq!(got.name, "demo-cp-1-guest");
        assert_eq!(got.server_id.as_deref(), Some("demo-cp-1"));
        assert!(got.ready);
        assert!(got.unschedulable);
        assert_eq!(got.pod_cidr.as_deref(), Some("10.244.3.0/24"));
        assert_eq!(got.created_at.millis(), 1_767_225_602_000);
    }

    #[test]
    fn a_node_without_a_kubevirt_provider_id_has_no_server() {
        for spec in [
            json!({}),
            json!({"providerID": "openstack:///abc"}),
            json!({"providerID": "kubevirt://"}),
        ] {
            let n: core::Node = serde_json::from_value(json!({
                "metadata": {"name": "n"}, "spec": spec,
                "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
            }))
            .expect("node");
            let got = node_of(&n);
            assert_eq!(got.server_id, None, "{spec}");
            assert!(!got.ready);
            assert!(!got.unschedulable);
        }
    }

    #[test]
    fn daemonset_and_mirror_pods_are_recognised() {
        let p: core::Pod = serde_json::from_value(json!({
            "metadata": {"name": "proxy", "namespace": "kube-system", "uid": "1",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy", "uid": "d"}]},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running"},
        }))
        .expect("pod");
        let got = pod_of(&p);
        assert!(got.daemon_set && !got.mirror && !got.must_leave());
        assert_eq!(
            (
                got.namespace.as_str(),
                got.name.as_str(),
                got.node.as_str(),
                got.phase.as_str()
            ),
            ("kube-system", "proxy", "n1", "Running")
        );

        let p: core::Pod = serde_json::from_value(json!({
            "metadata": {"name": "etcd-n1", "namespace": "kube-system",
                "annotations": {"kubernetes.io/config.mirror": "abc"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n"}]},
            "spec": {"nodeName": "n1", "containers": []},
        }))
        .expect("pod");
        let got = pod_of(&p);
        assert!(got.mirror && !got.daemon_set && !got.must_leave());

        let p: core::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "app", "deletionTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r"}]},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running"},
        }))
        .expect("pod");
        let got = pod_of(&p);
        assert!(got.must_leave() && got.deleting);
    }
}
