//! Neutron: security groups with their rules, and routers with extra routes. Neutron
//! changes these synchronously, so nothing here waits on a timer.

use std::net::IpAddr;

use flightdeck_cloud::{
    CloudError, ErrorClass, Network, Ownership, SecurityGroup, SecurityGroupRule,
    SecurityGroupRuleCreate,
};
use flightdeck_spec::Cidr;
use serde::{Deserialize, Serialize};

use crate::{MutationKind, Result, SimCloud, State};

const NEUTRON: &str = "neutron";

/// The most security groups the cloud holds (Neutron's quota).
pub const SECURITY_GROUPS_MAX: usize = 10_000;
/// The most rules one security group holds.
pub const RULES_PER_GROUP_MAX: usize = 1_000;
/// The most routers the cloud holds.
pub const ROUTERS_MAX: usize = 1_000;

/// One extra route of a router (Neutron's `routes` entry).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Route {
    /// A CIDR, e.g. `10.244.3.0/24`.
    pub destination: String,
    pub nexthop: IpAddr,
}

/// A Neutron router, as far as extra routes go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Router {
    pub id: String,
    pub name: String,
    pub tags: Vec<String>,
    /// In the order they were added.
    pub routes: Vec<Route>,
}

fn error(class: ErrorClass, op: &str, status: u16, message: String) -> CloudError {
    CloudError::new(class, NEUTRON, op, Some(status), message)
}

fn quota(op: &str, resource: &str) -> CloudError {
    error(
        ErrorClass::Permanent,
        op,
        409,
        format!("Quota exceeded for resources: ['{resource}']."),
    )
}

fn group_not_found(op: &str, id: &str) -> CloudError {
    error(
        ErrorClass::NotFound,
        op,
        404,
        format!("Security group {id} does not exist"),
    )
}

/// What a security-group reference (an id or a name, as Nova takes them) resolves to.
pub(crate) enum Lookup {
    Found {
        id: String,
        name: String,
    },
    NotFound,
    /// Several groups carry the name.
    Ambiguous,
}

pub(crate) fn resolve_group(st: &State, name_or_id: &str) -> Lookup {
    if let Some(g) = st.security_groups.get(name_or_id) {
        return Lookup::Found {
            id: g.id.clone(),
            name: g.name.clone(),
        };
    }
    let mut named = st.security_groups.values().filter(|g| g.name == name_or_id);
    match (named.next(), named.next()) {
        (Some(g), None) => Lookup::Found {
            id: g.id.clone(),
            name: g.name.clone(),
        },
        (Some(_), Some(_)) => Lookup::Ambiguous,
        _ => Lookup::NotFound,
    }
}

fn new_group(st: &mut State, name: &str, tags: &[String]) -> SecurityGroup {
    let id = st.new_id();
    // Neutron gives every new group these two rules: all egress, IPv4 and IPv6.
    let rules = ["IPv4", "IPv6"]
        .into_iter()
        .map(|ethertype| SecurityGroupRule {
            id: st.new_id(),
            direction: "egress".into(),
            ethertype: ethertype.into(),
            protocol: None,
            remote_ip_prefix: None,
        })
        .collect();
    let group = SecurityGroup {
        id: id.clone(),
        name: name.into(),
        tags: tags.to_vec(),
        rules,
    };
    let seq = st.next_seq();
    st.security_groups.insert(seq, id, group.clone());
    group
}

fn create_group(st: &mut State, name: &str, tags: &[String]) -> Result<SecurityGroup> {
    const OP: &str = "POST /v2.0/security-groups";
    if st.security_groups.len() >= SECURITY_GROUPS_MAX {
        return Err(quota(OP, "security_group"));
    }
    if name.len() > 255 || tags.iter().any(|t| t.is_empty() || t.len() > 60) {
        return Err(error(
            ErrorClass::Permanent,
            OP,
            400,
            "Invalid input for operation: name or tags too long.".into(),
        ));
    }
    Ok(new_group(st, name, tags))
}

pub(crate) fn add_foreign_group(st: &mut State, name: &str) -> String {
    new_group(st, name, &[]).id
}

fn create_rule(st: &mut State, req: &SecurityGroupRuleCreate) -> Result<SecurityGroupRule> {
    const OP: &str = "POST /v2.0/security-group-rules";
    let invalid = |message: String| Err(error(ErrorClass::Permanent, OP, 400, message));
    if !["ingress", "egress"].contains(&req.direction.as_str()) {
        return invalid(format!(
            "Invalid input for direction. Reason: {} is not in valid_values.",
            req.direction
        ));
    }
    if !["IPv4", "IPv6"].contains(&req.ethertype.as_str()) {
        return invalid(format!(
            "Invalid input for ethertype. Reason: {} is not in valid_values.",
            req.ethertype
        ));
    }
    if let Some(prefix) = &req.remote_ip_prefix {
        let Ok(cidr) = prefix.parse::<Cidr>() else {
            return invalid(format!(
                "Invalid input for remote_ip_prefix. Reason: '{prefix}' is not a valid IP subnet."
            ));
        };
        if cidr.ethertype() != req.ethertype {
            return invalid(format!(
                "Conflicting value ethertype {} for CIDR {prefix}",
                req.ethertype
            ));
        }
    }
    let id = st.new_id();
    let Some(group) = st.security_groups.get_mut(&req.security_group_id) else {
        return Err(group_not_found(OP, &req.security_group_id));
    };
    if let Some(existing) = group.rules.iter().find(|r| r.matches(req)) {
        return Err(error(
            ErrorClass::AlreadyExists,
            OP,
            409,
            format!(
                "Security group rule already exists. Rule id is {}.",
                existing.id
            ),
        ));
    }
    if group.rules.len() >= RULES_PER_GROUP_MAX {
        return Err(quota(OP, "security_group_rule"));
    }
    let rule = SecurityGroupRule {
        id,
        direction: req.direction.clone(),
        ethertype: req.ethertype.clone(),
        protocol: req.protocol.clone(),
        remote_ip_prefix: req.remote_ip_prefix.clone(),
    };
    group.rules.push(rule.clone());
    Ok(rule)
}

