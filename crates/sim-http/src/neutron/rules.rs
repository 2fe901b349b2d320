//! Security-group rules. Ports and descriptions are kept beside the simulator's rule
//! (see the module docs of [`super`]).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use flightdeck_cloud::{Network, SecurityGroupRule, SecurityGroupRuleCreate, Timestamp};
use serde_json::{Map, Value, json};

use super::{bad, list_body, standard};
use crate::errors::{self, Service};
use crate::wire::{self, Query, owner_of_uid};
use crate::{App, Extras};

pub(super) fn render_rule(
    app: &App,
    group_id: &str,
    r: &SecurityGroupRule,
    ex: &mut Extras,
    now: Timestamp,
) -> Value {
    let fields = ex.fields(&r.id);
    let mut v = json!({
        "id": r.id,
        "security_group_id": group_id,
        "direction": r.direction,
        "ethertype": r.ethertype,
        "protocol": r.protocol,
        "port_range_min": fields.get("port_range_min").cloned().unwrap_or(Value::Null),
        "port_range_max": fields.get("port_range_max").cloned().unwrap_or(Value::Null),
        "remote_ip_prefix": r.remote_ip_prefix,
        "normalized_cidr": r.remote_ip_prefix,
        "remote_group_id": null,
        "remote_address_group_id": null,
        "tags": [],
    });
    if let Some(m) = v.as_object_mut() {
        standard(app, m, ex.created(&r.id, now), &fields);
    }
    v
}

/// The rule create a `POST /security-group-rules` body asks for, with the fields the
/// simulator does not keep, or the 400 it earns.
fn parse_rule(body: &[u8]) -> Result<(SecurityGroupRuleCreate, Map<String, Value>), Response> {
    let body = wire::body_object(body).map_err(|m| bad(&m))?;
    let Some(rule) = body.get("security_group_rule").filter(|r| r.is_object()) else {
        return Err(bad("Resource body required"));
    };
    let Some(security_group_id) = wire::string(rule, "security_group_id") else {
        return Err(bad(
            "Failed to parse request. Required attribute 'security_group_id' not specified",
        ));
    };
    let Some(direction) = wire::string(rule, "direction") else {
        return Err(bad(
            "Failed to parse request. Required attribute 'direction' not specified",
        ));
    };
    if rule.get("remote_group_id").is_some_and(|v| !v.is_null()) {
        return Err(bad(
            "remote_group_id is not supported by the simulated cloud.",
        ));
    }
    let protocol = wire::string(rule, "protocol").map(|p| p.to_lowercase());
    let port = |key: &str| -> Result<Option<u64>, Response> {
        match rule.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .filter(|p| *p <= 65_535)
                .map(Some)
                .ok_or_else(|| bad(&format!("Invalid value for port {v}."))),
        }
    };
    let (min, max) = (port("port_range_min")?, port("port_range_max")?);
    if (min.is_some() || max.is_some()) && protocol.is_none() {
        return Err(errors::neutron(
            StatusCode::BAD_REQUEST,
            "SecurityGroupProtocolRequiredWithPorts",
            "Must also specify protocol if port range is given.",
        ));
    }
    if let (Some(a), Some(b)) = (min, max)
        && a > b
    {
        return Err(errors::neutron(
            StatusCode::BAD_REQUEST,
            "SecurityGroupInvalidPortRange",
            "For TCP/UDP protocols, port_range_min must be <= port_range_max",
        ));
    }
    let mut extra = Map::new();
    extra.insert("port_range_min".into(), json!(min));
    extra.insert("port_range_max".into(), json!(max.or(min)));
    if let Some(d) = rule.get("description").filter(|d| d.is_string()) {
        extra.insert("description".into(), d.clone());
    }
    let req = SecurityGroupRuleCreate {
        security_group_id,
        direction,
        ethertype: wire::string(rule, "ethertype").unwrap_or_else(|| "IPv4".into()),
        protocol,
        remote_ip_prefix: wire::string(rule, "remote_ip_prefix"),
    };
    Ok((req, extra))
}

pub(super) async fn create_rule(State(app): State<App>, body: Bytes) -> Response {
    let (req, extra) = match parse_rule(&body) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    match app.cloud.create_security_group_rule(&req).await {
        Ok(r) => {
            let now = app.now();
            let mut ex = app.extras();
            ex.remember(&app.cloud, &r.id, now, extra);
            let v = render_rule(&app, &req.security_group_id, &r, &mut ex, now);
            wire::json(StatusCode::CREATED, &json!({ "security_group_rule": v }))
        }
        Err(e) => errors::from_cloud(Service::Neutron, &e),
    }
}

/// Every rule, rendered, after a counted read.
async fn all_rules(app: &App) -> Result<Vec<Value>, Response> {
    if let Err(e) = app.cloud.list_security_groups(&owner_of_uid("")).await {
        return Err(errors::from_cloud(Service::Neutron, &e));
    }
    let now = app.now();
    let world = app.world();
    let mut ex = app.extras();
    Ok(world
        .security_groups
        .iter()
        .flat_map(|g| g.rules.iter().map(move |r| (g.id.clone(), r)))
        .map(|(gid, r)| render_rule(app, &gid, r, &mut ex, now))
        .collect())
}

pub(super) async fn list_rules(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    match all_rules(&app).await {
        Ok(items) => list_body(&app, "security_group_rules", items, &q),
        Err(resp) => resp,
    }
}

pub(super) async fn show_rule(State(app): State<App>, Path(id): Path<String>) -> Response {
    match all_rules(&app).await {
        Ok(items) => match items
            .into_iter()
            .find(|r| r.get("id").and_then(Value::as_str) == Some(&id))
        {
            Some(r) => wire::json(StatusCode::OK, &json!({ "security_group_rule": r })),
            None => errors::neutron(
                StatusCode::NOT_FOUND,
                "SecurityGroupRuleNotFound",
                &format!("Security group rule {id} does not exist"),
            ),
        },
        Err(resp) => resp,
    }
}
