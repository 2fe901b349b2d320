//! A [`Session`]: authenticated, rate-limited, paginating requests to OpenStack
//! services, with every failure turned into a classified [`CloudError`].
//!
//! Guarantees:
//! - every request carries the current token (`X-Auth-Token`); a 401 from a service
//!   makes the session re-authenticate once and repeat the request once; a second 401
//!   is [`ErrorClass::Permanent`];
//! - before each request the endpoint's token bucket is waited on
//!   ([`crate::ratelimit`]);
//! - Nova requests carry microversion [`NOVA_MICROVERSION`];
//! - lists follow `<key>_links` `rel=next` until there is none, re-using only the
//!   link's query (marker, limit, filters) on the catalog's base URL, so a link that
//!   names an internal host still works; a link that does not move on is an error,
//!   not a loop;
//! - nothing is retried apart from the one 401 re-authentication: retrying is the
//!   engine's decision, by error class.

use std::sync::Arc;
use std::time::Duration;

use flightdeck_cloud::{CloudError, ErrorClass};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::{Authenticator, Token, endpoint_key};
use crate::clouds::CloudEntry;
use crate::errors::{self, Service};
use crate::keyed::parse_keyed;
use crate::ratelimit::{RateLimit, RateLimiter};

/// Nova microversion sent with every Nova request: 2.52 accepts `tags` on server
/// create; 2.47+ embeds the flavor's name in server bodies.
pub const NOVA_MICROVERSION: &str = "2.52";
/// The most pages one list follows before it gives up.
pub const PAGES_MAX: usize = 1_000;

/// How a [`Session`] behaves. `Default`: 20 requests/s per endpoint with a burst of 20,
/// 30 s per request, 10 s to connect, re-authenticate 60 s before expiry.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Client-side rate limit per endpoint; `None` sends without holding back.
    pub rate_limit: Option<RateLimit>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// A token with less than this left is replaced before use.
    pub token_refresh_margin: Duration,
    /// The longest one list may take, all its pages together: a cloud that serves
    /// pages slowly cannot hold a reconcile for hours (1,000 pages of 30 s each).
    pub list_deadline: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            rate_limit: Some(RateLimit::default()),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            token_refresh_margin: Duration::from_secs(60),
            list_deadline: Duration::from_secs(120),
        }
    }
}

/// One request: which service, the operation as errors name it (`"GET /servers/detail"`,
/// path templates as the simulator writes them), and the path below the service's
/// versioned base URL.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub service: Service,
    pub op: &'a str,
    pub method: Method,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<Value>,
}

impl<'a> Call<'a> {
    pub fn new(service: Service, op: &'a str, method: Method, path: impl Into<String>) -> Self {
        Call {
            service,
            op,
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
        }
    }
    pub fn get(service: Service, op: &'a str, path: impl Into<String>) -> Self {
        Call::new(service, op, Method::GET, path)
    }
    pub fn query(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.query.push((key, value.into()));
        self
    }
    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
}

/// A successful answer: its status and JSON body (`Null` when empty).
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

/// Percent-encodes one path segment (an id or a name).
pub fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `s` has the 8-4-4-4-12 hex form of OpenStack's ids (hyphens optional).
pub fn is_uuid(s: &str) -> bool {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    let grouped = s.len() == 36 && [8, 13, 18, 23].iter().all(|&i| s.as_bytes()[i] == b'-');
    hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()) && (grouped || s.len() == 32)
}

/// An authenticated connection to one cloud entry.
pub struct Session {
    http: reqwest::Client,
    auth: Authenticator,
    limiter: Arc<RateLimiter>,
    list_deadline: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("cloud", &self.auth.entry().name)
            .finish_non_exhaustive()
    }
}

fn build_http(entry: &CloudEntry, options: &SessionOptions) -> Result<reqwest::Client, CloudError> {
    flightdeck_http::ensure_crypto_provider();
    let fail = |why: String| {
        CloudError::new(
            ErrorClass::Permanent,
            Service::Keystone.name(),
            "connect",
            None,
            format!("cloud {:?}: {why}", entry.name),
        )
    };
    let mut b = reqwest::Client::builder()
        .redirect(flightdeck_http::no_redirects())
        .user_agent(concat!("flightdeck/", env!("CARGO_PKG_VERSION")))
        .timeout(options.request_timeout)
        .connect_timeout(options.connect_timeout);
    // A `cacert` is read even with `verify: false`, so that a wrong path is found now
    // rather than the day verification is turned back on.
    let cacert_tls = match &entry.cacert {
        Some(path) => Some(
            flightdeck_http::tls_trusting(path)
                .map_err(|e| fail(format!("cacert {} {e}", path.display())))?,
        ),
        None => None,
    };
    if entry.verify {
        let tls = match cacert_tls {
            Some(tls) => tls,
            None => flightdeck_http::platform_tls().map_err(fail)?,
        };
        b = b.use_preconfigured_tls(tls);
    } else {
        tracing::warn!(cloud = %entry.name, "TLS certificate verification is off (verify: false)");
        b = b.tls_danger_accept_invalid_certs(true);
    }
    b.build().map_err(|e| {
        fail(format!(
            "cannot build the HTTP client: {}",
            errors::error_chain(&e)
        ))
    })
}