fn delete_group(st: &mut State, id: &str) -> Result<()> {
    const OP: &str = "DELETE /v2.0/security-groups/{security_group_id}";
    if !st.security_groups.contains(id) {
        return Err(group_not_found(OP, id));
    }
    // A server keeps its ports (and so its groups) until it is gone, deleting or not.
    if st
        .servers
        .values()
        .any(|s| s.group_ids.iter().any(|g| g == id))
    {
        return Err(error(
            ErrorClass::Conflict,
            OP,
            409,
            format!("Security Group {id} in use."),
        ));
    }
    st.security_groups.remove(id);
    Ok(())
}

impl Network for SimCloud {
    async fn list_security_groups(&self, owner: &Ownership) -> Result<Vec<SecurityGroup>> {
        self.read(NEUTRON, "GET /v2.0/security-groups", |st, _| {
            Ok(st
                .security_groups
                .values()
                .filter(|g| owner.owns(&g.tags))
                .cloned()
                .collect())
        })
    }

    async fn create_security_group(&self, name: &str, tags: &[String]) -> Result<SecurityGroup> {
        self.create(NEUTRON, "POST /v2.0/security-groups", tags, |st, _| {
            create_group(st, name, tags)
        })
    }

    async fn create_security_group_rule(
        &self,
        req: &SecurityGroupRuleCreate,
    ) -> Result<SecurityGroupRule> {
        self.change(
            NEUTRON,
            "POST /v2.0/security-group-rules",
            MutationKind::Update,
            &req.security_group_id,
            |st, _| create_rule(st, req),
        )
    }

    async fn delete_security_group(&self, id: &str) -> Result<()> {
        self.change(
            NEUTRON,
            "DELETE /v2.0/security-groups/{security_group_id}",
            MutationKind::Delete,
            id,
            |st, _| delete_group(st, id),
        )
    }
}

fn router_not_found(op: &str, id: &str) -> CloudError {
    error(
        ErrorClass::NotFound,
        op,
        404,
        format!("Router {id} could not be found"),
    )
}

/// Routers have no provider trait yet; these are plain calls, counted, logged and
/// subject to faults like every other call.
impl SimCloud {
    pub fn create_router(&self, name: &str, tags: &[String]) -> Result<Router> {
        const OP: &str = "POST /v2.0/routers";
        self.create(NEUTRON, OP, tags, |st, _| {
            if st.routers.len() >= ROUTERS_MAX {
                return Err(quota(OP, "router"));
            }
            let router = Router {
                id: st.new_id(),
                name: name.into(),
                tags: tags.to_vec(),
                routes: Vec::new(),
            };
            let seq = st.next_seq();
            st.routers.insert(seq, router.id.clone(), router.clone());
            Ok(router)
        })
    }

    /// The routers tagged with `owner`'s UID.
    pub fn list_routers(&self, owner: &Ownership) -> Result<Vec<Router>> {
        self.read(NEUTRON, "GET /v2.0/routers", |st, _| {
            Ok(st
                .routers
                .values()
                .filter(|r| owner.owns(&r.tags))
                .cloned()
                .collect())
        })
    }

    pub fn delete_router(&self, id: &str) -> Result<()> {
        const OP: &str = "DELETE /v2.0/routers/{router_id}";
        self.change(NEUTRON, OP, MutationKind::Delete, id, |st, _| {
            st.routers
                .remove(id)
                .map(|_| ())
                .ok_or_else(|| router_not_found(OP, id))
        })
    }

    /// Neutron's `add_extraroutes`: routes already present are left as they are; if
    /// the result would hold more than `max_routes`, nothing changes and the call
    /// answers 400 `RoutesExhausted`.
    pub fn add_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        const OP: &str = "PUT /v2.0/routers/{router_id}/add_extraroutes";
        self.change(NEUTRON, OP, MutationKind::Update, router_id, |st, _| {
            for r in routes {
                if r.destination.parse::<Cidr>().is_err() {
                    return Err(error(
                        ErrorClass::Permanent,
                        OP,
                        400,
                        format!(
                            "Invalid input for routes. Reason: '{}' is not a valid IP subnet.",
                            r.destination
                        ),
                    ));
                }
            }
            let max = st.config.max_routes;
            let Some(router) = st.routers.get_mut(router_id) else {
                return Err(router_not_found(OP, router_id));
            };
            let mut wanted = router.routes.clone();
            for r in routes {
                if !wanted.contains(r) {
                    wanted.push(r.clone());
                }
            }
            if wanted.len() > max {
                // Neutron's type for this answer is RoutesExhausted.
                return Err(error(
                    ErrorClass::Permanent,
                    OP,
                    400,
                    format!(
                        "Unable to complete operation for {router_id}. The number of routes exceeds the maximum {max}."
                    ),
                ));
            }
            router.routes = wanted;
            Ok(router.clone())
        })
    }

    /// Neutron's `remove_extraroutes`: routes not present are ignored.
    pub fn remove_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        const OP: &str = "PUT /v2.0/routers/{router_id}/remove_extraroutes";
        self.change(NEUTRON, OP, MutationKind::Update, router_id, |st, _| {
            let Some(router) = st.routers.get_mut(router_id) else {
                return Err(router_not_found(OP, router_id));
            };
            router.routes.retain(|r| !routes.contains(r));
            Ok(router.clone())
        })
    }
}
