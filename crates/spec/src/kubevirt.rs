//! `spec.provider.kubevirt`: machines are KubeVirt VirtualMachines in an infrastructure
//! Kubernetes cluster; the workload cluster is reached through its own kubeconfig.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::names::{Name, Text};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeVirtProvider {
    /// The infrastructure cluster's kubeconfig file. Absent: the built-in simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_kubeconfig: Option<Text>,
    /// The infra namespace the cluster's VirtualMachines and Service live in.
    #[serde(default = "default_namespace")]
    pub namespace: Name,
    /// How flightdeck reaches the workload cluster. Absent: the built-in simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_kubeconfig: Option<KubeconfigRef>,
    /// How long a guest node's drain may take before its VMI is deleted anyway (F9).
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout: Duration,
    /// The VMIs' eviction strategy. `External` (the default) hands evacuations to
    /// flightdeck's graceful drain; `LiveMigrate` lets KubeVirt move the VMs, and
    /// flightdeck leaves those VMIs alone.
    #[serde(default)]
    pub eviction_strategy: EvictionStrategySpec,
}

/// `spec.provider.kubevirt.evictionStrategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvictionStrategySpec {
    #[default]
    External,
    LiveMigrate,
    LiveMigrateIfPossible,
    None,
}

impl EvictionStrategySpec {
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionStrategySpec::External => "External",
            EvictionStrategySpec::LiveMigrate => "LiveMigrate",
            EvictionStrategySpec::LiveMigrateIfPossible => "LiveMigrateIfPossible",
            EvictionStrategySpec::None => "None",
        }
    }
}

/// A kubeconfig: a file, or a Secret in the infra namespace (key `value`, as Cluster API
/// writes `<cluster>-kubeconfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeconfigRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Name>,
}

fn default_namespace() -> Name {
    Name::known("default")
}

fn default_drain_timeout() -> Duration {
    Duration::from_mins(10)
}

impl KubeVirtProvider {
    /// Rules across the block, every one broken: the field path (below
    /// `spec.provider.kubevirt`) and the problem.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(k) = &self.workload_kubeconfig
            && k.file.is_some() == k.secret.is_some()
        {
            out.push((
                "workloadKubeconfig".into(),
                "give exactly one of file and secret".into(),
            ));
        }
        if self.drain_timeout < Duration::from_mins(1) {
            out.push((
                "drainTimeout".into(),
                format!(
                    "{} is shorter than a minute: no guest could be drained gracefully",
                    self.drain_timeout
                ),
            ));
        }
        out
    }
}