impl Session {
    /// A session for `entry`. Authenticates at once, so wrong credentials or an
    /// unreachable Keystone are reported here rather than on the first call, and checks
    /// that the catalog has an endpoint for each of the `required` services (a
    /// Permanent error naming the entry and the missing service otherwise).
    pub async fn connect(
        entry: &CloudEntry,
        options: &SessionOptions,
        required: &[Service],
    ) -> Result<Self, CloudError> {
        let http = build_http(entry, options)?;
        let limiter = Arc::new(RateLimiter::new(options.rate_limit));
        let auth = Authenticator::new(
            http.clone(),
            Arc::new(entry.clone()),
            limiter.clone(),
            options.token_refresh_margin,
        );
        let token = auth.token().await?;
        for &service in required {
            token.endpoint(service).map_err(|e| {
                CloudError::new(
                    e.class,
                    e.service,
                    e.operation,
                    e.status,
                    format!("cloud {:?}: {}", entry.name, e.message),
                )
            })?;
        }
        Ok(Session {
            http,
            auth,
            limiter,
            list_deadline: options.list_deadline,
        })
    }

    /// The cloud entry this session authenticates as.
    pub fn entry(&self) -> &CloudEntry {
        self.auth.entry()
    }

    /// The current token (authenticating if it is due).
    pub async fn token(&self) -> Result<Arc<Token>, CloudError> {
        self.auth.token().await
    }

    /// Sends `call`; a 2xx answer is `Ok`, anything else a classified error.
    pub async fn send(&self, call: &Call<'_>) -> Result<Reply, CloudError> {
        self.send_page(call, None).await.map(|(reply, _)| reply)
    }

    /// Sends `call` with its query replaced by `page_query` when given (a next page):
    /// the answer read as JSON.
    async fn send_page(
        &self,
        call: &Call<'_>,
        page_query: Option<&str>,
    ) -> Result<(Reply, Url), CloudError> {
        let (status, text, url) = self.send_text(call, page_query).await?;
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| errors::decode_error(call.service, call.op, status, &e.to_string()))?
        };
        Ok((Reply { status, body }, url))
    }

    /// Sends `call` (see [`Client::send_page`]): a success's status, text and URL.
    async fn send_text(
        &self,
        call: &Call<'_>,
        page_query: Option<&str>,
    ) -> Result<(u16, String, Url), CloudError> {
        let mut reauthenticated = false;
        loop {
            let token = self.auth.token().await?;
            let url = self.url(&token, call, page_query)?;
            self.limiter.acquire(&endpoint_key(&url)).await;
            let mut rb = self
                .http
                .request(call.method.clone(), url.clone())
                .header("X-Auth-Token", token.value())
                .header(reqwest::header::ACCEPT, "application/json");
            if let Some(caller) = flightdeck_http::caller() {
                rb = rb.header(flightdeck_http::CALLER_HEADER, caller);
            }
            if call.service == Service::Nova {
                rb = rb
                    .header("X-OpenStack-Nova-API-Version", NOVA_MICROVERSION)
                    .header(
                        "OpenStack-API-Version",
                        format!("compute {NOVA_MICROVERSION}"),
                    );
            }
            if let Some(body) = &call.body {
                rb = rb.json(body);
            }
            tracing::debug!(service = call.service.name(), op = call.op, %url, "request");
            flightdeck_http::may_send()
                .map_err(|why| errors::not_sent(call.service, call.op, why))?;
            let resp = rb
                .send()
                .await
                .map_err(|e| errors::transport_error(call.service, call.op, &e))?;
            let status = resp.status().as_u16();
            if status == 401 && !reauthenticated {
                reauthenticated = true;
                self.auth.invalidate(&token).await;
                continue;
            }
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if let Some(why) = flightdeck_http::redirect_refused(&resp) {
                return Err(errors::redirect_error(call.service, call.op, why));
            }
            let text = flightdeck_http::read_text(resp, errors::RESPONSE_MAX_BYTES)
                .await
                .map_err(|e| errors::body_error(call.service, call.op, status, &e))?;
            if !(200..300).contains(&status) {
                let e = errors::http_error(
                    call.service,
                    call.op,
                    status,
                    retry_after.as_deref(),
                    &text,
                );
                tracing::debug!(error = %e, "request failed");
                return Err(e);
            }
            return Ok((status, text, url));
        }
    }

    fn url(
        &self,
        token: &Token,
        call: &Call<'_>,
        page_query: Option<&str>,
    ) -> Result<Url, CloudError> {
        let base = token.endpoint(call.service)?;
        let joined = format!("{}{}", base.as_str().trim_end_matches('/'), call.path);
        let mut url = Url::parse(&joined).map_err(|e| {
            CloudError::new(
                ErrorClass::Permanent,
                call.service.name(),
                call.op,
                None,
                format!("invalid URL {joined:?}: {e}"),
            )
        })?;
        match page_query {
            Some(q) => url.set_query(Some(q)),
            None if !call.query.is_empty() => {
                let mut pairs = url.query_pairs_mut();
                for (k, v) in &call.query {
                    pairs.append_pair(k, v);
                }
            }
            None => {}
        }
        Ok(url)
    }

    /// Sends `call` and reads `body[key]` as `T` (`{"server": {...}}` → the server).
    pub async fn object<T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
        key: &str,
    ) -> Result<T, CloudError> {
        let (status, text, _) = self.send_text(call, None).await?;
        let keyed = parse_keyed(&text, key)
            .map_err(|e| errors::decode_error(call.service, call.op, status, &e))?;
        keyed.value.ok_or_else(|| missing(call, status, key))
    }

    /// Every item of a collection `key` (`"servers"`), following `<key>_links` pages.
    pub async fn list<T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
        key: &str,
    ) -> Result<Vec<T>, CloudError> {
        let mut items = Vec::new();
        let mut page_query: Option<String> = None;
        // Wall time on purpose: this bounds how long the real cloud keeps us waiting.
        let started = std::time::Instant::now();
        for page in 0..PAGES_MAX {
            if page > 0 && started.elapsed() > self.list_deadline {
                return Err(CloudError::new(
                    ErrorClass::Transient,
                    call.service.name(),
                    call.op,
                    None,
                    format!(
                        "listing {key} took longer than {}s ({page} pages); giving up on this pass",
                        self.list_deadline.as_secs()
                    ),
                ));
            }
            let (status, text, url) = self.send_text(call, page_query.as_deref()).await?;
            let keyed = parse_keyed::<Vec<T>>(&text, key)
                .map_err(|e| errors::decode_error(call.service, call.op, status, &e))?;
            let next = next_query(keyed.links.as_ref(), keyed.next.as_ref(), &url);
            let page = keyed.value.ok_or_else(|| missing(call, status, key))?;
            let empty = page.is_empty();
            items.extend(page);
            match next {
                Some(q) if !empty && Some(&q) != page_query.as_ref() => page_query = Some(q),
                _ => return Ok(items),
            }
        }
        Err(CloudError::new(
            ErrorClass::Permanent,
            call.service.name(),
            call.op,
            None,
            format!("more than {PAGES_MAX} pages of {key}; giving up"),
        ))
    }
}

