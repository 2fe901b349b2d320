//! Keystone v3: version discovery, password authentication with a project scope, the
//! service catalog, and the token check every other service runs first (what
//! keystonemiddleware does in front of a real service).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use crate::wire::{self, TimeStyle, iso, stable_hex};
use crate::{App, errors};

/// How long a token lives (Keystone's default `[token] expiration`).
const TOKEN_LIFETIME_MS: u64 = 3_600_000;
/// The most tokens kept; beyond, expired ones go first, then the oldest.
const TOKENS_MAX: usize = 10_000;
const DOMAIN_ID: &str = "default";
const DOMAIN_NAME: &str = "Default";
/// The Keystone API version the version document announces (Zed's).
const API_VERSION: &str = "v3.14";

const UNAUTHORIZED: &str = "The request you have made requires authentication.";

/// One issued token.
#[derive(Clone, Debug)]
struct TokenRec {
    issued: Timestamp,
    expires: Timestamp,
    scoped: bool,
    audit_id: String,
}

/// The tokens Keystone issued, in memory.
#[derive(Default)]
pub(crate) struct Tokens {
    by_id: HashMap<String, TokenRec>,
}

impl Tokens {
    fn insert(&mut self, id: String, rec: TokenRec, now: Timestamp) {
        if self.by_id.len() >= TOKENS_MAX {
            self.by_id.retain(|_, t| t.expires > now);
        }
        if self.by_id.len() >= TOKENS_MAX {
            let oldest = self
                .by_id
                .iter()
                .min_by_key(|(_, t)| t.issued)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.by_id.remove(&k);
            }
        }
        self.by_id.insert(id, rec);
    }

    fn valid(&self, id: &str, now: Timestamp) -> Option<&TokenRec> {
        self.by_id.get(id).filter(|t| now < t.expires)
    }
}

impl crate::Inner {
    /// Whether `token` is one Keystone issued, not expired by the simulator's clock and
    /// not revoked since (`keystone.revokeTokens`).
    fn token_good(&self, token: &str) -> bool {
        if token.is_empty() {
            return false;
        }
        let issued = {
            let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            tokens.valid(token, self.now()).map(|t| t.issued)
        };
        issued.is_some_and(|at| !self.cloud.token_revoked(at))
    }
}

