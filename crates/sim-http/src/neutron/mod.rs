//! Neutron (networking API v2.0): security groups and their rules, routers with their
//! extra routes, and the fixed network [`NETWORK_NAME`] with its subnet
//! [`SUBNET_NAME`].
//!
//! Not modelled by the simulator, and so answered as follows:
//! - A rule's ports, description and remote group: ports and description are kept as
//!   the create request gave them and shown back, but the simulator tells rules apart
//!   by direction, ethertype, protocol and remote prefix only, so two rules that differ
//!   only in their ports conflict (409 `SecurityGroupRuleExists`). A rule with a
//!   `remote_group_id` is refused (400): the simulator would widen it to any source.
//! - Tags are set when a group is created (`tags` in the POST body, as Neutron's
//!   `tag-creation` extension allows). The simulator cannot change them afterwards:
//!   `PUT /security-groups/{id}/tags` succeeds when it leaves the tags as they are, and
//!   answers 501 otherwise.
//! - Rules cannot be deleted one by one (the simulator has no such call).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, put};
use flightdeck_cloud::{Network, SecurityGroup, Timestamp};
use serde_json::{Map, Value, json};

use crate::errors::{self, Service};
use crate::wire::{self, Paging, Query, TagFilter, TimeStyle, iso, owner_of_uid};
use crate::{App, Extras, keystone};

mod networks;
mod ports;
mod routers;
mod rules;

use networks::{list_networks, list_subnets, show_network, show_subnet};
pub(crate) use networks::{network_id, subnet_id};
use routers::{list_routers, route_action, show_router};
use rules::{create_rule, list_rules, render_rule, show_rule};

pub(crate) fn routes(app: App) -> Router<App> {
    let api = Router::new()
        .route("/network/v2.0/extensions", get(extensions))
        .route("/network/v2.0/extensions/{alias}", get(extension))
        .route(
            "/network/v2.0/security-groups",
            get(list_groups).post(create_group),
        )
        .route(
            "/network/v2.0/security-groups/{id}",
            get(show_group).delete(delete_group),
        )
        .route(
            "/network/v2.0/security-groups/{id}/tags",
            get(group_tags).put(replace_tags),
        )
        .route(
            "/network/v2.0/security-groups/{id}/tags/{tag}",
            put(add_tag),
        )
        .route(
            "/network/v2.0/security-group-rules",
            get(list_rules).post(create_rule),
        )
        .route("/network/v2.0/security-group-rules/{id}", get(show_rule))
        .route("/network/v2.0/routers", get(list_routers))
        .route("/network/v2.0/routers/{id}", get(show_router))
        .route("/network/v2.0/routers/{id}/{action}", put(route_action))
        .route("/network/v2.0/networks", get(list_networks))
        .route("/network/v2.0/networks/{id}", get(show_network))
        .route("/network/v2.0/subnets", get(list_subnets))
        .route("/network/v2.0/ports", get(ports::list_ports))
        .route("/network/v2.0/subnets/{id}", get(show_subnet))
        .route_layer(axum::middleware::from_fn_with_state(
            app,
            keystone::require_token,
        ));
    Router::new()
        .route("/network", get(versions))
        .route("/network/", get(versions))
        .route("/network/v2.0", get(index))
        .route("/network/v2.0/", get(index))
        .merge(api)
}

async fn versions(State(app): State<App>) -> Response {
    wire::json(
        StatusCode::OK,
        &json!({"versions": [{
            "id": "v2.0",
            "status": "CURRENT",
            "links": [{"rel": "self", "href": format!("{}/network/v2.0/", app.base)}],
        }]}),
    )
}

async fn index(State(app): State<App>) -> Response {
    let resources: Vec<Value> = [
        ("security_group", "security-groups"),
        ("security_group_rule", "security-group-rules"),
        ("router", "routers"),
        ("network", "networks"),
        ("subnet", "subnets"),
    ]
    .iter()
    .map(|(name, collection)| {
        let href = format!("{}/network/v2.0/{collection}", app.base);
        json!({"name": name, "collection": collection, "links": [{"rel": "self", "href": href}]})
    })
    .collect();
    wire::json(StatusCode::OK, &json!({ "resources": resources }))
}

/// The extensions this Neutron has, as `(alias, name)`.
const EXTENSIONS: [(&str, &str); 9] = [
    ("security-group", "security-group"),
    ("router", "Neutron L3 Router"),
    ("extraroute", "Neutron Extra Route"),
    ("extraroute-atomic", "Atomically add/remove extra routes"),
    (
        "standard-attr-tag",
        "Tag support for resources with standard attribute: subnet, trunk, network_segment_range, router, network, policy, subnetpool, port, security_group, floatingip",
    ),
    ("tag-creation", "Tag creation extension"),
    ("standard-attr-description", "standard-attr-description"),
    ("standard-attr-timestamp", "Resource timestamps"),
    ("standard-attr-revisions", "Resource revision numbers"),
];

