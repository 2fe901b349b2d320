//! Keystone v3: password authentication scoped to a project, and the service catalog
//! that says where Nova, Neutron, Octavia and Glance listen.
//!
//! Guarantees:
//! - one token is shared by all requests; it is replaced when it is within the refresh
//!   margin (60 s by default) of its own `expires_at`, or when a service answers 401
//!   with it ([`Authenticator::invalidate`]); concurrent callers wait for one
//!   authentication instead of each starting their own;
//! - a refused authentication is [`ErrorClass::Permanent`], and its message names the
//!   cloud entry, the user and Keystone's own words; the password is never part of
//!   any message, log line or `Debug` output.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flightdeck_cloud::{CloudError, ErrorClass};
use reqwest::Url;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::clouds::{CloudEntry, Domain, Interface, Scope};
use crate::errors::{self, Service};
use crate::ratelimit::RateLimiter;
use crate::timefmt::parse_timestamp;

/// The operation string of a token request.
pub const OP_TOKENS: &str = "POST /v3/auth/tokens";

/// The services flightdeck talks to besides Keystone.
pub const SERVICES: [Service; 4] = [
    Service::Nova,
    Service::Neutron,
    Service::Octavia,
    Service::Glance,
];

/// A project-scoped token with the endpoints its catalog gives for the entry's
/// interface and region.
pub struct Token {
    value: String,
    /// When Keystone says the token stops working.
    pub expires_at: SystemTime,
    /// How long it works in all, from when it was issued.
    pub lifetime: Duration,
    /// The project the token is scoped to, when Keystone says.
    pub project_id: Option<String>,
    /// Base URL of each service, versioned (`…/v2.1`, `…/v2.0`, `…/v2`), or why there
    /// is none.
    endpoints: BTreeMap<Service, Result<Url, String>>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .field("project_id", &self.project_id)
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

impl Token {
    /// The token itself, for the `X-Auth-Token` header.
    pub(crate) fn value(&self) -> &str {
        &self.value
    }

    /// The versioned base URL of `service`, or a Permanent error saying which catalog
    /// entry is missing.
    pub fn endpoint(&self, service: Service) -> Result<&Url, CloudError> {
        match self.endpoints.get(&service) {
            Some(Ok(url)) => Ok(url),
            Some(Err(why)) => Err(CloudError::new(
                ErrorClass::Permanent,
                service.name(),
                "catalog",
                None,
                why.clone(),
            )),
            None => Err(CloudError::new(
                ErrorClass::Permanent,
                service.name(),
                "catalog",
                None,
                format!("no {} endpoint was looked up", service.catalog_type()),
            )),
        }
    }

    /// Whether the token has less than `margin` left at `now`. The margin is at most a
    /// quarter of the token's lifetime: a token that lives under a minute would
    /// otherwise be renewed before every other call.
    pub fn expires_within(&self, margin: Duration, now: SystemTime) -> bool {
        let margin = margin.min(self.lifetime / 4);
        match self.expires_at.duration_since(now) {
            Ok(left) => left < margin,
            Err(_) => true,
        }
    }
}

#[derive(Debug, Deserialize)]
struct TokenBody {
    token: TokenInner,
}

#[derive(Debug, Deserialize)]
struct TokenInner {
    expires_at: Option<String>,
    #[serde(default)]
    issued_at: Option<String>,
    #[serde(default)]
    project: Option<IdOnly>,
    #[serde(default)]
    catalog: Vec<CatalogService>,
}

#[derive(Debug, Deserialize)]
struct IdOnly {
    id: String,
}

/// One service of Keystone's catalog.
#[derive(Clone, Debug, Deserialize)]
pub struct CatalogService {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub endpoints: Vec<CatalogEndpoint>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct CatalogEndpoint {
    pub interface: String,
    #[serde(default)]
    pub region_id: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    pub url: String,
}

/// The URL of the endpoint of type `kind` with `interface` in `region` (any region
/// when `None`; the first listed wins).
pub fn select_endpoint<'c>(
    catalog: &'c [CatalogService],
    kind: &str,
    interface: Interface,
    region: Option<&str>,
) -> Result<&'c str, String> {
    let Some(service) = catalog.iter().find(|s| s.kind == kind) else {
        return Err(format!("the service catalog has no {kind:?} service"));
    };
    let in_region = |e: &&CatalogEndpoint| match region {
        None => true,
        Some(r) => e.region_id.as_deref() == Some(r) || e.region.as_deref() == Some(r),
    };
    service
        .endpoints
        .iter()
        .filter(|e| Interface::parse(&e.interface) == Some(interface))
        .find(in_region)
        .map(|e| e.url.as_str())
        .ok_or_else(|| match region {
            Some(r) => format!(
                "the service catalog has no {} {kind:?} endpoint in region {r:?}",
                interface.as_str()
            ),
            None => format!(
                "the service catalog has no {} {kind:?} endpoint",
                interface.as_str()
            ),
        })
}

