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
pub const EVENTS_LIMIT_MAX: usize = 10_000;
/// The most events of the history a follow stream starts with: a stream's history is
/// held until its reader takes it.
pub const FOLLOW_LIMIT_MAX: usize = 1_000;
/// The largest spec an apply takes (the same limit as a spec file).
pub const APPLY_BODY_MAX: usize = flightdeck_spec::load::SPEC_FILE_MAX_BYTES as usize;

pub struct ApiState {
    pub fleet: Arc<Fleet>,
    pub ready: AtomicBool,
    /// Turns true at shutdown: follow streams end, so the server can stop.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// Applies parsed at once (`--max-applies`): a large spec is parsed off the async
    /// workers, and only this many at a time.
    pub applies: Arc<tokio::sync::Semaphore>,
    /// Event streams open per token (`--max-streams-per-token`).
    pub streams: crate::streams::Streams,
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
        .routes(routes!(cluster_kubeconfig))
        .routes(routes!(plan_cluster))
        .routes(routes!(cluster_events))
        .routes(routes!(all_events))
        .routes(routes!(sim_faults, start_fault))
        .routes(routes!(stop_fault))
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
        (status = 409, body = ApiError), (status = 403, body = ApiError),
        (status = 400, body = ApiError), (status = 408, body = ApiError),
        (status = 413, body = ApiError), (status = 415, body = ApiError)))]
async fn apply(
    State(s): S,
    Query(q): Query<ApplyQuery>,
    headers: axum::http::HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    if let Err(f) = crate::contract::spec_content_type(&headers) {
        return f.into_response();
    }
    let body = match body {
        Ok(b) => b,
        Err(e) => return crate::contract::body_failure(e).into_response(),
    };
    let source = q.source.unwrap_or_else(|| "request body".into());
    // A large spec takes seconds to parse: off the async workers, a few at a time, so
    // the rest of the API keeps answering.
    // The turn goes with the parse, not with this request: a client that hangs up does
    // not stop a parse already started, and must not free its turn before it ends.
    let Ok(turn) = s.applies.clone().acquire_owned().await else {
        return Failure::unavailable("the daemon is stopping").into_response();
    };
    let parsed = tokio::task::spawn_blocking(move || {
        let parsed = parse_apply(&body, &source);
        drop(turn);
        parsed
    })
    .await;
    let specs = match parsed {
        Ok(Ok(specs)) => specs,
        Ok(Err(f)) => return f.into_response(),
        Err(e) => {
            return Failure::internal(format!("parsing the spec failed: {e}")).into_response();
        }
    };
    match s.fleet.apply(specs, q.adopt).await {
        Ok(items) => Json(ApplyResult { items }).into_response(),
        Err(f) => f.into_response(),
    }
}

/// The clusters of an apply's body, every one checked; or why not.
fn parse_apply(body: &[u8], source: &str) -> Result<Vec<flightdeck_spec::Cluster>, Failure> {
    let text = std::str::from_utf8(body).map_err(|e| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{source}: the body is not UTF-8 text (at byte {}): a spec is YAML or JSON",
                e.valid_up_to()
            ),
        )
    })?;
    let docs = flightdeck_spec::load_documents(text, source).map_err(spec_failure)?;
    let mut specs: Vec<flightdeck_spec::Cluster> = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        let at =
            |what: String| Failure::unprocessable(format!("{source}: document {}: {what}", i + 1));
        let c = match d {
            flightdeck_spec::Document::Cluster(c) => c,
            flightdeck_spec::Document::Scenario(_) => {
                return Err(at(
                    "a Scenario cannot be applied; run it with `flightdeck sim run`".into(),
                ));
            }
        };
        if let Some(path) = flightdeck_spec::userdata::unresolved(&c) {
            return Err(at(format!(
                "{path}: names a file the daemon cannot read; `flightdeck apply -f FILE` sends its content"
            )));
        }
        if let Some(Err((field, problem))) = c.spec.workload.as_ref().map(|w| w.check_absolute()) {
            return Err(at(format!("{field}: {problem}")));
        }
        if specs.iter().any(|x| x.name() == c.name()) {
            return Err(at(format!("cluster {} is defined twice", c.name())));
        }
        specs.push(*c);
    }
    if specs.is_empty() {
        return Err(Failure::unprocessable(format!(
            "{source}: holds no kind: Cluster document"
        )));
    }
    Ok(specs)
}

