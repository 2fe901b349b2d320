//! The workload cluster's API, whatever the cloud: its nodes ([`GuestCluster`]) and
//! draining them ([`GuestDrain`], F9), through the client [`WorkloadClients`] gives for
//! the cluster. [`KubeGuest`] is this for any cloud; the node's providerID is read in the
//! cloud's own format ([`ProviderIdFormat`]).
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
use std::sync::Arc;

use flightdeck_cloud::{
    Clock, CloudError, ErrorClass, GuestCluster, GuestDrain, Node, Ownership, Pod, Timestamp,
};
use k8s_openapi::api::core::v1 as core;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::clients::WorkloadClients;
use crate::errors::{self, CallKind, WORKLOAD, workload_unreachable};
use crate::list::{ListError, list_all};
use crate::provider_id::ProviderIdFormat;
use crate::pumped::PumpedWatches;
use crate::watch::NodeWatches;

/// The annotation the kubelet puts on the mirror pod of a static pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

pub use crate::node::node_of;

/// Where bootstrap tokens live.
pub const BOOTSTRAP_TOKEN_NAMESPACE: &str = "kube-system";
/// The type of a bootstrap token's Secret.
pub const BOOTSTRAP_TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";

/// flightdeck's ownership tags (`flightdeck-uid=<uid>`, ...) as the `flightdeck.dev/…`
/// labels its Kubernetes objects carry (`flightdeck.dev/uid: <uid>`).
fn labels_of_tags(tags: &[String]) -> std::collections::BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| {
            let (key, value) = t.split_once('=')?;
            let key = key.strip_prefix("flightdeck-")?;
            Some((format!("flightdeck.dev/{key}"), value.to_string()))
        })
        .collect()
}

/// The Secret of bootstrap token `token`, its values base64-encoded by the client.
fn token_secret(token: &flightdeck_cloud::BootstrapTokenSecret) -> core::Secret {
    core::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(token.name()),
            namespace: Some(BOOTSTRAP_TOKEN_NAMESPACE.to_string()),
            labels: Some(labels_of_tags(&token.tags)),
            ..Default::default()
        },
        type_: Some(BOOTSTRAP_TOKEN_TYPE.to_string()),
        data: Some(
            token
                .data
                .iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
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
/// The merge patch that sets (or, for `None`, removes) `labels` and, when given,
/// replaces the node's taints with `taints` (a merge patch replaces a list whole).
pub fn metadata_patch(
    labels: &std::collections::BTreeMap<String, Option<String>>,
    taints: Option<&[flightdeck_cloud::Taint]>,
) -> serde_json::Value {
    let mut patch = serde_json::json!({});
    if !labels.is_empty() {
        patch["metadata"] = serde_json::json!({ "labels": labels });
    }
    if let Some(t) = taints {
        patch["spec"] = serde_json::json!({ "taints": t });
    }
    patch
}

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

/// The workload cluster of any cloud, reached through `W`'s client for it.
///
/// Its nodes are watched ([`KubeGuest::watching`]) by a product that runs in real time;
/// watched and read on demand ([`KubeGuest::pumped`]) in the simulator's deterministic
/// runs, whose virtual time a long-lived request would not follow; or listed on every
/// read ([`KubeGuest::new`]), as the wire runs of KubeVirt scenarios do.
pub struct KubeGuest<W> {
    clients: W,
    format: ProviderIdFormat,
    watches: Option<NodeWatches>,
    pumped: Option<PumpedWatches>,
}

impl<W> std::fmt::Debug for KubeGuest<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeGuest")
            .field("format", &self.format)
            .field("watches", &self.watches)
            .field("pumped", &self.pumped)
            .finish_non_exhaustive()
    }
}

impl<W> KubeGuest<W> {
    /// Nodes listed on every read.
    pub fn new(clients: W, format: ProviderIdFormat) -> Self {
        KubeGuest {
            clients,
            format,
            watches: None,
            pumped: None,
        }
    }

