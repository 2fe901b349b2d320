//! The HTTP API, versioned under `/api/v1`. Every route is declared with its OpenAPI
//! description next to its handler, so the document served at `/api/v1/openapi.json`
//! is generated from the code and lists exactly the routes served.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::backend::Command;
use crate::error::Failure;
use crate::fleet::Fleet;
use crate::types::{
    ApiError, ApplyResult, ClusterDetail, ClusterList, ClusterSummary, EventList, EventView,
    FaultKinds, FaultRequest, FaultView, PlanView, Problem, WhoAmI,
};
use crate::views;

/// The most events one answer holds.
const EVENTS_LIMIT_MAX: usize = 10_000;
/// The largest spec an apply takes (the same limit as a spec file).
pub const APPLY_BODY_MAX: usize = flightdeck_spec::load::SPEC_FILE_MAX_BYTES as usize;

pub struct ApiState {
    pub fleet: Arc<Fleet>,
    pub ready: AtomicBool,
    /// Turns true at shutdown: follow streams end, so the server can stop.
    pub stop: tokio::sync::watch::Receiver<bool>,
}

type S = State<Arc<ApiState>>;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "flightdeck",
        description = "The flightdeck daemon: clusters, their plans and events, and the embedded simulator. Every route but /healthz and /readyz needs `Authorization: Bearer <token>`; a viewer token may only GET."
    ),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every route, with its OpenAPI document.
pub fn router(state: Arc<ApiState>) -> (axum::Router, utoipa::openapi::OpenApi) {
    let (router, doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(list_clusters, apply))
        .routes(routes!(get_cluster, delete_cluster))
        .routes(routes!(resume_cluster))
        .routes(routes!(plan_cluster))
        .routes(routes!(cluster_events))
        .routes(routes!(all_events))
        .routes(routes!(sim_faults, start_fault))
        .routes(routes!(sim_objects))
        .routes(routes!(whoami))
        .routes(routes!(openapi_doc))
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .with_state(state)
        .split_for_parts();
    (router, doc)
}

/// Every cluster, one summary each.
#[utoipa::path(get, path = "/api/v1/clusters", tag = "clusters",
    responses((status = 200, body = ClusterList), (status = 401, body = ApiError)))]
async fn list_clusters(State(s): S) -> Json<ClusterList> {
    let items = s
        .fleet
        .published
        .views()
        .into_iter()
        .map(|d| fresh(&s, d).summary)
        .collect();
    Json(ClusterList { items })
}

/// A view with `now` read at the answer, on the cluster's own clock, so that ages are
/// counted to this moment (a view is published when its cluster last changed).
fn fresh(s: &ApiState, mut d: ClusterDetail) -> ClusterDetail {
    let sim = s
        .fleet
        .route_of(&d.summary.name)
        .is_some_and(|r| r.is_sim());
    d.summary.now = match (&s.fleet.sim, sim) {
        (Some(h), true) => h.now().millis(),
        _ => crate::wallclock::wall().millis(),
    };
    d
}

#[derive(Deserialize, IntoParams)]
struct ApplyQuery {
    /// The file name the spec came from, used in error messages.
    source: Option<String>,
    /// A new cluster takes over what one earlier cluster of its name left in the cloud
    /// (objects tagged with its name under another UID), instead of holding.
    #[serde(default)]
    adopt: bool,
}

#[derive(Deserialize, IntoParams)]
struct DeleteQuery {
    /// The deletion may end although the cloud shows none of the cluster's recorded
    /// objects (an operator checked they are gone).
    #[serde(default)]
    forget: bool,
}

/// Applies one or more `kind: Cluster` documents (YAML or JSON): creates new clusters,
/// updates known ones.
#[utoipa::path(post, path = "/api/v1/clusters", tag = "clusters", params(ApplyQuery),
    request_body(content = String, description = "YAML or JSON cluster documents", content_type = "application/yaml"),
    responses((status = 200, body = ApplyResult), (status = 422, body = ApiError),
        (status = 409, body = ApiError), (status = 403, body = ApiError)))]
