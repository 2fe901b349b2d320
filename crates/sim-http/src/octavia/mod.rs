//! Octavia (load-balancer API v2): load balancers with their status tree and cascade
//! delete, listeners, pools, pool members and health monitors.
//!
//! The simulator keeps provisioning and operating status, the VIP, ports, tags and
//! the object graph. What it does not model is kept as the create request gave it and
//! shown back: protocols, the pool's algorithm, the health monitor's timings and HTTP
//! check, member weights, descriptions. Listener, pool and health-monitor
//! `operating_status` is derived (the simulator tracks it for load balancers and
//! members only). Not supported: single-call ("graph") creates, pools without a
//! listener, a VIP given by port or address, and deleting listeners, pools or health
//! monitors on their own (the simulator deletes them only with their load balancer).

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use flightdeck_cloud::{LoadBalancing, Pool};
use std::sync::Arc;

use flightdeck_sim::World;
use serde_json::{Map, Value, json};

use crate::errors::{self, Service};
use crate::wire::{self, Paging, Query, TagFilter};
use crate::{App, keystone};

mod changes;
mod render;

use changes::{
    batch_members, create_hm, create_lb, create_listener, create_member, create_pool, delete_lb,
};
use changes::{delete_member, list_members, show_member};
use render::{hm_status, listener_status, pool_status};

const API: &str = "/load-balancer/v2/lbaas";

/// Octavia answers under both `/v2` and `/v2.0`; clients use either.
const PREFIXES: [&str; 2] = ["/load-balancer/v2", "/load-balancer/v2.0"];

pub(crate) fn routes(app: App) -> Router<App> {
    let mut api = Router::new();
    for p in PREFIXES {
        api = api
            .route(
                &format!("{p}/lbaas/loadbalancers"),
                get(list_lbs).post(create_lb),
            )
            .route(
                &format!("{p}/lbaas/loadbalancers/{{id}}"),
                get(show_lb).delete(delete_lb),
            )
            .route(
                &format!("{p}/lbaas/loadbalancers/{{id}}/status"),
                get(status_tree),
            )
            .route(
                &format!("{p}/lbaas/listeners"),
                get(list_listeners).post(create_listener),
            )
            .route(&format!("{p}/lbaas/listeners/{{id}}"), get(show_listener))
            .route(
                &format!("{p}/lbaas/pools"),
                get(list_pools).post(create_pool),
            )
            .route(&format!("{p}/lbaas/pools/{{id}}"), get(show_pool))
            .route(
                &format!("{p}/lbaas/pools/{{id}}/members"),
                get(list_members).post(create_member).put(batch_members),
            )
            .route(
                &format!("{p}/lbaas/pools/{{id}}/members/{{member}}"),
                get(show_member).delete(delete_member),
            )
            .route(
                &format!("{p}/lbaas/healthmonitors"),
                get(list_hms).post(create_hm),
            )
            .route(&format!("{p}/lbaas/healthmonitors/{{id}}"), get(show_hm));
    }
    let api = api.route_layer(axum::middleware::from_fn_with_state(
        app,
        keystone::require_token,
    ));
    let mut docs = Router::new()
        .route("/load-balancer", get(versions))
        .route("/load-balancer/", get(versions));
    for p in PREFIXES {
        docs = docs
            .route(p, get(versions))
            .route(&format!("{p}/"), get(versions));
    }
    docs.merge(api)
}

async fn versions(State(app): State<App>) -> Response {
    let href = format!("{}/load-balancer/v2", app.base);
    let all: Vec<Value> = (0..=26)
        .map(|minor| {
            json!({
                "id": format!("v2.{minor}"),
                "status": if minor == 26 { "CURRENT" } else { "SUPPORTED" },
                "updated": "2022-09-01T00:00:00Z",
                "links": [{"href": href, "rel": "self"}],
            })
        })
        .collect();
    wire::json(StatusCode::OK, &json!({ "versions": all }))
}

pub(super) fn bad(message: &str) -> Response {
    errors::octavia(StatusCode::BAD_REQUEST, message)
}

pub(super) fn missing(field: &str) -> Response {
    bad(&format!(
        "Invalid input for field/attribute {field}. Value: 'None'. Mandatory field missing."
    ))
}

pub(super) fn not_found(resource: &str, id: &str) -> Response {
    errors::octavia(
        StatusCode::NOT_FOUND,
        &format!("{resource} {id} not found."),
    )
}

pub(super) fn ids(items: impl Iterator<Item = String>) -> Value {
    json!(items.map(|id| json!({ "id": id })).collect::<Vec<_>>())
}

/// `items` filtered by `q` and paged, as `{"<key>": [...], "<key>_links": [...]}`.
pub(super) fn list_body(
    app: &App,
    key: &str,
    path: &str,
    items: Vec<Value>,
    q: &Query,
) -> Response {
    let tags = TagFilter::from_query(q);
    let items: Vec<Value> = items
        .into_iter()
        .filter(|i| tags.matches_object(i) && wire::attributes_match(i, q, &[]))
        .collect();
    let (page, next) = match wire::paginate(items, q, wire::value_id) {
        Ok(p) => p,
        Err(Paging::BadMarker(m)) => return not_found("Marker", &m),
        Err(Paging::BadLimit(l)) => return bad(&format!("Invalid input for limit: {l}")),
    };
    let links: Vec<Value> = next
        .map(|last| json!({"rel": "next", "href": format!("{}{API}/{path}?{}", app.base, q.next_page(&last))}))
        .into_iter()
        .collect();
    let mut body = Map::new();
    // `Value::Array`, not `json!`: the macro copies a value it is given, every object
    // of the page again.
    body.insert(key.into(), Value::Array(page));
    body.insert(format!("{key}_links"), Value::Array(links));
    wire::json(StatusCode::OK, &Value::Object(body))
}

