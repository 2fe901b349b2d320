//! KubeVirt as flightdeck sees it: machines are `kubevirt.io/v1` VirtualMachines in an
//! infrastructure Kubernetes cluster, their running instances (VMIs) are observed, and
//! the workload cluster's nodes are drained through the Eviction API before a VMI that
//! KubeVirt asks to evacuate is deleted (F9).
//!
//! VMs are [`crate::Server`]s: the KubeVirt provider maps a VM and its VMI onto a server
//! whose ID is the VM's name, whose flavor is its instancetype and whose image is its
//! container disk; ownership tags are the VM's labels.

use std::collections::BTreeMap;
use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::Taint;
use crate::error::{CloudError, ErrorClass};
use crate::ownership::Ownership;
use crate::provider::Result;

/// `spec.evictionStrategy` of a VMI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvictionStrategy {
    None,
    LiveMigrate,
    LiveMigrateIfPossible,
    External,
    /// Any other value, verbatim.
    Other(String),
}

impl EvictionStrategy {
    pub fn parse(s: &str) -> EvictionStrategy {
        match s {
            "None" => EvictionStrategy::None,
            "LiveMigrate" => EvictionStrategy::LiveMigrate,
            "LiveMigrateIfPossible" => EvictionStrategy::LiveMigrateIfPossible,
            "External" => EvictionStrategy::External,
            other => EvictionStrategy::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            EvictionStrategy::None => "None",
            EvictionStrategy::LiveMigrate => "LiveMigrate",
            EvictionStrategy::LiveMigrateIfPossible => "LiveMigrateIfPossible",
            EvictionStrategy::External => "External",
            EvictionStrategy::Other(s) => s,
        }
    }
}

/// A VirtualMachineInstance (`kubevirt.io/v1`), as far as F9 cares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vmi {
    /// The VMI's name, which is its VM's name.
    pub name: String,
    pub uid: String,
    /// `status.phase`: Pending, Scheduling, Scheduled, Running, Succeeded, Failed.
    pub phase: String,
    /// `status.nodeName`: the infra node it runs on.
    pub node: Option<String>,
    pub eviction_strategy: Option<EvictionStrategy>,
    /// `status.evacuationNodeName`: set by KubeVirt when the infra node is drained and
    /// the strategy is External. It names the **infra** node, never the guest node.
    pub evacuation_node: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The VMI's labels, rendered as flightdeck's ownership tags.
    pub tags: Vec<String>,
}

/// A pod of the workload cluster, as a drain sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.nodeName`.
    pub node: String,
    /// `status.phase`: Pending, Running, Succeeded, Failed, Unknown.
    pub phase: String,
    /// Owned by a DaemonSet: a drain skips it (`--ignore-daemonsets`).
    pub daemon_set: bool,
    /// A static pod mirrored by the kubelet (`kubernetes.io/config.mirror`): skipped.
    pub mirror: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Pod {
    /// Whether a drain must move this pod off its node.
    pub fn must_leave(&self) -> bool {
        !self.daemon_set && !self.mirror
    }

    /// Pods that need no PodDisruptionBudget check are deleted directly.
    pub fn deleted_directly(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed" | "Pending") || self.deleting
    }
}

/// The `kubevirt.io/v1` VirtualMachine flightdeck asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualMachineCreate {
    pub name: String,
    /// `spec.instancetype.name`.
    pub instancetype: String,
    /// The container disk image.
    pub image: String,
    /// Always `External` for flightdeck's machines (F9).
    pub eviction_strategy: EvictionStrategy,
    /// `spec.runStrategy`, e.g. `Always`.
    pub run_strategy: String,
    /// Ownership tags, stored as labels.
    pub tags: Vec<String>,
    /// Whether its VMI serves the control plane (selected by the endpoint Service).
    pub control_plane: bool,
    /// Cloud-init user data, variables filled in: a `cloudInitNoCloud` volume.
    pub user_data: Option<String>,
}

/// The control-plane endpoint: a Service in the infra cluster selecting the cluster's
/// control-plane VMIs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointService {
    pub name: String,
    pub port: u16,
    /// `spec.clusterIP` (or the load balancer's address) once assigned.
    pub address: Option<String>,
    pub tags: Vec<String>,
}

