//! Cluster identity on KubeVirt (see [`flightdeck_cloud::identity`]): the VMs and
//! endpoint Services labelled with a cluster's name under another UID, found with one
//! label selector per kind (`flightdeck.dev/cluster=<name>,flightdeck.dev/uid!=<uid>`).

use flightdeck_cloud::identity::foreign_of;
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{ForeignObject, Identity, Ownership};
use kube::api::ListParams;
use kube::core::ObjectMeta;

use crate::labels::{LABEL_CLUSTER, LABEL_UID, tags_of};
use crate::provider::{KubeVirtCloud, infra_list_error};
use flightdeck_workload::list::list_all;

fn foreign_selector(owner: &Ownership) -> String {
    format!(
        "{LABEL_CLUSTER}={},{LABEL_UID}!={}",
        owner.cluster, owner.uid
    )
}

fn foreign_meta(owner: &Ownership, kind: &str, meta: &ObjectMeta) -> Option<ForeignObject> {
    let labels = meta.labels.clone().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    let id = meta.uid.as_deref().unwrap_or(name);
    foreign_of(owner, kind, id, name, &tags_of(&labels))
}

impl<W: Send + Sync> Identity for KubeVirtCloud<W> {
    async fn list_foreign(&self, owner: &Ownership) -> Result<Vec<ForeignObject>> {
        let lp = ListParams::default().labels(&foreign_selector(owner));
        let vms = list_all(&self.vms(), &lp)
            .await
            .map_err(infra_list_error("list virtualmachines"))?;
        let services = list_all(&self.services(), &lp)
            .await
            .map_err(infra_list_error("list services"))?;
        let mut found: Vec<ForeignObject> = vms
            .iter()
            .filter_map(|vm| foreign_meta(owner, "VM", &vm.metadata))
            .collect();
        found.extend(
            services
                .iter()
                .filter_map(|s| foreign_meta(owner, "service", &s.metadata)),
        );
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_asks_for_the_name_under_any_other_uid() {
        let owner = Ownership {
            cluster: "demo".into(),
            uid: "u2".into(),
        };
        assert_eq!(
            foreign_selector(&owner),
            "flightdeck.dev/cluster=demo,flightdeck.dev/uid!=u2"
        );
    }
}
