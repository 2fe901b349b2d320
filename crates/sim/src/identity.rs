//! The simulated OpenStack's answer to a cluster-identity check: its servers, security
//! groups and load balancers tagged with the cluster's name. Three
//! reads, one per service, as the real provider makes them, so a service's injected
//! faults fail the check as they would fail the real one.

use flightdeck_cloud::identity::named_of;
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{Identity, NamedObject, Ownership};

use crate::SimCloud;
use crate::nova::NOVA;
use crate::octavia::OCTAVIA;
use crate::routes::NEUTRON;

impl Identity for SimCloud {
    async fn list_named(&self, owner: &Ownership) -> Result<Vec<NamedObject>> {
        let mut found = self.read(NOVA, "GET /servers/detail", |st, _| {
            Ok(st
                .servers
                .values()
                .filter_map(|s| {
                    let s = &s.server;
                    named_of(owner, "server", &s.id, &s.name, &s.tags)
                })
                .collect::<Vec<_>>())
        })?;
        found.extend(self.read(NEUTRON, "GET /v2.0/security-groups", |st, _| {
            Ok(st
                .security_groups
                .values()
                .filter_map(|g| named_of(owner, "security group", &g.id, &g.name, &g.tags))
                .collect::<Vec<_>>())
        })?);
        found.extend(self.read(OCTAVIA, "GET /v2/lbaas/loadbalancers", |st, _| {
            Ok(st
                .lbs
                .values()
                .filter_map(|l| {
                    let l = &l.lb;
                    named_of(owner, "load balancer", &l.id, &l.name, &l.tags)
                })
                .collect::<Vec<_>>())
        })?);
        Ok(found)
    }
}
