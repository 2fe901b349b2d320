//! `spec.bootstrap`: how a cluster's machines become its Kubernetes nodes.
//!
//! - `provider: none` (today's default): each machine boots its set's
//!   `machine.userData` as written; the user's cloud-init makes the cluster, and
//!   flightdeck reads its nodes through `spec.workload.kubeconfig`.
//! - `provider: kubeadm`: flightdeck makes the cluster's PKI (three CAs and the
//!   service-account key pair), keeps it sealed at rest, and (as the work of issue 41
//!   lands) writes each machine's kubeadm init or join data itself; a set's
//!   `machine.userData` is then refused, since flightdeck's own data replaces it.
//!
//! The provider is fixed when the cluster is created: a cluster's CAs cannot change
//! under it.

use serde::{Deserialize, Serialize};

/// `spec.bootstrap`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bootstrap {
    #[serde(default)]
    pub provider: BootstrapProvider,
}

impl Bootstrap {
    pub fn is_default(&self) -> bool {
        *self == Bootstrap::default()
    }

    /// flightdeck makes and keeps the cluster's PKI.
    pub fn kubeadm(&self) -> bool {
        self.provider == BootstrapProvider::Kubeadm
    }
}

/// `spec.bootstrap.provider`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BootstrapProvider {
    /// The user's `machine.userData`, as written.
    #[default]
    None,
    /// flightdeck's kubeadm bootstrap, with the cluster's PKI made and kept by it.
    Kubeadm,
}

impl std::fmt::Display for BootstrapProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BootstrapProvider::None => "none",
            BootstrapProvider::Kubeadm => "kubeadm",
        })
    }
}

/// What a cluster with `provider: kubeadm` may not also have: each set's own
/// `machine.userData` (flightdeck's data replaces it). As (field path, problem).
pub(crate) fn problems(cluster: &crate::Cluster) -> Vec<(String, String)> {
    let spec = &cluster.spec;
    if !spec.bootstrap.kubeadm() {
        return Vec::new();
    }
    let refused = |field: String| {
        (
            field,
            "spec.bootstrap.provider is kubeadm: flightdeck writes each machine's bootstrap data, so a set's own user data is refused (use provider: none to boot your own)".to_string(),
        )
    };
    let mut out = Vec::new();
    if spec.control_plane.machine.user_data.is_some() {
        out.push(refused("spec.controlPlane.machine.userData".into()));
    }
    for (i, pool) in spec.node_pools.iter().enumerate() {
        if pool.machine.user_data.is_some() {
            out.push(refused(format!("spec.nodePools[{i}].machine.userData")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::{Document, load_documents};

    const EXAMPLE: &str = include_str!("../../../examples/openstack.yaml");

    fn with(extra: &str) -> String {
        EXAMPLE.replace("  provider:\n", &format!("{extra}  provider:\n"))
    }

    #[test]
    fn the_bootstrap_is_none_unless_kubeadm_is_asked_for_and_anything_else_is_refused() {
        let docs = load_documents(EXAMPLE, "example").expect("parses");
        let Some(Document::Cluster(c)) = docs.first() else {
            panic!("a cluster");
        };
        assert!(!c.spec.bootstrap.kubeadm());
        let docs =
            load_documents(&with("  bootstrap:\n    provider: kubeadm\n"), "k").expect("parses");
        let Some(Document::Cluster(c)) = docs.first() else {
            panic!("a cluster");
        };
        assert!(c.spec.bootstrap.kubeadm());
        let e = load_documents(&with("  bootstrap:\n    provider: kubeadmm\n"), "bad")
            .expect_err("a misspelt provider")
            .to_string();
        assert!(
            e.contains("spec.bootstrap.provider") && e.contains("kubeadm"),
            "{e}"
        );
    }

    #[test]
    fn kubeadm_refuses_a_sets_own_user_data_naming_the_field() {
        let text = with("  bootstrap:\n    provider: kubeadm\n").replace(
            "        flavor: m1.xlarge\n",
            "        flavor: m1.xlarge\n        userData: boot.yaml\n",
        );
        let e = load_documents(&text, "k").expect_err("refused").to_string();
        assert!(
            e.contains("spec.nodePools[0].machine.userData") && e.contains("provider: none"),
            "{e}"
        );
    }
}