async fn apply(State(s): S, Query(q): Query<ApplyQuery>, body: String) -> Response {
    let source = q.source.unwrap_or_else(|| "request body".into());
    let docs = match flightdeck_spec::load_documents(&body, &source) {
        Ok(d) => d,
        Err(e) => return spec_failure(e).into_response(),
    };
    let mut specs = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        match d {
            flightdeck_spec::Document::Cluster(c) => {
                if let Some(path) = flightdeck_spec::userdata::unresolved(&c) {
                    return Failure::unprocessable(format!(
                        "{source}: document {}: {path}: names a file the daemon cannot read; `flightdeck apply -f FILE` sends its content",
                        i + 1
                    ))
                    .into_response();
                }
                if let Some(Err((field, problem))) =
                    c.spec.workload.as_ref().map(|w| w.check_absolute())
                {
                    return Failure::unprocessable(format!(
                        "{source}: document {}: {field}: {problem}",
                        i + 1
                    ))
                    .into_response();
                }
                if specs
                    .iter()
                    .any(|x: &flightdeck_spec::Cluster| x.name() == c.name())
                {
                    return Failure::unprocessable(format!(
                        "{source}: document {}: cluster {} is defined twice",
                        i + 1,
                        c.name()
                    ))
                    .into_response();
                }
                specs.push(*c);
            }
            flightdeck_spec::Document::Scenario(_) => {
                return Failure::unprocessable(format!(
                    "{source}: document {}: a Scenario cannot be applied; run it with `flightdeck sim run`",
                    i + 1
                ))
                .into_response();
            }
        }
    }
    if specs.is_empty() {
        return Failure::unprocessable(format!("{source}: holds no kind: Cluster document"))
            .into_response();
    }
    match s.fleet.apply(specs, q.adopt).await {
        Ok(items) => Json(ApplyResult { items }).into_response(),
        Err(f) => f.into_response(),
    }
}

fn spec_failure(e: flightdeck_spec::load::SpecError) -> Failure {
    let mut f = Failure::unprocessable(e.to_string());
    f.problems.push(Problem {
        source: e.source.clone(),
        document: e.document + 1,
        path: e.path.clone(),
        line: e.line,
        column: e.column,
        message: e.message.clone(),
    });
    f
}

/// One cluster: spec, status (machines, members, conditions) and memory.
#[utoipa::path(get, path = "/api/v1/clusters/{name}", tag = "clusters",
    params(("name" = String, Path, description = "The cluster's name")),
    responses((status = 200, body = ClusterDetail), (status = 404, body = ApiError)))]
async fn get_cluster(
    State(s): S,
    Path(name): Path<String>,
) -> Result<Json<ClusterDetail>, Failure> {
    s.fleet
        .published
        .view(&name)
        .map(|d| Json(fresh(&s, d)))
        .ok_or_else(|| Failure::not_found(&name))
}

/// Starts deleting a cluster (F12). It shows `Deleting` until the cloud confirms that
/// everything it owned is gone, then disappears.
#[utoipa::path(delete, path = "/api/v1/clusters/{name}", tag = "clusters",
    params(("name" = String, Path, description = "The cluster's name"), DeleteQuery),
    responses((status = 202, body = ClusterSummary), (status = 404, body = ApiError),
        (status = 409, body = ApiError)))]
async fn delete_cluster(
    State(s): S,
    Path(name): Path<String>,
    Query(q): Query<DeleteQuery>,
) -> Response {
    let done = s
        .fleet
        .command(&name, |r| Command::Delete(name.clone(), q.forget, r))
        .await;
    match done {
        Err(f) => f.into_response(),
        Ok(()) => match s.fleet.published.view(&name) {
            Some(v) => (StatusCode::ACCEPTED, Json(v.summary)).into_response(),
            None => StatusCode::ACCEPTED.into_response(),
        },
    }
}

/// Closes the cluster's churn breakers (F11), so the stopped objects are reconciled
/// again.
#[utoipa::path(post, path = "/api/v1/clusters/{name}/resume", tag = "clusters",
    params(("name" = String, Path, description = "The cluster's name")),
    responses((status = 200, body = ClusterSummary), (status = 404, body = ApiError)))]
async fn resume_cluster(State(s): S, Path(name): Path<String>) -> Response {
    let done = s
        .fleet
        .command(&name, |r| Command::Resume(name.clone(), r))
        .await;
    match done {
        Err(f) => f.into_response(),
        Ok(()) => match s.fleet.published.view(&name) {
            Some(v) => Json(v.summary).into_response(),
            None => Failure::not_found(&name).into_response(),
        },
    }
}