    /// Nodes watched, one watch per workload cluster (see [`crate::watch`]); `clock`
    /// stamps when a watch broke.
    pub fn watching(clients: W, format: ProviderIdFormat, clock: Arc<dyn Clock>) -> Self {
        KubeGuest {
            clients,
            format,
            watches: Some(NodeWatches::new(clock, format)),
            pumped: None,
        }
    }

    /// Nodes watched, one watch per workload cluster, read when they are read (see
    /// [`crate::pumped`]): where time is virtual, as in the simulator's runs, whose
    /// transport carries a watch on demand and ends each part with a bookmark.
    pub fn pumped(clients: W, format: ProviderIdFormat, clock: Arc<dyn Clock>) -> Self {
        KubeGuest {
            clients,
            format,
            watches: None,
            pumped: Some(PumpedWatches::new(clock, format)),
        }
    }

    /// The same, with its nodes watched from now on.
    pub fn with_watch(self, clock: Arc<dyn Clock>) -> Self {
        KubeGuest::watching(self.clients, self.format, clock)
    }

    /// The same, with its nodes watched and read on demand from now on.
    pub fn with_pumped_watch(self, clock: Arc<dyn Clock>) -> Self {
        KubeGuest::pumped(self.clients, self.format, clock)
    }

    pub fn clients(&self) -> &W {
        &self.clients
    }

    pub fn format(&self) -> ProviderIdFormat {
        self.format
    }

    /// How many node events `owner`'s watch dropped as older than the state it held
    /// (0 without a watch).
    pub fn nodes_out_of_order(&self, owner: &Ownership) -> u64 {
        match (&self.watches, &self.pumped) {
            (Some(w), _) => w.out_of_order(owner),
            (_, Some(p)) => p.out_of_order(owner),
            _ => 0,
        }
    }
}

impl<W: WorkloadClients> KubeGuest<W> {
    async fn workload_client(&self, owner: &Ownership) -> Result<Option<Client>> {
        self.clients.client(owner).await
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

impl<W: WorkloadClients> GuestCluster for KubeGuest<W> {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        const OP: &str = "list nodes";
        let Some(client) = self.workload_client(owner).await? else {
            return Ok(None);
        };
        if let Some(watches) = &self.watches {
            watches.forget_idle();
            return Ok(watches.read(owner, client).nodes);
        }
        if let Some(pumped) = &self.pumped {
            return Ok(pumped.read(owner, client).await.nodes);
        }
        let api: Api<core::Node> = Api::all(client);
        let nodes = reachable(OP, list_all(&api, &ListParams::default()).await)?;
        Ok(nodes.map(|ns| ns.iter().map(|n| node_of(n, self.format)).collect()))
    }

    fn nodes_stale_since(&self, owner: &Ownership) -> Option<Timestamp> {
        let (at, why) = match (&self.watches, &self.pumped) {
            (Some(w), _) => w.broken(owner)?,
            (_, Some(p)) => p.broken(owner)?,
            _ => return None,
        };
        tracing::debug!(cluster = %owner.cluster, %at, why, "nodes come from a broken watch");
        Some(at)
    }

    fn forget_node_watches(&self) {
        if let Some(w) = &self.watches {
            w.forget_all();
        }
        if let Some(p) = &self.pumped {
            p.forget_all();
        }
    }
}

impl<W: WorkloadClients> GuestDrain for KubeGuest<W> {
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

    async fn patch_node_metadata(
        &self,
        owner: &Ownership,
        node: &str,
        labels: &std::collections::BTreeMap<String, Option<String>>,
        taints: Option<&[flightdeck_cloud::Taint]>,
    ) -> Result<()> {
        const OP: &str = "patch node";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Node> = Api::all(client);
        api.patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(metadata_patch(labels, taints)),
        )
        .await
        .map_err(workload_error(OP, CallKind::Plain))?;
        tracing::debug!(node, "patched node labels and taints");
        Ok(())
    }