/// The infra cluster's KubeVirt objects. VMs themselves go through [`crate::Compute`].
///
/// The default methods answer that the cloud has no KubeVirt, so a provider for another
/// cloud need not pretend to have it; the planner asks only when the cluster's spec names
/// KubeVirt.
pub trait VirtualMachines {
    /// The cluster's VMIs (by its ownership labels).
    fn list_vmis(&self, owner: &Ownership) -> impl Future<Output = Result<Vec<Vmi>>> + Send {
        let _ = owner;
        async { Err(unsupported("list virtualmachineinstances")) }
    }
    /// Deletes one VMI; its VM (runStrategy Always) starts a new one.
    fn delete_vmi(&self, name: &str) -> impl Future<Output = Result<()>> + Send {
        let _ = name;
        async { Err(unsupported("delete virtualmachineinstance")) }
    }
    fn list_endpoint_services(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Vec<EndpointService>>> + Send {
        let _ = owner;
        async { Err(unsupported("list services")) }
    }
    fn create_endpoint_service(
        &self,
        req: &EndpointService,
    ) -> impl Future<Output = Result<EndpointService>> + Send {
        let _ = req;
        async { Err(unsupported("create service")) }
    }
    fn delete_endpoint_service(&self, name: &str) -> impl Future<Output = Result<()>> + Send {
        let _ = name;
        async { Err(unsupported("delete service")) }
    }
}

/// Draining the workload cluster's nodes before their machines go, and deleting the
/// Nodes of machines that are gone. A 429 from the Eviction API ("would
/// violate the pod's disruption budget") is a [`ErrorClass::Conflict`]: look again later.
pub trait GuestDrain {
    /// The pods on `node` (`fieldSelector=spec.nodeName=NODE`); `Ok(None)` when the
    /// workload cluster's API cannot be reached.
    fn list_pods_on(
        &self,
        owner: &Ownership,
        node: &str,
    ) -> impl Future<Output = Result<Option<Vec<Pod>>>> + Send {
        let _ = (owner, node);
        async { Err(unsupported("list pods")) }
    }
    /// Patches `spec.unschedulable`.
    fn set_unschedulable(
        &self,
        owner: &Ownership,
        node: &str,
        unschedulable: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, node, unschedulable);
        async { Err(unsupported("patch node")) }
    }
    /// `POST …/pods/{name}/eviction`.
    fn evict_pod(
        &self,
        owner: &Ownership,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, namespace, name);
        async { Err(unsupported("create eviction")) }
    }
    /// `DELETE …/pods/{name}`, for pods that need no disruption-budget check.
    fn delete_pod(
        &self,
        owner: &Ownership,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, namespace, name);
        async { Err(unsupported("delete pod")) }
    }
    /// A merge patch of a Node's labels (`None` removes one) and, when given, its whole
    /// list of taints.
    fn patch_node_metadata(
        &self,
        owner: &Ownership,
        node: &str,
        labels: &BTreeMap<String, Option<String>>,
        taints: Option<&[Taint]>,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, node, labels, taints);
        async { Err(unsupported("patch node")) }
    }
    /// `DELETE /api/v1/nodes/{name}`: the Node of a machine that is gone. A Node
    /// already gone is no error (`Ok`).
    fn delete_node(
        &self,
        owner: &Ownership,
        node: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, node);
        async { Err(unsupported("delete node")) }
    }
    /// `POST /api/v1/namespaces/kube-system/secrets`: a bootstrap token a joining
    /// machine authenticates with (kubeadm's bootstrap). A token of that id already
    /// there is [`ErrorClass::AlreadyExists`].
    fn create_bootstrap_token(
        &self,
        owner: &Ownership,
        token: &BootstrapTokenSecret,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, token);
        async { Err(unsupported("create secret")) }
    }
    /// A merge patch of the token's `expiration` (RFC 3339, UTC): the token lives on
    /// while its machine has not joined. A token gone (an operator deleted it, or it
    /// expired and the token cleaner took it) is [`ErrorClass::NotFound`].
    fn set_bootstrap_token_expiration(
        &self,
        owner: &Ownership,
        id: &str,
        expiration: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, id, expiration);
        async { Err(unsupported("patch secret")) }
    }
    /// `DELETE` of the token's Secret, once its machine joined or went. A token already
    /// gone is no error (`Ok`).
    fn delete_bootstrap_token(
        &self,
        owner: &Ownership,
        id: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (owner, id);
        async { Err(unsupported("delete secret")) }
    }
}

/// A bootstrap token's Secret as kubeadm writes it (`bootstrap-token-<id>` in
/// `kube-system`, type `bootstrap.kubernetes.io/token`), its values in the clear (the
/// API server keeps them base64-encoded). It holds the token's secret: its `Debug`
/// shows the id and the keys, never a value.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapTokenSecret {
    /// The token's public id (`[a-z0-9]{6}`).
    pub id: String,
    /// `token-id`, `token-secret`, `expiration`, the usages and groups.
    pub data: BTreeMap<String, String>,
    /// The ownership tags of the machine it is for, carried as `flightdeck.dev/…`
    /// labels: the Secret is flightdeck's, and that machine's.
    pub tags: Vec<String>,
}

