//! Routers and their extra routes (`extraroute-atomic`).

use std::net::IpAddr;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use flightdeck_cloud::{Network, Route, Router as SimRouter, Timestamp};
use serde_json::{Value, json};

use super::{bad, list_body, standard};
use crate::errors::{self, Service};
use crate::wire::{self, Query, TagFilter};
use crate::{App, Extras};

fn render_router(app: &App, r: &SimRouter, ex: &mut Extras, now: Timestamp) -> Value {
    let routes: Vec<Value> = r
        .routes
        .iter()
        .map(|x| json!({"destination": x.destination, "nexthop": x.nexthop.to_string()}))
        .collect();
    let fields = ex.fields(&r.id);
    let mut v = json!({
        "id": r.id,
        "name": r.name,
        "status": "ACTIVE",
        "admin_state_up": true,
        "external_gateway_info": null,
        "routes": routes,
        "tags": r.tags,
        "distributed": false,
        "ha": false,
        "flavor_id": null,
        "availability_zone_hints": [],
        "availability_zones": ["nova"],
    });
    if let Some(m) = v.as_object_mut() {
        standard(app, m, ex.created(&r.id, now), &fields);
    }
    v
}

pub(super) async fn list_routers(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    let owner = TagFilter::from_query(&q).owner();
    if let Err(e) = app.cloud.list_routers(&owner) {
        return errors::from_cloud(Service::Neutron, &e);
    }
    let now = app.now();
    let world = app.world();
    let items: Vec<Value> = {
        let mut ex = app.extras();
        world
            .routers
            .iter()
            .map(|r| render_router(&app, r, &mut ex, now))
            .collect()
    };
    list_body(&app, "routers", items, &q)
}

pub(super) async fn show_router(State(app): State<App>, Path(id): Path<String>) -> Response {
    match app.cloud.find_router(&id).await {
        Ok(r) if r.id == id => {
            let v = render_router(&app, &r, &mut app.extras(), app.now());
            wire::json(StatusCode::OK, &json!({ "router": v }))
        }
        Ok(_) => errors::neutron(
            StatusCode::NOT_FOUND,
            "RouterNotFound",
            &format!("Router {id} could not be found"),
        ),
        Err(e) => errors::from_cloud(Service::Neutron, &e),
    }
}

fn parse_routes(body: &[u8]) -> Result<Vec<Route>, Response> {
    let body = wire::body_object(body).map_err(|m| bad(&m))?;
    let Some(routes) = body
        .get("router")
        .and_then(|r| r.get("routes"))
        .and_then(Value::as_array)
    else {
        return Err(bad(
            "Failed to parse request. Required attribute 'routes' not specified",
        ));
    };
    routes
        .iter()
        .map(|r| {
            let destination = wire::string(r, "destination");
            let nexthop = wire::string(r, "nexthop").and_then(|n| n.parse::<IpAddr>().ok());
            match (destination, nexthop) {
                (Some(destination), Some(nexthop)) => Ok(Route {
                    destination,
                    nexthop,
                }),
                _ => Err(bad(&format!(
                    "Invalid input for routes. Reason: Invalid data format for hostroute: '{r}'."
                ))),
            }
        })
        .collect()
}

pub(super) async fn route_action(
    State(app): State<App>,
    Path((id, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let routes = match parse_routes(&body) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let result = match action.as_str() {
        "add_extraroutes" => app.cloud.add_extra_routes(&id, &routes).await,
        "remove_extraroutes" => app.cloud.remove_extra_routes(&id, &routes).await,
        _ => {
            return errors::neutron(
                StatusCode::NOT_FOUND,
                "HTTPNotFound",
                "The resource could not be found.",
            );
        }
    };
    match result {
        Ok(r) => {
            let v = render_router(&app, &r, &mut app.extras(), app.now());
            wire::json(StatusCode::OK, &json!({ "router": v }))
        }
        Err(e) => errors::from_cloud(Service::Neutron, &e),
    }
}