/// The catalog URL of `service` with the API version flightdeck speaks appended
/// unless the URL already carries one: Nova `v2.1`, Neutron `v2.0`, Octavia and
/// Glance `v2`.
pub fn versioned_base(service: Service, catalog_url: &str) -> Result<Url, String> {
    let trimmed = catalog_url.trim_end_matches('/');
    let mut url =
        Url::parse(trimmed).map_err(|e| format!("catalog URL {catalog_url:?} is invalid: {e}"))?;
    let path = url.path().trim_end_matches('/').to_string();
    let has = |v: &str| path.ends_with(v);
    let append = match service {
        // Nova's URL carries its version, often followed by the project id.
        Service::Nova if path.split('/').any(|s| s.starts_with("v2")) => None,
        Service::Nova => Some("v2.1"),
        Service::Neutron if has("/v2.0") => None,
        Service::Neutron => Some("v2.0"),
        Service::Octavia | Service::Glance if has("/v2") || has("/v2.0") => None,
        Service::Octavia | Service::Glance => Some("v2"),
        Service::Keystone if has("/v3") => None,
        Service::Keystone => Some("v3"),
    };
    if let Some(v) = append {
        url.set_path(&format!("{path}/{v}"));
    } else {
        url.set_path(&path);
    }
    Ok(url)
}

/// Keystone's token URL for an `auth_url` with or without `/v3`.
pub fn tokens_url(auth_url: &str) -> Result<Url, String> {
    let base = versioned_base(Service::Keystone, auth_url)?;
    Url::parse(&format!(
        "{}/auth/tokens",
        base.as_str().trim_end_matches('/')
    ))
    .map_err(|e| format!("auth_url {auth_url:?} is invalid: {e}"))
}

fn domain_json(d: &Domain) -> Value {
    match d {
        Domain::Name(n) => json!({ "name": n }),
        Domain::Id(i) => json!({ "id": i }),
    }
}

/// The body of a password token request scoped to the entry's project. Holds the
/// password: it is built, sent and dropped, and never logged.
fn request_body(entry: &CloudEntry) -> Value {
    let a = &entry.auth;
    let project = match &a.project {
        Scope::Id(id) => json!({ "id": id }),
        Scope::Name { name, domain } => json!({ "name": name, "domain": domain_json(domain) }),
    };
    json!({
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": a.username,
                        "domain": domain_json(&a.user_domain),
                        "password": a.password.expose(),
                    }
                }
            },
            "scope": { "project": project }
        }
    })
}

/// Holds the current token and gets a new one when needed.
pub struct Authenticator {
    http: reqwest::Client,
    entry: Arc<CloudEntry>,
    limiter: Arc<RateLimiter>,
    refresh_margin: Duration,
    current: tokio::sync::Mutex<Option<Arc<Token>>>,
}

impl Authenticator {
    pub fn new(
        http: reqwest::Client,
        entry: Arc<CloudEntry>,
        limiter: Arc<RateLimiter>,
        refresh_margin: Duration,
    ) -> Self {
        Authenticator {
            http,
            entry,
            limiter,
            refresh_margin,
            current: tokio::sync::Mutex::new(None),
        }
    }

    pub fn entry(&self) -> &CloudEntry {
        &self.entry
    }

    /// A token with more than the refresh margin left, authenticating if needed.
    pub async fn token(&self) -> Result<Arc<Token>, CloudError> {
        let mut current = self.current.lock().await;
        if let Some(t) = current.as_ref()
            && !t.expires_within(self.refresh_margin, SystemTime::now())
        {
            return Ok(t.clone());
        }
        let fresh = Arc::new(self.authenticate().await?);
        *current = Some(fresh.clone());
        Ok(fresh)
    }