/// Fresh, unguessable token text (fernet tokens are opaque to clients too).
fn new_token_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let state = std::collections::hash_map::RandomState::new();
    let mut out = String::from("gAAAAA");
    for i in 0..4u64 {
        let mut h = state.build_hasher();
        h.write_u64(n);
        h.write_u64(i);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

pub(crate) fn routes(app: App) -> Router<App> {
    let protected = Router::new()
        .route(
            "/identity/v3/auth/tokens",
            get(validate_token).delete(revoke_token),
        )
        .route("/identity/v3/auth/catalog", get(auth_catalog))
        .route_layer(axum::middleware::from_fn_with_state(app, require_token));
    Router::new()
        .route("/identity", get(versions))
        .route("/identity/", get(versions))
        .route("/identity/v3", get(version))
        .route("/identity/v3/", get(version))
        .route("/identity/v3/auth/tokens", post(issue_token))
        .merge(protected)
}

/// The keystonemiddleware check in front of every service API: a token Keystone
/// issued that has not expired by the simulator's clock.
pub(crate) async fn require_token(State(app): State<App>, req: Request, next: Next) -> Response {
    let token = req
        .headers()
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    if !app.token_good(token) {
        // Refused before any service sees it, but made for its cluster all the same.
        app.cloud.note_call(false);
        return errors::unauthorized(&app.identity_url());
    }
    next.run(req).await
}

fn version_doc(app: &App) -> Value {
    json!({
        "id": API_VERSION,
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{}/v3/", app.identity_url())}],
        "media-types": [{
            "base": "application/json",
            "type": "application/vnd.openstack.identity-v3+json",
        }],
    })
}

async fn versions(State(app): State<App>) -> Response {
    wire::json(
        StatusCode::MULTIPLE_CHOICES,
        &json!({"versions": {"values": [version_doc(&app)]}}),
    )
}

async fn version(State(app): State<App>) -> Response {
    wire::json(StatusCode::OK, &json!({"version": version_doc(&app)}))
}

fn domain() -> Value {
    json!({"id": DOMAIN_ID, "name": DOMAIN_NAME})
}

/// Whether a `{"id"}` / `{"name"}` domain reference names `Default` (an absent one
/// is taken as `Default`).
fn is_default_domain(d: Option<&Value>) -> bool {
    match d {
        None => true,
        Some(d) => {
            d.get("id").and_then(Value::as_str) == Some(DOMAIN_ID)
                || d.get("name").and_then(Value::as_str) == Some(DOMAIN_NAME)
        }
    }
}

/// One catalog entry: the service's public, internal and admin endpoints.
fn service(app: &App, kind: &str, name: &str, path: &str) -> Value {
    let region = &app.options.region;
    let url = format!("{}{path}", app.base);
    let endpoints: Vec<Value> = ["public", "internal", "admin"]
        .iter()
        .map(|iface| {
            json!({
                "id": stable_hex(&format!("endpoint/{kind}/{iface}")),
                "interface": iface,
                "region": region,
                "region_id": region,
                "url": url,
            })
        })
        .collect();
    json!({
        "endpoints": endpoints,
        "id": stable_hex(&format!("service/{kind}")),
        "type": kind,
        "name": name,
    })
}

fn catalog(app: &App) -> Value {
    json!([
        service(app, "identity", "keystone", "/identity"),
        service(app, "compute", "nova", "/compute/v2.1"),
        service(app, "network", "neutron", "/network"),
        service(app, "load-balancer", "octavia", "/load-balancer"),
        service(app, "image", "glance", "/image"),
    ])
}

fn token_body(app: &App, rec: &TokenRec) -> Value {
    let o = &app.options;
    let mut token = json!({
        "methods": ["password"],
        "user": {
            "domain": domain(),
            "id": stable_hex(&format!("user/{}", o.user)),
            "name": o.user,
            "password_expires_at": null,
        },
        "audit_ids": [rec.audit_id],
        "expires_at": iso(rec.expires, TimeStyle::Micros),
        "issued_at": iso(rec.issued, TimeStyle::Micros),
    });
    if rec.scoped
        && let Some(t) = token.as_object_mut()
    {
        t.insert(
            "project".into(),
            json!({
                "domain": domain(),
                "id": app.project_id,
                "name": o.project,
            }),
        );
        t.insert("is_domain".into(), json!(false));
        t.insert(
            "roles".into(),
            json!([
                {"id": stable_hex("role/admin"), "name": "admin"},
                {"id": stable_hex("role/member"), "name": "member"},
                {"id": stable_hex("role/reader"), "name": "reader"},
            ]),
        );
        t.insert("catalog".into(), catalog(app));
    }
    json!({ "token": token })
}

fn bad_request(message: &str) -> Response {
    errors::keystone(
        StatusCode::BAD_REQUEST,
        &format!(
            "{message} The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error."
        ),
    )
}

/// What a password-auth request asks for: whether it scopes to the project, or why
/// it is refused (`Err((status, message))`).
fn check_auth(app: &App, body: &Value) -> Result<bool, Response> {
    let Some(auth) = body.get("auth") else {
        return Err(bad_request("Expecting to find auth in request body."));
    };
    let Some(identity) = auth.get("identity") else {
        return Err(bad_request("Expecting to find identity in auth."));
    };
    let methods = wire::strings(identity, "methods").map_err(|m| bad_request(&m))?;
    let unauthorized = || errors::keystone(StatusCode::UNAUTHORIZED, UNAUTHORIZED);
    if !methods.iter().any(|m| m == "password") {
        return Err(unauthorized());
    }
    let Some(user) = identity.get("password").and_then(|p| p.get("user")) else {
        return Err(bad_request("Expecting to find user in password."));
    };
    let o = &app.options;
    let by_id = user.get("id").and_then(Value::as_str)
        == Some(stable_hex(&format!("user/{}", o.user)).as_str());
    let by_name = user.get("name").and_then(Value::as_str) == Some(o.user.as_str())
        && is_default_domain(user.get("domain"));
    let password_ok = user.get("password").and_then(Value::as_str) == Some(o.password.as_str());
    if !(by_id || by_name) || !password_ok {
        tracing::info!("keystone: authentication refused (user or password wrong)");
        return Err(unauthorized());
    }
    match auth.get("scope") {
        None => Ok(false),
        Some(Value::String(s)) if s == "unscoped" => Ok(false),
        Some(scope) => {
            let Some(project) = scope.get("project") else {
                // Domain and system scopes: the user holds no role there.
                return Err(unauthorized());
            };
            let by_id = project.get("id").and_then(Value::as_str) == Some(app.project_id.as_str());
            let by_name = project.get("name").and_then(Value::as_str) == Some(o.project.as_str())
                && is_default_domain(project.get("domain"));
            if by_id || by_name {
                Ok(true)
            } else {
                Err(unauthorized())
            }
        }
    }
}

async fn issue_token(State(app): State<App>, body: Bytes) -> Response {
    let body = match wire::body_object(&body) {
        Ok(b) => b,
        Err(m) => return bad_request(&m),
    };
    let scoped = match check_auth(&app, &body) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    // Keystone itself may be down or limiting (the faults aimed at it).
    let issued = app.cloud.keystone_issue();
    app.cloud.note_call(issued.is_ok());
    if let Err(e) = issued {
        return errors::keystone_refused(&e);
    }
    let now = app.now();
    let id = new_token_id();
    let rec = TokenRec {
        issued: now,
        expires: now.plus_millis(TOKEN_LIFETIME_MS),
        scoped,
        audit_id: new_token_id().chars().skip(6).take(22).collect(),
    };
    let body = token_body(&app, &rec);
    app.tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.clone(), rec, now);
    let mut resp = wire::json(StatusCode::CREATED, &body);
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-subject-token", v);
    }
    resp
}

fn subject(headers: &HeaderMap) -> String {
    headers
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

async fn validate_token(State(app): State<App>, headers: HeaderMap) -> Response {
    let id = subject(&headers);
    let rec = app
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .valid(&id, app.now())
        .cloned()
        .filter(|r| !app.cloud.token_revoked(r.issued));
    let Some(rec) = rec else {
        return errors::keystone(
            StatusCode::NOT_FOUND,
            &format!("Could not find token: {id}."),
        );
    };
    let mut resp = wire::json(StatusCode::OK, &token_body(&app, &rec));
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-subject-token", v);
    }
    resp
}

async fn revoke_token(State(app): State<App>, headers: HeaderMap) -> Response {
    let id = subject(&headers);
    let removed = app
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .by_id
        .remove(&id);
    match removed {
        Some(_) => wire::empty(StatusCode::NO_CONTENT),
        None => errors::keystone(
            StatusCode::NOT_FOUND,
            &format!("Could not find token: {id}."),
        ),
    }
}

async fn auth_catalog(State(app): State<App>) -> Response {
    wire::json(
        StatusCode::OK,
        &json!({
            "catalog": catalog(&app),
            "links": {
                "self": format!("{}/v3/auth/catalog", app.identity_url()),
                "previous": null,
                "next": null,
            },
        }),
    )
}