/// The dry run: what a reconcile would do now, from what the cloud shows now and the
/// cluster's memory, with repairs, reasons and budgets. Nothing is changed.
#[utoipa::path(get, path = "/api/v1/clusters/{name}/plan", tag = "clusters",
    params(("name" = String, Path, description = "The cluster's name")),
    responses((status = 200, body = PlanView), (status = 404, body = ApiError),
        (status = 502, body = ApiError)))]
async fn plan_cluster(State(s): S, Path(name): Path<String>) -> Result<Json<PlanView>, Failure> {
    s.fleet
        .command(&name, |r| Command::Plan(name.clone(), r))
        .await
        .map(Json)
}

#[derive(Deserialize, IntoParams)]
struct EventsQuery {
    /// Keep the answer open and send new events as they happen (server-sent events).
    #[serde(default)]
    follow: bool,
    /// The most events of the history sent (default 100).
    limit: Option<usize>,
}

/// A cluster's events, oldest first; with `follow=true`, a stream of server-sent events
/// (`event: event`, `data: <EventView>`).
#[utoipa::path(get, path = "/api/v1/clusters/{name}/events", tag = "events",
    params(("name" = String, Path, description = "The cluster's name"), EventsQuery),
    responses((status = 200, body = EventList, description = "JSON, or text/event-stream with follow=true"),
        (status = 404, body = ApiError)))]
async fn cluster_events(
    State(s): S,
    Path(name): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Response {
    let limit = q.limit.unwrap_or(100).min(EVENTS_LIMIT_MAX);
    let known = s.fleet.published.view(&name).is_some();
    let stored: Vec<flightdeck_plan::Event> = match s.fleet.store.events(&name) {
        Ok(e) => e,
        Err(e) => return Failure::internal(e.to_string()).into_response(),
    };
    if !known && stored.is_empty() {
        return Failure::not_found(&name).into_response();
    }
    let skip = stored.len().saturating_sub(limit);
    let history: Vec<EventView> = stored.iter().skip(skip).map(views::event).collect();
    events_answer(&s, history, Some(name), q.follow)
}

/// Every cluster's recent events, oldest first; with `follow=true`, a stream.
#[utoipa::path(get, path = "/api/v1/events", tag = "events", params(EventsQuery),
    responses((status = 200, body = EventList, description = "JSON, or text/event-stream with follow=true")))]
async fn all_events(State(s): S, Query(q): Query<EventsQuery>) -> Response {
    let limit = q.limit.unwrap_or(100).min(EVENTS_LIMIT_MAX);
    let history = s.fleet.published.recent_events(None, limit);
    events_answer(&s, history, None, q.follow)
}

fn now_ms(s: &ApiState) -> u64 {
    s.fleet
        .sim
        .as_ref()
        .map_or_else(crate::wallclock::wall, |h| h.now())
        .millis()
}

fn events_answer(
    s: &ApiState,
    history: Vec<EventView>,
    cluster: Option<String>,
    follow: bool,
) -> Response {
    if !follow {
        return Json(EventList {
            items: history,
            now: now_ms(s),
        })
        .into_response();
    }
    // Subscribed before the history is sent, so nothing falls between the two.
    let rx = s.fleet.published.follow();
    Sse::new(follow_stream(history, rx, cluster, s.stop.clone()))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn sse(e: &EventView) -> SseEvent {
    SseEvent::default()
        .event("event")
        .json_data(e)
        .unwrap_or_else(|_| SseEvent::default().comment("unencodable event"))
}

fn follow_stream(
    history: Vec<EventView>,
    rx: tokio::sync::broadcast::Receiver<EventView>,
    cluster: Option<String>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let last = history.last().cloned();
    let first = futures_util::stream::iter(history.into_iter().map(|e| Ok(sse(&e))));
    let live = futures_util::stream::unfold(
        (rx, cluster, last, stop),
        |(mut rx, cluster, last, mut stop)| async move {
            loop {
                if *stop.borrow() {
                    return None;
                }
                let next = tokio::select! {
                    r = rx.recv() => r,
                    _ = stop.changed() => return None,
                };
                match next {
                    Ok(e) => {
                        if cluster.as_deref().is_some_and(|c| c != e.cluster) {
                            continue;
                        }
                        // An event already sent with the history is not sent twice.
                        if last.as_ref().is_some_and(|l| e.at < l.at || &e == l) {
                            continue;
                        }
                        return Some((Ok(sse(&e)), (rx, cluster, None, stop)));
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        let note = SseEvent::default()
                            .comment(format!("{n} events were missed: this follower fell behind"));
                        return Some((Ok(note), (rx, cluster, last, stop)));
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    futures_util::StreamExt::chain(first, live)
}

/// The embedded simulator's fault kinds and the faults it holds.
#[utoipa::path(get, path = "/api/v1/sim/faults", tag = "simulator",
    responses((status = 200, body = FaultKinds), (status = 404, body = ApiError)))]
async fn sim_faults(State(s): S) -> Result<Json<FaultKinds>, Failure> {
    let Some(sim) = &s.fleet.sim else {
        return Err(no_sim());
    };
    Ok(Json(FaultKinds {
        kinds: crate::sim_host::SimHost::kinds(),
        active: sim.faults(),
    }))
}

fn no_sim() -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        "the embedded simulator is not running (serve was started with --no-sim)",
    )
}

/// Breaks the embedded simulator on purpose: starts one of its fault kinds against a
/// cluster that lives on it, from now on.
#[utoipa::path(post, path = "/api/v1/sim/faults", tag = "simulator", request_body = FaultRequest,
    responses((status = 201, body = FaultView), (status = 422, body = ApiError),
        (status = 404, body = ApiError)))]
