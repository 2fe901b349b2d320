//! Calls to the daemon: the bearer token on every request, no redirects, a timeout for
//! everything but follow streams, and errors that say what the daemon answered (or, for
//! a refused certificate, what to do: see `trust.rs`).

use std::fmt;
use std::time::Duration;

use anyhow::{Context, anyhow};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use serde::de::DeserializeOwned;

use super::connect::{ConnectArgs, Connection, resolve};
use super::trust;
use super::types::ApiError;

/// How long a normal call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A non-2xx answer: the daemon's message and, for a spec, each problem.
#[derive(Debug)]
pub struct ApiFailure {
    pub status: StatusCode,
    pub body: ApiError,
    /// What to try next, when the status suggests something (401, 403).
    pub hint: Option<String>,
}

impl ApiFailure {
    pub fn is_not_found(e: &anyhow::Error) -> bool {
        e.downcast_ref::<ApiFailure>()
            .is_some_and(|f| f.status == StatusCode::NOT_FOUND)
    }
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.body.error)?;
        // A daemon whose message already holds a problem (as `flightdeck serve` once
        // put its first one) must not have it shown twice.
        let said = |p: &super::types::Problem| self.body.error.lines().any(|l| tells(l, p));
        for p in self.body.problems.iter().filter(|p| !said(p)) {
            write!(f, "\n{}", problem_line(p))?;
        }
        if let Some(h) = &self.hint {
            write!(f, "\n{h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiFailure {}

/// Whether `line` of a message tells problem `p`: it names its source and ends with its
/// path and message, as a spec error reads (`SOURCE:LINE:COL: document N: PATH: MESSAGE`).
fn tells(line: &str, p: &super::types::Problem) -> bool {
    let tail = if p.path.is_empty() {
        format!(": {}", p.message)
    } else {
        format!(": {}: {}", p.path, p.message)
    };
    line.starts_with(&p.source) && line.ends_with(&tail)
}

/// `SOURCE:LINE: PATH: MESSAGE`, leaving out what the problem does not have.
pub fn problem_line(p: &super::types::Problem) -> String {
    let mut s = p.source.clone();
    if let Some(line) = p.line {
        s.push_str(&format!(":{line}"));
    }
    if !p.path.is_empty() {
        s.push_str(&format!(": {}", p.path));
    }
    s.push_str(&format!(": {}", p.message));
    s
}

/// The daemon's HTTP API.
pub struct Api {
    conn: Connection,
    base: Url,
    http: reqwest::Client,
    stream: reqwest::Client,
}

impl Api {
    pub fn new(conn: Connection) -> anyhow::Result<Self> {
        flightdeck_http::ensure_crypto_provider();
        let base = Url::parse(&conn.url)
            .with_context(|| format!("the server URL {:?} is not a URL", conn.url))?;
        let tls = trust::client_tls(&conn)?;
        let builder = || {
            reqwest::Client::builder()
                .use_preconfigured_tls(tls.clone())
                .user_agent(concat!("flightdeck/", env!("CARGO_PKG_VERSION")))
                .redirect(flightdeck_http::no_redirects())
                .connect_timeout(CONNECT_TIMEOUT)
        };
        let http = builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .context("cannot set up the HTTP client")?;
        let stream = builder().build().context("cannot set up the HTTP client")?;
        Ok(Api {
            conn,
            base,
            http,
            stream,
        })
    }

    pub fn url_text(&self) -> &str {
        &self.conn.url
    }

    /// `BASE/api/v1/SEGMENTS...`, each segment escaped.
    pub fn endpoint(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        url
    }

    pub fn request(&self, method: Method, url: Url) -> RequestBuilder {
        self.authorize(self.http.request(method, url))
    }

    /// A request without a timeout, for follow streams.
    pub fn stream_request(&self, url: Url) -> RequestBuilder {
        self.authorize(self.stream.get(url))
    }

    fn authorize(&self, rb: RequestBuilder) -> RequestBuilder {
        match &self.conn.token {
            Some(t) => rb.bearer_auth(t.secret()),
            None => rb,
        }
    }

    /// Sends a request and returns the response if it is 2xx, else an [`ApiFailure`].
    pub async fn send(&self, rb: RequestBuilder) -> anyhow::Result<Response> {
        let response = rb.send().await.map_err(|e| self.transport_error(&e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.failure(response).await)
    }

    /// Sends a request and reads its answer as JSON.
    pub async fn send_json(&self, rb: RequestBuilder) -> anyhow::Result<serde_json::Value> {
        let response = self.send(rb).await?;
        let text = response
            .text()
            .await
            .map_err(|e| self.transport_error(&e))?;
        serde_json::from_str(&text).map_err(|e| {
            anyhow!(
                "the daemon at {} answered with something that is not JSON ({e}): {}",
                self.conn.url,
                excerpt(&text)
            )
        })
    }

    pub async fn get_json(&self, segments: &[&str]) -> anyhow::Result<serde_json::Value> {
        self.send_json(self.request(Method::GET, self.endpoint(segments)))
            .await
    }

    /// Reads a typed document out of a raw answer.
    pub fn typed<T: DeserializeOwned>(
        &self,
        v: serde_json::Value,
        what: &str,
    ) -> anyhow::Result<T> {
        serde_json::from_value(v).map_err(|e| {
            anyhow!(
                "the daemon at {} answered with a {what} document this client does not understand: {e}",
                self.conn.url
            )
        })
    }

    pub fn transport_error(&self, e: &reqwest::Error) -> anyhow::Error {
        let url = &self.conn.url;
        let from = &self.conn.url_from;
        if e.is_timeout() {
            return anyhow!("the flightdeck daemon at {url} did not answer in time");
        }
        if let Some(problem) = trust::certificate_error(e) {
            let host = self.base.host_str().unwrap_or_default();
            let advice = trust::advice(problem, host, self.conn.ca_file.as_ref());
            return anyhow!("cannot trust the flightdeck daemon at {url} (from {from}): {advice}");
        }
        if e.is_connect() {
            let why = root_cause(e);
            if trust::is_refused(e) {
                return anyhow!(
                    "cannot reach the flightdeck daemon at {url} (from {from}): {why}; is `flightdeck serve` running?"
                );
            }
            return anyhow!("cannot reach the flightdeck daemon at {url} (from {from}): {why}");
        }
        anyhow!(
            "the call to the flightdeck daemon at {url} failed: {}",
            root_cause(e)
        )
    }

    async fn failure(&self, response: Response) -> anyhow::Error {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let body = match serde_json::from_str::<ApiError>(&text) {
            Ok(b) if !b.error.is_empty() => b,
            _ if status.is_redirection() => ApiError {
                error: format!(
                    "the daemon at {} answered {status} (a redirect; the client follows none: check --server)",
                    self.conn.url
                ),
                problems: Vec::new(),
            },
            _ => ApiError {
                error: format!(
                    "the daemon at {} answered {status}: {}",
                    self.conn.url,
                    excerpt(&text)
                ),
                problems: Vec::new(),
            },
        };
        let hint = self.hint(status);
        anyhow::Error::new(ApiFailure { status, body, hint })
    }

    fn hint(&self, status: StatusCode) -> Option<String> {
        match (status, &self.conn.token_from) {
            (StatusCode::UNAUTHORIZED, None) => Some(
                "no token was sent: pass --token-file, set FLIGHTDECK_TOKEN, or set tokenFile: in the config file".into(),
            ),
            (StatusCode::UNAUTHORIZED, Some(from)) => {
                Some(format!("the daemon refused the token from {from}"))
            }
            (StatusCode::FORBIDDEN, Some(from)) => Some(format!(
                "the token from {from} may not do this; the daemon's admin token is in its state directory's admin.token"
            )),
            _ => None,
        }
    }
}

fn root_cause(e: &reqwest::Error) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// The start of a body, on one line, for an error message.
fn excerpt(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return "(no body)".into();
    }
    match one_line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &one_line[..i]),
        None => one_line,
    }
}

/// The daemon's API, reached as the flags, environment or config file say.
pub fn connect(args: &ConnectArgs) -> anyhow::Result<Api> {
    Api::new(resolve(args)?)
}
