//! Neutron (networking API v2.0): security groups with their rules, and routers' extra
//! routes.
//!
//! - `list_security_groups`: `GET /v2.0/security-groups?tags=<uid tag>` (rules come in
//!   each group's `security_group_rules`), re-checked against the owner here.
//! - `create_security_group`: `POST /v2.0/security-groups`, then
//!   `PUT /v2.0/security-groups/{id}/tags`. Neutron accepts tags in a create body only
//!   with the `tag-creation` extension (2024.1 and later; not in Zed), so the two-step
//!   form is used everywhere. If tagging fails, the untagged group is deleted again
//!   (best effort) and the tagging error returned, so no unowned group is left behind.
//! - `create_security_group_rule`: `POST /v2.0/security-group-rules`; Neutron's 409
//!   `SecurityGroupRuleExists` arrives as `AlreadyExists`.
//! - `delete_security_group`: `DELETE /v2.0/security-groups/{id}`.
//! - `find_router`: `GET /v2.0/routers?name=`, then `?id=` for an id; several by that
//!   name is Permanent, none is NotFound.
//! - `addresses_in_use`: `GET /v2.0/ports?fixed_ips=ip_address%3D<address>` for each
//!   address, keeping only ports whose `fixed_ips` do carry it (a Neutron that ignored
//!   the filter would otherwise put every address in use, which only keeps routes).
//! - `add_extra_routes` / `remove_extra_routes`: `PUT /v2.0/routers/{id}/add_extraroutes`
//!   and `remove_extraroutes` with `{"router": {"routes": [...]}}` (the
//!   `extraroute-atomic` extension); the router as Neutron answers it is returned.

use std::net::IpAddr;

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    CloudError, ErrorClass, Network, Ownership, Route, Router, SecurityGroup, SecurityGroupRule,
    SecurityGroupRuleCreate,
};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::client::{Call, is_uuid, seg};
use crate::errors::Service;
use crate::provider::OpenStackCloud;

const OP_LIST_GROUPS: &str = "GET /v2.0/security-groups";
const OP_CREATE_GROUP: &str = "POST /v2.0/security-groups";
const OP_EXTENSION: &str = "GET /v2.0/extensions/{alias}";
const OP_TAG_GROUP: &str = "PUT /v2.0/security-groups/{security_group_id}/tags";
const OP_DELETE_GROUP: &str = "DELETE /v2.0/security-groups/{security_group_id}";
const OP_CREATE_RULE: &str = "POST /v2.0/security-group-rules";
const OP_FIND_ROUTER: &str = "GET /v2.0/routers";
const OP_LIST_PORTS: &str = "GET /v2.0/ports";
const OP_ADD_ROUTES: &str = "PUT /v2.0/routers/{router_id}/add_extraroutes";
const OP_REMOVE_ROUTES: &str = "PUT /v2.0/routers/{router_id}/remove_extraroutes";

/// A Neutron port, as far as its addresses go.
#[derive(Debug, Deserialize)]
struct WirePort {
    #[serde(default)]
    fixed_ips: Vec<WireFixedIp>,
}

#[derive(Debug, Deserialize)]
struct WireFixedIp {
    #[serde(default)]
    ip_address: String,
}

/// The description flightdeck gives the groups it creates.
const GROUP_DESCRIPTION: &str = "managed by flightdeck";