/// The query of the `rel=next` link among `links` (`<key>_links`), or of Glance's
/// `next`.
fn next_query(links: Option<&Value>, next: Option<&Value>, current: &Url) -> Option<String> {
    let href = links
        .and_then(Value::as_array)
        .and_then(|links| {
            links
                .iter()
                .find(|l| l.get("rel").and_then(Value::as_str) == Some("next"))
        })
        .and_then(|l| l.get("href"))
        .or(next)
        .and_then(Value::as_str)?;
    let next = current.join(href).ok()?;
    next.query().filter(|q| !q.is_empty()).map(str::to_string)
}

/// The answer had no member `key`.
fn missing(call: &Call<'_>, status: u16, key: &str) -> CloudError {
    errors::decode_error(
        call.service,
        call.op,
        status,
        &format!("no {key:?} in the answer"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_query_reads_links_and_glance_next() {
        let cur = Url::parse("http://nova:8774/v2.1/servers/detail?tags=a").expect("url");
        let page = |text: &str, key: &str| -> Option<String> {
            let keyed = parse_keyed::<Vec<Value>>(text, key).expect("parses");
            next_query(keyed.links.as_ref(), keyed.next.as_ref(), &cur)
        };
        assert_eq!(
            page(
                r#"{"servers": [], "servers_links": [{"rel": "next",
                    "href": "http://internal-nova/v2.1/servers/detail?limit=2&marker=xyz&tags=a"}]}"#,
                "servers"
            )
            .as_deref(),
            Some("limit=2&marker=xyz&tags=a")
        );
        assert_eq!(
            page(
                r#"{"images": [], "next": "/v2/images?marker=m1"}"#,
                "images"
            )
            .as_deref(),
            Some("marker=m1")
        );
        assert_eq!(
            page(
                r#"{"servers": [], "servers_links": [{"rel": "previous", "href": "x?y"}]}"#,
                "servers"
            ),
            None
        );
    }

    #[test]
    fn uuids_are_told_from_names() {
        assert!(is_uuid("4f8a1c2e-0b3d-4e5f-8a9b-0c1d2e3f4a5b"));
        assert!(is_uuid("4f8a1c2e0b3d4e5f8a9b0c1d2e3f4a5b"));
        assert!(!is_uuid("edge-router"));
        assert!(!is_uuid("4f8a1c2e-0b3d-4e5f-8a9b-0c1d2e3f4a5"));
        assert!(!is_uuid("4f8a1c2e0-b3d-4e5f-8a9b-0c1d2e3f4a5b"));
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(seg("4f8a-b_c.d~e"), "4f8a-b_c.d~e");
        assert_eq!(seg("a/b c?"), "a%2Fb%20c%3F");
    }
}