/// A counted list of `kind` (as the owner the tag filter names), then the snapshot
/// the answer is rendered from.
pub(super) async fn read(app: &App, kind: &str, q: &Query) -> Result<Arc<World>, Response> {
    let owner = TagFilter::from_query(q).owner();
    let result = match kind {
        "loadbalancers" => app.cloud.list_load_balancers(&owner).await.map(drop),
        "listeners" => app.cloud.list_listeners(&owner).await.map(drop),
        "pools" => app.cloud.list_pools(&owner).await.map(drop),
        _ => app.cloud.list_health_monitors(&owner).await.map(drop),
    };
    result.map_err(|e| errors::from_cloud(Service::Octavia, &e))?;
    Ok(app.world())
}

/// Renders every object of `kind` in `w`.
pub(super) fn render_all(app: &App, kind: &str, w: &World) -> Vec<Value> {
    use render::{render_hm, render_lb, render_listener, render_pool};
    let now = app.now();
    let mut ex = app.extras();
    match kind {
        "loadbalancers" => w
            .load_balancers
            .iter()
            .map(|x| render_lb(app, x, w, &mut ex, now))
            .collect(),
        "listeners" => w
            .listeners
            .iter()
            .map(|x| render_listener(app, x, w, &mut ex, now))
            .collect(),
        "pools" => w
            .pools
            .iter()
            .map(|x| render_pool(app, x, w, &mut ex, now))
            .collect(),
        _ => w
            .health_monitors
            .iter()
            .map(|x| render_hm(app, x, &mut ex, now))
            .collect(),
    }
}

async fn list_of(app: &App, kind: &str, raw: Option<&str>) -> Response {
    let q = Query::parse(raw);
    match read(app, kind, &q).await {
        Ok(w) => list_body(app, kind, kind, render_all(app, kind, &w), &q),
        Err(resp) => resp,
    }
}

/// One object of `kind` by id, as `{"<key>": {...}}`.
async fn show_of(app: &App, kind: &str, key: &str, resource: &str, id: &str) -> Response {
    let w = match read(app, kind, &Query::default()).await {
        Ok(w) => w,
        Err(resp) => return resp,
    };
    match render_all(app, kind, &w)
        .into_iter()
        .find(|v| v.get("id").and_then(Value::as_str) == Some(id))
    {
        Some(v) => wire::json(StatusCode::OK, &json!({ key: v })),
        None => not_found(resource, id),
    }
}

async fn list_lbs(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    list_of(&app, "loadbalancers", raw.as_deref()).await
}
async fn list_listeners(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    list_of(&app, "listeners", raw.as_deref()).await
}
async fn list_pools(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    list_of(&app, "pools", raw.as_deref()).await
}
async fn list_hms(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    list_of(&app, "healthmonitors", raw.as_deref()).await
}
async fn show_lb(State(app): State<App>, Path(id): Path<String>) -> Response {
    show_of(&app, "loadbalancers", "loadbalancer", "Load Balancer", &id).await
}
async fn show_listener(State(app): State<App>, Path(id): Path<String>) -> Response {
    show_of(&app, "listeners", "listener", "Listener", &id).await
}
async fn show_pool(State(app): State<App>, Path(id): Path<String>) -> Response {
    show_of(&app, "pools", "pool", "Pool", &id).await
}
async fn show_hm(State(app): State<App>, Path(id): Path<String>) -> Response {
    show_of(
        &app,
        "healthmonitors",
        "healthmonitor",
        "Health Monitor",
        &id,
    )
    .await
}

async fn status_tree(State(app): State<App>, Path(id): Path<String>) -> Response {
    let w = match read(&app, "loadbalancers", &Query::default()).await {
        Ok(w) => w,
        Err(resp) => return resp,
    };
    let Some(lb) = w.load_balancers.iter().find(|l| l.id == id) else {
        return not_found("Load Balancer", &id);
    };
    let pool_tree = |p: &Pool| {
        let hm = w.health_monitors.iter().find(|h| h.pool_id == p.id).map(|h| {
            json!({"id": h.id, "name": h.name, "type": h.kind,
                   "provisioning_status": h.provisioning_status.as_str(), "operating_status": hm_status(h)})
        });
        let members: Vec<Value> = w.members.iter().filter(|m| m.pool_id == p.id).map(|m| {
            json!({"id": m.id, "name": m.name, "address": m.address.to_string(), "protocol_port": m.protocol_port,
                   "provisioning_status": m.provisioning_status.as_str(), "operating_status": m.operating_status.as_str()})
        }).collect();
        let mut v = json!({"id": p.id, "name": p.name, "provisioning_status": p.provisioning_status.as_str(),
                           "operating_status": pool_status(p, &w), "members": members});
        if let (Some(hm), Some(o)) = (hm, v.as_object_mut()) {
            o.insert("health_monitor".into(), hm);
        }
        v
    };
    let listeners: Vec<Value> = w.listeners.iter().filter(|l| l.loadbalancer_id == id).map(|l| {
        let pools: Vec<Value> = w.pools.iter().filter(|p| p.listener_id.as_deref() == Some(l.id.as_str())).map(pool_tree).collect();
        json!({"id": l.id, "name": l.name, "provisioning_status": l.provisioning_status.as_str(),
               "operating_status": listener_status(l, &w), "pools": pools})
    }).collect();
    wire::json(
        StatusCode::OK,
        &json!({"statuses": {"loadbalancer": {
            "id": lb.id, "name": lb.name, "provisioning_status": lb.provisioning_status.as_str(),
            "operating_status": lb.operating_status.as_str(), "listeners": listeners,
        }}}),
    )
}