#[derive(Debug, Deserialize)]
pub(crate) struct WireGroup {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    tags: Option<Vec<String>>,
    #[serde(default)]
    security_group_rules: Option<Vec<WireRule>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireRule {
    id: String,
    direction: String,
    #[serde(default)]
    ethertype: String,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    remote_ip_prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireRouter {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    tags: Option<Vec<String>>,
    #[serde(default)]
    routes: Option<Vec<WireRoute>>,
}

#[derive(Debug, Deserialize)]
struct WireRoute {
    destination: String,
    nexthop: String,
}

fn rule_of(w: WireRule) -> SecurityGroupRule {
    SecurityGroupRule {
        id: w.id,
        direction: w.direction,
        ethertype: w.ethertype,
        protocol: w.protocol.filter(|p| !p.is_empty()),
        remote_ip_prefix: w.remote_ip_prefix.filter(|p| !p.is_empty()),
    }
}

fn group_of(w: WireGroup) -> SecurityGroup {
    SecurityGroup {
        id: w.id,
        name: w.name,
        tags: w.tags.unwrap_or_default(),
        rules: w
            .security_group_rules
            .unwrap_or_default()
            .into_iter()
            .map(rule_of)
            .collect(),
    }
}

/// Neutron's router as flightdeck's; a route whose next hop is not an IP address
/// (which Neutron does not allow) is left out and logged.
pub(crate) fn router_of(w: WireRouter) -> Router {
    let routes = w
        .routes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| match r.nexthop.parse::<IpAddr>() {
            Ok(nexthop) => Some(Route {
                destination: r.destination,
                nexthop,
            }),
            Err(_) => {
                tracing::warn!(router = %w.id, nexthop = %r.nexthop, "route with an unreadable next hop");
                None
            }
        })
        .collect();
    Router {
        id: w.id,
        name: w.name,
        tags: w.tags.unwrap_or_default(),
        routes,
    }
}

fn routes_body(routes: &[Route]) -> Value {
    let routes: Vec<Value> = routes
        .iter()
        .map(|r| json!({ "destination": r.destination, "nexthop": r.nexthop.to_string() }))
        .collect();
    json!({ "router": { "routes": routes } })
}

impl OpenStackCloud {
    async fn change_routes(
        &self,
        op: &'static str,
        action: &str,
        router_id: &str,
        routes: &[Route],
    ) -> Result<Router> {
        let call = Call::new(
            Service::Neutron,
            op,
            Method::PUT,
            format!("/routers/{}/{action}", seg(router_id)),
        )
        .json(routes_body(routes));
        let w: WireRouter = self.session.object(&call, "router").await?;
        Ok(router_of(w))
    }

    async fn routers_where(&self, field: &'static str, value: &str) -> Result<Vec<WireRouter>> {
        let call = Call::get(Service::Neutron, OP_FIND_ROUTER, "/routers").query(field, value);
        self.session.list(&call, "routers").await
    }
}

impl Network for OpenStackCloud {
    async fn list_security_groups(&self, owner: &Ownership) -> Result<Vec<SecurityGroup>> {
        let call = Call::get(Service::Neutron, OP_LIST_GROUPS, "/security-groups")
            .query("tags", owner.uid_tag());
        let wire: Vec<WireGroup> = self.session.list(&call, "security_groups").await?;
        Ok(wire
            .into_iter()
            .map(group_of)
            .filter(|g| owner.owns(&g.tags))
            .collect())
    }

    async fn create_security_group(&self, name: &str, tags: &[String]) -> Result<SecurityGroup> {
        // Neutron 2024.1 and later take tags in the create body (`tag-creation`): the
        // group is never seen untagged. Older Neutron (Zed) needs a second call.
        let in_body = *self
            .tag_creation
            .get_or_init(|| async {
                let call = Call::get(Service::Neutron, OP_EXTENSION, "/extensions/tag-creation");
                self.session.send(&call).await.is_ok()
            })
            .await;
        let mut body =
            json!({ "security_group": { "name": name, "description": GROUP_DESCRIPTION } });
        if in_body {
            body["security_group"]["tags"] = json!(tags);
        }
        let call = Call::new(
            Service::Neutron,
            OP_CREATE_GROUP,
            Method::POST,
            "/security-groups",
        )
        .json(body);
        let created: WireGroup = self.session.object(&call, "security_group").await?;
        if in_body {
            return Ok(group_of(created));
        }
        let id = created.id.clone();
        let tag_call = Call::new(
            Service::Neutron,
            OP_TAG_GROUP,
            Method::PUT,
            format!("/security-groups/{}/tags", seg(&id)),
        )
        .json(json!({ "tags": tags }));
        let tagged = match self.session.send(&tag_call).await {
            Ok(reply) => reply
                .body
                .get("tags")
                .and_then(|t| serde_json::from_value::<Vec<String>>(t.clone()).ok())
                .unwrap_or_else(|| tags.to_vec()),
            Err(e) => {
                tracing::warn!(group = %id, error = %e, "tagging a new security group failed; deleting it");
                if let Err(d) = self.delete_security_group(&id).await {
                    tracing::warn!(group = %id, error = %d, "could not delete the untagged group");
                }
                return Err(e);
            }
        };
        let mut group = group_of(created);
        group.tags = tagged;
        Ok(group)
    }