    /// Forgets `stale` (a service answered 401 to it), unless another caller has
    /// already replaced it.
    pub async fn invalidate(&self, stale: &Token) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|t| t.value == stale.value) {
            tracing::info!(cloud = %self.entry.name, "token refused by a service; re-authenticating");
            *current = None;
        }
    }

    fn fail(&self, class: ErrorClass, status: Option<u16>, message: String) -> CloudError {
        CloudError::new(
            class,
            Service::Keystone.name(),
            OP_TOKENS,
            status,
            format!("cloud {:?}: {message}", self.entry.name),
        )
    }

    /// Asks Keystone for a new project-scoped token.
    pub async fn authenticate(&self) -> Result<Token, CloudError> {
        let entry = &*self.entry;
        let url = tokens_url(&entry.auth.auth_url)
            .map_err(|why| self.fail(ErrorClass::Permanent, None, why))?;
        self.limiter.acquire(&endpoint_key(&url)).await;
        tracing::debug!(cloud = %entry.name, user = %entry.auth.username, %url, "authenticating with Keystone");
        let resp = self
            .http
            .post(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .json(&request_body(entry))
            .send()
            .await
            .map_err(|e| {
                self.fail(
                    ErrorClass::Transient,
                    None,
                    format!(
                        "cannot reach Keystone at {url}: {}",
                        errors::error_chain(&e)
                    ),
                )
            })?;
        let status = resp.status().as_u16();
        let subject = resp
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(why) = flightdeck_http::redirect_refused(&resp) {
            return Err(self.fail(ErrorClass::Permanent, Some(status), why));
        }
        let text = flightdeck_http::read_text(resp, errors::RESPONSE_MAX_BYTES)
            .await
            .map_err(|e| {
                let e = errors::body_error(Service::Keystone, OP_TOKENS, status, &e);
                self.fail(
                    e.class,
                    Some(status),
                    format!("reading Keystone's answer: {}", e.message),
                )
            })?;
        if !(200..300).contains(&status) {
            let e = errors::http_error(
                Service::Keystone,
                OP_TOKENS,
                status,
                retry_after.as_deref(),
                &text,
            );
            let message = if status == 401 {
                format!(
                    "Keystone refused the credentials of user {:?}: {}",
                    entry.auth.username, e.message
                )
            } else {
                format!("authentication failed: {}", e.message)
            };
            return Err(self.fail(e.class, Some(status), message));
        }
        let Some(value) = subject.filter(|s| !s.is_empty()) else {
            return Err(self.fail(
                ErrorClass::Permanent,
                Some(status),
                "Keystone answered without an X-Subject-Token header".into(),
            ));
        };
        let body: TokenBody = serde_json::from_str(&text).map_err(|e| {
            self.fail(
                ErrorClass::Permanent,
                Some(status),
                format!("Keystone's token body is not what the API documents: {e}"),
            )
        })?;
        // The token's lifetime is Keystone's `expires_at - issued_at`, counted on our own
        // clock from now: a skewed (or simulated) Keystone clock then cannot make every
        // token look expired, or never expire.
        let parse = |s: &Option<String>| s.as_deref().and_then(parse_timestamp);
        let lifetime = match (parse(&body.token.issued_at), parse(&body.token.expires_at)) {
            (Some(issued), Some(expires)) => Some(expires.since(issued).to_std()),
            (None, Some(expires)) => Some(
                (UNIX_EPOCH + Duration::from_millis(expires.millis()))
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO),
            ),
            _ => None,
        };
        let lifetime = lifetime.unwrap_or_else(|| {
            tracing::warn!(cloud = %entry.name, "token without a readable expires_at; assuming one hour");
            Duration::from_secs(3600)
        });
        let expires_at = SystemTime::now() + lifetime;
        let region = entry.region_name.as_deref();
        let endpoints = SERVICES
            .iter()
            .map(|&s| {
                let url = select_endpoint(
                    &body.token.catalog,
                    s.catalog_type(),
                    entry.interface,
                    region,
                )
                .and_then(|u| versioned_base(s, u));
                (s, url)
            })
            .collect();
        Ok(Token {
            value,
            expires_at,
            lifetime,
            project_id: body.token.project.map(|p| p.id),
            endpoints,
        })
    }
}

