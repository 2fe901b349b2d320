//! Cluster identity (see [`flightdeck_cloud::identity`]): the servers, security groups
//! and load balancers tagged with a cluster's name, whatever their UID. One filtered list
//! per kind, asked only before a new cluster creates anything.
//!
//! - `GET /servers/detail?tags=flightdeck-cluster=<name>`
//! - `GET /v2.0/security-groups?tags=flightdeck-cluster=<name>`
//! - `GET /v2/lbaas/loadbalancers?tags=flightdeck-cluster=<name>`

use flightdeck_cloud::identity::{cluster_tag, named_of};
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{Identity, NamedObject, Ownership};
use serde::Deserialize;

use crate::client::Call;
use crate::errors::Service;
use crate::provider::OpenStackCloud;

const OP_SERVERS: &str = "GET /servers/detail";
const OP_GROUPS: &str = "GET /v2.0/security-groups";
const OP_LBS: &str = "GET /v2/lbaas/loadbalancers";

/// What every tagged object of the three kinds answers with.
#[derive(Deserialize)]
struct Tagged {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

impl OpenStackCloud {
    async fn named_of_kind(
        &self,
        owner: &Ownership,
        kind: &str,
        call: Call<'_>,
        key: &str,
    ) -> Result<Vec<NamedObject>> {
        let call = call.query("tags", cluster_tag(&owner.cluster));
        let listed: Vec<Tagged> = self.session.list(&call, key).await?;
        Ok(listed
            .iter()
            .filter_map(|t| {
                let name = t.name.as_deref().unwrap_or_default();
                named_of(
                    owner,
                    kind,
                    &t.id,
                    name,
                    t.tags.as_deref().unwrap_or_default(),
                )
            })
            .collect())
    }
}

impl Identity for OpenStackCloud {
    async fn list_named(&self, owner: &Ownership) -> Result<Vec<NamedObject>> {
        let mut found = self
            .named_of_kind(
                owner,
                "server",
                Call::get(Service::Nova, OP_SERVERS, "/servers/detail"),
                "servers",
            )
            .await?;
        found.extend(
            self.named_of_kind(
                owner,
                "security group",
                Call::get(Service::Neutron, OP_GROUPS, "/security-groups"),
                "security_groups",
            )
            .await?,
        );
        found.extend(
            self.named_of_kind(
                owner,
                "load balancer",
                Call::get(Service::Octavia, OP_LBS, "/lbaas/loadbalancers"),
                "loadbalancers",
            )
            .await?,
        );
        Ok(found)
    }
}
