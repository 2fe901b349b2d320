//! Creates and deletes: request bodies validated as Octavia does, handed to the
//! simulator, and the created object answered.

use std::net::IpAddr;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use flightdeck_cloud::{
    HealthMonitorCreate, ListenerCreate, LoadBalancerCreate, LoadBalancing, MemberCreate,
    PoolCreate,
};
use serde_json::{Map, Value, json};

use super::render::render_member;
use super::{bad, list_body, missing, not_found, render_all};
use crate::errors::{self, Service};
use crate::wire::{self, Query};
use crate::{App, SUBNET_NAME, neutron};

/// The object under `root` in a create body, or the 400 it earns.
fn root(body: &[u8], root: &str) -> Result<Value, Response> {
    let body = wire::body_object(body).map_err(|m| bad(&m))?;
    body.get(root)
        .filter(|v| v.is_object())
        .cloned()
        .ok_or_else(|| missing(root))
}

fn tags(v: &Value) -> Result<Vec<String>, Response> {
    wire::strings(v, "tags").map_err(|m| bad(&m))
}

/// `v[key]` if it is one of `allowed`.
fn choice(v: &Value, key: &str, allowed: &[&str]) -> Result<String, Response> {
    let Some(s) = wire::string(v, key) else {
        return Err(missing(key));
    };
    if allowed.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(bad(&format!(
            "Invalid input for field/attribute {key}. Value: '{s}'. Value should be one of: {}",
            allowed.join(", ")
        )))
    }
}

fn number(v: &Value, key: &str) -> Result<u64, Response> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| missing(key))
}

/// The fields kept for an object beyond what the simulator models.
fn keep(v: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| {
            v.get(*k)
                .filter(|x| !x.is_null())
                .map(|x| ((*k).to_string(), x.clone()))
        })
        .collect()
}

/// Answers a create: remembers `fields` for the new object and renders it.
fn created(app: &App, kind: &str, key: &str, id: &str, fields: Map<String, Value>) -> Response {
    let now = app.now();
    app.extras().remember(&app.cloud, id, now, fields);
    let w = app.cloud.snapshot();
    match render_all(app, kind, &w)
        .into_iter()
        .find(|v| v.get("id").and_then(Value::as_str) == Some(id))
    {
        Some(v) => wire::json(StatusCode::CREATED, &json!({ key: v })),
        None => errors::octavia(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The created object vanished.",
        ),
    }
}