impl BootstrapTokenSecret {
    /// The Secret's name.
    pub fn name(&self) -> String {
        format!("bootstrap-token-{}", self.id)
    }
}

impl std::fmt::Debug for BootstrapTokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapTokenSecret")
            .field("id", &self.id)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .field("tags", &self.tags)
            .finish()
    }
}

/// The [`GuestDrain`] methods of a provider that drains through its workload cluster
/// (a field holding a `GuestDrain`, such as `flightdeck_workload::KubeGuest`): each
/// forwards to that field. Every cloud's provider drains the same way.
#[macro_export]
macro_rules! forward_guest_drain {
    ($field:ident) => {
        async fn list_pods_on(
            &self,
            owner: &$crate::Ownership,
            node: &str,
        ) -> $crate::provider::Result<Option<Vec<$crate::Pod>>> {
            self.$field.list_pods_on(owner, node).await
        }
        async fn set_unschedulable(
            &self,
            owner: &$crate::Ownership,
            node: &str,
            unschedulable: bool,
        ) -> $crate::provider::Result<()> {
            self.$field
                .set_unschedulable(owner, node, unschedulable)
                .await
        }
        async fn evict_pod(
            &self,
            owner: &$crate::Ownership,
            namespace: &str,
            name: &str,
        ) -> $crate::provider::Result<()> {
            self.$field.evict_pod(owner, namespace, name).await
        }
        async fn delete_pod(
            &self,
            owner: &$crate::Ownership,
            namespace: &str,
            name: &str,
        ) -> $crate::provider::Result<()> {
            self.$field.delete_pod(owner, namespace, name).await
        }
        async fn patch_node_metadata(
            &self,
            owner: &$crate::Ownership,
            node: &str,
            labels: &std::collections::BTreeMap<String, Option<String>>,
            taints: Option<&[$crate::Taint]>,
        ) -> $crate::provider::Result<()> {
            self.$field
                .patch_node_metadata(owner, node, labels, taints)
                .await
        }
        async fn delete_node(
            &self,
            owner: &$crate::Ownership,
            node: &str,
        ) -> $crate::provider::Result<()> {
            self.$field.delete_node(owner, node).await
        }
        async fn create_bootstrap_token(
            &self,
            owner: &$crate::Ownership,
            token: &$crate::BootstrapTokenSecret,
        ) -> $crate::provider::Result<()> {
            self.$field.create_bootstrap_token(owner, token).await
        }
        async fn set_bootstrap_token_expiration(
            &self,
            owner: &$crate::Ownership,
            id: &str,
            expiration: &str,
        ) -> $crate::provider::Result<()> {
            self.$field
                .set_bootstrap_token_expiration(owner, id, expiration)
                .await
        }
        async fn delete_bootstrap_token(
            &self,
            owner: &$crate::Ownership,
            id: &str,
        ) -> $crate::provider::Result<()> {
            self.$field.delete_bootstrap_token(owner, id).await
        }
    };
}

fn unsupported(operation: &str) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        "kubevirt",
        operation,
        None,
        "this cloud has no KubeVirt; the cluster's spec.provider names another cloud",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, daemon_set: bool, mirror: bool) -> Pod {
        Pod {
            namespace: "default".into(),
            name: "p".into(),
            uid: "u".into(),
            node: "n".into(),
            phase: phase.into(),
            daemon_set,
            mirror,
            deleting: false,
        }
    }

    #[test]
    fn a_drain_skips_daemonset_and_mirror_pods() {
        assert!(pod("Running", false, false).must_leave());
        assert!(!pod("Running", true, false).must_leave());
        assert!(!pod("Running", false, true).must_leave());
    }

    #[test]
    fn finished_and_pending_pods_need_no_budget_check() {
        for phase in ["Succeeded", "Failed", "Pending"] {
            assert!(pod(phase, false, false).deleted_directly(), "{phase}");
        }
        assert!(!pod("Running", false, false).deleted_directly());
    }

    #[test]
    fn eviction_strategies_round_trip() {
        for s in [
            "None",
            "LiveMigrate",
            "LiveMigrateIfPossible",
            "External",
            "Odd",
        ] {
            assert_eq!(EvictionStrategy::parse(s).as_str(), s);
        }
    }
}
