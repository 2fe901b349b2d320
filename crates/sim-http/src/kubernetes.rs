//! The simulated Kubernetes API servers (the KubeVirt infra cluster and one workload
//! cluster per flightdeck cluster) served over HTTP on one listener, one path prefix per
//! cluster: `{base}/clusters/{cluster}` is what a kubeconfig's `server:` names, so
//! `{base}/clusters/infra/api/v1/nodes` is the infra cluster's `/api/v1/nodes`.
//!
//! Each request is one [`SimCloud::kube_request`] whose answer (status, content type,
//! body) is served verbatim, so the simulator's counting and faults apply exactly as in
//! process. Authentication is not modelled: any bearer token (or none) is accepted.
//!
//! A watch (`watch=true` or `watch=1`) is one call, as in process: the simulator
//! answers the events after `resourceVersion` and ends, so the server asks again
//! ([`SimCloud::kube_watch_continue`], not counted) every [`WATCH_POLL_INTERVAL`] with the
//! latest `resourceVersion` it has forwarded, and streams the new event lines in a chunked response, as the API server
//! does, until `timeoutSeconds` (default [`WATCH_TIMEOUT_DEFAULT`], at most
//! [`WATCH_TIMEOUT_MAX`]) runs out or the client goes away. An error answer after the
//! stream has begun is forwarded as an `ERROR` event carrying its Status, which ends the
//! watch (a `410 Gone` makes the client list again).
//!
//! A body over [`KUBE_BODY_MAX_BYTES`] answers 413 with a `Status`, as the API server
//! answers one over its limit (3 MiB there).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use flightdeck_sim::{
    KubeRequest, KubeResponse, SimCloud, query_param, watch_line_version, with_resource_version,
};
use serde_json::{Value, json};

/// The largest request body read; a larger one answers 413 before it is read whole.
pub const KUBE_BODY_MAX_BYTES: usize = 4 * 1024 * 1024;
/// How long a watch lasts when the client gives no `timeoutSeconds`.
pub const WATCH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// The longest watch served, whatever `timeoutSeconds` asks for.
pub const WATCH_TIMEOUT_MAX: Duration = Duration::from_secs(300);
/// How often a watch asks the simulator for new events.
pub const WATCH_POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The most event lines one poll of a watch forwards: a longer answer ends the watch
/// with a 410 `ERROR` event, so the client lists again instead of the server buffering
/// without bound.
pub const WATCH_EVENTS_PER_POLL_MAX: usize = 10_000;

/// The URL prefix each cluster is served under.
const PREFIX: &str = "/clusters/";

/// Serves the simulated Kubernetes clusters on `listener` until the listener fails.
/// Cluster `NAME` is reached at `http://<listener's local address>/clusters/NAME`.
pub async fn serve_kubernetes(
    cloud: Arc<SimCloud>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(
        infra = %format!("http://{addr}/clusters/{}", flightdeck_sim::INFRA_CLUSTER),
        "simulated Kubernetes listening"
    );
    axum::serve(listener, kubernetes_router(cloud)).await
}

/// Every simulated cluster's API as one [`Router`], for callers that serve it
/// themselves: any method under `/clusters/{cluster}/`, and a 404 `Status` elsewhere.
pub fn kubernetes_router(cloud: Arc<SimCloud>) -> Router {
    Router::new()
        .route("/clusters/{cluster}", any(cluster_request))
        .route("/clusters/{cluster}/", any(cluster_request))
        .route("/clusters/{cluster}/{*rest}", any(cluster_request))
        .fallback(not_found)
        .with_state(cloud)
}

async fn cluster_request(State(cloud): State<Arc<SimCloud>>, req: Request) -> Response {
    // The raw (still percent-encoded) path, as the API server would see it.
    let Some((cluster, path)) = split_path(req.uri().path()) else {
        return not_found().await;
    };
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().as_str().to_string();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let declared_too_large = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > KUBE_BODY_MAX_BYTES as u64);
    if declared_too_large {
        return too_large();
    }
    let body = match axum::body::to_bytes(req.into_body(), KUBE_BODY_MAX_BYTES).await {
        Ok(b) => b.to_vec(),
        // Past the limit (or the client went away, when the answer reaches nobody).
        Err(_) => return too_large(),
    };
    let kube = KubeRequest {
        method,
        path,
        query,
        body,
        content_type,
    };
    if kube.is_watch() {
        return watch(cloud, cluster, kube);
    }
    verbatim(cloud.kube_request(&cluster, kube))
}