fn spec_failure(e: flightdeck_spec::load::SpecError) -> Failure {
    let problems: Vec<Problem> = e
        .all()
        .map(|p| Problem {
            source: p.source.clone(),
            document: p.document + 1,
            path: p.path.clone(),
            line: p.line,
            column: p.column,
            message: p.message.clone(),
        })
        .collect();
    // One problem is the message itself; several are summed up, each in `problems`.
    let mut f = Failure::unprocessable(match problems.len() {
        1 => e.to_string(),
        n => format!("{}: the spec has {n} problems", e.source),
    });
    f.problems = problems;
    f
}

/// One cluster: spec, status (machines, members, conditions) and memory. A viewer sees
/// each userData's size and digest, not its content.
#[utoipa::path(get, path = "/api/v1/clusters/{name}", tag = "clusters",
    params(("name" = String, Path, description = "The cluster's name")),
    responses((status = 200, body = ClusterDetail), (status = 404, body = ApiError)))]
async fn get_cluster(
    State(s): S,
    Path(name): Path<String>,
    role: Option<axum::Extension<crate::auth::Role>>,
) -> Result<Json<ClusterDetail>, Failure> {
    let d = s
        .fleet
        .published
        .view(&name)
        .ok_or_else(|| Failure::not_found(&name))?;
    let d = fresh(&s, d);
    // User data can hold secrets: only the admin reads its content.
    Ok(Json(match role.map(|r| r.0) {
        Some(crate::auth::Role::Admin) => d,
        _ => views::without_user_data(d),
    }))
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

#[derive(Deserialize, IntoParams)]
struct KubeconfigQuery {
    /// How long its client certificate is valid: 1m to 168h (default 24h).
    ttl: Option<String>,
}

/// A kubeconfig of a cluster flightdeck bootstraps (`spec.bootstrap.provider:
/// kubeadm`): its API server verified against the cluster CA, and a client certificate
/// the CA signs for `ttl`, in the cluster administrators' group. Admin only; issuing
/// one is an event, never its content.
#[utoipa::path(post, path = "/api/v1/clusters/{name}/kubeconfig", tag = "clusters",
    params(("name" = String, Path, description = "The cluster's name"), KubeconfigQuery),
    responses((status = 200, body = String, content_type = "application/yaml",
            description = "The kubeconfig"),
        (status = 404, body = ApiError), (status = 409, body = ApiError),
        (status = 403, body = ApiError), (status = 422, body = ApiError)))]
async fn cluster_kubeconfig(
    State(s): S,
    Path(name): Path<String>,
    Query(q): Query<KubeconfigQuery>,
) -> Response {
    let ttl = match q
        .ttl
        .as_deref()
        .unwrap_or("24h")
        .parse::<flightdeck_spec::Duration>()
    {
        Ok(ttl) => ttl,
        Err(e) => {
            return Failure::unprocessable(format!("ttl: {e} (e.g. ttl=24h)")).into_response();
        }
    };
    let user = "flightdeck-admin".to_string();
    let done = s
        .fleet
        .command(&name, |r| Command::Kubeconfig(name.clone(), ttl, user, r))
        .await;
    match done {
        Err(f) => f.into_response(),
        Ok(text) => (
            [
                (axum::http::header::CONTENT_TYPE, "application/yaml"),
                (axum::http::header::CACHE_CONTROL, "no-store"),
            ],
            text.expose().to_string(),
        )
            .into_response(),
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
    /// The most events of the history sent (default 100; at most 10,000, or 1,000 with
    /// `follow=true`).
    limit: Option<usize>,
}

impl EventsQuery {
    /// The history's length, or a 422 naming `limit` when it is above the cap.
    fn limit(&self) -> Result<usize, Failure> {
        let max = if self.follow {
            FOLLOW_LIMIT_MAX
        } else {
            EVENTS_LIMIT_MAX
        };
        match self.limit {
            None => Ok(100.min(max)),
            Some(n) if n <= max => Ok(n),
            Some(n) => Err(Failure::unprocessable(format!(
                "limit: {n} is above the most {} holds ({max})",
                if self.follow {
                    "a follow stream's history"
                } else {
                    "one answer"
                }
            ))),
        }
    }
}

/// A cluster's events, oldest first; with `follow=true`, a stream of server-sent events
/// (`event: event`, `data: <EventView>`).
#[utoipa::path(get, path = "/api/v1/clusters/{name}/events", tag = "events",
    params(("name" = String, Path, description = "The cluster's name"), EventsQuery),
    responses((status = 200, body = EventList, description = "JSON, or text/event-stream with follow=true"),
        (status = 404, body = ApiError), (status = 422, body = ApiError),
        (status = 429, body = ApiError)))]