pub(super) async fn create_lb(State(app): State<App>, body: Bytes) -> Response {
    let lb = match root(&body, "loadbalancer") {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let given = |k: &str| lb.get(k).is_some_and(|v| !v.is_null());
    if given("vip_port_id") || given("vip_address") {
        return bad(
            "Validation failure: the simulated cloud allocates the VIP itself; give vip_subnet_id or vip_network_id only.",
        );
    }
    if ["listeners", "pools"].iter().any(|k| {
        lb.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    }) {
        return bad(
            "Validation failure: single-call creates are not supported by the simulated cloud.",
        );
    }
    match (
        wire::string(&lb, "vip_subnet_id"),
        wire::string(&lb, "vip_network_id"),
    ) {
        (None, None) => {
            return bad(
                "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
            );
        }
        (Some(s), _) if s != neutron::subnet_id() => return bad(&format!("Subnet {s} not found.")),
        (_, Some(n)) if n != neutron::network_id() => {
            return bad(&format!("Network {n} not found."));
        }
        _ => {}
    }
    let tags = match tags(&lb) {
        Ok(t) => t,
        Err(resp) => return resp,
    };
    let req = LoadBalancerCreate {
        name: wire::string(&lb, "name").unwrap_or_default(),
        vip_subnet: SUBNET_NAME.into(),
        tags,
    };
    match app.cloud.create_load_balancer(&req).await {
        Ok(x) => created(
            &app,
            "loadbalancers",
            "loadbalancer",
            &x.id,
            keep(&lb, &["description"]),
        ),
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

pub(super) async fn delete_lb(
    State(app): State<App>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = Query::parse(raw.as_deref());
    let cascade = q
        .get("cascade")
        .is_some_and(|c| ["true", "True", "1", "yes"].contains(&c));
    if !cascade {
        let w = app.cloud.snapshot();
        if w.listeners.iter().any(|l| l.loadbalancer_id == id)
            || w.pools.iter().any(|p| p.loadbalancer_id == id)
        {
            return bad(&format!(
                "Validation failure: Cannot delete Load Balancer {id} - it has children"
            ));
        }
    }
    match app.cloud.delete_load_balancer_cascade(&id).await {
        Ok(()) => wire::empty(StatusCode::NO_CONTENT),
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

const LISTENER_PROTOCOLS: [&str; 7] = [
    "HTTP",
    "HTTPS",
    "TCP",
    "TERMINATED_HTTPS",
    "UDP",
    "SCTP",
    "PROMETHEUS",
];
const POOL_PROTOCOLS: [&str; 7] = ["HTTP", "HTTPS", "PROXY", "PROXYV2", "TCP", "UDP", "SCTP"];
const ALGORITHMS: [&str; 4] = [
    "ROUND_ROBIN",
    "LEAST_CONNECTIONS",
    "SOURCE_IP",
    "SOURCE_IP_PORT",
];
const HM_TYPES: [&str; 7] = [
    "HTTP",
    "HTTPS",
    "PING",
    "TCP",
    "TLS-HELLO",
    "UDP-CONNECT",
    "SCTP",
];

pub(super) async fn create_listener(State(app): State<App>, body: Bytes) -> Response {
    let parsed = root(&body, "listener").and_then(|l| {
        let lb = wire::string(&l, "loadbalancer_id").ok_or_else(|| missing("loadbalancer_id"))?;
        choice(&l, "protocol", &LISTENER_PROTOCOLS)?;
        let port = number(&l, "protocol_port")?;
        let port = u16::try_from(port).map_err(|_| bad(&format!("Invalid input for field/attribute protocol_port. Value: '{port}'. Value should be lower or equal to 65535")))?;
        let req = ListenerCreate { name: wire::string(&l, "name").unwrap_or_default(), loadbalancer_id: lb, protocol_port: port, tags: tags(&l)? };
        Ok((req, keep(&l, &["description", "protocol", "connection_limit", "timeout_client_data", "timeout_member_connect", "timeout_member_data", "timeout_tcp_inspect", "allowed_cidrs"])))
    });
    let (req, fields) = match parsed {
        Ok(p) => p,
        Err(resp) => return resp,
    };
    match app.cloud.create_listener(&req).await {
        Ok(x) => created(&app, "listeners", "listener", &x.id, fields),
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

pub(super) async fn create_pool(State(app): State<App>, body: Bytes) -> Response {
    let parsed = root(&body, "pool").and_then(|p| {
        choice(&p, "protocol", &POOL_PROTOCOLS)?;
        choice(&p, "lb_algorithm", &ALGORITHMS)?;
        let Some(listener_id) = wire::string(&p, "listener_id") else {
            return Err(match wire::string(&p, "loadbalancer_id") {
                Some(_) => bad("Validation failure: the simulated cloud needs a listener_id for every pool."),
                None => bad("Validation failure: Must provide at least one of: listener_id, loadbalancer_id."),
            });
        };
        let req = PoolCreate { name: wire::string(&p, "name").unwrap_or_default(), listener_id, tags: tags(&p)? };
        Ok((req, keep(&p, &["description", "protocol", "lb_algorithm", "session_persistence"])))
    });
    let (req, fields) = match parsed {
        Ok(p) => p,
        Err(resp) => return resp,
    };
    match app.cloud.create_pool(&req).await {
        Ok(x) => created(&app, "pools", "pool", &x.id, fields),
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

pub(super) async fn create_hm(State(app): State<App>, body: Bytes) -> Response {
    let parsed = root(&body, "healthmonitor").and_then(|h| {
        let pool_id = wire::string(&h, "pool_id").ok_or_else(|| missing("pool_id"))?;
        let kind = choice(&h, "type", &HM_TYPES)?;
        let (delay, timeout, retries) = (number(&h, "delay")?, number(&h, "timeout")?, number(&h, "max_retries")?);
        if !(1..=10).contains(&retries) {
            return Err(bad(&format!("Invalid input for field/attribute max_retries. Value: '{retries}'. Value should be between 1 and 10")));
        }
        let req = HealthMonitorCreate {
            name: wire::string(&h, "name").unwrap_or_default(),
            pool_id,
            kind,
            delay_s: u32::try_from(delay).unwrap_or(u32::MAX),
            timeout_s: u32::try_from(timeout).unwrap_or(u32::MAX),
            max_retries: u8::try_from(retries).unwrap_or(10),
            tags: tags(&h)?,
        };
        Ok((req, keep(&h, &["description", "delay", "timeout", "max_retries", "max_retries_down", "http_method", "url_path", "expected_codes", "http_version", "domain_name"])))
    });
    let (req, mut fields) = match parsed {
        Ok(p) => p,
        Err(resp) => return resp,
    };
    fields.entry("delay").or_insert(json!(req.delay_s));
    fields.entry("timeout").or_insert(json!(req.timeout_s));
    fields
        .entry("max_retries")
        .or_insert(json!(req.max_retries));
    match app.cloud.create_health_monitor(&req).await {
        Ok(x) => created(&app, "healthmonitors", "healthmonitor", &x.id, fields),
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

/// The members of `pool`, rendered, after a counted read (404 if there is no pool).
pub(super) async fn members_of(app: &App, pool: &str) -> Result<Vec<Value>, Response> {
    let members = app
        .cloud
        .list_members(pool)
        .await
        .map_err(|e| errors::from_cloud(Service::Octavia, &e))?;
    let now = app.now();
    let mut ex = app.extras();
    Ok(members
        .iter()
        .map(|m| render_member(app, m, &mut ex, now))
        .collect())
}

pub(super) async fn list_members(
    State(app): State<App>,
    Path(pool): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = Query::parse(raw.as_deref());
    match members_of(&app, &pool).await {
        Ok(items) => list_body(&app, "members", &format!("pools/{pool}/members"), items, &q),
        Err(resp) => resp,
    }
}

pub(super) async fn show_member(
    State(app): State<App>,
    Path((pool, id)): Path<(String, String)>,
) -> Response {
    match members_of(&app, &pool).await {
        Ok(items) => match items
            .into_iter()
            .find(|v| v.get("id").and_then(Value::as_str) == Some(&id))
        {
            Some(v) => wire::json(StatusCode::OK, &json!({ "member": v })),
            None => not_found("Member", &id),
        },
        Err(resp) => resp,
    }
}

/// One member of a create or batch request, and the fields it sets that the simulator
/// only keeps to show back.
fn member_req(m: &Value, pool: &str) -> Result<(MemberCreate, Map<String, Value>), Response> {
    let address = wire::string(m, "address").ok_or_else(|| missing("address"))?;
    let address: IpAddr = address.parse().map_err(|_| bad(&format!("Invalid input for field/attribute address. Value: '{address}'. Value should be IPv4 or IPv6 format")))?;
    let port = u16::try_from(number(m, "protocol_port")?).map_err(|_| bad("Invalid input for field/attribute protocol_port. Value should be lower or equal to 65535"))?;
    let req = MemberCreate {
        name: wire::string(m, "name").unwrap_or_default(),
        pool_id: pool.to_string(),
        address,
        protocol_port: port,
        tags: tags(m)?,
    };
    Ok((
        req,
        keep(
            m,
            &[
                "description",
                "weight",
                "backup",
                "subnet_id",
                "monitor_address",
                "monitor_port",
            ],
        ),
    ))
}

/// `PUT /v2/lbaas/pools/{pool_id}/members`: the batch member update, 202 and no body.
pub(super) async fn batch_members(
    State(app): State<App>,
    Path(pool): Path<String>,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    let q = Query::parse(raw.as_deref());
    let additive_only = match q.get("additive_only") {
        None => false,
        Some(v) if ["true", "True", "1", "yes"].contains(&v) => true,
        Some(v) if ["false", "False", "0", "no"].contains(&v) => false,
        Some(v) => {
            return bad(&format!(
                "Invalid input for additive_only. Value: '{v}'. Value should be a boolean"
            ));
        }
    };
    let parsed = wire::body_object(&body)
        .map_err(|m| bad(&m))
        .and_then(|b| {
            b.get("members")
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| missing("members"))
        })
        .and_then(|items| {
            items
                .iter()
                .map(|m| {
                    if m.is_object() {
                        member_req(m, &pool)
                    } else {
                        Err(bad(
                            "Invalid input for members. Each member should be an object",
                        ))
                    }
                })
                .collect::<Result<Vec<_>, _>>()
        });
    let (reqs, fields): (Vec<_>, Vec<_>) = match parsed {
        Ok(p) => p.into_iter().unzip(),
        Err(resp) => return resp,
    };
    match app.cloud.batch_members(&pool, &reqs, additive_only) {
        Ok(members) => {
            let now = app.now();
            let mut ex = app.extras();
            for (m, f) in members.iter().zip(fields) {
                ex.remember(&app.cloud, &m.id, now, f);
            }
            wire::empty(StatusCode::ACCEPTED)
        }
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

pub(super) async fn create_member(
    State(app): State<App>,
    Path(pool): Path<String>,
    body: Bytes,
) -> Response {
    let parsed = root(&body, "member").and_then(|m| member_req(&m, &pool));
    let (req, fields) = match parsed {
        Ok(p) => p,
        Err(resp) => return resp,
    };
    match app.cloud.create_member(&req).await {
        Ok(x) => {
            let now = app.now();
            let mut ex = app.extras();
            ex.remember(&app.cloud, &x.id, now, fields);
            let v = render_member(&app, &x, &mut ex, now);
            wire::json(StatusCode::CREATED, &json!({ "member": v }))
        }
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}

pub(super) async fn delete_member(
    State(app): State<App>,
    Path((pool, id)): Path<(String, String)>,
) -> Response {
    match app.cloud.delete_member(&pool, &id).await {
        Ok(()) => wire::empty(StatusCode::NO_CONTENT),
        Err(e) => errors::from_cloud(Service::Octavia, &e),
    }
}
