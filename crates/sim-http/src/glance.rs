//! Glance v2, as far as clients need it to turn image names into ids and back.
//!
//! The simulator has no image catalog: a server's image is whatever name it was
//! created with. So Glance here knows **every** name: `GET /v2/images?name=X` answers
//! one active image named `X`, whose id is derived from the name (stable across runs
//! and servers). Ids are remembered once answered, and ids of images that servers
//! were booted from are always known, so `GET /v2/images/{id}` and Nova's `imageRef`
//! map them back to names. An id never handed out is not found.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use crate::wire::{self, Query, TimeStyle, iso, stable_id};
use crate::{App, errors};

/// The most image names remembered; the ids of images servers use are found without.
const IMAGES_MAX: usize = 10_000;

/// Image names by id, as answered so far.
#[derive(Default)]
pub(crate) struct Images {
    by_id: BTreeMap<String, String>,
}

/// The id Glance gives the image called `name`.
pub(crate) fn image_id(name: &str) -> String {
    stable_id(&format!("image/{name}"))
}

/// The image id `name` answers as, remembered so that it can be mapped back.
pub(crate) fn register(app: &App, name: &str) -> String {
    let id = image_id(name);
    let mut images = app.images.lock().unwrap_or_else(|e| e.into_inner());
    if images.by_id.len() < IMAGES_MAX {
        images.by_id.insert(id.clone(), name.to_string());
    }
    id
}

/// The name of the image with `id`, if that id was ever answered or a server was
/// booted from it.
pub(crate) fn name_of(app: &App, id: &str) -> Option<String> {
    if let Some(n) = app
        .images
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .by_id
        .get(id)
    {
        return Some(n.clone());
    }
    app.cloud
        .snapshot()
        .servers
        .iter()
        .find(|s| image_id(&s.image) == id)
        .map(|s| s.image.clone())
}

pub(crate) fn routes(app: App) -> Router<App> {
    let api = Router::new()
        .route("/image/v2/images", get(list))
        .route("/image/v2/images/{id}", get(show))
        .route_layer(axum::middleware::from_fn_with_state(
            app,
            crate::keystone::require_token,
        ));
    Router::new()
        .route("/image", get(versions))
        .route("/image/", get(versions))
        .route("/image/v2", get(versions))
        .route("/image/v2/", get(versions))
        .merge(api)
}

async fn versions(State(app): State<App>) -> Response {
    let href = format!("{}/image/v2/", app.base);
    let v = |id: &str, status: &str| json!({"id": id, "status": status, "links": [{"rel": "self", "href": href}]});
    wire::json(
        StatusCode::MULTIPLE_CHOICES,
        &json!({"versions": [v("v2.16", "CURRENT"), v("v2.15", "SUPPORTED"), v("v2.0", "SUPPORTED")]}),
    )
}

fn render(app: &App, id: &str, name: &str) -> Value {
    let at = iso(Timestamp::SIM_EPOCH, TimeStyle::Zulu);
    json!({
        "id": id,
        "name": name,
        "status": "active",
        "visibility": "public",
        "protected": false,
        "os_hidden": false,
        "checksum": null,
        "os_hash_algo": null,
        "os_hash_value": null,
        "size": 1024,
        "virtual_size": null,
        "min_disk": 0,
        "min_ram": 0,
        "disk_format": "qcow2",
        "container_format": "bare",
        "owner": app.project_id,
        "created_at": at,
        "updated_at": at,
        "tags": [],
        "self": format!("/v2/images/{id}"),
        "file": format!("/v2/images/{id}/file"),
        "schema": "/v2/schemas/image",
    })
}

async fn list(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    let mut images: Vec<Value> = match q.get("name") {
        Some(name) => {
            let id = register(&app, name);
            vec![render(&app, &id, name)]
        }
        None => {
            let mut known: BTreeMap<String, String> = app
                .images
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .by_id
                .clone();
            for s in app.cloud.snapshot().servers {
                known
                    .entry(image_id(&s.image))
                    .or_insert_with(|| s.image.clone());
            }
            known
                .iter()
                .map(|(id, name)| render(&app, id, name))
                .collect()
        }
    };
    images.retain(|i| wire::attributes_match(i, &q, &["name", "member_status", "os_hidden"]));
    let first = match raw.as_deref() {
        Some(r) if !r.is_empty() => format!("/v2/images?{r}"),
        _ => "/v2/images".to_string(),
    };
    wire::json(
        StatusCode::OK,
        &json!({"images": images, "schema": "/v2/schemas/images", "first": first}),
    )
}

async fn show(State(app): State<App>, Path(id): Path<String>) -> Response {
    match name_of(&app, &id) {
        Some(name) => wire::json(StatusCode::OK, &render(&app, &id, &name)),
        None => errors::glance(
            StatusCode::NOT_FOUND,
            &format!("No image found with ID {id}"),
        ),
    }
}