/// The key a URL's rate-limit bucket is kept under: scheme, host and port.
pub fn endpoint_key(url: &Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Vec<CatalogService> {
        serde_json::from_value(json!([
            {"type": "compute", "endpoints": [
                {"interface": "internal", "region_id": "RegionOne", "url": "http://nova-int:8774/v2.1"},
                {"interface": "public", "region_id": "RegionOne", "url": "http://nova-one:8774/v2.1/"},
                {"interface": "public", "region_id": "RegionTwo", "url": "http://nova-two:8774/v2.1/proj"}
            ]},
            {"type": "network", "endpoints": [
                {"interface": "public", "region": "RegionTwo", "url": "http://neutron:9696"}
            ]}
        ]))
        .expect("catalog")
    }

    #[test]
    fn catalog_selection_follows_interface_and_region() {
        let c = catalog();
        let pick = |kind, i, r| select_endpoint(&c, kind, i, r);
        assert_eq!(
            pick("compute", Interface::Public, None),
            Ok("http://nova-one:8774/v2.1/")
        );
        assert_eq!(
            pick("compute", Interface::Public, Some("RegionTwo")),
            Ok("http://nova-two:8774/v2.1/proj")
        );
        assert_eq!(
            pick("compute", Interface::Internal, Some("RegionOne")),
            Ok("http://nova-int:8774/v2.1")
        );
        assert_eq!(
            pick("network", Interface::Public, Some("RegionTwo")),
            Ok("http://neutron:9696")
        );
        let err = pick("network", Interface::Public, Some("RegionOne")).expect_err("none");
        assert!(
            err.contains("RegionOne") && err.contains("network"),
            "{err}"
        );
        let err = pick("load-balancer", Interface::Public, None).expect_err("none");
        assert!(err.contains("load-balancer"), "{err}");
    }

    #[test]
    fn bases_get_the_version_flightdeck_speaks() {
        let b = |s, u| versioned_base(s, u).expect("url").to_string();
        assert_eq!(
            b(Service::Nova, "http://n:8774/v2.1/"),
            "http://n:8774/v2.1"
        );
        assert_eq!(
            b(Service::Nova, "http://n:8774/v2.1/abc"),
            "http://n:8774/v2.1/abc"
        );
        assert_eq!(b(Service::Nova, "http://n:8774"), "http://n:8774/v2.1");
        assert_eq!(b(Service::Neutron, "http://q:9696/"), "http://q:9696/v2.0");
        assert_eq!(
            b(Service::Neutron, "http://q/network/v2.0"),
            "http://q/network/v2.0"
        );
        assert_eq!(b(Service::Octavia, "http://o:9876"), "http://o:9876/v2");
        assert_eq!(b(Service::Glance, "http://g:9292/v2"), "http://g:9292/v2");
        assert_eq!(
            tokens_url("http://k:5000").expect("url").as_str(),
            "http://k:5000/v3/auth/tokens"
        );
        assert_eq!(
            tokens_url("http://k/identity/v3/").expect("url").as_str(),
            "http://k/identity/v3/auth/tokens"
        );
    }

    #[test]
    fn expiry_margin_is_measured_against_expires_at() {
        let now = SystemTime::now();
        let t = Token {
            value: "t".into(),
            expires_at: now + Duration::from_secs(90),
            lifetime: Duration::from_secs(3600),
            project_id: None,
            endpoints: BTreeMap::new(),
        };
        assert!(!t.expires_within(Duration::from_secs(60), now));
        assert!(t.expires_within(Duration::from_secs(60), now + Duration::from_secs(31)));
        assert!(t.expires_within(Duration::from_secs(60), now + Duration::from_secs(100)));
        assert!(!format!("{t:?}").contains("value: \"t\""));
    }

    #[test]
    fn a_token_that_lives_under_a_minute_is_used_for_three_quarters_of_its_life() {
        let now = SystemTime::now();
        let t = Token {
            value: "t".into(),
            expires_at: now + Duration::from_secs(40),
            lifetime: Duration::from_secs(40),
            project_id: None,
            endpoints: BTreeMap::new(),
        };
        let margin = Duration::from_secs(60);
        assert!(!t.expires_within(margin, now), "fresh: used, not renewed");
        assert!(!t.expires_within(margin, now + Duration::from_secs(29)));
        assert!(t.expires_within(margin, now + Duration::from_secs(31)));
    }
}