async fn cluster_events(
    State(s): S,
    Path(name): Path<String>,
    Query(q): Query<EventsQuery>,
    role: Option<axum::Extension<crate::auth::Role>>,
) -> Response {
    let limit = match q.limit() {
        Ok(l) => l,
        Err(f) => return f.into_response(),
    };
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
    events_answer(&s, history, Some(name), q.follow, role.map(|r| r.0))
}

/// Every cluster's recent events, oldest first; with `follow=true`, a stream.
#[utoipa::path(get, path = "/api/v1/events", tag = "events", params(EventsQuery),
    responses((status = 200, body = EventList, description = "JSON, or text/event-stream with follow=true"),
        (status = 422, body = ApiError), (status = 429, body = ApiError)))]
async fn all_events(
    State(s): S,
    Query(q): Query<EventsQuery>,
    role: Option<axum::Extension<crate::auth::Role>>,
) -> Response {
    let limit = match q.limit() {
        Ok(l) => l,
        Err(f) => return f.into_response(),
    };
    let history = s.fleet.published.recent_events(None, limit);
    events_answer(&s, history, None, q.follow, role.map(|r| r.0))
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
    role: Option<crate::auth::Role>,
) -> Response {
    if !follow {
        return Json(EventList {
            items: history,
            now: now_ms(s),
        })
        .into_response();
    }
    // Held by the stream: the token's place is given back when the stream ends.
    let place = match s.streams.open(role) {
        Ok(p) => p,
        Err(f) => return f.into_response(),
    };
    // Subscribed before the history is sent, so nothing falls between the two.
    let rx = s.fleet.published.follow();
    let stream = follow_stream(history, rx, cluster, s.stop.clone());
    let stream = futures_util::StreamExt::map(stream, move |e| {
        let _ = &place;
        e
    });
    Sse::new(stream)
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
                        // A follower that fell a whole buffer behind is not kept: it
                        // would only read a stream with holes. It is told so, and may
                        // follow again (the CLI prints the reason).
                        let note = SseEvent::default().event("dropped").data(format!(
                            "{n} events were missed: this follower fell behind and is dropped; follow again"
                        ));
                        stop = dropped();
                        return Some((Ok(note), (rx, cluster, last, stop)));
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    futures_util::StreamExt::chain(first, live)
}

/// A stop signal already given: the stream it is handed to ends at its next turn.
fn dropped() -> tokio::sync::watch::Receiver<bool> {
    tokio::sync::watch::channel(true).1
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

/// Stops a fault of the embedded simulator before its end: it strikes no more, and what
/// it held (members offline, locked templates, a drained node) is given back at once.
#[utoipa::path(delete, path = "/api/v1/sim/faults/{id}", tag = "simulator",
    params(("id" = String, Path, description = "The fault's id (`FaultView.id`)")),
    responses((status = 200, body = FaultView), (status = 404, body = ApiError)))]
async fn stop_fault(State(s): S, Path(id): Path<String>) -> Response {
    let Some(sim) = &s.fleet.sim else {
        return no_sim().into_response();
    };
    match sim.stop(&id) {
        Ok(v) => {
            tracing::info!(kind = %v.kind, cluster = %v.cluster, id = %id, "simulator fault stopped");
            Json(v).into_response()
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