/// `/clusters/{cluster}/{rest}` as the cluster's name and `/{rest}`.
fn split_path(raw: &str) -> Option<(String, String)> {
    let tail = raw.strip_prefix(PREFIX)?;
    let (cluster, rest) = tail.split_once('/').unwrap_or((tail, ""));
    if cluster.is_empty() {
        return None;
    }
    Some((cluster.to_string(), format!("/{rest}")))
}

/// The simulator's answer as the HTTP response.
fn verbatim(resp: KubeResponse) -> Response {
    let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // The API server sends a 429's wait twice: in the Status and as `Retry-After`.
    let retry_after = (resp.status == 429)
        .then(|| serde_json::from_slice::<serde_json::Value>(&resp.body).ok())
        .flatten()
        .and_then(|v| {
            v.pointer("/details/retryAfterSeconds")
                .and_then(|s| s.as_u64())
        });
    let mut out = (status, resp.body).into_response();
    if let Some(secs) = retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        out.headers_mut().insert(header::RETRY_AFTER, v);
    }
    if let Ok(v) = HeaderValue::from_str(&resp.content_type) {
        out.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    out
}

/// How long the watch asked for by `timeoutSeconds` lasts.
fn watch_timeout(query: &str) -> Duration {
    match query_param(query, "timeoutSeconds").and_then(|v| v.parse::<u64>().ok()) {
        Some(0) | None => WATCH_TIMEOUT_DEFAULT,
        Some(s) => Duration::from_secs(s).min(WATCH_TIMEOUT_MAX),
    }
}

/// Where a watch stands: the request it repeats and the newest resourceVersion it has
/// forwarded.
struct Watch {
    cloud: Arc<SimCloud>,
    cluster: String,
    request: KubeRequest,
    /// The newest `resourceVersion` forwarded, `None` until an event carried one.
    resource_version: Option<String>,
    deadline: tokio::time::Instant,
    /// The first poll's events, sent before polling again.
    pending: Option<Bytes>,
    done: bool,
}

impl Watch {
    /// Asks the simulator once for the events after the newest resourceVersion: the
    /// lines to forward, or the `ERROR` event that ends the watch.
    fn poll(&mut self) -> Result<Bytes, Bytes> {
        let query = match &self.resource_version {
            Some(rv) => with_resource_version(&self.request.query, rv),
            None => self.request.query.clone(),
        };
        let resp = self.cloud.kube_watch_continue(
            &self.cluster,
            &KubeRequest {
                method: self.request.method.clone(),
                path: self.request.path.clone(),
                query,
                body: Vec::new(),
                content_type: self.request.content_type.clone(),
            },
        );
        if resp.status != 200 {
            return Err(error_event(&resp));
        }
        self.take_events(&resp.body)
    }

    /// The event lines of one answer, remembering the newest resourceVersion among them.
    fn take_events(&mut self, body: &[u8]) -> Result<Bytes, Bytes> {
        let mut out = Vec::with_capacity(body.len() + 1);
        for (i, line) in body
            .split(|b| *b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .enumerate()
        {
            if i >= WATCH_EVENTS_PER_POLL_MAX {
                return Err(error_line(&status_json(
                    410,
                    "Expired",
                    "too many events at once: list again",
                )));
            }
            if let Some(rv) = watch_line_version(line) {
                self.resource_version = Some(newer(self.resource_version.take(), rv));
            }
            out.extend_from_slice(line);
            out.push(b'\n');
        }
        Ok(Bytes::from(out))
    }
}

/// The newer of two resourceVersions: numerically when both are numbers (the
/// simulator's are), else the later seen.
fn newer(old: Option<String>, new: String) -> String {
    match old {
        Some(old) => match (old.parse::<u64>(), new.parse::<u64>()) {
            (Ok(o), Ok(n)) if o > n => old,
            _ => new,
        },
        None => new,
    }
}

/// An error answer as the watch event that ends a stream: `{"type":"ERROR","object":
/// <Status>}` (the answer's body when it is a Status, else a Status made from it).
fn error_event(resp: &KubeResponse) -> Bytes {
    let status = match serde_json::from_slice::<Value>(&resp.body) {
        Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => v,
        _ => status_json(
            resp.status,
            "InternalError",
            &String::from_utf8_lossy(&resp.body),
        ),
    };
    error_line(&status)
}

fn error_line(status: &Value) -> Bytes {
    let mut line = json!({ "type": "ERROR", "object": status }).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// A `metav1.Status` of failure.
fn status_json(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    })
}

fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        status_json(code.as_u16(), reason, message).to_string(),
    )
        .into_response()
}

