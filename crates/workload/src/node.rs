//! A workload cluster's Node as flightdeck sees it: the one conversion the lists, the
//! watches and the drains share.

use flightdeck_cloud::{HOLD_DELETION, Node, Taint};
use k8s_openapi::api::core::v1 as core;

use crate::provider_id::ProviderIdFormat;
use crate::timestamp_of;

/// A workload Node as flightdeck's [`Node`]; `server_id` is read from the providerID in
/// the cloud's `format`, and `internal_ip` from the node's `InternalIP` address.
pub fn node_of(n: &core::Node, format: ProviderIdFormat) -> Node {
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
            .and_then(|p| format.server_id(p)),
        internal_ip: n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .and_then(|a| a.address.parse().ok()),
        ready,
        unschedulable: spec.unschedulable.unwrap_or(false),
        created_at: timestamp_of(n.metadata.creation_timestamp.as_ref()),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints: spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| Taint {
                key: t.key,
                value: t.value.filter(|v| !v.is_empty()),
                effect: t.effect,
            })
            .collect(),
        hold_deletion: n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(HOLD_DELETION))
            .cloned(),
        pod_cidr: spec.pod_cidr.filter(|c| !c.is_empty()),
    }
}
