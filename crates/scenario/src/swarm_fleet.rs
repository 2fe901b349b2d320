//! The fleets a swarm seed draws: OpenStack clusters sharing one router, OpenNebula
//! clusters sharing content-addressed templates (F1), or KubeVirt clusters on one
//! infrastructure cluster (F9). One run drives one cloud.

use std::fmt::Write as _;

use flightdeck_cloud::{Rng, SeededRng};
use serde::Serialize;

/// The cloud a seed's fleet lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwarmCloud {
    OpenStack,
    OpenNebula,
    KubeVirt,
}

impl SwarmCloud {
    pub fn as_str(self) -> &'static str {
        match self {
            SwarmCloud::OpenStack => "openstack",
            SwarmCloud::OpenNebula => "opennebula",
            SwarmCloud::KubeVirt => "kubevirt",
        }
    }

    /// Six seeds in ten on OpenStack (the most fault kinds), two on each other cloud.
    pub(crate) fn draw(rng: &mut SeededRng) -> Self {
        match rng.below(10) {
            0..=5 => SwarmCloud::OpenStack,
            6 | 7 => SwarmCloud::OpenNebula,
            _ => SwarmCloud::KubeVirt,
        }
    }
}

/// The Kubernetes version every fleet starts on.
pub(crate) const FIRST_VERSION: &str = "v1.30.2";

/// Cluster `name` (the `i`-th of its fleet) on `cloud` as YAML, with `pools` node pools
/// `p1`, `p2`, … of 0 to 3 machines each.
pub(crate) fn cluster_yaml(
    rng: &mut SeededRng,
    cloud: SwarmCloud,
    name: &str,
    i: u64,
    pools: u64,
) -> String {
    // An infra node drained under a lone control-plane VMI takes the API down, and no
    // controller can help that: KubeVirt control planes keep three.
    let cp = if cloud == SwarmCloud::KubeVirt {
        *pick(rng, &[3u32, 3, 5])
    } else {
        *pick(rng, &[1u32, 3, 3, 3, 5])
    };
    let (cp_machine, worker_machine) = match cloud {
        SwarmCloud::OpenStack => (
            format!("{{flavor: m1.large, image: ubuntu-kube-{FIRST_VERSION}}}"),
            "{flavor: m1.xlarge, image: worker-a}".to_string(),
        ),
        SwarmCloud::OpenNebula => ("{template: master}".into(), "{template: worker}".into()),
        SwarmCloud::KubeVirt => (
            "{flavor: u1.medium, image: quay.io/containerdisks/ubuntu:22.04}".into(),
            "{flavor: u1.large, image: quay.io/containerdisks/ubuntu:22.04}".into(),
        ),
    };
    let mut pool_yaml = String::new();
    for p in 1..=pools {
        let _ = write!(
            pool_yaml,
            "\n    - {{name: p{p}, replicas: {}, machine: {worker_machine}}}",
            rng.between(0, 3)
        );
    }
    if pool_yaml.is_empty() {
        pool_yaml = " []".into();
    }
    let cidr = 100 + i;
    let (network, provider) = match cloud {
        SwarmCloud::OpenStack => {
            let monitor = if rng.chance(0.5) {
                "\n    healthMonitor: {}"
            } else {
                ""
            };
            (
                format!("{{podCIDR: 10.{cidr}.0.0/16, securityGroup: {name}-nodes}}\n  apiLoadBalancer:\n    port: 6443{monitor}"),
                "openstack: {cloud: sim, network: private, subnet: private-subnet, router: swarm-router}".to_string(),
            )
        }
        SwarmCloud::OpenNebula => (
            format!("{{podCIDR: 10.{cidr}.0.0/16}}"),
            format!("opennebula:\n      endpoint: 10.0.9.{i}\n{ONE_TEMPLATES}"),
        ),
        SwarmCloud::KubeVirt => (
            format!("{{podCIDR: 10.{cidr}.0.0/16}}"),
            format!(
                "kubevirt: {{namespace: default, drainTimeout: {}m}}",
                rng.between(5, 10)
            ),
        ),
    };
    let timeout = rng.between(60, 300);
    let surge = rng.between(1, 2);
    format!(
        "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  controlPlane:
    replicas: {cp}
    version: {FIRST_VERSION}
    machine: {cp_machine}
  nodePools:{pool_yaml}
  network: {network}
  provider:
    {provider}
  flight:
    memberTimeout: {timeout}s
    maxSurge: {surge}
"
    )
}

/// The same image and templates in every OpenNebula cluster of a fleet: their
/// content-addressed names coincide, so the clusters share them (F1).
const ONE_TEMPLATES: &str = r#"      images:
        - name: ubuntu-kube
          datastore: 1
          content: |
            PATH = "https://images.example/ubuntu-kube.qcow2"
            TYPE = "OS"
      templates:
        - name: master
          image: ubuntu-kube
          content: |
            CPU = "2"
            VCPU = "2"
            MEMORY = "4096"
            NIC = [ NETWORK = "private" ]
        - name: worker
          image: ubuntu-kube
          content: |
            CPU = "4"
            VCPU = "4"
            MEMORY = "8192"
            NIC = [ NETWORK = "private" ]"#;

/// One of `items`, drawn from `rng` (`items` is never empty).
pub(crate) fn pick<'a, T>(rng: &mut SeededRng, items: &'a [T]) -> &'a T {
    let i = rng.below(items.len() as u64) as usize;
    &items[i.min(items.len() - 1)]
}