/// Serves a watch: the first answer as it is if it is an error, else a chunked stream
/// of the events the simulator answers to repeated polls.
fn watch(cloud: Arc<SimCloud>, cluster: String, request: KubeRequest) -> Response {
    let timeout = watch_timeout(&request.query);
    let first = cloud.kube_request(
        &cluster,
        KubeRequest {
            method: request.method.clone(),
            path: request.path.clone(),
            query: request.query.clone(),
            body: Vec::new(),
            content_type: request.content_type.clone(),
        },
    );
    if first.status != 200 {
        return verbatim(first);
    }
    let content_type = first.content_type.clone();
    let mut state = Watch {
        cloud,
        cluster,
        resource_version: query_param(&request.query, "resourceVersion")
            .filter(|rv| !rv.is_empty() && *rv != "0")
            .map(str::to_string),
        request,
        deadline: tokio::time::Instant::now() + timeout,
        pending: None,
        done: false,
    };
    match state.take_events(&first.body) {
        Ok(lines) => state.pending = Some(lines),
        Err(end) => {
            state.pending = Some(end);
            state.done = true;
        }
    }
    // The stream is dropped when the client goes away, which ends the polling.
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(chunk) = st.pending.take()
                && !chunk.is_empty()
            {
                return Some((Ok::<_, Infallible>(chunk), st));
            }
            let now = tokio::time::Instant::now();
            if st.done || now >= st.deadline {
                return None;
            }
            tokio::time::sleep(WATCH_POLL_INTERVAL.min(st.deadline - now)).await;
            if tokio::time::Instant::now() >= st.deadline {
                return None;
            }
            match st.poll() {
                Ok(lines) => st.pending = Some(lines),
                Err(end) => {
                    st.pending = Some(end);
                    st.done = true;
                }
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

fn too_large() -> Response {
    status_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        &format!("Request entity too large: limit is {KUBE_BODY_MAX_BYTES}"),
    )
}

/// Any path outside `/clusters/{cluster}/`.
async fn not_found() -> Response {
    status_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_after_the_cluster_prefix_is_the_clusters_own() {
        assert_eq!(
            split_path("/clusters/infra/api/v1/nodes"),
            Some(("infra".into(), "/api/v1/nodes".into()))
        );
        assert_eq!(
            split_path("/clusters/demo"),
            Some(("demo".into(), "/".into()))
        );
        assert_eq!(split_path("/clusters//api"), None);
        assert_eq!(split_path("/api/v1"), None);
    }

    /// Whether a `GET` of nodes with `query` is a watch.
    fn is_watch(query: &str) -> bool {
        KubeRequest {
            method: "GET".into(),
            path: "/api/v1/nodes".into(),
            query: query.into(),
            ..KubeRequest::default()
        }
        .is_watch()
    }

    #[test]
    fn watch_is_true_or_1_and_its_timeout_is_bounded() {
        assert!(is_watch("watch=true&resourceVersion=3"));
        assert!(is_watch("labelSelector=a%3Db&watch=1"));
        assert!(!is_watch("watch=false"));
        assert!(!is_watch("watchx=true"));
        assert_eq!(watch_timeout("watch=1"), WATCH_TIMEOUT_DEFAULT);
        assert_eq!(
            watch_timeout("timeoutSeconds=5&watch=1"),
            Duration::from_secs(5)
        );
        assert_eq!(watch_timeout("timeoutSeconds=100000"), WATCH_TIMEOUT_MAX);
    }

    #[test]
    fn a_repeated_watch_asks_from_the_newest_resource_version() {
        assert_eq!(
            with_resource_version("watch=true&resourceVersion=3&timeoutSeconds=9", "17"),
            "watch=true&timeoutSeconds=9&resourceVersion=17"
        );
        assert_eq!(with_resource_version("", "5"), "resourceVersion=5");
        assert_eq!(newer(Some("9".into()), "10".into()), "10");
        assert_eq!(newer(Some("10".into()), "9".into()), "10");
        assert_eq!(newer(None, "x".into()), "x");
    }

    #[test]
    fn an_error_answer_becomes_an_error_event_with_its_status() {
        let gone = KubeResponse {
            status: 410,
            content_type: "application/json".into(),
            body: status_json(410, "Expired", "too old resource version: 1 (40)")
                .to_string()
                .into_bytes(),
        };
        let line = error_event(&gone);
        let event: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(event["type"], "ERROR");
        assert_eq!(event["object"]["code"], 410);
        assert_eq!(event["object"]["reason"], "Expired");
        assert!(line.ends_with(b"\n"));
    }
}