    async fn create_security_group_rule(
        &self,
        req: &SecurityGroupRuleCreate,
    ) -> Result<SecurityGroupRule> {
        let mut rule = Map::new();
        rule.insert("security_group_id".into(), json!(req.security_group_id));
        rule.insert("direction".into(), json!(req.direction));
        rule.insert("ethertype".into(), json!(req.ethertype));
        if let Some(p) = &req.protocol {
            rule.insert("protocol".into(), json!(p));
        }
        if let Some(prefix) = &req.remote_ip_prefix {
            rule.insert("remote_ip_prefix".into(), json!(prefix));
        }
        let call = Call::new(
            Service::Neutron,
            OP_CREATE_RULE,
            Method::POST,
            "/security-group-rules",
        )
        .json(json!({ "security_group_rule": rule }));
        let w: WireRule = self.session.object(&call, "security_group_rule").await?;
        Ok(rule_of(w))
    }

    async fn delete_security_group(&self, id: &str) -> Result<()> {
        let call = Call::new(
            Service::Neutron,
            OP_DELETE_GROUP,
            Method::DELETE,
            format!("/security-groups/{}", seg(id)),
        );
        self.session.send(&call).await.map(drop)
    }

    async fn find_router(&self, name_or_id: &str) -> Result<Router> {
        let mut found = self.routers_where("name", name_or_id).await?;
        if found.is_empty() && is_uuid(name_or_id) {
            found = self.routers_where("id", name_or_id).await?;
        }
        let mut found = found.into_iter();
        match (found.next(), found.next()) {
            (Some(r), None) => Ok(router_of(r)),
            (Some(_), Some(_)) => Err(CloudError::new(
                ErrorClass::Permanent,
                Service::Neutron.name(),
                OP_FIND_ROUTER,
                None,
                format!("Multiple routers match {name_or_id}; use an id"),
            )),
            _ => Err(CloudError::new(
                ErrorClass::NotFound,
                Service::Neutron.name(),
                OP_FIND_ROUTER,
                Some(404),
                format!("Router {name_or_id} could not be found."),
            )),
        }
    }

    async fn addresses_in_use(&self, addresses: &[IpAddr]) -> Result<Vec<IpAddr>> {
        let mut in_use = Vec::new();
        for address in addresses {
            let call = Call::get(Service::Neutron, OP_LIST_PORTS, "/ports")
                .query("fixed_ips", format!("ip_address={address}"))
                .query("fields", "fixed_ips");
            let ports: Vec<WirePort> = self.session.list(&call, "ports").await?;
            let holds = |p: &WirePort| {
                p.fixed_ips
                    .iter()
                    .any(|f| f.ip_address.parse::<IpAddr>().ok() == Some(*address))
            };
            if ports.iter().any(holds) {
                in_use.push(*address);
            }
        }
        Ok(in_use)
    }

    async fn add_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        self.change_routes(OP_ADD_ROUTES, "add_extraroutes", router_id, routes)
            .await
    }

    async fn remove_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        self.change_routes(OP_REMOVE_ROUTES, "remove_extraroutes", router_id, routes)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_rules_and_routers_read_from_neutron_bodies() {
        let g: WireGroup = serde_json::from_value(json!({
            "id": "g1", "name": "demo-sg", "tags": ["flightdeck-uid=u1"],
            "security_group_rules": [
                {"id": "r1", "direction": "egress", "ethertype": "IPv4", "protocol": null, "remote_ip_prefix": null,
                 "port_range_min": null},
                {"id": "r2", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "remote_ip_prefix": "10.244.0.0/16"}
            ]
        }))
        .expect("group");
        let g = group_of(g);
        assert_eq!(g.rules.len(), 2);
        assert_eq!(g.rules[0].protocol, None);
        assert_eq!(
            g.rules[1].remote_ip_prefix.as_deref(),
            Some("10.244.0.0/16")
        );
        let r: WireRouter = serde_json::from_value(json!({
            "id": "rt", "name": "edge", "tags": [],
            "routes": [{"destination": "10.244.1.0/24", "nexthop": "10.0.0.5"},
                       {"destination": "10.244.2.0/24", "nexthop": "not-an-ip"}]
        }))
        .expect("router");
        let r = router_of(r);
        assert_eq!(r.routes.len(), 1);
        assert_eq!(r.routes[0].nexthop.to_string(), "10.0.0.5");
        assert_eq!(
            routes_body(&r.routes),
            json!({"router": {"routes": [{"destination": "10.244.1.0/24", "nexthop": "10.0.0.5"}]}})
        );
    }
}