fn extension_json(alias: &str, name: &str) -> Value {
    json!({"alias": alias, "name": name, "description": name, "links": [], "updated": "2013-01-01T00:00:00-00:00"})
}

async fn extensions() -> Response {
    let all: Vec<Value> = EXTENSIONS
        .iter()
        .map(|(a, n)| extension_json(a, n))
        .collect();
    wire::json(StatusCode::OK, &json!({ "extensions": all }))
}

/// `GET /v2.0/extensions/{alias}`: one extension, or Neutron's 404.
async fn extension(axum::extract::Path(alias): axum::extract::Path<String>) -> Response {
    match EXTENSIONS.iter().find(|(a, _)| *a == alias) {
        Some((a, n)) => wire::json(
            StatusCode::OK,
            &json!({ "extension": extension_json(a, n) }),
        ),
        None => wire::json(
            StatusCode::NOT_FOUND,
            &json!({"NeutronError": {
                "type": "ExtensionNotFound",
                "message": format!("Extension with alias {alias} does not exist"),
                "detail": ""
            }}),
        ),
    }
}

fn project_id(app: &App) -> String {
    app.project_id.clone()
}

pub(super) fn bad(message: &str) -> Response {
    errors::neutron(StatusCode::BAD_REQUEST, "HTTPBadRequest", message)
}

fn group_not_found(id: &str) -> Response {
    errors::neutron(
        StatusCode::NOT_FOUND,
        "SecurityGroupNotFound",
        &format!("Security group {id} does not exist"),
    )
}

/// The standard attributes every Neutron resource shows.
pub(super) fn standard(
    app: &App,
    m: &mut Map<String, Value>,
    created: Timestamp,
    extras: &Map<String, Value>,
) {
    let at = iso(created, TimeStyle::Zulu);
    m.insert("tenant_id".into(), json!(project_id(app)));
    m.insert("project_id".into(), json!(project_id(app)));
    m.insert("created_at".into(), json!(at));
    m.insert("updated_at".into(), json!(at));
    m.insert("revision_number".into(), json!(0));
    let description = extras.get("description").cloned().unwrap_or(json!(""));
    m.insert("description".into(), description);
}

fn render_group(app: &App, g: &SecurityGroup, ex: &mut Extras, now: Timestamp) -> Value {
    let rules: Vec<Value> = g
        .rules
        .iter()
        .map(|r| render_rule(app, &g.id, r, ex, now))
        .collect();
    let fields = ex.fields(&g.id);
    let mut v = json!({
        "id": g.id,
        "name": g.name,
        "stateful": true,
        "tags": g.tags,
    });
    if let Some(m) = v.as_object_mut() {
        m.insert("security_group_rules".into(), Value::Array(rules));
        standard(app, m, ex.created(&g.id, now), &fields);
        m.insert("revision_number".into(), json!(g.rules.len()));
    }
    v
}

/// `items` filtered by `q`'s tag and attribute filters and paged, as the body
/// `{"<key>": [...], "<key>_links": [...]}`.
pub(super) fn list_body(app: &App, key: &str, items: Vec<Value>, q: &Query) -> Response {
    let tags = TagFilter::from_query(q);
    let items: Vec<Value> = items
        .into_iter()
        .filter(|i| tags.matches_object(i) && wire::attributes_match(i, q, &[]))
        .collect();
    let (page, next) = match wire::paginate(items, q, wire::value_id) {
        Ok(p) => p,
        Err(Paging::BadMarker(m)) => return bad(&format!("Marker {m} could not be found.")),
        Err(Paging::BadLimit(l)) => {
            return bad(&format!(
                "Bad limit request: Limit must be an integer 0 or greater and not '{l}'."
            ));
        }
    };
    let mut body = Map::new();
    // `Value::Array`, not `json!`: the macro copies a value it is given.
    body.insert(key.into(), Value::Array(page));
    if let Some(last) = next {
        let href = format!(
            "{}/network/v2.0/{}?{}",
            app.base,
            key.replace('_', "-"),
            q.next_page(&last)
        );
        body.insert(
            format!("{key}_links"),
            json!([{"rel": "next", "href": href}]),
        );
    }
    wire::json(StatusCode::OK, &Value::Object(body))
}