async fn start_fault(State(s): S, Json(req): Json<FaultRequest>) -> Response {
    let Some(sim) = &s.fleet.sim else {
        return no_sim().into_response();
    };
    let Some(r) = s.fleet.route_of(&req.cluster) else {
        return Failure::unprocessable(format!(
            "cluster: {} is not known to this flightdeck",
            req.cluster
        ))
        .into_response();
    };
    let Some(kind) = r.sim_kind() else {
        return Failure::unprocessable(format!(
            "cluster: {} lives on {}, not on the embedded simulator",
            req.cluster,
            r.label()
        ))
        .into_response();
    };
    match sim.inject(&req, kind) {
        Ok(v) => {
            tracing::info!(kind = %v.kind, cluster = %v.cluster, "simulator fault started");
            (StatusCode::CREATED, Json(v)).into_response()
        }
        Err(f) => f.into_response(),
    }
}

/// What the embedded simulator itself holds of a cluster (its ground truth): objects
/// tagged with the cluster's name, every route on its routers, and its shared
/// OpenNebula templates and images. For checking that a deletion left nothing.
#[utoipa::path(get, path = "/api/v1/sim/objects/{name}", tag = "simulator",
    params(("name" = String, Path, description = "The cluster's name (known or deleted)")),
    responses((status = 200, body = crate::types::SimObjects), (status = 404, body = ApiError)))]
async fn sim_objects(State(s): S, Path(name): Path<String>) -> Response {
    let Some(sim) = &s.fleet.sim else {
        return no_sim().into_response();
    };
    Json(sim.objects(&name)).into_response()
}

/// The role of the token presented: what the web view offers depends on it (the API
/// checks every request on its own).
#[utoipa::path(get, path = "/api/v1/whoami", tag = "meta",
    responses((status = 200, body = WhoAmI), (status = 401, body = ApiError)))]
async fn whoami(role: Option<axum::Extension<crate::auth::Role>>) -> Json<WhoAmI> {
    let role = match role.map(|r| r.0) {
        Some(crate::auth::Role::Admin) => "admin",
        _ => "viewer",
    };
    Json(WhoAmI { role: role.into() })
}

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI 3 document", content_type = "application/json")))]
async fn openapi_doc(State(s): S) -> Response {
    let _ = &s;
    match crate::OPENAPI.get() {
        Some(doc) => ([(header::CONTENT_TYPE, "application/json")], doc.clone()).into_response(),
        None => Failure::internal("the OpenAPI document is not built yet").into_response(),
    }
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "meta", security(()),
    responses((status = 200, description = "ok", content_type = "text/plain")))]
async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: the store is open and every stored cluster's backend runs.
#[utoipa::path(get, path = "/readyz", tag = "meta", security(()),
    responses((status = 200, description = "ok", content_type = "text/plain"),
        (status = 503, description = "not ready", content_type = "text/plain")))]
async fn readyz(State(s): S) -> Response {
    if s.ready.load(Ordering::Relaxed) {
        "ok".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopping").into_response()
    }
}

/// Prometheus metrics (text exposition format).
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
async fn metrics(State(s): S) -> Response {
    s.fleet.published.refresh_fleet_gauges();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.fleet.published.metrics.encode(),
    )
        .into_response()
}