    async fn delete_node(&self, owner: &Ownership, node: &str) -> Result<()> {
        const OP: &str = "delete node";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Node> = Api::all(client);
        match api.delete(node, &DeleteParams::default()).await {
            Ok(_) => {}
            // Gone already (by the cloud controller manager, say): what was asked holds.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(workload_error(OP, CallKind::Plain)(e)),
        }
        tracing::debug!(node, "deleted node");
        Ok(())
    }

    async fn create_bootstrap_token(
        &self,
        owner: &Ownership,
        token: &flightdeck_cloud::BootstrapTokenSecret,
    ) -> Result<()> {
        const OP: &str = "create secret";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Secret> = Api::namespaced(client, BOOTSTRAP_TOKEN_NAMESPACE);
        api.create(&PostParams::default(), &token_secret(token))
            .await
            .map_err(workload_error(OP, CallKind::Plain))?;
        // The id is public; the token's secret is never logged.
        tracing::debug!(token = %token.id, "created bootstrap token");
        Ok(())
    }

    async fn set_bootstrap_token_expiration(
        &self,
        owner: &Ownership,
        id: &str,
        expiration: &str,
    ) -> Result<()> {
        const OP: &str = "patch secret";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Secret> = Api::namespaced(client, BOOTSTRAP_TOKEN_NAMESPACE);
        // `data` as the API server keeps it (base64, which ByteString writes).
        let value = k8s_openapi::ByteString(expiration.as_bytes().to_vec());
        let patch = serde_json::json!({ "data": { "expiration": value } });
        api.patch(
            &format!("bootstrap-token-{id}"),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(workload_error(OP, CallKind::Plain))?;
        tracing::debug!(token = id, expiration, "extended bootstrap token");
        Ok(())
    }

    async fn delete_bootstrap_token(&self, owner: &Ownership, id: &str) -> Result<()> {
        const OP: &str = "delete secret";
        let client = self.workload_client_or_unreachable(owner, OP).await?;
        let api: Api<core::Secret> = Api::namespaced(client, BOOTSTRAP_TOKEN_NAMESPACE);
        match api
            .delete(&format!("bootstrap-token-{id}"), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            // Gone already (expired and cleaned, or deleted by someone): what was asked holds.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(workload_error(OP, CallKind::Plain)(e)),
        }
        tracing::debug!(token = id, "deleted bootstrap token");
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
            ], "addresses": [
                {"type": "Hostname", "address": "demo-cp-1-guest"},
                {"type": "InternalIP", "address": "10.0.0.7"},
            ]},
        }))
        .expect("node");
        let got = node_of(&n, ProviderIdFormat::KubeVirt);
        assert_eq!(got.name, "demo-cp-1-guest");
        assert_eq!(got.server_id.as_deref(), Some("demo-cp-1"));
        assert!(got.ready);
        assert!(got.unschedulable);
        assert_eq!(got.pod_cidr.as_deref(), Some("10.244.3.0/24"));
        assert_eq!(got.created_at.millis(), 1_767_225_602_000);
        assert_eq!(got.internal_ip, Some([10, 0, 0, 7].into()));
    }

    #[test]
    fn an_openstack_node_is_found_by_its_server_id_and_region() {
        let n: core::Node = serde_json::from_value(json!({
            "metadata": {"name": "demo-cp-1"},
            "spec": {"providerID": "openstack://RegionOne/8f1c2a3e-1111-4a5b-9c3d-0123456789ab"},
        }))
        .expect("node");
        let got = node_of(&n, ProviderIdFormat::OpenStack);
        assert_eq!(
            got.server_id.as_deref(),
            Some("8f1c2a3e-1111-4a5b-9c3d-0123456789ab")
        );
        assert_eq!(got.internal_ip, None);
        let got = node_of(&n, ProviderIdFormat::OpenNebula);
        assert_eq!(got.server_id, None);
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
            let got = node_of(&n, ProviderIdFormat::KubeVirt);
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
