//! Cluster identity on KubeVirt (see [`flightdeck_cloud::identity`]): the VMs and
//! endpoint Services labelled with a cluster's name, found with one label selector per
//! kind (`flightdeck.dev/cluster=<name>`); the gate tells the cluster's own from those
//! of another UID.

use flightdeck_cloud::identity::named_of;
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{Identity, NamedObject, Ownership};
use kube::api::ListParams;
use kube::core::ObjectMeta;

use crate::labels::{LABEL_CLUSTER, tags_of};
use crate::provider::{KubeVirtCloud, infra_list_error};
use flightdeck_workload::list::list_all;

fn named_selector(owner: &Ownership) -> String {
    format!("{LABEL_CLUSTER}={}", owner.cluster)
}

fn named_meta(owner: &Ownership, kind: &str, meta: &ObjectMeta) -> Option<NamedObject> {
    let labels = meta.labels.clone().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    let id = meta.uid.as_deref().unwrap_or(name);
    named_of(owner, kind, id, name, &tags_of(&labels))
}

impl<W: Send + Sync> Identity for KubeVirtCloud<W> {
    async fn list_named(&self, owner: &Ownership) -> Result<Vec<NamedObject>> {
        let lp = ListParams::default().labels(&named_selector(owner));
        let vms = list_all(&self.vms(), &lp)
            .await
            .map_err(infra_list_error("list virtualmachines"))?;
        let services = list_all(&self.services(), &lp)
            .await
            .map_err(infra_list_error("list services"))?;
        let mut found: Vec<NamedObject> = vms
            .iter()
            .filter_map(|vm| named_meta(owner, "VM", &vm.metadata))
            .collect();
        found.extend(
            services
                .iter()
                .filter_map(|s| named_meta(owner, "service", &s.metadata)),
        );
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_asks_for_the_name_under_any_uid() {
        let owner = Ownership {
            cluster: "demo".into(),
            uid: "u2".into(),
        };
        assert_eq!(named_selector(&owner), "flightdeck.dev/cluster=demo");
    }
}
