//! Neutron: security groups with their rules (routers live in [`crate::routes`]).
//! Neutron changes these synchronously, so nothing here waits on a timer.

use std::net::IpAddr;

use flightdeck_cloud::ownership::uid_of;
use flightdeck_cloud::{
    CloudError, ErrorClass, Network, Ownership, Route, Router, SecurityGroup, SecurityGroupRule,
    SecurityGroupRuleCreate,
};
use flightdeck_spec::Cidr;

use crate::faults::{self, SimFault};
use crate::routes::{self, NEUTRON};
use crate::{MutationKind, Result, SimCloud, State};

/// Neutron's port list, as far as which addresses ports hold.
pub(crate) const OP_LIST_PORTS: &str = "GET /v2.0/ports";

/// The most security groups the cloud holds (Neutron's quota).
pub const SECURITY_GROUPS_MAX: usize = 10_000;
/// The most rules one security group holds.
pub const RULES_PER_GROUP_MAX: usize = 1_000;
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
                .in_group(&owner.uid)
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

    async fn find_router(&self, name_or_id: &str) -> Result<Router> {
        self.read(NEUTRON, routes::OP_FIND, |st, _| {
            routes::find_router(st, name_or_id)
        })
    }

    async fn addresses_in_use(&self, addresses: &[IpAddr]) -> Result<Vec<IpAddr>> {
        self.port_addresses(Some(addresses))
    }

    async fn add_extra_routes(&self, router_id: &str, extra: &[Route]) -> Result<Router> {
        self.change_as(
            NEUTRON,
            routes::OP_ADD,
            MutationKind::Update,
            router_id,
            |st| routes::route_call_tags(st, router_id, extra),
            |st, now| routes::add_routes(st, now, router_id, extra),
        )
    }

    async fn remove_extra_routes(&self, router_id: &str, extra: &[Route]) -> Result<Router> {
        self.change_as(
            NEUTRON,
            routes::OP_REMOVE,
            MutationKind::Update,
            router_id,
            |st| routes::route_call_tags(st, router_id, extra),
            |st, _| routes::remove_routes(st, router_id, extra),
        )
    }
}

/// `neutron.ruleLost` starts: `count` ingress rules with a remote prefix vanish from
/// flightdeck's security groups (the targeted cluster's), picked with the fault stream
/// among all such rules in creation order. The cloud misbehaving, not a call.
/// Answers how many rules went.
pub(crate) fn lose_rules(st: &mut State, fault: &SimFault) -> u64 {
    let count = fault.count.unwrap_or(1) as usize;
    let candidates: Vec<(String, String)> = st
        .security_groups
        .values()
        .filter(|g| uid_of(&g.tags).is_some() && fault.targets(&g.tags))
        .flat_map(|g| {
            g.rules
                .iter()
                .filter(|r| r.direction == "ingress" && r.remote_ip_prefix.is_some())
                .map(|r| (g.id.clone(), r.id.clone()))
        })
        .collect();
    let chosen = faults::pick(&mut st.rng_faults, candidates, count);
    let n = chosen.len() as u64;
    for (group, rule) in chosen {
        if let Some(g) = st.security_groups.get_mut(&group) {
            g.rules.retain(|r| r.id != rule);
        }
    }
    n
}

impl SimCloud {
    /// The addresses Neutron ports hold (`GET /v2.0/ports`): every server's and VIP's
    /// from its request until it is gone, and the router's interface (the gateway), in
    /// address order; with `only`, those of `only` alone (`fixed_ips=ip_address=`).
    pub fn port_addresses(&self, only: Option<&[IpAddr]>) -> Result<Vec<IpAddr>> {
        self.read(NEUTRON, OP_LIST_PORTS, |st, _| {
            Ok(match only {
                Some(only) => {
                    let mut held: Vec<IpAddr> = only
                        .iter()
                        .copied()
                        .filter(|ip| st.addresses.holds(*ip))
                        .collect();
                    held.sort();
                    held.dedup();
                    held
                }
                None => st.addresses.held().collect(),
            })
        })
    }
}
