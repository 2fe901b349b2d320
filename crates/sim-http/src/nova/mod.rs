//! Nova (compute API v2.1 with microversions up to Zed's 2.93): servers, their
//! `addSecurityGroup` action, and a fixed flavor catalog.
//!
//! Responses follow the requested microversion where it changes what clients parse:
//! `tags` (2.26; settable at create from 2.52), the embedded flavor (2.47), flavor
//! `description` (2.55), `extra_specs` (2.61) and `swap` as a number (2.75).

use std::net::IpAddr;

use axum::body::Bytes;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Router, middleware};
use flightdeck_cloud::{Compute, Server, ServerCreate, ServerStatus};
use serde_json::{Value, json};

use crate::errors::{self, Service};
use crate::glance;
use crate::wire::{self, Paging, Query, TagFilter, stable_hex};
use crate::{App, NETWORK_NAME, keystone, neutron};

mod flavors;
mod microversion;
mod view;

use flavors::{FLAVORS, flavor_show, flavors_brief, flavors_detail};
use microversion::{Mv, microversion, version, versions};
use view::links;

pub(crate) fn routes(app: App) -> Router<App> {
    let api = Router::new()
        .route("/compute/v2.1/servers", get(list_brief).post(create))
        .route("/compute/v2.1/servers/detail", get(list_detail))
        .route("/compute/v2.1/servers/{id}", get(show).delete(delete))
        .route("/compute/v2.1/servers/{id}/action", post(action))
        .route("/compute/v2.1/flavors", get(flavors_brief))
        .route("/compute/v2.1/flavors/detail", get(flavors_detail))
        .route("/compute/v2.1/flavors/{id}", get(flavor_show))
        .route_layer(middleware::from_fn(microversion))
        .route_layer(middleware::from_fn_with_state(app, keystone::require_token));
    Router::new()
        .route("/compute", get(versions))
        .route("/compute/", get(versions))
        .route("/compute/v2.1", get(version))
        .route("/compute/v2.1/", get(version))
        .merge(api)
}

fn status_str(s: &Server) -> &str {
    match &s.status {
        ServerStatus::Build => "BUILD",
        ServerStatus::Active => "ACTIVE",
        ServerStatus::Error => "ERROR",
        ServerStatus::Other(x) => x,
    }
}

/// A MAC address derived from an IP, as Neutron would have given the port one.
fn mac_of(ip: IpAddr) -> String {
    let h = flightdeck_spec::fnv1a(ip.to_string().as_bytes()).to_be_bytes();
    format!("fa:16:3e:{:02x}:{:02x}:{:02x}", h[0], h[1], h[2])
}