async fn list_groups(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    let owner = TagFilter::from_query(&q).owner();
    if let Err(e) = app.cloud.list_security_groups(&owner).await {
        return errors::from_cloud(Service::Neutron, &e);
    }
    let now = app.now();
    let world = app.world();
    let items: Vec<Value> = {
        let mut ex = app.extras();
        world
            .security_groups
            .iter()
            .map(|g| render_group(&app, g, &mut ex, now))
            .collect()
    };
    list_body(&app, "security_groups", items, &q)
}

/// The group `id` as the simulator has it now, after a counted read.
async fn read_group(app: &App, id: &str) -> Result<SecurityGroup, Response> {
    if let Err(e) = app.cloud.list_security_groups(&owner_of_uid("")).await {
        return Err(errors::from_cloud(Service::Neutron, &e));
    }
    app.cloud
        .snapshot()
        .security_groups
        .into_iter()
        .find(|g| g.id == id)
        .ok_or_else(|| group_not_found(id))
}

async fn show_group(State(app): State<App>, Path(id): Path<String>) -> Response {
    match read_group(&app, &id).await {
        Ok(g) => {
            let v = render_group(&app, &g, &mut app.extras(), app.now());
            wire::json(StatusCode::OK, &json!({ "security_group": v }))
        }
        Err(resp) => resp,
    }
}

async fn create_group(State(app): State<App>, body: Bytes) -> Response {
    let body = match wire::body_object(&body) {
        Ok(b) => b,
        Err(m) => return bad(&m),
    };
    let Some(group) = body.get("security_group").filter(|g| g.is_object()) else {
        return bad("Resource body required");
    };
    let name = wire::string(group, "name").unwrap_or_default();
    let tags = match wire::strings(group, "tags") {
        Ok(t) => t,
        Err(m) => return bad(&m),
    };
    match app.cloud.create_security_group(&name, &tags).await {
        Ok(g) => {
            let now = app.now();
            let mut fields = Map::new();
            if let Some(d) = group.get("description").filter(|d| d.is_string()) {
                fields.insert("description".into(), d.clone());
            }
            let mut ex = app.extras();
            ex.remember(&app.cloud, &g.id, now, fields);
            for r in &g.rules {
                ex.remember(&app.cloud, &r.id, now, Map::new());
            }
            let v = render_group(&app, &g, &mut ex, now);
            wire::json(StatusCode::CREATED, &json!({ "security_group": v }))
        }
        Err(e) => errors::from_cloud(Service::Neutron, &e),
    }
}

async fn delete_group(State(app): State<App>, Path(id): Path<String>) -> Response {
    match app.cloud.delete_security_group(&id).await {
        Ok(()) => wire::empty(StatusCode::NO_CONTENT),
        Err(e) => errors::from_cloud(Service::Neutron, &e),
    }
}

async fn group_tags(State(app): State<App>, Path(id): Path<String>) -> Response {
    match read_group(&app, &id).await {
        Ok(g) => wire::json(StatusCode::OK, &json!({"tags": g.tags})),
        Err(resp) => resp,
    }
}

fn tags_unchangeable(id: &str) -> Response {
    errors::neutron(
        StatusCode::NOT_IMPLEMENTED,
        "NotImplemented",
        &format!(
            "The simulated cloud keeps the tags security group {id} was created with; create it with its tags instead."
        ),
    )
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|t| b.contains(t)) && b.iter().all(|t| a.contains(t))
}

async fn replace_tags(State(app): State<App>, Path(id): Path<String>, body: Bytes) -> Response {
    let body = match wire::body_object(&body) {
        Ok(b) => b,
        Err(m) => return bad(&m),
    };
    let wanted = match wire::strings(&body, "tags") {
        Ok(t) => t,
        Err(m) => return bad(&m),
    };
    let Some(g) = app
        .cloud
        .snapshot()
        .security_groups
        .into_iter()
        .find(|g| g.id == id)
    else {
        return group_not_found(&id);
    };
    if same_set(&g.tags, &wanted) {
        wire::json(StatusCode::OK, &json!({"tags": g.tags}))
    } else {
        tags_unchangeable(&id)
    }
}

async fn add_tag(State(app): State<App>, Path((id, tag)): Path<(String, String)>) -> Response {
    let Some(g) = app
        .cloud
        .snapshot()
        .security_groups
        .into_iter()
        .find(|g| g.id == id)
    else {
        return group_not_found(&id);
    };
    if g.tags.contains(&tag) {
        wire::empty(StatusCode::CREATED)
    } else {
        tags_unchangeable(&id)
    }
}