/// Nova's `name` filter is a regular expression searched in the name. This supports
/// literals, `.`, `*`, `^` and `$` (Pike's matcher), which is what clients send.
fn name_matches(pattern: &str, name: &str) -> bool {
    fn here(p: &[char], t: &[char]) -> bool {
        match p {
            [] => true,
            ['$'] => t.is_empty(),
            [c, '*', rest @ ..] => {
                let mut i = 0;
                loop {
                    if here(rest, &t[i..]) {
                        return true;
                    }
                    if i < t.len() && (*c == '.' || t[i] == *c) {
                        i += 1;
                    } else {
                        return false;
                    }
                }
            }
            ['\\', c, rest @ ..] => t.first() == Some(c) && here(rest, &t[1..]),
            [c, rest @ ..] => match t.first() {
                Some(x) if *c == '.' || x == c => here(rest, &t[1..]),
                _ => false,
            },
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = name.chars().collect();
    if let Some(rest) = p.strip_prefix(&['^']) {
        return here(rest, &t);
    }
    (0..=t.len()).any(|i| here(&p, &t[i..]))
}

async fn list_brief(
    State(app): State<App>,
    Extension(mv): Extension<Mv>,
    RawQuery(raw): RawQuery,
) -> Response {
    list(&app, mv, raw.as_deref(), false).await
}

async fn list_detail(
    State(app): State<App>,
    Extension(mv): Extension<Mv>,
    RawQuery(raw): RawQuery,
) -> Response {
    list(&app, mv, raw.as_deref(), true).await
}

/// Servers newest first, as Nova sorts by default, filtered and paged.
async fn list(app: &App, mv: Mv, raw: Option<&str>, detail: bool) -> Response {
    let q = Query::parse(raw);
    let tags = if mv.at_least(26) {
        TagFilter::from_query(&q)
    } else {
        TagFilter::default()
    };
    let owner = tags.owner();
    let listed = match app.cloud.list_servers(&owner).await {
        Ok(listed) => listed,
        Err(e) => return errors::from_cloud(Service::Nova, &e),
    };
    // A list by owner is the simulator's answer itself (which an `api.staleRead` may
    // have taken from a while ago); any other list is read from the world now.
    let servers = if owner.uid.is_empty() {
        app.cloud
            .snapshot()
            .servers
            .iter()
            .map(|s| Server::clone(s))
            .collect()
    } else {
        listed
    };
    let shown: Vec<&Server> = servers
        .iter()
        .rev()
        .filter(|s| tags.matches(&s.tags))
        .filter(|s| q.get("name").is_none_or(|p| name_matches(p, &s.name)))
        .filter(|s| {
            q.get("status")
                .is_none_or(|st| st.eq_ignore_ascii_case(status_str(s)))
        })
        .collect();
    let (page, next) = match wire::paginate(shown, &q, |s| Some(s.id.as_str())) {
        Ok(p) => p,
        Err(Paging::BadMarker(m)) => {
            return errors::nova(StatusCode::BAD_REQUEST, &format!("marker [{m}] not found"));
        }
        Err(Paging::BadLimit(l)) => {
            let message = format!(
                "Invalid input for query parameters limit. Value: {l}. '{l}' does not match '^[0-9]*$'"
            );
            return errors::nova(StatusCode::BAD_REQUEST, &message);
        }
    };
    let links = next.map(|last| {
        let path = if detail { "servers/detail" } else { "servers" };
        let href = format!("{}/compute/v2.1/{path}?{}", app.base, q.next_page(&last));
        [view::Link { rel: "next", href }]
    });
    let shared = view::Shared::new(app, mv);
    if detail {
        let servers: Vec<view::Detail> = page.iter().map(|s| shared.detail(s)).collect();
        wire::serialized(StatusCode::OK, &Servers { servers, links })
    } else {
        let servers: Vec<view::Brief> = page.iter().map(|s| shared.brief(s)).collect();
        wire::serialized(StatusCode::OK, &Servers { servers, links })
    }
}

/// A list answer: the page, and the link to the next one when there is one.
#[derive(serde::Serialize)]
struct Servers<T> {
    servers: Vec<T>,
    #[serde(rename = "servers_links", skip_serializing_if = "Option::is_none")]
    links: Option<[view::Link; 1]>,
}

async fn show(
    State(app): State<App>,
    Extension(mv): Extension<Mv>,
    Path(id): Path<String>,
) -> Response {
    match app.cloud.show_server(&id) {
        Err(e) => errors::from_cloud(Service::Nova, &e),
        Ok(Some(s)) => {
            let shared = view::Shared::new(&app, mv);
            #[derive(serde::Serialize)]
            struct One<'a> {
                server: view::Detail<'a>,
            }
            let server = shared.detail(&s);
            wire::serialized(StatusCode::OK, &One { server })
        }
        Ok(None) => errors::nova(
            StatusCode::NOT_FOUND,
            &format!("Instance {id} could not be found."),
        ),
    }
}

fn bad(message: &str) -> Response {
    errors::nova(StatusCode::BAD_REQUEST, message)
}

fn invalid(field: &str, problem: &str) -> Response {
    bad(&format!(
        "Invalid input for field/attribute {field}. {problem}"
    ))
}

/// The network a create request attaches to, by name (the simulator has one).
fn network_of(server: &Value, mv: Mv) -> Result<String, Response> {
    match server.get("networks") {
        None if mv.at_least(37) => Err(invalid("server", "'networks' is a required property")),
        None => Ok(NETWORK_NAME.into()),
        Some(Value::String(s)) if s == "auto" && mv.at_least(37) => Ok(NETWORK_NAME.into()),
        Some(Value::String(s)) if s == "none" && mv.at_least(37) => Err(bad(
            "The simulated cloud attaches every server to network 'private'; networks 'none' is not supported.",
        )),
        Some(Value::Array(nets)) => {
            let mut name = None;
            for n in nets {
                if n.get("port").is_some() {
                    return Err(bad(
                        "Port attachments are not supported by the simulated cloud.",
                    ));
                }
                let Some(uuid) = n.get("uuid").and_then(Value::as_str) else {
                    return Err(invalid("uuid", "'uuid' is a required property"));
                };
                if uuid != neutron::network_id() {
                    return Err(bad(&format!("Network {uuid} could not be found.")));
                }
                name = Some(NETWORK_NAME.to_string());
            }
            name.ok_or_else(|| invalid("networks", "[] is too short"))
        }
        Some(other) => Err(invalid("networks", &format!("{other} is not valid"))),
    }
}

/// Nova's limit on `user_data`, base64 included.
const USER_DATA_MAX: usize = 65_535;

/// `user_data`: base64, at most 65,535 bytes, as Nova's schema checks it; decoded.
fn user_data_of(server: &Value) -> Result<Option<String>, Response> {
    use base64::Engine;
    let Some(v) = server.get("user_data").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(text) = v.as_str() else {
        return Err(invalid(
            "server/user_data",
            &format!("{v} is not of type 'string', 'null'"),
        ));
    };
    if text.len() > USER_DATA_MAX {
        return Err(invalid(
            "server/user_data",
            &format!("'{}...' is too long", &text[..20.min(text.len())]),
        ));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    match decoded {
        Some(d) => Ok(Some(d)),
        None => Err(invalid(
            "server/user_data",
            &format!("'{}' is not a 'base64'", &text[..20.min(text.len())]),
        )),
    }
}

/// The `ServerCreate` a `POST /servers` body asks for, or the 400 it earns.
fn parse_create(app: &App, body: &[u8], mv: Mv) -> Result<ServerCreate, Response> {
    let body = wire::body_object(body).map_err(|m| bad(&m))?;
    let Some(server) = body.get("server").filter(|s| s.is_object()) else {
        return Err(invalid("server", "'server' is a required property"));
    };
    let Some(name) = wire::string(server, "name") else {
        return Err(invalid("server", "'name' is a required property"));
    };
    let Some(flavor_ref) = wire::string(server, "flavorRef") else {
        return Err(invalid("server", "'flavorRef' is a required property"));
    };
    let flavor_id = wire::last_segment(&flavor_ref);
    let Some(flavor) = FLAVORS.iter().find(|f| f.id == flavor_id) else {
        return Err(bad(&format!("Flavor {flavor_id} could not be found.")));
    };
    let Some(image_ref) = wire::string(server, "imageRef") else {
        return Err(invalid("server", "'imageRef' is a required property"));
    };
    let image_ref = wire::last_segment(&image_ref);
    let Some(image) = glance::name_of(app, image_ref) else {
        return Err(bad(&format!("Image {image_ref} could not be found.")));
    };
    let network = network_of(server, mv)?;
    let mut security_groups = Vec::new();
    if let Some(groups) = server.get("security_groups") {
        let Some(groups) = groups.as_array() else {
            return Err(invalid("security_groups", "is not of type 'array'"));
        };
        for g in groups {
            let Some(n) = g.get("name").and_then(Value::as_str) else {
                return Err(invalid(
                    "security_groups/name",
                    "'name' is a required property",
                ));
            };
            security_groups.push(n.to_string());
        }
    }
    if server.get("tags").is_some() && !mv.at_least(52) {
        return Err(invalid(
            "server",
            "Additional properties are not allowed ('tags' was unexpected)",
        ));
    }
    let tags = wire::strings(server, "tags").map_err(|m| invalid("tags", &m))?;
    let user_data = user_data_of(server)?;
    Ok(ServerCreate {
        name,
        flavor: flavor.name.to_string(),
        image,
        network,
        security_groups,
        tags,
        eviction_strategy: None,
        user_data,
    })
}

async fn create(State(app): State<App>, Extension(mv): Extension<Mv>, body: Bytes) -> Response {
    let req = match parse_create(&app, &body, mv) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    match app.cloud.create_server(&req).await {
        Ok(s) => {
            let groups: Vec<Value> = s
                .security_groups
                .iter()
                .map(|g| json!({"name": g}))
                .collect();
            let pass: String = stable_hex(&format!("admin-pass/{}", s.id))
                .chars()
                .take(12)
                .collect();
            let body = json!({"server": {
                "id": s.id,
                "links": links(&app, "servers", &s.id),
                "OS-DCF:diskConfig": "MANUAL",
                "security_groups": groups,
                "adminPass": pass,
            }});
            let mut resp = wire::json(StatusCode::ACCEPTED, &body);
            let location = format!("{}/compute/v2.1/servers/{}", app.base, s.id);
            if let Ok(v) = HeaderValue::from_str(&location) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            resp
        }
        Err(e) => errors::from_cloud(Service::Nova, &e),
    }
}

async fn delete(State(app): State<App>, Path(id): Path<String>) -> Response {
    match app.cloud.delete_server(&id).await {
        Ok(()) => wire::empty(StatusCode::NO_CONTENT),
        Err(e) => errors::from_cloud(Service::Nova, &e),
    }
}

async fn action(State(app): State<App>, Path(id): Path<String>, body: Bytes) -> Response {
    let body = match wire::body_object(&body) {
        Ok(b) => b,
        Err(m) => return bad(&m),
    };
    let Some((name, args)) = body.as_object().and_then(|m| m.iter().next()) else {
        return bad("Malformed request body");
    };
    match name.as_str() {
        "addSecurityGroup" => {
            let Some(group) = args.get("name").and_then(Value::as_str) else {
                return invalid("addSecurityGroup", "'name' is a required property");
            };
            match app.cloud.add_security_group(&id, group).await {
                Ok(()) => wire::empty(StatusCode::ACCEPTED),
                Err(e) => errors::from_cloud(Service::Nova, &e),
            }
        }
        other => bad(&format!("There is no such action: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_filter_is_a_regex_search() {
        assert!(name_matches("demo", "x-demo-cp-1"));
        assert!(name_matches("^demo-cp", "demo-cp-1"));
        assert!(!name_matches("^demo-cp", "x-demo-cp-1"));
        assert!(name_matches("cp-1$", "demo-cp-1"));
        assert!(!name_matches("cp-1$", "demo-cp-10"));
        assert!(name_matches("^demo-.*-1$", "demo-cp-1"));
        assert!(name_matches("demo\\.x", "demo.x"));
        assert!(!name_matches("demo\\.x", "demoyx"));
    }
}
